//! Placeholder: state helpers.
