#!/usr/bin/env bash
# Tests of hack/release.sh (run by hack/test.sh): the binaries it builds carry their dependency
# tree (cargo auditable's .dep-v0 section, readable without the source), each has a CycloneDX SBOM
# naming it and the crates it was built from, SHA256SUMS verifies, the source tree keeps no SBOM,
# and bad arguments are refused with a message. Builds with --profile dev (the Dockerfile builds
# --profile release the same way).
set -uo pipefail
cd "$(dirname "$0")/../.."

failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok   release.sh: $1"; }
fail() {
    echo "FAIL release.sh: $1" >&2
    failures=$((failures + 1))
}

out=$(hack/release.sh --profile=bogus "$tmp/x" 2>&1)
if [[ $? -ne 0 && $out == *"--profile must be release or dev"* ]]; then
    ok "an unknown profile is refused"
else
    fail "an unknown profile: $out"
fi

if ! hack/release.sh --profile dev "$tmp/out" >"$tmp/log" 2>&1; then
    fail "hack/release.sh --profile dev failed:"
    sed 's/^/    /' "$tmp/log" >&2
    exit 1
fi
ok "hack/release.sh --profile dev built"

for b in kube-hpa-controller hpactl; do
    bin="$tmp/out/$b"
    # The dependency tree cargo auditable embeds: zlib-compressed JSON in .dep-v0.
    if objcopy --dump-section ".dep-v0=$tmp/$b.dep" "$bin" "$tmp/$b.copy" 2>"$tmp/objcopy.err"; then
        verdict=$(python3 - "$tmp/$b.dep" "$b" <<'PY'
import json, sys, zlib
tree = json.loads(zlib.decompress(open(sys.argv[1], "rb").read()))
names = {p["name"] for p in tree["packages"]}
roots = [p["name"] for p in tree["packages"] if p.get("root")]
missing = {"kube-client", "tokio", "serde"} - names
if roots != [sys.argv[2]]:
    print(f"root package {roots}, expected [{sys.argv[2]}]")
elif missing:
    print(f"missing {sorted(missing)} among {len(names)} packages")
else:
    print(f"ok {len(names)}")
PY
        )
        if [[ $verdict == ok* ]]; then
            ok "$b embeds its dependency tree (${verdict#ok } crates)"
        else
            fail "$b's .dep-v0: $verdict"
        fi
    else
        fail "$b has no .dep-v0 section: $(cat "$tmp/objcopy.err")"
    fi

    verdict=$(python3 - "$tmp/out/$b.cdx.json" "$b" <<'PY'
import json, sys
bom = json.load(open(sys.argv[1]))
names = {c["name"] for c in bom.get("components", [])}
def walk(cs):
    for c in cs:
        yield c["name"]
        yield from walk(c.get("components", []))
top = bom["metadata"]["component"]
described = set(walk([top]))
if bom.get("bomFormat") != "CycloneDX" or bom.get("specVersion") != "1.5":
    print(f"format {bom.get('bomFormat')} {bom.get('specVersion')}")
elif sys.argv[2] not in described:
    print(f"describes {sorted(described)}, not {sys.argv[2]}")
elif not {"kube-client", "tokio"} <= names:
    print(f"components lack kube-client or tokio ({len(names)} components)")
else:
    print(f"ok {len(names)}")
PY
    )
    if [[ $verdict == ok* ]]; then
        ok "$b.cdx.json is a CycloneDX 1.5 SBOM of $b (${verdict#ok } components)"
    else
        fail "$b.cdx.json: $verdict"
    fi
done

if (cd "$tmp/out" && sha256sum --quiet -c SHA256SUMS); then
    ok "SHA256SUMS verifies"
else
    fail "SHA256SUMS does not verify"
fi

left=$(find cmd crates -name '*.cdx.json')
if [[ -z $left ]]; then
    ok "no SBOM left in the source tree"
else
    fail "SBOMs left in the source tree: $left"
fi

if [[ $failures -gt 0 ]]; then
    echo "hack/tests/release_sh.sh: $failures failure(s)" >&2
    exit 1
fi
