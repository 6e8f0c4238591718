//! Helpers shared by the builtin agents' tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrator_core::agent::{AgentRequest, Role};
use orchestrator_core::finding::Finding;

/// The adapters crate's fixture folder for the builtin agents.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/builtin")
}

/// The core crate's format samples.
pub fn format_samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/formats")
}

/// Copies the fixture crate into a fresh temporary directory.
pub fn fixture_crate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures().join("clippy-crate");
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::copy(src.join("Cargo.toml"), dir.path().join("Cargo.toml")).unwrap();
    std::fs::copy(src.join("src/lib.rs"), dir.path().join("src/lib.rs")).unwrap();
    dir
}

/// A fix request for `finding` in `workdir`, in the SuggestionAgent's
/// context contract.
pub fn fix_request(workdir: &Path, finding: &Finding) -> AgentRequest {
    AgentRequest::new(
        finding.id.as_str(),
        Role::Fix,
        "apply the suggestion",
        workdir,
    )
    .with_context(serde_json::json!({ "finding": finding }))
}

/// Runs cargo in `dir` with a target directory inside it; returns
/// (success, stdout, stderr).
pub fn cargo(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("cargo")
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap()
}
