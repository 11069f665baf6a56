//! Go's `strconv` parsing as pflag uses it for flag values, and its `Quote`.
//!
//! An operator moving flags from kube-controller-manager expects the same values to be
//! accepted and the same words when one is not: `strconv.ParseFloat: parsing "abc":
//! invalid syntax`. pflag parses `int32` with `strconv.ParseInt(s, 0, 32)`, `float64` and
//! `float32` with `strconv.ParseFloat` and `bool` with `strconv.ParseBool`.

/// A value `strconv` would reject; the message is Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strconv.{func}: parsing {input:?}: {reason}")]
pub struct StrconvError {
    func: &'static str,
    input: String,
    reason: &'static str,
}

impl StrconvError {
    fn syntax(func: &'static str, s: &str) -> Self {
        StrconvError {
            func,
            input: s.to_string(),
            reason: "invalid syntax",
        }
    }
    fn range(func: &'static str, s: &str) -> Self {
        StrconvError {
            func,
            input: s.to_string(),
            reason: "value out of range",
        }
    }
}

/// Go's `strconv.ParseBool`: `1 t T TRUE true True 0 f F FALSE false False`.
pub fn parse_bool(s: &str) -> Result<bool, StrconvError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(StrconvError::syntax("ParseBool", s)),
    }
}

/// Go's `strconv.ParseInt(s, 0, bits)`: optional sign, then a `0x`, `0o`, `0b` or `0` (octal)
/// prefix or plain decimal, `_` allowed between digits only with a prefix-based base.
pub fn parse_int(s: &str, bits: u32) -> Result<i64, StrconvError> {
    const F: &str = "ParseInt";
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return Err(StrconvError::syntax(F, s));
    }
    let lower = body.to_ascii_lowercase();
    let (radix, digits, base_prefix) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string(), true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string(), true)
    } else {
        (10, lower.clone(), false)
    };
    let digits = if base_prefix {
        // Underscores may only separate digits (or follow the prefix).
        if digits.ends_with('_') || digits.contains("__") {
            return Err(StrconvError::syntax(F, s));
        }
        digits.replace('_', "")
    } else {
        digits
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(StrconvError::syntax(F, s));
    }
    let magnitude = u128::from_str_radix(&digits, radix).map_err(|_| StrconvError::range(F, s))?;
    let limit: u128 = 1u128 << (bits - 1);
    let value = if neg {
        if magnitude > limit {
            return Err(StrconvError::range(F, s));
        }
        -(magnitude as i128)
    } else {
        if magnitude >= limit {
            return Err(StrconvError::range(F, s));
        }
        magnitude as i128
    };
    i64::try_from(value).map_err(|_| StrconvError::range(F, s))
}

/// Go's `strconv.ParseFloat(s, 64)` for the forms operators write: decimal, exponent,
/// `inf`/`infinity`/`nan` in any case, underscores rejected as in Go's base-10 syntax.
pub fn parse_float(s: &str) -> Result<f64, StrconvError> {
    const F: &str = "ParseFloat";
    let body = s.trim_start_matches(['+', '-']);
    let special = matches!(
        body.to_ascii_lowercase().as_str(),
        "inf" | "infinity" | "nan"
    );
    let plain = !body.is_empty()
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if s.len() - body.len() > 1 || !(special || plain) {
        return Err(StrconvError::syntax(F, s));
    }
    let v: f64 = s.parse().map_err(|_| StrconvError::syntax(F, s))?;
    if v.is_infinite() && !special {
        return Err(StrconvError::range(F, s));
    }
    Ok(v)
}

/// Go's `strconv.Quote` (what `%q` prints for a string): in double quotes, `"` and `\\`
/// escaped, printable characters kept, control characters as Go's escapes.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bools() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(f), Ok(false));
        }
        assert_eq!(
            parse_bool("yes").unwrap_err().to_string(),
            r#"strconv.ParseBool: parsing "yes": invalid syntax"#
        );
    }

    #[test]
    fn ints() {
        assert_eq!(parse_int("5", 32), Ok(5));
        assert_eq!(parse_int("-5", 32), Ok(-5));
        assert_eq!(parse_int("0x10", 32), Ok(16));
        assert_eq!(parse_int("010", 32), Ok(8));
        assert_eq!(parse_int("0b101", 32), Ok(5));
        assert_eq!(
            parse_int("1_000", 32).unwrap_err().to_string(),
            r#"strconv.ParseInt: parsing "1_000": invalid syntax"#
        );
        assert_eq!(parse_int("0x1_0", 32), Ok(16));
        assert_eq!(parse_int("2147483647", 32), Ok(i64::from(i32::MAX)));
        assert_eq!(parse_int("-2147483648", 32), Ok(i64::from(i32::MIN)));
        assert_eq!(
            parse_int("2147483648", 32).unwrap_err().to_string(),
            r#"strconv.ParseInt: parsing "2147483648": value out of range"#
        );
        assert_eq!(
            parse_int("abc", 32).unwrap_err().to_string(),
            r#"strconv.ParseInt: parsing "abc": invalid syntax"#
        );
        assert!(parse_int("", 32).is_err());
        assert!(parse_int("-", 32).is_err());
        assert!(parse_int("1.5", 32).is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(parse_float("0.1"), Ok(0.1));
        assert_eq!(parse_float("1e-2"), Ok(0.01));
        assert_eq!(parse_float("-2"), Ok(-2.0));
        assert_eq!(parse_float(".5"), Ok(0.5));
        assert_eq!(parse_float("+Inf"), Ok(f64::INFINITY));
        assert!(parse_float("NaN").is_ok_and(f64::is_nan));
        assert_eq!(
            parse_float("abc").unwrap_err().to_string(),
            r#"strconv.ParseFloat: parsing "abc": invalid syntax"#
        );
        assert_eq!(
            parse_float("1e400").unwrap_err().to_string(),
            r#"strconv.ParseFloat: parsing "1e400": value out of range"#
        );
        assert!(parse_float("").is_err());
        assert!(parse_float("1,5").is_err());
        assert!(parse_float("--1").is_err());
    }
}
