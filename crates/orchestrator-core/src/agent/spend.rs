//! What an agent spent on one item (a review-fix finding, a planex row, a
//! ci-autofix iteration), and the limits a flow holds each item to.

use serde::{Deserialize, Serialize};

use super::Usage;

/// What the agent spent on one item (a finding, a row, an iteration): every
/// call made for it, and the usage the answered calls reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSpend {
    /// Agent calls made (answered or not).
    pub calls: u32,
    /// Input (prompt) tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output (completion) tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// US dollars, as the backend reported or `[prices]` priced them.
    #[serde(default)]
    pub cost_usd: f64,
    /// Agent turns.
    #[serde(default)]
    pub turns: u32,
}

impl AgentSpend {
    /// Adds one call, with the usage it reported if any.
    pub fn add_call(&mut self, usage: Option<&Usage>) {
        self.calls += 1;
        if let Some(u) = usage {
            self.input_tokens += u.input_tokens;
            self.output_tokens += u.output_tokens;
            self.cost_usd += u.cost_usd;
            self.turns += u.turns;
        }
    }

    /// Adds another spend.
    pub fn add(&mut self, other: &AgentSpend) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
        self.turns += other.turns;
    }

    /// Input plus output tokens.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Which of `limits` this spend has reached, as a message.
    pub fn exhausted(&self, limits: &ItemLimits) -> Option<String> {
        if let Some(max) = limits.max_calls
            && self.calls >= max
        {
            return Some(format!("{} of {max} agent calls made", self.calls));
        }
        if let Some(max) = limits.max_tokens
            && self.tokens() >= max
        {
            return Some(format!("{} of {max} tokens used", self.tokens()));
        }
        if let Some(max) = limits.max_cost_usd
            && self.cost_usd >= max
        {
            return Some(format!("${:.4} of ${max:.4} spent", self.cost_usd));
        }
        None
    }
}

/// Limits on what the agent may spend on one item (unset: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct ItemLimits {
    /// US dollars.
    pub max_cost_usd: Option<f64>,
    /// Input plus output tokens.
    pub max_tokens: Option<u64>,
    /// Agent calls.
    pub max_calls: Option<u32>,
}

impl ItemLimits {
    /// Limits from their three values.
    pub fn new(max_cost_usd: Option<f64>, max_tokens: Option<u64>, max_calls: Option<u32>) -> Self {
        Self {
            max_cost_usd,
            max_tokens,
            max_calls,
        }
    }
}
