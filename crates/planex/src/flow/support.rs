//! Small helpers of the flow: the job environment, warnings, phase events
//! and the session files a run reads or removes.

use super::*;

impl Planex {
    pub(super) fn env(&self, agent: Arc<dyn Agent>) -> JobEnv {
        JobEnv {
            agent,
            gate: self.gate.clone(),
            sink: self.sink.clone(),
            workdir: self.repo.clone(),
            options: self.options.clone(),
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
