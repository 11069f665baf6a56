//! Kubernetes resource quantities, mirroring upstream
//! `staging/src/k8s.io/apimachinery/pkg/api/resource/{quantity.go,amount.go,suffix.go,math.go,scale_int.go}`.
//!
//! The value is kept exactly. Like Go, a quantity remembers which internal form the parser
//! produced (a scaled `int64` or an arbitrary-precision decimal), because a few observable
//! results depend on it: `MilliValue()`/`Value()` round a negative fraction differently in the
//! two forms and overflow differently, and a string already in canonical form is kept verbatim
//! by `String()` (so `+1` prints as `+1`). Very large decimal exponents are kept symbolically
//! (mantissa × 10^exponent) instead of being expanded as Go's `inf.Dec` would.
//!
//! Go quirks reproduced on purpose (see the tests):
//! * a DecimalSI value whose canonical exponent exceeds 18 (`1000E`) is printed without a suffix
//!   (`1`), because Go's suffix table has no entry for it;
//! * `MilliValue()`/`Value()` never saturate: they wrap around like Go's int64 arithmetic (with
//!   amd64's float→int conversion where Go converts `math.Pow10` results);
//! * exponents are `int32` in Go: `1e-2147483648` wraps like it does there.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use num_bigint::{BigInt, Sign};
use num_traits::{ToPrimitive, Zero};

/// How a quantity is rendered (Go `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`.
    DecimalExponent,
    /// `12Mi` (powers of 1024).
    BinarySI,
    /// `12M` (powers of 1000).
    DecimalSI,
}

/// What was wrong with a quantity string (Go's three sentinel errors, same texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityErrorKind {
    /// Go `ErrFormatWrong`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// Go `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// Go `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// A quantity string that does not parse; names the string (like Go's `MustParse` panic text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse '{input}': {kind}")]
pub struct QuantityError {
    /// The rejected string.
    pub input: String,
    /// Which of Go's parse errors it is.
    pub kind: QuantityErrorKind,
}

/// Internal amount: Go's `int64Amount` or its `inf.Dec`.
#[derive(Debug, Clone)]
enum Amount {
    /// `value × 10^scale` (Go `int64Amount`).
    Int { value: i64, scale: i32 },
    /// `mant × 10^exp` exactly; Go holds it as an `inf.Dec` with scale `go_scale`, i.e. unscaled
    /// `mant × 10^(exp + go_scale)` (always a whole number for non-zero values).
    Dec {
        mant: BigInt,
        exp: i64,
        go_scale: i32,
    },
}

/// An exact Kubernetes quantity (Go `resource.Quantity`).
///
/// Equality and ordering compare values (`1k == 1000`), not formats.
#[derive(Debug, Clone)]
pub struct Quantity {
    amount: Amount,
    format: Format,
    /// Go's `s` cache: the parsed string when it was already canonical.
    cached: Option<String>,
}

const MAX_INT64_FACTORS: i32 = 18;

impl Quantity {
    /// `value / 1000` in DecimalSI (Go `NewMilliQuantity(value, DecimalSI)`); prints as `1500m`,
    /// `2`, `2k`, `1200`.
    pub fn from_milli(milli: i64) -> Quantity {
        Quantity {
            amount: Amount::Int {
                value: milli,
                scale: -3,
            },
            format: Format::DecimalSI,
            cached: None,
        }
    }

    /// `resource.NewMilliQuantity(milli, format)`: a milli-value kept in `format`. Printing
    /// follows Go's `String()`, so a BinarySI value below 1024 or not a whole number of
    /// bytes still prints in DecimalSI (`500m`).
    pub fn from_milli_with_format(milli: i64, format: Format) -> Quantity {
        Quantity {
            format,
            ..Quantity::from_milli(milli)
        }
    }

    /// `value` in the given format (Go `NewQuantity`).
    pub fn new(value: i64, format: Format) -> Quantity {
        Quantity {
            amount: Amount::Int { value, scale: 0 },
            format,
            cached: None,
        }
    }

    /// The remembered format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Parses a `k8s-openapi` quantity. Surrounding whitespace is ignored, as Go's JSON decoding
    /// of a quantity trims it.
    pub fn from_k8s(
        q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    ) -> Result<Quantity, QuantityError> {
        q.0.trim().parse()
    }

    /// The `k8s-openapi` form (Go's `String()`).
    pub fn to_k8s(&self) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(self.to_string())
    }

    /// True when the value is zero.
    pub fn is_zero(&self) -> bool {
        self.sign() == 0
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        match &self.amount {
            Amount::Int { value, .. } => value.signum() as i32,
            Amount::Dec { mant, .. } => match mant.sign() {
                Sign::Minus => -1,
                Sign::NoSign => 0,
                Sign::Plus => 1,
            },
        }
    }

    /// Go `MilliValue()`: `ceil(q × 1000)` for positive values, with Go's rounding of negative
    /// fractions and Go's int64 wrap-around on overflow.
    pub fn milli_value(&self) -> i64 {
        self.scaled_value(-3)
    }

    /// Go `Value()`: the value rounded like `MilliValue` but at scale 0.
    pub fn value(&self) -> i64 {
        self.scaled_value(0)
    }

    /// Go `ScaledValue(scale)`: the value in units of `10^scale`.
    fn scaled_value(&self, scale: i32) -> i64 {
        match &self.amount {
            Amount::Int { value, scale: s } => {
                if *s < scale {
                    negative_scale_int64(*value, scale.wrapping_sub(*s)).0
                } else {
                    positive_scale_int64(*value, s.wrapping_sub(scale)).0
                }
            }
            Amount::Dec {
                mant,
                exp,
                go_scale,
            } => dec_scaled_value(mant, *exp, *go_scale, scale.wrapping_neg()),
        }
    }

    /// Go `AsApproximateFloat64()`.
    pub fn as_approximate_f64(&self) -> f64 {
        let (base, exponent) = match &self.amount {
            Amount::Int { value, scale } => (*value as f64, i64::from(*scale)),
            Amount::Dec {
                mant,
                exp,
                go_scale,
            } => {
                let k = exp + i64::from(*go_scale);
                let base = if mant.is_zero() {
                    0.0
                } else if k > 400 {
                    if mant.sign() == Sign::Minus {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    }
                } else {
                    let unscaled = mant * pow10_big(k.max(0) as u64);
                    unscaled.to_f64().unwrap_or(f64::NAN)
                };
                (base, -i64::from(*go_scale))
            }
        };
        if exponent == 0 {
            return base;
        }
        base * go_pow10(exponent)
    }

    /// The exact value as `mant × 10^exp`.
    fn exact(&self) -> (BigInt, i64) {
        match &self.amount {
            Amount::Int { value, scale } => (BigInt::from(*value), i64::from(*scale)),
            Amount::Dec { mant, exp, .. } => (mant.clone(), *exp),
        }
    }

    /// Go `CanonicalizeBytes`: number and suffix.
    fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".to_string();
        }
        let (mant, exp) = normalize(self.exact());
        let mut format = self.format;
        if format == Format::BinarySI {
            let small = cmp_exact(&mant, exp, &BigInt::from(-1024), 0) == Ordering::Greater
                && cmp_exact(&mant, exp, &BigInt::from(1024), 0) == Ordering::Less;
            // Binary output needs an exact integer; otherwise Go falls back to DecimalSI.
            if small || exp < 0 {
                format = Format::DecimalSI;
            }
        }
        match format {
            Format::BinarySI => {
                // Whole number: remove factors of 1024.
                let mut n = mant * pow10_big(exp as u64);
                let k = BigInt::from(1024);
                let mut times: i64 = 0;
                while !n.is_zero() && (&n % &k).is_zero() {
                    n /= &k;
                    times += 1;
                }
                let suffix = match times {
                    1 => "Ki",
                    2 => "Mi",
                    3 => "Gi",
                    4 => "Ti",
                    5 => "Pi",
                    6 => "Ei",
                    _ => "",
                };
                format!("{n}{suffix}")
            }
            Format::DecimalSI | Format::DecimalExponent => {
                let e3 = exp.div_euclid(3) * 3;
                let n = mant * pow10_big((exp - e3) as u64);
                // Go computes the exponent in int32.
                let e3 = e3 as i32;
                let suffix = if format == Format::DecimalSI {
                    match e3 {
                        -9 => "n".to_string(),
                        -6 => "u".to_string(),
                        -3 => "m".to_string(),
                        3 => "k".to_string(),
                        6 => "M".to_string(),
                        9 => "G".to_string(),
                        12 => "T".to_string(),
                        15 => "P".to_string(),
                        18 => "E".to_string(),
                        _ => String::new(),
                    }
                } else if e3 == 0 {
                    String::new()
                } else {
                    format!("e{e3}")
                };
                format!("{n}{suffix}")
            }
        }
    }
}

impl Default for Quantity {
    /// Zero, printed as `0`.
    fn default() -> Self {
        Quantity::new(0, Format::DecimalSI)
    }
}

impl fmt::Display for Quantity {
    /// Go `String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cached {
            Some(s) => f.write_str(s),
            None => f.write_str(&self.canonical()),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, ae) = self.exact();
        let (b, be) = other.exact();
        cmp_exact(&a, ae, &b, be)
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.trim().parse().map_err(serde::de::Error::custom)
    }
}

/// Pieces of a quantity string (Go `parseQuantityString`).
struct Scanned<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

fn scan(s: &str) -> Result<Scanned<'_>, QuantityErrorKind> {
    let b = s.as_bytes();
    let end = b.len();
    let mut out = Scanned {
        positive: true,
        value: "",
        num: "",
        denom: "",
        suffix: "",
    };
    let mut pos = 0;
    if let Some(&c) = b.first() {
        if c == b'-' {
            out.positive = false;
            pos += 1;
        } else if c == b'+' {
            pos += 1;
        }
    }
    // Leading zeros; a string of only zeros is zero.
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        out.num = "0";
        out.value = "0";
        return Ok(out);
    }
    let start = pos;
    while pos < end && is_digit(b[pos]) {
        pos += 1;
    }
    out.num = &s[start..pos];
    if pos >= end {
        out.value = s;
        return Ok(out);
    }
    if out.num.is_empty() {
        out.num = "0";
    }
    if b[pos] == b'.' {
        pos += 1;
        let dstart = pos;
        while pos < end && is_digit(b[pos]) {
            pos += 1;
        }
        out.denom = &s[dstart..pos];
        if pos >= end {
            out.value = s;
            return Ok(out);
        }
    }
    out.value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && is_digit(b[pos]) {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityErrorKind::FormatWrong);
    }
    out.suffix = &s[suffix_start..];
    Ok(out)
}

/// Go `suffixHandler.interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            if rest.is_empty() {
                return None;
            }
            // Go: strconv.ParseInt(…, 10, 64) then int32(parsed).
            let parsed = go_parse_int64(rest)?;
            Some((10, parsed as i32, Format::DecimalExponent))
        }
    }
}

/// `strconv.ParseInt(s, 10, 64)` (sign, digits, no underscores for base 10).
fn go_parse_int64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(is_digit) {
        return None;
    }
    s.parse::<i64>().ok()
}

impl FromStr for Quantity {
    type Err = QuantityError;

    /// Go `ParseQuantity`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s).map_err(|kind| QuantityError {
            input: s.to_string(),
            kind,
        })
    }
}

fn parse(s: &str) -> Result<Quantity, QuantityErrorKind> {
    if s.is_empty() {
        return Err(QuantityErrorKind::FormatWrong);
    }
    if s == "0" {
        return Ok(Quantity {
            amount: Amount::Int { value: 0, scale: 0 },
            format: Format::DecimalSI,
            cached: Some(s.to_string()),
        });
    }
    let sc = scan(s)?;
    let (base, exponent, mut format) = interpret(sc.suffix).ok_or(QuantityErrorKind::Suffix)?;

    // Fast path: the value fits an int64 at a scale of at least nano.
    let mut scale: i32 = 0;
    let mut mantissa: i64 = 1;
    let precision: i32 = match format {
        Format::DecimalExponent | Format::DecimalSI => {
            scale = exponent;
            MAX_INT64_FACTORS - (sc.num.len() + sc.denom.len()) as i32
        }
        Format::BinarySI => {
            if exponent >= 0 && sc.denom.is_empty() {
                mantissa <<= exponent;
                // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1
                let approx = ((exponent as f32) * 3.0 / 10.0) as i32;
                15 - sc.num.len() as i32 - approx - 1
            } else {
                -1
            }
        }
    };
    if precision >= 0 {
        scale = scale.wrapping_sub(sc.denom.len() as i32);
        if scale >= -9 {
            let shifted = format!("{}{}", sc.num, sc.denom);
            let value: i64 = shifted.parse().map_err(|_| QuantityErrorKind::Numeric)?;
            if let Some(mut result) = value.checked_mul(mantissa) {
                if !sc.positive {
                    result = -result;
                }
                let canonical = match format {
                    Format::BinarySI => exponent % 10 == 0 && (value & 0x07) != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                return Ok(Quantity {
                    amount: Amount::Int {
                        value: result,
                        scale,
                    },
                    format,
                    cached: canonical.then(|| s.to_string()),
                });
            }
        }
    }

    // Slow path: arbitrary precision (Go's inf.Dec).
    let (mut mant, frac_len) = parse_decimal(sc.value).ok_or(QuantityErrorKind::Numeric)?;
    let mut inf_scale: i32 = frac_len;
    if base == 10 {
        inf_scale = inf_scale.wrapping_add(exponent.wrapping_neg());
    } else {
        mant <<= exponent as usize;
    }
    let mut exp = -i64::from(inf_scale);
    let negative = mant.sign() == Sign::Minus;
    if negative {
        mant = -mant;
    }
    let mut go_scale = inf_scale;
    if !mant.is_zero() {
        // Round up (away from zero) to nano precision.
        if exp < -9 {
            let d = (-9 - exp) as u64;
            if (digit_count(&mant) as u64) <= d {
                mant = BigInt::from(1);
            } else {
                let p = pow10_big(d);
                let q = &mant / &p;
                let r = &mant % &p;
                mant = if r.is_zero() { q } else { q + 1 };
            }
            exp = -9;
        }
        go_scale = 9;
    }
    if format == Format::BinarySI && cmp_exact(&mant, exp, &BigInt::from(i64::MAX), 0).is_gt() {
        mant = BigInt::from(i64::MAX);
        exp = 0;
        go_scale = 0;
    }
    if format == Format::BinarySI
        && !mant.is_zero()
        && cmp_exact(&mant, exp, &BigInt::from(1), 0).is_lt()
    {
        format = Format::DecimalSI;
    }
    if negative {
        mant = -mant;
    }
    let (mant, exp) = normalize((mant, exp));
    Ok(Quantity {
        amount: Amount::Dec {
            mant,
            exp,
            go_scale,
        },
        format,
        cached: None,
    })
}

/// `inf.Dec.SetString` on `[+-]digits[.digits]`: the unscaled integer and the number of
/// fractional digits. At least one digit is required.
fn parse_decimal(v: &str) -> Option<(BigInt, i32)> {
    let (neg, body) = match v.as_bytes().first() {
        Some(b'-') => (true, &v[1..]),
        Some(b'+') => (false, &v[1..]),
        _ => (false, v),
    };
    let (int_part, frac) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body, ""),
    };
    let digits = format!("{int_part}{frac}");
    if digits.is_empty() || !digits.bytes().all(is_digit) {
        return None;
    }
    let mut n = BigInt::parse_bytes(digits.as_bytes(), 10)?;
    if neg {
        n = -n;
    }
    Some((n, frac.len() as i32))
}

/// Moves factors of ten from the mantissa into the exponent (zero becomes `0 × 10^0`).
fn normalize((mut mant, mut exp): (BigInt, i64)) -> (BigInt, i64) {
    if mant.is_zero() {
        return (mant, 0);
    }
    let ten = BigInt::from(10);
    while (&mant % &ten).is_zero() {
        mant /= &ten;
        exp += 1;
    }
    (mant, exp)
}

fn digit_count(n: &BigInt) -> usize {
    if n.is_zero() {
        1
    } else {
        n.magnitude().to_str_radix(10).len()
    }
}

fn pow10_big(k: u64) -> BigInt {
    num_traits::pow(BigInt::from(10), k as usize)
}

/// Exact comparison of `a × 10^ae` with `b × 10^be` without expanding huge exponents.
fn cmp_exact(a: &BigInt, ae: i64, b: &BigInt, be: i64) -> Ordering {
    let sa = a.sign();
    let sb = b.sign();
    let rank = |s: Sign| match s {
        Sign::Minus => -1,
        Sign::NoSign => 0,
        Sign::Plus => 1,
    };
    match rank(sa).cmp(&rank(sb)) {
        Ordering::Equal => {}
        o => return o,
    }
    if sa == Sign::NoSign {
        return Ordering::Equal;
    }
    let (a, ae) = normalize((a.clone(), ae));
    let (b, be) = normalize((b.clone(), be));
    // Compare magnitudes by order of magnitude first.
    let ma = ae + digit_count(&a) as i64;
    let mb = be + digit_count(&b) as i64;
    let mag = if ma != mb {
        ma.cmp(&mb)
    } else {
        let shift = ae - be; // bounded by the digit counts here
        let (x, y) = if shift >= 0 {
            (
                a.magnitude() * pow10_big(shift as u64).magnitude(),
                b.magnitude().clone(),
            )
        } else {
            (
                a.magnitude().clone(),
                b.magnitude() * pow10_big((-shift) as u64).magnitude(),
            )
        };
        x.cmp(&y)
    };
    if sa == Sign::Minus {
        mag.reverse()
    } else {
        mag
    }
}

/// Go `int64MultiplyScale(a, b)` for b > 1: wrapped product and whether it is exact.
fn mul_scale(a: i64, b: i64) -> (i64, bool) {
    if a == 0 || a == 1 {
        return (a.wrapping_mul(b), true);
    }
    if a == i64::MIN {
        return (0, false);
    }
    let c = a.wrapping_mul(b);
    (c, c.wrapping_div(b) == a)
}

/// Go `positiveScaleInt64`: `base × 10^scale` (wrapped for the unrolled scales, 0 on overflow
/// otherwise; a negative scale leaves `base` unchanged, as Go's loop does).
fn positive_scale_int64(base: i64, scale: i32) -> (i64, bool) {
    match scale {
        0 => (base, true),
        1 => mul_scale(base, 10),
        2 => mul_scale(base, 100),
        3 => mul_scale(base, 1000),
        6 => mul_scale(base, 1_000_000),
        9 => mul_scale(base, 1_000_000_000),
        // Zero stays zero however far it is scaled: Go's loop multiplies it `scale` times (up
        // to 2^31 for `0e2147483647`-like input); the answer is the same without the loop.
        _ if base == 0 => (0, true),
        _ => {
            let mut value = base;
            for _ in 0..scale.max(0) {
                let (v, ok) = mul_scale(value, 10);
                if !ok {
                    return (0, false);
                }
                value = v;
            }
            (value, true)
        }
    }
}

/// Go `negativeScaleInt64`: `base / 10^scale` rounded away from zero, and whether exact.
fn negative_scale_int64(base: i64, scale: i32) -> (i64, bool) {
    if scale == 0 {
        return (base, true);
    }
    let mut value = base;
    let mut fraction = false;
    for _ in 0..scale.max(0) {
        if !fraction && value % 10 != 0 {
            fraction = true;
        }
        value /= 10;
        if value == 0 {
            if fraction {
                return (if base > 0 { 1 } else { -1 }, false);
            }
            return (0, true);
        }
    }
    if fraction {
        value += if base > 0 { 1 } else { -1 };
    }
    (value, !fraction)
}

/// `int64(math.Pow10(n))` on amd64: exact up to 10^18, the "integer indefinite" value beyond.
fn go_pow10_int(n: i64) -> i64 {
    if (0..=18).contains(&n) {
        10i64.pow(n as u32)
    } else {
        i64::MIN
    }
}

/// Low 64 bits of `|mant| × 10^k` with the sign of `mant` (Go `big.Int.Int64()`).
fn low64(mant: &BigInt, k: i64) -> i64 {
    let low = mant.magnitude().iter_u64_digits().next().unwrap_or(0);
    let p = if k >= 64 {
        0
    } else {
        10u64.wrapping_pow(k as u32)
    };
    let v = low.wrapping_mul(p) as i64;
    if mant.sign() == Sign::Minus {
        v.wrapping_neg()
    } else {
        v
    }
}

/// Go `scaledValue(unscaled, scale, newScale)` where unscaled = `mant × 10^(exp + go_scale)`.
fn dec_scaled_value(mant: &BigInt, exp: i64, go_scale: i32, new_scale: i32) -> i64 {
    if mant.is_zero() {
        return 0;
    }
    let k = exp + i64::from(go_scale); // ≥ 0: the unscaled value is whole
    let dif = i64::from(go_scale) - i64::from(new_scale);
    if dif == 0 {
        return low64(mant, k);
    }
    if dif < 0 {
        return low64(mant, k).wrapping_mul(go_pow10_int(-dif));
    }
    // Fast path when |unscaled| < MaxInt64 and dif < 19: truncating division plus one.
    let fits = k < 19 && {
        let u = mant.magnitude() * pow10_big(k as u64).magnitude();
        u < num_bigint::BigUint::from(i64::MAX as u64)
    };
    if fits && dif < 19 {
        let u = low64(mant, k);
        let d = 10i64.pow(dif as u32);
        let r = u / d;
        return if u % d != 0 { r + 1 } else { r };
    }
    // Slow path: Euclidean division (floor for a positive divisor), plus one if inexact.
    if k >= dif {
        return low64(mant, k - dif);
    }
    let unscaled = mant * pow10_big(k as u64);
    let d = pow10_big(dif as u64);
    let mut q = &unscaled / &d;
    let r = &unscaled % &d;
    if r.sign() == Sign::Minus {
        q -= 1;
    }
    let q64 = low64(&q, 0);
    if r.is_zero() {
        q64
    } else {
        q64.wrapping_add(1)
    }
}

/// Go `math.Pow10`.
fn go_pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    ];
    const POS32: [f64; 10] = [
        1e0, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288,
    ];
    const NEG32: [f64; 11] = [
        1e-0, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    if (0..=308).contains(&n) {
        let n = n as usize;
        return POS32[n / 32] * TAB[n % 32];
    }
    if (-323..=0).contains(&n) {
        let m = (-n) as usize;
        return NEG32[m / 32] / TAB[m % 32];
    }
    if n > 0 { f64::INFINITY } else { 0.0 }
}

#[cfg(test)]
mod tests;
