//! Property tests for the Standard Webhooks verifier: every signed part is
//! bound by the signature, and no input makes verification panic.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::scheme::standard::Signer;
use webhooks_core::{Verifier, VerifyError};

const TOLERANCE: u64 = 300;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn ed25519_signer() -> Signer {
    Signer::ed25519(format!("whsk_{}", B64.encode([0x5a; 32]))).unwrap()
}

/// A verifier trusting `secret` (raw bytes) and the fixed ed25519 key.
fn verifier(secret: &[u8]) -> StandardWebhooks {
    StandardWebhooks::builder()
        .raw_secret(secret)
        .public_key(ed25519_signer().public_key().unwrap())
        .tolerance(Duration::from_secs(TOLERANCE))
        .build()
        .unwrap()
}

fn headers(id: &str, timestamp: u64, signature: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("webhook-id", HeaderValue::from_str(id).unwrap());
    h.insert("webhook-timestamp", HeaderValue::from(timestamp));
    h.insert(
        "webhook-signature",
        HeaderValue::from_str(signature).unwrap(),
    );
    h
}

/// The `v1,` or `v1a,` signature for the delivery.
fn sign(secret: &[u8], v1a: bool, id: &str, ts: u64, body: &[u8]) -> String {
    if v1a {
        ed25519_signer().sign(id, ts, body)
    } else {
        let v = StandardWebhooks::builder()
            .raw_secret(secret)
            .build()
            .unwrap();
        v.sign(id, ts, body).unwrap()
    }
}

fn id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.:-]{1,48}"
}

fn timestamp() -> impl Strategy<Value = u64> {
    1_000_000_000u64..4_000_000_000
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..600)
}

fn secret() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..100)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn signed_deliveries_verify(
        secret in secret(), v1a in any::<bool>(), id in id(), ts in timestamp(), body in body(),
        skew in -(TOLERANCE as i64)..=(TOLERANCE as i64),
    ) {
        let sig = sign(&secret, v1a, &id, ts, &body);
        let now = ts.checked_add_signed(skew).unwrap();
        let verified = verifier(&secret).verify(&headers(&id, ts, &sig), &body, at(now)).unwrap();
        prop_assert_eq!(verified.id.as_deref(), Some(id.as_str()));
        prop_assert_eq!(verified.timestamp, Some(ts));
    }

    #[test]
    fn a_changed_id_fails(
        secret in secret(), v1a in any::<bool>(), id in id(), other in id(), ts in timestamp(),
        body in body(),
    ) {
        prop_assume!(id != other);
        let sig = sign(&secret, v1a, &id, ts, &body);
        prop_assert_eq!(
            verifier(&secret).verify(&headers(&other, ts, &sig), &body, at(ts)),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn a_changed_timestamp_fails(
        secret in secret(), v1a in any::<bool>(), id in id(), ts in timestamp(), body in body(),
        delta in -(TOLERANCE as i64)..=(TOLERANCE as i64),
    ) {
        prop_assume!(delta != 0);
        let sig = sign(&secret, v1a, &id, ts, &body);
        let moved = ts.checked_add_signed(delta).unwrap();
        // `now` at the signed time: the moved timestamp is still fresh, so only
        // the signature can refuse it.
        prop_assert_eq!(
            verifier(&secret).verify(&headers(&id, moved, &sig), &body, at(ts)),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn a_changed_body_fails(
        secret in secret(), v1a in any::<bool>(), id in id(), ts in timestamp(), body in body(),
        change in 0usize..4, index in any::<prop::sample::Index>(), byte in any::<u8>(),
        bit in 0u8..8,
    ) {
        let sig = sign(&secret, v1a, &id, ts, &body);
        let mut other = body.clone();
        match change {
            // Flip one bit.
            0 if !other.is_empty() => { let i = index.index(other.len()); other[i] ^= 1 << bit; }
            // Drop one byte.
            1 if !other.is_empty() => { other.remove(index.index(other.len())); }
            // Insert one byte.
            2 => { other.insert(index.index(other.len() + 1), byte); }
            // Append one byte.
            _ => other.push(byte),
        }
        prop_assert_eq!(
            verifier(&secret).verify(&headers(&id, ts, &sig), &other, at(ts)),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn a_changed_signature_fails(
        secret in secret(), v1a in any::<bool>(), id in id(), ts in timestamp(), body in body(),
        index in any::<prop::sample::Index>(), bit in 0u8..8, truncate in any::<bool>(),
    ) {
        let sig = sign(&secret, v1a, &id, ts, &body);
        let (version, encoded) = sig.split_once(',').unwrap();
        let mut raw = B64.decode(encoded).unwrap();
        if truncate {
            raw.pop();
        } else {
            let i = index.index(raw.len());
            raw[i] ^= 1 << bit;
        }
        let tampered = format!("{version},{}", B64.encode(&raw));
        prop_assert_eq!(
            verifier(&secret).verify(&headers(&id, ts, &tampered), &body, at(ts)),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn a_different_secret_fails(
        secret in secret(), other in secret(), id in id(), ts in timestamp(), body in body(),
    ) {
        prop_assume!(secret != other);
        let sig = sign(&other, false, &id, ts, &body);
        prop_assert_eq!(
            verifier(&secret).verify(&headers(&id, ts, &sig), &body, at(ts)),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn the_valid_entry_is_found_among_decoys(
        secret in secret(), v1a in any::<bool>(), id in id(), ts in timestamp(), body in body(),
        decoys in prop::collection::vec(signature_entry(), 0..20),
        position in any::<prop::sample::Index>(),
    ) {
        let sig = sign(&secret, v1a, &id, ts, &body);
        let mut entries = decoys;
        entries.insert(position.index(entries.len() + 1), sig);
        let header = entries.join(" ");
        prop_assert!(verifier(&secret).verify(&headers(&id, ts, &header), &body, at(ts)).is_ok());
    }
}

/// Header names the verifier reads, and a few it does not.
fn header_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "svix-id",
        "svix-timestamp",
        "svix-signature",
        "content-type",
        "x-webhook-signature",
    ])
}

/// One signature-list entry (no spaces): plausible or not.
fn signature_entry() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..70).prop_map(|b| format!("v1,{}", B64.encode(b))),
        prop::collection::vec(any::<u8>(), 60..70).prop_map(|b| format!("v1a,{}", B64.encode(b))),
        "v1a?,[A-Za-z0-9+/=]{0,100}",
        "v[0-9a-z]{0,3},[!-~]{0,60}",
        "[!-~]{0,40}",
    ]
}

/// A header value: visible ASCII, structured, or arbitrary bytes.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(signature_entry(), 0..40).prop_map(|e| e.join(" ").into_bytes()),
        "[0-9]{0,25}".prop_map(String::into_bytes),
        "[ -~]{0,80}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..120),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_requests_never_panic(
        fields in prop::collection::vec((header_name(), header_value()), 0..8),
        body in prop::collection::vec(any::<u8>(), 0..300),
        now in any::<u64>(),
        secret in secret(),
    ) {
        let mut h = HeaderMap::new();
        for (name, value) in fields {
            if let Ok(value) = HeaderValue::from_bytes(&value) {
                h.append(HeaderName::from_static(name), value);
            }
        }
        let now = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(now)).unwrap_or(SystemTime::UNIX_EPOCH);
        match verifier(&secret).verify(&h, &body, now) {
            // Nothing here is signed: a success would be a forgery.
            Ok(v) => prop_assert!(false, "forged: {v:?}"),
            Err(e) => {
                let status = e.status().as_u16();
                prop_assert!(status == 400 || status == 401, "{e:?}");
            }
        }
    }

    #[test]
    fn arbitrary_signature_headers_with_valid_id_and_time_never_panic(
        id in id(), ts in timestamp(), value in header_value(), body in body(),
    ) {
        let mut h = HeaderMap::new();
        h.insert("webhook-id", HeaderValue::from_str(&id).unwrap());
        h.insert("webhook-timestamp", HeaderValue::from(ts));
        if let Ok(value) = HeaderValue::from_bytes(&value) {
            h.insert("webhook-signature", value);
        }
        let err = verifier(b"k").verify(&h, &body, at(ts)).unwrap_err();
        prop_assert!(matches!(
            err,
            VerifyError::NoMatchingSignature
                | VerifyError::MalformedHeader { .. }
                | VerifyError::MissingHeader(_)
        ), "{err:?}");
    }

    /// Issue 25, item 3: the checks made before the body is read refuse
    /// only what verification refuses, with the same error, and accept
    /// every genuine delivery.
    #[test]
    fn head_checks_refuse_only_what_verify_refuses(
        fields in prop::collection::vec((header_name(), header_value()), 0..8),
        body in prop::collection::vec(any::<u8>(), 0..300),
        now in 1_600_000_000u64..1_800_000_000,
        secret in secret(),
    ) {
        let mut h = HeaderMap::new();
        for (name, value) in fields {
            if let Ok(value) = HeaderValue::from_bytes(&value) {
                h.append(HeaderName::from_static(name), value);
            }
        }
        let v = verifier(&secret);
        if let Err(early) = v.check_headers(&h, at(now)) {
            prop_assert_eq!(Err(early), v.verify(&h, &body, at(now)).map(|_| ()));
        }
        let genuine = v.sign_headers("msg_1", now, &body).unwrap();
        prop_assert_eq!(v.check_headers(&genuine, at(now)), Ok(()));
    }
}
