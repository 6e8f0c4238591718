//! What every flow command needs: a runtime, a gate, a reporter, Ctrl-C
//! handling and the configuration.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_adapters::config::{
    AgentSpec, Config, EffectiveConfig, MainFile, user_config_path,
};
use orchestrator_adapters::terminal_gate::TerminalGate;
use orchestrator_core::event::{EventSink, FanOut};
use orchestrator_core::gate::{AlwaysDefer, AutoYes, Gate};
use orchestrator_core::scheduler::CancelHandle;
use orchestrator_core::state::event_log::{EventLog, RunState};

use crate::render::{Human, JsonLines};

/// What each worktree a flow makes is given: `[worktree]` of the
/// configuration, or the dependency folders detected in the repository;
/// `None` when neither applies (`detect = false` and nothing set).
pub fn provisioner(
    config: &orchestrator_adapters::config::Config,
) -> Option<Arc<dyn orchestrator_core::worktree::Provisioner>> {
    let provisioner = orchestrator_adapters::worktree_env::EnvProvisioner::new(
        config.worktree.clone(),
        Arc::new(orchestrator_adapters::process::ProcessRunner::default()),
    );
    provisioner
        .is_active()
        .then(|| Arc::new(provisioner) as Arc<dyn orchestrator_core::worktree::Provisioner>)
}

/// [`provisioner`] of the configuration files of `repo` (the user file,
/// then `--config` or the repository's): for a flow whose other settings
/// do not come from the configuration (planex's shell agent).
pub fn provisioner_of(
    repo: &Path,
    files: &ConfigFiles,
) -> Result<Option<Arc<dyn orchestrator_core::worktree::Provisioner>>, String> {
    let config = EffectiveConfig::load(files.user.as_deref(), files.main_file(repo))
        .map_err(|e| e.to_string())?
        .into_config();
    Ok(provisioner(&config))
}

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

/// Where a run's events go: the terminal (or `--json`), and the session's
/// own `events.ndjson` ([`EventLog`]), which `orchestrator serve` watches.
#[derive(Debug, Clone)]
pub struct Reporter {
    /// The terminal's share: JSON lines, or the human reporter.
    pub terminal: Arc<dyn EventSink>,
    /// The human reporter, to clear its live line before the summary.
    pub human: Option<Arc<Human>>,
    /// The session's log; [`Reporter::finish`] records the run's end.
    pub log: Arc<EventLog>,
}

impl Reporter {
    /// The sink a flow is given: every event to the terminal and the log.
    pub fn sink(&self) -> Arc<dyn EventSink> {
        Arc::new(FanOut(vec![Arc::clone(&self.terminal), self.log.clone()]))
    }

    /// Records how the run ended in the session's log; a log that could
    /// not be written is said once on stderr (the run itself is not
    /// affected).
    pub fn finish(&self, exit_code: i32, state: RunState, reason: Option<String>) {
        self.log.finish(exit_code, state, reason);
        if let Some(e) = self.log.error() {
            eprintln!("warning: the session's event log could not be written: {e}");
        }
    }
}

/// The reporter: JSON lines on stdout with `--json`, else human lines on
/// stderr; and the session's event log in both cases.
pub fn reporter(json: bool) -> Reporter {
    let (terminal, human): (Arc<dyn EventSink>, _) = if json {
        (Arc::new(JsonLines), None)
    } else {
        let human = Arc::new(Human::new());
        (human.clone(), Some(human))
    };
    Reporter {
        terminal,
        human,
        log: Arc::new(EventLog::new()),
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

/// The settings files beside the repository's: the user's and the one
/// `--config` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFiles {
    /// The user file (`$XDG_CONFIG_HOME/orchestrator/config.toml`); `None`
    /// when neither `XDG_CONFIG_HOME` nor `HOME` says where it is.
    pub user: Option<PathBuf>,
    /// `--config FILE`: read instead of the repository's `orchestrator.toml`.
    pub explicit: Option<PathBuf>,
}

impl ConfigFiles {
    /// The user file of this process's environment, and `--config`.
    pub fn from_env(explicit: Option<PathBuf>) -> Self {
        Self {
            user: user_config_path(),
            explicit,
        }
    }

    /// The file read above the user's: `--config`, or else `repo`'s
    /// `orchestrator.toml`.
    pub fn main_file<'a>(&'a self, repo: &'a Path) -> MainFile<'a> {
        match &self.explicit {
            Some(path) => MainFile::Explicit(path),
            None => MainFile::Discover(repo),
        }
    }
}

/// The run limits every flow takes (`[budget]` in orchestrator.toml; a
/// flag wins over the file).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct BudgetFlags {
    /// Stop starting agent calls once the run's agents have spent this many
    /// US dollars (reported by the backend, else priced by `[prices]`)
    #[arg(long, global = true, value_name = "USD")]
    pub max_cost_usd: Option<f64>,
    /// Stop starting agent calls once the run's agents have used this many
    /// input plus output tokens
    #[arg(long, global = true, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Start at most this many agent calls in the run (an attempt at a
    /// finding, task or patch, a plan or exploration request: one call each)
    #[arg(long, global = true, value_name = "N")]
    pub max_agent_calls: Option<u32>,
    /// Start no agent call after this much wall time (seconds, or with a
    /// unit: 90s, 15m, 2h), and cancel the calls still running
    /// (review-fix then stops resumably, exit 3)
    #[arg(long, global = true, value_name = "TIME", value_parser = parse_wall)]
    pub max_wall: Option<u64>,
}

/// `--max-wall`: whole seconds, or a number with `s`, `m` or `h`.
fn parse_wall(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let expected = || format!("expected a duration such as 600, 90s, 15m or 2h, got {text:?}");
    let scale = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        _ => return Err(expected()),
    };
    let value: f64 = number.trim().parse().map_err(|_| expected())?;
    let seconds = (value * scale).round();
    if !(seconds.is_finite() && seconds >= 1.0) {
        return Err(format!("expected at least one second, got {text:?}"));
    }
    // Rounded and at least 1: the cast is exact for any sensible limit.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(seconds as u64)
}

/// Limits per item (`[budget] item_max_*`; a flag wins over the file).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct ItemBudgetFlags {
    /// Start no further attempt at an item (a review-fix finding, a planex
    /// task) once the agent has spent this many US dollars on it, and hold a
    /// ci-autofix iteration's one call to it; the item fails with the limit
    /// named and the run goes on
    #[arg(long, global = true, value_name = "USD")]
    pub item_max_cost_usd: Option<f64>,
    /// The same, in input plus output tokens
    #[arg(long, global = true, value_name = "N")]
    pub item_max_tokens: Option<u64>,
    /// The same, in agent calls
    #[arg(long, global = true, value_name = "N")]
    pub item_max_agent_calls: Option<u32>,
}

/// Merges the user file and `--config` or `repo`'s `orchestrator.toml`,
/// then applies the environment, the `--agent` flag and the budget flags,
/// remembering where each value came from. Errors name the file and line,
/// or the flag.
pub fn effective_config(
    repo: &Path,
    agent: Option<&str>,
    budget: &BudgetFlags,
    files: &ConfigFiles,
) -> Result<EffectiveConfig, String> {
    let mut effective = EffectiveConfig::load(files.user.as_deref(), files.main_file(repo))
        .map_err(|e| e.to_string())?;
    effective.apply_env().map_err(|e| e.to_string())?;
    if let Some(spec) = agent {
        let spec = AgentSpec::parse(spec).map_err(|e| format!("--agent: {e}"))?;
        effective.apply_agent_spec(&spec, "--agent");
    }
    limit(
        &mut effective,
        budget.max_cost_usd,
        "max_cost_usd",
        |b, v| {
            b.max_cost_usd = Some(v);
        },
    )?;
    limit(&mut effective, budget.max_tokens, "max_tokens", |b, v| {
        b.max_tokens = Some(v);
    })?;
    limit(
        &mut effective,
        budget.max_agent_calls,
        "max_agent_calls",
        |b, v| {
            b.max_agent_calls = Some(v);
        },
    )?;
    limit_as(
        &mut effective,
        budget.max_wall,
        "max_wall_secs",
        "--max-wall",
        |b, v| {
            b.max_wall_secs = Some(v);
        },
    )?;
    Ok(effective)
}

/// Applies the flag for `[budget] key` (`--max-cost-usd` for
/// `max_cost_usd`) when it was given.
fn limit<T>(
    effective: &mut EffectiveConfig,
    value: Option<T>,
    key: &str,
    set: impl FnOnce(&mut orchestrator_adapters::config::BudgetSection, T),
) -> Result<(), String> {
    let flag = format!("--{}", key.replace('_', "-"));
    limit_as(effective, value, key, &flag, set)
}

/// [`limit`] for a flag not named after its key.
fn limit_as<T>(
    effective: &mut EffectiveConfig,
    value: Option<T>,
    key: &str,
    flag: &str,
    set: impl FnOnce(&mut orchestrator_adapters::config::BudgetSection, T),
) -> Result<(), String> {
    let Some(value) = value else {
        return Ok(());
    };
    effective
        .apply_flag(&format!("budget.{key}"), flag, |c| {
            set(&mut c.budget, value)
        })
        .map_err(|e| e.to_string())
}

/// [`effective_config`] with the per-item limit flags applied too.
pub fn effective_config_with_items(
    repo: &Path,
    agent: Option<&str>,
    budget: &BudgetFlags,
    items: &ItemBudgetFlags,
    files: &ConfigFiles,
) -> Result<EffectiveConfig, String> {
    let mut effective = effective_config(repo, agent, budget, files)?;
    limit(
        &mut effective,
        items.item_max_cost_usd,
        "item_max_cost_usd",
        |b, v| {
            b.item_max_cost_usd = Some(v);
        },
    )?;
    limit(
        &mut effective,
        items.item_max_tokens,
        "item_max_tokens",
        |b, v| {
            b.item_max_tokens = Some(v);
        },
    )?;
    limit(
        &mut effective,
        items.item_max_agent_calls,
        "item_max_agent_calls",
        |b, v| b.item_max_agent_calls = Some(v),
    )?;
    Ok(effective)
}

/// The settings of a run (see [`effective_config`]).
pub fn config(
    repo: &Path,
    agent: Option<&str>,
    budget: &BudgetFlags,
    files: &ConfigFiles,
) -> Result<Config, String> {
    effective_config(repo, agent, budget, files).map(EffectiveConfig::into_config)
}

#[cfg(test)]
mod tests {
    use super::parse_wall;

    #[test]
    fn a_wall_limit_reads_seconds_and_units() {
        assert_eq!(parse_wall("600"), Ok(600));
        assert_eq!(parse_wall("90s"), Ok(90));
        assert_eq!(parse_wall("1.5m"), Ok(90));
        assert_eq!(parse_wall("2h"), Ok(7200));
        assert!(parse_wall("0").unwrap_err().contains("at least one second"));
        assert!(parse_wall("10d").unwrap_err().contains("got \"10d\""));
        assert!(parse_wall("soon").unwrap_err().contains("\"soon\""));
    }
}
