//! Fetching signing certificates: the [`CertificateFetcher`] trait, its
//! error, the default reqwest fetcher, and reading a certificate's RSA key.

use std::error::Error;
use std::sync::Arc;
#[cfg(feature = "sns-reqwest")]
use std::time::Duration;

use rsa::PublicKey;
use x509_cert::Certificate;
use x509_cert::der::{Decode as _, DecodePem as _};

#[cfg(feature = "sns-reqwest")]
use super::MAX_CERTIFICATE_LEN;
#[cfg(feature = "sns-reqwest")]
use crate::ConfigError;

/// Why a [`CertificateFetcher`] could not fetch (network, timeout, HTTP status…).
///
/// The delivery answers `503`, so that SNS retries later.
#[derive(Debug, thiserror::Error)]
#[error("certificate fetch failed")]
pub struct FetchError(#[source] Box<dyn Error + Send + Sync>);

impl FetchError {
    /// Wraps the client's error, keeping it as the [`source`](Error::source).
    pub fn new(source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self(source.into())
    }
}

/// Fetches the body at an `https` URL that [`Sns`](super::Sns) has already checked: the
/// signing certificate (PEM or DER), or a `SubscribeURL` when confirming.
///
/// Implement it over your own HTTP client, or enable the `sns-reqwest`
/// feature for [`ReqwestFetcher`]. Tests use a fake returning a test
/// certificate. Bound its time (the delivery waits for it) and do not follow
/// redirects (they would leave the checked host). A request dropped while it
/// fetches leaves nothing behind: the key is cached only once parsed.
#[cfg_attr(
    not(feature = "sns-reqwest"),
    doc = "\n\n[`ReqwestFetcher`]: https://docs.rs/webhooks-core/latest/webhooks_core/scheme/sns/struct.ReqwestFetcher.html"
)]
#[async_trait::async_trait]
pub trait CertificateFetcher: Send + Sync + 'static {
    /// The response body of a GET of `url` (a 2xx answer; anything else is an error).
    ///
    /// # Errors
    ///
    /// A [`FetchError`] when the body cannot be had now.
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError>;
}

#[async_trait::async_trait]
impl<F: CertificateFetcher + ?Sized> CertificateFetcher for Arc<F> {
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        (**self).fetch(url).await
    }
}

/// The default [`CertificateFetcher`]: reqwest with rustls, `https` only, no
/// redirects, a 10 s timeout and at most [`MAX_CERTIFICATE_LEN`] bytes read.
#[cfg(feature = "sns-reqwest")]
#[derive(Debug, Clone)]
pub struct ReqwestFetcher {
    client: reqwest::Client,
}

#[cfg(feature = "sns-reqwest")]
impl ReqwestFetcher {
    /// A fetcher with its own client.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] when the TLS client cannot be built.
    pub fn new() -> Result<Self, ConfigError> {
        let client = Self::client_builder()
            .build()
            .map_err(|_| ConfigError::Setting("the HTTPS client cannot be built"))?;
        Ok(Self { client })
    }

    /// The client settings [`new`](Self::new) uses (`https` only, no
    /// redirects, a 10 s timeout), to add to before
    /// [`with_client`](Self::with_client): a proxy, other root certificates
    /// (`tls_certs_only`, as the tests do with their own CA), DNS overrides.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use webhooks_core::scheme::sns::ReqwestFetcher;
    /// let client = ReqwestFetcher::client_builder()
    ///     .timeout(std::time::Duration::from_secs(3))
    ///     .build()?;
    /// let fetcher = ReqwestFetcher::with_client(client);
    /// # let _ = fetcher; Ok(()) }
    /// ```
    pub fn client_builder() -> reqwest::ClientBuilder {
        // reqwest takes rustls' process default: ring, as every TLS feature.
        crate::tls::use_ring();
        reqwest::Client::builder()
            .https_only(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
    }

    /// A fetcher on your client (proxy, timeouts, roots). Start from
    /// [`client_builder`](Self::client_builder), or keep redirects off and
    /// `https_only` on yourself: a redirect would leave the host [`Sns`](super::Sns)
    /// checked.
    #[must_use]
    pub fn with_client(client: reqwest::Client) -> Self {
        Self { client }
    }
}

#[cfg(feature = "sns-reqwest")]
#[async_trait::async_trait]
impl CertificateFetcher for ReqwestFetcher {
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        let mut response = self
            .client
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(FetchError::new)?;
        if response
            .content_length()
            .is_some_and(|n| n > MAX_CERTIFICATE_LEN as u64)
        {
            return Err(FetchError::new("response too large"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(FetchError::new)? {
            if body.len() + chunk.len() > MAX_CERTIFICATE_LEN {
                return Err(FetchError::new("response too large"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// The RSA key of a certificate, PEM or DER.
pub(super) fn certificate_key(bytes: &[u8]) -> Option<PublicKey> {
    let certificate = if bytes.trim_ascii_start().starts_with(b"-----") {
        Certificate::from_pem(bytes).ok()?
    } else {
        Certificate::from_der(bytes).ok()?
    };
    let spki = certificate.tbs_certificate().subject_public_key_info();
    let der = x509_cert::der::Encode::to_der(spki).ok()?;
    let spki = x509_cert::spki::SubjectPublicKeyInfoRef::from_der(&der).ok()?;
    PublicKey::try_from(spki).ok()
}
