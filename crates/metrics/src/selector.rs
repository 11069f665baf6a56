//! Label selectors, mirroring upstream `staging/src/k8s.io/apimachinery/pkg/labels/selector.go`
//! (`Parse`, `Requirement`, `NewRequirement`, `internalSelector.String()/Matches()`,
//! `Everything()`, `Nothing()`) and `metav1.LabelSelectorAsSelector` from
//! `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`.
//!
//! Error texts follow Go's: parse errors are wrapped as `unable to parse requirement: …`,
//! validation errors use `field.Error` rendering (`values[0][app]: Invalid value: "-x": …`), and a
//! key rejected by the string parser is reported at the `<nil>` path, exactly as Go prints it.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A selector operator (Go `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `!key`.
    DoesNotExist,
    /// `key=value`.
    Equals,
    /// `key==value`.
    DoubleEquals,
    /// `key in (a,b)`.
    In,
    /// `key!=value`.
    NotEquals,
    /// `key notin (a,b)`.
    NotIn,
    /// `key`.
    Exists,
    /// `key>1` (integer comparison).
    GreaterThan,
    /// `key<1` (integer comparison).
    LessThan,
}

impl Operator {
    /// Go's string value of the operator (`selection.Operator`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::DoesNotExist => "!",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::In => "in",
            Operator::NotEquals => "!=",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// A rejected selector, with Go's error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    /// The error text, as Go prints it.
    pub message: String,
}

impl SelectorError {
    fn new(message: impl Into<String>) -> Self {
        SelectorError {
            message: message.into(),
        }
    }
}

/// One requirement of a selector (Go `labels.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Validates and builds a requirement (Go `labels.NewRequirement`). `values` is kept in the
    /// given order; rendering sorts it.
    pub fn new(
        key: &str,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Requirement, SelectorError> {
        let mut errs: Vec<String> = Vec::new();
        if let Some(e) = validate_label_key(key, "key") {
            errs.push(e);
        }
        let count_err = |detail: &str| {
            format!(
                "values: Invalid value: {}: {detail}",
                go_string_slice(&values)
            )
        };
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(count_err(
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(count_err(
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(count_err(
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(count_err(
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if go_parse_int64(v).is_none() {
                        errs.push(format!(
                            "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                            go_quote(v)
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let problems = label_value_errors(v);
            if !problems.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {}: {}",
                    go_quote(v),
                    problems.join("; ")
                ));
            }
        }
        if !errs.is_empty() {
            return Err(SelectorError::new(aggregate(errs)));
        }
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, in construction order.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }

    /// Go `Requirement.Matches`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_lookup(|k| labels.get(k).map(String::as_str))
    }

    /// [`Requirement::matches`] over any label set, given as a lookup by key (Go's
    /// `labels.Labels` interface).
    pub fn matches_lookup<'l>(&self, lookup: impl Fn(&str) -> Option<&'l str>) -> bool {
        let got = lookup(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                got.is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => got.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => got.is_some(),
            Operator::DoesNotExist => got.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = got.and_then(go_parse_int64) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Some(want) = go_parse_int64(want) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// Go `Requirement.String()`: values sorted, `in`/`notin` in parentheses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let parens = matches!(self.operator, Operator::In | Operator::NotIn);
        if parens {
            f.write_str("(")?;
        }
        let mut vals: Vec<&str> = self.values.iter().map(String::as_str).collect();
        vals.sort_unstable();
        f.write_str(&vals.join(","))?;
        if parens {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A label selector (Go `labels.Selector`): either a list of requirements, all of which must
/// match (an empty list selects everything), or the special selector that selects nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// `None` is Go's `nothingSelector`.
    requirements: Option<Vec<Requirement>>,
}

impl Default for Selector {
    fn default() -> Self {
        Selector::everything()
    }
}

impl Selector {
    /// Selects every object (Go `labels.Everything()`); renders as `""`.
    pub fn everything() -> Selector {
        Selector {
            requirements: Some(Vec::new()),
        }
    }

    /// Selects no object (Go `labels.Nothing()`); renders as `""` too, but matches nothing.
    pub fn nothing() -> Selector {
        Selector { requirements: None }
    }

    /// Builds a selector from requirements, sorted by key (Go `NewSelector().Add(...)`).
    pub fn from_requirements(mut reqs: Vec<Requirement>) -> Selector {
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Selector {
            requirements: Some(reqs),
        }
    }

    /// Go `metav1.LabelSelectorAsSelector` for a present selector: no `matchLabels` and no
    /// `matchExpressions` select everything. Use [`Selector::from_optional_label_selector`] for
    /// an absent one.
    pub fn from_label_selector(ls: &LabelSelector) -> Result<Selector, SelectorError> {
        let labels = ls.match_labels.as_ref();
        let exprs = ls.match_expressions.as_deref().unwrap_or_default();
        if labels.is_none_or(BTreeMap::is_empty) && exprs.is_empty() {
            return Ok(Selector::everything());
        }
        let mut reqs = Vec::new();
        for (k, v) in labels.into_iter().flatten() {
            reqs.push(Requirement::new(k, Operator::Equals, vec![v.clone()])?);
        }
        for expr in exprs {
            let op = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::new(format!(
                        "{} is not a valid label selector operator",
                        go_quote(other)
                    )));
                }
            };
            reqs.push(Requirement::new(
                &expr.key,
                op,
                expr.values.clone().unwrap_or_default(),
            )?);
        }
        Ok(Selector::from_requirements(reqs))
    }

    /// Go `metav1.LabelSelectorAsSelector` including the nil case: an absent selector selects
    /// nothing.
    pub fn from_optional_label_selector(
        ls: Option<&LabelSelector>,
    ) -> Result<Selector, SelectorError> {
        match ls {
            None => Ok(Selector::nothing()),
            Some(ls) => Selector::from_label_selector(ls),
        }
    }

    /// True for Go's `Nothing()` selector.
    pub fn is_nothing(&self) -> bool {
        self.requirements.is_none()
    }

    /// Go `Selector.Empty()`: true when it places no restriction (false for `nothing`).
    pub fn is_empty(&self) -> bool {
        self.requirements.as_ref().is_some_and(Vec::is_empty)
    }

    /// The requirements, sorted by key (empty for `everything` and `nothing`).
    pub fn requirements(&self) -> &[Requirement] {
        self.requirements.as_deref().unwrap_or_default()
    }

    /// Go `Selector.Matches`: every requirement matches (never, for `nothing`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_lookup(|k| labels.get(k).map(String::as_str))
    }

    /// [`Selector::matches`] over any label set, given as a lookup by key.
    pub fn matches_lookup<'l>(&self, lookup: impl Fn(&str) -> Option<&'l str> + Copy) -> bool {
        match &self.requirements {
            None => false,
            Some(reqs) => reqs.iter().all(|r| r.matches_lookup(lookup)),
        }
    }
}

impl fmt::Display for Selector {
    /// Go `Selector.String()`: requirements joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl FromStr for Selector {
    type Err = SelectorError;

    /// Go `labels.Parse`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let tokens = lex(s);
        let mut p = Parser { tokens, pos: 0 };
        let reqs = p.parse()?;
        Ok(Selector::from_requirements(reqs))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Go's lexer; a NUL byte ends the input as it does there.
fn lex(s: &str) -> Vec<(Token, String)> {
    let b = s.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        while at(pos) != 0 && is_whitespace(at(pos)) {
            pos += 1;
        }
        let c = at(pos);
        if c == 0 {
            out.push((Token::EndOfString, String::new()));
            return out;
        }
        if is_special(c) {
            let start = pos;
            let mut last: Option<(Token, usize)> = None;
            while at(pos) != 0 && is_special(at(pos)) {
                let buf = &b[start..=pos];
                if let Some(t) = keyword(buf) {
                    last = Some((t, pos + 1));
                } else if last.is_some() {
                    break;
                }
                pos += 1;
            }
            match last {
                Some((t, end)) => {
                    pos = end;
                    out.push((t, String::from_utf8_lossy(&b[start..end]).into_owned()));
                }
                None => {
                    let buf = String::from_utf8_lossy(&b[start..pos]).into_owned();
                    out.push((
                        Token::Error,
                        format!("error expected: keyword found '{buf}'"),
                    ));
                }
            }
        } else {
            let start = pos;
            while at(pos) != 0 && !is_special(at(pos)) && !is_whitespace(at(pos)) {
                pos += 1;
            }
            let word = &b[start..pos];
            let lit = String::from_utf8_lossy(word).into_owned();
            out.push((keyword(word).unwrap_or(Token::Identifier), lit));
        }
    }
}

struct Parser {
    tokens: Vec<(Token, String)>,
    pos: usize,
}

/// Whether `in`/`notin` count as identifiers (Go's `Values` context) or keywords.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

fn err(s: String) -> SelectorError {
    SelectorError::new(s)
}

impl Parser {
    fn get(&self, i: usize, ctx: Ctx) -> (Token, String) {
        let (t, l) = self
            .tokens
            .get(i)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        let t = match (ctx, t) {
            (Ctx::Values, Token::In | Token::NotIn) => Token::Identifier,
            (_, t) => t,
        };
        (t, l)
    }

    fn lookahead(&self, ctx: Ctx) -> (Token, String) {
        self.get(self.pos, ctx)
    }

    fn consume(&mut self, ctx: Ctx) -> (Token, String) {
        let r = self.get(self.pos, ctx);
        self.pos += 1;
        r
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Ctx::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| err(format!("unable to parse requirement: {}", e.message)))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Ctx::Values);
                    match t {
                        Token::EndOfString => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Ctx::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(err(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Token::EndOfString => return Ok(reqs),
                _ => {
                    return Err(err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = op {
            return Requirement::new(&key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    fn parse_key_and_infer_operator(
        &mut self,
    ) -> Result<(String, Option<Operator>), SelectorError> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Ctx::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Ctx::Values);
        }
        if tok != Token::Identifier {
            return Err(err(format!("found '{lit}', expected: identifier")));
        }
        // Go validates against the parser's nil field path, printed as "<nil>".
        if let Some(e) = validate_label_key(&lit, "<nil>") {
            return Err(err(e));
        }
        let (t, _) = self.lookahead(Ctx::Values);
        if (t == Token::EndOfString || t == Token::Comma) && op.is_none() {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, SelectorError> {
        let (tok, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                )));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, lit) = self.consume(Ctx::Values);
        if tok != Token::OpenPar {
            return Err(err(format!("found '{lit}' expected: '('")));
        }
        let (tok, lit) = self.lookahead(Ctx::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let s = self.parse_identifiers_list()?;
                let (t, _) = self.consume(Ctx::Values);
                if t != Token::ClosedPar {
                    return Err(err(format!("found '{lit}', expected: ')'")));
                }
                Ok(s)
            }
            Token::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(vec![String::new()])
            }
            _ => Err(err(format!(
                "found '{lit}', expected: ',', ')' or identifier"
            ))),
        }
    }

    /// A sorted set of (possibly empty) identifiers.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut s = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Ctx::Values);
            match tok {
                Token::Identifier => {
                    s.insert(lit);
                    let (t2, l2) = self.lookahead(Ctx::Values);
                    match t2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(s.into_iter().collect()),
                        _ => return Err(err(format!("found '{l2}', expected: ',' or ')'"))),
                    }
                }
                Token::Comma => {
                    if s.is_empty() {
                        s.insert(String::new());
                    }
                    let (t2, _) = self.lookahead(Ctx::Values);
                    if t2 == Token::ClosedPar {
                        s.insert(String::new());
                        return Ok(s.into_iter().collect());
                    }
                    if t2 == Token::Comma {
                        self.consume(Ctx::Values);
                        s.insert(String::new());
                    }
                }
                _ => {
                    return Err(err(format!("found '{lit}', expected: ',', or identifier")));
                }
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, _) = self.lookahead(Ctx::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Ctx::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit]);
        }
        Err(err(format!("found '{lit}', expected: identifier")))
    }
}

// --- validation (k8s.io/apimachinery/pkg/util/validation) ---

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            alnum(f)
                && alnum(l)
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            match (b.first(), b.last()) {
                (Some(f), Some(l)) => ok(f) && ok(l) && b.iter().all(|c| ok(c) || *c == b'-'),
                _ => false,
            }
        })
}

/// Go `validation.IsQualifiedName`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !is_dns1123_subdomain(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Go `validation.IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `field.Invalid(path, key, …)` text for a bad key, or `None`.
fn validate_label_key(key: &str, path: &str) -> Option<String> {
    let errs = qualified_name_errors(key);
    if errs.is_empty() {
        return None;
    }
    Some(format!(
        "{path}: Invalid value: {}: {}",
        go_quote(key),
        errs.join("; ")
    ))
}

/// Go `utilerrors.NewAggregate(...).Error()`: one message alone, several de-duplicated in
/// brackets.
fn aggregate(errs: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// Go `%q` for a string ([`hpa_config::strconv::quote`]).
pub(crate) use hpa_config::strconv::quote as go_quote;

/// Go `%#v` of a `[]string` (nil when empty, as `LabelSelectorAsSelector` passes it).
fn go_string_slice(v: &[String]) -> String {
    if v.is_empty() {
        return "[]string(nil)".to_string();
    }
    let items: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// `strconv.ParseInt(s, 10, 64)`.
fn go_parse_int64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests;
