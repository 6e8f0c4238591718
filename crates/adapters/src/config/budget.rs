//! `[budget]` (limits on what a run's agent may spend) and `[prices]` (what
//! a model's tokens cost, for backends that report tokens but no cost).
//!
//! The factory ([`crate::factory::build_agent`]) applies both by wrapping
//! every agent it builds in one [`Budget`](crate::wrappers::Budget), so the
//! limits hold for every configured backend alike.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `[budget]`: limits over all agent calls of one run (unset: unlimited).
///
/// A call starts only while the spend recorded so far is below every limit,
/// so a run overshoots a limit by at most the calls already in flight. A
/// call refused at a limit fails with a budget error that is never retried.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BudgetSection {
    /// US dollars: the cost the backend reports (claude's
    /// `total_cost_usd`), else its tokens priced by `[prices]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Input plus output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Agent calls (each attempt at a finding, task or patch, each plan or
    /// exploration request is one call, however many turns it takes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_agent_calls: Option<u32>,
    /// Wall time of the run's agent work, in seconds from the start of the
    /// run: no agent call starts after it, and calls still running are
    /// cancelled (the flow stops resumably, with nothing verified lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_secs: Option<u64>,
    /// US dollars per item (a review-fix finding, over all its attempts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_max_cost_usd: Option<f64>,
    /// Tokens per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_max_tokens: Option<u64>,
    /// Agent calls per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_max_agent_calls: Option<u32>,
}

impl BudgetSection {
    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.max_cost_usd.is_some()
            || self.max_tokens.is_some()
            || self.max_agent_calls.is_some()
            || self.max_wall_secs.is_some()
    }

    /// Checks the values: limits are positive numbers.
    pub fn check(&self) -> Result<(), String> {
        for (key, cost) in [
            ("max_cost_usd", self.max_cost_usd),
            ("item_max_cost_usd", self.item_max_cost_usd),
        ] {
            if let Some(cost) = cost
                && !(cost.is_finite() && cost > 0.0)
            {
                return Err(format!(
                    "budget.{key}: expected a positive number of US dollars, got {cost}"
                ));
            }
        }
        for (key, what, zero) in [
            ("max_tokens", "tokens", self.max_tokens == Some(0)),
            ("item_max_tokens", "tokens", self.item_max_tokens == Some(0)),
            ("max_agent_calls", "calls", self.max_agent_calls == Some(0)),
            ("max_wall_secs", "seconds", self.max_wall_secs == Some(0)),
            (
                "item_max_agent_calls",
                "calls",
                self.item_max_agent_calls == Some(0),
            ),
        ] {
            if zero {
                return Err(format!(
                    "budget.{key}: expected a positive number of {what}, got 0"
                ));
            }
        }
        Ok(())
    }
}

/// One model's token prices, in US dollars per million tokens
/// (`[prices."gpt-4.1-mini"]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Dollars per million input (prompt) tokens.
    pub input_usd_per_mtok: f64,
    /// Dollars per million output (completion) tokens.
    pub output_usd_per_mtok: f64,
}

impl Price {
    /// What `input` and `output` tokens cost.
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        // Token counts stay far below 2^53, where f64 is exact.
        #[allow(clippy::cast_precision_loss)]
        let (input, output) = (input as f64, output as f64);
        (input * self.input_usd_per_mtok + output * self.output_usd_per_mtok) / 1_000_000.0
    }
}

/// `[prices]`: token prices by model name, the one price table of the
/// engine.
pub type Prices = BTreeMap<String, Price>;

/// Checks a price table: prices are finite and not negative.
pub fn check_prices(prices: &Prices) -> Result<(), String> {
    for (model, price) in prices {
        for (field, value) in [
            ("input_usd_per_mtok", price.input_usd_per_mtok),
            ("output_usd_per_mtok", price.output_usd_per_mtok),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!(
                    "prices.\"{model}\".{field}: expected a price of zero or more US dollars per million tokens, got {value}"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_turns_tokens_into_dollars() {
        let price = Price {
            input_usd_per_mtok: 2.0,
            output_usd_per_mtok: 8.0,
        };
        assert!((price.cost(1_000_000, 0) - 2.0).abs() < 1e-12);
        assert!((price.cost(500_000, 250_000) - 3.0).abs() < 1e-12);
        assert_eq!(price.cost(0, 0), 0.0);
    }

    #[test]
    fn bad_limits_and_prices_name_the_field() {
        let mut b = BudgetSection::default();
        assert!(b.check().is_ok() && !b.is_limited());
        b.max_cost_usd = Some(-1.0);
        assert!(b.check().unwrap_err().starts_with("budget.max_cost_usd"));
        b.max_cost_usd = Some(0.5);
        b.max_agent_calls = Some(0);
        assert!(b.check().unwrap_err().starts_with("budget.max_agent_calls"));
        let mut prices = Prices::new();
        prices.insert(
            "m".into(),
            Price {
                input_usd_per_mtok: f64::NAN,
                output_usd_per_mtok: 1.0,
            },
        );
        assert_eq!(
            check_prices(&prices).unwrap_err(),
            "prices.\"m\".input_usd_per_mtok: expected a price of zero or more US dollars per million tokens, got NaN"
        );
    }
}
