#!/usr/bin/env python3
"""Steady-state coverage of a multi-replica `hpactl bench` run, from the replicas' JSON logs.

Usage: hack/bench-coverage.py LOG [WARM_SECONDS] [PERIOD_SECONDS]

LOG is the `--controller-log` given to `hpactl bench --replicas N` (the replicas write LOG.0 to
LOG.N-1), run with `--logging-format=json --v=4` so that every reconcile is a "Proposing desired
replicas" line. Counted from WARM_SECONDS (default 120) after the first line of any replica to
the last reconcile: reconciles per HPA per PERIOD_SECONDS (default 15), by replica and in all;
the reconcile intervals' p50, p99 and maximum; the longest any HPA went without a reconcile.
"""

import collections
import glob
import json
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    log = sys.argv[1]
    warm = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    period = float(sys.argv[3]) if len(sys.argv) > 3 else 15.0
    files = sorted(glob.glob(log + ".*"))
    if not files:
        print(f"no {log}.N files", file=sys.stderr)
        return 1
    origin = None
    reconciles = {}
    for path in files:
        seen = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                ts = entry.get("ts")
                if not isinstance(ts, (int, float)):
                    continue
                origin = ts if origin is None else min(origin, ts)
                msg = entry.get("msg", "")
                if "Proposing desired replicas" not in msg:
                    continue
                start = msg.find('scaleTarget="')
                if start < 0:
                    continue
                start += len('scaleTarget="')
                seen.append((ts, msg[start : msg.find('"', start)]))
        reconciles[path] = seen
    stamps = [ts for seen in reconciles.values() for ts, _ in seen]
    if origin is None or not stamps:
        print("no reconcile lines (run with --logging-format=json --v=4)", file=sys.stderr)
        return 1
    end = max(stamps)
    low = origin + warm
    span = end - low
    if span <= 0:
        print(f"the run ended within {warm:.0f} s of its start", file=sys.stderr)
        return 1
    by_hpa = collections.defaultdict(list)
    total = 0
    for path, seen in reconciles.items():
        hpas = set()
        count = 0
        for ts, target in seen:
            by_hpa[target].append(ts)
            if ts >= low:
                hpas.add(target)
                count += 1
        total += count
        if hpas:
            per = count / (len(hpas) * span / period)
            print(f"{path}: {len(hpas)} HPAs, {count} reconciles, {per:.3f} per HPA per {period:g} s")
    per = total / (len(by_hpa) * span / period)
    print(
        f"all: {len(by_hpa)} HPAs, {total} reconciles from {warm:g} s to the end ({span:.0f} s), "
        f"{per:.3f} per HPA per {period:g} s"
    )
    gaps = []
    longest = 0.0
    for stamps in by_hpa.values():
        stamps.sort()
        kept = [t for t in stamps if t >= low]
        gaps.extend(b - a for a, b in zip(kept, kept[1:]))
        points = [low] + kept + [end]
        longest = max(longest, max(b - a for a, b in zip(points, points[1:])))
    if gaps:
        gaps.sort()
        at = lambda q: gaps[min(len(gaps) - 1, int(q * len(gaps)))]
        print(f"interval p50 {at(0.5):.2f} s, p99 {at(0.99):.2f} s, max {gaps[-1]:.2f} s")
    print(f"longest an HPA went without a reconcile: {longest:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
