# hack/lib/go-build.sh: what hack/kube.sh and hack/helm.sh share to build tools from Go modules
# into this project's cache. Sourced, not run; the sourcing script defines `die MESSAGE...`.

# The cache root: $KUBE_HPA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/kube-hpa-controller.
cache_root() {
    echo "${KUBE_HPA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-hpa-controller}"
}

# take_build_lock ROOT NAME PREFIX: one build of NAME under ROOT at a time (flock on
# ROOT/.NAME.lock, held until the script exits); a second caller says so (PREFIX: ...) and waits.
take_build_lock() {
    local root=$1 name=$2 prefix=$3
    exec {lock_fd}>"$root/.$name.lock"
    if ! flock -n "$lock_fd"; then
        echo "$prefix: another build of $name is running; waiting for it"
        flock "$lock_fd"
    fi
}

# run_go WHAT LOG COMMAND...: runs a go command with its output in LOG; on failure, shows the
# log's last lines and says the cause it recognises (a full disk, a module the proxy refused).
# MIN_FREE_GIB, when the sourcing script sets it, is the space the advice asks for.
run_go() {
    local what=$1 log=$2
    shift 2
    if "$@" >>"$log" 2>&1; then
        return 0
    fi
    echo "---- last lines of $log" >&2
    tail -n 25 "$log" >&2
    if grep -qi 'no space left on device' "$log"; then
        die "$what failed: the disk is full (no space left on device); free${MIN_FREE_GIB:+ at least ${MIN_FREE_GIB} GiB}" \
            "for $(cache_root), $(go env GOMODCACHE) and $(go env GOCACHE), then run again"
    fi
    local refused
    refused=$(grep -E -m1 '(reading|verifying) .*(: [0-9]{3} |: dial tcp|no such host|connection refused|i/o timeout|unrecognized import path|not found)|GOPROXY|missing go.sum entry|go: [^ ]+@[^ ]+: .*(not found|invalid version|unknown revision)' "$log" || true)
    if [[ -n $refused ]]; then
        die "$what failed: the Go module proxy ($(go env GOPROXY)) refused a module: $refused"
    fi
    die "$what failed (the whole output is in $log)"
}
