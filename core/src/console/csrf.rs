//! The console's form tokens: bound to the identity `authorize` returned
//! (the browser's own `Origin` / `Sec-Fetch-Site` headers are checked by
//! `crate::cross_site`, shared with the admin API).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac as _};
use sha2::Sha256;

/// How long a token printed in a page stays valid.
pub(super) const TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// The key that signs the tokens (random per console unless configured),
/// wiped when dropped.
#[derive(Clone)]
pub(crate) struct CsrfKey([u8; 32]);

impl Drop for CsrfKey {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl zeroize::ZeroizeOnDrop for CsrfKey {}

impl CsrfKey {
    pub(super) fn random() -> Self {
        let mut key = Self([0_u8; 32]);
        // Without randomness no key can be trusted: the key stays all zeros,
        // which `verify` never accepts, so every action is refused.
        if getrandom::fill(&mut key.0).is_err() {
            key.0 = [0; 32];
        }
        key
    }

    pub(super) fn from_bytes(key: [u8; 32]) -> Self {
        Self(key)
    }

    fn usable(&self) -> bool {
        self.0 != [0; 32]
    }

    fn mac(&self, expires: u64, identity: &str) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(&self.0).expect("any key length");
        mac.update(b"webhooks-console-csrf\0");
        mac.update(&expires.to_be_bytes());
        mac.update(identity.as_bytes());
        mac
    }

    /// A token for `identity`, valid for [`TOKEN_LIFETIME`] from `now`.
    pub(super) fn token(&self, identity: &str, now: SystemTime) -> String {
        let expires = unix(now) + TOKEN_LIFETIME.as_secs();
        let tag = self.mac(expires, identity).finalize().into_bytes();
        let mut out = format!("{expires}.");
        for byte in tag {
            out.push_str(&format!("{byte:02x}"));
        }
        out
    }

    /// Whether `token` was issued by this key for `identity` and has not expired.
    pub(super) fn verify(&self, token: &str, identity: &str, now: SystemTime) -> bool {
        if !self.usable() {
            return false;
        }
        let Some((expires, hex)) = token.split_once('.') else {
            return false;
        };
        let Ok(expires) = expires.parse::<u64>() else {
            return false;
        };
        if expires < unix(now) || hex.len() != 64 {
            return false;
        }
        let mut tag = [0_u8; 32];
        for (i, byte) in tag.iter_mut().enumerate() {
            match hex.get(2 * i..2 * i + 2).map(|h| u8::from_str_radix(h, 16)) {
                Some(Ok(value)) => *byte = value,
                _ => return false,
            }
        }
        self.mac(expires, identity).verify_slice(&tag).is_ok()
    }
}

fn unix(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bound_to_identity_key_and_time() {
        let key = CsrfKey::from_bytes([7; 32]);
        let now = SystemTime::now();
        let token = key.token("alice", now);
        assert!(key.verify(&token, "alice", now));
        assert!(!key.verify(&token, "bob", now));
        assert!(!CsrfKey::from_bytes([8; 32]).verify(&token, "alice", now));
        assert!(!key.verify(
            &token,
            "alice",
            now + TOKEN_LIFETIME + Duration::from_secs(2)
        ));
        assert!(!key.verify("", "alice", now));
        assert!(!key.verify("99999999999.zz", "alice", now));
        let (expires, _) = token.split_once('.').unwrap();
        let forged = format!(
            "{}.{}",
            expires.parse::<u64>().unwrap() + 1000,
            &token[expires.len() + 1..]
        );
        assert!(!key.verify(&forged, "alice", now));
        assert!(!CsrfKey::from_bytes([0; 32]).verify(
            &CsrfKey::from_bytes([0; 32]).token("a", now),
            "a",
            now
        ));
    }
}
