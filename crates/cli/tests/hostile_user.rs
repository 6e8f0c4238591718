//! The hostile-user harness (issue 32, item 7): a user who keeps working
//! in the repository while a flow runs on it, and after it was killed.
//!
//! For review-fix and planex, each test runs seeded iterations of a small
//! session on a real git repository:
//!
//! - **in process** (most iterations): the flow's library with real git and
//!   its real builtin or shell agent, wrapped so that the user acts *during
//!   attempts* (before and after the agent writes) as well as between runs;
//! - **killing the real binary** (at least 60 per flow): `orchestrator` is
//!   started, the user acts from another thread while it runs, it gets
//!   SIGKILL at a random instant, the user acts again, and the run is
//!   resumed until the session ends.
//!
//! The user's actions, drawn from the seed: append a line to a tracked file
//! the run also fixes (at its end; the fixes change its first lines), to a
//! tracked file the run never touches, create an untracked file, delete one
//! they created, stage a change, commit their own work. When a run stops
//! because the user's uncommitted work is in the way of a landing (exit 3),
//! the user commits their work and resumes, as the message says.
//!
//! After every iteration:
//! - every byte the user wrote is in the working tree (a created file that
//!   the user did not delete is there with its content, a deleted one is
//!   not, every appended line is in its file);
//! - no engine commit (`fix(…)`, `feat(planex)…`) holds any of the user's
//!   bytes;
//! - nothing the user wrote is only in a session's `trash/` (the engine
//!   saves there what its own reverts would lose, in its worktrees: every
//!   line of the user's in a saved file is in the working tree too);
//! - the engine's commits are commits of an undisturbed run of the same
//!   session: each one's message and changed lines are the undisturbed
//!   run's for that message, and no message lands twice.
//!
//! ci-autofix's share is in `ci_autofix_cli.rs`-style runs of the binary
//! below (`ci_autofix_never_loses_or_commits_a_users_byte`).
//!
//! `ORCH_TEST_SEED=N` replays an iteration schedule; `ORCH_HOSTILE_ITERATIONS`
//! and `ORCH_HOSTILE_KILLS` raise the counts (never below 200 and 60).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::event::NullSink;
use orchestrator_core::gate::AutoYes;

/// The line marker of every byte the user writes.
const MARK: &str = "USERMARK";
/// No single run may take longer than this.
const PATIENCE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- basics

/// A small seeded generator (xorshift64*).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn seed() -> u64 {
    std::env::var("ORCH_TEST_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

fn count(var: &str, least: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(least)
        .max(least)
}

/// What git says while another git is mid-command in the same repository,
/// having changed nothing: a lock file; the branch moved by a landing
/// between the user's commit reading HEAD and updating it (git's
/// compare-and-swap refuses the commit, which a user makes again). A pick
/// in progress is not among them: landings never leave one in the user's
/// checkout.
fn busy(stderr: &str) -> bool {
    stderr.contains(".lock") || stderr.contains("cannot lock ref 'HEAD'")
}

/// Runs git in `dir`, retrying while another git is mid-command (the engine
/// may be landing a fix: a user would try again too). A state that never
/// clears — a lock left behind — still fails, after about four seconds.
fn git_try(dir: &Path, args: &[&str]) -> std::process::Output {
    for attempt in 0..40 {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !busy(&err) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(10 + attempt * 5));
    }
    panic!(
        "git {args:?} in {}: another git's lock never went away, or the branch kept moving",
        dir.display()
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_try(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with `files` committed on `main`.
fn init_repo(repo: &Path, files: &[(&str, String)]) {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["config", "user.email", "user@example.invalid"]);
    git(repo, &["config", "user.name", "User"]);
    git(repo, &["config", "commit.gpgsign", "false"]);
    for (path, text) in files {
        let full = repo.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "start"]);
}

/// Twelve numbered lines of `name`: fixes change the first ones, the user
/// appends after the last, so the two never meet in a diff.
fn lines_of(name: &str) -> String {
    (1..=12).map(|i| format!("line {i} of {name}\n")).collect()
}

// ------------------------------------------------------------------ user

/// What the user did.
#[derive(Debug, Clone)]
enum Action {
    Append { path: String, line: String },
    Create { path: String, text: String },
    Delete { path: String },
    Stage,
    Commit { message: String },
}

/// The user: works in `repo`, on the files the run also touches and on
/// files it never does.
#[derive(Debug)]
struct User {
    repo: PathBuf,
    rng: Rng,
    tag: String,
    n: usize,
    touched: Vec<String>,
    untouched: Vec<String>,
    created: Vec<String>,
    log: Vec<Action>,
}

impl User {
    fn new(repo: &Path, seed: u64, tag: &str, touched: &[&str], untouched: &[&str]) -> User {
        User {
            repo: repo.to_path_buf(),
            rng: Rng::new(seed),
            tag: tag.to_owned(),
            n: 0,
            touched: touched.iter().map(|s| (*s).to_owned()).collect(),
            untouched: untouched.iter().map(|s| (*s).to_owned()).collect(),
            created: Vec::new(),
            log: Vec::new(),
        }
    }

    fn marker(&mut self) -> String {
        self.n += 1;
        format!("{MARK} {} {}", self.tag, self.n)
    }

    fn append(&mut self, path: &str) {
        let line = self.marker();
        let full = self.repo.join(path);
        let mut text = std::fs::read_to_string(&full).unwrap_or_default();
        text.push_str(&line);
        text.push('\n');
        std::fs::write(&full, text).unwrap();
        self.log.push(Action::Append {
            path: path.to_owned(),
            line,
        });
    }

    /// One action, drawn from the seed.
    fn act(&mut self) {
        match self.rng.below(7) {
            0 | 1 => {
                let i = self.rng.below(self.touched.len() as u64) as usize;
                let path = self.touched[i].clone();
                self.append(&path);
            }
            2 => {
                let i = self.rng.below(self.untouched.len() as u64) as usize;
                let path = self.untouched[i].clone();
                self.append(&path);
            }
            3 => {
                let path = format!("notes/user-{}-{}.txt", self.tag, self.n + 1);
                let text = format!("{}\n", self.marker());
                std::fs::create_dir_all(self.repo.join("notes")).unwrap();
                std::fs::write(self.repo.join(&path), &text).unwrap();
                self.created.push(path.clone());
                self.log.push(Action::Create { path, text });
            }
            4 => match self.created.pop() {
                Some(path) => {
                    std::fs::remove_file(self.repo.join(&path)).unwrap();
                    self.log.push(Action::Delete { path });
                }
                None => self.act(),
            },
            5 => {
                let i = self.rng.below(self.untouched.len() as u64) as usize;
                let path = self.untouched[i].clone();
                self.append(&path);
                git(&self.repo, &["add", "--", &path]);
                self.log.push(Action::Stage);
            }
            _ => {
                let i = self.rng.below(self.untouched.len() as u64) as usize;
                let path = self.untouched[i].clone();
                self.append(&path);
                let message = format!("user: {} {}", self.tag, self.n);
                git(&self.repo, &["add", "--", &path]);
                git(&self.repo, &["commit", "-q", "-m", &message, "--", &path]);
                self.log.push(Action::Commit { message });
            }
        }
    }

    /// What the user does when a run says their uncommitted work is in the
    /// way: commits every tracked file they changed (untracked notes stay
    /// theirs, uncommitted).
    fn resolve(&mut self) {
        let mut paths: Vec<String> = self.touched.clone();
        paths.extend(self.untouched.iter().cloned());
        git(
            &self.repo,
            &["add", "--"]
                .iter()
                .copied()
                .chain(paths.iter().map(String::as_str))
                .collect::<Vec<_>>(),
        );
        let staged = git(&self.repo, &["diff", "--cached", "--name-only"]);
        if !staged.trim().is_empty() {
            let message = format!("user: {} work in the way", self.tag);
            git(&self.repo, &["commit", "-q", "-m", &message]);
            self.log.push(Action::Commit { message });
        }
    }
}

// ------------------------------------------------------------ invariants

/// One commit: message, and the lines it adds and removes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    message: String,
    lines: Vec<String>,
}

/// The commits since `base`, oldest first.
fn changes_since(repo: &Path, base: &str) -> Vec<Change> {
    let ids = git(repo, &["rev-list", "--reverse", &format!("{base}..HEAD")]);
    ids.lines()
        .map(|id| {
            let message = git(repo, &["log", "-1", "--format=%B", id])
                .trim()
                .to_owned();
            let patch = git(repo, &["show", "--format=", "--unified=0", id]);
            let lines = patch
                .lines()
                .filter(|l| {
                    (l.starts_with('+') || l.starts_with('-'))
                        && !l.starts_with("+++")
                        && !l.starts_with("---")
                })
                .map(str::to_owned)
                .collect();
            Change { message, lines }
        })
        .collect()
}

/// The checks every iteration ends with (see the module documentation).
fn check_invariants(
    ctx: &str,
    repo: &Path,
    base: &str,
    user: &User,
    is_engine: impl Fn(&str) -> bool,
    reference: &BTreeMap<String, Vec<String>>,
) {
    // Every byte the user wrote is in the working tree.
    let mut deleted = BTreeSet::new();
    for action in user.log.iter().rev() {
        match action {
            Action::Delete { path } => {
                deleted.insert(path.clone());
                assert!(
                    !repo.join(path).exists(),
                    "{ctx}: the user deleted {path}, and it is back"
                );
            }
            Action::Create { path, text } if !deleted.contains(path) => {
                let now = std::fs::read_to_string(repo.join(path)).unwrap_or_default();
                assert_eq!(&now, text, "{ctx}: the user's new file {path} is lost");
            }
            Action::Append { path, line } => {
                let now = std::fs::read_to_string(repo.join(path)).unwrap_or_default();
                assert!(
                    now.lines().any(|l| l == line),
                    "{ctx}: the user's line {line:?} is not in {path}:\n{now}"
                );
            }
            _ => {}
        }
    }
    let history = changes_since(repo, base);
    for action in &user.log {
        if let Action::Commit { message } = action {
            assert!(
                history.iter().any(|c| &c.message == message),
                "{ctx}: the user's commit {message:?} is gone"
            );
        }
    }
    // No engine commit holds a byte of the user's; each is an undisturbed
    // run's commit, and lands once.
    let mut seen = BTreeSet::new();
    for change in history.iter().filter(|c| is_engine(&c.message)) {
        assert!(
            !change.lines.iter().any(|l| l.contains(MARK)),
            "{ctx}: engine commit {:?} holds the user's bytes: {:#?}",
            change.message,
            change.lines
        );
        assert!(
            seen.insert(key_of(&change.message)),
            "{ctx}: {:?} landed twice",
            change.message
        );
        assert_eq!(
            reference.get(&key_of(&change.message)),
            Some(&change.lines),
            "{ctx}: engine commit {:?} differs from the undisturbed run's",
            change.message
        );
    }
    // Nothing the user wrote is only in a trash folder: every line of
    // theirs in a saved file (the engine's worktrees hold the user's
    // committed lines) is in the working tree too.
    let mut in_tree = BTreeSet::new();
    for file in walkdir_names(repo) {
        if file.contains("/.git/") || file.contains("/trash/") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        in_tree.extend(text.lines().filter(|l| l.contains(MARK)).map(str::to_owned));
    }
    let mut saved = 0;
    for engine in [".review", ".workflow", ".moai"] {
        for file in walkdir_names(&repo.join(engine)) {
            let is_file = std::fs::symlink_metadata(&file).is_ok_and(|m| !m.is_dir());
            if !file.contains("/trash/") || file.ends_with("/trash.json") || !is_file {
                continue;
            }
            saved += 1;
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for line in text.lines().filter(|l| l.contains(MARK)) {
                assert!(
                    in_tree.contains(line),
                    "{ctx}: the user's line {line:?} is only in the trash ({file})"
                );
            }
        }
    }
    TRASHED.fetch_add(saved, Ordering::Relaxed);
}

/// Files found in trash folders over all iterations (reported, not
/// bounded: a failed attempt's rollback saves the agent's bytes).
static TRASHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn walkdir_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            out.push(e.path().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out
}

/// What names an engine commit across runs: its message, without the
/// iteration number ci-autofix puts in it (a run after a stop counts its
/// iterations anew or goes on counting; the fix is the same).
fn key_of(message: &str) -> String {
    let mut out = message.to_owned();
    for (open, close) in [("(iter ", ')'), ("[iter-", ']')] {
        while let Some(at) = out.find(open) {
            let Some(len) = out[at..].find(close) else {
                break;
            };
            out.replace_range(at..=at + len, "#");
        }
    }
    out
}

/// The engine commits of an undisturbed run, by message.
fn reference_of(
    repo: &Path,
    base: &str,
    is_engine: impl Fn(&str) -> bool,
) -> BTreeMap<String, Vec<String>> {
    changes_since(repo, base)
        .into_iter()
        .filter(|c| is_engine(&c.message))
        .map(|c| (key_of(&c.message), c.lines))
        .collect()
}

// ------------------------------------------------- the user during attempts

/// Wraps the flow's own agent: the user acts while the attempt runs (before
/// and after the agent writes), as a person at their editor would.
#[derive(Debug)]
struct UserDuring {
    inner: Arc<dyn Agent>,
    user: Arc<Mutex<User>>,
    rng: Mutex<Rng>,
    /// Whether the user still works during attempts: after being stopped
    /// twice by their own work in the way, they wait for the run to end
    /// (else a run could be stopped by them forever).
    busy: bool,
}

#[async_trait]
impl Agent for UserDuring {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let (before, after) = {
            let mut rng = self.rng.lock().unwrap();
            (self.busy && rng.chance(40), self.busy && rng.chance(40))
        };
        if before {
            self.user.lock().unwrap().act();
        }
        let answer = self.inner.run(request).await;
        if after {
            self.user.lock().unwrap().act();
        }
        answer
    }
}

/// How many iterations run at once: each mostly waits on git and on child
/// processes, so a few share the two cores well.
const WORKERS: usize = 4;

/// Runs `f(i)` for every `i` in `range` on [`WORKERS`] threads; a panic in
/// one stops the others from starting new iterations and fails the test.
fn in_parallel(range: std::ops::Range<usize>, f: impl Fn(usize) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(range.start);
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= range.end || failed.load(Ordering::SeqCst) {
                        break;
                    }
                    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i)));
                    if let Err(panic) = done {
                        failed.store(true, Ordering::SeqCst);
                        std::panic::resume_unwind(panic);
                    }
                }
            });
        }
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

// ------------------------------------------------------------ review-fix

const RF_TOUCHED: [&str; 3] = ["src/a.txt", "src/b.txt", "src/c.txt"];
const RF_UNTOUCHED: [&str; 2] = ["docs/u1.txt", "docs/u2.txt"];
/// The project's test: no file holds `BROKEN`.
const RF_CHECK: &str = "! grep -q BROKEN src/a.txt src/b.txt src/c.txt";
/// The same as `--test-cmd` takes it.
const RF_TEST: &str = "sh -c '! grep -q BROKEN src/a.txt src/b.txt src/c.txt'";

/// One rdjsonl finding replacing `old` on `line` of `file` by `new`.
fn diagnostic(file: &str, line: u32, old: &str, new: &str) -> String {
    let end = 1 + old.chars().count() as u32;
    format!(
        "{{\"message\": \"{old} should be {new}\", \"location\": {{\"path\": \"{file}\", \"range\": {{\"start\": {{\"line\": {line}, \"column\": 1}}, \"end\": {{\"line\": {line}, \"column\": {end}}}}}}}, \"severity\": \"WARNING\", \"code\": {{\"value\": \"shout\"}}, \"suggestions\": [{{\"range\": {{\"start\": {{\"line\": {line}, \"column\": 1}}, \"end\": {{\"line\": {line}, \"column\": {end}}}}}, \"text\": \"{new}\"}}], \"source\": {{\"name\": \"hostile\"}}}}\n"
    )
}

/// A repository for review-fix and its findings file (outside it).
fn rf_setup(dir: &Path) -> (PathBuf, PathBuf) {
    let repo = dir.join("repo");
    let mut files: Vec<(&str, String)> = RF_TOUCHED
        .iter()
        .chain(RF_UNTOUCHED.iter())
        .map(|p| (*p, lines_of(p)))
        .collect();
    files.push((".gitignore", "/build\n".to_owned()));
    init_repo(&repo, &files);
    let findings = dir.join("findings.rdjsonl");
    let text = [
        diagnostic("src/a.txt", 1, "line", "LINE"),
        diagnostic("src/b.txt", 2, "line", "LINE"),
        diagnostic("src/c.txt", 1, "line", "LINE"),
        // Breaks the test: rolled back, failed.
        diagnostic("src/b.txt", 4, "line", "BROKEN"),
        diagnostic("src/a.txt", 3, "line", "LINE"),
    ]
    .concat();
    std::fs::write(&findings, text).unwrap();
    (repo, findings)
}

fn rf_is_engine(message: &str) -> bool {
    message.starts_with("fix(")
}

/// One in-process review-fix session with the user acting during attempts
/// and between runs; resumes until it ends.
fn rf_in_process(
    rt: &tokio::runtime::Runtime,
    seed: u64,
    reference: &BTreeMap<String, Vec<String>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let (repo, findings) = rf_setup(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let mut rng = Rng::new(seed);
    let user = Arc::new(Mutex::new(User::new(
        &repo,
        seed ^ 0xA5,
        "rf",
        &RF_TOUCHED,
        &RF_UNTOUCHED,
    )));
    for _ in 0..rng.below(3) {
        user.lock().unwrap().act();
    }
    let isolation = if rng.chance(50) {
        orchestrator_review_fix::Isolation::Serial
    } else {
        orchestrator_review_fix::Isolation::Worktree
    };
    let verify = if rng.chance(50) {
        orchestrator_review_fix::VerifyMode::Each
    } else {
        orchestrator_review_fix::VerifyMode::Batch
    };
    let ctx = format!("review-fix in process, seed {seed}, {isolation:?}, {verify:?}");
    let mut resume = false;
    let mut last = String::new();
    for run in 0.. {
        assert!(
            run < 8,
            "{ctx}: the session never ended; the last run: {last}"
        );
        let mut config = orchestrator_review_fix::ReviewFixConfig::default()
            .with_inputs(vec![findings.clone()])
            .with_planner(orchestrator_review_fix::PlannerMode::Deterministic)
            .with_verify(verify)
            .with_allow_dirty(true)
            .with_max_iterations(2);
        config.isolation = isolation;
        config.resume = resume;
        let services = orchestrator_review_fix::Services {
            agent: Arc::new(UserDuring {
                inner: Arc::new(SuggestionAgent::new()),
                user: Arc::clone(&user),
                rng: Mutex::new(Rng::new(seed.rotate_left(run))),
                busy: run < 2,
            }),
            vcs: Arc::new(rt.block_on(GitVcs::open(&repo)).unwrap()),
            tests: Arc::new(orchestrator_review_fix::SharedRunner(Arc::new(
                CommandTestRunner::shell(RF_CHECK),
            ))),
            gate: Arc::new(AutoYes),
            sink: Arc::new(NullSink),
            provisioner: None,
        };
        let report = rt
            .block_on(async {
                tokio::time::timeout(PATIENCE, orchestrator_review_fix::run(config, services)).await
            })
            .unwrap_or_else(|_| panic!("{ctx}: a run hung"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        last = format!("{:?}", report.outcome);
        match report.outcome {
            orchestrator_review_fix::Outcome::NeedsHuman { .. } => {
                user.lock().unwrap().resolve();
                resume = true;
            }
            _ => break,
        }
        if run < 1 && rng.chance(50) {
            user.lock().unwrap().act();
        }
    }
    let user = user.lock().unwrap();
    check_invariants(&ctx, &repo, &base, &user, rf_is_engine, reference);
}

/// The binary on the same session, killed at a random instant while the
/// user works, then resumed until the session ends.
fn rf_killed(seed: u64, reference: &BTreeMap<String, Vec<String>>, undisturbed: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (repo, findings) = rf_setup(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let mut rng = Rng::new(seed);
    let mut user = User::new(&repo, seed ^ 0x5A, "rk", &RF_TOUCHED, &RF_UNTOUCHED);
    let serial = rng.chance(50);
    let ctx = format!("review-fix killed, seed {seed}, serial {serial}");
    let args = |resume: bool| {
        let mut a: Vec<String> = vec!["review-fix".into()];
        if resume {
            a.push("--resume".into());
        } else {
            a.extend(["--fix".into(), findings.display().to_string()]);
        }
        a.extend(
            [
                "--agent",
                "builtin",
                "--test-cmd",
                RF_TEST,
                "--allow-dirty",
                "--max-iterations",
                "2",
                "-y",
            ]
            .map(String::from),
        );
        if serial {
            a.extend(["--isolation".into(), "serial".into()]);
        }
        a
    };
    let fixes = repo.join(".review/fixes");
    let unfinished =
        move || !orchestrator_review_fix::session::unfinished_sessions(&fixes).is_empty();
    drive_killed(
        &ctx,
        &repo,
        &mut user,
        &mut rng,
        Some(undisturbed),
        args,
        unfinished,
    );
    check_invariants(&ctx, &repo, &base, &user, rf_is_engine, reference);
}

/// Starts the binary with `args(false)`, lets the user act from another
/// thread, kills it at a random instant within `undisturbed`, lets the
/// user act, then runs `args(true)` while an unfinished session is left
/// (`unfinished`; `args(false)` when the kill came before one was
/// recorded) until a run ends on its own; a run stopped for the user
/// (exit 3) is answered by the user committing their work.
fn drive_killed(
    ctx: &str,
    repo: &Path,
    user: &mut User,
    rng: &mut Rng,
    kill_within: Option<Duration>,
    args: impl Fn(bool) -> Vec<String>,
    unfinished: impl Fn() -> bool,
) {
    let kill_after = kill_within.map_or(PATIENCE, |d| {
        Duration::from_millis(rng.below(d.as_millis() as u64 + 1))
    });
    let shared = Arc::new(Mutex::new(std::mem::replace(
        user,
        User::new(repo, 0, "placeholder", &["x"], &["y"]),
    )));
    let stop = Arc::new(AtomicBool::new(false));
    let marker = format!("{}-{}", std::process::id(), rng.next());
    let mut child = command(repo, &args(false))
        .env(MARK_ENV, &marker)
        .spawn()
        .unwrap();
    let worker = {
        let shared = Arc::clone(&shared);
        let stop = Arc::clone(&stop);
        let mut rng = Rng::new(rng.next());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20 + rng.below(120)));
                if rng.chance(60) && !stop.load(Ordering::SeqCst) {
                    shared.lock().unwrap().act();
                }
            }
        })
    };
    let start = Instant::now();
    let mut ended = None;
    while start.elapsed() < kill_after {
        if let Some(status) = child.try_wait().unwrap() {
            ended = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if ended.is_none() {
        assert!(kill_within.is_some(), "{ctx}: a run hung");
        child.kill().unwrap();
    }
    let first = child.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    worker.join().unwrap();
    *user = Arc::try_unwrap(shared).unwrap().into_inner().unwrap();
    // The killed run's children may still be finishing (git, a test).
    let waiting = Instant::now();
    while !survivors(&marker).is_empty() {
        assert!(
            waiting.elapsed() < PATIENCE,
            "{ctx}: a killed run's children live on"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..rng.below(3) {
        user.act();
    }
    match first.code() {
        // Ended on its own before the kill.
        Some(0 | 1) => return,
        Some(3) => user.resolve(),
        _ => {}
    }
    for run in 0.. {
        assert!(run < 8, "{ctx}: the session never ended");
        let resume = unfinished();
        if !resume && ended.is_some() {
            return;
        }
        let out = command(repo, &args(resume))
            .output()
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        match out.status.code() {
            Some(3) => user.resolve(),
            Some(0 | 1) => break,
            _ => panic!(
                "{ctx}: a run ended with {}:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

/// The environment variable that marks every process of a run (children
/// inherit it), so the harness can wait for the ones a kill leaves behind.
const MARK_ENV: &str = "ORCH_HOSTILE_MARK";

/// Processes still alive that carry `marker` in their environment.
fn survivors(marker: &str) -> Vec<u32> {
    let needle = format!("{MARK_ENV}={marker}\0").into_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
        .collect()
}

/// The binary in `repo` with a clean environment.
fn command(repo: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    // A cache folder of the repository's own: no other test's folders in
    // it, so no other test's prune speaks in this one's output.
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let cache = std::env::temp_dir()
        .join("hostile_user-cache")
        .join(format!("{}-{}", name(repo.parent()), name(Some(repo))));
    cmd.args(args)
        .current_dir(repo)
        .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .env("ORCHESTRATOR_CACHE_DIR", cache)
        .env_remove("ORCHESTRATOR_AGENT")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The undisturbed run: its engine commits and how long it took.
fn undisturbed(
    setup: impl Fn(&Path) -> (PathBuf, Vec<String>),
    is_engine: fn(&str) -> bool,
) -> (BTreeMap<String, Vec<String>>, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (repo, args) = setup(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let started = Instant::now();
    let out = command(&repo, &args).output().unwrap();
    let took = started.elapsed();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "the undisturbed run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference = reference_of(&repo, &base, is_engine);
    assert!(!reference.is_empty(), "the undisturbed run landed nothing");
    (reference, took)
}

#[test]
fn review_fix_never_loses_or_commits_a_users_byte() {
    let seed = seed();
    let (reference, took) = undisturbed(
        |dir| {
            let (repo, findings) = rf_setup(dir);
            let args = [
                "review-fix",
                "--fix",
                &findings.display().to_string(),
                "--agent",
                "builtin",
                "--test-cmd",
                RF_TEST,
                "--max-iterations",
                "2",
                "-y",
            ]
            .map(String::from)
            .to_vec();
            (repo, args)
        },
        rf_is_engine,
    );
    assert_eq!(reference.len(), 4, "{reference:#?}");
    let iterations = count("ORCH_HOSTILE_ITERATIONS", 200);
    let kills = count("ORCH_HOSTILE_KILLS", 60);
    let started = Instant::now();
    in_parallel(0..kills, |i| {
        rf_killed(seed.wrapping_add(i as u64), &reference, took)
    });
    let rt = runtime();
    in_parallel(kills..iterations, |i| {
        rf_in_process(&rt, seed.wrapping_add(i as u64), &reference);
    });
    eprintln!(
        "review-fix: seed {seed}, {iterations} iterations ({kills} killing the binary), {:.1}s; trash files checked so far (all flows): {}",
        started.elapsed().as_secs_f64(),
        TRASHED.load(Ordering::Relaxed)
    );
}

// ---------------------------------------------------------------- planex

const PX_TOUCHED: [&str; 3] = ["src/a.txt", "src/b.txt", "src/c.txt"];
const PX_UNTOUCHED: [&str; 2] = ["docs/u1.txt", "docs/u2.txt"];
const PX_HEADER: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave";

/// A repository for planex and its tasks file (outside it): three tasks
/// that change the first lines of the files the user also appends to, one
/// that fails its own check, and one that depends on it (skipped).
fn px_setup(dir: &Path) -> (PathBuf, PathBuf) {
    let repo = dir.join("repo");
    let files: Vec<(&str, String)> = PX_TOUCHED
        .iter()
        .chain(PX_UNTOUCHED.iter())
        .map(|p| (*p, lines_of(p)))
        .collect();
    init_repo(&repo, &files);
    let tasks = dir.join("tasks.csv");
    let text = format!(
        "{PX_HEADER}\n\
         T1,Shout a,,,,src/a.txt,,sed -i '1s/line/LINE/' src/a.txt,,,\n\
         T2,Shout b,,,,src/b.txt,,sed -i '2s/line/LINE/' src/b.txt,,,\n\
         T3,Shout c,,,,src/c.txt,,sed -i '1s/line/LINE/' src/c.txt,T1,,\n\
         T4,Break b,,,,src/b.txt,,sed -i '4s/line/BROKEN/' src/b.txt && ! grep -q BROKEN src/b.txt,,,\n\
         T5,After the break,,,,src/c.txt,,sed -i '3s/line/LINE/' src/c.txt,T4,,\n"
    );
    std::fs::write(&tasks, text).unwrap();
    (repo, tasks)
}

fn px_is_engine(message: &str) -> bool {
    message.starts_with("feat(planex)")
}

/// Whether `repo` holds a planex session that has not finished and can be
/// continued (a run killed before it copied its tasks in left a session
/// with nothing to continue: the user starts again).
fn px_unfinished(repo: &Path) -> bool {
    use orchestrator_planex::session::{ResumePhase, SessionStatus};
    orchestrator_planex::list_sessions(repo)
        .unwrap_or_default()
        .iter()
        .any(|s| {
            matches!(
                s.meta.status,
                SessionStatus::Active | SessionStatus::Stopped
            ) && s.resume_phase != ResumePhase::Nothing
        })
}

/// One in-process planex session with the user acting during tasks and
/// between runs; continued until it ends.
fn px_in_process(
    rt: &tokio::runtime::Runtime,
    seed: u64,
    reference: &BTreeMap<String, Vec<String>>,
) {
    use orchestrator_adapters::process::ProcessRunner;
    use orchestrator_planex::{Agents, ExecutionPolicy, Planex, PlanexOptions, Verification};
    let dir = tempfile::tempdir().unwrap();
    let (repo, tasks) = px_setup(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let mut rng = Rng::new(seed);
    let user = Arc::new(Mutex::new(User::new(
        &repo,
        seed ^ 0xC3,
        "px",
        &PX_TOUCHED,
        &PX_UNTOUCHED,
    )));
    for _ in 0..rng.below(3) {
        user.lock().unwrap().act();
    }
    let concurrency = 1 + rng.below(3) as usize;
    let ctx = format!("planex in process, seed {seed}, -c {concurrency}");
    let mut session: Option<String> = None;
    for run in 0.. {
        assert!(run < 8, "{ctx}: the session never ended");
        let runner: Arc<dyn orchestrator_core::command::CommandRunner> =
            Arc::new(ProcessRunner::default());
        let agent = Arc::new(UserDuring {
            inner: Arc::new(orchestrator_planex::ShellTaskAgent::new(runner.clone())),
            user: Arc::clone(&user),
            rng: Mutex::new(Rng::new(seed.rotate_left(run))),
            busy: run < 2,
        });
        let outcome = rt.block_on(async {
            let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
            let planex = Planex::new(
                &repo,
                Agents::all(agent),
                Arc::new(AutoYes),
                Arc::new(NullSink),
                PlanexOptions::default()
                    .with_auto_yes(true)
                    .with_concurrency(concurrency)
                    .with_task_time_limit(PATIENCE)
                    .with_execution(ExecutionPolicy::shell()),
            )
            .with_verification(
                Verification::new(vcs, runner)
                    .with_allow_dirty(true)
                    .with_executor_runs_directives(true),
            );
            let run = async {
                match &session {
                    Some(id) => planex.resume(Some(id)).await,
                    None => planex.run_tasks_file(&tasks).await,
                }
            };
            tokio::time::timeout(PATIENCE, run).await
        });
        let outcome = outcome
            .unwrap_or_else(|_| panic!("{ctx}: a run hung"))
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        if outcome.exit_code() != 3 {
            break;
        }
        user.lock().unwrap().resolve();
        session = Some(outcome.summary.session_id.clone());
        if run < 1 && rng.chance(50) {
            user.lock().unwrap().act();
        }
    }
    let user = user.lock().unwrap();
    check_invariants(&ctx, &repo, &base, &user, px_is_engine, reference);
}

/// The planex binary on the same tasks, killed at a random instant while
/// the user works, then continued until the session ends.
fn px_killed(seed: u64, reference: &BTreeMap<String, Vec<String>>, undisturbed: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (repo, tasks) = px_setup(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let mut rng = Rng::new(seed);
    let mut user = User::new(&repo, seed ^ 0x3C, "pk", &PX_TOUCHED, &PX_UNTOUCHED);
    let concurrency = (1 + rng.below(3)).to_string();
    // Half the runs start as a user who has nothing uncommitted would
    // start them, without `--allow-dirty` (at `-c 1` the old engine then
    // worked in the user's tree); what the user does meanwhile makes the
    // tree dirty, so every later run needs the flag.
    let clean_start = rng.chance(50);
    let first_run = std::cell::Cell::new(true);
    let ctx = format!("planex killed, seed {seed}, -c {concurrency}, clean start {clean_start}");
    let args = |resume: bool| {
        let mut a: Vec<String> = vec!["planex".into()];
        if resume {
            a.push("--continue".into());
        } else {
            a.extend(["run".into(), tasks.display().to_string()]);
        }
        a.push("-y".into());
        if !clean_start || !first_run.replace(false) {
            a.push("--allow-dirty".into());
        }
        a.extend(["-c", &concurrency].map(String::from));
        a
    };
    let unfinished = || px_unfinished(&repo);
    drive_killed(
        &ctx,
        &repo,
        &mut user,
        &mut rng,
        Some(undisturbed),
        args,
        unfinished,
    );
    check_invariants(&ctx, &repo, &base, &user, px_is_engine, reference);
}

#[test]
fn planex_never_loses_or_commits_a_users_byte() {
    let seed = seed();
    let (reference, took) = undisturbed(
        |dir| {
            let (repo, tasks) = px_setup(dir);
            let args = [
                "planex",
                "run",
                &tasks.display().to_string(),
                "-y",
                "-c",
                "2",
            ]
            .map(String::from)
            .to_vec();
            (repo, args)
        },
        px_is_engine,
    );
    assert_eq!(reference.len(), 3, "{reference:#?}");
    let iterations = count("ORCH_HOSTILE_ITERATIONS", 200);
    let kills = count("ORCH_HOSTILE_KILLS", 60);
    let started = Instant::now();
    in_parallel(0..kills, |i| {
        px_killed(seed.wrapping_add(i as u64), &reference, took)
    });
    let rt = runtime();
    in_parallel(kills..iterations, |i| {
        px_in_process(&rt, seed.wrapping_add(i as u64), &reference);
    });
    eprintln!(
        "planex: seed {seed}, {iterations} iterations ({kills} killing the binary), {:.1}s; trash files checked so far (all flows): {}",
        started.elapsed().as_secs_f64(),
        TRASHED.load(Ordering::Relaxed)
    );
}

// ------------------------------------------------------------ ci-autofix

const CI_TOUCHED: [&str; 2] = ["src/a.txt", "src/b.txt"];
const CI_UNTOUCHED: [&str; 2] = ["docs/u1.txt", "docs/u2.txt"];
/// The check: a formatter's complaint while a touched file's first line
/// is not shouted (the user appends at the end, so their lines never fail
/// it or are fixed by it).
const CI_CHECK: &str = "sh -c 'for f in src/a.txt src/b.txt; do if head -1 $f | grep -q ^line; then echo would reformat $f; bad=1; fi; done; exit ${bad:-0}'";
/// The fixer: shouts the first lines, taking a moment (so that the user's
/// edits fall during attempts too).
const CI_AGENT: &str = "command:sh -c 'sleep 0.05; sed -i 1s/^line/LINE/ src/a.txt src/b.txt'";

fn ci_setup(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    let files: Vec<(&str, String)> = CI_TOUCHED
        .iter()
        .chain(CI_UNTOUCHED.iter())
        .map(|p| (*p, lines_of(p)))
        .collect();
    init_repo(&repo, &files);
    repo
}

fn ci_is_engine(message: &str) -> bool {
    message.starts_with("fix(ci)")
}

fn ci_args(allow_dirty: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "ci-autofix",
        "--local",
        "--check",
        CI_CHECK,
        "--agent",
        CI_AGENT,
        "-y",
    ]
    .map(String::from)
    .to_vec();
    if allow_dirty {
        a.push("--allow-dirty".into());
    }
    a
}

/// The binary while the user works beside it: killed at a random instant
/// (`kill_within`) or left to finish, then run again until one run ends
/// green or failed; a run that stops for the user's work in the way is
/// answered by the user committing it.
fn ci_disturbed(
    seed: u64,
    reference: &BTreeMap<String, Vec<String>>,
    kill_within: Option<Duration>,
) {
    let dir = tempfile::tempdir().unwrap();
    let repo = ci_setup(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let mut rng = Rng::new(seed);
    let mut user = User::new(&repo, seed ^ 0x99, "ci", &CI_TOUCHED, &CI_UNTOUCHED);
    // Half the runs start on a clean tree without `--allow-dirty` (where
    // the old engine let the agent work in the user's tree); the user's
    // work meanwhile makes the runs after it need the flag.
    let clean_start = rng.chance(50);
    if !clean_start {
        for _ in 0..rng.below(2) {
            user.act();
        }
    }
    let first_run = std::cell::Cell::new(true);
    let ctx = format!(
        "ci-autofix, seed {seed}, killed {}, clean start {clean_start}",
        kill_within.is_some()
    );
    drive_killed(
        &ctx,
        &repo,
        &mut user,
        &mut rng,
        kill_within,
        |_| ci_args(!clean_start || !first_run.replace(false)),
        || false,
    );
    check_invariants(&ctx, &repo, &base, &user, ci_is_engine, reference);
}

#[test]
fn ci_autofix_never_loses_or_commits_a_users_byte() {
    let seed = seed();
    let (reference, took) = undisturbed(|dir| (ci_setup(dir), ci_args(false)), ci_is_engine);
    assert_eq!(reference.len(), 1, "{reference:#?}");
    let iterations = count("ORCH_HOSTILE_ITERATIONS", 200);
    let kills = count("ORCH_HOSTILE_KILLS", 60);
    let started = Instant::now();
    in_parallel(0..iterations, |i| {
        let kill = (i < kills).then_some(took);
        ci_disturbed(seed.wrapping_add(i as u64), &reference, kill);
    });
    eprintln!(
        "ci-autofix: seed {seed}, {iterations} iterations ({kills} killing the binary), {:.1}s; trash files checked so far (all flows): {}",
        started.elapsed().as_secs_f64(),
        TRASHED.load(Ordering::Relaxed)
    );
}
