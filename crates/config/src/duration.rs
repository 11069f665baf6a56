//! Go `time.Duration` syntax and formatting.
//!
//! kube-controller-manager's duration flags go through Go's `time.ParseDuration` and print
//! their defaults with `Duration.String()`. Operators copy flag values between the two
//! controllers, so both directions must match Go exactly: `300ms`, `1m30s`, `1.5h`, `-2s`
//! parse; `15` (no unit) and `1x` (unknown unit) fail with Go's messages; `5m` prints as
//! `5m0s`. No published crate parses and prints Go syntax exactly (negative values, `µs`
//! and `μs`, overflow rules and error texts differ), so this module implements both.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A signed duration with nanosecond resolution, like Go's `time.Duration` (an `int64` of
/// nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(i64);

/// A string that Go's `time.ParseDuration` would reject. The message is Go's, word for word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseDurationError(String);

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

impl GoDuration {
    /// The zero duration.
    pub const ZERO: GoDuration = GoDuration(0);

    /// A duration of `nanos` nanoseconds (may be negative).
    pub const fn from_nanos(nanos: i64) -> Self {
        GoDuration(nanos)
    }

    /// A duration of whole seconds.
    pub const fn from_secs(secs: i64) -> Self {
        GoDuration(secs.saturating_mul(SECOND as i64))
    }

    /// A duration of whole milliseconds.
    pub const fn from_millis(millis: i64) -> Self {
        GoDuration(millis.saturating_mul(MILLISECOND as i64))
    }

    /// A duration of whole minutes.
    pub const fn from_mins(mins: i64) -> Self {
        GoDuration(mins.saturating_mul(MINUTE as i64))
    }

    /// The signed nanosecond count.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// Whole seconds, truncated toward zero like Go's `int64(d / time.Second)`.
    pub const fn as_secs(self) -> i64 {
        self.0 / SECOND as i64
    }

    /// Seconds as a float, like Go's `d.Seconds()`.
    pub fn as_secs_f64(self) -> f64 {
        let sec = self.0 / SECOND as i64;
        let nsec = self.0 % SECOND as i64;
        sec as f64 + nsec as f64 / 1e9
    }

    /// True for a negative duration.
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// The duration as a `std::time::Duration`; a negative duration becomes zero, which is
    /// how a timer treats it in Go.
    pub fn to_std(self) -> Duration {
        Duration::from_nanos(u64::try_from(self.0).unwrap_or(0))
    }
}

impl From<Duration> for GoDuration {
    /// Converts, saturating at Go's maximum duration (about 292 years).
    fn from(d: Duration) -> Self {
        GoDuration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

fn quote(s: &str) -> String {
    // Go's `quote` in time/format.go: double quotes, with `"` and `\` escaped.
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn invalid(orig: &str) -> ParseDurationError {
    ParseDurationError(format!("time: invalid duration {}", quote(orig)))
}

/// Consumes leading decimal digits. Returns the value (or `None` on overflow past
/// `1<<63`), and the rest of the string.
fn leading_int(s: &str) -> (Option<u64>, &str, usize) {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut x: Option<u64> = Some(0);
    for b in s.as_bytes()[..digits].iter() {
        x = x.and_then(|v| {
            if v > (1u64 << 63) / 10 {
                return None;
            }
            let v = v * 10 + u64::from(b - b'0');
            (v <= 1u64 << 63).then_some(v)
        });
    }
    (x, &s[digits..], digits)
}

/// Consumes leading fraction digits; returns (digits as integer, scale), dropping digits
/// that no longer fit, as Go's `leadingFraction` does.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let mut x: u64 = 0;
    let mut scale = 1.0f64;
    let mut overflow = false;
    let mut i = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            break;
        }
        i += 1;
        if overflow {
            continue;
        }
        if x > (i64::MAX as u64 - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(b - b'0');
        if y > 1u64 << 63 {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[i..])
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => NANOSECOND,
        "us" | "\u{00b5}s" | "\u{03bc}s" => MICROSECOND,
        "ms" => MILLISECOND,
        "s" => SECOND,
        "m" => MINUTE,
        "h" => HOUR,
        _ => return None,
    })
}

impl FromStr for GoDuration {
    type Err = ParseDurationError;

    /// Parses like Go's `time.ParseDuration`: an optional sign, then one or more decimal
    /// numbers each with an optional fraction and a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`,
    /// `h`). `"0"` alone needs no unit.
    fn from_str(orig: &str) -> Result<Self, Self::Err> {
        let mut s = orig;
        let mut neg = false;
        if let Some(rest) = s.strip_prefix('-') {
            neg = true;
            s = rest;
        } else if let Some(rest) = s.strip_prefix('+') {
            s = rest;
        }
        if s == "0" {
            return Ok(GoDuration(0));
        }
        if s.is_empty() {
            return Err(invalid(orig));
        }
        let mut total: u64 = 0;
        while !s.is_empty() {
            let first = s.as_bytes()[0];
            if !(first == b'.' || first.is_ascii_digit()) {
                return Err(invalid(orig));
            }
            let (v, rest, int_digits) = leading_int(s);
            let mut v = v.ok_or_else(|| invalid(orig))?;
            s = rest;
            let mut frac = 0u64;
            let mut scale = 1.0f64;
            let mut post = false;
            if let Some(rest) = s.strip_prefix('.') {
                let before = rest.len();
                let (f, sc, rest) = leading_fraction(rest);
                post = rest.len() != before;
                frac = f;
                scale = sc;
                s = rest;
            }
            if int_digits == 0 && !post {
                // No digits at all, e.g. ".s".
                return Err(invalid(orig));
            }
            let unit_len = s
                .char_indices()
                .find(|&(_, c)| c == '.' || c.is_ascii_digit())
                .map_or(s.len(), |(i, _)| i);
            if unit_len == 0 {
                return Err(ParseDurationError(format!(
                    "time: missing unit in duration {}",
                    quote(orig)
                )));
            }
            let unit_str = &s[..unit_len];
            s = &s[unit_len..];
            let unit = unit_nanos(unit_str).ok_or_else(|| {
                ParseDurationError(format!(
                    "time: unknown unit {} in duration {}",
                    quote(unit_str),
                    quote(orig)
                ))
            })?;
            if v > (1u64 << 63) / unit {
                return Err(invalid(orig));
            }
            v *= unit;
            if frac > 0 {
                // float64 is needed to be nanosecond accurate for fractions of hours.
                let add = (frac as f64 * (unit as f64 / scale)) as u64;
                v = v.checked_add(add).ok_or_else(|| invalid(orig))?;
                if v > 1u64 << 63 {
                    return Err(invalid(orig));
                }
            }
            total = total.checked_add(v).ok_or_else(|| invalid(orig))?;
            if total > 1u64 << 63 {
                return Err(invalid(orig));
            }
        }
        if neg {
            // -(1<<63) is representable.
            return Ok(GoDuration((total as i128).wrapping_neg() as i64));
        }
        if total > i64::MAX as u64 {
            return Err(invalid(orig));
        }
        Ok(GoDuration(total as i64))
    }
}

/// Appends the fraction of `v` with `prec` digits, omitting trailing zeros (and the dot
/// when nothing is left); returns the integer part. Mirrors Go's `fmtFrac`.
fn frac_digits(v: u64, prec: u32, out: &mut String) -> u64 {
    let mut v = v;
    let mut digits = Vec::with_capacity(prec as usize);
    let mut printed = false;
    for _ in 0..prec {
        let digit = v % 10;
        printed = printed || digit != 0;
        if printed {
            digits.push(char::from(b'0' + digit as u8));
        }
        v /= 10;
    }
    if printed {
        out.push('.');
        out.extend(digits.iter().rev());
    }
    v
}

impl fmt::Display for GoDuration {
    /// Formats like Go's `Duration.String()`: `0s`, `1.5µs`, `300ms`, `15s`, `5m0s`,
    /// `1h0m0s`, `-2m3.5s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let neg = self.0 < 0;
        let mut u = self.0.unsigned_abs();
        let mut out = String::new();
        if u < SECOND {
            if u == 0 {
                return f.write_str("0s");
            }
            let (prec, unit) = if u < MICROSECOND {
                (0, "ns")
            } else if u < MILLISECOND {
                (3, "\u{00b5}s")
            } else {
                (6, "ms")
            };
            let mut frac = String::new();
            let int = frac_digits(u, prec, &mut frac);
            out.push_str(&int.to_string());
            out.push_str(&frac);
            out.push_str(unit);
        } else {
            let mut frac = String::new();
            u = frac_digits(u, 9, &mut frac);
            let secs = u % 60;
            u /= 60;
            let seconds_part = format!("{secs}{frac}s");
            if u > 0 {
                let mins = u % 60;
                u /= 60;
                if u > 0 {
                    out.push_str(&format!("{u}h"));
                }
                out.push_str(&format!("{mins}m"));
            }
            out.push_str(&seconds_part);
        }
        if neg {
            f.write_str("-")?;
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests;
