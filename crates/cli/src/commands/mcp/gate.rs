//! The confirmation gate of a tool that changes the repository: approved
//! by `yes: true` in the call, or — when the client declared form
//! elicitation — by its user, asked with one required boolean `approve`:
//! on a handshake session (protocol up to 2025-11-25) by an
//! `elicitation/create` request while the call waits; on a 2026-07-28
//! session, where a server sends no requests of its own, by answering the
//! call with an `InputRequiredResult` carrying the elicitation, which the
//! client answers by calling again with `inputResponses`. Never approved
//! silently: a client that cannot ask gets the refusal naming `yes: true`;
//! a declined, cancelled or failed question runs nothing.

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::RequestContext;
use serde_json::Value;

/// The key of the approval in an `InputRequiredResult` and its answer.
const APPROVE: &str = "approve";

/// How a gate was passed, or why not.
#[derive(Debug, Clone)]
pub(super) enum Approval {
    /// `yes: true` in the call, or the user accepted.
    Approved,
    /// Not approved; the text says why and what to do.
    Refused(String),
    /// Ask the user, then call again (a 2026-07-28 session).
    Ask(Box<InputRequiredResult>),
}

/// The question a gate asks and the refusal it gives.
pub(super) struct Gate<'a> {
    /// What the call will do, as asked of the user ("Run … ?").
    pub question: String,
    /// The refusal for a client that cannot ask (names `yes: true`).
    pub unapproved: &'a str,
}

/// Passes the gate: `yes` approves; else the user's answer in `responses`
/// (a retried 2026-07-28 call) decides; else the client's user is asked
/// when the client supports form elicitation; else the refusal.
pub(super) async fn approve(
    yes: bool,
    gate: Gate<'_>,
    context: &RequestContext<RoleServer>,
    responses: Option<&BTreeMap<String, Value>>,
) -> Approval {
    if yes {
        return Approval::Approved;
    }
    let modern = context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    if modern && let Some(answer) = responses.and_then(|r| r.get(APPROVE)) {
        let answer = serde_json::from_value::<ElicitResult>(answer.clone())
            .map_err(|e| format!("its answer is no elicitation result: {e}"));
        return decide(answer, gate.unapproved);
    }
    // `{}` (neither form nor url named) means form.
    let can_ask = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !can_ask {
        return Approval::Refused(gate.unapproved.to_owned());
    }
    let params = match question(gate.question) {
        Ok(params) => params,
        Err(e) => return Approval::Refused(format!("{} ({e})", gate.unapproved)),
    };
    if modern {
        let request = InputRequest::Elicitation(ElicitRequest::new(params));
        return Approval::Ask(Box::new(InputRequiredResult::from_input_requests(
            BTreeMap::from([(APPROVE.to_owned(), request)]),
        )));
    }
    let answer = tokio::select! {
        answer = context.peer.create_elicitation(params) => answer,
        () = context.ct.cancelled() => {
            return Approval::Refused("the call was cancelled while its approval was asked; nothing ran".to_owned());
        }
    };
    decide(answer.map_err(|e| e.to_string()), gate.unapproved)
}

/// The form that asks `message`: one required boolean, `approve`.
fn question(message: String) -> Result<ElicitRequestParams, &'static str> {
    let schema = ElicitationSchema::builder()
        .required_bool_with(APPROVE, |b| {
            b.title("Approve")
                .description("true runs it now; false leaves the repository as it is")
        })
        .build()?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

/// The approval an elicitation answer gives.
fn decide(answer: Result<ElicitResult, String>, unapproved: &str) -> Approval {
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => {
            return Approval::Refused(format!(
                "the client could not ask for approval ({e}); {unapproved}"
            ));
        }
    };
    let approve = answer
        .content
        .as_ref()
        .and_then(|c| c.get(APPROVE))
        .and_then(Value::as_bool);
    match (answer.action, approve) {
        (ElicitationAction::Accept, Some(true)) => Approval::Approved,
        (ElicitationAction::Accept, _) => {
            Approval::Refused("the user did not approve (approve: false); nothing ran".to_owned())
        }
        (ElicitationAction::Decline, _) => {
            Approval::Refused("the user declined; nothing ran".to_owned())
        }
        _ => Approval::Refused("the user cancelled the approval; nothing ran".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(action: ElicitationAction, content: Option<serde_json::Value>) -> ElicitResult {
        let mut r = ElicitResult::new(action);
        r.content = content;
        r
    }

    #[test]
    fn only_an_accepted_true_approves() {
        let no = "pass `yes: true`";
        assert!(matches!(
            decide(
                Ok(answer(
                    ElicitationAction::Accept,
                    Some(json!({"approve": true}))
                )),
                no
            ),
            Approval::Approved
        ));
        for (action, content, why) in [
            (
                ElicitationAction::Accept,
                Some(json!({"approve": false})),
                "approve: false",
            ),
            (ElicitationAction::Accept, None, "approve: false"),
            (
                ElicitationAction::Accept,
                Some(json!({"approve": "yes"})),
                "approve: false",
            ),
            (
                ElicitationAction::Decline,
                Some(json!({"approve": true})),
                "declined",
            ),
            (ElicitationAction::Cancel, None, "cancelled"),
        ] {
            let Approval::Refused(text) = decide(Ok(answer(action.clone(), content)), no) else {
                panic!("{action:?} approved");
            };
            assert!(text.contains(why) && text.contains("nothing ran"), "{text}");
        }
        let Approval::Refused(text) = decide(Err("-32600 Elicitation not supported".into()), no)
        else {
            panic!("an error approved");
        };
        assert!(
            text.contains("Elicitation not supported") && text.contains(no),
            "{text}"
        );
    }
}
