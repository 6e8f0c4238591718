//! The shared discovery board (`discoveries.ndjson`): what explorers and
//! task agents append for each other, one JSON object a line.

use super::*;

/// Kind of a [`Discovery`] on the shared board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryType {
    /// A reusable pattern: `{name, file, description}`.
    CodePattern,
    /// A module connection point: `{file, description, exports}`.
    IntegrationPoint,
    /// A code-style convention: `{naming, imports, formatting}`.
    Convention,
    /// A blocking issue: `{issue, severity, impact}`.
    Blocker,
    /// Technology stack details: `{framework, version, config}`.
    TechStack,
    /// How to run the tests: `{command, scope, description}`.
    TestCommand,
}

impl DiscoveryType {
    /// Every type.
    pub const ALL: [DiscoveryType; 6] = [
        DiscoveryType::CodePattern,
        DiscoveryType::IntegrationPoint,
        DiscoveryType::Convention,
        DiscoveryType::Blocker,
        DiscoveryType::TechStack,
        DiscoveryType::TestCommand,
    ];

    /// The name written in the `type` field.
    pub fn as_str(self) -> &'static str {
        match self {
            DiscoveryType::CodePattern => "code_pattern",
            DiscoveryType::IntegrationPoint => "integration_point",
            DiscoveryType::Convention => "convention",
            DiscoveryType::Blocker => "blocker",
            DiscoveryType::TechStack => "tech_stack",
            DiscoveryType::TestCommand => "test_command",
        }
    }
}

impl fmt::Display for DiscoveryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of `discoveries.ndjson`:
/// `{"ts":"<ISO8601>","worker":"E1","type":"code_pattern","data":{…}}`.
///
/// Read it with [`NdjsonBoard`](orchestrator_core::state::NdjsonBoard); a line with an
/// unknown `type` is skipped and reported like any malformed line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Discovery {
    /// When it was recorded (ISO 8601, as the writer wrote it).
    pub ts: String,
    /// The row id of the agent that recorded it (`E1`, `T3`, …).
    pub worker: String,
    /// What kind of discovery it is.
    #[serde(rename = "type")]
    pub kind: DiscoveryType,
    /// Type-specific payload; `null` when absent.
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Discovery {
    /// A discovery stamped with the current time (RFC 3339, UTC).
    pub fn now(
        worker: impl Into<String>,
        kind: DiscoveryType,
        data: serde_json::Value,
    ) -> Discovery {
        Discovery {
            ts: jiff::Timestamp::now().to_string(),
            worker: worker.into(),
            kind,
            data,
        }
    }
}
