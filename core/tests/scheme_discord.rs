//! Discord interactions: the PING body of discord/discord-interactions-js
//! `src/__tests__/utils/SharedTestUtils.ts` (`pingRequestBody`), signed over
//! `{timestamp}{body}` as
//! https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers
//! describes. The SDK signs with a key it generates at run time, so this
//! test uses the key pair of RFC 8032 section 7.1, TEST 1, and the signature
//! was computed independently with OpenSSL 3
//! (`openssl pkeyutl -sign -inkey rfc8032-test1.pem -rawin -in msg`).

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Discord;
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

/// RFC 8032 section 7.1, TEST 1.
const PUBLIC_KEY: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const PING: &str = r#"{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}"#;
const TS: u64 = 1_614_265_330;
const SIGNATURE: &str = "5d90debe6dd3fa43334d09382217de7b48858adc49179e3f262d23b77100d99cd0405931b759dff2fa648c766abf16fde74f84fd21fe1b53a67f54cecc3c8c0b";

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn headers(signature: &str, ts: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "x-signature-ed25519",
        HeaderValue::from_str(signature).unwrap(),
    );
    h.insert("x-signature-timestamp", HeaderValue::from_str(ts).unwrap());
    h
}

fn seed() -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&SEED[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[test]
fn vector_verifies_and_is_a_ping() {
    let d = Discord::new(PUBLIC_KEY).unwrap();
    let v = d
        .verify(&headers(SIGNATURE, "1614265330"), PING.as_bytes(), at(TS))
        .unwrap();
    assert_eq!(v.id.as_deref(), Some("787053080478613555"));
    assert_eq!(v.event_type.as_deref(), Some("1"));
    assert_eq!(v.matched_key, MatchedKey::PublicKey(0));
    assert!(Discord::is_ping(PING.as_bytes()));
    assert!(!Discord::is_ping(br#"{"type":2}"#));
    assert_eq!(Discord::public_key_hex(&seed()), PUBLIC_KEY);
    let ours = Discord::sign_headers(&seed(), TS, PING.as_bytes()).unwrap();
    assert_eq!(ours["x-signature-ed25519"], SIGNATURE);
}

#[test]
fn stale_tampered_and_wrong_key_are_401() {
    let d = Discord::new(PUBLIC_KEY).unwrap();
    let h = headers(SIGNATURE, "1614265330");
    assert_eq!(
        d.verify(&h, PING.as_bytes(), at(TS + 301)),
        Err(VerifyError::TimestampTooOld)
    );
    assert_eq!(
        d.verify(&h, PING.replace("type\":1", "type\":2").as_bytes(), at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    let other = Discord::new(&Discord::public_key_hex(&[9; 32])).unwrap();
    assert_eq!(
        other.verify(&h, PING.as_bytes(), at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    let moved = headers(SIGNATURE, "1614265331");
    assert_eq!(
        d.verify(&moved, PING.as_bytes(), at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn several_keys_and_config_errors() {
    let d = Discord::builder()
        .public_key(&Discord::public_key_hex(&[9; 32]))
        .public_key(PUBLIC_KEY)
        .build()
        .unwrap();
    let v = d
        .verify(&headers(SIGNATURE, "1614265330"), PING.as_bytes(), at(TS))
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::PublicKey(1));
    assert!(matches!(
        Discord::new("abcd"),
        Err(ConfigError::Invalid { .. })
    ));
    assert_eq!(Discord::builder().build().unwrap_err(), ConfigError::NoKeys);
}

#[test]
fn missing_and_malformed_are_400() {
    let d = Discord::new(PUBLIC_KEY).unwrap();
    assert_eq!(
        d.verify(&HeaderMap::new(), PING.as_bytes(), at(TS)),
        Err(VerifyError::MissingHeader("x-signature-ed25519"))
    );
    let mut no_ts = HeaderMap::new();
    no_ts.insert("x-signature-ed25519", SIGNATURE.parse().unwrap());
    assert_eq!(
        d.verify(&no_ts, PING.as_bytes(), at(TS)),
        Err(VerifyError::MissingHeader("x-signature-timestamp"))
    );
    for (sig, ts) in [
        (&SIGNATURE[2..], "1614265330"),
        ("zz", "1614265330"),
        (SIGNATURE, "-1"),
    ] {
        assert_eq!(
            d.verify(&headers(sig, ts), PING.as_bytes(), at(TS))
                .unwrap_err()
                .status(),
            400
        );
    }
}
