#!/usr/bin/env bash
# Tests of hack/krew.sh and of the krew manifest it writes (run by hack/test.sh), with krew's own
# tools built from krew's Go module (sigs.k8s.io/krew KREW_VERSION, into
# $KUBE_HPA_CACHE/tools/krew-KREW_VERSION once, as hack/helm.sh builds helm):
#
# - `validate-krew-manifest`, the check krew-index runs on every submitted manifest: the
#   manifest's schema and apiVersion, the plugin name against the file name, the platform
#   selectors, and an install of each platform from its URI (here served on loopback), its sha256
#   checked and a LICENSE file extracted;
# - `kubectl krew install --manifest` into a fresh KREW_ROOT, then `kubectl plugin list` finds
#   kubectl-hpa_explain and `kubectl hpa-explain --version` and `--help` answer as the plugin;
#   `kubectl krew uninstall` removes it;
# - a manifest whose sha256 does not match its archive is refused by krew.
#
#   hack/tests/krew_sh.sh [KUBECTL_DIR]
#
# KUBECTL_DIR holds the kubectl to run (default: the one on PATH). Needs Go and python3 (the
# loopback HTTP server); without Go it says SKIPPED and why.
set -uo pipefail
cd "$(dirname "$0")/../.."

readonly KREW_VERSION=v0.4.3
readonly KREW_MODULE=sigs.k8s.io/krew

die() {
    echo "FAIL krew.sh: $*" >&2
    exit 1
}
# shellcheck source=hack/lib/go-build.sh
source hack/lib/go-build.sh

if ! command -v go >/dev/null 2>&1; then
    echo "SKIPPED: the krew manifest's tests: Go is not installed, so krew cannot be built from $KREW_MODULE"
    exit 0
fi
if [[ $# -ge 1 && -n $1 ]]; then
    PATH="$1:$PATH"
fi
command -v kubectl >/dev/null 2>&1 || die "no kubectl (give its directory: hack/tests/krew_sh.sh DIR)"
command -v python3 >/dev/null 2>&1 || die "no python3 (the archives are served by python3 -m http.server)"

failures=0
tmp=$(mktemp -d)
server_pid=""
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ok() { echo "ok   krew.sh: $1"; }
fail() {
    echo "FAIL krew.sh: $1" >&2
    failures=$((failures + 1))
}

# krew and validate-krew-manifest, built once into the cache (renamed into place when complete).
tools=$(cache_root)/tools/krew-$KREW_VERSION
if [[ ! -x $tools/bin/krew || ! -x $tools/bin/validate-krew-manifest ]]; then
    mkdir -p "$(dirname "$tools")" || die "cannot create $(dirname "$tools")"
    work=$(mktemp -d "$(dirname "$tools")/.krew-XXXXXX")
    echo "== building $KREW_MODULE $KREW_VERSION (krew, validate-krew-manifest) with $(go env GOVERSION) into $tools"
    for cmd in krew validate-krew-manifest; do
        run_go "go install $KREW_MODULE/cmd/$cmd@$KREW_VERSION" "$work/build.log" \
            env GOBIN="$work/bin" CGO_ENABLED=0 GOFLAGS=-mod=mod \
            go install -trimpath "$KREW_MODULE/cmd/$cmd@$KREW_VERSION"
    done
    rm -f "$work/build.log"
    rm -rf "$tools"
    mv "$work" "$tools"
fi
# kubectl runs `kubectl krew` as the plugin kubectl-krew.
mkdir -p "$tmp/krew-bin"
ln -s "$tools/bin/krew" "$tmp/krew-bin/kubectl-krew"
PATH="$tmp/krew-bin:$PATH"

# The archives on loopback, where the manifest's URIs point.
mkdir -p "$tmp/dist"
python3 -u -m http.server --bind 127.0.0.1 --directory "$tmp/dist" 0 >"$tmp/http.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 50); do
    port=$(sed -n 's/.* port \([0-9][0-9]*\) .*/\1/p' "$tmp/http.log" | head -n 1)
    [[ -n $port ]] && break
    sleep 0.1
done
[[ -n $port ]] || die "the loopback HTTP server did not start: $(cat "$tmp/http.log")"

if ! hack/krew.sh --out "$tmp/dist" --profile dev --base-url "http://127.0.0.1:$port" >"$tmp/krew.log" 2>&1; then
    sed 's/^/    /' "$tmp/krew.log" >&2
    die "hack/krew.sh --profile dev failed"
fi
manifest=$tmp/dist/hpa-explain.yaml
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
archive=$tmp/dist/kubectl-hpa_explain-v$version-linux-amd64.tar.gz
[[ -f $manifest && -f $archive ]] || die "hack/krew.sh wrote no manifest or no linux-amd64 archive: $(ls "$tmp/dist")"
ok "hack/krew.sh packed $(basename "$archive") and wrote hpa-explain.yaml"

if out=$("$tools/bin/validate-krew-manifest" -manifest "$manifest" 2>&1) &&
    [[ $out == *"spec.platforms installed fine"* ]]; then
    ok "validate-krew-manifest (krew-index's check): schema, name, selectors, install from the URI with its sha256 and LICENSE"
else
    fail "validate-krew-manifest refused the manifest:"
    grep -v '^[[:space:]]\|^goroutine\|^$' <<<"$out" | sed 's/^/    /' >&2
fi

export KREW_ROOT=$tmp/root
# krew's commands other than `install --manifest` want a local index (a git clone of
# krew-index, which `kubectl krew update` would fetch): an empty repository stands for it.
git init -q "$KREW_ROOT/index/default" || die "git init of the stand-in index failed"
# Where krew links the plugins it installs, and kubectl looks for them.
PATH="$KREW_ROOT/bin:$PATH"
if out=$(kubectl krew install --manifest="$manifest" </dev/null 2>&1); then
    ok "kubectl krew install --manifest"
else
    fail "kubectl krew install --manifest: $out"
fi
if out=$(kubectl plugin list 2>&1) && [[ $out == *"$KREW_ROOT/bin/kubectl-hpa_explain"* ]]; then
    ok "kubectl plugin list finds kubectl-hpa_explain"
else
    fail "kubectl plugin list: $out"
fi
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if out=$(kubectl hpa-explain --version 2>&1) &&
    [[ $(head -n 1 <<<"$out") == "hpactl v$version" && $out == *"git commit: $commit"* ]]; then
    ok "kubectl hpa-explain --version prints hpactl's version and commit"
else
    fail "kubectl hpa-explain --version: $out"
fi
if out=$(kubectl hpa-explain --help 2>&1) &&
    [[ $out == *"Usage: kubectl hpa-explain [OPTIONS] <NAMESPACE/NAME>"* ]]; then
    ok "kubectl hpa-explain --help names the kubectl command"
else
    fail "kubectl hpa-explain --help: $out"
fi
if out=$(kubectl krew uninstall hpa-explain 2>&1) && [[ ! -e $KREW_ROOT/bin/kubectl-hpa_explain ]]; then
    ok "kubectl krew uninstall removes the plugin"
else
    fail "kubectl krew uninstall: $out"
fi

# A manifest whose archive does not match its sha256 is refused, and nothing is installed.
export KREW_ROOT=$tmp/root-bad-sha
sed 's/^\(    sha256: "\)[0-9a-f]\{64\}"/\10000000000000000000000000000000000000000000000000000000000000000"/' \
    "$manifest" >"$tmp/hpa-explain.yaml"
if grep -q '0\{64\}' "$tmp/hpa-explain.yaml"; then
    if out=$(kubectl krew install --manifest="$tmp/hpa-explain.yaml" </dev/null 2>&1); then
        fail "a manifest with a wrong sha256 was installed: $out"
    elif [[ -e $KREW_ROOT/bin/kubectl-hpa_explain ]]; then
        fail "a refused install left $KREW_ROOT/bin/kubectl-hpa_explain"
    else
        ok "a wrong sha256 is refused ($(grep -o -m1 -i 'checksum[^"]*' <<<"$out" | head -c 80))"
    fi
else
    fail "could not write a manifest with a wrong sha256"
fi

if [[ $failures -gt 0 ]]; then
    echo "krew.sh: $failures check(s) failed" >&2
    exit 1
fi
echo "krew.sh: all checks passed"
