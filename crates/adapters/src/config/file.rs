//! The whole file ([`Config`]): reading and parsing it (errors with the
//! line and column), the checks serde cannot make, and the environment and
//! `--agent` overrides applied on top of one file.

use std::path::Path;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::agent::{AgentKind, AgentSection, AgentSpec};
use super::budget::{BudgetSection, Prices, check_prices};
use super::cache::{ByteCount, CacheSection, ENV_CACHE_MAX_SIZE};
use super::command::{CommandLine, CommandValue};
use super::flows::{CiAutofixSection, PlanexSection, ReviewFixSection, TestsSection};
use super::runner::RunnerSection;
use super::worktree::WorktreeSection;
use super::{
    CONFIG_FILE_NAME, CONFIG_VERSION, ConfigError, ENV_AGENT, ENV_OPENAI_BASE_URL, ENV_OPENAI_MODEL,
};

/// The whole `orchestrator.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// Format version; must be [`CONFIG_VERSION`].
    #[serde(deserialize_with = "deserialize_version")]
    pub version: u32,
    /// Which agent to use and how each kind is set up.
    #[serde(default)]
    pub agent: AgentSection,
    /// The project's test command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestsSection>,
    /// Knobs of the review-fix flow.
    #[serde(default)]
    pub review_fix: ReviewFixSection,
    /// Knobs of the lite-planex flow.
    #[serde(default)]
    pub planex: PlanexSection,
    /// Knobs of the CI auto-fix flow.
    #[serde(default)]
    pub ci_autofix: CiAutofixSection,
    /// Limits on what a run's agent may spend.
    #[serde(default)]
    pub budget: BudgetSection,
    /// Token prices by model name (US dollars per million tokens).
    #[serde(default, skip_serializing_if = "Prices::is_empty")]
    pub prices: Prices,
    /// What each worktree a flow makes is given.
    #[serde(default)]
    pub worktree: WorktreeSection,
    /// Where test runs and task commands run (here, or on a Ray cluster).
    #[serde(default)]
    pub runner: RunnerSection,
    /// How much the engine's cache folder may hold.
    #[serde(default)]
    pub cache: CacheSection,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            version: CONFIG_VERSION,
            agent: AgentSection::default(),
            tests: None,
            review_fix: ReviewFixSection::default(),
            planex: PlanexSection::default(),
            ci_autofix: CiAutofixSection::default(),
            budget: BudgetSection::default(),
            prices: Prices::new(),
            worktree: WorktreeSection::default(),
            runner: RunnerSection::default(),
            cache: CacheSection::default(),
        }
    }
}

fn deserialize_version<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let version = u32::deserialize(d)?;
    if version == CONFIG_VERSION {
        Ok(version)
    } else {
        Err(de::Error::custom(format!(
            "unsupported config version {version}; this build reads version {CONFIG_VERSION}"
        )))
    }
}

impl Config {
    /// Reads and checks the file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse_with_origin(&text, path)
    }

    /// Loads `orchestrator.toml` from the repository root `repo_dir`;
    /// `Ok(None)` when there is no such file.
    pub fn discover(repo_dir: impl AsRef<Path>) -> Result<Option<Self>, ConfigError> {
        let path = repo_dir.as_ref().join(CONFIG_FILE_NAME);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse_with_origin(&text, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    /// Parses and checks configuration text (errors name `<string>` as the
    /// file).
    pub fn parse_str(text: &str) -> Result<Self, ConfigError> {
        Self::parse_with_origin(text, Path::new("<string>"))
    }

    pub(super) fn parse_with_origin(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = match e.span() {
                Some(span) => {
                    let (l, c) = line_column(text, span.start);
                    (Some(l), Some(c))
                }
                None => (None, None),
            };
            ConfigError::Parse {
                path: path.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })?;
        config.check().map_err(|e| match e {
            ConfigError::Invalid { message, .. } => ConfigError::Invalid {
                path: Some(path.to_owned()),
                message,
            },
            // Name the file here too: the bare error says only the field.
            command @ ConfigError::Command { .. } => ConfigError::Invalid {
                path: Some(path.to_owned()),
                message: command.to_string(),
            },
            other => other,
        })?;
        Ok(config)
    }

    /// Checks what serde cannot: the commands split, and kind `command` has
    /// a command.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(tests) = &self.tests {
            tests.command_line()?;
        }
        if let Some(command) = &self.agent.command {
            command.command_line()?;
        }
        let invalid = |message| ConfigError::Invalid {
            path: None,
            message,
        };
        self.budget.check().map_err(invalid)?;
        self.worktree.check().map_err(invalid)?;
        check_prices(&self.prices).map_err(invalid)?;
        self.agent_spec().map(|_| ())
    }

    /// Applies the environment overrides from the process environment.
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        self.apply_env_from(|var| std::env::var(var).ok())
    }

    /// Applies the environment overrides read through `lookup` (tests pass a
    /// map): `ORCHESTRATOR_AGENT` (as `--agent`), `OPENAI_BASE_URL`,
    /// `OPENAI_MODEL`, `ORCHESTRATOR_CACHE_MAX_SIZE`. Empty values are ignored.
    pub fn apply_env_from(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        if let Some(spec) = get(ENV_AGENT) {
            let spec = AgentSpec::parse(&spec).map_err(|e| ConfigError::Env {
                var: ENV_AGENT.to_owned(),
                source: Box::new(e),
            })?;
            self.apply_agent_spec(&spec);
        }
        if let Some(url) = get(ENV_OPENAI_BASE_URL) {
            self.agent.openai.get_or_insert_default().base_url = Some(url.trim().to_owned());
        }
        if let Some(model) = get(ENV_OPENAI_MODEL) {
            self.agent.openai.get_or_insert_default().model = Some(model.trim().to_owned());
        }
        if let Some(size) = get(ENV_CACHE_MAX_SIZE) {
            let size = ByteCount::parse(&size).map_err(|message| ConfigError::Env {
                var: ENV_CACHE_MAX_SIZE.to_owned(),
                source: Box::new(ConfigError::Invalid {
                    path: None,
                    message,
                }),
            })?;
            self.cache.max_size = Some(size);
        }
        Ok(())
    }

    /// Selects the agent named by `spec` (from `--agent`); for
    /// `command:<cmd>` the command replaces `[agent.command]`'s, keeping its
    /// other settings.
    pub fn apply_agent_spec(&mut self, spec: &AgentSpec) {
        self.agent.kind = spec.kind();
        if let AgentSpec::OpenAiModel(model) = spec {
            self.agent.openai.get_or_insert_default().model = Some(model.clone());
        }
        if let AgentSpec::Command(line) = spec {
            let section = self.agent.command.get_or_insert_default();
            match line {
                CommandLine::Argv(argv) => {
                    section.argv = Some(CommandValue::Argv(argv.clone()));
                    section.shell = false;
                }
                CommandLine::Shell(script) => {
                    section.argv = Some(CommandValue::Text(script.clone()));
                    section.shell = true;
                }
            }
        }
    }

    /// The selected agent as an [`AgentSpec`] (for `command`, with its
    /// command line). The per-kind settings stay in [`Config::agent`].
    pub fn agent_spec(&self) -> Result<AgentSpec, ConfigError> {
        Ok(match self.agent.kind {
            AgentKind::Builtin => AgentSpec::Builtin,
            AgentKind::Claude => AgentSpec::Claude,
            AgentKind::Codex => AgentSpec::Codex,
            AgentKind::Gemini => AgentSpec::Gemini,
            AgentKind::Openai => AgentSpec::OpenAi,
            AgentKind::Command => match &self.agent.command {
                Some(section) => AgentSpec::Command(section.command_line()?),
                None => {
                    return Err(ConfigError::Invalid {
                        path: None,
                        message: "agent kind `command` needs an [agent.command] section with argv"
                            .into(),
                    });
                }
            },
        })
    }
}

/// Line and column (both 1-based, column in characters) of byte `offset`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_characters() {
        let text = "ab\ncé\nx";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 3), (2, 1));
        assert_eq!(line_column(text, 6), (2, 3));
        assert_eq!(line_column(text, 7), (3, 1));
        assert_eq!(line_column(text, 100), (3, 2));
    }
}
