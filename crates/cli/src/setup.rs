//! What every flow command needs: a runtime, a gate, a reporter, Ctrl-C
//! handling and the configuration.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use orchestrator_adapters::config::{AgentSpec, Config};
use orchestrator_adapters::terminal_gate::TerminalGate;
use orchestrator_core::event::EventSink;
use orchestrator_core::gate::{AlwaysDefer, AutoYes, Gate};
use orchestrator_core::scheduler::CancelHandle;

use crate::render::{Human, JsonLines};

/// The gate for a run: `-y` answers defaults; an interactive terminal asks;
/// otherwise every question defers, so the flow stops resumably (exit 3)
/// instead of guessing.
pub fn gate(auto_yes: bool) -> Arc<dyn Gate> {
    if auto_yes {
        Arc::new(AutoYes)
    } else if std::io::stdin().is_terminal() {
        Arc::new(TerminalGate)
    } else {
        Arc::new(AlwaysDefer)
    }
}

/// The reporter: JSON lines on stdout with `--json`, else human lines on
/// stderr. The second value is set for the human reporter, to clear its live
/// line before the summary.
pub fn reporter(json: bool) -> (Arc<dyn EventSink>, Option<Arc<Human>>) {
    if json {
        (Arc::new(JsonLines), None)
    } else {
        let human = Arc::new(Human::new());
        (human.clone(), Some(human))
    }
}

/// A multi-threaded runtime for the flows.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("failed to start the async runtime: {e}"))
}

/// Cancels `handle` on the first Ctrl-C (the flow then stops resumably); a
/// second Ctrl-C exits at once with 130. Call inside the runtime.
pub fn cancel_on_ctrl_c(handle: CancelHandle) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "\ninterrupted: stopping; the session stays resumable (Ctrl-C again to quit now)"
            );
            handle.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
}

/// Loads `orchestrator.toml` from `repo` (if any), applies the environment
/// and then the `--agent` flag. Errors name the file and line.
pub fn config(repo: &Path, agent: Option<&str>) -> Result<Config, String> {
    let mut config = match Config::discover(repo) {
        Ok(Some(c)) => c,
        Ok(None) => Config::default(),
        Err(e) => return Err(e.to_string()),
    };
    config.apply_env().map_err(|e| e.to_string())?;
    if let Some(spec) = agent {
        let spec = AgentSpec::parse(spec).map_err(|e| format!("--agent: {e}"))?;
        config.apply_agent_spec(&spec);
    }
    Ok(config)
}
