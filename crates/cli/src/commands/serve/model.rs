//! What the dashboard's modules share: the flows, a session folder found
//! on disk, its items and what its flow's files say.

use std::path::PathBuf;

use orchestrator_core::state::event_log::RunState;
use serde::Serialize;

/// The flows a session can belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flow {
    /// `.workflow/.lite-plan/<id>/`.
    Planex,
    /// `.review/fixes/fix-<ms>/`.
    ReviewFix,
    /// `.moai/state/.locks/ci-autofix-<key>/`.
    CiAutofix,
}

impl Flow {
    /// The name used in URLs and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Flow::Planex => "planex",
            Flow::ReviewFix => "review-fix",
            Flow::CiAutofix => "ci-autofix",
        }
    }

    /// The flow named `name`.
    pub fn parse(name: &str) -> Option<Flow> {
        [Flow::Planex, Flow::ReviewFix, Flow::CiAutofix]
            .into_iter()
            .find(|f| f.as_str() == name)
    }
}

/// A session folder found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Index of its repository in the served list.
    pub repo: usize,
    /// The repository.
    pub repo_dir: PathBuf,
    /// Its flow.
    pub flow: Flow,
    /// Its id (the folder's name).
    pub id: String,
    /// Its folder.
    pub dir: PathBuf,
}

impl Found {
    /// The key the page names it by: `<repo>/<flow>/<id>`.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.repo, self.flow.as_str(), self.id)
    }
}

/// What a flow's files say about a session.
#[derive(Debug, Clone, Default)]
pub struct FlowView {
    /// Title.
    pub title: String,
    /// Start, Unix ms.
    pub started_ms: i64,
    /// The state the files give when no process runs and no log says.
    pub state: Option<(RunState, Option<String>)>,
    /// The items.
    pub items: Vec<Item>,
    /// Test runs the files count.
    pub test_runs: Option<u64>,
    /// A gate the page can answer.
    pub approvable: Option<String>,
}

/// One item (task, finding, iteration) of a session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Item {
    /// Its id (`T1`, `F2`, `iter-1`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its group, wave or stage, for people.
    pub group: Option<String>,
    /// `done`, `failed`, `skipped`, `not_fixable`, `running`, `pending`.
    pub status: &'static str,
    /// Attempts made.
    pub attempts: u32,
    /// The last error (test output included).
    pub error: Option<String>,
    /// Landed commits.
    pub commits: Vec<String>,
    /// Where it is (review-fix).
    pub location: Option<String>,
    /// What the agent spent on it.
    pub cost_usd: Option<f64>,
    /// Tokens.
    pub tokens: Option<u64>,
}
