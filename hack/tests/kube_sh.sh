#!/usr/bin/env bash
# Tests of hack/kube.sh's (and hack/helm.sh's) refusals and cache rules (run by hack/test.sh when Go is present):
# Go missing or older than the module's go directive, a version the proxy does not serve, a
# full disk, a malformed version, a half-built cache, and `path` of a built version.
set -uo pipefail
cd "$(dirname "$0")/../.."

failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME STATUS NEEDLE -- COMMAND...: the command exits STATUS and prints NEEDLE.
expect() {
    local name=$1 status=$2 needle=$3
    shift 4
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [[ $rc -ne $status || $out != *"$needle"* ]]; then
        echo "FAIL kube.sh: $name: exit $rc (want $status), output:" >&2
        sed 's/^/    /' <<<"$out" >&2
        echo "    (wanted: $needle)" >&2
        failures=$((failures + 1))
    else
        echo "ok   kube.sh: $name"
    fi
}

bash=$(command -v bash)
go=$(command -v go)

expect "a malformed version" 1 "is not a Kubernetes version" -- \
    env KUBE_HPA_CACHE="$tmp/c" hack/kube.sh build 1.37
expect "no Go on PATH" 1 "Go is not installed" -- \
    env PATH=/nonexistent KUBE_HPA_CACHE="$tmp/c" "$bash" hack/kube.sh build 1.37.2

# A go that reports an old version and otherwise is the real one.
mkdir -p "$tmp/oldgo"
cat >"$tmp/oldgo/go" <<GO
#!/usr/bin/env bash
if [[ "\$*" == "env GOVERSION" ]]; then echo go1.20.1; exit 0; fi
exec "$go" "\$@"
GO
chmod +x "$tmp/oldgo/go"
expect "Go older than the go directive" 1 "Go 1.20.1 is older than 1.26.0" -- \
    env PATH="$tmp/oldgo:$PATH" KUBE_HPA_CACHE="$tmp/c" hack/kube.sh build 1.37.2

expect "a version the proxy does not serve" 1 "refused k8s.io/kubernetes@v1.99.0" -- \
    env KUBE_HPA_CACHE="$tmp/c" GOFLAGS=-mod=mod hack/kube.sh build 1.99.0
expect "a full disk" 1 "the disk is full" -- \
    env KUBE_HPA_CACHE="$tmp/c" KUBE_HPA_MIN_FREE_GIB=100000000 hack/kube.sh build 1.37.2

# A build directory without its completion mark is never used.
mkdir -p "$tmp/c/kube/v1.98.0/bin"
for b in kube-apiserver kube-controller-manager kubectl etcd; do
    printf '#!/bin/sh\n' >"$tmp/c/kube/v1.98.0/bin/$b"
    chmod +x "$tmp/c/kube/v1.98.0/bin/$b"
done
expect "a half-built cache" 1 "is not built" -- env KUBE_HPA_CACHE="$tmp/c" hack/kube.sh path 1.98.0

# A built version (when this machine's cache has one): path prints the directory of the four,
# and building again does nothing.
for v in $(hack/kube.sh versions); do
    if dir=$(hack/kube.sh path "$v" 2>/dev/null); then
        expect "path $v" 0 "$dir" -- hack/kube.sh path "$v"
        expect "a second build of $v is a no-op" 0 "already built" -- hack/kube.sh build "$v"
        for b in kube-apiserver kube-controller-manager kubectl etcd; do
            [[ -x $dir/$b ]] || { echo "FAIL kube.sh: $dir/$b missing" >&2; failures=$((failures + 1)); }
        done
    fi
done

# hack/helm.sh: the same cache rules.
expect "helm.sh: no Go on PATH" 1 "Go is not installed" -- \
    env PATH=/nonexistent KUBE_HPA_CACHE="$tmp/c" "$bash" hack/helm.sh build
mkdir -p "$tmp/c/helm/$(hack/helm.sh version)/bin"
printf '#!/bin/sh\n' >"$tmp/c/helm/$(hack/helm.sh version)/bin/helm"
chmod +x "$tmp/c/helm/$(hack/helm.sh version)/bin/helm"
expect "helm.sh: a half-built cache" 1 "is not built" -- env KUBE_HPA_CACHE="$tmp/c" hack/helm.sh path
if dir=$(hack/helm.sh path 2>/dev/null); then
    expect "helm.sh: a second build is a no-op" 0 "already built" -- hack/helm.sh build
    expect "helm.sh: the built helm reports its version" 0 "$(hack/helm.sh version)" -- "$dir/helm" version
fi

if ((failures > 0)); then
    echo "$failures kube.sh test(s) failed" >&2
    exit 1
fi
