//! Packing one group's clusters into batches.
//!
//! See the rules in the parent module's docs. The packing works on *units*:
//! a cluster of at most `batch_size` findings is one unit; a larger cluster is
//! cut into consecutive chunks of `batch_size` (the last one shorter), each a
//! unit. Units are never split.
//!
//! Units are placed largest first (then those with more critical/high
//! findings, then in creation order) into `ceil(total / batch_size)` batches,
//! opening another batch only when a unit fits in none:
//! - a unit holding critical/high findings goes to the fitting batch with the
//!   fewest critical/high findings so far, then the most free room, then the
//!   lowest index — this spreads the hard findings across batches;
//! - any other unit goes to the fitting batch with the least free room (best
//!   fit), then the fewest critical/high findings, then the lowest index.
//!
//! Inside a batch, units appear in creation order; batches are ordered by
//! their first unit. Each step looks only at batches grouped by free room
//! (at most `batch_size` buckets), so a group of any size is packed in
//! `O(units · min(batch_size, batches) · log batches)`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// One unit: consecutive members of one cluster.
struct Unit<'a> {
    members: &'a [usize],
    high: usize,
}

#[derive(Default)]
struct Bin {
    /// Unit ordinals (creation order).
    units: Vec<usize>,
    free: usize,
    high: usize,
}

/// Packs `clusters` (lists of finding indices, in creation order) into
/// batches of at most `batch_size` findings. `is_high` tells whether a finding
/// is critical or high. Returns the batches as lists of finding indices.
pub(crate) fn pack_group(
    clusters: &[Vec<usize>],
    is_high: impl Fn(usize) -> bool,
    batch_size: usize,
) -> Vec<Vec<usize>> {
    let batch_size = batch_size.max(1);
    let total: usize = clusters.iter().map(Vec::len).sum();
    if total == 0 {
        return Vec::new();
    }
    if total <= batch_size {
        return vec![clusters.iter().flatten().copied().collect()];
    }

    let units: Vec<Unit<'_>> = clusters
        .iter()
        .flat_map(|c| c.chunks(batch_size))
        .map(|members| Unit {
            members,
            high: members.iter().filter(|&&i| is_high(i)).count(),
        })
        .collect();
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&u| (Reverse(units[u].members.len()), Reverse(units[u].high), u));

    let mut bins = Bins::new(batch_size, total.div_ceil(batch_size));
    for u in order {
        let unit = &units[u];
        let b = bins.choose(unit.members.len(), unit.high);
        bins.put(b, u, unit);
    }

    let mut bins: Vec<Bin> = bins
        .bins
        .into_iter()
        .filter(|b| !b.units.is_empty())
        .collect();
    for bin in &mut bins {
        bin.units.sort_unstable();
    }
    bins.sort_by_key(|b| b.units[0]);
    bins.into_iter()
        .map(|b| {
            b.units
                .iter()
                .flat_map(|&u| units[u].members.iter().copied())
                .collect()
        })
        .collect()
}

/// The bins being filled, indexed by their free room.
struct Bins {
    bins: Vec<Bin>,
    /// free room → {(high count, bin index)}, only for bins with free room.
    by_free: BTreeMap<usize, BTreeSet<(usize, usize)>>,
    batch_size: usize,
}

impl Bins {
    /// `count` empty bins of `batch_size`.
    fn new(batch_size: usize, count: usize) -> Self {
        let mut bins = Self {
            bins: Vec::new(),
            by_free: BTreeMap::new(),
            batch_size,
        };
        for _ in 0..count {
            bins.open();
        }
        bins
    }

    /// A new empty bin; its index.
    fn open(&mut self) -> usize {
        let b = self.bins.len();
        self.bins.push(Bin {
            units: Vec::new(),
            free: self.batch_size,
            high: 0,
        });
        self.by_free
            .entry(self.batch_size)
            .or_default()
            .insert((0, b));
        b
    }

    /// The bin a unit of `size` findings, `high` of them critical or high,
    /// goes to, among those with room for it: when it has high findings, the
    /// one with the fewest (the emptiest of those), to spread them; else the
    /// fullest (best fit). A new bin when none has room.
    fn choose(&mut self, size: usize, high: usize) -> usize {
        let chosen = if high > 0 {
            self.by_free
                .range(size..)
                .filter_map(|(&free, set)| set.first().map(|&(high, b)| (high, Reverse(free), b)))
                .min()
                .map(|(_, _, b)| b)
        } else {
            self.by_free
                .range(size..)
                .find_map(|(_, set)| set.first().map(|&(_, b)| b))
        };
        chosen.unwrap_or_else(|| self.open())
    }

    /// Puts unit `u` into bin `b`, keeping the index of free room.
    fn put(&mut self, b: usize, u: usize, unit: &Unit<'_>) {
        let bin = &mut self.bins[b];
        if let Some(set) = self.by_free.get_mut(&bin.free) {
            set.remove(&(bin.high, b));
            if set.is_empty() {
                self.by_free.remove(&bin.free);
            }
        }
        bin.units.push(u);
        bin.free -= unit.members.len();
        bin.high += unit.high;
        if bin.free > 0 {
            self.by_free
                .entry(bin.free)
                .or_default()
                .insert((bin.high, b));
        }
    }
}
