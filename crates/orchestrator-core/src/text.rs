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
