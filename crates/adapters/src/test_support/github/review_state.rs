//! The review state of the scripted GitHub: threads with their comments,
//! and submitted reviews. Plain data (the routes that read and change it
//! are in `reviews`), so the scenario holds it without depending on them.

/// One comment of a review thread (`PullRequestReviewComment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadComment {
    /// `databaseId` (the REST comment id).
    pub id: u64,
    /// `author.login`.
    pub author: String,
    /// `body`.
    pub body: String,
    /// REST `in_reply_to_id`: the thread's first comment, for a reply.
    pub in_reply_to: Option<u64>,
    /// The review it was posted in (REST `pull_request_review_id`).
    pub review: Option<u64>,
}

/// A review thread (`PullRequestReviewThread`) on a line or range of the
/// new side (`diffSide: RIGHT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// `id` (the node id the mutation takes).
    pub id: String,
    /// The pull request's number.
    pub pull: u64,
    /// `path`.
    pub path: String,
    /// `line` (and `originalLine`).
    pub line: u64,
    /// `startLine` of a multi-line thread.
    pub start_line: Option<u64>,
    /// `isResolved`.
    pub resolved: bool,
    /// Its comments, oldest first.
    pub comments: Vec<ThreadComment>,
}

/// A submitted review (`pull-request-review`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// `id`.
    pub id: u64,
    /// The pull request's number.
    pub pull: u64,
    /// `body`.
    pub body: String,
    /// `state` (`COMMENTED`, `APPROVED`, `CHANGES_REQUESTED`).
    pub state: String,
    /// `commit_id`: the head it was posted on.
    pub commit_id: String,
    /// The threads its comments opened.
    pub threads: Vec<String>,
}

/// Every review and thread of the scenario.
#[derive(Debug, Default)]
pub struct Reviews {
    /// Threads, oldest first.
    pub threads: Vec<Thread>,
    /// Reviews, oldest first.
    pub reviews: Vec<Review>,
    next: u64,
}

impl Reviews {
    pub(crate) fn next(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Opens a thread on `path`:`line` (or `start..=line`) of pull `pull`
    /// with `body` by `author`; its node id.
    pub(crate) fn open(
        &mut self,
        pull: u64,
        path: &str,
        (start, line): (Option<u64>, u64),
        author: &str,
        body: &str,
        review: Option<u64>,
    ) -> String {
        let id = 2_000_000 + self.next();
        let node = format!("PRRT_kwDOAAAAAc5{id}");
        self.threads.push(Thread {
            id: node.clone(),
            pull,
            path: path.to_owned(),
            line,
            start_line: start,
            resolved: false,
            comments: vec![ThreadComment {
                id,
                author: author.to_owned(),
                body: body.to_owned(),
                in_reply_to: None,
                review,
            }],
        });
        node
    }
}

/// The viewer gh is authenticated as on the scripted GitHub (`GET /user`).
pub const VIEWER: &str = "octo";
