//! What the fake knows of remotes and bases: remote branches (set by a
//! test or by a push) and the scripted upstream and working change.

use std::collections::BTreeMap;

use super::FakeVcs;
use crate::fakes::lock;
use crate::vcs::CommitId;

impl FakeVcs {
    /// Sets a remote branch's commit, as if someone else had pushed (to test
    /// rejected pushes).
    pub fn set_remote_branch(&self, remote: &str, branch: &str, commit: CommitId) {
        lock(&self.store)
            .remotes
            .insert((remote.to_owned(), branch.to_owned()), commit);
    }

    /// Scripts [`Vcs::upstream`](crate::vcs::Vcs::upstream) and
    /// [`Vcs::diff_from`](crate::vcs::Vcs::diff_from): the branch's
    /// upstream, and the working change against each base (a base not
    /// listed is an error, as an unknown ref is for git).
    pub fn script_base(&self, upstream: Option<&str>, diffs: &[(&str, &str)]) {
        let mut store = lock(&self.store);
        store.upstream = upstream.map(str::to_owned);
        store.base_diffs = base_diffs(diffs);
    }

    /// The commit a remote branch points at, if it was ever pushed.
    pub fn remote_branch(&self, remote: &str, branch: &str) -> Option<CommitId> {
        lock(&self.store)
            .remotes
            .get(&(remote.to_owned(), branch.to_owned()))
            .cloned()
    }
}

/// The scripted answers of [`FakeVcs::script_base`].
pub(super) fn base_diffs(diffs: &[(&str, &str)]) -> BTreeMap<String, String> {
    diffs
        .iter()
        .map(|(b, d)| ((*b).to_owned(), (*d).to_owned()))
        .collect()
}
