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
    // One pass: printable, and without `#` a key cannot hold the marker
    // (the rare key with one is searched for it).
    let mut printable = key.len() <= MAX_STORE_KEY_LEN;
    let mut hash_sign = false;
    for b in key.bytes() {
        printable &= (0x20..0x7f).contains(&b);
        hash_sign |= b == b'#';
    }
    let safe = printable && !(hash_sign && key.contains(DIGEST_MARKER));
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

/// Reads a string or number at `pointer` in a JSON body.
pub(crate) fn json_pointer_id(body: &[u8], pointer: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    match value.pointer(pointer)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
