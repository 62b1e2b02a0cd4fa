//! The TLS listener's certificate and key: where they are (`TLS_CERT`, `TLS_KEY`), reading
//! and checking them, and the rustls configuration made from them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::NoServerSessionStorage;
use rustls::ServerConfig;

use super::tls::TlsConfig;

/// Where HttpArena mounts the certificate and key, unless `TLS_CERT` / `TLS_KEY` say otherwise.
pub const CERT_PATH: &str = "/certs/server.crt";
pub const KEY_PATH: &str = "/certs/server.key";

/// The TLS listeners' configuration on `ports`, from `TLS_CERT` and `TLS_KEY`: without a
/// certificate file, none, and one line says that the listener stays off; a certificate or
/// key that cannot be used ends the start with status 2, as a bad argument does.
pub fn listener_config(ports: &[u16]) -> Option<Arc<TlsConfig>> {
    match from_env(|name| std::env::var(name).ok()) {
        Ok(Some(config)) => {
            crate::log!("TLS 1.3 on ports {ports:?}");
            Some(Arc::new(config))
        }
        Ok(None) => {
            crate::log!(
                "no TLS certificate (TLS_CERT, else {CERT_PATH}): no TLS listener on ports {ports:?}"
            );
            None
        }
        Err(why) => {
            crate::log!("{why}");
            std::process::exit(2);
        }
    }
}

/// The certificate and key named by `TLS_CERT` and `TLS_KEY` (read through `env`), made into
/// the TLS listener's configuration. `Ok(None)` when there is no certificate file: the TLS
/// listener stays off (TFB mounts none). A certificate or key that cannot be read or
/// parsed, or that do not match, is an error naming the file.
pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<TlsConfig>, String> {
    let path = |name, default| env(name).map_or_else(|| PathBuf::from(default), PathBuf::from);
    let (cert, key) = (path("TLS_CERT", CERT_PATH), path("TLS_KEY", KEY_PATH));
    if !cert.exists() {
        return Ok(None);
    }
    load(&cert, &key).map(Some)
}

/// Reads the PEM certificate chain at `cert` and the PEM private key at `key`: TLS 1.3
/// only (its suites are all AEAD), and no session resumption (a session cache or ticket
/// keys would be state shared by the worker threads; clients keep their connections).
pub fn load(cert: &Path, key: &Path) -> Result<TlsConfig, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| format!("cannot read the TLS certificate {}: {err}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("no PEM certificate in {}", cert.display()));
    }
    let private_key = PrivateKeyDer::from_pem_file(key)
        .map_err(|err| format!("cannot read the TLS key {}: {err}", key.display()))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|err| err.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(|err| {
            format!(
                "the TLS certificate {} and key {} cannot be used together: {err}",
                cert.display(),
                key.display()
            )
        })?;
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    Ok(TlsConfig::new(config))
}
