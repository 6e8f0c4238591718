//! A picture of a run's schedule: one row per worker slot, a bar per job (a
//! planex task, a review-fix finding), coloured by outcome, with its time
//! and cost in the bar's tooltip, as a self-contained SVG.
//!
//! Data flows in one direction: a flow wraps its [`EventSink`] in a
//! [`TimelineRecorder`], which times every [`Event::JobStarted`] /
//! [`Event::JobFinished`] pair into a [`Span`] (and passes each event on);
//! at the end the flow keeps the spans it wants pictured, adds what it knows
//! (the cost of each), and [`render_svg`] lays them out: [`lanes`] puts each
//! span in the lowest slot free when it starts, so the rows are the worker
//! slots a bounded-concurrency scheduler used.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::event::{Event, EventSink, JobStatus};

/// How a pictured job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanOutcome {
    /// Completed.
    Done,
    /// Failed or timed out.
    Failed,
    /// Skipped or cancelled (started, then given up).
    Skipped,
    /// Still running when the picture was taken (the run stopped).
    Unfinished,
}

impl SpanOutcome {
    fn from_status(status: JobStatus) -> Self {
        match status {
            JobStatus::Completed => SpanOutcome::Done,
            JobStatus::Failed | JobStatus::TimedOut => SpanOutcome::Failed,
            JobStatus::Skipped | JobStatus::Cancelled => SpanOutcome::Skipped,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SpanOutcome::Done => "done",
            SpanOutcome::Failed => "failed",
            SpanOutcome::Skipped => "skipped",
            SpanOutcome::Unfinished => "unfinished",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            SpanOutcome::Done => "#2e7d32",
            SpanOutcome::Failed => "#c62828",
            SpanOutcome::Skipped => "#9e9e9e",
            SpanOutcome::Unfinished => "#f9a825",
        }
    }
}

/// One job's time on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The job id (`T1`, `F2`).
    pub id: String,
    /// Its title, when it has one.
    pub title: Option<String>,
    /// When it started, from the start of the run.
    pub start: Duration,
    /// When it ended (never before `start`).
    pub end: Duration,
    /// How it ended.
    pub outcome: SpanOutcome,
    /// What the agent spent on it, when known.
    pub cost_usd: Option<f64>,
}

/// An [`EventSink`] that times job events into [`Span`]s and passes every
/// event on to the sink it wraps. A job that finishes without having
/// started (a skip) never ran and gets no span.
#[derive(Debug)]
pub struct TimelineRecorder {
    inner: Arc<dyn EventSink>,
    started: Instant,
    state: Mutex<Recorded>,
}

#[derive(Debug, Default)]
struct Recorded {
    open: HashMap<String, (Duration, Option<String>)>,
    spans: Vec<Span>,
}

impl TimelineRecorder {
    /// Starts the clock; events go on to `inner`.
    pub fn new(inner: Arc<dyn EventSink>) -> Self {
        Self {
            inner,
            started: Instant::now(),
            state: Mutex::new(Recorded::default()),
        }
    }

    /// The spans so far, in the order they ended; jobs still running end
    /// now, as [`SpanOutcome::Unfinished`].
    pub fn spans(&self) -> Vec<Span> {
        let now = self.started.elapsed();
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut spans = state.spans.clone();
        let mut open: Vec<_> = state.open.iter().collect();
        open.sort_by(|a, b| a.1.0.cmp(&b.1.0).then(a.0.cmp(b.0)));
        spans.extend(open.into_iter().map(|(id, (start, title))| Span {
            id: id.clone(),
            title: title.clone(),
            start: *start,
            end: now.max(*start),
            outcome: SpanOutcome::Unfinished,
            cost_usd: None,
        }));
        spans
    }
}

impl EventSink for TimelineRecorder {
    fn emit(&self, event: &Event) {
        let at = self.started.elapsed();
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            match event {
                Event::JobStarted { id, title } => {
                    state.open.insert(id.clone(), (at, title.clone()));
                }
                Event::JobFinished { id, status, .. } => {
                    // A job finished without starting (a skip) never ran:
                    // no bar.
                    if let Some((start, title)) = state.open.remove(id) {
                        state.spans.push(Span {
                            id: id.clone(),
                            title,
                            start,
                            end: at.max(start),
                            outcome: SpanOutcome::from_status(*status),
                            cost_usd: None,
                        });
                    }
                }
                _ => {}
            }
        }
        self.inner.emit(event);
    }
}

/// The slot of each span (same order as `spans`): each span, taken by start
/// time, goes to the lowest slot whose last span ended by then. Spans in one
/// slot never overlap, and the number of slots is the most spans running at
/// one instant.
pub fn lanes(spans: &[Span]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by(|&a, &b| {
        spans[a]
            .start
            .cmp(&spans[b].start)
            .then(spans[a].end.cmp(&spans[b].end))
            .then(a.cmp(&b))
    });
    let mut free_at: Vec<Duration> = Vec::new();
    let mut lane = vec![0; spans.len()];
    for i in order {
        let span = &spans[i];
        let slot = match free_at.iter().position(|end| *end <= span.start) {
            Some(slot) => slot,
            None => {
                free_at.push(Duration::ZERO);
                free_at.len() - 1
            }
        };
        free_at[slot] = span.end.max(span.start);
        lane[i] = slot;
    }
    lane
}

const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const ROW: f64 = 28.0;
const BAR: f64 = 20.0;
const AXIS: f64 = 40.0;

/// The timeline of `spans` as an SVG document titled `title`: one row per
/// slot ([`lanes`]), a bar per span coloured by outcome (done, failed,
/// skipped, unfinished) with its id on it and, in its `<title>` tooltip,
/// its title, times and cost; a time axis and a legend below.
pub fn render_svg(title: &str, spans: &[Span]) -> String {
    let lane = lanes(spans);
    let rows = lane.iter().max().map_or(1, |m| m + 1);
    let total = spans
        .iter()
        .map(|s| s.end.as_secs_f64())
        .fold(0.0_f64, f64::max)
        .max(0.001);
    let scale = (WIDTH - LEFT - RIGHT) / total;
    let height = TOP + ROW * rows as f64 + AXIS + 30.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    svg_slots(&mut svg, rows);
    for (span, row) in spans.iter().zip(&lane) {
        svg_bar(&mut svg, span, *row, scale);
    }
    let axis_y = TOP + ROW * rows as f64 + 4.0;
    svg_axis(&mut svg, axis_y, total, scale);
    svg_legend(&mut svg, axis_y + 36.0);
    svg.push_str("</svg>\n");
    svg
}

/// One labelled row per worker slot, with its guide line.
fn svg_slots(svg: &mut String, rows: usize) {
    for row in 0..rows {
        let y = TOP + ROW * row as f64;
        let _ = writeln!(
            svg,
            r##"<text x="8" y="{:.1}" fill="#555555">slot {}</text>"##,
            y + BAR * 0.7,
            row + 1
        );
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#eeeeee"/>"##,
            y + ROW - 2.0,
            WIDTH - RIGHT,
            y + ROW - 2.0
        );
    }
}

/// A span's bar in its slot's row, coloured by outcome, with its id inside
/// when it fits and everything known of it in the tooltip.
fn svg_bar(svg: &mut String, span: &Span, row: usize, scale: f64) {
    let x = LEFT + span.start.as_secs_f64() * scale;
    let w = ((span.end.as_secs_f64() - span.start.as_secs_f64()) * scale).max(2.0);
    let y = TOP + ROW * row as f64;
    let mut tip = span.id.clone();
    if let Some(t) = &span.title {
        let _ = write!(tip, " {t}");
    }
    let _ = write!(
        tip,
        ": {}, {:.1}s to {:.1}s ({:.1}s)",
        span.outcome.name(),
        span.start.as_secs_f64(),
        span.end.as_secs_f64(),
        span.end.as_secs_f64() - span.start.as_secs_f64()
    );
    if let Some(cost) = span.cost_usd {
        let _ = write!(tip, ", ${cost:.4}");
    }
    let _ = writeln!(
        svg,
        r#"<g><title>{}</title><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{BAR}" rx="3" fill="{}"/>"#,
        escape(&tip),
        span.outcome.colour()
    );
    if w >= 7.0 * span.id.len() as f64 + 6.0 {
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" fill="#ffffff">{}</text>"##,
            x + 4.0,
            y + BAR * 0.7,
            escape(&span.id)
        );
    }
    let _ = writeln!(svg, "</g>");
}

/// The time axis at `axis_y`, with five ticks from 0 to `total` seconds.
fn svg_axis(svg: &mut String, axis_y: f64, total: f64, scale: f64) {
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#333333"/>"##,
        WIDTH - RIGHT
    );
    for tick in 0..=4 {
        let t = total * f64::from(tick) / 4.0;
        let x = LEFT + t * scale;
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{axis_y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333333"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#333333">{t:.1}s</text>"##,
            axis_y + 5.0,
            axis_y + 18.0
        );
    }
}

/// The outcome colours' legend, one swatch per outcome, at `legend_y`.
fn svg_legend(svg: &mut String, legend_y: f64) {
    for (i, outcome) in [
        SpanOutcome::Done,
        SpanOutcome::Failed,
        SpanOutcome::Skipped,
        SpanOutcome::Unfinished,
    ]
    .into_iter()
    .enumerate()
    {
        let x = LEFT + 110.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{legend_y:.1}">{}</text>"#,
            legend_y - 10.0,
            outcome.colour(),
            x + 16.0,
            outcome.name()
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::CollectingSink;
    use proptest::prelude::*;

    fn span(id: &str, start: u64, end: u64, outcome: SpanOutcome) -> Span {
        Span {
            id: id.into(),
            title: None,
            start: Duration::from_secs(start),
            end: Duration::from_secs(end),
            outcome,
            cost_usd: None,
        }
    }

    #[test]
    fn a_slot_freed_at_a_start_is_reused() {
        let spans = [
            span("T1", 0, 10, SpanOutcome::Done),
            span("T2", 0, 5, SpanOutcome::Done),
            span("T3", 5, 12, SpanOutcome::Failed),
            span("T4", 10, 20, SpanOutcome::Done),
        ];
        assert_eq!(lanes(&spans), [1, 0, 0, 1]);
    }

    #[test]
    fn the_recorder_times_job_pairs_and_passes_events_on() {
        let inner = Arc::new(CollectingSink::new());
        let recorder = TimelineRecorder::new(inner.clone());
        recorder.emit(&Event::JobStarted {
            id: "T1".into(),
            title: Some("First".into()),
        });
        recorder.emit(&Event::JobStarted {
            id: "T2".into(),
            title: None,
        });
        recorder.emit(&Event::JobFinished {
            id: "T1".into(),
            status: JobStatus::Failed,
            detail: None,
        });
        recorder.emit(&Event::JobFinished {
            id: "T9".into(),
            status: JobStatus::Skipped,
            detail: None,
        });
        let spans = recorder.spans();
        assert_eq!(inner.events().len(), 4);
        assert_eq!(spans.len(), 2);
        assert_eq!(
            (spans[0].id.as_str(), spans[0].title.as_deref()),
            ("T1", Some("First"))
        );
        assert_eq!(spans[0].outcome, SpanOutcome::Failed);
        assert_eq!(
            (spans[1].id.as_str(), spans[1].outcome),
            ("T2", SpanOutcome::Unfinished)
        );
        assert!(spans.iter().all(|s| s.end >= s.start));
    }

    proptest! {
        /// Spans in one slot never overlap, and there are exactly as many
        /// slots as spans running at the busiest instant.
        #[test]
        fn slots_never_overlap_and_match_the_peak(
            raw in proptest::collection::vec((0u64..100, 1u64..30), 0..40)
        ) {
            let spans: Vec<Span> = raw
                .iter()
                .enumerate()
                .map(|(i, (start, len))| span(&format!("J{i}"), *start, start + len, SpanOutcome::Done))
                .collect();
            let lane = lanes(&spans);
            for i in 0..spans.len() {
                for j in (i + 1)..spans.len() {
                    let (a, b) = (&spans[i], &spans[j]);
                    prop_assert!(
                        lane[i] != lane[j] || a.end <= b.start || b.end <= a.start,
                        "{a:?} and {b:?} share slot {}", lane[i]
                    );
                }
            }
            // Spans are half-open; the busiest instant is some span's start.
            let peak = spans
                .iter()
                .map(|p| spans.iter().filter(|s| s.start <= p.start && p.start < s.end).count())
                .max()
                .unwrap_or(0);
            let used = lane.iter().max().map_or(0, |m| m + 1);
            prop_assert_eq!(used, peak);
        }
    }
}
