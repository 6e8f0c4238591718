//! Who may talk to the dashboard: every request names one of the hosts the
//! server answers as (`Host`: stops DNS rebinding), comes from one of them
//! when a browser says where it comes from (`Origin`: stops other pages
//! from posting), and carries the token (`?token=` once, then the cookie
//! set from it, or an `Authorization: Bearer` header), as Jupyter does.

use std::net::SocketAddr;

use hyper::header::{AUTHORIZATION, COOKIE, HOST, HeaderMap, ORIGIN};

/// The cookie the token is kept in.
pub const COOKIE_NAME: &str = "orchestrator_token";

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The `Host` header is missing or names another host.
    Host,
    /// The `Origin` header names another site.
    Origin,
    /// No token, or a wrong one.
    Token,
}

impl Refusal {
    /// The HTTP status and the message for the body.
    pub fn status_and_message(self) -> (u16, &'static str) {
        match self {
            Refusal::Host => (
                421,
                "this server answers only as its own address (Host refused)",
            ),
            Refusal::Origin => (
                403,
                "requests from another site are refused (Origin refused)",
            ),
            Refusal::Token => (
                401,
                "open the URL `orchestrator serve` printed (it carries the token)",
            ),
        }
    }
}

/// The server's token and the names it answers as.
#[derive(Debug, Clone)]
pub struct Guard {
    token: String,
    hosts: Vec<String>,
}

impl Guard {
    /// A guard for a server bound to `bound` with `token`.
    pub fn new(bound: SocketAddr, token: String) -> Self {
        let port = bound.port();
        let mut hosts = vec![bound.to_string()];
        if bound.ip().is_loopback() {
            for name in ["127.0.0.1", "localhost", "[::1]"] {
                hosts.push(format!("{name}:{port}"));
            }
        }
        hosts.dedup();
        Self { token, hosts }
    }

    /// The token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Checks `Host` and `Origin`; then the token, from the query's
    /// `token`, the cookie or the `Authorization` header. `Ok(true)` when
    /// the token came in the query (the page then sets the cookie).
    pub fn check(&self, headers: &HeaderMap, query: Option<&str>) -> Result<bool, Refusal> {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| self.hosts.iter().any(|ok| ok.eq_ignore_ascii_case(h))) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            let ours = self
                .hosts
                .iter()
                .any(|h| origin.eq_ignore_ascii_case(&format!("http://{h}")));
            if !ours {
                return Err(Refusal::Origin);
            }
        }
        if query
            .and_then(|q| query_value(q, "token"))
            .is_some_and(|t| same(&t, &self.token))
        {
            return Ok(true);
        }
        let from_cookie = headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == COOKIE_NAME && same(value, &self.token));
        let from_header = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| same(t.trim(), &self.token));
        if from_cookie || from_header {
            Ok(false)
        } else {
            Err(Refusal::Token)
        }
    }

    /// The `Set-Cookie` value that keeps the token for this site only.
    pub fn cookie(&self) -> String {
        format!(
            "{COOKIE_NAME}={}; Path=/; HttpOnly; SameSite=Strict",
            self.token
        )
    }
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The value of `name` in a query string (no percent-decoding: tokens and
/// keys are hex and path-safe).
pub fn query_value(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// A fresh random token: 24 bytes from the OS, hex.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn host_origin_and_token_are_each_required() {
        let guard = Guard::new("127.0.0.1:8123".parse().unwrap(), "abc123".into());
        let check = |pairs: &[(&'static str, &str)], query: Option<&str>| {
            guard.check(&headers(pairs), query)
        };
        assert_eq!(
            check(&[("host", "127.0.0.1:8123")], Some("token=abc123")),
            Ok(true)
        );
        assert_eq!(
            check(&[("host", "localhost:8123")], Some("x=1&token=abc123")),
            Ok(true)
        );
        assert_eq!(
            check(
                &[
                    ("host", "127.0.0.1:8123"),
                    ("cookie", "a=b; orchestrator_token=abc123")
                ],
                None
            ),
            Ok(false)
        );
        assert_eq!(
            check(
                &[("host", "[::1]:8123"), ("authorization", "Bearer abc123")],
                None
            ),
            Ok(false)
        );
        assert_eq!(
            check(&[("host", "127.0.0.1:8123")], None),
            Err(Refusal::Token)
        );
        assert_eq!(
            check(&[("host", "127.0.0.1:8123")], Some("token=abc124")),
            Err(Refusal::Token)
        );
        assert_eq!(
            check(&[("host", "127.0.0.1:8123")], Some("token=abc12")),
            Err(Refusal::Token)
        );
        assert_eq!(
            check(&[("host", "evil.example:8123")], Some("token=abc123")),
            Err(Refusal::Host)
        );
        assert_eq!(
            check(&[("host", "127.0.0.1:9999")], Some("token=abc123")),
            Err(Refusal::Host)
        );
        assert_eq!(check(&[], Some("token=abc123")), Err(Refusal::Host));
        assert_eq!(
            check(
                &[
                    ("host", "127.0.0.1:8123"),
                    ("origin", "http://evil.example")
                ],
                Some("token=abc123")
            ),
            Err(Refusal::Origin)
        );
        assert_eq!(
            check(
                &[
                    ("host", "127.0.0.1:8123"),
                    ("origin", "http://127.0.0.1:8123")
                ],
                Some("token=abc123")
            ),
            Ok(true)
        );
    }

    #[test]
    fn tokens_are_long_and_differ() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 48);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
