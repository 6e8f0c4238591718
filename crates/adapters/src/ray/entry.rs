//! The job's entrypoint and how its result is read back.
//!
//! Ray runs the entrypoint with `/bin/sh -c`, merges stdout and stderr into
//! one log file, races its own "Running entrypoint…" line with the
//! command's output, and fails every log request when the output holds a
//! byte that is not UTF-8. So the command never writes to the log: the
//! entrypoint
//! 1. copies the unpacked package into a private temporary directory (jobs
//!    of the same package share Ray's unpacked folder, and a job's writes
//!    would otherwise be seen by the next one), every file's time set to
//!    now: the package's fixed timestamps are older than any build in the
//!    node cache, and cargo, which judges freshness by mtime, would
//!    otherwise run the previous job's build of other sources;
//! 2. exports the node-local cache variables (one folder per repository,
//!    and a slot per concurrent job taken with `flock` where it exists, so
//!    two builds on one node do not wait on each other's lock);
//! 3. runs the project's `[worktree] setup` lines at the copy's root (a
//!    job's copy holds only what git would commit: `npm ci`, `uv sync`
//!    make what the command needs, helped by the node cache), a failing one
//!    reported with its own marker; then checks that the program exists (a
//!    missing one is reported as such, not as exit 127);
//! 4. runs the argv, every word quoted, with stdout, stderr and stdin as
//!    files;
//! 5. prints one marked block: the exit status, each stream's size and the
//!    tail of each stream in base64. On SIGTERM (a stop) the block is
//!    printed too, with what was written so far.
//!
//! A stop takes down the whole job, not only what Ray saw. Ray signals the
//! processes that existed when the stop came, and a shell runs its trap
//! only once its foreground child ends: a command forked an instant later,
//! or one that ignores TERM and keeps forking, outlived the job. So every
//! setup line and the command run in the background behind `wait`, which a
//! trap interrupts, and the trap signals the job's process group (Ray
//! starts the entrypoint in a session of its own): TERM, then KILL for
//! what is left. Backgrounded, the command inherits an ignored SIGINT (POSIX
//! for jobs without job control); a stop by SIGINT reaches it as TERM.
//!
//! With [`Entry::changes_back`] (commands whose file changes are the
//! point, such as planex's shell directives) the copy is first recorded in
//! a git repository kept beside it (`git --git-dir` outside the tree, so
//! the command sees no repository of ours and its own `git` calls cannot
//! move our baseline), and a second marked block carries the command's
//! changes as a binary git diff against it: what `git add -A` stages, so
//! files the tree's `.gitignore` ignores (build output) stay on the node.
//!
//! POSIX `sh`, `find` and coreutils (`mktemp`, `cp`, `touch`, `wc`, `tail`,
//! `base64`) are all
//! the node needs; `git` too for changes back.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Variables pointed into the node-local cache, relative to the slot's
/// folder.
pub const CACHE_VARS: [(&str, &str); 5] = [
    ("CARGO_TARGET_DIR", "cargo-target"),
    ("npm_config_cache", "npm"),
    ("PIP_CACHE_DIR", "pip"),
    ("GOCACHE", "go-build"),
    ("UV_CACHE_DIR", "uv"),
];

/// What the entrypoint runs and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The marker nonce: the job's submission id.
    pub id: &'a str,
    /// Program and arguments.
    pub argv: &'a [String],
    /// The directory to run in, relative to the package's root.
    pub rel_cwd: &'a Path,
    /// Standard input.
    pub stdin: Option<&'a [u8]>,
    /// Bytes kept per stream (the tail).
    pub output_limit: usize,
    /// The node-local cache folder of this repository (`None`: no cache).
    pub cache_dir: Option<String>,
    /// Whether the command's changes to the tree come back as a diff.
    pub changes_back: bool,
    /// The project's `[worktree] setup` lines, run with `sh -c` at the
    /// copy's root before the command (their output kept apart); the first
    /// that fails ends the job with its own marker.
    pub setup: &'a [String],
}

/// `git` against the job's baseline repository, kept outside the tree.
const BASE_GIT: &str = "git --git-dir=\"$W/g\" --work-tree=\"$W/t\" -c core.autocrlf=false";

/// Sets `L=1` when the entrypoint leads its own process group, as Ray
/// starts it (`start_new_session`): every process the job starts is then in
/// that group, and a stop can reach the ones Ray's snapshot missed.
const LEADER_CHECK: &str =
    "L=0; [ \"$(cut -d' ' -f5 /proc/$$/stat 2>/dev/null)\" = \"$$\" ] && L=1; ";

/// The stop: Ray signals only the processes it saw when the stop came, and
/// the shell would run its trap only once a foreground child ended. So
/// children run in the background behind `wait` (which a trap interrupts),
/// and the trap takes the job's whole process group down: TERM first, KILL
/// for whatever is left two seconds later (Ray's own grace is three) or
/// once the result block is out. Outside a group of its own, only the
/// running child is signalled.
const STOP: &str = "stop() { trap '' TERM INT; \
     if [ $L = 1 ]; then kill -s TERM 0; ( sleep 2; kill -s KILL 0 ) & \
     elif [ -n \"$P\" ]; then kill -s TERM \"$P\"; fi 2>/dev/null; \
     if [ -n \"$P\" ]; then wait \"$P\"; fi; \
     if [ -n \"$W\" ] && [ -f \"$W/e\" ]; then emit \"$1\"; elif [ -n \"$W\" ]; then rm -rf \"$W\"; fi; \
     if [ $L = 1 ]; then kill -s KILL 0; fi; exit \"$1\"; }; ";

/// Quotes `s` as one word for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Entry<'_> {
    /// The `sh` script submitted as the job's entrypoint.
    pub fn script(&self) -> String {
        let id = self.id;
        let limit = self.output_limit.max(1);
        let mut s = String::from("set -u; umask 022; W=; P=; ");
        s.push_str(LEADER_CHECK);
        s.push_str(&format!(
            "emit() {{ printf '\\n@@ORCH-RESULT %s rc=%d out=%d err=%d@@\\n' {q} \"$1\" \"$(wc -c <\"$W/o\")\" \"$(wc -c <\"$W/e\")\"; \
             tail -c {limit} \"$W/o\" | base64; printf '@@ORCH-STDERR %s@@\\n' {q}; \
             tail -c {limit} \"$W/e\" | base64; printf '@@ORCH-END %s@@\\n' {q}; {changes}cd /; rm -rf \"$W\"; }}; ",
            q = quote(id),
            changes = if self.changes_back { self.changes_block() } else { String::new() },
        ));
        s.push_str(STOP);
        s.push_str("trap 'stop 143' TERM; trap 'stop 130' INT; ");
        s.push_str("W=$(mktemp -d) || exit 125; ");
        s.push_str("mkdir \"$W/t\" && cp -a . \"$W/t/\" || exit 125; : >\"$W/o\"; : >\"$W/e\"; ");
        // The package's files all carry its fixed timestamp, older than any
        // build in the node cache: build tools that judge freshness by
        // mtime (cargo) would take the last job's build for this tree's.
        s.push_str("find \"$W/t\" -exec touch -c {} + 2>/dev/null; ");
        if let Some(cache) = &self.cache_dir {
            s.push_str(&self.cache_exports(cache));
        }
        match self.stdin {
            Some(input) => s.push_str(&format!(
                "printf %s {} | base64 -d >\"$W/i\" || exit 125; ",
                quote(&STANDARD.encode(input))
            )),
            None => s.push_str(": >\"$W/i\"; "),
        }
        if self.changes_back {
            s.push_str(&self.baseline());
        }
        s.push_str(&self.setup_lines());
        if self.changes_back && !self.setup.is_empty() {
            // What the setup made is the tree's, not the command's.
            s.push_str(&self.absorb_setup());
        }
        let rel = self.rel_cwd.to_string_lossy();
        s.push_str(&format!("cd \"$W/t\"/{} || exit 125; ", quote(&rel)));
        let program = self.argv.first().map(String::as_str).unwrap_or_default();
        s.push_str(&format!(
            "if ! command -v {p} >/dev/null 2>&1; then printf '\\n@@ORCH-SPAWN %s@@\\n' {q}; cd /; rm -rf \"$W\"; exit 127; fi; ",
            p = quote(program),
            q = quote(id)
        ));
        let words: Vec<String> = self.argv.iter().map(|w| quote(w)).collect();
        s.push_str(&format!(
            "( exec {} ) <\"$W/i\" >\"$W/o\" 2>\"$W/e\" & P=$!; wait \"$P\"; rc=$?; P=; emit $rc; exit $rc",
            words.join(" ")
        ));
        s
    }

    /// Records the copy as the baseline commit of a repository outside it
    /// (every file: the package holds only what git would commit); without
    /// git the job ends before running anything, with its own marker.
    fn baseline(&self) -> String {
        format!(
            "(unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE; {g} init -q && {g} add -A -f && \
             {g} -c user.name=orchestrator -c user.email=orchestrator@localhost -c commit.gpgsign=false \
             commit -q --no-verify --allow-empty -m base) >/dev/null 2>&1 || \
             {{ printf '\\n@@ORCH-NOGIT %s@@\\n' {q}; cd /; rm -rf \"$W\"; exit 125; }}; ",
            g = BASE_GIT,
            q = quote(self.id)
        )
    }

    /// Folds what the setup made (and `.gitignore` does not ignore) into
    /// the baseline, so that only the command's changes come back.
    fn absorb_setup(&self) -> String {
        format!(
            "(unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE; {g} add -A && \
             {g} -c user.name=orchestrator -c user.email=orchestrator@localhost -c commit.gpgsign=false \
             commit -q --no-verify --allow-empty -m setup) >/dev/null 2>&1; ",
            g = BASE_GIT
        )
    }

    /// The changes block: everything `git add -A` stages against the
    /// baseline, as a binary diff in base64, with its size.
    fn changes_block(&self) -> String {
        format!(
            "(unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE; {g} add -A && \
             {g} diff --cached --binary --no-color --no-ext-diff --no-renames HEAD) >\"$W/d\" 2>/dev/null || : >\"$W/d\"; \
             printf '@@ORCH-CHANGES %s size=%d@@\\n' {q} \"$(wc -c <\"$W/d\")\"; base64 <\"$W/d\"; \
             printf '@@ORCH-CHANGES-END %s@@\\n' {q}; ",
            g = BASE_GIT,
            q = quote(self.id)
        )
    }

    /// Each setup line at the copy's root, its output kept apart; a failure
    /// prints the setup marker (the line's index, its status, the tail of
    /// the setup's output) and ends the job.
    fn setup_lines(&self) -> String {
        let limit = self.output_limit.max(1);
        let mut s = String::new();
        for (index, line) in self.setup.iter().enumerate() {
            s.push_str(&format!(
                "cd \"$W/t\" || exit 125; ( sh -c {line} ) </dev/null >>\"$W/s\" 2>&1 & P=$!; wait \"$P\"; rc=$?; P=; if [ $rc -ne 0 ]; then \
                 printf '\\n@@ORCH-SETUP %s n={index} rc=%d@@\\n' {q} $rc; tail -c {limit} \"$W/s\" | base64; \
                 printf '@@ORCH-SETUP-END %s@@\\n' {q}; cd /; rm -rf \"$W\"; exit 125; fi; ",
                line = quote(line),
                q = quote(self.id)
            ));
        }
        s
    }

    /// `export VAR=<cache>/<slot>/<dir>; …` and the slot lock.
    fn cache_exports(&self, cache: &str) -> String {
        let mut s = format!(
            "C={}; mkdir -p \"$C\"; S=0; if command -v flock >/dev/null 2>&1; then \
             while [ $S -lt 64 ]; do exec 9>\"$C/slot$S.lock\"; flock -n 9 && break; S=$((S+1)); done; fi; ",
            quote(cache)
        );
        for (var, dir) in CACHE_VARS {
            s.push_str(&format!("export {var}=\"$C/slot$S/{dir}\"; "));
        }
        s
    }
}

/// What the entrypoint reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran.
    Ran {
        /// Its exit status (`128 + n` when a signal ended it).
        rc: i32,
        /// The tail of its standard output.
        stdout: Vec<u8>,
        /// The tail of its standard error.
        stderr: Vec<u8>,
        /// Whether either stream was longer than what was kept.
        truncated: bool,
    },
    /// The program was not found on the node.
    NotFound,
}

/// Reads the marked block of job `id` out of Ray's log; `None` when there
/// is none (the job never got that far, or its log is incomplete).
pub fn parse(log: &str, id: &str) -> Option<Outcome> {
    if log.contains(&format!("@@ORCH-SPAWN {id}@@")) {
        return Some(Outcome::NotFound);
    }
    let head = format!("@@ORCH-RESULT {id} ");
    let start = log.rfind(&head)?;
    let rest = &log[start + head.len()..];
    let (fields, body) = rest.split_once("@@\n")?;
    let mut rc = None;
    let mut sizes = BTreeMap::new();
    for field in fields.split_whitespace() {
        let (k, v) = field.split_once('=')?;
        let v: i64 = v.parse().ok()?;
        if k == "rc" {
            rc = i32::try_from(v).ok();
        } else {
            sizes.insert(k.to_owned(), v);
        }
    }
    let (out_b64, rest) = body.split_once(&format!("@@ORCH-STDERR {id}@@\n"))?;
    let (err_b64, _) = rest.split_once(&format!("@@ORCH-END {id}@@"))?;
    let stdout = decode(out_b64)?;
    let stderr = decode(err_b64)?;
    let truncated = sizes.get("out").copied()? > stdout.len() as i64
        || sizes.get("err").copied()? > stderr.len() as i64;
    Some(Outcome::Ran {
        rc: rc?,
        stdout,
        stderr,
        truncated,
    })
}

/// A failed setup line in job `id`'s log: its index in the setup, its exit
/// status and the tail of its output.
pub fn parse_setup_failure(log: &str, id: &str) -> Option<(usize, i32, Vec<u8>)> {
    let head = format!("@@ORCH-SETUP {id} n=");
    let start = log.rfind(&head)?;
    let rest = &log[start + head.len()..];
    let (fields, body) = rest.split_once("@@\n")?;
    let (index, rc) = fields.split_once(" rc=")?;
    let (b64, _) = body.split_once(&format!("@@ORCH-SETUP-END {id}@@"))?;
    Some((index.parse().ok()?, rc.parse().ok()?, decode(b64)?))
}

/// The command's changes out of job `id`'s log (a binary git diff, empty
/// when it changed nothing): `Ok(None)` when the log has no changes block,
/// `Err` when the node had no git or the block is damaged (its size does
/// not match).
pub fn parse_changes(log: &str, id: &str) -> Result<Option<Vec<u8>>, String> {
    if log.contains(&format!("@@ORCH-NOGIT {id}@@")) {
        return Err("the node has no working `git`, which changes back from a job need".to_owned());
    }
    let head = format!("@@ORCH-CHANGES {id} size=");
    let Some(start) = log.rfind(&head) else {
        return Ok(None);
    };
    let rest = &log[start + head.len()..];
    let damaged = || format!("job {id}: the changes block in its log is damaged");
    let (size, body) = rest.split_once("@@\n").ok_or_else(damaged)?;
    let size: usize = size.trim().parse().map_err(|_| damaged())?;
    let (b64, _) = body
        .split_once(&format!("@@ORCH-CHANGES-END {id}@@"))
        .ok_or_else(damaged)?;
    let bytes = decode(b64).ok_or_else(damaged)?;
    if bytes.len() != size {
        return Err(format!(
            "job {id}: the changes block holds {} bytes of the {size} the job wrote",
            bytes.len()
        ));
    }
    Ok(Some(bytes))
}

/// base64 lines to bytes; lines that are not base64 (Ray's own racing
/// "Running entrypoint…" line) are skipped.
fn decode(text: &str) -> Option<Vec<u8>> {
    let joined: String = text
        .lines()
        .filter(|l| {
            l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
        })
        .collect();
    STANDARD.decode(joined).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_block_around_ray_noise() {
        let log = format!(
            "2026 INFO -- Runtime env is setting up.\n\n@@ORCH-RESULT j1 rc=3 out=3 err=4@@\n{}\nRunning entrypoint for job j1: sh\n@@ORCH-STDERR j1@@\n{}\n@@ORCH-END j1@@\n",
            STANDARD.encode("out"),
            STANDARD.encode(b"\xff\xfeer")
        );
        assert_eq!(
            parse(&log, "j1"),
            Some(Outcome::Ran {
                rc: 3,
                stdout: b"out".to_vec(),
                stderr: b"\xff\xfeer".to_vec(),
                truncated: false
            })
        );
        assert_eq!(parse(&log, "j2"), None);
        assert_eq!(
            parse("x\n@@ORCH-SPAWN j1@@\n", "j1"),
            Some(Outcome::NotFound)
        );
    }

    #[test]
    fn every_word_is_quoted() {
        let argv = vec![
            "printf".to_owned(),
            "%s".to_owned(),
            "$(touch x) 'q'".to_owned(),
        ];
        let e = Entry {
            id: "j",
            argv: &argv,
            rel_cwd: Path::new(""),
            stdin: None,
            output_limit: 10,
            cache_dir: None,
            changes_back: false,
            setup: &[],
        };
        assert!(
            e.script()
                .contains(r"( exec 'printf' '%s' '$(touch x) '\''q'\''' )")
        );
    }

    #[test]
    fn a_changes_block_reads_back_and_a_damaged_one_is_an_error() {
        let diff = b"diff --git a/x b/x\n\x00\xff";
        let log = format!(
            "@@ORCH-END j1@@\nRunning entrypoint for job j1: sh\n@@ORCH-CHANGES j1 size={}@@\n{}\n@@ORCH-CHANGES-END j1@@\n",
            diff.len(),
            STANDARD.encode(diff)
        );
        assert_eq!(parse_changes(&log, "j1"), Ok(Some(diff.to_vec())));
        assert_eq!(parse_changes(&log, "j2"), Ok(None));
        let short = log.replace(&format!("size={}", diff.len()), "size=99");
        let err = parse_changes(&short, "j1").unwrap_err();
        assert!(
            err.contains(&format!("holds {} bytes of the 99", diff.len())),
            "{err}"
        );
        let no_git = "\n@@ORCH-NOGIT j1@@\n";
        assert!(
            parse_changes(no_git, "j1")
                .unwrap_err()
                .contains("no working `git`")
        );
    }

    /// The script run by `sh` in a package's folder, as Ray runs it: the
    /// command's edits come back as a diff, its own `git` finds no
    /// repository, ignored output stays behind, the package is unchanged.
    #[test]
    fn the_script_brings_a_commands_changes_back() {
        let pkg = tempfile::tempdir().unwrap();
        std::fs::write(pkg.path().join(".gitignore"), "build/\n").unwrap();
        std::fs::write(pkg.path().join("a.txt"), "one\n").unwrap();
        std::fs::write(pkg.path().join("old.txt"), "old\n").unwrap();
        let argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "git status >/dev/null 2>&1 && echo inside-a-repo; echo two >> a.txt; rm old.txt; \
             printf 'x\\000' > new.bin; mkdir build; echo o > build/x.o"
                .to_owned(),
        ];
        let e = Entry {
            id: "j9",
            argv: &argv,
            rel_cwd: Path::new(""),
            stdin: None,
            output_limit: 1000,
            cache_dir: None,
            changes_back: true,
            setup: &[],
        };
        let out = std::process::Command::new("sh")
            .args(["-c", &e.script()])
            .current_dir(pkg.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        let log = String::from_utf8(out.stdout).unwrap();
        let Some(Outcome::Ran { rc, stdout, .. }) = parse(&log, "j9") else {
            panic!("{log}");
        };
        assert_eq!((rc, stdout), (0, Vec::new()), "{log}");
        let diff =
            String::from_utf8_lossy(&parse_changes(&log, "j9").unwrap().unwrap()).into_owned();
        assert!(
            diff.contains("diff --git a/a.txt b/a.txt") && diff.contains("+two"),
            "{diff}"
        );
        assert!(diff.contains("deleted file mode 100644"), "{diff}");
        assert!(
            diff.contains("new.bin") && diff.contains("GIT binary patch"),
            "{diff}"
        );
        assert!(!diff.contains("build/"), "{diff}");
        assert_eq!(
            std::fs::read_to_string(pkg.path().join("a.txt")).unwrap(),
            "one\n"
        );
        assert!(!pkg.path().join(".git").exists());
    }

    /// Runs `e`'s script with `sh` in `dir`, as Ray runs it; returns the log.
    fn run_script(e: &Entry<'_>, dir: &Path) -> String {
        let out = std::process::Command::new("sh")
            .args(["-c", &e.script()])
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    /// The setup makes what the command needs in the job's copy, its output
    /// kept apart; with changes back, only the command's changes return.
    /// A failing line ends the job with its marker and output.
    #[test]
    fn setup_lines_run_before_the_command_and_a_failure_is_named() {
        let pkg = tempfile::tempdir().unwrap();
        std::fs::write(pkg.path().join(".gitignore"), "deps/\n").unwrap();
        let argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "cat deps/lib.txt; cat made.txt; echo x > out.txt".to_owned(),
        ];
        let setup = vec![
            "mkdir deps && echo from-setup > deps/lib.txt && echo noisy".to_owned(),
            "echo tracked-by-setup > made.txt".to_owned(),
        ];
        let mut e = Entry {
            id: "s1",
            argv: &argv,
            rel_cwd: Path::new(""),
            stdin: None,
            output_limit: 1000,
            cache_dir: None,
            changes_back: true,
            setup: &setup,
        };
        let log = run_script(&e, pkg.path());
        let Some(Outcome::Ran {
            rc, stdout, stderr, ..
        }) = parse(&log, "s1")
        else {
            panic!("{log}");
        };
        assert_eq!(rc, 0, "{log}");
        assert_eq!(stdout, b"from-setup\ntracked-by-setup\n");
        assert!(stderr.is_empty(), "the setup's output is not the command's");
        let diff = String::from_utf8(parse_changes(&log, "s1").unwrap().unwrap()).unwrap();
        assert!(diff.contains("out.txt"), "{diff}");
        assert!(
            !diff.contains("made.txt") && !diff.contains("deps/"),
            "{diff}"
        );
        assert_eq!(parse_setup_failure(&log, "s1"), None);

        let failing = vec!["echo ok".to_owned(), "echo broken >&2; exit 4".to_owned()];
        e.setup = &failing;
        let log = run_script(&e, pkg.path());
        assert_eq!(
            parse_setup_failure(&log, "s1"),
            Some((1, 4, b"ok\nbroken\n".to_vec()))
        );
        assert_eq!(parse(&log, "s1"), None, "the command did not run");
    }
}
