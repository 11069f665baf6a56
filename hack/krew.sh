#!/usr/bin/env bash
# Packages `hpactl` as the krew plugin `hpa-explain` (the binary named `kubectl-hpa_explain`)
# and writes the filled krew manifest:
#
#   hack/krew.sh [--out DIR] [--base-url URL] [--profile PROFILE] [TARGET...]
#
# For each Rust target triple (default: the host, built without --target), builds `hpactl`
# with `cargo build --profile PROFILE --locked -p hpactl --target TARGET` (PROFILE: release),
# packs it as `kubectl-hpa_explain` with LICENSE (krew-index requires one in every archive) into
# DIR/kubectl-hpa_explain-vVERSION-OS-ARCH.tar.gz, and writes DIR/hpa-explain.yaml from
# plugins/krew/hpa-explain.yaml with VERSION, each archive's URI (BASE-URL/ARCHIVE) and sha256
# filled in. Platforms of the template that were not built are left out of the written
# manifest (a cross target needs its Rust target and linker installed). DIR defaults to
# target/krew under CARGO_TARGET_DIR (or ./target); BASE-URL to KREW_BASE_URL, else the
# workspace repository's release download URL. The archives are reproducible: file times are
# SOURCE_DATE_EPOCH (default: the time of the HEAD commit) and owners 0. Nothing is committed.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "hack/krew.sh: $*" >&2
    exit 2
}

out=""
base_url="${KREW_BASE_URL:-}"
profile=release
targets=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --out=*) out="${1#--out=}"; shift ;;
    --base-url) base_url="${2:?--base-url needs a URL}"; shift 2 ;;
    --base-url=*) base_url="${1#--base-url=}"; shift ;;
    --profile) profile="${2:?--profile needs a name}"; shift 2 ;;
    --profile=*) profile="${1#--profile=}"; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) targets+=("$1"); shift ;;
    esac
done

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
out="${out:-$target_dir/krew}"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[[ -n "$version" ]] || die "no [workspace.package] version in Cargo.toml"
if [[ -z "$base_url" ]]; then
    repository=$(sed -n '/^\[workspace.package\]/,/^\[/s/^repository = "\(.*\)"/\1/p' Cargo.toml)
    base_url="$repository/releases/download/v$version"
fi
[[ -f LICENSE ]] || die "no LICENSE in the repository (krew-index requires one in each archive)"
host=$(rustc -vV | sed -n 's/^host: //p')
if [[ ${#targets[@]} -eq 0 ]]; then
    # The host's build, without --target: it shares the ordinary build directory.
    targets=(host)
fi
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]]; then
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

# Go's GOOS/GOARCH (krew's os/arch) of a Rust target triple.
platform_of() {
    local os arch
    case "$1" in
    *-linux-*) os=linux ;;
    *-apple-darwin) os=darwin ;;
    *-windows-*) os=windows ;;
    *) die "no krew os for target $1" ;;
    esac
    case "$1" in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    *) die "no krew arch for target $1" ;;
    esac
    echo "$os/$arch"
}

# The profile's output directory name (`dev` builds into `debug`).
profile_dir=$profile
[[ "$profile" == dev ]] && profile_dir=debug

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
declare -A uri sha
for target in "${targets[@]}"; do
    if [[ "$target" == host ]]; then
        platform=$(platform_of "$host")
        target_args=()
        bin_dir="$target_dir/$profile_dir"
    else
        platform=$(platform_of "$target")
        target_args=(--target "$target")
        bin_dir="$target_dir/$target/$profile_dir"
    fi
    os=${platform%/*}
    arch=${platform#*/}
    echo "== $target ($platform): cargo build --profile $profile --locked -p hpactl ${target_args[*]}"
    cargo build --profile "$profile" --locked -p hpactl "${target_args[@]}"
    exe=""
    [[ "$os" == windows ]] && exe=.exe
    dir="$stage/$os-$arch"
    mkdir -p "$dir"
    cp "$bin_dir/hpactl$exe" "$dir/kubectl-hpa_explain$exe"
    cp LICENSE "$dir/LICENSE"
    files=("kubectl-hpa_explain$exe" LICENSE)
    archive="kubectl-hpa_explain-v$version-$os-$arch.tar.gz"
    tar -C "$dir" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
        -cf - "${files[@]}" | gzip -n -9 >"$out/$archive"
    uri[$os/$arch]="$base_url/$archive"
    sha[$os/$arch]=$(sha256sum "$out/$archive" | cut -d' ' -f1)
    echo "   $out/$archive ${sha[$os/$arch]}"
done

# The template with VERSION filled in and only the built platforms' blocks (each begins at
# its `# platform: OS/ARCH` comment), their URI and SHA256 filled in.
manifest="$out/hpa-explain.yaml"
awk -v version="$version" -v built="$(for p in "${!uri[@]}"; do printf '%s=%s=%s\n' "$p" "${uri[$p]}" "${sha[$p]}"; done)" '
    BEGIN {
        n = split(built, lines, "\n")
        for (i = 1; i <= n; i++) {
            if (split(lines[i], f, "=") == 3) { u[f[1]] = f[2]; s[f[1]] = f[3] }
        }
    }
    /^# / && !started { next }             # the template note
    { started = 1 }
    /^  # platform: / { platform = $3; keep = (platform in u); next }
    /^[^ ]/ || /^  [^ -]/ { platform = ""; keep = 1 }
    platform != "" && !keep { next }
    {
        gsub(/@VERSION@/, version)
        if (platform != "") {
            key = platform; sub("/", "_", key)
            gsub("@URI_" key "@", u[platform])
            gsub("@SHA256_" key "@", s[platform])
        }
        print
    }
' plugins/krew/hpa-explain.yaml >"$manifest"
if grep -q '@[A-Za-z0-9_]*@' "$manifest"; then
    die "unfilled placeholders left in $manifest"
fi
echo "== wrote $manifest"
