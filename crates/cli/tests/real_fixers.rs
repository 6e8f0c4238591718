//! Python and JavaScript projects end to end with the real tools: ruff and
//! pytest in the project's virtualenv, ESLint and `node --test` with an
//! ignored `node_modules/`, through the real `orchestrator` binary —
//! review-fix on ruff's and ESLint's JSON with the builtin agent and the
//! re-lint, planex tasks in worktrees, ci-autofix `--local`.
//!
//! The tools are the pinned ones `scripts/install-test-deps.sh` installs
//! under `target/fixers` (or `$ORCH_FIXERS`): ruff and pytest in
//! `venv/`, ESLint in `js/`. A project's `.venv` is a real venv made with
//! `python3 -m venv`, which finds pytest through a `.pth` file (no network).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use orchestrator_adapters::test_support::git;

const ORCHESTRATOR: &str = env!("CARGO_BIN_EXE_orchestrator");

/// `$ORCH_FIXERS`, else `target/fixers`; missing tools fail the test with
/// the install command.
fn fixers() -> PathBuf {
    let dir = std::env::var_os("ORCH_FIXERS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fixers"),
        PathBuf::from,
    );
    for tool in [
        "venv/bin/ruff",
        "venv/bin/python",
        "js/node_modules/.bin/eslint",
    ] {
        assert!(
            dir.join(tool).is_file(),
            "no {tool} under {}: from the workspace root run\n    bash scripts/install-test-deps.sh\n(or point ORCH_FIXERS at a folder with venv/ and js/)",
            dir.display()
        );
    }
    dir
}

fn ruff() -> PathBuf {
    fixers().join("venv/bin/ruff")
}

fn eslint() -> PathBuf {
    fixers().join("js/node_modules/.bin/eslint")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// A git repository at `dir` holding `files`, committed on `main`.
fn repo(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "test@example.invalid"]);
    git(dir, &["config", "user.name", "Test"]);
    git(dir, &["config", "commit.gpgsign", "false"]);
    for (path, text) in files {
        write(&dir.join(path), text);
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "start"]);
}

/// A real virtualenv at `repo/.venv` (ignored by the repository) whose
/// python finds pytest: a `.pth` file names the fixers venv's packages.
fn venv(repo: &Path) {
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let purelib = |python: &Path| {
        let out = Command::new(python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    let fixers_packages = purelib(&fixers().join("venv/bin/python"));
    let own = purelib(&repo.join(".venv/bin/python"));
    write(
        &own.join("fixers.pth"),
        &format!("{}\n", fixers_packages.display()),
    );
}

fn orchestrator(repo: &Path, args: &[&str], path_prefix: Option<&Path>) -> Output {
    let mut cmd = Command::new(ORCHESTRATOR);
    cmd.args(args)
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env(
            "ORCHESTRATOR_CACHE_DIR",
            repo.parent().unwrap().join("cache"),
        )
        .env("NO_COLOR", "1");
    if let Some(prefix) = path_prefix {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![prefix.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    }
    cmd.output().unwrap()
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn subjects(repo: &Path) -> Vec<String> {
    git(repo, &["log", "--reverse", "--format=%s"])
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

// ------------------------------------------------------------------ Python

const APP_PY: &str = r#"import json
import os
import sys


def describe(value):
    if value is None:
        return "none"
    else:
        return "value: {}".format(value)


def dumps(value):
    return json.dumps(value, sort_keys=True)
"#;

/// Callers reach `os` through `app`: ruff's safe F401 fix for it breaks
/// this test.
const TEST_APP_PY: &str = r#"import app


def test_describe():
    assert app.describe(None) == "none"
    assert app.describe(3) == "value: 3"


def test_callers_reach_os_through_app():
    assert app.os.sep == "/"
"#;

fn py_project(dir: &Path) {
    repo(
        dir,
        &[
            (".gitignore", ".venv/\n__pycache__/\n"),
            (
                "pyproject.toml",
                "[tool.pytest.ini_options]\naddopts = \"-p no:cacheprovider\"\n",
            ),
            ("app.py", APP_PY),
            ("test_app.py", TEST_APP_PY),
        ],
    );
    venv(dir);
}

/// The ruff command of the Python tests: ruff's JSON, rules with safe fixes.
fn ruff_lint() -> String {
    format!(
        "{} check --isolated --no-cache --exit-zero --select E,W,F,I,UP,RET --output-format json .",
        ruff().display()
    )
}

/// review-fix reads ruff's own JSON, applies its safe fixes one verified
/// commit at a time with the project's pytest (inferred from its venv, in
/// worktrees that get the venv), keeps the one fix that breaks a test out,
/// and re-lints: the f-string fix, deferred because it overlaps the
/// `else` removal, lands on the next pass at its new place.
#[test]
fn review_fix_applies_ruff_fixes_verified_by_pytest_in_the_projects_venv() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("py");
    py_project(&dir);
    let findings = tmp.path().join("ruff.json");
    let lint = ruff_lint();
    let out = Command::new("sh")
        .args(["-c", &lint])
        .current_dir(&dir)
        .output()
        .unwrap();
    std::fs::write(&findings, &out.stdout).unwrap();

    let o = orchestrator(
        &dir,
        &[
            "review-fix",
            "--fix",
            findings.to_str().unwrap(),
            "--agent",
            "builtin",
            "--relint",
            &lint,
            "-y",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "the os fix fails: {}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("test command `.venv/bin/python -m pytest` (inferred: pytest configuration and .venv/ found)"),
        "{err}"
    );
    assert!(
        err.contains("each worktree gets .venv/ (detected"),
        "the groups' worktrees get the venv: {err}"
    );
    assert_eq!(
        read(&dir.join("app.py")),
        "import json\nimport os\n\n\ndef describe(value):\n    if value is None:\n        return \"none\"\n    return f\"value: {value}\"\n\n\ndef dumps(value):\n    return json.dumps(value, sort_keys=True)\n"
    );
    let subjects = subjects(&dir);
    assert_eq!(
        subjects,
        [
            "fix(quality): `sys` imported but unused [F401@app.py:3:8]",
            "fix(quality): Unnecessary `else` after `return` statement [RET505@app.py:9:5]",
            "fix(quality): Use f-string instead of `format` call [UP032@app.py:8:12]",
        ],
        "{}",
        show(&o)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("F401@app.py:2:8 failed"),
        "the breaking fix is named: {stdout}"
    );
    assert!(stdout.contains("1 deferred to a re-lint"), "{stdout}");
    // The tests pass on what landed; the user's venv is untouched.
    let tests = Command::new(dir.join(".venv/bin/python"))
        .args(["-m", "pytest", "-q"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(tests.status.success(), "{tests:?}");
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");
}

/// planex tasks in worktrees (`-c 2`) each write a test and run it with the
/// project's venv, which every worktree gets without configuration.
#[test]
fn planex_tasks_in_worktrees_run_pytest_from_the_projects_venv() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("py");
    py_project(&dir);
    let mut csv = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status,findings,files_modified,tests_passed,acceptance_met,error\n".to_owned();
    for i in 1..=3 {
        let directive = format!(
            "printf 'import app\\n\\ndef test_t{i}():\\n    assert app.dumps({{\"n\": {i}}}) == \\047{{\"n\": {i}}}\\047\\n' > test_t{i}.py && .venv/bin/python -m pytest -q test_t{i}.py"
        );
        csv.push_str(&format!(
            "T{i},Test {i},,,,,,\"{}\",,,,pending,,,,,\n",
            directive.replace('"', "\"\"")
        ));
    }
    write(&dir.join("tasks.csv"), &csv);
    let o = orchestrator(&dir, &["planex", "run", "tasks.csv", "-y", "-c", "2"], None);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("each worktree gets .venv/ (detected"),
        "{}",
        show(&o)
    );
    for i in 1..=3 {
        assert!(read(&dir.join(format!("test_t{i}.py"))).contains(&format!("def test_t{i}")));
    }
    assert_eq!(subjects(&dir).len(), 3, "one commit per task: {}", show(&o));
    let tests = Command::new(dir.join(".venv/bin/python"))
        .args(["-m", "pytest", "-q"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(tests.status.success(), "{tests:?}");
}

/// ci-autofix `--local`: a failing `ruff check` (an unused import) is
/// mechanical, the builtin agent runs `ruff check --fix`, the pytest check
/// stays green, one commit; a failing pytest assertion is semantic and is
/// escalated without a commit.
#[test]
fn ci_autofix_local_fixes_a_failing_ruff_check_and_escalates_a_failing_pytest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("py");
    repo(
        &dir,
        &[
            (".gitignore", ".venv/\n__pycache__/\n"),
            (
                "pyproject.toml",
                "[tool.ruff.lint]\nselect = [\"F\"]\n\n[tool.pytest.ini_options]\naddopts = \"-p no:cacheprovider\"\n",
            ),
            (
                "app.py",
                "import os\n\n\ndef add(a, b):\n    return a + b\n",
            ),
            (
                "test_app.py",
                "import app\n\n\ndef test_add():\n    assert app.add(2, 2) == 4\n",
            ),
        ],
    );
    venv(&dir);
    let bin = fixers().join("venv/bin");
    let pytest = ".venv/bin/python -m pytest -q";
    let o = orchestrator(
        &dir,
        &[
            "ci-autofix",
            "--local",
            "--check",
            "ruff check .",
            "--check",
            pytest,
            "-y",
        ],
        Some(&bin),
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // What `ruff check --fix` leaves: the import's line gone, the blank
    // lines after it kept.
    assert_eq!(
        read(&dir.join("app.py")),
        "\n\ndef add(a, b):\n    return a + b\n"
    );
    assert_eq!(
        subjects(&dir),
        ["fix(ci): auto-fix mechanical failure (iter 1)"]
    );
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");

    write(
        &dir.join("app.py"),
        "\n\ndef add(a, b):\n    return a - b\n",
    );
    git(&dir, &["commit", "-q", "-am", "subtract"]);
    let o = orchestrator(
        &dir,
        &[
            "ci-autofix",
            "--local",
            "--check",
            "ruff check .",
            "--check",
            pytest,
            "-y",
        ],
        Some(&bin),
    );
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("- **classification**: semantic"), "{out}");
    assert!(
        out.contains("test_add"),
        "the failing test is in the evidence: {out}"
    );
    assert_eq!(subjects(&dir).len(), 2, "no commit: {}", show(&o));
}

// -------------------------------------------------------------- JavaScript

const LIB_JS: &str = "'use strict';

var scale = 2;

function describe(value) {
    if (value === undefined) {
        return 'none';
    } else {
        return 'value: ' + value;
    }
}

module.exports = {
    describe: describe,
    Point: function (x, y) {
        this.x = x * scale;
        this.y = y * scale;
    },
};
";

/// `Point` is a constructor: ESLint's object-shorthand fix turns it into a
/// method, which `new` refuses.
const LIB_TEST_JS: &str = "'use strict';
const test = require('node:test');
const assert = require('node:assert');
const lib = require('../lib');
const pad = require('pad-dep');

test('describe', () => {
    assert.strictEqual(lib.describe(undefined), 'none');
    assert.strictEqual(lib.describe(3), pad('value: 3'));
});

test('Point is a constructor', () => {
    assert.strictEqual(new lib.Point(1, 2).y, 4);
});
";

const ESLINT_CONFIG: &str = r#"export default [
  {
    files: ["**/*.js"],
    languageOptions: { ecmaVersion: "latest", sourceType: "commonjs" },
    rules: {
      "no-var": "error",
      "prefer-const": "error",
      "no-else-return": "error",
      "object-shorthand": "error",
      "prefer-template": "error",
    },
  },
];
"#;

/// A JavaScript project whose tests need an ignored dependency
/// (`node_modules/pad-dep`) and run with `npm test` (`node --test`).
fn js_project(dir: &Path) {
    repo(
        dir,
        &[
            (".gitignore", "node_modules/\n"),
            (
                "package.json",
                "{\n  \"name\": \"tiny\",\n  \"private\": true,\n  \"scripts\": {\"test\": \"node --test\"}\n}\n",
            ),
            ("eslint.config.mjs", ESLINT_CONFIG),
            ("lib.js", LIB_JS),
            ("test/lib.test.js", LIB_TEST_JS),
        ],
    );
    write(
        &dir.join("node_modules/pad-dep/index.js"),
        "module.exports = (s) => s;\n",
    );
}

/// review-fix reads ESLint's JSON: each fix is verified with `npm test`
/// (inferred; `node --test` needs the ignored `node_modules/`, which the
/// worktrees get), the constructor-breaking one is kept out, and the
/// template-literal fix, deferred because the `else` removal spans it,
/// lands on the next pass.
#[test]
fn review_fix_applies_eslint_fixes_verified_by_node_test() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("js");
    js_project(&dir);
    let lint = format!("{} -f json lib.js", eslint().display());
    let findings = tmp.path().join("eslint.json");
    let out = Command::new("sh")
        .args(["-c", &lint])
        .current_dir(&dir)
        .output()
        .unwrap();
    std::fs::write(&findings, &out.stdout).unwrap();

    let o = orchestrator(
        &dir,
        &[
            "review-fix",
            "--fix",
            findings.to_str().unwrap(),
            "--agent",
            "builtin",
            "--relint",
            &lint,
            "-y",
        ],
        None,
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "the Point fix fails: {}",
        show(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("test command `npm test`"), "{err}");
    // What `eslint --fix` makes of it, but the constructor.
    let fixed = [
        "'use strict';\n\nconst scale = 2;\n\nfunction describe(value) {\n",
        "    if (value === undefined) {\n        return 'none';\n    } \n",
        "        return `value: ${  value}`;\n    \n}\n\n",
        "module.exports = {\n    describe,\n    Point: function (x, y) {\n",
        "        this.x = x * scale;\n        this.y = y * scale;\n    },\n};\n",
    ];
    assert_eq!(read(&dir.join("lib.js")), fixed.concat(), "{}", show(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("object-shorthand@lib.js:15:5 failed"),
        "{stdout}"
    );
    assert!(stdout.contains("deferred to a re-lint"), "{stdout}");
    for s in subjects(&dir) {
        assert!(
            s.contains("@lib.js:") && !s.contains(tmp.path().to_str().unwrap()),
            "{s}"
        );
    }
    assert_eq!(
        read(&dir.join("node_modules/pad-dep/index.js")),
        "module.exports = (s) => s;\n"
    );
}

/// planex tasks in worktrees run `node --test` on tests that need the
/// ignored `node_modules/`.
#[test]
fn planex_tasks_in_worktrees_run_node_test_with_the_ignored_node_modules() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("js");
    js_project(&dir);
    let mut csv = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status,findings,files_modified,tests_passed,acceptance_met,error\n".to_owned();
    for i in 1..=3 {
        let directive = format!(
            "printf \"const test = require('node:test');\\nconst pad = require('pad-dep');\\ntest('t{i}', () => {{ if (pad('{i}') !== '{i}') throw new Error('pad'); }});\\n\" > test/t{i}.test.js && node --test test/t{i}.test.js"
        );
        csv.push_str(&format!(
            "T{i},Test {i},,,,,,\"{}\",,,,pending,,,,,\n",
            directive.replace('"', "\"\"")
        ));
    }
    write(&dir.join("tasks.csv"), &csv);
    let o = orchestrator(&dir, &["planex", "run", "tasks.csv", "-y", "-c", "2"], None);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("each worktree gets node_modules/ (detected"),
        "{}",
        show(&o)
    );
    assert_eq!(subjects(&dir).len(), 3, "{}", show(&o));
    for i in 1..=3 {
        assert!(dir.join(format!("test/t{i}.test.js")).is_file());
    }
}

/// ci-autofix `--local` on a failing ESLint check: the builtin agent runs
/// `eslint --fix`, `npm test` stays green.
#[test]
fn ci_autofix_local_fixes_a_failing_eslint_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("js");
    repo(
        &dir,
        &[
            (".gitignore", "node_modules/\n"),
            (
                "package.json",
                "{\n  \"name\": \"tiny\",\n  \"private\": true,\n  \"scripts\": {\"test\": \"node --test\"}\n}\n",
            ),
            ("eslint.config.mjs", ESLINT_CONFIG),
            (
                "lib.js",
                "'use strict';\n\nvar two = 2;\n\nmodule.exports = { double: (x) => x * two };\n",
            ),
            (
                "test/lib.test.js",
                "const test = require('node:test');\nconst assert = require('node:assert');\nconst lib = require('../lib');\ntest('double', () => assert.strictEqual(lib.double(2), 4));\n",
            ),
        ],
    );
    let bin = fixers().join("js/node_modules/.bin");
    let o = orchestrator(
        &dir,
        &[
            "ci-autofix",
            "--local",
            "--check",
            "eslint .",
            "--check",
            "npm test",
            "-y",
        ],
        Some(&bin),
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        read(&dir.join("lib.js")),
        "'use strict';\n\nconst two = 2;\n\nmodule.exports = { double: (x) => x * two };\n"
    );
    assert_eq!(
        subjects(&dir),
        ["fix(ci): auto-fix mechanical failure (iter 1)"]
    );
}

/// The Python quickstart (`examples/quickstart_python.rs`) does what the
/// README says: of ruff's four safe fixes, the three that pass the
/// project's unittest tests land, the fourth is rolled back and reported,
/// and the unsafe one is left, as `ruff check --fix` leaves it.
#[test]
fn the_python_quickstart_lands_the_safe_fixes_that_pass_its_tests() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart-python");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("quickstart");
    let files: Vec<(String, String)> = ["stats.py", "test_stats.py", "ruff.json", ".gitignore"]
        .iter()
        .map(|f| ((*f).to_owned(), read(&example.join(f))))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    repo(&dir, &refs);
    let o = orchestrator(
        &dir,
        &[
            "review-fix",
            "--fix",
            "ruff.json",
            "--agent",
            "builtin",
            "--test-cmd",
            "python3 -m unittest -q",
            "-y",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(
        subjects(&dir),
        [
            "fix(quality): `os` imported but unused [F401@stats.py:4:8]",
            "fix(quality): Unnecessary `else` after `return` statement [RET505@stats.py:17:5]",
            "fix(quality): Use f-string instead of `format` call [UP032@stats.py:23:12]",
        ]
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("findings: 5 (3 fixed, 1 failed, 1 not fixable by this agent, 0 rejected)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("F401@stats.py:5:8 failed after 2 attempts"),
        "{stdout}"
    );
    assert!(read(&dir.join("stats.py")).contains("import sys\n"));
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");
}
