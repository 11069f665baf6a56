//! The kubeconfig files a cluster directory holds, as kubeadm writes them
//! (`cmd/kubeadm/app/phases/kubeconfig`): the server's CA inline, and either a client
//! certificate (`admin.kubeconfig`, `kcm.kubeconfig`) or a bearer token
//! (`controller.kubeconfig`, a ServiceAccount's).

use std::path::Path;

use serde_json::json;

/// The credentials of a kubeconfig user.
#[derive(Debug, Clone)]
pub enum Credentials<'a> {
    /// A client certificate and key (PEM).
    Certificate {
        /// The certificate.
        cert_pem: &'a str,
        /// The key.
        key_pem: &'a str,
    },
    /// A bearer token.
    Token(&'a str),
}

/// Base64 (standard alphabet, padded), as kubeconfig's `*-data` fields hold PEM.
pub fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A kubeconfig for `server` (verified with `ca_pem`), user `user` with `credentials`.
pub fn kubeconfig(server: &str, ca_pem: &str, user: &str, credentials: &Credentials<'_>) -> String {
    let user_entry = match credentials {
        Credentials::Certificate { cert_pem, key_pem } => json!({
            "client-certificate-data": base64(cert_pem.as_bytes()),
            "client-key-data": base64(key_pem.as_bytes()),
        }),
        Credentials::Token(token) => json!({ "token": token }),
    };
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "hpa-cluster",
            "cluster": {
                "server": server,
                "certificate-authority-data": base64(ca_pem.as_bytes()),
            },
        }],
        "users": [{ "name": user, "user": user_entry }],
        "contexts": [{
            "name": user,
            "context": { "cluster": "hpa-cluster", "user": user, "namespace": "default" },
        }],
        "current-context": user,
        "preferences": {},
    });
    // JSON is YAML: every kubeconfig reader takes it.
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// Writes a kubeconfig (mode 0600: it holds credentials).
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    crate::pki::write_file(path, text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_and_certificate_users() {
        let t = kubeconfig("https://127.0.0.1:1", "CA", "u", &Credentials::Token("tok"));
        assert!(t.contains("\"token\": \"tok\""), "{t}");
        let c = kubeconfig(
            "https://127.0.0.1:1",
            "CA",
            "admin",
            &Credentials::Certificate {
                cert_pem: "C",
                key_pem: "K",
            },
        );
        assert!(c.contains("client-key-data"), "{c}");
    }
}
