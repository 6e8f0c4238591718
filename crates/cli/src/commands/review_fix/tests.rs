use super::*;
use clap::Parser;

fn parse(args: &[&str]) -> ReviewFixArgs {
    let mut argv = vec!["orchestrator", "review-fix"];
    argv.extend_from_slice(args);
    match crate::Cli::try_parse_from(argv).unwrap().command {
        crate::Command::ReviewFix(a) => a,
        other => panic!("parsed {other:?}"),
    }
}

#[test]
fn flags_parse_and_override_the_config_file() {
    let args = parse(&[
        "--fix",
        "a.json",
        "--fix",
        "b.sarif",
        "--max-iterations",
        "5",
        "--max-parallel-groups",
        "2",
        "--isolation",
        "serial",
        "-y",
        "--json",
    ]);
    assert_eq!(
        args.fix,
        [PathBuf::from("a.json"), PathBuf::from("b.sarif")]
    );
    assert!(args.yes && args.json && !args.dry_run);
    let config =
        Config::parse_str("version = 1\n[review_fix]\nbatch_size = 7\nmax_iterations = 9\n")
            .unwrap();
    let flow = flow_config(&args, &config, vec![], PlannerMode::Deterministic);
    assert_eq!(flow.max_iterations, 5, "the flag wins over the file");
    assert_eq!(flow.batch_size, 7, "the file wins over the default");
    assert_eq!(flow.max_parallel, 10, "the default");
    assert_eq!(flow.max_parallel_groups, 2);
    assert_eq!(flow.isolation, Isolation::Serial);
    assert_eq!(flow.planner, PlannerMode::Deterministic);
}

#[test]
fn zero_counts_and_unknown_isolation_are_usage_errors() {
    let bad = |args: &[&str]| {
        let mut argv = vec!["orchestrator", "review-fix"];
        argv.extend_from_slice(args);
        crate::Cli::try_parse_from(argv).unwrap_err().kind()
    };
    assert_eq!(
        bad(&["--fix", "x", "--batch-size", "0"]),
        clap::error::ErrorKind::ValueValidation
    );
    assert_eq!(
        bad(&["--fix", "x", "--isolation", "docker"]),
        clap::error::ErrorKind::InvalidValue
    );
}

#[test]
fn the_test_command_comes_from_the_flag_the_file_or_the_project() {
    let dir = tempfile::tempdir().unwrap();
    let none = Config::default();
    let err = resolve_tests(None, &none, dir.path()).unwrap_err();
    assert!(err.contains("--test-cmd"), "{err}");

    std::fs::write(dir.path().join("go.mod"), "module x\n").unwrap();
    let inferred = resolve_tests(None, &none, dir.path()).unwrap();
    assert_eq!(inferred.display(), "go test ./...");
    assert_eq!(inferred.source, "inferred: go.mod found");

    let file =
        Config::parse_str("version = 1\n[tests]\ncommand = \"make check\"\ntimeout_secs = 60\n")
            .unwrap();
    let from_file = resolve_tests(None, &file, dir.path()).unwrap();
    assert_eq!(
        from_file.command,
        TestCommand::Argv(vec!["make".into(), "check".into()])
    );
    assert_eq!(from_file.time_limit, Some(Duration::from_secs(60)));

    let flag = resolve_tests(Some("cargo test -q 'a b'"), &file, dir.path()).unwrap();
    assert_eq!(
        flag.command,
        TestCommand::Argv(vec![
            "cargo".into(),
            "test".into(),
            "-q".into(),
            "a b".into()
        ])
    );
    assert_eq!(flag.source, "--test-cmd");
    let piped = resolve_tests(Some("cargo test | tee log"), &file, dir.path()).unwrap_err();
    assert!(piped.contains("sh -c"), "{piped}");
}

#[test]
fn the_relint_command_comes_from_the_flag_or_the_file() {
    let repo = Path::new("/repo");
    let none = Config::default();
    assert!(
        resolve_relint(&parse(&["--fix", "x"]), &none, repo)
            .unwrap()
            .is_none()
    );
    let file = Config::parse_str(
        "version = 1\n[review_fix]\nrelint = [\"cargo\", \"clippy\", \"--message-format=json\"]\nrelint_passes = 2\n",
    )
    .unwrap();
    let from_file = resolve_relint(&parse(&["--fix", "x"]), &file, repo)
        .unwrap()
        .unwrap();
    assert_eq!(from_file.command.program, "cargo");
    assert_eq!(from_file.command.args, ["clippy", "--message-format=json"]);
    assert_eq!(from_file.command.cwd, repo);
    assert_eq!(from_file.max_passes, 2);
    let flag = resolve_relint(
        &parse(&[
            "--fix",
            "x",
            "--relint",
            "ruff check --output-format sarif",
            "--relint-passes",
            "7",
        ]),
        &file,
        repo,
    )
    .unwrap()
    .unwrap();
    assert_eq!(flag.command.program, "ruff");
    assert_eq!(flag.max_passes, 7, "the flag wins over the file");
    let bad = Config::parse_str("version = 1\n[review_fix]\nrelint = []\n").unwrap();
    let err = resolve_relint(&parse(&["--fix", "x"]), &bad, repo).unwrap_err();
    assert!(err.contains("[review_fix] relint"), "{err}");
}

#[test]
fn the_resume_hint_quotes_the_repository() {
    assert_eq!(
        resume_hint(Path::new("/work/repo")),
        "orchestrator review-fix --resume --repo /work/repo"
    );
    assert_eq!(
        resume_hint(Path::new("/my repo's")),
        r"orchestrator review-fix --resume --repo '/my repo'\''s'"
    );
}

#[test]
fn terminal_lines_keep_the_first_line_of_a_failure() {
    assert_eq!(
        first_line(
            "the tests failed (failing: a::b); the fix was rolled back. Test output (tail):\nrunning 5 tests\n"
        ),
        "the tests failed (failing: a::b); the fix was rolled back."
    );
    assert_eq!(first_line("one line"), "one line");
    assert_eq!(first_line(""), "");
    let seen = Arc::new(orchestrator_core::event::CollectingSink::default());
    let sink = FirstLines(seen.clone());
    sink.emit(&Event::Warning {
        message: "first\nsecond".into(),
    });
    assert_eq!(
        seen.events(),
        [Event::Warning {
            message: "first".into()
        }]
    );
}

#[test]
fn worktrees_get_their_own_cargo_target_dir_and_the_main_tree_inherits() {
    let tests = CliTests::new(ResolvedTests {
        command: TestCommand::Argv(vec!["cargo".into(), "test".into()]),
        source: "--test-cmd".into(),
        time_limit: None,
        junit_report: None,
    });
    let main = tests.command_runner(&TreeEnv {
        root: "/repo".into(),
        worktree_slot: None,
        cargo_target_dir: None,
        env: std::collections::BTreeMap::new(),
    });
    let wt = tests.command_runner(&TreeEnv {
        root: "/repo/.review/wt".into(),
        worktree_slot: Some(1),
        cargo_target_dir: Some("/s/targets/wt1".into()),
        env: std::collections::BTreeMap::from([(
            "VIRTUAL_ENV".to_owned(),
            "/repo/.review/wt/.venv".to_owned(),
        )]),
    });
    assert_eq!(
        main,
        CommandTestRunner::argv(["cargo", "test"]),
        "the main tree runs with the caller's environment"
    );
    assert_eq!(
        wt,
        CommandTestRunner::argv(["cargo", "test"])
            .env("CARGO_TARGET_DIR", "/s/targets/wt1")
            .env("VIRTUAL_ENV", "/repo/.review/wt/.venv"),
        "a worktree's runs get its target directory and the provisioner's environment"
    );
}
