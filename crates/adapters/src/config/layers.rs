//! Layered settings: the user's file under the repository's (or the one
//! `--config` names), then the environment, then the command line, with the
//! origin of every value kept for `orchestrator config show`.
//!
//! Files are merged as TOML tables before they are deserialized: a table
//! merges key by key, any other value (strings, numbers, arrays) replaces the
//! lower file's. Each file is first checked on its own, so an error names the
//! file, line and column it comes from.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::{
    AgentSpec, CONFIG_FILE_NAME, Config, ConfigError, ENV_AGENT, ENV_CACHE_MAX_SIZE,
    ENV_OPENAI_BASE_URL, ENV_OPENAI_MODEL,
};

/// The user configuration file below a configuration folder.
const USER_CONFIG_RELATIVE: [&str; 2] = ["orchestrator", "config.toml"];

/// The user configuration file for the process environment (see
/// [`user_config_path_from`]).
pub fn user_config_path() -> Option<PathBuf> {
    user_config_path_from(|var| std::env::var_os(var).map(|v| v.to_string_lossy().into_owned()))
}

/// The user configuration file: `$XDG_CONFIG_HOME/orchestrator/config.toml`
/// when `XDG_CONFIG_HOME` is an absolute path (the XDG rule: a relative one
/// is ignored), else `$HOME/.config/orchestrator/config.toml`; `None`
/// without either. The file need not exist.
pub fn user_config_path_from(lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let get = |var: &str| lookup(var).filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = get("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| get("HOME").map(|home| home.join(".config")))?;
    Some(
        USER_CONFIG_RELATIVE
            .iter()
            .fold(base, |p, part| p.join(part)),
    )
}

/// What a configuration file is to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileRole {
    /// The user's file ([`user_config_path`]), lowest of the files.
    User,
    /// The repository's `orchestrator.toml`.
    Repository,
    /// The file named by `--config`, read instead of the repository's.
    Explicit,
}

impl FileRole {
    fn label(self) -> &'static str {
        match self {
            FileRole::User => "user file",
            FileRole::Repository => "repository file",
            FileRole::Explicit => "--config",
        }
    }
}

/// Where one effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// No layer set it: the built-in default.
    Default,
    /// A configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// What the file is to the run.
        role: FileRole,
    },
    /// An environment variable.
    Env(String),
    /// A command-line flag.
    Flag(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File { path, role } => write!(f, "{} {}", role.label(), path.display()),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::Flag(flag) => f.write_str(flag),
        }
    }
}

/// Which file sits above the user's.
#[derive(Debug, Clone, Copy)]
pub enum MainFile<'a> {
    /// `orchestrator.toml` in this repository root, when it exists.
    Discover(&'a Path),
    /// This file (`--config FILE`), which must exist; the repository's file
    /// is then not read.
    Explicit(&'a Path),
}

/// The effective settings and where each came from. Precedence, highest
/// first: flags ([`EffectiveConfig::apply_agent_spec`]), environment
/// ([`EffectiveConfig::apply_env_from`]), the main file ([`MainFile`]), the
/// user file, defaults.
#[derive(Debug, Clone)]
pub struct EffectiveConfig {
    config: Config,
    /// Files that were read, lowest first, with their tables.
    files: Vec<(PathBuf, FileRole, toml::Table)>,
    /// Values set by the environment or a flag, by dotted key.
    overrides: BTreeMap<String, Origin>,
}

impl EffectiveConfig {
    /// Reads the user file `user` (skipped when `None` or missing) and the
    /// main file, and merges them, the main file on top.
    pub fn load(user: Option<&Path>, main: MainFile<'_>) -> Result<Self, ConfigError> {
        let mut files = Vec::new();
        if let Some(path) = user
            && let Some(table) = read_layer(path, false)?
        {
            files.push((path.to_owned(), FileRole::User, table));
        }
        let (path, role, required) = match main {
            MainFile::Discover(repo) => (repo.join(CONFIG_FILE_NAME), FileRole::Repository, false),
            MainFile::Explicit(path) => (path.to_owned(), FileRole::Explicit, true),
        };
        if let Some(table) = read_layer(&path, required)? {
            files.push((path, role, table));
        }
        let mut merged = toml::Table::new();
        for (_, _, table) in &files {
            merge(&mut merged, table);
        }
        let config = if files.is_empty() {
            Config::default()
        } else {
            let config: Config = merged.try_into().map_err(|e: toml::de::Error| {
                merged_error(&files, e.message().trim().to_owned())
            })?;
            config
                .check()
                .map_err(|e| merged_error(&files, e.to_string()))?;
            config
        };
        Ok(Self {
            config,
            files,
            overrides: BTreeMap::new(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The settings, consumed.
    pub fn into_config(self) -> Config {
        self.config
    }

    /// The files that were read, lowest first.
    pub fn files(&self) -> impl Iterator<Item = (&Path, FileRole)> {
        self.files.iter().map(|(p, role, _)| (p.as_path(), *role))
    }

    /// Applies the environment overrides read through `lookup`, as
    /// [`Config::apply_env_from`] does, recording which variable set what.
    pub fn apply_env_from(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for (var, key) in [
            (ENV_AGENT, "agent.kind"),
            (ENV_OPENAI_BASE_URL, "agent.openai.base_url"),
            (ENV_OPENAI_MODEL, "agent.openai.model"),
            (ENV_CACHE_MAX_SIZE, "cache.max_size"),
        ] {
            let only = |name: &str| if name == var { lookup(name) } else { None };
            let set = only(var).is_some_and(|v| !v.trim().is_empty());
            let before = flatten_config(&self.config);
            self.config.apply_env_from(only)?;
            // A variable that repeats a file's value still decides it.
            let keys: &[&str] = if set { &[key] } else { &[] };
            self.record(&before, keys, Origin::Env(var.to_owned()));
        }
        Ok(())
    }

    /// Applies the process environment (see [`EffectiveConfig::apply_env_from`]).
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        self.apply_env_from(|var| std::env::var(var).ok())
    }

    /// Applies a parsed `--agent` (named `flag` in [`Origin::Flag`]).
    pub fn apply_agent_spec(&mut self, spec: &AgentSpec, flag: &str) {
        let before = flatten_config(&self.config);
        self.config.apply_agent_spec(spec);
        self.record(&before, &["agent.kind"], Origin::Flag(flag.to_owned()));
    }

    /// Applies a command-line flag `flag` that sets the value at dotted
    /// `key` (`budget.max_cost_usd`) through `set`, then checks the result.
    pub fn apply_flag(
        &mut self,
        key: &str,
        flag: &str,
        set: impl FnOnce(&mut Config),
    ) -> Result<(), ConfigError> {
        let before = flatten_config(&self.config);
        set(&mut self.config);
        self.record(&before, &[key], Origin::Flag(flag.to_owned()));
        self.config.check().map_err(|e| match e {
            ConfigError::Invalid { message, .. } => ConfigError::Invalid {
                path: None,
                message: format!("{flag}: {message}"),
            },
            other => other,
        })
    }

    /// Marks as set by `origin` the `keys` it sets and every value that
    /// differs from `before`.
    fn record(&mut self, before: &BTreeMap<String, String>, keys: &[&str], origin: Origin) {
        for (key, value) in flatten_config(&self.config) {
            if keys.contains(&key.as_str()) || before.get(&key) != Some(&value) {
                self.overrides.insert(key, origin.clone());
            }
        }
    }

    /// Where the value at dotted `key` (`agent.openai.model`) came from.
    pub fn origin(&self, key: &str) -> Origin {
        if let Some(origin) = self.overrides.get(key) {
            return origin.clone();
        }
        self.files
            .iter()
            .rev()
            .find(|(_, _, table)| lookup_key(table, key))
            .map_or(Origin::Default, |(path, role, _)| Origin::File {
                path: path.clone(),
                role: *role,
            })
    }

    /// Every effective value as `(dotted key, value in TOML syntax, origin)`,
    /// in key order.
    pub fn entries(&self) -> Vec<(String, String, Origin)> {
        flatten_config(&self.config)
            .into_iter()
            .map(|(key, value)| {
                let origin = self.origin(&key);
                (key, value, origin)
            })
            .collect()
    }
}

/// Checks the file on its own (so errors carry its line) and returns its
/// table; `None` when it is missing and not `required`.
fn read_layer(path: &Path, required: bool) -> Result<Option<toml::Table>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    Config::parse_with_origin(&text, path)?;
    toml::from_str(&text)
        .map(Some)
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            path: path.to_owned(),
            line: None,
            column: None,
            message: e.message().trim().to_owned(),
        })
}

fn merged_error(files: &[(PathBuf, FileRole, toml::Table)], message: String) -> ConfigError {
    let names: Vec<String> = files
        .iter()
        .map(|(p, role, _)| format!("{} {}", role.label(), p.display()))
        .collect();
    ConfigError::Invalid {
        path: None,
        message: format!("{message} (in the merge of {})", names.join(" and ")),
    }
}

/// Merges `upper` into `lower`: tables key by key, other values replaced.
fn merge(lower: &mut toml::Table, upper: &toml::Table) {
    for (key, value) in upper {
        match (lower.get_mut(key), value) {
            (Some(toml::Value::Table(below)), toml::Value::Table(above)) => merge(below, above),
            _ => {
                lower.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Whether `table` holds dotted `key` (as a value or a table).
fn lookup_key(table: &toml::Table, key: &str) -> bool {
    let mut current = table;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        match current.get(part) {
            Some(toml::Value::Table(inner)) if parts.peek().is_some() => current = inner,
            Some(_) => return parts.peek().is_none(),
            None => return false,
        }
    }
    false
}

/// The settings as dotted keys and values in TOML syntax.
fn flatten_config(config: &Config) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // Serializing our own types into a TOML value cannot fail: every field
    // is a string, number, bool, array or table.
    if let Ok(toml::Value::Table(table)) = toml::Value::try_from(config) {
        flatten_table("", &table, &mut out);
    }
    out
}

fn flatten_table(prefix: &str, table: &toml::Table, out: &mut BTreeMap<String, String>) {
    for (key, value) in table {
        let dotted = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten_table(&dotted, inner, out),
            other => {
                out.insert(dotted, render_value(other));
            }
        }
    }
}

/// A value in TOML syntax (strings with JSON's escapes, which TOML basic
/// strings share).
fn render_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}")),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(render_value).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(table) => {
            let mut flat = BTreeMap::new();
            flatten_table("", table, &mut flat);
            let items: Vec<String> = flat.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            format!("{{ {} }}", items.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `(key, value, origin)` with the temporary folder written as `<tmp>`.
    fn check(effective: &EffectiveConfig, dir: &Path, expected: &[(&str, &str, &str)]) {
        let tmp = dir.display().to_string();
        let got: Vec<(String, String, String)> = effective
            .entries()
            .into_iter()
            .map(|(k, v, o)| (k, v, o.to_string().replace(&tmp, "<tmp>")))
            .collect();
        let expected: Vec<(String, String, String)> = expected
            .iter()
            .map(|(k, v, o)| ((*k).to_owned(), (*v).to_owned(), (*o).to_owned()))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn the_user_file_is_under_xdg_config_home_else_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |var: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == var)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            user_config_path_from(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/orchestrator/config.toml"))
        );
        assert_eq!(
            user_config_path_from(env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/orchestrator/config.toml"))
        );
        assert_eq!(
            user_config_path_from(env(&[("XDG_CONFIG_HOME", ""), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/orchestrator/config.toml"))
        );
        assert_eq!(user_config_path_from(env(&[])), None);
    }

    #[test]
    fn the_repository_file_wins_over_the_user_file_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let user = write(
            dir.path(),
            "user/config.toml",
            "version = 1\n[agent]\nkind = \"openai\"\n[agent.openai]\nmodel = \"user-model\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[review_fix]\nbatch_size = 3\n",
        );
        write(
            dir.path(),
            "repo/orchestrator.toml",
            "version = 1\n[agent.openai]\nmodel = \"repo-model\"\n[tests]\ncommand = [\"make\", \"check\"]\n",
        );
        let effective =
            EffectiveConfig::load(Some(&user), MainFile::Discover(&dir.path().join("repo")))
                .unwrap();
        check(
            &effective,
            dir.path(),
            &[
                (
                    "agent.kind",
                    "\"openai\"",
                    "user file <tmp>/user/config.toml",
                ),
                (
                    "agent.openai.base_url",
                    "\"http://127.0.0.1:1/v1\"",
                    "user file <tmp>/user/config.toml",
                ),
                (
                    "agent.openai.model",
                    "\"repo-model\"",
                    "repository file <tmp>/repo/orchestrator.toml",
                ),
                (
                    "review_fix.batch_size",
                    "3",
                    "user file <tmp>/user/config.toml",
                ),
                (
                    "tests.command",
                    "[\"make\", \"check\"]",
                    "repository file <tmp>/repo/orchestrator.toml",
                ),
                (
                    "version",
                    "1",
                    "repository file <tmp>/repo/orchestrator.toml",
                ),
            ],
        );
    }

    #[test]
    fn env_and_flags_win_over_files_and_say_which() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "orchestrator.toml",
            "version = 1\n[agent]\nkind = \"codex\"\n[agent.openai]\nmodel = \"file\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        );
        let mut effective = EffectiveConfig::load(None, MainFile::Discover(dir.path())).unwrap();
        effective
            .apply_env_from(|var| match var {
                ENV_OPENAI_MODEL => Some("env-model".to_owned()),
                ENV_CACHE_MAX_SIZE => Some("5 GiB".to_owned()),
                // The same value as the file's: the variable still decides.
                ENV_OPENAI_BASE_URL => Some("http://127.0.0.1:9/v1".to_owned()),
                _ => None,
            })
            .unwrap();
        effective.apply_agent_spec(&AgentSpec::OpenAi, "--agent");
        check(
            &effective,
            dir.path(),
            &[
                ("agent.kind", "\"openai\"", "--agent"),
                (
                    "agent.openai.base_url",
                    "\"http://127.0.0.1:9/v1\"",
                    "env OPENAI_BASE_URL",
                ),
                ("agent.openai.model", "\"env-model\"", "env OPENAI_MODEL"),
                (
                    "cache.max_size",
                    "\"5GiB\"",
                    "env ORCHESTRATOR_CACHE_MAX_SIZE",
                ),
                ("version", "1", "repository file <tmp>/orchestrator.toml"),
            ],
        );
        // A flag that repeats the file's kind is still where it comes from.
        let mut effective = EffectiveConfig::load(None, MainFile::Discover(dir.path())).unwrap();
        effective.apply_agent_spec(&AgentSpec::Codex, "--agent");
        assert_eq!(
            effective.origin("agent.kind"),
            Origin::Flag("--agent".to_owned())
        );
    }

    #[test]
    fn an_explicit_file_replaces_the_repository_file_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "orchestrator.toml",
            "version = 1\n[agent]\nkind = \"codex\"\n",
        );
        let other = write(
            dir.path(),
            "other.toml",
            "version = 1\n[agent]\nkind = \"gemini\"\n",
        );
        let effective = EffectiveConfig::load(None, MainFile::Explicit(&other)).unwrap();
        check(
            &effective,
            dir.path(),
            &[
                ("agent.kind", "\"gemini\"", "--config <tmp>/other.toml"),
                ("version", "1", "--config <tmp>/other.toml"),
            ],
        );
        let missing = dir.path().join("missing.toml");
        let message = EffectiveConfig::load(None, MainFile::Explicit(&missing))
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(&format!(
                "failed to read config file {}:",
                missing.display()
            )),
            "{message}"
        );
    }

    #[test]
    fn no_file_gives_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let effective = EffectiveConfig::load(
            Some(&dir.path().join("none.toml")),
            MainFile::Discover(dir.path()),
        )
        .unwrap();
        assert_eq!(effective.config(), &Config::default());
        assert_eq!(effective.files().count(), 0);
        check(
            &effective,
            dir.path(),
            &[
                ("agent.kind", "\"builtin\"", "default"),
                ("version", "1", "default"),
            ],
        );
    }

    #[test]
    fn errors_name_the_file_and_line_or_the_merge() {
        let dir = tempfile::tempdir().unwrap();
        let user = write(
            dir.path(),
            "user.toml",
            "version = 1\n[agent]\nkindd = \"x\"\n",
        );
        let message = EffectiveConfig::load(Some(&user), MainFile::Discover(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(&format!(
                "failed to parse config file {} at line 3, column 1:",
                user.display()
            )),
            "{message}"
        );
        // Each file is fine alone; merged, the user's `shell = true` meets
        // the repository's argv array.
        let user = write(
            dir.path(),
            "user.toml",
            "version = 1\n[tests]\ncommand = \"make check\"\nshell = true\n",
        );
        let repo = write(
            dir.path(),
            "repo.toml",
            "version = 1\n[tests]\ncommand = [\"make\", \"check\"]\n",
        );
        let message = EffectiveConfig::load(Some(&user), MainFile::Explicit(&repo))
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            format!(
                "invalid config: invalid command in [tests] command: shell = true needs a string \
                 command, not an argv array (in the merge of user file {} and --config {})",
                user.display(),
                repo.display()
            )
        );
        // A file that is wrong alone is named with its own path.
        let repo = write(
            dir.path(),
            "repo.toml",
            "version = 1\n[tests]\ncommand = \"a | b\"\n",
        );
        let message = EffectiveConfig::load(Some(&user), MainFile::Explicit(&repo))
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(&format!(
                "invalid config in {}: invalid command in [tests] command:",
                repo.display()
            )),
            "{message}"
        );
    }
}
