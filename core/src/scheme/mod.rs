//! Signature schemes: one file each, all implementing [`Verifier`](crate::Verifier).
//!
//! | scheme | type | signature | signed content | replay window | delivery id | event type |
//! |---|---|---|---|---|---|---|
//! | [Standard Webhooks](https://www.standardwebhooks.com/) v1 (HMAC) and v1a (ed25519), Svix | [`StandardWebhooks`] | `webhook-signature: v1,<base64>` | `{id}.{ts}.{body}` | ±300 s | `webhook-id` | — |
//! | [Stripe](https://docs.stripe.com/webhooks#verify-manually) | [`Stripe`] | `Stripe-Signature: t=…,v1=<hex>` | `{t}.{body}` | ±300 s | body `"id"` | body `"type"` |
//! | [GitHub](https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries) | [`GitHub`] | `X-Hub-Signature-256: sha256=<hex>` | body | — | `X-GitHub-Delivery` | `X-GitHub-Event` |
//! | [Slack](https://api.slack.com/authentication/verifying-requests-from-slack) | [`Slack`] | `X-Slack-Signature: v0=<hex>` | `v0:{ts}:{body}` | ±300 s | — (use [`ReceiverBuilder::dedup_key`](crate::ReceiverBuilder::dedup_key)) | — |
//! | [Shopify](https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-2-validate-the-origin-of-your-webhook-to-ensure-its-coming-from-shopify) | [`Shopify`] | `X-Shopify-Hmac-Sha256: <base64>` | body | — | `X-Shopify-Webhook-Id` | `X-Shopify-Topic` |
//! | [Twilio](https://www.twilio.com/docs/usage/webhooks/webhooks-security) | [`Twilio`] | `X-Twilio-Signature: <base64 HMAC-SHA1>` | URL + sorted form fields, or URL with `bodySHA256` | — | `I-Twilio-Idempotency-Token` | — |
//! | [Square](https://developer.squareup.com/docs/webhooks/step3validate) | [`Square`] | `x-square-hmacsha256-signature: <base64>` | notification URL + body | — | body `"event_id"` | body `"type"` |
//! | [Mandrill](https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/) | [`Mandrill`] | `X-Mandrill-Signature: <base64 HMAC-SHA1>` | URL + sorted POST fields | — | — | — |
//! | [HubSpot](https://developers.hubspot.com/docs/guides/apps/authentication/validating-requests) v3 | [`HubSpot`] | `X-HubSpot-Signature-v3: <base64>` | `POST` + URL + body + timestamp (ms) | ±300 s | — | — |
//! | [Discord](https://discord.com/developers/docs/interactions/overview) | [`Discord`] | `X-Signature-Ed25519: <hex>` | `{ts}{body}`, ed25519 | ±300 s | body `"id"` | body `"type"` |
//! | [GitLab](https://docs.gitlab.com/user/project/integrations/webhooks/) | [`GitLab`] | `X-Gitlab-Token: <token>` | — (a shared token) | — | `Idempotency-Key` / `X-Gitlab-Event-UUID` | `X-Gitlab-Event` |
//! | [Linear](https://linear.app/developers/webhooks) | [`Linear`] | `Linear-Signature: <hex>` | body | ±60 s (body `webhookTimestamp`) | `Linear-Delivery` | `Linear-Event` |
//! | [Zoom](https://developers.zoom.us/docs/api/webhooks/) | [`Zoom`] | `x-zm-signature: v0=<hex>` | `v0:{ts}:{body}` | ±300 s | — | body `"event"` |
//! | [Paddle Billing](https://developer.paddle.com/webhooks/signature-verification) | [`Paddle`] | `Paddle-Signature: ts=…;h1=<hex>` | `{ts}:{body}` | ±5 s | body `"event_id"` | body `"event_type"` |
//! | [Intercom](https://developers.intercom.com/docs/webhooks/webhook-notifications) | [`Intercom`] | `X-Hub-Signature: sha1=<hex>` | body | — | body `"id"` | body `"topic"` |
//! | [Typeform](https://www.typeform.com/developers/webhooks/secure-your-webhooks/) | [`Typeform`] | `Typeform-Signature: sha256=<base64>` | body | — | body `"event_id"` | body `"event_type"` |
//! | any HMAC provider, configured | [`GenericHmac`] | a header or JSON field, optional prefix, hex or base64, SHA-1/256/512 | a template of body, timestamp, URL, headers, JSON fields | configurable | a header | a header |
//! | [SendGrid](https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features) Event Webhook (feature `sendgrid`) | `SendGrid` | `X-Twilio-Email-Event-Webhook-Signature: <base64 DER ECDSA P-256>` | `{ts}{body}` | ±300 s | `sha256:<hex>` of the body | the batch's common `event` |
//! | [Mailgun](https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks#securing-webhooks) | [`Mailgun`] | body `signature.signature` (hex HMAC-SHA256), or form fields | `{timestamp}{token}` (not the event data) | ±300 s | the token (the replay guard) | `event-data.event` (unsigned) |
//! | [Amazon SNS](https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html), SES through it (feature `sns`) | `Sns` | body `Signature` (RSA; `SignatureVersion` 1 SHA-1, 2 SHA-256), certificate from an allowed `SigningCertURL` | the canonical string of the message's fields | — (optional `max_age`) | `MessageId` | `Type` |
//! | [Postmark](https://postmarkapp.com/developer/webhooks/webhooks-overview) | [`Postmark`] | `Authorization: Basic …` (no signature) | — | — | `{RecordType}:{MessageID}:{time}` from the body | `RecordType` |
//! | Resend, Clerk and other [Svix](https://docs.svix.com/receiving/verifying-payloads/how-manual) senders | [`StandardWebhooks`] | `svix-signature: v1,<base64>` | `{id}.{ts}.{body}` | ±300 s | `svix-id` | — |
//! | per-tenant secrets from your store, around any of the above (feature `tenant`) | `TenantVerifier` | the inner scheme's | | | | |
//!
//! Shared rules: signatures are computed over the exact raw body bytes with a
//! pre-keyed HMAC state and compared as decoded bytes in constant time; a
//! missing signature header is a `400`, never "skip verification"; several
//! secrets may be active at once for rotation ([`MatchedKey::Secret`](crate::MatchedKey::Secret)
//! says which one matched); empty secrets are refused when building; secrets
//! never appear in `Debug` output. Each scheme has `sign`/`sign_headers`
//! helpers producing what its provider would send, for tests and simulators.
#![cfg_attr(
    not(feature = "ed25519"),
    doc = "\n\n[`Discord`]: https://docs.rs/webhooks-core/latest/webhooks_core/scheme/struct.Discord.html"
)]

use std::fmt;
use std::time::{Duration, SystemTime};

use ::hmac::digest::Output;
use ::hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::HeaderLookup;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::{ConfigError, VerifyError};

/// `Debug` for a scheme or builder showing only the fields named
/// (`debug_fields!(Type: a, b.len(), ..)`), so that adding a field never
/// prints it by accident. A field written `name.len()` shows that count; a
/// trailing `..` marks the output non-exhaustive.
/// [`Secrets`] and [`SecretList`] show as how many secrets they hold.
macro_rules! debug_fields {
    ($ty:ident: $($field:ident $(. $method:ident ())?),+ , ..) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field $(.$method())?))+
                    .finish_non_exhaustive()
            }
        }
    };
    ($ty:ident: $($field:ident $(. $method:ident ())?),+ $(,)?) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field $(.$method())?))+
                    .finish()
            }
        }
    };
}

/// A builder's `secrets` method, documented `$doc`: each item (bound by
/// `$bound`) through the builder's own `secret`, in order.
macro_rules! secrets_method {
    ($doc:literal, $($bound:tt)+) => {
        #[doc = $doc]
        pub fn secrets<I>(self, secrets: I) -> Self
        where
            I: IntoIterator,
            I::Item: $($bound)+,
        {
            secrets.into_iter().fold(self, Self::secret)
        }
    };
}

/// A builder's `tolerance` method, setting its `tolerance: Option<Duration>`;
/// any doc comment given is appended.
macro_rules! tolerance_method {
    ($(#[$doc:meta])*) => {
        /// The replay window either side of the receiver's clock (default 300 s).
        $(#[$doc])*
        pub fn tolerance(mut self, tolerance: ::std::time::Duration) -> Self {
            self.tolerance = Some(tolerance);
            self
        }
    };
}

/// The `Verifier` of a scheme that signs the URL it called: `verify_head`
/// rebuilds that URL from the request line and the scheme's `public_url`,
/// then calls the scheme's `verify_url`; `verify` (no request line) uses the
/// [`PublicUrl`](crate::PublicUrl) alone, right only for
/// [`PublicUrl::exact`](crate::PublicUrl::exact). Expects `SCHEME` in scope.
macro_rules! url_signing_verifier {
    ($ty:ty) => {
        impl $crate::Verifier for $ty {
            fn scheme(&self) -> &'static str {
                SCHEME
            }

            fn verify(
                &self,
                headers: &::http::HeaderMap,
                body: &[u8],
                now: ::std::time::SystemTime,
            ) -> Result<$crate::Verified, $crate::VerifyError> {
                self.verify_head($crate::RequestHead::new("", headers), body, now)
            }

            fn verify_head(
                &self,
                head: $crate::RequestHead<'_>,
                body: &[u8],
                now: ::std::time::SystemTime,
            ) -> Result<$crate::Verified, $crate::VerifyError> {
                self.verify_url(&head.url(&self.public_url)?, head.header_map(), body, now)
            }
        }
    };
}

mod credential;
#[cfg(feature = "ed25519")]
pub mod discord;
pub mod github;
pub mod gitlab;
pub mod hmac;
pub mod hmac_spec;
pub mod hubspot;
pub mod intercom;
pub mod linear;
pub mod mailgun;
pub mod mandrill;
pub mod paddle;
pub mod postmark;
mod provider;
pub mod registry;
#[cfg(feature = "sendgrid")]
pub mod sendgrid;
pub mod shopify;
pub mod slack;
#[cfg(feature = "sns")]
pub mod sns;
pub mod square;
pub mod standard;
pub mod statuses;
pub mod stripe;
#[cfg(feature = "tenant")]
pub mod tenant;
pub mod twilio;
pub mod typeform;
pub mod zoom;

pub use self::hmac::{
    GenericHmac, GenericHmacBuilder, HmacAlgorithm, SignatureEncoding, TimestampUnit,
};
pub use self::hmac_spec::GenericHmacSpec;
#[cfg(feature = "ed25519")]
pub use discord::{Discord, DiscordBuilder};
pub use github::{GitHub, GitHubBuilder};
pub use gitlab::{GitLab, GitLabBuilder};
pub use hubspot::{HubSpot, HubSpotBuilder};
pub use intercom::{Intercom, IntercomBuilder};
pub use linear::{Linear, LinearBuilder};
pub use mailgun::{Mailgun, MailgunBuilder};
pub use mandrill::{Mandrill, MandrillBuilder};
pub use paddle::{Paddle, PaddleBuilder};
pub use postmark::{Postmark, PostmarkBuilder};
#[cfg(feature = "sendgrid")]
pub use sendgrid::{SendGrid, SendGridBuilder};
pub use shopify::{Shopify, ShopifyBuilder};
pub use slack::{Slack, SlackBuilder};
#[cfg(feature = "sns")]
pub use sns::{Sns, SnsBuilder};
pub use square::{Square, SquareBuilder};
pub use standard::{StandardWebhooks, StandardWebhooksBuilder};
pub use stripe::{Stripe, StripeBuilder};
#[cfg(feature = "tenant")]
pub use tenant::{KeyLookup, LookupError, Secret, TenantVerifier, TenantVerifierBuilder};
pub use twilio::{Twilio, TwilioBuilder};
pub use typeform::{Typeform, TypeformBuilder};
pub use zoom::{Zoom, ZoomBuilder};

/// HMAC-SHA256, the MAC every HMAC scheme here uses.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// The default replay window: five minutes either side of the receiver's clock.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// A symmetric secret, pre-keyed for HMAC (SHA-256 unless `M` says otherwise).
///
/// The key schedule (the inner and outer pads) is computed once when the
/// verifier is built; each request clones the keyed state. The state is two
/// digest cores that `sha2` and `sha1` (built with their `zeroize` feature)
/// wipe when dropped, here and in every per-request clone. `Debug` prints
/// only the secret's length.
#[derive(Clone)]
pub(crate) struct HmacKey<M = HmacSha256> {
    mac: M,
    len: usize,
}

impl<M: Mac + KeyInit + Clone> HmacKey<M> {
    pub(crate) fn new(secret: &[u8], what: &'static str) -> Result<Self, ConfigError> {
        if secret.is_empty() {
            return Err(ConfigError::Empty(what));
        }
        let mac = M::new_from_slice(secret).map_err(|_| ConfigError::Invalid {
            what,
            reason: "unusable HMAC key",
        })?;
        Ok(Self {
            mac,
            len: secret.len(),
        })
    }

    /// The MAC of the content `feed` writes (in pieces, without concatenating).
    #[inline]
    pub(crate) fn mac_of(&self, feed: impl FnOnce(&mut M)) -> Output<M> {
        let mut mac = self.mac.clone();
        feed(&mut mac);
        mac.finalize().into_bytes()
    }
}

impl<M> fmt::Debug for HmacKey<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HmacKey([redacted; {} bytes])", self.len)
    }
}

/// A scheme's secrets, pre-keyed, in the order configured: a secret's index
/// is what [`MatchedKey::Secret`](crate::MatchedKey::Secret) reports. `Debug`
/// prints only how many there are.
#[derive(Clone)]
pub(crate) struct Secrets<M = HmacSha256>(Vec<HmacKey<M>>);

impl<M> Secrets<M> {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The secret `sign` helpers use.
    pub(crate) fn first(&self) -> Option<&HmacKey<M>> {
        self.0.first()
    }
}

impl<M: Mac + KeyInit + Clone> Secrets<M> {
    /// The MAC of the content `feed` writes, with the first secret (what the
    /// `sign` helpers send).
    ///
    /// # Panics
    ///
    /// With no secrets; every builder but [`StandardWebhooks`]' refuses to
    /// build without one.
    pub(crate) fn sign(&self, feed: impl FnOnce(&mut M)) -> Output<M> {
        self.0[0].mac_of(feed)
    }

    /// The index of the first secret whose MAC over the content `feed`
    /// writes equals `signature`, compared in constant time.
    #[inline]
    pub(crate) fn first_match(&self, signature: &[u8], feed: impl Fn(&mut M)) -> Option<usize> {
        self.first_match_any(std::slice::from_ref(&signature), feed)
    }

    /// The index of the first secret whose MAC over the content `feed`
    /// writes equals any of `candidates`. Each secret's MAC is compared, in
    /// constant time, with every candidate, so timing does not say which
    /// candidate matched.
    #[inline]
    pub(crate) fn first_match_any<S: AsRef<[u8]>>(
        &self,
        candidates: &[S],
        feed: impl Fn(&mut M),
    ) -> Option<usize> {
        self.0.iter().position(|key| {
            let expected = key.mac_of(&feed);
            candidates.iter().fold(false, |matched, candidate| {
                matched | ct_eq(&expected, candidate.as_ref())
            })
        })
    }
}

impl<M> fmt::Debug for Secrets<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0.len(), f)
    }
}

/// The secrets of a scheme being built: pre-keyed as they are added, with the
/// first configuration error kept for `build`. `Debug` prints only how many
/// secrets were added.
pub(crate) struct SecretList<M = HmacSha256> {
    keys: Vec<HmacKey<M>>,
    error: Option<ConfigError>,
}

impl<M> Default for SecretList<M> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            error: None,
        }
    }
}

impl<M: Mac + KeyInit + Clone> SecretList<M> {
    /// Adds a secret used as the raw bytes given; an empty one is an error.
    pub(crate) fn push(&mut self, secret: &[u8]) {
        match HmacKey::new(secret, "secret") {
            Ok(key) => self.keys.push(key),
            Err(e) => self.fail(e),
        }
    }
}

impl<M> SecretList<M> {
    /// Records a configuration error (the first one wins).
    pub(crate) fn fail(&mut self, error: ConfigError) {
        self.error.get_or_insert(error);
    }

    /// The secrets, or the first error, or [`ConfigError::NoKeys`] when none
    /// was added.
    pub(crate) fn finish(self) -> Result<Secrets<M>, ConfigError> {
        let secrets = self.finish_allowing_none()?;
        if secrets.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        Ok(secrets)
    }

    /// The secrets (perhaps none), or the first error.
    pub(crate) fn finish_allowing_none(self) -> Result<Secrets<M>, ConfigError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(Secrets(self.keys)),
        }
    }
}

impl<M> fmt::Debug for SecretList<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.keys.len(), f)
    }
}

/// Decodes exactly `2 * N` hex digits (either case) into `N` bytes.
///
/// Signatures are public, so the decoding itself need not be constant time;
/// the comparison that follows is.
// Hand-written rather than the `hex` crate: side by side (criterion, 3 runs),
// `hex::decode_to_slice` took 1.1-1.5x as long for a 32-byte MAC, and
// `hex::encode` 3-9x as long as `encode_hex` below.
pub(crate) fn decode_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.as_bytes();
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *byte = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
    }
    Some(out)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Lowercase hex, as every hex-signing provider sends it.
pub(crate) fn encode_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Lowercase hex digits by value.
pub(crate) const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Each byte's value as a standard base64 digit, or `INVALID`.
const BASE64_DIGITS: [u8; 256] = {
    let mut table = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};
/// Not a base64 digit (a bit no digit's value has).
const INVALID: u8 = 0x80;

/// Decodes standard (padded) base64 of exactly 32 bytes: 43 digits and one
/// `=`, the last digit's two unused bits zero. It accepts exactly what the
/// `base64` crate's strict `STANDARD` engine decodes to 32 bytes (a
/// property test checks it against it), in a fixed-length loop with one
/// table lookup per digit: a signature check decodes one per delivery.
pub(crate) fn decode_base64_32(s: impl AsRef<[u8]>) -> Option<[u8; 32]> {
    let text = s.as_ref();
    if text.len() != 44 || text[43] != b'=' {
        return None;
    }
    let digit = |i: usize| u32::from(BASE64_DIGITS[usize::from(text[i])]);
    let mut out = [0u8; 32];
    let mut bad = 0u32;
    // Ten groups of four digits, three bytes each.
    for (group, bytes) in out[..30].chunks_exact_mut(3).enumerate() {
        let at = group * 4;
        let (a, b, c, d) = (digit(at), digit(at + 1), digit(at + 2), digit(at + 3));
        bad |= a | b | c | d;
        let [_, x, y, z] = ((a << 18) | (b << 12) | (c << 6) | d).to_be_bytes();
        bytes.copy_from_slice(&[x, y, z]);
    }
    // Then three digits and the `=`: two bytes, and two bits that must be
    // zero (set, they are not the canonical encoding).
    let (a, b, c) = (digit(40), digit(41), digit(42));
    bad |= a | b | c;
    let [_, x, y, _] = ((a << 18) | (b << 12) | (c << 6)).to_be_bytes();
    out[30] = x;
    out[31] = y;
    (bad & u32::from(INVALID) == 0 && c & 0b11 == 0).then_some(out)
}

/// Standard padded base64.
pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The value of an optional header (a delivery id, an event type): `None`
/// when absent or empty, an error (naming it `shown`) when present but not
/// visible ASCII.
///
/// `name` is parsed once by the caller: looking a header up by `&str` parses
/// and lower-cases the name on every request.
pub(crate) fn optional_header<'h>(
    headers: &'h (impl HeaderLookup + ?Sized),
    name: &HeaderName,
    shown: &'static str,
) -> Result<Option<&'h str>, VerifyError> {
    match crate::headers::get_str(headers, name) {
        None => Ok(None),
        Some(value) => {
            let value = value
                .map_err(|_| VerifyError::malformed(shown, "not visible ASCII"))?
                .trim();
            Ok((!value.is_empty()).then_some(value))
        }
    }
}

/// The headers a `sign_headers` helper builds: each `(name, value, what)`, in
/// order; `what` names a value that cannot be a header value in the error.
pub(crate) fn signed_headers<const N: usize>(
    entries: [(&'static str, &str, &'static str); N],
) -> Result<HeaderMap, ConfigError> {
    let mut headers = HeaderMap::with_capacity(N);
    for (name, value, what) in entries {
        let value = HeaderValue::from_str(value).map_err(|_| ConfigError::Invalid {
            what,
            reason: "not a valid header value",
        })?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// Writes `n` in decimal into `buf`, returning the digits (no allocation).
pub(crate) fn decimal(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        // `n % 10` is below 10, so the cast cannot truncate.
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Compares two byte strings in constant time (for equal lengths).
///
/// The bytes' differences are OR-ed eight at a time into one word (no
/// branch on the data; the accumulator goes through `black_box` so the
/// compiler cannot stop early), then that word is compared with zero by
/// `subtle`. A 32-byte tag costs a few dozen instructions instead of
/// `subtle`'s byte-by-byte loop (≈400 per comparison, measured with callgrind).
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u64;
    let (a_words, a_rest) = a.as_chunks::<8>();
    let (b_words, b_rest) = b.as_chunks::<8>();
    for (x, y) in a_words.iter().zip(b_words) {
        diff = std::hint::black_box(diff | (u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y)));
    }
    for (x, y) in a_rest.iter().zip(b_rest) {
        diff = std::hint::black_box(diff | u64::from(x ^ y));
    }
    bool::from(diff.ct_eq(&0))
}

/// The value of the required header `name`, as visible ASCII; errors name it
/// `shown`.
///
/// `name` is parsed once by the caller (a `static`, or at build): looking a
/// header up by `&str` parses and lower-cases the name on every request.
pub(crate) fn header<'h>(
    headers: &'h (impl HeaderLookup + ?Sized),
    name: &HeaderName,
    shown: &'static str,
) -> Result<&'h str, VerifyError> {
    crate::headers::get_str(headers, name)
        .ok_or(VerifyError::MissingHeader(shown))?
        .map_err(|_| VerifyError::malformed(shown, "not visible ASCII"))
}

/// The `N` bytes of a signature written `{prefix}{2N hex digits}` (trimmed)
/// in the header `name`. The errors say `expected` when the prefix is
/// missing, `not_hex` when the rest is not `2N` hex digits.
pub(crate) fn prefixed_hex<const N: usize>(
    value: &str,
    prefix: &str,
    name: &'static str,
    expected: &'static str,
    not_hex: &'static str,
) -> Result<[u8; N], VerifyError> {
    let hex = (value.trim())
        .strip_prefix(prefix)
        .ok_or(VerifyError::malformed(name, expected))?;
    decode_hex::<N>(hex).ok_or(VerifyError::malformed(name, not_hex))
}

/// Parses integer Unix seconds: ASCII digits only, no sign, no overflow.
pub(crate) fn parse_timestamp(header: &'static str, value: &str) -> Result<u64, VerifyError> {
    parse_timestamp_bytes(header, value.as_bytes())
}

/// [`parse_timestamp`] on a header's bytes (bytes that are not UTF-8 are no
/// integer).
pub(crate) fn parse_timestamp_bytes(
    header: &'static str,
    value: &[u8],
) -> Result<u64, VerifyError> {
    // Read on every delivery: ASCII digits between ASCII spaces, at most 19
    // (below 2^64), in one loop. Anything else takes the general path below,
    // which answers the same for these (a property test checks it).
    let digits = value.trim_ascii();
    if !digits.is_empty() && digits.len() <= 19 {
        let mut n: u64 = 0;
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return parse_timestamp_text(header, value);
            }
            n = n * 10 + u64::from(d);
        }
        return Ok(n);
    }
    parse_timestamp_text(header, value)
}

/// The general path of [`parse_timestamp_bytes`], on text.
fn parse_timestamp_text(header: &'static str, value: &[u8]) -> Result<u64, VerifyError> {
    match std::str::from_utf8(value) {
        Ok(value) => parse_timestamp_general(header, value),
        Err(_) => Err(VerifyError::malformed(header, "not integer Unix seconds")),
    }
}

/// [`parse_timestamp`] for every input: Unicode spaces trimmed, `std`'s
/// parser.
fn parse_timestamp_general(header: &'static str, value: &str) -> Result<u64, VerifyError> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::malformed(header, "not integer Unix seconds"));
    }
    value
        .parse::<u64>()
        .map_err(|_| VerifyError::malformed(header, "timestamp out of range"))
}

/// Checks a signed timestamp against `now`, two-sided: exactly `tolerance`
/// away is accepted, one second more is not.
pub(crate) fn check_timestamp(
    timestamp: u64,
    now: SystemTime,
    tolerance: Duration,
) -> Result<(), VerifyError> {
    let now = i128::from(unix_seconds(now));
    let ts = i128::from(timestamp);
    let tol = i128::from(tolerance.as_secs());
    if ts < now - tol {
        Err(VerifyError::TimestampTooOld)
    } else if ts > now + tol {
        Err(VerifyError::TimestampTooNew)
    } else {
        Ok(())
    }
}

/// Seconds since the Unix epoch; a clock before 1970 counts as negative.
pub(crate) fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25, item 8: every type that holds a secret wipes it on drop
    /// (a compile-time check: without the digests' `zeroize` feature their
    /// cores, which hold an HMAC key's pads, are not `ZeroizeOnDrop`).
    #[test]
    fn secrets_are_wiped_on_drop() {
        use ::hmac::digest::block_api::CoreProxy;
        fn wiped<T: zeroize::ZeroizeOnDrop>() {}
        wiped::<<Sha256 as CoreProxy>::Core>();
        wiped::<<sha1::Sha1 as CoreProxy>::Core>();
        #[cfg(feature = "tenant")]
        wiped::<tenant::Secret>();
        #[cfg(feature = "ed25519")]
        wiped::<ed25519_dalek::SigningKey>();
        wiped::<zeroize::Zeroizing<Vec<u8>>>();
        // Issue 35, item 7: the console's form-token key.
        #[cfg(feature = "console")]
        wiped::<crate::console::csrf::CsrfKey>();
    }

    #[test]
    fn tolerance_is_inclusive_and_two_sided() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let tol = Duration::from_secs(300);
        assert_eq!(check_timestamp(1_000_000 - 300, now, tol), Ok(()));
        assert_eq!(check_timestamp(1_000_000 + 300, now, tol), Ok(()));
        assert_eq!(
            check_timestamp(1_000_000 - 301, now, tol),
            Err(VerifyError::TimestampTooOld)
        );
        assert_eq!(
            check_timestamp(1_000_000 + 301, now, tol),
            Err(VerifyError::TimestampTooNew)
        );
        assert_eq!(
            check_timestamp(u64::MAX, now, tol),
            Err(VerifyError::TimestampTooNew)
        );
    }

    #[test]
    fn timestamps_must_be_plain_digits() {
        for bad in [
            "",
            "-1",
            "+5",
            "1.5",
            "abc",
            "1e9",
            "99999999999999999999999",
        ] {
            assert!(
                matches!(
                    parse_timestamp("t", bad),
                    Err(VerifyError::MalformedHeader { .. })
                ),
                "{bad:?}"
            );
        }
        assert_eq!(parse_timestamp("t", "1614265330"), Ok(1_614_265_330));
    }

    #[test]
    fn hex_decodes_exact_length_either_case() {
        assert_eq!(decode_hex::<2>("0aFf"), Some([0x0a, 0xff]));
        assert_eq!(decode_hex::<2>("0aF"), None);
        assert_eq!(decode_hex::<2>("0aFf0"), None);
        assert_eq!(decode_hex::<2>("0g00"), None);
        assert_eq!(decode_hex::<2>("+0ff"), None);
        assert_eq!(encode_hex(&[0x0a, 0xff, 0x00]), "0aff00");
    }

    proptest::proptest! {
        /// The one-loop reading answers what the general path answers:
        /// digits, spaces of every kind around them (ASCII, vertical tab,
        /// Unicode), signs, other text and numbers past `u64`.
        #[test]
        fn timestamps_read_as_the_general_path_reads_them(
            value in "[ \t\u{b}\u{a0}]{0,2}[+-]?[0-9]{0,22}[ \t\u{b}\u{a0}x]{0,2}"
        ) {
            let fast = parse_timestamp("t", &value).map_err(|e| e.to_string());
            let general = parse_timestamp_general("t", &value).map_err(|e| e.to_string());
            proptest::prop_assert_eq!(fast, general);
        }
    }

    #[test]
    fn timestamps_at_the_edges() {
        assert_eq!(
            parse_timestamp("t", " 1700000000 ").ok(),
            Some(1_700_000_000)
        );
        assert_eq!(parse_timestamp("t", "0").ok(), Some(0));
        assert_eq!(
            parse_timestamp("t", "18446744073709551615").ok(),
            Some(u64::MAX)
        );
        assert!(parse_timestamp("t", "18446744073709551616").is_err());
        assert_eq!(
            parse_timestamp("t", "9999999999999999999").ok(),
            Some(9_999_999_999_999_999_999)
        );
        assert!(parse_timestamp("t", "").is_err());
        assert!(parse_timestamp("t", "+1").is_err());
    }

    proptest::proptest! {
        /// The fast decoder accepts exactly what the `base64` crate's strict
        /// engine decodes to 32 bytes, with the same bytes: for encodings of
        /// random tags, the same with one character replaced, and any text.
        #[test]
        fn base64_32_agrees_with_the_base64_crate(
            tag in proptest::array::uniform32(proptest::prelude::any::<u8>()),
            at in 0usize..44,
            with in proptest::prelude::any::<u8>(),
            text in "[A-Za-z0-9+/=_ -]{40,48}",
        ) {
            use base64::Engine as _;
            let reference = |s: &str| {
                let mut out = [0u8; 36];
                match base64::engine::general_purpose::STANDARD.decode_slice(s, &mut out) {
                    Ok(32) => out[..32].try_into().ok(),
                    _ => None,
                }
            };
            let encoded = encode_base64(&tag);
            proptest::prop_assert_eq!(decode_base64_32(&encoded), Some(tag));
            let mut changed = encoded.into_bytes();
            changed[at] = with;
            if let Ok(changed) = String::from_utf8(changed) {
                proptest::prop_assert_eq!(decode_base64_32(&changed), reference(&changed));
            }
            proptest::prop_assert_eq!(decode_base64_32(&text), reference(&text));
        }
    }

    #[test]
    fn base64_decodes_only_32_bytes() {
        let b = encode_base64(&[7u8; 32]);
        assert_eq!(decode_base64_32(&b), Some([7u8; 32]));
        assert_eq!(decode_base64_32(encode_base64(&[7u8; 31])), None);
        assert_eq!(decode_base64_32(encode_base64(&[7u8; 33])), None);
        assert_eq!(decode_base64_32("not base64!"), None);
    }

    #[test]
    fn ct_eq_compares_every_byte() {
        for len in [0, 1, 7, 8, 9, 20, 32, 33, 64] {
            let a: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            assert!(ct_eq(&a, &a.clone()), "{len}");
            for i in 0..len {
                for bit in [0x01, 0x80] {
                    let mut b = a.clone();
                    b[i] ^= bit;
                    assert!(!ct_eq(&a, &b), "{len} {i} {bit}");
                }
            }
            assert!(!ct_eq(&a, &a[..len.saturating_sub(1)]) || len == 0);
        }
        assert!(!ct_eq(b"", b"x"));
    }

    #[test]
    fn decimal_matches_to_string() {
        let mut buf = [0u8; 20];
        for n in [0, 7, 10, 1_533_204_620, u64::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn secrets_match_the_first_secret_against_any_candidate() {
        let mut list = SecretList::<HmacSha256>::default();
        list.push(b"one");
        list.push(b"two");
        list.push(b"two");
        assert_eq!(format!("{list:?}"), "3");
        let secrets = list.finish().unwrap();
        assert_eq!(format!("{secrets:?}"), "3");
        let feed = |mac: &mut HmacSha256| mac.update(b"body");
        let two = HmacKey::<HmacSha256>::new(b"two", "secret")
            .unwrap()
            .mac_of(feed);
        assert_eq!(
            secrets.sign(feed),
            HmacKey::<HmacSha256>::new(b"one", "secret")
                .unwrap()
                .mac_of(feed)
        );
        assert_eq!(secrets.first_match(&two, feed), Some(1));
        assert_eq!(secrets.first_match(&two[..31], feed), None);
        assert_eq!(
            secrets.first_match_any(&[[0u8; 32], two.into()], feed),
            Some(1)
        );
        assert_eq!(secrets.first_match_any::<[u8; 32]>(&[], feed), None);
    }

    #[test]
    fn secret_list_keeps_the_first_error() {
        let mut list = SecretList::<HmacSha256>::default();
        list.push(b"");
        list.fail(ConfigError::NoKeys);
        list.push(b"ok");
        assert_eq!(list.finish().unwrap_err(), ConfigError::Empty("secret"));
        assert_eq!(
            SecretList::<HmacSha256>::default().finish().unwrap_err(),
            ConfigError::NoKeys
        );
        let none = SecretList::<HmacSha256>::default().finish_allowing_none();
        assert!(none.unwrap().is_empty());
    }

    #[test]
    fn hmac_key_debug_is_redacted() {
        let key = HmacKey::<HmacSha256>::new(b"super-secret-value", "secret").unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains("super"), "{shown}");
        assert!(HmacKey::<HmacSha256>::new(b"", "secret").is_err());
    }
}
