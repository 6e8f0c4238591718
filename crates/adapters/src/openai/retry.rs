//! How long to wait before a retry: the server's `Retry-After` (or
//! `retry-after-ms`), else exponential backoff with jitter.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};

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
/// HTTP date, which gives the time left until then (zero when it has
/// passed). Dates are read by `httpdate`: the IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms RFC 9110
/// (§5.6.7) says a recipient must accept too.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
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
        std::time::UNIX_EPOCH + Duration::from_secs(secs)
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
        // The obsolete forms, which the hand-written reader refused.
        check(
            "Sunday, 06-Nov-94 08:50:07 GMT",
            Some(Duration::from_secs(30)),
        );
        check("Sun Nov  6 08:50:07 1994", Some(Duration::from_secs(30)));
    }

    #[test]
    fn http_dates_match_known_epochs() {
        let secs = |text: &str| {
            httpdate::parse_http_date(text)
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
        };
        assert_eq!(secs("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(secs("Tue, 29 Feb 2000 12:00:00 GMT"), Some(951_825_600));
        assert_eq!(secs("Wed, 21 Oct 2015 07:28:00 GMT"), Some(1_445_412_480));
        assert_eq!(secs("Wed, 21 Foo 2015 07:28:00 GMT"), None);
    }

    /// The IMF-fixdate reader this module had before `httpdate`, kept as
    /// the oracle of the test below.
    mod hand_written {
        pub(super) fn parse_http_date(value: &str) -> Option<i64> {
            let (_weekday, rest) = value.split_once(", ")?;
            let mut parts = rest.split(' ');
            let day: u32 = parts.next()?.parse().ok()?;
            let months = [
                "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
            ];
            let name = parts.next()?;
            let month = u32::try_from(months.iter().position(|m| *m == name)? + 1).ok()?;
            let year: i64 = parts.next()?.parse().ok()?;
            let mut clock = parts.next()?.split(':');
            let hour: i64 = clock.next()?.parse().ok()?;
            let minute: i64 = clock.next()?.parse().ok()?;
            let second: i64 = clock.next()?.parse().ok()?;
            if parts.next()? != "GMT" || parts.next().is_some() || clock.next().is_some() {
                return None;
            }
            if !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
                return None;
            }
            let y = if month <= 2 { year - 1 } else { year };
            let era = y.div_euclid(400);
            let yoe = y - era * 400;
            let m = i64::from(month);
            let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            let days = era * 146_097 + doe - 719_468;
            Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
        }
    }

    proptest::proptest! {
        /// On every IMF-fixdate from 1970 to 9999 `httpdate` and the
        /// hand-written reader it replaced give the same instant.
        #[test]
        fn httpdate_agrees_with_the_hand_written_reader(secs in 0u64..253_402_300_800) {
            let text = httpdate::fmt_http_date(at(secs));
            let ours = hand_written::parse_http_date(&text);
            let theirs = httpdate::parse_http_date(&text)
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            proptest::prop_assert_eq!(ours, theirs, "{}", text);
        }
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
