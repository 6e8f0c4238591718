//! How long to wait before a retry: the server's `Retry-After` (or
//! `retry-after-ms`), else exponential backoff with jitter.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, RETRY_AFTER};

use super::http_date::parse_http_date;

/// The wait a response asks for: `retry-after-ms` (milliseconds), else
/// `Retry-After` (seconds, or an HTTP date relative to `now`).
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, now))
}

/// Parses a `Retry-After` value: delay seconds (fractions tolerated) or an
/// HTTP date (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), which gives the
/// time left until then (zero when it has passed).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = parse_http_date(value)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
    Some(Duration::from_secs_f64((at as f64 - now).max(0.0)))
}

/// The delay before retry number `retry` (0-based): `initial · 2^retry`,
/// capped at `max`, of which the upper half is scaled by `fraction` ∈ [0, 1)
/// ("equal jitter": never less than half the nominal delay, so retries
/// spread out without collapsing to zero).
pub fn backoff_delay(initial: Duration, max: Duration, retry: u32, fraction: f64) -> Duration {
    let nominal = initial
        .checked_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(max)
        .min(max);
    let half = nominal / 2;
    half + half.mul_f64(fraction.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::super::jitter::Jitter;
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = at(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        let check = |value: &str, expected: Option<Duration>| {
            assert_eq!(parse_retry_after(value, now), expected, "{value:?}");
        };
        check("0", Some(Duration::ZERO));
        check(" 7 ", Some(Duration::from_secs(7)));
        check("1.5", Some(Duration::from_millis(1500)));
        check("-1", None);
        check("soon", None);
        check("Sun, 06 Nov 1994 08:49:37 GMT", Some(Duration::ZERO));
        check(
            "Sun, 06 Nov 1994 08:50:07 GMT",
            Some(Duration::from_secs(30)),
        );
        check("Sun, 06 Nov 1994 08:00:00 GMT", Some(Duration::ZERO));
        check("Sun, 06 Nov 1994 08:49:37 PST", None);
        check("Sunday, 06-Nov-94 08:49:37 GMT", None);
    }

    #[test]
    fn backoff_doubles_is_capped_and_keeps_half() {
        let initial = Duration::from_millis(500);
        let max = Duration::from_secs(30);
        assert_eq!(
            backoff_delay(initial, max, 0, 0.0),
            Duration::from_millis(250)
        );
        assert_eq!(
            backoff_delay(initial, max, 2, 0.0),
            Duration::from_millis(1000)
        );
        assert_eq!(backoff_delay(initial, max, 20, 0.0), max / 2);
        let top = backoff_delay(initial, max, u32::MAX, 0.999);
        assert!(top > max.mul_f64(0.99) && top <= max, "{top:?}");
        // Invariant over many jitter draws and retries: half ≤ delay ≤ nominal ≤ cap.
        let jitter = Jitter::seeded();
        for retry in 0..64 {
            let nominal = backoff_delay(initial, max, retry, 1.0);
            assert!(nominal <= max);
            for _ in 0..200 {
                let d = backoff_delay(initial, max, retry, jitter.next_fraction());
                assert!(d >= nominal / 2 && d <= nominal, "retry {retry}: {d:?}");
            }
        }
    }
}
