#!/usr/bin/env bash
# hack/kube.sh: upstream's control-plane binaries, built from upstream's Go modules, for the
# real-cluster tests (crates/cluster) and the comparisons with kube-controller-manager.
#
#   hack/kube.sh build VERSION...   build kube-apiserver, kube-controller-manager, kubectl and etcd
#   hack/kube.sh path VERSION       print the directory holding the four binaries (exit 1 if not built)
#   hack/kube.sh versions           print the versions this project tests against
#
# VERSION is 1.37.2 or v1.37.2. Nothing is built in the repository and nothing built is committed:
# the binaries go to $KUBE_HPA_CACHE/kube/vX.Y.Z/bin (KUBE_HPA_CACHE defaults to
# ${XDG_CACHE_HOME:-~/.cache}/kube-hpa-controller); Go's own module and build caches are used as the
# go command finds them (GOMODCACHE, GOCACHE), so a second version reuses what it can.
#
# How: `go install k8s.io/kubernetes/cmd/...@vX` is refused because k8s.io/kubernetes's go.mod
# replaces every k8s.io/* staging module with ./staging/src/k8s.io/NAME. As every importer of
# k8s.io/kubernetes does, a throwaway wrapper module requires k8s.io/kubernetes vX.Y.Z and replaces
# each of those staging modules with its published k8s.io/NAME v0.Y.Z; it copies k8s's go and
# godebug lines and names the four main packages as tools. etcd is the go.etcd.io/etcd/server/v3
# version that k8s.io/kubernetes itself requires (the version its tests run against). The version
# ldflags are upstream's (hack/lib/version.sh), so the binaries report vX.Y.Z, not v0.0.0.
#
# A build is written to a temporary directory beside its destination and renamed into place only
# when all four binaries ran `--version`; `path` answers only for a completed build, so a half-built
# cache is never used, and a second `build` of a completed version does nothing.
set -euo pipefail

readonly TESTED_VERSIONS="1.35.4 1.36.3 1.37.2"
# Free space (GiB) a first build needs in the cache and Go's caches: about 1.5 GiB of modules, 3 GiB
# of build cache and 0.5 GiB of binaries per version, with room to spare. KUBE_HPA_MIN_FREE_GIB
# overrides it (hack/tests/kube_sh.sh tests the refusal with it).
readonly MIN_FREE_GIB=${KUBE_HPA_MIN_FREE_GIB:-6}

die() {
    echo "hack/kube.sh: error: $*" >&2
    exit 1
}

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# (No `dirname`: the refusal of a PATH without Go must still find this file.)
here=${BASH_SOURCE[0]%/*}
[[ $here == "${BASH_SOURCE[0]}" ]] && here=.
# shellcheck source=hack/lib/go-build.sh
source "$here/lib/go-build.sh"

# v1.37.2 from 1.37.2 or v1.37.2; anything else is an error.
normalize_version() {
    local v=${1#v}
    [[ $v =~ ^1\.([0-9]+)\.([0-9]+)$ ]] ||
        die "'$1' is not a Kubernetes version of the form 1.MINOR.PATCH (for example 1.37.2)"
    echo "v$v"
}

version_dir() {
    echo "$(cache_root)/kube/$1"
}

is_complete() {
    local dir=$1
    [[ -f $dir/.complete ]] || return 1
    local b
    for b in kube-apiserver kube-controller-manager kubectl etcd; do
        [[ -x $dir/bin/$b ]] || return 1
    done
}

cmd_path() {
    [[ $# -eq 1 ]] || usage
    local version dir
    version=$(normalize_version "$1")
    dir=$(version_dir "$version")
    is_complete "$dir" ||
        die "$version is not built in $dir (run: hack/kube.sh build ${version#v})"
    echo "$dir/bin"
}

# "1.26.0" <= "1.26.8"? Compares dotted numeric versions.
version_le() {
    [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" == "$1" ]]
}

free_gib() {
    local path=$1
    while [[ ! -e $path ]]; do path=$(dirname "$path"); done
    df -Pk "$path" | awk 'NR == 2 { printf "%d", $4 / 1048576 }'
}

build_one() {
    local version=$1
    local minor=${version#v1.}
    minor=${minor%%.*}
    local patch=${version##*.}
    local staging="v0.$minor.$patch"
    local root dir
    root=$(cache_root)/kube
    dir=$(version_dir "$version")

    if is_complete "$dir"; then
        echo "kube.sh: $version is already built: $dir/bin"
        return 0
    fi

    command -v go >/dev/null 2>&1 ||
        die "Go is not installed (no 'go' on PATH); the reference binaries are built from Go modules"
    mkdir -p "$root" || die "cannot create the cache directory $root"

    # One build of a version at a time; a second caller waits, then finds it complete.
    take_build_lock "$root" "$version" kube.sh
    if is_complete "$dir"; then
        echo "kube.sh: $version is already built: $dir/bin"
        return 0
    fi
    # A directory without the completion mark, and any build directory, is what an interrupted
    # build left (this one holds the lock): never used, removed.
    [[ -e $dir ]] && rm -rf "$dir"
    rm -rf "$root/.$version.build."*

    local free
    free=$(free_gib "$root")
    ((free >= MIN_FREE_GIB)) ||
        die "the disk is full: $free GiB free under $root, a first build needs about $MIN_FREE_GIB GiB" \
            "(modules, build cache and binaries)"

    local work
    work=$(mktemp -d "$root/.$version.build.XXXXXX")
    # shellcheck disable=SC2064 # expand now: the directory of this build
    trap "rm -rf '$work'" EXIT
    local log=$work/build.log
    : >"$log"

    echo "kube.sh: $version: reading k8s.io/kubernetes@$version's go.mod from $(go env GOPROXY)"
    local info
    info=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" 2>>"$log") || {
        local err
        err=$( (sed -n 's/.*"Error": *"\(.*\)",\{0,1\}$/\1/p' <<<"$info" || true) | head -n1)
        [[ -n $err ]] || err=$(tail -n1 "$log")
        err=${err//\\n\\t/ }
        err=${err//\\n/ }
        grep -qi 'no space left' <<<"$err$(cat "$log")" &&
            die "the disk is full (no space left on device) while downloading k8s.io/kubernetes@$version"
        die "the Go module proxy ($(go env GOPROXY)) refused k8s.io/kubernetes@$version: $err"
    }
    local gomod modtime
    gomod=$(sed -n 's/.*"GoMod": *"\([^"]*\)".*/\1/p' <<<"$info")
    [[ -f $gomod ]] || die "go mod download gave no go.mod for k8s.io/kubernetes@$version"
    modtime=$(go mod download -json "k8s.io/kubernetes@$version" 2>/dev/null |
        sed -n 's/.*"Info": *"\([^"]*\)".*/\1/p' | xargs cat 2>/dev/null |
        sed -n 's/.*"Time":"\([^"]*\)".*/\1/p')

    # The Go version the module needs.
    local need have
    need=$(awk '$1 == "go" { print $2; exit }' "$gomod")
    have=$(go env GOVERSION)
    have=${have#go}
    have=${have%%[!0-9.]*}
    version_le "$need" "$have" ||
        die "Go $have is older than $need, the go directive of k8s.io/kubernetes $version; install Go $need" \
            "or newer, or let the go command fetch one: GOTOOLCHAIN=go$need (or newer) hack/kube.sh build ${version#v}"

    # The wrapper module.
    {
        echo "// Throwaway module: builds upstream's binaries of k8s.io/kubernetes $version (hack/kube.sh)."
        echo "module kube-hpa-controller.invalid/reference"
        echo
        echo "go $need"
        echo
        grep -E '^godebug ' "$gomod" || true
        echo
        echo "require k8s.io/kubernetes $version"
        echo
        echo "replace ("
        awk '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s '"$staging"'\n", $1, $1 }' "$gomod"
        echo ")"
        echo
        echo "tool ("
        echo "	k8s.io/kubernetes/cmd/kube-apiserver"
        echo "	k8s.io/kubernetes/cmd/kube-controller-manager"
        echo "	k8s.io/kubernetes/cmd/kubectl"
        echo "	go.etcd.io/etcd/server/v3"
        echo ")"
    } >"$work/go.mod"

    echo "kube.sh: $version: resolving modules (staging modules at $staging; log: $log)"
    run_go "go mod tidy for $version" "$log" \
        env -C "$work" GOFLAGS=-mod=mod GOTOOLCHAIN="${GOTOOLCHAIN:-local}" go mod tidy
    local etcd_version
    etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$work/go.mod")
    [[ -n $etcd_version ]] || die "the wrapper module for $version resolved no go.etcd.io/etcd/server/v3"

    local pkg=k8s.io/component-base/version cpkg=k8s.io/client-go/pkg/version ldflags="-s -w"
    local p
    for p in $pkg $cpkg; do
        ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        ldflags+=" -X $p.gitTreeState=archive -X $p.buildDate=${modtime:-1970-01-01T00:00:00Z}"
    done

    echo "kube.sh: $version: building kube-apiserver, kube-controller-manager, kubectl" \
        "(k8s.io/kubernetes $version) and etcd (go.etcd.io/etcd/server/v3 $etcd_version)" \
        "with $(go env GOVERSION) into $dir/bin"
    mkdir -p "$work/bin"
    local started=$SECONDS
    run_go "go build for $version" "$log" \
        env -C "$work" CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN="${GOTOOLCHAIN:-local}" \
        go build -trimpath -ldflags "$ldflags" -o "$work/bin/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kubectl go.etcd.io/etcd/server/v3
    mv "$work/bin/server" "$work/bin/etcd"

    # Each binary must run and report its version before the build counts. The output is
    # taken whole before it is matched: `cmd | grep -q` under pipefail fails when grep exits at
    # its match while the command still writes (kubectl prints a Kustomize line after it).
    local reported
    reported=$("$work/bin/kube-apiserver" --version 2>&1) || true
    grep -qx "Kubernetes $version" <<<"$reported" ||
        die "the built kube-apiserver reports '$reported', not $version"
    reported=$("$work/bin/kube-controller-manager" --version 2>&1) || true
    grep -qx "Kubernetes $version" <<<"$reported" ||
        die "the built kube-controller-manager reports '$reported', not $version"
    reported=$("$work/bin/kubectl" version --client 2>&1) || true
    grep -q "Client Version: $version" <<<"$reported" ||
        die "the built kubectl reports '$reported', not $version"
    reported=$("$work/bin/etcd" --version 2>&1) || true
    grep -q "etcd Version: ${etcd_version#v}" <<<"$reported" ||
        die "the built etcd reports '$reported', not ${etcd_version#v}"

    {
        echo "kubernetes $version"
        echo "staging $staging"
        echo "etcd $etcd_version"
        echo "go $(go env GOVERSION)"
        echo "seconds $((SECONDS - started))"
    } >"$work/BUILD-INFO"
    rm -f "$log"
    touch "$work/.complete"
    mv "$work" "$dir"
    trap - EXIT
    echo "kube.sh: $version: built in $((SECONDS - started)) s: $dir/bin"
}

main() {
    [[ $# -ge 1 ]] || usage
    local cmd=$1
    shift
    case $cmd in
    build)
        [[ $# -ge 1 ]] || usage
        local v
        for v in "$@"; do build_one "$(normalize_version "$v")"; done
        ;;
    path) cmd_path "$@" ;;
    versions) echo "$TESTED_VERSIONS" ;;
    -h | --help | help) usage ;;
    *) usage ;;
    esac
}

main "$@"
