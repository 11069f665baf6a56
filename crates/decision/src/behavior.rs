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
        type R = Option<ScalingRules>;
        struct Case {
            name: &'static str,
            up_events: Vec<TimestampedScaleEvent>,
            down_events: Vec<TimestampedScaleEvent>,
            min: i32,
            max: i32,
            up: R,
            down: R,
            current: i32,
            desired: i32,
            want: i32,
            want_reason: &'static str,
        }
        let n = now();
        let g = generate_scaling_rules;
        let e = |raw: &[i32]| events_uniform(raw, 120, n);
        let c = |name, min, max, up: R, down: R, current, desired, want, want_reason| Case {
            name,
            up_events: vec![],
            down_events: vec![],
            min,
            max,
            up,
            down,
            current,
            desired,
            want,
            want_reason,
        };
        let mut cases = vec![
            c(
                "prenormalized desired replicas within range",
                3,
                8,
                None,
                None,
                5,
                7,
                7,
                "DesiredWithinRange",
            ),
            c(
                "prenormalized desired replicas < minReplicas",
                2,
                8,
                None,
                None,
                3,
                1,
                2,
                "TooFewReplicas",
            ),
            c(
                "prenormalized desired replicas within range when minReplicas is 0",
                0,
                10,
                None,
                None,
                1,
                0,
                0,
                "DesiredWithinRange",
            ),
            c(
                "maxReplicas is the limit because maxReplicas < scaleUpLimit",
                1,
                10,
                None,
                None,
                20,
                1000,
                10,
                "TooManyReplicas",
            ),
            c(
                "desired replica count is more than the maximum replica count",
                100,
                150,
                None,
                None,
                100,
                1000,
                150,
                "TooManyReplicas",
            ),
            c(
                "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
                1,
                2000,
                Some(g(0, 0, 1, 60, 0)),
                None,
                3,
                1000,
                4,
                "ScaleUpLimit",
            ),
            c(
                "scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies",
                3,
                2000,
                None,
                Some(g(20, 60, 0, 0, 0)),
                1000,
                3,
                980,
                "ScaleDownLimit",
            ),
            c(
                "scaleUp with default behavior",
                1,
                1000,
                None,
                None,
                10,
                50,
                20,
                "ScaleUpLimit",
            ),
            c(
                "scaleUp with pods policy larger than percent policy",
                1,
                1000,
                Some(g(100, 60, 100, 60, 0)),
                None,
                10,
                500,
                110,
                "ScaleUpLimit",
            ),
            c(
                "scaleUp with percent policy larger than pods policy",
                1,
                1000,
                Some(g(2, 60, 100, 60, 0)),
                None,
                10,
                500,
                20,
                "ScaleUpLimit",
            ),
            c(
                "scaleUp with spec MaxReplicas limitation with large pod policy",
                1,
                1000,
                Some(g(100, 60, 0, 0, 0)),
                None,
                10,
                50,
                50,
                "DesiredWithinRange",
            ),
            c(
                "scaleUp with spec MaxReplicas limitation with large percent policy",
                1,
                1000,
                Some(g(10000, 60, 0, 0, 0)),
                None,
                10,
                50,
                50,
                "DesiredWithinRange",
            ),
            c(
                "scaleUp with pod policy limitation",
                1,
                1000,
                Some(g(30, 60, 0, 0, 0)),
                None,
                10,
                50,
                40,
                "ScaleUpLimit",
            ),
            c(
                "scaleUp with percent policy limitation",
                1,
                1000,
                Some(g(0, 0, 200, 60, 0)),
                None,
                10,
                50,
                30,
                "ScaleUpLimit",
            ),
            c(
                "scaleDown with percent policy larger than pod policy",
                1,
                1000,
                None,
                Some(g(20, 60, 1, 60, 300)),
                100,
                2,
                80,
                "ScaleDownLimit",
            ),
            c(
                "scaleDown with pod policy larger than percent policy",
                1,
                1000,
                None,
                Some(g(2, 60, 1, 60, 300)),
                100,
                2,
                98,
                "ScaleDownLimit",
            ),
            c(
                "scaleDown with spec MinReplicas=nil limitation with large pod policy",
                1,
                1000,
                None,
                Some(g(100, 60, 0, 0, 300)),
                10,
                0,
                1,
                "TooFewReplicas",
            ),
            c(
                "scaleDown with spec MinReplicas limitation with large pod policy",
                1,
                1000,
                None,
                Some(g(100, 60, 0, 0, 300)),
                10,
                0,
                1,
                "TooFewReplicas",
            ),
            c(
                "scaleDown with spec MinReplicas limitation with large percent policy",
                5,
                1000,
                None,
                Some(g(0, 0, 100, 60, 300)),
                10,
                2,
                5,
                "TooFewReplicas",
            ),
            c(
                "scaleDown with pod policy limitation",
                1,
                1000,
                None,
                Some(g(5, 60, 0, 0, 300)),
                10,
                2,
                5,
                "ScaleDownLimit",
            ),
            c(
                "scaleDown with percent policy limitation",
                1,
                1000,
                None,
                Some(g(0, 0, 50, 60, 300)),
                10,
                5,
                5,
                "DesiredWithinRange",
            ),
        ];
        let with_up = |name, raw: &[i32], min, max, up: R, current, desired, want, reason| {
            let mut k = c(name, min, max, up, None, current, desired, want, reason);
            k.up_events = e(raw);
            k
        };
        let more_up = vec![
            with_up(
                "scaleUp with spec MaxReplicas limitation with large pod policy and events",
                &[1, 5, 9],
                1,
                200,
                Some(g(300, 60, 0, 0, 0)),
                100,
                500,
                200,
                "TooManyReplicas",
            ),
            with_up(
                "scaleUp with spec MaxReplicas limitation with large percent policy and events",
                &[1, 5, 9],
                1,
                200,
                Some(g(0, 0, 10000, 60, 0)),
                100,
                500,
                200,
                "TooManyReplicas",
            ),
            with_up(
                "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
                &[1, 5, 9],
                1,
                1000,
                Some(g(5, 120, 0, 0, 0)),
                100,
                500,
                100,
                "ScaleUpLimit",
            ),
            with_up(
                "scaleUp with pod policy and previous scale up events",
                &[1, 5, 9],
                1,
                1000,
                Some(g(150, 120, 0, 0, 0)),
                100,
                500,
                235,
                "ScaleUpLimit",
            ),
            with_up(
                "scaleUp with percent policy and previous scale up events",
                &[1, 5, 9],
                1,
                1000,
                Some(g(0, 0, 200, 120, 0)),
                100,
                500,
                255,
                "ScaleUpLimit",
            ),
            with_up(
                "check 'outdated' flag for events for one behavior for up",
                &[8, 12, 9, 11],
                1,
                1000,
                Some(g(1000, 60, 0, 0, 0)),
                100,
                200,
                200,
                "DesiredWithinRange",
            ),
            with_up(
                "check that events were not marked 'outdated' for two different policies in the behavior for up",
                &[8, 12, 9, 11],
                1,
                1000,
                Some(g(1000, 120, 100, 60, 0)),
                100,
                200,
                200,
                "DesiredWithinRange",
            ),
            with_up(
                "check that events were marked 'outdated' for two different policies in the behavior for up",
                &[8, 12, 9, 11],
                1,
                1000,
                Some(g(1000, 30, 100, 60, 0)),
                100,
                200,
                200,
                "DesiredWithinRange",
            ),
        ];
        let with_down = |name, raw: &[i32], min, max, down: R, current, desired, want, reason| {
            let mut k = c(name, min, max, None, down, current, desired, want, reason);
            k.down_events = e(raw);
            k
        };
        let more_down = vec![
            with_down(
                "scaleDown with default policy and previous events",
                &[1, 5, 9],
                1,
                1000,
                None,
                10,
                5,
                5,
                "DesiredWithinRange",
            ),
            with_down(
                "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
                &[1, 5, 9],
                1,
                1000,
                Some(g(115, 120, 0, 0, 300)),
                100,
                0,
                1,
                "TooFewReplicas",
            ),
            with_down(
                "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
                &[1, 5, 9],
                5,
                1000,
                Some(g(130, 120, 0, 0, 300)),
                100,
                0,
                5,
                "TooFewReplicas",
            ),
            with_down(
                "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
                &[1, 5, 9],
                5,
                1000,
                Some(g(0, 0, 100, 120, 300)),
                100,
                2,
                5,
                "TooFewReplicas",
            ),
            with_down(
                "scaleDown with pod policy limitation and previous events",
                &[1, 5, 9],
                1,
                1000,
                Some(g(5, 120, 0, 0, 300)),
                100,
                2,
                100,
                "ScaleDownLimit",
            ),
            with_down(
                "scaleDown with percent policy limitation and previous events",
                &[2, 4, 6],
                1,
                1000,
                Some(g(0, 0, 50, 120, 300)),
                100,
                0,
                56,
                "ScaleDownLimit",
            ),
            with_down(
                "scaleDown with previous events preventing further scale down",
                &[10, 10, 10],
                1,
                1000,
                Some(g(0, 0, 10, 120, 300)),
                100,
                0,
                100,
                "ScaleDownLimit",
            ),
            with_down(
                "scaleDown with with previous events still allowing more scale down",
                &[10, 10, 10],
                1,
                1000,
                Some(g(0, 0, 1000, 120, 300)),
                10,
                5,
                5,
                "DesiredWithinRange",
            ),
            with_down(
                "check 'outdated' flag for events for one behavior for down",
                &[8, 12, 9, 11],
                1,
                1000,
                Some(g(1000, 60, 0, 0, 300)),
                100,
                5,
                5,
                "DesiredWithinRange",
            ),
            with_down(
                "check that events were not marked 'outdated' for two different policies in the behavior for down",
                &[8, 12, 9, 11],
                1,
                1000,
                Some(g(1000, 120, 100, 60, 300)),
                100,
                5,
                5,
                "DesiredWithinRange",
            ),
            with_down(
                "check that events were marked 'outdated' for two different policies in the behavior for down",
                &[8, 12, 9, 11],
                1,
                1000,
                Some(g(1000, 30, 100, 60, 300)),
                100,
                5,
                5,
                "DesiredWithinRange",
            ),
        ];
        cases.extend(more_up);
        cases.extend(more_down);
        // Newer upstream cases with both event lists.
        let mut k = c(
            "scaleUp with percent policy and previous scale up and down events",
            1,
            1000,
            Some(g(0, 0, 300, 300, 0)),
            None,
            6,
            24,
            16,
            "ScaleUpLimit",
        );
        k.up_events = e(&[4]);
        k.down_events = e(&[2]);
        cases.push(k);
        let mut k = c(
            "scaleDown with percent policy and previous scale up and down events",
            1,
            1000,
            None,
            Some(g(0, 0, 50, 180, 0)),
            10,
            1,
            6,
            "ScaleDownLimit",
        );
        k.up_events = e(&[2]);
        k.down_events = e(&[4]);
        cases.push(k);

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
