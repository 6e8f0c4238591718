//! The tools of `orchestrator mcp`: their input schemas, and how each call
//! becomes one run of the `orchestrator` binary with `--json`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use orchestrator_adapters::process::{self, ProcessSpec};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{InputResponses as ToolInputResponses, IntoCallToolResult as _};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, Implementation, ListResourcesResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, RequestMetaObject, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Json, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::confined;
use super::gate::{self, Approval, Gate};
use super::inputs::{
    BatchInput, CiAutofixLocalInput, ClassifyInput, PlanexPlanInput, PlanexRunInput,
    PlanexStatusInput, ReviewFixInput, WavesInput,
};

/// The MCP server: one repository, one binary to run the flows with.
#[derive(Debug, Clone)]
pub struct Orchestrator {
    program: PathBuf,
    repo: PathBuf,
    tool_router: ToolRouter<Self>,
}

/// What a tool call did: the flow's exit code read as an outcome, its JSON
/// result, the JSON events before it, and the end of its log.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolOutcome {
    /// The flow's exit code: 0 success, 1 some items failed, 3 stopped and
    /// resumable (a gate, an escalation, a limit).
    pub exit_code: i32,
    /// `success`, `some_failed` or `needs_human` (exit 0, 1, 3);
    /// `limit_reached` for a review-fix or planex run stopped at a run
    /// limit (exit 3, resumable); `planned` for a `planex_plan` that stopped before
    /// execution as asked.
    pub outcome: String,
    /// The flow's result: its summary (the last JSON line it printed).
    pub result: Value,
    /// The JSON lines the flow printed before its result (progress
    /// events), at most the last 200.
    pub events: Vec<Value>,
    /// The end of the flow's log on stderr.
    pub log_tail: String,
}

/// A tool call's failure, as the host reads it.
type Refusal = String;

#[tool_router]
impl Orchestrator {
    /// A server for `repo` that runs the flows with `program` (this binary).
    pub fn new(program: PathBuf, repo: PathBuf) -> Self {
        Self {
            program,
            repo,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Compute the dependency waves of a lite-planex tasks.csv: which tasks can run together, in order."
    )]
    async fn waves(
        &self,
        Parameters(input): Parameters<WavesInput>,
        ct: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<Json<ToolOutcome>, Refusal> {
        let path = confined(&self.repo, &input.path)?;
        let mut args: Vec<OsString> = vec!["waves".into(), path.into(), "--json".into()];
        if input.lenient {
            args.push("--lenient".into());
        }
        self.flow(args, None, Call { ct, meta, peer }).await
    }

    #[tool(
        description = "Group review findings into planning batches (by file, dimension and root cause), as review_fix would."
    )]
    async fn batch(
        &self,
        Parameters(input): Parameters<BatchInput>,
        ct: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<Json<ToolOutcome>, Refusal> {
        let path = confined(&self.repo, &input.path)?;
        let mut args: Vec<OsString> = vec!["batch".into(), path.into(), "--json".into()];
        if let Some(size) = input.batch_size {
            args.extend(["--batch-size".into(), size.to_string().into()]);
        }
        self.flow(args, None, Call { ct, meta, peer }).await
    }

    #[tool(
        description = "Classify a failed CI check's log: mechanical (trivial / non-trivial), semantic or unknown, with the evidence. Give `log` (the text) or `path` (a file)."
    )]
    async fn ci_autofix_classify(
        &self,
        Parameters(input): Parameters<ClassifyInput>,
        ct: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<Json<ToolOutcome>, Refusal> {
        let mut args: Vec<OsString> = vec!["ci-autofix".into(), "classify".into()];
        let stdin = match (input.log, input.path) {
            (Some(log), None) => {
                args.push("-".into());
                Some(log.into_bytes())
            }
            (None, Some(path)) => {
                args.push(confined(&self.repo, &path)?.into());
                None
            }
            _ => return Err("give exactly one of `log` (the text) and `path` (a file)".into()),
        };
        args.push("--json".into());
        self.flow(args, stdin, Call { ct, meta, peer }).await
    }

    #[tool(
        description = "Fix the code-review findings of a file (review-cycle export, SARIF, rdjson, cargo/clippy JSON, ruff or ESLint JSON) in this repository: batches, plans, one verified commit per fix, rollback and retry. Needs `yes: true` unless `dry_run`, or the user's approval, asked by elicitation where the client supports it. A cancelled call leaves a session that `orchestrator review-fix --resume` finishes.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ToolOutcome>(),
    )]
    async fn review_fix(
        &self,
        Parameters(input): Parameters<ReviewFixInput>,
        ToolInputResponses(responses): ToolInputResponses,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let path = confined(&self.repo, &input.path)?;
        let asked = Asked { context, responses };
        let gate = Gate {
            question: format!(
                "Fix the findings of {} in {}? Each fix that passes the tests is committed to the current branch.",
                input.path,
                self.repo.display()
            ),
            unapproved: "review_fix commits fixes to the repository: pass `yes: true` to approve the run, or `dry_run: true` to see the plan",
        };
        let mut args: Vec<OsString> = vec!["review-fix".into(), "--fix".into(), path.into()];
        push_opt(&mut args, "--agent", input.agent);
        push_opt(&mut args, "--test-cmd", input.test_cmd);
        push_opt(&mut args, "--verify", input.verify);
        if input.dry_run {
            args.push("--dry-run".into());
        }
        self.changing(input.yes || input.dry_run, gate, args, asked)
            .await
    }

    #[tool(
        description = "Execute a lite-planex tasks.csv in dependency order (eager critical-path schedule or waves), with context passed between tasks and skip cascades; each task verified and landed as its own commit unless `no_commit`. Needs `yes: true`, or the user's approval, asked by elicitation where the client supports it. A cancelled call leaves a session that `orchestrator planex --continue` finishes.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ToolOutcome>(),
    )]
    async fn planex_run(
        &self,
        Parameters(input): Parameters<PlanexRunInput>,
        ToolInputResponses(responses): ToolInputResponses,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let path = confined(&self.repo, &input.path)?;
        let asked = Asked { context, responses };
        let gate = Gate {
            question: format!(
                "Run the tasks of {} in {}? {}",
                input.path,
                self.repo.display(),
                if input.no_commit {
                    "Their changes are left uncommitted in the tree."
                } else {
                    "Each task that passes its checks lands as its own commit."
                }
            ),
            unapproved: "planex_run executes the tasks in this repository: pass `yes: true` to approve the plan",
        };
        let mut args: Vec<OsString> = vec!["planex".into(), "run".into(), path.into()];
        push_opt(
            &mut args,
            "--concurrency",
            input.concurrency.map(|n| n.to_string()),
        );
        push_opt(&mut args, "--schedule", input.schedule);
        push_opt(&mut args, "--agent", input.agent);
        if input.no_commit {
            args.push("--no-commit".into());
        }
        self.changing(input.yes, gate, args, asked).await
    }

    #[tool(
        description = "Explore and plan a requirement with lite-planex without executing anything: exploration angles, explorations, then the tasks (dependencies, waves, scopes) written to the session's tasks.csv. Answers `planned` with the session's rows (as planex_status). Execute it later with `orchestrator planex --continue -y`."
    )]
    async fn planex_plan(
        &self,
        Parameters(input): Parameters<PlanexPlanInput>,
        ct: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<Json<ToolOutcome>, Refusal> {
        if input.requirement.trim().is_empty() {
            return Err("give the `requirement` to plan".into());
        }
        let mut args: Vec<OsString> = vec![
            "planex".into(),
            input.requirement.into(),
            "--plan-only".into(),
            "--repo".into(),
            self.repo.clone().into(),
            "--json".into(),
        ];
        push_opt(&mut args, "--agent", input.agent);
        push_opt(
            &mut args,
            "--concurrency",
            input.concurrency.map(|n| n.to_string()),
        );
        let Json(mut outcome) = self.flow(args, None, Call { ct, meta, peer }).await?;
        let session = outcome.result["outcome"]["summary"]["session_id"]
            .as_str()
            .map(str::to_owned);
        if outcome.exit_code == 3 && session.is_some() {
            // Stopped before execution, as asked: the plan is the result.
            outcome.outcome = "planned".to_owned();
            let repo = self.repo.clone();
            let status = tokio::task::spawn_blocking(move || {
                super::status::planex_status(&repo, session.as_deref())
            })
            .await
            .map_err(|e| format!("planex_plan failed: {e}"))??;
            outcome.result["plan"] = status;
        }
        Ok(Json(outcome))
    }

    #[tool(
        description = "The rows and statuses of a lite-planex session (the newest, or `session`), read from its folder without taking its lock: works while the session runs. Changes nothing."
    )]
    async fn planex_status(
        &self,
        Parameters(input): Parameters<PlanexStatusInput>,
    ) -> Result<Json<ToolOutcome>, Refusal> {
        let repo = self.repo.clone();
        let session = input.session;
        let result = tokio::task::spawn_blocking(move || {
            super::status::planex_status(&repo, session.as_deref())
        })
        .await
        .map_err(|e| format!("planex_status failed: {e}"))??;
        Ok(Json(ToolOutcome {
            exit_code: 0,
            outcome: "success".to_owned(),
            result,
            events: Vec::new(),
            log_tail: String::new(),
        }))
    }

    #[tool(
        description = "Run check commands locally and fix the failing ones under the cadence matrix (confirm / apply / escalate, at most `max_iterations`), one commit per fix, never pushing. Needs `yes: true`, or the user's approval, asked by elicitation where the client supports it.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ToolOutcome>(),
    )]
    async fn ci_autofix_local(
        &self,
        Parameters(input): Parameters<CiAutofixLocalInput>,
        ToolInputResponses(responses): ToolInputResponses,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        if input.checks.iter().all(|c| c.trim().is_empty()) {
            return Err("`checks` names no command".into());
        }
        let asked = Asked { context, responses };
        let gate = Gate {
            question: format!(
                "Run {} in {} and fix what fails? Each fix that passes the checks is committed (never pushed).",
                input.checks.join(", "),
                self.repo.display()
            ),
            unapproved: "ci_autofix_local commits fixes to the repository: pass `yes: true` to approve them",
        };
        let mut args: Vec<OsString> = vec!["ci-autofix".into(), "--local".into()];
        for check in input.checks.iter().filter(|c| !c.trim().is_empty()) {
            args.extend(["--check".into(), check.into()]);
        }
        push_opt(&mut args, "--agent", input.agent);
        push_opt(
            &mut args,
            "--max-iterations",
            input.max_iterations.map(|n| n.to_string()),
        );
        self.changing(input.yes, gate, args, asked).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Orchestrator {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
            .with_server_info(Implementation::new("orchestrator", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Runs the orchestrator engine's flows on the repository {}: review_fix (verified fix commits for review findings), planex_run (tasks in dependency order), ci_autofix_local and ci_autofix_classify (failed checks), and the batch and waves inspectors. Paths are relative to the repository.",
                self.repo.display()
            ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(super::resources::list(
            &self.repo,
        )))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = super::resources::read(&self.repo, &request.uri)
            .map_err(|message| ErrorData::resource_not_found(message, None))?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

fn push_opt(args: &mut Vec<OsString>, flag: &str, value: Option<String>) {
    if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
        args.push(flag.into());
        args.push(value.into());
    }
}

/// How many of a flow's JSON events a tool result keeps.
const MAX_EVENTS: usize = 200;

/// How much of a flow's stderr a tool result keeps.
const LOG_TAIL: usize = 4000;

impl Orchestrator {
    /// Runs a flow that changes the repository, `orchestrator <args>`, once
    /// its gate is passed (`yes`, or the user's approval asked by
    /// elicitation; see `gate.rs`) with `--repo`, `--json` and `-y`, which
    /// approves the run's own gates; else answers with the gate's refusal
    /// or its question.
    async fn changing(
        &self,
        yes: bool,
        gate: Gate<'_>,
        mut args: Vec<OsString>,
        asked: Asked,
    ) -> Result<CallToolResponse, Refusal> {
        match gate::approve(yes, gate, &asked.context, asked.responses.as_ref()).await {
            Approval::Approved => {}
            Approval::Refused(why) => return Err(why),
            Approval::Ask(ask) => return Ok((*ask).into()),
        }
        args.extend([
            "--repo".into(),
            self.repo.clone().into(),
            "--json".into(),
            "-y".into(),
        ]);
        let outcome = self.flow(args, None, asked.call()).await?;
        outcome
            .into_call_tool_result()
            .map_err(|e| e.message.into_owned())
    }

    /// Runs `orchestrator <args>` in the repository and reads its outcome.
    /// Exit 2 (bad input, a busy repository, a dirty tree) is a refusal
    /// carrying the flow's own message; a cancelled call stops the child
    /// with its process group.
    async fn flow(
        &self,
        args: Vec<OsString>,
        stdin: Option<Vec<u8>>,
        call: Call,
    ) -> Result<Json<ToolOutcome>, Refusal> {
        let Call { ct, meta, peer } = call;
        let progress = Progress::new(meta.get_progress_token(), peer);
        let mut spec = ProcessSpec::new(self.program.clone())
            .args(args)
            .cwd(&self.repo)
            .env("NO_COLOR", "1");
        if let Some(bytes) = stdin {
            spec = spec.stdin(bytes);
        }
        tracing::info!(command = %spec.display(), "tool call");
        let (lines, mut events) = tokio::sync::mpsc::unbounded_channel();
        let run = process::run_streaming(&spec, lines);
        tokio::pin!(run);
        let mut sent = 0u32;
        let output = loop {
            tokio::select! {
                output = &mut run => break output.map_err(|e| format!("failed to run {}: {e}", spec.display()))?,
                Some(line) = events.recv() => {
                    // Each JSON event the flow prints while it runs (a
                    // finding fixed, a task done) is a progress step.
                    if serde_json::from_str::<Value>(&line).is_ok() {
                        sent += 1;
                        progress.step(sent, &line).await;
                    }
                }
                () = ct.cancelled() => {
                    return Err("cancelled; the flow was stopped and its session can be resumed".into());
                }
            }
        };
        let stdout = output.stdout_text();
        let stderr = output.stderr_text();
        let code = output.code().unwrap_or(-1);
        let outcome = match code {
            0 => "success",
            1 => "some_failed",
            3 => "needs_human",
            _ => {
                let detail = tail(stderr.trim(), LOG_TAIL);
                return Err(format!(
                    "the flow refused (exit {code}): {}",
                    if detail.is_empty() {
                        stdout.trim()
                    } else {
                        detail
                    }
                ));
            }
        };
        let mut lines: Vec<Value> = stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let result = lines.pop().unwrap_or(Value::Null);
        // A stop at a run limit is no question for a human: say which.
        // (review-fix names it in `outcome`, planex in its stop's `reason`.)
        let at_limit = ["/outcome", "/outcome/status/reason"]
            .iter()
            .any(|p| result.pointer(p).and_then(Value::as_str) == Some("limit_reached"));
        let outcome = if code == 3 && at_limit {
            "limit_reached"
        } else {
            outcome
        };
        let skip = lines.len().saturating_sub(MAX_EVENTS);
        Ok(Json(ToolOutcome {
            exit_code: code,
            outcome: outcome.to_owned(),
            result,
            events: lines.into_iter().skip(skip).collect(),
            log_tail: tail(stderr.trim(), LOG_TAIL).to_owned(),
        }))
    }
}

/// A changing tool's call as its gate sees it: the request (protocol
/// version, client capabilities, the client) and, on a retried 2026-07-28
/// call, the answers to what the first call asked.
struct Asked {
    context: RequestContext<RoleServer>,
    responses: Option<BTreeMap<String, Value>>,
}

impl Asked {
    /// What the flow's run needs of the call.
    fn call(&self) -> Call {
        Call {
            ct: self.context.ct.clone(),
            meta: self.context.meta.clone(),
            peer: self.context.peer.clone(),
        }
    }
}

/// What a tool call brings besides its arguments: its cancellation, its
/// `_meta` (the progress token) and the client to notify.
struct Call {
    ct: CancellationToken,
    meta: RequestMetaObject,
    peer: Peer<RoleServer>,
}

/// Where a call's progress goes: MCP progress notifications when the
/// client asked for them (a progress token in the request's `_meta`).
struct Progress {
    token: Option<ProgressToken>,
    peer: Peer<RoleServer>,
}

impl Progress {
    fn new(token: Option<ProgressToken>, peer: Peer<RoleServer>) -> Self {
        Self { token, peer }
    }

    /// Reports the `n`th event, `line` (the flow's JSON event, cut short).
    async fn step(&self, n: u32, line: &str) {
        let Some(token) = &self.token else {
            return;
        };
        let param = ProgressNotificationParam::new(token.clone(), f64::from(n))
            .with_message(head(line, 300).to_owned());
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(%e, "a progress notification was not sent");
        }
    }
}

/// The first `max` bytes of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
