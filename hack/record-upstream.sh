#!/usr/bin/env bash
# hack/record-upstream.sh: scenarios recorded from upstream's kube-controller-manager.
#
#   hack/record-upstream.sh VERSION OUT_DIR [SEED [HPAS [DURATION]]]
#
# Brings up a cluster of VERSION (hack/kube.sh build VERSION first; hpactl cluster up), runs
# kube-controller-manager of that version as its only HPA controller (--v=4, with the flags the
# drive's plans are written for), records HPAS namespaces with `hpactl record` (one sample a
# second, the reconciles placed from KCM's log) while `hpactl drive --seed SEED` plays a
# workload into them for DURATION, then takes the cluster down and writes one scenario per
# HPA to OUT_DIR (kcm-VERSION-seedSEED-drive-NNN). The expectations are what KCM wrote; nothing
# is edited. Defaults: SEED 1, HPAS 32, DURATION 5m. With RECORD_KEEP_LOG=FILE, KCM's log is
# copied to FILE and with RECORD_SAMPLES=DIR the samples are kept in DIR (to study a replay
# that differs, and to build the scenarios again: hpactl record --from-samples). docs/recording.md says how it works.
set -euo pipefail
cd "$(dirname "$0")/.."

[[ $# -ge 2 ]] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
version=${1#v}
out=$2
seed=${3:-1}
hpas=${4:-32}
duration=${5:-5m}

cargo build -q -p hpactl
hpactl=${CARGO_TARGET_DIR:-target}/debug/hpactl
hack/kube.sh build "$version"

dir=$(mktemp -d "${TMPDIR:-/tmp}/record-upstream-$version.XXXXXX")
cleanup() {
    if [[ -n ${RECORD_KEEP_LOG:-} ]]; then
        cp "$dir/logs/kube-controller-manager.log" "$RECORD_KEEP_LOG" 2>/dev/null || true
    fi
    "$hpactl" cluster down --dir "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

"$hpactl" cluster up --kube-version "$version" --dir "$dir"
mapfile -t flags < <("$hpactl" drive --print-flags)
"$hpactl" cluster kcm --dir "$dir" -- "${flags[@]}" --v=4
log=$dir/logs/kube-controller-manager.log

namespaces=()
for ((i = 0; i < hpas; i++)); do namespaces+=(-n "$(printf 'drive-%03d' "$i")"); done
record_flags=()
for f in "${flags[@]}"; do record_flags+=(--flag "${f#--}"); done

# Recording starts first, so that it sees every HPA before KCM's first reconcile of it, and
# ends a little after the drive.
mkdir -p "$out"
"$hpactl" record --kubeconfig "$dir/admin.kubeconfig" "${namespaces[@]}" \
    --duration "$duration" --interval 1s "${record_flags[@]}" \
    --controller-log "$log" ${RECORD_SAMPLES:+--samples "$RECORD_SAMPLES"} --name "kcm-$version-seed$seed" -o "$out" &
record_pid=$!
sleep 2
# The drive goes on for a minute after the recording ends: what it does when it stops (disarming
# the metrics faults at once, whatever KCM is doing) is not recorded.
case $duration in
*h) secs=$((${duration%h} * 3600)) ;;
*m) secs=$((${duration%m} * 60)) ;;
*s) secs=${duration%s} ;;
*) echo "record-upstream: DURATION must be a whole number of s, m or h: $duration" >&2; exit 2 ;;
esac
"$hpactl" drive --dir "$dir" --seed "$seed" --hpas "$hpas" --duration "$((secs + 60))s" \
    --controller-log "$log"
wait "$record_pid"
echo "record-upstream: $hpas scenarios of kube-controller-manager $version in $out"
