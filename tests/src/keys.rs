//! The fixed secrets and keys of the test apps, and signing helpers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use webhooks_core::ConfigError;
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::scheme::standard::Signer;
use webhooks_core::scheme::tenant::{KeyLookup, LookupError, Secret, TenantVerifier};

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
/// The Shopify route's client secret.
pub const SHOPIFY_SECRET: &str = "shopify-client-secret";
/// Tenant `acme`'s secret on the per-tenant route.
pub const TENANT_A_SECRET: &str = "whsec_dGVuYW50LWEtc2VjcmV0LWZvci10aGUtdGVzdHM=";
/// Tenant `globex`'s secret on the per-tenant route.
pub const TENANT_B_SECRET: &str = "whsec_dGVuYW50LWItc2VjcmV0LWZvci10aGUtdGVzdHM=";

/// The per-tenant route's secrets: `acme` and `globex`, each its own.
struct Tenants;

#[async_trait::async_trait]
impl KeyLookup for Tenants {
    async fn secrets(&self, tenant: &str) -> Result<Option<Vec<Secret>>, LookupError> {
        Ok(match tenant {
            "acme" => Some(vec![TENANT_A_SECRET.into()]),
            "globex" => Some(vec![TENANT_B_SECRET.into()]),
            _ => None,
        })
    }
}

/// The per-tenant route's verifier: Standard Webhooks with the secret of the
/// tenant named by path segment 1 (`/tenants/{tenant}/hook`).
///
/// # Errors
///
/// Never with these constants.
pub fn tenants() -> Result<TenantVerifier, ConfigError> {
    TenantVerifier::builder(Tenants, |secrets: &[Secret]| {
        (secrets.iter())
            .fold(StandardWebhooks::builder(), |b, s| b.secret(s))
            .build()
    })
    .tenant_from_path_segment(1)
    .build()
}

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
