//! Probes `PATH` for `kubectl` so that `tests/e2e.rs`'s `kubectl describe hpa` test is reported as
//! ignored with the reason where it is absent, never as passed without running: sets the
//! `has_kubectl` cfg when one is found, and `HPA_TEST_KUBECTL` to its path (empty if none).
//! Reruns when `PATH` changes; installing kubectl into a directory already on `PATH` needs
//! `touch cmd/kube-hpa-controller/build.rs` (or `cargo clean -p kube-hpa-controller`) to be noticed.

include!("../../hack/build/kubectl_probe.rs");

fn main() {
    probe_kubectl();
}
