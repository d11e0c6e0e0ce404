//! The message: its JSON fields, the canonical string SNS signs, its
//! timestamp, and the [`Signer`] that signs messages as SNS does.

use std::borrow::Cow;
use std::fmt;

use rsa::pkcs8::DecodePrivateKey as _;
use rsa::{Pkcs1v15Sign, PrivateKey};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use crate::scheme::encode_base64;
use crate::{ConfigError, VerifyError};

/// `SignatureVersion` `1` (SHA1withRSA) or `2` (SHA256withRSA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureVersion {
    /// SHA1withRSA, the default of SNS topics.
    V1,
    /// SHA256withRSA (the topic's `SignatureVersion` attribute set to 2).
    V2,
}

impl SignatureVersion {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "1",
            Self::V2 => "2",
        }
    }

    /// The PKCS#1 v1.5 digest of the canonical string, and its padding.
    pub(super) fn digest(self, canonical: &[u8]) -> (Vec<u8>, Pkcs1v15Sign) {
        match self {
            Self::V1 => (
                Sha1::digest(canonical).to_vec(),
                Pkcs1v15Sign::new::<Sha1>(),
            ),
            Self::V2 => (
                Sha256::digest(canonical).to_vec(),
                Pkcs1v15Sign::new::<Sha256>(),
            ),
        }
    }
}

/// An SNS message as delivered over HTTP(S): the JSON document, field by field.
///
/// Read a verified body as one (`VerifiedWebhook<SnsMessage>`) to see its
/// type and, for a `Notification`, its `Message` (for SES: the JSON of the
/// email event). Build one with [`notification`](Self::notification) or
/// [`subscription_confirmation`](Self::subscription_confirmation) and sign it
/// with a [`Signer`] in tests.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct SnsMessage {
    /// `Notification`, `SubscriptionConfirmation` or `UnsubscribeConfirmation`.
    #[serde(rename = "Type")]
    pub kind: String,
    /// The message id; SNS retries a delivery with the same one.
    pub message_id: String,
    /// The topic the message was published to.
    pub topic_arn: String,
    /// The subject of a notification, if the publisher gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The message: the payload of a notification, a human-readable text for
    /// confirmations.
    pub message: String,
    /// When SNS published it (ISO 8601, UTC).
    pub timestamp: String,
    /// The confirmation token of a (un)subscription confirmation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The URL that confirms a subscription (see [`Sns::confirm_subscription`](super::Sns::confirm_subscription)).
    #[serde(
        default,
        rename = "SubscribeURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub subscribe_url: Option<String>,
    /// The URL that unsubscribes the endpoint, on notifications.
    #[serde(
        default,
        rename = "UnsubscribeURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub unsubscribe_url: Option<String>,
    /// `1` or `2`.
    #[serde(default)]
    pub signature_version: String,
    /// The base64 RSA signature.
    #[serde(default)]
    pub signature: String,
    /// Where the signing certificate is.
    #[serde(default, rename = "SigningCertURL")]
    pub signing_cert_url: String,
}

impl SnsMessage {
    /// An unsigned `Notification`.
    #[must_use]
    pub fn notification(
        message_id: impl Into<String>,
        topic_arn: impl Into<String>,
        message: impl Into<String>,
        timestamp: impl Into<String>,
    ) -> Self {
        Self {
            kind: "Notification".into(),
            message_id: message_id.into(),
            topic_arn: topic_arn.into(),
            subject: None,
            message: message.into(),
            timestamp: timestamp.into(),
            token: None,
            subscribe_url: None,
            unsubscribe_url: None,
            signature_version: String::new(),
            signature: String::new(),
            signing_cert_url: String::new(),
        }
    }

    /// An unsigned `SubscriptionConfirmation`.
    #[must_use]
    pub fn subscription_confirmation(
        message_id: impl Into<String>,
        topic_arn: impl Into<String>,
        token: impl Into<String>,
        subscribe_url: impl Into<String>,
        timestamp: impl Into<String>,
    ) -> Self {
        let topic_arn = topic_arn.into();
        Self {
            kind: "SubscriptionConfirmation".into(),
            message: format!(
                "You have chosen to subscribe to the topic {topic_arn}.\nTo confirm the subscription, visit the SubscribeURL included in this message."
            ),
            message_id: message_id.into(),
            topic_arn,
            subject: None,
            timestamp: timestamp.into(),
            token: Some(token.into()),
            subscribe_url: Some(subscribe_url.into()),
            unsubscribe_url: None,
            signature_version: String::new(),
            signature: String::new(),
            signing_cert_url: String::new(),
        }
    }

    /// The same message with a `Subject`.
    #[must_use]
    pub fn with_subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// Whether SNS asks the endpoint to confirm a subscription.
    #[must_use]
    pub fn is_subscription_confirmation(&self) -> bool {
        self.kind == "SubscriptionConfirmation"
    }
}

/// The message types SNS signs, and the fields their canonical strings take,
/// in order (`Subject` only when present).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MessageType {
    Notification,
    SubscriptionConfirmation,
    UnsubscribeConfirmation,
}

impl MessageType {
    pub(super) fn parse(s: &str) -> Option<Self> {
        match s {
            "Notification" => Some(Self::Notification),
            "SubscriptionConfirmation" => Some(Self::SubscriptionConfirmation),
            "UnsubscribeConfirmation" => Some(Self::UnsubscribeConfirmation),
            _ => None,
        }
    }
}

/// The fields of a message, borrowed from the body where no unescaping is needed.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Fields<'a> {
    #[serde(borrow, default, rename = "Type")]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) message_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) topic_arn: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) subject: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) message: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) timestamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) token: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "SubscribeURL")]
    pub(super) subscribe_url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) signature_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) signature: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "SigningCertURL")]
    pub(super) signing_cert_url: Option<Cow<'a, str>>,
}

pub(super) fn required<'f>(
    field: &'f Option<Cow<'_, str>>,
    name: &'static str,
) -> Result<&'f str, VerifyError> {
    field.as_deref().ok_or(VerifyError::MissingField(name))
}

/// The canonical string SNS signs for a message of type `kind`.
pub(super) fn canonical(kind: MessageType, fields: &Fields<'_>) -> Result<String, VerifyError> {
    let mut out = String::with_capacity(256 + fields.message.as_deref().map_or(0, str::len));
    let mut push = |name: &str, value: &str| {
        out.push_str(name);
        out.push('\n');
        out.push_str(value);
        out.push('\n');
    };
    push("Message", required(&fields.message, "Message")?);
    push("MessageId", required(&fields.message_id, "MessageId")?);
    match kind {
        MessageType::Notification => {
            if let Some(subject) = fields.subject.as_deref() {
                push("Subject", subject);
            }
        }
        MessageType::SubscriptionConfirmation | MessageType::UnsubscribeConfirmation => {
            push(
                "SubscribeURL",
                required(&fields.subscribe_url, "SubscribeURL")?,
            );
        }
    }
    push("Timestamp", required(&fields.timestamp, "Timestamp")?);
    if kind != MessageType::Notification {
        push("Token", required(&fields.token, "Token")?);
    }
    push("TopicArn", required(&fields.topic_arn, "TopicArn")?);
    push(
        "Type",
        match kind {
            MessageType::Notification => "Notification",
            MessageType::SubscriptionConfirmation => "SubscriptionConfirmation",
            MessageType::UnsubscribeConfirmation => "UnsubscribeConfirmation",
        },
    );
    Ok(out)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (what SNS writes) into Unix seconds.
pub(super) fn parse_timestamp(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u64> {
        let digits = b.get(range)?;
        digits.iter().try_fold(0u64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
        })
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = &b[19..];
    let rest = match rest.first() {
        Some(b'.') => {
            let digits = rest[1..].iter().take_while(|d| d.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            &rest[1 + digits..]
        }
        _ => rest,
    };
    if rest != b"Z" {
        return None;
    }
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), for years >= 1970.
    if year < 1970 {
        return None;
    }
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Signs messages as SNS does, for tests and simulators: an RSA private key
/// whose certificate your test [`CertificateFetcher`](super::CertificateFetcher) serves at `cert_url`.
///
/// `Debug` never shows the key.
#[derive(Clone)]
pub struct Signer {
    key: PrivateKey,
    cert_url: String,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("cert_url", &self.cert_url)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer from a PKCS#8 DER RSA private key, naming `cert_url` as its
    /// certificate.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the key is not a PKCS#8 RSA key.
    pub fn from_pkcs8_der(der: &[u8], cert_url: impl Into<String>) -> Result<Self, ConfigError> {
        let key = PrivateKey::from_pkcs8_der(der).map_err(|_| ConfigError::Invalid {
            what: "private key",
            reason: "not a PKCS#8 RSA key",
        })?;
        Ok(Self {
            key,
            cert_url: cert_url.into(),
        })
    }

    /// The same key, naming `cert_url` as its certificate.
    #[must_use]
    pub fn with_cert_url(mut self, cert_url: impl Into<String>) -> Self {
        self.cert_url = cert_url.into();
        self
    }

    /// Signs `message` (setting `SignatureVersion`, `Signature` and
    /// `SigningCertURL`) and returns the JSON body SNS would send.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the message's type is not one SNS sends
    /// or it lacks a field its type needs (a confirmation without `Token` or
    /// `SubscribeURL`).
    pub fn sign(
        &self,
        mut message: SnsMessage,
        version: SignatureVersion,
    ) -> Result<Vec<u8>, ConfigError> {
        let invalid = |reason| ConfigError::Invalid {
            what: "SNS message",
            reason,
        };
        let kind = MessageType::parse(&message.kind).ok_or(invalid("unknown Type"))?;
        let fields = Fields {
            kind: Some(Cow::Borrowed(&message.kind)),
            message_id: Some(Cow::Borrowed(&message.message_id)),
            topic_arn: Some(Cow::Borrowed(&message.topic_arn)),
            subject: message.subject.as_deref().map(Cow::Borrowed),
            message: Some(Cow::Borrowed(&message.message)),
            timestamp: Some(Cow::Borrowed(&message.timestamp)),
            token: message.token.as_deref().map(Cow::Borrowed),
            subscribe_url: message.subscribe_url.as_deref().map(Cow::Borrowed),
            signature_version: None,
            signature: None,
            signing_cert_url: None,
        };
        let canonical =
            canonical(kind, &fields).map_err(|_| invalid("a field its Type needs is missing"))?;
        let (digest, padding) = version.digest(canonical.as_bytes());
        let signature = (self.key)
            .sign(padding, &digest)
            .map_err(|_| invalid("the key cannot sign"))?;
        message.signature_version = version.as_str().to_owned();
        message.signature = encode_base64(&signature);
        message.signing_cert_url.clone_from(&self.cert_url);
        serde_json::to_vec(&message).map_err(|_| invalid("not serializable"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_as_sns_writes_them() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_timestamp("2022-07-28T21:23:58.317Z"),
            Some(1_659_043_438)
        );
        assert_eq!(parse_timestamp("2000-02-29T12:00:00Z"), Some(951_825_600));
        for bad in [
            "",
            "2022-07-28",
            "2022-07-28T21:23:58",
            "2022-07-28T21:23:58.Z",
            "2022-07-28T21:23:58+01:00",
            "2022-13-28T21:23:58Z",
            "2022-07-28 21:23:58Z",
            "1969-12-31T23:59:59Z",
            "２022-07-28T21:23:58Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn canonical_strings_follow_the_type() {
        let fields: Fields<'_> = serde_json::from_str(
            r#"{"Type":"Notification","MessageId":"m","TopicArn":"t","Subject":"s","Message":"a\nb","Timestamp":"ts","UnsubscribeURL":"u"}"#,
        )
        .unwrap();
        assert_eq!(
            canonical(MessageType::Notification, &fields).unwrap(),
            "Message\na\nb\nMessageId\nm\nSubject\ns\nTimestamp\nts\nTopicArn\nt\nType\nNotification\n"
        );
        let fields: Fields<'_> = serde_json::from_str(
            r#"{"Type":"SubscriptionConfirmation","MessageId":"m","TopicArn":"t","Subject":"ignored","Message":"x","Timestamp":"ts","Token":"k","SubscribeURL":"u"}"#,
        )
        .unwrap();
        assert_eq!(
            canonical(MessageType::SubscriptionConfirmation, &fields).unwrap(),
            "Message\nx\nMessageId\nm\nSubscribeURL\nu\nTimestamp\nts\nToken\nk\nTopicArn\nt\nType\nSubscriptionConfirmation\n"
        );
        let missing: Fields<'_> =
            serde_json::from_str(r#"{"Type":"SubscriptionConfirmation","MessageId":"m","TopicArn":"t","Message":"x","Timestamp":"ts","SubscribeURL":"u"}"#).unwrap();
        assert_eq!(
            canonical(MessageType::SubscriptionConfirmation, &missing),
            Err(VerifyError::MissingField("Token"))
        );
    }
}
