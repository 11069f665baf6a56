use super::*;

fn now() -> Timestamp {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

fn ago(minutes: i64) -> Timestamp {
    minus(now(), SignedDuration::from_mins(minutes))
}

fn rec(r: i32, minutes_ago: i64) -> TimestampedRecommendation {
    TimestampedRecommendation {
        recommendation: r,
        timestamp: ago(minutes_ago),
    }
}

/// Upstream TestNormalizeDesiredReplicas (window 5m).
#[test]
fn legacy_stabilization_table() {
    struct Case {
        name: &'static str,
        log: Vec<TimestampedRecommendation>,
        prenormalized: i32,
        want: i32,
        want_log_len: usize,
    }
    let cases = vec![
        Case {
            name: "empty log",
            log: vec![],
            prenormalized: 5,
            want: 5,
            want_log_len: 1,
        },
        Case {
            name: "stabilize",
            log: vec![rec(4, 2), rec(5, 1)],
            prenormalized: 3,
            want: 5,
            want_log_len: 3,
        },
        Case {
            name: "no stabilize",
            log: vec![rec(1, 2), rec(2, 1)],
            prenormalized: 3,
            want: 3,
            want_log_len: 3,
        },
        Case {
            name: "no stabilize - old recommendations",
            log: vec![rec(10, 10), rec(9, 9)],
            prenormalized: 3,
            want: 3,
            want_log_len: 2,
        },
        Case {
            name: "stabilize - old recommendations",
            log: vec![rec(10, 10), rec(4, 1), rec(5, 2), rec(9, 9)],
            prenormalized: 3,
            want: 5,
            want_log_len: 4,
        },
    ];
    for mut c in cases {
        let got = stabilize_recommendation(
            &mut c.log,
            c.prenormalized,
            SignedDuration::from_mins(5),
            now(),
        );
        assert_eq!(got, c.want, "{}", c.name);
        assert_eq!(c.log.len(), c.want_log_len, "{}", c.name);
    }
}

#[test]
fn legacy_reuses_last_old_slot() {
    let mut log = vec![rec(10, 10), rec(4, 1), rec(9, 9)];
    stabilize_recommendation(&mut log, 3, SignedDuration::from_mins(5), now());
    assert_eq!(
        log.iter().map(|r| r.recommendation).collect::<Vec<_>>(),
        [10, 4, 3]
    );
    assert_eq!(log[2].timestamp, now());
}

/// Upstream TestNormalizeDesiredReplicasWithBehavior.
#[test]
fn behavior_stabilization_table() {
    struct Case {
        name: &'static str,
        recs: Vec<TimestampedRecommendation>,
        current: i32,
        desired: i32,
        want: i32,
        want_recs: Vec<i32>,
        up: i32,
        down: i32,
    }
    let cases = vec![
        Case {
            name: "empty recommendations for scaling down",
            recs: vec![],
            current: 100,
            desired: 5,
            want: 5,
            want_recs: vec![5],
            up: 0,
            down: 0,
        },
        Case {
            name: "simple scale down stabilization",
            recs: vec![rec(4, 2), rec(5, 1)],
            current: 100,
            desired: 3,
            want: 5,
            want_recs: vec![4, 5, 3],
            up: 0,
            down: 180,
        },
        Case {
            name: "simple scale up stabilization",
            recs: vec![rec(4, 2), rec(5, 1)],
            current: 1,
            desired: 7,
            want: 4,
            want_recs: vec![4, 5, 7],
            up: 300,
            down: 0,
        },
        Case {
            name: "no scale down stabilization",
            recs: vec![rec(1, 2), rec(2, 1)],
            current: 100,
            desired: 3,
            want: 3,
            want_recs: vec![1, 2, 3],
            up: 300,
            down: 0,
        },
        Case {
            name: "no scale up stabilization",
            recs: vec![rec(4, 2), rec(5, 1)],
            current: 1,
            desired: 3,
            want: 3,
            want_recs: vec![4, 5, 3],
            up: 0,
            down: 300,
        },
        Case {
            name: "no scale down stabilization, reuse recommendation element",
            recs: vec![rec(10, 10), rec(9, 9)],
            current: 100,
            desired: 3,
            want: 3,
            want_recs: vec![10, 3],
            up: 0,
            down: 0,
        },
        Case {
            name: "no scale up stabilization, reuse recommendation element",
            recs: vec![rec(10, 10), rec(9, 9)],
            current: 1,
            desired: 100,
            want: 100,
            want_recs: vec![10, 100],
            up: 0,
            down: 0,
        },
        Case {
            name: "scale down stabilization, reuse one of obsolete recommendation element",
            recs: vec![rec(10, 10), rec(4, 1), rec(5, 2), rec(9, 9)],
            current: 100,
            desired: 3,
            want: 5,
            want_recs: vec![10, 4, 5, 3],
            up: 0,
            down: 180,
        },
        Case {
            name: "scale up stabilization, reuse one of obsolete recommendation element",
            recs: vec![rec(10, 100), rec(6, 1), rec(5, 2), rec(9, 3)],
            current: 1,
            desired: 100,
            want: 5,
            want_recs: vec![100, 6, 5, 9],
            up: 300,
            down: 0,
        },
    ];
    // Newer upstream cases (no expected list: only the stabilized value is checked).
    let newer = [
        (
            "scale up and down stabilization, do not scale up when prenormalized rec goes down",
            vec![rec(2, 100), rec(3, 3)],
            2,
            1,
        ),
        (
            "scale up and down stabilization, do not scale down when prenormalized rec goes up",
            vec![rec(2, 100), rec(1, 3)],
            2,
            3,
        ),
    ];
    for (name, mut recs, current, desired) in newer {
        let (got, _) =
            stabilize_recommendation_with_behaviors(&mut recs, current, desired, 300, 300, now());
        assert_eq!(got, 2, "{name}");
    }
    for mut c in cases {
        let (got, _) = stabilize_recommendation_with_behaviors(
            &mut c.recs,
            c.current,
            c.desired,
            c.up,
            c.down,
            now(),
        );
        assert_eq!(got, c.want, "{}", c.name);
        assert_eq!(
            c.recs.iter().map(|r| r.recommendation).collect::<Vec<_>>(),
            c.want_recs,
            "{}",
            c.name
        );
    }
}

#[test]
fn behavior_reason_depends_on_direction_only() {
    let mut log = vec![];
    assert_eq!(
        stabilize_recommendation_with_behaviors(&mut log, 3, 3, 0, 300, now()).1,
        StabilizationReason::ScaleUpStabilized
    );
    assert_eq!(
        stabilize_recommendation_with_behaviors(&mut log, 3, 2, 0, 300, now()).1,
        StabilizationReason::ScaleDownStabilized
    );
}

#[test]
fn initial_recommendation_only_when_empty() {
    let mut log = vec![];
    record_initial_recommendation(&mut log, 4, now());
    record_initial_recommendation(&mut log, 9, now());
    assert_eq!(
        log,
        vec![TimestampedRecommendation {
            recommendation: 4,
            timestamp: now()
        }]
    );
}
