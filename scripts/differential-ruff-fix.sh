#!/usr/bin/env bash
# Differential check of review-fix's builtin agent against `ruff check --fix`.
#
# For each package of scripts/differential/ruff-packages.txt (real sdists
# from PyPI, pinned), two copies are made. On one, `ruff check --fix` runs;
# on the other, `orchestrator review-fix --agent builtin --relint` with the
# same rules, reading ruff's JSON output (whose fixes carry their
# applicability: like `ruff check --fix`, only safe ones are applied) and
# verifying the fixes with the package's own tests (pytest, in the venv).
# The final Python files must be byte-identical; any difference is printed
# and makes the script fail.
#
# Needs what scripts/install-test-deps.sh installs under target/fixers:
# ruff and pytest (venv/) and the sdists (sdists/).
#
# Usage: scripts/differential-ruff-fix.sh [ORCHESTRATOR_BINARY]
# Prints one table row per package: findings, fixed by us, fixed by
# `ruff check --fix`, identical files / total, wall time of both.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/differential/common.sh
bin=${1:-$root/target/debug/orchestrator}
[ -x "$bin" ] || { echo "no orchestrator binary at $bin (cargo build -p orchestrator-tool)" >&2; exit 2; }
fixers=$root/target/fixers
export PY=$fixers/venv/bin/python
ruff=$fixers/venv/bin/ruff
[ -x "$ruff" ] || { echo "no ruff at $ruff: run bash scripts/install-test-deps.sh" >&2; exit 2; }
rules=E,W,F401,I,UP,C4,SIM,RET,PIE,RUF

work=$(mktemp -d "${TMPDIR:-/tmp}/orch-differential-ruff.XXXXXX")
export PYTHONDONTWRITEBYTECODE=1

# Distinct diagnostics of a ruff JSON output, keyed by rule, file (relative
# to the linted root) and message: lines move, the rest does not.
keys_py='
import collections, json, os, sys
def keys(path, root):
    return collections.Counter(
        (d["code"], os.path.relpath(d["filename"], root), d["message"]) for d in json.load(open(path)))
'
count() { python3 -c "$keys_py
print(sum(keys(sys.argv[1], sys.argv[2]).values()))" "$1" "$2"; }
fixed() { python3 -c "$keys_py
before, after = keys(sys.argv[1], sys.argv[2]), keys(sys.argv[3], sys.argv[4])
print(sum(max(0, n - after[k]) for k, n in before.items()))" "$1" "$2" "$3" "$4"; }

status=0
printf '| package | findings | fixed by us | fixed by ruff check --fix | identical files | time ours | time ruff --fix |\n'
printf '|---|---|---|---|---|---|---|\n'
while read_row name version target tests; do
  norm=$(tr - _ <<<"$name")
  sdist=$(ls "$fixers"/sdists/{"$name","$norm"}-"$version".tar.gz 2>/dev/null | head -1 || true)
  [ -n "$sdist" ] || { echo "no sdist of $name $version in $fixers/sdists: run bash scripts/install-test-deps.sh" >&2; exit 2; }
  mkdir -p "$work/src"
  tar -xzf "$sdist" -C "$work/src"
  dir=$work/$name
  make_pair "$work/src/$(basename "$sdist" .tar.gz)" "$dir" __pycache__/ .pytest_cache/ '*.pyc'
  # Run from the package root: ruff's first-party detection (I001) depends
  # on it. No cache: the re-lint must not write into the tree.
  lint="$ruff check --isolated --no-cache --exit-zero --select $rules --target-version $target"
  (cd "$dir/ours" && $lint --output-format json . > "$dir/findings.json")
  findings=$(count "$dir/findings.json" "$dir/ours")
  t0=$(now)
  (cd "$dir/ref" && $lint --fix --quiet . > "$dir/ref.log" 2>&1) || {
    echo "ruff check --fix failed on $name:" >&2; tail -20 "$dir/ref.log" >&2; status=1; continue; }
  t1=$(now)
  set +e
  "$bin" review-fix --repo "$dir/ours" --fix "$dir/findings.json" --agent builtin \
    --relint "$lint --output-format json ." --relint-passes 10 --batch-size 50 \
    --test-cmd "${tests//\$PY/$PY}" -y > "$dir/ours.log" 2>&1
  rc=$?
  set -e
  t2=$(now)
  # Exit 1 is "some findings were not fixed": those without a safe fix.
  if [ "$rc" -gt 1 ]; then
    echo "review-fix failed on $name (exit $rc):" >&2; tail -30 "$dir/ours.log" >&2; status=1; continue
  fi
  for side in ref ours; do
    (cd "$dir/$side" && $lint --output-format json . > "$dir/after-$side.json")
  done
  fixed_ref=$(fixed "$dir/findings.json" "$dir/ours" "$dir/after-ref.json" "$dir/ref")
  fixed_ours=$(fixed "$dir/findings.json" "$dir/ours" "$dir/after-ours.json" "$dir/ours")
  compare "$dir" '*.py' || status=1
  printf '| %s %s | %s | %s | %s | %s/%s | %s s | %s s |\n' "$name" "$version" "$findings" \
    "$fixed_ours" "$fixed_ref" "$same" "$total" "$(seconds "$t1" "$t2")" "$(seconds "$t0" "$t1")"
  grep -E '^review-fix: [0-9]+ pass' "$dir/ours.log" | tail -1 | sed 's/^/  /' || true
done < scripts/differential/ruff-packages.txt
echo "work folder: $work"
exit $status
