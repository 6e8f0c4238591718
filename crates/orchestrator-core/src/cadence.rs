//! The ci-autofix cadence matrix ("OQ2"): what to do with a failing CI check
//! at a given iteration, given how its log was classified.
//!
//! The seed's table is kept here **as data** ([`MATRIX`]) and read by one
//! lookup function, [`decide`]. Two rules sit outside the table and are
//! checked before it, in this order:
//!
//! 1. an iteration past the cap ([`DEFAULT_MAX_ITERATIONS`], 3) that is still
//!    failing gets a *mandatory blocking escalation* — never a silent timeout
//!    and never a fourth automatic patch;
//! 2. a second `unknown` classification in a row hands the failure over to
//!    the user (*manual takeover*: "classifier cannot interpret");
//! 3. an `infrastructure` failure again after its re-run is escalated with
//!    its evidence (the re-run is allowed once).
//!
//! Beside the seed's classes the table has two that are not the code's
//! fault and are never patched: `infrastructure` (a runner lost or killed,
//! a network, registry or disk failure: re-run once) and `flaky` (failed,
//! then passed on a re-run at the same commit: reported, no commit).
//!
//! Everything here is pure: no I/O, no clock.
//!
//! ```
//! use orchestrator_core::cadence::{decide, Action, Classification, SubClass};
//!
//! let d = decide(2, Classification::Mechanical(SubClass::Trivial), None);
//! assert_eq!(d.action, Action::SilentApplyAndLog);
//! assert!(!d.asks_user);
//! ```

use std::fmt;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// How many iterations the loop runs before the mandatory escalation.
pub const DEFAULT_MAX_ITERATIONS: u32 = 3;

/// Why a classification could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CadenceError {
    /// `classification=` had a value other than the known classes.
    #[error(
        "unknown classification `{value}` (expected mechanical, semantic, unknown, infrastructure or flaky)"
    )]
    UnknownClassification {
        /// The value found.
        value: String,
    },
    /// `sub_class=` had a value other than trivial/non-trivial/none.
    #[error("unknown sub_class `{value}` (expected trivial, non-trivial or none)")]
    UnknownSubClass {
        /// The value found.
        value: String,
    },
    /// A mechanical classification came without a trivial/non-trivial sub-class.
    #[error("classification `mechanical` needs sub_class trivial or non-trivial, got `{value}`")]
    MechanicalWithoutSubClass {
        /// The sub_class value found (possibly empty).
        value: String,
    },
    /// The classifier output had no `classification=` line.
    #[error("classifier output has no `classification=` line")]
    MissingClassification,
}

/// How hard a mechanical failure is to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubClass {
    /// Whitespace, gofmt/goimports, import order.
    Trivial,
    /// Unchecked errors, unused names, undefined names, missing imports, lints.
    NonTrivial,
}

impl SubClass {
    /// The classifier's spelling: `trivial` or `non-trivial`.
    pub fn as_str(self) -> &'static str {
        match self {
            SubClass::Trivial => "trivial",
            SubClass::NonTrivial => "non-trivial",
        }
    }
}

/// The class of a CI failure, as the classifier reports it.
///
/// Serialised as the two fields of the classifier's output and of the state
/// file: `{"classification": "mechanical", "sub_class": "trivial"}`, with
/// `sub_class` `none` for semantic and unknown failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "ClassificationWire", into = "ClassificationWire")]
pub enum Classification {
    /// A failure a patch can fix without understanding intent (format, lint).
    Mechanical(SubClass),
    /// A failure that needs understanding (failed assertion, race, panic).
    Semantic,
    /// The classifier recognised nothing.
    Unknown,
    /// Not the code's fault: the runner was lost, killed (out of memory,
    /// exit 137), cancelled or timed out, or a network, registry, rate
    /// limit or disk failure. Never patched; re-run once.
    Infrastructure,
    /// Failed, then passed on a re-run at the same commit. Never patched.
    Flaky,
}

/// Every classification, in table order. Handy for exhaustive loops.
pub const ALL_CLASSIFICATIONS: [Classification; 6] = [
    Classification::Mechanical(SubClass::Trivial),
    Classification::Mechanical(SubClass::NonTrivial),
    Classification::Semantic,
    Classification::Unknown,
    Classification::Infrastructure,
    Classification::Flaky,
];

impl Classification {
    /// The `classification=` value: `mechanical`, `semantic` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Classification::Mechanical(_) => "mechanical",
            Classification::Semantic => "semantic",
            Classification::Unknown => "unknown",
            Classification::Infrastructure => "infrastructure",
            Classification::Flaky => "flaky",
        }
    }

    /// The `sub_class=` value: `trivial`, `non-trivial` or `none`.
    pub fn sub_class_str(self) -> &'static str {
        match self {
            Classification::Mechanical(sub) => sub.as_str(),
            Classification::Semantic
            | Classification::Unknown
            | Classification::Infrastructure
            | Classification::Flaky => "none",
        }
    }

    /// Reads the two values of the classifier's output. Matching ignores case
    /// and surrounding space. For semantic and unknown failures the sub-class
    /// must be `none`, `n/a` or empty; a mechanical failure needs `trivial` or
    /// `non-trivial`.
    pub fn parse(classification: &str, sub_class: &str) -> Result<Self, CadenceError> {
        let class = classification.trim().to_ascii_lowercase();
        let sub = sub_class.trim().to_ascii_lowercase();
        let sub_parsed = match sub.as_str() {
            "trivial" => Some(SubClass::Trivial),
            "non-trivial" => Some(SubClass::NonTrivial),
            "none" | "n/a" | "" => None,
            _ => {
                return Err(CadenceError::UnknownSubClass {
                    value: sub_class.trim().to_owned(),
                });
            }
        };
        match (class.as_str(), sub_parsed) {
            ("mechanical", Some(sub)) => Ok(Classification::Mechanical(sub)),
            ("mechanical", None) => Err(CadenceError::MechanicalWithoutSubClass {
                value: sub_class.trim().to_owned(),
            }),
            ("semantic", None) => Ok(Classification::Semantic),
            ("unknown", None) => Ok(Classification::Unknown),
            ("infrastructure", None) => Ok(Classification::Infrastructure),
            ("flaky", None) => Ok(Classification::Flaky),
            ("semantic" | "unknown" | "infrastructure" | "flaky", Some(_)) => {
                Err(CadenceError::UnknownSubClass {
                    value: sub_class.trim().to_owned(),
                })
            }
            _ => Err(CadenceError::UnknownClassification {
                value: classification.trim().to_owned(),
            }),
        }
    }

    /// Reads the classifier's whole text output (`classification=…` and
    /// `sub_class=…` lines; other lines are ignored, a missing `sub_class`
    /// line reads as `none`).
    pub fn parse_output(output: &str) -> Result<Self, CadenceError> {
        let mut class = None;
        let mut sub = "";
        for line in output.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("classification=") {
                class = Some(v);
            } else if let Some(v) = line.strip_prefix("sub_class=") {
                sub = v;
            }
        }
        let class = class.ok_or(CadenceError::MissingClassification)?;
        Self::parse(class, sub)
    }

    /// The classifier's text output for this classification.
    pub fn to_output(self) -> String {
        format!(
            "classification={}\nsub_class={}\n",
            self.as_str(),
            self.sub_class_str()
        )
    }
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.as_str(), self.sub_class_str())
    }
}

/// Serde form of [`Classification`].
#[derive(Serialize, Deserialize)]
struct ClassificationWire {
    classification: String,
    sub_class: String,
}

impl From<Classification> for ClassificationWire {
    fn from(c: Classification) -> Self {
        Self {
            classification: c.as_str().to_owned(),
            sub_class: c.sub_class_str().to_owned(),
        }
    }
}

impl TryFrom<ClassificationWire> for Classification {
    type Error = CadenceError;
    fn try_from(w: ClassificationWire) -> Result<Self, Self::Error> {
        Classification::parse(&w.classification, &w.sub_class)
    }
}

/// An iteration of the fix loop, as the matrix distinguishes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Iteration {
    /// The first iteration: every patch is confirmed.
    First,
    /// The second iteration.
    Second,
    /// The third iteration.
    Third,
    /// Past the cap and still failing.
    PostCap,
}

impl Iteration {
    /// Maps a 1-based iteration number to its matrix row, with the default cap
    /// of [`DEFAULT_MAX_ITERATIONS`]. Iteration 0 is read as 1.
    pub fn from_number(n: u32) -> Self {
        match n {
            0 | 1 => Iteration::First,
            2 => Iteration::Second,
            3 => Iteration::Third,
            _ => Iteration::PostCap,
        }
    }

    /// The label used in the table: `1`, `2`, `3`, `post-iter-3`.
    pub fn label(self) -> &'static str {
        match self {
            Iteration::First => "1",
            Iteration::Second => "2",
            Iteration::Third => "3",
            Iteration::PostCap => "post-iter-3",
        }
    }
}

/// What the loop does with a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Propose the patch, ask the user ("Apply patch (recommended)" first), apply on yes.
    ConfirmAndApply,
    /// Apply the patch without asking; record it in the audit log.
    SilentApplyAndLog,
    /// Do not patch; escalate to the user with a diagnostic report.
    EscalateNoPatch,
    /// Stop and ask the user, blocking, with no timer: manual fix, change the spec, or abandon.
    MandatoryBlockingEscalation,
    /// The classifier cannot interpret the log: the user takes over by hand.
    ManualTakeover,
    /// Not the code's fault: re-run the failed job once, patch nothing.
    RerunOnce,
    /// The failure passed on a re-run: report it flaky, commit nothing.
    ReportFlaky,
}

impl Action {
    /// The kebab-case name (state file `last_action`).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::ConfirmAndApply => "confirm-and-apply",
            Action::SilentApplyAndLog => "silent-apply-and-log",
            Action::EscalateNoPatch => "escalate-no-patch",
            Action::MandatoryBlockingEscalation => "mandatory-blocking-escalation",
            Action::ManualTakeover => "manual-takeover",
            Action::RerunOnce => "rerun-once",
            Action::ReportFlaky => "report-flaky",
        }
    }

    /// The seed's wording in the matrix (`confirm + apply`, …).
    pub fn table_label(self) -> &'static str {
        match self {
            Action::ConfirmAndApply => "confirm + apply",
            Action::SilentApplyAndLog => "silent + apply + log",
            Action::EscalateNoPatch => "escalate (no patch)",
            Action::MandatoryBlockingEscalation => "mandatory escalation",
            Action::ManualTakeover => "manual takeover",
            Action::RerunOnce => "re-run once (no patch)",
            Action::ReportFlaky => "report flaky (no patch)",
        }
    }

    /// Whether the action applies a patch.
    pub fn applies_patch(self) -> bool {
        matches!(self, Action::ConfirmAndApply | Action::SilentApplyAndLog)
    }
}

/// Which classifications a matrix row covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClassPattern {
    /// `mechanical` / `trivial`.
    MechanicalTrivial,
    /// `mechanical` / `non-trivial`.
    MechanicalNonTrivial,
    /// `semantic` or `unknown` (sub-class n/a).
    SemanticOrUnknown,
    /// `infrastructure`.
    Infrastructure,
    /// `flaky`.
    Flaky,
    /// Any classification.
    Any,
}

impl ClassPattern {
    /// Whether `class` falls under this pattern.
    pub fn matches(self, class: Classification) -> bool {
        match self {
            ClassPattern::MechanicalTrivial => {
                class == Classification::Mechanical(SubClass::Trivial)
            }
            ClassPattern::MechanicalNonTrivial => {
                class == Classification::Mechanical(SubClass::NonTrivial)
            }
            ClassPattern::SemanticOrUnknown => {
                matches!(class, Classification::Semantic | Classification::Unknown)
            }
            ClassPattern::Infrastructure => class == Classification::Infrastructure,
            ClassPattern::Flaky => class == Classification::Flaky,
            ClassPattern::Any => true,
        }
    }

    /// The table's `classification` column.
    pub fn class_label(self) -> &'static str {
        match self {
            ClassPattern::MechanicalTrivial | ClassPattern::MechanicalNonTrivial => "mechanical",
            ClassPattern::SemanticOrUnknown => "semantic / unknown",
            ClassPattern::Infrastructure => "infrastructure",
            ClassPattern::Flaky => "flaky",
            ClassPattern::Any => "any (still failing)",
        }
    }

    /// The table's `sub_class` column.
    pub fn sub_class_label(self) -> &'static str {
        match self {
            ClassPattern::MechanicalTrivial => "trivial",
            ClassPattern::MechanicalNonTrivial => "non-trivial",
            ClassPattern::SemanticOrUnknown
            | ClassPattern::Infrastructure
            | ClassPattern::Flaky
            | ClassPattern::Any => "n/a",
        }
    }
}

/// One row of the cadence matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixRow {
    /// The iteration the row applies to.
    pub iteration: Iteration,
    /// The classifications it covers.
    pub class: ClassPattern,
    /// What to do.
    pub action: Action,
    /// Whether the user is asked.
    pub asks_user: bool,
    /// Whether the question blocks with no automatic answer.
    pub blocking: bool,
    /// The seed's remark on the question.
    pub note: &'static str,
}

const fn row(
    iteration: Iteration,
    class: ClassPattern,
    action: Action,
    asks_user: bool,
    blocking: bool,
    note: &'static str,
) -> MatrixRow {
    MatrixRow {
        iteration,
        class,
        action,
        asks_user,
        blocking,
        note,
    }
}

/// The OQ2 cadence matrix, row for row as the seed states it, with the
/// rows of the two classes that are not the code's fault.
#[rustfmt::skip]
pub const MATRIX: [MatrixRow; 16] = {
    use Action::*;
    use ClassPattern::*;
    use Iteration::*;
    const APPLY_FIRST: &str = "first option \"Apply patch (recommended)\"";
    const LOGGED: &str = "automatic, recorded only in report";
    const RERUN: &str = "never patched; once, then escalated with the evidence";
    const FLAKY: &str = "passed on a re-run at the same commit; no commit";
    [
        //  iteration class                 action                       asks   blocks note
        row(First,   MechanicalTrivial,    ConfirmAndApply,             true,  false, APPLY_FIRST),
        row(First,   MechanicalNonTrivial, ConfirmAndApply,             true,  false, APPLY_FIRST),
        row(First,   SemanticOrUnknown,    EscalateNoPatch,             true,  false, "includes diagnostic report"),
        row(First,   Infrastructure,       RerunOnce,                   false, false, RERUN),
        row(First,   Flaky,                ReportFlaky,                 false, false, FLAKY),
        row(Second,  MechanicalTrivial,    SilentApplyAndLog,           false, false, LOGGED),
        row(Second,  MechanicalNonTrivial, ConfirmAndApply,             true,  false, ""),
        row(Second,  SemanticOrUnknown,    EscalateNoPatch,             true,  false, ""),
        row(Second,  Infrastructure,       RerunOnce,                   false, false, RERUN),
        row(Second,  Flaky,                ReportFlaky,                 false, false, FLAKY),
        row(Third,   MechanicalTrivial,    SilentApplyAndLog,           false, false, LOGGED),
        row(Third,   MechanicalNonTrivial, ConfirmAndApply,             true,  false, ""),
        row(Third,   SemanticOrUnknown,    EscalateNoPatch,             true,  false, ""),
        row(Third,   Infrastructure,       RerunOnce,                   false, false, RERUN),
        row(Third,   Flaky,                ReportFlaky,                 false, false, FLAKY),
        row(PostCap, Any,                  MandatoryBlockingEscalation, true,  true,  "blocking, no timer"),
    ]
};

/// The matrix row for an iteration and a class. Every (iteration, class)
/// pair has exactly one row (checked by the tests).
pub fn lookup(iteration: Iteration, class: Classification) -> Option<&'static MatrixRow> {
    MATRIX
        .iter()
        .find(|r| r.iteration == iteration && r.class.matches(class))
}

/// What the loop must do at one iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The action.
    pub action: Action,
    /// Whether the user is asked.
    pub asks_user: bool,
    /// Whether the question blocks with no automatic answer (an auto-yes gate defers it).
    pub blocking: bool,
    /// Why, in words, for the audit log and the question.
    pub reason: String,
}

/// The cadence with a configurable cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cadence {
    /// Iterations after which a still-failing check gets the mandatory escalation.
    pub max_iterations: u32,
}

impl Default for Cadence {
    fn default() -> Self {
        Self {
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

impl Cadence {
    /// The decision for `iteration` (1-based; 0 reads as 1) of a failure
    /// classified as `class`, the previous iteration's failure having been
    /// classified as `previous_class` (`None` at the first iteration).
    ///
    /// Checks, in order: past the cap → mandatory blocking escalation;
    /// `unknown` twice in a row → manual takeover; otherwise the matrix. With
    /// a cap other than 3, iterations between 3 and the cap use the third
    /// iteration's row and a cap below 3 escalates earlier.
    pub fn decide(
        &self,
        iteration: u32,
        class: Classification,
        previous_class: Option<Classification>,
    ) -> Decision {
        let iteration = iteration.max(1);
        let cap = self.max_iterations.max(1);
        if iteration > cap {
            return Decision {
                action: Action::MandatoryBlockingEscalation,
                asks_user: true,
                blocking: true,
                reason: format!(
                    "iteration {iteration} is past the limit of {cap} and the check still fails \
                     ({class}): the user must decide (manual fix, change the spec, or abandon the PR)"
                ),
            };
        }
        if class == Classification::Unknown && previous_class == Some(Classification::Unknown) {
            return Decision {
                action: Action::ManualTakeover,
                asks_user: true,
                blocking: true,
                reason: "classifier cannot interpret: unknown twice in a row, manual takeover"
                    .to_owned(),
            };
        }
        if class == Classification::Infrastructure
            && previous_class == Some(Classification::Infrastructure)
        {
            return Decision {
                action: Action::EscalateNoPatch,
                asks_user: true,
                blocking: false,
                reason: "an infrastructure failure again after its re-run: not patched, \
                         escalated with the evidence"
                    .to_owned(),
            };
        }
        let row_iteration = Iteration::from_number(iteration.min(DEFAULT_MAX_ITERATIONS));
        match lookup(row_iteration, class) {
            Some(r) => Decision {
                action: r.action,
                asks_user: r.asks_user,
                blocking: r.blocking,
                reason: format!(
                    "iteration {iteration}, {class}: {}{}",
                    r.action.table_label(),
                    if r.note.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", r.note)
                    }
                ),
            },
            // Unreachable: the matrix covers every class for iterations 1–3.
            None => Decision {
                action: Action::MandatoryBlockingEscalation,
                asks_user: true,
                blocking: true,
                reason: format!("no matrix row for iteration {iteration}, {class}"),
            },
        }
    }
}

/// [`Cadence::decide`] with the default cap of 3 iterations.
pub fn decide(
    iteration: u32,
    class: Classification,
    previous_class: Option<Classification>,
) -> Decision {
    Cadence::default().decide(iteration, class, previous_class)
}

/// The matrix as a markdown table, for docs and reports.
pub fn render_table_markdown() -> String {
    let mut out = String::from(
        "| iteration | classification | sub_class | action | asks user? | blocking | note |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in &MATRIX {
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.iteration.label(),
            r.class.class_label(),
            r.class.sub_class_label(),
            r.action.table_label(),
            if r.asks_user { "YES" } else { "NO" },
            if r.blocking { "yes" } else { "no" },
            r.note,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's state-machine prose, written independently of the table:
    /// semantic/unknown → escalate; iteration 1 → confirm; trivial at ≥ 2 →
    /// silent; else confirm. Plus the two rules outside the table.
    fn oracle(iteration: u32, class: Classification, previous: Option<Classification>) -> Action {
        if iteration > 3 {
            return Action::MandatoryBlockingEscalation;
        }
        if class == Classification::Unknown && previous == Some(Classification::Unknown) {
            return Action::ManualTakeover;
        }
        if class == Classification::Infrastructure
            && previous == Some(Classification::Infrastructure)
        {
            return Action::EscalateNoPatch;
        }
        match class {
            Classification::Infrastructure => Action::RerunOnce,
            Classification::Flaky => Action::ReportFlaky,
            Classification::Semantic | Classification::Unknown => Action::EscalateNoPatch,
            _ if iteration <= 1 => Action::ConfirmAndApply,
            Classification::Mechanical(SubClass::Trivial) => Action::SilentApplyAndLog,
            Classification::Mechanical(SubClass::NonTrivial) => Action::ConfirmAndApply,
        }
    }

    #[test]
    fn every_iteration_class_and_previous_class() {
        let previous: Vec<Option<Classification>> = std::iter::once(None)
            .chain(ALL_CLASSIFICATIONS.iter().copied().map(Some))
            .collect();
        let mut seen = 0;
        for iteration in 1..=5 {
            for class in ALL_CLASSIFICATIONS {
                for &prev in &previous {
                    let d = decide(iteration, class, prev);
                    let expected = oracle(iteration, class, prev);
                    assert_eq!(
                        d.action, expected,
                        "iteration {iteration}, {class}, prev {prev:?}"
                    );
                    // Only the silent apply, the re-run and the flaky report
                    // go without asking; only the escalations past the
                    // table block.
                    assert_eq!(
                        d.asks_user,
                        !matches!(
                            expected,
                            Action::SilentApplyAndLog | Action::RerunOnce | Action::ReportFlaky
                        )
                    );
                    assert_eq!(
                        d.blocking,
                        matches!(
                            expected,
                            Action::MandatoryBlockingEscalation | Action::ManualTakeover
                        )
                    );
                    assert!(!d.reason.is_empty());
                    // Semantic and unknown failures are never patched.
                    if !matches!(class, Classification::Mechanical(_)) {
                        assert!(!d.action.applies_patch());
                    }
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, 5 * 6 * 7);
    }

    #[test]
    fn every_table_cell_has_exactly_one_row() {
        for iteration in [
            Iteration::First,
            Iteration::Second,
            Iteration::Third,
            Iteration::PostCap,
        ] {
            for class in ALL_CLASSIFICATIONS {
                let n = MATRIX
                    .iter()
                    .filter(|r| r.iteration == iteration && r.class.matches(class))
                    .count();
                assert_eq!(n, 1, "{iteration:?} × {class}");
            }
        }
    }

    #[test]
    fn unknown_twice_is_manual_takeover_with_the_seed_reason() {
        let d = decide(2, Classification::Unknown, Some(Classification::Unknown));
        assert_eq!(d.action, Action::ManualTakeover);
        assert!(d.reason.contains("classifier cannot interpret"));
        // Unknown after something else is a normal escalation.
        let d = decide(2, Classification::Unknown, Some(Classification::Semantic));
        assert_eq!(d.action, Action::EscalateNoPatch);
    }

    #[test]
    fn cap_is_checked_before_the_unknown_rule_and_is_configurable() {
        let d = decide(4, Classification::Unknown, Some(Classification::Unknown));
        assert_eq!(d.action, Action::MandatoryBlockingEscalation);
        let c = Cadence { max_iterations: 5 };
        let trivial = Classification::Mechanical(SubClass::Trivial);
        assert_eq!(c.decide(5, trivial, None).action, Action::SilentApplyAndLog);
        assert_eq!(
            c.decide(6, trivial, None).action,
            Action::MandatoryBlockingEscalation
        );
        let c = Cadence { max_iterations: 1 };
        assert_eq!(
            c.decide(2, trivial, None).action,
            Action::MandatoryBlockingEscalation
        );
        assert_eq!(decide(0, trivial, None).action, Action::ConfirmAndApply);
    }

    #[test]
    fn classification_text_round_trips() {
        for class in ALL_CLASSIFICATIONS {
            assert_eq!(Classification::parse_output(&class.to_output()), Ok(class));
            let json = serde_json::to_value(class).unwrap();
            assert_eq!(
                json,
                serde_json::json!({"classification": class.as_str(), "sub_class": class.sub_class_str()})
            );
            assert_eq!(
                serde_json::from_value::<Classification>(json).unwrap(),
                class
            );
        }
        assert_eq!(
            Classification::parse(" Mechanical ", "NON-TRIVIAL"),
            Ok(Classification::Mechanical(SubClass::NonTrivial))
        );
        assert_eq!(
            Classification::parse("semantic", ""),
            Ok(Classification::Semantic)
        );
        assert_eq!(
            Classification::parse_output("noise\nclassification=unknown\n"),
            Ok(Classification::Unknown)
        );
    }

    #[test]
    fn classification_parse_errors_name_the_value() {
        let cases = [
            (
                ("bogus", "none"),
                "unknown classification `bogus` (expected mechanical, semantic, unknown, infrastructure or flaky)",
            ),
            (
                ("mechanical", "none"),
                "classification `mechanical` needs sub_class trivial or non-trivial, got `none`",
            ),
            (
                ("mechanical", "easy"),
                "unknown sub_class `easy` (expected trivial, non-trivial or none)",
            ),
            (
                ("semantic", "trivial"),
                "unknown sub_class `trivial` (expected trivial, non-trivial or none)",
            ),
        ];
        for ((c, s), msg) in cases {
            assert_eq!(Classification::parse(c, s).unwrap_err().to_string(), msg);
        }
        assert_eq!(
            Classification::parse_output("sub_class=trivial"),
            Err(CadenceError::MissingClassification)
        );
    }

    proptest::proptest! {
        /// Past the cap every decision is a blocking escalation; below it a
        /// semantic or unknown failure is never patched and only a trivial
        /// one is applied without asking.
        #[test]
        fn invariants_for_any_cap_and_iteration(
            cap in 0u32..8,
            iteration in 0u32..20,
            class in proptest::sample::select(ALL_CLASSIFICATIONS.to_vec()),
            previous in proptest::option::of(proptest::sample::select(ALL_CLASSIFICATIONS.to_vec())),
        ) {
            let d = Cadence { max_iterations: cap }.decide(iteration, class, previous);
            if iteration.max(1) > cap.max(1) {
                proptest::prop_assert_eq!(d.action, Action::MandatoryBlockingEscalation);
            }
            proptest::prop_assert_eq!(
                d.blocking,
                matches!(d.action, Action::MandatoryBlockingEscalation | Action::ManualTakeover)
            );
            // Failures that are not the code's fault are never patched.
            if matches!(class, Classification::Infrastructure | Classification::Flaky) {
                proptest::prop_assert!(!d.action.applies_patch());
            }
            if !matches!(class, Classification::Mechanical(_)) {
                proptest::prop_assert!(!d.action.applies_patch());
            }
            if !d.asks_user && class == Classification::Mechanical(SubClass::Trivial) {
                proptest::prop_assert!(iteration >= 2);
            }
            if !d.asks_user {
                proptest::prop_assert!(matches!(
                    class,
                    Classification::Mechanical(SubClass::Trivial)
                        | Classification::Infrastructure
                        | Classification::Flaky
                ));
            }
        }
    }

    #[test]
    fn table_renders_as_markdown() {
        insta::assert_snapshot!(render_table_markdown());
    }
}
