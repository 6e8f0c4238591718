#!/usr/bin/env python3
"""Prints the import loops between the files of each crate, and exits 1 when
there is one that scripts/import-loops-allowed.txt does not list.

A loop is a cycle between *sibling* modules: the children of one module
(the crate root's top-level modules, or the files of a directory module),
where A -> B when any file of A's subtree names an item of B's subtree.
A parent and its own children are one room (the parent declares and
re-exports them; children reach shared items through `super::`), so edges
between a module and its ancestors are not counted.

References found (test code aside: `tests.rs`, `tests/` folders and
everything from a file's `#[cfg(test)]` on):
- paths: `crate::a::b`, `super::a::b` (in `use` lines and inline);
- glob re-exports: a file with `use super::*` (or naming `crate::Item`)
  that uses an item its parent (or the root) re-exports with `pub use
  child::*` / `pub(crate) use child::*` depends on that child.

Usage: scripts/check-import-loops.py [crate-src-dir ...]
(default: every crates/*/src).
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = ROOT / "scripts" / "import-loops-allowed.txt"

ITEM = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?"
    r"(?:fn|struct|enum|trait|type|const|static|union)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
GLOB_REEXPORT = re.compile(r"^\s*pub(?:\([^)]*\))?\s+use\s+(?:self::)?([a-z_][a-z0-9_]*)::\*;", re.M)
PATH = re.compile(r"\b(crate|super)((?:::(?:[A-Za-z_][A-Za-z0-9_]*))+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)
WORD = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def strip_tests(text):
    cut = re.search(r"^\s*#\[cfg\(test\)\]\s*\n\s*mod\s+\w+", text, re.M)
    return text[: cut.start()] if cut else text


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def module_of(src, path):
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def load(src):
    files = {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if path.name == "tests.rs" or "tests" in rel.parts[:-1] or path.name.startswith("test_"):
            continue
        text = strip_comments(strip_tests(path.read_text()))
        files[module_of(src, path)] = (rel, text)
    return files


def resolve(mods, here, base, segments):
    """The module a `crate::…`/`super::…` path names (longest existing prefix)."""
    if base == "crate":
        start = ()
    else:
        start = here[:-1] if here else ()
        while segments and segments[0] == "super":
            start, segments = start[:-1], segments[1:]
    target = start
    for seg in segments:
        if target + (seg,) in mods:
            target = target + (seg,)
        else:
            break
    return target, segments[len(target) - len(start):]


def definers(files, mods):
    """For each module, the names of the items its own file defines."""
    return {m: set(ITEM.findall(files[m][1])) for m in mods}


def glob_children(files, mod):
    return set(GLOB_REEXPORT.findall(files[mod][1])) if mod in files else set()


def edges_of(files):
    mods = set(files)
    defined = definers(files, mods)
    out = {m: set() for m in mods}
    for here, (_, text) in files.items():
        words = set(WORD.findall(text))
        refs = []
        for base, rest in PATH.findall(text):
            refs.append((base, [s for s in rest.split("::") if s]))
        for base, prefix, inner in USE_GROUP.findall(text):
            pre = [s for s in prefix.split("::") if s]
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*", inner):
                if name in ("self",):
                    continue
                refs.append((base, pre + name.split("::")))
        globbed = set()
        for base, segs in refs:
            target, rest = resolve(mods, here, base, segs)
            out[here].add(target)
            if not rest or rest == ["*"]:
                if rest == ["*"]:
                    globbed.add(target)
                continue
            # crate::Item / super::Item through a glob re-export of a child.
            for child in glob_children(files, target):
                cm = target + (child,)
                if rest[0] in defined.get(cm, ()):
                    out[here].add(cm)
        for target in globbed:
            for child in glob_children(files, target):
                cm = target + (child,)
                if cm != here and words & defined.get(cm, set()):
                    out[here].add(cm)
    return out


def sibling_loops(files):
    edges = edges_of(files)
    parents = {m[:-1] for m in files if m} | {()}
    loops = []
    for parent in sorted(parents):
        kids = sorted({m[: len(parent) + 1] for m in files if len(m) > len(parent) and m[: len(parent)] == parent})
        graph = {k: set() for k in kids}
        for src, targets in edges.items():
            if len(src) <= len(parent) or src[: len(parent)] != parent:
                continue
            a = src[: len(parent) + 1]
            for t in targets:
                if len(t) > len(parent) and t[: len(parent)] == parent:
                    b = t[: len(parent) + 1]
                    if a != b:
                        graph[a].add(b)
        loops += strongly_connected(graph)
    return loops


def strongly_connected(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def allowed():
    if not ALLOWED.exists():
        return set()
    keep = set()
    for line in ALLOWED.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            keep.add(line)
    return keep


def main(argv):
    srcs = [pathlib.Path(a) for a in argv] or sorted(ROOT.glob("crates/*/src"))
    ok = allowed()
    bad = 0
    for src in srcs:
        files = load(src)
        crate = src.parent.name
        for comp in sibling_loops(files):
            name = f"{crate}: " + " <-> ".join("::".join(m) or "crate" for m in comp)
            known = name in ok
            print(("allowed " if known else "LOOP    ") + name)
            bad += not known
    if bad:
        print(f"{bad} import loop(s); break them (a layer above, or shared items moved down)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
