//! Probes for `kubectl` (`KUBECTL`, else `PATH`) so that `tests/plugin.rs`'s test of
//! `kubectl hpa-explain` is reported as ignored with the reason where there is none, never as
//! passed without running: sets the `has_kubectl` cfg when one is found, and
//! `HPA_TEST_KUBECTL` to its path (empty if none).

include!("../../hack/build/kubectl_probe.rs");

fn main() {
    probe_kubectl();
}
