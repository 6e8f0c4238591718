//! Changes back from a job: the command's file changes on the node, a
//! binary git diff in its log ([`entry::parse_changes`]), applied to the
//! local tree the job's package was made from, so a command run on the
//! cluster leaves the tree as it would have run here.
//!
//! [`entry::parse_changes`]: super::entry::parse_changes

use std::path::Path;

use super::RayError;
use crate::process::{self, ProcessSpec};

/// Applies `diff` (from `git diff --binary`, relative to the package's
/// root) to the tree at `root` with `git apply`, which works in a git work
/// tree and outside one. An empty diff changes nothing. `Err` names the
/// job and what git said: the local tree changed under the job, or the
/// diff does not apply.
pub async fn apply(root: &Path, id: &str, diff: &[u8]) -> Result<(), RayError> {
    if diff.is_empty() {
        return Ok(());
    }
    let spec = ProcessSpec::new("git")
        .args(["apply", "--binary", "--whitespace=nowarn", "-"])
        .cwd(root)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(diff.to_vec())
        .output_limit(64 * 1024);
    let failed = |message: String| {
        RayError::Changes(format!(
            "job {id}: applying its changes to {} failed: {message}",
            root.display()
        ))
    };
    let out = process::run(&spec)
        .await
        .map_err(|e| failed(e.to_string()))?;
    if out.code() != Some(0) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(failed(stderr.trim().to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        out.stdout
    }

    /// A diff made in one copy of a tree (an edit, a new binary file, a
    /// removal, a mode change) leaves a second copy byte for byte the same.
    #[tokio::test]
    async fn a_diff_from_one_copy_makes_the_other_the_same() {
        let (node, here) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for dir in [node.path(), here.path()] {
            std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
            std::fs::write(dir.join("gone.txt"), "bye\n").unwrap();
            std::fs::write(dir.join("run.sh"), "echo hi\n").unwrap();
        }
        git(node.path(), &["init", "-q"]);
        git(node.path(), &["add", "-A"]);
        git(
            node.path(),
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "base",
            ],
        );
        std::fs::write(node.path().join("a.txt"), "one\n2\n").unwrap();
        std::fs::write(node.path().join("blob.bin"), [0u8, 255, 1, 254, 0]).unwrap();
        std::fs::remove_file(node.path().join("gone.txt")).unwrap();
        std::fs::set_permissions(
            node.path().join("run.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        git(node.path(), &["add", "-A"]);
        let diff = git(node.path(), &["diff", "--cached", "--binary", "HEAD"]);

        apply(here.path(), "j1", &diff).await.unwrap();
        assert_eq!(
            std::fs::read(here.path().join("a.txt")).unwrap(),
            b"one\n2\n"
        );
        assert_eq!(
            std::fs::read(here.path().join("blob.bin")).unwrap(),
            [0u8, 255, 1, 254, 0]
        );
        assert!(!here.path().join("gone.txt").exists());
        let mode = std::fs::metadata(here.path().join("run.sh")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o111,
            0o111
        );

        // Applied again, the diff no longer fits: the error names the job
        // and the tree.
        let err = apply(here.path(), "j1", &diff)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("job j1: applying its changes to"), "{err}");
        assert!(err.contains(&here.path().display().to_string()), "{err}");
    }
}
