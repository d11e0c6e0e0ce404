//! Which kept request headers are credentials: the console and the inbox
//! admin API show their values redacted, to admins too.
//!
//! A header is a credential when its name says so ([`is_credential_header`]:
//! `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`, and any
//! name containing `signature`, `hmac`, `token`, `secret`, `auth`,
//! `password`, `api-key`, `apikey`, `credential` or `session`), or when it
//! was named explicitly ([`Redaction::header`]): every header your verifier
//! reads ([`Redaction::verifier`], through
//! [`RequestVerifier::credential_headers`]), or any other.
//!
//! ```
//! use webhooks_core::redact::{Redaction, is_credential_header};
//!
//! assert!(is_credential_header("X-Shopify-Hmac-Sha256"));
//! assert!(!is_credential_header("X-Shopify-Topic"));
//! let redaction = Redaction::new().header(http::HeaderName::from_static("x-digest"));
//! assert!(redaction.is_redacted("X-Digest"));
//! assert_eq!(Redaction::mask("hunter2"), "redacted (7 bytes)");
//! ```

use http::HeaderName;

use crate::RequestVerifier;

/// Parts of a header name that mark its value as a credential.
const CREDENTIAL_PARTS: &[&str] = &[
    "signature",
    "hmac",
    "auth",
    "cookie",
    "token",
    "secret",
    "password",
    "api-key",
    "apikey",
    "credential",
    "session",
];

/// Whether a header named `name` (any case; `_` read as `-`) carries a
/// credential by its name alone: see the [module](self).
#[must_use]
pub fn is_credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    CREDENTIAL_PARTS.iter().any(|part| name.contains(part))
}

/// The headers shown redacted: those [`is_credential_header`] names, and
/// the ones configured here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redaction {
    extra: Vec<HeaderName>,
}

impl Redaction {
    /// Only the names [`is_credential_header`] recognises.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Redacts the header `name` too.
    #[must_use]
    pub fn header(mut self, name: HeaderName) -> Self {
        if !self.extra.contains(&name) {
            self.extra.push(name);
        }
        self
    }

    /// Redacts each of `names` too.
    #[must_use]
    pub fn headers(self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        names.into_iter().fold(self, Self::header)
    }

    /// Redacts every header `verifier` reads a credential from
    /// ([`RequestVerifier::credential_headers`]): a generic HMAC scheme's
    /// configured signature header, say, whatever its name.
    #[must_use]
    pub fn verifier(self, verifier: &(impl RequestVerifier + ?Sized)) -> Self {
        self.headers(verifier.credential_headers())
    }

    /// Whether the header `name` is shown redacted.
    #[must_use]
    pub fn is_redacted(&self, name: &str) -> bool {
        is_credential_header(name) || self.is_configured(name)
    }

    /// Whether `name` is one of the names configured here (not recognised
    /// by [`is_credential_header`] alone).
    pub(crate) fn is_configured(&self, name: &str) -> bool {
        self.extra
            .iter()
            .any(|extra| extra.as_str().eq_ignore_ascii_case(name))
    }

    /// What is shown instead of a redacted value: its length only.
    #[must_use]
    pub fn mask(value: &str) -> String {
        format!("redacted ({} bytes)", value.len())
    }

    /// `headers` as shown: each redacted value replaced by its [`mask`](Self::mask).
    #[must_use]
    pub fn apply(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(name, value)| {
                let shown = if self.is_redacted(name) {
                    Self::mask(value)
                } else {
                    value.clone()
                };
                (name.clone(), shown)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35, item 9: every built-in scheme's credential header, and the
    /// generic credentials, are redacted by name.
    #[test]
    fn credential_names() {
        for name in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "Set-Cookie",
            "X-Api-Key",
            "X_API_KEY",
            "X-Auth-Token",
            // The built-in schemes' signature and token headers.
            "webhook-signature",
            "svix-signature",
            "paddle-signature",
            "x-slack-signature",
            "x-twilio-signature",
            "x-square-hmacsha256-signature",
            "linear-signature",
            "stripe-signature",
            "x-hubspot-signature-v3",
            "x-gitlab-token",
            "x-zm-signature",
            "x-signature-ed25519",
            "X-Hub-Signature-256",
            "x-hub-signature",
            "x-mandrill-signature",
            "X-Shopify-Hmac-Sha256",
            "typeform-signature",
            "x-twilio-email-event-webhook-signature",
            "x-webhook-secret",
        ] {
            assert!(is_credential_header(name), "{name}");
        }
        for name in [
            "content-type",
            "x-shopify-topic",
            "webhook-id",
            "x-github-event",
            "user-agent",
        ] {
            assert!(!is_credential_header(name), "{name}");
        }
    }

    #[test]
    fn configured_names() {
        let redaction = Redaction::new()
            .header(HeaderName::from_static("x-digest"))
            .headers([HeaderName::from_static("x-digest")]);
        assert_eq!(redaction.extra.len(), 1);
        assert!(redaction.is_redacted("X-DIGEST"));
        assert!(redaction.is_configured("x-digest"));
        assert!(!redaction.is_configured("authorization"));
        assert!(redaction.is_redacted("authorization"));
        let shown = redaction.apply(&[
            ("x-digest".into(), "abc".into()),
            ("x-request-id".into(), "r1".into()),
        ]);
        assert_eq!(
            shown,
            [
                ("x-digest".to_owned(), "redacted (3 bytes)".to_owned()),
                ("x-request-id".to_owned(), "r1".to_owned()),
            ]
        );
    }
}
