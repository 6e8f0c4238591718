//! Hostile text through the real adapters: finding titles, task titles,
//! file names and agent instructions holding shell metacharacters, newlines,
//! ANSI escapes and strings that look like git options
//! (`--upload-pack=touch pwned`, `-c core.sshCommand=touch pwned`, a file
//! named `-f` or `--force`). They go through `GitVcs` (commit messages and
//! paths, checkpoint / restore, push / cherry-pick / worktree arguments),
//! `ProcessRunner`, `CommandTestRunner` and `ProcessAgent`, and must never
//! execute or become options: no `pwned` marker appears anywhere, and what
//! went in comes out byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_adapters::agents::{InstructionInput, ProcessAgent};
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::agent::{Agent, AgentRequest, Role};
use orchestrator_core::command::{CommandRunner, CommandSpec};
use orchestrator_core::test_runner::{TestRequest, TestRunner};
use orchestrator_core::vcs::{CommitId, Vcs};
use reliability_support::{Repo, git};

/// A directory that must stay empty: every hostile string below tries to
/// `touch` a file in it (and, for relative paths, in the working directory).
struct Marker {
    dir: tempfile::TempDir,
}

impl Marker {
    fn new() -> Marker {
        Marker {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("pwned")
    }

    /// Hostile strings aimed at this marker (and at `./pwned`).
    fn strings(&self) -> Vec<String> {
        let m = self.path().display().to_string();
        vec![
            format!("--upload-pack=touch {m}"),
            format!("-c core.sshCommand=touch {m}"),
            format!("--receive-pack=touch {m}"),
            format!("--exec=touch {m}"),
            format!("$(touch {m})"),
            format!("`touch {m}`"),
            format!("; touch {m}; #"),
            format!("| touch {m}"),
            format!("&& touch {m}"),
            format!("'\"; touch {m}; echo \"'"),
            "$(touch pwned)".to_owned(),
            "--amend".to_owned(),
            "-f".to_owned(),
            "--force".to_owned(),
            "line one\nline two\n\n-c core.sshCommand=touch pwned\n".to_owned(),
            "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[2J cleared".to_owned(),
            "tab\there\rcarriage return".to_owned(),
            "unicode: héllo wörld — ✓ 日本".to_owned(),
        ]
    }

    /// Fails if any hostile string ran.
    fn assert_untouched(&self, dirs: &[&Path]) {
        assert!(
            !self.path().exists(),
            "a hostile string ran: {} exists",
            self.path().display()
        );
        for dir in dirs {
            let local = dir.join("pwned");
            assert!(
                !local.exists(),
                "a hostile string ran: {} exists",
                local.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_messages_are_data_and_round_trip() {
    let marker = Marker::new();
    let repo = Repo::new();
    let vcs = GitVcs::open(repo.path()).await.unwrap();
    for (i, message) in marker.strings().iter().enumerate() {
        std::fs::write(repo.path().join("src/lib.rs"), format!("fn v{i}() {{}}\n")).unwrap();
        let commit = vcs
            .commit(&["src/lib.rs".to_owned()], message)
            .await
            .unwrap();
        let stored = git(repo.path(), &["log", "-1", "--format=%B", commit.as_str()]);
        // `%B` ends the body with one newline of its own.
        let stored = stored.strip_suffix('\n').unwrap();
        assert_eq!(stored, message.as_str(), "message {i} did not round-trip");
    }
    marker.assert_untouched(&[repo.path(), &std::env::current_dir().unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_names_that_look_like_options_are_paths() {
    let marker = Marker::new();
    let repo = Repo::new();
    let vcs = GitVcs::open(repo.path()).await.unwrap();
    let names: Vec<String> = vec![
        "-f".into(),
        "--force".into(),
        "--upload-pack=touch pwned".into(),
        "-c core.sshCommand=touch pwned".into(),
        "$(touch pwned)".into(),
        "`touch pwned`".into(),
        "; touch pwned".into(),
        " leading space".into(),
        "new\nline".into(),
        "\x1b[31mansi".into(),
        "*".into(),
        ":(glob)**".into(),
    ];
    let checkpoint = vcs.checkpoint().await.unwrap();
    for name in &names {
        std::fs::write(repo.path().join(name), format!("content of {name:?}\n")).unwrap();
    }
    let mut changed = vcs.changed_since(&checkpoint).await.unwrap();
    changed.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(
        changed, expected,
        "changed_since must list the files by their names"
    );

    let commit = vcs.commit(&names, "add oddly named files").await.unwrap();
    let tree = git(
        repo.path(),
        &["ls-tree", "-r", "-z", "--name-only", commit.as_str()],
    );
    let mut in_tree: Vec<&str> = tree.split('\0').filter(|s| !s.is_empty()).collect();
    in_tree.sort_unstable();
    let mut want: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .chain(["src/lib.rs"])
        .collect();
    want.sort_unstable();
    assert_eq!(in_tree, want);
    assert!(vcs.status().await.unwrap().is_clean());

    // Restore brings back exactly these files.
    let checkpoint = vcs.checkpoint().await.unwrap();
    for name in &names {
        std::fs::write(repo.path().join(name), "changed\n").unwrap();
    }
    let mut restored = vcs.restore(&checkpoint).await.unwrap();
    restored.sort();
    assert_eq!(restored, expected);
    for name in &names {
        let text = std::fs::read_to_string(repo.path().join(name)).unwrap();
        assert_eq!(text, format!("content of {name:?}\n"));
    }
    marker.assert_untouched(&[repo.path(), &std::env::current_dir().unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn option_like_remotes_branches_and_commits_are_refused() {
    let marker = Marker::new();
    let repo = Repo::new();
    let vcs = GitVcs::open(repo.path()).await.unwrap();
    let head_before = vcs.head().await.unwrap();
    for hostile in marker.strings() {
        let pushed = vcs.push(&hostile, "main").await;
        // A remote or branch that is not an option may still be a (failing)
        // remote name; either way nothing may run.
        if hostile.starts_with('-') {
            assert!(pushed.is_err(), "push to {hostile:?} was not refused");
        }
        let _ = vcs.push("origin", &hostile).await;
        let picked = vcs.cherry_pick(&CommitId(hostile.clone())).await;
        assert!(picked.is_err(), "cherry-pick of {hostile:?} did not fail");
        let wt = repo.path().join("wt");
        let added = vcs.worktree_add(&wt, &hostile, &head_before).await;
        if let Ok(tree) = added {
            // A legal branch name (spaces are not legal; most of these fail):
            // the branch is exactly the hostile text, not an option.
            assert_eq!(
                tree.current_branch().await.unwrap().as_deref(),
                Some(hostile.as_str())
            );
            vcs.worktree_remove(&wt, &hostile).await.unwrap();
        }
    }
    assert_eq!(vcs.head().await.unwrap(), head_before);
    marker.assert_untouched(&[repo.path(), &std::env::current_dir().unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_runner_passes_arguments_as_data() {
    let marker = Marker::new();
    let dir = tempfile::tempdir().unwrap();
    let strings = marker.strings();
    let mut args = vec!["%s\\0".to_owned()];
    args.extend(strings.iter().cloned());
    let out = ProcessRunner::default()
        .run(CommandSpec::new("printf", args, dir.path()))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr);
    let printed: Vec<&str> = out.stdout.split('\0').filter(|s| !s.is_empty()).collect();
    assert_eq!(
        printed,
        strings.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // A program name that looks like an option or a shell line is only ever
    // a (missing) program.
    for program in [
        "--upload-pack=touch pwned",
        "touch pwned; true",
        "$(touch pwned)",
    ] {
        let err = ProcessRunner::default()
            .run(CommandSpec::new(program, Vec::<String>::new(), dir.path()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(program), "{err}");
    }
    marker.assert_untouched(&[dir.path(), &std::env::current_dir().unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_runner_patterns_never_reach_a_shell_as_code() {
    let marker = Marker::new();
    let dir = tempfile::tempdir().unwrap();
    let argv = CommandTestRunner::argv(["printf", "%s", "{pattern}"]);
    let shell = CommandTestRunner::shell("printf %s {pattern}");
    let env_shell = CommandTestRunner::shell("printf %s \"$ORCHESTRATOR_TEST_PATTERN\"");
    for pattern in marker.strings() {
        for (name, runner) in [("argv", &argv), ("shell", &shell), ("env", &env_shell)] {
            let request = TestRequest {
                pattern: Some(pattern.clone()),
                ..TestRequest::all(dir.path())
            };
            let report = runner.run(request).await.unwrap();
            assert_eq!(
                report.log.trim_end_matches('\n'),
                pattern.trim_end_matches('\n'),
                "{name}: {pattern:?}"
            );
        }
    }
    marker.assert_untouched(&[dir.path(), &std::env::current_dir().unwrap()]);
}

/// A fake agent CLI that records its argv (NUL-separated) and stdin, and
/// answers with its stdin.
fn recording_agent(dir: &Path) -> PathBuf {
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '%s\\0' \"$@\" > \"$REC/argv\"\ncat > \"$REC/stdin\"\ncat \"$REC/stdin\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn recorded_argv(dir: &Path) -> Vec<String> {
    let raw = std::fs::read_to_string(dir.join("argv")).unwrap();
    raw.split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_instructions_are_data_on_stdin_and_never_options_as_arguments() {
    let marker = Marker::new();
    let bin = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = recording_agent(bin.path());
    let stdin_agent =
        ProcessAgent::new("rec", &script, Vec::<String>::new()).env("REC", rec.path());
    let arg_agent = ProcessAgent::new("rec", &script, ["--mode", "{instruction}"])
        .instruction_input(InstructionInput::Argument)
        .env("REC", rec.path());
    let gemini = ProcessAgent::gemini()
        .program(&script)
        .env("REC", rec.path());
    let gemini_arg = gemini.clone().instruction_input(InstructionInput::Argument);
    let hostile = marker.strings();
    for instruction in &hostile {
        let request = AgentRequest::new("hostile", Role::Fix, instruction.clone(), work.path());

        // On stdin the instruction arrives byte for byte.
        let answer = stdin_agent.run(request.clone()).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(rec.path().join("stdin")).unwrap(),
            *instruction
        );
        assert_eq!(answer.text, instruction.trim_end());

        // As an argument it is one argument, never read as an option.
        arg_agent.run(request.clone()).await.unwrap();
        let argv = recorded_argv(rec.path());
        assert_eq!(argv.len(), 2, "{argv:?}");
        assert_eq!(argv[0], "--mode");
        assert!(
            !argv[1].starts_with('-'),
            "the instruction became an option: {argv:?}"
        );
        assert_eq!(argv[1].trim_start(), instruction.trim_start());

        // The gemini preset passes it on stdin, never in argv.
        let _ = gemini.run(request.clone()).await;
        assert_eq!(
            std::fs::read_to_string(rec.path().join("stdin")).unwrap(),
            *instruction
        );
        let argv = recorded_argv(rec.path());
        assert_eq!(
            argv,
            ["--skip-trust", "-o", "json", "--approval-mode", "auto_edit"]
        );

        // In argument mode it is the value of -p, which must not look like
        // an option either (yargs would read `-p --yolo` as a flag).
        let _ = gemini_arg.run(request).await;
        let argv = recorded_argv(rec.path());
        let p = argv.iter().position(|a| a == "-p").expect("-p");
        assert!(
            !argv[p + 1].starts_with('-'),
            "the prompt became an option: {argv:?}"
        );
        assert_eq!(argv[p + 1].trim_start(), instruction.trim_start());
    }
    // A NUL cannot be an argument: a typed error, not a panic.
    let request = AgentRequest::new("nul", Role::Fix, "a\0b", work.path());
    let err = arg_agent.run(request).await.unwrap_err();
    assert!(!err.to_string().is_empty());
    marker.assert_untouched(&[work.path(), &std::env::current_dir().unwrap()]);
}

/// A shared handle: the hostile-text cases run the same adapters the flows
/// get through `Arc<dyn …>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapters_behind_trait_objects_behave_the_same() {
    let marker = Marker::new();
    let repo = Repo::new();
    let vcs: Arc<dyn Vcs> = Arc::new(GitVcs::open(repo.path()).await.unwrap());
    let title = "Fix: `$(touch pwned)` --upload-pack=touch pwned\n\x1b[31m";
    std::fs::write(repo.path().join("-f"), "x\n").unwrap();
    let commit = vcs.commit(&["-f".to_owned()], title).await.unwrap();
    let log = vcs.log_since(&CommitId("HEAD~1".into())).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].id, commit);
    assert_eq!(log[0].message.trim_end(), title.trim_end());
    marker.assert_untouched(&[repo.path(), &std::env::current_dir().unwrap()]);
}
