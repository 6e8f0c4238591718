use super::*;
use crate::journal::TaskResult;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn slug_follows_the_seed() {
    assert_eq!(
        slug("Implement user authentication with OAuth, JWT, and 2FA"),
        "implement-user-authentication-with-oauth"
    );
    assert_eq!(slug("  Fix bug #12!  "), "fix-bug-12-");
    assert_eq!(slug("添加用户认证 module"), "添加用户认证-module");
    assert_eq!(slug("Ünïcode ✓ stuff"), "-n-code-stuff");
}

#[test]
fn session_date_is_taken_in_utc_plus_8() {
    // 2026-02-28 17:30 UTC is already 2026-03-01 in UTC+8.
    assert_eq!(
        session_id("Auth system", ts("2026-02-28T17:30:00Z")),
        "wpp-20260301-auth-system"
    );
    assert_eq!(
        session_id("Auth system", ts("2026-02-28T15:59:59Z")),
        "wpp-20260228-auth-system"
    );
    assert_eq!(
        session_id("!!!", ts("2026-02-28T00:00:00Z")),
        "wpp-20260228-session"
    );
    assert_eq!(
        session_timestamp(ts("2026-02-28T02:00:00Z")),
        "2026-02-28T10:00:00+08:00"
    );
}

#[test]
fn create_twice_the_same_day_gets_a_suffix_and_open_picks_the_newest() {
    let repo = tempfile::tempdir().unwrap();
    fs::create_dir_all(repo.path().join(".git")).unwrap();
    let a = Session::create(
        repo.path(),
        "Auth",
        SessionSource::Plan,
        ts("2026-01-01T00:00:00Z"),
    )
    .unwrap();
    let b = Session::create(
        repo.path(),
        "Auth",
        SessionSource::Plan,
        ts("2026-01-01T01:00:00Z"),
    )
    .unwrap();
    assert_eq!(a.id(), "wpp-20260101-auth");
    assert_eq!(b.id(), "wpp-20260101-auth-2");
    assert!(b.discoveries().is_file());
    let exclude = fs::read_to_string(repo.path().join(".git/info/exclude")).unwrap();
    assert_eq!(exclude, "/.workflow/\n");
    write_explore_csv(a.explore_csv(), &[ExploreRow::new("E1", "a", "d", "f")]).unwrap();
    write_explore_csv(b.explore_csv(), &[ExploreRow::new("E1", "a", "d", "f")]).unwrap();
    drop(a);
    // b is still locked by this handle: opening it again is refused.
    let err = Session::open(repo.path(), None).unwrap_err();
    assert!(err.to_string().contains("is locked by pid"), "{err}");
    drop(b);
    let s = Session::open(repo.path(), None).unwrap();
    assert_eq!(s.id(), "wpp-20260101-auth-2");
    assert_eq!(s.resume_phase(), ResumePhase::Explore);
    let named = Session::open(repo.path(), Some("wpp-20260101-auth")).unwrap();
    assert_eq!(named.meta().requirement, "Auth");
}

#[test]
fn open_without_sessions_lists_what_exists() {
    let repo = tempfile::tempdir().unwrap();
    let err = Session::open(repo.path(), None).unwrap_err();
    assert!(matches!(err, PlanexError::NoSession { ref found, .. } if found.is_empty()));
    let s = Session::create(
        repo.path(),
        "x",
        SessionSource::Plan,
        ts("2026-01-01T00:00:00Z"),
    )
    .unwrap();
    drop(s);
    // The only session has no CSV yet: nothing to resume, but it is listed.
    let err = Session::open(repo.path(), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "no planex session to continue in {}; none of the sessions found can be continued \
             (cancelled, or stopped before its first plan was written: start a new one): \
             wpp-20260101-x",
            sessions_dir(repo.path()).display()
        )
    );
    let err = Session::open(repo.path(), Some("nope")).unwrap_err();
    assert!(err.to_string().contains("sessions found: wpp-20260101-x"));
    let err = Session::open(repo.path(), Some("../x")).unwrap_err();
    assert!(matches!(err, PlanexError::InvalidSessionId { .. }));
}

mod props {
    use proptest::prelude::*;

    use super::*;
    use crate::journal::ExploreResult;

    /// Any text: quotes, commas, separators, line breaks, unicode.
    fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 ,;\"'|\\\n\r\té中✓-]{0,12}"
    }

    /// A list item: trimmed, non-empty, without the `;` separator.
    fn item() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_./*\"é中-]{1,8}"
    }

    fn status() -> impl Strategy<Value = RowStatus> {
        prop::sample::select(RowStatus::ALL.to_vec())
    }

    prop_compose! {
        fn task_row(extra: Vec<String>)(
            id in "T[0-9]{1,3}", title in text(), description in text(), test in text(),
            acceptance in text(), scope in text(), hints in text(), directives in text(),
            deps in prop::collection::vec(item(), 0..3),
            context_from in prop::collection::vec(item(), 0..3),
            wave in prop::option::of(1u32..50), status in status(), findings in text(),
            files in prop::collection::vec(item(), 0..3),
            tests_passed in prop::option::of(any::<bool>()), met in text(), error in text(),
            values in prop::collection::vec(text(), extra.len()),
        ) -> TaskRow {
            TaskRow {
                id, title, description, test, acceptance_criteria: acceptance, scope, hints,
                execution_directives: directives, deps, context_from, wave, status, findings,
                files_modified: files, tests_passed, acceptance_met: met, error,
                extra: extra.iter().cloned().zip(values).collect(),
            }
        }
    }

    prop_compose! {
        fn explore_row()(
            id in "E[0-9]{1,3}", angle in text(), description in text(), focus in text(),
            deps in prop::collection::vec(item(), 0..3), wave in prop::option::of(1u32..9),
            status in status(), findings in text(),
            key_files in prop::collection::vec(item(), 0..3), error in text(),
        ) -> ExploreRow {
            ExploreRow { id, angle, description, focus, deps, wave, status, findings, key_files, error, extra: Vec::new() }
        }
    }

    fn state() -> impl Strategy<Value = SessionState> {
        let extra = prop::sample::subsequence(
            vec![
                "notes".to_owned(),
                "owner".to_owned(),
                "prev_context".to_owned(),
            ],
            0..=3,
        );
        (extra, prop::collection::vec(explore_row(), 1..4)).prop_flat_map(|(extra, explore)| {
            prop::collection::vec(task_row(extra), 1..6).prop_map(move |tasks| SessionState {
                explore: Some(explore.clone()),
                tasks: Some(tasks),
                ..SessionState::default()
            })
        })
    }

    fn fresh_session() -> (tempfile::TempDir, Session) {
        let repo = tempfile::tempdir().unwrap();
        let s = Session::create(
            repo.path(),
            "prop",
            SessionSource::Plan,
            Timestamp::UNIX_EPOCH,
        )
        .unwrap();
        (repo, s)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the rows hold, a checkpoint and a load give them back.
        #[test]
        fn csv_round_trips_through_the_session(state in state()) {
            let (_repo, mut s) = fresh_session();
            s.checkpoint(&state).unwrap();
            let (back, warning) = s.load().unwrap();
            prop_assert_eq!(warning, None);
            prop_assert_eq!(back, state);
        }

        /// Replaying the journal twice is the same as once, and a
        /// checkpoint in between changes nothing: nothing is lost or
        /// applied twice whenever a crash happens.
        #[test]
        fn journal_replay_is_idempotent(state in state(), picks in prop::collection::vec((0usize..6, status(), text()), 0..8)) {
            let (_repo, mut s) = fresh_session();
            s.checkpoint(&state).unwrap();
            let tasks = state.task_rows().to_vec();
            for (i, st, findings) in &picks {
                let id = tasks[i % tasks.len()].id.clone();
                s.record(JournalEntry::Task(TaskResult {
                    id, status: *st, findings: findings.clone(), files_modified: vec!["f.rs".into()],
                    tests_passed: Some(true), acceptance_met: String::new(), error: String::new(),
                    verified: None,
                })).unwrap();
                s.record(JournalEntry::Explore(ExploreResult {
                    id: state.explore_rows()[0].id.clone(), status: *st, findings: findings.clone(),
                    key_files: vec![], error: String::new(),
                })).unwrap();
            }
            let (once, _) = s.load().unwrap();
            let mut twice = once.clone();
            for entry in s.journal.read().unwrap().entries {
                twice.apply(&entry);
            }
            prop_assert_eq!(&twice, &once);
            s.checkpoint(&once).unwrap();
            let (after, _) = s.load().unwrap();
            prop_assert_eq!(after, once);
        }
    }
}

#[test]
fn journal_replays_over_the_csv_and_checkpoint_folds_it_in() {
    let repo = tempfile::tempdir().unwrap();
    let mut s = Session::create(
        repo.path(),
        "x",
        SessionSource::Plan,
        ts("2026-01-01T00:00:00Z"),
    )
    .unwrap();
    let rows = vec![TaskRow::new("T1", "a", "b"), TaskRow::new("T2", "c", "d")];
    write_tasks_csv(s.tasks_csv(), &rows).unwrap();
    s.record(JournalEntry::Task(TaskResult {
        id: "T1".into(),
        status: RowStatus::Completed,
        findings: "done".into(),
        files_modified: vec!["x.rs".into()],
        tests_passed: Some(true),
        acceptance_met: "yes".into(),
        error: String::new(),
        verified: None,
    }))
    .unwrap();
    let (state, warning) = s.load().unwrap();
    assert_eq!(warning, None);
    let t1 = &state.task_rows()[0];
    assert_eq!(
        (t1.status, t1.findings.as_str()),
        (RowStatus::Completed, "done")
    );
    // The CSV on disk does not have it yet; a checkpoint writes it.
    assert_eq!(
        read_tasks_csv(s.tasks_csv()).unwrap()[0].status,
        RowStatus::Pending
    );
    s.checkpoint(&state).unwrap();
    assert_eq!(
        read_tasks_csv(s.tasks_csv()).unwrap()[0].status,
        RowStatus::Completed
    );
    assert_eq!(
        fs::read_to_string(s.dir().join("journal.ndjson")).unwrap(),
        ""
    );
    s.record(JournalEntry::Reset {
        ids: vec!["T1".into()],
    })
    .unwrap();
    let (state, _) = s.load().unwrap();
    assert_eq!(state.task_rows()[0].status, RowStatus::Pending);
    assert_eq!(state.task_rows()[0].findings, "done");
}
