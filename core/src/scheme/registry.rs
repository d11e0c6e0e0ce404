//! Every signing scheme by name: what it signs and needs ([`SCHEMES`]), a
//! verifier built from a scheme's name and its secrets ([`verifier`]), and a
//! test signer sending what its provider would ([`signer`]).
//!
//! For tools that take the scheme as a word (a command line, a config
//! file): the same verifiers as the scheme types, built through their
//! builders, with the builders' own [`ConfigError`]s.
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::scheme::registry::{self, SchemeOptions};
//! use webhooks_core::testing::{SignTest, TestDelivery};
//!
//! let options = SchemeOptions::new();
//! let signer = registry::signer("stripe", "whsec_test_secret", &options)?;
//! let verifier = registry::verifier("stripe", &["whsec_test_secret"], &options)?;
//! let delivery = TestDelivery::new(r#"{"id":"evt_1","type":"invoice.paid"}"#);
//! let headers = signer.sign_test(&delivery)?;
//! let verified = verifier.verify(&headers, delivery.body(), SystemTime::now())?;
//! assert_eq!(verified.event_type.as_deref(), Some("invoice.paid"));
//! // A secret in the wrong format: the builder's own error.
//! let err = registry::verifier("stripe", &["sk_live_x"], &options).err().unwrap();
//! assert!(err.to_string().contains("whsec_"), "{err}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`HMAC`] (`hmac`) is any [`GenericHmac`](super::GenericHmac), described
//! by a [`GenericHmacSpec`] given as [`SchemeOptions::hmac_spec`]: its
//! [`SchemeInfo`] depends on the spec ([`describe`] tells). Amazon SNS is
//! signed but not verified here ([`SNS`]: its verifier fetches AWS's
//! certificates). The [`hmac_spec`](super::hmac_spec) module shows `hmac`
//! through the registry.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;

use super::provider::intern;
use super::{
    DEFAULT_TOLERANCE, GenericHmacSpec, GitHub, GitLab, HubSpot, Intercom, Linear, Mailgun,
    Mandrill, Paddle, Postmark, Shopify, Slack, Square, StandardWebhooks, Stripe, Twilio, Typeform,
    Zoom,
};
use crate::testing::{SignTest, TEST_ORIGIN, TestDelivery};
use crate::{ConfigError, PublicUrl, Verifier};

/// What a scheme's key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyKind {
    /// A shared secret: the same value signs and verifies.
    Shared,
    /// A key pair: the provider signs with its private key, the receiver
    /// verifies with the public key.
    KeyPair,
}

/// A signing scheme: its name, and what it signs and needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemeInfo {
    /// The name [`verifier`] and [`signer`] take (`"stripe"`), as
    /// [`Verifier::scheme`] reports it.
    pub name: &'static str,
    /// The provider, for people (`"Stripe"`).
    pub provider: &'static str,
    /// Shared secret or key pair.
    pub key: KeyKind,
    /// What the key is and its format, for people (`"endpoint secret,
    /// whsec_…"`). For a key pair, the private key's and the public key's.
    pub key_format: &'static str,
    /// Whether the URL the provider called is signed (the verifier needs a
    /// [`PublicUrl`]).
    pub signs_url: bool,
    /// Whether the body is signed (GitLab and Postmark send a shared token
    /// instead; Mailgun signs its timestamp and token, not the event data).
    pub signs_body: bool,
    /// Whether a timestamp is signed and checked against a replay window.
    pub signs_timestamp: bool,
    /// The header carrying the signature (or the token), lowercase; `None`
    /// when it travels in the body (Mailgun's `signature.signature`).
    pub signature_header: Option<&'static str>,
    /// A body field holding the signed timestamp, in Unix milliseconds
    /// (Linear's `webhookTimestamp`): a sender writes a fresh one before
    /// signing.
    pub timestamp_field: Option<&'static str>,
    /// The `Content-Type` the provider sends.
    pub content_type: &'static str,
    /// The replay window the verifier uses unless told otherwise.
    pub default_tolerance: Option<Duration>,
    /// The webhooks-core feature the scheme needs, when it is optional.
    pub feature: Option<&'static str>,
    /// How long the provider documents retrying a delivery that was not
    /// answered `2xx` (`Some(ZERO)`: it documents no automatic retry;
    /// `None`: it documents none we found). A dedup or inbox retention must
    /// outlast it: see [`retention_floor`] and the table in `docs/schemes.md`
    /// (with the sources).
    pub retry_window: Option<Duration>,
    /// How long the provider documents waiting for the answer before it
    /// counts the attempt as failed (and retries), when documented.
    pub response_deadline: Option<Duration>,
}

impl SchemeInfo {
    /// Whether this build of webhooks-core has the scheme (its feature on).
    #[must_use]
    pub fn is_available(&self) -> bool {
        let missing = (self.feature == Some("ed25519") && !cfg!(feature = "ed25519"))
            || (self.feature == Some("sendgrid") && !cfg!(feature = "sendgrid"))
            || (self.feature == Some("sns") && !cfg!(feature = "sns"));
        !missing
    }
}

const HOUR: u64 = 3_600;
const DAY: u64 = 24 * HOUR;

const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";

const fn info(name: &'static str, provider: &'static str, key_format: &'static str) -> SchemeInfo {
    SchemeInfo {
        name,
        provider,
        key: KeyKind::Shared,
        key_format,
        signs_url: false,
        signs_body: true,
        signs_timestamp: false,
        signature_header: None,
        timestamp_field: None,
        content_type: JSON,
        default_tolerance: None,
        feature: None,
        retry_window: None,
        response_deadline: None,
    }
}

impl SchemeInfo {
    const fn header(mut self, header: &'static str) -> Self {
        self.signature_header = Some(header);
        self
    }

    const fn timestamped(mut self, tolerance: Duration) -> Self {
        self.signs_timestamp = true;
        self.default_tolerance = Some(tolerance);
        self
    }

    const fn url(mut self) -> Self {
        self.signs_url = true;
        self
    }

    const fn form(mut self) -> Self {
        self.content_type = FORM;
        self
    }

    const fn unsigned_body(mut self) -> Self {
        self.signs_body = false;
        self
    }

    /// The documented retry window.
    const fn retries_for(mut self, window: Duration) -> Self {
        self.retry_window = Some(window);
        self
    }

    /// The documented response deadline.
    const fn answer_within(mut self, deadline: Duration) -> Self {
        self.response_deadline = Some(deadline);
        self
    }

    const fn key_pair(mut self, feature: &'static str) -> Self {
        self.key = KeyKind::KeyPair;
        self.feature = Some(feature);
        self
    }
}

/// Every scheme [`verifier`] and [`signer`] know, in the order of the
/// [scheme table](super). Those whose feature is off in this build are
/// listed too (see [`SchemeInfo::is_available`]).
pub const SCHEMES: &[SchemeInfo] = &[
    info(
        "standard-webhooks",
        "Standard Webhooks (Svix, Resend, Clerk…)",
        "whsec_ + base64",
    )
    .header("webhook-signature")
    .timestamped(DEFAULT_TOLERANCE)
    // Svix's schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (27 h 35 min).
    .retries_for(Duration::from_secs(27 * HOUR + 35 * 60 + 5))
    .answer_within(Duration::from_secs(15)),
    info("stripe", "Stripe", "endpoint secret, whsec_…")
        .header("stripe-signature")
        .timestamped(DEFAULT_TOLERANCE)
        .retries_for(Duration::from_secs(3 * DAY)),
    info("github", "GitHub", "webhook secret, any string")
        .header("x-hub-signature-256")
        .retries_for(Duration::ZERO)
        .answer_within(Duration::from_secs(10)),
    info("slack", "Slack", "signing secret")
        .header("x-slack-signature")
        .timestamped(DEFAULT_TOLERANCE)
        .form()
        .answer_within(Duration::from_secs(3)),
    info("shopify", "Shopify", "app client secret")
        .header("x-shopify-hmac-sha256")
        .retries_for(Duration::from_secs(4 * HOUR))
        .answer_within(Duration::from_secs(5)),
    info("twilio", "Twilio", "auth token")
        .header("x-twilio-signature")
        .url()
        .form(),
    info("square", "Square", "signature key")
        .header("x-square-hmacsha256-signature")
        .url()
        .retries_for(Duration::from_secs(3 * DAY))
        .answer_within(Duration::from_secs(10)),
    info(
        "mandrill",
        "Mandrill (Mailchimp Transactional)",
        "webhook key",
    )
    .header("x-mandrill-signature")
    .url()
    .form(),
    info("hubspot", "HubSpot (v3)", "app client secret")
        .header("x-hubspot-signature-v3")
        .url()
        .timestamped(DEFAULT_TOLERANCE),
    info(
        "discord",
        "Discord",
        "private key: 64 hex digits (ed25519 seed); public key: 64 hex digits",
    )
    .header("x-signature-ed25519")
    .timestamped(DEFAULT_TOLERANCE)
    .key_pair("ed25519"),
    info("gitlab", "GitLab", "secret token")
        .header("x-gitlab-token")
        .unsigned_body(),
    SchemeInfo {
        timestamp_field: Some("webhookTimestamp"),
        ..info("linear", "Linear", "webhook signing secret")
            .header("linear-signature")
            .timestamped(super::linear::LINEAR_TOLERANCE)
    },
    info("zoom", "Zoom", "secret token")
        .header("x-zm-signature")
        .timestamped(DEFAULT_TOLERANCE),
    info(
        "paddle",
        "Paddle Billing",
        "endpoint secret key (pdl_ntf_…)",
    )
    .header("paddle-signature")
    .timestamped(super::paddle::PADDLE_TOLERANCE),
    info("intercom", "Intercom", "app client secret").header("x-hub-signature"),
    info("typeform", "Typeform", "webhook secret").header("typeform-signature"),
    info(
        "sendgrid",
        "SendGrid Event Webhook",
        "private key: 64 hex digits (P-256 scalar); public key: base64 DER",
    )
    .header("x-twilio-email-event-webhook-signature")
    .timestamped(DEFAULT_TOLERANCE)
    .key_pair("sendgrid"),
    info("mailgun", "Mailgun", "HTTP webhook signing key")
        .timestamped(DEFAULT_TOLERANCE)
        .unsigned_body()
        .retries_for(Duration::from_secs(8 * HOUR)),
    info(
        "postmark",
        "Postmark",
        "basic auth credential, user:password",
    )
    .header("authorization")
    .unsigned_body()
    // Inbound: 10 retries over about 10.5 hours.
    .retries_for(Duration::from_secs(10 * HOUR + 30 * 60)),
];

/// Amazon SNS (and SES, Amazon's other services, through it): [`signer`]
/// signs its messages (`scheme::sns::TestSigner`, feature `sns`; the key
/// a PKCS#8 RSA private key, the receiver pins its certificate), but
/// [`verifier`] does not build it: `scheme::Sns` verifies
/// asynchronously, with the certificates it fetches from AWS, so it is
/// built with its own builder and a certificate fetcher. Not in
/// [`SCHEMES`], which lists the schemes both build; [`find`] knows it.
pub const SNS: SchemeInfo = SchemeInfo {
    signs_timestamp: true,
    content_type: "text/plain; charset=UTF-8",
    ..info(
        "sns",
        "Amazon SNS (SES, …)",
        "private key: PKCS#8 RSA, PEM or base64 DER; the receiver pins or fetches its certificate",
    )
    .key_pair("sns")
};

/// Any HMAC provider, as a [`GenericHmacSpec`] given in
/// [`SchemeOptions::hmac_spec`] describes it (without one, [`verifier`] and
/// [`signer`] refuse it with a [`ConfigError`]). The key is the shared
/// secret, its bytes as given. What it signs and where depends on the spec:
/// this entry says only a body and a header of unknown name; [`describe`]
/// gives the spec's. Not in [`SCHEMES`] (each of those is one provider);
/// [`find`] knows it.
pub const HMAC: SchemeInfo = info(
    "hmac",
    "any HMAC provider, described by a spec",
    "shared secret, its bytes as given",
);

/// Why [`verifier`] or [`signer`] could not build a scheme.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No scheme has that name. The name is not repeated (it may be a
    /// secret typed in the wrong place); the known names are.
    #[error("unknown scheme; known schemes: {known}")]
    UnknownScheme {
        /// The known names, comma-separated.
        known: String,
    },
    /// The scheme needs a webhooks-core feature this build does not have.
    #[error("scheme {scheme} needs webhooks-core's `{feature}` feature")]
    Unavailable {
        /// The scheme.
        scheme: &'static str,
        /// The feature.
        feature: &'static str,
    },
    /// The scheme is verified asynchronously ([`SNS`]): build its verifier
    /// with its own builder.
    #[error(
        "scheme {scheme} is verified with certificates it fetches: build `scheme::Sns` with a \
         certificate fetcher (or pinned certificates)"
    )]
    Asynchronous {
        /// The scheme.
        scheme: &'static str,
    },
    /// The scheme's builder refused a key or a setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The scheme called `name` (`standard` is `standard-webhooks` too), in
/// [`SCHEMES`], [`HMAC`] or [`SNS`].
///
/// # Errors
///
/// [`RegistryError::UnknownScheme`] listing the known names.
pub fn find(name: &str) -> Result<&'static SchemeInfo, RegistryError> {
    let name = match name {
        "standard" => "standard-webhooks",
        other => other,
    };
    SCHEMES
        .iter()
        .chain([&HMAC, &SNS])
        .find(|s| s.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| RegistryError::UnknownScheme {
            known: SCHEMES
                .iter()
                .chain([&HMAC, &SNS])
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// What a retention must keep beyond a provider's retry window: a day (a
/// retry is sent at the end of the window, then queued, delayed or replayed
/// by hand around it).
pub const RETRY_WINDOW_MARGIN: Duration = Duration::from_secs(DAY);

/// The shortest retention (of the dedup store's completed ids, or of the
/// inbox's completed events) under which a late retry of `scheme`'s
/// provider would be taken for a new delivery and run again: its
/// documented [`retry_window`](SchemeInfo::retry_window) plus
/// [`RETRY_WINDOW_MARGIN`]. `None` for a scheme this registry does not know
/// or whose provider documents no retry window.
///
/// ```
/// use std::time::Duration;
/// use webhooks_core::scheme::registry::retention_floor;
///
/// // Stripe retries for 3 days: a retention under 4 days forgets too soon.
/// assert_eq!(retention_floor("stripe"), Some(Duration::from_secs(4 * 86_400)));
/// assert_eq!(retention_floor("not-a-scheme"), None);
/// ```
#[must_use]
pub fn retention_floor(scheme: &str) -> Option<Duration> {
    let window = find(scheme).ok()?.retry_window?;
    Some(window + RETRY_WINDOW_MARGIN)
}

/// The longest [`retention_floor`] of every known scheme: what an inbox
/// that may hold any provider's deliveries (its purge does not tell schemes
/// apart) must keep its completed events for.
#[must_use]
pub fn longest_retention_floor() -> Duration {
    SCHEMES
        .iter()
        .filter_map(|s| s.retry_window)
        .max()
        .unwrap_or(Duration::ZERO)
        + RETRY_WINDOW_MARGIN
}

/// What [`verifier`] and [`signer`] configure besides the keys.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SchemeOptions {
    /// The public URL URL-signing schemes rebuild (required by their
    /// verifiers; a [`signer`] signs the delivery's own URL).
    pub public_url: Option<PublicUrl>,
    /// The replay window, for the schemes that sign a timestamp (default:
    /// [`SchemeInfo::default_tolerance`]).
    pub tolerance: Option<Duration>,
    /// [`SNS`]: the certificate URL the signer names (default:
    /// `scheme::sns::TEST_CERTIFICATE_URL`).
    pub certificate_url: Option<String>,
    /// [`SNS`]: the topic the signer publishes to (default:
    /// `scheme::sns::TEST_TOPIC_ARN`).
    pub topic_arn: Option<String>,
    /// [`HMAC`]: how the provider signs (required by its verifier and
    /// signer; other schemes ignore it).
    pub hmac_spec: Option<GenericHmacSpec>,
}

impl SchemeOptions {
    /// No public URL, the schemes' own tolerances.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the public URL.
    #[must_use]
    pub fn public_url(mut self, public_url: PublicUrl) -> Self {
        self.public_url = Some(public_url);
        self
    }

    /// Sets the replay window.
    #[must_use]
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = Some(tolerance);
        self
    }

    /// Sets the certificate URL an [`SNS`] signer names.
    #[must_use]
    pub fn certificate_url(mut self, url: impl Into<String>) -> Self {
        self.certificate_url = Some(url.into());
        self
    }

    /// Sets the topic an [`SNS`] signer publishes to.
    #[must_use]
    pub fn topic_arn(mut self, topic_arn: impl Into<String>) -> Self {
        self.topic_arn = Some(topic_arn.into());
        self
    }

    /// Sets the spec of the [`HMAC`] scheme.
    #[must_use]
    pub fn hmac_spec(mut self, spec: GenericHmacSpec) -> Self {
        self.hmac_spec = Some(spec);
        self
    }
}

/// The options' [`HMAC`] spec.
fn hmac_spec(options: &SchemeOptions) -> Result<&GenericHmacSpec, ConfigError> {
    options.hmac_spec.as_ref().ok_or(ConfigError::Setting(
        "the hmac scheme needs a spec (SchemeOptions::hmac_spec; the CLI's --hmac-spec): \
         how it signs is not in its name",
    ))
}

/// The scheme called `name` as `options` configure it: for [`HMAC`] with a
/// spec, what the spec signs (its signature header, lowercase, its
/// timestamp and replay window, whether it signs the URL and the body);
/// otherwise [`find`]'s entry.
///
/// # Errors
///
/// As [`find`].
pub fn describe(name: &str, options: &SchemeOptions) -> Result<SchemeInfo, RegistryError> {
    let info = find(name)?;
    let (true, Some(spec)) = (info.name == HMAC.name, &options.hmac_spec) else {
        return Ok(*info);
    };
    let tolerance = options
        .tolerance
        .or(spec.tolerance())
        .unwrap_or(DEFAULT_TOLERANCE);
    Ok(SchemeInfo {
        signs_url: spec.signs_url(),
        signs_body: spec.signs_body(),
        signs_timestamp: spec.signs_timestamp(),
        signature_header: spec
            .signature_header()
            .map(|h| intern(&h.to_ascii_lowercase())),
        default_tolerance: spec.signs_timestamp().then_some(tolerance),
        ..*info
    })
}

fn available(name: &str) -> Result<&'static SchemeInfo, RegistryError> {
    let info = find(name)?;
    match (info.is_available(), info.feature) {
        (false, Some(feature)) => Err(RegistryError::Unavailable {
            scheme: info.name,
            feature,
        }),
        _ => Ok(info),
    }
}

/// `user:password`, split at the first `:`.
fn credential(value: &str) -> Result<(&str, &str), ConfigError> {
    value.split_once(':').ok_or(ConfigError::Invalid {
        what: "Postmark credential",
        reason: "expected user:password",
    })
}

/// Builds the verifier of the scheme called `name` with `keys` (several for
/// rotation, in order: [`MatchedKey::Secret`](crate::MatchedKey) reports
/// the index that matched). For a key pair the keys are public keys; for
/// Postmark each is `user:password`. [`HMAC`]'s reports its spec's name as
/// [`Verifier::scheme`].
///
/// # Errors
///
/// [`RegistryError::UnknownScheme`], [`RegistryError::Unavailable`],
/// [`RegistryError::Asynchronous`] for [`SNS`], or the builder's
/// [`ConfigError`] (a key in the wrong format, no key, a URL-signing scheme
/// without a public URL, [`HMAC`] without a spec).
pub fn verifier<K: AsRef<str>>(
    name: &str,
    keys: &[K],
    options: &SchemeOptions,
) -> Result<Box<dyn Verifier>, RegistryError> {
    let info = available(name)?;
    if info.name == SNS.name {
        return Err(RegistryError::Asynchronous { scheme: SNS.name });
    }
    let keys = || keys.iter().map(AsRef::as_ref);
    let bytes = || keys().map(str::as_bytes);
    let tolerance = options.tolerance.or(info.default_tolerance);
    let tolerance = tolerance.unwrap_or(DEFAULT_TOLERANCE);
    let url = || {
        options.public_url.clone().ok_or(ConfigError::Setting(
            "a public URL is required: this scheme signs the URL it called",
        ))
    };
    let boxed: Box<dyn Verifier> = match info.name {
        "standard-webhooks" => Box::new(
            keys()
                .fold(StandardWebhooks::builder(), |b, k| b.secret(k))
                .tolerance(tolerance)
                .build()?,
        ),
        "stripe" => Box::new(
            Stripe::builder()
                .secrets(keys())
                .tolerance(tolerance)
                .build()?,
        ),
        "github" => Box::new(GitHub::builder().secrets(bytes()).build()?),
        "slack" => Box::new(
            Slack::builder()
                .secrets(bytes())
                .tolerance(tolerance)
                .build()?,
        ),
        "shopify" => Box::new(Shopify::builder().secrets(bytes()).build()?),
        "twilio" => Box::new(
            Twilio::builder()
                .auth_tokens(bytes())
                .public_url(url()?)
                .build()?,
        ),
        "square" => Box::new(
            bytes()
                .fold(Square::builder(), |b, k| b.signature_key(k))
                .public_url(url()?)
                .build()?,
        ),
        "mandrill" => Box::new(
            bytes()
                .fold(Mandrill::builder(), |b, k| b.webhook_key(k))
                .public_url(url()?)
                .build()?,
        ),
        "hubspot" => Box::new(
            bytes()
                .fold(HubSpot::builder(), |b, k| b.client_secret(k))
                .public_url(url()?)
                .tolerance(tolerance)
                .build()?,
        ),
        #[cfg(feature = "ed25519")]
        "discord" => Box::new(
            keys()
                .fold(super::Discord::builder(), |b, k| b.public_key(k))
                .tolerance(tolerance)
                .build()?,
        ),
        "gitlab" => Box::new(keys().fold(GitLab::builder(), |b, k| b.token(k)).build()?),
        "linear" => Box::new(
            Linear::builder()
                .secrets(bytes())
                .tolerance(tolerance)
                .build()?,
        ),
        "zoom" => Box::new(
            Zoom::builder()
                .secrets(bytes())
                .tolerance(tolerance)
                .build()?,
        ),
        "paddle" => Box::new(
            Paddle::builder()
                .secrets(bytes())
                .tolerance(tolerance)
                .build()?,
        ),
        "intercom" => Box::new(Intercom::builder().secrets(bytes()).build()?),
        "typeform" => Box::new(Typeform::builder().secrets(bytes()).build()?),
        #[cfg(feature = "sendgrid")]
        "sendgrid" => Box::new(
            super::SendGrid::builder()
                .public_keys(keys())
                .tolerance(tolerance)
                .build()?,
        ),
        "mailgun" => Box::new(
            Mailgun::builder()
                .secrets(bytes())
                .tolerance(tolerance)
                .build()?,
        ),
        "postmark" => {
            let mut builder = Postmark::builder();
            for key in keys() {
                let (user, password) = credential(key)?;
                builder = builder.credential(user, password);
            }
            Box::new(builder.build()?)
        }
        "hmac" => {
            let spec = hmac_spec(options)?;
            let mut builder = spec.builder()?.secrets(bytes());
            if let (true, Some(tolerance)) = (spec.signs_timestamp(), options.tolerance) {
                builder = builder.tolerance(tolerance);
            }
            if spec.signs_url() {
                builder = builder.public_url(url()?);
            }
            Box::new(builder.build()?)
        }
        _ => unreachable!("every available scheme in SCHEMES is built"),
    };
    Ok(boxed)
}

/// A test signer of a scheme, built by [`signer`]: signs a
/// [`TestDelivery`] as its provider would. `Debug` never shows its key.
pub struct SchemeSigner {
    info: &'static SchemeInfo,
    inner: Box<dyn SignTest + Send + Sync>,
    public_key: Option<String>,
}

impl std::fmt::Debug for SchemeSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemeSigner")
            .field("scheme", &self.info.name)
            .finish_non_exhaustive()
    }
}

impl SchemeSigner {
    /// The scheme.
    #[must_use]
    pub fn info(&self) -> &'static SchemeInfo {
        self.info
    }

    /// For a key pair, the public key to build the verifier with (Discord:
    /// hex; SendGrid: base64 DER); `None` for a shared secret.
    #[must_use]
    pub fn public_key(&self) -> Option<&str> {
        self.public_key.as_deref()
    }
}

impl SignTest for SchemeSigner {
    fn sign_test(&self, delivery: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.inner.sign_test(delivery)
    }

    fn sign_test_body(&self, delivery: &TestDelivery) -> Result<Bytes, ConfigError> {
        self.inner.sign_test_body(delivery)
    }
}

/// 64 hex digits as 32 bytes.
#[cfg(any(feature = "ed25519", feature = "sendgrid"))]
fn private_key(key: &str) -> Result<[u8; 32], ConfigError> {
    super::decode_hex::<32>(key.trim()).ok_or(ConfigError::Invalid {
        what: "private key",
        reason: "expected 64 hex digits",
    })
}

/// Builds the test signer of the scheme called `name` with `key`: the
/// shared secret, or for a key pair the private key (64 hex digits: an
/// ed25519 seed for Discord, a P-256 scalar for SendGrid; for [`SNS`] a
/// PKCS#8 RSA key, PEM or base64 DER). URL-signing schemes sign the
/// delivery's [URL](TestDelivery::url).
///
/// # Errors
///
/// As [`verifier`].
pub fn signer(
    name: &str,
    key: &str,
    options: &SchemeOptions,
) -> Result<SchemeSigner, RegistryError> {
    let info = available(name)?;
    #[cfg_attr(
        not(any(feature = "ed25519", feature = "sendgrid")),
        allow(unused_mut, reason = "set by the key-pair schemes")
    )]
    let mut public_key = None;
    let inner: Box<dyn SignTest + Send + Sync> = match info.name {
        #[cfg(feature = "ed25519")]
        "discord" => {
            let signer = crate::testing::DiscordSigner::from_seed(private_key(key)?);
            public_key = Some(signer.public_key_hex());
            Box::new(signer)
        }
        #[cfg(feature = "sendgrid")]
        "sendgrid" => {
            let signer = super::sendgrid::Signer::from_bytes(&private_key(key)?)?;
            public_key = Some(signer.public_key());
            Box::new(signer)
        }
        #[cfg(feature = "sns")]
        "sns" => {
            let mut signer = super::sns::TestSigner::from_pkcs8_text(key)?;
            if let Some(url) = &options.certificate_url {
                signer = signer.certificate_url(url.clone());
            }
            if let Some(topic) = &options.topic_arn {
                signer = signer.topic_arn(topic.clone());
            }
            Box::new(signer)
        }
        "standard-webhooks" => Box::new(StandardWebhooks::new(key)?),
        "stripe" => Box::new(Stripe::new(key)?),
        "github" => Box::new(GitHub::new(key)?),
        "slack" => Box::new(Slack::new(key)?),
        "shopify" => Box::new(Shopify::new(key)?),
        "gitlab" => Box::new(GitLab::new(key)?),
        "linear" => Box::new(Linear::new(key)?),
        "zoom" => Box::new(Zoom::new(key)?),
        "paddle" => Box::new(Paddle::new(key)?),
        "intercom" => Box::new(Intercom::new(key)?),
        "typeform" => Box::new(Typeform::new(key)?),
        "mailgun" => Box::new(Mailgun::new(key)?),
        "postmark" => {
            let (user, password) = credential(key)?;
            Box::new(Postmark::new(user, password)?)
        }
        // The URL-signing schemes sign the delivery's URL; their builders
        // want a public URL all the same.
        "twilio" => Box::new(
            Twilio::builder()
                .auth_token(key)
                .public_url(signing_url(options)?)
                .build()?,
        ),
        "square" => Box::new(
            Square::builder()
                .signature_key(key)
                .public_url(signing_url(options)?)
                .build()?,
        ),
        "mandrill" => Box::new(
            Mandrill::builder()
                .webhook_key(key)
                .public_url(signing_url(options)?)
                .build()?,
        ),
        "hubspot" => Box::new(
            HubSpot::builder()
                .client_secret(key)
                .public_url(signing_url(options)?)
                .build()?,
        ),
        "hmac" => {
            let spec = hmac_spec(options)?;
            let mut builder = spec.builder()?.secret(key);
            if spec.signs_url() {
                builder = builder.public_url(signing_url(options)?);
            }
            Box::new(builder.build()?)
        }
        _ => unreachable!("every available scheme in SCHEMES signs"),
    };
    Ok(SchemeSigner {
        info,
        inner,
        public_key,
    })
}

/// The options' public URL, or [`TEST_ORIGIN`].
fn signing_url(options: &SchemeOptions) -> Result<PublicUrl, ConfigError> {
    match &options.public_url {
        Some(url) => Ok(url.clone()),
        None => PublicUrl::base(TEST_ORIGIN),
    }
}

#[cfg(test)]
mod tests;
