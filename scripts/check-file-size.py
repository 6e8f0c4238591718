#!/usr/bin/env python3
"""Lists the Rust source files longer than the limit, counting only the
lines before a file's `#[cfg(test)]` module (tests aside), and exits 1 when
one is not in scripts/file-size-allowed.txt.

Test code does not count: files named `tests.rs`, files under a `tests/`,
`benches/` or `examples/` folder, and everything from a top-level
`#[cfg(test)]` followed by `mod` on.

Usage: scripts/check-file-size.py [--limit N] [--all]
  --limit N  the most lines a file may have (default 600)
  --all      also list the allowed offenders
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = ROOT / "scripts" / "file-size-allowed.txt"
TEST_MODULE = re.compile(r"^#\[cfg\(test\)\]\s*\n(?:#\[[^\n]*\]\s*\n)*(?:pub(?:\([^)]*\))?\s+)?mod\s", re.M)


def counted_lines(text):
    cut = TEST_MODULE.search(text)
    if cut:
        text = text[: cut.start()]
    text = text.rstrip()
    return text.count("\n") + 1 if text else 0


def sources():
    for path in sorted((ROOT / "crates").rglob("*.rs")):
        rel = path.relative_to(ROOT)
        parts = rel.parts
        if path.name == "tests.rs" or any(p in ("tests", "benches", "examples") for p in parts[2:-1]):
            continue
        if "target" in parts:
            continue
        yield rel, path


def allowed():
    keep = {}
    if ALLOWED.exists():
        for line in ALLOWED.read_text().splitlines():
            entry = line.split("#", 1)[0].strip()
            if entry:
                keep[entry] = line.split("#", 1)[1].strip() if "#" in line else ""
    return keep


def main(argv):
    limit = 600
    show_all = "--all" in argv
    if "--limit" in argv:
        limit = int(argv[argv.index("--limit") + 1])
    ok = allowed()
    bad = []
    for rel, path in sources():
        n = counted_lines(path.read_text())
        if n <= limit:
            continue
        name = rel.as_posix()
        if name in ok:
            if show_all:
                print(f"allowed  {n:5} {name}  ({ok[name]})")
            continue
        bad.append((n, name))
    for n, name in sorted(bad, reverse=True):
        print(f"TOO LONG {n:5} {name}")
    stale = [name for name in ok if not (ROOT / name).exists()]
    for name in stale:
        print(f"STALE    {name} is allowed but does not exist; remove it from {ALLOWED.name}")
    if bad or stale:
        print(f"{len(bad)} file(s) over {limit} lines (tests aside): split them by concern")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
