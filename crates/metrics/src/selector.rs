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

/// Go `%q` for a string (printable characters kept, others escaped).
pub(crate) fn go_quote(s: &str) -> String {
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
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> Selector {
        s.parse().unwrap()
    }

    /// Round trips from upstream `TestSelectorParse` (canonical output sorted by key).
    #[test]
    fn parse_and_render() {
        for (input, want) in [
            ("", ""),
            ("x=a,y=b,z=c", "x=a,y=b,z=c"),
            ("x!=a,y=b", "x!=a,y=b"),
            ("x=,z= ", "x=,z="),
            ("x= ,z= ", "x=,z="),
            ("!x", "!x"),
            ("x>1", "x>1"),
            ("x<1", "x<1"),
            ("x>1,z<5", "x>1,z<5"),
            ("x==a", "x==a"),
            ("z=c,y=b,x=a", "x=a,y=b,z=c"),
            ("x in (b,a)", "x in (a,b)"),
            ("x notin (z, y,x)", "x notin (x,y,z)"),
            ("x in ()", "x in ()"),
            ("x in (,)", "x in ()"),
            ("x in (a,,b)", "x in (,a,b)"),
            ("x in(a)", "x in (a)"),
            ("a", "a"),
            ("a,!b", "a,!b"),
            ("!b,a", "a,!b"),
            ("x in (in,notin)", "x in (in,notin)"),
            ("  x  =  y  ", "x=y"),
            ("example.com/app=web", "example.com/app=web"),
            ("tier in (b,a),app=web", "app=web,tier in (a,b)"),
        ] {
            assert_eq!(sel(input).to_string(), want, "input {input:?}");
        }
    }

    #[test]
    fn parse_errors() {
        let qn = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        for (input, want) in [
            ("x=a,", "found '', expected: identifier after ','".to_string()),
            ("x=a b", "found 'b', expected: ',' or 'end of string'".to_string()),
            ("x=a==b", "found '==', expected: ',' or 'end of string'".to_string()),
            ("x in a", "unable to parse requirement: found 'a' expected: '('".to_string()),
            ("x in (a", "unable to parse requirement: found '', expected: ',' or ')'".to_string()),
            (",x", "found ',', expected: !, identifier, or 'end of string'".to_string()),
            ("x~a", format!("unable to parse requirement: <nil>: Invalid value: \"x~a\": {qn}")),
            ("x>a", "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer".to_string()),
            ("=a", "found '=', expected: !, identifier, or 'end of string'".to_string()),
            ("x (a)", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt".to_string()),
            ("x=-a", "unable to parse requirement: values[0][x]: Invalid value: \"-a\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()),
        ] {
            assert_eq!(input.parse::<Selector>().unwrap_err().message, want, "input {input:?}");
        }
    }

    #[test]
    fn matching() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        for (s, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("missing in (web)", false),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("n>4", true),
            ("n>5", false),
            ("n<6", true),
            ("app>1", false),
            ("missing>1", false),
            ("app=web,tier=back", false),
            ("missing=", false),
        ] {
            assert_eq!(sel(s).matches(&l), want, "{s}");
        }
        assert!(Selector::everything().matches(&l));
        assert!(!Selector::nothing().matches(&l));
        assert!(Selector::everything().is_empty());
        assert!(!Selector::nothing().is_empty());
        assert_eq!(Selector::nothing().to_string(), "");
        assert!(sel("").is_empty());
    }

    #[test]
    fn label_selector_objects() {
        assert!(
            Selector::from_optional_label_selector(None)
                .unwrap()
                .is_nothing()
        );
        let empty = LabelSelector::default();
        assert!(Selector::from_label_selector(&empty).unwrap().is_empty());

        let ls = LabelSelector {
            match_labels: Some(
                [
                    ("b".to_string(), "2".to_string()),
                    ("a".to_string(), "1".to_string()),
                ]
                .into(),
            ),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "c".into(),
                    operator: "In".into(),
                    values: Some(vec!["y".into(), "x".into()]),
                },
                LabelSelectorRequirement {
                    key: "aa".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
                LabelSelectorRequirement {
                    key: "d".into(),
                    operator: "Exists".into(),
                    values: Some(vec![]),
                },
                LabelSelectorRequirement {
                    key: "e".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["z".into()]),
                },
            ]),
        };
        let s = Selector::from_label_selector(&ls).unwrap();
        assert_eq!(s.to_string(), "a=1,!aa,b=2,c in (x,y),d,e notin (z)");
        assert_eq!(s.requirements().len(), 6);
        assert!(s.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "x"), ("d", "")])));
        assert!(!s.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "x")])));

        let bad_op = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Gt".into(),
                values: Some(vec!["1".into()]),
            }]),
            ..Default::default()
        };
        assert_eq!(
            Selector::from_label_selector(&bad_op).unwrap_err().message,
            "\"Gt\" is not a valid label selector operator"
        );
        let empty_in = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "In".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert_eq!(
            Selector::from_label_selector(&empty_in)
                .unwrap_err()
                .message,
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
        );
        let exists_with_values = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Exists".into(),
                values: Some(vec!["x".into()]),
            }]),
            ..Default::default()
        };
        assert_eq!(
            Selector::from_label_selector(&exists_with_values)
                .unwrap_err()
                .message,
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist"
        );
        let bad_key = LabelSelector {
            match_labels: Some([("a/b/c".to_string(), "x".to_string())].into()),
            ..Default::default()
        };
        assert!(Selector::from_label_selector(&bad_key).unwrap_err().message.starts_with(
            "key: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters"
        ));
    }

    #[test]
    fn key_validation_messages() {
        assert_eq!(
            qualified_name_errors("example.com/app"),
            Vec::<String>::new()
        );
        assert_eq!(
            qualified_name_errors("/app"),
            vec!["prefix part must be non-empty".to_string()]
        );
        let long = "a".repeat(64);
        assert_eq!(
            qualified_name_errors(&long),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert_eq!(
            qualified_name_errors("Example.com/app")[0],
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// A label value no generated requirement names: generated values are
        /// `[a-z0-9]{1,4}`.
        const OUTSIDE: &str = "x-outside";

        /// One generated requirement on its own key: an operator (an index into the nine
        /// forms of [`Req::text`]), its values, its integer bound, and the choices the
        /// label builders make (which value to use, whether to leave the label out).
        #[derive(Debug, Clone)]
        struct Req {
            op: usize,
            values: Vec<String>,
            bound: u32,
            pick: usize,
            absent: bool,
        }

        impl Req {
            fn first(&self) -> &str {
                &self.values[0]
            }

            fn picked(&self) -> &str {
                &self.values[self.pick % self.values.len()]
            }

            /// The requirement as selector text.
            fn text(&self, key: &str) -> String {
                let (first, all, n) = (self.first(), self.values.join(","), self.bound);
                match self.op {
                    0 => format!("{key}={first}"),
                    1 => format!("{key}=={first}"),
                    2 => format!("{key}!={first}"),
                    3 => format!("{key} in ({all})"),
                    4 => format!("{key} notin ({all})"),
                    5 => key.to_string(),
                    6 => format!("!{key}"),
                    7 => format!("{key}>{n}"),
                    _ => format!("{key}<{n}"),
                }
            }

            /// A label value (`None`: no label) that satisfies the requirement.
            fn satisfying(&self) -> Option<String> {
                let (n, offset) = (self.bound, self.pick as u32 % 5);
                match self.op {
                    0 | 1 => Some(self.first().to_string()),
                    2 | 4 if self.absent => None,
                    2 | 4 => Some(OUTSIDE.to_string()),
                    3 => Some(self.picked().to_string()),
                    5 => Some(self.picked().to_string()),
                    6 => None,
                    7 => Some((n + 1 + offset).to_string()),
                    _ => Some(n.saturating_sub(1 + offset).to_string()),
                }
            }

            /// A label value (`None`: no label) that violates the requirement.
            fn violating(&self) -> Option<String> {
                let (n, offset) = (self.bound, self.pick as u32 % 5);
                match self.op {
                    0 | 1 | 3 | 7 | 8 if self.absent => None,
                    0 | 1 | 3 => Some(OUTSIDE.to_string()),
                    2 => Some(self.first().to_string()),
                    4 => Some(self.picked().to_string()),
                    5 => None,
                    6 => Some(self.picked().to_string()),
                    7 => Some(n.saturating_sub(offset).to_string()),
                    _ => Some((n + offset).to_string()),
                }
            }
        }

        fn req() -> impl Strategy<Value = Req> {
            (
                0usize..9,
                prop::collection::btree_set("[a-z0-9]{1,4}", 1..4),
                1u32..100,
                any::<usize>(),
                any::<bool>(),
            )
                .prop_map(|(op, values, bound, pick, absent)| Req {
                    op,
                    values: values.into_iter().collect(),
                    bound,
                    pick,
                    absent,
                })
        }

        /// Labels satisfying every requirement, except the `broken`-th, which they violate.
        fn labels_for(
            reqs: &BTreeMap<String, Req>,
            broken: Option<usize>,
        ) -> BTreeMap<String, String> {
            let mut labels = BTreeMap::new();
            for (i, (key, r)) in reqs.iter().enumerate() {
                let value = if broken == Some(i) {
                    r.violating()
                } else {
                    r.satisfying()
                };
                if let Some(v) = value {
                    labels.insert(key.clone(), v);
                }
            }
            // A label no requirement names changes nothing.
            labels.insert("unrelated".to_string(), OUTSIDE.to_string());
            labels
        }

        /// If `s` parses, the selector prints as text that parses back to the same selector.
        fn prints_back_to_itself(s: &str) -> Result<(), TestCaseError> {
            if let Ok(parsed) = s.parse::<Selector>() {
                let printed = parsed.to_string();
                let again: Selector = printed.parse().map_err(|e| {
                    TestCaseError::fail(format!("{s:?} printed as {printed:?}: {e}"))
                })?;
                prop_assert_eq!(again.to_string(), printed);
            }
            Ok(())
        }

        proptest! {
            /// Any text gives a selector or an error, and a selector prints as text that
            /// parses back to the same selector.
            #[test]
            fn parsed_text_prints_back_to_itself(s in "[a-z!=(),<> in0-9]{0,30}") {
                prints_back_to_itself(&s)?;
            }

            /// The same for any printable text.
            #[test]
            fn any_text_gives_a_selector_or_an_error(s in "\\PC{0,40}") {
                prints_back_to_itself(&s)?;
            }

            /// A selector parsed from generated requirements matches labels built to satisfy
            /// every requirement, and not labels that violate any one of them; so does the
            /// selector parsed back from its printed form.
            #[test]
            fn a_parsed_selector_matches_what_was_generated(
                reqs in prop::collection::btree_map("[a-z][a-z0-9]{0,5}", req(), 0..5),
                broken in any::<prop::sample::Index>(),
            ) {
                let text: Vec<String> = reqs.iter().map(|(k, r)| r.text(k)).collect();
                let text = text.join(",");
                let parsed: Selector = text.parse().unwrap();
                let again: Selector = parsed.to_string().parse().unwrap();
                prop_assert_eq!(parsed.requirements().len(), reqs.len());
                let good = labels_for(&reqs, None);
                prop_assert!(parsed.matches(&good), "{} should match {:?}", text, good);
                prop_assert!(again.matches(&good), "{} should match {:?}", again, good);
                if !reqs.is_empty() {
                    let bad = labels_for(&reqs, Some(broken.index(reqs.len())));
                    prop_assert!(!parsed.matches(&bad), "{} should not match {:?}", text, bad);
                    prop_assert!(!again.matches(&bad), "{} should not match {:?}", again, bad);
                }
            }
        }
    }
}
