//! The argument guard every git invocation passes through.
//!
//! [`check_args`] is called by the one function that builds a `git` command
//! (`GitVcs::run`), so no code path can run a subcommand outside the
//! allowlist or pass an option that destroys work: no force of any kind (push,
//! worktree, checkout), no forced refspec (`+src:dst`), no `push --mirror`,
//! `--delete` or `--prune`, no `commit --amend`, no `worktree add -B`. Git
//! accepts unambiguous prefixes of long options (`--amen` is `--amend`), so
//! prefixes are refused too. Arguments after a bare `--` are paths, not
//! options, and are not inspected.
//!
//! `git fetch` updates no local ref (no `+` and no `src:dst` refspec, no
//! `--prune`): what it fetches lands in `FETCH_HEAD` only. `git remote`
//! only reads a URL (`remote get-url <name>`).
//!
//! `git merge` lands a verified range on the user's branch
//! (`Vcs::fast_forward`) in one shape only: `--ff-only --no-autostash
//! --no-overwrite-ignore --quiet <commit id>` (no merge commit, never a
//! stash of the user's work, and never an ignored file of the user's
//! overwritten).
//!
//! Two subcommands move an engine worktree to a new base
//! (`Vcs::worktree_move`) and take exactly one shape each, nothing else:
//! `git read-tree -m -u <old id> <new id>` (a two-way merge of the index
//! and the files, which refuses rather than overwrite a change or an
//! untracked file; never `--reset`) and `git update-ref refs/heads/<branch>
//! <new id> <old id>` (a compare-and-swap of one branch; never a delete).

use std::ffi::OsString;

use orchestrator_core::vcs::VcsError;

/// Subcommands the adapter uses; anything else is refused.
const ALLOWED_SUBCOMMANDS: &[&str] = &[
    "add",
    "branch",
    "cat-file",
    "check-ref-format",
    "cherry-pick",
    "commit",
    "commit-tree",
    "diff",
    "fetch",
    "hash-object",
    "ls-files",
    "ls-tree",
    "merge",
    "merge-base",
    "merge-tree",
    "push",
    "read-tree",
    "remote",
    "restore",
    "rev-list",
    "rev-parse",
    "status",
    "symbolic-ref",
    "update-ref",
    "version",
    "worktree",
];

/// Long options refused for every subcommand (prefixes included).
const FORBIDDEN_LONG_ANYWHERE: &[&str] = &["--force", "--force-with-lease", "--force-if-includes"];

/// Long options refused for `git push` (prefixes included).
const FORBIDDEN_LONG_PUSH: &[&str] = &["--mirror", "--delete", "--prune"];

/// Long options refused for `git commit` (prefixes included).
const FORBIDDEN_LONG_COMMIT: &[&str] = &["--amend"];

/// Short option letters refused for every subcommand (`-f`, also inside a
/// cluster such as `-qf`).
const FORBIDDEN_SHORT_ANYWHERE: &[char] = &['f'];

/// Short option letters refused for `git push` (`-d` deletes a remote ref).
const FORBIDDEN_SHORT_PUSH: &[char] = &['d'];

/// Short option letters refused for `git worktree` (`-B` resets a branch).
const FORBIDDEN_SHORT_WORKTREE: &[char] = &['B'];

/// Checks one invocation, `git <subcommand> <args…>`, against the rules in the
/// module documentation. The error names the subcommand and the argument.
pub(crate) fn check_args(subcommand: &str, args: &[OsString]) -> Result<(), VcsError> {
    if !ALLOWED_SUBCOMMANDS.contains(&subcommand) {
        return Err(refused(
            subcommand,
            subcommand,
            "the subcommand is not allowed",
        ));
    }
    match subcommand {
        "read-tree" => return check_two_way_merge(args),
        "merge" => return check_fast_forward(args),
        "update-ref" => return check_update_ref(args),
        "remote" => return check_remote_get_url(args),
        "fetch" => check_fetch(args)?,
        _ => {}
    }
    for arg in args {
        let text = arg.to_string_lossy();
        if text == "--" {
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or_default();
            if name.is_empty() {
                continue;
            }
            let name = format!("--{name}");
            let mut forbidden: Vec<&str> = FORBIDDEN_LONG_ANYWHERE.to_vec();
            match subcommand {
                "push" => forbidden.extend_from_slice(FORBIDDEN_LONG_PUSH),
                "commit" => forbidden.extend_from_slice(FORBIDDEN_LONG_COMMIT),
                _ => {}
            }
            // `--f` and longer prefixes of a forbidden option select it in git.
            if name.len() >= 3 && forbidden.iter().any(|f| f.starts_with(name.as_str())) {
                return Err(refused(subcommand, &text, "the option can destroy work"));
            }
            continue;
        }
        if subcommand == "push" && text.starts_with('+') {
            return Err(refused(
                subcommand,
                &text,
                "a `+` refspec forces the update",
            ));
        }
        if let Some(cluster) = text.strip_prefix('-')
            && !cluster.is_empty()
        {
            let mut forbidden: Vec<char> = FORBIDDEN_SHORT_ANYWHERE.to_vec();
            match subcommand {
                "push" => forbidden.extend_from_slice(FORBIDDEN_SHORT_PUSH),
                "worktree" => forbidden.extend_from_slice(FORBIDDEN_SHORT_WORKTREE),
                _ => {}
            }
            // Only the letters before a value are flags (`-Fmsg` is `-F msg`,
            // but we never pass values glued to short options, so refusing on
            // any forbidden letter is the safe reading).
            if cluster.chars().any(|c| forbidden.contains(&c)) {
                return Err(refused(subcommand, &text, "the option can destroy work"));
            }
        }
    }
    Ok(())
}

/// `read-tree`: only `-m -u <old id> <new id>`.
fn check_two_way_merge(args: &[OsString]) -> Result<(), VcsError> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match text.as_slice() {
        [merge, update, old, new]
            if merge == "-m" && update == "-u" && is_object_id(old) && is_object_id(new) =>
        {
            Ok(())
        }
        _ => Err(refused(
            "read-tree",
            &text.join(" "),
            "only `read-tree -m -u <old id> <new id>` of an engine worktree is allowed",
        )),
    }
}

/// `merge`: only `--ff-only --no-autostash --no-overwrite-ignore --quiet
/// <commit id>` (a fast-forward of the current branch that never stashes
/// the user's work nor overwrites an ignored file).
fn check_fast_forward(args: &[OsString]) -> Result<(), VcsError> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match text.as_slice() {
        [ff, stash, ignored, quiet, id]
            if ff == "--ff-only"
                && stash == "--no-autostash"
                && ignored == "--no-overwrite-ignore"
                && quiet == "--quiet"
                && is_object_id(id) =>
        {
            Ok(())
        }
        _ => Err(refused(
            "merge",
            &text.join(" "),
            "only `merge --ff-only --no-autostash --no-overwrite-ignore --quiet <commit id>` is allowed",
        )),
    }
}

/// `fetch`: no refspec that updates a local ref (`+src`, `src:dst`) and no
/// `--prune`; options are checked by the common rules too.
fn check_fetch(args: &[OsString]) -> Result<(), VcsError> {
    for arg in args {
        let text = arg.to_string_lossy();
        if text == "--" {
            break;
        }
        if text.starts_with('+')
            || (!text.starts_with('-') && text.contains(':') && !text.contains("://"))
        {
            return Err(refused(
                "fetch",
                &text,
                "a refspec that updates a local ref",
            ));
        }
        if text.starts_with("--p")
            && "--prune".starts_with(text.split('=').next().unwrap_or_default())
        {
            return Err(refused("fetch", &text, "the option deletes refs"));
        }
    }
    Ok(())
}

/// `remote`: only `get-url <name>`.
fn check_remote_get_url(args: &[OsString]) -> Result<(), VcsError> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match text.as_slice() {
        [get, name] if get == "get-url" && !name.starts_with('-') => Ok(()),
        _ => Err(refused(
            "remote",
            &text.join(" "),
            "only `remote get-url <name>` is allowed",
        )),
    }
}

/// `update-ref`: only `refs/heads/<branch> <new id> <old id>`.
fn check_update_ref(args: &[OsString]) -> Result<(), VcsError> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match text.as_slice() {
        [name, new, old]
            if name.starts_with("refs/heads/") && is_object_id(new) && is_object_id(old) =>
        {
            Ok(())
        }
        _ => Err(refused(
            "update-ref",
            &text.join(" "),
            "only a compare-and-swap of one branch (`update-ref refs/heads/<b> <new> <old>`) is allowed",
        )),
    }
}

/// A full object id (SHA-1 or SHA-256, lowercase hex).
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64)
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn refused(subcommand: &str, arg: &str, reason: &str) -> VcsError {
    VcsError::Other(format!(
        "refused to run `git {subcommand}` with `{arg}`: {reason} (git argument guard)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(sub: &str, args: &[&str]) -> Result<(), VcsError> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        check_args(sub, &args)
    }

    #[test]
    fn push_force_in_every_spelling_is_refused() {
        for arg in [
            "--force",
            "--forc",
            "--fo",
            "--f",
            "--force-with-lease",
            "--force-with-lease=main:abc",
            "--force-if-includes",
            "-f",
            "-qf",
            "-fq",
            "+refs/heads/main:refs/heads/main",
            "+main",
            "--mirror",
            "--delete",
            "-d",
            "--prune",
        ] {
            let result = check("push", &["--porcelain", "origin", arg]);
            assert!(result.is_err(), "`git push {arg}` must be refused");
        }
    }

    #[test]
    fn commit_amend_in_every_spelling_is_refused() {
        for arg in ["--amend", "--amen", "--am", "--force", "-f"] {
            assert!(check("commit", &["-F", "-", arg]).is_err(), "{arg}");
        }
    }

    #[test]
    fn worktree_force_and_branch_reset_are_refused() {
        assert!(check("worktree", &["add", "-B", "x", "/tmp/x"]).is_err());
        assert!(check("worktree", &["remove", "--force", "/tmp/x"]).is_err());
        assert!(check("worktree", &["remove", "-f", "/tmp/x"]).is_err());
    }

    #[test]
    fn subcommands_outside_the_allowlist_are_refused() {
        for sub in ["reset", "clean", "rebase", "gc", "filter-branch", "stash"] {
            assert!(check(sub, &[]).is_err(), "{sub}");
        }
    }

    #[test]
    fn read_tree_and_update_ref_take_one_shape_each() {
        let id = "0123456789abcdef0123456789abcdef01234567";
        assert!(check("read-tree", &["-m", "-u", id, id]).is_ok());
        for args in [
            &["--reset", "-u", id][..],
            &["-m", "-u", "main", id],
            &["-m", "-u", id],
            &["-u", id, id],
            &["-m", "-u", id, id, "--", "."],
            &["--prefix=x/", id],
            &[id],
        ] {
            assert!(check("read-tree", args).is_err(), "read-tree {args:?}");
        }
        for args in [&["--detach", "--quiet", id][..], &["main"], &["--", "src"]] {
            assert!(check("checkout", args).is_err(), "checkout {args:?}");
        }
        assert!(check("update-ref", &["refs/heads/wt", id, id]).is_ok());
        for args in [
            &["-d", "refs/heads/main"][..],
            &["--stdin"],
            &["refs/heads/wt", id],
            &["HEAD", id, id],
            &["refs/tags/v1", id, id],
        ] {
            assert!(check("update-ref", args).is_err(), "update-ref {args:?}");
        }
        assert!(
            check(
                "merge",
                &[
                    "--ff-only",
                    "--no-autostash",
                    "--no-overwrite-ignore",
                    "--quiet",
                    id
                ]
            )
            .is_ok()
        );
        for args in [
            &[id][..],
            &["--ff-only", "--no-autostash", "--quiet", id],
            &[
                "--ff-only",
                "--no-autostash",
                "--overwrite-ignore",
                "--quiet",
                id,
            ],
            &["--ff-only", "--quiet", id],
            &["--ff-only", "--no-autostash", "--quiet", "main"],
            &["--ff-only", "--autostash", "--quiet", id],
            &["--no-ff", "--no-autostash", "--quiet", id],
            &["--ff-only", "--no-autostash", "--quiet", id, "--", "."],
            &["--abort"],
        ] {
            assert!(check("merge", args).is_err(), "merge {args:?}");
        }
    }

    #[test]
    fn the_invocations_the_adapter_uses_pass() {
        let ok: &[(&str, &[&str])] = &[
            (
                "push",
                &["--porcelain", "origin", "refs/heads/a:refs/heads/a"],
            ),
            (
                "commit",
                &["--only", "--cleanup=verbatim", "-F", "-", "--", "a"],
            ),
            ("add", &["-A", "--", "a b"]),
            ("worktree", &["add", "-b", "fix-1", "--", "/tmp/wt", "abc"]),
            ("branch", &["-D", "--", "fix-1"]),
            (
                "status",
                &[
                    "--porcelain=v1",
                    "-z",
                    "--untracked-files=all",
                    "--no-renames",
                ],
            ),
            ("cherry-pick", &["--abort"]),
            ("version", &[]),
        ];
        for (sub, args) in ok {
            assert!(check(sub, args).is_ok(), "git {sub} {args:?}");
        }
    }

    #[test]
    fn fetch_updates_no_ref_and_remote_only_reads_a_url() {
        assert!(
            check(
                "fetch",
                &["--no-tags", "--quiet", "origin", "refs/pull/7/head"]
            )
            .is_ok()
        );
        assert!(
            check(
                "fetch",
                &["--no-tags", "http://h/o/r.git", "refs/pull/7/head"]
            )
            .is_ok()
        );
        for args in [
            &["origin", "+refs/heads/a:refs/heads/a"][..],
            &["origin", "refs/heads/a:refs/heads/a"],
            &["--prune", "origin"],
            &["--pru", "origin"],
            &["-f", "origin", "refs/pull/7/head"],
            &["--force", "origin"],
        ] {
            assert!(check("fetch", args).is_err(), "fetch {args:?}");
        }
        assert!(check("remote", &["get-url", "origin"]).is_ok());
        for args in [
            &["remove", "origin"][..],
            &["set-url", "origin", "x"],
            &["get-url", "--push"],
        ] {
            assert!(check("remote", args).is_err(), "remote {args:?}");
        }
    }

    #[test]
    fn paths_after_double_dash_are_data() {
        assert!(check("add", &["-A", "--", "--force", "-f", "+x"]).is_ok());
        assert!(check("commit", &["-F", "-", "--", "--amend"]).is_ok());
    }

    #[test]
    fn the_error_names_the_argument() {
        let err = check("push", &["--force"]).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "refused to run `git push` with `--force`: the option can destroy work (git argument guard)"
            )
        );
    }
}
