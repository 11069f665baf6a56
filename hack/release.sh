#!/usr/bin/env bash
# hack/release.sh: the release build of kube-hpa-controller and hpactl, with their supply-chain
# records. The Dockerfile runs exactly this in its build stage; hack/tests/release_sh.sh runs it
# (with --profile dev, to stay quick) and checks what it produced.
#
#   hack/release.sh [--profile release|dev] OUT_DIR
#
# For each binary it writes to OUT_DIR:
#   BINARY               built with `cargo auditable`, which embeds the dependency tree (every
#                        crate, its version and source, compressed JSON in the ELF section
#                        .dep-v0) so that scanners (`cargo audit bin`, trivy, syft, grype) can
#                        tell which crates a binary holds without the source tree
#   BINARY.cdx.json      a CycloneDX 1.5 SBOM of the binary's package (`cargo cyclonedx
#                        --describe binaries`), every crate the build resolved for this target
#   SHA256SUMS           sha256 of the binaries and SBOMs
#
# The tools are the crates.io releases pinned below, installed with `cargo install --locked` into
# $KUBE_HPA_CACHE/tools (default ${XDG_CACHE_HOME:-~/.cache}/kube-hpa-controller/tools) when they
# are not there yet; a second run reuses them. SOURCE_DATE_EPOCH, when set, fixes the SBOMs'
# timestamps (and the binaries' build date, see hpactl --version=raw).
set -euo pipefail

readonly AUDITABLE_VERSION=0.7.7
readonly CYCLONEDX_VERSION=0.5.9
readonly BINARIES=(kube-hpa-controller hpactl)

die() {
    echo "hack/release.sh: error: $*" >&2
    exit 1
}

profile=release
while [[ $# -gt 0 ]]; do
    case $1 in
    --profile)
        [[ $# -ge 2 ]] || die "--profile needs a value (release or dev)"
        profile=$2
        shift 2
        ;;
    --profile=*)
        profile=${1#--profile=}
        shift
        ;;
    -h | --help)
        sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) die "unknown option $1" ;;
    *) break ;;
    esac
done
[[ $profile == release || $profile == dev ]] || die "--profile must be release or dev, not '$profile'"
[[ $# -eq 1 ]] || die "usage: hack/release.sh [--profile release|dev] OUT_DIR"
out=$1

cd "$(dirname "$0")/.."
repo=$PWD
command -v cargo >/dev/null 2>&1 || die "cargo is not installed"

tools="${KUBE_HPA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-hpa-controller}/tools"

# install_tool CRATE VERSION: cargo install --locked into $tools/CRATE-VERSION, once.
install_tool() {
    local crate=$1 version=$2 root="$tools/$1-$2"
    if [[ ! -x $root/bin/$crate ]]; then
        echo "hack/release.sh: installing $crate $version into $root"
        mkdir -p "$tools"
        local tmp
        tmp=$(mktemp -d "$tools/.$crate-XXXXXX")
        cargo install --quiet --locked --root "$tmp" "$crate@$version" ||
            { rm -rf "$tmp"; die "cargo install $crate@$version failed (is crates.io reachable?)"; }
        rm -rf "$root"
        mv "$tmp" "$root"
    fi
    PATH="$root/bin:$PATH"
}
install_tool cargo-auditable "$AUDITABLE_VERSION"
install_tool cargo-cyclonedx "$CYCLONEDX_VERSION"
export PATH

target_dir=${CARGO_TARGET_DIR:-$repo/target}
profile_dir=$profile
[[ $profile == dev ]] && profile_dir=debug

packages=()
for b in "${BINARIES[@]}"; do packages+=(-p "$b"); done
echo "hack/release.sh: cargo auditable build --profile $profile --locked ${packages[*]}"
cargo auditable build --profile "$profile" --locked "${packages[@]}"

# cargo cyclonedx writes one SBOM per binary of every workspace package, beside that package's
# Cargo.toml (PACKAGE/BINARY_bin.cdx.json): take the two released ones and remove every SBOM it
# wrote at once, so that the source tree keeps nothing.
sboms() { find "$repo/cmd" "$repo/crates" -name '*.cdx.json' -type f; }
sboms | xargs -r rm -f
echo "hack/release.sh: cargo cyclonedx --format json --spec-version 1.5 --describe binaries"
if ! cargo cyclonedx --quiet --format json --spec-version 1.5 --describe binaries --no-build-deps; then
    sboms | xargs -r rm -f
    die "cargo cyclonedx failed"
fi
mkdir -p "$out"
for b in "${BINARIES[@]}"; do
    bin="$target_dir/$profile_dir/$b"
    sbom="$repo/cmd/$b/${b}_bin.cdx.json"
    if [[ ! -x $bin || ! -f $sbom ]]; then
        sboms | xargs -r rm -f
        [[ -x $bin ]] || die "the build did not produce $bin"
        die "cargo cyclonedx did not write $sbom"
    fi
    cp "$bin" "$out/$b"
    mv "$sbom" "$out/$b.cdx.json"
done
sboms | xargs -r rm -f

(cd "$out" && sha256sum "${BINARIES[@]}" "${BINARIES[@]/%/.cdx.json}" >SHA256SUMS)
echo "hack/release.sh: wrote $(cd "$out" && pwd):"
sed 's/^/  /' "$out/SHA256SUMS"
