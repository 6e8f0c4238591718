//! The one check every path the engine is given goes through before a
//! [`Vcs`](super::Vcs) touches it.

use std::path::{Component, PathBuf};

use super::VcsError;

/// Checks that a repository-relative path stays inside the repository: not
/// absolute, no `..` component that climbs above the root, no empty path.
/// Symlinks are the caller's concern (they need the file system).
pub fn check_relative_path(path: &str) -> Result<(), VcsError> {
    let bad = |reason: &str| {
        Err(VcsError::BadPath {
            path: path.to_owned(),
            reason: reason.to_owned(),
        })
    };
    if path.is_empty() {
        return bad("empty path");
    }
    let p = PathBuf::from(path);
    if p.is_absolute() || path.starts_with('/') || path.starts_with('\\') {
        return bad("absolute paths are not allowed");
    }
    let mut depth: i64 = 0;
    for comp in p.components() {
        match comp {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return bad("absolute paths are not allowed"),
        }
        if depth < 0 {
            return bad("it leaves the repository");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_relative_path;

    #[test]
    fn relative_path_check() {
        assert!(check_relative_path("src/lib.rs").is_ok());
        assert!(check_relative_path("a/../b").is_ok());
        assert!(check_relative_path("../etc/passwd").is_err());
        assert!(check_relative_path("a/../../b").is_err());
        assert!(check_relative_path("/etc/passwd").is_err());
        assert!(check_relative_path("").is_err());
    }
}
