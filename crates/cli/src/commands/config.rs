//! `orchestrator config show`: the effective settings, one `key = value`
//! line each, with the file, variable or flag it comes from.

use std::fmt::Write as _;
use std::path::Path;

use orchestrator_adapters::config::{EffectiveConfig, MainFile};

use super::{Exit, out};
use crate::ConfigShowArgs;
use crate::setup::{self, ConfigFiles};

/// Runs `config show`.
pub fn show(args: &ConfigShowArgs, files: &ConfigFiles) -> Exit {
    match setup::effective_config(&args.repo, args.agent.as_deref(), &args.budget, files) {
        Ok(effective) => {
            out(&render(&effective, files, &args.repo));
            Exit::Success
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::BadInput
        }
    }
}

/// The files considered (read or not found), then the settings, aligned,
/// each with its origin.
pub fn render(effective: &EffectiveConfig, files: &ConfigFiles, repo: &Path) -> String {
    let read: Vec<&Path> = effective.files().map(|(path, _)| path).collect();
    let status = |path: &Path| {
        if read.contains(&path) {
            "read"
        } else {
            "not found"
        }
    };
    let mut text = String::from(
        "# Effective settings, highest layer first: flags, environment, --config FILE\n\
         # (or else the repository's orchestrator.toml), the user file, defaults.\n",
    );
    match &files.user {
        Some(path) => {
            let _ = writeln!(text, "# user file: {} ({})", path.display(), status(path));
        }
        None => text.push_str("# user file: none (neither XDG_CONFIG_HOME nor HOME is set)\n"),
    }
    let main = match files.main_file(repo) {
        MainFile::Explicit(path) => ("--config", path.to_owned()),
        MainFile::Discover(repo) => (
            "repository file",
            repo.join(orchestrator_adapters::config::CONFIG_FILE_NAME),
        ),
    };
    let _ = writeln!(
        text,
        "# {}: {} ({})",
        main.0,
        main.1.display(),
        status(&main.1)
    );
    let entries = effective.entries();
    let width = entries
        .iter()
        .map(|(key, value, _)| key.len() + value.len() + 3)
        .max()
        .unwrap_or(0);
    for (key, value, origin) in entries {
        let setting = format!("{key} = {value}");
        let _ = writeln!(text, "{setting:<width$}  # {origin}");
    }
    text
}
