//! [`Budget`]: turn, token and cost limits over all calls through one agent.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use orchestrator_core::{Agent, AgentError, AgentRequest, AgentResponse, Usage};

use crate::config::Price;

/// Limits for [`Budget`]; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BudgetLimits {
    /// Agent turns, summed over calls.
    pub max_turns: Option<u32>,
    /// Input plus output tokens, summed over calls.
    pub max_tokens: Option<u64>,
    /// Cost in US dollars, summed over calls.
    pub max_cost_usd: Option<f64>,
    /// Calls started.
    pub max_calls: Option<u32>,
    /// Wall time since the wrapper was made: no call starts after it, and a
    /// call running when it passes is cancelled.
    pub max_wall: Option<Duration>,
}

/// Sums the usage of every call and, once a limit is reached, answers
/// [`AgentError::Budget`] without calling the inner agent.
///
/// Accounting: a response adds its `usage` (tokens, cost) and at least one
/// turn (`usage.turns`, or 1 when the backend reports none); a failed call
/// adds one turn. A response that reports tokens but no cost is priced with
/// [`Budget::with_price`] when one is set. Every call started counts
/// towards `max_calls`. The check happens before a call, so calls running
/// at the same time may together overshoot by the usage of those calls.
///
/// `max_wall` is the one limit a running call cannot overshoot: each call
/// gets the time left as its time limit (the smaller of that and its own),
/// is dropped (which cancels it) [`WALL_GRACE`] after the wall passes, and
/// a call ended by the wall answers [`AgentError::Budget`], not a timeout.
#[derive(Debug)]
pub struct Budget<A> {
    inner: A,
    limits: BudgetLimits,
    price: Option<Price>,
    started: Instant,
    spent: Mutex<Spent>,
}

/// How long past `max_wall` a call may take to report its own timeout
/// before it is dropped.
pub const WALL_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Default, Clone, Copy)]
struct Spent {
    usage: Usage,
    calls: u32,
}

impl<A> Budget<A> {
    /// Wraps `inner` with `limits`, nothing spent yet.
    pub fn new(inner: A, limits: BudgetLimits) -> Self {
        Self {
            inner,
            limits,
            price: None,
            started: Instant::now(),
            spent: Mutex::new(Spent::default()),
        }
    }

    /// Builder: price responses that report tokens but no cost.
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// The wrapped agent.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The limits.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// Usage so far.
    pub fn spent(&self) -> Usage {
        self.lock().usage
    }

    /// Calls started so far.
    pub fn calls(&self) -> u32 {
        self.lock().calls
    }

    /// Which limit is exhausted, if any, as a message for the error.
    pub fn exhausted(&self) -> Option<String> {
        exhausted(&self.limits, &self.lock()).or_else(|| self.wall_left().err())
    }

    /// The wall time left (`None`: no wall limit), or the message saying it
    /// has passed.
    fn wall_left(&self) -> Result<Option<Duration>, String> {
        let Some(max) = self.limits.max_wall else {
            return Ok(None);
        };
        let elapsed = self.started.elapsed();
        match max.checked_sub(elapsed) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => Err(format!(
                "{:.1}s of the {:.1}s wall time used",
                elapsed.as_secs_f64(),
                max.as_secs_f64()
            )),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Spent> {
        self.spent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Which of `limits` `spent` has reached, as a message for the error.
fn exhausted(limits: &BudgetLimits, spent: &Spent) -> Option<String> {
    if let Some(max) = limits.max_calls
        && spent.calls >= max
    {
        return Some(format!("{} of {max} agent calls made", spent.calls));
    }
    let spent = spent.usage;
    if let Some(max) = limits.max_turns
        && spent.turns >= max
    {
        return Some(format!("{} of {max} turns used", spent.turns));
    }
    let tokens = spent.input_tokens + spent.output_tokens;
    if let Some(max) = limits.max_tokens
        && tokens >= max
    {
        return Some(format!("{tokens} of {max} tokens used"));
    }
    if let Some(max) = limits.max_cost_usd
        && spent.cost_usd >= max
    {
        return Some(format!("${:.4} of ${max:.4} spent", spent.cost_usd));
    }
    None
}

#[async_trait]
impl<A: Agent> Agent for Budget<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    fn reports_exact_changes(&self) -> bool {
        self.inner.reports_exact_changes()
    }
    fn declines(&self, finding: &orchestrator_core::finding::Finding) -> Option<String> {
        self.inner.declines(finding)
    }
    fn spent(&self) -> Option<orchestrator_core::agent::AgentSpent> {
        let spent = self.lock();
        Some(orchestrator_core::agent::AgentSpent {
            calls: spent.calls,
            usage: spent.usage,
        })
    }

    async fn run(&self, mut request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let wall = {
            // Checked and counted under one lock, so calls starting at once
            // cannot all pass the calls limit.
            let mut spent = self.lock();
            if let Some(message) = exhausted(&self.limits, &spent) {
                return Err(AgentError::Budget { message });
            }
            let wall = self
                .wall_left()
                .map_err(|message| AgentError::Budget { message })?;
            spent.calls += 1;
            wall
        };
        let mut result = match wall {
            None => self.inner.run(request).await,
            Some(left) => {
                request.time_limit = Some(request.time_limit.map_or(left, |t| t.min(left)));
                let call = tokio::time::timeout(left + WALL_GRACE, self.inner.run(request));
                let result = call.await.unwrap_or(Err(AgentError::Timeout {
                    seconds: left.as_secs_f64(),
                }));
                match (result, self.wall_left()) {
                    (Err(AgentError::Timeout { .. }), Err(message)) => Err(AgentError::Budget {
                        message: format!("{message}; the call running at the limit was cancelled"),
                    }),
                    (result, _) => result,
                }
            }
        };
        let mut used = match &mut result {
            Ok(response) => {
                if let (Some(price), Some(usage)) = (self.price, response.usage.as_mut())
                    && usage.cost_usd == 0.0
                {
                    usage.cost_usd = price.cost(usage.input_tokens, usage.output_tokens);
                }
                response.usage.unwrap_or_default()
            }
            Err(_) => Usage::default(),
        };
        used.turns = used.turns.max(1);
        self.lock().usage.add(&used);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrappers::scripted::{Scripted, Step, request, transient};

    fn with_usage(input: u64, output: u64, cost: f64, turns: u32) -> Step {
        let mut response = AgentResponse::text("ok");
        response.usage = Some(Usage {
            input_tokens: input,
            output_tokens: output,
            cost_usd: cost,
            turns,
        });
        Step {
            delay: std::time::Duration::ZERO,
            result: Ok(response),
        }
    }

    /// The wall limit hands each call the time left, cancels the call still
    /// running when it passes (after the grace), names the wall in the
    /// error, and starts no call after it.
    #[tokio::test(start_paused = true)]
    async fn the_wall_limit_cancels_the_running_call_and_starts_no_other() {
        let inner = Scripted::new([
            Step::ok("quick").after(Duration::from_secs(4)),
            Step::ok("too slow").after(Duration::from_secs(60)),
            Step::ok("never reached"),
        ]);
        let budget = Budget::new(
            inner,
            BudgetLimits {
                max_wall: Some(Duration::from_secs(10)),
                ..BudgetLimits::default()
            },
        );
        let started = Instant::now();
        assert!(budget.run(request("1")).await.is_ok());
        let Err(AgentError::Budget { message }) = budget.run(request("2")).await else {
            panic!("the slow call was not stopped by the wall");
        };
        assert!(message.contains("of the 10.0s wall time used"), "{message}");
        assert!(message.contains("cancelled"), "{message}");
        assert_eq!(started.elapsed(), Duration::from_secs(10) + WALL_GRACE);
        let limits: Vec<_> = budget
            .inner()
            .requests()
            .iter()
            .map(|r| r.time_limit)
            .collect();
        assert_eq!(
            limits,
            [Some(Duration::from_secs(10)), Some(Duration::from_secs(6))]
        );
        let Err(AgentError::Budget { message }) = budget.run(request("3")).await else {
            panic!("a call started after the wall");
        };
        assert!(message.ends_with("wall time used"), "{message}");
        assert_eq!(budget.inner().call_count(), 2);
        assert!(budget.exhausted().is_some());
    }

    #[tokio::test]
    async fn turns_are_counted_per_call_and_errors_count_one() {
        let inner = Scripted::new([
            Step::ok("no usage reported"),
            Step::err(transient("boom")),
            with_usage(0, 0, 0.0, 3),
            Step::ok("never reached"),
        ]);
        let budget = Budget::new(
            inner,
            BudgetLimits {
                max_turns: Some(5),
                ..BudgetLimits::default()
            },
        );
        assert!(budget.run(request("1")).await.is_ok());
        assert!(budget.run(request("2")).await.is_err());
        assert!(budget.run(request("3")).await.is_ok());
        assert_eq!(budget.spent().turns, 5);
        assert_eq!(
            budget.run(request("4")).await,
            Err(AgentError::Budget {
                message: "5 of 5 turns used".into()
            })
        );
        assert_eq!(
            budget.inner().call_count(),
            3,
            "the inner agent was not called"
        );
    }

    #[tokio::test]
    async fn tokens_are_summed_over_input_and_output() {
        let inner = Scripted::new([with_usage(400, 100, 0.0, 1), with_usage(300, 300, 0.0, 1)]);
        let budget = Budget::new(
            inner,
            BudgetLimits {
                max_tokens: Some(1000),
                ..BudgetLimits::default()
            },
        );
        assert!(budget.run(request("1")).await.is_ok());
        // 500 used: still under, the call that crosses the limit completes.
        assert!(budget.run(request("2")).await.is_ok());
        assert_eq!(
            budget.run(request("3")).await,
            Err(AgentError::Budget {
                message: "1100 of 1000 tokens used".into()
            })
        );
    }

    #[tokio::test]
    async fn the_calls_limit_counts_every_call_started() {
        let inner = Scripted::new([Step::ok("one"), Step::err(transient("two"))]);
        let budget = Budget::new(
            inner,
            BudgetLimits {
                max_calls: Some(2),
                ..BudgetLimits::default()
            },
        );
        assert!(budget.run(request("1")).await.is_ok());
        assert!(budget.run(request("2")).await.is_err());
        assert_eq!(
            budget.run(request("3")).await,
            Err(AgentError::Budget {
                message: "2 of 2 agent calls made".into()
            })
        );
        assert_eq!(budget.calls(), 2);
        assert_eq!(budget.inner().call_count(), 2);
    }

    #[tokio::test]
    async fn a_price_costs_tokens_only_where_the_backend_reports_no_cost() {
        let inner = Scripted::new([
            with_usage(1_000_000, 100_000, 0.0, 1),
            with_usage(1_000_000, 0, 0.25, 1),
        ]);
        let budget = Budget::new(
            inner,
            BudgetLimits {
                max_cost_usd: Some(10.0),
                ..BudgetLimits::default()
            },
        )
        .with_price(Price {
            input_usd_per_mtok: 1.0,
            output_usd_per_mtok: 5.0,
        });
        // 1.0 for the input, 0.5 for the output: the response says so too.
        let first = budget.run(request("1")).await.unwrap();
        assert!((first.usage.unwrap().cost_usd - 1.5).abs() < 1e-9);
        // A reported cost is kept as reported.
        let second = budget.run(request("2")).await.unwrap();
        assert!((second.usage.unwrap().cost_usd - 0.25).abs() < 1e-9);
        assert!((budget.spent().cost_usd - 1.75).abs() < 1e-9);
    }

    #[tokio::test]
    async fn cost_limit_stops_further_calls() {
        let inner = Scripted::new([with_usage(1, 1, 0.75, 1), with_usage(1, 1, 0.5, 1)]);
        let budget = Budget::new(
            inner,
            BudgetLimits {
                max_cost_usd: Some(1.0),
                ..BudgetLimits::default()
            },
        );
        assert!(budget.run(request("1")).await.is_ok());
        assert!(budget.run(request("2")).await.is_ok());
        let err = budget.run(request("3")).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "agent budget exhausted: $1.2500 of $1.0000 spent"
        );
        assert!(!err.is_transient());
    }

    #[tokio::test]
    async fn no_limits_never_refuses() {
        let budget = Budget::new(
            Scripted::new((0..20).map(|_| with_usage(1000, 1000, 10.0, 10))),
            BudgetLimits::default(),
        );
        for i in 0..20 {
            assert!(budget.run(request(&i.to_string())).await.is_ok());
        }
        assert_eq!(budget.exhausted(), None);
    }
}
