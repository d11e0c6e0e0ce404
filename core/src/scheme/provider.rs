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

/// An `application/x-www-form-urlencoded` body decoded into `(name, value)`
/// pairs sorted by name then value, as Twilio and Mandrill sign them: one
/// buffer of decoded text and the pairs' offsets in it (no allocation per
/// pair).
pub(crate) struct FormParams {
    text: String,
    /// `(name start, name end = value start, value end)` in `text`.
    pairs: Vec<(usize, usize, usize)>,
}

impl FormParams {
    /// The pairs, in signing order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs
            .iter()
            .map(|&(a, b, c)| (&self.text[a..b], &self.text[b..c]))
    }
}

/// An `application/x-www-form-urlencoded` body as [`FormParams`],
/// decoded (`+` is a space, `%XX` a byte) and sorted by name then value.
/// `None` when a name or value is not UTF-8 once decoded or has a bad escape.
pub(crate) fn sorted_form_params(body: &[u8]) -> Option<FormParams> {
    // One pass over the body: decoded text is never longer than its encoding.
    let mut text = vec![0u8; body.len()];
    let mut len = 0;
    let mut pairs = Vec::new();
    // Where the pair starts in the body and in `text`, and its name's end.
    let (mut raw_start, mut start, mut middle) = (0, 0, None);
    let mut i = 0;
    while i <= body.len() {
        let byte = body.get(i).copied();
        match byte {
            None | Some(b'&') => {
                // Empty pairs (`&&`, a trailing `&`) are skipped.
                if i > raw_start {
                    pairs.push((start, middle.unwrap_or(len), len));
                }
                raw_start = i + 1;
                start = len;
                middle = None;
            }
            Some(b'=') if middle.is_none() => middle = Some(len),
            Some(b'+') => {
                text[len] = b' ';
                len += 1;
            }
            Some(b'%') => {
                let hi = hex_digit(*body.get(i + 1)?)?;
                let lo = hex_digit(*body.get(i + 2)?)?;
                text[len] = (hi << 4) | lo;
                len += 1;
                i += 2;
            }
            Some(other) => {
                text[len] = other;
                len += 1;
            }
        }
        i += 1;
    }
    text.truncate(len);
    // Each name and value must be UTF-8 on its own: the whole text is, and
    // every piece starts and ends on a character boundary.
    let text = String::from_utf8(text).ok()?;
    if !pairs
        .iter()
        .all(|&(a, b, _)| text.is_char_boundary(a) && text.is_char_boundary(b))
    {
        return None;
    }
    // Stable sort: linear on the (often already sorted) order senders use.
    let bytes = text.as_bytes();
    pairs.sort_by(|&(a, b, c), &(x, y, z)| {
        bytes[a..b]
            .cmp(&bytes[x..y])
            .then_with(|| bytes[b..c].cmp(&bytes[y..z]))
    });
    Some(FormParams { text, pairs })
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
///
/// Reading stops as soon as every key has been seen, so fields near the
/// start of a large body cost little. Only call it on an authenticated body:
/// what follows the last key read is not checked.
pub(crate) fn body_fields<const N: usize>(body: &[u8], keys: [&str; N]) -> [Option<String>; N] {
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};

    /// Fills `out`; `done` records that every key was seen (the parse is then
    /// cut short, which serde_json reports as an error).
    struct Fields<'k, 'o, const N: usize> {
        keys: &'k [&'k str; N],
        out: &'o mut [Option<String>; N],
        done: &'o mut bool,
    }

    impl<'de, const N: usize> Visitor<'de> for Fields<'_, '_, N> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = [false; N];
            while let Some(found) = map.next_key_seed(Key(self.keys))? {
                match found {
                    Some(i) => {
                        self.out[i] = match map.next_value::<serde_json::Value>()? {
                            serde_json::Value::String(s) if !s.is_empty() => Some(s),
                            serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => {
                                Some(n.to_string())
                            }
                            _ => None,
                        };
                        seen[i] = true;
                        if seen.iter().all(|s| *s) {
                            *self.done = true;
                            return Ok(());
                        }
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            *self.done = true;
            Ok(())
        }
    }

    /// A key, as its index among `keys` (compared where it lies in the
    /// body, not copied).
    struct Key<'k, const N: usize>(&'k [&'k str; N]);

    impl<'de, const N: usize> Visitor<'de> for Key<'_, N> {
        type Value = Option<usize>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a key")
        }

        fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Option<usize>, E> {
            Ok(self.0.iter().position(|k| *k == key))
        }
    }

    impl<'de, const N: usize> DeserializeSeed<'de> for Key<'_, N> {
        type Value = Option<usize>;

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
            d.deserialize_str(self)
        }
    }

    impl<'de, const N: usize> DeserializeSeed<'de> for Fields<'_, '_, N> {
        type Value = ();

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    let mut out: [Option<String>; N] = std::array::from_fn(|_| None);
    let mut done = false;
    let mut de = serde_json::Deserializer::from_slice(body);
    let fields = Fields {
        keys: &keys,
        out: &mut out,
        done: &mut done,
    };
    // Cut short on purpose once every key is seen: only `done` matters.
    let _ = fields.deserialize(&mut de);
    if done {
        out
    } else {
        std::array::from_fn(|_| None)
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
        let p: Vec<(String, String)> = p.iter().map(|(k, v)| (k.into(), v.into())).collect();
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
        // UTF-8 across a name and its value, but neither on its own.
        assert!(sorted_form_params(b"%C3=%A9").is_none());
        assert_eq!(
            sorted_form_params(b"%C3%A9=%E2%82%AC&=")
                .unwrap()
                .iter()
                .collect::<Vec<_>>(),
            [("", ""), ("\u{e9}", "\u{20ac}")]
        );
        assert!(sorted_form_params(b"a=%4").is_none());
        assert!(sorted_form_params(b"a=%").is_none());
        // Only the first `=` splits; empty pairs are skipped; an escaped
        // `&` or `=` is text.
        let p = sorted_form_params(b"&&b=x=y&&a%3D=%26&").unwrap();
        assert_eq!(p.iter().collect::<Vec<_>>(), [("a=", "&"), ("b", "x=y")]);
        assert_eq!(sorted_form_params(b"").unwrap().iter().count(), 0);
    }

    #[test]
    fn body_fields_read_strings_and_integers() {
        let body = br#"{"id":"evt_1","nested":{"id":"no"},"type":2,"x":[1,{"a":"b"}],"e":""}"#;
        assert_eq!(
            body_fields(body, ["id", "type", "e", "missing"]),
            [Some("evt_1".into()), Some("2".into()), None, None]
        );
        assert_eq!(body_fields(b"[1,2]", ["id"]), [None]);
        // Every key seen: the rest is not read.
        assert_eq!(
            body_fields(br#"{"id":"a","type":"b",!!!"#, ["id", "type"]),
            [Some("a".into()), Some("b".into())]
        );
        // A key missing and the body broken: nothing.
        assert_eq!(
            body_fields(br#"{"id":"a","x":!!!"#, ["id", "type"]),
            [None, None]
        );
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
