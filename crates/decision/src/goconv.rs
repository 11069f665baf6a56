//! Go numeric conversions used by upstream `replica_calculator.go` and `horizontal.go`
//! (`calculateScaleUpLimit`, the behavior rate limits), made explicit.
//!
//! Go's `int32(f)` / `int64(f)` for a float64 that is NaN, ±Inf or out of range is
//! implementation-defined. Upstream only guards some sites (the `math.MaxInt32` clamps); at the
//! others this port reproduces what the `amd64` build (what almost every cluster runs) does:
//! `CVTTSD2SL` / `CVTTSD2SQ` yield the "integer indefinite" value, i.e. the minimum integer
//! (`0x80000000` / `0x8000000000000000`). In range, conversion truncates toward zero, like Rust's
//! `as`.

/// Go `int32(f)` on amd64: truncation toward zero; NaN and out-of-range values give `i32::MIN`.
pub fn f64_to_i32(f: f64) -> i32 {
    // The valid domain is (-2^31 - 1, 2^31) before truncation.
    if f > -2_147_483_649.0 && f < 2_147_483_648.0 {
        f as i32
    } else {
        i32::MIN
    }
}

/// Go `int64(f)` on amd64: truncation toward zero; NaN and out-of-range values give `i64::MIN`.
pub fn f64_to_i64(f: f64) -> i64 {
    // 2^63 is exactly representable; every float64 below it (and >= -2^63) converts.
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
        f as i64
    } else {
        i64::MIN
    }
}

/// Go `int32(math.Ceil(f))`.
pub fn ceil_to_i32(f: f64) -> i32 {
    f64_to_i32(f.ceil())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_range_truncates_toward_zero() {
        assert_eq!(f64_to_i32(2.9), 2);
        assert_eq!(f64_to_i32(-2.9), -2);
        assert_eq!(f64_to_i32(2_147_483_647.9), i32::MAX);
        assert_eq!(f64_to_i32(-2_147_483_648.9), i32::MIN);
        assert_eq!(f64_to_i64(-1.5), -1);
        assert_eq!(
            f64_to_i64(9_223_372_036_854_774_784.0),
            9_223_372_036_854_774_784
        );
    }

    #[test]
    fn out_of_range_is_integer_indefinite() {
        assert_eq!(f64_to_i32(2_147_483_648.0), i32::MIN);
        assert_eq!(f64_to_i32(f64::INFINITY), i32::MIN);
        assert_eq!(f64_to_i32(f64::NEG_INFINITY), i32::MIN);
        assert_eq!(f64_to_i32(f64::NAN), i32::MIN);
        assert_eq!(f64_to_i64(9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(f64_to_i64(f64::INFINITY), i64::MIN);
        assert_eq!(f64_to_i64(f64::NAN), i64::MIN);
        assert_eq!(ceil_to_i32(0.1), 1);
    }
}
