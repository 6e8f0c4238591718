#!/usr/bin/env bash
# Differential check of review-fix's builtin agent against `eslint --fix`.
#
# For each package of scripts/differential/eslint-packages.txt (real
# packages from the npm registry, pinned), two copies are made. On one,
# `eslint --fix` runs with scripts/differential/eslint.config.mjs; on the
# other, `orchestrator review-fix --agent builtin --relint` with the same
# configuration, reading ESLint's JSON formatter output (whose fix ranges
# are UTF-16 offsets) and verifying the fixes with the package's own tests.
# The final JavaScript files must be byte-identical; any difference is
# printed and makes the script fail.
#
# Needs what scripts/install-test-deps.sh installs under target/fixers:
# ESLint and the packages' test dependencies (js/) and the npm tarballs
# (tarballs/).
#
# Usage: scripts/differential-eslint-fix.sh [ORCHESTRATOR_BINARY]
# Prints one table row per package: findings, fixed by us, fixed by
# `eslint --fix`, identical files / total, wall time of both.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/differential/common.sh
bin=${1:-$root/target/debug/orchestrator}
[ -x "$bin" ] || { echo "no orchestrator binary at $bin (cargo build -p orchestrator-tool)" >&2; exit 2; }
fixers=$root/target/fixers
export BIN=$fixers/js/node_modules/.bin
[ -x "$BIN/eslint" ] || { echo "no ESLint at $BIN/eslint: run bash scripts/install-test-deps.sh" >&2; exit 2; }
# The packages' tests find their dependencies (tape, …) here.
export NODE_PATH=$fixers/js/node_modules
eslint="$BIN/eslint -c $root/scripts/differential/eslint.config.mjs"

work=$(mktemp -d "${TMPDIR:-/tmp}/orch-differential-eslint.XXXXXX")

# Distinct messages of an ESLint JSON output, keyed by rule, file (relative
# to the linted root) and message: lines move, the rest does not.
keys_py='
import collections, json, os, sys
def keys(path, root):
    return collections.Counter(
        (m.get("ruleId"), os.path.relpath(r["filePath"], root), m["message"])
        for r in json.load(open(path)) for m in r["messages"])
'
count() { python3 -c "$keys_py
print(sum(keys(sys.argv[1], sys.argv[2]).values()))" "$1" "$2"; }
fixed() { python3 -c "$keys_py
before, after = keys(sys.argv[1], sys.argv[2]), keys(sys.argv[3], sys.argv[4])
print(sum(max(0, n - after[k]) for k, n in before.items()))" "$1" "$2" "$3" "$4"; }
# ESLint exits 1 when it reports errors: its JSON is what counts.
lint_json() { (cd "$1" && $eslint -f json $2 > "$3") || [ -s "$3" ]; }

status=0
printf '| package | findings | fixed by us | fixed by eslint --fix | identical files | time ours | time eslint --fix |\n'
printf '|---|---|---|---|---|---|---|\n'
while read_row name version targets tests; do
  tarball=$fixers/tarballs/$name-$version.tgz
  [ -f "$tarball" ] || { echo "no $tarball: run bash scripts/install-test-deps.sh" >&2; exit 2; }
  mkdir -p "$work/src/$name"
  tar -xzf "$tarball" -C "$work/src/$name"
  dir=$work/$name
  make_pair "$work/src/$name/package" "$dir" node_modules/
  lint_json "$dir/ours" "$targets" "$dir/findings.json"
  findings=$(count "$dir/findings.json" "$dir/ours")
  t0=$(now)
  (cd "$dir/ref" && $eslint --fix $targets > "$dir/ref.log" 2>&1) || [ $? -eq 1 ] || {
    echo "eslint --fix failed on $name:" >&2; tail -20 "$dir/ref.log" >&2; status=1; continue; }
  t1=$(now)
  set +e
  "$bin" review-fix --repo "$dir/ours" --fix "$dir/findings.json" --agent builtin \
    --relint "$eslint -f json $targets" --relint-passes 10 --batch-size 50 \
    --test-cmd "${tests//\$BIN/$BIN}" -y > "$dir/ours.log" 2>&1
  rc=$?
  set -e
  t2=$(now)
  # Exit 1 is "some findings were not fixed": those without a fix.
  if [ "$rc" -gt 1 ]; then
    echo "review-fix failed on $name (exit $rc):" >&2; tail -30 "$dir/ours.log" >&2; status=1; continue
  fi
  for side in ref ours; do
    lint_json "$dir/$side" "$targets" "$dir/after-$side.json"
  done
  fixed_ref=$(fixed "$dir/findings.json" "$dir/ours" "$dir/after-ref.json" "$dir/ref")
  fixed_ours=$(fixed "$dir/findings.json" "$dir/ours" "$dir/after-ours.json" "$dir/ours")
  compare "$dir" '*.js' || status=1
  printf '| %s %s | %s | %s | %s | %s/%s | %s s | %s s |\n' "$name" "$version" "$findings" \
    "$fixed_ours" "$fixed_ref" "$same" "$total" "$(seconds "$t1" "$t2")" "$(seconds "$t0" "$t1")"
  grep -E '^review-fix: [0-9]+ pass' "$dir/ours.log" | tail -1 | sed 's/^/  /' || true
done < scripts/differential/eslint-packages.txt
echo "work folder: $work"
exit $status
