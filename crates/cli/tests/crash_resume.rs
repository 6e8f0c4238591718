//! Crash-resume harness (issue 9, item 1): the real `orchestrator` binary on
//! real git repositories, killed with SIGKILL at many seeded random instants
//! and resumed until each session ends, then compared with an uninterrupted
//! run.
//!
//! Two flows, one test each, at least 50 kills per flow (60 by default):
//!
//! - **review-fix** with the builtin agent on plain text files: eight rdjsonl
//!   findings with machine-applicable suggestions in three files. Six fix
//!   cleanly; one goes stale once another fix of the same word has landed
//!   (the agent refuses it on every attempt); one breaks the test command
//!   `sh -c '! grep -q BROKEN docs/a.txt'` (rolled back, retried, failed).
//!   Sessions alternate `--isolation serial` (two in three: each fix tested
//!   on its own in the main tree) and the default worktree isolation (groups
//!   in git worktrees, landed by cherry-pick after batch verification). A
//!   kill is followed by `review-fix --resume`, or by a fresh `review-fix
//!   --fix` when the kill came before the session was recorded.
//! - **planex** `run tasks.csv` with the shell agent: eight tasks in four
//!   waves whose directives write a file derived from their dependencies'
//!   files and commit it only if that commit is not made yet. Sessions
//!   rotate through eager scheduling and wave barriers one task at a time
//!   (`-c 1`: the commit order, and so every tree, is fixed), and eager
//!   scheduling three at a time (`-c 3`: several tasks in flight at a kill;
//!   commits are serialised by a lock directory, their order varies). A kill
//!   is followed by `planex --continue`, or by a fresh `planex run` when the
//!   session has no `tasks.csv` yet.
//!
//! Each session is killed 3 to 8 times, then its last run goes to the end.
//! Kill instants are drawn from the seed, relative to an uninterrupted run
//! timed at the start of the test: a delay uniform over its whole length, a
//! delay within its start-up (before its first commit; while the branch has
//! no commit yet, one kill in two is one of these), or a few milliseconds
//! after the branch received its n-th commit (n among the commits still to
//! come, or the last one, to reach landing and completion). The kill goes
//! to the `orchestrator` process only, as `kill -9 PID` does; its children
//! (git, the test command, a task's directive) live on and may finish what
//! they were doing (or die of SIGPIPE on their next write to it). After
//! every kill the harness waits until they have all exited, then checks:
//!
//! - every state file parses: review-fix's JSON files with their own types,
//!   `fix-summary.md`, lock files; planex's `session.json`, `tasks.csv`,
//!   `results.csv` and every other CSV, `journal.ndjson` line by line (no
//!   torn line), `discoveries.ndjson`, `context.md` (temporary files of an
//!   interrupted atomic write are skipped and counted);
//! - no lock is left: the harness itself takes every session lock (and
//!   review-fix's repository lock); the next run must not be refused;
//! - the branch holds a prefix of the uninterrupted run's commits, compared
//!   as (message, tree) pairs (with `-c 3`: some of them, by message), with
//!   no message twice.
//!
//! At the end of each session: the commits equal the uninterrupted run's
//! ((message, tree) pairs in order; with `-c 3` the same (message, patch)
//! pairs and the same final tree), no commit is duplicated, the working tree
//! is clean, no worktree or `review-fix/` branch is left, the finished
//! session holds no temporary file, and the run that finished reported the
//! same outcome as the uninterrupted run.
//!
//! What makes commits exactly-once differs. review-fix guarantees it: a
//! resume finds landed fixes by their commit message and restores a fix in
//! flight from its checkpoint. planex does not: a task whose result was
//! journalled never runs again, but a task in flight at a kill — even one
//! whose directive had already committed — runs again on `--continue`
//! (at-least-once; `planex_cli.rs` counts those re-runs). Here the
//! directive's own idempotence (`git diff --cached --quiet || git commit`)
//! is what keeps its commit single.
//!
//! Not covered: killing the whole process group (git killed mid-write can
//! leave `.git/index.lock`, which git itself then refuses to pass), and
//! resuming while the killed run's children are still running.
//!
//! `ORCH_TEST_SEED=N` replays the kill schedule (the same delays and
//! triggers; what the engine is doing at a given instant still depends on
//! timing). `ORCH_CRASH_KILLS=N` sets the kills per flow (default 60),
//! `ORCH_CRASH_KEEP=1` keeps the temporary repositories. Run with
//! `--nocapture` to see the tallies.

// Waiting for the processes a killed run left behind reads /proc.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{Display, Write as _};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use orchestrator_core::state::{CsvTable, LockHolder, SessionLock};
use orchestrator_planex::journal::JournalLine;
use orchestrator_planex::rows::{RowStatus, read_tasks_csv};
use orchestrator_planex::session::{ResumePhase, Session, SessionStatus, list_sessions};
use orchestrator_review_fix::session::unfinished_sessions;
use orchestrator_review_fix::{
    ActiveSession, FindingsFile, FixHistory, FixPlan, FixProgress, PartialPlan, SessionPhase,
    VerifyState,
};

/// Kills per flow unless `ORCH_CRASH_KILLS` says otherwise.
const DEFAULT_KILLS: usize = 60;
/// The environment variable that marks every process of one run (children
/// inherit it), so the harness can wait for the ones a kill leaves behind.
const MARK_ENV: &str = "ORCH_CRASH_MARK";
/// No single run or wait may take longer than this.
const PATIENCE: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------- context

/// The seed and the flow: named in every failure, so a failure can be replayed.
#[derive(Debug, Clone, Copy)]
struct Ctx {
    seed: u64,
    flow: &'static str,
}

impl Ctx {
    fn new(flow: &'static str) -> Ctx {
        let seed = std::env::var("ORCH_TEST_SEED")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("crash-resume {flow}: seed {seed} (replay with ORCH_TEST_SEED={seed})");
        Ctx { seed, flow }
    }

    #[track_caller]
    fn fail(&self, message: impl Display) -> ! {
        panic!(
            "crash-resume {}: {message}\n[seed {}: replay with ORCH_TEST_SEED={}]",
            self.flow, self.seed, self.seed
        )
    }

    #[track_caller]
    fn check(&self, condition: bool, message: impl FnOnce() -> String) {
        if !condition {
            self.fail(message());
        }
    }

    #[track_caller]
    fn ok<T, E: Display>(&self, result: Result<T, E>, what: impl Display) -> T {
        match result {
            Ok(v) => v,
            Err(e) => self.fail(format!("{what}: {e}")),
        }
    }

    /// A generator of its own for this flow, derived from the seed.
    fn rng(&self) -> Rng {
        let salt = self.flow.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Rng(self.seed ^ salt)
    }
}

/// SplitMix64: a small, seeded, reproducible generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`lo` when the range is empty).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next() % (hi - lo)
        }
    }

    /// Uniform in `0..max`, in microseconds.
    fn duration(&mut self, max: Duration) -> Duration {
        Duration::from_micros(self.range(0, max.as_micros().max(1) as u64))
    }
}

// ---------------------------------------------------------------- git

fn git(ctx: &Ctx, dir: &Path, args: &[&str]) -> String {
    let out = ctx.ok(
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output(),
        format_args!("git {args:?}"),
    );
    ctx.check(out.status.success(), || {
        format!(
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new repository at `repo` on branch `main` with `files` in one commit.
fn init_repo(ctx: &Ctx, repo: &Path, files: &[(&str, &str)]) {
    ctx.ok(fs::create_dir_all(repo), "create the repository");
    for (name, text) in files {
        let path = repo.join(name);
        ctx.ok(fs::create_dir_all(path.parent().unwrap()), name);
        ctx.ok(fs::write(&path, text), name);
    }
    git(ctx, repo, &["init", "-q", "-b", "main"]);
    git(
        ctx,
        repo,
        &["config", "user.email", "crash@example.invalid"],
    );
    git(ctx, repo, &["config", "user.name", "Crash Harness"]);
    git(ctx, repo, &["add", "-A"]);
    git(ctx, repo, &["commit", "-q", "-m", "base"]);
}

fn head(ctx: &Ctx, dir: &Path) -> String {
    git(ctx, dir, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// One commit as compared: its whole message and its tree, and the patch it
/// makes (for flows whose commit order may vary).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Commit {
    message: String,
    tree: String,
    patch: String,
}

/// The commits on the checked-out branch after `base`, oldest first.
fn commits_since(ctx: &Ctx, repo: &Path, base: &str, with_patch: bool) -> Vec<Commit> {
    let log = git(
        ctx,
        repo,
        &[
            "log",
            "--reverse",
            "--format=%H%x1f%T%x1f%B%x1e",
            &format!("{base}..HEAD"),
        ],
    );
    log.split('\x1e')
        .map(|r| r.trim_start_matches('\n'))
        .filter(|r| !r.is_empty())
        .map(|r| {
            let mut parts = r.splitn(3, '\x1f');
            let (id, tree, message) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            let patch = if with_patch {
                git(ctx, repo, &["diff-tree", "-r", "--no-commit-id", id])
            } else {
                String::new()
            };
            Commit {
                message: message.trim_end().to_owned(),
                tree: tree.to_owned(),
                patch,
            }
        })
        .collect()
}

/// Lines of the branch's reflog: one per update of `main` (cheap to poll).
fn reflog_lines(repo: &Path) -> usize {
    fs::read_to_string(repo.join(".git/logs/refs/heads/main"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

// ---------------------------------------------------------------- runs

static RUNS: AtomicU64 = AtomicU64::new(0);

/// One run of the binary, its output going to files.
struct Run {
    child: Child,
    marker: String,
    stdout: PathBuf,
    stderr: PathBuf,
    args: Vec<String>,
    started: Instant,
}

/// A cache folder of the repository's own, in the system's temporary folder
/// (outside any repository): no other test's folders in it, so no other
/// test's prune speaks in this one's output.
fn test_cache(suite: &str, repo: &Path) -> PathBuf {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    std::env::temp_dir()
        .join(format!("{suite}-cache"))
        .join(format!("{}-{}", name(repo.parent()), name(Some(repo))))
}

impl Run {
    fn start(ctx: &Ctx, repo: &Path, logs: &Path, args: Vec<String>) -> Run {
        let n = RUNS.fetch_add(1, Ordering::SeqCst);
        let marker = format!("{}-{n}", std::process::id());
        ctx.ok(fs::create_dir_all(logs), "create the log directory");
        let stdout = logs.join(format!("run-{n}.out"));
        let stderr = logs.join(format!("run-{n}.err"));
        let child = ctx.ok(
            Command::new(env!("CARGO_BIN_EXE_orchestrator"))
                .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
                .env("ORCHESTRATOR_CACHE_DIR", test_cache("crash_resume", repo))
                .args(&args)
                .current_dir(repo)
                .env_remove("RUST_LOG")
                .env_remove("ORCHESTRATOR_AGENT")
                .env_remove("OPENAI_API_KEY")
                .env_remove("OPENAI_BASE_URL")
                .env_remove("OPENAI_MODEL")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("COLUMNS", "100")
                .env(MARK_ENV, &marker)
                .stdin(Stdio::null())
                .stdout(ctx.ok(File::create(&stdout), "create the stdout file"))
                .stderr(ctx.ok(File::create(&stderr), "create the stderr file"))
                .spawn(),
            "start orchestrator",
        );
        Run {
            child,
            marker,
            stdout,
            stderr,
            args,
            started: Instant::now(),
        }
    }

    fn stdout(&self) -> String {
        fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn describe(&self) -> String {
        format!(
            "`orchestrator {}`\nstdout:\n{}\nstderr:\n{}",
            self.args.join(" "),
            self.stdout(),
            self.stderr()
        )
    }

    fn exited(&mut self, ctx: &Ctx) -> Option<ExitStatus> {
        ctx.ok(self.child.try_wait(), "wait for orchestrator")
    }

    /// SIGKILL (what `kill -9 PID` sends), then reap.
    fn kill(&mut self, ctx: &Ctx) {
        ctx.ok(self.child.kill(), "kill orchestrator");
        ctx.ok(self.child.wait(), "reap orchestrator");
    }
}

/// When to kill a run.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// This long after the start.
    Delay(Duration),
    /// `jitter` after the branch has `commits` commits more than its base.
    Commit { commits: usize, jitter: Duration },
}

/// How a run ended.
enum Ended {
    Killed,
    Exited(ExitStatus),
}

/// Runs until it exits or the kill instant comes. `first_commit` receives
/// when (after the start) the branch first moved, if it was seen.
fn drive(
    ctx: &Ctx,
    run: &mut Run,
    repo: &Path,
    base_reflog: usize,
    at: Option<KillAt>,
    first_commit: &mut Option<Duration>,
) -> Ended {
    let mut fire: Option<Instant> = match at {
        Some(KillAt::Delay(d)) => Some(run.started + d),
        _ => None,
    };
    let at_start = reflog_lines(repo);
    loop {
        if let Some(status) = run.exited(ctx) {
            return Ended::Exited(status);
        }
        let lines = reflog_lines(repo);
        if first_commit.is_none() && lines > at_start {
            *first_commit = Some(run.started.elapsed());
        }
        if let (None, Some(KillAt::Commit { commits, jitter })) = (fire, at)
            && lines >= base_reflog + commits
        {
            fire = Some(Instant::now() + jitter);
        }
        let now = Instant::now();
        if let Some(when) = fire
            && now >= when
        {
            run.kill(ctx);
            return Ended::Killed;
        }
        if now - run.started > PATIENCE {
            run.kill(ctx);
            ctx.fail(format!(
                "a run took more than {PATIENCE:?}: {}",
                run.describe()
            ));
        }
        let nap = match fire {
            Some(when) => (when - now).min(Duration::from_millis(2)),
            None => Duration::from_millis(2),
        };
        std::thread::sleep(nap);
    }
}

/// Processes still alive that carry `marker` in their environment.
fn survivors(marker: &str) -> Vec<u32> {
    let needle = format!("{MARK_ENV}={marker}\0").into_bytes();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
        .collect()
}

/// Waits until every process a killed run left behind has exited; returns
/// how many there were at first and how long it took.
fn wait_for_orphans(ctx: &Ctx, run: &Run) -> (usize, Duration) {
    let start = Instant::now();
    let first = survivors(&run.marker).len();
    while !survivors(&run.marker).is_empty() {
        ctx.check(start.elapsed() < PATIENCE, || {
            format!(
                "processes of a killed run still alive after {PATIENCE:?}: {:?}",
                survivors(&run.marker)
            )
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    (first, start.elapsed())
}

/// A run must never be refused for a lock or panic.
fn check_not_refused(ctx: &Ctx, run: &Run) {
    let err = run.stderr();
    for refusal in [
        "is locked by",
        "is in use",
        "another review-fix run is in progress",
        "panicked",
    ] {
        ctx.check(!err.contains(refusal), || {
            format!("a run said {refusal:?}: {}", run.describe())
        });
    }
}

// ---------------------------------------------------------------- state files

/// What the harness saw on disk after a kill.
struct Inspection {
    /// Where the session was.
    phase: String,
    /// Temporary files of interrupted atomic writes.
    temp_files: Vec<String>,
    /// Those of them in sessions that have finished (a resume must have
    /// deleted them).
    finished_temp_files: Vec<String>,
}

fn is_temp_file(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

fn read_text(ctx: &Ctx, path: &Path) -> String {
    let bytes = ctx.ok(fs::read(path), format_args!("read {}", path.display()));
    match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => ctx.fail(format!("{} is not UTF-8: {e}", path.display())),
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(ctx: &Ctx, path: &Path) -> T {
    let text = read_text(ctx, path);
    ctx.ok(
        serde_json::from_str(&text),
        format_args!("{} does not parse after a kill:\n{text}", path.display()),
    )
}

/// Every line of an NDJSON file parses (as `T`), and the file ends with a
/// line break: no torn line.
fn parse_ndjson<T: serde::de::DeserializeOwned>(ctx: &Ctx, path: &Path) -> usize {
    let text = read_text(ctx, path);
    ctx.check(text.is_empty() || text.ends_with('\n'), || {
        format!("{} ends with a torn line:\n{text}", path.display())
    });
    for (i, line) in text.lines().enumerate() {
        let _: T = ctx.ok(
            serde_json::from_str(line),
            format_args!("{} line {} does not parse", path.display(), i + 1),
        );
    }
    text.lines().count()
}

/// A lock file is empty (released) or names its holder.
fn parse_lock_file(ctx: &Ctx, path: &Path) {
    let text = read_text(ctx, path);
    if !text.is_empty() {
        let _: LockHolder = ctx.ok(
            serde_json::from_str(&text),
            format_args!("lock file {}", path.display()),
        );
    }
}

/// Takes the lock of `dir` and lets it go: nobody may hold it after a kill.
fn check_lock_free(ctx: &Ctx, dir: &Path) {
    let lock = ctx.ok(
        SessionLock::acquire(dir),
        format_args!("a kill left {} locked", dir.display()),
    );
    lock.release();
}

/// Parses a file no flow-specific rule covered, by its extension.
fn parse_other(ctx: &Ctx, path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    if name.ends_with(".json") {
        let _: serde_json::Value = parse_json(ctx, path);
    } else if name.ends_with(".ndjson") {
        parse_ndjson::<serde_json::Value>(ctx, path);
    } else if name.ends_with(".csv") {
        ctx.ok(
            CsvTable::parse(path, &ctx.ok(fs::read(path), path.display())),
            "CSV",
        );
    } else if name.ends_with(".md") {
        read_text(ctx, path);
    }
}

fn entries(ctx: &Ctx, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ctx
        .ok(fs::read_dir(dir), format_args!("list {}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

// ---------------------------------------------------------------- flows

/// The last phase header (`{header}<phase>`) a run printed on stderr, and
/// the last line after it.
fn last_progress<'a>(stderr: &'a str, header: &str) -> (Option<String>, &'a str) {
    let mut phase = None;
    let mut last = "";
    for line in stderr.lines() {
        if let Some(p) = line.strip_prefix(header) {
            phase = Some(p.trim().to_owned());
            last = "";
        } else if !line.trim().is_empty() {
            last = line.trim_start();
        }
    }
    (phase, last)
}

/// A flow under test: how to set a repository up, what to run next, and how
/// to read its state.
trait Flow {
    /// The configuration, for reports.
    fn label(&self) -> String;
    /// A fresh repository (inputs beside it) under `dir`; returns its path.
    fn setup(&self, ctx: &Ctx, dir: &Path) -> PathBuf;
    /// The next run: a fresh start or a resume; `None` once the session
    /// has finished.
    fn next(&self, ctx: &Ctx, repo: &Path) -> Option<Vec<String>>;
    /// Parses every state file, takes every lock, and says where the
    /// session is.
    fn inspect(&self, ctx: &Ctx, repo: &Path, commits: usize) -> Inspection;
    /// The exit code of the run that finishes a session.
    fn final_exit(&self) -> i32;
    /// The line of the closing summary that gives the outcome.
    fn outcome_line(&self, stdout: &str) -> Option<String>;
    /// Whether commits land in a fixed order.
    fn ordered(&self) -> bool;
    /// What a killed run was doing, from the progress it printed on stderr.
    fn progress_phase(&self, stderr: &str) -> String;
    /// Checks only this flow needs once a session has finished; `when`
    /// names the session in failures.
    fn final_checks(&self, _ctx: &Ctx, _repo: &Path, _when: &str) {}
}

// ---- review-fix

/// The test command: fails only when the breaking fix is in.
const RF_TEST: &str = "sh -c '! grep -q BROKEN docs/a.txt'";

struct ReviewFix {
    isolation: &'static str,
}

/// One rdjsonl diagnostic replacing `line:col..end` with `text`.
fn diagnostic(
    code: &str,
    message: &str,
    path: &str,
    line: u32,
    col: u32,
    end: u32,
    text: &str,
) -> String {
    let range = serde_json::json!({"start": {"line": line, "column": col}, "end": {"line": line, "column": end}});
    serde_json::json!({
        "message": message,
        "location": {"path": path, "range": range},
        "severity": "WARNING",
        "code": {"value": code},
        "suggestions": [{"range": range, "text": text}],
        "source": {"name": "crash-lint"}
    })
    .to_string()
}

impl ReviewFix {
    fn input(repo: &Path) -> PathBuf {
        repo.parent().unwrap().join("findings.rdjsonl")
    }

    fn args(&self, repo: &Path, resume: bool) -> Vec<String> {
        let mut args = vec!["review-fix".to_owned()];
        if resume {
            args.push("--resume".to_owned());
        } else {
            args.push("--fix".to_owned());
            args.push(Self::input(repo).display().to_string());
        }
        for a in [
            "--agent",
            "builtin",
            "-y",
            "--isolation",
            self.isolation,
            "--test-cmd",
            RF_TEST,
        ] {
            args.push(a.to_owned());
        }
        args
    }

    fn fixes_root(repo: &Path) -> PathBuf {
        repo.join(".review/fixes")
    }
}

impl Flow for ReviewFix {
    fn label(&self) -> String {
        format!("review-fix --isolation {}", self.isolation)
    }

    fn setup(&self, ctx: &Ctx, dir: &Path) -> PathBuf {
        let repo = dir.join("repo");
        init_repo(
            ctx,
            &repo,
            &[
                (
                    "docs/a.txt",
                    "The quick brown fox\njumps over teh lazy dog.\nIt was recieved well.\nSeperate lines are fine.\n",
                ),
                ("docs/b.txt", "alpha\nbeta gama\ndelta\nit occured once\n"),
                ("docs/c.txt", "Teh end.\n"),
            ],
        );
        let findings = [
            // Breaks the test command: rolled back and retried, then failed.
            diagnostic("style", "a stronger word", "docs/a.txt", 1, 5, 10, "BROKEN"),
            diagnostic("typo", "misspelt teh", "docs/a.txt", 2, 12, 15, "the"),
            // The same word under another rule: stale once the first landed.
            diagnostic(
                "spelling",
                "teh is not a word",
                "docs/a.txt",
                2,
                12,
                15,
                "the",
            ),
            diagnostic(
                "typo",
                "misspelt recieved",
                "docs/a.txt",
                3,
                8,
                16,
                "received",
            ),
            diagnostic(
                "typo",
                "misspelt Seperate",
                "docs/a.txt",
                4,
                1,
                9,
                "Separate",
            ),
            diagnostic("typo", "misspelt gama", "docs/b.txt", 2, 6, 10, "gamma"),
            diagnostic(
                "typo",
                "misspelt occured",
                "docs/b.txt",
                4,
                4,
                11,
                "occurred",
            ),
            diagnostic("typo", "misspelt Teh", "docs/c.txt", 1, 1, 4, "The"),
        ];
        ctx.ok(
            fs::write(Self::input(&repo), findings.join("\n") + "\n"),
            "write the findings",
        );
        repo
    }

    fn next(&self, _ctx: &Ctx, repo: &Path) -> Option<Vec<String>> {
        let root = Self::fixes_root(repo);
        if !unfinished_sessions(&root).is_empty() {
            return Some(self.args(repo, true));
        }
        let finished = fs::read_dir(&root).is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.path().join("fix-history.json").is_file()))
        });
        if finished {
            None
        } else {
            Some(self.args(repo, false))
        }
    }

    #[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
    fn inspect(&self, ctx: &Ctx, repo: &Path, _commits: usize) -> Inspection {
        let mut temp_files = Vec::new();
        let review = repo.join(".review");
        if review.is_dir() {
            for path in entries(ctx, &review) {
                if path.is_file() {
                    let name = path.file_name().unwrap().to_string_lossy().into_owned();
                    if name == ".lock" {
                        parse_lock_file(ctx, &path);
                    } else if is_temp_file(&name) {
                        temp_files.push(name);
                    } else {
                        parse_other(ctx, &path);
                    }
                }
            }
            check_lock_free(ctx, &review);
        }
        let root = Self::fixes_root(repo);
        let sessions: Vec<PathBuf> = if root.is_dir() {
            entries(ctx, &root)
                .into_iter()
                .filter(|p| p.is_dir())
                .collect()
        } else {
            Vec::new()
        };
        let mut current: Option<(Option<ActiveSession>, bool, PathBuf)> = None;
        let mut finished_temp_files = Vec::new();
        for dir in &sessions {
            let mut active = None;
            let mut history = false;
            let mut temps = Vec::new();
            for path in entries(ctx, dir) {
                if path.is_dir() {
                    continue; // worktrees/, targets/
                }
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                match name.as_str() {
                    ".lock" => parse_lock_file(ctx, &path),
                    n if is_temp_file(n) => temps.push(format!("{}/{n}", dir.display())),
                    "findings.json" => {
                        let _: FindingsFile = parse_json(ctx, &path);
                    }
                    "active-fix-session.json" => {
                        active = Some(parse_json::<ActiveSession>(ctx, &path))
                    }
                    "fix-plan.json" => {
                        let _: FixPlan = parse_json(ctx, &path);
                    }
                    "verify-state.json" => {
                        let _: VerifyState = parse_json(ctx, &path);
                    }
                    "fix-history.json" => {
                        let h: FixHistory = parse_json(ctx, &path);
                        ctx.check(!h.entries.is_empty(), || {
                            format!("{} has no entry", path.display())
                        });
                        history = true;
                    }
                    "fix-summary.md" => {
                        ctx.check(!read_text(ctx, &path).is_empty(), || {
                            format!("{} is empty", path.display())
                        });
                    }
                    n if n.starts_with("partial-plan-") && n.ends_with(".json") => {
                        let _: PartialPlan = parse_json(ctx, &path);
                    }
                    n if n.starts_with("fix-progress-") && n.ends_with(".json") => {
                        let _: FixProgress = parse_json(ctx, &path);
                    }
                    _ => parse_other(ctx, &path),
                }
            }
            check_lock_free(ctx, dir);
            if history && active.is_none() {
                finished_temp_files.extend(temps.iter().cloned());
            }
            temp_files.extend(temps);
            // Session ids are creation times: the last one is the newest.
            current = Some((active, history, dir.clone()));
        }
        let phase = match current {
            None => "start-up (no session yet)".to_owned(),
            Some((None, false, _)) => "discovery (session being created)".to_owned(),
            Some((None, true, _)) => "finished (exiting)".to_owned(),
            Some((Some(active), _, dir)) => match active.phase {
                SessionPhase::Discovery => "discovery".to_owned(),
                SessionPhase::Planning => "planning".to_owned(),
                SessionPhase::AwaitingApproval => "plan approval".to_owned(),
                SessionPhase::Completing => "completion".to_owned(),
                SessionPhase::Executing => {
                    let committed = active.in_flight.iter().any(|f| {
                        f.tree.is_dir() && head(ctx, &f.tree) != f.checkpoint.head.to_string()
                    });
                    if committed {
                        "mid-commit (fix committed, not yet recorded)".to_owned()
                    } else if !active.in_flight.is_empty() {
                        "mid-fix (a fix in flight)".to_owned()
                    } else if dir.join("verify-state.json").is_file() {
                        "landing (batch verification)".to_owned()
                    } else {
                        "executing (between fixes)".to_owned()
                    }
                }
            },
        };
        Inspection {
            phase,
            temp_files,
            finished_temp_files,
        }
    }

    fn final_exit(&self) -> i32 {
        1 // two findings are not fixable
    }

    fn outcome_line(&self, stdout: &str) -> Option<String> {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with("findings:"))
            .map(|l| l.trim().to_owned())
    }

    fn ordered(&self) -> bool {
        true
    }

    fn progress_phase(&self, stderr: &str) -> String {
        let (phase, last) = last_progress(stderr, "== review-fix: ");
        match phase.as_deref() {
            None => "start-up (nothing printed yet)".to_owned(),
            Some("planning") if last.starts_with("??") || last.starts_with("gate") => {
                "plan approval".to_owned()
            }
            Some("execution") => {
                let step = if last.starts_with('●') {
                    "a fix just committed"
                } else if last.starts_with("tests for") {
                    "tests just ran"
                } else if last.starts_with('…') {
                    "a fix (or group, or verification) under way"
                } else if last.starts_with('!') {
                    "an attempt just failed"
                } else if last.starts_with('✓') || last.starts_with('✗') {
                    "a finding (or group) just ended"
                } else {
                    "a stage starting"
                };
                format!("execution: {step}")
            }
            Some(p) => p.to_owned(),
        }
    }

    fn final_checks(&self, ctx: &Ctx, repo: &Path, when: &str) {
        let worktrees = git(ctx, repo, &["worktree", "list"]);
        ctx.check(worktrees.lines().count() == 1, || {
            format!("{when}: worktrees left behind:\n{worktrees}")
        });
        let branches = git(ctx, repo, &["branch", "--list", "review-fix/*"]);
        ctx.check(branches.trim().is_empty(), || {
            format!("{when}: branches left behind:\n{branches}")
        });
        ctx.check(
            unfinished_sessions(&Self::fixes_root(repo)).is_empty(),
            || format!("{when}: a session is still unfinished"),
        );
    }
}

// ---- planex

const TASKS_HEADER: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave";

/// Eight tasks in four waves: `(id, deps)`.
const DAG: [(&str, &[&str]); 8] = [
    ("T1", &[]),
    ("T2", &["T1"]),
    ("T3", &["T1"]),
    ("T4", &["T2"]),
    ("T5", &["T2", "T3"]),
    ("T6", &["T3"]),
    ("T7", &["T4", "T5"]),
    ("T8", &["T5", "T6"]),
];

struct Planex {
    schedule: &'static str,
    concurrency: u32,
    /// Verified (the default): the directives only write their files; the
    /// engine measures, checks and commits each task (exactly once, by its
    /// `Planex-Task` trailer). Unverified (`--no-commit`): each directive
    /// commits its own work.
    verify: bool,
}

impl Planex {
    fn tasks(repo: &Path) -> PathBuf {
        repo.parent().unwrap().join("tasks.csv")
    }

    /// The directive of a task: writes `out/<id>.txt` from its dependencies'
    /// files (so a task run before them fails, and the tree shows what it
    /// saw), then commits it unless that commit is already made. Commits
    /// take a lock directory, as tasks running at once share one index.
    fn directive(&self, id: &str, deps: &[&str]) -> String {
        let input = if deps.is_empty() {
            "true".to_owned()
        } else {
            let files: Vec<String> = deps.iter().map(|d| format!("out/{d}.txt")).collect();
            format!("cat {}", files.join(" "))
        };
        if self.verify {
            return format!(
                "mkdir -p out && {{ {input} && echo '{id} done'; }} > out/{id}.txt && sleep 0.04"
            );
        }
        format!(
            "mkdir -p out && {{ {input} && echo '{id} done'; }} > out/{id}.txt \
             && sleep 0.04 \
             && until mkdir .git/crash-task-lock 2>/dev/null; do sleep 0.005; done \
             && {{ git add out/{id}.txt && {{ git diff --cached --quiet || git commit -q -m 'task {id}: write out/{id}.txt'; }}; \
             s=$?; rmdir .git/crash-task-lock; exit $s; }}"
        )
    }

    fn args(&self, repo: &Path, resume: bool) -> Vec<String> {
        let mut args = vec!["planex".to_owned()];
        if resume {
            args.push("--continue".to_owned());
        } else {
            args.push("run".to_owned());
            args.push(Self::tasks(repo).display().to_string());
        }
        args.extend([
            "-y".to_owned(),
            "-c".to_owned(),
            self.concurrency.to_string(),
            "--schedule".to_owned(),
            self.schedule.to_owned(),
        ]);
        if !self.verify {
            // The unverified flow, whose tasks commit themselves.
            args.push("--no-commit".to_owned());
        }
        args
    }
}

impl Flow for Planex {
    fn label(&self) -> String {
        format!(
            "planex run --schedule {} -c {}{}",
            self.schedule,
            self.concurrency,
            if self.verify { " --verify" } else { "" }
        )
    }

    fn setup(&self, ctx: &Ctx, dir: &Path) -> PathBuf {
        let repo = dir.join("repo");
        init_repo(ctx, &repo, &[("README.md", "crash-resume\n")]);
        let mut csv = format!("{TASKS_HEADER}\n");
        for (id, deps) in DAG {
            let directive = self.directive(id, deps).replace('"', "\"\"");
            let _ = writeln!(
                csv,
                "{id},Write {id},Write out/{id}.txt,,,,,\"{directive}\",{},,",
                deps.join(";")
            );
        }
        ctx.ok(fs::write(Self::tasks(&repo), csv), "write tasks.csv");
        repo
    }

    fn next(&self, ctx: &Ctx, repo: &Path) -> Option<Vec<String>> {
        let sessions = ctx.ok(list_sessions(repo), "list planex sessions");
        if sessions
            .iter()
            .any(|s| s.meta.status == SessionStatus::Finished)
        {
            None
        } else if sessions
            .iter()
            .any(|s| s.resume_phase == ResumePhase::Execute)
        {
            Some(self.args(repo, true))
        } else {
            Some(self.args(repo, false))
        }
    }

    fn inspect(&self, ctx: &Ctx, repo: &Path, commits: usize) -> Inspection {
        let mut temp_files = Vec::new();
        // Reading the list parses every session.json with its type.
        let sessions = ctx.ok(list_sessions(repo), "list planex sessions after a kill");
        let with_tasks = sessions
            .iter()
            .filter(|s| s.resume_phase == ResumePhase::Execute)
            .count();
        ctx.check(with_tasks <= 1, || {
            format!("{with_tasks} sessions hold a tasks.csv: a resume started a second one")
        });
        let mut finished_temp_files = Vec::new();
        let mut phase = "start-up (no session yet)".to_owned();
        for info in &sessions {
            for path in entries(ctx, &info.dir) {
                if path.is_dir() {
                    continue;
                }
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                match name.as_str() {
                    ".lock" => parse_lock_file(ctx, &path),
                    n if is_temp_file(n) => {
                        let temp = format!("{}/{n}", info.dir.display());
                        if info.meta.status == SessionStatus::Finished {
                            finished_temp_files.push(temp.clone());
                        }
                        temp_files.push(temp);
                    }
                    "tasks.csv" | "results.csv" => {
                        ctx.ok(read_tasks_csv(&path), "a task CSV after a kill");
                    }
                    "journal.ndjson" => {
                        parse_ndjson::<JournalLine>(ctx, &path);
                    }
                    _ => parse_other(ctx, &path),
                }
            }
            if info.resume_phase != ResumePhase::Execute {
                check_lock_free(ctx, &info.dir);
                phase = "session being created".to_owned();
                continue;
            }
            // Opening takes the lock; loading replays the journal over the CSVs.
            let session = ctx.ok(
                Session::open(repo, Some(&info.id)),
                format_args!("reopen {} after a kill", info.id),
            );
            let (state, warning) = ctx.ok(session.load(), "load the session");
            ctx.check(warning.is_none(), || {
                format!("loading {} warned: {warning:?}", info.id)
            });
            let durable = state
                .task_rows()
                .iter()
                .filter(|r| r.status == RowStatus::Completed)
                .count();
            ctx.check(
                state
                    .task_rows()
                    .iter()
                    .all(|r| matches!(r.status, RowStatus::Completed | RowStatus::Pending)),
                || format!("a task failed or was skipped: {:?}", state.task_rows()),
            );
            drop(session);
            phase = if info.meta.status == SessionStatus::Finished {
                "finished (exiting)".to_owned()
            } else if info.meta.approvals.execution_plan.is_none() {
                "plan approval".to_owned()
            } else if commits > durable {
                // The killed run's directive finished on its own after the kill.
                "a task in flight (committed after the kill, not journalled)".to_owned()
            } else if durable == DAG.len() {
                "aggregating (every task journalled)".to_owned()
            } else {
                "between tasks (every commit journalled)".to_owned()
            };
        }
        Inspection {
            phase,
            temp_files,
            finished_temp_files,
        }
    }

    fn final_exit(&self) -> i32 {
        0
    }

    fn outcome_line(&self, stdout: &str) -> Option<String> {
        stdout
            .lines()
            .find(|l| l.starts_with("- **Tasks**:"))
            .map(str::to_owned)
    }

    fn ordered(&self) -> bool {
        self.concurrency == 1
    }

    fn final_checks(&self, ctx: &Ctx, repo: &Path, when: &str) {
        for info in ctx.ok(list_sessions(repo), "list planex sessions at the end") {
            let left: Vec<String> = entries(ctx, &info.dir)
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .filter(|n| n.starts_with("verify-inflight-"))
                .collect();
            ctx.check(left.is_empty(), || {
                format!(
                    "{when}: in-flight records left in {}: {left:?}",
                    info.dir.display()
                )
            });
        }
        // Tasks run at once in worktrees of their own; none is left.
        let worktrees = git(ctx, repo, &["worktree", "list"]);
        ctx.check(worktrees.lines().count() == 1, || {
            format!("{when}: worktrees left:\n{worktrees}")
        });
        let branches = git(ctx, repo, &["branch", "--list", "planex/*"]);
        ctx.check(branches.trim().is_empty(), || {
            format!("{when}: task branches left: {branches}")
        });
    }

    fn progress_phase(&self, stderr: &str) -> String {
        let (phase, last) = last_progress(stderr, "== planex: ");
        match phase.as_deref() {
            None => "start-up (nothing printed yet)".to_owned(),
            Some("execute") if last.starts_with('…') => "execute: a task running".to_owned(),
            Some("execute") if last.starts_with('✓') => {
                "execute: a task just completed".to_owned()
            }
            Some(p) => p.to_owned(),
        }
    }
}

// ---------------------------------------------------------------- harness

/// An uninterrupted run of a configuration.
struct Reference {
    commits: Vec<Commit>,
    outcome: Option<String>,
    /// Its wall time.
    wall: Duration,
    /// When its first commit landed, after the start.
    first_commit: Duration,
}

/// A temporary directory, kept when `ORCH_CRASH_KEEP` is set (to look at a
/// failure).
fn tempdir(ctx: &Ctx) -> tempfile::TempDir {
    let mut dir = ctx.ok(tempfile::tempdir(), "tempdir");
    dir.disable_cleanup(std::env::var_os("ORCH_CRASH_KEEP").is_some());
    dir
}

fn reference(ctx: &Ctx, flow: &dyn Flow) -> Reference {
    let tmp = tempdir(ctx);
    let repo = flow.setup(ctx, tmp.path());
    let base = head(ctx, &repo);
    let args = flow
        .next(ctx, &repo)
        .unwrap_or_else(|| ctx.fail("nothing to run in a fresh repository"));
    let started = Instant::now();
    let mut run = Run::start(ctx, &repo, &tmp.path().join("logs"), args);
    let mut first_commit = None;
    let Ended::Exited(status) = drive(ctx, &mut run, &repo, 0, None, &mut first_commit) else {
        ctx.fail("the reference run was killed");
    };
    let wall = started.elapsed();
    ctx.check(status.code() == Some(flow.final_exit()), || {
        format!(
            "{}: reference run exit {status}: {}",
            flow.label(),
            run.describe()
        )
    });
    ctx.check(flow.next(ctx, &repo).is_none(), || {
        format!("{}: the reference session did not finish", flow.label())
    });
    let commits = commits_since(ctx, &repo, &base, !flow.ordered());
    ctx.check(commits.len() >= 4, || {
        format!(
            "{}: the reference made {} commits",
            flow.label(),
            commits.len()
        )
    });
    flow.final_checks(ctx, &repo, "the reference run");
    Reference {
        commits,
        outcome: flow.outcome_line(&run.stdout()),
        wall,
        first_commit: first_commit.unwrap_or(wall),
    }
}

/// What the kills of one flow hit.
#[derive(Default)]
struct Tally {
    sessions: usize,
    runs: usize,
    kills: usize,
    /// Runs that ended on their own before their kill instant.
    natural_ends: usize,
    by_commits: BTreeMap<&'static str, usize>,
    /// What the killed run was doing (its last progress on stderr).
    by_progress: BTreeMap<String, usize>,
    /// Where the state on disk said the session was.
    by_phase: BTreeMap<String, usize>,
    /// Temporary files of interrupted atomic writes still there when a
    /// session ended.
    temp_files_left: Vec<String>,
    by_trigger: BTreeMap<&'static str, usize>,
    by_config: BTreeMap<String, usize>,
    kills_leaving_processes: usize,
    longest_orphan_wait: Duration,
    temp_files_seen: usize,
}

impl Tally {
    fn report(&self, ctx: &Ctx, wall: Duration) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "crash-resume {}: seed {}: {} kills over {} sessions and {} runs ({} ran to the end before their kill instant) in {:.1}s",
            ctx.flow,
            ctx.seed,
            self.kills,
            self.sessions,
            self.runs,
            self.natural_ends,
            wall.as_secs_f64()
        );
        let _ = writeln!(out, "  by commits on the branch: {:?}", self.by_commits);
        let _ = writeln!(out, "  by trigger: {:?}", self.by_trigger);
        let _ = writeln!(out, "  by configuration: {:?}", self.by_config);
        let _ = writeln!(
            out,
            "  by what the killed run was doing (its last progress line):"
        );
        for (phase, n) in &self.by_progress {
            let _ = writeln!(out, "    {n:3}  {phase}");
        }
        let _ = writeln!(out, "  by the session state on disk after the kill:");
        for (phase, n) in &self.by_phase {
            let _ = writeln!(out, "    {n:3}  {phase}");
        }
        let _ = writeln!(
            out,
            "  kills that left child processes running: {} (longest wait {:?}); temporary files of interrupted writes seen after kills: {}, left when sessions ended: {:?}",
            self.kills_leaving_processes,
            self.longest_orphan_wait,
            self.temp_files_seen,
            self.temp_files_left
        );
        out
    }
}

/// Picks a kill instant: a delay within an uninterrupted run's length, a
/// delay within its start-up (before its first commit), or a few
/// milliseconds after a commit still to come (often the last one, to reach
/// landing and completion).
fn choose_kill(rng: &mut Rng, reference: &Reference, landed: usize) -> (KillAt, &'static str) {
    let total = reference.commits.len();
    let roll = rng.range(0, 20);
    // While the branch has no commit yet, one kill in two is within
    // start-up, so that every run has kills before any commit.
    if landed == 0 && rng.range(0, 2) == 0 {
        return (
            KillAt::Delay(rng.duration(reference.first_commit)),
            "within start-up",
        );
    }
    if landed < total && roll >= 16 {
        (
            KillAt::Commit {
                commits: total,
                jitter: rng.duration(Duration::from_millis(6)),
            },
            "just after the last commit",
        )
    } else if landed < total && roll >= 11 {
        (
            KillAt::Commit {
                commits: rng.range(landed as u64 + 1, total as u64 + 1) as usize,
                jitter: rng.duration(Duration::from_millis(25)),
            },
            "just after the n-th commit",
        )
    } else if roll >= 8 {
        (
            KillAt::Delay(rng.duration(reference.first_commit)),
            "within start-up",
        )
    } else {
        (
            KillAt::Delay(rng.duration(reference.wall.mul_f64(1.1))),
            "anywhere in a run",
        )
    }
}

/// The commits so far must be the start of the uninterrupted run's (or, when
/// the order varies, some of its commits), with no message twice.
fn check_commits_so_far(
    ctx: &Ctx,
    ordered: bool,
    got: &[Commit],
    reference: &Reference,
    when: &str,
) {
    let messages: Vec<&str> = got.iter().map(|c| c.message.as_str()).collect();
    let unique: BTreeSet<&str> = messages.iter().copied().collect();
    ctx.check(unique.len() == messages.len(), || {
        format!("{when}: a commit is duplicated: {messages:#?}")
    });
    if ordered {
        let n = got.len().min(reference.commits.len());
        ctx.check(
            got.len() <= reference.commits.len() && got[..n] == reference.commits[..n],
            || {
                format!(
                    "{when}: the branch is not a prefix of the uninterrupted run's commits\n got: {:#?}\n uninterrupted: {:#?}",
                    summarize(got),
                    summarize(&reference.commits)
                )
            },
        );
    } else {
        let known: BTreeSet<&str> = reference
            .commits
            .iter()
            .map(|c| c.message.as_str())
            .collect();
        ctx.check(unique.is_subset(&known), || {
            format!("{when}: unexpected commits: {messages:#?} (expected some of {known:#?})")
        });
    }
}

fn summarize(commits: &[Commit]) -> Vec<String> {
    commits
        .iter()
        .map(|c| format!("{} {}", &c.tree[..c.tree.len().min(10)], c.message))
        .collect()
}

/// One session: kill it `quota` times (fewer if a run ends before its
/// instant), let the last run finish, compare with the reference.
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn crash_session(
    ctx: &Ctx,
    flow: &dyn Flow,
    reference: &Reference,
    rng: &mut Rng,
    quota: usize,
    tally: &mut Tally,
) {
    let tmp = tempdir(ctx);
    let repo = flow.setup(ctx, tmp.path());
    let logs = tmp.path().join("logs");
    let base = head(ctx, &repo);
    let base_reflog = reflog_lines(&repo);
    let ordered = flow.ordered();
    let label = flow.label();
    tally.sessions += 1;
    let mut kills = 0;
    let mut finishing_run: Option<Run> = None;
    while let Some(args) = flow.next(ctx, &repo) {
        let landed = reflog_lines(&repo).saturating_sub(base_reflog);
        let plan = (kills < quota).then(|| choose_kill(rng, reference, landed));
        let mut run = Run::start(ctx, &repo, &logs, args);
        tally.runs += 1;
        let when = format!(
            "{label}, session {} in {}, kill {} ({:?})",
            tally.sessions,
            tmp.path().display(),
            kills + 1,
            plan.map(|p| p.0)
        );
        let mut first_commit = None;
        match drive(
            ctx,
            &mut run,
            &repo,
            base_reflog,
            plan.map(|p| p.0),
            &mut first_commit,
        ) {
            Ended::Exited(status) => {
                if plan.is_some() {
                    tally.natural_ends += 1;
                }
                check_not_refused(ctx, &run);
                ctx.check(status.code() == Some(flow.final_exit()), || {
                    format!("{when}: a run ended with {status}: {}", run.describe())
                });
                ctx.check(flow.next(ctx, &repo).is_none(), || {
                    format!(
                        "{when}: a run ended but the session is not finished: {}",
                        run.describe()
                    )
                });
                finishing_run = Some(run);
            }
            Ended::Killed => {
                kills += 1;
                tally.kills += 1;
                // Commits at the kill instant (children of the killed run
                // may still add the one they were making).
                let at_kill = reflog_lines(&repo).saturating_sub(base_reflog);
                let (left, waited) = wait_for_orphans(ctx, &run);
                if left > 0 {
                    tally.kills_leaving_processes += 1;
                    tally.longest_orphan_wait = tally.longest_orphan_wait.max(waited);
                }
                check_not_refused(ctx, &run);
                let got = commits_since(ctx, &repo, &base, false);
                check_commits_so_far(ctx, ordered, &got, reference, &when);
                let inspection = flow.inspect(ctx, &repo, got.len());
                tally.temp_files_seen += inspection.temp_files.len();
                let bucket = match at_kill {
                    0 => "before any commit",
                    n if n < reference.commits.len() => "between commits",
                    _ => "after the last commit",
                };
                *tally.by_commits.entry(bucket).or_default() += 1;
                *tally.by_phase.entry(inspection.phase).or_default() += 1;
                *tally
                    .by_progress
                    .entry(flow.progress_phase(&run.stderr()))
                    .or_default() += 1;
                *tally
                    .by_trigger
                    .entry(plan.map_or("none", |p| p.1))
                    .or_default() += 1;
                *tally.by_config.entry(label.clone()).or_default() += 1;
            }
        }
    }
    let when = format!(
        "{label}, session {} in {} after {kills} kills",
        tally.sessions,
        tmp.path().display()
    );

    // The end: the same commits as the uninterrupted run, nothing left over.
    let got = commits_since(ctx, &repo, &base, !ordered);
    check_commits_so_far(ctx, ordered, &got, reference, &when);
    if ordered {
        ctx.check(got == reference.commits, || {
            format!(
                "{when}: the commits differ from an uninterrupted run\n got: {:#?}\n uninterrupted: {:#?}",
                summarize(&got),
                summarize(&reference.commits)
            )
        });
    } else {
        let strip = |c: &[Commit]| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = c
                .iter()
                .map(|c| (c.message.clone(), c.patch.clone()))
                .collect();
            v.sort();
            v
        };
        ctx.check(strip(&got) == strip(&reference.commits), || {
            format!(
                "{when}: the commits (message, patch) differ from an uninterrupted run\n got: {:#?}\n uninterrupted: {:#?}",
                strip(&got),
                strip(&reference.commits)
            )
        });
        ctx.check(
            got.last().map(|c| &c.tree) == reference.commits.last().map(|c| &c.tree),
            || format!("{when}: the final tree differs from an uninterrupted run"),
        );
    }
    let status = git(ctx, &repo, &["status", "--porcelain"]);
    ctx.check(status.is_empty(), || {
        format!("{when}: the working tree is not clean:\n{status}")
    });
    flow.final_checks(ctx, &repo, &when);
    let end = flow.inspect(ctx, &repo, got.len());
    ctx.check(end.finished_temp_files.is_empty(), || {
        format!(
            "{when}: the finished session holds temporary files of interrupted writes: {:?}",
            end.finished_temp_files
        )
    });
    tally.temp_files_left.extend(end.temp_files);
    if let Some(run) = finishing_run {
        ctx.check(
            flow.outcome_line(&run.stdout()) == reference.outcome,
            || {
                format!(
                    "{when}: the run that finished reported {:?}, the uninterrupted run {:?}: {}",
                    flow.outcome_line(&run.stdout()),
                    reference.outcome,
                    run.describe()
                )
            },
        );
    }
}

fn kills_wanted() -> usize {
    std::env::var("ORCH_CRASH_KILLS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(DEFAULT_KILLS)
}

/// Sessions over `configs` in turn (each `(flow, sessions per turn)`) until
/// `kills_wanted()` kills happened.
fn crash_flow(ctx: &Ctx, configs: &[(Box<dyn Flow>, usize)]) {
    let started = Instant::now();
    let mut rng = ctx.rng();
    let references: Vec<Reference> = configs
        .iter()
        .map(|(f, _)| reference(ctx, f.as_ref()))
        .collect();
    let order: Vec<usize> = configs
        .iter()
        .enumerate()
        .flat_map(|(i, (_, n))| std::iter::repeat_n(i, *n))
        .collect();
    for ((f, _), r) in configs.iter().zip(&references) {
        eprintln!(
            "crash-resume {}: uninterrupted `{}`: {} commits in {:?}",
            ctx.flow,
            f.label(),
            r.commits.len(),
            r.wall
        );
    }
    let wanted = kills_wanted();
    let mut tally = Tally::default();
    let mut turn = 0;
    while tally.kills < wanted {
        let i = order[turn % order.len()];
        turn += 1;
        let quota = (rng.range(3, 9) as usize).min(wanted - tally.kills);
        crash_session(
            ctx,
            configs[i].0.as_ref(),
            &references[i],
            &mut rng,
            quota,
            &mut tally,
        );
        ctx.check(turn < wanted * 10, || {
            format!("{turn} sessions gave only {} kills", tally.kills)
        });
    }
    let report = tally.report(ctx, started.elapsed());
    eprintln!("{report}");
    // The harness's own coverage: with enough kills, each part of a run was
    // hit (a handful, set for a quick look, may miss one).
    if wanted < 30 {
        return;
    }
    for bucket in [
        "before any commit",
        "between commits",
        "after the last commit",
    ] {
        ctx.check(
            tally.by_commits.get(bucket).copied().unwrap_or(0) > 0,
            || format!("no kill landed {bucket}:\n{report}"),
        );
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn review_fix_survives_kill_9_at_random_instants() {
    let ctx = Ctx::new("review-fix");
    crash_flow(
        &ctx,
        &[
            (
                Box::new(ReviewFix {
                    isolation: "serial",
                }),
                2,
            ),
            (
                Box::new(ReviewFix {
                    isolation: "worktree",
                }),
                1,
            ),
        ],
    );
}

#[test]
fn planex_survives_kill_9_at_random_instants() {
    let ctx = Ctx::new("planex");
    crash_flow(
        &ctx,
        &[
            (
                Box::new(Planex {
                    schedule: "eager",
                    concurrency: 1,
                    verify: false,
                }),
                1,
            ),
            (
                Box::new(Planex {
                    schedule: "waves",
                    concurrency: 1,
                    verify: false,
                }),
                1,
            ),
            (
                Box::new(Planex {
                    schedule: "eager",
                    concurrency: 3,
                    verify: false,
                }),
                1,
            ),
        ],
    );
}

/// planex `--verify`: the engine, not the directives, commits each task —
/// one at a time in the working tree (`-c 1`), or three at once in
/// worktrees of their own, landed by cherry-pick (`-c 3`); after any kill
/// `--continue` rolls back (or removes the worktree of) a task that had not
/// landed and finds one that had by its trailer, so every commit is made
/// exactly once and the commits equal the uninterrupted run's.
#[test]
fn planex_verify_survives_kill_9_at_random_instants() {
    let ctx = Ctx::new("planex --verify");
    crash_flow(
        &ctx,
        &[
            (
                Box::new(Planex {
                    schedule: "eager",
                    concurrency: 3,
                    verify: true,
                }),
                1,
            ),
            (
                Box::new(Planex {
                    schedule: "waves",
                    concurrency: 1,
                    verify: true,
                }),
                1,
            ),
        ],
    );
}
