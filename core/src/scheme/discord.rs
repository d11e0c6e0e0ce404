//! [Discord](https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers)
//! interactions: `X-Signature-Ed25519: <hex ed25519 signature of {timestamp}{body}>`
//! with `X-Signature-Timestamp`, checked against the application's public
//! key (hex, from the Developer Portal).
//!
//! **PING.** When the endpoint URL is saved, and from time to time after,
//! Discord sends a `PING` (`{"type":1,…}`) — signed like every interaction,
//! and it also sends badly signed requests on purpose, expecting a `401`.
//! A receive pipeline answers a verified PING itself with `200` and
//! [`Discord::PONG`], in both modes, and neither stores it nor runs the
//! handler (see [`Handshake`](crate::Handshake)); outside one, check with
//! [`Discord::is_ping`]. This verifier already answers the bad ones.
//!
//! [`Verified::id`] is the interaction's `"id"`, [`Verified::event_type`]
//! its `"type"` (`1` PING, `2` APPLICATION_COMMAND…). Interactions must be
//! answered within 3 seconds, in the response.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::Discord};
//!
//! let seed = [7u8; 32]; // the test signer's private key
//! let discord = Discord::new(&Discord::public_key_hex(&seed))?;
//! let ping = br#"{"id":"787053080478613555","type":1,"version":1}"#;
//! let headers = Discord::sign_headers(&seed, 1_700_000_000, ping)?;
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//! let verified = discord.verify(&headers, ping, now)?;
//! assert!(Discord::is_ping(ping));
//! assert_eq!(verified.event_type.as_deref(), Some("1"));
//! assert_eq!(Discord::PONG, r#"{"type":1}"#);
//! assert_eq!(discord.verify(&headers, b"{}", now), Err(VerifyError::NoMatchingSignature));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{Duration, SystemTime};

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use http::{HeaderMap, HeaderName};

use super::provider::{body_fields, decode_hex_into};
use super::{
    DEFAULT_TOLERANCE, check_timestamp, decode_hex, encode_hex, header, parse_timestamp,
    signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "x-signature-ed25519";
const TIMESTAMP: &str = "x-signature-timestamp";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static TIMESTAMP_NAME: HeaderName = HeaderName::from_static(TIMESTAMP);
const SCHEME: &str = "discord";

/// Verifies [Discord](https://discord.com/developers/docs/interactions/overview)
/// interactions.
///
/// * `X-Signature-Ed25519` must be 128 hex digits and `X-Signature-Timestamp`
///   integer Unix seconds (`400` otherwise);
/// * the timestamp within the tolerance (default 300 s; `401` otherwise);
/// * the signature valid (strict ed25519) for one of the public keys
///   (`401` otherwise). Several keys may be configured.
#[derive(Clone)]
pub struct Discord {
    public_keys: Vec<VerifyingKey>,
    tolerance: Duration,
}

impl std::fmt::Debug for Discord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discord")
            .field("public_keys", &self.public_keys.len())
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

impl Discord {
    /// The response body to a PING: a PONG (`200`, `application/json`).
    pub const PONG: &'static str = r#"{"type":1}"#;

    /// A verifier with the application's public key, in hex.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when it is not 64 hex digits of an ed25519 point.
    pub fn new(public_key_hex: &str) -> Result<Self, ConfigError> {
        Self::builder().public_key(public_key_hex).build()
    }

    /// A builder for several public keys and the tolerance.
    pub fn builder() -> DiscordBuilder {
        DiscordBuilder::default()
    }

    /// Whether a (verified) body is a PING, to answer with [`PONG`](Self::PONG).
    #[must_use]
    pub fn is_ping(body: &[u8]) -> bool {
        matches!(body_fields(body, ["type"]), [Some(t)] if t == "1")
    }

    /// The hex public key of the test signer with private key `seed`.
    #[must_use]
    pub fn public_key_hex(seed: &[u8; 32]) -> String {
        encode_hex(SigningKey::from_bytes(seed).verifying_key().as_bytes())
    }

    /// The headers Discord would send, signed by the test signer with
    /// private key `seed` (Discord's own key is not yours to sign with).
    ///
    /// # Errors
    ///
    /// Never in practice; both values are always valid header values.
    pub fn sign_headers(
        seed: &[u8; 32],
        timestamp: u64,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        let ts = timestamp.to_string();
        let signature = SigningKey::from_bytes(seed).sign(&content(&ts, body));
        signed_headers([
            (SIGNATURE, &encode_hex(&signature.to_bytes()), "signature"),
            (TIMESTAMP, &ts, "timestamp"),
        ])
    }
}

/// `{timestamp}{body}` in one piece, as ed25519 needs it.
fn content(timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(timestamp.len() + body.len());
    content.extend_from_slice(timestamp.as_bytes());
    content.extend_from_slice(body);
    content
}

impl Verifier for Discord {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let value = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        let signature = decode_hex::<64>(value.trim())
            .ok_or(VerifyError::malformed(SIGNATURE, "not 128 hex digits"))?;
        let raw = header(headers, &TIMESTAMP_NAME, TIMESTAMP)?.trim();
        let timestamp = parse_timestamp(TIMESTAMP, raw)?;
        check_timestamp(timestamp, now, self.tolerance)?;
        let signature = Signature::from_bytes(&signature);
        let content = content(raw, body);
        let index = (self.public_keys.iter())
            .position(|key| key.verify_strict(&content, &signature).is_ok())
            .ok_or(VerifyError::NoMatchingSignature)?;
        let [id, event_type] = body_fields(body, ["id", "type"]);
        Ok(Verified {
            scheme: SCHEME,
            id,
            timestamp: Some(timestamp),
            event_type,
            matched_key: MatchedKey::PublicKey(index),
            scope: None,
            identity: Identity::SignedId,
        })
    }

    fn handshake(&self, verified: &Verified, _: &[u8]) -> Option<crate::Handshake> {
        (verified.event_type.as_deref() == Some("1")).then(|| crate::Handshake::json(Self::PONG))
    }
}

/// Builds a [`Discord`] verifier.
#[derive(Default)]
#[must_use]
pub struct DiscordBuilder {
    public_keys: Vec<VerifyingKey>,
    error: Option<ConfigError>,
    tolerance: Option<Duration>,
}

impl std::fmt::Debug for DiscordBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordBuilder")
            .field("public_keys", &self.public_keys.len())
            .finish_non_exhaustive()
    }
}

impl DiscordBuilder {
    /// Trusts an application public key, in hex (64 digits).
    pub fn public_key(mut self, public_key_hex: &str) -> Self {
        let mut bytes = [0u8; 32];
        let key = match decode_hex_into(public_key_hex.trim(), &mut bytes) {
            Some(32) => VerifyingKey::from_bytes(&bytes).map_err(|_| "not an ed25519 point"),
            _ => Err("not 64 hex digits"),
        };
        match key {
            Ok(key) => self.public_keys.push(key),
            Err(reason) => {
                self.error.get_or_insert(ConfigError::Invalid {
                    what: "public key",
                    reason,
                });
            }
        }
        self
    }

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding keys, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Discord, ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.public_keys.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        Ok(Discord {
            public_keys: self.public_keys,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}
