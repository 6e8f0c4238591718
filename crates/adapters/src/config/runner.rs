//! `[runner]`: where test runs and task commands run — here, or as jobs on
//! a Ray cluster (`crate::ray`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ray::{ADDRESS_ENV, RayConfig};

/// Where commands run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RunnerKind {
    /// Child processes on this machine.
    #[default]
    Local,
    /// Jobs on a Ray cluster, through its Jobs API.
    Ray,
}

impl RunnerKind {
    /// Whether this is the default, [`RunnerKind::Local`].
    pub fn is_local(&self) -> bool {
        *self == RunnerKind::Local
    }
}

/// `[runner]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RunnerSection {
    /// `local` (default) or `ray`.
    #[serde(default, skip_serializing_if = "RunnerKind::is_local")]
    pub kind: RunnerKind,
    /// The Ray head's Jobs API, `http://head:8265` (default: `RAY_ADDRESS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// CPUs each job reserves on the cluster (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_job: Option<u32>,
    /// Environment given to every job.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The node-local build cache per repository (default on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cache: Option<bool>,
    /// Where nodes keep that cache (default `/tmp/orchestrator-ray-cache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_root: Option<String>,
}

impl RunnerSection {
    /// The Ray configuration this section and the `--runner` flag give, or
    /// `None` to run locally. The flag (`local`, `ray`, `ray=URL`) wins over
    /// `kind` and `address`; `RAY_ADDRESS` is used when no address is
    /// given. `Err` says what is wrong.
    pub fn ray_config(
        &self,
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<RayConfig>, String> {
        let (kind, flag_address) = match flag.map(str::trim) {
            None => (self.kind, None),
            Some("local") => (RunnerKind::Local, None),
            Some("ray") => (RunnerKind::Ray, None),
            Some(other) => match other.strip_prefix("ray=") {
                Some(url) if !url.is_empty() => (RunnerKind::Ray, Some(url.to_owned())),
                _ => {
                    return Err(format!(
                        "--runner {other:?}: expected `local`, `ray` or `ray=http://head:8265`"
                    ));
                }
            },
        };
        if kind == RunnerKind::Local {
            return Ok(None);
        }
        let address = flag_address
            .or_else(|| self.address.clone())
            .or_else(|| env(ADDRESS_ENV).filter(|a| !a.trim().is_empty()))
            .ok_or_else(|| {
                format!(
                    "the Ray runner needs the head's Jobs API address: --runner ray=http://head:8265, \
                     [runner] address in orchestrator.toml, or {ADDRESS_ENV}"
                )
            })?;
        if !(address.starts_with("http://") || address.starts_with("https://")) {
            return Err(format!(
                "[runner] address {address:?}: expected the Jobs API's URL, e.g. http://head:8265"
            ));
        }
        let mut config = RayConfig::new(address)
            .cpus_per_job(f64::from(self.cpus_per_job.unwrap_or(1)))
            .node_cache(self.node_cache.unwrap_or(true));
        if let Some(root) = &self.cache_root {
            config = config.cache_root(root.clone());
        }
        for (k, v) in &self.env {
            config = config.env(k, v);
        }
        Ok(Some(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_section_and_env_in_that_order() {
        let none = |_: &str| None;
        let env = |_: &str| Some("http://env:8265".to_owned());
        let section = RunnerSection::default();
        assert_eq!(section.ray_config(None, env).unwrap(), None);
        let c = section.ray_config(Some("ray"), env).unwrap().unwrap();
        assert_eq!(c.address, "http://env:8265");
        let c = section
            .ray_config(Some("ray=http://flag:1"), env)
            .unwrap()
            .unwrap();
        assert_eq!(c.address, "http://flag:1");
        assert!(section.ray_config(Some("ray"), none).is_err());
        assert!(section.ray_config(Some("k8s"), none).is_err());
        let ray = RunnerSection {
            kind: RunnerKind::Ray,
            address: Some("head:6379".into()),
            ..RunnerSection::default()
        };
        assert!(
            ray.ray_config(None, none)
                .unwrap_err()
                .contains("Jobs API's URL")
        );
        assert_eq!(ray.ray_config(Some("local"), none).unwrap(), None);
    }
}
