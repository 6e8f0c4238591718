//! Critical-path priority: the wave layers, the transitive dependents of
//! each job and the natural order of ids that rank the ready jobs.

use super::*;

impl Scheduler {
    pub(super) fn build_layers(&mut self) {
        let max = self.wave.iter().copied().max().unwrap_or(0) as usize;
        let mut layers = vec![Vec::new(); max];
        for (i, &w) in self.wave.iter().enumerate() {
            layers[w as usize - 1].push(i as u32);
        }
        for layer in &mut layers {
            layer.sort_by(|&a, &b| {
                natural_cmp(&self.specs[a as usize].id, &self.specs[b as usize].id)
            });
        }
        self.layers = layers;
    }

    /// Ranks every job by (longest remaining path, transitive dependents, id).
    pub(super) fn rank_by_priority(&mut self) {
        let n = self.specs.len();
        let weight = job_weights(&self.specs);
        // Reverse topological order: by wave, descending.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| Reverse(self.wave[i as usize]));
        let mut path = vec![0u64; n];
        for &i in &order {
            let iu = i as usize;
            let longest_after = self
                .successors(i)
                .map(|s| path[s as usize])
                .max()
                .unwrap_or(0);
            path[iu] = weight[iu].saturating_add(longest_after);
        }
        let dependents = self.transitive_dependents(&order);
        let mut by_rank: Vec<u32> = (0..n as u32).collect();
        by_rank.sort_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            path[b]
                .cmp(&path[a])
                .then(dependents[b].cmp(&dependents[a]))
                .then_with(|| natural_cmp(&self.specs[a].id, &self.specs[b].id))
        });
        let mut rank = vec![0u32; n];
        for (r, &j) in by_rank.iter().enumerate() {
            rank[j as usize] = r as u32;
        }
        self.rank = rank;
        self.by_rank = by_rank;
    }

    pub(super) fn successors(&self, job: u32) -> impl Iterator<Item = u32> + '_ {
        let (from, to) = (
            self.succ_start[job as usize] as usize,
            self.succ_start[job as usize + 1] as usize,
        );
        self.succ[from..to].iter().map(|&(s, _)| s)
    }

    /// Exact counts with bit sets for small graphs; above
    /// [`EXACT_DESCENDANTS_MAX`] an upper estimate (sum over successors,
    /// capped at `n - 1`), which only affects tie-breaks.
    pub(super) fn transitive_dependents(&self, reverse_topo: &[u32]) -> Vec<u64> {
        let n = self.specs.len();
        let mut count = vec![0u64; n];
        if n <= EXACT_DESCENDANTS_MAX {
            let words = n.div_ceil(64);
            let mut bits = vec![0u64; n * words];
            for &i in reverse_topo {
                let iu = i as usize;
                let mut mine = vec![0u64; words];
                for s in self.successors(i) {
                    let su = s as usize;
                    mine[su / 64] |= 1 << (su % 64);
                    for (m, b) in mine.iter_mut().zip(&bits[su * words..(su + 1) * words]) {
                        *m |= b;
                    }
                }
                count[iu] = mine.iter().map(|w| u64::from(w.count_ones())).sum();
                bits[iu * words..(iu + 1) * words].copy_from_slice(&mine);
            }
        } else {
            let cap = n.saturating_sub(1) as u64;
            for &i in reverse_topo {
                let total = self
                    .successors(i)
                    .map(|s| 1 + count[s as usize])
                    .fold(0u64, u64::saturating_add);
                count[i as usize] = total.min(cap);
            }
        }
        count
    }
}

/// Critical-path weight per job: the estimate in nanoseconds when any job has
/// one (jobs without take the mean of the known ones), else 1 (path counted
/// in jobs).
pub(super) fn job_weights(specs: &[JobSpec]) -> Vec<u64> {
    let known: Vec<u64> = specs
        .iter()
        .filter_map(|s| s.estimate)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1))
        .collect();
    if known.is_empty() {
        return vec![1; specs.len()];
    }
    let mean = (known.iter().map(|&k| u128::from(k)).sum::<u128>() / known.len() as u128) as u64;
    specs
        .iter()
        .map(|s| {
            s.estimate
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1))
                .unwrap_or(mean.max(1))
        })
        .collect()
}

/// Orders ids so that digit runs compare as numbers: `T2 < T10`.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    while !x.is_empty() && !y.is_empty() {
        let dx = x[0].is_ascii_digit();
        let dy = y[0].is_ascii_digit();
        let ord = if dx && dy {
            let lx = x.iter().take_while(|c| c.is_ascii_digit()).count();
            let ly = y.iter().take_while(|c| c.is_ascii_digit()).count();
            let (nx, ny) = (&x[..lx], &y[..ly]);
            let tx = trim_zeros(nx);
            let ty = trim_zeros(ny);
            let o = tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty));
            x = &x[lx..];
            y = &y[ly..];
            o
        } else {
            let o = x[0].cmp(&y[0]);
            x = &x[1..];
            y = &y[1..];
            o
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

pub(super) fn trim_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|&&c| c == b'0').count();
    &digits[zeros..]
}
