//! What the scripted GitLab knows: projects (bare git repositories on
//! disk), merge requests, pipelines with their jobs and traces, and
//! discussions. Tests build a [`Scenario`], hand it to
//! [`super::GitlabServer::start`] and change it while the client runs
//! ([`super::GitlabServer::with`]); a push through the git remote calls
//! [`Scenario::on_push`], which adds the new head's pipeline.
//!
//! An MR's `sha` is never stored: it is read from its source project's
//! branch each time, as GitLab does, so a push moves it; its
//! `head_pipeline` is the newest pipeline of the source project on that
//! commit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::test_support::git;

/// A project: a bare repository at `<root>/<path>.git`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The numeric id.
    pub id: u64,
    /// `path_with_namespace` (`group/sub/demo`).
    pub path: String,
    /// The bare repository.
    pub bare: PathBuf,
    /// `default_branch`.
    pub default_branch: String,
}

/// A merge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRequest {
    /// `iid`.
    pub iid: u64,
    /// `target_project_id` (= `project_id`).
    pub target_project: u64,
    /// `source_project_id` (a fork's id for a fork MR).
    pub source_project: u64,
    /// `source_branch`.
    pub source_branch: String,
    /// `target_branch`.
    pub target_branch: String,
    /// `allow_collaboration` (only sent for a fork MR).
    pub allow_collaboration: bool,
}

/// A pipeline (`PipelineBasic`); its `status` is computed from its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    /// `id`.
    pub id: u64,
    /// The project it ran in (`project_id`).
    pub project: u64,
    /// `sha`.
    pub sha: String,
    /// `ref` (`refs/merge-requests/7/head`, or a branch).
    pub ref_name: String,
    /// Minutes after the scenario's epoch (`created_at`).
    pub created: u32,
}

/// What a job's (re)run ends in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `status` (`success`, `failed`, `running`, …: jobs.md "Job status values").
    pub status: String,
    /// `failure_reason` when failed (`script_failure`, …).
    pub failure_reason: Option<String>,
    /// The trace.
    pub log: String,
}

impl Outcome {
    /// Passed, printing `log`.
    pub fn success(log: &str) -> Self {
        Self {
            status: "success".into(),
            failure_reason: None,
            log: log.into(),
        }
    }

    /// Failed with `script_failure`, printing `log`.
    pub fn failed(log: &str) -> Self {
        Self {
            status: "failed".into(),
            failure_reason: Some("script_failure".into()),
            log: log.into(),
        }
    }
}

/// A job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// `id`.
    pub id: u64,
    /// The pipeline it belongs to.
    pub pipeline: u64,
    /// `name`.
    pub name: String,
    /// `stage`.
    pub stage: String,
    /// `allow_failure`.
    pub allow_failure: bool,
    /// Its state, reason and trace.
    pub outcome: Outcome,
    /// What a retry ends in; `None`: the same again.
    pub retry: Option<Outcome>,
    /// Whether a retry replaced it (hidden from job lists then).
    pub retried: bool,
}

/// A note's diff position (discussions.md, "Create new merge request thread").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotePosition {
    /// `base_sha`, `start_sha`, `head_sha`.
    pub shas: [String; 3],
    /// `old_path`.
    pub old_path: String,
    /// `new_path`.
    pub new_path: String,
    /// `old_line`.
    pub old_line: Option<u64>,
    /// `new_line`.
    pub new_line: Option<u64>,
}

/// A note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// `id`.
    pub id: u64,
    /// `body`.
    pub body: String,
    /// `author.username`.
    pub author: String,
    /// `system`.
    pub system: bool,
    /// `resolvable`.
    pub resolvable: bool,
    /// `resolved`.
    pub resolved: bool,
    /// `position` (a `DiffNote`).
    pub position: Option<NotePosition>,
}

/// A discussion of an MR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discussion {
    /// `id` (40 hex digits).
    pub id: String,
    /// The MR's project and iid.
    pub mr: (u64, u64),
    /// `individual_note`.
    pub individual_note: bool,
    /// `notes`, oldest first.
    pub notes: Vec<Note>,
}

/// What a push through the git remote changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The project's id.
    pub project: u64,
    /// The branch.
    pub branch: String,
    /// Its new commit.
    pub sha: String,
    /// Whether the push rewrote the branch (the old commit is not an
    /// ancestor of the new one).
    pub forced: bool,
    /// The open MRs whose source branch it is.
    pub merge_requests: Vec<u64>,
}

/// Called after every push that moved a branch.
pub type PushHook = Box<dyn FnMut(&mut Scenario, &Pushed) + Send>;

/// The scripted GitLab's state; how it is scripted is in this file's module docs.
pub struct Scenario {
    /// Where the bare repositories live.
    pub root: PathBuf,
    /// The access token the API accepts in `PRIVATE-TOKEN`.
    pub token: String,
    /// The largest `per_page` served (GitLab: 100).
    pub max_per_page: usize,
    /// Projects by id.
    pub projects: BTreeMap<u64, Project>,
    /// Merge requests.
    pub merge_requests: Vec<MergeRequest>,
    /// Pipelines, oldest first.
    pub pipelines: Vec<Pipeline>,
    /// Jobs, oldest first.
    pub jobs: Vec<Job>,
    /// Discussions, oldest first.
    pub discussions: Vec<Discussion>,
    /// Every push that moved a branch, oldest first.
    pub pushes: Vec<Pushed>,
    /// Runs after a push moved a branch.
    pub on_push: Option<PushHook>,
    /// Minutes after 2024-05-01T10:00:00Z.
    pub clock: u32,
    /// The next this many API requests are answered `429` (rate limited).
    pub rate_limited: u32,
    /// The `Retry-After` seconds of a rate-limited answer.
    pub retry_after: u32,
    next_id: u64,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("root", &self.root)
            .field("projects", &self.projects)
            .field("merge_requests", &self.merge_requests)
            .field("pipelines", &self.pipelines)
            .field("jobs", &self.jobs)
            .field("discussions", &self.discussions)
            .finish_non_exhaustive()
    }
}

/// The token [`Scenario::new`] accepts.
pub const TOKEN: &str = "glpat-scripted";

impl Scenario {
    /// An empty scenario keeping its repositories under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            token: TOKEN.into(),
            max_per_page: 100,
            projects: BTreeMap::new(),
            merge_requests: Vec::new(),
            pipelines: Vec::new(),
            jobs: Vec::new(),
            discussions: Vec::new(),
            pushes: Vec::new(),
            on_push: None,
            clock: 0,
            rate_limited: 0,
            retry_after: 1,
            next_id: 1000,
        }
    }

    /// Creates project `id` at `path` (an empty bare repository that
    /// accepts pushes over HTTP).
    ///
    /// # Panics
    /// When git cannot create it (a test fixture).
    pub fn project(&mut self, id: u64, path: &str, default_branch: &str) {
        let bare = self.root.join(format!("{path}.git"));
        std::fs::create_dir_all(&bare).unwrap_or_else(|e| panic!("{}: {e}", bare.display()));
        git(&bare, &["init", "-q", "--bare", "-b", default_branch]);
        git(&bare, &["config", "http.receivepack", "true"]);
        self.projects.insert(
            id,
            Project {
                id,
                path: path.into(),
                bare,
                default_branch: default_branch.into(),
            },
        );
    }

    /// The project with id or URL-decoded path `key`.
    pub fn find_project(&self, key: &str) -> Option<&Project> {
        match key.parse::<u64>() {
            Ok(id) => self.projects.get(&id),
            Err(_) => self.projects.values().find(|p| p.path == key),
        }
    }

    /// Opens MR `iid` of project `target` from `source`'s `source_branch`.
    pub fn merge_request(&mut self, iid: u64, target: u64, source: u64, source_branch: &str) {
        let target_branch = self
            .projects
            .get(&target)
            .map(|p| p.default_branch.clone())
            .unwrap_or_else(|| "main".into());
        self.merge_requests.push(MergeRequest {
            iid,
            target_project: target,
            source_project: source,
            source_branch: source_branch.into(),
            target_branch,
            allow_collaboration: true,
        });
        self.sync_mr_refs();
    }

    /// MR `iid`, to change it.
    pub fn mr_mut(&mut self, iid: u64) -> Option<&mut MergeRequest> {
        self.merge_requests.iter_mut().find(|m| m.iid == iid)
    }

    /// The commit of `branch` in project `project`.
    pub fn branch_head(&self, project: u64, branch: &str) -> Option<String> {
        let bare = &self.projects.get(&project)?.bare;
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

    /// MR `iid`'s head commit.
    pub fn mr_sha(&self, mr: &MergeRequest) -> Option<String> {
        self.branch_head(mr.source_project, &mr.source_branch)
    }

    /// Adds a pipeline of MR `iid` on its current head; returns its id.
    pub fn mr_pipeline(&mut self, iid: u64) -> u64 {
        let Some(mr) = self.merge_requests.iter().find(|m| m.iid == iid).cloned() else {
            return 0;
        };
        let sha = self.mr_sha(&mr).unwrap_or_default();
        let id = self.next();
        let created = self.tick();
        self.pipelines.push(Pipeline {
            id,
            project: mr.source_project,
            sha,
            ref_name: format!("refs/merge-requests/{iid}/head"),
            created,
        });
        id
    }

    /// Adds job `name` to pipeline `pipeline` ending in `outcome`; returns its id.
    pub fn job(&mut self, pipeline: u64, name: &str, outcome: Outcome) -> u64 {
        let id = self.next();
        self.jobs.push(Job {
            id,
            pipeline,
            name: name.into(),
            stage: "test".into(),
            allow_failure: false,
            outcome,
            retry: None,
            retried: false,
        });
        id
    }

    /// Job `id`, to change it.
    pub fn job_mut(&mut self, id: u64) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.id == id)
    }

    /// Adds a thread of one note on MR `iid` of project `project`; a
    /// `position` makes it a `DiffNote` on the MR's current diff refs.
    pub fn thread(
        &mut self,
        project: u64,
        iid: u64,
        body: &str,
        position: Option<(&str, u64)>,
    ) -> String {
        let shas = self.diff_refs(project, iid);
        let note = Note {
            id: self.next(),
            body: body.into(),
            author: "reviewer".into(),
            system: false,
            resolvable: true,
            resolved: false,
            position: position.map(|(path, line)| NotePosition {
                shas,
                old_path: path.into(),
                new_path: path.into(),
                old_line: None,
                new_line: Some(line),
            }),
        };
        self.discussion(project, iid, false, note)
    }

    /// Adds a discussion holding `note`; returns its id.
    pub fn discussion(&mut self, project: u64, iid: u64, individual: bool, note: Note) -> String {
        let id = format!("{:040x}", 0xd15c_0000_u64 + self.next());
        self.discussions.push(Discussion {
            id: id.clone(),
            mr: (project, iid),
            individual_note: individual,
            notes: vec![note],
        });
        id
    }

    /// The MR's `diff_refs` `[base_sha, start_sha, head_sha]`: the target
    /// branch's head as base and start, the source's as head.
    pub fn diff_refs(&self, project: u64, iid: u64) -> [String; 3] {
        let mr = self
            .merge_requests
            .iter()
            .find(|m| m.target_project == project && m.iid == iid);
        let head = mr.and_then(|m| self.mr_sha(m)).unwrap_or_default();
        let base = mr
            .and_then(|m| self.branch_head(m.target_project, &m.target_branch))
            .unwrap_or_default();
        [base.clone(), base, head]
    }

    /// The lines of `path` that MR `iid`'s diff shows (`git diff`, three
    /// lines of context, as GitLab's diff view): the added new-side lines,
    /// and the unchanged ones as (new line, old line).
    pub fn diff_lines(&self, project: u64, iid: u64, path: &str) -> (Vec<u64>, Vec<(u64, u64)>) {
        let mr = self
            .merge_requests
            .iter()
            .find(|m| m.target_project == project && m.iid == iid);
        let (Some(m), Some(p)) = (mr, self.projects.get(&project)) else {
            return Default::default();
        };
        let base = format!("refs/heads/{}", m.target_branch);
        let head = format!("refs/merge-requests/{iid}/head");
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(&p.bare)
            .args(["diff", &base, &head, "--", path])
            .output();
        let diff = out.map_or_else(
            |_| String::new(),
            |o| String::from_utf8_lossy(&o.stdout).into_owned(),
        );
        let (mut added, mut context, mut at) = (Vec::new(), Vec::new(), (0, 0));
        for line in diff.lines() {
            if let Some(header) = line.strip_prefix("@@ -") {
                let num = |r: &str| r.split(',').next().and_then(|n| n.parse().ok());
                let mut parts = header.split(' ');
                let old = parts.next().and_then(num).unwrap_or(0);
                let new = parts.next().and_then(|r| num(r.trim_start_matches('+')));
                at = (new.unwrap_or(0), old);
            } else if line.starts_with('+') && !line.starts_with("+++") {
                added.push(at.0);
                at.0 += 1;
            } else if line.starts_with(' ') {
                context.push(at);
                at = (at.0 + 1, at.1 + 1);
            } else if line.starts_with('-') && !line.starts_with("---") {
                at.1 += 1;
            }
        }
        (added, context)
    }

    /// The pipeline's `status`, from its current jobs (pipelines.md: a
    /// failed job that may fail leaves it `success`).
    pub fn pipeline_status(&self, pipeline: u64) -> &'static str {
        let jobs: Vec<&Job> = self
            .jobs
            .iter()
            .filter(|j| j.pipeline == pipeline && !j.retried)
            .collect();
        fn is(s: &'static str) -> impl Fn(&&Job) -> bool {
            move |j| j.outcome.status == s
        }
        if jobs.iter().any(|j| {
            !matches!(
                j.outcome.status.as_str(),
                "success" | "failed" | "canceled" | "skipped"
            )
        }) {
            "running"
        } else if jobs
            .iter()
            .any(|j| j.outcome.status == "failed" && !j.allow_failure)
        {
            "failed"
        } else if jobs.iter().any(is("canceled")) {
            "canceled"
        } else if !jobs.is_empty() && jobs.iter().all(is("skipped")) {
            "skipped"
        } else {
            "success"
        }
    }

    /// Retries job `id` as `POST …/jobs/:id/retry` does: a new job in the
    /// same pipeline; the old one is retried. `Err` with GitLab's message
    /// when it is not finished.
    pub fn retry_job(&mut self, id: u64) -> Result<u64, String> {
        let old = self
            .jobs
            .iter()
            .find(|j| j.id == id && !j.retried)
            .cloned()
            .ok_or_else(|| "404 Job Not Found".to_owned())?;
        if !matches!(
            old.outcome.status.as_str(),
            "failed" | "canceled" | "success"
        ) {
            return Err("403 Forbidden - Job is not retryable".into());
        }
        let new_id = self.next();
        if let Some(j) = self.job_mut(id) {
            j.retried = true;
        }
        self.jobs.push(Job {
            id: new_id,
            outcome: old.retry.clone().unwrap_or(old.outcome.clone()),
            retry: None,
            retried: false,
            ..old
        });
        Ok(new_id)
    }

    /// Sets `refs/merge-requests/<iid>/head` in each target project to its
    /// MR's head (GitLab keeps it there, for forks too).
    pub(crate) fn sync_mr_refs(&self) {
        for m in &self.merge_requests {
            let (Some(target), Some(source)) = (
                self.projects.get(&m.target_project),
                self.projects.get(&m.source_project),
            ) else {
                continue;
            };
            let Some(sha) = self.mr_sha(m) else {
                continue;
            };
            if m.target_project != m.source_project {
                let _ = Command::new("git")
                    .arg("--git-dir")
                    .arg(&target.bare)
                    .args(["fetch", "-q"])
                    .arg(&source.bare)
                    .arg(format!("refs/heads/{}", m.source_branch))
                    .output();
            }
            let _ = Command::new("git")
                .arg("--git-dir")
                .arg(&target.bare)
                .args([
                    "update-ref",
                    &format!("refs/merge-requests/{}/head", m.iid),
                    &sha,
                ])
                .output();
        }
    }

    /// Records a push of `branch` of project `project` from `before` to
    /// `sha` and runs [`Scenario::on_push`].
    pub(crate) fn pushed(&mut self, project: u64, branch: &str, before: Option<&str>, sha: &str) {
        self.sync_mr_refs();
        let forced = before.is_some_and(|old| {
            let bare = self.projects.get(&project).map(|p| p.bare.clone());
            !bare.is_some_and(|bare| {
                Command::new("git")
                    .arg("--git-dir")
                    .arg(bare)
                    .args(["merge-base", "--is-ancestor", old, sha])
                    .status()
                    .is_ok_and(|s| s.success())
            })
        });
        let event = Pushed {
            project,
            branch: branch.into(),
            sha: sha.into(),
            forced,
            merge_requests: self
                .merge_requests
                .iter()
                .filter(|m| m.source_project == project && m.source_branch == branch)
                .map(|m| m.iid)
                .collect(),
        };
        self.pushes.push(event.clone());
        if let Some(mut hook) = self.on_push.take() {
            hook(self, &event);
            if self.on_push.is_none() {
                self.on_push = Some(hook);
            }
        }
    }

    /// Moves the clock one minute on and returns the new time.
    pub fn tick(&mut self) -> u32 {
        self.clock += 1;
        self.clock
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}
