//! The flow's options from the flags and `orchestrator.toml`: the library
//! configuration and the re-lint command.

use super::*;

/// The library options for `args`: flags over `[review_fix]` of
/// `orchestrator.toml` over the flow's defaults. `inputs` are the `--fix`
/// paths made absolute against the current directory.
pub fn flow_config(
    args: &ReviewFixArgs,
    config: &Config,
    inputs: Vec<PathBuf>,
    planner: PlannerMode,
) -> ReviewFixConfig {
    let defaults = ReviewFixConfig::default();
    let section = &config.review_fix;
    let usize_of = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
    ReviewFixConfig::default()
        .with_inputs(inputs)
        .with_max_iterations(
            args.max_iterations
                .or(section.max_iterations.map(|n| n.get()))
                .unwrap_or(defaults.max_iterations),
        )
        .with_batch_size(
            args.batch_size
                .map(usize_of)
                .or(section.batch_size.map(|n| n.get()))
                .unwrap_or(defaults.batch_size),
        )
        .with_max_parallel(
            args.max_parallel
                .map(usize_of)
                .or(section.max_parallel.map(|n| n.get()))
                .unwrap_or(defaults.max_parallel),
        )
        .with_max_parallel_groups(
            args.max_parallel_groups
                .map(usize_of)
                .unwrap_or(defaults.max_parallel_groups),
        )
        .with_isolation(args.isolation.into())
        .with_verify(args.verify.into())
        .with_flaky_reruns(args.flaky_reruns)
        .with_allow_dirty(args.allow_dirty)
        .with_retry_failed(args.retry_failed)
        .with_cache_max_size(config.cache.max_size_bytes())
        .with_sarif_out(
            args.sarif_out
                .as_deref()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())),
        )
        .with_require_green_base(args.require_green_base)
        .with_dry_run(args.dry_run)
        .with_resume(args.resume)
        .with_planner(planner)
        .with_item_limits(ItemLimits::new(
            config.budget.item_max_cost_usd,
            config.budget.item_max_tokens,
            config.budget.item_max_agent_calls,
        ))
}

/// The default number of passes with a re-lint command.
pub const DEFAULT_RELINT_PASSES: u32 = 4;

/// The re-lint command and pass limit: `--relint` (split into words like
/// `--test-cmd`) over `[review_fix] relint`; `None` without either.
pub fn resolve_relint(
    args: &ReviewFixArgs,
    config: &Config,
    repo: &Path,
) -> Result<Option<Relint>, String> {
    let argv = match (&args.relint, config.review_fix.relint_command()) {
        (Some(line), _) => {
            let argv = split_command(line).map_err(|e| {
                format!("--relint {line:?}: {e} (for a shell pipeline use: --relint \"sh -c '…'\")")
            })?;
            if argv.is_empty() {
                return Err("--relint is empty".to_owned());
            }
            argv
        }
        (None, Some(Ok(CommandLine::Argv(argv)))) => argv,
        (None, Some(Ok(CommandLine::Shell(script)))) => vec!["sh".into(), "-c".into(), script],
        (None, Some(Err(e))) => return Err(e.to_string()),
        (None, None) => {
            if args.relint_passes.is_some() {
                return Err(
                    "--relint-passes needs a re-lint command: --relint CMD or [review_fix] relint in orchestrator.toml"
                        .to_owned(),
                );
            }
            return Ok(None);
        }
    };
    let passes = args
        .relint_passes
        .or(config.review_fix.relint_passes.map(|n| n.get()))
        .unwrap_or(DEFAULT_RELINT_PASSES);
    let (program, rest) = argv.split_first().ok_or("--relint is empty")?;
    Ok(Some(Relint::new(
        CommandSpec::new(program.clone(), rest.iter().cloned(), repo),
        Arc::new(ProcessRunner::default()),
        passes,
    )))
}
