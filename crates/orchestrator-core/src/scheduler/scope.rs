//! Write scopes and the conservative overlap test.
//!
//! A scope is a path glob (`src/auth/**`, `src/types/index.ts`, `docs/*.md`).
//! Deciding whether two arbitrary globs can match a common path is more than
//! the scheduler needs, so each glob is reduced to its **literal prefix**: the
//! whole path segments before the first segment that contains a wildcard
//! (`*`, `?`, `[`, `{`). Two scopes overlap when one prefix is a
//! segment-wise prefix of the other:
//!
//! | scope A        | scope B           | prefixes                    | overlap |
//! |----------------|-------------------|-----------------------------|---------|
//! | `src/auth/**`  | `src/auth/jwt.rs` | `src/auth` ⊑ `src/auth/jwt.rs` | yes |
//! | `src/auth/**`  | `src/authz/**`    | `src/auth` vs `src/authz`   | no (segment-aware) |
//! | `src/*.rs`     | `src/lib/**`      | `src` ⊑ `src/lib`           | yes (conservative) |
//! | `**/*.rs`      | anything scoped   | empty prefix                | yes |
//!
//! The test never misses a real overlap (a path matched by both globs starts
//! with both prefixes), but may report one that cannot happen (`src/*.rs`
//! against `src/*.md`): such jobs merely run one after the other. A literal
//! path without wildcards also covers everything below it, as a directory
//! would. Paths are compared byte for byte (case-sensitive); `\` counts as
//! `/`, empty and `.` segments are dropped, and a `..` segment makes the scope
//! overlap every other scope. Blank scope strings are ignored; a job without
//! scopes conflicts with nothing. (Enforcing a scope — which paths a job may
//! write — is exact glob matching, and the flow's: planex's `scopes`.)

/// A scope reduced to the literal path segments before its first wildcard.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScopePrefix {
    segments: Vec<String>,
}

impl ScopePrefix {
    /// Reduces a glob to its literal prefix; `None` for a blank glob.
    pub fn parse(glob: &str) -> Option<Self> {
        let glob = glob.trim();
        if glob.is_empty() {
            return None;
        }
        let normalised = glob.replace('\\', "/");
        let mut segments = Vec::new();
        for segment in normalised.split('/') {
            if segment.is_empty() || segment == "." {
                continue;
            }
            if segment == ".." {
                // Could point anywhere: overlap everything.
                segments.clear();
                break;
            }
            if segment.contains(['*', '?', '[', '{']) {
                break;
            }
            segments.push(segment.to_owned());
        }
        Some(Self { segments })
    }

    /// The literal segments.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Whether some path could be in both scopes (conservatively).
    pub fn overlaps(&self, other: &ScopePrefix) -> bool {
        let n = self.segments.len().min(other.segments.len());
        self.segments[..n] == other.segments[..n]
    }
}

/// Whether any scope of `a` overlaps any scope of `b`.
pub fn overlaps(a: &[ScopePrefix], b: &[ScopePrefix]) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.overlaps(y)))
}

/// Whether two lists of globs overlap (blank globs ignored).
pub fn globs_overlap(a: &[impl AsRef<str>], b: &[impl AsRef<str>]) -> bool {
    let a: Vec<_> = a
        .iter()
        .filter_map(|g| ScopePrefix::parse(g.as_ref()))
        .collect();
    let b: Vec<_> = b
        .iter()
        .filter_map(|g| ScopePrefix::parse(g.as_ref()))
        .collect();
    overlaps(&a, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(a: &str, b: &str, expected: bool) {
        assert_eq!(globs_overlap(&[a], &[b]), expected, "{a} vs {b}");
        assert_eq!(globs_overlap(&[b], &[a]), expected, "{b} vs {a}");
    }

    #[test]
    fn overlap_table() {
        check("src/auth/**", "src/auth/jwt.rs", true);
        check("src/auth/**", "src/authz/**", false);
        check("src/auth/**", "src/types/**", false);
        check("src/*.rs", "src/lib/**", true);
        check("src/*.rs", "src/*.md", true);
        check("**/*.rs", "docs/a.md", true);
        check("./src//auth/", "src/auth/x.rs", true);
        check("src\\auth\\**", "src/auth/x.rs", true);
        check("src/auth", "src/auth/deep/file.rs", true);
        check("src/auth.rs", "src/auth", false);
        check("src/a.rs", "src/b.rs", false);
        check("src/../lib/x.rs", "docs/y.md", true);
        check("src/auth*/x", "src/authz/y", true);
    }

    #[test]
    fn blank_and_missing_scopes_conflict_with_nothing() {
        assert!(!globs_overlap(&[""], &["**"]));
        let none: [&str; 0] = [];
        assert!(!globs_overlap(&none, &["**"]));
        assert_eq!(ScopePrefix::parse("  "), None);
        assert_eq!(
            ScopePrefix::parse("src/auth/**").map(|p| p.segments().to_vec()),
            Some(vec!["src".to_owned(), "auth".to_owned()])
        );
    }
}
