//! Configuration of kube-hpa-controller: the HPA controller's own settings with upstream's
//! defaults, the generic kube-controller-manager options (client, leader election, secure
//! serving, authentication, logging), feature gates, Go-style durations and the [`Clock`].
//!
//! Mirrors `pkg/controller/podautoscaler/config/types.go`,
//! `pkg/controller/podautoscaler/config/v1alpha1/defaults.go` and the options in
//! `cmd/kube-controller-manager/app/options/` (`hpacontroller.go`, `generic.go`, the
//! component-base leader-election options).

mod clock;
mod duration;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use duration::{GoDuration, ParseDurationError};
pub mod feature_gates;
mod hpa;
pub mod options;
pub mod strconv;
mod version;

pub use feature_gates::{Feature, FeatureGates};
pub use hpa::HpaControllerConfiguration;
pub use options::{FlagError, Options, Parsed, VersionFlag};
pub use version::KubeVersion;
