//! The cluster's certificates and keys, as kubeadm lays them out (`cmd/kubeadm/app/phases/certs`,
//! `certs.go` and `certlist.go`): a cluster CA that signs the API server's serving certificate and
//! the client certificates; a front-proxy CA that signs the aggregator's client certificate
//! (`front-proxy-client`, which aggregated API servers authenticate through
//! `--requestheader-client-ca-file`); the ServiceAccount signing key. Beyond kubeadm: the serving
//! certificate of the aggregated metrics server (the fixture server), whose name is the one the
//! aggregator dials, `<service>.<namespace>.svc`.
//!
//! Keys are ECDSA P-256 (what `rcgen` generates with `ring`); kube-apiserver accepts them for
//! serving, client authentication and ServiceAccount tokens (ES256).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The ServiceAccount token issuer (kubeadm's default).
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The front-proxy client certificate's common name (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT_CN: &str = "front-proxy-client";
/// The cluster IP range's first address, the `kubernetes` Service's (never dialled here).
pub const SERVICE_CLUSTER_IP: &str = "10.96.0.1";

/// Why the certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Generating a key or a certificate failed.
    #[error("generating {what}: {source}")]
    Generate {
        /// The certificate or key.
        what: String,
        /// The cause.
        source: rcgen::Error,
    },
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A certificate and its key, PEM-encoded.
#[derive(Debug, Clone)]
pub struct CertKey {
    /// The certificate.
    pub cert_pem: String,
    /// The PKCS #8 private key.
    pub key_pem: String,
}

/// The paths of every file the control plane reads, under `DIR/pki`.
#[derive(Debug, Clone)]
pub struct PkiPaths {
    /// The directory.
    pub dir: PathBuf,
}

impl PkiPaths {
    /// `DIR/pki`.
    pub fn new(cluster_dir: &Path) -> Self {
        PkiPaths {
            dir: cluster_dir.join("pki"),
        }
    }

    /// `pki/NAME`.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Everything the control plane needs, generated together.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The cluster CA (`ca.crt`, `ca.key`).
    pub ca: CertKey,
    /// kube-apiserver's serving certificate (`apiserver.crt`).
    pub apiserver: CertKey,
    /// The cluster administrator's client certificate (`admin.crt`, group `system:masters`).
    pub admin: CertKey,
    /// kube-controller-manager's client certificate (`system:kube-controller-manager`).
    pub controller_manager: CertKey,
    /// The front-proxy CA (`front-proxy-ca.crt`).
    pub front_proxy_ca: CertKey,
    /// The aggregator's client certificate (`front-proxy-client.crt`).
    pub front_proxy_client: CertKey,
    /// The aggregated metrics server's serving certificate (`metrics-server.crt`).
    pub metrics_server: CertKey,
    /// The ServiceAccount token signing key (`sa.key`) and its public key (`sa.pub`).
    pub service_account_key_pem: String,
    /// The public half of the signing key.
    pub service_account_pub_pem: String,
}

fn gen_err(what: &str) -> impl Fn(rcgen::Error) -> PkiError + '_ {
    move |source| PkiError::Generate {
        what: what.to_string(),
        source,
    }
}

/// Validity: from yesterday (clock skew between processes) for ten years.
fn validity(params: &mut CertificateParams) {
    let now = jiff::Timestamp::now();
    let day = |t: jiff::Timestamp| {
        let d = t.to_zoned(jiff::tz::TimeZone::UTC).date();
        rcgen::date_time_ymd(
            i32::from(d.year()),
            d.month().unsigned_abs(),
            d.day().unsigned_abs(),
        )
    };
    params.not_before = day(now - jiff::SignedDuration::from_hours(24));
    params.not_after = day(now + jiff::SignedDuration::from_hours(24 * 3650));
}

/// A self-signed CA.
fn ca(cn: &str) -> Result<(CertificateParams, KeyPair, CertKey), PkiError> {
    let key = KeyPair::generate().map_err(gen_err(cn))?;
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    validity(&mut params);
    let cert = params.self_signed(&key).map_err(gen_err(cn))?;
    let pair = CertKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    };
    Ok((params, key, pair))
}

/// What a leaf certificate is for.
enum Leaf<'a> {
    /// Serving, for these DNS names and IP addresses.
    Server(&'a [&'a str]),
    /// A client, user `cn` in groups `orgs`.
    Client(&'a [&'a str]),
}

fn leaf(cn: &str, usage: Leaf<'_>, issuer: &Issuer<'_, &KeyPair>) -> Result<CertKey, PkiError> {
    let names: Vec<String> = match usage {
        Leaf::Server(names) => names.iter().map(|s| s.to_string()).collect(),
        Leaf::Client(_) => Vec::new(),
    };
    let mut params = CertificateParams::new(names).map_err(gen_err(cn))?;
    if let Leaf::Client(orgs) = usage {
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
    }
    params.distinguished_name.push(DnType::CommonName, cn);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![match usage {
        Leaf::Server(_) => ExtendedKeyUsagePurpose::ServerAuth,
        Leaf::Client(_) => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    validity(&mut params);
    let key = KeyPair::generate().map_err(gen_err(cn))?;
    let cert = params.signed_by(&key, issuer).map_err(gen_err(cn))?;
    Ok(CertKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

impl Pki {
    /// Generates every certificate; `metrics_server_name` is the aggregated server's
    /// `<service>.<namespace>.svc`.
    pub fn generate(metrics_server_name: &str) -> Result<Self, PkiError> {
        let (ca_params, ca_key, ca_pair) = ca("kubernetes")?;
        let ca_issuer = Issuer::from_params(&ca_params, &ca_key);
        let apiserver = leaf(
            "kube-apiserver",
            Leaf::Server(&[
                "localhost",
                "127.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                SERVICE_CLUSTER_IP,
            ]),
            &ca_issuer,
        )?;
        let admin = leaf(
            "kubernetes-admin",
            Leaf::Client(&["system:masters"]),
            &ca_issuer,
        )?;
        let controller_manager = leaf(
            "system:kube-controller-manager",
            Leaf::Client(&[]),
            &ca_issuer,
        )?;
        let metrics_server = leaf(
            metrics_server_name,
            Leaf::Server(&[metrics_server_name, "localhost", "127.0.0.1"]),
            &ca_issuer,
        )?;

        let (fp_params, fp_key, fp_pair) = ca("front-proxy-ca")?;
        let fp_issuer = Issuer::from_params(&fp_params, &fp_key);
        let front_proxy_client = leaf(FRONT_PROXY_CLIENT_CN, Leaf::Client(&[]), &fp_issuer)?;

        let sa = KeyPair::generate().map_err(gen_err("the ServiceAccount key"))?;
        Ok(Pki {
            ca: ca_pair,
            apiserver,
            admin,
            controller_manager,
            front_proxy_ca: fp_pair,
            front_proxy_client,
            metrics_server,
            service_account_key_pem: sa.serialize_pem(),
            service_account_pub_pem: sa.public_key_pem(),
        })
    }

    /// Writes the files under `paths` (keys readable by the owner only).
    pub fn write(&self, paths: &PkiPaths) -> Result<(), PkiError> {
        let write = |name: &str, text: &str, private: bool| -> Result<(), PkiError> {
            let path = paths.file(name);
            write_file(&path, text, private).map_err(|source| PkiError::Write { path, source })
        };
        std::fs::create_dir_all(&paths.dir).map_err(|source| PkiError::Write {
            path: paths.dir.clone(),
            source,
        })?;
        for (name, pair) in [
            ("ca", &self.ca),
            ("apiserver", &self.apiserver),
            ("admin", &self.admin),
            ("controller-manager", &self.controller_manager),
            ("front-proxy-ca", &self.front_proxy_ca),
            ("front-proxy-client", &self.front_proxy_client),
            ("metrics-server", &self.metrics_server),
        ] {
            write(&format!("{name}.crt"), &pair.cert_pem, false)?;
            write(&format!("{name}.key"), &pair.key_pem, true)?;
        }
        write("sa.key", &self.service_account_key_pem, true)?;
        write("sa.pub", &self.service_account_pub_pem, false)?;
        Ok(())
    }
}

/// Writes `text` to `path`, mode 0600 for private files.
pub(crate) fn write_file(path: &Path, text: &str, private: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if private {
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn generates_every_certificate() {
        let pki = Pki::generate("m.kube-system.svc").unwrap();
        for pem in [
            &pki.ca.cert_pem,
            &pki.apiserver.cert_pem,
            &pki.admin.cert_pem,
            &pki.metrics_server.cert_pem,
            &pki.front_proxy_client.cert_pem,
        ] {
            assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        }
        assert!(pki.service_account_key_pem.contains("PRIVATE KEY"));
        assert!(pki.service_account_pub_pem.contains("PUBLIC KEY"));
        let dir = std::env::temp_dir().join(format!("hpa-pki-{}", std::process::id()));
        pki.write(&PkiPaths::new(&dir)).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.join("pki/ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
