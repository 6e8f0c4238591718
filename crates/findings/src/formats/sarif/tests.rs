//! The URI decoding moved onto `percent-encoding`: it must read every path
//! as the hand-written decoder it replaced did.

use proptest::prelude::*;

/// The decoder this module had before `percent-encoding`, the oracle.
fn hand_written(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[test]
fn paths_tools_write_decode_as_before() {
    for uri in [
        "src/a%20b.py",
        "%E2%9C%93/ok.rs",
        "100%",
        "%zz/x",
        "%4",
        "%%41",
        "%C3%28",
        "é/%41",
    ] {
        assert_eq!(super::percent_decode(uri), hand_written(uri), "{uri}");
    }
    assert_eq!(super::percent_decode("src/a%20b.py"), "src/a b.py");
}

proptest! {
    /// Any mix of escapes (valid, truncated, not hex, not UTF-8) and
    /// plain or non-ASCII text decodes identically.
    #[test]
    fn percent_encoding_agrees_with_the_hand_written_decoder(
        s in "([a-z/é✓. ]|%[0-9A-Fa-f]{2}|%[0-9A-Fa-f]|%[g-z]{2}|%){0,24}"
    ) {
        prop_assert_eq!(super::percent_decode(&s), hand_written(&s));
    }
}
