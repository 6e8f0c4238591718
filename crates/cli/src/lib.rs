//! # orchestrator-tool
//!
//! The `orchestrator` command: a thin front end over the orchestrator
//! libraries. It parses arguments ([`Cli`]), picks adapters, renders events and
//! maps outcomes to exit codes ([`Exit`]). It holds no logic a library user
//! would need: every command here is a call into `orchestrator-core` or a
//! feature crate.
//!
//! Data flow: `argv → Cli (clap) → command function → library call → output
//! (text or JSON on stdout, diagnostics on stderr) → exit code`.
//!
//! ## Public API
//!
//! [`run`] (what `main` calls) with a parsed [`Cli`], returning an [`Exit`];
//! [`commands`] holds one module per subcommand (its arguments and wiring),
//! [`render`] the shared output helpers, [`setup`] tracing, reporters and
//! adapter choice, and [`remote`] the Ray runner a run may use. It is a library only so that its tests and the man page
//! can reach the parser; nothing here is meant for embedders.

pub mod commands;
pub mod remote;
pub mod render;
pub mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use commands::{Exit, run};

const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  the job ran and some items failed
  2  bad input or usage
  3  interrupted, a human is needed or a run limit reached (resumable)

Settings, highest first: flags, environment, --config FILE (or else the
repository's orchestrator.toml), the user file, defaults. See them with
`orchestrator config show`.

Environment:
  ORCHESTRATOR_AGENT  the agent, as --agent takes it (--agent wins)
  OPENAI_BASE_URL     overrides [agent.openai] base_url
  OPENAI_MODEL        overrides [agent.openai] model
  OPENAI_API_KEY      the openai agent's key (or the variable [agent.openai] api_key_env names)
  ORCHESTRATOR_CACHE_DIR       the cache folder (worktrees, build caches); default
                               $XDG_CACHE_HOME/orchestrator or ~/.cache/orchestrator
  ORCHESTRATOR_CACHE_MAX_SIZE  overrides [cache] max_size (\"20GiB\")
  XDG_CONFIG_HOME     the user file is $XDG_CONFIG_HOME/orchestrator/config.toml
                      (~/.config/orchestrator/config.toml when unset)
  NO_COLOR            set and not empty: no colour under --color auto
  RUST_LOG            log filter for stderr (tracing EnvFilter syntax); overrides -v";

/// Runs AI coding agents like a careful senior engineer: plans in dependency
/// waves, fixes review findings one verified commit at a time, repairs failed
/// CI checks under an explicit escalation policy.
#[derive(Debug, Parser)]
#[command(name = "orchestrator", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Read this settings file instead of the repository's orchestrator.toml
    /// (the user file still applies beneath it).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Colour on stderr: auto (only when stderr is a terminal and NO_COLOR is
    /// unset or empty), always, never.
    #[arg(
        long,
        global = true,
        value_name = "WHEN",
        value_enum,
        default_value_t = ColorChoice::Auto,
        hide_possible_values = true
    )]
    pub color: ColorChoice,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Explore, plan and execute a requirement in dependency waves (lite-planex).
    Planex(commands::planex::PlanexArgs),
    /// Fix code-review findings, one verified commit per fix.
    ReviewFix(commands::review_fix::ReviewFixArgs),
    /// Classify a failed CI check and fix it under the cadence matrix.
    CiAutofix(commands::ci_autofix::CiAutofixArgs),
    /// Group review findings into planning batches (inspect the batcher).
    Batch(BatchArgs),
    /// Compute the dependency waves of a tasks.csv (inspect the planner).
    Waves(WavesArgs),
    /// Serve the flows as MCP tools on stdio (or HTTP with --listen), for
    /// agent hosts (Claude Code, Codex, Gemini CLI, any MCP client).
    Mcp(commands::mcp::McpArgs),
    /// A live dashboard of the sessions in the browser: watch runs, read
    /// their diffs and failures, approve a waiting plan, cancel a run.
    Serve(commands::serve::ServeArgs),
    /// Show the effective settings and where each comes from.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// What the engine saved before it reverted something: list it, bring
    /// an entry back, clean it away.
    #[command(subcommand)]
    Trash(commands::trash::TrashCommand),
    /// The repositories' folders in the engine's cache (build caches,
    /// worktrees): list them, clean them away.
    #[command(subcommand)]
    Cache(commands::cache::CacheCommand),
    /// The findings ledger across review-fix runs: list it, show one
    /// finding's history, decline or reopen a finding.
    #[command(subcommand)]
    Findings(commands::findings::FindingsCommand),
    /// Print a shell completion script to stdout.
    Completions(CompletionsArgs),
    /// Print the man page (roff) to stdout.
    Man,
}

/// `orchestrator config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every effective setting with the file, variable or flag it
    /// comes from.
    Show(ConfigShowArgs),
}

/// Arguments of `orchestrator config show`.
#[derive(Debug, clap::Args)]
pub struct ConfigShowArgs {
    /// The repository whose orchestrator.toml applies.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Show the settings as a run with this --agent would use them.
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    /// Show the settings as a run with these limits would use them.
    #[command(flatten)]
    pub budget: setup::BudgetFlags,
}

/// Arguments of `orchestrator completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write the script for.
    pub shell: clap_complete::Shell,
}

/// When to colour stderr (`--color`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stderr is a terminal and `NO_COLOR` is unset or empty.
    #[default]
    Auto,
    /// Always colour, even into a file or pipe (and despite `NO_COLOR`).
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether to colour a stream: `is_terminal` says whether it is a
    /// terminal, `no_color` is the value of `NO_COLOR`, if set.
    pub fn enabled(self, is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && no_color.is_none_or(|v| v.is_empty()),
        }
    }

    /// Whether to colour this process's stderr.
    pub fn for_stderr(self) -> bool {
        use std::io::IsTerminal as _;
        self.enabled(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    }
}

/// The man page of `orchestrator` (roff), as `docs/man/orchestrator.1` holds it.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    use clap::CommandFactory as _;
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    Ok(page)
}

/// Writes the completion script for `shell` to `out`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory as _;
    clap_complete::generate(shell, &mut Cli::command(), "orchestrator", out);
}

/// Arguments of `orchestrator batch`.
#[derive(Debug, clap::Args)]
pub struct BatchArgs {
    /// A findings file as `review-fix --fix` reads it (review-cycle export,
    /// SARIF, rdjson/rdjsonl, cargo/clippy `--message-format=json`, ruff's
    /// or ESLint's JSON; detected from the content), a review directory
    /// (its newest export), or `-` for standard input.
    pub findings: PathBuf,
    /// Findings per batch.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `orchestrator waves`.
#[derive(Debug, clap::Args)]
pub struct WavesArgs {
    /// A lite-planex tasks.csv.
    pub tasks: PathBuf,
    /// Ignore unknown dependency ids with a warning (the seed's behaviour)
    /// instead of failing.
    #[arg(long)]
    pub lenient: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Sets up tracing to stderr: `RUST_LOG` if set, else a level from `-v`;
/// coloured as `color` decides for stderr.
pub fn init_tracing(verbose: u8, color: ColorChoice) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color.for_stderr())
        .with_target(false)
        .try_init();
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::ColorChoice;

    #[test]
    fn colour_follows_the_flag_then_the_terminal_then_no_color() {
        let check =
            |choice: ColorChoice, terminal: bool, no_color: Option<&str>, expected: bool| {
                assert_eq!(
                    choice.enabled(terminal, no_color.map(OsStr::new)),
                    expected,
                    "{choice:?}, terminal {terminal}, NO_COLOR {no_color:?}"
                );
            };
        check(ColorChoice::Auto, true, None, true);
        check(ColorChoice::Auto, true, Some(""), true);
        check(ColorChoice::Auto, true, Some("1"), false);
        check(ColorChoice::Auto, false, None, false);
        check(ColorChoice::Always, false, Some("1"), true);
        check(ColorChoice::Never, true, None, false);
    }
}
