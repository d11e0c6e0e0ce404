//! The keys deliveries are deduplicated under, shared by the receiver's
//! claim and the inbox's accept: the namespace a key is made in, and the
//! form a key reaches a store in (short printable ASCII, or a digest).

use std::fmt::Write as _;

use sha2::{Digest as _, Sha256};

use crate::Verified;

/// The namespace of every [`Identity::ReplayToken`](crate::Identity::ReplayToken)
/// (Mailgun's token), whatever the route's: a token seen by one route is
/// refused by every route sharing the store.
pub const REPLAY_NAMESPACE: &str = "webhooks-replay";

/// Longest key handed to a store as is, in bytes; longer keys reach it as a
/// digest.
pub const MAX_STORE_KEY_LEN: usize = 256;

/// Marks a key that reaches the store as a digest.
const DIGEST_MARKER: &str = ":#sha256:";

/// The namespace a delivery's dedup key is made in: the route's, or for a
/// [replay token](crate::Identity::ReplayToken) [`REPLAY_NAMESPACE`], the
/// same for every route.
pub(crate) fn key_namespace<'a>(route: &'a str, verified: &Verified) -> &'a str {
    match verified.identity {
        crate::Identity::ReplayToken => REPLAY_NAMESPACE,
        _ => route,
    }
}

/// The key a store sees for the pipeline key `key`: `key` itself when it is
/// at most [`MAX_STORE_KEY_LEN`] bytes of printable ASCII (space included)
/// and does not contain `:#sha256:`; otherwise `{namespace}:#sha256:{hex}`,
/// the SHA-256 of the whole key. Control bytes (NUL…), non-ASCII text and
/// oversized ids thus never reach a store, and a digest key can never equal
/// a key stored as is.
pub(crate) fn store_key(namespace: &str, key: String) -> String {
    // One pass, eight bytes at a time: printable, and without `#` a key
    // cannot hold the marker (the rare key with one is searched for it).
    let (printable, hash_sign) = scan(key.as_bytes());
    let safe =
        key.len() <= MAX_STORE_KEY_LEN && printable && !(hash_sign && key.contains(DIGEST_MARKER));
    if safe {
        return key;
    }
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::with_capacity(namespace.len() + DIGEST_MARKER.len() + 64);
    out.push_str(namespace);
    out.push_str(DIGEST_MARKER);
    for byte in digest {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Whether every byte is printable ASCII, space included (0x20–0x7e), and
/// whether one is `#`.
fn scan(bytes: &[u8]) -> (bool, bool) {
    use crate::headers::{printable_word, word_has};
    let (words, rest) = bytes.as_chunks::<8>();
    let (mut printable, mut hash_sign) = (true, false);
    for word in words {
        printable &= printable_word(*word);
        hash_sign |= word_has(*word, b'#');
    }
    for b in rest {
        printable &= (0x20..0x7f).contains(b);
        hash_sign |= *b == b'#';
    }
    (printable, hash_sign)
}

/// Reads a string or number at `pointer` in a JSON body.
pub(crate) fn json_pointer_id(body: &[u8], pointer: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    match value.pointer(pointer)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Eight bytes at a time, `scan` answers as a byte-by-byte check
        /// does, wherever an out-of-range byte or a `#` sits.
        #[test]
        fn scan_reads_every_byte(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => 0x20u8..0x7f,
                    1 => proptest::sample::select(vec![0u8, b'\t', 0x1f, 0x7f, 0x80, 0xc3, 0xff, b'#', b'"', b'$']),
                ],
                0..40,
            )
        ) {
            let printable = bytes.iter().all(|b| (0x20..0x7f).contains(b));
            let hash_sign = bytes.contains(&b'#');
            proptest::prop_assert_eq!(scan(&bytes), (printable, hash_sign));
        }
    }

    #[test]
    fn a_key_reaches_the_store_as_is_only_when_printable_short_and_unmarked() {
        let plain = "webhooks:standard-webhooks:evt_1".to_owned();
        assert_eq!(store_key("webhooks", plain.clone()), plain);
        for odd in [
            "webhooks:s:tab\there",
            "webhooks:s:caf\u{e9}",
            "webhooks:s:del\u{7f}",
            "webhooks:s:x:#sha256:00",
        ] {
            let key = store_key("webhooks", odd.to_owned());
            assert!(key.starts_with("webhooks:#sha256:"), "{odd:?} -> {key}");
            assert_eq!(key.len(), "webhooks:#sha256:".len() + 64);
        }
        // A `#` alone is printable and no marker.
        let hashed = "webhooks:s:#1".to_owned();
        assert_eq!(store_key("webhooks", hashed.clone()), hashed);
        let long = format!("webhooks:s:{}", "x".repeat(MAX_STORE_KEY_LEN));
        assert!(store_key("webhooks", long).contains(DIGEST_MARKER));
    }
}
