//! `--tamper`: spoil a signed delivery the way an attacker or a broken
//! proxy would, to check that the receiver refuses it.

use std::str::FromStr;

use bytes::Bytes;
use http::HeaderName;
use webhooks_core::scheme::registry::SchemeInfo;

use crate::error::Failure;
use crate::signed::SignedRequest;

/// How to spoil a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tamper {
    /// One byte of the body changed after signing.
    Body,
    /// One digit of the signature changed.
    Signature,
    /// Signed this many seconds away from now (`timestamp=-400`).
    Timestamp(i64),
    /// A header removed.
    Drop(HeaderName),
}

impl FromStr for Tamper {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('=') {
            None if s == "body" => Ok(Self::Body),
            None if s == "signature" => Ok(Self::Signature),
            None if s == "timestamp" => Ok(Self::Timestamp(-3600)),
            Some(("timestamp", shift)) => shift
                .parse()
                .map(Self::Timestamp)
                .map_err(|_| format!("timestamp={shift}: not a number of seconds")),
            Some(("drop", name)) => HeaderName::try_from(name)
                .map(Self::Drop)
                .map_err(|_| format!("drop={name}: not a header name")),
            _ => Err("expected body, signature, timestamp[=SECONDS] or drop=HEADER".to_owned()),
        }
    }
}

impl std::fmt::Display for Tamper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Body => f.write_str("body"),
            Self::Signature => f.write_str("signature"),
            Self::Timestamp(shift) => write!(f, "timestamp={shift}"),
            Self::Drop(name) => write!(f, "drop={name}"),
        }
    }
}

impl Tamper {
    /// Refuses a tamper that cannot be refused by `scheme`'s receiver (a
    /// body it does not sign, a timestamp it does not have).
    pub(crate) fn check(&self, scheme: &SchemeInfo) -> Result<(), Failure> {
        match self {
            Self::Body if !scheme.signs_body => Err(Failure::usage(format!(
                "{} does not sign the body: --tamper body proves nothing (try signature)",
                scheme.name
            ))),
            Self::Timestamp(_) if !scheme.signs_timestamp => Err(Failure::usage(format!(
                "{} signs no timestamp: --tamper timestamp proves nothing",
                scheme.name
            ))),
            _ => Ok(()),
        }
    }

    /// The seconds to shift the signed time by.
    pub(crate) fn shift(&self) -> i64 {
        match self {
            Self::Timestamp(shift) => *shift,
            _ => 0,
        }
    }

    /// Spoils `request` (after signing; the timestamp is shifted when signing).
    pub(crate) fn apply(
        &self,
        scheme: &SchemeInfo,
        request: &mut SignedRequest,
    ) -> Result<(), Failure> {
        match self {
            Self::Body => request.body = spoil_body(&request.body),
            Self::Signature => match scheme.signature_header {
                Some(name) => {
                    let value = request
                        .headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .ok_or_else(|| {
                            Failure::usage(format!("no {name} header to tamper with"))
                        })?;
                    let spoiled = spoil_signature(value);
                    request.headers.insert(
                        HeaderName::from_static(name),
                        http::HeaderValue::try_from(spoiled).map_err(|_| {
                            Failure::usage("the spoiled signature is not a header value")
                        })?,
                    );
                }
                // Mailgun and SNS: the signature is in the body.
                None => {
                    let (pointer, field) = match scheme.name {
                        "sns" => ("/Signature", "Signature"),
                        _ => ("/signature/signature", "signature.signature"),
                    };
                    let mut value: serde_json::Value = serde_json::from_slice(&request.body)
                        .map_err(|_| Failure::usage("the signed body is not JSON"))?;
                    let signature = value
                        .pointer_mut(pointer)
                        .ok_or_else(|| Failure::usage(format!("no {field} field in the body")))?;
                    let spoiled = spoil_signature(signature.as_str().unwrap_or_default());
                    *signature = serde_json::Value::String(spoiled);
                    request.body = serde_json::to_vec(&value).unwrap_or_default().into();
                }
            },
            Self::Timestamp(_) => {}
            Self::Drop(name) => {
                if request.headers.remove(name).is_none() {
                    let sent: Vec<_> = request.headers.keys().map(HeaderName::as_str).collect();
                    return Err(Failure::usage(format!(
                        "--tamper drop={name}: no such header in the request (sent: {})",
                        sent.join(", ")
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The body with one byte changed: the first digit or letter after the
/// first quarter, swapped for another of its kind (the body stays JSON).
fn spoil_body(body: &Bytes) -> Bytes {
    let mut bytes = body.to_vec();
    let start = bytes.len() / 4;
    let at = (start..bytes.len())
        .chain(0..start)
        .find(|&i| bytes[i].is_ascii_alphanumeric());
    match at {
        Some(i) => bytes[i] = swap(bytes[i]),
        None => bytes.push(b' '),
    }
    bytes.into()
}

/// `c` swapped for another character valid in hex and base64 alike.
fn swap(c: u8) -> u8 {
    if c == b'0' { b'1' } else { b'0' }
}

/// The signature with one character in the middle of its last run of
/// hex/base64 digits changed (whatever the prefix: `v1=`, `sha256=`, `v1,`).
pub(crate) fn spoil_signature(value: &str) -> String {
    let bytes = value.as_bytes();
    let is_digit = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let end = bytes
        .iter()
        .rposition(|&c| c.is_ascii_alphanumeric())
        .map_or(0, |i| i + 1);
    let start = bytes[..end]
        .iter()
        .rposition(|&c| !is_digit(c))
        .map_or(0, |i| i + 1);
    let mut out = bytes.to_vec();
    if end > start {
        let mid = start + (end - start) / 2;
        out[mid] = swap(out[mid]);
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_change_in_their_digits() {
        assert_eq!(spoil_signature("sha256=abcd"), "sha256=ab0d");
        assert_eq!(spoil_signature("t=1,v1=0000"), "t=1,v1=0010");
        assert_eq!(spoil_signature("v1,QUJD+w=="), "v1,QUJ0+w==");
    }

    #[test]
    fn tamper_modes_parse() {
        assert_eq!(
            "timestamp=-400".parse::<Tamper>(),
            Ok(Tamper::Timestamp(-400))
        );
        assert_eq!("body".parse::<Tamper>(), Ok(Tamper::Body));
        assert!("drop=x-hub-signature-256".parse::<Tamper>().is_ok());
        assert!("nonsense".parse::<Tamper>().is_err());
        assert_eq!(
            spoil_body(&Bytes::from_static(b"{\"a\":\"xyz\"}")),
            "{\"0\":\"xyz\"}"
        );
    }
}
