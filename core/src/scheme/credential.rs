//! Credentials a provider documents that are not its webhook secret.
//!
//! A provider's dashboard shows several secrets side by side, and the wrong
//! one pasted into a verifier builds fine and then answers `401` to every
//! delivery. Where a provider documents the format of its other credentials
//! (an API key's prefix, a token's, an identifier's), the builders refuse
//! them when they are built, with a reason naming the secret to use.

use crate::ConfigError;

/// One kind of credential that is not the webhook secret, recognised by its
/// documented shape.
pub(crate) struct OtherCredential {
    /// The documented prefixes (any one of them).
    pub(crate) prefixes: &'static [&'static str],
    /// The length of the whole value when the format fixes it, with the rest
    /// after the prefix in hex digits (Twilio's identifiers).
    pub(crate) hex_len: Option<usize>,
    /// What the value is and which secret to use instead (the error's reason).
    pub(crate) reason: &'static str,
}

impl OtherCredential {
    /// A credential recognised by one of `prefixes`.
    pub(crate) const fn prefixed(prefixes: &'static [&'static str], reason: &'static str) -> Self {
        Self {
            prefixes,
            hex_len: None,
            reason,
        }
    }

    fn matches(&self, secret: &[u8]) -> bool {
        self.prefixes.iter().any(|prefix| {
            let Some(rest) = secret.strip_prefix(prefix.as_bytes()) else {
                return false;
            };
            match self.hex_len {
                None => true,
                Some(len) => secret.len() == len && rest.iter().all(u8::is_ascii_hexdigit),
            }
        })
    }
}

/// The first of `others` that `secret` is, as the error to report.
pub(crate) fn refuse(secret: &[u8], others: &[OtherCredential]) -> Result<(), ConfigError> {
    match others.iter().find(|other| other.matches(secret)) {
        Some(other) => Err(ConfigError::Invalid {
            what: "secret",
            reason: other.reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OTHERS: &[OtherCredential] = &[
        OtherCredential::prefixed(&["key_"], "a key"),
        OtherCredential {
            prefixes: &["AC"],
            hex_len: Some(6),
            reason: "an id",
        },
    ];

    #[test]
    fn prefixes_and_fixed_shapes_are_recognised() {
        let reason = |s: &str| match refuse(s.as_bytes(), OTHERS) {
            Err(ConfigError::Invalid { reason, .. }) => Some(reason),
            _ => None,
        };
        assert_eq!(reason("key_live_1"), Some("a key"));
        assert_eq!(reason("ACab12"), Some("an id"));
        // The fixed shape needs its length and its hex digits.
        assert_eq!(reason("ACab123"), None);
        assert_eq!(reason("ACabzz"), None);
        assert_eq!(reason("the secret"), None);
        assert_eq!(reason("my_key_"), None);
    }
}
