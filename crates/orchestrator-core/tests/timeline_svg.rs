//! The timeline picture: its SVG, snapshotted, and the same SVG rendered by
//! headless Chromium (the Debian package `chromium-headless-shell`, which
//! `scripts/install-test-deps.sh` installs) to a PNG that shows the bars.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use orchestrator_core::timeline::{Span, SpanOutcome, render_svg};

fn span(id: &str, start: f64, end: f64, outcome: SpanOutcome, cost: Option<f64>) -> Span {
    Span {
        id: id.into(),
        title: Some(format!("Task {id} <fix & test>")),
        start: Duration::from_secs_f64(start),
        end: Duration::from_secs_f64(end),
        outcome,
        cost_usd: cost,
    }
}

/// A run of two slots: T1, then T2 and T3 side by side (T3 fails), T4
/// after both, E1 skipped early, T5 cut off by the end of the run.
fn spans() -> Vec<Span> {
    vec![
        span("T1", 0.0, 12.5, SpanOutcome::Done, Some(0.0123)),
        span("E1", 0.0, 3.0, SpanOutcome::Skipped, None),
        span("T2", 12.5, 30.0, SpanOutcome::Done, Some(0.0201)),
        span("T3", 12.5, 21.0, SpanOutcome::Failed, Some(0.0075)),
        span("T4", 30.0, 44.0, SpanOutcome::Done, None),
        span("T5", 30.0, 40.0, SpanOutcome::Unfinished, None),
    ]
}

#[test]
fn the_timeline_svg_is_stable() {
    insta::assert_snapshot!(render_svg("planex wpp-demo: rows over time", &spans()));
}

/// Where headless Chromium is: `chromium-headless-shell` or `chromium` on
/// PATH.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium-headless-shell", "chromium"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "headless Chromium is missing: install it with `apt-get install chromium-headless-shell` \
         (or run scripts/install-test-deps.sh) and put it on PATH"
    );
}

/// The RGB pixels of a PNG, with its width.
fn pixels(png_bytes: &[u8]) -> (usize, Vec<[u8; 3]>) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| match channels {
            1 | 2 => [p[0], p[0], p[0]],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    (info.width as usize, pixels)
}

fn hex(colour: &str) -> [u8; 3] {
    let v = u32::from_str_radix(colour.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

fn near(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= 6)
}

#[test]
fn headless_chromium_renders_the_bars_in_their_colours() {
    let svg = render_svg("planex wpp-demo: rows over time", &spans());
    let height: f64 = svg
        .split("height=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .parse()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("timeline.svg");
    let shot = dir.path().join("timeline.png");
    std::fs::write(&page, &svg).unwrap();
    let o = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--window-size=960,{}", height.ceil()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success() && shot.is_file(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (width, pixels) = pixels(&std::fs::read(&shot).unwrap());
    assert_eq!(width, 960);
    let count = |colour: &str| pixels.iter().filter(|p| near(**p, hex(colour))).count();
    // Not blank: mostly the white page, with every outcome's bars on it. A
    // bar of the 960 px picture's 44 s run is 20 px high and ~20 px a second.
    let white = count("#ffffff");
    assert!(
        white > pixels.len() / 2,
        "{white} of {} white",
        pixels.len()
    );
    for (outcome, colour, seconds) in [
        ("done", "#2e7d32", 12.5 + 17.5 + 14.0),
        ("failed", "#c62828", 8.5),
        ("skipped", "#9e9e9e", 3.0),
        ("unfinished", "#f9a825", 10.0),
    ] {
        let seen = count(colour);
        let expected = seconds * 20.0 * (960.0 - 90.0) / 44.0;
        assert!(
            seen as f64 > expected * 0.7,
            "{outcome}: {seen} px of {colour}, expected about {expected:.0}"
        );
    }
}
