//! Placeholder: review-cycle export reader.
