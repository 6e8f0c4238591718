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
//! scopes conflicts with nothing.

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

/// Whether the repository-relative `path` is inside the scope `glob`:
/// `*` matches within one path segment, `**` any number of segments
/// (none included), `?` one character; a literal glob also covers
/// everything below it, as a directory would (`src/auth` covers
/// `src/auth/jwt.rs`). A segment with `[` or `{` matches any one segment
/// (classes and alternatives are not interpreted), and a `..` segment any
/// path: the test errs on the side of "inside", as [`ScopePrefix`] does.
/// Paths and globs are normalised the same way (`\` as `/`, empty and `.`
/// segments dropped). A blank glob matches nothing.
pub fn glob_matches(glob: &str, path: &str) -> bool {
    let split = |s: &str| -> Vec<String> {
        s.trim()
            .replace('\\', "/")
            .split('/')
            .filter(|seg| !seg.is_empty() && *seg != ".")
            .map(str::to_owned)
            .collect()
    };
    let glob = split(glob);
    if glob.is_empty() {
        return false;
    }
    if glob.iter().any(|seg| seg == "..") {
        return true;
    }
    let path = split(path);
    let literal = !glob.iter().any(|seg| seg.contains(['*', '?', '[', '{']));
    if literal {
        return path.len() >= glob.len() && path[..glob.len()] == glob[..];
    }
    segments_match(&glob, &path)
}

/// Glob segments against path segments (`**` spans segments).
fn segments_match(glob: &[String], path: &[String]) -> bool {
    match glob.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| segments_match(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            None => false,
            Some((seg, path_rest)) => {
                segment_matches(first, seg) && segments_match(rest, path_rest)
            }
        },
    }
}

/// One glob segment against one path segment (`*`, `?`; `[`/`{` match any).
fn segment_matches(glob: &str, seg: &str) -> bool {
    if glob.contains(['[', '{']) {
        return true;
    }
    fn go(g: &[char], s: &[char]) -> bool {
        match g.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|skip| go(rest, &s[skip..])),
            Some(('?', rest)) => !s.is_empty() && go(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    let g: Vec<char> = glob.chars().collect();
    let s: Vec<char> = seg.chars().collect();
    go(&g, &s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn glob_matching_table() {
        let cases = [
            ("src/auth/**", "src/auth/jwt.rs", true),
            ("src/auth/**", "src/auth/deep/x.rs", true),
            ("src/auth/**", "src/authz/x.rs", false),
            ("src/*.rs", "src/lib.rs", true),
            ("src/*.rs", "src/lib/x.rs", false),
            ("**/*.md", "README.md", true),
            ("**/*.md", "docs/a/b.md", true),
            ("**/*.md", "docs/a/b.rs", false),
            ("src/auth", "src/auth/jwt.rs", true),
            ("src/auth.rs", "src/auth.rs", true),
            ("src/auth.rs", "src/auth.rs.bak", false),
            ("src/a?.rs", "src/ab.rs", true),
            ("src/a?.rs", "src/a.rs", false),
            ("./src//x.rs", "src/x.rs", true),
            ("src\\x.rs", "src/x.rs", true),
            ("src/{a,b}.rs", "src/c.rs", true),
            ("../x", "anything", true),
            ("", "src/x.rs", false),
        ];
        for (glob, path, expected) in cases {
            assert_eq!(glob_matches(glob, path), expected, "{glob} vs {path}");
        }
    }

    proptest! {
        /// A path inside a glob starts with the glob's literal prefix, so
        /// the scheduler's overlap test and the scope check agree: two jobs
        /// that can write one path are never run at once.
        #[test]
        fn a_matched_path_starts_with_the_literal_prefix(
            glob in "[a-c*?]{1,3}(/[a-c*?]{1,3}|/\\*\\*){0,3}",
            path in "[a-c]{1,3}(/[a-c]{1,3}){0,4}",
        ) {
            if glob_matches(&glob, &path) {
                let prefix = ScopePrefix::parse(&glob).unwrap();
                let path_prefix = ScopePrefix::parse(&path).unwrap();
                prop_assert!(prefix.overlaps(&path_prefix), "{} vs {}", glob, path);
                prop_assert!(path.split('/').collect::<Vec<_>>().starts_with(
                    &prefix.segments().iter().map(String::as_str).collect::<Vec<_>>()
                ));
            }
        }
    }

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
