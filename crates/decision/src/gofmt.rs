//! Small emulations of Go's `fmt` package, for the messages upstream renders with it.
//!
//! Upstream `pkg/controller/podautoscaler/horizontal.go` builds condition messages with
//! `fmt.Sprintf(message, args...)` (`setConditionInList`) and events and errors with
//! `Eventf` / `fmt.Errorf`. [`sprintf`] renders the handful of verbs the controller uses
//! (`%v`, `%d`, `%s`, `%q`, `%+v`) and Go's diagnostics (`%!d(MISSING)` and friends), so
//! that any format, including an error text used as a format (as upstream did before
//! v1.32), renders as Go would.
//!
//! Also here: Go's `%v` of a `[]string` ([`string_slice`]), `strconv.Quote` ([`quote`]) and the
//! `%+v` of a `*metav1.LabelSelector` ([`label_selector_plus_v`]), which upstream prints inside
//! metric names such as `external metric %s(%+v)`.

use std::borrow::Cow;
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// One argument to [`sprintf`], tagged with the Go type it stands for.
#[derive(Debug, Clone, PartialEq)]
pub enum GoArg<'a> {
    /// A Go integer (`int`, `int32`, `int64`); `type_name` is used in bad-verb diagnostics.
    Int {
        /// The value.
        value: i64,
        /// The Go type name, e.g. `int32`.
        type_name: &'static str,
    },
    /// A Go `string`.
    Str(Cow<'a, str>),
    /// A Go `error`: `%v` and `%s` print its `Error()` text.
    Error(Cow<'a, str>),
}

impl<'a> GoArg<'a> {
    /// A Go `int32` argument.
    pub fn int32(value: i32) -> Self {
        GoArg::Int {
            value: i64::from(value),
            type_name: "int32",
        }
    }

    /// A Go `int` argument.
    pub fn int(value: i64) -> Self {
        GoArg::Int {
            value,
            type_name: "int",
        }
    }

    /// A Go `string` argument.
    pub fn str(s: impl Into<Cow<'a, str>>) -> Self {
        GoArg::Str(s.into())
    }

    /// A Go `error` argument (its `Error()` text).
    pub fn error(s: impl Into<Cow<'a, str>>) -> Self {
        GoArg::Error(s.into())
    }

    /// How `%v` prints the argument.
    fn plain(&self) -> Cow<'_, str> {
        match self {
            GoArg::Int { value, .. } => Cow::Owned(value.to_string()),
            GoArg::Str(s) | GoArg::Error(s) => Cow::Borrowed(s.as_ref()),
        }
    }

    /// The type shown in `%!verb(type=value)` diagnostics.
    fn type_name(&self) -> &str {
        match self {
            GoArg::Int { type_name, .. } => type_name,
            GoArg::Str(_) => "string",
            // Go prints the dynamic type; errors.New and fmt.Errorf give these two.
            GoArg::Error(_) => "*errors.errorString",
        }
    }
}

/// Flags, width and precision of one Go verb.
#[derive(Debug, Default, Clone, Copy)]
struct Spec {
    plus: bool,
    minus: bool,
    sharp: bool,
    zero: bool,
    space: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

/// Go `fmt.Sprintf(format, args...)` for the verbs the controller's messages use.
///
/// Supported: `%%`, `%v`, `%+v`, `%s`, `%d`, `%q`, `%x` with the flags `+ - # 0 space`, a
/// decimal width and precision. Go's diagnostics are reproduced: a verb without an
/// argument prints `%!d(MISSING)`, a format ending in `%` prints `%!(NOVERB)`, a verb that
/// does not suit its argument prints `%!d(string=abc)`, and unused arguments are listed as
/// `%!(EXTRA string=a, int=1)`. Not supported (rendered as a bad verb): `*` widths and
/// explicit argument indexes `%[n]d`, which no controller message uses.
pub fn sprintf(format: &str, args: &[GoArg<'_>]) -> String {
    let mut out = String::with_capacity(format.len() + 16);
    let mut next_arg = 0usize;
    let mut chars = format.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        // Flags.
        while let Some(&(_, f)) = chars.peek() {
            match f {
                '+' => spec.plus = true,
                '-' => spec.minus = true,
                '#' => spec.sharp = true,
                '0' => spec.zero = true,
                ' ' => spec.space = true,
                _ => break,
            }
            chars.next();
        }
        // Width.
        let mut width = None::<usize>;
        while let Some(&(_, d)) = chars.peek() {
            if let Some(v) = d.to_digit(10) {
                width = Some(
                    width
                        .unwrap_or(0)
                        .saturating_mul(10)
                        .saturating_add(v as usize),
                );
                chars.next();
            } else {
                break;
            }
        }
        spec.width = width;
        // Precision.
        if let Some(&(_, '.')) = chars.peek() {
            chars.next();
            let mut p = 0usize;
            while let Some(&(_, d)) = chars.peek() {
                if let Some(v) = d.to_digit(10) {
                    p = p.saturating_mul(10).saturating_add(v as usize);
                    chars.next();
                } else {
                    break;
                }
            }
            spec.precision = Some(p);
        }
        let Some((_, verb)) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(next_arg) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        next_arg += 1;
        format_arg(&mut out, verb, spec, arg);
    }
    if next_arg < args.len() {
        out.push_str("%!(EXTRA ");
        for (i, arg) in args[next_arg..].iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}={}", arg.type_name(), arg.plain());
        }
        out.push(')');
    }
    out
}

fn format_arg(out: &mut String, verb: char, spec: Spec, arg: &GoArg<'_>) {
    let body: String = match (verb, arg) {
        ('v' | 'd', GoArg::Int { value, .. }) => {
            let mut s = value.abs().to_string();
            if *value < 0 {
                s.insert(0, '-');
            } else if spec.plus {
                s.insert(0, '+');
            } else if spec.space {
                s.insert(0, ' ');
            }
            if spec.zero
                && !spec.minus
                && let Some(w) = spec.width
            {
                let signed = s.starts_with(['-', '+', ' ']);
                let digits = s.len() - usize::from(signed);
                let pad = w.saturating_sub(digits + usize::from(signed));
                let at = usize::from(signed);
                s.insert_str(at, &"0".repeat(pad));
            }
            s
        }
        ('v' | 's', GoArg::Str(s) | GoArg::Error(s)) => truncate(s, spec.precision).to_owned(),
        ('q', GoArg::Str(s) | GoArg::Error(s)) => {
            let t = truncate(s, spec.precision);
            if spec.sharp && !t.contains('`') {
                format!("`{t}`")
            } else {
                quote(t)
            }
        }
        ('x', GoArg::Str(s) | GoArg::Error(s)) => {
            truncate(s, spec.precision)
                .bytes()
                .fold(String::new(), |mut acc, b| {
                    let _ = write!(acc, "{b:02x}");
                    acc
                })
        }
        ('x', GoArg::Int { value, .. }) => {
            if *value < 0 {
                format!("-{:x}", value.unsigned_abs())
            } else {
                format!("{value:x}")
            }
        }
        _ => {
            // Go: %!verb(type=value).
            let _ = write!(out, "%!{verb}({}={})", arg.type_name(), arg.plain());
            return;
        }
    };
    pad(out, &body, spec);
}

fn truncate(s: &str, precision: Option<usize>) -> &str {
    match precision {
        Some(p) => match s.char_indices().nth(p) {
            Some((i, _)) => &s[..i],
            None => s,
        },
        None => s,
    }
}

fn pad(out: &mut String, body: &str, spec: Spec) {
    let len = body.chars().count();
    let fill = spec.width.map_or(0, |w| w.saturating_sub(len));
    if spec.minus {
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else {
        let c = if spec.zero { '0' } else { ' ' };
        out.extend(std::iter::repeat_n(c, fill));
        out.push_str(body);
    }
}

/// Go `strconv.Quote`: a double-quoted Go string literal.
///
/// ASCII is exact. For non-ASCII text Go keeps printable runes (`unicode.IsPrint`) and
/// escapes the rest as `\u` / `\U`; this port treats control, whitespace other than the
/// space, and the common invisible format characters as non-printable, which matches Go for
/// everything but exotic unassigned code points.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{fffe}'..='\u{ffff}'
    )
}

/// Go's `%v` of a `[]string`: `[a b c]` (nil and empty both print `[]`).
pub fn string_slice<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(s.as_ref());
    }
    out.push(']');
    out
}

/// How a `*metav1.LabelSelector` prints under `%+v`.
///
/// Upstream's `k8s.io/apimachinery` types carried gogo-protobuf generated `String()`
/// methods, which `%+v` calls ([`SelectorStyle::GoGoString`]). If a release drops those
/// methods, Go's reflection printer applies instead ([`SelectorStyle::Reflect`]). Which one
/// the target release uses is not confirmed here, so both are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SelectorStyle {
    /// `&LabelSelector{MatchLabels:map[string]string{k: v,},MatchExpressions:[]LabelSelectorRequirement{},}`;
    /// nil prints `nil`.
    #[default]
    GoGoString,
    /// `&{MatchLabels:map[k:v] MatchExpressions:[]}`; nil prints `<nil>`.
    Reflect,
}

/// The `%+v` rendering of an optional `*metav1.LabelSelector` in the given style.
///
/// Map keys are sorted (both gogo's `String()` and Go's printer sort them).
pub fn label_selector_plus_v(selector: Option<&LabelSelector>, style: SelectorStyle) -> String {
    let Some(sel) = selector else {
        return match style {
            SelectorStyle::GoGoString => "nil".to_owned(),
            SelectorStyle::Reflect => "<nil>".to_owned(),
        };
    };
    let labels = sel.match_labels.as_ref();
    let exprs: &[LabelSelectorRequirement] = sel.match_expressions.as_deref().unwrap_or(&[]);
    let mut out = String::new();
    match style {
        SelectorStyle::GoGoString => {
            out.push_str("&LabelSelector{MatchLabels:map[string]string{");
            for (k, v) in labels.into_iter().flatten() {
                let _ = write!(out, "{k}: {v},");
            }
            out.push_str("},MatchExpressions:[]LabelSelectorRequirement{");
            for r in exprs {
                let values = string_slice(r.values.as_deref().unwrap_or(&[]));
                let _ = write!(
                    out,
                    "LabelSelectorRequirement{{Key:{},Operator:{},Values:{values},}},",
                    r.key, r.operator
                );
            }
            out.push_str("},}");
        }
        SelectorStyle::Reflect => {
            out.push_str("&{MatchLabels:map[");
            for (i, (k, v)) in labels.into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{k}:{v}");
            }
            out.push_str("] MatchExpressions:[");
            for (i, r) in exprs.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let values = string_slice(r.values.as_deref().unwrap_or(&[]));
                let _ = write!(
                    out,
                    "{{Key:{} Operator:{} Values:{values}}}",
                    r.key, r.operator
                );
            }
            out.push_str("]}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn verbs_render_like_go() {
        assert_eq!(
            sprintf(
                "New size: %d; reason: %s; error: %v",
                &[
                    GoArg::int32(4),
                    GoArg::str("cpu resource utilization (percentage of request) above target"),
                    GoArg::error("boom"),
                ]
            ),
            "New size: 4; reason: cpu resource utilization (percentage of request) above target; error: boom"
        );
        assert_eq!(sprintf("%q", &[GoArg::str("a\"b\n")]), r#""a\"b\n""#);
        assert_eq!(sprintf("100%% done", &[]), "100% done");
        assert_eq!(sprintf("%+v|%v", &[GoArg::int(3), GoArg::int(-3)]), "+3|-3");
        assert_eq!(
            sprintf(
                "[%5d|%-3s|%03d]",
                &[GoArg::int(42), GoArg::str("a"), GoArg::int(-7)]
            ),
            "[   42|a  |-07]"
        );
        assert_eq!(sprintf("%.2s", &[GoArg::str("abc")]), "ab");
    }

    #[test]
    fn go_diagnostics_for_formats_without_args() {
        // An error text used as a format (upstream before v1.32 did this in setCondition).
        assert_eq!(
            sprintf(
                "the HPA was unable to compute the replica count: usage 100%d",
                &[]
            ),
            "the HPA was unable to compute the replica count: usage 100%!d(MISSING)"
        );
        assert_eq!(sprintf("50% of pods", &[]), "50%!o(MISSING)f pods");
        assert_eq!(sprintf("trailing %", &[]), "trailing %!(NOVERB)");
        assert_eq!(sprintf("%d", &[GoArg::str("x")]), "%!d(string=x)");
        assert_eq!(sprintf("%s", &[GoArg::int32(5)]), "%!s(int32=5)");
        assert_eq!(
            sprintf("a", &[GoArg::str("b"), GoArg::int(1)]),
            "a%!(EXTRA string=b, int=1)"
        );
    }

    #[test]
    fn quote_matches_strconv() {
        assert_eq!(quote("abc"), r#""abc""#);
        assert_eq!(quote("tab\there"), r#""tab\there""#);
        assert_eq!(quote("\u{1}"), r#""\x01""#);
        assert_eq!(quote("\u{7f}"), r#""\x7f""#);
        assert_eq!(quote("héllo"), "\"héllo\"");
        assert_eq!(quote("\u{a0}"), r#""\u00a0""#);
        assert_eq!(quote("\\"), r#""\\""#);
    }

    #[test]
    fn string_slices() {
        assert_eq!(string_slice::<&str>(&[]), "[]");
        assert_eq!(
            string_slice(&["default/a", "default/b"]),
            "[default/a default/b]"
        );
    }

    fn selector() -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([
                ("queue".to_owned(), "worker_tasks".to_owned()),
                ("a".to_owned(), "b".to_owned()),
            ])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: "In".into(),
                values: Some(vec!["a".into(), "b".into()]),
            }]),
        }
    }

    #[test]
    fn selector_gogo_string() {
        // The gogo-protobuf `String()` form of a `*LabelSelector` under `%+v`.
        let one = LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "queue".to_owned(),
                "worker_tasks".to_owned(),
            )])),
            match_expressions: None,
        };
        assert_eq!(
            label_selector_plus_v(Some(&one), SelectorStyle::GoGoString),
            "&LabelSelector{MatchLabels:map[string]string{queue: worker_tasks,},MatchExpressions:[]LabelSelectorRequirement{},}"
        );
        assert_eq!(
            label_selector_plus_v(Some(&selector()), SelectorStyle::GoGoString),
            "&LabelSelector{MatchLabels:map[string]string{a: b,queue: worker_tasks,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[a b],},},}"
        );
        assert_eq!(
            label_selector_plus_v(None, SelectorStyle::GoGoString),
            "nil"
        );
        assert_eq!(
            label_selector_plus_v(Some(&LabelSelector::default()), SelectorStyle::GoGoString),
            "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}"
        );
    }

    #[test]
    fn selector_reflect() {
        assert_eq!(
            label_selector_plus_v(Some(&selector()), SelectorStyle::Reflect),
            "&{MatchLabels:map[a:b queue:worker_tasks] MatchExpressions:[{Key:k Operator:In Values:[a b]}]}"
        );
        assert_eq!(label_selector_plus_v(None, SelectorStyle::Reflect), "<nil>");
        assert_eq!(
            label_selector_plus_v(Some(&LabelSelector::default()), SelectorStyle::Reflect),
            "&{MatchLabels:map[] MatchExpressions:[]}"
        );
    }
}
