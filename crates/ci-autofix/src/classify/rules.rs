//! The rule table: which line of a CI log means what.
//!
//! Each rule is a regular expression over one cleaned line and a level. The
//! seed's `classify.sh` families (whitespace, gofmt/goimports, import order;
//! errcheck, unused, staticcheck, undeclared names, missing packages; races,
//! panics, failed assertions, deadlocks) are here, extended to the Rust,
//! Python and JavaScript/TypeScript tool chains and to network and
//! dependency-resolution failures. Rules are tried in table order and the
//! first match decides a line; across lines the most severe level wins.
//!
//! Rules whose level depends on a code in the line (flake8/ruff codes, eslint
//! rule ids, tsc error numbers, mypy error codes, rustc error numbers) name
//! the code in their evidence (`flake8:F401`, `tsc:TS2322`).

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

use super::Level;

/// How a rule turns a match into a level.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Grade {
    /// Always this level.
    Fixed(Level),
    /// The level follows from the capture group `code`.
    ByCode(fn(&str) -> Level),
}

/// One rule.
#[derive(Debug)]
pub(crate) struct Rule {
    /// Name reported in evidence.
    pub name: &'static str,
    /// The pattern, over one cleaned line.
    pub pattern: Regex,
    /// The level of a match.
    pub grade: Grade,
    /// Whether the rule may match quoted lines (diff bodies, snippets). Only
    /// formatting rules may: quoted code is never evidence of anything else.
    pub on_quoted: bool,
}

use Level::{Infrastructure, NonTrivial, Semantic, Trivial, Unknown};

/// `(name, level, on_quoted, pattern)` for fixed-level rules, in order.
type Spec = (&'static str, Grade, bool, &'static str);

const fn fixed(level: Level) -> Grade {
    Grade::Fixed(level)
}

/// The table, in the order rules are tried on a line.
const SPECS: &[Spec] = &[
    // ── Network, registry and runner failures: nobody's code is at fault.
    (
        "network-dns",
        fixed(Infrastructure),
        false,
        r"(?i)could not resolve host|temporary failure in name resolution|\bno such host\b|name or service not known|\bENOTFOUND\b|\bEAI_AGAIN\b|failed to lookup address",
    ),
    (
        "network-connection",
        fixed(Infrastructure),
        false,
        r"(?i)connection refused|\bECONNREFUSED\b|\bECONNRESET\b|\bETIMEDOUT\b|connection (?:timed out|reset by peer)|network is unreachable|failed to establish a new connection|tls handshake timeout|\bi/o timeout\b|ssl certificate problem|\b50[234] (?:bad gateway|service unavailable|gateway time-?out)\b|too many requests|rate limit exceeded|spurious network error",
    ),
    (
        "dependency-resolution",
        fixed(Unknown),
        false,
        r"(?i)no matching (?:package|distribution|version)|could not find a version that satisfies|failed to select a version for|failed to get `[^`]+` as a dependency|failed to load source for dependency|unable to update registry|\bE404\b|npm (?:err!|error) 404|\bERESOLVE\b|unable to resolve dependency tree|could not resolve dependencies|\bETARGET\b|version solving failed|ResolutionImpossible",
    ),
    (
        "ci-infrastructure",
        fixed(Infrastructure),
        false,
        r"(?i)no space left on device|runner has received a shutdown signal|the operation was canceled|exceeded the maximum execution time|lost communication with the server|\bexit code 137\b|\bsignal: 9, SIGKILL\b|\boom-?kill|out of memory: kill|the runner .* did not respond|api rate limit exceeded|secondary rate limit|\bHTTP 429\b|job was cancelled|has been cancelled",
    ),
    (
        "ci-auth",
        fixed(Unknown),
        false,
        r"(?i)\bHTTP 401\b|authentication (?:required|failed)|permission denied \(publickey\)|bad credentials",
    ),
    // ── Python lint codes first: the code is more precise than the words.
    (
        "flake8",
        Grade::ByCode(python_code_level),
        false,
        r"^\S+\.pyi?:\d+:\d+: (?P<code>[A-Z]{1,4}\d{2,4})\b",
    ),
    (
        "ruff",
        Grade::ByCode(python_code_level),
        false,
        r"^(?P<code>[A-Z]{1,4}\d{3,4}) (?:\[\*\] )?\S",
    ),
    // ── Formatters (trivial; may match their own diff headers).
    ("rustfmt", fixed(Trivial), true, r"^Diff in \S.*:\d+:?$"),
    (
        "gofmt",
        fixed(Trivial),
        true,
        r"\bgofmt\s+(?:-\w+\s+)*-[ldw]\b|^diff (?:-u )?\S+\.go\.orig \S+\.go$|File is not `gofmt`-ed|\((?:gofmt|gofumpt)\)$",
    ),
    (
        "goimports",
        fixed(Trivial),
        true,
        r"\bgoimports\s+(?:-\w+\s+)*-[ldw]\b|File is not `goimports`-ed|\((?:goimports|gci)\)$",
    ),
    (
        "black",
        fixed(Trivial),
        true,
        r"^would reformat \S|^Would reformat: \S|\d+ files? would be reformatted|File would be reformatted",
    ),
    (
        "import-order",
        fixed(Trivial),
        true,
        r"(?i)imports are incorrectly sorted|import block is un-?sorted|\bunordered imports\b",
    ),
    (
        "prettier",
        fixed(Trivial),
        true,
        r"Code style issues (?:found|were found)|^\[warn\] \S+\.(?:[cm]?[jt]sx?|json|css|scss|less|md|ya?ml|vue|html|graphql)$",
    ),
    (
        "whitespace",
        fixed(Trivial),
        true,
        r"(?i)trailing whitespace|trailing spaces not allowed|no newline at end of file|mixed spaces and tabs|\((?:whitespace|golines)\)$",
    ),
    // ── Linters and type checkers whose level depends on the code.
    (
        "mypy",
        Grade::ByCode(mypy_code_level),
        false,
        r"^\S+\.pyi?:\d+(?::\d+)?: error: .*\[(?P<code>[a-z][a-z-]*)\]$",
    ),
    (
        "mypy",
        fixed(Semantic),
        false,
        r"^\S+\.pyi?:\d+(?::\d+)?: error: ",
    ),
    (
        "tsc",
        Grade::ByCode(tsc_code_level),
        false,
        r"\berror (?P<code>TS\d{4,5}):",
    ),
    (
        "eslint",
        Grade::ByCode(eslint_rule_level),
        false,
        r"^\s+\d+:\d+\s+(?:error|warning)\s+.+?\s{2,}(?P<code>@?[\w-]+(?:/[\w-]+)*)$",
    ),
    (
        "eslint",
        Grade::ByCode(eslint_rule_level),
        false,
        r"\[(?:Error|Warning)/(?P<code>@?[\w-]+(?:/[\w-]+)*)\]$",
    ),
    // ── Rust compiler and clippy.
    (
        "clippy",
        fixed(NonTrivial),
        false,
        r"`-D clippy::[\w-]+`|#\[deny\(clippy::\w+\)\]",
    ),
    (
        "rustc",
        Grade::ByCode(rustc_code_level),
        false,
        r"^error\[(?P<code>E\d{4})\]",
    ),
    (
        "rustc-lint",
        fixed(NonTrivial),
        false,
        r"^\s*= note: `-D [\w:-]+` implied by `-D warnings`|^\s*= note: `#\[deny\([\w:]+\)\]` on by default|^error: (?:unused \w+|variable does not need to be mutable|\w+(?: \w+)? `[^`]+` is never (?:used|read|constructed))",
    ),
    // ── Go (the seed's families).
    (
        "errcheck",
        fixed(NonTrivial),
        false,
        r"\(errcheck\)$|Error return value(?: of `[^`]+`)? is not checked|^\S+\.go:\d+:\d+:\t\S",
    ),
    (
        "staticcheck",
        fixed(NonTrivial),
        false,
        r"\((?:SA|S|ST|QF|U)\d{4}\)$",
    ),
    (
        "golangci-lint",
        fixed(NonTrivial),
        false,
        r"^\S+\.go:\d+(?::\d+)?: .+ \((?:unused|ineffassign|gosimple|govet|revive|gocritic|unparam|errorlint|bodyclose|gosec|misspell|unconvert|prealloc|nakedret|dupl|goconst|gocyclo|lll|nolintlint|stylecheck|exhaustive|noctx|staticcheck|typecheck)\)$",
    ),
    (
        "go-unused",
        fixed(NonTrivial),
        false,
        r"declared (?:and|but) not used|imported and not used|\bimported (?:as \w+ )?and not used",
    ),
    (
        "go-undefined",
        fixed(NonTrivial),
        false,
        r"\bundefined: \w|\bundeclared name: \w",
    ),
    (
        "go-missing-package",
        fixed(NonTrivial),
        false,
        r"no required module provides package|cannot find package|is not in (?:GOROOT|std)|missing go\.sum entry",
    ),
    (
        "go-vet",
        fixed(NonTrivial),
        false,
        r"^vet: |format %\S+ has arg \S+ of wrong type|call has arguments but no formatting directives|possible misuse of|composite literal uses unkeyed fields|\bunreachable code\b|self-assignment of|passes lock by value|copies lock value|loop variable \w+ captured by func literal|result of \S+ call not used|missing argument for \S+ verb",
    ),
    // ── Missing modules (a manifest or import to add: mechanical).
    (
        "missing-module",
        fixed(NonTrivial),
        false,
        r"No module named '[^']+'|Cannot find module '[^']+'|ERR_MODULE_NOT_FOUND|Module not found: Error: Can't resolve",
    ),
    // ── Tests, panics, races, deadlocks: they need understanding.
    (
        "cargo-test",
        fixed(Semantic),
        false,
        r"^test \S+ \.\.\. FAILED$|^test result: FAILED|^error: test failed|^---- \S+ stdout ----$",
    ),
    (
        "rust-panic",
        fixed(Semantic),
        false,
        r"^thread '[^']*'(?: \(\d+\))? panicked at",
    ),
    (
        "assertion",
        fixed(Semantic),
        false,
        r"^assertion(?: `[^`]*`)? failed|^\s*(?:E\s+)?AssertionError\b|AssertionError \[ERR_ASSERTION\]",
    ),
    ("go-test", fixed(Semantic), false, r"^\s*--- FAIL: \S"),
    (
        "data-race",
        fixed(Semantic),
        false,
        r"^WARNING: DATA RACE|race detected during execution of test|ThreadSanitizer: data race",
    ),
    ("deadlock", fixed(Semantic), false, r"(?i)\bdeadlock"),
    (
        "panic",
        fixed(Semantic),
        false,
        r"^panic: |^goroutine \d+ \[[^\]]+\]:$|^fatal error: |test timed out after",
    ),
    (
        "go-test",
        fixed(Semantic),
        false,
        r"^FAIL\s+\S+\s+\d+(?:\.\d+)?s$|^FAIL\s+\S+\s+\[build failed\]$",
    ),
    (
        "pytest",
        fixed(Semantic),
        false,
        r"^(?:FAILED|ERROR) \S+::\S|^=+ (?:.*\b\d+ (?:failed|errors?)\b.*) =+$",
    ),
    (
        "node-test",
        fixed(Semantic),
        false,
        r"^not ok \d+ - |^# fail [1-9]|^ℹ fail [1-9]|^✖ failing tests:|^Tests:\s+\d+ failed|^\s*\d+ failing$",
    ),
    (
        "exception",
        fixed(Semantic),
        false,
        r"^(?:E\s+)?(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): ",
    ),
    (
        "assertion",
        fixed(Semantic),
        false,
        r"(?i)\bexpected\b.{0,80}\bgot\b|\bgot\b.{0,80}\bwant\b|\bwant\b.{0,80}\bgot\b",
    ),
];

/// The compiled table. A pattern that fails to compile (a bug caught by the
/// tests) is left out rather than panicking in library code.
pub(crate) static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    SPECS
        .iter()
        .filter_map(|&(name, grade, on_quoted, pattern)| {
            Regex::new(pattern).ok().map(|pattern| Rule {
                name,
                pattern,
                grade,
                on_quoted,
            })
        })
        .collect()
});

/// Every pattern of [`RULES`] in one set, index for index: one pass over a
/// line tells which rules match at all, so a long line that matches none is
/// read once instead of once per rule. `None` if the set cannot be built
/// (then every rule is tried on its own).
pub(crate) static RULE_SET: LazyLock<Option<RegexSet>> =
    LazyLock::new(|| RegexSet::new(RULES.iter().map(|r| r.pattern.as_str())).ok());

/// flake8 / ruff / pycodestyle codes: import sorting (`I`), whitespace,
/// indentation and blank lines (`E1`–`E3`, `W1`–`W3`) are trivial; syntax
/// errors (`E9`) are semantic; everything else (pyflakes `F`, bugbear,
/// line length, …) is non-trivial.
pub(crate) fn python_code_level(code: &str) -> Level {
    let letters: String = code.chars().take_while(char::is_ascii_alphabetic).collect();
    let digits = &code[letters.len()..];
    match (letters.as_str(), digits.chars().next()) {
        ("I", _) => Trivial,
        ("E" | "W", Some('1' | '2' | '3')) => Trivial,
        ("E", Some('9')) => Semantic,
        _ => NonTrivial,
    }
}

/// mypy error codes: names and imports are mechanical, types need intent.
pub(crate) fn mypy_code_level(code: &str) -> Level {
    match code {
        "name-defined" | "import" | "import-not-found" | "import-untyped" | "unused-ignore"
        | "unused-coroutine" => NonTrivial,
        _ => Semantic,
    }
}

/// tsc error numbers: unknown names, missing modules and unused declarations
/// are mechanical; configuration errors (`TS5xxx`/`TS6xxx` other than unused)
/// are unknown; every other diagnostic (type errors, syntax) is semantic.
pub(crate) fn tsc_code_level(code: &str) -> Level {
    match code {
        "TS2304" | "TS2552" | "TS2307" | "TS2305" | "TS2724" | "TS2582" | "TS6133" | "TS6138"
        | "TS6192" | "TS6196" | "TS6198" => NonTrivial,
        c if c.starts_with("TS5") || c.starts_with("TS6") => Unknown,
        _ => Semantic,
    }
}

/// rustc error numbers: unresolved names, imports, modules and crates are
/// mechanical; everything else (mismatched types, borrows, traits) is semantic.
pub(crate) fn rustc_code_level(code: &str) -> Level {
    match code {
        "E0405" | "E0407" | "E0412" | "E0422" | "E0423" | "E0425" | "E0432" | "E0433" | "E0463"
        | "E0531" | "E0583" => NonTrivial,
        _ => Semantic,
    }
}

/// eslint rule ids: layout rules (the ones a formatter fixes) and import
/// sorting are trivial; every other rule is non-trivial.
pub(crate) fn eslint_rule_level(rule: &str) -> Level {
    let base = rule.rsplit('/').next().unwrap_or(rule);
    let layout = matches!(
        base,
        "semi"
            | "quotes"
            | "indent"
            | "no-trailing-spaces"
            | "eol-last"
            | "comma-dangle"
            | "comma-spacing"
            | "comma-style"
            | "key-spacing"
            | "keyword-spacing"
            | "space-before-function-paren"
            | "space-before-blocks"
            | "space-infix-ops"
            | "space-in-parens"
            | "object-curly-spacing"
            | "array-bracket-spacing"
            | "arrow-spacing"
            | "block-spacing"
            | "brace-style"
            | "no-multiple-empty-lines"
            | "no-multi-spaces"
            | "no-mixed-spaces-and-tabs"
            | "linebreak-style"
            | "padded-blocks"
            | "semi-spacing"
            | "quote-props"
            | "prettier"
            | "sort-imports"
            | "order"
            | "imports"
            | "exports"
    );
    let import_sorting = rule.starts_with("simple-import-sort/") || rule == "import/order";
    if layout || import_sorting || rule.starts_with("@stylistic/") {
        Trivial
    } else {
        NonTrivial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for &(name, _, _, pattern) in SPECS {
            assert!(Regex::new(pattern).is_ok(), "rule {name}: {pattern}");
        }
        assert_eq!(RULES.len(), SPECS.len());
        let set = RULE_SET.as_ref().expect("the rule set builds");
        assert_eq!(set.len(), RULES.len(), "the set is index for index");
        assert_eq!(RULES.len(), SPECS.len());
    }

    #[test]
    fn code_levels() {
        type CodeFn = fn(&str) -> Level;
        let cases: &[(CodeFn, &str, Level)] = &[
            (python_code_level, "I001", Trivial),
            (python_code_level, "W291", Trivial),
            (python_code_level, "E302", Trivial),
            (python_code_level, "E501", NonTrivial),
            (python_code_level, "E999", Semantic),
            (python_code_level, "F401", NonTrivial),
            (python_code_level, "SIM115", NonTrivial),
            (mypy_code_level, "name-defined", NonTrivial),
            (mypy_code_level, "arg-type", Semantic),
            (tsc_code_level, "TS2304", NonTrivial),
            (tsc_code_level, "TS2322", Semantic),
            (tsc_code_level, "TS5112", Unknown),
            (tsc_code_level, "TS6133", NonTrivial),
            (rustc_code_level, "E0425", NonTrivial),
            (rustc_code_level, "E0308", Semantic),
            (rustc_code_level, "E0382", Semantic),
            (eslint_rule_level, "semi", Trivial),
            (eslint_rule_level, "@stylistic/indent", Trivial),
            (eslint_rule_level, "import/order", Trivial),
            (eslint_rule_level, "no-unused-vars", NonTrivial),
            (
                eslint_rule_level,
                "@typescript-eslint/no-explicit-any",
                NonTrivial,
            ),
        ];
        for &(f, code, level) in cases {
            assert_eq!(f(code), level, "{code}");
        }
    }
}
