//! `rediss://` with every TLS feature compiled in: a dedup store and an inbox
//! open over TLS (a local TLS endpoint, made with rcgen and tokio-rustls, in
//! front of the test Redis), and `rediss://` pointed at a plain Redis answers
//! a TLS error quickly instead of waiting for the connect timeout.
//!
//! The test build has both of rustls' crypto providers (this crate's
//! dev-dependency turns on aws-lc-rs beside the ring the library uses), as an
//! application whose other dependencies bring aws-lc-rs does: rustls cannot
//! pick a process default then, and redis-rs' `ClientConfig::builder()`
//! panicked before the library installed one.
#![cfg(feature = "redis-tls")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{CertificateParams, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use webhooks_core::dedup::{Claim, ClaimToken, store_from_url};
use webhooks_core::inbox::inbox_from_url;

/// A TLS endpoint on loopback forwarding each connection to `upstream`
/// (`host:port`), with a self-signed certificate for `localhost`.
async fn tls_proxy(upstream: String) -> u16 {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn rediss_store_and_inbox_open_over_tls() {
    let Some(url) = support::redis_url().await else {
        return;
    };
    let upstream = support::authority(&url).unwrap();
    let port = tls_proxy(upstream).await;
    // `#insecure`: redis-rs skips verifying the test certificate.
    let tls_url = format!("rediss://localhost:{port}/#insecure");

    let store = store_from_url(&tls_url).await.unwrap();
    let key = format!("newcomer-tls:{}", ClaimToken::random().to_hex());
    let token = ClaimToken::random();
    let claim = store
        .claim(&key, token, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(claim, Claim::Claimed), "{claim:?}");
    let again = store
        .claim(&key, ClaimToken::random(), Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(again, Claim::InFlight { .. }), "{again:?}");

    let inbox = inbox_from_url(&tls_url).await.unwrap();
    drop(inbox);
}

#[tokio::test]
async fn rediss_to_a_plain_redis_is_a_tls_error() {
    let Some(url) = support::redis_url().await else {
        return;
    };
    let upstream = support::authority(&url).unwrap();
    let started = Instant::now();
    let error = store_from_url(&format!("rediss://{upstream}/#insecure"))
        .await
        .err()
        .expect("a TLS handshake with a plain Redis fails");
    let text = error.to_string();
    assert!(
        text.contains("TLS") && text.contains("plain Redis"),
        "{text}"
    );
    assert!(!text.contains("timed out"), "{text}");
    // The connect timeout (5 s) and the probe (1 s) at most.
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );

    // The inbox says the same.
    let error = inbox_from_url(&format!("rediss://{upstream}/#insecure"))
        .await
        .err()
        .expect("a TLS handshake with a plain Redis fails");
    let text = error.to_string();
    assert!(
        text.contains("TLS") && text.contains("plain Redis"),
        "{text}"
    );
}
