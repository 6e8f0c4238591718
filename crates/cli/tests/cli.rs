//! The `orchestrator` binary, run as a user runs it: real process, real files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn orchestrator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .args(args)
        .current_dir(repo_root())
        .env_remove("RUST_LOG")
        .env("COLUMNS", "100")
        .output()
        .expect("run orchestrator")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_lists_every_command_and_the_exit_codes() {
    let o = orchestrator(&["--help"]);
    assert!(o.status.success());
    insta::assert_snapshot!("help", stdout(&o));
}

#[test]
fn serve_help_documents_its_flags() {
    let o = orchestrator(&["serve", "--help"]);
    assert!(o.status.success());
    insta::assert_snapshot!("serve_help", stdout(&o));
}

#[test]
fn ci_autofix_help_documents_the_confirmation_gate() {
    for (args, name) in [
        (&["ci-autofix", "--help"][..], "ci_autofix_help"),
        (
            &["ci-autofix", "approve", "--help"][..],
            "ci_autofix_approve_help",
        ),
        (
            &["ci-autofix", "decline", "--help"][..],
            "ci_autofix_decline_help",
        ),
    ] {
        let o = orchestrator(args);
        assert!(o.status.success(), "{args:?}");
        insta::assert_snapshot!(name, stdout(&o));
    }
}

#[test]
fn batch_prints_the_batches_of_the_example_export() {
    let o = orchestrator(&["batch", "examples/data/review-findings.json"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    insta::assert_snapshot!("batch_text", stdout(&o));
}

#[test]
fn batch_json_has_the_documented_shape() {
    let o = orchestrator(&[
        "batch",
        "examples/data/review-findings.json",
        "--batch-size",
        "3",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let batches = v["batches"].as_array().unwrap();
    let total: usize = batches
        .iter()
        .map(|b| b["findings"].as_array().unwrap().len())
        .sum();
    assert_eq!(total, 15, "every finding in exactly one batch");
    assert!(
        batches
            .iter()
            .all(|b| b["findings"].as_array().unwrap().len() <= 3)
    );
    assert_eq!(batches[0]["batch_id"], 1);
    assert!(batches[0]["primary_file"].is_string());
    assert!(batches[0]["primary_dimension"].is_string());
}

#[test]
fn batch_reads_a_bare_array_with_string_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("findings.json");
    std::fs::write(
        &path,
        r#"[{"id":"a","title":"t","severity":"high","file":"x.rs","line":"7","recommendation":"r"},
           {"id":"b","title":"u","severity":"low","file":"x.rs","line":3}]"#,
    )
    .unwrap();
    let o = orchestrator(&["batch", path.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(
        stdout(&o).contains(r#""findings":["a","b"]"#),
        "{}",
        stdout(&o)
    );
}

/// `batch` reads every format `review-fix --fix` reads, detected from the
/// content as review-fix detects it: each finding review-fix's reader reads
/// lands in exactly one batch, and stderr names the format.
#[test]
fn batch_reads_every_format_review_fix_reads() {
    for (file, format) in [
        ("examples/data/review-findings.json", "review-cycle export"),
        ("examples/quickstart/clippy.json", "cargo"),
        ("crates/findings/tests/data/formats/sample.sarif", "sarif"),
        ("crates/findings/tests/data/formats/sample.rdjson", "rdjson"),
        (
            "crates/findings/tests/data/formats/sample.rdjsonl",
            "rdjsonl",
        ),
    ] {
        let read = orchestrator_review_fix::input::read_findings(&repo_root().join(file)).unwrap();
        assert!(!read.findings.is_empty(), "{file}");
        let o = orchestrator(&["batch", file, "--json"]);
        let code = if read.rejected.is_empty() { 0 } else { 1 };
        assert_eq!(o.status.code(), Some(code), "{file}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with(&format!("batch: {file}: read as {format}")),
            "{file}: {}",
            stderr(&o)
        );
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mut batched: Vec<String> = v["batches"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|b| b["findings"].as_array().unwrap().iter())
            .map(|id| id.as_str().unwrap().to_owned())
            .collect();
        batched.sort();
        let mut expected: Vec<String> = read.findings.iter().map(|f| f.id.to_string()).collect();
        expected.sort();
        assert_eq!(batched, expected, "{file}");
    }
}

#[test]
fn bad_inputs_exit_2_and_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, "{\"findings\": [\n  {\"id\": \"a\",").unwrap();
    let o = orchestrator(&["batch", truncated.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("truncated.json") && err.contains("line 2"),
        "{err}"
    );

    let o = orchestrator(&["batch", "does/not/exist.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does/not/exist.json"));

    let o = orchestrator(&[
        "batch",
        "examples/data/review-findings.json",
        "--batch-size",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2), "usage errors exit 2");

    let o = orchestrator(&["no-such-command"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn review_fix_without_a_readable_input_is_a_usage_error() {
    // Both are refused before the repository is touched.
    let o = orchestrator(&["review-fix"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--fix"), "{}", stderr(&o));
    let o = orchestrator(&["review-fix", "--fix", "no-such-findings.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no-such-findings.json"),
        "{}",
        stderr(&o)
    );
}

fn write_csv(dir: &Path, name: &str, rows: &str) -> String {
    let path = dir.join(name);
    let header = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave\n";
    std::fs::write(&path, format!("{header}{rows}")).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn waves_prints_the_example_plan() {
    let o = orchestrator(&["waves", "examples/data/tasks.csv"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    insta::assert_snapshot!("waves_text", stdout(&o));
    let o = orchestrator(&["waves", "examples/data/tasks.csv", "--json"]);
    assert_eq!(
        stdout(&o).trim(),
        r#"{"waves":{"T1":1,"T2":2,"T3":2,"T4":3,"T5":4},"max_wave":4}"#
    );
}

#[test]
fn waves_names_cycles_unknown_ids_and_bad_csv() {
    let dir = tempfile::tempdir().unwrap();
    let cyc = write_csv(
        dir.path(),
        "cycle.csv",
        "T1,a,,,,,,,T3,,\nT2,b,,,,,,,T1,,\nT3,c,,,,,,,T2,,\n",
    );
    let o = orchestrator(&["waves", &cyc]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("dependency cycle: T1 → T3 → T2 → T1"),
        "{}",
        stderr(&o)
    );

    let unknown = write_csv(
        dir.path(),
        "unknown.csv",
        "T1,a,,,,,,,T9,,\nT2,b,,,,,,,T1,,\n",
    );
    let o = orchestrator(&["waves", &unknown]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("T9"), "{}", stderr(&o));
    let o = orchestrator(&["waves", &unknown, "--lenient", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "lenient keeps the seed's ignore-and-warn"
    );
    assert!(stderr(&o).contains("warning") && stderr(&o).contains("T9"));
    assert_eq!(
        stdout(&o).trim(),
        r#"{"waves":{"T1":1,"T2":2},"max_wave":2}"#
    );

    let bad = write_csv(
        dir.path(),
        "bad.csv",
        "T1,a,,,,,,,,,\nT2,\"unclosed,,,,,,,,,\n",
    );
    let o = orchestrator(&["waves", &bad]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("bad.csv") && err.contains("line 3"), "{err}");
}

#[test]
fn completions_bash_defines_the_completion_for_orchestrator() {
    let o = orchestrator(&["completions", "bash"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("orchestrator.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    // Bash itself loads the script and reports the completion it registered.
    let bash = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && complete -p orchestrator",
            script.display()
        ))
        .output()
        .expect("run bash");
    assert!(bash.status.success(), "bash: {}", stderr(&bash));
    assert!(
        stdout(&bash).contains("-F _orchestrator")
            && stdout(&bash).trim_end().ends_with(" orchestrator"),
        "{}",
        stdout(&bash)
    );
    // Every subcommand is offered.
    for command in [
        "planex",
        "review-fix",
        "ci-autofix",
        "config",
        "completions",
        "man",
    ] {
        assert!(stdout(&o).contains(command), "{command} missing");
    }
}

#[test]
fn completions_exist_for_every_shell_clap_complete_knows() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = orchestrator(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        assert!(stdout(&o).contains("review-fix"), "{shell}: {}", stdout(&o));
    }
    let o = orchestrator(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value 'tcsh'"),
        "{}",
        stderr(&o)
    );
}

/// `docs/man/orchestrator.1`, packaged with the crate through the
/// `crates/cli/orchestrator.1` link.
#[test]
fn the_man_page_in_docs_is_current() {
    let committed = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("orchestrator.1"))
        .expect("read docs/man/orchestrator.1 (linked as crates/cli/orchestrator.1)");
    let generated = orchestrator_tool::man_page().unwrap();
    assert!(
        committed == generated,
        "docs/man/orchestrator.1 is stale; regenerate it with\n  \
         cargo run -q -p orchestrator-tool -- man > docs/man/orchestrator.1"
    );
    // `orchestrator man` prints the same page.
    let o = orchestrator(&["man"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(o.stdout, generated);
}

fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A user file under `<tmp>/xdg` and a repository file under `<tmp>/repo`.
fn two_config_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_file(
        &dir.path().join("xdg/orchestrator/config.toml"),
        "version = 1\n[agent]\nkind = \"openai\"\n[agent.openai]\nmodel = \"user-model\"\n\
         base_url = \"http://127.0.0.1:1/v1\"\n[review_fix]\nbatch_size = 3\n",
    );
    write_file(
        &dir.path().join("repo/orchestrator.toml"),
        "version = 1\n[agent.openai]\nmodel = \"repo-model\"\n[tests]\ncommand = [\"make\", \"check\"]\n",
    );
    dir
}

/// Runs the binary in `dir` with only `env` of the settings variables set
/// and the user file under `dir/xdg`.
fn orchestrator_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    command
        .args(args)
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env("COLUMNS", "100");
    for var in [
        "RUST_LOG",
        "ORCHESTRATOR_AGENT",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "ORCHESTRATOR_CACHE_MAX_SIZE",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    command.output().expect("run orchestrator")
}

#[test]
fn config_show_merges_the_user_and_repository_files_under_env_and_flags() {
    let dir = two_config_files();
    let tmp = dir.path().display().to_string();
    let o = orchestrator_in(dir.path(), &["config", "show", "--repo", "repo"], &[]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    insta::assert_snapshot!("config_show_files", stdout(&o).replace(&tmp, "<tmp>"));
    let o = orchestrator_in(
        dir.path(),
        &["config", "show", "--repo", "repo", "--agent", "codex"],
        &[("OPENAI_MODEL", "env-model")],
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    insta::assert_snapshot!(
        "config_show_env_and_flag",
        stdout(&o).replace(&tmp, "<tmp>")
    );
}

#[test]
fn config_flag_replaces_the_repository_file() {
    let dir = two_config_files();
    let tmp = dir.path().display().to_string();
    write_file(
        &dir.path().join("ci.toml"),
        "version = 1\n[agent]\nkind = \"gemini\"\n",
    );
    let o = orchestrator_in(
        dir.path(),
        &["--config", "ci.toml", "config", "show", "--repo", "repo"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    insta::assert_snapshot!("config_show_explicit", stdout(&o).replace(&tmp, "<tmp>"));
    let o = orchestrator_in(
        dir.path(),
        &["config", "show", "--config", "missing.toml"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: failed to read config file missing.toml:"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn flows_read_the_user_file_and_name_it_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().display().to_string();
    write_file(
        &dir.path().join("xdg/orchestrator/config.toml"),
        "version = 1\n[agent]\nkindd = \"codex\"\n",
    );
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    let findings = repo_root().join("examples/data/review-findings.json");
    let o = orchestrator_in(
        dir.path(),
        &[
            "review-fix",
            "--fix",
            findings.to_str().unwrap(),
            "--repo",
            "repo",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(&o));
    assert!(
        stderr(&o).replace(&tmp, "<tmp>").starts_with(
            "error: failed to parse config file <tmp>/xdg/orchestrator/config.toml at line 3, column 1: unknown field `kindd`"
        ),
        "{}",
        stderr(&o)
    );
}

/// Runs `orchestrator <args>` with stderr going to a file, as `2>log` does,
/// and returns the file's bytes.
fn stderr_into_a_file(args: &[&str], env: &[(&str, &str)]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let status = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .args(args)
        .current_dir(repo_root())
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .expect("run orchestrator");
    assert!(status.success());
    std::fs::read(&log).unwrap()
}

#[test]
fn logs_redirected_to_a_file_have_no_escape_bytes() {
    let has_escape = |bytes: &[u8]| bytes.contains(&0x1b);
    let log = stderr_into_a_file(&["-vv", "waves", "examples/data/tasks.csv"], &[]);
    let text = String::from_utf8_lossy(&log);
    assert!(text.contains("computed the waves"), "{text}");
    assert!(!has_escape(&log), "{text:?}");
    let never = stderr_into_a_file(
        &[
            "-vv",
            "--color",
            "never",
            "waves",
            "examples/data/tasks.csv",
        ],
        &[],
    );
    assert!(!has_escape(&never), "{:?}", String::from_utf8_lossy(&never));
    // The same run asked to colour does, even with NO_COLOR: the flag wins.
    let always = stderr_into_a_file(
        &[
            "-vv",
            "--color",
            "always",
            "waves",
            "examples/data/tasks.csv",
        ],
        &[("NO_COLOR", "1")],
    );
    assert!(
        has_escape(&always),
        "{:?}",
        String::from_utf8_lossy(&always)
    );
}
