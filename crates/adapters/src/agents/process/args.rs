//! The command line [`ProcessAgent`] builds for a request: each CLI's
//! flags for schemas, permissions, granted commands, spending limits and
//! resumed sessions, where the instruction goes, and the gemini policy file
//! that grants commands.

use std::ffi::OsString;
use std::path::Path;

use orchestrator_core::agent::{AgentRequest, Role};

use super::{Dialect, INSTRUCTION_PLACEHOLDER, InstructionInput, ProcessAgent};

impl ProcessAgent {
    /// The arguments for `request` (without the program), given the path of
    /// the schema file when the dialect needs one (codex) and of the policy
    /// file granting the request's commands (gemini, see
    /// [`gemini_policy`]).
    pub fn args_for(
        &self,
        request: &AgentRequest,
        prompt: &str,
        schema_file: Option<&Path>,
        policy_file: Option<&Path>,
    ) -> Vec<OsString> {
        let writes = self.role_permissions && matches!(request.role, Role::Execute | Role::Fix);
        let mut args: Vec<OsString> = Vec::new();
        match self.dialect {
            Dialect::Claude => claude_args(&mut args, request, writes),
            Dialect::Codex => {
                args.extend(["exec", "--json"].map(OsString::from));
                if let Some(file) = schema_file {
                    args.push("--output-schema".into());
                    args.push(file.as_os_str().to_owned());
                }
                if writes {
                    args.extend(["--sandbox", "workspace-write"].map(OsString::from));
                }
            }
            Dialect::Gemini => {
                args.extend(["--skip-trust", "-o", "json"].map(OsString::from));
                if writes {
                    args.extend(["--approval-mode", "auto_edit"].map(OsString::from));
                    if let Some(file) = policy_file {
                        args.push("--policy".into());
                        args.push(file.as_os_str().to_owned());
                    }
                }
                if let Some(session) = &request.resume_session {
                    args.push("--resume".into());
                    args.push(session.into());
                }
            }
            Dialect::Text | Dialect::Json => {}
        }
        let prompt = &prompt_argument(prompt);
        let mut placed = false;
        for arg in &self.args {
            if self.input == InstructionInput::Argument && arg.contains(INSTRUCTION_PLACEHOLDER) {
                placed = true;
                args.push(arg.replace(INSTRUCTION_PLACEHOLDER, prompt).into());
            } else {
                args.push(arg.into());
            }
        }
        match (self.dialect, self.input) {
            (Dialect::Gemini, InstructionInput::Argument) if !placed => {
                args.push("-p".into());
                args.push(prompt.into());
            }
            (_, InstructionInput::Argument) if !placed => args.push(prompt.into()),
            (Dialect::Codex, InstructionInput::Stdin) => {
                // `exec resume <id> -`: the subcommand after every option
                // of `exec` (sandbox, schema, the user's `-c`), which apply
                // to the resumed thread too.
                if let Some(session) = &request.resume_session {
                    args.extend(["resume".into(), session.into()]);
                }
                args.push("-".into());
            }
            _ => {}
        }
        args
    }
}

/// Claude's flags: JSON output, the answer's schema, the edit permission and
/// granted commands for a role that writes, the spending limit, a resumed
/// session.
fn claude_args(args: &mut Vec<OsString>, request: &AgentRequest, writes: bool) {
    args.extend(["-p", "--output-format", "json"].map(OsString::from));
    if let Some(schema) = &request.schema {
        args.push("--json-schema".into());
        args.push(schema.to_string().into());
    }
    if writes {
        if !request.allowed_commands.is_empty() {
            // Variadic: the flag after the values ends them.
            args.push("--allowedTools".into());
            args.extend(
                request
                    .allowed_commands
                    .iter()
                    .map(|argv| OsString::from(format!("Bash({}:*)", argv.join(" ")))),
            );
        }
        args.extend(["--permission-mode", "acceptEdits"].map(OsString::from));
    }
    if let Some(usd) = request.spend_limits.max_cost_usd {
        // Claude checks it after each turn and stops with
        // `error_max_budget_usd`.
        args.push("--max-budget-usd".into());
        args.push(usd.to_string().into());
    }
    if let Some(session) = &request.resume_session {
        args.push("--resume".into());
        args.push(session.into());
    }
}

/// The prompt as (part of) a command-line argument. One that starts with `-`
/// gets a leading space, so that no CLI reads an instruction — which may
/// quote a finding or a task title such as `--yolo` — as an option (`gemini
/// -p --yolo` would be read as a flag). Models ignore the space.
fn prompt_argument(prompt: &str) -> String {
    if prompt.starts_with('-') {
        format!(" {prompt}")
    } else {
        prompt.to_owned()
    }
}

/// A gemini policy file (TOML, loaded with `--policy`) that allows exactly
/// `commands` through its shell tool, each as a command prefix. Headless
/// gemini otherwise denies every shell command under `auto_edit`.
pub fn gemini_policy(commands: &[Vec<String>]) -> String {
    let mut policy =
        String::from("# Written by orchestrator: the commands this request may run.\n");
    for argv in commands {
        // A JSON string literal is a valid TOML basic string.
        let prefix = serde_json::Value::String(argv.join(" ")).to_string();
        policy.push_str(&format!(
            "\n[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = {prefix}\ndecision = \"allow\"\npriority = 100\n"
        ));
    }
    policy
}
