//! The runner test runs and task commands go through: local processes, or
//! jobs on a Ray cluster (`--runner ray[=URL]`, `[runner]`, `RAY_ADDRESS`).
//!
//! A Ray runner is checked before the run starts (the head answers, the
//! token is accepted) and its width — the jobs the cluster's live CPUs hold
//! at once — bounds the run's parallel work. After the run, [`Remote::report`]
//! says where each job ran and how long it queued.

use std::collections::BTreeMap;
use std::sync::Arc;

use orchestrator_adapters::config::Config;
use orchestrator_adapters::ray::{RayConfig, RayRunner};
use orchestrator_core::command::CommandRunner;

/// A checked Ray runner and the cluster's width.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The runner (clones share its jobs and records).
    pub runner: RayRunner,
    /// Jobs the cluster runs at once.
    pub width: usize,
}

impl Remote {
    /// The runner as the flows take it.
    pub fn command_runner(&self) -> Arc<dyn CommandRunner> {
        Arc::new(self.runner.clone())
    }

    /// One line per node (`jobs, median and longest queue`) and the
    /// uploads, for stderr after a run.
    pub fn report(&self, flow: &str) -> String {
        let records = self.runner.records();
        let mut by_node: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for r in &records {
            by_node
                .entry(r.node.clone().unwrap_or_else(|| "unknown node".to_owned()))
                .or_default()
                .push(r.queued_ms);
        }
        let mut out = format!(
            "{flow}: {} job(s) on Ray at {}; {} package upload(s), {} bytes\n",
            records.len(),
            self.runner.client().base(),
            self.runner.uploads(),
            self.runner.uploaded_bytes()
        );
        for (node, mut queued) in by_node {
            queued.sort_unstable();
            let median = queued[queued.len() / 2];
            let max = queued.last().copied().unwrap_or_default();
            out.push_str(&format!(
                "{flow}:   node {node}: {} job(s), queued median {median} ms, longest {max} ms\n",
                queued.len()
            ));
        }
        let retried = records.iter().filter(|r| r.tries > 1).count();
        if retried > 0 {
            out.push_str(&format!(
                "{flow}:   {retried} job(s) ran again after the cluster lost them\n"
            ));
        }
        out
    }
}

/// `parallel` bounded by the cluster's width when a Ray runner is used.
pub fn bound(remote: Option<&Remote>, parallel: usize) -> usize {
    remote.map_or(parallel, |r| parallel.min(r.width))
}

/// Stops whatever job of the run is left and prints where the jobs ran.
pub async fn finish(remote: Option<&Remote>, flow: &str) {
    if let Some(r) = remote {
        r.runner.stop_all().await;
        eprint!("{}", r.report(flow));
    }
}

/// The Ray runner `--runner` (`flag`) and `[runner]` ask for, checked
/// against the cluster; `None` to run locally.
pub async fn choose(config: &Config, flag: Option<&str>) -> Result<Option<Remote>, String> {
    let Some(ray) = asked(config, flag)? else {
        return Ok(None);
    };
    connect(ray).await.map(Some)
}

/// The Ray settings `--runner` (`flag`), `[runner]` and `RAY_ADDRESS` /
/// `RAY_AUTH_TOKEN` ask for; `None` when they ask for the local runner.
/// The project's `[worktree] setup` lines go with them, to run on the node
/// before each command.
fn asked(
    config: &Config,
    flag: Option<&str>,
) -> Result<Option<orchestrator_adapters::ray::RayConfig>, String> {
    let ray = config.runner.ray_config(flag, |v| std::env::var(v).ok())?;
    Ok(ray.map(|r| r.setup(config.worktree.setup.clone())))
}

/// Dependency folders of a project that a job does not get.
const UNSENT: [&str; 3] = ["node_modules", ".venv", "venv"];

/// Says, before a run on Ray, which dependency folders of `repo` the jobs
/// will not have: a job gets the files git would commit, and without
/// `[worktree] setup` nothing makes them on the node. Nothing when setup
/// lines are configured.
pub fn warn_unsent(repo: &std::path::Path, config: &Config) {
    if !config.worktree.setup.is_empty() {
        return;
    }
    let found: Vec<String> = UNSENT
        .iter()
        .filter(|d| repo.join(d).is_dir())
        .map(|d| format!("{d}/"))
        .collect();
    if !found.is_empty() {
        eprintln!(
            "runner: warning: a Ray job gets the files git would commit, not {} of your tree; \
             `[worktree] setup` lines (`npm ci`, `uv sync`, …) run on the node before each command",
            found.join(", ")
        );
    }
}

/// The Ray runner `--runner` and the `[runner]` of `repo`'s configuration
/// files ask for, checked against the cluster on a runtime of its own (for
/// a flow that builds its runtime later); `None` to run locally.
pub fn for_repo(
    repo: &std::path::Path,
    files: &crate::setup::ConfigFiles,
    flag: Option<&str>,
) -> Result<Option<Remote>, String> {
    let config = orchestrator_adapters::config::EffectiveConfig::load(
        files.user.as_deref(),
        files.main_file(repo),
    )
    .map_err(|e| e.to_string())?
    .into_config();
    let Some(ray) = asked(&config, flag)? else {
        return Ok(None);
    };
    warn_unsent(repo, &config);
    // The probe's client dies with its runtime; the run gets a fresh one.
    let probe = crate::setup::runtime()?;
    let width = probe.block_on(connect(ray.clone()))?.width;
    drop(probe);
    let runner = RayRunner::new(ray).map_err(|e| e.to_string())?;
    Ok(Some(Remote { runner, width }))
}

/// Connects to the head in `config` and reads its width.
pub async fn connect(config: RayConfig) -> Result<Remote, String> {
    let runner = RayRunner::new(config).map_err(|e| e.to_string())?;
    let version = runner.client().version().await.map_err(|e| e.to_string())?;
    let width = runner.width().await.map_err(|e| e.to_string())?;
    eprintln!(
        "runner: Ray {version} at {}: {width} job(s) at once ({} CPU each)",
        runner.client().base(),
        runner.config().cpus_per_job
    );
    Ok(Remote { runner, width })
}
