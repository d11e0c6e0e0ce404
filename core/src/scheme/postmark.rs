//! [Postmark](https://postmarkapp.com/developer/webhooks/webhooks-overview)
//! webhooks: HTTP Basic credentials you put in the webhook's URL
//! (`https://user:password@example.com/webhooks/postmark`).
//!
//! Postmark signs nothing: the credentials are the only proof of origin, and
//! there is **no replay protection** beyond deduplication. [`Verified::id`] is
//! built from the body (`RecordType`, `MessageID` and the event's time), so
//! that the receive pipeline's dedup turns a replayed or retried event away;
//! keep it on.
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{MatchedKey, Verifier, VerifyError, scheme::Postmark};
//!
//! // Rotating the password: both are accepted while Postmark's URL is updated.
//! let postmark = Postmark::builder()
//!     .credential("postmark", "new-password")
//!     .credential("postmark", "old-password")
//!     .build()?;
//! let body = br#"{"RecordType":"Delivery","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","DeliveredAt":"2024-01-02T03:04:05Z"}"#;
//! let headers = Postmark::new("postmark", "old-password")?.sign_headers()?;
//!
//! let verified = postmark.verify(&headers, body, SystemTime::now())?;
//! assert_eq!(verified.matched_key, MatchedKey::Secret(1));
//! assert_eq!(verified.event_type.as_deref(), Some("Delivery"));
//! assert_eq!(
//!     verified.id.as_deref(),
//!     Some("Delivery:883953f4-6105-42a2-a16a-77a8eac79483:2024-01-02T03:04:05Z")
//! );
//!
//! let stranger = Postmark::new("postmark", "guess")?.sign_headers()?;
//! assert_eq!(postmark.verify(&stranger, body, SystemTime::now()), Err(VerifyError::NoMatchingSignature));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::time::SystemTime;
use zeroize::{Zeroize as _, Zeroizing};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use http::{HeaderMap, HeaderName};
use sha2::{Digest as _, Sha256};

use super::{ct_eq, encode_base64, header, signed_headers};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const AUTHORIZATION: &str = "authorization";
/// The same name, parsed once (see [`header`]).
static AUTHORIZATION_NAME: HeaderName = HeaderName::from_static(AUTHORIZATION);
const SCHEME: &str = "postmark";
/// The longest `Authorization` value read: credentials are short, and a huge
/// header must not cost a large decode.
const MAX_AUTHORIZATION_LEN: usize = 1024;
/// What base64 of [`MAX_AUTHORIZATION_LEN`] characters decodes to, at most.
const MAX_DECODED_LEN: usize = MAX_AUTHORIZATION_LEN / 4 * 3;

/// One configured `user:password`, kept as the SHA-256 digest of that text
/// so that the comparison takes the same time whatever the lengths. The
/// user holds no `:` (the builder refuses it), so the text names the pair
/// exactly: one digest compares both. `Debug` is not derived: nothing of it
/// is ever printed.
#[derive(Clone)]
struct Credential {
    digest: [u8; 32],
}

/// The digest stands for the credential: wiped on drop.
impl Drop for Credential {
    fn drop(&mut self) {
        self.digest.zeroize();
    }
}

impl zeroize::ZeroizeOnDrop for Credential {}

impl Credential {
    fn new(user: &str, password: &str) -> Self {
        let mut hash = Sha256::new();
        hash.update(user.as_bytes());
        hash.update(b":");
        hash.update(password.as_bytes());
        Self {
            digest: hash.finalize().into(),
        }
    }

    /// Whether the presented `user:password` (already digested) is this
    /// credential, compared in constant time.
    fn matches(&self, digest: &[u8; 32]) -> bool {
        ct_eq(&self.digest, digest)
    }
}

/// Verifies [Postmark](https://postmarkapp.com/developer/webhooks/webhooks-overview)
/// webhooks by their HTTP Basic credentials.
///
/// * header `Authorization: Basic <base64 of user:password>`; missing is a
///   `400`, not `Basic` or not decodable is a `400`, unknown credentials a `401`;
/// * each configured credential is compared, user and password, in constant
///   time (as one SHA-256 digest of `user:password`, so lengths do not show either);
///   [`MatchedKey::Secret`] is the index of the credential that matched;
/// * no signature, no timestamp: **no replay window**. A replay is stopped
///   only by deduplication on [`Verified::id`], which is
///   `{RecordType}:{MessageID}:{time}` where `time` is the first of
///   `ReceivedAt`, `DeliveredAt`, `BouncedAt` and `ChangedAt` present (each
///   open or click of a message is its own event), `{RecordType}:{MessageID}`
///   without one, `MessageID` alone for inbound messages, and `None` (set
///   [`ReceiverBuilder::dedup_key`](crate::ReceiverBuilder::dedup_key)) when
///   the body has no `MessageID`;
/// * [`Verified::event_type`] is the body's `RecordType` (`Delivery`,
///   `Bounce`, `Open`, `Click`, `SpamComplaint`, `SubscriptionChange`);
/// * deduplication is on that id ([`Identity::SignedId`]: nothing is signed,
///   but whoever holds the credentials can send anything anyway; the id is
///   what makes Postmark's retries duplicates), or on the body's bytes
///   ([`Identity::Content`]) when it has no `MessageID`.
#[derive(Clone)]
pub struct Postmark {
    credentials: Vec<Credential>,
    /// `user:password` of the first credential, for [`Postmark::sign`];
    /// wiped on drop.
    first: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for Postmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postmark")
            .field("credentials", &self.credentials.len())
            .finish()
    }
}

impl Postmark {
    /// A verifier accepting one user and password.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when either is empty or the user contains `:`.
    pub fn new(user: impl AsRef<str>, password: impl AsRef<str>) -> Result<Self, ConfigError> {
        Self::builder().credential(user, password).build()
    }

    /// A builder for several credentials (rotation).
    pub fn builder() -> PostmarkBuilder {
        PostmarkBuilder::default()
    }

    /// The `Authorization` value Postmark sends for the first credential.
    #[must_use]
    pub fn sign(&self) -> String {
        format!("Basic {}", encode_base64(&self.first))
    }

    /// The headers Postmark sends for the first credential.
    ///
    /// # Errors
    ///
    /// Never in practice; the `Result` matches the other schemes' helpers.
    pub fn sign_headers(&self) -> Result<HeaderMap, ConfigError> {
        signed_headers([(AUTHORIZATION, &self.sign(), "credential")])
    }
}

/// The decoded `user:password` of a `Basic` credential, written into `out`
/// (a value within [`MAX_AUTHORIZATION_LEN`] decodes to at most 768 bytes).
fn basic_credentials<'o>(
    value: &str,
    out: &'o mut [u8; MAX_DECODED_LEN],
) -> Result<&'o [u8], VerifyError> {
    if value.len() > MAX_AUTHORIZATION_LEN {
        return Err(VerifyError::malformed(AUTHORIZATION, "too long"));
    }
    let value = value.trim();
    let (scheme, encoded) = value.split_once(' ').ok_or(VerifyError::malformed(
        AUTHORIZATION,
        "expected Basic <base64>",
    ))?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(VerifyError::malformed(
            AUTHORIZATION,
            "expected Basic <base64>",
        ));
    }
    let n = B64
        .decode_slice(encoded.trim(), out)
        .map_err(|_| VerifyError::malformed(AUTHORIZATION, "not base64"))?;
    Ok(&out[..n])
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct EventEnvelope<'a> {
    #[serde(borrow, default)]
    record_type: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "MessageID")]
    message_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    received_at: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delivered_at: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    bounced_at: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    changed_at: Option<Cow<'a, str>>,
}

fn non_empty(s: Option<Cow<'_, str>>) -> Option<Cow<'_, str>> {
    s.filter(|s| !s.is_empty())
}

/// The delivery id and event type of a Postmark body; `(None, None)` when it
/// is not a JSON object.
fn event_fields(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(event) = serde_json::from_slice::<EventEnvelope<'_>>(body) else {
        return (None, None);
    };
    let kind = non_empty(event.record_type);
    let message = non_empty(event.message_id);
    let when = [
        event.received_at,
        event.delivered_at,
        event.bounced_at,
        event.changed_at,
    ]
    .into_iter()
    .find_map(non_empty);
    let id = match (&kind, message, when) {
        (Some(kind), Some(message), Some(when)) => Some(format!("{kind}:{message}:{when}")),
        (Some(kind), Some(message), None) => Some(format!("{kind}:{message}")),
        (None, Some(message), _) => Some(message.into_owned()),
        (_, None, _) => None,
    };
    (id, kind.map(Cow::into_owned))
}

impl Verifier for Postmark {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let mut buf = [0u8; MAX_DECODED_LEN];
        let decoded = basic_credentials(
            header(headers, &AUTHORIZATION_NAME, AUTHORIZATION)?,
            &mut buf,
        )?;
        if !decoded.contains(&b':') {
            return Err(VerifyError::malformed(
                AUTHORIZATION,
                "expected user:password",
            ));
        }
        let digest: [u8; 32] = Sha256::digest(decoded).into();
        // Every credential is compared, so timing does not say which matched.
        let index = self
            .credentials
            .iter()
            .enumerate()
            .fold(None, |found, (i, c)| {
                let matched = c.matches(&digest);
                found.or(matched.then_some(i))
            })
            .ok_or(VerifyError::NoMatchingSignature)?;
        let (id, event_type) = event_fields(body);
        // Without an id, an identical retry is still recognised by its bytes.
        let identity = if id.is_some() {
            Identity::SignedId
        } else {
            Identity::Content
        };
        Ok(Verified {
            scheme: SCHEME,
            id,
            timestamp: None,
            event_type,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity,
        })
    }
}

/// Builds a [`Postmark`] verifier.
///
/// Errors in any credential are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct PostmarkBuilder {
    credentials: Vec<Credential>,
    first: Option<Zeroizing<Vec<u8>>>,
    error: Option<ConfigError>,
}

impl std::fmt::Debug for PostmarkBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostmarkBuilder")
            .field("credentials", &self.credentials.len())
            .finish_non_exhaustive()
    }
}

impl PostmarkBuilder {
    /// Adds a user and password Postmark may send (the first one is what
    /// [`Postmark::sign`] sends).
    pub fn credential(mut self, user: impl AsRef<str>, password: impl AsRef<str>) -> Self {
        let (user, password) = (user.as_ref(), password.as_ref());
        let error = if user.is_empty() {
            Some(ConfigError::Empty("user"))
        } else if password.is_empty() {
            Some(ConfigError::Empty("password"))
        } else if user.contains(':') {
            Some(ConfigError::Invalid {
                what: "user",
                reason: "contains ':', which Basic credentials cannot carry",
            })
        } else {
            None
        };
        if let Some(error) = error {
            self.error.get_or_insert(error);
            return self;
        }
        self.credentials.push(Credential::new(user, password));
        self.first
            .get_or_insert_with(|| Zeroizing::new(format!("{user}:{password}").into_bytes()));
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding credentials, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Postmark, ConfigError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let first = self.first.ok_or(ConfigError::NoKeys)?;
        Ok(Postmark {
            credentials: self.credentials,
            first,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_record_type() {
        assert_eq!(
            event_fields(
                br#"{"RecordType":"Open","MessageID":"m","ReceivedAt":"t1","FirstOpen":true}"#
            ),
            (Some("Open:m:t1".into()), Some("Open".into()))
        );
        assert_eq!(
            event_fields(br#"{"RecordType":"Bounce","MessageID":"m","BouncedAt":"t2","ID":42}"#),
            (Some("Bounce:m:t2".into()), Some("Bounce".into()))
        );
        assert_eq!(
            event_fields(br#"{"RecordType":"Delivery","MessageID":"m"}"#),
            (Some("Delivery:m".into()), Some("Delivery".into()))
        );
        assert_eq!(
            event_fields(br#"{"MessageID":"inbound-1","From":"a@b"}"#),
            (Some("inbound-1".into()), None)
        );
        assert_eq!(
            event_fields(br#"{"RecordType":"Open"}"#),
            (None, Some("Open".into()))
        );
        assert_eq!(event_fields(b"not json"), (None, None));
        assert_eq!(event_fields(br#"{"MessageID":7}"#), (None, None));
    }

    #[test]
    fn basic_parsing() {
        let buf = &mut [0u8; MAX_DECODED_LEN];
        assert_eq!(basic_credentials("Basic dTpw", buf).unwrap(), b"u:p");
        assert_eq!(basic_credentials("basic  dTpw ", buf).unwrap(), b"u:p");
        for bad in ["", "Basic", "Bearer dTpw", "Basic ***", "dTpw"] {
            assert!(
                matches!(
                    basic_credentials(bad, buf),
                    Err(VerifyError::MalformedHeader { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(basic_credentials(&format!("Basic {}", "A".repeat(2000)), buf).is_err());
        // The longest value read decodes within the buffer.
        let longest = format!("Basic {}", "QUFB".repeat((MAX_AUTHORIZATION_LEN - 6) / 4));
        assert!(longest.len() <= MAX_AUTHORIZATION_LEN);
        assert_eq!(
            basic_credentials(&longest, buf).unwrap().len(),
            (MAX_AUTHORIZATION_LEN - 6) / 4 * 3
        );
    }
}
