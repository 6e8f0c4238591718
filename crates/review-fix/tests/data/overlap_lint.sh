#!/bin/sh
# A tiny linter whose fixes overlap, for the re-lint tests (rdjsonl on
# stdout, for every *.txt file, in this order per line):
# - `double`: each "--" → "-";
# - `dash-x`: each "-x" → "x" (so "--x" has two overlapping fixes, and
#   whichever is applied, the other is reported again at its new place);
# - `pair-a` and `pair-b`: a line "pair" is reported twice, each finding
#   carrying the same fix (the line deleted), as ruff reports each name of
#   `import os, sys`.
awk '
function emit(code, msg, line, at, col, endline, endcol, text) {
  printf "{\"message\":\"%s\",\"location\":{\"path\":\"%s\",\"range\":{\"start\":{\"line\":%d,\"column\":%d}}},\"code\":{\"value\":\"%s\"},\"suggestions\":[{\"range\":{\"start\":{\"line\":%d,\"column\":%d},\"end\":{\"line\":%d,\"column\":%d}},\"text\":\"%s\"}]}\n", msg, FILENAME, line, at, code, line, col, endline, endcol, text
}
function each(pattern, code, msg, text,    s, off, i) {
  s = $0; off = 0
  while ((i = index(s, pattern)) > 0) {
    emit(code, msg, FNR, off + i, off + i, FNR, off + i + length(pattern), text)
    off += i + length(pattern) - 1
    s = substr(s, i + length(pattern))
  }
}
{
  each("--", "double", "double dash", "-")
  each("-x", "dash-x", "dash before x", "x")
  if ($0 == "pair") {
    emit("pair-a", "first of a pair", FNR, 1, 1, FNR + 1, 1, "")
    emit("pair-b", "second of a pair", FNR, 3, 1, FNR + 1, 1, "")
  }
}' *.txt
