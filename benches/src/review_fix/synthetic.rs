//! The synthetic N-finding repository: `files` files of `per_file` lines
//! `pub const C{j}: u32 = old_value({j});`, one clippy-JSON finding per
//! line whose machine-applicable suggestion renames `old_value` to
//! `new_value`, and a test command of `true`.
//!
//! Reference: a shell loop doing, per finding, one `sed -i` of that line and
//! one `git commit -qam` (the floor of "one commit per fix"), in a copy of
//! the same repository, measured in the same run. Both must end on the same
//! tree.
//!
//! Figures (`N` = findings): `rf_synth_nN_ours_ms_per_fix` (review-fix wall
//! over N), `rf_synth_nN_floor_ms_per_fix`, `rf_synth_nN_over_floor`, the
//! [`super::Split`] of the run (`rf_synth_nN_*`), and
//! `rf_synth_growth_1600_over_400` (per-fix wall at 1,600 over that at
//! 400). Each size runs [`REPEATS`] times; medians are reported, with the
//! spread (`…_spread`: (max − min) / median of the ratio).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use super::{OurRun, Split, commit_all, median, run_ours, sh};

/// Sizes measured: (findings, files).
pub const SIZES: [(usize, usize); 2] = [(400, 40), (1600, 80)];

/// Runs per size, each ours and its floor back to back: the median of
/// three paired ratios. One run's ratio moved between 1.5× and 2.4× from
/// run to run on a busy 2-core machine (a burst of load hits one side of
/// the pair); the median of three keeps one burst out of the figure, for
/// about three minutes in all.
pub const REPEATS: usize = 3;

/// The text of file `f` with `per_file` lines.
pub fn file_text(f: usize, per_file: usize) -> String {
    let mut s = String::new();
    for j in 0..per_file {
        let _ = writeln!(s, "pub const C{f}_{j}: u32 = old_value({j});");
    }
    s
}

/// One clippy JSON line for line `j` (0-based) of `src/f{f}.rs`, whose text
/// is `line` and which starts at byte `offset` of the file.
fn diagnostic(f: usize, j: usize, line: &str, offset: usize) -> String {
    let col = line.find("old_value").unwrap_or(0) + 1;
    let span = |replacement: Option<&str>| {
        serde_json::json!({
            "file_name": format!("src/f{f}.rs"),
            "line_start": j + 1, "line_end": j + 1,
            "column_start": col, "column_end": col + 9,
            "byte_start": offset + col - 1, "byte_end": offset + col + 8,
            "is_primary": true,
            "text": [{"text": line, "highlight_start": col, "highlight_end": col + 9}],
            "suggested_replacement": replacement,
            "suggestion_applicability": replacement.map(|_| "MachineApplicable"),
        })
    };
    let message = serde_json::json!({
        "reason": "compiler-message",
        "message": {
            "message": format!("`old_value` is deprecated (C{f}_{j})"),
            "code": {"code": "synthetic::rename", "explanation": null},
            "level": "warning",
            "spans": [span(None)],
            "children": [{
                "message": "use `new_value`", "code": null, "level": "help",
                "spans": [span(Some("new_value"))], "children": [], "rendered": null,
            }],
            "rendered": format!("warning: `old_value` is deprecated (C{f}_{j})\n"),
        }
    });
    message.to_string()
}

/// Writes the repository (committed) and its findings file beside it;
/// returns the findings file.
pub fn make_repo(dir: &Path, n: usize, files: usize) -> Result<std::path::PathBuf, String> {
    let per_file = n / files;
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    let mut json = String::new();
    for f in 0..files {
        let text = file_text(f, per_file);
        let mut offset = 0;
        for (j, line) in text.lines().enumerate() {
            json.push_str(&diagnostic(f, j, line, offset));
            json.push('\n');
            offset += line.len() + 1;
        }
        std::fs::write(dir.join(format!("src/f{f}.rs")), text).map_err(|e| e.to_string())?;
    }
    commit_all(dir, "synthetic")?;
    let findings = dir.with_extension("findings.json");
    std::fs::write(&findings, json).map_err(|e| e.to_string())?;
    Ok(findings)
}

/// The shell floor: one `sed -i` and one `git commit` per finding, in one
/// `sh` process; returns its wall time in seconds.
pub fn floor(dir: &Path, n: usize, files: usize) -> Result<f64, String> {
    let per_file = n / files;
    let script = format!(
        "set -e; for f in $(seq 0 {last_f}); do for j in $(seq 1 {per_file}); do \
         sed -i \"${{j}}s/old_value/new_value/\" src/f$f.rs; \
         git commit -qam \"fix C${{f}}_$j\"; done; done",
        last_f = files - 1,
    );
    let started = Instant::now();
    sh(dir, "sh", &["-c", &script], &[])?;
    Ok(started.elapsed().as_secs_f64())
}

/// One measurement of size `(n, files)`: ours and the floor, checked to end
/// on the same tree with `n` commits each.
pub async fn measure(n: usize, files: usize) -> Result<(Split, f64), String> {
    let base = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ours_dir = base.path().join("ours");
    let floor_dir = base.path().join("floor");
    let findings = make_repo(&ours_dir, n, files)?;
    make_repo(&floor_dir, n, files)?;
    let floor_s = floor(&floor_dir, n, files)?;
    let (split, report) = run_ours(&OurRun {
        repo: ours_dir.clone(),
        lint: None,
        findings: Some(findings),
        relint_passes: 1,
        tests: vec!["true".to_owned()],
        env: Default::default(),
    })
    .await?;
    if report.outcome().exit_code() != 0 || split.commits != n {
        return Err(format!(
            "review-fix on {n} synthetic findings: outcome {:?}, {} commits",
            report.outcome(),
            split.commits
        ));
    }
    let tree = |d: &Path| sh(d, "git", &["rev-parse", "HEAD^{tree}"], &[]);
    if tree(&ours_dir)? != tree(&floor_dir)? {
        return Err(format!(
            "{n} synthetic findings: the trees differ from the floor's"
        ));
    }
    Ok((split, floor_s))
}

/// The figures (module docs).
pub fn perf_figures(rt: &tokio::runtime::Runtime) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut per_fix = Vec::new();
    for (n, files) in SIZES {
        let mut runs = Vec::new();
        for _ in 0..REPEATS {
            match rt.block_on(measure(n, files)) {
                Ok(r) => {
                    eprintln!(
                        "  {n} findings: ours {:.1} s, floor {:.1} s",
                        r.0.wall.as_secs_f64(),
                        r.1
                    );
                    runs.push(r);
                }
                Err(e) => {
                    eprintln!("  synthetic review-fix not measured: {e}");
                    return out;
                }
            }
        }
        let ms = |s: f64| s * 1000.0 / n as f64;
        let ours: Vec<f64> = runs.iter().map(|(s, _)| ms(s.wall.as_secs_f64())).collect();
        let floors: Vec<f64> = runs.iter().map(|(_, f)| ms(*f)).collect();
        let ratios: Vec<f64> = ours.iter().zip(&floors).map(|(o, f)| o / f).collect();
        let key = format!("rf_synth_n{n}");
        let ratio = median(&ratios);
        let spread = ratios.iter().copied().fold(f64::MIN, f64::max)
            - ratios.iter().copied().fold(f64::MAX, f64::min);
        out.push((format!("{key}_ours_ms_per_fix"), median(&ours)));
        out.push((format!("{key}_floor_ms_per_fix"), median(&floors)));
        out.push((format!("{key}_over_floor"), ratio));
        out.push((format!("{key}_over_floor_spread"), spread / ratio));
        // The split of the median run.
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by(|&a, &b| ratios[a].total_cmp(&ratios[b]));
        let (split, _) = &runs[order[order.len() / 2]];
        eprintln!("  {key}: git by subcommand: {}", split.git_top(8));
        out.extend(split.figures(&key).into_iter().map(|(k, v)| {
            if k.ends_with("_s") {
                (format!("{k}_per_fix_ms"), v * 1000.0 / n as f64)
            } else {
                (k, v)
            }
        }));
        per_fix.push(median(&ours));
    }
    if let [small, large] = per_fix[..] {
        out.push(("rf_synth_growth_1600_over_400".to_owned(), large / small));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    /// The generated findings are what the builtin agent reads, and both
    /// sides land every fix on the same tree (checked in `measure`).
    #[test]
    fn a_small_synthetic_repository_is_fixed_like_the_floor() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let (split, floor_s) = rt.block_on(measure(12, 3)).unwrap();
        assert_eq!(split.commits, 12);
        assert_eq!(split.passes, 1);
        assert!(split.tests.0 >= 1, "{split:?}");
        assert!(split.git.0 >= 12, "{split:?}");
        assert!(floor_s > 0.0);
    }
}
