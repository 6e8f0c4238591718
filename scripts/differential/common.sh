# Shared by scripts/differential-ruff-fix.sh and differential-eslint-fix.sh
# (sourced): two copies of a package, the tool's own --fix on one and
# `orchestrator review-fix --agent builtin --relint` on the other, then a
# byte-for-byte comparison of the files.

export GIT_AUTHOR_NAME="${GIT_AUTHOR_NAME:-orchestrator-ci}"
export GIT_AUTHOR_EMAIL="${GIT_AUTHOR_EMAIL:-ci@orchestrator.invalid}"
export GIT_COMMITTER_NAME="${GIT_COMMITTER_NAME:-orchestrator-ci}"
export GIT_COMMITTER_EMAIL="${GIT_COMMITTER_EMAIL:-ci@orchestrator.invalid}"

# Reads a `|`-separated package table, skipping comments and blank lines;
# fields are trimmed. Usage: while read_row name version a b; do …; done < FILE
read_row() {
  local line
  while IFS= read -r line; do
    case "$line" in '#'* | '') continue ;; esac
    IFS='|' read -r "$@" <<<"$line"
    local v
    for v in "$@"; do
      printf -v "$v" '%s' "$(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' <<<"${!v}")"
    done
    return 0
  done
  return 1
}

# make_pair SRC DIR IGNORED…: DIR/ref and DIR/ours as copies of SRC; ours
# becomes a git repository (what review-fix needs) whose .gitignore holds
# IGNORED (what the tests and the engine write).
make_pair() {
  local src=$1 dir=$2
  shift 2
  rm -rf "$dir"
  mkdir -p "$dir"
  cp -r "$src" "$dir/ref"
  cp -r "$src" "$dir/ours"
  printf '%s\n' .review/ "$@" > "$dir/ours/.gitignore"
  git -C "$dir/ours" init -q -b main
  git -C "$dir/ours" add -A
  git -C "$dir/ours" commit -q -m "$(basename "$src") as published"
}

# compare DIR PATTERN: counts the files matching PATTERN in DIR/ref that are
# byte-identical in DIR/ours (into `same` and `total`) and prints a diff
# excerpt of each that is not; returns 1 when one differs.
compare() {
  local dir=$1 pattern=$2 f rc=0
  same=0
  total=0
  while IFS= read -r f; do
    total=$((total + 1))
    if cmp -s "$dir/ref/$f" "$dir/ours/$f"; then
      same=$((same + 1))
    else
      rc=1
      echo "--- $(basename "$dir"): $f differs (the tool's --fix vs review-fix):"
      diff -u "$dir/ref/$f" "$dir/ours/$f" | head -40 || true
    fi
  done < <(cd "$dir/ref" && find . -name "$pattern" -not -path './node_modules/*' | sort)
  return $rc
}

now() { date +%s.%N; }
seconds() { awk "BEGIN{printf \"%.1f\", $2 - $1}"; }
