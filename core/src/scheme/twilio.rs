//! [Twilio](https://www.twilio.com/docs/usage/webhooks/webhooks-security#validating-signatures-from-twilio)
//! request validation: `X-Twilio-Signature: <base64 HMAC-SHA1>` of the full
//! URL Twilio called followed by the form parameters sorted by name, each
//! name then value; for a JSON body, of the URL alone, which carries the
//! body's hex SHA-256 in its `bodySHA256` query parameter. Keyed with the
//! account's auth token.
//!
//! The URL is rebuilt with a [`PublicUrl`]: Twilio signs what it called,
//! not what a proxy forwarded. As Twilio's own validators do, the URL is
//! also tried with the default port added (`:443`/`:80`) or, when it has
//! one, removed. Twilio signs no timestamp: [`Verified::id`] is
//! `I-Twilio-Idempotency-Token`, for the pipeline's deduplication.
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{PublicUrl, RequestHead, Verifier, VerifyError, scheme::Twilio};
//!
//! let twilio = Twilio::builder()
//!     .auth_token("12345")
//!     .public_url(PublicUrl::base("https://mycompany.com")?)
//!     .build()?;
//! let body = b"CallSid=CA1234567890ABCDE&Digits=1234";
//! let headers = twilio.sign_headers("https://mycompany.com/voice?foo=1", body)?;
//! let head = RequestHead::from_path_and_query("/voice?foo=1", &headers);
//! assert!(twilio.verify_head(head, body, SystemTime::now()).is_ok());
//!
//! let elsewhere = RequestHead::from_path_and_query("/voice?foo=2", &headers);
//! assert_eq!(
//!     twilio.verify_head(elsewhere, body, SystemTime::now()),
//!     Err(VerifyError::NoMatchingSignature)
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::SystemTime;

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};
use sha2::{Digest as _, Sha256};

use super::credential::{self, OtherCredential};
use super::provider::{FormParams, HmacSha1, MAX_MAC, decode_base64_into, sorted_form_params};
use super::{
    SecretList, Secrets, ct_eq, encode_base64, encode_hex, header, optional_header, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, PublicUrl, Verified, VerifyError};

const SIGNATURE: &str = "x-twilio-signature";
const IDEMPOTENCY: &str = "i-twilio-idempotency-token";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static IDEMPOTENCY_NAME: HeaderName = HeaderName::from_static(IDEMPOTENCY);
const SCHEME: &str = "twilio";

/// Verifies [Twilio](https://www.twilio.com/docs/usage/webhooks/webhooks-security)
/// webhooks (status callbacks, incoming messages and calls…).
///
/// `X-Twilio-Signature` missing or not base64 of 20 bytes is a `400`; a
/// form body that cannot be decoded is a `400`; a signature matching no
/// auth token, or a JSON body whose SHA-256 is not the URL's `bodySHA256`,
/// is a `401`.
#[derive(Clone)]
pub struct Twilio {
    secrets: Secrets<HmacSha1>,
    public_url: PublicUrl,
}

debug_fields!(Twilio: secrets, public_url);

/// What Twilio signed after the URL.
enum Params {
    /// A JSON body: nothing; its digest is in the URL.
    None,
    /// A form body, decoded and sorted.
    Form(FormParams),
}

fn feed(mac: &mut HmacSha1, url: &str, params: &Params) {
    mac.update(url.as_bytes());
    if let Params::Form(pairs) = params {
        for (name, value) in pairs.iter() {
            mac.update(name.as_bytes());
            mac.update(value.as_bytes());
        }
    }
}

/// The value of the `bodySHA256` query parameter, if the URL has one.
fn body_sha256(url: &str) -> Option<&str> {
    let query = url.split_once('?')?.1;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("bodySHA256="))
}

/// The URL as given and with its port toggled: removed when present, the
/// scheme's default added when absent (Twilio's SDKs accept either). User
/// info (`user:pass@`) is kept and its colon is not a port separator, as in
/// twilio-node's `addPort` (`src/webhooks/webhooks.ts`).
fn with_port_toggled(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, host_port) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let host_end = host_port.rfind(']').map_or(0, |i| i + 1);
    match host_port[host_end..].rfind(':') {
        Some(colon) => {
            let host = &host_port[..host_end + colon];
            Some(format!("{scheme}://{userinfo}{host}{tail}"))
        }
        None => {
            let port = match scheme {
                "https" => 443,
                "http" => 80,
                _ => return None,
            };
            Some(format!("{scheme}://{authority}:{port}{tail}"))
        }
    }
}

impl Twilio {
    /// A builder: add the auth token(s) and the [`PublicUrl`].
    pub fn builder() -> TwilioBuilder {
        TwilioBuilder::default()
    }

    fn params(url: &str, body: &[u8]) -> Result<Params, VerifyError> {
        match body_sha256(url) {
            Some(_) => Ok(Params::None),
            None => sorted_form_params(body)
                .map(Params::Form)
                .ok_or(VerifyError::malformed(
                    "content-type",
                    "body is not form-encoded",
                )),
        }
    }

    /// The `X-Twilio-Signature` Twilio would send for a request to `url`
    /// with `body`, signed with the first auth token. With a `bodySHA256`
    /// query parameter the body is not signed (put its digest there, see
    /// [`body_sha256_hex`](Self::body_sha256_hex)).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when a form body cannot be decoded.
    pub fn sign(&self, url: &str, body: &[u8]) -> Result<String, ConfigError> {
        let params = Self::params(url, body).map_err(|_| ConfigError::Invalid {
            what: "body",
            reason: "not form-encoded",
        })?;
        Ok(encode_base64(&self.secrets.sign(|m| feed(m, url, &params))))
    }

    /// The hex SHA-256 of a JSON body, for the `bodySHA256` query parameter.
    #[must_use]
    pub fn body_sha256_hex(body: &[u8]) -> String {
        encode_hex(&Sha256::digest(body))
    }

    /// The headers Twilio would send for a request to `url`.
    ///
    /// # Errors
    ///
    /// As [`sign`](Self::sign).
    pub fn sign_headers(&self, url: &str, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(url, body)?, "signature")])
    }

    /// Verifies a request to `url`, the full URL Twilio called.
    ///
    /// # Errors
    ///
    /// As [`Verifier::verify`](crate::Verifier::verify).
    pub fn verify_url(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let value = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        let mut signature = [0u8; MAX_MAC];
        let signature = match decode_base64_into(value.trim(), &mut signature) {
            Some(20) => &signature[..20],
            _ => return Err(VerifyError::malformed(SIGNATURE, "not base64 of 20 bytes")),
        };
        let params = Self::params(url, body)?;
        let matches = |url: &str| {
            self.secrets
                .first_match(signature, |m| feed(m, url, &params))
        };
        // The URL with its port toggled is built only when the URL as given fails.
        let index = matches(url)
            .or_else(|| with_port_toggled(url).and_then(|toggled| matches(&toggled)))
            .ok_or(VerifyError::NoMatchingSignature)?;
        if let Some(expected) = body_sha256(url) {
            let actual = Self::body_sha256_hex(body);
            if !ct_eq(actual.as_bytes(), expected.to_ascii_lowercase().as_bytes()) {
                return Err(VerifyError::NoMatchingSignature);
            }
        }
        Ok(Verified {
            scheme: SCHEME,
            id: optional_header(headers, &IDEMPOTENCY_NAME, IDEMPOTENCY)?.map(str::to_owned),
            timestamp: None,
            event_type: None,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
        })
    }
}

url_signing_verifier!(Twilio);

/// Builds a [`Twilio`] verifier.
#[derive(Default)]
#[must_use]
pub struct TwilioBuilder {
    secrets: SecretList<HmacSha1>,
    public_url: Option<PublicUrl>,
}

debug_fields!(TwilioBuilder: secrets, public_url);

/// A SID: two letters and 32 hex digits.
const SID_LEN: usize = 34;

/// Twilio's identifiers that are pasted where the Auth Token belongs.
const SIDS: &[OtherCredential] = &[
    OtherCredential {
        prefixes: &["AC"],
        hex_len: Some(SID_LEN),
        reason: "this is a Twilio Account SID (AC...), not the Auth Token: use \
                 the account's Auth Token (Console > Account Info)",
    },
    OtherCredential {
        prefixes: &["SK"],
        hex_len: Some(SID_LEN),
        reason: "this is a Twilio API key SID (SK...), not the Auth Token: Twilio \
                 signs requests with the account's Auth Token (Console > Account Info)",
    },
];

impl TwilioBuilder {
    /// Adds an auth token (the primary, or the secondary during a rotation).
    ///
    /// An Account SID or an API key SID (`AC`/`SK` and 32 hex digits, Twilio's
    /// [SID format](https://www.twilio.com/docs/glossary/what-is-a-sid)) is
    /// refused: Twilio signs requests with the account's Auth Token.
    pub fn auth_token(mut self, token: impl AsRef<[u8]>) -> Self {
        let token = token.as_ref();
        match credential::refuse(token, SIDS) {
            Ok(()) => self.secrets.push(token),
            Err(e) => self.secrets.fail(e),
        }
        self
    }

    /// Adds several auth tokens, in order.
    pub fn auth_tokens<I>(self, tokens: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        tokens.into_iter().fold(self, Self::auth_token)
    }

    /// How to rebuild the URL Twilio called (required).
    pub fn public_url(mut self, public_url: PublicUrl) -> Self {
        self.public_url = Some(public_url);
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding tokens,
    /// [`ConfigError::NoKeys`] when none was added, [`ConfigError::Setting`]
    /// without a public URL.
    pub fn build(self) -> Result<Twilio, ConfigError> {
        Ok(Twilio {
            secrets: self.secrets.finish()?,
            public_url: self.public_url.ok_or(ConfigError::Setting(
                "public_url is required: Twilio signs the URL it called",
            ))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_toggle() {
        let t = |u| with_port_toggled(u).unwrap();
        assert_eq!(t("https://a.com/p?q"), "https://a.com:443/p?q");
        assert_eq!(t("http://a.com"), "http://a.com:80");
        assert_eq!(t("https://a.com:1234/p"), "https://a.com/p");
        assert_eq!(t("https://[::1]:8443/p"), "https://[::1]/p");
        assert_eq!(t("https://[::1]/p"), "https://[::1]:443/p");
        assert_eq!(t("https://u:p@a.com/p"), "https://u:p@a.com:443/p");
        assert_eq!(t("https://u:p@a.com:8443/p"), "https://u:p@a.com/p");
        assert_eq!(t("https://u@a.com?x"), "https://u@a.com:443?x");
        assert_eq!(body_sha256("https://a/p?x=1&bodySHA256=ab"), Some("ab"));
        assert_eq!(body_sha256("https://a/p?x=1"), None);
    }
}
