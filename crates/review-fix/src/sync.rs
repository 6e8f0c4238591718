//! The one way this crate takes a lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking the data even when another task panicked while
/// holding it: every value kept under a lock here (progress, the active
/// session, counters, the ledger) is written whole by each update, so a
/// panic elsewhere never leaves it half changed, and the session files must
/// still be written.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
