use super::*;

fn p(s: &str) -> Result<i64, String> {
    s.parse::<GoDuration>()
        .map(GoDuration::as_nanos)
        .map_err(|e| e.to_string())
}

#[test]
fn parses_every_unit() {
    // Vectors from Go's time_test.go parseDurationTests.
    let cases: &[(&str, i64)] = &[
        ("0", 0),
        ("5s", 5 * SECOND as i64),
        ("30s", 30 * SECOND as i64),
        ("1478s", 1478 * SECOND as i64),
        ("-5s", -5 * SECOND as i64),
        ("+5s", 5 * SECOND as i64),
        ("-0", 0),
        ("+0", 0),
        ("5.0s", 5 * SECOND as i64),
        ("5.6s", 5 * SECOND as i64 + 600 * MILLISECOND as i64),
        ("5.s", 5 * SECOND as i64),
        (".5s", 500 * MILLISECOND as i64),
        ("1.0s", SECOND as i64),
        ("1.00s", SECOND as i64),
        ("1.004s", SECOND as i64 + 4 * MILLISECOND as i64),
        ("1.0040s", SECOND as i64 + 4 * MILLISECOND as i64),
        ("100.00100s", 100 * SECOND as i64 + MILLISECOND as i64),
        ("10ns", 10),
        ("11us", 11 * MICROSECOND as i64),
        ("12µs", 12 * MICROSECOND as i64),
        ("12μs", 12 * MICROSECOND as i64),
        ("13ms", 13 * MILLISECOND as i64),
        ("300ms", 300 * MILLISECOND as i64),
        ("14s", 14 * SECOND as i64),
        ("15m", 15 * MINUTE as i64),
        ("16h", 16 * HOUR as i64),
        ("3h30m", 3 * HOUR as i64 + 30 * MINUTE as i64),
        ("1m30s", 90 * SECOND as i64),
        ("5m0s", 5 * MINUTE as i64),
        (
            "10.5s4m",
            4 * MINUTE as i64 + 10 * SECOND as i64 + 500 * MILLISECOND as i64,
        ),
        (
            "-2m3.4s",
            -(2 * MINUTE as i64 + 3 * SECOND as i64 + 400 * MILLISECOND as i64),
        ),
        (
            "1h2m3s4ms5us6ns",
            HOUR as i64
                + 2 * MINUTE as i64
                + 3 * SECOND as i64
                + 4 * MILLISECOND as i64
                + 5 * MICROSECOND as i64
                + 6,
        ),
        (
            "39h9m14.425s",
            39 * HOUR as i64 + 9 * MINUTE as i64 + 14 * SECOND as i64 + 425 * MILLISECOND as i64,
        ),
        ("52763797000ns", 52763797000),
        ("0.3333333333333333333h", 20 * MINUTE as i64),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", i64::MAX),
        ("9223372036854775.807us", i64::MAX),
        ("9223372036s854ms775us807ns", i64::MAX),
        ("-9223372036854775808ns", i64::MIN),
        ("-9223372036854775.808us", i64::MIN),
        ("-2562047h47m16.854775808s", i64::MIN),
        ("0.100000000000000000000h", 6 * MINUTE as i64),
        (
            "0.830103483285477580700h",
            49 * MINUTE as i64 + 48 * SECOND as i64 + 372539827,
        ),
    ];
    for (s, want) in cases {
        assert_eq!(p(s), Ok(*want), "parsing {s}");
    }
}

#[test]
fn rejects_bad_input_with_go_messages() {
    let cases: &[(&str, &str)] = &[
        ("", r#"time: invalid duration """#),
        ("3", r#"time: missing unit in duration "3""#),
        ("15", r#"time: missing unit in duration "15""#),
        ("-", r#"time: invalid duration "-""#),
        ("s", r#"time: invalid duration "s""#),
        (".", r#"time: invalid duration ".""#),
        ("-.", r#"time: invalid duration "-.""#),
        (".s", r#"time: invalid duration ".s""#),
        ("+.s", r#"time: invalid duration "+.s""#),
        ("1d", r#"time: unknown unit "d" in duration "1d""#),
        ("1x", r#"time: unknown unit "x" in duration "1x""#),
        ("abc", r#"time: invalid duration "abc""#),
        ("1s ", r#"time: unknown unit "s " in duration "1s ""#),
        (
            "9223372036854775810ns",
            r#"time: invalid duration "9223372036854775810ns""#,
        ),
        (
            "9223372036854775808ns",
            r#"time: invalid duration "9223372036854775808ns""#,
        ),
        (
            "-9223372036854775809ns",
            r#"time: invalid duration "-9223372036854775809ns""#,
        ),
        (
            "9223372036854776us",
            r#"time: invalid duration "9223372036854776us""#,
        ),
        ("3000000h", r#"time: invalid duration "3000000h""#),
        ("1\"s", r#"time: unknown unit "\"s" in duration "1\"s""#),
    ];
    for (s, want) in cases {
        assert_eq!(p(s), Err(want.to_string()), "parsing {s:?}");
    }
}

#[test]
fn formats_like_go() {
    // Vectors from Go's durationTests.
    let cases: &[(i64, &str)] = &[
        (0, "0s"),
        (1, "1ns"),
        (1100, "1.1µs"),
        (2200 * MICROSECOND as i64, "2.2ms"),
        (300 * MILLISECOND as i64, "300ms"),
        (3300 * MILLISECOND as i64, "3.3s"),
        (15 * SECOND as i64, "15s"),
        (30 * SECOND as i64, "30s"),
        (4 * MINUTE as i64 + 5 * SECOND as i64, "4m5s"),
        (4 * MINUTE as i64 + 5001 * MILLISECOND as i64, "4m5.001s"),
        (
            5 * HOUR as i64 + 6 * MINUTE as i64 + 7001 * MILLISECOND as i64,
            "5h6m7.001s",
        ),
        (8 * MINUTE as i64 + 1, "8m0.000000001s"),
        (3 * MINUTE as i64, "3m0s"),
        (5 * MINUTE as i64, "5m0s"),
        (HOUR as i64, "1h0m0s"),
        (12 * HOUR as i64, "12h0m0s"),
        (i64::MAX, "2562047h47m16.854775807s"),
        (i64::MIN, "-2562047h47m16.854775808s"),
        (-2 * SECOND as i64, "-2s"),
    ];
    for (n, want) in cases {
        assert_eq!(GoDuration::from_nanos(*n).to_string(), *want);
    }
}

#[test]
fn round_trips_through_string() {
    for n in [
        0,
        1,
        999,
        1_000_001,
        15 * SECOND as i64,
        90 * SECOND as i64,
        -7,
    ] {
        let d = GoDuration::from_nanos(n);
        assert_eq!(d.to_string().parse::<GoDuration>(), Ok(d));
    }
}

#[test]
fn converts_to_std() {
    assert_eq!(GoDuration::from_secs(15).to_std(), Duration::from_secs(15));
    assert_eq!(GoDuration::from_secs(-1).to_std(), Duration::ZERO);
    assert_eq!(
        GoDuration::from(Duration::from_millis(1500)).as_secs_f64(),
        1.5
    );
    assert_eq!(GoDuration::from_nanos(-1_500_000_000).as_secs(), -1);
}

proptest::proptest! {
    /// Flag values and scenario offsets are input: any string gives a value or an error,
    /// and a value prints as text that parses back to it.
    #[test]
    fn any_text_gives_a_duration_or_an_error(s in "\\PC{0,24}") {
        if let Ok(d) = s.parse::<GoDuration>() {
            proptest::prop_assert_eq!(d.to_string().parse::<GoDuration>(), Ok(d));
        }
    }

    /// The same for text made of the characters of durations.
    #[test]
    fn duration_like_text_prints_back_to_itself(s in "[-+0-9.nuµmsh]{0,16}") {
        if let Ok(d) = s.parse::<GoDuration>() {
            proptest::prop_assert_eq!(d.to_string().parse::<GoDuration>(), Ok(d));
        }
    }

    /// Durations built from Go-like pieces parse, and print back to the same value.
    #[test]
    fn go_like_strings_round_trip(parts in proptest::collection::vec((0u32..1000, 0usize..7), 1..4)) {
        let units = ["ns", "us", "µs", "ms", "s", "m", "h"];
        let text: String = parts.iter().map(|(n, u)| format!("{n}{}", units[*u])).collect();
        let d: GoDuration = text.parse().unwrap();
        proptest::prop_assert_eq!(d.to_string().parse::<GoDuration>(), Ok(d));
    }
}
