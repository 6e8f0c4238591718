//! What the scripted GitHub knows: repositories (bare git repositories on
//! disk, with their branch protection), pull requests, check runs with
//! their attempts and logs, and commit statuses of other CIs. Tests build
//! a [`Scenario`], hand it to [`super::GithubServer::start`], and change it
//! while gh runs ([`super::GithubServer::with`]); a push through the git
//! remote calls [`Scenario::on_push`], which adds the checks of the new head.
//!
//! Heads are never stored: a pull request's `headRefOid` is read from its
//! head repository's branch each time, as GitHub does, so a push moves it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::test_support::git;

/// The state of a check run: GraphQL `CheckRun.status`
/// (`CheckStatusState`) and, once completed, `CheckRun.conclusion`
/// (`CheckConclusionState`); REST `job.status` / `job.conclusion` in lower case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// Queued, not started (`startedAt` null).
    Queued,
    /// Running.
    InProgress,
    /// Finished with a conclusion.
    Completed(Conclusion),
}

/// `CheckConclusionState` (GitHub GraphQL schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    /// `SUCCESS`.
    Success,
    /// `FAILURE`.
    Failure,
    /// `CANCELLED`.
    Cancelled,
    /// `TIMED_OUT`.
    TimedOut,
    /// `SKIPPED`.
    Skipped,
}

impl Conclusion {
    /// The GraphQL enum value (`SUCCESS`, …).
    pub fn graphql(self) -> &'static str {
        match self {
            Conclusion::Success => "SUCCESS",
            Conclusion::Failure => "FAILURE",
            Conclusion::Cancelled => "CANCELLED",
            Conclusion::TimedOut => "TIMED_OUT",
            Conclusion::Skipped => "SKIPPED",
        }
    }
}

/// What a re-run of a job concludes, and the log its step prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    /// The new attempt's state.
    pub status: CheckStatus,
    /// The new attempt's step log.
    pub log: String,
}

/// One check run of GitHub Actions: a job of a workflow run, at one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRun {
    /// `CheckRun.databaseId`, which is the REST job id.
    pub job_id: u64,
    /// The workflow run (`WorkflowRun.databaseId`, REST `run_id`); the same
    /// for every attempt.
    pub run_id: u64,
    /// REST `run_attempt` (1 for the first run).
    pub attempt: u32,
    /// `CheckRun.name` (the job's name).
    pub name: String,
    /// `Workflow.name`.
    pub workflow: String,
    /// The commit it ran on (REST `head_sha`).
    pub head_sha: String,
    /// Its state.
    pub status: CheckStatus,
    /// `startedAt` (minutes after the scenario's epoch; `None` while queued).
    pub started: Option<u32>,
    /// `completedAt` (minutes after the epoch).
    pub completed: Option<u32>,
    /// The name of the step that ran the check (`Run cargo test`).
    pub step: String,
    /// The step's output, one line per log line (timestamps are added).
    pub log: String,
    /// What a re-run concludes; `None`: the same as this attempt.
    pub rerun: Option<Rerun>,
}

/// `StatusState` of a commit status (another CI reporting through the
/// statuses API; GraphQL `StatusContext`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusState {
    /// `SUCCESS`.
    Success,
    /// `FAILURE`.
    Failure,
    /// `PENDING`.
    Pending,
}

/// A commit status (`StatusContext`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// The commit.
    pub sha: String,
    /// `StatusContext.context` (`ci/jenkins`).
    pub context: String,
    /// `StatusContext.state`.
    pub state: StatusState,
    /// `StatusContext.targetUrl`.
    pub target_url: String,
    /// `createdAt` (minutes after the epoch).
    pub created: u32,
}

/// A repository: a bare git repository under the scenario's root, served
/// at `http://github.localhost/<owner>/<name>.git`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// `owner/name`.
    pub full_name: String,
    /// The bare repository.
    pub bare: PathBuf,
    /// `defaultBranchRef.name`.
    pub default_branch: String,
    /// Branch protection: branch → required status check contexts (REST
    /// `branches/{b}/protection/required_status_checks`); a branch not
    /// listed is not protected.
    pub protection: BTreeMap<String, Vec<String>>,
}

/// A pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    /// `number`.
    pub number: u64,
    /// The base repository (`owner/name`).
    pub base: String,
    /// `baseRefName`.
    pub base_ref: String,
    /// The head repository (`owner/name`; another owner for a fork).
    pub head: String,
    /// `headRefName`.
    pub head_ref: String,
    /// `maintainerCanModify`.
    pub maintainer_can_modify: bool,
}

/// What a push through the git remote changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The repository (`owner/name`).
    pub repo: String,
    /// The branch.
    pub branch: String,
    /// Its new commit.
    pub sha: String,
    /// The open pull requests whose head it is.
    pub pulls: Vec<u64>,
}

/// Called after every push that moved a branch.
pub type PushHook = Box<dyn FnMut(&mut Scenario, &Pushed) + Send>;

/// The scripted GitHub's state; how it is scripted is in this file's module docs.
pub struct Scenario {
    /// Where the bare repositories live (`<root>/<owner>/<name>.git`).
    pub root: PathBuf,
    /// Repositories by `owner/name`.
    pub repos: BTreeMap<String, Repo>,
    /// Pull requests.
    pub pulls: Vec<Pull>,
    /// Every check run, oldest first (the rollup's order).
    pub checks: Vec<CheckRun>,
    /// Every commit status, oldest first.
    pub statuses: Vec<CommitStatus>,
    /// Runs after a push moved a branch (e.g. adds the new head's checks).
    pub on_push: Option<PushHook>,
    /// The scenario's clock, in minutes after 2024-05-01T10:00:00Z.
    pub clock: u32,
    /// Review threads and reviews (see `reviews`; a `RefCell` because a
    /// GraphQL mutation changes them through a shared scenario).
    pub(crate) reviews: std::cell::RefCell<super::review_state::Reviews>,
    next_id: u64,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("root", &self.root)
            .field("repos", &self.repos)
            .field("pulls", &self.pulls)
            .field("checks", &self.checks)
            .field("statuses", &self.statuses)
            .field("reviews", &self.reviews)
            .finish_non_exhaustive()
    }
}

/// The host the scripted GitHub answers for (`GH_HOST`).
pub const HOST: &str = "github.localhost";

impl Scenario {
    /// An empty scenario keeping its repositories under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            repos: BTreeMap::new(),
            pulls: Vec::new(),
            checks: Vec::new(),
            statuses: Vec::new(),
            on_push: None,
            clock: 0,
            reviews: std::cell::RefCell::default(),
            next_id: 1,
        }
    }

    /// Creates the repository `owner/name` (an empty bare repository that
    /// accepts pushes over HTTP) and returns its remote URL
    /// (`http://github.localhost/<owner>/<name>.git`).
    ///
    /// # Panics
    /// When git cannot create it (a test fixture).
    pub fn repo(&mut self, full_name: &str, default_branch: &str) -> String {
        let bare = self.root.join(format!("{full_name}.git"));
        std::fs::create_dir_all(&bare).unwrap_or_else(|e| panic!("{}: {e}", bare.display()));
        git(&bare, &["init", "-q", "--bare", "-b", default_branch]);
        git(&bare, &["config", "http.receivepack", "true"]);
        self.repos.insert(
            full_name.to_owned(),
            Repo {
                full_name: full_name.to_owned(),
                bare,
                default_branch: default_branch.to_owned(),
                protection: BTreeMap::new(),
            },
        );
        remote_url(full_name)
    }

    /// Opens pull request `number` from `head:head_ref` into `base:base_ref`
    /// (`head` is another owner's repository for a fork).
    pub fn pull(&mut self, number: u64, base: &str, base_ref: &str, head: &str, head_ref: &str) {
        self.pulls.push(Pull {
            number,
            base: base.to_owned(),
            base_ref: base_ref.to_owned(),
            head: head.to_owned(),
            head_ref: head_ref.to_owned(),
            maintainer_can_modify: false,
        });
        self.sync_pull_refs();
    }

    /// Requires `contexts` on `branch` of `repo` (branch protection).
    pub fn protect(&mut self, repo: &str, branch: &str, contexts: &[&str]) {
        if let Some(r) = self.repos.get_mut(repo) {
            r.protection.insert(
                branch.to_owned(),
                contexts.iter().map(|c| (*c).to_owned()).collect(),
            );
        }
    }

    /// The current commit of `branch` in `repo`, if it exists.
    pub fn branch_head(&self, repo: &str, branch: &str) -> Option<String> {
        let bare = &self.repos.get(repo)?.bare;
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(bare)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/{branch}^{{commit}}"))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The head commit of pull request `number`.
    pub fn pull_head(&self, number: u64) -> Option<String> {
        let p = self.pulls.iter().find(|p| p.number == number)?;
        self.branch_head(&p.head, &p.head_ref)
    }

    /// Moves the clock one minute on and returns the new time.
    pub fn tick(&mut self) -> u32 {
        self.clock += 1;
        self.clock
    }

    /// Adds a check run of workflow `CI` on `sha` in state `status`, whose
    /// step `Run <name>` printed `log`; returns its job id. Checks added on
    /// the same commit share one workflow run.
    pub fn check(&mut self, sha: &str, name: &str, status: CheckStatus, log: &str) -> u64 {
        let existing = self
            .checks
            .iter()
            .find(|c| c.head_sha == sha && c.workflow == "CI")
            .map(|c| c.run_id);
        let run_id = match existing {
            Some(id) => id,
            None => 5000 + self.next(),
        };
        let job_id = 1000 + self.next();
        let started = (status != CheckStatus::Queued).then(|| self.tick());
        let completed = matches!(status, CheckStatus::Completed(_)).then(|| self.tick());
        self.checks.push(CheckRun {
            job_id,
            run_id,
            attempt: 1,
            name: name.to_owned(),
            workflow: "CI".into(),
            head_sha: sha.to_owned(),
            status,
            started,
            completed,
            step: format!("Run {name}"),
            log: log.to_owned(),
            rerun: None,
        });
        job_id
    }

    /// Adds a commit status of another CI on `sha`.
    pub fn status(&mut self, sha: &str, context: &str, state: StatusState) {
        let created = self.tick();
        self.statuses.push(CommitStatus {
            sha: sha.to_owned(),
            context: context.to_owned(),
            state,
            target_url: format!("http://ci.example.localhost/{context}/{created}"),
            created,
        });
    }

    /// The check run with job id `job`.
    pub fn job(&self, job: u64) -> Option<&CheckRun> {
        self.checks.iter().find(|c| c.job_id == job)
    }

    /// The check run with job id `job`, to change it.
    pub fn job_mut(&mut self, job: u64) -> Option<&mut CheckRun> {
        self.checks.iter_mut().find(|c| c.job_id == job)
    }

    /// Re-runs job `job` as GitHub does on `POST …/jobs/{id}/rerun`: a new
    /// attempt of its workflow run, with a new job id, started now, whose
    /// result is the job's [`CheckRun::rerun`] (else the same as before).
    /// The old attempt stays listed (the rollup is every run, oldest first).
    /// `Err` with GitHub's message when the job is still running.
    pub fn rerun_job(&mut self, job: u64) -> Result<u64, String> {
        let old = self
            .job(job)
            .cloned()
            .ok_or_else(|| format!("job {job} not found"))?;
        if !matches!(old.status, CheckStatus::Completed(_)) {
            return Err("This workflow is already running".into());
        }
        let attempt = self
            .checks
            .iter()
            .filter(|c| c.run_id == old.run_id)
            .map(|c| c.attempt)
            .max()
            .unwrap_or(1)
            + 1;
        let again = old.rerun.clone().unwrap_or(Rerun {
            status: old.status,
            log: old.log.clone(),
        });
        let job_id = 1000 + self.next();
        let started = Some(self.tick());
        let completed = matches!(again.status, CheckStatus::Completed(_)).then(|| self.tick());
        self.checks.push(CheckRun {
            job_id,
            attempt,
            status: again.status,
            log: again.log,
            started,
            completed,
            rerun: None,
            ..old
        });
        Ok(job_id)
    }

    /// Sets `refs/pull/<n>/head` in each base repository to its pull
    /// request's head (GitHub keeps it there, also for forks).
    pub(crate) fn sync_pull_refs(&self) {
        for p in &self.pulls {
            let (Some(base), Some(head)) = (self.repos.get(&p.base), self.repos.get(&p.head))
            else {
                continue;
            };
            let Some(sha) = self.branch_head(&p.head, &p.head_ref) else {
                continue;
            };
            if p.base != p.head {
                let src = format!("refs/heads/{}", p.head_ref);
                let _ = Command::new("git")
                    .arg("--git-dir")
                    .arg(&base.bare)
                    .args(["fetch", "-q"])
                    .arg(&head.bare)
                    .arg(&src)
                    .output();
            }
            let _ = Command::new("git")
                .arg("--git-dir")
                .arg(&base.bare)
                .args(["update-ref", &format!("refs/pull/{}/head", p.number), &sha])
                .output();
        }
    }

    /// Records a push of `branch` of `repo` to `sha` and runs [`Scenario::on_push`].
    pub(crate) fn pushed(&mut self, repo: &str, branch: &str, sha: &str) {
        self.sync_pull_refs();
        let pulls = self
            .pulls
            .iter()
            .filter(|p| p.head == repo && p.head_ref == branch)
            .map(|p| p.number)
            .collect();
        let event = Pushed {
            repo: repo.to_owned(),
            branch: branch.to_owned(),
            sha: sha.to_owned(),
            pulls,
        };
        if let Some(mut hook) = self.on_push.take() {
            hook(self, &event);
            if self.on_push.is_none() {
                self.on_push = Some(hook);
            }
        }
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// `http://github.localhost/<owner>/<name>.git`: how gh writes a remote for
/// this host (cli/cli `ghrepo.FormatRemoteURL`, plain HTTP for `*.localhost`).
pub fn remote_url(full_name: &str) -> String {
    format!("http://{HOST}/{full_name}.git")
}

/// `2024-05-01T10:00:00Z` plus `minutes` (RFC 3339, as GitHub writes times).
pub fn timestamp(minutes: u32) -> String {
    let total = 10 * 60 + minutes;
    let (day, rest) = (1 + total / (24 * 60), total % (24 * 60));
    format!("2024-05-{day:02}T{:02}:{:02}:00Z", rest / 60, rest % 60)
}
