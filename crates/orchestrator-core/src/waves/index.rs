//! The id → row index behind [`compute_waves`](super::compute_waves).
//!
//! At a million tasks the index is the hot spot: every dependency is one
//! random lookup into a table far larger than the caches, and on the
//! measurement machine each such access costs a few hundred nanoseconds. So
//! the table is kept small and flat: ids of up to [`INLINE`] bytes (the
//! normal case, `T123`) live inline in 16-byte slots, open addressing with
//! linear probing at a load of at most 3/4, so a lookup usually touches one
//! cache line and never follows a pointer. Longer ids go to an ordinary
//! `HashMap`.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

/// Longest id stored inline.
const INLINE: usize = 11;
const EMPTY: u32 = u32::MAX;

/// A table slot: `key[0]` is the id's length, `key[1..=len]` its bytes, the
/// rest zero; `row == EMPTY` marks a free slot.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Slot {
    key: [u8; INLINE + 1],
    row: u32,
}

const FREE: Slot = Slot {
    key: [0; INLINE + 1],
    row: EMPTY,
};

/// Maps task ids to their row (0-based input position).
#[derive(Clone)]
pub(crate) struct IdIndex<'a> {
    slots: Vec<Slot>,
    long: HashMap<&'a str, u32, BuildHasherDefault<IdHasher>>,
}

impl fmt::Debug for IdIndex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdIndex")
            .field("slots", &self.slots.len())
            .field("long", &self.long.len())
            .finish()
    }
}

/// The inline key of a short id.
fn inline_key(id: &str) -> Option<[u8; INLINE + 1]> {
    let b = id.as_bytes();
    (b.len() <= INLINE).then(|| {
        let mut key = [0u8; INLINE + 1];
        key[0] = b.len() as u8;
        key[1..=b.len()].copy_from_slice(b);
        key
    })
}

fn hash_key(key: &[u8; INLINE + 1]) -> u64 {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&key[..8]);
    hi[..INLINE + 1 - 8].copy_from_slice(&key[8..]);
    let mut h = IdHasher::default();
    h.add(u64::from_le_bytes(lo));
    h.add(u64::from_le_bytes(hi));
    h.finish()
}

impl<'a> IdIndex<'a> {
    /// Indexes ids by position. A repeated id is an error carrying
    /// `(row, first_row)`, both 0-based.
    pub(crate) fn build(
        ids: impl ExactSizeIterator<Item = &'a str>,
    ) -> Result<Self, (usize, usize)> {
        let n = ids.len();
        let capacity = (n + n / 3 + 1).max(8);
        let mut index = Self {
            slots: vec![FREE; capacity],
            long: HashMap::default(),
        };
        for (row, id) in ids.enumerate() {
            let row = row as u32;
            match inline_key(id) {
                Some(key) => {
                    let mut at = index.home(&key);
                    loop {
                        let slot = &mut index.slots[at];
                        if slot.row == EMPTY {
                            *slot = Slot { key, row };
                            break;
                        }
                        if slot.key == key {
                            return Err((row as usize, slot.row as usize));
                        }
                        at = if at + 1 == capacity { 0 } else { at + 1 };
                    }
                }
                None => {
                    if let Some(&first) = index.long.get(id) {
                        return Err((row as usize, first as usize));
                    }
                    index.long.insert(id, row);
                }
            }
        }
        Ok(index)
    }

    /// The row of `id`.
    pub(crate) fn get(&self, id: &str) -> Option<u32> {
        let Some(key) = inline_key(id) else {
            return self.long.get(id).copied();
        };
        let capacity = self.slots.len();
        let mut at = self.home(&key);
        loop {
            let slot = &self.slots[at];
            if slot.row == EMPTY {
                return None;
            }
            if slot.key == key {
                return Some(slot.row);
            }
            at = if at + 1 == capacity { 0 } else { at + 1 };
        }
    }

    /// Looks up every id of `ids` into `found` (cleared first). All keys are
    /// hashed before any slot is read, so that the slot reads, which miss
    /// the cache at scale, do not depend on each other and overlap.
    pub(crate) fn get_batch(&self, ids: &[&str], found: &mut Vec<Option<u32>>) {
        found.clear();
        let mut homes: Vec<(Option<[u8; INLINE + 1]>, usize)> = Vec::with_capacity(ids.len());
        homes.extend(ids.iter().map(|id| {
            let key = inline_key(id);
            let home = key.as_ref().map_or(0, |k| self.home(k));
            (key, home)
        }));
        let capacity = self.slots.len();
        found.extend(ids.iter().zip(&homes).map(|(id, (key, home))| {
            let Some(key) = key else {
                return self.long.get(id).copied();
            };
            let mut at = *home;
            loop {
                let slot = &self.slots[at];
                if slot.row == EMPTY {
                    return None;
                }
                if slot.key == *key {
                    return Some(slot.row);
                }
                at = if at + 1 == capacity { 0 } else { at + 1 };
            }
        }));
    }

    /// The first slot to probe: the hash mapped onto the table by a
    /// multiply-shift (no power-of-two size needed).
    fn home(&self, key: &[u8; INLINE + 1]) -> usize {
        ((u128::from(hash_key(key)) * self.slots.len() as u128) >> 64) as usize
    }
}

/// A small multiplicative hasher for short ids. The ids come from the user's
/// own plan, so flooding resistance buys nothing.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // Final avalanche so that every output bit depends on every input bit
        // (the table uses the high bits, hashbrown the low and the top 7).
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_short_and_long_ids_and_rejects_duplicates() {
        let long = "a-rather-long-task-identifier";
        let ids = ["T1", "", "T10", long, "T2"];
        let index = IdIndex::build(ids.iter().copied()).unwrap();
        for (row, id) in ids.iter().enumerate() {
            assert_eq!(index.get(id), Some(row as u32), "{id:?}");
        }
        assert_eq!(index.get("T3"), None);
        assert_eq!(index.get("a-rather-long-task-identifieR"), None);
        assert_eq!(
            IdIndex::build(["x", "y", "x"].into_iter()).unwrap_err(),
            (2, 0)
        );
        assert_eq!(
            IdIndex::build([long, long].into_iter()).unwrap_err(),
            (1, 0)
        );
    }

    #[test]
    fn a_full_table_region_wraps_around() {
        let ids: Vec<String> = (0..5000).map(|i| format!("T{i}")).collect();
        let index = IdIndex::build(ids.iter().map(String::as_str)).unwrap();
        assert!(
            ids.iter()
                .enumerate()
                .all(|(r, id)| index.get(id) == Some(r as u32))
        );
        assert_eq!(index.get("T5000"), None);
    }
}
