"""Builds the labelled classification corpus from captured tool outputs.

Raw logs were captured by running the real tools on small bad inputs (see
labels.json `command`); a few Go linters not installable offline were written
by hand from their documented output formats (`source: hand-written`).
gh variants re-wrap a raw log the way `gh run view --log-failed` prints it;
multi-job logs concatenate two gh variants from different jobs.
"""
import json, os, sys

SRC = "/tmp/ciaf/out"
DST = sys.argv[1]
V = {
    "cargo": "cargo 1.95.0", "rustfmt": "rustfmt 1.9.0", "clippy": "clippy 0.1.95",
    "black": "black 26.10.1", "isort": "isort 9.0.2", "ruff": "ruff 0.17.6",
    "flake8": "flake8 7.5.0", "mypy": "mypy 2.4.1", "pytest": "pytest 9.2.0", "pip": "pip 23.2.1",
    "eslint": "eslint 10.16.0", "prettier": "prettier 3.10.1", "tsc": "typescript 7.0.2",
    "node": "node 20.20.2", "npm": "npm 11.19.1", "go": "go 1.19.8",
}
# name: (expected action, expected class, tool, command, source)
RAW = {
 "go-build-missing-module": ("non-trivial", "mechanical", V["go"], "go build ./moddep (import of a module not in go.mod)", "real"),
 "go-build-undefined-unused": ("non-trivial", "mechanical", V["go"], "go build ./names (unused imports and variable, undefined name)", "real"),
 "go-errcheck-plain": ("non-trivial", "mechanical", "errcheck", "errcheck ./... (plain output format)", "hand-written"),
 "go-gofmt-diff": ("trivial", "mechanical", V["go"], "gofmt -d ./fmtbad", "real"),
 "go-goimports-diff": ("trivial", "mechanical", "goimports", "goimports -d . (import grouping)", "hand-written"),
 "go-golangci-errcheck-unused": ("non-trivial", "mechanical", "golangci-lint", "golangci-lint run (errcheck, unused)", "hand-written"),
 "go-golangci-gofmt-goimports": ("trivial", "mechanical", "golangci-lint", "golangci-lint run (gofmt, goimports)", "hand-written"),
 "go-install-dns-failure": ("escalate", "unknown", V["go"], "go install golang.org/x/tools/cmd/goimports@v0.12.0 (module proxy unreachable, DNS)", "real"),
 "go-run-deadlock": ("escalate", "semantic", V["go"], "go run ./cmd/dl (WaitGroup never done)", "real"),
 "go-staticcheck": ("non-trivial", "mechanical", "staticcheck", "staticcheck ./...", "hand-written"),
 "go-test-deadlock": ("escalate", "semantic", V["go"], "go test -timeout 20s ./deadlock (unbuffered send blocks)", "real"),
 "go-test-fail-assert": ("escalate", "semantic", V["go"], "go test -run TestAdd -v ./testfail", "real"),
 "go-test-fail-panic": ("escalate", "semantic", V["go"], "go test ./testfail (assertion + index out of range)", "real"),
 "go-test-race": ("escalate", "semantic", V["go"], "go test -race ./racy", "real"),
 "go-vet-printf": ("non-trivial", "mechanical", V["go"], "go vet ./vetbad (printf verb mismatch)", "real"),
 "js-eslint-config-missing-module": ("non-trivial", "mechanical", V["eslint"], "eslint lint_bad.js with a config requiring an uninstalled @eslint/js", "real"),
 "js-eslint-style-rules": ("trivial", "mechanical", V["eslint"], "eslint semi_bad.js (semi, quotes, no-trailing-spaces)", "real"),
 "js-eslint-unused-undef": ("non-trivial", "mechanical", V["eslint"], "eslint lint_bad.js (no-unused-vars, no-undef)", "real"),
 "js-node-test-failure": ("escalate", "semantic", V["node"], "node --test test/ (TAP reporter, failing strictEqual)", "real"),
 "js-node-test-spec": ("escalate", "semantic", V["node"], "node --test --test-reporter=spec test/", "real"),
 "js-npm-404": ("escalate", "unknown", V["npm"], "npm install nonexistent-pkg-xyz-zz9", "real"),
 "js-npm-econnrefused": ("escalate", "unknown", V["npm"], "npm install --registry http://127.0.0.1:9/ left-pad", "real"),
 "js-prettier-check": ("trivial", "mechanical", V["prettier"], "prettier --check fmt_bad.js lint_bad.js", "real"),
 "py-black-check": ("trivial", "mechanical", V["black"], "black --check fmt_bad.py", "real"),
 "py-black-diff": ("trivial", "mechanical", V["black"], "black --check --diff fmt_bad.py (diff contains assert)", "real"),
 "py-flake8-unused": ("non-trivial", "mechanical", V["flake8"], "flake8 lint_bad.py (F401, F841)", "real"),
 "py-flake8-whitespace": ("trivial", "mechanical", V["flake8"], "flake8 ws_bad.py (W291, E302)", "real"),
 "py-isort-check": ("trivial", "mechanical", V["isort"], "isort --check-only --diff imports_bad.py", "real"),
 "py-mypy-errors": ("escalate", "semantic", V["mypy"], "mypy types_bad.py", "real"),
 "py-pip-connection-refused": ("escalate", "unknown", V["pip"], "pip install --index-url http://127.0.0.1:9/simple requests", "real"),
 "py-pip-nonexistent": ("escalate", "unknown", V["pip"], "pip install nonexistent-pkg-xyz", "real"),
 "py-pytest-exception-color": ("escalate", "semantic", V["pytest"], "pytest -q --color=yes tests/test_calc.py::test_raises", "real"),
 "py-pytest-failures": ("escalate", "semantic", V["pytest"], "pytest tests", "real"),
 "py-ruff-check-unused": ("non-trivial", "mechanical", V["ruff"], "ruff check lint_bad.py (I001, F401, SIM115, F841)", "real"),
 "py-ruff-format-check": ("trivial", "mechanical", V["ruff"], "ruff format --check fmt_bad.py", "real"),
 "py-ruff-isort-rule": ("trivial", "mechanical", V["ruff"], "ruff check --select I imports_bad.py", "real"),
 "rust-clippy-color": ("non-trivial", "mechanical", V["clippy"], "CARGO_TERM_COLOR=always cargo clippy -- -D warnings", "real"),
 "rust-clippy-deny": ("non-trivial", "mechanical", V["clippy"], "cargo clippy -q -- -D warnings", "real"),
 "rust-deny-warnings-unused": ("non-trivial", "mechanical", V["cargo"], "RUSTFLAGS=-Dwarnings cargo build (unused import, unused variable)", "real"),
 "rust-e0308-mismatched": ("escalate", "semantic", V["cargo"], "cargo build (E0308 mismatched types)", "real"),
 "rust-e0382-moved-color": ("escalate", "semantic", V["cargo"], "CARGO_TERM_COLOR=always cargo build (E0382 borrow of moved value)", "real"),
 "rust-offline-resolution": ("escalate", "unknown", V["cargo"], "cargo build --offline with a dependency that does not exist", "real"),
 "rust-rustfmt-check": ("trivial", "mechanical", V["rustfmt"], "cargo fmt --check (diff contains panic!/assert!)", "real"),
 "rust-rustfmt-import-order": ("trivial", "mechanical", V["rustfmt"], "cargo fmt --check (use ordering)", "real"),
 "rust-test-assert-eq": ("escalate", "semantic", V["cargo"], "RUST_BACKTRACE=0 cargo test adds", "real"),
 "rust-test-compile-e0308": ("escalate", "semantic", V["cargo"], "cargo test (test code does not type-check)", "real"),
 "rust-test-failures": ("escalate", "semantic", V["cargo"], "cargo test (assert_eq failure and unwrap panic, backtraces)", "real"),
 "rust-test-unwrap-panic-color": ("escalate", "semantic", V["cargo"], "RUST_BACKTRACE=0 CARGO_TERM_COLOR=always cargo test first_of_empty", "real"),
 "rust-unresolved-names": ("non-trivial", "mechanical", V["cargo"], "cargo build (E0432 unresolved import, E0425 cannot find value)", "real"),
 "ts-tsc-cannot-find-name": ("non-trivial", "mechanical", V["tsc"], "tsc --noEmit --strict names_bad.ts (TS2304)", "real"),
 "ts-tsc-type-errors": ("escalate", "semantic", V["tsc"], "tsc -p tsconfig.json (TS2322, TS2741)", "real"),
}
# gh variants: name -> (raw, job, step, run line, exit code)
GH = {
 "gh-rust-rustfmt-check": ("rust-rustfmt-check", "lint", "Check formatting", "cargo fmt --all -- --check", 1),
 "gh-rust-clippy-color": ("rust-clippy-color", "lint", "Clippy", "cargo clippy --all-targets -- -D warnings", 101),
 "gh-rust-test-failures": ("rust-test-failures", "build", "Run tests", "cargo test --workspace", 101),
 "gh-py-black-check": ("py-black-check", "lint", "Black", "black --check .", 1),
 "gh-py-pytest-failures": ("py-pytest-failures", "test (3.11)", "Run pytest", "pytest tests", 1),
 "gh-py-mypy-errors": ("py-mypy-errors", "typecheck", "mypy", "mypy .", 1),
 "gh-js-eslint-unused-undef": ("js-eslint-unused-undef", "lint", "ESLint", "npx eslint .", 1),
 "gh-js-prettier-check": ("js-prettier-check", "lint", "Prettier", "npx prettier --check .", 1),
 "gh-go-gofmt-list": ("go-gofmt-list", "lint", "gofmt", 'test -z "$(gofmt -l . | tee /dev/stderr)"', 1),
 "gh-go-test-race": ("go-test-race", "test", "Run tests", "go test -race ./...", 1),
 "gh-js-npm-404": ("js-npm-404", "build", "Install dependencies", "npm ci", 1),
}
GH_LABEL_OVERRIDE = {"gh-go-gofmt-list": ("trivial", "mechanical", V["go"], "gofmt -l ./fmtbad (file list only; the step's command names gofmt)", "gh-variant")}
MULTI = {
 "multi-rustfmt-and-test": (["gh-rust-rustfmt-check", "gh-rust-test-failures"], "escalate", "semantic"),
 "multi-rustfmt-and-clippy": (["gh-rust-rustfmt-check", "gh-rust-clippy-color"], "non-trivial", "mechanical"),
 "multi-black-and-flake8": (["gh-py-black-check", ("py-flake8-unused", "lint", "flake8", "flake8 .", 1)], "non-trivial", "mechanical"),
 "multi-prettier-and-tsc": (["gh-js-prettier-check", ("ts-tsc-type-errors", "typecheck", "tsc", "npx tsc --noEmit", 2)], "escalate", "semantic"),
 "multi-gofmt-and-vet": ([("go-gofmt-diff", "lint", "gofmt", "gofmt -d .", 1), ("go-vet-printf", "vet", "go vet", "go vet ./...", 1)], "non-trivial", "mechanical"),
 "multi-npm404-and-eslint": (["gh-js-npm-404", ("js-eslint-style-rules", "lint", "ESLint", "npx eslint .", 1)], "escalate", "unknown"),
}

def read_raw(name):
    with open(os.path.join(SRC, name + ".log"), encoding="utf-8") as f:
        text = f.read()
    return text.replace("/tmp/ciaf/", "/home/runner/work/demo/")

def gh_wrap(raw, job, step, run, code, minute):
    ts = lambda s, f: f"2026-05-07T10:{minute:02d}:{s:02d}.{f:07d}Z"
    out = []
    head = [f"##[group]Run {run}", run, "shell: /usr/bin/bash -e {0}", "env:", "  CARGO_TERM_COLOR: always", "##[endgroup]"]
    for i, l in enumerate(head):
        out.append(f"{job}\t{step}\t{ts(1, 1000 * i + 123)} " + ("\ufeff" if i == 0 else "") + l)
    for i, l in enumerate(read_raw(raw).splitlines()):
        out.append(f"{job}\t{step}\t{ts(2 + i // 40, (i * 7919) % 10_000_000)} {l}")
    out.append(f"{job}\t{step}\t{ts(59, 4242)} ##[error]Process completed with exit code {code}.")
    return "\n".join(out) + "\n"

labels = {}
for name, (action, cls, tool, cmd, src) in RAW.items():
    if name == "go-gofmt-list":
        continue
    with open(os.path.join(DST, name + ".log"), "w", encoding="utf-8") as f:
        f.write(read_raw(name))
    labels[name] = {"expected": action, "class": cls, "tool": tool, "command": cmd, "source": src}
gh_text = {}
for i, (name, (raw, job, step, run, code)) in enumerate(GH.items()):
    gh_text[name] = gh_wrap(raw, job, step, run, code, 10 + i)
    with open(os.path.join(DST, name + ".log"), "w", encoding="utf-8") as f:
        f.write(gh_text[name])
    if name in GH_LABEL_OVERRIDE:
        a, c, t, cmd, s = GH_LABEL_OVERRIDE[name]
        labels[name] = {"expected": a, "class": c, "tool": t, "command": cmd, "source": s}
    else:
        base = labels[raw]
        labels[name] = {"expected": base["expected"], "class": base["class"], "tool": base["tool"],
                        "command": f"{base['command']}, wrapped as `gh run view --log-failed` prints it (job `{job}`, step `{step}`)", "source": "gh-variant"}
for j, (name, (parts, action, cls)) in enumerate(MULTI.items()):
    text = ""
    for k, p in enumerate(parts):
        text += gh_text[p] if isinstance(p, str) else gh_wrap(*p, 30 + 2 * j + k)
    with open(os.path.join(DST, name + ".log"), "w", encoding="utf-8") as f:
        f.write(text)
    desc = " + ".join(p if isinstance(p, str) else f"gh-wrapped {p[0]}" for p in parts)
    labels[name] = {"expected": action, "class": cls, "tool": "several", "command": f"two failed jobs: {desc}", "source": "multi-job"}
with open(os.path.join(DST, "labels.json"), "w", encoding="utf-8") as f:
    json.dump(labels, f, indent=2, sort_keys=True, ensure_ascii=False)
    f.write("\n")
print(len(labels), "logs")
