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

/// Limits on what the agent may spend on one item, or on one call
/// ([`AgentRequest::spend_limits`](super::AgentRequest::spend_limits));
/// unset: unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ItemLimits {
    /// US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Input plus output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Agent calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

    /// Whether no limit is set.
    pub fn is_unlimited(&self) -> bool {
        self.max_cost_usd.is_none() && self.max_tokens.is_none() && self.max_calls.is_none()
    }

    /// What one more call may spend once `spent` is spent of these limits:
    /// the dollars and tokens left (at least zero); `max_calls` does not
    /// apply to one call. A flow passes it as the call's
    /// [`AgentRequest::spend_limits`](super::AgentRequest::spend_limits), so
    /// an agent that can stop mid-call stops at the item's limit.
    pub fn left_after(&self, spent: &AgentSpend) -> ItemLimits {
        ItemLimits {
            max_cost_usd: self.max_cost_usd.map(|max| (max - spent.cost_usd).max(0.0)),
            max_tokens: self
                .max_tokens
                .map(|max| max.saturating_sub(spent.tokens())),
            max_calls: None,
        }
    }

    /// Whether one call's `usage` went past these limits (dollars or
    /// tokens; `max_calls` does not apply to one call), as a message naming
    /// the limit. Reaching a limit exactly is not past it.
    pub fn overrun(&self, usage: &Usage) -> Option<String> {
        let tokens = usage.input_tokens + usage.output_tokens;
        if let Some(max) = self.max_tokens
            && tokens > max
        {
            return Some(format!(
                "the call used {tokens} tokens, over its limit of {max}"
            ));
        }
        if let Some(max) = self.max_cost_usd
            && usage.cost_usd > max
        {
            return Some(format!(
                "the call spent ${:.4}, over its limit of ${max:.4}",
                usage.cost_usd
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_calls_usage_overruns_only_past_a_limit() {
        let usage = Usage {
            input_tokens: 150,
            output_tokens: 50,
            cost_usd: 0.02,
            turns: 2,
        };
        assert_eq!(ItemLimits::default().overrun(&usage), None);
        assert_eq!(
            ItemLimits::new(Some(0.02), Some(200), None).overrun(&usage),
            None
        );
        assert_eq!(
            ItemLimits::new(None, Some(199), None)
                .overrun(&usage)
                .as_deref(),
            Some("the call used 200 tokens, over its limit of 199")
        );
        assert_eq!(
            ItemLimits::new(Some(0.01), None, Some(1))
                .overrun(&usage)
                .as_deref(),
            Some("the call spent $0.0200, over its limit of $0.0100")
        );
        let mut spent = AgentSpend::default();
        spent.add_call(Some(&Usage {
            cost_usd: 0.25,
            ..usage
        }));
        assert_eq!(
            ItemLimits::new(Some(0.75), Some(150), Some(3)).left_after(&spent),
            ItemLimits::new(Some(0.5), Some(0), None)
        );
        assert_eq!(
            ItemLimits::new(Some(0.125), None, None).left_after(&spent),
            ItemLimits::new(Some(0.0), None, None)
        );
        assert!(
            ItemLimits::new(None, None, Some(3))
                .left_after(&spent)
                .is_unlimited()
        );
        assert!(ItemLimits::default().is_unlimited());
        assert!(!ItemLimits::new(None, None, Some(1)).is_unlimited());
    }
}
