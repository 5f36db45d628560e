//! (in progress)

/// `value` as a Python string literal.
pub fn string_literal(value: &str) -> String {
    format!("{value:?}")
}

/// `value` as a Python float literal.
pub fn float_literal(value: f64) -> String {
    format!("{value:?}")
}
