//! `orchestrator trash list|restore|clean`: the sessions' `trash/` folders
//! (see `orchestrator_core::trash`), found under the repository's engine
//! folders (`.review/`, `.workflow/`, `.moai/`).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use orchestrator_core::trash::{
    MANIFEST, Restored, TRASH_DIR, Trash, TrashError, human_size, read_manifest, remove_trash,
    render_entries, session_of,
};

use super::{Exit, out};

/// `orchestrator trash …`.
#[derive(Debug, Subcommand)]
pub enum TrashCommand {
    /// List what the sessions' trash folders hold: entries, sizes, reasons.
    List(ListArgs),
    /// Bring one entry's bytes back (mode and symlink kept). Never
    /// overwrites a file whose content differs: it names it and stops.
    Restore(RestoreArgs),
    /// Delete the trash of every session (or of SESSION), saying what it
    /// frees. Nothing else ever deletes a trash.
    Clean(CleanArgs),
}

/// Arguments of `orchestrator trash list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only this session's trash (its folder name, as `list` shows it).
    pub session: Option<String>,
    /// The repository whose sessions are looked at.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
}

/// Arguments of `orchestrator trash restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// `SESSION:N` as `list` shows it, or `N` in the newest trash.
    pub entry: String,
    /// Write it under DIR (at its repository-relative path) instead of the
    /// repository.
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
    /// The repository whose sessions are looked at.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
}

/// Arguments of `orchestrator trash clean`.
#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// Only this session's trash.
    pub session: Option<String>,
    /// The repository whose sessions are looked at.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
}

/// Runs the command.
pub fn run(command: &TrashCommand) -> Exit {
    let result = match command {
        TrashCommand::List(args) => list(args),
        TrashCommand::Restore(args) => restore(args),
        TrashCommand::Clean(args) => clean(args),
    };
    result.unwrap_or_else(|(exit, message)| {
        eprintln!("error: {message}");
        exit
    })
}

type Failure = (Exit, String);

fn list(args: &ListArgs) -> Result<Exit, Failure> {
    let trashes = chosen(&args.repo, args.session.as_deref())?;
    if trashes.is_empty() {
        out("no trash: nothing was saved before a revert\n");
    }
    for dir in trashes {
        let entries = read_manifest(&dir).map_err(bad)?.entries;
        out(&render_entries(&session_of(&dir), &dir, &entries));
    }
    Ok(Exit::Success)
}

fn restore(args: &RestoreArgs) -> Result<Exit, Failure> {
    let (session, id) = match args.entry.rsplit_once(':') {
        Some((session, n)) => (Some(session), n),
        None => (None, args.entry.as_str()),
    };
    let id: u32 = id.parse().map_err(|_| {
        (
            Exit::BadInput,
            format!(
                "`{}` is not an entry: expected SESSION:N or N, as `orchestrator trash list` shows",
                args.entry
            ),
        )
    })?;
    let Some(dir) = chosen(&args.repo, session)?.into_iter().next() else {
        return Err((Exit::BadInput, "there is no trash to restore from".into()));
    };
    let root = args.to.clone().unwrap_or_else(|| args.repo.clone());
    match Trash::new(&dir).restore(id, &root) {
        Ok(Restored::Written(path)) => out(&format!("restored {}\n", path.display())),
        Ok(Restored::AlreadyThere(path)) => out(&format!(
            "{} already holds entry {id}'s content; nothing written\n",
            path.display()
        )),
        Err(e @ (TrashError::NoEntry { .. } | TrashError::BadPath { .. })) => {
            return Err((Exit::BadInput, e.to_string()));
        }
        Err(e) => return Err((Exit::SomeFailed, e.to_string())),
    }
    Ok(Exit::Success)
}

fn clean(args: &CleanArgs) -> Result<Exit, Failure> {
    let mut total = 0;
    for dir in chosen(&args.repo, args.session.as_deref())? {
        let freed = remove_trash(&dir).map_err(|e| (Exit::SomeFailed, e.to_string()))?;
        total += freed;
        out(&format!(
            "removed {} ({})\n",
            dir.display(),
            human_size(freed)
        ));
    }
    out(&format!("freed {}\n", human_size(total)));
    Ok(Exit::Success)
}

fn bad(e: TrashError) -> Failure {
    (Exit::BadInput, e.to_string())
}

/// The trash folders of `repo`, newest first, or only `session`'s (an
/// error naming the sessions there are when it has none).
fn chosen(repo: &Path, session: Option<&str>) -> Result<Vec<PathBuf>, Failure> {
    let all = find_trashes(repo);
    let Some(session) = session else {
        return Ok(all);
    };
    let picked: Vec<PathBuf> = all
        .iter()
        .filter(|d| session_of(d) == session)
        .cloned()
        .collect();
    if picked.is_empty() {
        let known: Vec<String> = all.iter().map(|d| session_of(d)).collect();
        return Err((
            Exit::BadInput,
            format!(
                "no session `{session}` has a trash under {} (sessions with one: {})",
                repo.display(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }
    Ok(picked)
}

/// Every `trash/` folder with a manifest under `repo`'s engine folders
/// (at most five levels down), newest manifest first.
fn find_trashes(repo: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending: Vec<(PathBuf, u32)> = [".review", ".workflow", ".moai"]
        .iter()
        .map(|d| (repo.join(d), 0))
        .collect();
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if entry.file_name() == TRASH_DIR && path.join(MANIFEST).is_file() {
                found.push(path);
            } else if depth < 5 {
                pending.push((path, depth + 1));
            }
        }
    }
    let modified = |d: &PathBuf| {
        std::fs::metadata(d.join(MANIFEST))
            .and_then(|m| m.modified())
            .ok()
    };
    found.sort_by_key(|d| std::cmp::Reverse((modified(d), d.clone())));
    found
}
