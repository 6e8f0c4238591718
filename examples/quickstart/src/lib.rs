//! Small statistics helpers, written with a few habits clippy dislikes.

pub mod ring;

pub use ring::Ring;

/// A reading taken by a sensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The sensor's name.
    pub name: String,
    /// The measured value.
    pub value: f64,
}

/// Builds a reading.
pub fn reading(name: &str, value: f64) -> Reading {
    let name = name.to_string();
    Reading { name: name, value: value }
}

/// The mean of the values, `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    if values.len() == 0 {
        return None;
    }
    let total: f64 = values.iter().sum();
    return Some(total / values.len() as f64);
}

/// Whether a value is a valid percentage.
pub fn is_percentage(value: f64) -> bool {
    value >= 0.0 && value <= 100.0
}

/// The largest value, `None` for no values.
pub fn max(values: &[f64]) -> Option<f64> {
    let mut best: Option<f64> = None;
    for &v in values {
        best = match best {
            None => Some(v),
            Some(b) => {
                if v > b {
                    Some(v)
                } else {
                    Some(b)
                }
            }
        };
    }
    best
}

/// Formats a reading as `name=value`.
pub fn describe(r: &Reading) -> String {
    let text = format!("{}={}", r.name, r.value);
    return text;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_of_values() {
        assert_eq!(mean(&[1.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn percentages() {
        assert!(is_percentage(0.0));
        assert!(is_percentage(100.0));
        assert!(!is_percentage(100.5));
        assert!(!is_percentage(-1.0));
    }

    #[test]
    fn max_of_values() {
        assert_eq!(max(&[1.0, 5.0, 3.0]), Some(5.0));
        assert_eq!(max(&[]), None);
    }

    #[test]
    fn readings_are_described() {
        assert_eq!(describe(&reading("t", 1.5)), "t=1.5");
    }
}
