//! What every annotation of this controller shares: the prefix and the report of a value that
//! is not valid.
//!
//! No upstream counterpart: the built-in controller reads no annotation of an
//! `autoscaling/v2` HPA. Each feature has its own module ([`crate::pause`],
//! [`crate::fallback`]); an HPA without any of them is decided exactly as upstream decides it.
//!
//! A value that is not valid is reported once per HPA and value with a Warning event
//! `InvalidAnnotation` naming the annotation and the value ([`InvalidAnnotation`];
//! [`crate::state::HpaState::new_warnings`] remembers what was reported), and the HPA behaves
//! as without that annotation. The event is not repeated at every sync: the event recorder's
//! spam filter lets 25 Warning events of one HPA through and then one per 5 minutes, so a
//! Warning at every sync would crowd out the HPA's other Warnings; the value is shown in every
//! decision trace instead.

use std::borrow::Cow;

use crate::gofmt::quote;

/// The prefix of every annotation this controller reads.
pub const ANNOTATION_PREFIX: &str = "kube-hpa-controller.io/";

/// An annotation whose value is not valid: the HPA behaves as without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation} has the invalid value {}: {reason}; it is ignored", quote(.value))]
pub struct InvalidAnnotation {
    /// The annotation's name.
    pub annotation: &'static str,
    /// The value as set.
    pub value: String,
    /// What a valid value is (or what is wrong with this one).
    pub reason: Cow<'static, str>,
}
