#!/usr/bin/env bash
# Differential check of review-fix's builtin agent against `cargo clippy --fix`.
#
# For each crate below (real crates from the registry, pinned), two copies go
# into temporary git repositories. On one, `cargo clippy --fix` runs with the
# lint flags; on the other, `orchestrator review-fix --agent builtin --relint`
# runs with the same flags, verifying every fix with `cargo test`. The final
# source files must be identical (trailing whitespace aside); any difference
# is printed and makes the script fail.
#
# Usage: scripts/differential-clippy-fix.sh [ORCHESTRATOR_BINARY]
# Prints one table row per crate: findings, fixed by us, fixed by clippy --fix,
# identical files / total, wall time of both.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin=${1:-$root/target/debug/orchestrator}
[ -x "$bin" ] || { echo "no orchestrator binary at $bin (cargo build -p orchestrator-tool)" >&2; exit 2; }

# name | version | cargo targets | lint flags. roman and bit-vec have
# machine-applicable suggestions that overlap on one line: roman's two nested
# `'static` lifetimes (`&'static [(&'static str, i32)]`), bit-vec's
# format-string inlining inside an `assert_eq!(…)` that
# semicolon_if_nothing_returned rewrites whole (and two other pairs);
# `cargo clippy --fix` applies one of each pair and the other on its next
# pass, and so must the re-lint. bit-vec's bench needs a nightly compiler,
# hence its targets.
crates=(
  "bytesize | 1.3.0 | --all-targets | -W clippy::pedantic"
  "scopeguard | 1.2.0 | --all-targets | -W clippy::pedantic"
  "fnv | 1.0.7 | --all-targets | -W clippy::pedantic"
  "unicode-width | 0.1.11 | --all-targets | -W clippy::pedantic"
  "roman | 0.1.6 | --all-targets | -W clippy::pedantic"
  "bit-vec | 0.6.3 | --lib --tests | -W clippy::pedantic"
)
# One row of the table: name, version, targets, flags.
row() { IFS='|' read -r name version targets flags <<<"$1"; name=${name// /}; version=${version// /}; }

work=$(mktemp -d "${TMPDIR:-/tmp}/orch-differential.XXXXXX")
export CARGO_TARGET_DIR="$work/target"
export CARGO_TERM_COLOR=never
export GIT_AUTHOR_NAME="${GIT_AUTHOR_NAME:-orchestrator-ci}"
export GIT_AUTHOR_EMAIL="${GIT_AUTHOR_EMAIL:-ci@orchestrator.invalid}"
export GIT_COMMITTER_NAME="${GIT_COMMITTER_NAME:-orchestrator-ci}"
export GIT_COMMITTER_EMAIL="${GIT_COMMITTER_EMAIL:-ci@orchestrator.invalid}"

# Bring the pinned crates' sources through cargo's own registry access.
mkdir -p "$work/fetch/src"
: > "$work/fetch/src/lib.rs"
{
  printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n'
  for c in "${crates[@]}"; do
    row "$c"
    printf '%s = "=%s"\n' "$name" "$version"
  done
} > "$work/fetch/Cargo.toml"
(cd "$work/fetch" && cargo fetch -q)
registry=$(cargo metadata --format-version 1 --manifest-path "$work/fetch/Cargo.toml" \
  | python3 -c 'import json,sys; m=json.load(sys.stdin); print("\n".join(p["manifest_path"] for p in m["packages"]))')

# Distinct diagnostics of a clippy JSON stream (the same one reported for
# the lib and its tests counts once), keyed by lint, file and message.
diagnostics_py='
import collections, json, sys
def keys(path):
    seen = set()
    for line in open(path):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") != "compiler-message":
            continue
        d = m["message"]
        spans = [s for s in d.get("spans", []) if s.get("is_primary")]
        if not spans:
            continue
        s = spans[0]
        seen.add(((d.get("code") or {}).get("code"), s["file_name"], s["line_start"], s["column_start"], d["message"]))
    return collections.Counter((c, f, msg) for (c, f, _, _, msg) in seen)
'
count() { python3 -c "$diagnostics_py
print(sum(keys(sys.argv[1]).values()))" "$1"; }
fixed() { python3 -c "$diagnostics_py
before, after = keys(sys.argv[1]), keys(sys.argv[2])
print(sum(max(0, n - after[k]) for k, n in before.items()))" "$1" "$2"; }

status=0
printf '| crate | findings | fixed by us | fixed by clippy --fix | identical files | time ours | time clippy --fix |\n'
printf '|---|---|---|---|---|---|---|\n'
for c in "${crates[@]}"; do
  row "$c"
  src=$(dirname "$(grep "/$name-$version/Cargo.toml" <<<"$registry" | head -1)")
  for side in ref ours; do
    d="$work/$name/$side"
    mkdir -p "$d"
    cp -r "$src/." "$d/"
    rm -f "$d/.cargo_vcs_info.json" "$d/Cargo.toml.orig"
    # One resolution for both sides, committed so that neither tree is dirty.
    if [ "$side" = ref ]; then
      [ -f "$d/Cargo.lock" ] || (cd "$d" && cargo generate-lockfile -q)
    else
      cp "$work/$name/ref/Cargo.lock" "$d/Cargo.lock"
    fi
    printf 'target/\n.review/\n' > "$d/.gitignore"
    git -C "$d" init -q -b main
    git -C "$d" add -A
    git -C "$d" commit -q -m "$name $version from the registry"
  done
  lint="cargo clippy --message-format=json $targets -- $flags"
  # The findings both sides start from.
  if ! (cd "$work/$name/ours" && $lint 2>"$work/$name/lint.log" > "$work/$name/findings.json"); then
    echo "\`$lint\` failed on $name:" >&2; tail -20 "$work/$name/lint.log" >&2; status=1; continue
  fi
  findings=$(count "$work/$name/findings.json")
  t0=$(date +%s.%N)
  (cd "$work/$name/ref" && cargo clippy -q --fix --allow-dirty $targets -- $flags >"$work/$name/ref.log" 2>&1) || {
    echo "cargo clippy --fix failed on $name:" >&2; tail -20 "$work/$name/ref.log" >&2; status=1; continue; }
  t1=$(date +%s.%N)
  set +e
  "$bin" review-fix --repo "$work/$name/ours" --fix "$work/$name/findings.json" --agent builtin \
    --relint "$lint" --relint-passes 6 --batch-size 100 --test-cmd "cargo test -q" -y >"$work/$name/ours.log" 2>&1
  rc=$?
  set -e
  t2=$(date +%s.%N)
  if [ "$rc" -gt 1 ]; then
    echo "review-fix failed on $name (exit $rc):" >&2; tail -30 "$work/$name/ours.log" >&2; status=1; continue
  fi
  # Findings each side fixed: those of the first lint run that a fresh one
  # no longer reports (matched by lint, file and message: lines move).
  # A target folder of their own, so that no diagnostics cached during the
  # runs are replayed.
  for side in ref ours; do
    (cd "$work/$name/$side" && CARGO_TARGET_DIR="$work/target-after-$side" $lint 2>/dev/null \
      > "$work/$name/after-$side.json")
  done
  fixed_ref=$(fixed "$work/$name/findings.json" "$work/$name/after-ref.json")
  fixed_ours=$(fixed "$work/$name/findings.json" "$work/$name/after-ours.json")
  total=0; same=0; diffs=""
  while IFS= read -r f; do
    total=$((total + 1))
    if diff -q <(sed 's/[[:space:]]*$//' "$work/$name/ref/$f") <(sed 's/[[:space:]]*$//' "$work/$name/ours/$f") >/dev/null; then
      same=$((same + 1))
    else
      diffs+="$f "
    fi
  done < <(cd "$work/$name/ref" && git ls-files '*.rs')
  printf '| %s %s | %s | %s | %s | %s/%s | %.1f s | %.1f s |\n' "$name" "$version" "$findings" \
    "$fixed_ours" "$fixed_ref" "$same" "$total" "$(awk "BEGIN{print $t2 - $t1}")" "$(awk "BEGIN{print $t1 - $t0}")"
  if [ -n "$diffs" ]; then
    status=1
    for f in $diffs; do
      echo "--- $name: $f differs (cargo clippy --fix vs review-fix):"
      diff -u <(sed 's/[[:space:]]*$//' "$work/$name/ref/$f") <(sed 's/[[:space:]]*$//' "$work/$name/ours/$f") | head -60 || true
    done
  fi
done
echo "work folder: $work"
exit $status
