//! Where a GitLab instance and project are, read from a git remote URL.
//!
//! GitLab documents no rule from a remote to its API (see the research
//! notes, "Deriving the base from a git remote"); these follow what `glab`
//! does: strip a trailing `.git` and `/`, keep every path segment
//! (subgroups nest to any depth), take the scheme and port only from an
//! HTTP(S) remote (an SSH port says nothing about HTTPS), drop userinfo.
//! An instance under a relative URL root cannot be told from its remote:
//! pass its URL explicitly ([`GitlabLocation::with_instance`]).

use orchestrator_core::forge::{ForgeError, ForgeKind};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// A GitLab instance and a project on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitlabLocation {
    /// The instance's root URL (`https://gitlab.example.com:8443`, or with
    /// a relative root `https://example.com/gitlab`), no trailing `/`.
    pub instance: String,
    /// The project's full path (`group/sub/project`).
    pub project: String,
}

impl GitlabLocation {
    /// The location read from git remote `url` (see the module docs).
    pub fn from_remote(url: &str) -> Result<Self, ForgeError> {
        let bad = |why: &str| {
            ForgeError::Config(format!(
                "cannot read a GitLab instance and project from the remote URL {url:?}: {why}"
            ))
        };
        let trimmed = url.trim().trim_end_matches('/');
        let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
        let (scheme, host, path) = if let Some((scheme, rest)) = trimmed.split_once("://") {
            let (authority, path) = rest.split_once('/').ok_or_else(|| bad("no project path"))?;
            let host = authority.rsplit('@').next().unwrap_or(authority);
            match scheme {
                "http" | "https" => (scheme, host.to_owned(), path),
                // ssh://git@host:2222/…: the port is SSH's, not the web's.
                "ssh" | "git+ssh" => ("https", strip_port(host).to_owned(), path),
                _ => return Err(bad("the scheme is not http, https or ssh")),
            }
        } else if let Some((user_host, path)) = trimmed.split_once(':') {
            // scp-like `git@host:group/project`.
            let host = user_host.rsplit('@').next().unwrap_or(user_host);
            ("https", host.to_owned(), path)
        } else {
            return Err(bad("it is neither a URL nor `user@host:path`"));
        };
        let project = path.trim_matches('/');
        if host.is_empty() || !project.contains('/') {
            return Err(bad("expected a host and a `group/project` path"));
        }
        Ok(Self {
            instance: format!("{scheme}://{host}"),
            project: project.to_owned(),
        })
    }

    /// The same project on the instance at `instance` (an explicit URL,
    /// for a relative root or an API host that differs from the remote's).
    /// A relative root the remote's path starts with is taken off the
    /// project path.
    pub fn with_instance(mut self, instance: &str) -> Self {
        let instance = instance.trim_end_matches('/');
        let root = instance
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(_, path)| path.trim_matches('/'));
        if let Some(rest) = root
            .filter(|r| !r.is_empty())
            .and_then(|r| self.project.strip_prefix(&format!("{r}/")))
        {
            self.project = rest.to_owned();
        }
        instance.clone_into(&mut self.instance);
        self
    }

    /// `<instance>/api/v4`.
    pub fn api_base(&self) -> String {
        format!("{}/api/v4", self.instance)
    }
}

/// Which forge a git remote URL names, by its host: a host with `gitlab`
/// in its name is GitLab, one with `github` GitHub; any other (a
/// self-hosted GitLab on its own name) is not known from the URL alone.
pub fn detect_forge(url: &str) -> Option<ForgeKind> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', ':']).next().unwrap_or_default();
    let host = authority
        .rsplit('@')
        .next()
        .unwrap_or(authority)
        .to_ascii_lowercase();
    if host.contains("gitlab") {
        Some(ForgeKind::Gitlab)
    } else if host.contains("github") {
        Some(ForgeKind::Github)
    } else {
        None
    }
}

fn strip_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    }
}

/// What stays unescaped in a path segment: RFC 3986's unreserved set.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `:id` of a project path: URL-encoded, `/` as `%2F` (GitLab REST docs,
/// "Namespaced paths"); a numeric id stays as it is.
pub(crate) fn encode_project(project: &str) -> String {
    utf8_percent_encode(project, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_give_the_instance_and_the_project_path() {
        for (remote, instance, project) in [
            (
                "git@gitlab.example.com:group/sub/project.git",
                "https://gitlab.example.com",
                "group/sub/project",
            ),
            (
                "ssh://git@gitlab.example.com:2222/group/sub/project.git",
                "https://gitlab.example.com",
                "group/sub/project",
            ),
            (
                "https://gitlab.example.com:8443/group/sub/project.git",
                "https://gitlab.example.com:8443",
                "group/sub/project",
            ),
            (
                "http://127.0.0.1:8080/group/project/",
                "http://127.0.0.1:8080",
                "group/project",
            ),
            (
                "https://oauth2:TOKEN@gitlab.example.com/group/project.git",
                "https://gitlab.example.com",
                "group/project",
            ),
        ] {
            assert_eq!(
                GitlabLocation::from_remote(remote).unwrap(),
                GitlabLocation {
                    instance: instance.into(),
                    project: project.into()
                },
                "{remote}"
            );
        }
        let relative = GitlabLocation::from_remote("https://example.com/gitlab/group/project.git")
            .unwrap()
            .with_instance("https://example.com/gitlab/");
        assert_eq!(relative.api_base(), "https://example.com/gitlab/api/v4");
        assert_eq!(relative.project, "group/project");
        for bad in ["demo", "https://host", "ftp://host/a/b", "git@host:project"] {
            let err = GitlabLocation::from_remote(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn the_forge_is_told_by_the_remotes_host() {
        for (url, kind) in [
            ("git@gitlab.com:g/p.git", Some(ForgeKind::Gitlab)),
            (
                "https://gitlab.example.com:8443/g/s/p",
                Some(ForgeKind::Gitlab),
            ),
            (
                "ssh://git@gitlab.corp:2222/g/p.git",
                Some(ForgeKind::Gitlab),
            ),
            ("https://github.com/o/r.git", Some(ForgeKind::Github)),
            ("http://github.localhost/o/r.git", Some(ForgeKind::Github)),
            ("https://git.example.com/gitlab/p.git", None),
            ("/srv/repo.git", None),
        ] {
            assert_eq!(detect_forge(url), kind, "{url}");
        }
    }

    proptest::proptest! {
        /// Any depth of subgroups, any port, HTTPS, scp-like and ssh forms:
        /// the project path comes back whole, the port only from HTTPS.
        #[test]
        fn every_remote_form_keeps_the_whole_project_path(
            host in "[a-z][a-z0-9-]{0,10}(\\.[a-z]{2,5}){0,2}",
            port in proptest::option::of(1u16..65535),
            groups in proptest::collection::vec("[A-Za-z0-9_][A-Za-z0-9_.-]{0,8}", 2..6),
        ) {
            let path = groups.join("/");
            // GitLab refuses a project path ending in `.git`.
            proptest::prop_assume!(!path.ends_with(".git"));
            let with_port = port.map_or_else(|| host.clone(), |p| format!("{host}:{p}"));
            for (url, instance) in [
                (format!("https://{with_port}/{path}.git"), format!("https://{with_port}")),
                (format!("git@{host}:{path}.git"), format!("https://{host}")),
                (format!("ssh://git@{with_port}/{path}"), format!("https://{host}")),
            ] {
                let got = GitlabLocation::from_remote(&url);
                proptest::prop_assert_eq!(
                    got.ok(),
                    Some(GitlabLocation { instance, project: path.clone() }),
                    "{}", url
                );
            }
        }
    }

    #[test]
    fn project_paths_are_url_encoded() {
        assert_eq!(encode_project("group/sub/my.proj"), "group%2Fsub%2Fmy.proj");
        assert_eq!(encode_project("42"), "42");
    }
}
