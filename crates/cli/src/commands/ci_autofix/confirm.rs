//! The confirmation gate from the command line: `--confirm gate`,
//! `ci-autofix approve|decline [KEY]`, `ci-autofix --continue KEY`, the
//! command a gate keeps to go on from it, and what a run stopped at its
//! gate prints.

use orchestrator_ci_autofix::confirm::{self, Answered};
use orchestrator_ci_autofix::{AnsweredBy, GateDecision};

use super::*;

/// When a patch the cadence matrix wants confirmed is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ConfirmMode {
    /// Ask on the terminal; without one, stop at the gate.
    #[default]
    Ask,
    /// Always stop at the gate (the patch kept, not applied): answer it
    /// later with `approve`/`decline` or from `orchestrator serve`.
    Gate,
}

/// Arguments of `orchestrator ci-autofix approve|decline`.
#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The target whose patch waits (`785`, `local-main`, or the session
    /// `ci-autofix-785`); default: the only one waiting.
    #[arg(value_name = "KEY")]
    pub key: Option<String>,
    /// The repository.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Print one JSON line instead of the message.
    #[arg(long)]
    pub json: bool,
}

/// `approve` / `decline`: records the answer (a decline also drops the
/// kept commit and escalates) and says what comes next (exit 0).
pub(super) fn run_answer(args: &AnswerArgs, decision: GateDecision) -> Exit {
    let rt = match setup::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::SomeFailed;
        }
    };
    rt.block_on(async {
        let vcs = match GitVcs::open(&args.repo).await {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::BadInput;
            }
        };
        let origin = format!(
            "orchestrator ci-autofix {} (pid {}, user {})",
            decision.as_str(),
            std::process::id(),
            std::env::var("USER").unwrap_or_else(|_| "unknown".into())
        );
        let result = confirm::answer(
            &vcs,
            args.key.as_deref(),
            decision,
            AnsweredBy::Command,
            &origin,
            Timestamp::now(),
        )
        .await;
        match result {
            Ok(answered) => {
                if args.json {
                    out(&format!("{}\n", answered_json(&answered, vcs.root())));
                } else {
                    out(&format!("{}\n", answered.message()));
                }
                Exit::Success
            }
            Err(e) => {
                eprintln!("error: {e}");
                // No such gate, a run holding it, or a state file that does
                // not parse: bad input, as for the run itself.
                match &e {
                    AutofixError::Confirm { .. } => Exit::BadInput,
                    AutofixError::State(s) => match &**s {
                        StateFileError::Busy { .. } => Exit::BadInput,
                        StateFileError::State(e) if matches!(**e, StateError::Json { .. }) => {
                            Exit::BadInput
                        }
                        _ => Exit::SomeFailed,
                    },
                    _ => Exit::SomeFailed,
                }
            }
        }
    })
}

fn answered_json(answered: &Answered, root: &Path) -> serde_json::Value {
    json!({
        "event": match answered.decision {
            GateDecision::Approve => "approved",
            GateDecision::Decline => "declined",
        },
        "exit_code": 0,
        "key": answered.key,
        "iteration": answered.iteration,
        "commit": answered.commit,
        "already": answered.already,
        "resume_hint": (answered.decision == GateDecision::Approve).then(|| format!(
            "orchestrator ci-autofix --continue {} --repo {}",
            answered.key,
            root.display()
        )),
    })
}

/// The flags `--continue KEY` runs with: those the gate of `KEY` kept,
/// with this invocation's output and confirmation flags.
pub(super) fn continued(args: &FixArgs, key: &str) -> Result<FixArgs, String> {
    let key = confirm::key_of(key);
    let root = std::fs::canonicalize(&args.repo)
        .map_err(|e| format!("the repository {} cannot be used: {e}", args.repo.display()))?;
    let Some(waiting) = confirm::waiting(&root).into_iter().find(|w| w.key == key) else {
        return Err(format!(
            "ci-autofix-{key} does not wait at a confirmation gate in {}; \
             run its command again to go on",
            root.display()
        ));
    };
    if waiting.gate.resume.is_empty() {
        return Err(format!(
            "the gate of ci-autofix-{key} does not say how its run was started; \
             run its command again to go on"
        ));
    }
    let argv = std::iter::once("orchestrator".to_owned()).chain(waiting.gate.resume.clone());
    let parsed = <crate::Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|e| format!("the gate's command does not parse: {e}"))?;
    let crate::Command::CiAutofix(CiAutofixArgs {
        command: None,
        fix: mut resumed,
    }) = parsed.command
    else {
        return Err("the gate's command is not a ci-autofix run".into());
    };
    resumed.json = args.json;
    resumed.yes = args.yes;
    resumed.confirm = args.confirm;
    Ok(resumed)
}

/// The command that goes on from a gate of this run: its own flags (a
/// handoff's PR by number), the repository absolute, without `-y`,
/// `--json` and `--confirm`, which the continuing invocation gives.
pub(super) fn resume_args(args: &FixArgs, target: &Target, root: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec!["ci-autofix".into()];
    let mut flag = |name: &str, value: Option<String>| {
        v.push(format!("--{name}"));
        v.extend(value);
    };
    if args.local {
        flag("local", None);
        for check in &args.check {
            flag("check", Some(check.clone()));
        }
        if args.push {
            flag("push", None);
        }
        if let Some(t) = args.check_timeout {
            flag("check-timeout", Some(t.as_secs_f64().to_string()));
        }
        if let Some(base) = &args.base {
            flag("base", Some(base.clone()));
        }
    } else if let Some(mr) = args.mr {
        flag("mr", Some(mr.to_string()));
    } else if let Some(pr) = args.pr.or(target.pr_number()) {
        flag("pr", Some(pr.to_string()));
    }
    if let Some(url) = &args.gitlab_url {
        flag("gitlab-url", Some(url.clone()));
    }
    if let Some(agent) = &args.agent {
        flag("agent", Some(agent.clone()));
    }
    let b = &args.budget;
    let i = &args.item_budget;
    for (name, value) in [
        ("max-cost-usd", b.max_cost_usd.map(|x| x.to_string())),
        ("max-tokens", b.max_tokens.map(|x| x.to_string())),
        ("max-agent-calls", b.max_agent_calls.map(|x| x.to_string())),
        ("max-wall", b.max_wall.map(|x| format!("{x}s"))),
        (
            "item-max-cost-usd",
            i.item_max_cost_usd.map(|x| x.to_string()),
        ),
        ("item-max-tokens", i.item_max_tokens.map(|x| x.to_string())),
    ] {
        if value.is_some() {
            flag(name, value);
        }
    }
    flag("max-iterations", Some(args.max_iterations.to_string()));
    if args.allow_dirty {
        flag("allow-dirty", None);
    }
    flag("remote", Some(args.remote.clone()));
    for (name, d) in [
        ("timeout", args.timeout),
        ("poll-interval", args.poll_interval),
        ("checks-grace", args.checks_grace),
    ] {
        flag(name, Some(d.as_secs_f64().to_string()));
    }
    if let Some(rerun) = args.rerun_before_fix {
        v.push(format!("--rerun-before-fix={rerun}"));
    }
    v.push("--repo".into());
    v.push(root.display().to_string());
    v
}

/// What a run stopped at its gate prints: where the patch is kept and the
/// commands that answer the gate and go on.
pub(super) fn awaiting_text(
    target: &Target,
    root: &Path,
    iteration: u32,
    commit: &str,
    branch: &str,
    write_set: &[String],
) -> String {
    let key = target.key();
    let short = &commit[..commit.len().min(7)];
    let files = orchestrator_core::text::counted(write_set.len() as u64, "file", "files");
    let repo = root.display();
    format!(
        "ci-autofix: waiting for confirmation on {} — iteration {iteration}'s patch ({files}: {}) \
         is kept as commit {short} on branch {branch}, not applied\n\
         Approve it: orchestrator ci-autofix approve {key} --repo {repo}\n\
         Then land it: orchestrator ci-autofix --continue {key} --repo {repo}\n\
         Or decline it (the commit is dropped, the failure escalated): \
         orchestrator ci-autofix decline {key} --repo {repo}\n\
         Or answer it in the dashboard: orchestrator serve --repo {repo}\n",
        target.label(),
        write_set.join(", "),
    )
}
