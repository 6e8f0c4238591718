//! Commands and test runs as jobs on a Ray cluster, through the head's Jobs
//! REST API (Ray 2.60; no Python on this side).
//!
//! Data flow of one command ([`RayRunner`], a core `CommandRunner`; a
//! `CommandTestRunner` over it is the `TestRunner`):
//! 1. [`package::build`] zips the files git would commit of the tree that
//!    holds the command's directory, named by the zip's SHA-256;
//! 2. the head is asked for the package (which pins it for ten minutes)
//!    and it is uploaded only when missing, so an unchanged tree is sent
//!    once;
//! 3. the job is submitted with the [`entry`] script as its entrypoint,
//!    the package as its working directory, the configured CPUs reserved
//!    and the command's and the configuration's environment;
//! 4. its status is polled; past the command's time limit (counted from
//!    when it runs, not while it queues) it is stopped and seen stopped; a
//!    dropped call (a cancelled run) stops its job; a job whose node died,
//!    or that Ray failed for its own reasons, is run once more and then
//!    reported as the cluster's failure, never as the command's;
//! 5. the log's marked block gives stdout, stderr (apart, tails kept) and
//!    the exit status, mapped as the local runner maps them; the finished
//!    job is deleted from the head's list and recorded ([`JobRecord`]:
//!    node, queue time) for the run's report;
//! 6. for a runner [`with changes back`](RayRunner::with_changes_back),
//!    the command's file changes on the node come back in the log as a
//!    binary git diff and are applied to the local tree ([`changes`]).
//!
//! The Jobs API has a token mode in 2.60 (`RAY_AUTH_MODE=token`): set
//! [`RayConfig::token`] (or `RAY_AUTH_TOKEN`) and every request carries it.
//! A job can read the cluster's token from its environment, so token mode
//! protects the API from the network, not from the commands it runs.

pub mod changes;
pub mod client;
pub mod entry;
pub mod package;
mod runner;

use std::collections::BTreeMap;
use std::time::Duration;

pub use runner::{JobRecord, RayRunner};

/// The environment variable naming the head (`http://host:8265`), as Ray's
/// own job CLI reads it.
pub const ADDRESS_ENV: &str = "RAY_ADDRESS";

/// The environment variable holding the cluster's token.
pub const TOKEN_ENV: &str = "RAY_AUTH_TOKEN";

/// Where a node keeps the build caches of the repositories it ran, unless
/// configured otherwise.
pub const DEFAULT_CACHE_ROOT: &str = "/tmp/orchestrator-ray-cache";

/// How a [`RayRunner`] reaches and uses the cluster.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RayConfig {
    /// The head's Jobs API, `http://host:8265`.
    pub address: String,
    /// The bearer token when the cluster runs in token mode.
    pub token: Option<String>,
    /// CPUs each job reserves (it waits in Ray's queue until they are
    /// free); 0 reserves none.
    pub cpus_per_job: f64,
    /// Environment given to every job (beside each command's own).
    pub env: BTreeMap<String, String>,
    /// Point `CARGO_TARGET_DIR`, `npm_config_cache`, `PIP_CACHE_DIR`,
    /// `GOCACHE` and `UV_CACHE_DIR` into a folder on the node kept per
    /// repository, so jobs are not cold builds.
    pub node_cache: bool,
    /// Where that folder lives on the nodes.
    pub cache_root: String,
    /// How often a job's status is read.
    pub poll: Duration,
    /// The project's `[worktree] setup` lines, run on the node in the
    /// job's copy before every command: a job gets only what git would
    /// commit, so what `npm ci` or `uv sync` makes must be made there.
    pub setup: Vec<String>,
}

impl RayConfig {
    /// The defaults for the head at `address`: 1 CPU per job, the node
    /// cache on, a status read every 200 ms, the token from
    /// `RAY_AUTH_TOKEN` when set.
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
            cpus_per_job: 1.0,
            env: BTreeMap::new(),
            node_cache: true,
            cache_root: DEFAULT_CACHE_ROOT.to_owned(),
            poll: Duration::from_millis(200),
            setup: Vec::new(),
        }
    }

    /// Builder: the setup lines run on the node before every command.
    pub fn setup(mut self, lines: Vec<String>) -> Self {
        self.setup = lines;
        self
    }

    /// The head named by `RAY_ADDRESS`, when set.
    pub fn from_env() -> Option<Self> {
        std::env::var(ADDRESS_ENV)
            .ok()
            .filter(|a| !a.trim().is_empty())
            .map(Self::new)
    }

    /// Builder: CPUs per job.
    pub fn cpus_per_job(mut self, cpus: f64) -> Self {
        self.cpus_per_job = cpus;
        self
    }

    /// Builder: an environment variable for every job.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Builder: the token.
    pub fn token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// Builder: the node-local build cache on or off.
    pub fn node_cache(mut self, on: bool) -> Self {
        self.node_cache = on;
        self
    }

    /// Builder: where the node-local build cache lives.
    pub fn cache_root(mut self, root: impl Into<String>) -> Self {
        self.cache_root = root.into();
        self
    }
}

/// Why a job could not be run (a failing command is not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RayError {
    /// The configuration cannot work.
    #[error("ray runner: {0}")]
    Config(String),
    /// The head could not be reached.
    #[error("ray runner: {what}: {message}")]
    Http {
        /// What was being done.
        what: String,
        /// The transport's error.
        message: String,
    },
    /// The head refused the token (or wants one).
    #[error("ray runner: {0} (the cluster runs in token mode: set RAY_AUTH_TOKEN)")]
    Auth(String),
    /// The head answered with an error status.
    #[error("ray runner: {what}: the head answered {status}: {message}")]
    Refused {
        /// What was being done.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The last line of its answer.
        message: String,
    },
    /// The head's answer was not what this version of the API gives.
    #[error("ray runner: {0}")]
    Protocol(String),
    /// The working directory could not be packaged.
    #[error("ray runner: packaging the working directory: {0}")]
    Package(String),
    /// The cluster lost the job twice (its node died, or Ray could not
    /// start it): an infrastructure failure, not the command's.
    #[error("ray runner: the cluster lost the job twice: {0}")]
    Lost(String),
    /// A `[worktree] setup` line failed on the node before the command.
    #[error(
        "ray runner: the [worktree] setup line `{line}` failed on the node with status {status}: {output}"
    )]
    Setup {
        /// The line.
        line: String,
        /// Its exit status.
        status: i32,
        /// The tail of its output.
        output: String,
    },
    /// A job's file changes could not come back to the local tree.
    #[error("ray runner: {0}")]
    Changes(String),
    /// The program does not exist on the node.
    #[error("ray runner: `{command}`: no such program on the node")]
    NotFound {
        /// The command line.
        command: String,
    },
}
