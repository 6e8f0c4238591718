//! Small helpers for user-visible text.

/// `n` with its noun, singular for one: `counted(1, "attempt", "attempts")`
/// is `"1 attempt"`, `counted(3, …)` is `"3 attempts"`.
pub fn counted(n: impl Into<u64>, singular: &str, plural: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {plural}")
    }
}

/// A byte count for people: `512 B`, `1.5 KiB`, `3.0 MiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Display only: the precision lost above 2^52 bytes does not show.
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(counted(0u32, "group", "groups"), "0 groups");
        assert_eq!(counted(1u32, "group", "groups"), "1 group");
        assert_eq!(counted(2u64, "finding", "findings"), "2 findings");
    }
}
