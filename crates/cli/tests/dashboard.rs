//! `orchestrator serve` as a person uses it: the real binary serving real
//! sessions made by real runs (planex's shell agent, review-fix's builtin
//! agent with a real `cargo test`), looked at in a real browser — the
//! system's headless Chromium driven over the DevTools protocol by
//! `playwright-core` (from npm; it downloads no browser), through
//! `tests/dashboard/browser.mjs` — and asked directly over HTTP for what it
//! must refuse.
//!
//! Needs node, `playwright-core` under `target/dashboard-e2e/node_modules`
//! (`scripts/install-test-deps.sh` installs it; `ORCH_PLAYWRIGHT_DIR` names
//! another folder holding `node_modules/playwright-core`) and headless
//! Chromium (`chromium-headless-shell` or `chromium`); a test fails with
//! the install command when one is missing. Screenshots of the session page
//! go to `ORCH_DASHBOARD_SHOTS` when set, else into the test's temporary
//! folder.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quickstart_support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use orchestrator_adapters::test_support::git;
use quickstart_support::{Dated, quickstart_repo};

fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    cmd.env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("RUST_LOG")
        .env_remove("ORCHESTRATOR_AGENT");
    cmd
}

fn init_repo(repo: &Path) {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["config", "user.email", "test@example.invalid"]);
    git(repo, &["config", "user.name", "Test"]);
}

/// A running `orchestrator serve`, stopped when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(repos: &[&Path], extra: &[&str]) -> Server {
        let mut cmd = bin();
        cmd.arg("serve");
        for r in repos {
            cmd.arg("--repo").arg(r);
        }
        let mut child = cmd
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("http://127.0.0.1:"), "{line:?}");
        Server {
            child,
            url: line.trim().to_owned(),
        }
    }

    /// `127.0.0.1:PORT`.
    fn authority(&self) -> &str {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
    }

    fn token(&self) -> &str {
        self.url.split("token=").nth(1).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 request; the status code and the body.
fn request(addr: &str, method: &str, target: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut text =
        format!("{method} {target} HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

const TASKS: &str = "\
id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status,findings,files_modified,tests_passed,acceptance_met,error
T1,Add greeting,Write greeting.txt,,,greeting.txt,,echo hello > greeting.txt,,,,,,,,,
T2,Add farewell,Write farewell.txt,,,farewell.txt,,echo bye > farewell.txt,T1,,,,,,,,
T3,Add both,Write both.txt,,,both.txt,,cat greeting.txt farewell.txt > both.txt,T1;T2,,,,,,,,
";

/// A repository with one commit, and a tasks.csv beside it.
fn planex_repo(tmp: &Path) -> (PathBuf, PathBuf) {
    let repo = tmp.join("repo");
    init_repo(&repo);
    std::fs::write(repo.join("README"), "hi\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let tasks = tmp.join("tasks.csv");
    std::fs::write(&tasks, TASKS).unwrap();
    (repo, tasks)
}

/// `planex run` without a terminal: it stops at its plan gate (exit 3).
fn planex_stopped_at_its_gate(repo: &Path, tasks: &Path) {
    let o = bin()
        .args(["planex", "run"])
        .arg(tasks)
        .arg("--repo")
        .arg(repo)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The folder holding `node_modules/playwright-core`.
fn playwright_dir() -> PathBuf {
    let dir = std::env::var_os("ORCH_PLAYWRIGHT_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-e2e"),
        PathBuf::from,
    );
    assert!(
        dir.join("node_modules/playwright-core/package.json")
            .is_file(),
        "playwright-core is missing from {}: run `bash scripts/install-test-deps.sh` \
         (npm install --prefix target/dashboard-e2e playwright-core)",
        dir.display()
    );
    dir
}

/// The system's headless Chromium, found on `PATH` (the shell first). Its
/// absence fails the test, naming the package to install.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["chromium-headless-shell", "chromium"]
        .into_iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "headless Chromium is missing: install it with `apt-get install chromium-headless-shell`"
            )
        })
}

fn shots(tmp: &Path) -> PathBuf {
    let dir =
        std::env::var_os("ORCH_DASHBOARD_SHOTS").map_or_else(|| tmp.join("shots"), PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a scenario of `browser.mjs` against `url`; its output.
fn browser(scenario: &str, url: &str, shots: &Path, args: &[&str]) -> Output {
    let dir = playwright_dir();
    // ES modules find packages from the script's own folder up.
    let script = dir.join("browser.mjs");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dashboard/browser.mjs"),
        &script,
    )
    .unwrap();
    let o = Command::new("node")
        .arg(&script)
        .args([scenario, url])
        .arg(shots)
        .args(args)
        .env("ORCH_CHROMIUM", chromium())
        .output()
        .expect("node must be installed");
    println!("{}", String::from_utf8_lossy(&o.stdout));
    assert!(
        o.status.success(),
        "browser scenario {scenario} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The engine's `job_finished` times (Unix ms) in a session's log.
fn finished_at(session: &Path) -> Vec<(String, i64)> {
    std::fs::read_to_string(session.join("events.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"]["event"] == "job_finished")
        .map(|v| {
            (
                v["event"]["id"].as_str().unwrap().to_owned(),
                v["at_ms"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_planex_run_waiting_at_its_gate_is_approved_from_the_page_and_its_diffs_open() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, tasks) = planex_repo(tmp.path());
    let server = Server::start(&[&repo], &[]);
    // The run starts while the server is up, and stops at its plan gate.
    planex_stopped_at_its_gate(&repo, &tasks);
    let shots = shots(tmp.path());
    let o = browser("planex", &server.url, &shots, &[]);
    // The approval continued the run: three commits, one per task.
    let log = git(&repo, &["log", "--format=%s"]);
    for title in ["Add greeting [T1]", "Add farewell [T2]", "Add both [T3]"] {
        assert!(log.contains(title), "{log}");
    }
    let session = std::fs::read_dir(repo.join(".workflow/.lite-plan"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(session.join("events.ndjson")).unwrap();
    assert!(
        text.contains(r#""kind":"action","origin":"dashboard http://127.0.0.1:"#),
        "{text}"
    );
    assert!(text.contains(r#""action":"approve""#) && text.contains(r#""action":"continue""#));
    // How long the page took to show each task done after the engine said so.
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let shown: serde_json::Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("shown-done: "))
        .map(|j| serde_json::from_str(j).unwrap())
        .unwrap();
    for (id, at) in finished_at(&session) {
        if let Some(seen) = shown[&id].as_i64() {
            println!(
                "{id}: shown {} ms after the engine's job_finished",
                seen - at
            );
        }
    }
    for png in ["planex-waiting.png", "planex-done.png"] {
        assert!(
            std::fs::metadata(shots.join(png)).unwrap().len() > 10_000,
            "{png}"
        );
    }
}

/// A tiny crate whose only failure is its formatting: `cargo fmt --check`
/// fails, the builtin agent's `cargo fmt` fixes it (the fixture of
/// `ci_autofix_cli.rs`).
fn ci_autofix_repo(tmp: &Path) -> PathBuf {
    let repo = tmp.join("repo");
    init_repo(&repo);
    std::fs::write(
        repo.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .unwrap();
    std::fs::write(repo.join(".gitignore"), "/target\nCargo.lock\n").unwrap();
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(
        repo.join("src/lib.rs"),
        "pub fn add(a:i32,b:i32)->i32{a+b}\n",
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

/// A ci-autofix run in local mode stops at its confirmation gate without a
/// terminal (exit 3); the page shows the kept patch's diff and evidence,
/// the test clicks approve, and the page shows iteration 1 landed and the
/// run done without a reload: the same commit a confirmed run makes, the
/// approval in the session's log with where it came from.
/// A server over a ci-autofix repository and a run of it stopped at its
/// confirmation gate (no terminal: exit 3); the kept commit.
fn ci_autofix_at_its_gate(tmp: &Path) -> (PathBuf, Server, String) {
    let repo = ci_autofix_repo(tmp);
    let cache = tmp.join("cache");
    let target = tmp.join("target");
    // The run the page continues is started by the server: it inherits
    // the server's environment.
    let mut child = bin()
        .arg("serve")
        .arg("--repo")
        .arg(&repo)
        .env("ORCHESTRATOR_CACHE_DIR", &cache)
        .env("CARGO_TARGET_DIR", &target)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("http://127.0.0.1:"), "{line:?}");
    let server = Server {
        child,
        url: line.trim().to_owned(),
    };
    let before = git(&repo, &["rev-parse", "HEAD"]);
    let o = bin()
        .args(["ci-autofix", "--local", "--check", "cargo fmt --check"])
        .current_dir(&repo)
        .env("ORCHESTRATOR_CACHE_DIR", &cache)
        .env("CARGO_TARGET_DIR", &target)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.starts_with("ci-autofix: waiting for confirmation on branch main (local)"),
        "{stdout}"
    );
    assert_eq!(
        git(&repo, &["rev-parse", "HEAD"]),
        before,
        "nothing landed yet"
    );
    let kept = git(&repo, &["rev-parse", "ci-autofix-gate-local-main"]);
    (repo, server, kept.trim().to_owned())
}

/// A ci-autofix run in local mode stops at its confirmation gate without a
/// terminal (exit 3); the page shows the kept patch's diff and evidence,
/// the test clicks approve, and the page shows iteration 1 landed and the
/// run done without a reload: the same commit a confirmed run makes, the
/// approval in the session's log with where it came from.
#[test]
fn a_ci_autofix_run_waiting_at_its_confirmation_gate_is_approved_from_the_page_and_lands() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, server, kept) = ci_autofix_at_its_gate(tmp.path());
    let shots = shots(tmp.path());
    let o = browser("ci-autofix", &server.url, &shots, &[]);
    let landed = String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("landed: ").map(str::to_owned))
        .unwrap();
    // The kept commit landed as a confirmed run lands it: cherry-picked
    // onto the branch, the tree clean, the engine branch gone.
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]).trim(), landed);
    assert_eq!(
        git(&repo, &["log", "--format=%s"]),
        "fix(ci): auto-fix mechanical failure (iter 1)\ninit\n"
    );
    assert_eq!(
        git(&repo, &["diff", &kept, "HEAD"]),
        "",
        "the landed commit is the kept patch"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(git(&repo, &["branch", "--list", "ci-autofix-gate-*"]), "");
    let session = repo.join(".moai/state/.locks/ci-autofix-local-main");
    let text = std::fs::read_to_string(session.join("events.ndjson")).unwrap();
    assert!(
        text.contains(r#""kind":"action","origin":"dashboard http://127.0.0.1:"#),
        "{text}"
    );
    assert!(text.contains(r#""action":"approve""#) && text.contains(r#""action":"continue""#));
    for png in ["ci-autofix-gate.png", "ci-autofix-landed.png"] {
        assert!(
            std::fs::metadata(shots.join(png)).unwrap().len() > 10_000,
            "{png}"
        );
    }
}

/// Declined from the dashboard (the same request the page's button
/// makes): the kept commit is dropped, the iteration escalates, nothing
/// lands and no run is started; the decline is in the session's log with
/// where it came from, and the session no longer offers the gate.
#[test]
fn a_ci_autofix_patch_declined_from_the_dashboard_is_dropped_and_escalated() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, server, _) = ci_autofix_at_its_gate(tmp.path());
    let before = git(&repo, &["rev-parse", "HEAD"]);
    let host = server.authority().to_owned();
    let auth = format!("Bearer {}", server.token());
    let ok = [("Host", host.as_str()), ("Authorization", auth.as_str())];
    let key = "0/ci-autofix/ci-autofix-local-main";
    let (status, body) = request(&host, "GET", &format!("/api/session?key={key}"), &ok);
    assert_eq!(status, 200, "{body}");
    let detail: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(detail["summary"]["state"], "waiting");
    assert_eq!(detail["summary"]["approvable"], "the patch of iteration 1");
    assert_eq!(detail["extras"]["gate"]["evidence"][0]["rule"], "rustfmt");

    let (status, body) = request(&host, "POST", &format!("/api/decline?key={key}"), &ok);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("declined the patch of iteration 1"), "{body}");
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), before);
    assert_eq!(git(&repo, &["branch", "--list", "ci-autofix-gate-*"]), "");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join(".moai/state/ci-autofix-local-main.json")).unwrap(),
    )
    .unwrap();
    assert!(state["gate"].is_null());
    assert_eq!(state["history"][0]["action"], "escalated");
    let session = repo.join(".moai/state/.locks/ci-autofix-local-main");
    let text = std::fs::read_to_string(session.join("events.ndjson")).unwrap();
    assert!(
        text.contains(r#""kind":"action","origin":"dashboard http://127.0.0.1:"#)
            && text.contains(r#""action":"decline""#),
        "{text}"
    );
    assert!(!text.contains(r#""action":"continue""#), "{text}");
    assert!(!session.join("dashboard-continue.log").exists());
    let (_, body) = request(&host, "GET", &format!("/api/session?key={key}"), &ok);
    let detail: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(detail["summary"]["approvable"].is_null(), "{body}");
    assert!(detail["extras"]["gate"].is_null(), "{body}");
    // Answering again is refused (409), naming why.
    let (status, body) = request(&host, "POST", &format!("/api/approve?key={key}"), &ok);
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("does not wait for confirmation"), "{body}");
}

/// A copy of the quickstart crate with two findings: one good fix, and one
/// (`len_zero` in `src/ring.rs`) whose fix breaks the `ring_labels` test.
fn review_fix_repo(tmp: &Path) -> (PathBuf, PathBuf) {
    let repo = quickstart_repo(tmp, Dated::Now);
    let findings = tmp.join("clippy.json");
    let all = std::fs::read_to_string(&findings).unwrap();
    let two: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("src/ring.rs") || l.contains("needless_return"))
        .take(2)
        .collect();
    assert_eq!(two.len(), 2);
    std::fs::write(&findings, two.join("\n") + "\n").unwrap();
    (repo, findings)
}

#[test]
fn a_review_fix_run_cancelled_from_the_page_resumes_and_its_failed_fix_shows_the_test_output() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, findings) = review_fix_repo(tmp.path());
    let target = tmp.path().join("target");
    let review_fix = |agent: &str, extra: &[&str]| {
        let mut cmd = bin();
        cmd.args(["review-fix", "-y", "--agent", agent])
            .args(extra)
            .current_dir(&repo)
            .env("CARGO_TARGET_DIR", &target)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    };
    let server = Server::start(&[&repo], &[]);
    let shots = shots(tmp.path());
    // A run whose planner takes its time: running when the page opens.
    let mut first = review_fix("command:sleep 120", &["--fix", findings.to_str().unwrap()])
        .spawn()
        .unwrap();
    browser("cancel", &server.url, &shots, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = first.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the cancelled run did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3), "a cancel stops resumably (exit 3)");
    // `--resume` finishes the session; one fix breaks a test.
    let o = review_fix("builtin", &["--resume"]).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(git(&repo, &["log", "--format=%s"]).contains("needless_return"));
    browser("review-fix-failed", &server.url, &shots, &["ring_labels"]);
}

#[test]
fn requests_without_the_token_from_another_host_or_site_or_for_other_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, tasks) = planex_repo(tmp.path());
    planex_stopped_at_its_gate(&repo, &tasks);
    let outside = git(&repo, &["rev-parse", "HEAD"]);
    let server = Server::start(&[&repo], &[]);
    let host = server.authority().to_owned();
    let token = server.token().to_owned();
    let auth = format!("Bearer {token}");
    let ok = [("Host", host.as_str()), ("Authorization", auth.as_str())];
    let get = |target: &str, headers: &[(&str, &str)]| request(&host, "GET", target, headers);

    let (status, body) = get("/api/sessions", &ok);
    assert_eq!(status, 200, "{body}");
    let sessions: serde_json::Value = serde_json::from_str(&body).unwrap();
    let key = sessions[0]["key"].as_str().unwrap().to_owned();
    assert_eq!(sessions[0]["state"], "waiting");

    // No token, a wrong one: no session data.
    for target in [
        "/",
        "/api/sessions",
        &format!("/api/session?key={key}"),
        "/api/live",
    ] {
        let (status, body) = get(target, &[("Host", &host)]);
        assert_eq!(status, 401, "{target}: {body}");
        assert!(!body.contains("wpp-"), "{body}");
    }
    let (status, _) = get("/api/sessions?token=0000", &[("Host", &host)]);
    assert_eq!(status, 401);
    // The token in the URL sets the cookie, which then serves.
    let (status, _) = get(&format!("/?token={token}"), &[("Host", &host)]);
    assert_eq!(status, 303);
    let cookie = format!("orchestrator_token={token}");
    assert_eq!(
        get("/api/sessions", &[("Host", &host), ("Cookie", &cookie)]).0,
        200
    );

    // A foreign Host (DNS rebinding) or Origin (another site's page).
    let port = host.rsplit(':').next().unwrap();
    for foreign in [format!("evil.example:{port}"), "127.0.0.1:1".to_owned()] {
        let (status, body) = get(
            "/api/sessions",
            &[("Host", &foreign), ("Authorization", &auth)],
        );
        assert_eq!(status, 421, "{foreign}: {body}");
    }
    assert_eq!(get("/api/sessions", &[("Authorization", &auth)]).0, 421);
    let evil = [
        ("Host", host.as_str()),
        ("Authorization", auth.as_str()),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(get("/api/sessions", &evil).0, 403);
    assert_eq!(
        request(&host, "POST", &format!("/api/cancel?key={key}"), &evil).0,
        403
    );
    let own = format!("http://{host}");
    let same_site = [
        ("Host", host.as_str()),
        ("Authorization", auth.as_str()),
        ("Origin", own.as_str()),
    ];
    assert_eq!(get("/api/sessions", &same_site).0, 200);

    // Nothing outside the session folders and the session's own commits.
    for target in [
        "/../../../../etc/passwd".to_owned(),
        "/api/session?key=0/planex/..%2F..%2F..%2F..%2Fetc".to_owned(),
        format!("/api/transcript?key={key}&name=..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd"),
        format!("/api/transcript?key={key}&name=events.ndjson"),
        format!("/api/commit?key={key}&sha={}", outside.trim()),
        format!("/api/commit?key={key}&sha=HEAD"),
        format!("/api/commit?key={key}&sha=--output=%2Ftmp%2Fx"),
        "/api/session?key=/etc".to_owned(),
    ] {
        let (status, body) = get(&target, &ok);
        assert!([400, 404].contains(&status), "{target}: {status} {body}");
        assert!(
            !body.contains("root:") && !body.contains("diff --git"),
            "{body}"
        );
    }
    let (status, body) = get(&format!("/api/session?key={key}"), &ok);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let o = bin()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("only a loopback address is served without --token"),
        "{err}"
    );
    let o = bin()
        .args(["serve", "--listen", "127.0.0.1:0", "--token", "short"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
