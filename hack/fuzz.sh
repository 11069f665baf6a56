#!/usr/bin/env bash
# hack/fuzz.sh: run this project's fuzz targets (crates/fuzz, wrapped for libFuzzer in fuzz/).
#
#   hack/fuzz.sh [--seconds N] [TARGET...]   fuzz each TARGET (default: all) for N seconds (default 600)
#   hack/fuzz.sh --list                      print the targets
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`; installed here when missing) and a C++
# compiler (libFuzzer is built from source by libfuzzer-sys). cargo-fuzz passes `-Zsanitizer=address`,
# an unstable flag: on a stable toolchain RUSTC_BOOTSTRAP=1 lets rustc accept it (the address
# sanitizer's runtime ships with stable's standard library for x86_64-unknown-linux-gnu). Set
# FUZZ_SANITIZER=none to fuzz without AddressSanitizer.
#
# Each run starts from the target's seeds (crates/fuzz/seeds/TARGET; for `scenario` also every file
# under test-fixtures/scenarios) and its growing corpus, kept outside the repository in
# $FUZZ_CORPUS/TARGET (default ${XDG_CACHE_HOME:-~/.cache}/kube-hpa-controller/fuzz). libFuzzer stops
# on a panic, on an input that runs longer than 10 s (a hang) and on a process above 2 GiB RSS or a
# single allocation above 1 GiB (unbounded allocation). The input that did it is copied to
# crates/fuzz/regressions/TARGET/, where `cargo test -p hpa-fuzz` replays it on every test run:
# commit it with the fix. Exit status: 0 when every target ran its time without a finding.
set -euo pipefail

cd "$(dirname "$0")/.."
readonly ALL_TARGETS="quantity label_selector go_duration scenario resource_metrics custom_metrics external_metrics"
seconds=600
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
        --seconds=*) seconds="${1#--seconds=}"; shift ;;
        --list) tr ' ' '\n' <<<"$ALL_TARGETS"; exit 0 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "hack/fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *)
            if ! tr ' ' '\n' <<<"$ALL_TARGETS" | grep -qx -- "$1"; then
                echo "hack/fuzz.sh: unknown target $1 (one of: $ALL_TARGETS)" >&2
                exit 2
            fi
            targets+=("$1"); shift ;;
    esac
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "hack/fuzz.sh: --seconds wants a positive whole number, got $seconds" >&2; exit 2; }
[ ${#targets[@]} -gt 0 ] || read -r -a targets <<<"$ALL_TARGETS"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "hack/fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1
corpus_root="${FUZZ_CORPUS:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-hpa-controller/fuzz}"
sanitizer="${FUZZ_SANITIZER:-address}"

status=0
for target in "${targets[@]}"; do
    corpus="$corpus_root/$target"
    artifacts="$corpus_root/artifacts/$target"
    mkdir -p "$corpus" "$artifacts" "crates/fuzz/regressions/$target"
    seeds=("crates/fuzz/seeds/$target")
    if [ "$target" = scenario ]; then
        # Named by their path: files in different directories share names.
        mkdir -p "$corpus_root/scenario-seeds"
        while IFS= read -r -d '' file; do
            cp "$file" "$corpus_root/scenario-seeds/${file//\//_}"
        done < <(find test-fixtures/scenarios -type f \( -name '*.yaml' -o -name '*.json' \) -print0)
        seeds+=("$corpus_root/scenario-seeds")
    fi
    echo "hack/fuzz.sh: $target for ${seconds}s (corpus $corpus)" >&2
    before=$(find "$artifacts" -type f | wc -l)
    if ! cargo fuzz run --sanitizer "$sanitizer" -O "$target" "$corpus" "${seeds[@]}" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -artifact_prefix="$artifacts/" -print_final_stats=1; then
        status=1
    fi
    if [ "$(find "$artifacts" -type f | wc -l)" -ne "$before" ]; then
        status=1
        for f in "$artifacts"/*; do
            cp -n "$f" "crates/fuzz/regressions/$target/"
            echo "hack/fuzz.sh: $target found $(basename "$f"): kept in crates/fuzz/regressions/$target/" >&2
        done
    fi
done
exit "$status"
