#!/usr/bin/env bash
# The one command that runs every check: formatting, lints, and all tests of the workspace.
# CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --all --check"
cargo fmt --all --check

echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test --workspace"
cargo test --workspace

echo "== hpactl replay test-fixtures/scenarios (--scale-target-cache: the default, true)"
cargo run -q -p hpactl -- replay test-fixtures/scenarios

echo "== hpactl replay --scale-target-cache=false test-fixtures/scenarios"
cargo run -q -p hpactl -- replay --scale-target-cache=false test-fixtures/scenarios
