//! [Slack](https://api.slack.com/authentication/verifying-requests-from-slack)
//! request signatures: `X-Slack-Signature: v0=<hex>` over `v0:{timestamp}:{body}`,
//! with the timestamp in `X-Slack-Request-Timestamp`.
//!
//! Slack puts no delivery id in a header. Events API payloads carry one in the
//! signed body (`event_id`): it is reported as [`Verified::id`], so a retry
//! is a duplicate. Deduplicate on any key of your own with
//! [`ReceiverBuilder::dedup_key`](crate::ReceiverBuilder::dedup_key);
//! slash commands and interactivity payloads are not retried and need none.
//!
//! The `url_verification` request Slack sends when the Events API URL is
//! saved is answered by a receive pipeline itself, with its `challenge`,
//! once verified, in both modes (see [`Handshake`](crate::Handshake)).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Receiver, Verifier, scheme::Slack};
//!
//! // Slack's documented example.
//! let slack = Slack::new("8f742231b10e8888abcd99yyyzzz85a5")?;
//! let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
//! let headers = slack.sign_headers(1531420618, body.as_bytes())?;
//! assert_eq!(
//!     headers["x-slack-signature"],
//!     "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
//! );
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1531420618);
//! assert!(slack.verify(&headers, body.as_bytes(), now).is_ok());
//!
//! // In a receiver: deduplicate Events API retries on the body's event id.
//! let receiver = Receiver::builder(slack).dedup_key_json_pointer("/event_id").build();
//! # let _ = receiver;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{Duration, SystemTime};

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::credential::{self, OtherCredential};
use super::{
    DEFAULT_TOLERANCE, HmacSha256, SecretList, Secrets, check_timestamp, encode_hex, header,
    parse_timestamp, prefixed_hex, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "x-slack-signature";
const TIMESTAMP: &str = "x-slack-request-timestamp";
/// The same names, parsed once (see [`header`]).
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static TIMESTAMP_NAME: HeaderName = HeaderName::from_static(TIMESTAMP);
const SCHEME: &str = "slack";

/// Verifies [Slack](https://api.slack.com/authentication/verifying-requests-from-slack)
/// requests (Events API, slash commands, interactivity).
///
/// * headers `X-Slack-Request-Timestamp` and `X-Slack-Signature: v0=<64 hex digits>`;
/// * signed content `v0:{timestamp}:{body}`, the timestamp exactly as sent;
/// * a two-sided timestamp tolerance, 300 s by default (what Slack recommends);
/// * no delivery id or event type header: [`Verified::id`] is the Events
///   API body's `event_id`, `None` for other payloads.
#[derive(Clone)]
pub struct Slack {
    secrets: Secrets,
    tolerance: Duration,
}

debug_fields!(Slack: secrets, tolerance);

impl Slack {
    /// A verifier with one signing secret and the default tolerance.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the secret is empty.
    pub fn new(signing_secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(signing_secret).build()
    }

    /// A builder for several secrets (rotation) and a custom tolerance.
    pub fn builder() -> SlackBuilder {
        SlackBuilder::default()
    }

    /// The replay window.
    #[must_use]
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// The `X-Slack-Signature` value Slack would send, signed with the first secret.
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        let ts = timestamp.to_string();
        let mac = self.secrets.sign(|mac| feed(mac, &ts, body));
        format!("v0={}", encode_hex(&mac))
    }

    /// The two headers Slack would send, signed with the first secret.
    ///
    /// # Errors
    ///
    /// Never in practice; the `Result` matches the other schemes' helpers.
    pub fn sign_headers(&self, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([
            (TIMESTAMP, &timestamp.to_string(), "timestamp"),
            (SIGNATURE, &self.sign(timestamp, body), "signature"),
        ])
    }
}

/// Writes `v0:{timestamp}:{body}` into the MAC, without concatenating.
fn feed(mac: &mut HmacSha256, timestamp: &str, body: &[u8]) {
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
}

impl Verifier for Slack {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let signature = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        let ts_raw = header(headers, &TIMESTAMP_NAME, TIMESTAMP)?;
        let timestamp = parse_timestamp(TIMESTAMP, ts_raw)?;
        let signature = prefixed_hex::<32>(
            signature,
            "v0=",
            SIGNATURE,
            "expected v0=<hex>",
            "not 64 hex digits",
        )?;
        check_timestamp(timestamp, now, self.tolerance)?;
        let ts_text = ts_raw.trim();
        let index = (self.secrets)
            .first_match(&signature, |mac| feed(mac, ts_text, body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        Ok(Verified {
            scheme: SCHEME,
            id: event_id(body),
            timestamp: Some(timestamp),
            event_type: None,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::SignedId,
        })
    }

    /// Slack's `url_verification` (sent when the Events API URL is saved):
    /// answered with its `challenge`, as text.
    fn handshake(&self, _: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        #[derive(serde::Deserialize)]
        struct Verification {
            #[serde(rename = "type")]
            kind: String,
            challenge: String,
        }
        let marker = b"\"url_verification\"";
        if body.first() != Some(&b'{') || !body.windows(marker.len()).any(|w| w == marker) {
            return None;
        }
        let verification: Verification = serde_json::from_slice(body).ok()?;
        (verification.kind == "url_verification")
            .then(|| crate::Handshake::text(verification.challenge))
    }
}

/// The Events API's `event_id`, signed with the body; `None` for a body
/// that is not a JSON object with one (slash commands, interactivity).
fn event_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        event_id: Option<String>,
    }
    if body.first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice::<Envelope>(body).ok()?.event_id
}

/// Builds a [`Slack`] verifier.
///
/// Errors in any secret are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct SlackBuilder {
    secrets: SecretList,
    tolerance: Option<Duration>,
}

debug_fields!(SlackBuilder: secrets, tolerance, ..);

/// Slack's token types (bot, user, app-level, workspace, refresh,
/// configuration), none of which signs requests.
const TOKENS: &[OtherCredential] = &[OtherCredential::prefixed(
    &[
        "xoxb-", "xoxp-", "xapp-", "xoxa-", "xoxr-", "xoxe-", "xoxe.",
    ],
    "this is a Slack token, not the signing secret: use the app's Signing \
     Secret (Basic Information > App Credentials)",
)];

impl SlackBuilder {
    /// Adds a signing secret, used as the bytes given.
    ///
    /// A Slack [token](https://docs.slack.dev/authentication/tokens) (`xoxb-…`,
    /// `xoxp-…`, `xapp-…`…) is refused: Slack signs requests with the app's
    /// Signing Secret.
    pub fn secret(mut self, signing_secret: impl AsRef<[u8]>) -> Self {
        let secret = signing_secret.as_ref();
        match credential::refuse(secret, TOKENS) {
            Ok(()) => self.secrets.push(secret),
            Err(e) => self.secrets.fail(e),
        }
        self
    }

    secrets_method!("Adds several signing secrets, in order.", AsRef<[u8]>);

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Slack, ConfigError> {
        Ok(Slack {
            secrets: self.secrets.finish()?,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}
