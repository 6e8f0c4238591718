//! Confinement of the tool agent's paths to its working directory.
//!
//! Every path a model names goes through [`Confinement`] before a tool
//! touches it:
//!
//! - a relative path is taken from the working directory; an absolute one is
//!   accepted only when it lies inside it (models often echo the absolute
//!   paths they were shown);
//! - `..` is resolved lexically first, then the deepest part of the path that
//!   exists is canonicalized, so a symlink anywhere on the way that leads out
//!   of the tree is caught;
//! - `.git/` (or a worktree's `.git` file), the engine's own folders
//!   (`.review/`, `.workflow/`, `.moai/`) and the configured protected paths
//!   are refused at any depth;
//! - a write never goes through a symlink, even one that stays inside.
//!
//! A refusal is a [`Refusal`] that the loop hands back to the model as a
//! tool error (and counts); nothing is touched.

use std::path::{Component, Path, PathBuf};

/// Folders no tool may read or write, at any depth: VCS metadata and the
/// engine's own session folders.
pub const FORBIDDEN_DIRS: &[&str] = &[".git", ".review", ".workflow", ".moai"];

/// Why a path was refused; the message is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused {path:?}: {reason}")]
pub struct Refusal {
    /// The path as the model spelled it.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// The working directory and the paths inside it that are off limits.
#[derive(Debug, Clone)]
pub struct Confinement {
    root: PathBuf,
    protected: Vec<PathBuf>,
}

/// A path inside the working directory, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The absolute path (canonical up to its deepest existing ancestor).
    pub path: PathBuf,
    /// The path relative to the working directory, `/`-separated.
    pub relative: String,
    /// Whether a symlink was followed on the way (inside the tree).
    pub via_symlink: bool,
}

impl Confinement {
    /// Confinement to `workdir` (canonicalized), with `protected` paths
    /// (relative; a folder covers everything under it) refused too.
    pub fn new(workdir: &Path, protected: &[String]) -> std::io::Result<Self> {
        let root = workdir.canonicalize()?;
        let protected = protected
            .iter()
            .filter_map(|p| lexical(Path::new(p.trim())).ok())
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        Ok(Self { root, protected })
    }

    /// The canonical working directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path to read: it must exist and stay inside.
    pub fn readable(&self, spelled: &str) -> Result<Resolved, Refusal> {
        let resolved = self.resolve(spelled)?;
        if !resolved.path.exists() {
            return Err(refusal(spelled, "no such file or directory"));
        }
        Ok(resolved)
    }

    /// Resolves a path to write: inside, not protected, and not a symlink
    /// (the file itself may not exist yet).
    pub fn writable(&self, spelled: &str) -> Result<Resolved, Refusal> {
        let resolved = self.resolve(spelled)?;
        let rel = Path::new(&resolved.relative);
        if resolved.relative.is_empty() {
            return Err(refusal(spelled, "it is the working directory itself"));
        }
        if let Some(p) = self.protected.iter().find(|p| rel.starts_with(p)) {
            return Err(refusal(
                spelled,
                &format!("{} is a protected path", p.display()),
            ));
        }
        if resolved.via_symlink {
            return Err(refusal(
                spelled,
                &format!(
                    "it goes through a symlink; write {} itself",
                    resolved.relative
                ),
            ));
        }
        if resolved.path.is_dir() {
            return Err(refusal(spelled, "it is a directory"));
        }
        Ok(resolved)
    }

    fn resolve(&self, spelled: &str) -> Result<Resolved, Refusal> {
        let trimmed = spelled.trim();
        if trimmed.is_empty() {
            return Err(refusal(spelled, "the path is empty"));
        }
        let given = Path::new(trimmed);
        let relative = if given.is_absolute() {
            let clean = lexical_absolute(given);
            match clean.strip_prefix(&self.root) {
                Ok(rel) => rel.to_path_buf(),
                Err(_) => {
                    return Err(refusal(spelled, "it is outside the working directory"));
                }
            }
        } else {
            lexical(given).map_err(|reason| refusal(spelled, &reason))?
        };
        if let Some(dir) = relative.components().find_map(|c| match c {
            Component::Normal(part) => FORBIDDEN_DIRS.iter().find(|d| part == **d),
            _ => None,
        }) {
            return Err(refusal(
                spelled,
                &format!("{dir}/ belongs to git or the engine, not to the task"),
            ));
        }
        // The deepest existing ancestor, canonicalized, must stay inside:
        // this follows every symlink on the way.
        let full = self.root.join(&relative);
        let mut existing = full.as_path();
        let canonical = loop {
            match existing.canonicalize() {
                Ok(c) => break c,
                Err(_) => match existing.parent() {
                    Some(parent) => existing = parent,
                    None => return Err(refusal(spelled, "it cannot be resolved")),
                },
            }
        };
        if !canonical.starts_with(&self.root) {
            return Err(refusal(
                spelled,
                &format!(
                    "it resolves to {}, outside the working directory (through a symlink)",
                    canonical.display()
                ),
            ));
        }
        let rest = full.strip_prefix(existing).unwrap_or(Path::new(""));
        // (Joining an empty rest would add a trailing `/`.)
        let path = if rest.as_os_str().is_empty() {
            canonical
        } else {
            canonical.join(rest)
        };
        let rel_canonical = path.strip_prefix(&self.root).unwrap_or(Path::new(""));
        if rel_canonical.components().any(|c| match c {
            Component::Normal(part) => FORBIDDEN_DIRS.iter().any(|d| part == *d),
            _ => false,
        }) {
            return Err(refusal(
                spelled,
                "it leads into .git/ or an engine folder (through a symlink)",
            ));
        }
        Ok(Resolved {
            relative: slash_path(rel_canonical),
            via_symlink: path != full,
            path,
        })
    }
}

/// `path` relative, with `.` dropped and `..` applied; an absolute path or
/// one that climbs above its start is an error.
fn lexical(path: &Path) -> Result<PathBuf, String> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err("it climbs out of the working directory with `..`".into());
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err("it is outside the working directory".into());
            }
        }
    }
    Ok(out)
}

/// An absolute path with `.` dropped and `..` applied (never above `/`).
fn lexical_absolute(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// A relative path with `/` separators.
pub(crate) fn slash_path(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn refusal(path: &str, reason: &str) -> Refusal {
    Refusal {
        path: path.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn check(confinement: &Confinement, spelled: &str, expected: Result<&str, &str>) {
        let got = confinement
            .writable(spelled)
            .map(|r| r.relative)
            .map_err(|r| r.reason);
        match expected {
            Ok(rel) => assert_eq!(got, Ok(rel.to_owned()), "{spelled}"),
            Err(fragment) => {
                let reason = got.unwrap_err();
                assert!(reason.contains(fragment), "{spelled}: {reason}");
            }
        }
    }

    #[test]
    fn paths_stay_inside_and_off_engine_folders() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("repo");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "x").unwrap();
        std::fs::write(outer.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outer.path(), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("src/lib.rs"), root.join("alias.rs")).unwrap();
        let c = Confinement::new(&root, &["vendor".to_owned()]).unwrap();
        let abs = c.root().join("src/lib.rs").display().to_string();
        check(&c, "src/lib.rs", Ok("src/lib.rs"));
        check(&c, "./src/../src/new.rs", Ok("src/new.rs"));
        check(&c, &abs, Ok("src/lib.rs"));
        check(&c, "new/dir/file.txt", Ok("new/dir/file.txt"));
        check(&c, "", Err("empty"));
        check(&c, "../secret", Err("climbs out"));
        check(&c, "../../etc/passwd", Err("climbs out"));
        check(&c, "/etc/passwd", Err("outside the working directory"));
        check(&c, "out/secret", Err("through a symlink"));
        check(&c, "out/new", Err("through a symlink"));
        check(&c, "alias.rs", Err("symlink"));
        check(&c, ".git/config", Err(".git/ belongs to git"));
        check(&c, "src/.workflow/x", Err(".workflow/"));
        check(&c, "vendor/lib.rs", Err("protected"));
        check(&c, "src", Err("directory"));
        assert!(c.readable("src/missing.rs").is_err());
        assert_eq!(c.readable("alias.rs").unwrap().relative, "src/lib.rs");
    }
}
