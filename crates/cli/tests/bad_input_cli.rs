//! The bad-input corpus (`tests/data/bad-input/`) through the real
//! `orchestrator` binary, each case in its own temporary git repository,
//! through the flow that reads the file: findings through `review-fix
//! --fix`, task CSVs through `planex run`, handoffs through `ci-autofix
//! --handoff`, `orchestrator.toml` through review-fix and ci-autofix, and
//! session state through `review-fix --resume`, `planex --continue` and a
//! ci-autofix re-run. Generated here: 10 MB fields, unreadable inputs and
//! file names that are not UTF-8.
//!
//! The contract every case checks (issue 9): a file that cannot be read or
//! parsed exits 2; a bad entry inside a readable file is rejected on its own
//! and the rest goes on (exit 1, the good findings fixed and committed);
//! every message names the file and the place; no panic; and nothing is
//! written to the repository outside the engine-owned folders (`.review/`,
//! `.workflow/`, `.moai/`): `git status --ignored` and a file listing
//! (sizes and modification times) are compared before and after. The
//! messages are pinned with insta snapshots (temporary paths redacted).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod flow_support;

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use flow_support::{Sandbox, Snapshot, assert_no_panic, corpus, error_lines, show, stderr, stdout};

/// What a case must do.
enum Expect {
    /// Exit 2, nothing written; stderr names the input and holds these.
    Refused(&'static [&'static str]),
    /// Exit 1: these commits (in any order), and per rejected entry one
    /// `rejected` line on stdout holding these fragments, in order.
    Partly {
        commits: &'static [&'static str],
        rejected: &'static [&'static [&'static str]],
    },
}

/// The corpus files whose name starts with one of `prefixes`, sorted.
fn corpus_files(prefixes: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(corpus(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| prefixes.iter().any(|p| n.starts_with(p)))
        .collect();
    names.sort();
    names
}

fn assert_covers(cases: &[&str], prefixes: &[&str]) {
    let mut covered: Vec<String> = cases.iter().map(|c| (*c).to_owned()).collect();
    covered.sort();
    covered.dedup();
    assert_eq!(
        covered,
        corpus_files(prefixes),
        "every corpus file starting with {prefixes:?} has a case here"
    );
}

/// Exit 2, the message names `input` and holds `fragments`, and nothing
/// outside the engine folders changed.
fn assert_refused(
    case: &str,
    o: &Output,
    input: &str,
    fragments: &[&str],
    before: &Snapshot,
    after: &Snapshot,
) {
    assert_eq!(o.status.code(), Some(2), "{case}: {}", show(o));
    let err = stderr(o);
    assert!(
        err.contains(input),
        "{case}: {input} not named: {}",
        show(o)
    );
    assert!(
        err.lines().all(|l| l.matches(input).count() <= 1),
        "{case}: {input} named twice on a line: {}",
        show(o)
    );
    for f in fragments {
        assert!(err.contains(f), "{case}: {f:?} missing: {}", show(o));
    }
    assert_eq!(after, before, "{case}: something was written");
}

/// One line per case for the snapshot: the exit code, then the error lines
/// and `rejected` lines, and the commits made.
fn report_case(report: &mut String, sb: &Sandbox, case: &str, o: &Output) {
    let _ = writeln!(report, "{case}: exit {}", o.status.code().unwrap_or(-1));
    for line in error_lines(o) {
        let _ = writeln!(report, "  {}", sb.redact(&line));
    }
    for line in stdout(o).lines().filter(|l| l.contains(" rejected: ")) {
        let _ = writeln!(report, "  {}", sb.redact(line.trim()));
    }
    for c in sb.commits() {
        let _ = writeln!(report, "  commit: {c}");
    }
}

fn review_fix_cases() -> Vec<(&'static str, Expect)> {
    use Expect::{Partly, Refused};
    vec![
        ("findings-empty.json", Refused(&["the input is empty"])),
        ("findings-whitespace.json", Refused(&["the input is empty"])),
        ("findings-truncated.json", Refused(&["line 12, column 20"])),
        ("findings-invalid.json", Refused(&["line 2, column 29"])),
        (
            "findings-wrong-layout.json",
            Refused(&["`findings` is an object, expected an array"]),
        ),
        (
            "findings-binary.bin",
            Refused(&["not UTF-8 text (invalid byte at offset 4)"]),
        ),
        (
            "findings-lone-surrogate.json",
            Refused(&["line 1, column 79", "lone leading surrogate"]),
        ),
        (
            "findings-wrong-field-types.json",
            Partly {
                commits: &["fix(correctness): The good one [F4]"],
                rejected: &[
                    &["findings[0]", "field `line`"],
                    &["findings[1]", "field `severity`"],
                    &["findings[2]", "field `title`"],
                ],
            },
        ),
        (
            "findings-duplicate-ids.json",
            Partly {
                commits: &[
                    "fix(correctness): Unchecked index [F1]",
                    "fix(correctness): Third [F3]",
                ],
                rejected: &[&["findings[1]", "reuses id `F1` of findings[0]"]],
            },
        ),
        (
            "findings-outside-repo.json",
            Partly {
                commits: &["fix(correctness): Inside [F4]"],
                rejected: &[
                    &["F1 rejected", "`../../../etc/passwd` points outside"],
                    &["F2 rejected", "`/etc/passwd` points outside"],
                    &["F3 rejected", "`src/missing.rs` points at nothing"],
                ],
            },
        ),
        (
            "findings-symlink-escape.json",
            Partly {
                commits: &["fix(correctness): Inside [F2]"],
                rejected: &[&["F1 rejected", "`link-out/secret.txt` points outside"]],
            },
        ),
        (
            "sarif-wrong-types.sarif",
            Partly {
                commits: &["fix(quality): ok [R1@src/lib.rs:3:1]"],
                rejected: &[
                    &["runs[0].results[1]", "has no `message.text`"],
                    &["runs[0].results[2]", "is a string, expected an object"],
                ],
            },
        ),
        (
            "rdjsonl-bad-lines.jsonl",
            Partly {
                commits: &["fix(quality): first [rdjson@src/lib.rs:3:1]"],
                rejected: &[
                    &["rdjsonl-bad-lines.jsonl:2", "not a JSON object"],
                    &["rdjsonl-bad-lines.jsonl:3", "not a JSON object"],
                    &[
                        "rdjsonl-bad-lines.jsonl:4",
                        "`location.range.start.line` is a string, expected a number",
                    ],
                ],
            },
        ),
    ]
}

#[test]
fn review_fix_refuses_unreadable_findings_and_rejects_bad_entries_one_by_one() {
    let cases = review_fix_cases();
    let names: Vec<&str> = cases.iter().map(|(f, _)| *f).collect();
    assert_covers(&names, &["findings-", "sarif-", "rdjsonl-"]);
    let mut report = String::new();
    for (file, expect) in &cases {
        let sb = Sandbox::new();
        let input = sb.input(file);
        let shown = input.display().to_string();
        let before = sb.snapshot();
        let o = sb.run(&sb.review_fix_args(&input));
        assert_no_panic(file, &o);
        let after = sb.snapshot();
        match expect {
            Expect::Refused(fragments) => {
                assert_refused(file, &o, &shown, fragments, &before, &after);
                assert!(sb.commits().is_empty(), "{file}");
            }
            Expect::Partly { commits, rejected } => {
                assert_eq!(o.status.code(), Some(1), "{file}: {}", show(&o));
                let mut made = sb.commits();
                made.sort();
                let mut expected: Vec<String> = commits.iter().map(|c| (*c).to_owned()).collect();
                expected.sort();
                assert_eq!(made, expected, "{file}: the good findings are committed");
                // The commits changed src/lib.rs; nothing else appeared,
                // and the tree is clean.
                assert_eq!(after.status, before.status, "{file}");
                assert_eq!(after.paths(), before.paths(), "{file}");
                let out = stdout(&o);
                assert!(out.contains(&shown), "{file}: the file is named: {out}");
                let lines: Vec<&str> = out.lines().filter(|l| l.contains(" rejected: ")).collect();
                assert_eq!(lines.len(), rejected.len(), "{file}: {}", show(&o));
                for (line, fragments) in lines.iter().zip(rejected.iter()) {
                    for f in *fragments {
                        assert!(line.contains(f), "{file}: {f:?} missing from {line:?}");
                    }
                }
            }
        }
        assert_eq!(
            std::fs::read_to_string(sb.root.join("outside/secret.txt")).unwrap(),
            "not yours\n",
            "{file}: the file outside the repository is untouched"
        );
        report_case(&mut report, &sb, file, &o);
    }
    insta::assert_snapshot!("review_fix_findings_corpus", report);
}

/// `orchestrator batch` reads its input as `review-fix --fix` does (issue
/// 14, item 7): every corpus findings file review-fix refuses, batch
/// refuses with the same `error:` line (exit 2); the others it reads, and
/// the entries the format reader leaves out it lists as `rejected:` with
/// the location review-fix names (exit 1). Findings outside the repository
/// are review-fix's own check, made after reading: batch groups them.
#[test]
fn batch_reads_the_findings_corpus_like_review_fix() {
    let mut report = String::new();
    for (file, expect) in review_fix_cases() {
        let sb = Sandbox::new();
        let input = sb.input(file);
        let review_fix = sb.run(&sb.review_fix_args(&input));
        let batch = sb.run(&["batch".as_ref(), input.as_os_str()]);
        assert_no_panic(file, &batch);
        match expect {
            Expect::Refused(_) => {
                assert_eq!(batch.status.code(), Some(2), "{file}: {}", show(&batch));
                assert_eq!(
                    error_lines(&batch),
                    error_lines(&review_fix),
                    "{file}: the same message"
                );
            }
            Expect::Partly { rejected, .. } => {
                let lines: Vec<String> = stderr(&batch)
                    .lines()
                    .filter(|l| l.starts_with("rejected: "))
                    .map(str::to_owned)
                    .collect();
                let by_reader: Vec<&&[&str]> = rejected
                    .iter()
                    .filter(|fragments| !fragments.iter().any(|f| f.contains("points ")))
                    .collect();
                assert_eq!(lines.len(), by_reader.len(), "{file}: {}", show(&batch));
                for (line, fragments) in lines.iter().zip(by_reader) {
                    for f in fragments.iter().filter(|f| !f.ends_with(" rejected")) {
                        assert!(line.contains(f), "{file}: {f:?} missing from {line:?}");
                    }
                }
                let code = if lines.is_empty() { 0 } else { 1 };
                assert_eq!(batch.status.code(), Some(code), "{file}: {}", show(&batch));
            }
        }
        let _ = writeln!(report, "{file}: exit {}", batch.status.code().unwrap_or(-1));
        for line in stderr(&batch).lines() {
            let _ = writeln!(report, "  {}", sb.redact(line));
        }
    }
    insta::assert_snapshot!("batch_findings_corpus", report);
}

#[test]
fn planex_run_refuses_every_bad_tasks_csv_before_creating_a_session() {
    let cases: [(&str, &[&str]); 11] = [
        ("tasks-binary.bin", &["line 1: invalid UTF-8 in field 1"]),
        ("tasks-cycle.csv", &["dependency cycle: T1 → T3 → T2 → T1"]),
        (
            "tasks-duplicate-ids.csv",
            &["line 4: duplicate task id \"T1\" (first used at line 2)"],
        ),
        ("tasks-empty.csv", &["has no `id` column (header line 1)"]),
        (
            "tasks-invalid-utf8.csv",
            &["line 3: invalid UTF-8 in field 2"],
        ),
        (
            "tasks-missing-id-column.csv",
            &["has no `id` column (header line 1)"],
        ),
        (
            "tasks-ragged-row.csv",
            &["line 3: expected 17 fields (as in the header), found 3"],
        ),
        ("tasks-unbalanced-quote.csv", &["line 3: unbalanced quote"]),
        ("tasks-unclosed-quote.csv", &["line 4: unbalanced quote"]),
        (
            "tasks-unknown-dep.csv",
            &["line 3: task \"T2\" depends on unknown task \"T9\""],
        ),
        (
            "tasks-wrong-field-types.csv",
            &["line 3 column `wave`: invalid value \"second\""],
        ),
    ];
    let names: Vec<&str> = cases.iter().map(|(f, _)| *f).collect();
    assert_covers(&names, &["tasks-"]);
    let mut report = String::new();
    for (file, fragments) in cases {
        let (sb, o) = refused_file(file, fragments, planex_run, ".workflow");
        report_case(&mut report, &sb, file, &o);
    }
    insta::assert_snapshot!("planex_tasks_corpus", report);
}

#[test]
fn ci_autofix_refuses_bad_handoffs_and_bad_config_changes_nothing() {
    let cases: [(&str, &[&str]); 5] = [
        (
            "handoff-bad-check.json",
            &["handoff field `failedChecks[1].name` is missing"],
        ),
        ("handoff-empty.json", &["line 1 column 0"]),
        (
            "handoff-malformed.json",
            &["line 1 column 72", "trailing comma"],
        ),
        (
            "handoff-wrong-types.json",
            &["handoff field `prNumber` must be a positive integer"],
        ),
        // Binary garbage handed over as a handoff.
        (
            "findings-binary.bin",
            &["is not UTF-8 text (invalid byte at offset 4)"],
        ),
    ];
    let names: Vec<&str> = cases
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| f.starts_with("handoff-"))
        .collect();
    assert_covers(&names, &["handoff-"]);
    let mut report = String::new();
    for (file, fragments) in cases {
        let (sb, o) = refused_file(file, fragments, ci_autofix_handoff, ".moai");
        report_case(
            &mut report,
            &sb,
            &format!("ci-autofix --handoff {file}"),
            &o,
        );
    }

    // orchestrator.toml with an unknown key or a wrong type, committed in
    // the repository: every flow that reads it refuses to start.
    let config_cases: [(&str, &str); 2] = [
        (
            "config-unknown-key.toml",
            "line 5, column 1: unknown field `modle`",
        ),
        ("config-wrong-type.toml", "line 4, column 15: invalid type"),
    ];
    let names: Vec<&str> = config_cases.iter().map(|(f, _)| *f).collect();
    assert_covers(&names, &["config-"]);
    for (file, fragment) in config_cases {
        let mut sb = Sandbox::new();
        sb.commit_file(
            "orchestrator.toml",
            &std::fs::read_to_string(corpus(file)).unwrap(),
        );
        let findings = sb.input("findings-outside-repo.json");
        let runs: [(&str, Vec<OsString>); 2] = [
            ("review-fix", sb.review_fix_args(&findings)),
            (
                "ci-autofix",
                ["ci-autofix", "--local", "--check", "true", "-y"]
                    .iter()
                    .map(OsString::from)
                    .collect(),
            ),
        ];
        for (flow, args) in runs {
            let case = format!("{flow} with {file}");
            let before = sb.snapshot();
            let o = sb.run(&args);
            assert_no_panic(&case, &o);
            let after = sb.snapshot();
            assert_refused(&case, &o, "orchestrator.toml", &[fragment], &before, &after);
            report_case(&mut report, &sb, &case, &o);
        }
    }
    insta::assert_snapshot!("ci_autofix_handoffs_and_config", report);
}

// ------------------------------------------------------------ session state

const TASKS_HEADER: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave";

/// A planex session stopped at its gate (`planex run` without `-y` and no
/// terminal): two tasks that append to `ran.txt`. Returns its folder.
fn stopped_planex_session(sb: &Sandbox) -> std::path::PathBuf {
    let csv = format!(
        "{TASKS_HEADER}\nT1,First,Do first,,,,,echo one >> ran.txt,,,\nT2,Second,Do second,,,,,echo two >> ran.txt,T1,,\n"
    );
    let tasks = sb.write_input(OsStr::new("tasks.csv"), csv.as_bytes());
    let o = sb.run(&[OsStr::new("planex"), OsStr::new("run"), tasks.as_os_str()]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let root = sb.repo.join(".workflow/.lite-plan");
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap()
}

/// A review-fix session stopped at its plan gate (no `-y`, no terminal).
/// Returns its folder.
fn stopped_review_fix_session(sb: &Sandbox) -> std::path::PathBuf {
    let input = sb.input("findings-outside-repo.json");
    let mut args = sb.review_fix_args(&input);
    args.retain(|a| a.as_os_str() != "-y");
    let o = sb.run(&args);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let mut dirs: Vec<_> = std::fs::read_dir(sb.repo.join(".review/fixes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap()
}

#[test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn corrupt_session_state_is_refused_naming_the_file_and_position() {
    let mut report = String::new();
    let resume = |sb: &Sandbox| -> Vec<OsString> {
        vec![
            "review-fix".into(),
            "--resume".into(),
            "--agent".into(),
            sb.agent_spec().into(),
            "--test-cmd".into(),
            "true".into(),
            "-y".into(),
        ]
    };
    let mut covered = Vec::new();

    // review-fix: the active-session marker cut short or of the wrong
    // shape (a session a crash left), and the session's findings.json.
    for (corpus_file, place) in [
        ("state-truncated.json", "line 5 column 31"),
        ("state-wrong-types.json", "line 2 column 18"),
    ] {
        let sb = Sandbox::new();
        let dir = sb.repo.join(".review/fixes/fix-1");
        std::fs::create_dir_all(&dir).unwrap();
        let state = dir.join("active-fix-session.json");
        std::fs::copy(corpus(corpus_file), &state).unwrap();
        let case = format!("review-fix --resume, active-fix-session.json = {corpus_file}");
        check_state_case(&sb, &case, &resume(&sb), &state, place, &mut report);
        covered.push(corpus_file);
    }
    {
        let sb = Sandbox::new();
        let dir = stopped_review_fix_session(&sb);
        let state = dir.join("findings.json");
        std::fs::copy(corpus("state-wrong-types.json"), &state).unwrap();
        let case = "review-fix --resume, findings.json = state-wrong-types.json";
        check_state_case(
            &sb,
            case,
            &resume(&sb),
            &state,
            "line 2 column 18",
            &mut report,
        );
    }

    // ci-autofix: the state file of the branch, left by a crash.
    for (corpus_file, place) in [
        ("state-truncated.json", "line 5 column 31"),
        ("state-wrong-types.json", "line 2 column 18"),
    ] {
        let sb = Sandbox::new();
        let state = sb.repo.join(".moai/state/ci-autofix-local-main.json");
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        std::fs::copy(corpus(corpus_file), &state).unwrap();
        let args: Vec<OsString> = ["ci-autofix", "--local", "--check", "true", "-y"]
            .iter()
            .map(OsString::from)
            .collect();
        let case = format!("ci-autofix --local, state file = {corpus_file}");
        check_state_case(&sb, &case, &args, &state, place, &mut report);
    }

    // planex: session.json cut short, tasks.csv broken.
    for (file, corpus_file, place) in [
        ("session.json", "state-truncated.json", "line 5 column 31"),
        (
            "tasks.csv",
            "tasks-unbalanced-quote.csv",
            "line 3: unbalanced quote",
        ),
    ] {
        let sb = Sandbox::new();
        let dir = stopped_planex_session(&sb);
        let state = dir.join(file);
        std::fs::copy(corpus(corpus_file), &state).unwrap();
        let args: Vec<OsString> = ["planex", "--continue", "-y"]
            .iter()
            .map(OsString::from)
            .collect();
        let case = format!("planex --continue, {file} = {corpus_file}");
        check_state_case(&sb, &case, &args, &state, place, &mut report);
        assert!(!sb.repo.join("ran.txt").exists(), "{case}: no task ran");
    }

    // planex: a discovery board with broken lines is advisory: the broken
    // lines are skipped and reported by number, the session finishes.
    {
        let sb = Sandbox::new();
        let dir = stopped_planex_session(&sb);
        let board = dir.join("discoveries.ndjson");
        std::fs::copy(corpus("discoveries-corrupt.ndjson"), &board).unwrap();
        let before = sb.snapshot();
        let case = "planex --continue, discoveries.ndjson = discoveries-corrupt.ndjson";
        let o = sb.run(&["planex", "--continue", "-y"]);
        assert_no_panic(case, &o);
        assert_eq!(o.status.code(), Some(0), "{case}: {}", show(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "skipped 3 malformed lines in {} (lines 2, 3, 4)",
                board.display()
            )),
            "{case}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(sb.repo.join("ran.txt")).unwrap(),
            "one\ntwo\n"
        );
        // The tasks' own output landed as their two commits, nothing else.
        let after = sb.snapshot();
        assert!(after.status.is_empty(), "{case}: {:?}", after.status);
        assert_eq!(
            flow_support::git(&sb.repo, &["rev-parse", "HEAD~2"]).trim(),
            before.head,
            "{case}"
        );
        let _ = writeln!(report, "{case}: exit 0");
        for line in err.lines().filter(|l| l.starts_with("warning")) {
            let _ = writeln!(report, "  {}", sb.redact(line));
        }
    }
    covered.extend(["discoveries-corrupt.ndjson"]);
    assert_covers(&covered, &["state-", "discoveries-"]);
    insta::assert_snapshot!("session_state", report);
}

/// Runs `args`; expects exit 2 naming `state` and `place`, nothing written
/// outside the engine folders, and the corrupt file left as it was (the
/// evidence is kept).
fn check_state_case(
    sb: &Sandbox,
    case: &str,
    args: &[OsString],
    state: &Path,
    place: &str,
    report: &mut String,
) {
    let bytes = std::fs::read(state).unwrap();
    let before = sb.snapshot();
    let o = sb.run(args);
    assert_no_panic(case, &o);
    let after = sb.snapshot();
    assert_refused(
        case,
        &o,
        &state.display().to_string(),
        &[place],
        &before,
        &after,
    );
    assert_eq!(
        std::fs::read(state).unwrap(),
        bytes,
        "{case}: the file was rewritten"
    );
    report_case(report, sb, case, &o);
}

// ------------------------------------------------------------ generated

const TEN_MB: usize = 10 * 1024 * 1024;

/// A review-cycle export with a 10 MB description and a small finding.
fn huge_findings() -> String {
    serde_json::json!({"findings": [
        {"id": "F1", "title": "Huge", "severity": "high", "dimension": "correctness",
         "file": "src/lib.rs", "line": 1, "description": "x".repeat(TEN_MB)},
        {"id": "F2", "title": "Small", "severity": "high", "dimension": "correctness",
         "file": "src/lib.rs", "line": 2, "description": "d"}
    ]})
    .to_string()
}

/// Runs `run` on the corpus `file` in a fresh sandbox and checks that it is
/// refused: no panic, exit 2 with a message naming the file and holding
/// `fragments`, nothing written, and no engine folder `state_dir` created.
fn refused_file(
    file: &str,
    fragments: &[&str],
    run: fn(&Sandbox, &Path) -> Output,
    state_dir: &str,
) -> (Sandbox, Output) {
    let sb = Sandbox::new();
    let input = sb.input(file);
    let before = sb.snapshot();
    let o = run(&sb, &input);
    assert_no_panic(file, &o);
    let after = sb.snapshot();
    assert_refused(
        file,
        &o,
        &input.display().to_string(),
        fragments,
        &before,
        &after,
    );
    assert!(
        !sb.repo.join(state_dir).exists(),
        "{file}: no {state_dir} state was created"
    );
    (sb, o)
}

/// `orchestrator planex run F -y`.
fn planex_run(sb: &Sandbox, input: &Path) -> Output {
    sb.run(&[
        OsStr::new("planex"),
        OsStr::new("run"),
        input.as_os_str(),
        OsStr::new("-y"),
    ])
}

/// `orchestrator ci-autofix --handoff F -y`.
fn ci_autofix_handoff(sb: &Sandbox, input: &Path) -> Output {
    sb.run(&[
        OsStr::new("ci-autofix"),
        OsStr::new("--handoff"),
        input.as_os_str(),
        OsStr::new("-y"),
    ])
}

/// The output of a refused 10 MB field is short: the field is not echoed.
fn assert_short(case: &str, o: &Output) {
    assert!(
        o.stderr.len() < 4096 && o.stdout.len() < 16 * 1024,
        "{case}: {} bytes of stderr, {} of stdout",
        o.stderr.len(),
        o.stdout.len()
    );
}

#[test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn ten_megabyte_fields_are_refused_with_a_short_message() {
    let mut report = String::new();

    // review-fix: the finding with a 10 MB description is rejected on its
    // own (exit 1) and the small one is fixed.
    let sb = Sandbox::new();
    let text = huge_findings();
    let input = sb.write_input(OsStr::new("huge.json"), text.as_bytes());
    let before = sb.snapshot();
    let started = Instant::now();
    let o = sb.run(&sb.review_fix_args(&input));
    let review_fix_wall = started.elapsed();
    assert_no_panic("huge findings", &o);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(sb.commits(), ["fix(correctness): Small [F2]"]);
    let after = sb.snapshot();
    assert_eq!(after.status, before.status, "the tree is clean");
    assert_eq!(after.paths(), before.paths(), "nothing else appeared");
    let rejected: Vec<String> = stdout(&o)
        .lines()
        .filter(|l| l.contains(" rejected: "))
        .map(str::to_owned)
        .collect();
    assert_eq!(rejected.len(), 1, "{}", show(&o));
    for f in [
        input.display().to_string().as_str(),
        "findings[0]",
        "finding `F1`",
        "field `description`",
        "is 10485760 bytes, over the limit of 65536 bytes",
    ] {
        assert!(
            rejected[0].contains(f),
            "{f:?} missing from {:?}",
            rejected[0]
        );
    }
    assert_short("huge findings", &o);
    report_case(&mut report, &sb, "review-fix, a 10 MB description", &o);

    // The same export cut inside the description: exit 2 at its position,
    // and the message does not echo the field.
    let sb = Sandbox::new();
    let cut = sb.write_input(OsStr::new("huge-cut.json"), &text.as_bytes()[..TEN_MB / 2]);
    let before = sb.snapshot();
    let o = sb.run(&sb.review_fix_args(&cut));
    assert_no_panic("huge findings cut", &o);
    let after = sb.snapshot();
    assert_refused(
        "huge findings cut",
        &o,
        &cut.display().to_string(),
        &["line 1, column 5242880", "EOF while parsing a string"],
        &before,
        &after,
    );
    assert_short("huge findings cut", &o);
    report_case(&mut report, &sb, "review-fix, the same cut short", &o);

    // planex: a tasks.csv with a 10 MB description cell is refused whole
    // (exit 2), naming file, line and column; no session is created.
    let sb = Sandbox::new();
    let cell = "y".repeat(TEN_MB);
    let csv = format!("{TASKS_HEADER}\nT1,Huge,\"{cell}\",,,,,echo ran >> ran.txt,,,\n");
    let input = sb.write_input(OsStr::new("huge.csv"), csv.as_bytes());
    let before = sb.snapshot();
    let started = Instant::now();
    let o = planex_run(&sb, &input);
    let planex_wall = started.elapsed();
    assert_no_panic("huge cell", &o);
    let after = sb.snapshot();
    assert_refused(
        "huge cell",
        &o,
        &input.display().to_string(),
        &[
            "line 2 column `description`: the cell is 10485760 bytes, over the limit of 1048576 bytes",
        ],
        &before,
        &after,
    );
    assert!(
        !sb.repo.join(".workflow").exists(),
        "no session was created"
    );
    assert!(!sb.repo.join("ran.txt").exists(), "the task did not run");
    assert_short("huge cell", &o);
    report_case(&mut report, &sb, "planex run, a 10 MB description cell", &o);

    // The same cell with a stray quote after it: exit 2 at line 2.
    let sb = Sandbox::new();
    let csv = format!("{TASKS_HEADER}\nT1,Huge,\"{cell}\"oops,,,,,echo ran >> ran.txt,,,\n");
    let input = sb.write_input(OsStr::new("huge-quote.csv"), csv.as_bytes());
    let before = sb.snapshot();
    let o = planex_run(&sb, &input);
    assert_no_panic("huge cell with a stray quote", &o);
    let after = sb.snapshot();
    assert_refused(
        "huge cell with a stray quote",
        &o,
        &input.display().to_string(),
        &["line 2: unbalanced quote"],
        &before,
        &after,
    );
    assert_short("huge cell with a stray quote", &o);
    report_case(
        &mut report,
        &sb,
        "planex run, the same with a stray quote",
        &o,
    );

    // ci-autofix: a handoff with a 10 MB check name is refused naming the
    // field (exit 2); cut short, at its JSON position.
    let sb = Sandbox::new();
    let handoff = serde_json::json!({"prNumber": 7, "branch": "main",
        "failedChecks": [{"name": "z".repeat(TEN_MB)}]})
    .to_string();
    let input = sb.write_input(OsStr::new("huge-handoff.json"), handoff.as_bytes());
    let before = sb.snapshot();
    let started = Instant::now();
    let o = ci_autofix_handoff(&sb, &input);
    let ci_autofix_wall = started.elapsed();
    assert_no_panic("huge handoff", &o);
    let after = sb.snapshot();
    assert_refused(
        "huge handoff",
        &o,
        &input.display().to_string(),
        &["handoff field `failedChecks[0].name` is 10485760 bytes, over the limit of 4096 bytes"],
        &before,
        &after,
    );
    assert!(!sb.repo.join(".moai").exists(), "no state");
    assert_short("huge handoff", &o);
    report_case(
        &mut report,
        &sb,
        "ci-autofix --handoff, a 10 MB check name",
        &o,
    );

    let sb = Sandbox::new();
    let input = sb.write_input(
        OsStr::new("huge-handoff-cut.json"),
        &handoff.as_bytes()[..TEN_MB / 2],
    );
    let before = sb.snapshot();
    let o = ci_autofix_handoff(&sb, &input);
    assert_no_panic("huge handoff cut", &o);
    let after = sb.snapshot();
    assert_refused(
        "huge handoff cut",
        &o,
        &input.display().to_string(),
        &[
            "handoff is not valid JSON at line 1 column",
            "EOF while parsing",
        ],
        &before,
        &after,
    );
    assert_short("huge handoff cut", &o);
    report_case(
        &mut report,
        &sb,
        "ci-autofix --handoff, the same cut short",
        &o,
    );

    for (flow, wall) in [
        ("review-fix", review_fix_wall),
        ("planex run", planex_wall),
        ("ci-autofix", ci_autofix_wall),
    ] {
        assert!(wall < Duration::from_secs(20), "{flow}: {wall:?}");
    }
    eprintln!(
        "10 MB fields: review-fix {:.2}s, planex run {:.2}s, ci-autofix {:.2}s",
        review_fix_wall.as_secs_f64(),
        planex_wall.as_secs_f64(),
        ci_autofix_wall.as_secs_f64()
    );
    insta::assert_snapshot!("ten_megabyte_fields", report);
}

/// An input no flow can read: a file with permission 000 when that stops
/// this process; when it does not (the tests run as root, whom permissions
/// do not stop), a dangling symlink. Returns the path and which it is.
fn unreadable_input(sb: &Sandbox, name: &str) -> (std::path::PathBuf, &'static str) {
    use std::os::unix::fs::PermissionsExt as _;
    let locked = sb.write_input(OsStr::new(name), b"{\"findings\": []}\n");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&locked).is_err() {
        return (locked, "permission 000");
    }
    std::fs::remove_file(&locked).unwrap();
    std::os::unix::fs::symlink(sb.inputs.join("nowhere"), &locked).unwrap();
    (
        locked,
        "dangling symlink (root reads a file with permission 000)",
    )
}

#[test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn unreadable_inputs_directories_and_non_utf8_names() {
    let mut kinds = Vec::new();
    // Unreadable files, and a directory given as the file.
    for (flow, name) in [
        ("review-fix", "unreadable.json"),
        ("planex", "unreadable.csv"),
        ("ci-autofix", "unreadable-handoff.json"),
    ] {
        let sb = Sandbox::new();
        let (input, kind) = unreadable_input(&sb, name);
        kinds.push(kind);
        let dir = sb.inputs.join("a-directory");
        std::fs::create_dir(&dir).unwrap();
        // A device that never ends: refused at the input size limit, not
        // read until memory runs out.
        let endless = PathBuf::from("/dev/zero");
        for path in [&input, &dir, &endless] {
            let args: Vec<OsString> = match flow {
                "review-fix" => sb.review_fix_args(path),
                "planex" => vec!["planex".into(), "run".into(), path.into(), "-y".into()],
                _ => vec![
                    "ci-autofix".into(),
                    "--handoff".into(),
                    path.into(),
                    "-y".into(),
                ],
            };
            let case = format!("{flow} {} ({kind})", path.display());
            let before = sb.snapshot();
            let o = sb.run(&args);
            assert_no_panic(&case, &o);
            let after = sb.snapshot();
            // review-fix reads a directory as a review folder: an empty one
            // holds no export.
            let fragment = match (flow, path == &dir) {
                _ if path == &endless => {
                    "larger than the input size limit of 268435456 bytes (256 MiB)"
                }
                ("review-fix", true) => "the directory holds no findings export",
                (_, true) => "Is a directory",
                ("review-fix", false) => "failed to read findings input",
                (_, false) => "failed to read",
            };
            assert_refused(
                &case,
                &o,
                &path.display().to_string(),
                &[fragment],
                &before,
                &after,
            );
        }
    }
    eprintln!("unreadable inputs used: {kinds:?}");

    // File names that are not UTF-8: read, and named with U+FFFD.
    let sb = Sandbox::new();
    let name = OsStr::from_bytes(b"export-\xff.json");
    let input = sb.write_input(
        name,
        &std::fs::read(corpus("findings-outside-repo.json")).unwrap(),
    );
    let before = sb.snapshot();
    let o = sb.run(&sb.review_fix_args(&input));
    assert_no_panic("review-fix, non-UTF-8 name", &o);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(sb.commits(), ["fix(correctness): Inside [F4]"]);
    assert!(stdout(&o).contains("export-\u{fffd}.json"), "{}", show(&o));
    let after = sb.snapshot();
    assert_eq!(after.status, before.status);
    assert_eq!(after.paths(), before.paths());

    let sb = Sandbox::new();
    let input = sb.write_input(
        OsStr::from_bytes(b"tasks-\xff.csv"),
        &std::fs::read(corpus("tasks-cycle.csv")).unwrap(),
    );
    let before = sb.snapshot();
    let o = sb.run(&[
        OsStr::new("planex"),
        OsStr::new("run"),
        input.as_os_str(),
        OsStr::new("-y"),
    ]);
    assert_no_panic("planex, non-UTF-8 name", &o);
    let after = sb.snapshot();
    assert_refused(
        "planex, non-UTF-8 name",
        &o,
        "tasks-\u{fffd}.csv",
        &["dependency cycle"],
        &before,
        &after,
    );

    let sb = Sandbox::new();
    let input = sb.write_input(
        OsStr::from_bytes(b"handoff-\xff.json"),
        &std::fs::read(corpus("handoff-malformed.json")).unwrap(),
    );
    let before = sb.snapshot();
    let o = sb.run(&[
        OsStr::new("ci-autofix"),
        OsStr::new("--handoff"),
        input.as_os_str(),
        OsStr::new("-y"),
    ]);
    assert_no_panic("ci-autofix, non-UTF-8 name", &o);
    let after = sb.snapshot();
    assert_refused(
        "ci-autofix, non-UTF-8 name",
        &o,
        "handoff-\u{fffd}.json",
        &["line 1 column 72"],
        &before,
        &after,
    );
}
