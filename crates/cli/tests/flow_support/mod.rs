//! Helpers shared by `bad_input_cli.rs`, `concurrency_cli.rs` (and the
//! `git` helper by `review_fix_relint.rs`): a
//! temporary real git repository next to an input folder, the real
//! `orchestrator` binary run in it with a clean environment, a fix agent
//! that is a real program, and a snapshot of everything outside the
//! engine-owned folders to prove a run wrote nothing else; and the tool
//! agent's transcript files (`agents_e2e.rs`, `real_model.rs`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::SystemTime;

pub use orchestrator_adapters::test_support::git;

/// The folders the engine owns inside a repository (excluded from git).
pub const ENGINE_FOLDERS: [&str; 3] = [".review", ".workflow", ".moai"];

/// A review-fix agent for `--agent command:sh <script>`: a fix prompt
/// (`# Milestone <ID>: …`) appends `// fixed <ID>` to `src/lib.rs` after
/// `$FIX_AGENT_DELAY` seconds; anything else (a planning prompt) gets prose,
/// so the engine falls back to its deterministic plan.
pub const FIX_AGENT: &str = r##"#!/bin/sh
prompt=$(cat)
first=$(printf '%s\n' "$prompt" | head -n 1)
case "$first" in
  "# Milestone "*)
    sleep "${FIX_AGENT_DELAY:-0}"
    id=${first#\# Milestone }
    id=${id%%:*}
    printf '// fixed %s\n' "$id" >> src/lib.rs
    echo "Fixed $id.";;
  *) echo "No plan from me: use your own.";;
esac
"##;

/// The committed `src/lib.rs` of every sandbox repository.
pub const LIB_RS: &str = "fn a() {}\nfn b() {}\nfn c() {}\nfn d() {}\nfn e() {}\nfn f() {}\nfn g() {}\nfn h() {}\nfn i() {}\n";

/// The bad-input corpus.
pub fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/bad-input")
        .join(name)
}

/// A temporary directory holding `repo/` (a git repository on `main` with
/// `src/lib.rs` and a committed symlink `link-out` to `outside/`), `in/` for
/// inputs, `outside/secret.txt`, and `bin/fix-agent.sh`.
pub struct Sandbox {
    tmp: tempfile::TempDir,
    /// The canonical temporary directory (what the binary prints).
    pub root: PathBuf,
    /// The repository.
    pub repo: PathBuf,
    /// Where inputs go (outside the repository, so its tree stays clean).
    pub inputs: PathBuf,
    /// The commit [`Sandbox::commits`] counts from.
    pub base: String,
}

impl Sandbox {
    /// A new sandbox.
    pub fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let inputs = root.join("in");
        for dir in [repo.join("src"), inputs.clone(), root.join("outside")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(root.join("outside/secret.txt"), "not yours\n").unwrap();
        let agent = root.join("bin/fix-agent.sh");
        std::fs::create_dir_all(agent.parent().unwrap()).unwrap();
        std::fs::write(&agent, FIX_AGENT).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(repo.join("src/lib.rs"), LIB_RS).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), repo.join("link-out")).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["config", "user.email", "test@example.invalid"]);
        git(&repo, &["config", "user.name", "Test"]);
        git(&repo, &["config", "commit.gpgsign", "false"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "init"]);
        let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
        Sandbox {
            tmp,
            root,
            repo,
            inputs,
            base,
        }
    }

    /// `--agent` for the fix agent.
    pub fn agent_spec(&self) -> String {
        format!(
            "command:sh {}",
            self.root.join("bin/fix-agent.sh").display()
        )
    }

    /// Copies a corpus file into `in/`.
    pub fn input(&self, corpus_name: &str) -> PathBuf {
        let to = self.inputs.join(corpus_name);
        std::fs::copy(corpus(corpus_name), &to).unwrap();
        to
    }

    /// Writes `bytes` to `in/<name>`.
    pub fn write_input(&self, name: &OsStr, bytes: &[u8]) -> PathBuf {
        let to = self.inputs.join(name);
        std::fs::write(&to, bytes).unwrap();
        to
    }

    /// Commits `text` as `name` in the repository; [`Sandbox::commits`]
    /// then counts from this commit.
    pub fn commit_file(&mut self, name: &str, text: &str) {
        std::fs::write(self.repo.join(name), text).unwrap();
        git(&self.repo, &["add", name]);
        git(&self.repo, &["commit", "-q", "-m", &format!("add {name}")]);
        self.base = git(&self.repo, &["rev-parse", "HEAD"]).trim().to_owned();
    }

    /// The binary in the repository with a clean environment, stdin closed
    /// (not a terminal), output captured.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
        cmd.env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
            .args(args)
            .current_dir(&self.repo)
            .env("RUST_BACKTRACE", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("CARGO_TARGET_DIR", self.root.join("target"))
            .env("ORCHESTRATOR_CACHE_DIR", self.root.join("cache"))
            .env("COLUMNS", "100")
            .env_remove("RUST_LOG")
            .env_remove("ORCHESTRATOR_AGENT")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_MODEL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs the binary and waits.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `review-fix --fix <input> --agent <fix agent> --test-cmd true -y`.
    pub fn review_fix_args(&self, input: &Path) -> Vec<std::ffi::OsString> {
        vec![
            "review-fix".into(),
            "--fix".into(),
            input.as_os_str().to_owned(),
            "--agent".into(),
            self.agent_spec().into(),
            "--test-cmd".into(),
            "true".into(),
            "-y".into(),
        ]
    }

    /// Subjects of the commits since the sandbox's first commit, oldest first.
    pub fn commits(&self) -> Vec<String> {
        git(
            &self.repo,
            &[
                "log",
                "--reverse",
                "--format=%s",
                &format!("{}..HEAD", self.base),
            ],
        )
        .lines()
        .map(str::to_owned)
        .collect()
    }

    /// Everything outside `.git` and the engine-owned folders: `git status`
    /// (ignored and untracked files included, engine folders left out),
    /// HEAD, and every file with its size and modification time (symlinks
    /// not followed).
    pub fn snapshot(&self) -> Snapshot {
        let status = git(
            &self.repo,
            &[
                "--no-optional-locks",
                "status",
                "--porcelain=v1",
                "--ignored",
                "--untracked-files=all",
            ],
        )
        .lines()
        .filter(|l| {
            let path = l.get(3..).unwrap_or_default();
            !ENGINE_FOLDERS
                .iter()
                .any(|f| path == *f || path.starts_with(&format!("{f}/")))
        })
        .map(str::to_owned)
        .collect();
        let head = git(&self.repo, &["rev-parse", "HEAD"]).trim().to_owned();
        let mut files = BTreeMap::new();
        let mut stack = vec![self.repo.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                let name = entry.file_name();
                if dir == self.repo && (name == ".git" || ENGINE_FOLDERS.iter().any(|f| name == *f))
                {
                    continue;
                }
                let meta = std::fs::symlink_metadata(entry.path()).unwrap();
                if meta.is_dir() {
                    stack.push(entry.path());
                }
                let rel = entry.path().strip_prefix(&self.repo).unwrap().to_owned();
                files.insert(rel, (meta.len(), meta.modified().unwrap()));
            }
        }
        Snapshot {
            status,
            head,
            files,
        }
    }

    /// `text` with the sandbox path, review-fix session ids and planex
    /// session dates replaced.
    pub fn redact(&self, text: &str) -> String {
        let text = text.replace(&self.root.display().to_string(), "<tmp>");
        let text = replace_digits_after(&text, "fix-", "<id>");
        replace_digits_after(&text, "wpp-", "<date>")
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

/// `text` with every run of digits right after `prefix` replaced by `with`.
fn replace_digits_after(text: &str, prefix: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..at + prefix.len()]);
        if digits > 0 {
            out.push_str(with);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// What [`Sandbox::snapshot`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `git status` lines outside the engine folders.
    pub status: Vec<String>,
    /// HEAD.
    pub head: String,
    /// Every file and directory: (size, modification time).
    pub files: BTreeMap<PathBuf, (u64, SystemTime)>,
}

impl Snapshot {
    /// The paths, without sizes and times.
    pub fn paths(&self) -> Vec<&PathBuf> {
        self.files.keys().collect()
    }
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The exit code, stdout and stderr, for assertion messages.
pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    )
}

/// No panic: no exit 101, no `panicked at`, and the process exited (not
/// killed by a signal).
pub fn assert_no_panic(case: &str, o: &Output) {
    assert!(o.status.code().is_some(), "{case}: killed: {}", show(o));
    assert_ne!(o.status.code(), Some(101), "{case}: {}", show(o));
    assert!(!stderr(o).contains("panicked at"), "{case}: {}", show(o));
    assert!(!stdout(o).contains("panicked at"), "{case}: {}", show(o));
}

/// The `error: …` lines of stderr.
pub fn error_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("error"))
        .map(str::to_owned)
        .collect()
}

/// The `.jsonl` files in folders named `transcripts` under `root`.
pub fn transcript_files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && entry.file_name() != ".git" {
            found.extend(transcript_files(&path));
        } else if root.file_name().is_some_and(|n| n == "transcripts")
            && path.extension().is_some_and(|e| e == "jsonl")
        {
            found.push(path);
        }
    }
    found.sort();
    found
}
