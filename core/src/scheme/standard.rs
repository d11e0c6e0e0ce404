//! [Standard Webhooks](https://www.standardwebhooks.com/) v1.0.0: `v1` (HMAC-SHA256)
//! and `v1a` (ed25519), as sent by Svix and every sender following the spec.

use std::fmt;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
#[cfg(feature = "ed25519")]
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
/// Without the `ed25519` feature no public key can be configured.
#[cfg(not(feature = "ed25519"))]
type VerifyingKey = std::convert::Infallible;
use hmac::Mac as _;
use http::{HeaderMap, HeaderName};
use zeroize::Zeroizing;

use super::{
    DEFAULT_TOLERANCE, HmacKey, HmacSha256, SecretList, Secrets, check_timestamp, decimal,
    decode_base64_32, parse_timestamp_bytes, signed_headers,
};
use crate::headers::{FirstOf, is_text};
use crate::{
    ConfigError, HeaderLookup, Identity, MatchedKey, RequestHead, Verified, Verifier, VerifyError,
};

const ID: &[&str] = &["webhook-id", "svix-id"];
const TIMESTAMP: &[&str] = &["webhook-timestamp", "svix-timestamp"];
const SIGNATURE: &[&str] = &["webhook-signature", "svix-signature"];
/// The same names, parsed once: looking a header up by `HeaderName` skips
/// parsing and lower-casing the name on every request (a fifth of the cost of
/// verifying a small body).
static ID_NAMES: [HeaderName; 2] = [
    HeaderName::from_static("webhook-id"),
    HeaderName::from_static("svix-id"),
];
static TIMESTAMP_NAMES: [HeaderName; 2] = [
    HeaderName::from_static("webhook-timestamp"),
    HeaderName::from_static("svix-timestamp"),
];
static SIGNATURE_NAMES: [HeaderName; 2] = [
    HeaderName::from_static("webhook-signature"),
    HeaderName::from_static("svix-signature"),
];
/// The three headers' names, read together
/// ([`HeaderLookup::get_first_of`]: one call, the names `'static` so that an adapter converts them once).
static HEAD_NAMES: [&[HeaderName]; 3] = [&ID_NAMES, &TIMESTAMP_NAMES, &SIGNATURE_NAMES];
/// Signature entries looked at per request; the rest are ignored, so a huge
/// header cannot make one request cost thousands of verifications.
const MAX_ENTRIES: usize = 32;
/// The most ed25519 checks one request may cost (or the number of trusted
/// keys, if greater). Each check hashes the whole signed content (ed25519
/// hashes `R‖A‖content`, so checks share no work), and each pair of a
/// signature and a trusted key is a check: the distinct well-formed `v1a`
/// signatures are tried in the order listed, each against every trusted key,
/// until this many pairs are spent. With up to 4 trusted keys, the two
/// signatures a sender lists while rotating its own key both meet every key,
/// whichever is listed first.
#[cfg(feature = "ed25519")]
const MAX_V1A_CHECKS: usize = 8;
const SCHEME: &str = "standard-webhooks";

/// Verifies [Standard Webhooks](https://www.standardwebhooks.com/) deliveries.
///
/// * headers `webhook-id`, `webhook-timestamp`, `webhook-signature`, or the same
///   with the `svix-` prefix;
/// * signed content `{id}.{timestamp}.{body}` over the exact body bytes;
/// * `v1,<base64 HMAC-SHA256>` against any configured secret, and
///   `v1a,<base64 ed25519>` against any configured public key (a trust list you
///   configure, never a key taken from the request); at most 32 entries are
///   read, and at most 8 ed25519 checks made (each costs a pass over the
///   body; or one per trusted key if there are more than 8): each distinct
///   well-formed `v1a` signature, in the order listed, against each trusted
///   key, until 8 (signature, key) pairs are spent;
/// * a two-sided timestamp tolerance, 300 s by default.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use webhooks_core::{Verifier, scheme::StandardWebhooks};
///
/// // Two secrets during a rotation: the new one first, the old one until senders switch.
/// let verifier = StandardWebhooks::builder()
///     .secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
///     .secret("whsec_dGhlIG9sZCBzZWNyZXQsIHN0aWxsIGFjY2VwdGVk")
///     .tolerance(Duration::from_secs(600))
///     .build()?;
///
/// let headers = verifier.sign_headers("msg_1", 1_700_000_000, b"{}")?;
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_100);
/// let verified = verifier.verify(&headers, b"{}", now)?;
/// assert_eq!(verified.matched_key.to_string(), "secret#0");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct StandardWebhooks {
    secrets: Secrets,
    public_keys: Vec<VerifyingKey>,
    tolerance: Duration,
}

debug_fields!(StandardWebhooks: secrets, public_keys.len(), tolerance);

impl StandardWebhooks {
    /// A verifier with one secret (`whsec_<base64>`, padded or not, at least
    /// 24 bytes decoded) and the default tolerance.
    ///
    /// ```
    /// use webhooks_core::{ConfigError, scheme::StandardWebhooks};
    ///
    /// assert!(StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
    /// // Not a Standard Webhooks secret: refused when the verifier is built.
    /// assert!(matches!(StandardWebhooks::new("notwhsec"), Err(ConfigError::Invalid { .. })));
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the secret is empty, lacks the `whsec_` prefix, is
    /// not base64 or decodes to fewer than 24 bytes (the spec's minimum). For
    /// a secret in another form use [`from_raw_secret`](Self::from_raw_secret).
    pub fn new(secret: impl AsRef<str>) -> Result<Self, ConfigError> {
        Self::builder().secret(secret).build()
    }

    /// A verifier with one secret given as its raw bytes (not base64, no
    /// prefix, no minimum length), for senders that do not follow the spec's
    /// secret format, and the default tolerance.
    ///
    /// ```
    /// use webhooks_core::scheme::StandardWebhooks;
    ///
    /// let verifier = StandardWebhooks::from_raw_secret(b"a shared secret from elsewhere")?;
    /// # Ok::<(), webhooks_core::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the secret is empty.
    pub fn from_raw_secret(secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().raw_secret(secret).build()
    }

    /// A builder for several secrets, public keys and a custom tolerance.
    pub fn builder() -> StandardWebhooksBuilder {
        StandardWebhooksBuilder::default()
    }

    /// The replay window.
    #[must_use]
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// The `webhook-signature` value a sender would send, signed with the first secret.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoKeys`] when the verifier has only public keys.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> Result<String, ConfigError> {
        let key = self.secrets.first().ok_or(ConfigError::NoKeys)?;
        Ok(sign_v1(key, id, timestamp, body))
    }

    /// The three headers a sender would send, signed with the first secret.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoKeys`] when the verifier has only public keys, or
    /// [`ConfigError::Invalid`] when `id` cannot be a header value.
    pub fn sign_headers(
        &self,
        id: &str,
        timestamp: u64,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        let signature = self.sign(id, timestamp, body)?;
        standard_headers(id, timestamp, &signature)
    }
}

/// The three Standard Webhooks headers for an id, timestamp and signature value.
fn standard_headers(id: &str, timestamp: u64, signature: &str) -> Result<HeaderMap, ConfigError> {
    signed_headers([
        (ID[0], id, "webhook id"),
        (TIMESTAMP[0], &timestamp.to_string(), "timestamp"),
        (SIGNATURE[0], signature, "signature"),
    ])
}

/// The value of the first of a header's names present (`found`, from
/// [`HeaderLookup::get_first_of`]), checked to be visible ASCII, with its
/// name (from `shown`, in the same order) for errors.
fn header<'h>(
    found: FirstOf<'h>,
    shown: &[&'static str],
) -> Result<(&'static str, &'h [u8]), VerifyError> {
    let Some((index, value)) = found else {
        return Err(VerifyError::MissingHeader(shown[0]));
    };
    let shown = shown[index];
    if !is_text(value) {
        return Err(VerifyError::malformed(shown, "not visible ASCII"));
    }
    Ok((shown, value))
}

/// Writes `{id}.{timestamp}.{body}` into the MAC, without concatenating.
fn feed(mac: &mut HmacSha256, id: &str, timestamp: &[u8], body: &[u8]) {
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp);
    mac.update(b".");
    mac.update(body);
}

/// The `v1,…` entry for a delivery, signed with `key`.
fn sign_v1(key: &HmacKey, id: &str, timestamp: u64, body: &[u8]) -> String {
    let mut buf = [0u8; 20];
    let ts = decimal(timestamp, &mut buf);
    format!(
        "v1,{}",
        B64.encode(key.mac_of(|mac| feed(mac, id, ts, body)))
    )
}

/// `{id}.{timestamp}.{body}` in one piece, as ed25519 needs it.
#[cfg(feature = "ed25519")]
fn signed_content(id: &str, timestamp: &[u8], body: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(id.len() + timestamp.len() + body.len() + 2);
    content.extend_from_slice(id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(timestamp);
    content.push(b'.');
    content.extend_from_slice(body);
    content
}

impl Verifier for StandardWebhooks {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn check_headers(&self, headers: &HeaderMap, now: SystemTime) -> Result<(), VerifyError> {
        self.check_lookup(headers, now)
    }

    // The two the pipeline calls read the request's headers in place.
    fn check_request_head(
        &self,
        head: RequestHead<'_>,
        now: SystemTime,
    ) -> Result<(), VerifyError> {
        self.check_lookup(head.headers, now)
    }

    fn verify_head(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        self.verify_lookup(head.headers, body, now)
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        self.verify_lookup(headers, body, now)
    }

    fn head_names(&self) -> &'static [&'static [HeaderName]] {
        &HEAD_NAMES
    }
}

impl StandardWebhooks {
    /// [`Verifier::check_headers`], on any [`HeaderLookup`].
    fn check_lookup(&self, headers: &dyn HeaderLookup, now: SystemTime) -> Result<(), VerifyError> {
        let head = self.head(headers, now)?;
        // At least one entry: a byte that is not the separator.
        if !head.signatures.iter().any(|&b| b != b' ') {
            return Err(VerifyError::malformed(head.sig_name, "no signatures"));
        }
        Ok(())
    }

    /// [`Verifier::verify`], on any [`HeaderLookup`].
    fn verify_lookup(
        &self,
        headers: &dyn HeaderLookup,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let Head {
            id,
            timestamp,
            ts_text,
            sig_name,
            signatures,
        } = self.head(headers, now)?;

        let mut v1 = Tags::default();
        // Distinct well-formed v1a signatures, as many as can meet at least
        // one key within the check budget.
        #[cfg(feature = "ed25519")]
        let v1a_budget = MAX_V1A_CHECKS.max(self.public_keys.len());
        #[cfg(feature = "ed25519")]
        let v1a_limit = v1a_budget.div_ceil(self.public_keys.len().max(1));
        #[cfg(feature = "ed25519")]
        let mut v1a: Vec<Signature> = Vec::new();
        #[cfg(not(feature = "ed25519"))]
        let v1a: [(); 0] = [];
        let mut entries = 0;
        // Space-separated `{version},{signature}` entries; an entry without a
        // comma or of another version is skipped (but counts).
        for entry in (signatures.split(|&b| b == b' ')).filter(|e| !e.is_empty()) {
            if entries == MAX_ENTRIES {
                break;
            }
            entries += 1;
            let Some(comma) = entry.iter().position(|&b| b == b',') else {
                continue;
            };
            let (version, sig) = (&entry[..comma], &entry[comma + 1..]);
            match version {
                b"v1" if !self.secrets.is_empty() => {
                    // A signature that does not decode to exactly 32 bytes can never match.
                    if let Some(tag) = decode_base64_32(sig) {
                        v1.push(tag);
                    }
                }
                #[cfg(feature = "ed25519")]
                b"v1a" if !self.public_keys.is_empty() && v1a.len() < v1a_limit => {
                    let mut out = [0u8; 65];
                    if let Ok(64) = B64.decode_slice(sig, &mut out) {
                        let mut bytes = [0u8; 64];
                        bytes.copy_from_slice(&out[..64]);
                        // Cheap checks first: a canonical `s` is below 2^253,
                        // so one with any of the top 3 bits set can never
                        // verify; a repeated signature would only repeat a check.
                        let signature = Signature::from_bytes(&bytes);
                        if bytes[63] & 0xe0 == 0 && !v1a.contains(&signature) {
                            v1a.push(signature);
                        }
                    }
                }
                _ => {}
            }
        }
        if v1.is_empty() && v1a.is_empty() {
            if entries == 0 {
                return Err(VerifyError::malformed(sig_name, "no signatures"));
            }
            return Err(VerifyError::NoMatchingSignature);
        }

        let verified = |matched_key| Verified {
            scheme: SCHEME,
            id: Some(id.to_owned()),
            timestamp: Some(timestamp),
            event_type: None,
            matched_key,
            scope: None,
            identity: Identity::SignedId,
        };
        if !v1.is_empty()
            && let Some(index) =
                (self.secrets).first_match_any(v1.as_slice(), |mac| feed(mac, id, ts_text, body))
        {
            return Ok(verified(MatchedKey::Secret(index)));
        }
        #[cfg(feature = "ed25519")]
        if !v1a.is_empty() {
            // The signed content is built once; each check hashes it once.
            // The budget is spent per (signature, key) pair: every signature
            // in turn meets every trusted key while pairs remain.
            let content = signed_content(id, ts_text, body);
            let pairs = v1a.iter().flat_map(|sig| {
                (self.public_keys.iter().enumerate()).map(move |(index, key)| (sig, index, key))
            });
            for (sig, index, key) in pairs.take(v1a_budget) {
                if key.verify_strict(&content, sig).is_ok() {
                    return Ok(verified(MatchedKey::PublicKey(index)));
                }
            }
        }
        Err(VerifyError::NoMatchingSignature)
    }
}

/// The `v1` signatures of a request, decoded: the first few kept inline (a
/// sender lists one, two while rotating its secret), more in a `Vec` (at
/// most [`MAX_ENTRIES`]); an array of them all would be a kilobyte to zero
/// on every request.
#[derive(Default)]
struct Tags {
    inline: [[u8; 32]; 4],
    len: usize,
    more: Vec<[u8; 32]>,
}

impl Tags {
    fn push(&mut self, tag: [u8; 32]) {
        if self.len < self.inline.len() {
            self.inline[self.len] = tag;
        } else {
            if self.more.is_empty() {
                self.more.extend_from_slice(&self.inline);
            }
            self.more.push(tag);
        }
        self.len += 1;
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn as_slice(&self) -> &[[u8; 32]] {
        if self.more.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.more
        }
    }
}

/// What the headers say, checked: everything but the signatures' match.
struct Head<'h> {
    id: &'h str,
    timestamp: u64,
    /// The signed timestamp as sent (trimmed).
    ts_text: &'h [u8],
    sig_name: &'static str,
    /// The signature header's value (visible ASCII).
    signatures: &'h [u8],
}

impl StandardWebhooks {
    /// The three headers, present and well-formed, the timestamp within the
    /// tolerance: what can be checked before the body is read.
    fn head<'h>(
        &self,
        headers: &'h dyn HeaderLookup,
        now: SystemTime,
    ) -> Result<Head<'h>, VerifyError> {
        let mut found = [None; 3];
        headers.get_first_of(&HEAD_NAMES, &mut found);
        let [id, ts, sig] = found;
        let (id_name, id) = header(id, ID)?;
        let (ts_name, ts_raw) = header(ts, TIMESTAMP)?;
        let (sig_name, signatures) = header(sig, SIGNATURE)?;
        // The id is kept as text; the timestamp and signatures are read as
        // the bytes they are (checked visible ASCII above).
        let id = std::str::from_utf8(id)
            .map_err(|_| VerifyError::malformed(id_name, "not visible ASCII"))?;
        if id.is_empty() {
            return Err(VerifyError::malformed(ID[0], "empty"));
        }
        // The signed timestamp is the header's own text (trimmed), exactly as
        // sent (a header value is visible ASCII: ASCII trimming is all).
        let ts_trimmed = ts_raw.trim_ascii();
        let timestamp = parse_timestamp_bytes(ts_name, ts_trimmed)?;
        check_timestamp(timestamp, now, self.tolerance)?;
        Ok(Head {
            id,
            timestamp,
            ts_text: ts_trimmed,
            sig_name,
            signatures,
        })
    }
}

/// Builds a [`StandardWebhooks`] verifier.
///
/// Errors in any secret or key are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct StandardWebhooksBuilder {
    /// The secrets, and the first error met adding secrets or keys.
    secrets: SecretList,
    public_keys: Vec<VerifyingKey>,
    tolerance: Option<Duration>,
}

debug_fields!(StandardWebhooksBuilder: secrets, public_keys.len(), tolerance, ..);

impl StandardWebhooksBuilder {
    fn fail(mut self, error: ConfigError) -> Self {
        self.secrets.fail(error);
        self
    }

    /// Adds a secret: `whsec_<base64>` as senders show it, with or without the
    /// base64 padding, at least 24 bytes decoded. Anything else makes
    /// [`build`](Self::build) fail; use [`raw_secret`](Self::raw_secret) for
    /// secrets in another form.
    pub fn secret(self, secret: impl AsRef<str>) -> Self {
        match decode_secret(secret.as_ref()) {
            Ok(bytes) => self.raw_secret(&*bytes),
            Err(e) => self.fail(e),
        }
    }

    /// Adds a secret given as raw bytes (not base64, no prefix, no minimum
    /// length beyond not empty).
    pub fn raw_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref());
        self
    }

    /// Trusts an ed25519 public key for `v1a` signatures: `whpk_<base64>` (32 bytes).
    #[cfg(feature = "ed25519")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ed25519")))]
    pub fn public_key(mut self, key: impl AsRef<str>) -> Self {
        let bytes = match decode_prefixed(key.as_ref(), "whpk_", "public key") {
            Ok(bytes) => bytes,
            Err(e) => return self.fail(e),
        };
        let Ok(bytes) = <[u8; 32]>::try_from(bytes.as_slice()) else {
            return self.fail(ConfigError::Invalid {
                what: "public key",
                reason: "not 32 bytes",
            });
        };
        match VerifyingKey::from_bytes(&bytes) {
            Ok(key) => {
                self.public_keys.push(key);
                self
            }
            Err(_) => self.fail(ConfigError::Invalid {
                what: "public key",
                reason: "not an ed25519 point",
            }),
        }
    }

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets and keys, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<StandardWebhooks, ConfigError> {
        let secrets = self.secrets.finish_allowing_none()?;
        if secrets.is_empty() && self.public_keys.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        Ok(StandardWebhooks {
            secrets,
            public_keys: self.public_keys,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}

/// The shortest secret the spec allows, in bytes decoded.
const MIN_SECRET_LEN: usize = 24;

/// Standard base64 with the padding optional: dashboards and copy-paste lose
/// the trailing `=`, and the reference Python library accepts secrets without
/// it (standard-webhooks/standard-webhooks,
/// `libraries/python/standardwebhooks/webhooks.py`, "add padding in case
/// whsecret is unpadded base64").
const B64_CONFIG: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// A `whsec_<base64>` secret: the prefix is required, the padding optional,
/// and at least [`MIN_SECRET_LEN`] bytes.
fn decode_secret(value: &str) -> Result<Zeroizing<Vec<u8>>, ConfigError> {
    let value = value.trim();
    if value.is_empty() || value == "whsec_" {
        return Err(ConfigError::Empty("secret"));
    }
    let Some(encoded) = value.strip_prefix("whsec_") else {
        return Err(ConfigError::Invalid {
            what: "secret",
            reason: "expected whsec_ followed by base64 (raw_secret takes other forms)",
        });
    };
    let bytes = decode_prefixed(encoded, "", "secret")?;
    if bytes.len() < MIN_SECRET_LEN {
        return Err(ConfigError::Invalid {
            what: "secret",
            reason: "shorter than 24 bytes, the Standard Webhooks minimum",
        });
    }
    Ok(bytes)
}

/// Strips an optional `prefix` and decodes standard base64 (padding
/// optional); empty is refused. The bytes are wiped when dropped (they are
/// secrets but for public keys).
fn decode_prefixed(
    value: &str,
    prefix: &str,
    what: &'static str,
) -> Result<Zeroizing<Vec<u8>>, ConfigError> {
    let encoded = value.strip_prefix(prefix).unwrap_or(value).trim();
    if encoded.is_empty() {
        return Err(ConfigError::Empty(what));
    }
    let bytes = Zeroizing::new(
        B64_CONFIG
            .decode(encoded)
            .map_err(|_| ConfigError::Invalid {
                what,
                reason: "not base64",
            })?,
    );
    if bytes.is_empty() {
        return Err(ConfigError::Empty(what));
    }
    Ok(bytes)
}

/// Signs deliveries the way a Standard Webhooks sender does.
///
/// For tests, simulators and services that send as well as receive.
///
/// ```
/// use webhooks_core::scheme::standard::Signer;
///
/// let signer = Signer::hmac("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
/// assert_eq!(
///     signer.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#),
///     "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
/// );
/// # Ok::<(), webhooks_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Signer(SignerKey);

#[derive(Clone)]
enum SignerKey {
    Hmac(HmacKey),
    #[cfg(feature = "ed25519")]
    Ed25519(Box<SigningKey>),
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.0 {
            SignerKey::Hmac(_) => "v1",
            #[cfg(feature = "ed25519")]
            SignerKey::Ed25519(_) => "v1a",
        };
        write!(f, "Signer({kind}, [redacted])")
    }
}

impl Signer {
    /// An HMAC (`v1`) signer from a `whsec_…` secret, read as
    /// [`StandardWebhooksBuilder::secret`] reads it.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the secret is empty, lacks the `whsec_` prefix, is
    /// not base64 or is shorter than 24 bytes.
    pub fn hmac(secret: impl AsRef<str>) -> Result<Self, ConfigError> {
        let bytes = decode_secret(secret.as_ref())?;
        Ok(Self(SignerKey::Hmac(HmacKey::new(&bytes, "secret")?)))
    }

    /// An ed25519 (`v1a`) signer from a `whsk_…` secret key: base64 of the
    /// 32-byte seed, or of the 64-byte seed-and-public-key form.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the key is empty, not base64 or of the wrong length.
    #[cfg(feature = "ed25519")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ed25519")))]
    pub fn ed25519(secret_key: impl AsRef<str>) -> Result<Self, ConfigError> {
        let bytes = decode_prefixed(secret_key.as_ref(), "whsk_", "secret key")?;
        let seed: Zeroizing<[u8; 32]> = match bytes.len() {
            32 | 64 => Zeroizing::new(bytes[..32].try_into().map_err(|_| ConfigError::NoKeys)?),
            _ => {
                return Err(ConfigError::Invalid {
                    what: "secret key",
                    reason: "not 32 or 64 bytes",
                });
            }
        };
        let key = SigningKey::from_bytes(&seed);
        if bytes.len() == 64 && key.verifying_key().as_bytes()[..] != bytes[32..] {
            return Err(ConfigError::Invalid {
                what: "secret key",
                reason: "public half does not match the seed",
            });
        }
        Ok(Self(SignerKey::Ed25519(Box::new(key))))
    }

    /// The `whpk_…` public key receivers must trust, for an ed25519 signer.
    #[must_use]
    pub fn public_key(&self) -> Option<String> {
        match &self.0 {
            SignerKey::Hmac(_) => None,
            #[cfg(feature = "ed25519")]
            SignerKey::Ed25519(key) => Some(format!(
                "whpk_{}",
                B64.encode(key.verifying_key().as_bytes())
            )),
        }
    }

    /// One signature entry (`v1,…` or `v1a,…`) for the delivery.
    #[must_use]
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        match &self.0 {
            SignerKey::Hmac(key) => sign_v1(key, id, timestamp, body),
            #[cfg(feature = "ed25519")]
            SignerKey::Ed25519(key) => {
                let mut buf = [0u8; 20];
                let content = signed_content(id, decimal(timestamp, &mut buf), body);
                format!("v1a,{}", B64.encode(key.sign(&content).to_bytes()))
            }
        }
    }

    /// The three headers a sender sends for the delivery.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when `id` cannot be a header value.
    pub fn headers(&self, id: &str, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        standard_headers(id, timestamp, &self.sign(id, timestamp, body))
    }
}
