//! A rustls client that trusts exactly the test certificate ([`test_pair`], made like
//! HttpArena's pair: self-signed with CA:TRUE, which path validation would refuse, so the
//! client pins it and checks the handshake's signature with it). Compiled for unit tests,
//! and with the `test-kit` feature for the integration tests.

use std::sync::Arc;

use super::test_pair;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// Accepts exactly the certificate it was made with, and checks the handshake's signature.
#[derive(Debug)]
struct Pinned {
    certificate: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match end_entity.as_ref() == self.certificate.as_ref() {
            true => Ok(ServerCertVerified::assertion()),
            false => Err(rustls::Error::General("not the pinned certificate".into())),
        }
    }

    /// A server that settles on TLS 1.2 fails the tests that reach here.
    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("the server spoke TLS 1.2".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

pub fn certificate() -> CertificateDer<'static> {
    CertificateDer::from_pem_file(&test_pair().cert).unwrap()
}

/// A client of `versions` that offers `alpn` and trusts the test certificate.
pub fn client_config(
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let provider = Arc::new(ring::default_provider());
    let verifier = Pinned {
        certificate: certificate(),
        provider: provider.clone(),
    };
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|name| name.to_vec()).collect();
    Arc::new(config)
}
