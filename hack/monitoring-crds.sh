#!/usr/bin/env bash
# hack/monitoring-crds.sh: prints the directory holding the Prometheus Operator's own
# CustomResourceDefinitions (monitoring.coreos.com_servicemonitors.yaml, _podmonitors.yaml,
# _prometheusrules.yaml, ...) of PROMETHEUS_OPERATOR_VERSION, from its Go module
# (github.com/prometheus-operator/prometheus-operator, example/prometheus-operator-crd/), for the
# chart's tests (cmd/hpactl/tests/real_cluster_chart.rs): a real API server then validates the
# chart's ServiceMonitor, PodMonitor and PrometheusRule against the operator's schemas.
#
#   hack/monitoring-crds.sh           download once (into GOMODCACHE, reused after) and print the directory
#   hack/monitoring-crds.sh version   print the version this project tests with
#
# Nothing is copied into the repository.
set -euo pipefail

readonly PROMETHEUS_OPERATOR_VERSION=v0.89.0
readonly MODULE=github.com/prometheus-operator/prometheus-operator

die() {
    echo "hack/monitoring-crds.sh: error: $*" >&2
    exit 1
}

here=${BASH_SOURCE[0]%/*}
[[ $here == "${BASH_SOURCE[0]}" ]] && here=.
# shellcheck source=hack/lib/go-build.sh
source "$here/lib/go-build.sh"

case "${1:-}" in
version) echo "$PROMETHEUS_OPERATOR_VERSION"; exit 0 ;;
"") ;;
*) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

command -v go >/dev/null 2>&1 ||
    die "Go is not installed (no 'go' on PATH); the CRDs come from the Go module $MODULE"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_go "go mod download $MODULE@$PROMETHEUS_OPERATOR_VERSION" "$work/log" \
    env -C "$work" GOFLAGS=-mod=mod go mod download -json "$MODULE@$PROMETHEUS_OPERATOR_VERSION"
dir=$(sed -n 's/.*"Dir": *"\([^"]*\)".*/\1/p' "$work/log" | head -n 1)
crds=$dir/example/prometheus-operator-crd
for kind in servicemonitors podmonitors prometheusrules; do
    [[ -f $crds/monitoring.coreos.com_$kind.yaml ]] ||
        die "$MODULE@$PROMETHEUS_OPERATOR_VERSION has no $crds/monitoring.coreos.com_$kind.yaml"
done
echo "$crds"
