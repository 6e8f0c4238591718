//! The execution phase of a run: the state the fixes share, the recovery of
//! a killed run, the base established, the groups' progress files, the
//! stages run, and how the run ended.

use crate::*;

/// What executing the plan needs.
pub(crate) struct Execution<'a> {
    pub(crate) config: &'a ReviewFixConfig,
    pub(crate) services: &'a Services,
    pub(crate) sink: &'a Arc<dyn EventSink>,
    pub(crate) paths: &'a session::SessionPaths,
    pub(crate) repo: &'a Path,
    pub(crate) plan: &'a FixPlan,
    pub(crate) findings_file: &'a FindingsFile,
}

/// What executing the plan came to, for the completion.
pub(crate) struct Executed {
    /// The session as execution left it.
    pub(crate) active: ActiveSession,
    /// How the run ended.
    pub(crate) outcome: Outcome,
    /// The verification's figures.
    pub(crate) verification: VerificationStats,
    /// What the run's worktrees cost, when it made any.
    pub(crate) worktrees: Option<orchestrator_core::worktree::PoolStats>,
}

impl Executed {
    /// A dry run: the plan is made, nothing is executed.
    pub(crate) fn dry_run(active: ActiveSession, config: &ReviewFixConfig) -> Self {
        Executed {
            active,
            outcome: Outcome::DryRun,
            verification: VerificationStats {
                mode: effective_mode(config),
                ..VerificationStats::default()
            },
            worktrees: None,
        }
    }
}

impl Execution<'_> {
    /// Executes the plan: recovers what a killed run left, establishes the
    /// base (a red base refuses the run), runs the stages and judges the
    /// outcome from the groups' progress.
    pub(crate) async fn execute(
        &self,
        mut active: ActiveSession,
    ) -> Result<Executed, ReviewFixError> {
        let sink = self.sink.as_ref();
        active.phase = SessionPhase::Executing;
        active.last_update = now();
        session::write_active(self.paths, &active)?;
        emit_phase(sink, "execution", true);
        let shared = Arc::new(self.shared(active)?);
        exec::recover(&shared).await;
        if let Err(refusal) = exec::establish(&shared).await {
            shared.pool.close().await;
            return Err(match refusal {
                exec::BaseRefusal::Red(tests) => ReviewFixError::RedBase { tests },
                exec::BaseRefusal::Unjudgeable(message) | exec::BaseRefusal::Io(message) => {
                    ReviewFixError::Base { message }
                }
            });
        }
        let progress = self.load_progress(&shared).await?;
        stages::run_stages(Arc::clone(&shared), &progress).await;
        for group in progress.values() {
            group.flush();
        }
        shared.pool.close().await;
        emit_phase(sink, "execution", false);
        let active = lock(&shared.active).clone();
        let failed = self.plan.groups.iter().any(|g| {
            progress.get(&g.group_id).is_some_and(|p| {
                p.snapshot()
                    .findings
                    .iter()
                    .any(|f| f.result != Some(FixResult::Fixed))
            })
        });
        let outcome = if let Some(halted) = shared.halt_outcome() {
            halted
        } else if failed || !self.findings_file.rejected.is_empty() {
            Outcome::SomeFailed
        } else {
            Outcome::AllFixed
        };
        let mut verification = shared.with_stats(|s| *s);
        verification.test_runs = shared.test_runs.load(Ordering::SeqCst);
        Ok(Executed {
            active,
            outcome,
            verification,
            worktrees: Some(shared.pool.stats()).filter(|s| s.made > 0),
        })
    }

    /// The state every fix of the run shares: the services, the plan and
    /// findings, the worktree pool, the session and the run's figures.
    fn shared(&self, active: ActiveSession) -> Result<exec::Shared, ReviewFixError> {
        let (config, services, sink, paths) = (self.config, self.services, self.sink, self.paths);
        let vcs = &services.vcs;
        let findings: HashMap<String, Finding> = self
            .findings_file
            .findings
            .iter()
            .map(|f| (f.id.to_string(), f.clone()))
            .collect();
        let active = Arc::new(Mutex::new(active));
        Ok(exec::Shared {
            config: config.clone(),
            agent: Arc::clone(&services.agent),
            vcs: Arc::clone(vcs),
            tests: Arc::clone(&services.tests),
            sink: Arc::clone(sink),
            paths: paths.clone(),
            plan: self.plan.clone(),
            findings,
            // Stable slot places (one review-fix run per repository at a
            // time): each slot's build folder stays warm from run to run.
            pool: orchestrator_core::worktree::WorktreePool::new(
                Arc::clone(vcs),
                orchestrator_core::state::worktree_root(self.repo).join("review-fix"),
                "review-fix/",
            )
            .with_reclaim(true)
            .with_provisioner(services.provisioner.clone())
            .with_sink(Arc::clone(sink))
            .with_journal(Arc::new(exec::ActiveJournal {
                active: Arc::clone(&active),
                path: paths.active(),
                sink: Arc::clone(sink),
            })),
            active,
            test_runs: AtomicU32::new(0),
            cargo: self.repo.join("Cargo.toml").is_file(),
            batch: config.verify != VerifyMode::Each && config.isolation == Isolation::Worktree,
            stats: Mutex::new(VerificationStats {
                mode: effective_mode(config),
                ..VerificationStats::default()
            }),
            digests: Mutex::new(HashMap::new()),
            decided: Mutex::new((0, 0)),
            ledger: ledger::Ledger::open(&paths.dir)?,
            halted: Mutex::new(None),
            baseline: Mutex::new(orchestrator_core::test_runner::Baseline::default()),
            base_pending: tokio::sync::Mutex::new(None),
        })
    }

    /// Each group's progress file: the one a resumed session has, else a
    /// new one; made ready for this run (fixes already on the branch
    /// recognised).
    async fn load_progress(
        &self,
        shared: &exec::Shared,
    ) -> Result<HashMap<String, exec::Progress>, ReviewFixError> {
        let landed = exec::landed_commits(shared).await;
        let mut progress: HashMap<String, exec::Progress> = HashMap::new();
        for (i, g) in self.plan.groups.iter().enumerate() {
            let path = self.paths.progress(i + 1);
            let mut p: FixProgress = match read_json_if_exists(&path)? {
                Some(p) => p,
                None => exec::init_progress(g, i + 1, &shared.findings),
            };
            prepare_for_run(&mut p, &shared.findings, &landed);
            let handle = exec::Progress::new(path, p, Arc::clone(self.sink));
            handle.update(|_| {});
            progress.insert(g.group_id.clone(), handle);
        }
        Ok(progress)
    }
}
