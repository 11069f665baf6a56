//! `kube-hpa-controller`: the Kubernetes horizontal pod autoscaler controller as its own
//! process, run instead of kube-controller-manager's (`cmd/kube-controller-manager`).
//!
//! Today it parses and validates kube-controller-manager's flags for this controller; the
//! controller itself is built by a later issue, and until then the binary says so and exits
//! non-zero rather than pretending to run.

use std::process::ExitCode;

use hpa_config::{FlagError, Options};

fn main() -> ExitCode {
    let parsed = match Options::parse_args(std::env::args_os()) {
        Ok(p) => p,
        Err(e @ (FlagError::Help(_) | FlagError::Version(_))) => {
            print!("{e}");
            return ExitCode::SUCCESS;
        }
        Err(FlagError::Invalid(msg)) => {
            eprintln!("Error: {msg}");
            return ExitCode::from(2);
        }
    };
    for warning in &parsed.warnings {
        eprintln!("{warning}");
    }
    eprintln!(
        "kube-hpa-controller: flags are valid, but the controller is not built yet; nothing to run"
    );
    ExitCode::from(1)
}
