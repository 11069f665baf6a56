//! `spec.behavior`: its API defaults (`SetDefaults_HorizontalPodAutoscalerBehavior`) and the policy rate limits (`calculateScaleUpLimitWithScalingRules`, `calculateScaleDownLimitWithBehaviors`).
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
use crate::goconv::f64_to_i32;
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
    f64_to_i32(d.as_secs_f64())
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
    let combine: (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return (current, Vec::new()),
        SelectPolicy::Min => (i32::MAX, i32::min),
        SelectPolicy::Max => (i32::MIN, i32::max),
    };
    limit_with_policies(
        current,
        up_events,
        down_events,
        rules,
        now,
        combine,
        |start, policy| match policy.type_ {
            PolicyType::Pods => Some(start.wrapping_add(policy.value)),
            PolicyType::Percent => Some(f64_to_i32(
                (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil(),
            )),
            PolicyType::Other(_) => None,
        },
    )
}

/// The loop both directions share: each policy's own limit from the replicas at its period's
/// start (`None` for an unknown type, which keeps the running value, as upstream), combined
/// from `combine.0` with `combine.1`; the first policy giving the combined limit is marked
/// selected.
fn limit_with_policies(
    current: i32,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    rules: &ScalingRules,
    now: Timestamp,
    (mut result, pick): (i32, fn(i32, i32) -> i32),
    own_limit: impl Fn(i32, &ScalingPolicy) -> Option<i32>,
) -> (i32, Vec<PolicyLimit>) {
    let mut limits = Vec::with_capacity(rules.policies.len());
    let mut selected: Option<usize> = None;
    let mut proposed = 0i32;
    for policy in &rules.policies {
        let start = period_start(current, policy.period_seconds, up_events, down_events, now);
        let own = own_limit(start, policy);
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
    let combine: (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return (current, Vec::new()),
        SelectPolicy::Min => (i32::MIN, i32::max),
        SelectPolicy::Max => (i32::MAX, i32::min),
    };
    limit_with_policies(
        current,
        up_events,
        down_events,
        rules,
        now,
        combine,
        |start, policy| match policy.type_ {
            PolicyType::Pods => Some(start.wrapping_sub(policy.value)),
            PolicyType::Percent => Some(f64_to_i32(
                f64::from(start) * (1.0 - f64::from(policy.value) / 100.0),
            )),
            PolicyType::Other(_) => None,
        },
    )
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
pub(crate) mod tests;
