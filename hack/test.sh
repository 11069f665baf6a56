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
