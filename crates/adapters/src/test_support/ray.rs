//! A real Ray head node on 127.0.0.1 for tests, one per test binary.
//!
//! `ray stop` takes no address and stops every Ray process of the user, so
//! it is never used. The head is started with `ray start --block` under a
//! watchdog shell, with its own temp dir, its own ports and a marker
//! variable that every process it starts inherits (job entrypoints
//! included). When the test process exits (or [`RayHead::stop`] is
//! called) the watchdog kills exactly the processes carrying that marker
//! and removes the temp dir.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The command that installs Ray where [`ray_venv`] looks for it.
pub const INSTALL: &str = "bash scripts/install-test-deps.sh  (pip install \
     'ray[default]==2.60.0' into target/ray-venv; it exports ORCH_RAY_VENV)";

/// The virtual environment holding Ray: `$ORCH_RAY_VENV`.
///
/// # Panics
/// When it is unset or holds no `ray`, naming the install command: the
/// Ray tests never pass without a real cluster.
pub fn ray_venv() -> PathBuf {
    let Some(venv) = std::env::var_os("ORCH_RAY_VENV").map(PathBuf::from) else {
        panic!("ORCH_RAY_VENV is not set: the Ray tests need a real Ray 2.60.0; run {INSTALL}");
    };
    assert!(
        venv.join("bin/ray").is_file(),
        "{} has no bin/ray: run {INSTALL}",
        venv.display()
    );
    venv
}

/// A running head.
#[derive(Debug)]
pub struct RayHead {
    /// The Jobs API: `http://127.0.0.1:<port>`.
    pub url: String,
    /// The head's temp dir (Ray's sessions, logs, unpacked packages).
    pub temp_dir: PathBuf,
    /// The marker every process of this head carries in its environment.
    pub marker: String,
    /// How long the start took.
    pub started_in: Duration,
    /// The CPUs the head offers.
    pub cpus: u32,
}

static SHARED: OnceLock<RayHead> = OnceLock::new();

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
}

impl RayHead {
    /// The head of this test binary, started on first use with 2 CPUs.
    pub fn shared() -> &'static RayHead {
        SHARED.get_or_init(|| RayHead::start(2))
    }

    /// Starts a head with `cpus` CPUs and waits until its Jobs API answers.
    ///
    /// # Panics
    /// When Ray is missing or the head does not come up within 90 s (with
    /// the head's output).
    pub fn start(cpus: u32) -> RayHead {
        let venv = ray_venv();
        let began = Instant::now();
        let marker = format!("{}-{}", std::process::id(), free_port());
        let temp_dir = PathBuf::from(format!("/tmp/orch-ray-{marker}"));
        std::fs::create_dir_all(&temp_dir)
            .unwrap_or_else(|e| panic!("creating {}: {e}", temp_dir.display()));
        // Every component gets a port of its own: the kernel's ephemeral
        // ports (32768 and up on Linux) are handed out once each here, and
        // the workers' range lies below them, so no two can meet (Ray
        // refuses to start when they do).
        let mut taken = std::collections::HashSet::new();
        let mut own_port = || loop {
            let port = free_port();
            if taken.insert(port) {
                return port;
            }
        };
        let dash = own_port();
        let mut ports = String::new();
        for flag in [
            "port",
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "node-manager-port",
            "object-manager-port",
            "metrics-export-port",
            "runtime-env-agent-port",
            "ray-client-server-port",
        ] {
            ports.push_str(&format!(" --{flag}={}", own_port()));
        }
        // 200 worker ports between 20000 and 31999, below the ephemeral range.
        let workers = 20000 + (std::process::id() % 60) * 200;
        let script = format!(
            r#"T={tmp}; ORCH_RAY_HEAD={marker} RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 \
  {ray} start --head --block --node-ip-address=127.0.0.1 --dashboard-host=127.0.0.1 \
  --dashboard-port={dash} --num-cpus={cpus} --object-store-memory=100000000 \
  --disable-usage-stats --temp-dir="$T/t" --min-worker-port={w0} --max-worker-port={w1}{ports} \
  >"$T/head.log" 2>&1 </dev/null &
while kill -0 {pid} 2>/dev/null && [ ! -e "$T/stop" ]; do sleep 0.5; done
for round in 1 2 3; do
  for p in /proc/[0-9]*; do
    grep -qzx 'ORCH_RAY_HEAD={marker}' "$p/environ" 2>/dev/null && kill -9 "${{p#/proc/}}" 2>/dev/null
  done
  sleep 0.3
done
rm -rf "$T""#,
            tmp = temp_dir.display(),
            ray = venv.join("bin/ray").display(),
            pid = std::process::id(),
            w0 = workers,
            w1 = workers + 199,
        );
        // The watchdog runs in the background of a shell that returns at once.
        std::process::Command::new("sh")
            .args(["-c", &format!("( {script}\n) >/dev/null 2>&1 &")])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("starting the Ray head's watchdog: {e}"));
        let url = format!("http://127.0.0.1:{dash}");
        wait_until_up(&url, &temp_dir);
        RayHead {
            url,
            temp_dir,
            marker,
            started_in: began.elapsed(),
            cpus,
        }
    }

    /// Stops the head now (the watchdog kills its processes).
    pub fn stop(&self) {
        let _ = std::fs::write(self.temp_dir.join("stop"), "");
    }

    /// PIDs of the processes of this head whose command line contains
    /// `needle` (a job's command, for checking it was killed). The job's
    /// entrypoint shell counts too: its script holds the command's words.
    pub fn processes_running(&self, needle: &str) -> Vec<u32> {
        self.processes(|argv| argv.join(" ").contains(needle))
    }

    /// PIDs of the processes of this head whose argv is exactly `argv`: the
    /// command itself, not the shell that is about to start it.
    pub fn commands_running(&self, argv: &[&str]) -> Vec<u32> {
        self.processes(|found| found == argv)
    }

    fn processes(&self, matches: impl Fn(&[&str]) -> bool) -> Vec<u32> {
        let mut found = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return found;
        };
        let marker = format!("ORCH_RAY_HEAD={}", self.marker);
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let path = entry.path();
            let env = std::fs::read(path.join("environ")).unwrap_or_default();
            let cmd = std::fs::read(path.join("cmdline")).unwrap_or_default();
            let has_marker = env.split(|b| *b == 0).any(|v| v == marker.as_bytes());
            let cmd = String::from_utf8_lossy(&cmd);
            let argv: Vec<&str> = cmd.strip_suffix('\0').unwrap_or(&cmd).split('\0').collect();
            if has_marker && !cmd.is_empty() && matches(&argv) {
                found.push(pid);
            }
        }
        found
    }
}

fn wait_until_up(url: &str, temp_dir: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let addr = url.trim_start_matches("http://").to_owned();
    while Instant::now() < deadline {
        if let Ok(mut stream) = std::net::TcpStream::connect(&addr) {
            use std::io::{Read, Write};
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let req = format!("GET /api/version HTTP/1.0\r\nHost: {addr}\r\n\r\n");
            let mut answer = String::new();
            if stream.write_all(req.as_bytes()).is_ok()
                && stream.read_to_string(&mut answer).is_ok()
                && answer.split_whitespace().nth(1) == Some("200")
                && answer.contains("2.60.0")
            {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let log = std::fs::read_to_string(temp_dir.join("head.log")).unwrap_or_default();
    panic!("the Ray head at {url} did not come up within 90 s:\n{log}");
}
