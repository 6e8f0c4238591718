//! Dependency waves: Kahn layering of a task graph.
//!
//! A task's wave is `1 + max(wave of its predecessors)`, 1-based like the
//! lite-planex seed's `computeWaves`: tasks without predecessors are in wave 1.
//! Predecessors are the task's `deps` plus the *task* ids named in its
//! `context_from` (a task that reads another task's findings must run after it).
//! Ids in `context_from` that start with `E` name exploration rows
//! (`explore.csv`) and add no edge.
//!
//! The graph is a [`petgraph`] `Csr` (compressed sparse rows) indexed by row
//! number; the layering itself is a Kahn BFS over in-degrees that never clones
//! an id, so one million tasks with three million edges layer in under a
//! second (see `benches/src/dag.rs`).
//!
//! Problems:
//! - a **cycle** is always an error, and the error names the tasks on one cycle
//!   in order (`dependency cycle: T1 → T3 → T2 → T1`, read "T1 depends on T3,
//!   which depends on T2, which depends on T1");
//! - a **duplicate id** is always an error;
//! - an **unknown id** in `deps`, or an id in `context_from` that is neither an
//!   exploration id nor a known task, is an error naming the row and the id; in
//!   [lenient](WaveOptions::lenient) mode (the seed's behaviour) it is ignored
//!   and reported as a [`WaveWarning`].

use std::collections::{BTreeMap, HashMap};

use petgraph::Directed;
use petgraph::csr::Csr;
use serde::{Deserialize, Serialize};
use thiserror::Error;

mod index;
use index::IdIndex;

/// One input row: a task id, its dependencies and its context sources.
///
/// Borrows from the caller's rows, so building the input clones no strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaveTask<'a> {
    /// The task id (`T1`, …).
    pub id: &'a str,
    /// Ids of tasks that must finish first.
    pub deps: Vec<&'a str>,
    /// Context sources: `E*` ids name exploration rows (no edge), other ids
    /// name tasks and order this task after them.
    pub context_from: Vec<&'a str>,
}

impl<'a> WaveTask<'a> {
    /// A task with no dependencies and no context sources.
    pub fn new(id: &'a str) -> Self {
        Self {
            id,
            deps: Vec::new(),
            context_from: Vec::new(),
        }
    }

    /// Sets the dependencies.
    pub fn deps(mut self, deps: impl IntoIterator<Item = &'a str>) -> Self {
        self.deps = deps.into_iter().collect();
        self
    }

    /// Sets the context sources.
    pub fn context_from(mut self, ids: impl IntoIterator<Item = &'a str>) -> Self {
        self.context_from = ids.into_iter().collect();
        self
    }
}

/// How strict [`compute_waves`] is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaveOptions {
    /// Ignore unknown ids (with a warning) instead of failing, like the seed.
    /// Cycles and duplicate ids are errors either way.
    pub lenient: bool,
}

/// Why the waves could not be computed.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaveError {
    /// Two rows share an id.
    #[error("duplicate task id {id:?} in row {row} (first seen in row {first_row})")]
    DuplicateId {
        /// The id.
        id: String,
        /// 1-based position of the repeated row in the input.
        row: usize,
        /// 1-based position of the first row with that id.
        first_row: usize,
    },
    /// A dependency names no task.
    #[error("task {task:?} (row {row}) depends on unknown task {dep:?}")]
    UnknownDep {
        /// 1-based position of the row in the input.
        row: usize,
        /// The row's task id.
        task: String,
        /// The unknown id.
        dep: String,
    },
    /// A `context_from` id is neither an exploration id nor a known task.
    #[error(
        "task {task:?} (row {row}) takes context from {source_id:?}, which is neither an exploration id (E*) nor a known task"
    )]
    UnknownContext {
        /// 1-based position of the row in the input.
        row: usize,
        /// The row's task id.
        task: String,
        /// The unknown id.
        source_id: String,
    },
    /// The ordering edges form a cycle.
    #[error("dependency cycle: {}", .path.join(" → "))]
    Cycle {
        /// The tasks on the cycle, each depending on the next; the first id is
        /// repeated at the end.
        path: Vec<String>,
    },
}

/// A problem that lenient mode ignored.
#[derive(Debug, Clone, Error, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaveWarning {
    /// A dependency named no task and was ignored.
    #[error("task {task:?} (row {row}) depends on unknown task {dep:?}; ignored")]
    UnknownDep {
        /// 1-based position of the row in the input.
        row: usize,
        /// The row's task id.
        task: String,
        /// The unknown id.
        dep: String,
    },
    /// A `context_from` id named neither an exploration row nor a task and was
    /// ignored.
    #[error(
        "task {task:?} (row {row}) takes context from {source_id:?}, which is neither an exploration id (E*) nor a known task; ignored"
    )]
    UnknownContext {
        /// 1-based position of the row in the input.
        row: usize,
        /// The row's task id.
        task: String,
        /// The unknown id.
        source_id: String,
    },
}

/// The wave of every task, in input order, plus the lookups a caller needs.
#[derive(Debug, Clone)]
pub struct Waves<'a> {
    ids: Vec<&'a str>,
    wave: Vec<u32>,
    index: IdIndex<'a>,
    max_wave: u32,
    warnings: Vec<WaveWarning>,
}

impl<'a> Waves<'a> {
    /// The wave (1-based) of the task with this id.
    pub fn get(&self, id: &str) -> Option<u32> {
        self.index.get(id).map(|row| self.wave[row as usize])
    }

    /// The input row (0-based) of the task with this id.
    pub fn row(&self, id: &str) -> Option<usize> {
        self.index.get(id).map(|row| row as usize)
    }

    /// The wave of each input row, in input order.
    pub fn by_row(&self) -> &[u32] {
        &self.wave
    }

    /// `(id, wave)` in input order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, u32)> + '_ {
        self.ids.iter().copied().zip(self.wave.iter().copied())
    }

    /// The waves keyed by id, sorted.
    pub fn by_id(&self) -> BTreeMap<&'a str, u32> {
        self.iter().collect()
    }

    /// The highest wave number (0 when there are no tasks).
    pub fn max_wave(&self) -> u32 {
        self.max_wave
    }

    /// Problems ignored in lenient mode.
    pub fn warnings(&self) -> &[WaveWarning] {
        &self.warnings
    }

    /// Input row numbers (0-based) per wave: element `w - 1` holds wave `w`'s
    /// rows in input order.
    pub fn layers(&self) -> Vec<Vec<usize>> {
        let mut layers = vec![Vec::new(); self.max_wave as usize];
        for (row, &w) in self.wave.iter().enumerate() {
            if let Some(layer) = layers.get_mut(w as usize - 1) {
                layer.push(row);
            }
        }
        layers
    }

    /// The owned, serialisable form (`{"waves": {"T1": 1, …}, "max_wave": N}`,
    /// the CLI's JSON).
    pub fn to_report(&self) -> WavesReport {
        WavesReport {
            waves: self.iter().map(|(id, w)| (id.to_owned(), w)).collect(),
            max_wave: self.max_wave,
        }
    }
}

impl Serialize for Waves<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Borrowed<'b> {
            waves: BTreeMap<&'b str, u32>,
            max_wave: u32,
        }
        Borrowed {
            waves: self.by_id(),
            max_wave: self.max_wave,
        }
        .serialize(serializer)
    }
}

/// Owned waves as the CLI prints them: `{"waves": {"T1": 1, …}, "max_wave": N}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WavesReport {
    /// Wave per task id.
    pub waves: BTreeMap<String, u32>,
    /// The highest wave number (0 when there are no tasks).
    pub max_wave: u32,
}

/// Computes the wave of every task. See the [module docs](self) for the rules.
pub fn compute_waves<'a>(
    tasks: &[WaveTask<'a>],
    options: WaveOptions,
) -> Result<Waves<'a>, WaveError> {
    let n = tasks.len();
    let index = IdIndex::build(tasks.iter().map(|t| t.id)).map_err(|(row, first_row)| {
        WaveError::DuplicateId {
            id: tasks[row].id.to_owned(),
            row: row + 1,
            first_row: first_row + 1,
        }
    })?;
    let mut warnings = Vec::new();

    // Resolve every ordering edge to (from, to) rows, in increasing `to`,
    // a batch of references at a time (see `IdIndex::get_batch`).
    let edge_hint: usize = tasks
        .iter()
        .map(|t| t.deps.len() + t.context_from.len())
        .sum();
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(edge_hint);
    let mut batch = Batch::default();
    for (row, task) in tasks.iter().enumerate() {
        let row = row as u32;
        for &dep in &task.deps {
            batch.refs.push(Ref {
                row,
                context: false,
                id: dep,
            });
        }
        for &source in &task.context_from {
            if !is_exploration_id(source) {
                batch.refs.push(Ref {
                    row,
                    context: true,
                    id: source,
                });
            }
        }
        if batch.refs.len() >= BATCH {
            batch.resolve(tasks, &index, options, &mut edges, &mut warnings)?;
        }
    }
    batch.resolve(tasks, &index, options, &mut edges, &mut warnings)?;
    drop(batch);

    let graph = build_graph(n, &edges);
    drop(edges);
    let wave = layer(&graph).map_err(|unlayered| WaveError::Cycle {
        path: find_cycle(&graph, tasks, &unlayered),
    })?;
    let max_wave = wave.iter().copied().max().unwrap_or(0);
    Ok(Waves {
        ids: tasks.iter().map(|t| t.id).collect(),
        wave,
        index,
        max_wave,
        warnings,
    })
}

/// References resolved per batch.
const BATCH: usize = 256;

/// One reference from a row to a task id.
#[derive(Debug, Clone, Copy)]
struct Ref<'a> {
    row: u32,
    context: bool,
    id: &'a str,
}

/// References waiting to be resolved, and the lookup results.
#[derive(Debug, Default)]
struct Batch<'a> {
    refs: Vec<Ref<'a>>,
    ids: Vec<&'a str>,
    found: Vec<Option<u32>>,
}

impl<'a> Batch<'a> {
    /// Resolves the pending references into `edges`, in order; an unknown id
    /// is an error, or a warning when lenient.
    fn resolve(
        &mut self,
        tasks: &[WaveTask<'_>],
        index: &IdIndex<'_>,
        options: WaveOptions,
        edges: &mut Vec<(u32, u32)>,
        warnings: &mut Vec<WaveWarning>,
    ) -> Result<(), WaveError> {
        self.ids.clear();
        self.ids.extend(self.refs.iter().map(|r| r.id));
        index.get_batch(&self.ids, &mut self.found);
        for (r, found) in self.refs.iter().zip(&self.found) {
            if let Some(from) = *found {
                edges.push((from, r.row));
                continue;
            }
            let (row, task) = (r.row as usize + 1, tasks[r.row as usize].id.to_owned());
            let id = r.id.to_owned();
            let (error, warning) = if r.context {
                (
                    WaveError::UnknownContext {
                        row,
                        task: task.clone(),
                        source_id: id.clone(),
                    },
                    WaveWarning::UnknownContext {
                        row,
                        task,
                        source_id: id,
                    },
                )
            } else {
                (
                    WaveError::UnknownDep {
                        row,
                        task: task.clone(),
                        dep: id.clone(),
                    },
                    WaveWarning::UnknownDep { row, task, dep: id },
                )
            };
            if !options.lenient {
                return Err(error);
            }
            warnings.push(warning);
        }
        self.refs.clear();
        Ok(())
    }
}

/// Whether a `context_from` id names an exploration row (`E1`, `E2`, …).
pub fn is_exploration_id(id: &str) -> bool {
    id.starts_with('E')
}

/// The task graph: rows as nodes, an edge from each predecessor to its
/// dependent, in compressed sparse row form (contiguous successor lists, so
/// the layering walks memory in order).
type TaskGraph = Csr<(), (), Directed, u32>;

/// Builds the graph from edges sorted by target. A stable counting sort by
/// source keeps each source's targets ascending, so removing adjacent
/// duplicates (a task listed in both `deps` and `context_from`) leaves the
/// sorted, unique edge list `Csr` requires.
fn build_graph(n: usize, edges: &[(u32, u32)]) -> TaskGraph {
    let mut start = vec![0u32; n + 1];
    for &(from, _) in edges {
        start[from as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut sorted = vec![(0u32, 0u32); edges.len()];
    for &(from, to) in edges {
        let slot = &mut start[from as usize];
        sorted[*slot as usize] = (from, to);
        *slot += 1;
    }
    sorted.dedup();
    // Sorted and unique by construction; an error cannot happen, but an
    // empty graph is the safe fallback rather than a panic.
    let mut graph = TaskGraph::from_sorted_edges(&sorted).unwrap_or_default();
    while graph.node_count() < n {
        graph.add_node(());
    }
    graph
}

/// Kahn BFS: a row's wave is one more than its deepest predecessor's. On a
/// cycle, returns the rows left unlayered (on a cycle or downstream of one):
/// exactly those whose in-degree never reached zero.
fn layer(graph: &TaskGraph) -> Result<Vec<u32>, Vec<bool>> {
    let n = graph.node_count();
    let mut in_degree = vec![0u32; n];
    for node in 0..n as u32 {
        for &succ in graph.neighbors_slice(node) {
            in_degree[succ as usize] += 1;
        }
    }
    let mut wave = vec![0u32; n];
    let mut queue: Vec<u32> = Vec::with_capacity(n);
    for (row, &d) in in_degree.iter().enumerate() {
        if d == 0 {
            wave[row] = 1;
            queue.push(row as u32);
        }
    }
    let mut head = 0;
    while let Some(&node) = queue.get(head) {
        head += 1;
        let next_wave = wave[node as usize] + 1;
        for &succ in graph.neighbors_slice(node) {
            let s = succ as usize;
            if wave[s] < next_wave {
                wave[s] = next_wave;
            }
            in_degree[s] -= 1;
            if in_degree[s] == 0 {
                queue.push(succ);
            }
        }
    }
    if queue.len() == n {
        Ok(wave)
    } else {
        Err(in_degree.into_iter().map(|d| d > 0).collect())
    }
}

/// Walks backwards from the first unlayered row along unlayered predecessors
/// until a row repeats; the repeated stretch is a cycle. Every unlayered row
/// has an unlayered predecessor, so the walk cannot get stuck. The cycle is
/// rotated to start at its earliest row, for a stable message.
fn find_cycle(graph: &TaskGraph, tasks: &[WaveTask<'_>], unlayered: &[bool]) -> Vec<String> {
    // The error path only: predecessor lists of the unlayered rows.
    let n = graph.node_count();
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    for node in 0..n as u32 {
        if unlayered[node as usize] {
            for &succ in graph.neighbors_slice(node) {
                preds[succ as usize].push(node);
            }
        }
    }
    let mut position: HashMap<usize, usize> = HashMap::new();
    let mut walk: Vec<usize> = Vec::new();
    let mut current = unlayered.iter().position(|&u| u).unwrap_or(0);
    loop {
        if let Some(&at) = position.get(&current) {
            let mut cycle: Vec<usize> = walk[at..].to_vec();
            if let Some(min_pos) = cycle
                .iter()
                .enumerate()
                .min_by_key(|&(_, &row)| row)
                .map(|(i, _)| i)
            {
                cycle.rotate_left(min_pos);
            }
            let mut path: Vec<String> = cycle.iter().map(|&r| tasks[r].id.to_owned()).collect();
            if let Some(first) = path.first().cloned() {
                path.push(first);
            }
            return path;
        }
        position.insert(current, walk.len());
        walk.push(current);
        match preds[current].iter().copied().min() {
            Some(p) => current = p as usize,
            // Unreachable for an unlayered row; return what we have rather
            // than loop.
            None => return walk.iter().map(|&r| tasks[r].id.to_owned()).collect(),
        }
    }
}

#[cfg(test)]
mod tests;
