#!/bin/sh
# A tiny linter for the re-lint tests: every line of the *.txt files that
# starts with "((" is reported (rdjsonl) with a suggestion that removes one
# layer of parentheses, so "((((x))))" needs three fixes, each exposed by
# the last.
awk '/^\(\(/ {
  inner = substr($0, 2, length($0) - 2);
  printf "{\"message\":\"redundant parentheses\",\"location\":{\"path\":\"%s\",\"range\":{\"start\":{\"line\":%d,\"column\":1},\"end\":{\"line\":%d,\"column\":%d}}},\"code\":{\"value\":\"paren\"},\"suggestions\":[{\"range\":{\"start\":{\"line\":%d,\"column\":1},\"end\":{\"line\":%d,\"column\":%d}},\"text\":\"%s\"}]}\n", FILENAME, FNR, FNR, length($0) + 1, FNR, FNR, length($0) + 1, inner
}' *.txt
