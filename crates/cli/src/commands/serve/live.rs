//! Server-sent events: the page is told when the list of sessions changes
//! (with the new list) and when the session it shows changes (it then
//! fetches it again). Changes are seen by polling the session folders'
//! files (names, sizes, modification times) every [`POLL`]: a run in
//! another process is visible only through its files.

use std::collections::hash_map::DefaultHasher;
use std::convert::Infallible;
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

use super::sessions::{Digests, discover, list};

/// How often the folders are looked at: well within the 250 ms in which a
/// change must reach the page.
pub const POLL: Duration = Duration::from_millis(100);

/// A comment sent when nothing changed for this long, so that proxies and
/// the browser keep the stream open.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// A response body fed by a channel.
#[derive(Debug)]
pub struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// A fingerprint of what is in `dir` (one level, plus `transcripts/`).
fn fingerprint_dir(dir: &Path, hasher: &mut DefaultHasher) {
    for folder in [dir.to_path_buf(), dir.join("transcripts")] {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut seen: Vec<(String, u64, u128)> = entries
            .flatten()
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                let modified = meta
                    .modified()
                    .ok()?
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()?
                    .as_nanos();
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    meta.len(),
                    modified,
                ))
            })
            .collect();
        seen.sort();
        seen.hash(hasher);
    }
}

/// A fingerprint of every session folder of `repos`, and of the one keyed
/// `key` alone.
fn fingerprints(repos: &[PathBuf], key: Option<&str>) -> (u64, Option<u64>) {
    let mut all = DefaultHasher::new();
    let mut one = None;
    for found in discover(repos) {
        let mut hasher = DefaultHasher::new();
        found.key().hash(&mut hasher);
        fingerprint_dir(&found.dir, &mut hasher);
        // The ci-autofix state file lives beside the lock folders.
        if found.flow == super::sessions::Flow::CiAutofix {
            fingerprint_dir(&found.repo_dir.join(".moai").join("state"), &mut hasher);
        }
        let value = hasher.finish();
        value.hash(&mut all);
        if key == Some(found.key().as_str()) {
            one = Some(value);
        }
    }
    (all.finish(), one)
}

/// Starts the stream for a page showing `key` (or only the list).
pub fn stream(repos: Arc<Vec<PathBuf>>, digests: Arc<Digests>, key: Option<String>) -> ChannelBody {
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let mut last: Option<(u64, Option<u64>)> = None;
        let mut quiet = Duration::ZERO;
        loop {
            let (repos2, key2) = (Arc::clone(&repos), key.clone());
            let Ok(now) =
                tokio::task::spawn_blocking(move || fingerprints(&repos2, key2.as_deref())).await
            else {
                return;
            };
            let mut messages = Vec::new();
            if last.map(|l| l.0) != Some(now.0) {
                let (repos3, digests3) = (Arc::clone(&repos), Arc::clone(&digests));
                if let Ok(sessions) =
                    tokio::task::spawn_blocking(move || list(&repos3, &digests3)).await
                {
                    let data = serde_json::to_string(&sessions).unwrap_or_else(|_| "[]".into());
                    messages.push(format!("event: sessions\ndata: {data}\n\n"));
                }
            }
            if let Some(k) = &key
                && last.is_some_and(|l| l.1 != now.1)
            {
                let data = serde_json::json!({ "key": k });
                messages.push(format!("event: session\ndata: {data}\n\n"));
            }
            last = Some(now);
            if messages.is_empty() && quiet >= KEEPALIVE {
                messages.push(": keep-alive\n\n".to_owned());
            }
            quiet = if messages.is_empty() {
                quiet + POLL
            } else {
                Duration::ZERO
            };
            for m in messages {
                if tx.send(Bytes::from(m)).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(POLL).await;
        }
    });
    ChannelBody(rx)
}
