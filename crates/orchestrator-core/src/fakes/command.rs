//! [`ScriptedCommands`]: a command runner that answers from a script.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;

use super::lock;
use crate::command::{CommandError, CommandOutput, CommandRunner, CommandSpec};

/// One scripted rule: commands whose display line contains `needle` get the
/// queued outputs in order (the last repeats).
#[derive(Debug)]
struct Rule {
    needle: String,
    outputs: VecDeque<Result<CommandOutput, CommandError>>,
}

/// A [`CommandRunner`] that answers by matching the command line.
///
/// Rules are tried in the order they were added; the first whose text occurs
/// in the command line (`program args…`) answers. An unmatched command fails
/// to spawn, like a program that is not installed. Every spec is recorded.
#[derive(Debug, Default)]
pub struct ScriptedCommands {
    rules: Mutex<Vec<Rule>>,
    calls: Mutex<Vec<CommandSpec>>,
}

impl ScriptedCommands {
    /// A runner with no rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder: commands containing `needle` exit with `code` and print `stdout`.
    pub fn on(self, needle: impl Into<String>, code: i32, stdout: impl Into<String>) -> Self {
        self.on_output(
            needle,
            Ok(CommandOutput {
                exit_code: Some(code),
                stdout: stdout.into(),
                ..CommandOutput::default()
            }),
        )
    }

    /// Builder: commands containing `needle` get `output`.
    pub fn on_output(
        self,
        needle: impl Into<String>,
        output: Result<CommandOutput, CommandError>,
    ) -> Self {
        let needle = needle.into();
        {
            let mut rules = lock(&self.rules);
            match rules.iter_mut().find(|r| r.needle == needle) {
                Some(rule) => rule.outputs.push_back(output),
                None => rules.push(Rule {
                    needle,
                    outputs: VecDeque::from([output]),
                }),
            }
        }
        self
    }

    /// The specs run so far.
    pub fn calls(&self) -> Vec<CommandSpec> {
        lock(&self.calls).clone()
    }
}

#[async_trait]
impl CommandRunner for ScriptedCommands {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        lock(&self.calls).push(spec.clone());
        let line = spec.display();
        let mut rules = lock(&self.rules);
        let Some(rule) = rules.iter_mut().find(|r| line.contains(&r.needle)) else {
            return Err(CommandError::Spawn {
                command: line,
                message: "no scripted answer (program not found)".into(),
            });
        };
        let out = if rule.outputs.len() > 1 {
            rule.outputs.pop_front()
        } else {
            rule.outputs.front().cloned()
        };
        out.unwrap_or_else(|| {
            Err(CommandError::Io {
                command: line,
                message: "empty script".into(),
            })
        })
    }
}
