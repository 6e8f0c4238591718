//! `orchestrator findings list|show|decline|reopen`: the repository's
//! findings ledger (`.review/ledger.json`, see
//! `orchestrator_review_fix::findings_ledger`). Edits take the repository
//! lock, so they never race a review-fix run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use orchestrator_review_fix::files::now;
use orchestrator_review_fix::findings_ledger::{
    Event, FindingsLedger, LedgerEntry, Status, UnknownId, ledger_path,
};
use orchestrator_review_fix::{ReviewFixError, lock_repository};

use super::{Exit, out};

/// `orchestrator findings …`.
#[derive(Debug, Subcommand)]
pub enum FindingsCommand {
    /// List every finding the ledger knows: its key (the ID the other
    /// commands take), status, place and title.
    List(RepoArgs),
    /// Show one finding and its history.
    Show(IdArgs),
    /// Decline a finding: later review-fix runs skip it.
    Decline(DeclineArgs),
    /// Reopen a finding (declined, failed, fixed, not fixable): the next
    /// review-fix run tries it again.
    Reopen(IdArgs),
}

/// The repository whose ledger is read.
#[derive(Debug, clap::Args)]
pub struct RepoArgs {
    /// The repository (its `.review/ledger.json`).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
}

/// One finding of the ledger.
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// The finding's key as `list` shows it (a unique prefix will do), or
    /// the finding id it was last seen under.
    pub id: String,
    /// The repository (its `.review/ledger.json`).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
}

/// Arguments of `orchestrator findings decline`.
#[derive(Debug, clap::Args)]
pub struct DeclineArgs {
    /// The finding's key as `list` shows it (a unique prefix will do), or
    /// the finding id it was last seen under.
    pub id: String,
    /// Why it is not to be fixed (kept in its history).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// The repository (its `.review/ledger.json`).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
}

/// Runs the command.
pub fn run(command: &FindingsCommand) -> Exit {
    let result = match command {
        FindingsCommand::List(args) => read(&args.repo).map(|ledger| {
            out(&render_list(&ledger, &ledger_path(&args.repo)));
            Exit::Success
        }),
        FindingsCommand::Show(args) => show(args),
        FindingsCommand::Decline(args) => {
            if args.reason.trim().is_empty() {
                Err((Exit::BadInput, "--reason must say why".to_owned()))
            } else {
                let event = Event::Declined {
                    reason: args.reason.trim().to_owned(),
                };
                edit(&args.repo, &args.id, event, "declined")
            }
        }
        FindingsCommand::Reopen(args) => edit(&args.repo, &args.id, Event::Reopened, "reopened"),
    };
    result.unwrap_or_else(|(exit, message)| {
        eprintln!("error: {message}");
        exit
    })
}

type Failure = (Exit, String);

fn failure(e: &ReviewFixError) -> Failure {
    let exit = if e.exit_code() == 2 {
        Exit::BadInput
    } else {
        Exit::SomeFailed
    };
    (exit, e.to_string())
}

fn read(repo: &Path) -> Result<FindingsLedger, Failure> {
    FindingsLedger::read(&ledger_path(repo)).map_err(|e| failure(&e))
}

fn resolve(ledger: &FindingsLedger, repo: &Path, id: &str) -> Result<String, Failure> {
    ledger
        .resolve(id)
        .map_err(|e| (Exit::BadInput, unknown_id(&e, &ledger_path(repo))))
}

/// The error for an id that names no single finding, with the closest.
fn unknown_id(e: &UnknownId, path: &Path) -> String {
    let closest = if e.closest.is_empty() {
        "the ledger is empty".to_owned()
    } else {
        format!("closest: {}", e.closest.join(", "))
    };
    if e.matches > 1 {
        format!(
            "`{}` names {} findings in {}; give more of the key ({closest})",
            e.id,
            e.matches,
            path.display()
        )
    } else {
        format!("no finding `{}` in {} ({closest})", e.id, path.display())
    }
}

fn show(args: &IdArgs) -> Result<Exit, Failure> {
    let ledger = read(&args.repo)?;
    let key = resolve(&ledger, &args.repo, &args.id)?;
    if let Some(entry) = ledger.entries.get(&key) {
        out(&render_entry(&key, entry));
    }
    Ok(Exit::Success)
}

/// Appends `event` to the entry `id` names, under the repository lock.
fn edit(repo: &Path, id: &str, event: Event, done: &str) -> Result<Exit, Failure> {
    let _lock = lock_repository(repo).map_err(|e| failure(&e))?;
    let path = ledger_path(repo);
    let mut ledger = read(repo)?;
    let key = resolve(&ledger, repo, id)?;
    ledger.record(&key, event, &now());
    ledger.write(&path).map_err(|e| failure(&e))?;
    out(&format!("{key} {done}\n"));
    Ok(Exit::Success)
}

/// What a status adds after its name (`fixed in abc1234`, the reason).
fn status_detail(status: &Status) -> String {
    match status {
        Status::Open => String::new(),
        Status::Fixed { commit } => {
            let short: String = commit.chars().take(12).collect();
            format!(" in {short}")
        }
        Status::Failed { reason } | Status::Declined { reason } => {
            format!(": {}", reason.lines().next().unwrap_or_default())
        }
        Status::NotFixable { agent, reason } => {
            format!(" by {agent}: {}", reason.lines().next().unwrap_or_default())
        }
    }
}

fn place(entry: &LedgerEntry) -> String {
    match (&entry.file, entry.line) {
        (Some(file), Some(line)) => format!("{file}:{line}"),
        (Some(file), None) => file.clone(),
        _ => "-".to_owned(),
    }
}

/// `findings list`: one line per finding, then its status's detail.
pub fn render_list(ledger: &FindingsLedger, path: &Path) -> String {
    if ledger.entries.is_empty() {
        return format!(
            "no findings in {}: review-fix records each finding's outcome there\n",
            path.display()
        );
    }
    let mut out = String::new();
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for (key, entry) in &ledger.entries {
        let status = entry.status();
        *counts.entry(status.name()).or_default() += 1;
        let _ = writeln!(
            out,
            "{key}  {:<11}  {}  {}",
            status.name(),
            place(entry),
            entry.title
        );
        let detail = status_detail(&status);
        if !detail.is_empty() {
            let _ = writeln!(out, "    {}{detail}", status.name());
        }
    }
    let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let _ = writeln!(
        out,
        "{} findings ({})",
        ledger.entries.len(),
        counts.join(", ")
    );
    out
}

/// `findings show`: the entry and its history.
fn render_entry(key: &str, entry: &LedgerEntry) -> String {
    let status = entry.status();
    let mut out = format!("finding {key}\n");
    let _ = writeln!(out, "  id:       {}", entry.finding_id);
    let _ = writeln!(out, "  title:    {}", entry.title);
    if let Some(category) = &entry.category {
        let _ = writeln!(out, "  category: {category}");
    }
    let _ = writeln!(out, "  at:       {}", place(entry));
    let _ = writeln!(
        out,
        "  status:   {}{}",
        status.name(),
        status_detail(&status)
    );
    let _ = writeln!(out, "history:");
    for e in &entry.history {
        let what = match &e.event {
            Event::Seen { session } => format!("seen by session {session}"),
            Event::Fixed { commit } => format!("fixed in {commit}"),
            Event::Failed { reason } => format!("failed: {reason}"),
            Event::Declined { reason } => format!("declined: {reason}"),
            Event::NotFixable { agent, reason } => format!("not fixable by {agent}: {reason}"),
            Event::Reopened => "reopened".to_owned(),
        };
        let _ = writeln!(out, "  {}  {what}", e.at);
    }
    out
}
