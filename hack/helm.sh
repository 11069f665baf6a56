#!/usr/bin/env bash
# hack/helm.sh: the helm binary the chart's tests run (cmd/hpactl/tests/real_cluster_chart.rs),
# built from helm's Go module.
#
#   hack/helm.sh build    build helm HELM_VERSION (once; a second run does nothing)
#   hack/helm.sh path     print the directory holding helm (exit 1 if not built)
#   hack/helm.sh version  print the helm version this project tests with
#
# Nothing is built in the repository: helm goes to $KUBE_HPA_CACHE/helm/vX.Y.Z/bin/helm
# (KUBE_HPA_CACHE defaults to ${XDG_CACHE_HOME:-~/.cache}/kube-hpa-controller), as hack/kube.sh
# does for upstream's binaries. The build is written to a temporary directory beside its
# destination and renamed into place only after `helm version` ran and reported the version, with
# a `.complete` mark; `path` answers only for a completed build.
set -euo pipefail

readonly HELM_VERSION=v3.22.0
readonly HELM_MODULE=helm.sh/helm/v3

die() {
    echo "hack/helm.sh: error: $*" >&2
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

version_dir() {
    echo "$(cache_root)/helm/$HELM_VERSION"
}

is_complete() {
    [[ -f $1/.complete && -x $1/bin/helm ]]
}

cmd_path() {
    [[ $# -eq 0 ]] || usage
    local dir
    dir=$(version_dir)
    is_complete "$dir" || die "helm $HELM_VERSION is not built in $dir (run: hack/helm.sh build)"
    echo "$dir/bin"
}

cmd_build() {
    [[ $# -eq 0 ]] || usage
    local root dir
    root=$(cache_root)/helm
    dir=$(version_dir)
    if is_complete "$dir"; then
        echo "helm.sh: helm $HELM_VERSION is already built: $dir/bin/helm"
        return 0
    fi
    command -v go >/dev/null 2>&1 ||
        die "Go is not installed (no 'go' on PATH); helm is built from its Go module $HELM_MODULE"
    mkdir -p "$root" || die "cannot create the cache directory $root"

    # One build at a time; a second caller waits, then finds it complete.
    take_build_lock "$root" "$HELM_VERSION" helm.sh
    if is_complete "$dir"; then
        echo "helm.sh: helm $HELM_VERSION is already built: $dir/bin/helm"
        return 0
    fi
    # What an interrupted build left (this one holds the lock): never used, removed.
    [[ -e $dir ]] && rm -rf "$dir"
    rm -rf "$root/.$HELM_VERSION.build."*

    local work log
    work=$(mktemp -d "$root/.$HELM_VERSION.build.XXXXXX")
    # shellcheck disable=SC2064 # expand now: the directory of this build
    trap "rm -rf '$work'" EXIT
    log=$work/build.log
    : >"$log"
    mkdir -p "$work/bin"

    echo "helm.sh: building $HELM_MODULE/cmd/helm@$HELM_VERSION with $(go env GOVERSION)" \
        "(modules from $(go env GOPROXY)) into $dir/bin/helm"
    local started=$SECONDS
    # The ldflags of helm's own release builds (its Makefile): the version (else it reports
    # v3.22), and the Kubernetes version of its client-go module as the default of
    # .Capabilities.KubeVersion and of lint's deprecation checks (else v1.20).
    local gomod client_go k8s_minor
    gomod=$(env -C "$work" GOFLAGS=-mod=mod go mod download -json "$HELM_MODULE@$HELM_VERSION" 2>>"$log" |
        sed -n 's/.*"GoMod": *"\([^"]*\)".*/\1/p') || true
    [[ -n $gomod && -f $gomod ]] ||
        die "the Go module proxy ($(go env GOPROXY)) did not serve $HELM_MODULE@$HELM_VERSION: $(tail -n 3 "$log")"
    client_go=$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$gomod")
    [[ $client_go =~ ^v0\.([0-9]+)\. ]] || die "cannot read the k8s.io/client-go version of $gomod"
    k8s_minor=${BASH_REMATCH[1]}
    local ldflags="-s -w -X $HELM_MODULE/internal/version.version=$HELM_VERSION"
    ldflags+=" -X $HELM_MODULE/internal/version.gitTreeState=clean"
    local p
    for p in pkg/lint/rules pkg/chartutil; do
        ldflags+=" -X $HELM_MODULE/$p.k8sVersionMajor=1 -X $HELM_MODULE/$p.k8sVersionMinor=$k8s_minor"
    done
    run_go "go install $HELM_MODULE/cmd/helm@$HELM_VERSION" "$log" \
        env -C "$work" GOBIN="$work/bin" CGO_ENABLED=0 GOFLAGS=-mod=mod \
        go install -trimpath -ldflags "$ldflags" "$HELM_MODULE/cmd/helm@$HELM_VERSION"

    local reported
    reported=$("$work/bin/helm" version --template '{{.Version}}' 2>&1) ||
        die "the built helm does not run: $reported"
    [[ $reported == "$HELM_VERSION" ]] ||
        die "the built helm reports '$reported', not $HELM_VERSION"

    rm -f "$log"
    {
        echo "helm $HELM_VERSION"
        echo "go $(go env GOVERSION)"
        echo "kubernetes 1.$k8s_minor (k8s.io/client-go $client_go)"
        echo "seconds $((SECONDS - started))"
    } >"$work/BUILD-INFO"
    touch "$work/.complete"
    mv "$work" "$dir"
    trap - EXIT
    echo "helm.sh: helm $HELM_VERSION built in $((SECONDS - started)) s: $dir/bin/helm"
}

main() {
    [[ $# -ge 1 ]] || usage
    local cmd=$1
    shift
    case $cmd in
    build) cmd_build "$@" ;;
    path) cmd_path "$@" ;;
    version) echo "$HELM_VERSION" ;;
    *) usage ;;
    esac
}

main "$@"
