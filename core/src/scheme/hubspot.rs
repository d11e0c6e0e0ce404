//! [HubSpot](https://developers.hubspot.com/docs/guides/apps/authentication/validating-requests#validate-the-v3-request-signature)
//! v3 request signatures: `X-HubSpot-Signature-v3: <base64 HMAC-SHA256>` of
//! `POST`, the URL HubSpot called (with the escapes HubSpot decodes
//! decoded), the body and `X-HubSpot-Request-Timestamp` (Unix
//! milliseconds), keyed with the app's client secret; requests older than
//! five minutes are refused.
//!
//! HubSpot sends webhook events in batches with no delivery id in the
//! headers: inside the window a retry can only be told apart by content
//! (each event in the batch has its own `eventId`).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{PublicUrl, RequestHead, Verifier, VerifyError, scheme::HubSpot};
//!
//! let hubspot = HubSpot::builder()
//!     .client_secret("yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy")
//!     .public_url(PublicUrl::base("https://www.example.com")?)
//!     .build()?;
//! let body = br#"[{"eventId":1,"subscriptionType":"contact.creation"}]"#;
//! let headers = hubspot.sign_headers("https://www.example.com/webhook_uri", 1_700_000_000_000, body)?;
//! let head = RequestHead::new("/webhook_uri", &headers);
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_010);
//! assert!(hubspot.verify_head(head, body, now).is_ok());
//! let late = now + Duration::from_secs(300);
//! assert_eq!(hubspot.verify_head(head, body, late), Err(VerifyError::TimestampTooOld));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{Duration, SystemTime};

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::{
    DEFAULT_TOLERANCE, HmacSha256, SecretList, Secrets, check_timestamp, decode_base64_32,
    encode_base64, header, parse_timestamp, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, PublicUrl, Verified, VerifyError};

const SIGNATURE: &str = "x-hubspot-signature-v3";
const TIMESTAMP: &str = "x-hubspot-request-timestamp";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static TIMESTAMP_NAME: HeaderName = HeaderName::from_static(TIMESTAMP);
const SCHEME: &str = "hubspot";
/// HubSpot's webhooks are always POSTed.
const METHOD: &[u8] = b"POST";

/// Verifies [HubSpot](https://developers.hubspot.com/docs/guides/apps/authentication/validating-requests)
/// v3-signed webhook batches.
///
/// Either header missing, a timestamp that is not integer milliseconds, or
/// a signature that is not base64 of 32 bytes is a `400`; a timestamp more
/// than the tolerance (five minutes) away, or a signature matching no
/// client secret, a `401`.
#[derive(Clone)]
pub struct HubSpot {
    secrets: Secrets,
    public_url: PublicUrl,
    tolerance: Duration,
}

debug_fields!(HubSpot: secrets, public_url, tolerance);

fn feed(mac: &mut HmacSha256, url: &str, body: &[u8], timestamp: &[u8]) {
    mac.update(METHOD);
    mac.update(url.as_bytes());
    mac.update(body);
    mac.update(timestamp);
}

/// The URL with the escapes HubSpot decodes before signing decoded:
/// `%3A : %2F / %3F ? %40 @ %21 ! %24 $ %27 ' %28 ( %29 ) %2A * %2C , %3B ;`.
fn decoded_url(url: &str) -> std::borrow::Cow<'_, str> {
    if !url.contains('%') {
        return url.into();
    }
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let escape = rest.get(i + 1..i + 3).map(str::to_ascii_uppercase);
        let decoded = match escape.as_deref() {
            Some("3A") => Some(':'),
            Some("2F") => Some('/'),
            Some("3F") => Some('?'),
            Some("40") => Some('@'),
            Some("21") => Some('!'),
            Some("24") => Some('$'),
            Some("27") => Some('\''),
            Some("28") => Some('('),
            Some("29") => Some(')'),
            Some("2A") => Some('*'),
            Some("2C") => Some(','),
            Some("3B") => Some(';'),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[i + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out.into()
}

impl HubSpot {
    /// A builder: add the client secret(s) and the [`PublicUrl`].
    pub fn builder() -> HubSpotBuilder {
        HubSpotBuilder::default()
    }

    /// The `X-HubSpot-Signature-v3` HubSpot would send for a POST to `url`
    /// at `timestamp_ms`, signed with the first secret.
    #[must_use]
    pub fn sign(&self, url: &str, timestamp_ms: u64, body: &[u8]) -> String {
        let ts = timestamp_ms.to_string();
        let url = decoded_url(url);
        encode_base64(&self.secrets.sign(|m| feed(m, &url, body, ts.as_bytes())))
    }

    /// The headers HubSpot would send: the signature and the timestamp.
    ///
    /// # Errors
    ///
    /// Never in practice; both are always valid header values.
    pub fn sign_headers(
        &self,
        url: &str,
        timestamp_ms: u64,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        signed_headers([
            (SIGNATURE, &self.sign(url, timestamp_ms, body), "signature"),
            (TIMESTAMP, &timestamp_ms.to_string(), "timestamp"),
        ])
    }

    /// Verifies a POST to `url`, the full URL HubSpot called.
    ///
    /// # Errors
    ///
    /// As [`Verifier::verify`](crate::Verifier::verify).
    pub fn verify_url(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let value = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        let signature = decode_base64_32(value.trim())
            .ok_or(VerifyError::malformed(SIGNATURE, "not base64 of 32 bytes"))?;
        let raw = header(headers, &TIMESTAMP_NAME, TIMESTAMP)?.trim();
        let timestamp = parse_timestamp(TIMESTAMP, raw)? / 1000;
        check_timestamp(timestamp, now, self.tolerance)?;
        let url = decoded_url(url);
        let index = (self.secrets)
            .first_match(&signature, |m| feed(m, &url, body, raw.as_bytes()))
            .ok_or(VerifyError::NoMatchingSignature)?;
        Ok(Verified {
            scheme: SCHEME,
            id: None,
            timestamp: Some(timestamp),
            event_type: None,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
        })
    }
}

url_signing_verifier!(HubSpot);

/// Builds a [`HubSpot`] verifier.
#[derive(Default)]
#[must_use]
pub struct HubSpotBuilder {
    secrets: SecretList,
    public_url: Option<PublicUrl>,
    tolerance: Option<Duration>,
}

debug_fields!(HubSpotBuilder: secrets, public_url, tolerance);

impl HubSpotBuilder {
    /// Adds an app client secret, used as the bytes given.
    pub fn client_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref());
        self
    }

    /// Adds several client secrets, in order.
    pub fn client_secrets<I>(self, secrets: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        secrets.into_iter().fold(self, Self::client_secret)
    }

    /// How to rebuild the URL HubSpot called (required).
    pub fn public_url(mut self, public_url: PublicUrl) -> Self {
        self.public_url = Some(public_url);
        self
    }

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets,
    /// [`ConfigError::NoKeys`] when none was added, [`ConfigError::Setting`]
    /// without a public URL.
    pub fn build(self) -> Result<HubSpot, ConfigError> {
        Ok(HubSpot {
            secrets: self.secrets.finish()?,
            public_url: self.public_url.ok_or(ConfigError::Setting(
                "public_url is required: HubSpot signs the URL it called",
            ))?,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::decoded_url;

    #[test]
    fn only_the_listed_escapes_are_decoded() {
        assert_eq!(
            decoded_url("https://a.com/p%3Ax?q=%2f%20%40%zz%"),
            "https://a.com/p:x?q=/%20@%zz%"
        );
    }
}
