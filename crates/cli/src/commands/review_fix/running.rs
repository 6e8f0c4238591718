//! One run of `review-fix` once its options are resolved: the services
//! around the repository, the flow (on a request or on findings files)
//! under Ctrl-C, and what is printed at the end.

use orchestrator_core::forge::Forge;
use orchestrator_core::worktree::Provisioner;
use orchestrator_review_fix::ReviewFixError;
use orchestrator_review_fix::forge::RequestReport;

use super::*;
use crate::remote::Remote;
use crate::setup::Reporter;

/// What the command resolved before it runs.
pub(super) struct Resolved {
    /// The repository folder.
    pub(super) repo: PathBuf,
    pub(super) config: Config,
    /// The test command (none: a dry run without one).
    pub(super) tests: Option<ResolvedTests>,
    pub(super) relint: Option<Relint>,
    pub(super) agent: Arc<dyn Agent>,
    pub(super) flow: ReviewFixConfig,
    pub(super) provisioner: Option<Arc<dyn Provisioner>>,
}

/// Runs the flow in the repository with `resolved` (on the request when
/// one is given), stops it on Ctrl-C, and prints how it ended.
pub(super) async fn execute(
    args: &ReviewFixArgs,
    resolved: Resolved,
    remote: Option<Remote>,
    reporter: Reporter,
    started: Instant,
) -> Exit {
    let Resolved {
        repo,
        tests,
        relint,
        agent,
        flow,
        provisioner,
        ..
    } = resolved;
    let vcs = match GitVcs::open(&repo).await {
        Ok(v) => v,
        Err(e) => return fail(format!("--repo {}: {e}", repo.display())),
    };
    // One run per repository at a time: the library takes the lock.
    let root = orchestrator_core::vcs::Vcs::root(&vcs).to_path_buf();
    let context = SummaryContext {
        test_command: tests.as_ref().map(ResolvedTests::display),
        test_source: tests.as_ref().map(|t| t.source.clone()),
        wall: Duration::ZERO,
        run_spend: None,
    };
    // The budget around the agent counts the run's whole spend.
    let counter = Arc::clone(&agent);
    if let Some(h) = &reporter.human {
        h.watch_spend(Arc::clone(&agent));
    }
    let services = Services {
        agent,
        vcs: Arc::new(vcs),
        tests: test_runner(tests, remote.as_ref()),
        gate: setup::gate(args.yes),
        sink: reporter.sink(),
        provisioner,
    };
    let fixes_dir = orchestrator_review_fix::session::fixes_root(
        &root,
        flow.inputs.first().map(PathBuf::as_path),
    );
    let forge = match args.request.number() {
        Some(_) => match request_forge(&args.request, services.vcs.as_ref()).await {
            Ok(f) => Some(f),
            Err(e) => return fail(e),
        },
        None => None,
    };
    let result = tokio::select! {
        r = run_flow(args, forge, flow, services, relint.as_ref()) => r,
        _ = tokio::signal::ctrl_c() => {
            return interrupted(&reporter, remote.as_ref(), &root, &fixes_dir, relint.as_ref()).await;
        }
    };
    if let Some(h) = &reporter.human {
        h.finish();
    }
    if let Some(r) = &remote {
        eprint!("{}", r.report("review-fix"));
    }
    let context = SummaryContext {
        wall: started.elapsed(),
        run_spend: counter.spent(),
        ..context
    };
    print_result(args.json, result, &reporter, context)
}

/// What a run gives: its passes, and what it delivered into the request.
type Ran = Result<(Option<PassesReport>, Option<RequestReport>), ReviewFixError>;

/// The tests the flow verifies fixes with: the resolved command (on the
/// `--runner` cluster when one was chosen), or none (a dry run).
fn test_runner(
    tests: Option<ResolvedTests>,
    remote: Option<&Remote>,
) -> Arc<dyn TestRunnerFactory> {
    match tests {
        Some(tests) => Arc::new(match remote {
            Some(r) => CliTests::new(tests).remote(r.command_runner()),
            None => CliTests::new(tests),
        }),
        None => Arc::new(NoTests),
    }
}

/// Runs the flow: on the request when its `forge` was found (what was
/// delivered, with the passes), else re-lint passes over the findings.
async fn run_flow(
    args: &ReviewFixArgs,
    forge: Option<Arc<dyn Forge>>,
    flow: ReviewFixConfig,
    services: Services,
    relint: Option<&Relint>,
) -> Ran {
    match (forge, args.request.number()) {
        (Some(forge), Some(n)) => {
            let options = args.request.options(n);
            orchestrator_review_fix::forge::run_on_request(forge, &options, flow, services, relint)
                .await
                .map(|r| (r.passes.clone(), Some(r)))
        }
        _ => run_with_relint(flow, services, relint)
            .await
            .map(|p| (Some(p), None)),
    }
}

/// A run stopped by Ctrl-C: the live line and the remote runs stop, and
/// the user is told how to go on — `--resume` when fixes were running
/// (a session in `fixes_dir` is unfinished), the same command again
/// between passes.
async fn interrupted(
    reporter: &Reporter,
    remote: Option<&Remote>,
    root: &Path,
    fixes_dir: &Path,
    relint: Option<&Relint>,
) -> Exit {
    if let Some(h) = &reporter.human {
        h.finish();
    }
    if let Some(r) = remote {
        r.runner.stop_all().await;
    }
    if !orchestrator_review_fix::session::unfinished_sessions(fixes_dir).is_empty() {
        let relint_flags = relint.map(|r| {
            let mut argv = vec![r.command.program.clone()];
            argv.extend(r.command.args.iter().cloned());
            format!(
                " --relint {} --relint-passes {}",
                shell_quote(&orchestrator_adapters::config::join_command(&argv)),
                r.max_passes
            )
        });
        eprintln!(
            "\ninterrupted: running fixes were stopped and their files restored on resume; \
             continue with `{}{}`",
            resume_hint(root),
            relint_flags.as_deref().unwrap_or_default()
        );
    } else {
        eprintln!(
            "\ninterrupted between passes: the fixes so far are committed; \
             run the same command again to re-lint and go on"
        );
    }
    reporter.finish(3, RunState::Interrupted, None);
    Exit::NeedsHuman
}

/// Prints how the run ended — what was delivered into the request, the
/// passes' summary (as JSON lines with `json`), or the error — records it
/// in the session's log, and gives the exit code.
fn print_result(json: bool, result: Ran, reporter: &Reporter, context: SummaryContext) -> Exit {
    match result {
        Ok((None, Some(request))) => {
            out(&if json {
                render_delivery_json(&request)
            } else {
                render_delivery(&request)
            });
            reporter.finish(0, RunState::Done, None);
            Exit::Success
        }
        Ok((None, None)) => Exit::Success,
        Ok((Some(passes), request)) => {
            if json {
                if let Some(request) = &request {
                    out(&render_delivery_json(request));
                }
                out(&render_passes_json(&passes, &context));
            } else {
                out(&render_passes(&passes, &context));
            }
            if let Some(request) = request.as_ref().filter(|_| !json) {
                out(&render_delivery(request));
            }
            let (state, reason) = run_state(&passes.outcome());
            reporter.finish(i32::from(passes.outcome().exit_code()), state, reason);
            exit_of(passes.outcome().exit_code())
        }
        Err(e) => {
            eprintln!("error: {e}");
            reporter.finish(
                i32::from(e.exit_code()),
                RunState::Error,
                Some(e.to_string()),
            );
            exit_of(e.exit_code())
        }
    }
}
