//! The entrypoint's stop, without a head. Ray starts the entrypoint in a
//! session of its own and, on a stop, signals only the processes it saw at
//! that instant; these tests signal the shell alone (the narrowest such
//! snapshot) and hold that the whole job still goes, and soon.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use orchestrator_adapters::ray::entry::{Entry, Outcome, parse};

/// A started entrypoint: the shell (its pid is the group's id) and its log.
struct Job {
    shell: Child,
    log: tempfile::NamedTempFile,
}

/// Starts `e`'s script in `dir` the way Ray does: `/bin/sh -c`, a process
/// group of its own, stdout and stderr into one log file.
fn start(e: &Entry<'_>, dir: &Path) -> Job {
    let log = tempfile::NamedTempFile::new().unwrap();
    let shell = Command::new("/bin/sh")
        .args(["-c", &e.script()])
        .current_dir(dir)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    Job { shell, log }
}

impl Job {
    fn group(&self) -> u32 {
        self.shell.id()
    }

    /// Signals the shell alone, as a stop whose snapshot missed the rest.
    fn stop(&self) {
        kill(Pid::from_raw(self.group() as i32), Signal::SIGTERM).unwrap();
    }

    /// Waits up to `limit` for the shell to end; whether it did.
    fn ended_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.shell.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // A failed test leaves nothing behind.
        let _ = kill(Pid::from_raw(-(self.group() as i32)), Signal::SIGKILL);
        let _ = self.shell.wait();
    }
}

/// Living members of process group `group`, each as its argv.
fn members(group: u32) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces, not ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") || fields.get(2) != Some(&group.to_string().as_str()) {
            continue;
        }
        let cmd = std::fs::read(path.join("cmdline")).unwrap_or_default();
        let argv = String::from_utf8_lossy(&cmd)
            .split('\0')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        found.push(argv);
    }
    found
}

/// Waits up to a minute for a member of `group` whose argv is `argv`.
fn wait_for_member(group: u32, argv: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !members(group).iter().any(|m| m == argv) {
        assert!(Instant::now() < deadline, "{argv:?} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether group `group` is empty within five seconds.
fn emptied(group: u32) -> Result<(), Vec<Vec<String>>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = members(group);
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(left);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn entry<'a>(argv: &'a [String], setup: &'a [String]) -> Entry<'a> {
    Entry {
        id: "stop1",
        argv,
        rel_cwd: Path::new(""),
        stdin: None,
        output_limit: 1000,
        cache_dir: None,
        changes_back: false,
        setup,
    }
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_owned()).collect()
}

/// Stops `job` (its shell alone) and holds that the shell ends and its
/// whole process group goes.
fn stop_and_see_it_all_go(job: &mut Job) {
    job.stop();
    assert!(job.ended_within(Duration::from_secs(10)), "{}", job.log());
    assert_eq!(emptied(job.group()), Ok(()));
}

/// The status and stdout of the job's result block.
fn reported(job: &Job) -> (i32, Vec<u8>) {
    let Some(Outcome::Ran { rc, stdout, .. }) = parse(&job.log(), "stop1") else {
        panic!("no result block: {}", job.log());
    };
    (rc, stdout)
}

/// A stop while the command runs ends it at once and still reports what it
/// wrote, with the stop's status.
#[test]
fn a_stop_during_the_command_ends_it_and_keeps_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let argv = words(&["sh", "-c", "echo before; exec sleep 736001"]);
    let mut job = start(&entry(&argv, &[]), dir.path());
    wait_for_member(job.group(), &["sleep", "736001"]);
    stop_and_see_it_all_go(&mut job);
    assert_eq!(reported(&job), (143, b"before\n".to_vec()));
}

/// A command that ignores TERM and keeps starting processes Ray never saw
/// is still taken down, whole (KILL follows TERM after two seconds).
#[test]
fn a_command_that_ignores_the_stop_and_forks_is_taken_down() {
    let dir = tempfile::tempdir().unwrap();
    let argv = words(&["sh", "-c", "trap '' TERM; while :; do sleep 736002; done"]);
    let mut job = start(&entry(&argv, &[]), dir.path());
    wait_for_member(job.group(), &["sleep", "736002"]);
    stop_and_see_it_all_go(&mut job);
}

/// A stop during a setup line ends the line and the job: the command never
/// starts.
#[test]
fn a_stop_during_setup_ends_it_before_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let argv = words(&["sh", "-c", "echo ran"]);
    let setup = words(&["sleep 736003"]);
    let mut job = start(&entry(&argv, &setup), dir.path());
    wait_for_member(job.group(), &["sleep", "736003"]);
    stop_and_see_it_all_go(&mut job);
    assert_eq!(reported(&job), (143, Vec::new()));
}
