//! `orchestrator waves`: compute the dependency waves of a tasks.csv.

use std::fmt::Write as _;

use orchestrator_core::waves::{WaveOptions, WaveTask, Waves, compute_waves};
use orchestrator_planex::rows::read_tasks_csv;

use super::{Exit, out};
use crate::WavesArgs;

/// Runs the command.
pub fn run(args: &WavesArgs) -> Exit {
    let name = args.tasks.display().to_string();
    let rows = match read_tasks_csv(&args.tasks) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    tracing::debug!(file = %name, tasks = rows.len(), "read the tasks");
    let tasks: Vec<WaveTask<'_>> = rows
        .iter()
        .map(|r| {
            WaveTask::new(&r.id)
                .deps(r.deps.iter().map(String::as_str))
                .context_from(r.context_from.iter().map(String::as_str))
        })
        .collect();
    let options = WaveOptions {
        lenient: args.lenient,
    };
    let waves = match compute_waves(&tasks, options) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {name}: {e}");
            return Exit::BadInput;
        }
    };
    tracing::debug!(waves = waves.layers().len(), "computed the waves");
    for warning in waves.warnings() {
        eprintln!("warning: {name}: {warning}");
    }
    if args.json {
        match serde_json::to_string(&waves.to_report()) {
            Ok(json) => out(&format!("{json}\n")),
            Err(e) => {
                eprintln!("error: failed to serialise the waves: {e}");
                return Exit::BadInput;
            }
        }
    } else {
        let titles: Vec<&str> = rows.iter().map(|r| r.title.as_str()).collect();
        out(&render_text(&waves, &tasks, &titles));
    }
    Exit::Success
}

/// One line per task, grouped by wave.
pub fn render_text(waves: &Waves<'_>, tasks: &[WaveTask<'_>], titles: &[&str]) -> String {
    let mut text = String::new();
    for (i, layer) in waves.layers().iter().enumerate() {
        let _ = writeln!(
            text,
            "Wave {} ({} task{})",
            i + 1,
            layer.len(),
            plural(layer.len())
        );
        for &row in layer {
            let deps = &tasks[row].deps;
            let after = if deps.is_empty() {
                String::new()
            } else {
                format!("  (after {})", deps.join(", "))
            };
            let _ = writeln!(text, "  {:<6} {}{after}", tasks[row].id, titles[row]);
        }
    }
    let _ = writeln!(
        text,
        "{} task{} in {} wave{}",
        tasks.len(),
        plural(tasks.len()),
        waves.max_wave(),
        plural(waves.max_wave() as usize)
    );
    text
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
