//! Enforcing a task's write scope: exact glob semantics.
//!
//! The scheduler's overlap test ([`ScopePrefix`]) errs on the side of
//! "overlaps" — two tasks run one after the other when unsure — which is
//! right for scheduling and wrong for enforcement, where unsure must mean
//! "outside". Enforcement therefore matches with [`globset`]: `*` and `?`
//! within one path segment, `**` across segments, classes (`[ab]`) and
//! alternatives (`{a,b}`) as written. A glob without wildcards also covers
//! everything below it, as a directory would (`src/auth` covers
//! `src/auth/jwt.rs`), which is what the scheduler assumes too. A `..`
//! segment or an absolute path is refused when the plan is read
//! ([`scope_problem`]), naming the row.
//!
//! [`ScopePrefix`]: orchestrator_core::scheduler::scope::ScopePrefix

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Why a scope glob cannot be enforced, or `None` when it can.
pub fn scope_problem(glob: &str) -> Option<String> {
    let g = glob.trim().replace('\\', "/");
    if g.starts_with('/') || g.chars().nth(1) == Some(':') {
        return Some(format!(
            "scope {glob:?} is absolute: a scope is a path glob relative to the repository"
        ));
    }
    if g.split('/').any(|seg| seg == "..") {
        return Some(format!(
            "scope {glob:?} has a `..` segment: a scope stays inside the repository"
        ));
    }
    expansions(&g)
        .iter()
        .find_map(|e| build(e).err())
        .map(|e| format!("scope {glob:?} is not a valid glob: {e}"))
}

/// The globs one glob stands for: itself, and for a literal path also
/// everything below it.
fn expansions(glob: &str) -> Vec<String> {
    let trimmed: String = glob
        .split('/')
        .filter(|seg| !seg.is_empty() && *seg != ".")
        .collect::<Vec<_>>()
        .join("/");
    if trimmed.contains(['*', '?', '[', '{']) {
        vec![trimmed]
    } else {
        vec![trimmed.clone(), format!("{trimmed}/**")]
    }
}

/// One glob with the engine's rules: `*` never crosses a `/`.
fn build(glob: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

/// A task's scope, compiled: which repository-relative paths it may write.
#[derive(Debug, Clone)]
pub struct ScopeMatcher {
    set: Option<GlobSet>,
}

impl ScopeMatcher {
    /// The matcher of `globs` (blank ones dropped); globs that
    /// [`scope_problem`] refuses match nothing (the plan reader refuses
    /// them before any task runs).
    pub fn new(globs: &[String]) -> Self {
        let mut set = GlobSetBuilder::new();
        let mut any = false;
        for glob in globs.iter().map(|g| g.trim()).filter(|g| !g.is_empty()) {
            if scope_problem(glob).is_some() {
                continue;
            }
            for g in expansions(&glob.replace('\\', "/")) {
                if let Ok(compiled) = build(&g) {
                    set.add(compiled);
                    any = true;
                }
            }
        }
        Self {
            set: if any { set.build().ok() } else { None },
        }
    }

    /// Whether `path` (repository-relative, `/`-separated) is inside.
    pub fn matches(&self, path: &str) -> bool {
        self.set
            .as_ref()
            .is_some_and(|set| set.is_match(path.trim_start_matches("./")))
    }
}

#[cfg(test)]
mod tests {
    use orchestrator_core::scheduler::scope::ScopePrefix;
    use proptest::prelude::*;

    use super::*;

    fn inside(glob: &str, path: &str) -> bool {
        ScopeMatcher::new(&[glob.to_owned()]).matches(path)
    }

    #[test]
    fn classes_and_alternatives_are_exact() {
        assert!(inside("src/{a,b}.rs", "src/a.rs"));
        assert!(inside("src/{a,b}.rs", "src/b.rs"));
        assert!(
            !inside("src/{a,b}.rs", "src/c.rs"),
            "the bug: any file in src/"
        );
        assert!(inside("src/[ab].rs", "src/a.rs"));
        assert!(!inside("src/[ab].rs", "src/c.rs"));
        assert!(inside("src/*.rs", "src/lib.rs"));
        assert!(
            !inside("src/*.rs", "src/deep/lib.rs"),
            "* stays in its segment"
        );
        assert!(inside("src/**", "src/deep/lib.rs"));
        assert!(
            inside("src/auth", "src/auth/jwt.rs"),
            "a literal covers below it"
        );
        assert!(inside("src/auth", "src/auth"));
        assert!(!inside("src/auth", "src/authz/x.rs"));
        assert!(inside("**/*.md", "docs/a/b.md"));
    }

    #[test]
    fn escaping_scopes_are_refused_by_name() {
        assert_eq!(
            scope_problem("../outside/**").as_deref(),
            Some("scope \"../outside/**\" has a `..` segment: a scope stays inside the repository")
        );
        assert!(scope_problem("src/../../etc").is_some());
        assert!(scope_problem("/etc/passwd").unwrap().contains("absolute"));
        assert!(
            scope_problem("src/[z-a].rs")
                .unwrap()
                .contains("not a valid glob")
        );
        assert_eq!(scope_problem("src/**/*.rs"), None);
        assert!(!inside("../outside/**", "../outside/x"));
    }

    proptest! {
        /// A path a scope lets a task write starts with the scope's literal
        /// prefix, so the scheduler's overlap test never misses two tasks
        /// that may write one path: they never run at once.
        #[test]
        fn a_path_inside_a_scope_overlaps_its_scheduling_prefix(
            segs in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b", "c", "*", "a?", "**", "[ab]", "{a,c}"]),
                1..4,
            ),
            path in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b", "c", "ab", "ca"]),
                1..5,
            ),
        ) {
            let glob = segs.join("/");
            let path = path.join("/");
            if inside(&glob, &path) {
                let prefix = ScopePrefix::parse(&glob).unwrap();
                let path_prefix = ScopePrefix::parse(&path).unwrap();
                prop_assert!(prefix.overlaps(&path_prefix), "{} vs {}", glob, path);
            }
        }

        /// Enforcement is globset's semantics (plus the literal-directory
        /// rule, which only adds the paths below a literal).
        #[test]
        fn enforcement_agrees_with_globset(
            segs in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b", "ab", "*", "?b", "[ab]", "{a,bb}", "**"]),
                1..4,
            ),
            path in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b", "ab", "bb", "c"]),
                1..5,
            ),
        ) {
            let glob = segs.join("/");
            let path = path.join("/");
            let reference = build(&glob).unwrap().compile_matcher().is_match(&path);
            let literal = !glob.contains(['*', '?', '[', '{']);
            let below = literal && path.starts_with(&format!("{glob}/"));
            prop_assert_eq!(inside(&glob, &path), reference || below, "{} vs {}", glob, path);
        }
    }
}
