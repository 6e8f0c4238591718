//! Finding the JSON value in an agent's free-text answer, in linear time
//! even on adversarial text.

/// Finds a JSON value in an agent's text answer: the whole text, a ```json
/// fenced block, or the first balanced `{…}` object that parses.
pub fn extract_json(text: &str) -> Option<serde_json::Value> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str(trimmed) {
        return Some(v);
    }
    if let Some(start) = trimmed.find("```") {
        let after = &trimmed[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
        let body = &after[body_start..];
        if let Some(end) = body.find("```")
            && let Ok(v) = serde_json::from_str(body[..end].trim())
        {
            return Some(v);
        }
    }
    first_balanced_object(trimmed)
}

/// The first balanced `{…}` in `text` that parses as JSON.
///
/// Linear in the length of `text`: a naive search that rescans from every
/// `{` is quadratic, and an agent that prints megabytes of unbalanced braces
/// would stall the engine. One scan with a stack records the matching `}` of
/// every `{` it passes outside a string (or that it leaves open); a later
/// candidate reuses that answer instead of scanning again, because a fresh
/// scan from a `{` outside a string sees exactly what the earlier scan saw
/// from there. Scanning and parse attempts draw on a budget proportional to
/// the input, so even adversarial text ends in linear time (with `None`).
fn first_balanced_object(text: &str) -> Option<serde_json::Value> {
    const MAX_SCANS: usize = 8;
    let bytes = text.as_bytes();
    let mut budget = bytes.len().saturating_mul(8).saturating_add(1 << 16);
    let mut scans: Vec<BraceScan> = Vec::new();
    let mut search_from = 0;
    while let Some(offset) = text[search_from..].find('{') {
        let start = search_from + offset;
        search_from = start + 1;
        let mut known = None;
        for scan in &mut scans {
            if let Some(close) = scan.lookup(start) {
                known.get_or_insert(close);
            }
        }
        scans.retain(|s| s.next < s.braces.len());
        let close = match known {
            Some(close) => close,
            None => {
                let scan = BraceScan::run(bytes, start);
                budget = budget.checked_sub(scan.scanned)?;
                let close = scan.braces.first().and_then(|b| b.1);
                if scans.len() == MAX_SCANS {
                    scans.remove(0);
                }
                scans.push(scan);
                close
            }
        };
        let Some(end) = close else {
            continue;
        };
        budget = budget.checked_sub(end + 1 - start)?;
        if let Ok(v) = serde_json::from_str(&text[start..=end]) {
            return Some(v);
        }
    }
    None
}

/// One scan from a `{` to its matching `}`: every `{` it passed outside a
/// string, in position order, with the position of its match (`None` when
/// the text ended first).
struct BraceScan {
    braces: Vec<(usize, Option<usize>)>,
    /// Index of the first entry not yet looked up past.
    next: usize,
    /// Bytes scanned.
    scanned: usize,
}

impl BraceScan {
    fn run(bytes: &[u8], start: usize) -> BraceScan {
        let mut braces: Vec<(usize, Option<usize>)> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut in_string = false;
        let mut escaped = false;
        let mut scanned = bytes.len() - start;
        for (i, &b) in bytes.iter().enumerate().skip(start) {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' => {
                    open.push(braces.len());
                    braces.push((i, None));
                }
                b'}' => {
                    if let Some(slot) = open.pop() {
                        braces[slot].1 = Some(i);
                        if open.is_empty() {
                            scanned = i + 1 - start;
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        BraceScan {
            braces,
            next: 0,
            scanned,
        }
    }

    /// The recorded match of the `{` at `start`, if this scan passed it
    /// outside a string. Lookups must come in increasing `start` order.
    fn lookup(&mut self, start: usize) -> Option<Option<usize>> {
        while self.braces.get(self.next).is_some_and(|b| b.0 < start) {
            self.next += 1;
        }
        let found = self.braces.get(self.next).filter(|b| b.0 == start)?;
        Some(found.1)
    }
}
