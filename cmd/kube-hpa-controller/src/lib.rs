//! The parts of the `kube-hpa-controller` process that are not the controller itself:
//! leader election (and, with the controller, the client, serving and signal handling).
//! Mirrors what `cmd/kube-controller-manager/app` does around its controllers.
//!
//! The modules the binary and the tests use are public; leader election and the TLS and
//! transport failures as a Go client sees them are used only inside it ([`app`], [`client`]).

pub mod app;
pub mod auth;
pub mod client;
pub mod crash;
pub mod debug;
pub mod fence;
mod leader_election;
pub mod logging;
pub mod metrics;
pub mod serving;
mod tls;
