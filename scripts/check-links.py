#!/usr/bin/env python3
"""Every relative link and anchor in the README, the design notes and the
guide resolves.

Checks README.md, ARCHITECTURE.md, docs/*.md and book/src/**/*.md:
- a relative link names a file that exists (an image too);
- a `#anchor` (alone or after a Markdown file) names a heading of that file,
  slugged as GitHub and mdBook both do (lowercase; letters, digits, `-` and
  `_` kept; whitespace to `-`; the rest dropped; a repeated heading gets
  `-1`, `-2`…);
- a guide page links only inside `book/src` (the built guide holds nothing
  else), and every page of `book/src` is in its SUMMARY.md;
- an mdBook `{{#include path}}` names a file that exists.
Exits 1 listing every broken link as FILE:LINE: what, and what was expected.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOK = ROOT / "book" / "src"
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INCLUDE = re.compile(r"\{\{#include\s+([^\s}:]+)[^}]*\}\}")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(text):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = text.replace("`", "")
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def lines_outside_fences(path):
    fence = None
    for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        stripped = line.lstrip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            mark = stripped[:3]
            fence = None if fence == mark else (fence or mark)
            continue
        if fence is None:
            yield n, line


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        for _, line in lines_outside_fences(path):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def check(path, errors):
    in_book = BOOK in path.parents
    for n, line in lines_outside_fences(path):
        code_free = re.sub(r"`[^`]*`", "", line)
        for m in INCLUDE.finditer(line):
            target = (path.parent / m.group(1)).resolve()
            if not target.is_file():
                errors.append(f"{path.relative_to(ROOT)}:{n}: include {m.group(1)}: no such file")
        for m in LINK.finditer(code_free):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            where = f"{path.relative_to(ROOT)}:{n}: link {target}"
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                errors.append(f"{where}: no file {file_part} (relative to {path.parent.relative_to(ROOT)}/)")
                continue
            if in_book and BOOK not in dest.parents and dest != BOOK:
                errors.append(f"{where}: leaves book/src, which the built guide does not hold; link a page of the guide")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                errors.append(f"{where}: no heading slugs to #{anchor} in {dest.relative_to(ROOT)}")


def summary_pages(errors):
    summary = BOOK / "SUMMARY.md"
    if not summary.is_file():
        errors.append("book/src/SUMMARY.md: missing")
        return
    listed = {(BOOK / m.group(1)).resolve() for _, l in lines_outside_fences(summary) for m in LINK.finditer(l)}
    for page in sorted(BOOK.rglob("*.md")):
        if page.name != "SUMMARY.md" and page.resolve() not in listed:
            errors.append(f"{page.relative_to(ROOT)}: not in book/src/SUMMARY.md, so the guide never shows it")


def main():
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md"]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += sorted(BOOK.rglob("*.md"))
    errors = []
    for f in files:
        if f.is_file():
            check(f, errors)
    summary_pages(errors)
    for e in errors:
        print(e)
    print(f"links: {len(files)} files checked, {len(errors)} broken")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
