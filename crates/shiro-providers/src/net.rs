//! The one way shiro makes an HTTP client, for the model providers and for MCP servers
//! reached by URL: reqwest over rustls, with ring as the cryptography.
//!
//! reqwest's own choice of provider, aws-lc-rs, is a large C build; shiro asks for reqwest's
//! `rustls-no-provider` and installs ring as rustls' process-wide default here, before any
//! client is built. Certificates are always checked: against the system's trust store
//! (reqwest's platform verifier), or, on a system that has none (a minimal container), against
//! Mozilla's list built into shiro.

/// Builds the reqwest client that `configure` sets up, with working TLS. Every reqwest
/// client shiro builds comes from here: without a provider installed, reqwest would panic,
/// and without a trust store it would refuse to build any client, even for `http://`.
pub fn client(
    configure: impl Fn(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
) -> Result<reqwest::Client, reqwest::Error> {
    install_crypto_provider();
    configure(reqwest::Client::builder())
        .build()
        .or_else(|error| {
            // The builder fails, among other reasons, when the system has no certificates;
            // any other reason fails again here, and the first error is the one to show.
            configure(reqwest::Client::builder())
                .tls_certs_only(bundled_roots())
                .build()
                .map_err(|_| error)
        })
}

/// Mozilla's root certificates, as built into shiro.
fn bundled_roots() -> impl Iterator<Item = reqwest::Certificate> {
    webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok())
}

/// Makes ring rustls' process-wide default provider, unless one is installed already (by an
/// earlier call, or by another part of the process): that one is kept, and serves as well.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // An error only means another thread installed a provider first.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn a_client_with_tls_can_be_built() {
        let client = client(|builder| builder.https_only(true));
        assert!(client.is_ok(), "{client:?}");
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        assert!(bundled_roots().count() > 100);
    }

    /// Runs the test above again in a child process that sees no system certificates (the
    /// variables of `rustls-native-certs` point at an empty directory).
    #[test]
    fn a_client_can_be_built_without_a_system_trust_store() {
        let empty = tempfile::tempdir().unwrap();
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "net::tests::a_client_with_tls_can_be_built",
                "--exact",
                "--test-threads=1",
            ])
            .env("SSL_CERT_FILE", empty.path().join("none.pem"))
            .env("SSL_CERT_DIR", empty.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains("1 passed"), "{stdout}");
    }
}
