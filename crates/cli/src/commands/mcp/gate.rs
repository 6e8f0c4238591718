//! The confirmation gate of a tool that changes the repository: approved
//! by `yes: true` in the call, or — when the client declared form
//! elicitation — by its user, asked through an MCP elicitation request
//! (`elicitation/create`, one required boolean `approve`). Never approved
//! silently: a client that cannot ask gets the refusal naming `yes: true`,
//! a declined, cancelled or failed question runs nothing.

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

/// How a gate was passed, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Approval {
    /// `yes: true` in the call, or the user accepted.
    Approved,
    /// Not approved; the text says why and what to do.
    Refused(String),
}

/// The question a gate asks and the refusal it gives.
pub(super) struct Gate<'a> {
    /// What the call will do, as asked of the user ("Run … ?").
    pub question: String,
    /// The refusal for a client that cannot ask (names `yes: true`).
    pub unapproved: &'a str,
}

/// Passes the gate: `yes` approves; else the client's user is asked when
/// the client supports form elicitation; else the refusal.
pub(super) async fn approve(
    yes: bool,
    gate: Gate<'_>,
    peer: &Peer<RoleServer>,
    ct: &CancellationToken,
) -> Approval {
    if yes {
        return Approval::Approved;
    }
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return Approval::Refused(gate.unapproved.to_owned());
    }
    let schema = match ElicitationSchema::builder()
        .required_bool_with("approve", |b| {
            b.title("Approve")
                .description("true runs it now; false leaves the repository as it is")
        })
        .build()
    {
        Ok(schema) => schema,
        Err(e) => return Approval::Refused(format!("{} ({e})", gate.unapproved)),
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: gate.question,
        requested_schema: schema,
    };
    let answer = tokio::select! {
        answer = peer.create_elicitation(params) => answer,
        () = ct.cancelled() => {
            return Approval::Refused("the call was cancelled while its approval was asked; nothing ran".to_owned());
        }
    };
    decide(answer.map_err(|e| e.to_string()), gate.unapproved)
}

/// The approval an elicitation answer gives.
fn decide(answer: Result<rmcp::model::ElicitResult, String>, unapproved: &str) -> Approval {
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
        .and_then(|c| c.get("approve"))
        .and_then(serde_json::Value::as_bool);
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
    use rmcp::model::ElicitResult;
    use serde_json::json;

    fn answer(action: ElicitationAction, content: Option<serde_json::Value>) -> ElicitResult {
        let mut r = ElicitResult::new(action);
        r.content = content;
        r
    }

    #[test]
    fn only_an_accepted_true_approves() {
        let no = "pass `yes: true`";
        assert_eq!(
            decide(
                Ok(answer(
                    ElicitationAction::Accept,
                    Some(json!({"approve": true}))
                )),
                no
            ),
            Approval::Approved
        );
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
