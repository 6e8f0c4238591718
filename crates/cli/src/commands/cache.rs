//! `orchestrator cache list|clean`: the per-repository folders in the
//! engine's cache folder (see `orchestrator_core::state::cache`), and the
//! upkeep every flow runs on them when it starts ([`claim_and_prune`]).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use jiff::Timestamp;
use orchestrator_core::state::cache::{
    CacheFolder, CacheKind, CacheLease, Clean, Owner, PruneReport, clean as clean_cache,
    describe_removal, list as list_cache,
};
use orchestrator_core::state::cache_dir;
use orchestrator_core::trash::human_size;

use super::{Exit, out};
use crate::setup::{self, ConfigFiles};

/// `orchestrator cache …`.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List the repositories' folders in the cache: size, last use, whether
    /// the repository still exists.
    List(ListArgs),
    /// Remove the build caches no running flow holds (all, one
    /// repository's, or only those whose repository is gone), saying what
    /// it frees. Worktree folders go only with their repository.
    Clean(CleanArgs),
}

/// Arguments of `orchestrator cache list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// The repository whose settings give the cap (`[cache] max_size`).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
}

/// Arguments of `orchestrator cache clean`.
#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// Only this repository's folders (its path, as `list` shows it; it
    /// may be gone).
    #[arg(long, value_name = "PATH", conflicts_with = "stale")]
    pub repo: Option<PathBuf>,
    /// Only the folders whose repository is gone.
    #[arg(long)]
    pub stale: bool,
}

/// Runs the command.
pub fn run(command: &CacheCommand, files: &ConfigFiles) -> Exit {
    let cache = cache_dir();
    match command {
        CacheCommand::List(args) => {
            let cap = match cache_cap(&args.repo, files) {
                Ok(cap) => cap,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Exit::BadInput;
                }
            };
            match list_cache(&cache) {
                Ok(folders) => {
                    out(&render_list(&cache, &folders, cap, Timestamp::now()));
                    Exit::Success
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Exit::SomeFailed
                }
            }
        }
        CacheCommand::Clean(args) => {
            let what = match (&args.repo, args.stale) {
                (Some(repo), _) => Clean::Repo(std::path::absolute(repo).unwrap_or(repo.clone())),
                (None, true) => Clean::Stale,
                (None, false) => Clean::All,
            };
            match clean_cache(&cache, &what) {
                Ok(report) => {
                    out(&render_clean(&report));
                    Exit::Success
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Exit::SomeFailed
                }
            }
        }
    }
}

/// The cap on the build caches from `repo`'s settings and the environment.
pub fn cache_cap(repo: &Path, files: &ConfigFiles) -> Result<u64, String> {
    let config = setup::config(repo, None, &setup::BudgetFlags::default(), files)?;
    Ok(config.cache.max_size_bytes())
}

/// What a flow does with the cache when it starts (see
/// [`orchestrator_core::state::cache::claim_and_prune`]), its notice and
/// warnings logged: the lease is held until dropped. Never fails the run.
pub fn claim_and_prune(repo: &Path, cap: u64) -> Option<CacheLease> {
    let upkeep = orchestrator_core::state::cache::claim_and_prune(repo, cap);
    if let Some(notice) = &upkeep.notice {
        tracing::info!("{notice}");
    }
    for warning in &upkeep.warnings {
        tracing::warn!("{warning}");
    }
    if let Some(left) = &upkeep.left_alone {
        tracing::info!("{left}");
    }
    tracing::debug!(
        "cache: claimed and pruned in {} ms",
        upkeep.took.as_millis()
    );
    upkeep.lease
}

/// `cache list`'s text: a header with the totals and the cap, then one line
/// per folder.
pub fn render_list(cache: &Path, folders: &[CacheFolder], cap: u64, now: Timestamp) -> String {
    let total = |kind: CacheKind| -> u64 {
        folders
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| f.bytes)
            .sum()
    };
    let mut text = format!(
        "cache {}: build caches {} (cap {}), worktrees {}\n",
        cache.display(),
        human_size(total(CacheKind::Targets)),
        human_size(cap),
        human_size(total(CacheKind::Worktrees))
    );
    if folders.is_empty() {
        text.push_str("no repository folders\n");
        return text;
    }
    text.push_str(&format!(
        "{:<9}  {:>10}  {:<16}  {:<7}  REPOSITORY\n",
        "KIND", "SIZE", "LAST USED (UTC)", "STATE"
    ));
    for f in folders {
        let state = match (&f.owner, f.in_use) {
            (_, true) => "in use",
            (Owner::Repo { exists: true, .. }, _) => "exists",
            (Owner::Repo { exists: false, .. }, _) => "gone",
            (Owner::Unknown, _) => "unknown",
        };
        let repo = match &f.owner {
            Owner::Repo { path, .. } => path.display().to_string(),
            Owner::Unknown => format!("(no marker: {})", f.key),
        };
        text.push_str(&format!(
            "{:<9}  {:>10}  {:<16}  {state:<7}  {repo}\n",
            f.kind.dir_name(),
            human_size(f.bytes),
            f.last_used.strftime("%Y-%m-%d %H:%M").to_string()
        ));
    }
    let stale: Vec<&CacheFolder> = folders
        .iter()
        .filter(|f| !f.in_use && f.is_stale(now, orchestrator_core::state::cache::UNMARKED_GRACE))
        .collect();
    if !stale.is_empty() {
        text.push_str(&format!(
            "{} folder(s) outlived their repository ({}): `orchestrator cache clean --stale` removes them\n",
            stale.len(),
            human_size(stale.iter().map(|f| f.bytes).sum())
        ));
    }
    text
}

/// `cache clean`'s text: each folder removed or skipped, and what it freed.
pub fn render_clean(report: &PruneReport) -> String {
    let mut text = String::new();
    for removal in &report.removed {
        text.push_str(&format!(
            "removed {} ({}): {}\n",
            removal.folder.path.display(),
            human_size(removal.folder.bytes),
            describe_removal(removal.reason, &removal.folder.owner)
        ));
    }
    for (folder, why) in &report.skipped {
        text.push_str(&format!("kept {}: {why}\n", folder.path.display()));
    }
    text.push_str(&format!("freed {}\n", human_size(report.freed())));
    text
}

#[cfg(test)]
mod tests;
