#!/usr/bin/env bash
# The one command that runs every check: formatting, lints, docs, and all tests of the workspace.
# CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --all --check"
cargo fmt --all --check

echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "== hpa-decision stays pure (no HTTP client, async runtime or metrics registry)"
decision_tree=$(cargo tree -p hpa-decision -e normal --prefix none)
forbidden=$(awk '{print $1}' <<<"$decision_tree" | sort -u |
    grep -E '^(tokio|hyper|kube|http|reqwest|prometheus)(-.*)?$' || true)
if [[ -n "$forbidden" ]]; then
    echo "hpa-decision must not depend on an HTTP client, async runtime or prometheus;" >&2
    echo "cargo tree -p hpa-decision -e normal contains:" >&2
    sed 's/^/  /' <<<"$forbidden" >&2
    exit 1
fi

echo "== cargo doc --workspace --no-deps (public docs link only public items)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

echo "== cargo test --workspace"
cargo test --workspace

# `cargo test` above replays every scenario in-process with the scale-target cache on and
# off (crates/fixtures/tests/scenarios.rs); this runs them once more through the CLI.
echo "== hpactl replay test-fixtures/scenarios (--scale-target-cache: the default, true)"
cargo run -q -p hpactl -- replay test-fixtures/scenarios

# The real control plane: upstream's kube-apiserver, etcd and kube-controller-manager, built from
# upstream's Go modules by hack/kube.sh (cached outside the repository; a built version is reused),
# for each version in KUBE_VERSIONS (comma-separated; default 1.37.2; the tested ones are
# `hack/kube.sh versions`), and helm for the chart's tests (hack/helm.sh). The tests bring up their
# own clusters (cmd/hpactl/tests/real_cluster*.rs).
echo "== real-cluster tests (KUBE_VERSIONS=${KUBE_VERSIONS:=1.37.2})"
if ! command -v go >/dev/null 2>&1; then
    echo "SKIPPED: the real-cluster tests: Go is not installed, so upstream's binaries cannot be built (hack/kube.sh)"
else
    hack/tests/kube_sh.sh
    IFS=, read -r -a kube_versions <<<"$KUBE_VERSIONS"
    started=$SECONDS
    hack/kube.sh build "${kube_versions[@]}"
    # helm, for the chart's tests (cmd/hpactl/tests/real_cluster_chart.rs), also from its Go module.
    hack/helm.sh build
    echo "   binaries ready in $((SECONDS - started)) s"
    started=$SECONDS
    # --workspace: the features the workspace test above built with (no rebuild for -p alone).
    KUBE_VERSIONS=$KUBE_VERSIONS cargo test --workspace --test 'real_cluster*' -- --ignored --test-threads=1
    echo "   real-cluster tests took $((SECONDS - started)) s"
    # The krew manifest, checked by krew itself (built from its Go module), with that kubectl.
    echo "== hack/tests/krew_sh.sh (the kubectl plugin's krew manifest and archive)"
    started=$SECONDS
    hack/tests/krew_sh.sh "$(hack/kube.sh path "${kube_versions[0]}")"
    echo "   took $((SECONDS - started)) s"
fi

# Last, as its `cargo auditable` build of the workspace's crates replaces the plain build's.
echo "== hack/release.sh (the Dockerfile's build: embedded dependency tree, SBOM, checksums)"
started=$SECONDS
hack/tests/release_sh.sh
echo "   took $((SECONDS - started)) s"
