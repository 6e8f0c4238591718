//! Reading a pull request as `gh pr view --json` exports it: its head
//! ([`PrHead`]) and its checks, one per check — the latest attempt.
//!
//! `statusCheckRollup` lists every run GitHub reports for the head commit,
//! a re-run beside the run it replaced (cli/cli `api/export_pr.go`), while
//! `gh pr checks` keeps the newest per check. So do we: the key is the
//! check run's name and workflow (a commit status's context), and the
//! newest is the latest `startedAt` — a run not started yet (a queued
//! re-run) is newer than any that started — then the later in the list.

use serde::Deserialize;

use crate::handoff::{FailedCheck, run_id_from_url};

/// The head of a pull request: where a fix must be made and pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrHead {
    /// The pull request.
    pub number: u64,
    /// `headRefName`: the branch on the head repository.
    pub branch: String,
    /// `headRefOid`: the commit the checks ran on.
    pub oid: String,
    /// `headRepositoryOwner.login`.
    pub owner: String,
    /// `headRepository.name`.
    pub repo: String,
    /// `isCrossRepository`: the head is in a fork.
    pub cross_repository: bool,
    /// `maintainerCanModify`: the fork lets the base's maintainers push.
    pub maintainer_can_modify: bool,
    /// `baseRefName`.
    pub base_branch: String,
    /// The ref the base repository keeps the head at (`refs/pull/7/head`,
    /// GitLab's `refs/merge-requests/7/head`).
    pub head_ref: String,
    /// How the request is named to people (`PR #7`, `MR !7`).
    pub label: String,
}

/// The fields of `gh pr view --json` the provider reads (Debian's gh 2.23
/// has every one).
pub const PR_VIEW_FIELDS: [&str; 8] = [
    "headRefName",
    "headRefOid",
    "headRepository",
    "headRepositoryOwner",
    "isCrossRepository",
    "maintainerCanModify",
    "baseRefName",
    "statusCheckRollup",
];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PrView {
    head_ref_name: String,
    head_ref_oid: String,
    #[serde(default)]
    head_repository: Option<Named>,
    #[serde(default)]
    head_repository_owner: Option<Login>,
    #[serde(default)]
    is_cross_repository: bool,
    #[serde(default)]
    maintainer_can_modify: bool,
    #[serde(default)]
    base_ref_name: String,
    #[serde(default)]
    status_check_rollup: Option<Vec<RollupEntry>>,
}

#[derive(Debug, Deserialize)]
struct Named {
    name: String,
}

#[derive(Debug, Deserialize)]
struct Login {
    login: String,
}

impl PrView {
    /// The head of pull request `number`.
    pub(super) fn head(&self, number: u64) -> PrHead {
        PrHead {
            number,
            branch: self.head_ref_name.clone(),
            oid: self.head_ref_oid.clone(),
            owner: self
                .head_repository_owner
                .as_ref()
                .map(|o| o.login.clone())
                .unwrap_or_default(),
            repo: self
                .head_repository
                .as_ref()
                .map(|r| r.name.clone())
                .unwrap_or_default(),
            cross_repository: self.is_cross_repository,
            maintainer_can_modify: self.maintainer_can_modify,
            base_branch: self.base_ref_name.clone(),
            head_ref: format!("refs/pull/{number}/head"),
            label: format!("PR #{number}"),
        }
    }

    /// The head's checks, the latest attempt of each.
    pub(super) fn checks(&self) -> Vec<Check> {
        latest(
            self.status_check_rollup
                .iter()
                .flatten()
                .map(RollupEntry::check)
                .collect(),
        )
    }
}

/// One entry of `statusCheckRollup`: a check run (`name`, `workflowName`,
/// `status`, `conclusion`, `startedAt`, `detailsUrl`) or a commit status
/// (`context`, `state`, `targetUrl`, and `startedAt` = its `createdAt`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RollupEntry {
    #[serde(rename = "__typename", default)]
    typename: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    workflow_name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    conclusion: String,
    #[serde(default)]
    started_at: String,
    #[serde(default)]
    details_url: String,
    #[serde(default)]
    context: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    target_url: String,
}

/// One check of the head, as `gh pr checks` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub(crate) name: String,
    /// The workflow of a check run; empty for a commit status.
    pub(crate) workflow: String,
    /// `pass`, `fail`, `pending`, `skipping` or `cancel` (gh's buckets).
    pub(crate) bucket: &'static str,
    pub(crate) link: String,
    /// When it started (RFC 3339); empty when not started.
    pub(crate) started: String,
    /// A GitHub Actions job (its log can be read), not a commit status.
    pub(crate) actions: bool,
}

impl RollupEntry {
    fn check(&self) -> Check {
        let status_context = self.typename == "StatusContext";
        let (name, link, state) = if status_context {
            (&self.context, &self.target_url, self.state.as_str())
        } else if self.status.eq_ignore_ascii_case("COMPLETED") {
            (&self.name, &self.details_url, self.conclusion.as_str())
        } else {
            (&self.name, &self.details_url, self.status.as_str())
        };
        let bucket = match state.to_ascii_uppercase().as_str() {
            "SUCCESS" => "pass",
            "SKIPPED" | "NEUTRAL" => "skipping",
            "CANCELLED" => "cancel",
            "ERROR" | "FAILURE" | "TIMED_OUT" | "ACTION_REQUIRED" | "STARTUP_FAILURE" => "fail",
            // EXPECTED, REQUESTED, WAITING, QUEUED, PENDING, IN_PROGRESS, STALE, …
            _ => "pending",
        };
        // gh exports a missing time as Go's zero time.
        let started = if self.started_at.starts_with("0001-") {
            String::new()
        } else {
            self.started_at.clone()
        };
        Check {
            name: name.clone(),
            workflow: if status_context {
                String::new()
            } else {
                self.workflow_name.clone()
            },
            bucket,
            link: link.clone(),
            started,
            actions: !status_context && run_id_from_url(link).is_some(),
        }
    }
}

/// The latest attempt of each check (see the module docs), in the order
/// of their first appearance.
pub(crate) fn latest(all: Vec<Check>) -> Vec<Check> {
    let mut out: Vec<(usize, Check)> = Vec::new();
    for (index, check) in all.into_iter().enumerate() {
        let newer = |old: &(usize, Check)| {
            let rank = |c: &Check, i: usize| (c.started.is_empty(), c.started.clone(), i);
            rank(&check, index) > rank(&old.1, old.0)
        };
        match out
            .iter_mut()
            .find(|(_, c)| c.name == check.name && c.workflow == check.workflow)
        {
            Some(slot) if newer(slot) => *slot = (index, check),
            Some(_) => {}
            None => out.push((index, check)),
        }
    }
    out.into_iter().map(|(_, c)| c).collect()
}

impl Check {
    /// Whether the bucket is a failure (`fail`, `cancel`).
    pub(crate) fn failed(&self) -> bool {
        self.bucket == "fail" || self.bucket == "cancel"
    }

    /// The check as a failed check of a handoff.
    pub(crate) fn failed_check(&self) -> FailedCheck {
        FailedCheck {
            name: self.name.clone(),
            run_id: self.actions.then(|| run_id_from_url(&self.link)).flatten(),
            log_url: (!self.link.is_empty()).then(|| self.link.clone()),
            conclusion_detail: (!self.actions)
                .then(|| "a commit status of another CI, not a GitHub Actions job".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, bucket: &'static str, started: &str, link: &str) -> Check {
        Check {
            name: name.into(),
            workflow: "CI".into(),
            bucket,
            link: link.into(),
            started: started.into(),
            actions: true,
        }
    }

    #[test]
    fn the_latest_attempt_of_each_check_wins() {
        let old = check("build", "fail", "2024-05-01T10:00:00Z", "r/1/job/1");
        let new = check("build", "pass", "2024-05-01T10:10:00Z", "r/2/job/3");
        let queued = check("build", "pending", "", "r/2/job/4");
        let other = check("test", "pass", "2024-05-01T10:01:00Z", "r/1/job/2");
        // Server order does not matter, the start time does.
        for all in [
            vec![old.clone(), other.clone(), new.clone()],
            vec![new.clone(), other.clone(), old.clone()],
        ] {
            assert_eq!(latest(all), vec![new.clone(), other.clone()]);
        }
        // A re-run not started yet is the newest: pending, not the old failure.
        assert_eq!(latest(vec![old.clone(), queued.clone()]), vec![queued]);
        // The same name in another workflow is another check.
        let mut release = old.clone();
        release.workflow = "Release".into();
        assert_eq!(latest(vec![old.clone(), release.clone()]).len(), 2);
        // Equal start times: the later listed.
        let mut twin = old.clone();
        twin.bucket = "pass";
        assert_eq!(latest(vec![old, twin.clone()]), vec![twin]);
    }

    proptest::proptest! {
        /// One check per (name, workflow), each one of the inputs, and no
        /// input of that key started later.
        #[test]
        fn one_newest_per_check(entries in proptest::collection::vec((0u8..3, 0u8..2, 0u8..5), 0..12)) {
            let all: Vec<Check> = entries.iter().map(|(n, w, t)| Check {
                name: format!("c{n}"),
                workflow: format!("w{w}"),
                bucket: "pass",
                link: String::new(),
                started: if *t == 0 { String::new() } else { format!("2024-05-01T10:0{t}:00Z") },
                actions: true,
            }).collect();
            let kept = latest(all.clone());
            for k in &kept {
                proptest::prop_assert_eq!(kept.iter().filter(|o| o.name == k.name && o.workflow == k.workflow).count(), 1);
                for a in all.iter().filter(|a| a.name == k.name && a.workflow == k.workflow) {
                    proptest::prop_assert!(k.started.is_empty() || (!a.started.is_empty() && a.started <= k.started));
                }
            }
            let keys: std::collections::BTreeSet<_> = all.iter().map(|a| (&a.name, &a.workflow)).collect();
            proptest::prop_assert_eq!(keys.len(), kept.len());
        }
    }
}
