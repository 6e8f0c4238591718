#!/usr/bin/env python3
"""No rollback whose failure is thrown away.

A failed restore leaves a tree with a change nobody accounted for: the flows
treat it as an error (the item stops, the run ends resumably), never as
something to ignore. This check fails on any statement in the crates' source
(tests aside) that discards the result of a `restore(`/`restore_paths(` call
with `let _ =` or `.ok();`, naming the file and line.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CALL = re.compile(r"\brestore(?:_paths)?\s*\(")


def statements(text):
    """Yields (line number, statement text) for each `;`-terminated run."""
    start_line = 1
    buf = []
    line = 1
    for ch in text:
        if not buf and ch.isspace():
            if ch == "\n":
                line += 1
            continue
        if not buf:
            start_line = line
        buf.append(ch)
        if ch == "\n":
            line += 1
        if ch in ";{}":
            yield start_line, "".join(buf)
            buf = []


def main():
    bad = []
    for path in sorted((ROOT / "crates").rglob("*.rs")):
        rel = path.relative_to(ROOT)
        parts = rel.parts
        if "tests" in parts or path.name == "tests.rs":
            continue
        text = path.read_text(encoding="utf-8")
        # The lines before a file's test module only.
        cut = text.find("#[cfg(test)]")
        if cut >= 0:
            text = text[:cut]
        for line, stmt in statements(text):
            if not CALL.search(stmt):
                continue
            squashed = " ".join(stmt.split())
            if squashed.startswith("let _ =") or squashed.endswith(".ok();"):
                bad.append(f"{rel}:{line}: a rollback's failure is discarded: {squashed[:100]}")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} discarded rollback result(s): handle the error (stop the item, say so)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
