//! Registry crates with `-W clippy::pedantic`: the crates and targets of
//! `scripts/differential-clippy-fix.sh`, fetched through cargo's own
//! registry access (network: crates.io only).
//!
//! Per crate, three copies in git repositories sharing one
//! `CARGO_TARGET_DIR`: a warm-up copy builds the dependencies for
//! `clippy` and `test` (so neither side pays for them); the reference copy
//! runs `cargo clippy --fix` then one `cargo test -q`; ours runs the lint
//! once for its findings, then review-fix with the builtin agent, `--relint`
//! with the same lint and `cargo test -q` (as the differential runs it).
//! The final `.rs` sources must be identical (trailing whitespace aside).
//!
//! Figures per crate (`rf_crate_{name}_…`): `over_ref` (our wall over the
//! reference's), the reference's wall, and our [`super::Split`];
//! `rf_crates_over_ref_median` and `rf_crates_over_ref_max` over the crates.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{OurRun, Split, commit_all, median, run_ours, sh};

/// (name, version, cargo targets), as the differential script lists them.
pub const CRATES: [(&str, &str, &[&str]); 6] = [
    ("bytesize", "1.3.0", &["--all-targets"]),
    ("scopeguard", "1.2.0", &["--all-targets"]),
    ("fnv", "1.0.7", &["--all-targets"]),
    ("unicode-width", "0.1.11", &["--all-targets"]),
    ("roman", "0.1.6", &["--all-targets"]),
    ("bit-vec", "0.6.3", &["--lib", "--tests"]),
];

/// The lint flags.
pub const FLAGS: [&str; 2] = ["-W", "clippy::pedantic"];

/// Fetches the crates; returns each one's source folder by name.
pub fn fetch(work: &Path) -> Result<BTreeMap<String, PathBuf>, String> {
    let dir = work.join("fetch");
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("src/lib.rs"), "").map_err(|e| e.to_string())?;
    let mut manifest =
        "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n[dependencies]\n"
            .to_owned();
    for (name, version, _) in CRATES {
        manifest.push_str(&format!("{name} = \"={version}\"\n"));
    }
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(|e| e.to_string())?;
    sh(&dir, "cargo", &["fetch", "-q"], &[])?;
    let meta = sh(&dir, "cargo", &["metadata", "--format-version", "1"], &[])?;
    let meta: serde_json::Value = serde_json::from_str(&meta).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        let (Some(name), Some(path)) = (p["name"].as_str(), p["manifest_path"].as_str()) else {
            continue;
        };
        if let Some(parent) = Path::new(path).parent() {
            out.insert(name.to_owned(), parent.to_path_buf());
        }
    }
    Ok(out)
}

/// Copies `src` to `dir` as a committed git repository (the lock file
/// `lock` when given, else a fresh resolution).
fn copy_repo(src: &Path, dir: &Path, lock: Option<&Path>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    sh(src, "cp", &["-r", ".", &dir.display().to_string()], &[])?;
    for f in [".cargo_vcs_info.json", "Cargo.toml.orig"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    match lock {
        Some(lock) => {
            std::fs::copy(lock, dir.join("Cargo.lock")).map_err(|e| e.to_string())?;
        }
        None if !dir.join("Cargo.lock").is_file() => {
            sh(dir, "cargo", &["generate-lockfile", "-q"], &[])?;
        }
        None => {}
    }
    std::fs::write(dir.join(".gitignore"), "target/\n.review/\n").map_err(|e| e.to_string())?;
    commit_all(dir, "from the registry")
}

/// The `.rs` files of `dir` (tracked), trailing whitespace trimmed per line.
fn sources(dir: &Path) -> Result<BTreeMap<String, String>, String> {
    let files = sh(dir, "git", &["ls-files", "*.rs"], &[])?;
    files
        .lines()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(f)).map_err(|e| e.to_string())?;
            let trimmed: Vec<&str> = text.lines().map(str::trim_end).collect();
            Ok((f.to_owned(), trimmed.join("\n")))
        })
        .collect()
}

/// One crate: (reference wall in seconds, our split).
pub async fn measure(
    work: &Path,
    src: &Path,
    name: &str,
    targets: &[&str],
) -> Result<(f64, Split), String> {
    let target = work.join("target");
    let target_s = target.display().to_string();
    let env = [
        ("CARGO_TARGET_DIR", target_s.as_str()),
        ("CARGO_TERM_COLOR", "never"),
    ];
    let [warm, reference, ours] = ["warm", "ref", "ours"].map(|s| work.join(name).join(s));
    copy_repo(src, &warm, None)?;
    let lock = warm.join("Cargo.lock");
    copy_repo(src, &reference, Some(&lock))?;
    copy_repo(src, &ours, Some(&lock))?;
    let mut clippy: Vec<&str> = vec!["clippy", "-q"];
    clippy.extend(targets);
    sh(&warm, "cargo", &clippy, &env)?;
    sh(&warm, "cargo", &["test", "-q", "--no-run"], &env)?;

    let started = Instant::now();
    let mut fix: Vec<&str> = vec!["clippy", "-q", "--fix", "--allow-dirty"];
    fix.extend(targets);
    fix.push("--");
    fix.extend(FLAGS);
    sh(&reference, "cargo", &fix, &env)?;
    sh(&reference, "cargo", &["test", "-q"], &env)?;
    let reference_s = started.elapsed().as_secs_f64();

    let mut lint: Vec<String> = ["cargo", "clippy", "--message-format=json"]
        .into_iter()
        .chain(targets.iter().copied())
        .chain(["--"])
        .chain(FLAGS)
        .map(str::to_owned)
        .collect();
    lint.shrink_to_fit();
    let (split, _) = run_ours(&OurRun {
        repo: ours.clone(),
        lint: Some(lint),
        findings: None,
        relint_passes: 6,
        tests: vec!["cargo".to_owned(), "test".to_owned(), "-q".to_owned()],
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    })
    .await?;
    if sources(&reference)? != sources(&ours)? {
        return Err(format!(
            "{name}: the final sources differ from cargo clippy --fix's"
        ));
    }
    Ok((reference_s, split))
}

/// The figures (module docs); nothing when the crates cannot be fetched.
pub fn perf_figures(rt: &tokio::runtime::Runtime) -> Vec<(String, f64)> {
    let Ok(work) = tempfile::tempdir() else {
        return Vec::new();
    };
    let sources = match fetch(work.path()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("  registry crates not measured: {e}");
            return Vec::new();
        }
    };
    let mut out = super::pass_rule::figures();
    let mut ratios = Vec::new();
    for (name, _, targets) in CRATES {
        let Some(src) = sources.get(name) else {
            eprintln!("  {name}: not fetched");
            continue;
        };
        match rt.block_on(measure(work.path(), src, name, targets)) {
            Ok((reference_s, split)) => {
                let key = format!("rf_crate_{}", name.replace('-', "_"));
                let ratio = split.wall.as_secs_f64() / reference_s;
                eprintln!(
                    "  {name}: {:.2}× ({:.1} s vs {reference_s:.1} s; {} commits, {} passes, {} test runs in {:.1} s; git: {})",
                    ratio,
                    split.wall.as_secs_f64(),
                    split.commits,
                    split.passes,
                    split.tests.0,
                    split.tests.1.as_secs_f64(),
                    split.git_top(5)
                );
                out.push((format!("{key}_over_ref"), ratio));
                out.push((format!("{key}_ref_wall_s"), reference_s));
                out.push((format!("{key}_commits"), split.commits as f64));
                out.extend(split.figures(&key));
                ratios.push(ratio);
            }
            Err(e) => eprintln!("  {name} not measured: {e}"),
        }
    }
    if !ratios.is_empty() {
        out.push(("rf_crates_over_ref_median".to_owned(), median(&ratios)));
        out.push((
            "rf_crates_over_ref_max".to_owned(),
            ratios.iter().copied().fold(f64::MIN, f64::max),
        ));
    }
    out
}
