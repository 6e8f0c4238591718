//! `[cache]`: how much the engine's cache folder may hold (see
//! `orchestrator_core::state::cache`).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Environment variable that overrides `[cache] max_size`.
pub const ENV_CACHE_MAX_SIZE: &str = "ORCHESTRATOR_CACHE_MAX_SIZE";

/// The default cap on the cache's target folders: 20 GiB.
pub const DEFAULT_CACHE_MAX_SIZE: u64 = orchestrator_core::state::cache::DEFAULT_MAX_SIZE;

/// `[cache]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CacheSection {
    /// The cap on the build caches' total size (`"20GiB"`, `"500MB"`, or a
    /// number of bytes); the least recently used repository's are evicted
    /// at the start of a run while they are over it. Default 20 GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<ByteCount>,
}

impl CacheSection {
    /// The cap in bytes.
    pub fn max_size_bytes(&self) -> u64 {
        self.max_size.map_or(DEFAULT_CACHE_MAX_SIZE, |s| s.0)
    }
}

/// A number of bytes, written as a size with a unit (`"20GiB"`, `"1.5 GB"`)
/// or a plain integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteCount(pub u64);

impl ByteCount {
    /// Parses `text` (`"20GiB"`, `"500 MB"`, `"1048576"`; units are
    /// case-insensitive, `KB`/`MB`/`GB` are powers of 1000 and
    /// `KiB`/`MiB`/`GiB` of 1024). The error says what was expected.
    pub fn parse(text: &str) -> Result<ByteCount, String> {
        text.trim()
            .parse::<bytesize::ByteSize>()
            .map(|b| ByteCount(b.as_u64()))
            .map_err(|e| {
                format!(
                    "expected a size such as \"20GiB\", \"500MB\" or a number of bytes, got {text:?} ({e})"
                )
            })
    }
}

impl fmt::Display for ByteCount {
    /// The exact value in the largest binary unit that divides it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if self.0 != 0 && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{}{unit}", self.0 >> shift);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl Serialize for ByteCount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Size;
        impl Visitor<'_> for Size {
            type Value = ByteCount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"20GiB\" or a number of bytes")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteCount, E> {
                Ok(ByteCount(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteCount, E> {
                u64::try_from(v).map(ByteCount).map_err(|_| {
                    E::custom(format!(
                        "[cache] max_size: expected a size of 0 or more, got {v}"
                    ))
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteCount, E> {
                ByteCount::parse(v).map_err(|e| E::custom(format!("[cache] max_size: {e}")))
            }
        }
        d.deserialize_any(Size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_units_or_as_bytes_and_print_exactly() {
        let check = |text: &str, bytes: u64| {
            assert_eq!(ByteCount::parse(text), Ok(ByteCount(bytes)), "{text}");
        };
        check("20GiB", 20 << 30);
        check("20 gib", 20 << 30);
        check("500MB", 500_000_000);
        check("1.5 KiB", 1536);
        check("1048576", 1 << 20);
        assert_eq!(ByteCount(20 << 30).to_string(), "20GiB");
        assert_eq!(ByteCount(1000).to_string(), "1000B");
        let err = ByteCount::parse("twenty").unwrap_err();
        assert!(err.contains("got \"twenty\""), "{err}");
    }

    #[test]
    fn the_file_key_and_the_variable_set_the_cap_and_a_bad_one_is_named() {
        use crate::config::{Config, ConfigError};
        let config = Config::parse_str("version = 1\n[cache]\nmax_size = \"2GiB\"\n").unwrap();
        assert_eq!(config.cache.max_size_bytes(), 2 << 30);
        assert_eq!(
            Config::default().cache.max_size_bytes(),
            DEFAULT_CACHE_MAX_SIZE
        );
        let err = Config::parse_str("version = 1\n[cache]\nmax_size = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 3") && err.contains("[cache] max_size"),
            "{err}"
        );
        assert!(err.contains("got \"lots\""), "{err}");
        let mut config = Config::default();
        let err = config
            .apply_env_from(|v| (v == ENV_CACHE_MAX_SIZE).then(|| "12 parsecs".to_owned()))
            .unwrap_err();
        assert!(matches!(err, ConfigError::Env { .. }), "{err}");
        assert!(err.to_string().contains(ENV_CACHE_MAX_SIZE), "{err}");
        config
            .apply_env_from(|v| (v == ENV_CACHE_MAX_SIZE).then(|| "3GB".to_owned()))
            .unwrap();
        assert_eq!(config.cache.max_size_bytes(), 3_000_000_000);
    }
}
