//! `spec.behavior`: its API defaults (spec §5.4) and the policy rate limits (spec §5.2).
//!
//! Mirrors upstream `pkg/apis/autoscaling/v2/defaults.go` (`GenerateHPAScaleUpRules`,
//! `GenerateHPAScaleDownRules`, `copyHPAScalingRules`), and from
//! `pkg/controller/podautoscaler/horizontal.go` `maybeInitScaleDownStabilizationWindow`,
//! `calculateScaleUpLimitWithScalingRules`, `calculateScaleDownLimitWithBehaviors` and
//! `convertDesiredReplicasWithBehaviorRate`.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscalerBehavior};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::conditions::LimitReason;
use crate::scale_events::{TimestampedScaleEvent, replicas_change_per_period};

/// `selectPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SelectPolicy {
    /// `Max` (the default): the policy allowing the largest change wins.
    #[default]
    Max,
    /// `Min`: the policy allowing the smallest change wins.
    Min,
    /// `Disabled`: no scaling in this direction.
    Disabled,
}

impl SelectPolicy {
    /// Parse the API string. Upstream compares against `Disabled` and `Min` and treats
    /// anything else like `Max`, so unknown values map to [`SelectPolicy::Max`].
    pub fn from_api(s: &str) -> Self {
        match s {
            "Disabled" => SelectPolicy::Disabled,
            "Min" => SelectPolicy::Min,
            _ => SelectPolicy::Max,
        }
    }

    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            SelectPolicy::Max => "Max",
            SelectPolicy::Min => "Min",
            SelectPolicy::Disabled => "Disabled",
        }
    }
}

/// A scaling policy's `type`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PolicyType {
    /// `Pods`: an absolute number of pods per period.
    Pods,
    /// `Percent`: a percentage of the replicas at the period's start.
    Percent,
    /// Any other string. Upstream then leaves its running `proposed` value unchanged
    /// (the variable lives outside the loop), which is reproduced.
    Other(String),
}

impl PolicyType {
    /// Parse the API string.
    pub fn from_api(s: &str) -> Self {
        match s {
            "Pods" => PolicyType::Pods,
            "Percent" => PolicyType::Percent,
            other => PolicyType::Other(other.to_owned()),
        }
    }
}

/// One scaling policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScalingPolicy {
    /// `type`.
    pub type_: PolicyType,
    /// `value`.
    pub value: i32,
    /// `periodSeconds`.
    pub period_seconds: i32,
}

/// One direction's rules after API defaulting.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingRules {
    /// `stabilizationWindowSeconds`; `None` only for a defaulted scale-down direction before
    /// the controller fills it from the flag.
    pub stabilization_window_seconds: Option<i32>,
    /// `selectPolicy`.
    pub select_policy: SelectPolicy,
    /// `policies`.
    pub policies: Vec<ScalingPolicy>,
    /// `tolerance` (HPAConfigurableTolerance), unparsed.
    pub tolerance: Option<Quantity>,
}

fn pods(value: i32, period_seconds: i32) -> ScalingPolicy {
    ScalingPolicy {
        type_: PolicyType::Pods,
        value,
        period_seconds,
    }
}

fn percent(value: i32, period_seconds: i32) -> ScalingPolicy {
    ScalingPolicy {
        type_: PolicyType::Percent,
        value,
        period_seconds,
    }
}

/// Upstream `copyHPAScalingRules`: every field the user set replaces the default; a set
/// (even empty) policy list replaces the default list as a whole.
fn overlay(user: Option<&HPAScalingRules>, mut rules: ScalingRules) -> ScalingRules {
    let Some(user) = user else { return rules };
    if let Some(p) = &user.select_policy {
        rules.select_policy = SelectPolicy::from_api(p);
    }
    if let Some(w) = user.stabilization_window_seconds {
        rules.stabilization_window_seconds = Some(w);
    }
    if let Some(ps) = &user.policies {
        rules.policies = ps
            .iter()
            .map(|p| ScalingPolicy {
                type_: PolicyType::from_api(&p.type_),
                value: p.value,
                period_seconds: p.period_seconds,
            })
            .collect();
    }
    if let Some(t) = &user.tolerance {
        rules.tolerance = Some(t.clone());
    }
    rules
}

/// Upstream `GenerateHPAScaleUpRules`: defaults `stabilizationWindowSeconds: 0`,
/// `selectPolicy: Max`, policies `Pods 4 / 15s` and `Percent 100 / 15s`, overlaid by the
/// user's fields.
pub fn generate_scale_up_rules(user: Option<&HPAScalingRules>) -> ScalingRules {
    overlay(
        user,
        ScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: SelectPolicy::Max,
            policies: vec![pods(4, 15), percent(100, 15)],
            tolerance: None,
        },
    )
}

/// Upstream `GenerateHPAScaleDownRules`: defaults `stabilizationWindowSeconds: nil` (the
/// controller's flag decides), `selectPolicy: Max`, policy `Percent 100 / 15s`, overlaid
/// by the user's fields.
pub fn generate_scale_down_rules(user: Option<&HPAScalingRules>) -> ScalingRules {
    overlay(
        user,
        ScalingRules {
            stabilization_window_seconds: None,
            select_policy: SelectPolicy::Max,
            policies: vec![percent(100, 15)],
            tolerance: None,
        },
    )
}

/// A behavior with API defaults applied and the scale-down window resolved: what
/// `normalizeDesiredReplicasWithBehaviors` reads.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveBehavior {
    /// Scale-up rules.
    pub scale_up: ScalingRules,
    /// Scale-down rules.
    pub scale_down: ScalingRules,
    /// The scale-up stabilization window in seconds.
    pub scale_up_window_seconds: i32,
    /// The scale-down stabilization window in seconds (the flag value when unset).
    pub scale_down_window_seconds: i32,
}

impl EffectiveBehavior {
    /// Apply the API defaults to `behavior` (as the API server does for every stored HPA
    /// with a behavior) and upstream `maybeInitScaleDownStabilizationWindow`: an unset
    /// scale-down window becomes `int32(downscaleStabilisationWindow.Seconds())`.
    pub fn new(
        behavior: &HorizontalPodAutoscalerBehavior,
        downscale_window: SignedDuration,
    ) -> Self {
        let scale_up = generate_scale_up_rules(behavior.scale_up.as_ref());
        let scale_down = generate_scale_down_rules(behavior.scale_down.as_ref());
        let scale_up_window_seconds = scale_up.stabilization_window_seconds.unwrap_or(0);
        let scale_down_window_seconds = scale_down
            .stabilization_window_seconds
            .unwrap_or_else(|| go_duration_seconds_to_i32(downscale_window));
        EffectiveBehavior {
            scale_up,
            scale_down,
            scale_up_window_seconds,
            scale_down_window_seconds,
        }
    }
}

/// Go `int32(d.Seconds())`: float seconds truncated toward zero.
fn go_duration_seconds_to_i32(d: SignedDuration) -> i32 {
    go_f64_to_i32(d.as_secs_f64())
}

/// Go `int32(f)` as compiled for amd64: truncation toward zero; NaN and out-of-range
/// values give `math.MinInt32` (the CPU's "integer indefinite").
pub(crate) fn go_f64_to_i32(f: f64) -> i32 {
    if f.is_nan() || f <= -2_147_483_649.0 || f >= 2_147_483_648.0 {
        i32::MIN
    } else {
        f as i32
    }
}

fn period_start(
    current: i32,
    period_seconds: i32,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    now: Timestamp,
) -> i32 {
    let added = replicas_change_per_period(period_seconds, up_events, now);
    let deleted = replicas_change_per_period(period_seconds, down_events, now);
    current.wrapping_sub(added).wrapping_add(deleted)
}

/// One policy's limit as computed by the rate-limit functions, for decision traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyLimit {
    /// The policy.
    pub policy: ScalingPolicy,
    /// The replicas at the start of its period (`current - added + deleted`).
    pub period_start: i32,
    /// The replica count this policy allows (`None` for an unknown policy type, which
    /// leaves upstream's running value unchanged).
    pub limit: Option<i32>,
    /// Whether `selectPolicy` picked this policy's limit (the first one giving the combined
    /// limit).
    pub selected: bool,
}

/// Upstream `calculateScaleUpLimitWithScalingRules`: for each policy, the replicas at the
/// period's start (`current - added + deleted` within the policy's period) plus the policy's
/// allowance (`Pods`: `+ value`; `Percent`: `ceil(start * (1 + value/100))`), combined with
/// max (`Max`) or min (`Min`); `Disabled` returns `current`. With no policies the result is
/// `i32::MIN` (`Max`) or `i32::MAX` (`Min`), as upstream.
pub fn calculate_scale_up_limit_with_scaling_rules(
    current: i32,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    rules: &ScalingRules,
    now: Timestamp,
) -> i32 {
    scale_up_limit_with_policies(current, up_events, down_events, rules, now).0
}

/// [`calculate_scale_up_limit_with_scaling_rules`] with every policy's own limit.
pub fn scale_up_limit_with_policies(
    current: i32,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    rules: &ScalingRules,
    now: Timestamp,
) -> (i32, Vec<PolicyLimit>) {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return (current, Vec::new()),
        SelectPolicy::Min => (i32::MAX, i32::min),
        SelectPolicy::Max => (i32::MIN, i32::max),
    };
    let mut limits = Vec::with_capacity(rules.policies.len());
    let mut selected: Option<usize> = None;
    let mut proposed = 0i32;
    for policy in &rules.policies {
        let start = period_start(current, policy.period_seconds, up_events, down_events, now);
        let own = match policy.type_ {
            PolicyType::Pods => Some(start.wrapping_add(policy.value)),
            PolicyType::Percent => Some(go_f64_to_i32(
                (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil(),
            )),
            PolicyType::Other(_) => None,
        };
        if let Some(own) = own {
            proposed = own;
        }
        limits.push(PolicyLimit {
            policy: policy.clone(),
            period_start: start,
            limit: own,
            selected: false,
        });
        let next = pick(result, proposed);
        if next != result || selected.is_none() {
            selected = Some(limits.len() - 1);
        }
        result = next;
    }
    if let Some(p) = selected.and_then(|i| limits.get_mut(i)) {
        p.selected = true;
    }
    (result, limits)
}

/// Upstream `calculateScaleDownLimitWithBehaviors`: for each policy, the replicas at the
/// period's start minus the allowance (`Pods`: `- value`; `Percent`: `int32(start * (1 -
/// value/100))`, truncated), combined with min (`Max`, the largest change) or max (`Min`);
/// `Disabled` returns `current`.
pub fn calculate_scale_down_limit_with_behaviors(
    current: i32,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    rules: &ScalingRules,
    now: Timestamp,
) -> i32 {
    scale_down_limit_with_policies(current, up_events, down_events, rules, now).0
}

/// [`calculate_scale_down_limit_with_behaviors`] with every policy's own limit.
pub fn scale_down_limit_with_policies(
    current: i32,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    rules: &ScalingRules,
    now: Timestamp,
) -> (i32, Vec<PolicyLimit>) {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return (current, Vec::new()),
        SelectPolicy::Min => (i32::MIN, i32::max),
        SelectPolicy::Max => (i32::MAX, i32::min),
    };
    let mut limits = Vec::with_capacity(rules.policies.len());
    let mut selected: Option<usize> = None;
    let mut proposed = 0i32;
    for policy in &rules.policies {
        let start = period_start(current, policy.period_seconds, up_events, down_events, now);
        let own = match policy.type_ {
            PolicyType::Pods => Some(start.wrapping_sub(policy.value)),
            PolicyType::Percent => Some(go_f64_to_i32(
                f64::from(start) * (1.0 - f64::from(policy.value) / 100.0),
            )),
            PolicyType::Other(_) => None,
        };
        if let Some(own) = own {
            proposed = own;
        }
        limits.push(PolicyLimit {
            policy: policy.clone(),
            period_start: start,
            limit: own,
            selected: false,
        });
        let next = pick(result, proposed);
        if next != result || selected.is_none() {
            selected = Some(limits.len() - 1);
        }
        result = next;
    }
    if let Some(p) = selected.and_then(|i| limits.get_mut(i)) {
        p.selected = true;
    }
    (result, limits)
}

/// The result of [`convert_desired_replicas_with_behavior_rate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimited {
    /// The bounded replica count.
    pub replicas: i32,
    /// The `ScalingLimited` reason.
    pub reason: LimitReason,
    /// The policy limit computed for the direction (after clamping to `current`), `None`
    /// when `desired == current`.
    pub rate_limit: Option<i32>,
    /// Each policy of the direction with its own limit (empty when `desired == current` or
    /// the direction is `Disabled`).
    pub policies: Vec<PolicyLimit>,
}

/// Upstream `convertDesiredReplicasWithBehaviorRate`: bound `desired` by the direction's
/// policy limit (never beyond `current` in the wrong direction) and by max/min replicas.
#[allow(clippy::too_many_arguments)]
pub fn convert_desired_replicas_with_behavior_rate(
    current: i32,
    desired: i32,
    min_replicas: i32,
    max_replicas: i32,
    behavior: &EffectiveBehavior,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    now: Timestamp,
) -> RateLimited {
    if desired > current {
        let (mut limit, policies) =
            scale_up_limit_with_policies(current, up_events, down_events, &behavior.scale_up, now);
        if limit < current {
            limit = current;
        }
        let (maximum, reason) = if max_replicas > limit {
            (limit, LimitReason::ScaleUpLimit)
        } else {
            (max_replicas, LimitReason::TooManyReplicas)
        };
        if desired > maximum {
            return RateLimited {
                replicas: maximum,
                reason,
                rate_limit: Some(limit),
                policies,
            };
        }
        return RateLimited {
            replicas: desired,
            reason: LimitReason::DesiredWithinRange,
            rate_limit: Some(limit),
            policies,
        };
    }
    if desired < current {
        let (mut limit, policies) = scale_down_limit_with_policies(
            current,
            up_events,
            down_events,
            &behavior.scale_down,
            now,
        );
        if limit > current {
            limit = current;
        }
        let (minimum, reason) = if min_replicas < limit {
            (limit, LimitReason::ScaleDownLimit)
        } else {
            (min_replicas, LimitReason::TooFewReplicas)
        };
        if desired < minimum {
            return RateLimited {
                replicas: minimum,
                reason,
                rate_limit: Some(limit),
                policies,
            };
        }
        return RateLimited {
            replicas: desired,
            reason: LimitReason::DesiredWithinRange,
            rate_limit: Some(limit),
            policies,
        };
    }
    RateLimited {
        replicas: desired,
        reason: LimitReason::DesiredWithinRange,
        rate_limit: None,
        policies: Vec::new(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::autoscaling::v2::HPAScalingPolicy;

    use super::*;

    /// Upstream test helper `generateScalingRules` (Max policy; a zero `pods` / `percent`
    /// omits that policy).
    pub(crate) fn generate_scaling_rules(
        pods_value: i32,
        pods_period: i32,
        percent_value: i32,
        percent_period: i32,
        window: i32,
    ) -> ScalingRules {
        let mut policies = vec![];
        if pods_value != 0 {
            policies.push(pods(pods_value, pods_period));
        }
        if percent_value != 0 {
            policies.push(percent(percent_value, percent_period));
        }
        ScalingRules {
            stabilization_window_seconds: Some(window),
            select_policy: SelectPolicy::Max,
            policies,
            tolerance: None,
        }
    }

    fn to_api(r: &ScalingRules) -> HPAScalingRules {
        HPAScalingRules {
            stabilization_window_seconds: r.stabilization_window_seconds,
            select_policy: Some(r.select_policy.as_str().to_owned()),
            policies: Some(
                r.policies
                    .iter()
                    .map(|p| HPAScalingPolicy {
                        type_: match &p.type_ {
                            PolicyType::Pods => "Pods".into(),
                            PolicyType::Percent => "Percent".into(),
                            PolicyType::Other(s) => s.clone(),
                        },
                        value: p.value,
                        period_seconds: p.period_seconds,
                    })
                    .collect(),
            ),
            tolerance: r.tolerance.clone(),
        }
    }

    fn now() -> Timestamp {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }

    /// Upstream test helper `generateEventsUniformDistribution`: events spread over the
    /// last `period` seconds, each in the middle of its segment; the offset is truncated to
    /// whole seconds as upstream's `time.Duration(float)` conversion does.
    pub(crate) fn events_uniform(
        raw: &[i32],
        period: i32,
        now: Timestamp,
    ) -> Vec<TimestampedScaleEvent> {
        let seg = f64::from(period) / raw.len() as f64;
        raw.iter()
            .enumerate()
            .map(|(i, &change)| {
                let boundary = (f64::from(period) - seg * (i as f64 + 1.0) + seg / 2.0) as i64;
                TimestampedScaleEvent {
                    replica_change: change,
                    timestamp: now - SignedDuration::from_secs(boundary),
                    outdated: false,
                }
            })
            .collect()
    }

    #[test]
    fn defaults_match_api_defaulting() {
        let up = generate_scale_up_rules(None);
        assert_eq!(up.stabilization_window_seconds, Some(0));
        assert_eq!(up.select_policy, SelectPolicy::Max);
        assert_eq!(up.policies, vec![pods(4, 15), percent(100, 15)]);
        let down = generate_scale_down_rules(None);
        assert_eq!(down.stabilization_window_seconds, None);
        assert_eq!(down.policies, vec![percent(100, 15)]);
        // Field-by-field overlay.
        let user = HPAScalingRules {
            select_policy: Some("Min".into()),
            ..Default::default()
        };
        let down = generate_scale_down_rules(Some(&user));
        assert_eq!(down.select_policy, SelectPolicy::Min);
        assert_eq!(down.policies, vec![percent(100, 15)]);
        // An explicit empty list replaces the defaults.
        let user = HPAScalingRules {
            policies: Some(vec![]),
            ..Default::default()
        };
        assert!(generate_scale_up_rules(Some(&user)).policies.is_empty());
        // The flag fills the scale-down window; the user's value wins.
        let b = HorizontalPodAutoscalerBehavior::default();
        let eff = EffectiveBehavior::new(&b, SignedDuration::from_mins(5));
        assert_eq!(
            (eff.scale_up_window_seconds, eff.scale_down_window_seconds),
            (0, 300)
        );
        let b = HorizontalPodAutoscalerBehavior {
            scale_down: Some(HPAScalingRules {
                stabilization_window_seconds: Some(60),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            EffectiveBehavior::new(&b, SignedDuration::from_mins(5)).scale_down_window_seconds,
            60
        );
        assert_eq!(
            EffectiveBehavior::new(
                &HorizontalPodAutoscalerBehavior::default(),
                SignedDuration::from_millis(1500)
            )
            .scale_down_window_seconds,
            1
        );
    }

    /// Upstream TestCalculateScaleUpLimitWithScalingRules.
    #[test]
    fn scale_up_limit_min_policy() {
        let rules = ScalingRules {
            stabilization_window_seconds: Some(300),
            select_policy: SelectPolicy::Min,
            policies: vec![pods(2, 60), percent(50, 60)],
            tolerance: None,
        };
        assert_eq!(
            calculate_scale_up_limit_with_scaling_rules(1, &[], &[], &rules, now()),
            2
        );
    }

    /// Upstream TestCalculateScaleDownLimitWithBehaviors.
    #[test]
    fn scale_down_limit_min_policy() {
        let rules = ScalingRules {
            stabilization_window_seconds: Some(300),
            select_policy: SelectPolicy::Min,
            policies: vec![pods(2, 60), percent(50, 60)],
            tolerance: None,
        };
        assert_eq!(
            calculate_scale_down_limit_with_behaviors(5, &[], &[], &rules, now()),
            3
        );
    }

    #[test]
    fn disabled_and_unknown_policy_types() {
        let mut rules = generate_scaling_rules(4, 15, 100, 15, 0);
        rules.select_policy = SelectPolicy::Disabled;
        assert_eq!(
            calculate_scale_up_limit_with_scaling_rules(10, &[], &[], &rules, now()),
            10
        );
        assert_eq!(
            calculate_scale_down_limit_with_behaviors(10, &[], &[], &rules, now()),
            10
        );
        // An unknown type re-uses the previous proposal (0 at first).
        let rules = ScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: SelectPolicy::Max,
            policies: vec![ScalingPolicy {
                type_: PolicyType::Other("Bogus".into()),
                value: 9,
                period_seconds: 15,
            }],
            tolerance: None,
        };
        assert_eq!(
            calculate_scale_up_limit_with_scaling_rules(10, &[], &[], &rules, now()),
            0
        );
        assert_eq!(SelectPolicy::from_api("whatever"), SelectPolicy::Max);
    }

    /// Upstream TestScalingWithRules (expected replicas and conditions from upstream's table).
    #[test]
    fn scaling_with_rules_table() {
        #[derive(Default)]
        struct Case {
            name: &'static str,
            up_events: Vec<TimestampedScaleEvent>,
            down_events: Vec<TimestampedScaleEvent>,
            min: i32,
            max: i32,
            up: Option<ScalingRules>,
            down: Option<ScalingRules>,
            current: i32,
            desired: i32,
            want: i32,
            want_reason: &'static str,
        }
        let n = now();
        let g = generate_scaling_rules;
        let e = |raw: &[i32]| events_uniform(raw, 120, n);
        let cases = vec![
            Case {
                name: "prenormalized desired replicas within range",
                min: 3,
                max: 8,
                current: 5,
                desired: 7,
                want: 7,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "prenormalized desired replicas < minReplicas",
                min: 2,
                max: 8,
                current: 3,
                desired: 1,
                want: 2,
                want_reason: "TooFewReplicas",
                ..Case::default()
            },
            Case {
                name: "prenormalized desired replicas within range when minReplicas is 0",
                min: 0,
                max: 10,
                current: 1,
                desired: 0,
                want: 0,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "maxReplicas is the limit because maxReplicas < scaleUpLimit",
                min: 1,
                max: 10,
                current: 20,
                desired: 1000,
                want: 10,
                want_reason: "TooManyReplicas",
                ..Case::default()
            },
            Case {
                name: "desired replica count is more than the maximum replica count",
                min: 100,
                max: 150,
                current: 100,
                desired: 1000,
                want: 150,
                want_reason: "TooManyReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
                min: 1,
                max: 2000,
                up: Some(g(0, 0, 1, 60, 0)),
                current: 3,
                desired: 1000,
                want: 4,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies",
                min: 3,
                max: 2000,
                down: Some(g(20, 60, 0, 0, 0)),
                current: 1000,
                desired: 3,
                want: 980,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
            Case {
                name: "scaleUp with default behavior",
                min: 1,
                max: 1000,
                current: 10,
                desired: 50,
                want: 20,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleUp with pods policy larger than percent policy",
                min: 1,
                max: 1000,
                up: Some(g(100, 60, 100, 60, 0)),
                current: 10,
                desired: 500,
                want: 110,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleUp with percent policy larger than pods policy",
                min: 1,
                max: 1000,
                up: Some(g(2, 60, 100, 60, 0)),
                current: 10,
                desired: 500,
                want: 20,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleUp with spec MaxReplicas limitation with large pod policy",
                min: 1,
                max: 1000,
                up: Some(g(100, 60, 0, 0, 0)),
                current: 10,
                desired: 50,
                want: 50,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "scaleUp with spec MaxReplicas limitation with large percent policy",
                min: 1,
                max: 1000,
                up: Some(g(10000, 60, 0, 0, 0)),
                current: 10,
                desired: 50,
                want: 50,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "scaleUp with pod policy limitation",
                min: 1,
                max: 1000,
                up: Some(g(30, 60, 0, 0, 0)),
                current: 10,
                desired: 50,
                want: 40,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleUp with percent policy limitation",
                min: 1,
                max: 1000,
                up: Some(g(0, 0, 200, 60, 0)),
                current: 10,
                desired: 50,
                want: 30,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with percent policy larger than pod policy",
                min: 1,
                max: 1000,
                down: Some(g(20, 60, 1, 60, 300)),
                current: 100,
                desired: 2,
                want: 80,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with pod policy larger than percent policy",
                min: 1,
                max: 1000,
                down: Some(g(2, 60, 1, 60, 300)),
                current: 100,
                desired: 2,
                want: 98,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with spec MinReplicas=nil limitation with large pod policy",
                min: 1,
                max: 1000,
                down: Some(g(100, 60, 0, 0, 300)),
                current: 10,
                desired: 0,
                want: 1,
                want_reason: "TooFewReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleDown with spec MinReplicas limitation with large pod policy",
                min: 1,
                max: 1000,
                down: Some(g(100, 60, 0, 0, 300)),
                current: 10,
                desired: 0,
                want: 1,
                want_reason: "TooFewReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleDown with spec MinReplicas limitation with large percent policy",
                min: 5,
                max: 1000,
                down: Some(g(0, 0, 100, 60, 300)),
                current: 10,
                desired: 2,
                want: 5,
                want_reason: "TooFewReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleDown with pod policy limitation",
                min: 1,
                max: 1000,
                down: Some(g(5, 60, 0, 0, 300)),
                current: 10,
                desired: 2,
                want: 5,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with percent policy limitation",
                min: 1,
                max: 1000,
                down: Some(g(0, 0, 50, 60, 300)),
                current: 10,
                desired: 5,
                want: 5,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "scaleUp with spec MaxReplicas limitation with large pod policy and events",
                min: 1,
                max: 200,
                up: Some(g(300, 60, 0, 0, 0)),
                up_events: e(&[1, 5, 9]),
                current: 100,
                desired: 500,
                want: 200,
                want_reason: "TooManyReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleUp with spec MaxReplicas limitation with large percent policy and events",
                min: 1,
                max: 200,
                up: Some(g(0, 0, 10000, 60, 0)),
                up_events: e(&[1, 5, 9]),
                current: 100,
                desired: 500,
                want: 200,
                want_reason: "TooManyReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
                min: 1,
                max: 1000,
                up: Some(g(5, 120, 0, 0, 0)),
                up_events: e(&[1, 5, 9]),
                current: 100,
                desired: 500,
                want: 100,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleUp with pod policy and previous scale up events",
                min: 1,
                max: 1000,
                up: Some(g(150, 120, 0, 0, 0)),
                up_events: e(&[1, 5, 9]),
                current: 100,
                desired: 500,
                want: 235,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleUp with percent policy and previous scale up events",
                min: 1,
                max: 1000,
                up: Some(g(0, 0, 200, 120, 0)),
                up_events: e(&[1, 5, 9]),
                current: 100,
                desired: 500,
                want: 255,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "check 'outdated' flag for events for one behavior for up",
                min: 1,
                max: 1000,
                up: Some(g(1000, 60, 0, 0, 0)),
                up_events: e(&[8, 12, 9, 11]),
                current: 100,
                desired: 200,
                want: 200,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "check that events were not marked 'outdated' for two different policies in the behavior for up",
                min: 1,
                max: 1000,
                up: Some(g(1000, 120, 100, 60, 0)),
                up_events: e(&[8, 12, 9, 11]),
                current: 100,
                desired: 200,
                want: 200,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "check that events were marked 'outdated' for two different policies in the behavior for up",
                min: 1,
                max: 1000,
                up: Some(g(1000, 30, 100, 60, 0)),
                up_events: e(&[8, 12, 9, 11]),
                current: 100,
                desired: 200,
                want: 200,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "scaleDown with default policy and previous events",
                min: 1,
                max: 1000,
                down_events: e(&[1, 5, 9]),
                current: 10,
                desired: 5,
                want: 5,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
                min: 1,
                max: 1000,
                down: Some(g(115, 120, 0, 0, 300)),
                down_events: e(&[1, 5, 9]),
                current: 100,
                desired: 0,
                want: 1,
                want_reason: "TooFewReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
                min: 5,
                max: 1000,
                down: Some(g(130, 120, 0, 0, 300)),
                down_events: e(&[1, 5, 9]),
                current: 100,
                desired: 0,
                want: 5,
                want_reason: "TooFewReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
                min: 5,
                max: 1000,
                down: Some(g(0, 0, 100, 120, 300)),
                down_events: e(&[1, 5, 9]),
                current: 100,
                desired: 2,
                want: 5,
                want_reason: "TooFewReplicas",
                ..Case::default()
            },
            Case {
                name: "scaleDown with pod policy limitation and previous events",
                min: 1,
                max: 1000,
                down: Some(g(5, 120, 0, 0, 300)),
                down_events: e(&[1, 5, 9]),
                current: 100,
                desired: 2,
                want: 100,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with percent policy limitation and previous events",
                min: 1,
                max: 1000,
                down: Some(g(0, 0, 50, 120, 300)),
                down_events: e(&[2, 4, 6]),
                current: 100,
                desired: 0,
                want: 56,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with previous events preventing further scale down",
                min: 1,
                max: 1000,
                down: Some(g(0, 0, 10, 120, 300)),
                down_events: e(&[10, 10, 10]),
                current: 100,
                desired: 0,
                want: 100,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with with previous events still allowing more scale down",
                min: 1,
                max: 1000,
                down: Some(g(0, 0, 1000, 120, 300)),
                down_events: e(&[10, 10, 10]),
                current: 10,
                desired: 5,
                want: 5,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "check 'outdated' flag for events for one behavior for down",
                min: 1,
                max: 1000,
                down: Some(g(1000, 60, 0, 0, 300)),
                down_events: e(&[8, 12, 9, 11]),
                current: 100,
                desired: 5,
                want: 5,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "check that events were not marked 'outdated' for two different policies in the behavior for down",
                min: 1,
                max: 1000,
                down: Some(g(1000, 120, 100, 60, 300)),
                down_events: e(&[8, 12, 9, 11]),
                current: 100,
                desired: 5,
                want: 5,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            Case {
                name: "check that events were marked 'outdated' for two different policies in the behavior for down",
                min: 1,
                max: 1000,
                down: Some(g(1000, 30, 100, 60, 300)),
                down_events: e(&[8, 12, 9, 11]),
                current: 100,
                desired: 5,
                want: 5,
                want_reason: "DesiredWithinRange",
                ..Case::default()
            },
            // Newer upstream cases with both event lists.
            Case {
                name: "scaleUp with percent policy and previous scale up and down events",
                min: 1,
                max: 1000,
                up: Some(g(0, 0, 300, 300, 0)),
                up_events: e(&[4]),
                down_events: e(&[2]),
                current: 6,
                desired: 24,
                want: 16,
                want_reason: "ScaleUpLimit",
                ..Case::default()
            },
            Case {
                name: "scaleDown with percent policy and previous scale up and down events",
                min: 1,
                max: 1000,
                down: Some(g(0, 0, 50, 180, 0)),
                up_events: e(&[2]),
                down_events: e(&[4]),
                current: 10,
                desired: 1,
                want: 6,
                want_reason: "ScaleDownLimit",
                ..Case::default()
            },
        ];

        for k in cases {
            let behavior = HorizontalPodAutoscalerBehavior {
                scale_up: k.up.as_ref().map(to_api),
                scale_down: k.down.as_ref().map(to_api),
            };
            let eff = EffectiveBehavior::new(&behavior, SignedDuration::from_mins(5));
            let got = convert_desired_replicas_with_behavior_rate(
                k.current,
                k.desired,
                k.min,
                k.max,
                &eff,
                &k.up_events,
                &k.down_events,
                n,
            );
            assert_eq!(got.replicas, k.want, "{}", k.name);
            assert_eq!(got.reason.as_str(), k.want_reason, "{}", k.name);
        }
    }

    /// Scale-up and scale-down events both move the period start (newer upstream passes
    /// both lists). Expected values derived from spec §5.2 arithmetic.
    #[test]
    fn both_event_lists_shift_the_period_start() {
        let n = now();
        let up = events_uniform(&[1, 5, 9], 120, n); // +15 in the last 120s
        let down = events_uniform(&[2, 4, 6], 120, n); // -12 in the last 120s
        // Pods 150 per 120s: start = 100 - 15 + 12 = 97, limit 247.
        let rules = generate_scaling_rules(150, 120, 0, 0, 0);
        assert_eq!(
            calculate_scale_up_limit_with_scaling_rules(100, &up, &down, &rules, n),
            247
        );
        // Percent 50 per 120s down: start 97, floor(97 * 0.5) = 48.
        let rules = generate_scaling_rules(0, 0, 50, 120, 0);
        assert_eq!(
            calculate_scale_down_limit_with_behaviors(100, &up, &down, &rules, n),
            48
        );
    }
}
