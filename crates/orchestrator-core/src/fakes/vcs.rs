//! [`FakeVcs`]: version control over a real directory with in-memory history.
//!
//! The working tree is real files (so agents, test runners and the state
//! helpers see the same files as with git); commits, branches, worktrees and
//! remotes live in a shared in-memory store. There is no index: a commit takes
//! the named files from the working tree. This spawns no process.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::lock;
use crate::finding::digest_hex;
use crate::vcs::{
    Checkpoint, CherryPick, CommitId, CommitInfo, PushOutcome, Status, Vcs, VcsError,
    check_relative_path,
};

type Tree = BTreeMap<String, Vec<u8>>;

#[derive(Debug, Clone)]
struct FakeCommit {
    parent: Option<CommitId>,
    message: String,
    tree: Tree,
}

#[derive(Debug, Default)]
struct Store {
    commits: HashMap<CommitId, FakeCommit>,
    branches: BTreeMap<String, CommitId>,
    remotes: BTreeMap<(String, String), CommitId>,
    excluded: BTreeSet<String>,
    worktrees: BTreeMap<PathBuf, String>,
    counter: u64,
    /// Scripted by [`FakeVcs::script_base`]: the upstream, and the working
    /// change against each base.
    upstream: Option<String>,
    base_diffs: BTreeMap<String, String>,
}

impl Store {
    fn add_commit(&mut self, parent: Option<CommitId>, message: &str, tree: Tree) -> CommitId {
        self.counter += 1;
        let tree_id = tree_id(&tree);
        let id = CommitId(format!(
            "{:016x}{}{}",
            self.counter,
            tree_id,
            digest_hex(&[
                message.as_bytes(),
                parent.as_ref().map_or(b"", |p| p.0.as_bytes())
            ])
        ));
        self.commits.insert(
            id.clone(),
            FakeCommit {
                parent,
                message: message.to_owned(),
                tree,
            },
        );
        id
    }

    fn commit(&self, id: &CommitId) -> Result<&FakeCommit, VcsError> {
        self.commits
            .get(id)
            .ok_or_else(|| VcsError::Other(format!("unknown commit {id}")))
    }

    fn is_ancestor(&self, ancestor: &CommitId, of: &CommitId) -> bool {
        let parent = |c: &CommitId| self.commits.get(c).and_then(|fc| fc.parent.clone());
        std::iter::successors(Some(of.clone()), parent).any(|c| &c == ancestor)
    }
}

fn tree_id(tree: &Tree) -> String {
    let mut chunks: Vec<&[u8]> = Vec::with_capacity(tree.len() * 2);
    for (path, content) in tree {
        chunks.push(path.as_bytes());
        chunks.push(content);
    }
    digest_hex(&chunks)
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> VcsError {
    VcsError::Other(format!("failed to {what} {}: {e}", path.display()))
}

mod remote;

/// A fake [`Vcs`]: real working-tree files, in-memory history.
#[derive(Debug, Clone)]
pub struct FakeVcs {
    root: PathBuf,
    store: Arc<Mutex<Store>>,
    head: Arc<Mutex<(CommitId, Option<String>)>>,
}

impl FakeVcs {
    /// Starts a repository at `root`: every file under it becomes the first
    /// commit on branch `main`.
    pub fn init(root: impl Into<PathBuf>) -> Result<Self, VcsError> {
        let root = root.into();
        let mut store = Store::default();
        let tree = scan(&root, &store.excluded)?;
        let id = store.add_commit(None, "initial commit", tree);
        store.branches.insert("main".into(), id.clone());
        Ok(Self {
            root,
            store: Arc::new(Mutex::new(store)),
            head: Arc::new(Mutex::new((id, Some("main".into())))),
        })
    }

    fn head_tree(&self) -> Result<(CommitId, Tree), VcsError> {
        let head = lock(&self.head).0.clone();
        let store = lock(&self.store);
        Ok((head.clone(), store.commit(&head)?.tree.clone()))
    }

    fn read_file(&self, rel: &str) -> Result<Option<Vec<u8>>, VcsError> {
        let path = self.root.join(rel);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("read", &path, e)),
        }
    }

    fn write_file(&self, rel: &str, content: Option<&[u8]>) -> Result<(), VcsError> {
        let path = self.root.join(rel);
        match content {
            Some(bytes) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io_err("create", parent, e))?;
                }
                std::fs::write(&path, bytes).map_err(|e| io_err("write", &path, e))
            }
            None => match std::fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_err("remove", &path, e)),
            },
        }
    }

    fn digest(&self, rel: &str) -> Result<Option<String>, VcsError> {
        Ok(self.read_file(rel)?.map(|b| digest_hex(&[&b])))
    }

    fn compute_status(&self) -> Result<Status, VcsError> {
        let (_, tree) = self.head_tree()?;
        let excluded = lock(&self.store).excluded.clone();
        let disk = scan(&self.root, &excluded)?;
        let mut status = Status::default();
        for (path, content) in &tree {
            if disk.get(path) != Some(content) {
                status.modified.push(path.clone());
            }
        }
        for path in disk.keys() {
            if !tree.contains_key(path) {
                status.untracked.push(path.clone());
            }
        }
        Ok(status)
    }

    /// The write-set since `cp`, or the pre-dirty files that changed.
    fn write_set(&self, cp: &Checkpoint) -> Result<Vec<String>, VcsError> {
        let head = lock(&self.head).0.clone();
        if head != cp.head {
            return Err(VcsError::Other(format!(
                "HEAD moved from {} to {} since the checkpoint",
                cp.head.short(),
                head.short()
            )));
        }
        let mut touched = Vec::new();
        for (path, digest) in &cp.dirty {
            if &self.digest(path)? != digest {
                touched.push(path.clone());
            }
        }
        if !touched.is_empty() {
            return Err(VcsError::TouchedDirty { paths: touched });
        }
        Ok(self
            .compute_status()?
            .dirty_paths()
            .into_iter()
            .filter(|p| !cp.dirty.contains_key(p))
            .collect())
    }
}

fn is_excluded(rel: &str, excluded: &BTreeSet<String>) -> bool {
    rel.split('/').enumerate().any(|(i, comp)| {
        comp == ".git"
            || excluded.iter().any(|pat| match pat.strip_suffix('/') {
                Some(dir) => comp == dir && i + 1 < rel.split('/').count(),
                None => pat == rel || comp == pat,
            })
    })
}

/// All files under `root` (relative, `/`-separated), minus excluded ones.
fn scan(root: &Path, excluded: &BTreeSet<String>) -> Result<Tree, VcsError> {
    let mut tree = Tree::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| io_err("read directory", &dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_err("read directory", &dir, e))?;
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .map_err(|_| VcsError::Other(format!("{} escaped the root", path.display())))?
                .to_string_lossy()
                .replace('\\', "/");
            if is_excluded(&rel, excluded) {
                continue;
            }
            let ft = entry.file_type().map_err(|e| io_err("stat", &path, e))?;
            if ft.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).map_err(|e| io_err("read", &path, e))?;
                tree.insert(rel, bytes);
            }
        }
    }
    Ok(tree)
}

#[async_trait]
impl Vcs for FakeVcs {
    fn root(&self) -> &Path {
        &self.root
    }

    async fn status(&self) -> Result<Status, VcsError> {
        self.compute_status()
    }

    async fn head(&self) -> Result<CommitId, VcsError> {
        Ok(lock(&self.head).0.clone())
    }

    async fn current_branch(&self) -> Result<Option<String>, VcsError> {
        Ok(lock(&self.head).1.clone())
    }

    async fn checkpoint(&self) -> Result<Checkpoint, VcsError> {
        let head = lock(&self.head).0.clone();
        let mut dirty = BTreeMap::new();
        for path in self.compute_status()?.dirty_paths() {
            let digest = self.digest(&path)?;
            dirty.insert(path, digest);
        }
        Ok(Checkpoint::new(head, dirty))
    }

    async fn changed_since(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError> {
        self.write_set(checkpoint)
    }

    async fn restore(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError> {
        let changed = self.write_set(checkpoint)?;
        let (_, tree) = self.head_tree()?;
        for path in &changed {
            self.write_file(path, tree.get(path).map(Vec::as_slice))?;
        }
        Ok(changed)
    }

    async fn commit(&self, paths: &[String], message: &str) -> Result<CommitId, VcsError> {
        for p in paths {
            check_relative_path(p)?;
        }
        let (head, mut tree) = self.head_tree()?;
        let before = tree.clone();
        for p in paths {
            match self.read_file(p)? {
                Some(bytes) => {
                    tree.insert(p.clone(), bytes);
                }
                None => {
                    tree.remove(p);
                }
            }
        }
        if tree == before {
            return Err(VcsError::NothingToCommit {
                paths: paths.to_vec(),
            });
        }
        let mut store = lock(&self.store);
        let id = store.add_commit(Some(head), message, tree);
        let mut h = lock(&self.head);
        if let Some(branch) = &h.1 {
            store.branches.insert(branch.clone(), id.clone());
        }
        h.0 = id.clone();
        Ok(id)
    }

    async fn diff(&self, from: &CommitId, to: &CommitId) -> Result<String, VcsError> {
        let store = lock(&self.store);
        let (a, b) = (&store.commit(from)?.tree, &store.commit(to)?.tree);
        let paths: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        let mut out = String::new();
        for path in paths {
            let (old, new) = (a.get(path), b.get(path));
            if old == new {
                continue;
            }
            let text = |bytes: Option<&Vec<u8>>| {
                bytes.map_or_else(String::new, |b| String::from_utf8_lossy(b).into_owned())
            };
            let (old_text, new_text) = (text(old), text(new));
            let diff = similar::TextDiff::from_lines(&old_text, &new_text);
            let old_header = old.map_or_else(|| "/dev/null".to_owned(), |_| format!("a/{path}"));
            let new_header = new.map_or_else(|| "/dev/null".to_owned(), |_| format!("b/{path}"));
            out.push_str(&format!("diff --git a/{path} b/{path}\n"));
            out.push_str(
                &diff
                    .unified_diff()
                    .context_radius(3)
                    .header(&old_header, &new_header)
                    .to_string(),
            );
        }
        Ok(out)
    }

    async fn log_since(&self, base: &CommitId) -> Result<Vec<CommitInfo>, VcsError> {
        let head = lock(&self.head).0.clone();
        let store = lock(&self.store);
        let mut out = Vec::new();
        let mut cur = Some(head);
        while let Some(id) = cur {
            if &id == base {
                break;
            }
            let c = store.commit(&id)?;
            out.push(CommitInfo {
                id: id.clone(),
                message: c.message.clone(),
                tree: tree_id(&c.tree),
            });
            cur = c.parent.clone();
        }
        out.reverse();
        Ok(out)
    }

    async fn worktree_add(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        let tree = {
            let mut store = lock(&self.store);
            if store.branches.contains_key(branch) {
                return Err(VcsError::Other(format!("branch `{branch}` already exists")));
            }
            let tree = store.commit(base)?.tree.clone();
            store.branches.insert(branch.to_owned(), base.clone());
            store
                .worktrees
                .insert(path.to_path_buf(), branch.to_owned());
            tree
        };
        std::fs::create_dir_all(path).map_err(|e| io_err("create", path, e))?;
        let wt = FakeVcs {
            root: path.to_path_buf(),
            store: Arc::clone(&self.store),
            head: Arc::new(Mutex::new((base.clone(), Some(branch.to_owned())))),
        };
        for (rel, content) in &tree {
            wt.write_file(rel, Some(content))?;
        }
        Ok(Arc::new(wt))
    }

    async fn worktree_remove(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
        if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            // The directory is gone: forget the registration and the branch.
            let checked_out_here = lock(&self.head).1.as_deref() == Some(branch);
            let mut store = lock(&self.store);
            store.worktrees.remove(path);
            if checked_out_here || store.worktrees.values().any(|b| b == branch) {
                return Err(VcsError::Other(format!(
                    "cannot delete branch `{branch}`: it is checked out"
                )));
            }
            store.branches.remove(branch);
            return Ok(());
        }
        let head = {
            let store = lock(&self.store);
            if store.worktrees.get(path).map(String::as_str) != Some(branch) {
                return Err(VcsError::Other(format!(
                    "{} is not a worktree of branch `{branch}`",
                    path.display()
                )));
            }
            store
                .branches
                .get(branch)
                .cloned()
                .ok_or_else(|| VcsError::Other(format!("unknown branch `{branch}`")))?
        };
        let view = FakeVcs {
            root: path.to_path_buf(),
            store: Arc::clone(&self.store),
            head: Arc::new(Mutex::new((head, Some(branch.to_owned())))),
        };
        let status = view.compute_status()?;
        if !status.is_clean() {
            return Err(VcsError::Other(format!(
                "worktree {} has uncommitted changes: {}",
                path.display(),
                status.dirty_paths().join(", ")
            )));
        }
        std::fs::remove_dir_all(path).map_err(|e| io_err("remove", path, e))?;
        let mut store = lock(&self.store);
        store.worktrees.remove(path);
        store.branches.remove(branch);
        Ok(())
    }

    async fn worktree_move(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        if path == self.root {
            return Err(VcsError::Other(format!(
                "refusing to reset {}: it is the working tree itself",
                path.display()
            )));
        }
        let (head, old_tree, new_tree) = {
            let store = lock(&self.store);
            if store.worktrees.get(path).map(String::as_str) != Some(branch) {
                return Err(VcsError::Other(format!(
                    "{} is not a worktree of branch `{branch}`",
                    path.display()
                )));
            }
            let head = store
                .branches
                .get(branch)
                .cloned()
                .ok_or_else(|| VcsError::Other(format!("unknown branch `{branch}`")))?;
            let old_tree = store.commit(&head)?.tree.clone();
            let new_tree = store.commit(base)?.tree.clone();
            (head, old_tree, new_tree)
        };
        let view = FakeVcs {
            root: path.to_path_buf(),
            store: Arc::clone(&self.store),
            head: Arc::new(Mutex::new((head, Some(branch.to_owned())))),
        };
        let status = view.compute_status()?;
        if !status.is_clean() {
            return Err(VcsError::Other(format!(
                "refusing to reset worktree {}: it has uncommitted changes ({})",
                path.display(),
                status.dirty_paths().join(", ")
            )));
        }
        for rel in old_tree.keys().filter(|p| !new_tree.contains_key(*p)) {
            view.write_file(rel, None)?;
        }
        for (rel, content) in &new_tree {
            if old_tree.get(rel) != Some(content) {
                view.write_file(rel, Some(content))?;
            }
        }
        lock(&self.store)
            .branches
            .insert(branch.to_owned(), base.clone());
        *lock(&view.head) = (base.clone(), Some(branch.to_owned()));
        Ok(Arc::new(view))
    }

    async fn cherry_pick(&self, commit: &CommitId) -> Result<CherryPick, VcsError> {
        let (head, mut tree) = self.head_tree()?;
        let (picked, parent_tree) = {
            let store = lock(&self.store);
            let picked = store.commit(commit)?.clone();
            let parent_tree = match &picked.parent {
                Some(p) => store.commit(p)?.tree.clone(),
                None => Tree::new(),
            };
            (picked, parent_tree)
        };
        let dirty: BTreeSet<String> = self.compute_status()?.dirty_paths().into_iter().collect();
        let changed: BTreeSet<&String> = picked
            .tree
            .keys()
            .chain(parent_tree.keys())
            .filter(|p| picked.tree.get(*p) != parent_tree.get(*p))
            .collect();
        let blocked: Vec<String> = changed
            .iter()
            .filter(|p| dirty.contains(**p))
            .map(|p| (*p).clone())
            .collect();
        if !blocked.is_empty() {
            return Ok(CherryPick::Blocked { paths: blocked });
        }
        let mut conflicts = Vec::new();
        for path in &changed {
            let base = parent_tree.get(*path);
            let theirs = picked.tree.get(*path);
            let ours = tree.get(*path);
            if ours == theirs {
                continue;
            }
            if ours != base {
                conflicts.push((*path).clone());
                continue;
            }
            match theirs {
                Some(c) => tree.insert((*path).clone(), c.clone()),
                None => tree.remove(*path),
            };
        }
        if !conflicts.is_empty() {
            return Ok(CherryPick::Conflict { paths: conflicts });
        }
        for path in &changed {
            self.write_file(path, tree.get(*path).map(Vec::as_slice))?;
        }
        let mut store = lock(&self.store);
        let id = store.add_commit(Some(head), &picked.message, tree);
        let mut h = lock(&self.head);
        if let Some(branch) = &h.1 {
            store.branches.insert(branch.clone(), id.clone());
        }
        h.0 = id.clone();
        Ok(CherryPick::Applied { commit: id })
    }

    async fn push(&self, remote: &str, branch: &str) -> Result<PushOutcome, VcsError> {
        let mut store = lock(&self.store);
        let local = store
            .branches
            .get(branch)
            .cloned()
            .ok_or_else(|| VcsError::Other(format!("unknown branch `{branch}`")))?;
        let key = (remote.to_owned(), branch.to_owned());
        if let Some(theirs) = store.remotes.get(&key)
            && !store.is_ancestor(theirs, &local)
        {
            return Ok(PushOutcome::Rejected {
                reason: format!(
                    "non-fast-forward: {remote}/{branch} has commits that {branch} does not"
                ),
            });
        }
        store.remotes.insert(key, local);
        Ok(PushOutcome::Pushed)
    }

    async fn is_ancestor(&self, commit: &CommitId, of: &CommitId) -> Result<bool, VcsError> {
        Ok(lock(&self.store).is_ancestor(commit, of))
    }

    async fn exclude(&self, pattern: &str) -> Result<(), VcsError> {
        lock(&self.store).excluded.insert(pattern.to_owned());
        Ok(())
    }

    async fn upstream(&self) -> Result<Option<String>, VcsError> {
        Ok(lock(&self.store).upstream.clone())
    }

    async fn diff_from(&self, base: &str) -> Result<String, VcsError> {
        lock(&self.store)
            .base_diffs
            .get(base)
            .cloned()
            .ok_or_else(|| VcsError::Other(format!("unknown base `{base}`")))
    }
}
