//! [`RayRunner`]: a [`CommandRunner`] whose commands run as Ray jobs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator_core::command::{CommandError, CommandOutput, CommandRunner, CommandSpec};

use super::changes;
use super::client::{Client, JobInfo, Submission};
use super::entry::{self, Entry, Outcome};
use super::package::{self, Package};
use super::{RayConfig, RayError};

/// Ray's error types that say the cluster, not the command, failed: the
/// job is run again once.
const INFRA_ERRORS: [&str; 6] = [
    "JOB_SUPERVISOR_ACTOR_DIED",
    "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
    "JOB_SUPERVISOR_ACTOR_START_FAILURE",
    "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE",
    "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE",
    "RUNTIME_ENV_SETUP_FAILURE",
];

/// How often a job's node is checked for being alive while it runs.
const NODE_CHECK: Duration = Duration::from_secs(5);

/// Where and when one job ran, for the run's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// The job's submission id (in the head's job list).
    pub id: String,
    /// The address of the node it ran on, when known.
    pub node: Option<String>,
    /// From submission until it was seen running, in milliseconds.
    pub queued_ms: u64,
    /// From submission until its result was read, in milliseconds.
    pub total_ms: u64,
    /// Whether its package had to be uploaded.
    pub uploaded: bool,
    /// How many tries it took (2 after a lost node).
    pub tries: u32,
}

/// Runs each command as a job on a Ray cluster; see the [module
/// docs](super).
#[derive(Debug, Clone)]
pub struct RayRunner {
    inner: Arc<Inner>,
    /// Whether each command's file changes come back to the local tree.
    changes_back: bool,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    config: RayConfig,
    tag: String,
    counter: AtomicU64,
    uploads: AtomicUsize,
    uploaded_bytes: AtomicU64,
    in_flight: Arc<Mutex<BTreeSet<String>>>,
    records: Mutex<Vec<JobRecord>>,
    node_ips: Mutex<BTreeMap<String, String>>,
}

/// Stops its job when dropped before the result was read (a cancelled
/// run drops the future that awaits it).
struct StopOnDrop {
    client: Client,
    id: String,
    in_flight: Arc<Mutex<BTreeSet<String>>>,
    armed: bool,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (client, id) = (self.client.clone(), self.id.clone());
        let in_flight = Arc::clone(&self.in_flight);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(err) = client.stop(&id).await {
                    tracing::warn!(%id, %err, "could not stop a cancelled Ray job");
                }
                if let Ok(mut set) = in_flight.lock() {
                    set.remove(&id);
                }
            });
        }
    }
}

/// What one try of a job gave.
enum Try {
    Done(CommandOutput, JobRecord),
    /// The job was lost with its node or never started for the cluster's
    /// reasons.
    Lost(String),
}

impl RayRunner {
    /// A runner for the head in `config`. Nothing is contacted yet.
    pub fn new(config: RayConfig) -> Result<Self, RayError> {
        let client = Client::new(&config.address, config.token.clone())?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tag = format!("{:x}{:x}", std::process::id(), nanos & 0xff_ffff_ffff);
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                config,
                tag,
                counter: AtomicU64::new(0),
                uploads: AtomicUsize::new(0),
                uploaded_bytes: AtomicU64::new(0),
                in_flight: Arc::new(Mutex::new(BTreeSet::new())),
                records: Mutex::new(Vec::new()),
                node_ips: Mutex::new(BTreeMap::new()),
            }),
            changes_back: false,
        })
    }

    /// This runner (sharing its jobs, records and uploads) bringing each
    /// command's file changes back: they are applied to the local tree the
    /// job's package was made from once the job ends, so a command that
    /// edits files leaves the tree as it would have run here. Files the
    /// tree's `.gitignore` ignores stay on the node. The node needs `git`.
    pub fn with_changes_back(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            changes_back: true,
        }
    }

    /// The HTTP client of the head.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The runner's configuration.
    pub fn config(&self) -> &RayConfig {
        &self.inner.config
    }

    /// Packages uploaded so far (an unchanged tree is uploaded once).
    pub fn uploads(&self) -> usize {
        self.inner.uploads.load(Ordering::Relaxed)
    }

    /// Bytes uploaded so far.
    pub fn uploaded_bytes(&self) -> u64 {
        self.inner.uploaded_bytes.load(Ordering::Relaxed)
    }

    /// Every job this runner finished, in the order they finished.
    pub fn records(&self) -> Vec<JobRecord> {
        self.inner
            .records
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// The ids of the jobs submitted and not finished.
    pub fn in_flight(&self) -> Vec<String> {
        self.inner
            .in_flight
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many jobs the cluster runs at once: the CPUs of its live nodes
    /// divided by the CPUs each job reserves (at least 1).
    pub async fn width(&self) -> Result<usize, RayError> {
        let cpus: f64 = self
            .inner
            .client
            .nodes()
            .await?
            .iter()
            .filter(|n| n.state == "ALIVE")
            .filter_map(|n| n.resources_total.get("CPU"))
            .sum();
        let per_job = self.inner.config.cpus_per_job.max(1.0);
        Ok(((cpus / per_job).floor() as usize).max(1))
    }

    /// Stops every job of this runner that has not finished (Ctrl-C, an
    /// abandoned run) and returns their ids.
    pub async fn stop_all(&self) -> Vec<String> {
        let ids = self.in_flight();
        for id in &ids {
            if let Err(err) = self.inner.client.stop(id).await {
                tracing::warn!(%id, %err, "could not stop a Ray job");
            }
        }
        ids
    }

    /// Makes sure the head holds `pkg` (pinning it for ten minutes) and
    /// returns whether it had to be uploaded.
    async fn ensure_package(&self, pkg: &Package) -> Result<bool, RayError> {
        let client = &self.inner.client;
        if client.package_exists(&pkg.name).await? {
            return Ok(false);
        }
        client.upload(&pkg.name, pkg.bytes.clone()).await?;
        self.inner.uploads.fetch_add(1, Ordering::Relaxed);
        self.inner
            .uploaded_bytes
            .fetch_add(pkg.bytes.len() as u64, Ordering::Relaxed);
        // A package is dropped when the job that used it ends unless a
        // check pinned it: pin it, so the next run of this tree finds it.
        client.package_exists(&pkg.name).await?;
        Ok(true)
    }

    fn next_id(&self) -> String {
        let n = self.inner.counter.fetch_add(1, Ordering::Relaxed);
        format!("orch-{}-{n}", self.inner.tag)
    }

    fn cache_dir(&self, pkg: &Package) -> Option<String> {
        let cfg = &self.inner.config;
        if !cfg.node_cache {
            return None;
        }
        let key = package::package_name(pkg.root.to_string_lossy().as_bytes());
        let key = key
            .trim_start_matches("_ray_pkg_orch_")
            .trim_end_matches(".zip");
        Some(format!(
            "{}/{}",
            cfg.cache_root.trim_end_matches('/'),
            &key[..16]
        ))
    }

    /// One try: submit, wait, read.
    async fn try_once(&self, spec: &CommandSpec, pkg: &Package) -> Result<Try, RayError> {
        let client = &self.inner.client;
        let uploaded = self.ensure_package(pkg).await?;
        let id = self.next_id();
        let started = Instant::now();
        self.submit(spec, pkg, &id).await?;
        if let Ok(mut set) = self.inner.in_flight.lock() {
            set.insert(id.clone());
        }
        let mut guard = StopOnDrop {
            client: client.clone(),
            id: id.clone(),
            in_flight: Arc::clone(&self.inner.in_flight),
            armed: true,
        };
        let waited = self.wait(&id, spec.time_limit).await;
        guard.armed = false;
        if let Ok(mut set) = self.inner.in_flight.lock() {
            set.remove(&id);
        }
        let (info, running_at, timed_out) = match waited? {
            Waited::Finished(info, at, timed_out) => (info, at, timed_out),
            Waited::Lost(message) => return Ok(Try::Lost(message)),
        };
        if info.status == "FAILED"
            && info
                .error_type
                .as_deref()
                .is_some_and(|t| INFRA_ERRORS.contains(&t))
        {
            let message = info.message.unwrap_or_default();
            return Ok(Try::Lost(format!(
                "job {id} failed on the cluster's side ({}): {}",
                info.error_type.unwrap_or_default(),
                message.lines().last().unwrap_or_default()
            )));
        }
        let log = client.logs(&id).await?;
        if let Some((index, status, output)) = entry::parse_setup_failure(&log, &id) {
            let _ = client.delete(&id).await;
            let output = String::from_utf8_lossy(&output);
            return Err(RayError::Setup {
                line: self
                    .inner
                    .config
                    .setup
                    .get(index)
                    .cloned()
                    .unwrap_or_default(),
                status,
                output: tail_lines(&output, 10),
            });
        }
        if self.changes_back {
            self.bring_changes_back(&id, &log, pkg).await?;
        }
        let output = to_output(&id, &spec.display(), &log, &info, timed_out)?;
        let record = JobRecord {
            id: id.clone(),
            node: self.node_ip(info.driver_node_id.as_deref()).await,
            queued_ms: millis(running_at.unwrap_or(started) - started),
            total_ms: millis(started.elapsed()),
            uploaded,
            tries: 1,
        };
        if let Err(err) = client.delete(&id).await {
            tracing::debug!(%id, %err, "could not delete a finished Ray job");
        }
        Ok(Try::Done(
            CommandOutput {
                duration_ms: millis(started.elapsed() - (running_at.unwrap_or(started) - started)),
                ..output
            },
            record,
        ))
    }

    /// Submits job `id`: the entry script that runs `spec` in the
    /// package's copy of its working directory, with the configured and
    /// the command's environment.
    async fn submit(&self, spec: &CommandSpec, pkg: &Package, id: &str) -> Result<(), RayError> {
        let argv: Vec<String> = std::iter::once(spec.program.clone())
            .chain(spec.args.iter().cloned())
            .collect();
        let script = Entry {
            id,
            argv: &argv,
            rel_cwd: &pkg.rel_cwd,
            stdin: spec.stdin.as_deref(),
            output_limit: spec.output_limit,
            cache_dir: self.cache_dir(pkg),
            changes_back: self.changes_back,
            setup: &self.inner.config.setup,
        }
        .script();
        let mut env = self.inner.config.env.clone();
        env.extend(spec.env.clone());
        let working_dir = format!("gcs://{}", pkg.name);
        self.inner
            .client
            .submit(&Submission {
                id,
                entrypoint: &script,
                working_dir: &working_dir,
                env: &env,
                cpus: self.inner.config.cpus_per_job,
            })
            .await
    }

    /// Applies job `id`'s changes (its log's changes block) to the tree
    /// its package was made from. A job stopped before it wrote the block
    /// brings nothing back.
    async fn bring_changes_back(&self, id: &str, log: &str, pkg: &Package) -> Result<(), RayError> {
        match entry::parse_changes(log, id).map_err(RayError::Changes)? {
            Some(diff) => changes::apply(&pkg.root, id, &diff).await,
            None => Ok(()),
        }
    }

    async fn node_ip(&self, node_id: Option<&str>) -> Option<String> {
        let node_id = node_id?;
        if let Some(ip) = self.inner.node_ips.lock().ok()?.get(node_id) {
            return Some(ip.clone());
        }
        let nodes = self.inner.client.nodes().await.ok()?;
        let mut map = self.inner.node_ips.lock().ok()?;
        for n in nodes {
            map.insert(n.node_id, n.node_ip);
        }
        map.get(node_id).cloned()
    }

    /// Polls job `id` until it ends; past `limit` of running it is stopped
    /// and seen stopped. A job whose node died is lost.
    async fn wait(&self, id: &str, limit: Option<Duration>) -> Result<Waited, RayError> {
        let client = &self.inner.client;
        let poll = self.inner.config.poll;
        let mut running_at: Option<Instant> = None;
        let mut last_node_check = Instant::now();
        loop {
            let info = client.job(id).await?;
            if info.is_terminal() {
                let at = running_at.unwrap_or_else(Instant::now);
                return Ok(Waited::Finished(info, Some(at), false));
            }
            if info.status == "RUNNING" && running_at.is_none() {
                running_at = Some(Instant::now());
            }
            if let (Some(limit), Some(at)) = (limit, running_at)
                && at.elapsed() >= limit
            {
                let info = self.stop_and_confirm(id).await?;
                return Ok(Waited::Finished(info, running_at, true));
            }
            if running_at.is_some() && last_node_check.elapsed() >= NODE_CHECK {
                last_node_check = Instant::now();
                if let Some(message) = self.node_dead(&info).await {
                    let _ = client.stop(id).await;
                    return Ok(Waited::Lost(format!("job {id}: {message}")));
                }
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Stops job `id` and waits (up to a minute) until the head says it
    /// ended.
    async fn stop_and_confirm(&self, id: &str) -> Result<JobInfo, RayError> {
        let client = &self.inner.client;
        client.stop(id).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let info = client.job(id).await?;
            if info.is_terminal() {
                return Ok(info);
            }
            if Instant::now() >= deadline {
                return Err(RayError::Lost(format!(
                    "job {id} was stopped at its time limit but still reads {} after 60 s",
                    info.status
                )));
            }
            tokio::time::sleep(self.inner.config.poll).await;
        }
    }

    /// Why the node running `info` is gone, if it is.
    async fn node_dead(&self, info: &JobInfo) -> Option<String> {
        let node_id = info.driver_node_id.as_deref()?;
        let nodes = self.inner.client.nodes().await.ok()?;
        match nodes.iter().find(|n| n.node_id == node_id) {
            Some(n) if n.state == "ALIVE" => None,
            Some(n) => Some(format!("its node {} is {}", n.node_ip, n.state)),
            None => Some(format!("its node {node_id} is no longer listed")),
        }
    }

    /// Runs `spec` as a job, once more when the cluster lost the first.
    pub async fn run_job(&self, spec: &CommandSpec) -> Result<CommandOutput, RayError> {
        let pkg = package::build(&spec.cwd).await?;
        let mut lost = None;
        for tries in 1..=2 {
            match self.try_once(spec, &pkg).await? {
                Try::Done(output, mut record) => {
                    record.tries = tries;
                    if let Ok(mut records) = self.inner.records.lock() {
                        records.push(record);
                    }
                    return Ok(output);
                }
                Try::Lost(message) => {
                    tracing::warn!(%message, "a Ray job was lost; running it again");
                    lost = Some(message);
                }
            }
        }
        Err(RayError::Lost(lost.unwrap_or_default()))
    }
}

enum Waited {
    Finished(JobInfo, Option<Instant>, bool),
    Lost(String),
}

/// The last `n` lines of `text`, trimmed.
fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The command's output from the job's log, as the local runner gives it:
/// a status of 128 + n is "killed by signal n" (no exit code).
fn to_output(
    id: &str,
    command: &str,
    log: &str,
    info: &JobInfo,
    timed_out: bool,
) -> Result<CommandOutput, RayError> {
    match entry::parse(log, id) {
        Some(Outcome::NotFound) => Err(RayError::NotFound {
            command: command.to_owned(),
        }),
        Some(Outcome::Ran {
            rc,
            stdout,
            stderr,
            truncated,
        }) => Ok(CommandOutput {
            exit_code: if timed_out || (129..=192).contains(&rc) {
                None
            } else {
                Some(rc)
            },
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            timed_out,
            truncated,
            duration_ms: 0,
        }),
        None if timed_out => Ok(CommandOutput {
            timed_out: true,
            ..CommandOutput::default()
        }),
        None => Err(RayError::Protocol(format!(
            "job {id} ended {} ({}) without the entrypoint's result block",
            info.status,
            info.message.as_deref().unwrap_or_default()
        ))),
    }
}

#[async_trait::async_trait]
impl CommandRunner for RayRunner {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        self.run_job(&spec).await.map_err(|err| match err {
            RayError::NotFound { command } => CommandError::Spawn {
                command,
                message: "no such program on the Ray node".to_owned(),
            },
            other => CommandError::Io {
                command: spec.display(),
                message: other.to_string(),
            },
        })
    }
}
