//! Plumbing the provider schemes share beyond `mod.rs`: more digests,
//! signatures of any length, interned names, form and JSON bodies.

use std::collections::BTreeSet;
use std::sync::Mutex;

use ::hmac::Hmac;
use sha1::Sha1;
use sha2::Sha512;

use crate::VerifyError;

/// HMAC-SHA1 (Twilio, Mandrill, Intercom, GitHub's legacy header).
pub(crate) type HmacSha1 = Hmac<Sha1>;
/// HMAC-SHA512.
pub(crate) type HmacSha512 = Hmac<Sha512>;

/// The longest MAC any scheme here checks (SHA-512).
pub(crate) const MAX_MAC: usize = 64;

/// `name` as a `&'static str`, stored once per distinct value for the life of
/// the process.
///
/// Error reasons carry `&'static str` names; a verifier configured at run
/// time with owned names interns them, so building the same configuration
/// again (per tenant, on reload) allocates nothing new.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// Decodes hex (either case) into `out`, returning the length; `None` when
/// not hex or longer than `out`.
pub(crate) fn decode_hex_into(s: &str, out: &mut [u8]) -> Option<usize> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) || s.len() / 2 > out.len() {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *byte = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
    }
    Some(s.len() / 2)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes standard padded base64 of at most [`MAX_MAC`] bytes into `out`,
/// returning the length.
pub(crate) fn decode_base64_into(s: &str, out: &mut [u8; MAX_MAC]) -> Option<usize> {
    use base64::Engine as _;
    // 64 bytes are 88 characters; refuse anything longer before decoding.
    if s.len() > 88 {
        return None;
    }
    let mut buf = [0u8; MAX_MAC + 3];
    let n = base64::engine::general_purpose::STANDARD
        .decode_slice(s, &mut buf)
        .ok()?;
    if n > MAX_MAC {
        return None;
    }
    out[..n].copy_from_slice(&buf[..n]);
    Some(n)
}

/// An `application/x-www-form-urlencoded` body as `(name, value)` pairs,
/// decoded (`+` is a space, `%XX` a byte), sorted by name then value, as
/// Twilio and Mandrill sign them. `None` when a pair is not UTF-8 once
/// decoded or has a bad escape.
pub(crate) fn sorted_form_params(body: &[u8]) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for pair in body.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let mut it = pair.splitn(2, |&b| b == b'=');
        let name = form_decode(it.next().unwrap_or_default())?;
        let value = form_decode(it.next().unwrap_or_default())?;
        pairs.push((name, value));
    }
    pairs.sort();
    Some(pairs)
}

fn form_decode(s: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = hex_digit(*s.get(i + 1)?)?;
                let lo = hex_digit(*s.get(i + 2)?)?;
                out.push((hi << 4) | lo);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The top-level JSON object of a body; `shown` names what was wanted from
/// it in the `400` when the body is not one.
pub(crate) fn json_object(
    body: &[u8],
    shown: &'static str,
) -> Result<serde_json::Map<String, serde_json::Value>, VerifyError> {
    match serde_json::from_slice(body) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err(VerifyError::malformed(shown, "body is not a JSON object")),
    }
}

/// A JSON value as the text a provider signs: a string's content, an
/// integer's digits; anything else is a `400` naming `shown`.
pub(crate) fn json_text(
    value: &serde_json::Value,
    shown: &'static str,
) -> Result<String, VerifyError> {
    match value {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => Ok(n.to_string()),
        _ => Err(VerifyError::malformed(shown, "not a string or an integer")),
    }
}

/// The top-level fields `keys` of a JSON body (strings as their content,
/// integers as digits), read without building the rest; `None` for a field
/// that is absent, empty or of another type, all `None` when the body is
/// not a JSON object.
pub(crate) fn body_fields<const N: usize>(body: &[u8], keys: [&str; N]) -> [Option<String>; N] {
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};

    struct Fields<'k, const N: usize>(&'k [&'k str; N]);

    impl<'de, const N: usize> Visitor<'de> for Fields<'_, N> {
        type Value = [Option<String>; N];

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out: [Option<String>; N] = std::array::from_fn(|_| None);
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                match self.0.iter().position(|k| *k == key) {
                    Some(i) => {
                        out[i] = match map.next_value::<serde_json::Value>()? {
                            serde_json::Value::String(s) if !s.is_empty() => Some(s),
                            serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => {
                                Some(n.to_string())
                            }
                            _ => None,
                        };
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(out)
        }
    }

    impl<'de, const N: usize> DeserializeSeed<'de> for Fields<'_, N> {
        type Value = [Option<String>; N];

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }

    let mut de = serde_json::Deserializer::from_slice(body);
    match Fields(&keys).deserialize(&mut de) {
        Ok(fields) => fields,
        Err(_) => std::array::from_fn(|_| None),
    }
}

/// Whether `presented` equals one of `tokens` (their SHA-256 digests,
/// computed at build), in time independent of where they differ and of
/// their lengths; the index of the first that does.
pub(crate) fn matching_token(tokens: &[[u8; 32]], presented: &[u8]) -> Option<usize> {
    use sha2::{Digest as _, Sha256};
    let digest: [u8; 32] = Sha256::digest(presented).into();
    let mut found = None;
    for (i, token) in tokens.iter().enumerate() {
        if super::ct_eq(token, &digest) && found.is_none() {
            found = Some(i);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_stores_each_name_once() {
        let a = intern(&String::from("x-provider-signature"));
        let b = intern(&String::from("x-provider-signature"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(a, "x-provider-signature");
    }

    #[test]
    fn form_params_decode_and_sort() {
        let p = sorted_form_params(b"b=2&a=x+y&a=%2B1&c=&d").unwrap();
        let want = [
            ("a", "%2B1"),
            ("a", "x y"),
            ("b", "2"),
            ("c", ""),
            ("d", ""),
        ];
        let got: Vec<(&str, &str)> = p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], ("a", "+1"));
        assert_eq!(&got[1..], &want[1..]);
        assert!(sorted_form_params(b"a=%zz").is_none());
        assert!(sorted_form_params(b"a=%ff").is_none());
    }

    #[test]
    fn body_fields_read_strings_and_integers() {
        let body = br#"{"id":"evt_1","nested":{"id":"no"},"type":2,"x":[1,{"a":"b"}],"e":""}"#;
        assert_eq!(
            body_fields(body, ["id", "type", "e", "missing"]),
            [Some("evt_1".into()), Some("2".into()), None, None]
        );
        assert_eq!(body_fields(b"[1,2]", ["id"]), [None]);
        assert_eq!(body_fields(b"not json", ["id"]), [None]);
    }

    #[test]
    fn tokens_match_by_digest() {
        use sha2::{Digest as _, Sha256};
        let tokens: Vec<[u8; 32]> = ["one", "two"]
            .iter()
            .map(|t| Sha256::digest(t).into())
            .collect();
        assert_eq!(matching_token(&tokens, b"two"), Some(1));
        assert_eq!(matching_token(&tokens, b"tw"), None);
        assert_eq!(matching_token(&tokens, b""), None);
    }

    #[test]
    fn variable_length_decoders() {
        let mut out = [0u8; MAX_MAC];
        assert_eq!(decode_hex_into("0aFF", &mut out), Some(2));
        assert_eq!(&out[..2], &[0x0a, 0xff]);
        assert_eq!(decode_hex_into("0aF", &mut out), None);
        assert_eq!(decode_hex_into(&"00".repeat(65), &mut out), None);
        assert_eq!(decode_base64_into("AAEC", &mut out), Some(3));
        assert_eq!(decode_base64_into(&"A".repeat(92), &mut out), None);
        assert_eq!(decode_base64_into("!!", &mut out), None);
    }
}
