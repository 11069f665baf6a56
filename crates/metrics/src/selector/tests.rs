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
    fn labels_for(reqs: &BTreeMap<String, Req>, broken: Option<usize>) -> BTreeMap<String, String> {
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
            let again: Selector = printed
                .parse()
                .map_err(|e| TestCaseError::fail(format!("{s:?} printed as {printed:?}: {e}")))?;
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
