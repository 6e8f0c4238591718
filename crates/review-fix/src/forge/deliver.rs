//! Delivering a run's verified fixes into the request it read.
//!
//! - [`Delivery::Push`]: the fix commits are pushed to the request's own
//!   branch as one fast-forward (`Vcs::push_commit`: there is no force),
//!   then each fixed thread gets a reply naming its commit ("Fixed in
//!   abc1234.") and, when asked, is resolved.
//! - [`Delivery::Suggestions`]: nothing is pushed; each fix becomes
//!   committable suggestions on the lines it changes, all in one review.
//!   A forge takes a suggestion only on lines the request's diff adds, so a
//!   fix that touches any other line (or a line an earlier fix of the run
//!   changed) goes into the review's summary as a patch.
//!
//! Either way a thread whose fix failed or was declined gets one reply
//! saying why.

use std::sync::Arc;

use orchestrator_core::forge::{ChangeRequest, Forge, NewComment, NewReview};
use orchestrator_core::text::counted;
use orchestrator_core::vcs::{CommitId, PushOutcome, Vcs};

use super::hunks::{self, FileHunks, Hunk};
use super::threads::{FIXED_PREFIX, NOT_FIXED_PREFIX, ThreadFinding};
use crate::ReviewFixError;
use crate::report::FindingReport;

/// How verified fixes reach the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// Push the commits to the request's branch (never forced).
    #[default]
    Push,
    /// Post one review with committable suggestions; push nothing.
    Suggestions,
}

/// What delivery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivered {
    /// The commit the request's branch was fast-forwarded to, and the branch.
    pub pushed: Option<(String, String)>,
    /// Replies posted: (thread id, body).
    pub replies: Vec<(String, String)>,
    /// Threads resolved.
    pub resolved: Vec<String>,
    /// Suggestions posted in the review.
    pub suggestions: usize,
    /// Fixes that went into the review's summary as a patch (finding ids).
    pub patches: Vec<String>,
}

/// What delivery works from.
#[derive(Debug)]
pub(crate) struct Delivering<'a> {
    pub forge: &'a dyn Forge,
    pub request: &'a ChangeRequest,
    /// The tree the fixes were committed in (at the request's head before).
    pub tree: &'a Arc<dyn Vcs>,
    /// The request's head the fixes start from.
    pub head: &'a CommitId,
    /// The request's diff.
    pub diff: &'a FileHunks,
    /// Every finding's end (all passes; a later pass's word wins).
    pub findings: &'a [FindingReport],
    /// The threads the findings came from.
    pub threads: &'a [ThreadFinding],
    /// The fix commits, oldest first, each on the one before.
    pub commits: &'a [CommitId],
    /// Where the request's branch is pushed (a remote's name or URL).
    pub push_remote: &'a str,
}

fn forge_error(action: String, e: orchestrator_core::forge::ForgeError) -> ReviewFixError {
    ReviewFixError::Forge {
        action,
        message: e.to_string(),
    }
}

impl Delivering<'_> {
    fn report_of(&self, t: &ThreadFinding) -> Option<&FindingReport> {
        self.findings.iter().rev().find(|f| f.id == t.finding_id)
    }

    async fn reply(
        &self,
        out: &mut Delivered,
        thread: &str,
        body: String,
    ) -> Result<(), ReviewFixError> {
        self.forge
            .reply(self.request.number, thread, &body)
            .await
            .map_err(|e| forge_error(format!("replying in thread {thread}"), e))?;
        out.replies.push((thread.to_owned(), body));
        Ok(())
    }

    /// One reply per thread whose fix failed or was declined.
    async fn refusals(&self, out: &mut Delivered) -> Result<(), ReviewFixError> {
        for t in self.threads {
            let Some(f) = self.report_of(t) else { continue };
            let why = match f.result.as_str() {
                "failed" | "rejected" => f.error.clone().unwrap_or_else(|| "the fix failed".into()),
                "not_fixable" => f
                    .error
                    .clone()
                    .unwrap_or_else(|| "the agent declined it".into()),
                _ => continue,
            };
            self.reply(out, &t.thread, refusal(&why)).await?;
        }
        Ok(())
    }

    /// [`Delivery::Push`]; see the module docs.
    pub(crate) async fn push(&self, resolve: bool) -> Result<Delivered, ReviewFixError> {
        let mut out = Delivered::default();
        if let Some(tip) = self.commits.last() {
            let branch = &self.request.head_branch;
            match self
                .tree
                .push_commit(self.push_remote, tip, branch)
                .await
                .map_err(|e| ReviewFixError::vcs(format!("pushing to {branch}"), e))?
            {
                PushOutcome::Pushed => out.pushed = Some((tip.as_str().to_owned(), branch.clone())),
                PushOutcome::Rejected { reason } => {
                    return Err(ReviewFixError::Forge {
                        action: format!("pushing the fixes to `{branch}` (a fast-forward)"),
                        message: format!(
                            "the remote refused: {reason}; the commits stay on the run's branch, \
                             nothing was replied"
                        ),
                    });
                }
            }
        }
        for t in self.threads {
            let Some(commit) = self
                .report_of(t)
                .filter(|f| f.result == "fixed")
                .and_then(|f| f.commit.clone())
            else {
                continue;
            };
            let short = CommitId(commit).short().to_owned();
            self.reply(&mut out, &t.thread, format!("{FIXED_PREFIX}{short}."))
                .await?;
            if resolve {
                self.forge
                    .resolve(self.request.number, &t.thread)
                    .await
                    .map_err(|e| forge_error(format!("resolving thread {}", t.thread), e))?;
                out.resolved.push(t.thread.clone());
            }
        }
        self.refusals(&mut out).await?;
        Ok(out)
    }

    /// [`Delivery::Suggestions`]; see the module docs.
    pub(crate) async fn suggest(&self) -> Result<Delivered, ReviewFixError> {
        let mut out = Delivered::default();
        let mut review = NewReview::default();
        let mut patches = String::new();
        let mut parent = self.head.clone();
        for commit in self.commits {
            let diff = |from: &CommitId, to: &CommitId| {
                let (from, to) = (from.clone(), to.clone());
                async move {
                    if from == to {
                        return Ok(String::new());
                    }
                    self.tree.diff(&from, &to).await.map_err(|e| {
                        ReviewFixError::vcs(format!("diffing {}..{}", from.short(), to.short()), e)
                    })
                }
            };
            let fix_text = diff(&parent, commit).await?;
            let earlier = hunks::parse(&diff(self.head, &parent).await?);
            let fix = hunks::parse(&fix_text);
            let id = self.finding_of(commit);
            match place(&fix, &earlier, self.diff) {
                Some(comments) => {
                    out.suggestions += comments.len();
                    review.comments.extend(comments);
                }
                None => {
                    patches.push_str(&format!("{id}:\n\n```diff\n{fix_text}```\n\n"));
                    out.patches.push(id);
                }
            }
            parent = commit.clone();
        }
        review.body = summary(out.suggestions, &patches);
        if !review.comments.is_empty() || !patches.is_empty() {
            self.forge
                .post_review(self.request.number, &review)
                .await
                .map_err(|e| forge_error("posting the review".into(), e))?;
        }
        self.refusals(&mut out).await?;
        Ok(out)
    }

    fn finding_of(&self, commit: &CommitId) -> String {
        self.findings
            .iter()
            .find(|f| f.commit.as_deref() == Some(commit.as_str()))
            .map_or_else(|| commit.short().to_owned(), |f| f.id.clone())
    }
}

/// The reply to a thread whose fix did not land: the reason's first line,
/// then what follows it (the tests' output) as a block of its last lines.
fn refusal(why: &str) -> String {
    let mut lines = why.lines();
    let first = lines.next().unwrap_or_default().trim();
    let first = first
        .strip_suffix("Test output (tail):")
        .map_or(first, str::trim_end);
    let rest: Vec<&str> = lines.collect();
    let tail = &rest[rest.len().saturating_sub(20)..];
    let mut body = format!("{NOT_FIXED_PREFIX}{first}");
    if tail.iter().any(|l| !l.trim().is_empty()) {
        body.push_str("\n\n```\n");
        for l in tail {
            body.push_str(l.trim_end_matches('`'));
            body.push('\n');
        }
        body.push_str("```");
    }
    body
}

fn summary(suggestions: usize, patches: &str) -> String {
    let mut body = format!(
        "orchestrator review-fix: {} as committable suggestions on this request's lines \
         (each passed the tests on the request's head).",
        counted(suggestions as u64, "verified fix", "verified fixes")
    );
    if !patches.is_empty() {
        body.push_str(
            "\n\nThese fixes touch lines outside the request's diff, where no suggestion can \
             go; apply them with `git apply`:\n\n",
        );
        body.push_str(patches);
    }
    body
}

/// The suggestions of one fix (its hunks against the tree before it),
/// placed on the request's head; `None` when any hunk cannot be.
fn place(fix: &FileHunks, earlier: &FileHunks, request: &FileHunks) -> Option<Vec<NewComment>> {
    let mut comments = Vec::new();
    for (path, file_hunks) in fix {
        let added = hunks::added_lines(request, path);
        let moved = earlier.get(path).map(Vec::as_slice).unwrap_or_default();
        for h in file_hunks {
            let (first, len, text) = core(h)?;
            let lines: Vec<u64> = (first..first + len)
                .map(|l| hunks::to_old_side(moved, l))
                .collect::<Option<_>>()?;
            if lines.windows(2).any(|w| w[1] != w[0] + 1)
                || !lines.iter().all(|l| added.contains(l))
            {
                return None;
            }
            let last = *lines.last()?;
            comments.push(NewComment {
                path: path.clone(),
                line: last,
                body: format!("```suggestion:-{}+0\n{text}```", len - 1),
            });
        }
    }
    (!comments.is_empty()).then_some(comments)
}

/// A hunk without its surrounding context: the first old-side line it
/// replaces, how many, and their new text. A pure insertion keeps the
/// line before it (or after it, at the top of a file) to sit on.
fn core(h: &Hunk) -> Option<(u64, u64, String)> {
    let changed = |l: &String| l.starts_with(['+', '-']);
    let start = h.lines.iter().position(changed)?;
    let end = h.lines.iter().rposition(changed)? + 1;
    let mut from = start;
    let mut to = end;
    if !h.lines[start..end].iter().any(|l| l.starts_with('-')) {
        if start > 0 {
            from -= 1;
        } else if end < h.lines.len() {
            to += 1;
        } else {
            return None;
        }
    }
    let skipped_old = h.lines[..from]
        .iter()
        .filter(|l| !l.starts_with('+'))
        .count();
    let first = h.old_start + u64::try_from(skipped_old).ok()?;
    let body = &h.lines[from..to];
    let len = u64::try_from(body.iter().filter(|l| !l.starts_with('+')).count()).ok()?;
    let text = body
        .iter()
        .filter_map(|l| l.strip_prefix(' ').or_else(|| l.strip_prefix('+')))
        .map(|l| format!("{l}\n"))
        .collect();
    Some((first, len, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(file: &str, body: &str) -> FileHunks {
        hunks::parse(&format!(
            "diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n{body}"
        ))
    }

    #[test]
    fn a_fix_on_added_lines_becomes_one_suggestion_per_hunk() {
        // The request adds lines 2-4 of notes.txt.
        let request = diff(
            "notes.txt",
            "@@ -1,1 +1,4 @@\n one\n+betta\n+TODO: gamma\n+delta\n",
        );
        let fix = diff(
            "notes.txt",
            "@@ -1,4 +1,4 @@\n one\n-betta\n+beta\n TODO: gamma\n delta\n",
        );
        assert_eq!(
            place(&fix, &FileHunks::new(), &request),
            Some(vec![NewComment {
                path: "notes.txt".into(),
                line: 2,
                body: "```suggestion:-0+0\nbeta\n```".into()
            }])
        );
        // A later fix, after the one above, is placed on the request's head.
        let earlier = fix.clone();
        let second = diff(
            "notes.txt",
            "@@ -2,2 +2,2 @@\n beta\n-TODO: gamma\n+gamma\n",
        );
        assert_eq!(place(&second, &earlier, &request).unwrap()[0].line, 3);
        // A pure insertion sits on the line before it.
        let insert = diff("notes.txt", "@@ -3,1 +3,2 @@\n TODO: gamma\n+new\n");
        let c = place(&insert, &FileHunks::new(), &request).unwrap();
        assert_eq!(
            (c[0].line, c[0].body.as_str()),
            (3, "```suggestion:-0+0\nTODO: gamma\nnew\n```")
        );
    }

    #[test]
    fn a_refusal_gives_the_reason_then_the_output_tail_in_a_block() {
        assert_eq!(
            refusal("the tests failed. Test output (tail):\nok 1\nnot ok 2 ```\n"),
            format!("{NOT_FIXED_PREFIX}the tests failed.\n\n```\nok 1\nnot ok 2 \n```")
        );
        assert_eq!(refusal("declined"), format!("{NOT_FIXED_PREFIX}declined"));
    }

    #[test]
    fn a_fix_outside_the_added_lines_or_on_an_earlier_fix_is_not_placed() {
        let request = diff("notes.txt", "@@ -1,1 +1,2 @@\n one\n+two\n");
        let outside = diff("notes.txt", "@@ -1,2 +1,2 @@\n-one\n+uno\n two\n");
        assert_eq!(place(&outside, &FileHunks::new(), &request), None);
        let other_file = diff("other.txt", "@@ -1,1 +1,1 @@\n-x\n+y\n");
        assert_eq!(place(&other_file, &FileHunks::new(), &request), None);
        let earlier = diff("notes.txt", "@@ -2,1 +2,1 @@\n-two\n+zwei\n");
        let again = diff("notes.txt", "@@ -2,1 +2,1 @@\n-zwei\n+deux\n");
        assert_eq!(place(&again, &earlier, &request), None);
    }
}
