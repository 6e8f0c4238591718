//! Small helpers of the flow: the job environment, warnings, phase events
//! and the session files a run reads or removes.

use super::*;
use orchestrator_core::timeline::render_svg;

/// The picture of a run's schedule, beside `context.md`.
const TIMELINE_FILE: &str = "timeline.svg";

/// What `context.md` says about the picture.
pub(super) const TIMELINE_SECTION: &str = "\n## Timeline\n\nThis run's schedule, one row per worker slot and a bar per row (hover for its times): [timeline.svg](timeline.svg)\n\n![Timeline of this run](timeline.svg)\n";

impl Planex {
    /// Writes `timeline.svg` of the rows this run executed (explorations
    /// and tasks); `false` when it executed none.
    pub(super) fn write_timeline(&self, run: &Run) -> Result<bool, PlanexError> {
        let rows: std::collections::HashSet<&str> = run
            .state
            .explore_rows()
            .iter()
            .map(|r| r.id.as_str())
            .chain(run.state.task_rows().iter().map(|r| r.id.as_str()))
            .collect();
        let spans: Vec<_> = self
            .timeline
            .spans()
            .into_iter()
            .filter(|s| rows.contains(s.id.as_str()))
            .collect();
        if spans.is_empty() {
            return Ok(false);
        }
        let svg = render_svg(
            &format!("planex {}: rows over time", run.session.id()),
            &spans,
        );
        orchestrator_core::state::write_atomic(
            run.session.dir().join(TIMELINE_FILE),
            svg.as_bytes(),
        )?;
        Ok(true)
    }

    pub(super) fn env(&self, agent: Arc<dyn Agent>) -> JobEnv {
        JobEnv {
            agent,
            gate: self.gate.clone(),
            sink: self.sink.clone(),
            workdir: self.repo.clone(),
            options: self.options.clone(),
            verify: None,
        }
    }

    /// Warns about malformed lines of the discovery board.
    pub(super) fn check_discoveries(&self, session: &Session, warnings: &mut Vec<String>) {
        match read_ndjson::<Discovery>(session.discoveries()) {
            Ok(read) => {
                if let Some(w) = read.warning() {
                    self.warn(warnings, w);
                }
            }
            Err(e) => self.warn(warnings, e.to_string()),
        }
    }

    pub(super) fn warn(&self, warnings: &mut Vec<String>, message: String) {
        self.sink.emit(&Event::Warning {
            message: message.clone(),
        });
        warnings.push(message);
    }

    /// Says which session folder the run works in (for per-session logs).
    pub(super) fn opened(&self, session: Session) -> Session {
        self.sink.emit(&Event::SessionOpened {
            flow: FLOW.to_owned(),
            session: session.id().to_owned(),
            dir: session.dir().to_path_buf(),
        });
        session
    }

    pub(super) fn phase_started(&self, phase: &str) {
        self.sink.emit(&Event::PhaseStarted {
            flow: FLOW.to_owned(),
            phase: phase.to_owned(),
        });
    }

    pub(super) fn phase_finished(&self, phase: &str) {
        self.sink.emit(&Event::PhaseFinished {
            flow: FLOW.to_owned(),
            phase: phase.to_owned(),
        });
    }
}

/// Reads a tasks.csv with the line of each row.
pub(super) fn read_tasks_with_lines(path: &Path) -> Result<(Vec<TaskRow>, Vec<u64>), PlanexError> {
    let table: CsvTable = read_csv(path)?;
    let rows = TaskRow::from_table(path, &table)?;
    let lines = table.rows.iter().map(|r| r.line).collect();
    Ok((rows, lines))
}

/// Removes the temporary wave CSVs an interrupted run left behind.
pub(super) fn remove_wave_files(session: &Session) -> Result<(), PlanexError> {
    let dir = session.dir();
    let entries = std::fs::read_dir(dir).map_err(|e| PlanexError::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| PlanexError::io("list", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if (name.starts_with("explore-wave-") || name.starts_with("task-wave-"))
            && name.ends_with(".csv")
        {
            session.remove_file(&entry.path())?;
        }
    }
    Ok(())
}
