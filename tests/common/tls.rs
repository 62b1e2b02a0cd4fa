//! The test certificate's clients (`transport::test_client`), for the integration tests.

use std::sync::Arc;

use ::gnosis::transport::client_config;
use rustls::ClientConfig;

pub fn tls13(alpn: &[&[u8]]) -> Arc<ClientConfig> {
    client_config(&[&rustls::version::TLS13], alpn)
}
