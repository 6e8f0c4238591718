use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::event::CollectingSink;
use crate::fakes::FakeVcs;

/// Counts its calls and writes a marker file (an "installed dependency")
/// into each worktree; fails when told to.
#[derive(Debug, Default)]
struct Counting {
    calls: AtomicU32,
    fail: bool,
}

#[async_trait]
impl Provisioner for Counting {
    async fn provision(&self, main: &Path, worktree: &Path) -> Result<Provisioned, ProvisionError> {
        assert_ne!(main, worktree);
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(ProvisionError::Setup {
                command: "npm ci".into(),
                outcome: "exited with status 1".into(),
                output: "npm ERR! missing package-lock.json".into(),
            });
        }
        Ok(Provisioned {
            provided: vec![ProvidedPath {
                path: "node_modules".into(),
                how: ProvideHow::LinkedSnapshot,
                files: 3,
                detected: true,
            }],
            setup: vec![SetupRun {
                command: "npm ci".into(),
                duration_ms: 5,
            }],
            duration_ms: 7,
        })
    }

    fn env(&self, worktree: &Path) -> BTreeMap<String, String> {
        BTreeMap::from([("WT".to_owned(), worktree.display().to_string())])
    }
}

#[derive(Debug, Default)]
struct Journal(Mutex<Vec<String>>);

impl PoolJournal for Journal {
    fn making(&self, slot: &SlotRecord) {
        self.0
            .lock()
            .unwrap()
            .push(format!("making {}", slot.branch));
    }
    fn removed(&self, slot: &SlotRecord) {
        self.0
            .lock()
            .unwrap()
            .push(format!("removed {}", slot.branch));
    }
}

struct Setup {
    _repo: tempfile::TempDir,
    slots: tempfile::TempDir,
    vcs: Arc<dyn Vcs>,
    sink: Arc<CollectingSink>,
}

fn setup() -> Setup {
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(repo.path().join("a.txt"), "alpha\n").unwrap();
    let vcs: Arc<dyn Vcs> = Arc::new(FakeVcs::init(repo.path()).unwrap());
    Setup {
        _repo: repo,
        slots: tempfile::tempdir().unwrap(),
        vcs,
        sink: Arc::new(CollectingSink::new()),
    }
}

fn pool(s: &Setup, provisioner: Arc<Counting>) -> WorktreePool {
    WorktreePool::new(Arc::clone(&s.vcs), s.slots.path().join("pool"), "test/")
        .with_provisioner(Some(provisioner))
        .with_sink(Arc::clone(&s.sink) as Arc<dyn EventSink>)
}

fn notices(sink: &CollectingSink) -> Vec<String> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Notice { message } => Some(message),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn setup_runs_once_per_slot_not_once_per_item() {
    let s = setup();
    let provisioner = Arc::new(Counting::default());
    let pool = pool(&s, Arc::clone(&provisioner));
    let base = s.vcs.head().await.unwrap();
    // Two items at once: two slots.
    let a = pool.acquire(&base).await.unwrap();
    let b = pool.acquire(&base).await.unwrap();
    assert_ne!(a.path(), b.path());
    assert!(a.fresh && b.fresh);
    assert_eq!(a.env["WT"], a.vcs.root().display().to_string());
    // Each lands a commit on the main branch; later items start there.
    std::fs::write(a.path().join("a.txt"), "from a\n").unwrap();
    let c = a.vcs.commit(&["a.txt".into()], "a").await.unwrap();
    pool.release(a);
    pool.release(b);
    let crate::vcs::CherryPick::Applied { commit: tip } = s.vcs.cherry_pick(&c).await.unwrap()
    else {
        panic!("cherry-pick")
    };
    // Eight more items, two at a time: the two slots serve them all.
    for _ in 0..4 {
        let x = pool.acquire(&tip).await.unwrap();
        let y = pool.acquire(&tip).await.unwrap();
        assert!(!x.fresh && !y.fresh);
        for lease in [&x, &y] {
            assert_eq!(lease.vcs.head().await.unwrap(), tip);
            assert_eq!(
                std::fs::read_to_string(lease.path().join("a.txt")).unwrap(),
                "from a\n"
            );
            assert!(lease.vcs.status().await.unwrap().is_clean());
        }
        pool.release(x);
        pool.release(y);
    }
    assert_eq!(provisioner.calls.load(Ordering::SeqCst), 2);
    let stats = pool.stats();
    assert_eq!((stats.made, stats.reused), (2, 8));
    assert_eq!(stats.setup_ms, 14);
    assert_eq!(
        notices(&s.sink),
        vec![
            "each worktree gets node_modules/ (detected; hard links to the engine's snapshot of yours, 3 files), setup `npm ci`"
                .to_owned()
        ],
        "said once"
    );
    pool.close().await;
    assert!(!s.slots.path().join("pool").exists(), "every slot removed");
}

#[tokio::test]
async fn a_failed_setup_stops_every_later_acquire_without_running_again() {
    let s = setup();
    let provisioner = Arc::new(Counting {
        fail: true,
        ..Counting::default()
    });
    let journal = Arc::new(Journal::default());
    let pool = pool(&s, Arc::clone(&provisioner)).with_journal(Arc::clone(&journal) as _);
    let base = s.vcs.head().await.unwrap();
    for _ in 0..3 {
        let err = pool.acquire(&base).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "worktree setup `npm ci` exited with status 1:\nnpm ERR! missing package-lock.json"
        );
        assert!(matches!(err, PoolError::Setup(_)));
    }
    assert_eq!(provisioner.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        *journal.0.lock().unwrap(),
        vec!["making test/slot-0", "removed test/slot-0"],
        "the failed slot is recorded before it is made and removed"
    );
    assert!(!s.slots.path().join("pool").join("slot-0").exists());
}

#[tokio::test]
async fn a_slot_left_with_a_change_is_replaced_not_reset() {
    let s = setup();
    let provisioner = Arc::new(Counting::default());
    let pool = pool(&s, Arc::clone(&provisioner));
    let base = s.vcs.head().await.unwrap();
    let a = pool.acquire(&base).await.unwrap();
    let left = a.path().to_path_buf();
    std::fs::write(left.join("a.txt"), "left behind\n").unwrap();
    pool.release(a);
    let b = pool.acquire(&base).await.unwrap();
    assert!(b.fresh, "a new slot");
    assert_ne!(b.path(), left.as_path());
    assert!(!left.exists(), "the dirty slot is removed");
    assert!(
        s.sink.events().iter().any(
            |e| matches!(e, Event::Warning { message } if message.contains("could not be reused"))
        ),
        "and the run says so"
    );
    pool.discard(b).await;
    pool.close().await;
    assert_eq!(provisioner.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn without_a_provisioner_a_pool_only_makes_and_reuses_worktrees() {
    let s = setup();
    let pool = WorktreePool::new(Arc::clone(&s.vcs), s.slots.path().join("p"), "plain/");
    let base = s.vcs.head().await.unwrap();
    let a = pool.acquire(&base).await.unwrap();
    assert!(a.env.is_empty());
    pool.release(a);
    let b = pool.acquire(&base).await.unwrap();
    assert!(!b.fresh);
    pool.release(b);
    pool.close().await;
    assert!(notices(&s.sink).is_empty());
}
