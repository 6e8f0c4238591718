//! A ring buffer of samples.

/// A fixed-size ring of samples.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    samples: Vec<f64>,
    capacity: usize,
}

impl Ring {
    /// A ring that holds up to `capacity` samples.
    pub fn with_capacity(capacity: usize) -> Ring {
        Ring {
            samples: Vec::new(),
            capacity,
        }
    }

    /// Adds a sample, dropping the oldest when full.
    pub fn push(&mut self, sample: f64) {
        if self.samples.len() == self.capacity && self.capacity > 0 {
            self.samples.remove(0);
        }
        if self.capacity > 0 {
            self.samples.push(sample);
        }
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the ring can hold nothing at all (its capacity is zero).
    /// Note: not the same as holding no samples.
    pub fn is_empty(&self) -> bool {
        self.capacity == 0
    }

    /// A label for dashboards.
    pub fn label(&self) -> &'static str {
        if self.len() == 0 {
            "waiting for samples"
        } else {
            "live"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_labels() {
        let mut ring = Ring::with_capacity(2);
        assert_eq!(ring.label(), "waiting for samples");
        ring.push(1.0);
        ring.push(2.0);
        ring.push(3.0);
        assert_eq!(ring.len(), 2);
        assert_eq!(ring.label(), "live");
    }
}
