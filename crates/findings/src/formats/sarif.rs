//! Reader for SARIF 2.1.0 logs.
//!
//! Every `runs[].results[]` entry becomes a finding (results of kind `pass`,
//! `informational` or `notApplicable` are skipped):
//! - `category` is the rule id (`ruleId`, `rule.id`, or the rule at
//!   `ruleIndex`), `title` the `message.text` (or the rule's message string
//!   named by `message.id`, with `{0}`-style arguments filled in);
//! - `severity` from `level` (or the rule's `defaultConfiguration.level`,
//!   default `warning`): `error` high, `warning` medium, `note`/`none` low;
//! - `file` and `line` from `locations[0].physicalLocation`
//!   (`artifactLocation.uri`, or the run artifact it indexes; `file://` URIs
//!   become paths and `%xx` escapes are decoded; a relative URI stays
//!   relative to the repository unless its `uriBaseId` names a relative
//!   folder in `originalUriBaseIds` (an absolute base is the producer's own
//!   checkout, such as `%SRCROOT%` on a CI machine, and stands for the
//!   repository root), as does one spelling its base inline,
//!   `%SRCROOT%/a.py`; the caller makes absolute paths repository-relative)
//!   and `region.startLine` (a `startLine` or `startColumn` that
//!   is not a number rejects the result); `snippet` from `region.snippet.text`;
//! - `dimension` from the rule's `properties.tags` (`security`,
//!   `performance`, `correctness`/`reliability`) or a
//!   `properties.security-severity`, else `quality`;
//! - `id` is the result's `guid`, else `<rule>@<file>:<line>:<column>`;
//! - the fingerprint comes from `partialFingerprints` (or `fingerprints`)
//!   with the rule id and file when present, else from rule, file, line,
//!   column and message; `partialFingerprints` are also kept as they are
//!   (`Finding::partial_fingerprints`, the findings ledger's key).
//!
//! `fixes[]` are alternatives: each becomes one [`Suggestion`] whose edits
//! are its `artifactChanges[].replacements[]` (`deletedRegion` replaced by
//! `insertedContent.text`). SARIF regions do not carry the deleted text, so
//! `original` comes from the file through the [`ParseOptions::sources`]
//! reader (which also turns the run's `columnKind` into character columns
//! and gives the edit its byte range; a `deletedRegion.snippet` must then
//! match the file), else from `deletedRegion.snippet.text` when the producer
//! included it. Columns count UTF-16 code units (SARIF's default) unless
//! the run's `columnKind` is `unicodeCodePoints`, with one
//! exception keyed on the driver's name: `ruff` counts code points and
//! writes no `columnKind`. A byte order mark is not counted. Without either, the edit keeps an empty
//! `original` (and `u32::MAX` as its end column when the region runs to the
//! end of its line) and a note is recorded: the applier must not apply such an
//! edit at its recorded position, because earlier fixes may have moved the
//! text; [`orchestrator_core::edit::locate`] refuses it as unanchored. A region's
//! `charOffset`/`charLength`, when given, are kept as the edit's
//! `byte_range` hint, which the applier only uses after checking that the
//! original text is really there.

use serde_json::Value;

use super::{
    FormatError, InputFormat, ParseOptions, ParseOutcome, SourceCache, document_array, json_type,
    position_field, str_field, u32_field, unanchored_note,
};
use orchestrator_core::edit::{ColumnUnit, RawRegion, RegionEnd, is_unanchored};
use orchestrator_core::finding::{Finding, Fingerprint, Severity, Suggestion, TextEdit};
use orchestrator_core::limits::{MAX_NAME_BYTES, excerpt};

/// Reads a SARIF log without access to the sources.
pub fn parse(text: &str, source_name: &str) -> Result<ParseOutcome, FormatError> {
    parse_with(text, source_name, &ParseOptions::default())
}

/// Reads a SARIF log, filling edits' replaced text from the sources when a
/// reader is given.
pub fn parse_with(
    text: &str,
    source_name: &str,
    options: &ParseOptions<'_>,
) -> Result<ParseOutcome, FormatError> {
    let (log, runs) = document_array(text, source_name, InputFormat::Sarif, "runs", "log")?;
    let mut out = ParseOutcome::new(InputFormat::Sarif);
    match log.get("version").and_then(Value::as_str) {
        Some("2.1.0") | None => {}
        Some(other) => out.notes.push(format!(
            "{source_name}: SARIF version {:?}, read as 2.1.0",
            excerpt(other)
        )),
    }
    let mut sources = SourceCache::new(options);
    for (r, run) in runs.iter().enumerate() {
        let results = match run.get("results") {
            Some(Value::Array(results)) => results,
            None | Some(Value::Null) => continue,
            Some(other) => {
                out.reject(
                    format!("{source_name}: runs[{r}].results"),
                    format!("is a {}, expected an array", json_type(other)),
                );
                continue;
            }
        };
        let run_ctx = RunContext::new(run);
        for (i, result) in results.iter().enumerate() {
            let location = format!("{source_name}: runs[{r}].results[{i}]");
            match result_to_finding(result, &run_ctx, &location, &mut sources) {
                Ok(Some((finding, notes))) => {
                    out.accept(&location, finding, notes);
                }
                Ok(None) => {}
                Err(message) => out.reject(location, message),
            }
        }
    }
    Ok(out.finish())
}

mod fixes;
#[cfg(test)]
mod tests;
use fixes::fix_to_suggestion;

/// What results of one run share.
struct RunContext<'v> {
    tool: String,
    rules: Vec<&'v Value>,
    artifacts: Vec<&'v Value>,
    unit: ColumnUnit,
    /// `originalUriBaseIds`: base name → its URI and the base that URI is
    /// relative to.
    bases: std::collections::HashMap<&'v str, (&'v str, Option<&'v str>)>,
}

impl<'v> RunContext<'v> {
    fn new(run: &'v Value) -> Self {
        let driver = run.get("tool").and_then(|t| t.get("driver"));
        let list = |v: Option<&'v Value>| -> Vec<&'v Value> {
            v.and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default()
        };
        let tool = driver
            .and_then(|d| str_field(d, "name"))
            .unwrap_or("sarif")
            .to_owned();
        let bases = run
            .get("originalUriBaseIds")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        Some((
                            k.as_str(),
                            (str_field(v, "uri")?, str_field(v, "uriBaseId")),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            unit: match run.get("columnKind").and_then(Value::as_str) {
                Some("unicodeCodePoints") => ColumnUnit::Chars,
                Some(_) => ColumnUnit::Utf16,
                // ruff writes code point columns and no `columnKind`.
                None if tool.eq_ignore_ascii_case("ruff") => ColumnUnit::Chars,
                None => ColumnUnit::Utf16,
            },
            tool,
            rules: list(driver.and_then(|d| d.get("rules"))),
            artifacts: list(run.get("artifacts")),
            bases,
        }
    }

    fn rule(&self, result: &Value, rule_id: Option<&str>) -> Option<&'v Value> {
        let index = result
            .get("ruleIndex")
            .or_else(|| result.get("rule").and_then(|r| r.get("index")))
            .and_then(Value::as_u64);
        if let Some(i) = index {
            return self.rules.get(i as usize).copied();
        }
        let id = rule_id?;
        self.rules
            .iter()
            .copied()
            .find(|r| str_field(r, "id") == Some(id))
    }

    /// The path an artifact location names: its `uri`, resolved against
    /// its `uriBaseId` (see [`RunContext::resolve`]), or the run artifact
    /// its `index` names.
    fn artifact_path(&self, artifact_location: &Value) -> Option<String> {
        if let Some(uri) = str_field(artifact_location, "uri") {
            return Some(self.resolve(uri, str_field(artifact_location, "uriBaseId")));
        }
        let index = artifact_location.get("index").and_then(Value::as_u64)?;
        let location = self.artifacts.get(index as usize)?.get("location")?;
        let uri = str_field(location, "uri")?;
        Some(self.resolve(uri, str_field(location, "uriBaseId")))
    }

    /// A URI as a path. A relative URI is relative to its `uriBaseId`: a
    /// base that `originalUriBaseIds` defines as a relative URI (itself
    /// possibly on a base) is a folder of the repository and is joined to
    /// it; any other base (undefined, or an absolute URI, which is the
    /// producer's own checkout: `%SRCROOT%` on a CI machine) stands for the
    /// repository root, so the path stays relative to it. A URI that spells
    /// its base inline (`%SRCROOT%/src/a.py`) is read the same way.
    fn resolve(&self, uri: &str, base_id: Option<&str>) -> String {
        let (base_id, rest) = match (base_id, inline_base(uri)) {
            (Some(id), _) => (Some(id), uri),
            (None, Some((id, rest))) => (Some(id), rest),
            (None, None) => (None, uri),
        };
        let path = uri_to_path(rest);
        if path.starts_with('/') || rest.contains("://") {
            return path;
        }
        match base_id.and_then(|id| self.base_folder(id, 0)) {
            Some(folder) if !folder.is_empty() => format!(
                "{}/{}",
                folder.trim_end_matches('/'),
                path.trim_start_matches("./")
            ),
            _ => path,
        }
    }

    /// The repository folder a base names (`""` for the root), following
    /// nested bases a few levels deep.
    fn base_folder(&self, id: &str, depth: u8) -> Option<String> {
        let (uri, parent) = self.bases.get(id).copied()?;
        if uri.contains(':') || uri.starts_with('/') {
            return Some(String::new());
        }
        let here = uri_to_path(uri);
        match parent
            .filter(|_| depth < 8)
            .and_then(|p| self.base_folder(p, depth + 1))
        {
            Some(up) if !up.is_empty() => Some(format!("{}/{}", up.trim_end_matches('/'), here)),
            _ => Some(here),
        }
    }
}

/// A URI that starts with a base name in percent signs (`%SRCROOT%/a.py`):
/// the name and the rest.
fn inline_base(uri: &str) -> Option<(&str, &str)> {
    let name_end = uri.strip_prefix('%')?.find('%')? + 2;
    let (name, rest) = uri.split_at(name_end);
    let valid = name[1..name_end - 1]
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then(|| (name, rest.trim_start_matches('/')))
}

fn result_to_finding(
    result: &Value,
    run: &RunContext<'_>,
    location: &str,
    sources: &mut SourceCache<'_, '_>,
) -> Result<Option<(Finding, Vec<String>)>, String> {
    if !result.is_object() {
        return Err(format!("is a {}, expected an object", json_type(result)));
    }
    if matches!(
        result.get("kind").and_then(Value::as_str),
        Some("pass" | "informational" | "notApplicable")
    ) {
        return Ok(None);
    }
    let explicit_id =
        str_field(result, "ruleId").or_else(|| result.get("rule").and_then(|r| str_field(r, "id")));
    let rule = run.rule(result, explicit_id);
    let rule_id = explicit_id
        .or_else(|| rule.and_then(|r| str_field(r, "id")))
        .unwrap_or(run.tool.as_str())
        .to_owned();
    let message = result_message(result, rule).ok_or("has no `message.text`")?;
    let severity = result_severity(result, rule)?;

    let physical = result
        .get("locations")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .and_then(|l| l.get("physicalLocation"));
    let file = physical
        .and_then(|p| p.get("artifactLocation"))
        .and_then(|a| run.artifact_path(a));
    let region = physical.and_then(|p| p.get("region"));
    let line = position_field(region, "startLine", "region.startLine")?;
    let column = position_field(region, "startColumn", "region.startColumn")?;

    let id = str_field(result, "guid").map_or_else(
        || match &file {
            Some(f) => format!(
                "{rule_id}@{f}:{}:{}",
                line.unwrap_or(0),
                column.unwrap_or(1)
            ),
            None => format!("{rule_id}@{location}"),
        },
        str::to_owned,
    );
    let mut finding = Finding::new(id.as_str(), message.as_str(), severity)
        .with_category(rule_id.as_str())
        .with_dimension(dimension(rule));
    if let Some(f) = &file {
        finding = finding.at(f.as_str(), line);
    }
    if let Some(rule) = rule {
        finding = described_by_rule(finding, rule);
    }
    finding.snippet = region
        .and_then(|r| r.get("snippet"))
        .and_then(|s| s.get("text"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    finding.fingerprint = fingerprint(result, &rule_id, file.as_deref(), line, column, &message);
    finding.partial_fingerprints = partial_fingerprints(result);

    let notes = attach_fixes(&mut finding, result, run, location, sources);
    Ok(Some((finding, notes)))
}

/// The result's severity: its `level`, else its rule's default level, else
/// `warning`.
fn result_severity(result: &Value, rule: Option<&Value>) -> Result<Severity, String> {
    let level = result
        .get("level")
        .and_then(Value::as_str)
        .or_else(|| {
            rule.and_then(|r| r.get("defaultConfiguration"))
                .and_then(|c| c.get("level"))
                .and_then(Value::as_str)
        })
        .unwrap_or("warning");
    match level {
        "error" => Ok(Severity::High),
        "warning" => Ok(Severity::Medium),
        "note" | "none" => Ok(Severity::Low),
        other => Err(format!(
            "`level` {:?} is not error, warning, note or none",
            excerpt(other)
        )),
    }
}

/// `finding` with its rule's description and help text.
fn described_by_rule(mut finding: Finding, rule: &Value) -> Finding {
    let text_of = |k: &str| rule.get(k).and_then(|d| str_field(d, "text"));
    if let Some(d) = text_of("fullDescription").or_else(|| text_of("shortDescription")) {
        finding = finding.with_description(d);
    }
    if let Some(h) = text_of("help") {
        finding = finding.with_recommendation(h);
    }
    finding
}

/// Adds the result's `fixes` to `finding` as suggestions; returns a note
/// for each fix left out (empty or unreadable) and one when a fix's edits
/// carry no anchor.
fn attach_fixes(
    finding: &mut Finding,
    result: &Value,
    run: &RunContext<'_>,
    location: &str,
    sources: &mut SourceCache<'_, '_>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut unanchored = false;
    for (j, fix) in result
        .get("fixes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        match fix_to_suggestion(fix, run, sources) {
            Ok(suggestion) if suggestion.edits.is_empty() => {
                notes.push(format!(
                    "{location}.fixes[{j}]: the fix changes nothing; left out"
                ));
            }
            Ok(suggestion) => {
                unanchored |= suggestion.edits.iter().any(is_unanchored);
                finding.suggestions.push(suggestion);
            }
            Err(why) => notes.push(format!("{location}.fixes[{j}]: left out: {why}")),
        }
    }
    if unanchored {
        notes.push(unanchored_note(location, finding.id.as_str()));
    }
    notes
}

/// The result's message text, or the rule message string it names with its
/// `{n}` placeholders filled from `message.arguments` (a placeholder whose
/// argument is missing or not a string stays as it is).
///
/// The template is filled in one pass, and the filling stops as soon as the
/// text is over [`MAX_NAME_BYTES`] (the message becomes the finding's title,
/// which is refused over that size anyway): a template repeating `{0}`
/// thousands of times with a large argument costs no more than the limit.
fn result_message(result: &Value, rule: Option<&Value>) -> Option<String> {
    let message = result.get("message")?;
    if let Some(text) = str_field(message, "text") {
        return Some(text.to_owned());
    }
    let id = str_field(message, "id")?;
    let template = rule?
        .get("messageStrings")?
        .get(id)
        .and_then(|m| str_field(m, "text"))?;
    let args: &[Value] = message
        .get("arguments")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut text = String::with_capacity(template.len().min(MAX_NAME_BYTES + 1));
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let arg = (digits > 0 && after[digits..].starts_with('}'))
            .then(|| after[..digits].parse::<usize>().ok())
            .flatten()
            .and_then(|n| args.get(n))
            .and_then(Value::as_str);
        match arg {
            Some(a) => {
                text.push_str(a);
                rest = &after[digits + 1..];
            }
            None => {
                text.push('{');
                rest = after;
            }
        }
        if text.len() > MAX_NAME_BYTES {
            return Some(text);
        }
    }
    text.push_str(rest);
    Some(text)
}

fn dimension(rule: Option<&Value>) -> &'static str {
    let Some(props) = rule.and_then(|r| r.get("properties")) else {
        return "quality";
    };
    if props.get("security-severity").is_some() {
        return "security";
    }
    let tags: Vec<String> = props
        .get("tags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_ascii_lowercase)
        .collect();
    let has = |t: &str| tags.iter().any(|x| x == t);
    if has("security") {
        "security"
    } else if has("performance") {
        "performance"
    } else if has("correctness") || has("reliability") {
        "correctness"
    } else {
        "quality"
    }
}

fn fingerprint(
    result: &Value,
    rule_id: &str,
    file: Option<&str>,
    line: Option<u32>,
    column: Option<u32>,
    message: &str,
) -> Fingerprint {
    for key in ["partialFingerprints", "fingerprints"] {
        if let Some(Value::Object(map)) = result.get(key)
            && !map.is_empty()
        {
            let mut pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                    )
                })
                .collect();
            pairs.sort();
            let mut parts = vec!["sarif", key, rule_id, file.unwrap_or("")];
            parts.extend(pairs.iter().map(String::as_str));
            return Fingerprint::from_parts(&parts);
        }
    }
    Fingerprint::from_parts(&[
        "sarif",
        rule_id,
        file.unwrap_or(""),
        &line.map(|l| l.to_string()).unwrap_or_default(),
        &column.map(|c| c.to_string()).unwrap_or_default(),
        message,
    ])
}

/// The result's `partialFingerprints` with string values (kept on the
/// finding: the findings ledger keys it by them).
fn partial_fingerprints(result: &Value) -> std::collections::BTreeMap<String, String> {
    result
        .get("partialFingerprints")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A SARIF artifact URI as a path: `file://` stripped, `%xx` decoded.
pub fn uri_to_path(uri: &str) -> String {
    let path = if let Some(rest) = uri.strip_prefix("file://") {
        // `file:///abs` → `/abs`; `file://host/p` keeps `/p`.
        match rest.find('/') {
            Some(i) => &rest[i..],
            None => rest,
        }
    } else if let Some(rest) = uri.strip_prefix("file:") {
        rest
    } else {
        uri
    };
    percent_decode(path)
}

/// `%XX` escapes decoded (an invalid one is kept as written), the bytes read
/// as UTF-8 with invalid sequences replaced.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}
