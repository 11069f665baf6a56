//! TLS and transport failures as a Go client sees them.
//!
//! Go's `crypto/x509` (`Certificate.Verify`, `buildChains`, `isValid`) checks the validity
//! period of every certificate of a chain, the root included, so a kubeconfig whose CA has
//! expired is refused (`x509: certificate signed by unknown authority (possibly because of
//! "x509: certificate has expired or is not yet valid: ..." while trying to verify candidate
//! authority certificate "NAME")`). rustls treats a root as a bare trust anchor and never
//! checks its dates, so the client checks them itself ([`split_expired`]).
//!
//! [`go_transport_cause`] words a failed connection as Go's `net` and `crypto/tls` errors
//! read (`dial tcp HOST:PORT: connect: connection refused`, `tls: failed to verify
//! certificate: x509: ...`), walking the causes kube and hyper give.

use jiff::Timestamp;
use x509_parser::prelude::{FromDer, X509Certificate};

/// A CA certificate of the configuration outside its validity period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredCa {
    /// The certificate's name as Go names a candidate authority: the common name, else the
    /// first organization, else `serial:N`.
    pub name: String,
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
}

fn go_rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl ExpiredCa {
    /// Go's `CertificateInvalidError` text with `Expired` for this certificate at `now`.
    pub fn invalid_text(&self, now: Timestamp) -> String {
        let detail = if now < self.not_before {
            format!(
                "current time {} is before {}",
                go_rfc3339(now),
                go_rfc3339(self.not_before)
            )
        } else {
            format!(
                "current time {} is after {}",
                go_rfc3339(now),
                go_rfc3339(self.not_after)
            )
        };
        format!("x509: certificate has expired or is not yet valid: {detail}")
    }

    /// The error a Go client gives for a server whose chain ends at this authority.
    pub fn go_error(&self) -> String {
        format!(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of {:?} while trying to verify candidate authority certificate {:?})",
            self.invalid_text(Timestamp::now()),
            self.name
        )
    }
}

fn candidate_name(cert: &X509Certificate<'_>) -> String {
    let subject = cert.subject();
    if let Some(cn) = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .filter(|s| !s.is_empty())
    {
        return cn.to_string();
    }
    if let Some(o) = subject
        .iter_organization()
        .next()
        .and_then(|a| a.as_str().ok())
    {
        return o.to_string();
    }
    format!("serial:{}", cert.serial)
}

/// Splits DER certificates into those valid at `now` (or that cannot be read: rustls will
/// judge them) and those outside their validity period.
pub fn split_expired(roots: &[Vec<u8>], now: Timestamp) -> (Vec<Vec<u8>>, Vec<ExpiredCa>) {
    let mut kept = Vec::new();
    let mut expired = Vec::new();
    for der in roots {
        let Ok((_, cert)) = X509Certificate::from_der(der) else {
            kept.push(der.clone());
            continue;
        };
        let validity = cert.validity();
        let (Ok(nb), Ok(na)) = (
            Timestamp::from_second(validity.not_before.timestamp()),
            Timestamp::from_second(validity.not_after.timestamp()),
        ) else {
            kept.push(der.clone());
            continue;
        };
        if now < nb || now > na {
            expired.push(ExpiredCa {
                name: candidate_name(&cert),
                not_before: nb,
                not_after: na,
            });
        } else {
            kept.push(der.clone());
        }
    }
    (kept, expired)
}

fn rustls_text(e: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => {
            let x509 = match c {
                C::UnknownIssuer => "x509: certificate signed by unknown authority".to_string(),
                C::Expired | C::NotValidYet => {
                    "x509: certificate has expired or is not yet valid".to_string()
                }
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    "x509: certificate is not valid for the requested name".to_string()
                }
                C::BadSignature => "x509: signature verification failed".to_string(),
                other => format!("x509: {other:?}"),
            };
            format!("tls: failed to verify certificate: {x509}")
        }
        other => format!("tls: {other}"),
    }
}

fn io_text(e: &std::io::Error, authority: &str) -> Option<String> {
    use std::io::ErrorKind as K;
    if let Some(r) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return Some(rustls_text(r));
    }
    Some(match e.kind() {
        K::ConnectionRefused => format!("dial tcp {authority}: connect: connection refused"),
        K::TimedOut => format!("dial tcp {authority}: i/o timeout"),
        K::ConnectionReset => format!("read tcp {authority}: read: connection reset by peer"),
        K::UnexpectedEof => "EOF".to_string(),
        K::NotFound | K::AddrNotAvailable => {
            format!("dial tcp: lookup {authority}: no such host")
        }
        _ => return None,
    })
}

/// The cause of a failed request in Go's words, from the deepest cause that has a Go
/// counterpart; the innermost cause's own text otherwise.
pub fn go_transport_cause(err: &(dyn std::error::Error + 'static), authority: &str) -> String {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut deepest = err.to_string();
    let mut found = None;
    while let Some(e) = current {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            found = Some(rustls_text(r));
        } else if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(text) = io_text(io, authority)
        {
            found = Some(text);
        } else if let Some(h) = e.downcast_ref::<hyper::Error>()
            && h.is_incomplete_message()
        {
            found = Some("EOF".to_string());
        }
        deepest = e.to_string();
        current = e.source();
    }
    found.unwrap_or(deepest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(not_before: (i32, u8, u8), not_after: (i32, u8, u8), cn: &str) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn expired_and_future_authorities_are_split_off() {
        let now: Timestamp = "2026-11-23T20:00:00Z".parse().unwrap();
        let good = cert((2020, 1, 1), (2030, 1, 1), "good-ca");
        let old = cert((2020, 1, 1), (2025, 1, 1), "old-ca");
        let future = cert((2027, 1, 1), (2030, 1, 1), "future-ca");
        let (kept, expired) = split_expired(&[good.clone(), old, future], now);
        assert_eq!(kept, vec![good]);
        assert_eq!(expired.len(), 2);
        assert_eq!(expired[0].name, "old-ca");
        assert_eq!(
            expired[0].invalid_text(now),
            "x509: certificate has expired or is not yet valid: current time 2026-11-23T20:00:00Z is after 2025-01-01T00:00:00Z"
        );
        assert_eq!(
            expired[1].invalid_text(now),
            "x509: certificate has expired or is not yet valid: current time 2026-11-23T20:00:00Z is before 2027-01-01T00:00:00Z"
        );
        assert!(expired[0].go_error().starts_with(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \"x509: certificate has expired or is not yet valid: current time "
        ));
        assert!(
            expired[0]
                .go_error()
                .ends_with("while trying to verify candidate authority certificate \"old-ca\")")
        );
    }

    #[test]
    fn connection_refused_reads_as_go_dial_error() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            go_transport_cause(&io, "127.0.0.1:1"),
            "dial tcp 127.0.0.1:1: connect: connection refused"
        );
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(
            go_transport_cause(&tls, "h:443"),
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        );
    }
}
