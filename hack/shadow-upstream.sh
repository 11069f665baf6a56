#!/usr/bin/env bash
# hack/shadow-upstream.sh: this controller in shadow mode beside upstream's kube-controller-manager.
#
#   hack/shadow-upstream.sh VERSION [HPAS [DURATION [SEED [OUT.json]]]]
#
# Brings up a cluster of VERSION (hpactl cluster up, with an audit log), runs upstream's
# kube-controller-manager of that version as the active HPA controller and kube-hpa-controller
# --shadow beside it (same flags, the project's RBAC through controller.kubeconfig, the version
# read from the API server), drives HPAS HPAs for DURATION (hpactl drive --seed SEED), then
# reports: KCM's status writes (from the audit log), how shadow mode settled them
# (kube_hpa_controller_shadow_statuses_total: agree, differ, not_compared by reason; those it
# never saw), every comparison (shadow_comparisons_total, shadow_not_compared_total) and the
# differences (/debug/shadow). Prints a table and writes the JSON to OUT.json if given.
# Defaults: HPAS 100, DURATION 30m, SEED 7. Exits 1 when any comparison differed.
# Both controllers get --kube-api-qps=100 --kube-api-burst=200 (SHADOW_KUBE_API_QPS=N sets
# the QPS, burst twice that; 0 keeps client-go's defaults). This controller logs at --v=4, each
# comparison (SHADOW_CONTROLLER_V sets it); SHADOW_KEEP_LOGS=DIR keeps all the logs.
set -euo pipefail
cd "$(dirname "$0")/.."

[[ $# -ge 1 ]] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
version=${1#v}
hpas=${2:-100}
duration=${3:-30m}
seed=${4:-7}
out=${5:-}

cargo build -q -p hpactl -p kube-hpa-controller
bin=${CARGO_TARGET_DIR:-target}/debug
hack/kube.sh build "$version"

dir=$(mktemp -d "${TMPDIR:-/tmp}/shadow-upstream-$version.XXXXXX")
controller_pid=
cleanup() {
    [[ -n $controller_pid ]] && kill "$controller_pid" 2>/dev/null || true
    "$bin/hpactl" cluster down --dir "$dir" >/dev/null 2>&1 || true
    if [[ -n ${SHADOW_KEEP_LOGS:-} ]]; then
        mkdir -p "$SHADOW_KEEP_LOGS"
        cp "$dir"/logs/*.log "$SHADOW_KEEP_LOGS"/ 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

"$bin/hpactl" cluster up --kube-version "$version" --dir "$dir" --audit
mapfile -t flags < <("$bin/hpactl" drive --print-flags)
# Both controllers' API clients without client-go's default limits (QPS 20, burst 30): at 100
# HPAs every 5 s KCM needs more than 20 requests a second (a scale GET and a metrics call per
# reconcile, its writes), and its log shows "client-side throttling" waits that stretch its
# period; this controller, throttled too, would react late to KCM's status writes. Override
# with SHADOW_KUBE_API_QPS (0: the defaults).
qps=${SHADOW_KUBE_API_QPS:-100}
if [[ $qps != 0 ]]; then
    flags+=("--kube-api-qps=$qps" "--kube-api-burst=$((qps * 2))")
fi
# --v=4: the drive reads KCM's reconciles from its log and changes an HPA's inputs only
# between two of them (hpactl drive --controller-log), so that what KCM read is what its
# status says; this controller reconciles at its own times.
"$bin/hpactl" cluster kcm --dir "$dir" -- "${flags[@]}" --v=4

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin/kube-hpa-controller" --kubeconfig "$dir/controller.kubeconfig" --shadow \
    "${flags[@]}" --bind-address=127.0.0.1 --secure-port="$port" --cert-dir="$dir/shadow-certs" \
    --authorization-always-allow-paths=/metrics,/debug/shadow,/healthz,/readyz \
    --v="${SHADOW_CONTROLLER_V:-4}" >"$dir/logs/kube-hpa-controller.log" 2>&1 &
controller_pid=$!

"$bin/hpactl" drive --dir "$dir" --seed "$seed" --hpas "$hpas" --duration "$duration" \
    --controller-log "$dir/logs/kube-controller-manager.log"
# One more sync period and a little, so the last statuses are compared.
sleep 8

curl -sSfk "https://127.0.0.1:$port/metrics" >"$dir/shadow-metrics.txt"
curl -sSfk "https://127.0.0.1:$port/debug/shadow" >"$dir/shadow.json"

python3 - "$dir" "$version" "$hpas" "$duration" "$seed" "$out" "$qps" <<'EOF'
import json, re, sys
d, version, hpas, duration, seed, out, qps = sys.argv[1:]
kcm = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
writes = 0
with open(f"{d}/logs/audit.log") as f:
    for line in f:
        e = json.loads(line)
        ref = e.get("objectRef", {})
        if (e.get("stage") == "ResponseComplete"
                and e.get("verb") in ("update", "patch")
                and ref.get("resource") == "horizontalpodautoscalers"
                and ref.get("subresource") == "status"
                and e.get("user", {}).get("username") == kcm
                and ref.get("namespace", "").startswith("drive-")
                and e.get("responseStatus", {}).get("code") == 200):
            writes += 1
def series(name):
    out = {}
    with open(f"{d}/shadow-metrics.txt") as f:
        for line in f:
            m = re.match(r"kube_hpa_controller_" + name + r"\{([^}]*)\} (\S+)", line)
            if m:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                out[tuple(sorted(labels.items()))] = float(m.group(2))
    return out
statuses = series("shadow_statuses_total")
comparisons = series("shadow_comparisons_total")
not_compared = series("shadow_not_compared_total")
def pick(s, **want):
    return int(sum(v for k, v in s.items() if all(dict(k).get(a) == b for a, b in want.items())))
agree = pick(statuses, result="agree")
differ = pick(statuses, result="differ")
nc = {dict(k).get("reason") or "none": int(v) for k, v in statuses.items() if dict(k).get("result") == "not_compared"}
seen = agree + differ + sum(nc.values())
shadow = json.load(open(f"{d}/shadow.json"))
differences = [
    {"hpa": item["hpa"], "summary": c.get("summary"), "differences": c.get("differences")}
    for item in shadow.get("items", []) for c in item.get("differences", [])
]
report = {
    "version": version, "hpas": int(hpas), "duration": duration, "seed": int(seed),
    "kube_api_qps": int(qps) or None,
    "kcm_status_writes": writes,
    "statuses": {"agree": agree, "differ": differ, "not_compared": nc,
                 "not_seen": max(writes - seen, 0)},
    "agree_share": round(agree / writes, 4) if writes else None,
    "comparisons": {"agree": pick(comparisons, result="agree"), "differ": pick(comparisons, result="differ")},
    "comparisons_not_made": {dict(k)["reason"]: int(v) for k, v in not_compared.items()},
    "differences": differences,
}
if out:
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
print(f"shadow beside kube-controller-manager {version}: {hpas} HPAs, {duration}, seed {seed}, "
      f"kube-api-qps {qps if int(qps) else 'default'}")
print(f"  KCM status writes            {writes}")
print(f"  agreed                       {agree} ({100 * agree / max(writes, 1):.1f}%)")
print(f"  differed                     {differ}")
for r, n in sorted(nc.items()):
    print(f"  not compared ({r:16}) {n}")
print(f"  never seen (replaced first)  {report['statuses']['not_seen']}")
print(f"  comparisons: agree {report['comparisons']['agree']}, differ {report['comparisons']['differ']}, "
      f"not made {sum(report['comparisons_not_made'].values())} {report['comparisons_not_made']}")
for x in differences[:20]:
    print(f"  differs: {x['hpa']}: {x['summary']}")
sys.exit(1 if report["comparisons"]["differ"] else 0)
EOF
