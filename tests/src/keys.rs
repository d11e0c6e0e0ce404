//! The fixed secrets and keys of the test apps, and signing helpers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use webhooks_core::ConfigError;
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::scheme::standard::Signer;

/// The current secret.
pub const NEW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The secret being rotated out.
pub const OLD_SECRET: &str = "whsec_b2xkLXNlY3JldC1iZWluZy1yb3RhdGVkLW91dA==";
/// A secret the receiver does not know.
pub const FOREIGN_SECRET: &str = "whsec_Zm9yZWlnbi1zZWNyZXQtbm90LWNvbmZpZ3VyZWQ=";
/// The ed25519 seed of the trusted `v1a` sender (`whsk_` + base64 of 32 bytes).
pub const SIGNING_KEY: &str = "whsk_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";
/// An ed25519 seed whose public key is not trusted.
pub const UNTRUSTED_KEY: &str = "whsk_ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICA=";

/// The GitHub route's secret (GitHub's documentation example).
pub const GITHUB_SECRET: &str = "It's a Secret to Everybody";

/// The apps' verifier: both secrets and the trusted public key.
///
/// # Errors
///
/// Never with these constants.
pub fn verifier() -> Result<StandardWebhooks, ConfigError> {
    let public = Signer::ed25519(SIGNING_KEY)?
        .public_key()
        .ok_or(ConfigError::NoKeys)?;
    StandardWebhooks::builder()
        .secret(NEW_SECRET)
        .secret(OLD_SECRET)
        .public_key(public)
        .tolerance(Duration::from_secs(300))
        .build()
}

/// Now, in Unix seconds.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The Standard Webhooks headers for `body`, signed by `signer` at `timestamp`.
///
/// # Errors
///
/// When `id` cannot be a header value.
pub fn signed(
    signer: &Signer,
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> Result<http::HeaderMap, ConfigError> {
    signer.headers(id, timestamp, body)
}

/// A signer for one of the secrets above.
///
/// # Errors
///
/// Never with these constants.
pub fn hmac(secret: &str) -> Result<Signer, ConfigError> {
    Signer::hmac(secret)
}
