//! Every rule of the Standard Webhooks verifier, one test each, plus the fixed
//! vectors published by the Standard Webhooks reference libraries and the Svix
//! libraries (each cited above its constant).

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{KeyInit as _, Mac as _};
use http::{HeaderMap, HeaderName, HeaderValue};
use webhooks_core::scheme::standard::Signer;
use webhooks_core::scheme::{StandardWebhooks, StandardWebhooksBuilder};
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

// ---------------------------------------------------------------------------
// Fixed vectors
// ---------------------------------------------------------------------------

/// The published vector, in every reference library's `sign` test:
/// standard-webhooks/standard-webhooks `libraries/python/tests/test_webhooks.py`
/// (`test_sign_function`), `libraries/go/webhook_test.go` (`TestWebhookSign`),
/// `libraries/javascript/src/webhook.test.ts` ("sign function works"), and
/// svix/svix-webhooks `python/tests/test_webhooks.py` (`test_sign_function`).
mod published {
    pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    pub(crate) const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    pub(crate) const TIMESTAMP: u64 = 1_614_265_330;
    pub(crate) const BODY: &[u8] = br#"{"test": 2432232314}"#;
    pub(crate) const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
}

/// svix/svix-webhooks `rust/src/webhooks.rs` (`test_sign`), the same vector as
/// standard-webhooks/standard-webhooks `libraries/rust/src/lib.rs` (`test_sign`).
mod svix_rust {
    pub(crate) const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    pub(crate) const ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
    pub(crate) const TIMESTAMP: u64 = 1_649_367_553;
    pub(crate) const BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
    pub(crate) const SIGNATURE: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";
    /// svix/svix-webhooks `rust/src/webhooks.rs` (`test_no_verify`): must not verify.
    pub(crate) const WRONG: &str = "v1,R3PTzyfHASBKHH98a7yexTwaJ4yNIcGhFQc1yuN+BPU=";
    /// svix/svix-webhooks `rust/src/webhooks.rs` (`test_verify_with_multiple_signatures`,
    /// `test_no_verify_with_multiple_signatures`) and standard-webhooks/standard-webhooks
    /// `libraries/rust/src/lib.rs` (same tests): decoys around the valid signature.
    pub(crate) const DECOYS: [&str; 3] = [
        "v1,tFtCZ5RDCPxzWQRWXWPgrCgE2frDBe9gjpbWQxnVfsQ=",
        "v1,Mm7xgUVICxZfQ3bgf0h0Dof65L/IFx+PnZvnDWPCX6Q=",
        "v1,9DfC1c3eeOrXB6w/5dIDydLNQaEyww5KalE5jLBZucE=",
    ];
}

/// standard-webhooks/standard-webhooks `libraries/go/webhook_asymmetric_test.go`
/// (`TestAsymmetricWebhookSign`): an ed25519 seed (base64 of the ASCII
/// `TESTSIGNINGKEYDONOTUSETHISFORANY`) over the published id, timestamp and body.
mod go_asymmetric {
    pub(crate) const SEED: &str = "VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=";
    pub(crate) const SIGNATURE: &str = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==";
}

/// standard-webhooks/standard-webhooks `libraries/python/tests/test_webhooks.py`
/// (`test_invalid_signature_raises_error`) and svix/svix-webhooks
/// `python/tests/test_webhooks.py` (same test): the published signature with its
/// last base64 character changed.
const PUBLISHED_ONE_CHAR_OFF: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=";

/// standard-webhooks/standard-webhooks `libraries/go/webhook_test.go`,
/// `libraries/python/tests/test_webhooks.py` and `libraries/javascript/src/webhook.test.ts`
/// ("multi sig payload is valid"), svix/svix-webhooks `python/tests/test_webhooks.py`
/// (`test_multi_sig_payload_is_valid`): the decoy, also sent as `v2,` and, in
/// `libraries/go/webhook_asymmetric_test.go`, as a (too short) `v1a,`.
const CEO5_DECOY: &str = "Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";

/// standard-webhooks/standard-webhooks `libraries/javascript/src/webhook.test.ts` and
/// svix/svix-webhooks `javascript/src/webhook.test.ts` ("invalid signature throws
/// error"): not even valid base64 of 32 bytes.
const JS_GARBAGE: &str = "v1,dawfeoifkpqwoekfpqoekf";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn headers(prefix: &str, id: &str, timestamp: &str, signature: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in [
        ("id", id),
        ("timestamp", timestamp),
        ("signature", signature),
    ] {
        h.insert(
            HeaderName::from_bytes(format!("{prefix}-{name}").as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    h
}

fn published_headers(signature: &str) -> HeaderMap {
    headers(
        "webhook",
        published::ID,
        &published::TIMESTAMP.to_string(),
        signature,
    )
}

fn published_verifier() -> StandardWebhooks {
    StandardWebhooks::new(published::SECRET).unwrap()
}

/// The published verifier's answer to `headers` at the published time.
fn verify_published_headers(headers: &HeaderMap) -> Result<webhooks_core::Verified, VerifyError> {
    published_verifier().verify(headers, published::BODY, at(published::TIMESTAMP))
}

fn verify_published(signature: &str) -> Result<webhooks_core::Verified, VerifyError> {
    verify_published_headers(&published_headers(signature))
}

/// Each signature header value is refused as not matching: `401`.
fn assert_no_match(signatures: &[&str]) {
    for sig in signatures {
        let err = verify_published(sig).unwrap_err();
        assert_eq!(err, VerifyError::NoMatchingSignature, "{sig}");
        assert_eq!(err.status(), 401);
    }
}

/// `err` is a malformed header: `400`.
fn assert_malformed(err: &VerifyError) {
    assert!(
        matches!(err, VerifyError::MalformedHeader { .. }),
        "{err:?}"
    );
    assert_eq!(err.status(), 400);
}

/// An HMAC-SHA256 computed here, independently of the crate.
fn independent_v1(secret: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", B64.encode(mac.finalize().into_bytes()))
}

/// A `whsk_` key from a fixed 32-byte seed, so every run signs the same bytes.
fn fixed_ed25519(seed_byte: u8) -> Signer {
    let seed: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(7) ^ seed_byte).collect();
    Signer::ed25519(format!("whsk_{}", B64.encode(seed))).unwrap()
}

// ---------------------------------------------------------------------------
// Fixed vectors
// ---------------------------------------------------------------------------

#[test]
fn published_vector_verifies() {
    let verified = verify_published(published::SIGNATURE).unwrap();
    assert_eq!(verified.scheme, "standard-webhooks");
    assert_eq!(verified.id.as_deref(), Some(published::ID));
    assert_eq!(verified.timestamp, Some(published::TIMESTAMP));
    assert_eq!(verified.matched_key, MatchedKey::Secret(0));
}

#[test]
fn published_vector_is_what_we_sign() {
    let signer = Signer::hmac(published::SECRET).unwrap();
    assert_eq!(
        signer.sign(published::ID, published::TIMESTAMP, published::BODY),
        published::SIGNATURE
    );
    assert_eq!(
        published_verifier()
            .sign(published::ID, published::TIMESTAMP, published::BODY)
            .unwrap(),
        published::SIGNATURE
    );
    assert_eq!(
        independent_v1(
            &B64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(),
            published::ID,
            "1614265330",
            published::BODY
        ),
        published::SIGNATURE
    );
}

#[test]
fn published_secret_works_padded_unpadded_and_raw() {
    // The Python reference accepts the secret without its base64 padding
    // (standard-webhooks/standard-webhooks
    // libraries/python/standardwebhooks/webhooks.py: "add padding in case
    // whsecret is unpadded base64"). The published secrets are 24 bytes and so
    // have no padding: a 25-byte secret of our own covers both shapes.
    let padded = format!("whsec_{}", B64.encode(b"twenty-five bytes secret!"));
    assert!(padded.ends_with('='), "{padded}");
    let unpadded = padded.trim_end_matches('=');
    let by_padded = StandardWebhooks::new(&padded).unwrap();
    let by_unpadded = StandardWebhooks::new(unpadded).unwrap();
    let sig =
        Signer::hmac(unpadded)
            .unwrap()
            .sign(published::ID, published::TIMESTAMP, published::BODY);
    assert_eq!(
        sig,
        Signer::hmac(&padded)
            .unwrap()
            .sign(published::ID, published::TIMESTAMP, published::BODY)
    );
    for v in [&by_padded, &by_unpadded] {
        assert!(verify_published_with(v, &sig).is_ok());
    }

    let v = StandardWebhooks::new(published::SECRET).unwrap();
    v.verify(
        &published_headers(published::SIGNATURE),
        published::BODY,
        at(published::TIMESTAMP),
    )
    .unwrap();
    // The raw-secret constructor takes the decoded bytes.
    let raw = B64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let v = StandardWebhooks::from_raw_secret(&raw).unwrap();
    v.verify(
        &published_headers(published::SIGNATURE),
        published::BODY,
        at(published::TIMESTAMP),
    )
    .unwrap();
}

#[test]
fn secrets_must_be_whsec_and_at_least_24_bytes() {
    // Bare base64 (the Python library's prefix-less form) and arbitrary
    // strings are refused by `new`: only the explicit raw constructor takes
    // other forms.
    for secret in [
        "notwhsec",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        // 23 bytes, padded and not.
        &format!("whsec_{}", B64.encode([7u8; 23])),
        format!("whsec_{}", B64.encode([7u8; 23])).trim_end_matches('='),
        // 14 bytes.
        "whsec_dGhlIG9sZCBzZWNyZXQ=",
    ] {
        for result in [
            StandardWebhooks::new(secret).map(drop),
            StandardWebhooks::builder().secret(secret).build().map(drop),
            Signer::hmac(secret).map(drop),
        ] {
            assert!(
                matches!(result, Err(ConfigError::Invalid { what: "secret", .. })),
                "{secret}: {result:?}"
            );
        }
    }
    // Exactly 24 bytes is enough.
    assert!(StandardWebhooks::new(format!("whsec_{}", B64.encode([7u8; 24]))).is_ok());
    // Raw secrets of any non-empty length are accepted explicitly.
    assert!(StandardWebhooks::from_raw_secret(b"notwhsec").is_ok());
    assert_eq!(
        StandardWebhooks::from_raw_secret(b"").unwrap_err(),
        ConfigError::Empty("secret")
    );
}

#[test]
fn svix_rust_vector_verifies_and_signs() {
    let v = StandardWebhooks::new(svix_rust::SECRET).unwrap();
    let ts = svix_rust::TIMESTAMP.to_string();
    for prefix in ["webhook", "svix"] {
        let h = headers(prefix, svix_rust::ID, &ts, svix_rust::SIGNATURE);
        let verified = v
            .verify(&h, svix_rust::BODY, at(svix_rust::TIMESTAMP))
            .unwrap();
        assert_eq!(verified.id.as_deref(), Some(svix_rust::ID));
    }
    assert_eq!(
        Signer::hmac(svix_rust::SECRET).unwrap().sign(
            svix_rust::ID,
            svix_rust::TIMESTAMP,
            svix_rust::BODY
        ),
        svix_rust::SIGNATURE
    );
}

#[test]
fn svix_rust_wrong_signature_is_refused() {
    let v = StandardWebhooks::new(svix_rust::SECRET).unwrap();
    let ts = svix_rust::TIMESTAMP.to_string();
    for prefix in ["webhook", "svix"] {
        let h = headers(prefix, svix_rust::ID, &ts, svix_rust::WRONG);
        assert_eq!(
            v.verify(&h, svix_rust::BODY, at(svix_rust::TIMESTAMP)),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

#[test]
fn svix_rust_decoys_around_a_valid_signature() {
    let v = StandardWebhooks::new(svix_rust::SECRET).unwrap();
    let ts = svix_rust::TIMESTAMP.to_string();
    let [a, b, c] = svix_rust::DECOYS;
    let with_valid = format!("{a} {b} {} {c}", svix_rust::SIGNATURE);
    let h = headers("svix", svix_rust::ID, &ts, &with_valid);
    assert!(
        v.verify(&h, svix_rust::BODY, at(svix_rust::TIMESTAMP))
            .is_ok()
    );

    let without = format!("{a} {b} {c}");
    let h = headers("svix", svix_rust::ID, &ts, &without);
    assert_eq!(
        v.verify(&h, svix_rust::BODY, at(svix_rust::TIMESTAMP)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn reference_multi_sig_vector_with_v2_decoy() {
    let sig = format!(
        "v1,{CEO5_DECOY} v2,{CEO5_DECOY} {} v1,{CEO5_DECOY}",
        published::SIGNATURE
    );
    assert!(verify_published(&sig).is_ok());
    let sig = format!("v1,{CEO5_DECOY} v2,{CEO5_DECOY} v1,{CEO5_DECOY}");
    assert_eq!(
        verify_published(&sig),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn reference_invalid_signatures_are_refused() {
    assert_no_match(&[
        PUBLISHED_ONE_CHAR_OFF,
        JS_GARBAGE,
        &format!("v1,{CEO5_DECOY}"),
        // libraries/javascript/src/webhook.test.ts ("partial signature throws error"):
        // the first 8 characters, and "v1,".
        &published::SIGNATURE[..8],
        "v1,",
    ]);
}

#[test]
fn go_asymmetric_vector_signs_and_verifies() {
    let signer = Signer::ed25519(format!("whsk_{}", go_asymmetric::SEED)).unwrap();
    assert_eq!(
        signer.sign(published::ID, published::TIMESTAMP, published::BODY),
        go_asymmetric::SIGNATURE
    );
    // The prefix is optional, as in TestAsymmetricWebhookPrefix.
    let unprefixed = Signer::ed25519(go_asymmetric::SEED).unwrap();
    assert_eq!(unprefixed.public_key(), signer.public_key());

    let v = StandardWebhooks::builder()
        .public_key(signer.public_key().unwrap())
        .build()
        .unwrap();
    let verified = v
        .verify(
            &published_headers(go_asymmetric::SIGNATURE),
            published::BODY,
            at(published::TIMESTAMP),
        )
        .unwrap();
    assert_eq!(verified.matched_key, MatchedKey::PublicKey(0));

    // TestAsymmetricWebhook: "invalid signature is invalid", "partial signature is
    // invalid", and the multi-sig case with v1/v2 decoys around the v1a signature.
    for bad in [&format!("v1a,{CEO5_DECOY}"), "v1a,"] {
        assert_eq!(
            v.verify(
                &published_headers(bad),
                published::BODY,
                at(published::TIMESTAMP)
            ),
            Err(VerifyError::NoMatchingSignature)
        );
    }
    let multi = format!(
        "v1,{CEO5_DECOY} v2,{CEO5_DECOY} {} v1,{CEO5_DECOY}",
        go_asymmetric::SIGNATURE
    );
    assert!(
        v.verify(
            &published_headers(&multi),
            published::BODY,
            at(published::TIMESTAMP)
        )
        .is_ok()
    );
}

// ---------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------

#[test]
fn svix_prefixed_headers_are_accepted() {
    let h = headers(
        "svix",
        published::ID,
        &published::TIMESTAMP.to_string(),
        published::SIGNATURE,
    );
    let verified = verify_published_headers(&h).unwrap();
    assert_eq!(verified.id.as_deref(), Some(published::ID));
}

#[test]
fn header_names_are_case_insensitive() {
    for prefix in ["WEBHOOK", "Webhook", "wEbHoOk", "SVIX", "Svix"] {
        let h = headers(
            prefix,
            published::ID,
            &published::TIMESTAMP.to_string(),
            published::SIGNATURE,
        );
        verify_published_headers(&h).unwrap_or_else(|e| panic!("{prefix}: {e}"));
    }
}

#[test]
fn signature_version_label_is_case_sensitive() {
    // As in every reference library: only the exact label `v1` is HMAC.
    let upper = published::SIGNATURE.replacen("v1,", "V1,", 1);
    assert_eq!(
        verify_published(&upper),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn missing_headers_are_400() {
    let ts = published::TIMESTAMP.to_string();
    for missing in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        let mut h = headers("webhook", published::ID, &ts, published::SIGNATURE);
        h.remove(missing);
        let err = verify_published_headers(&h).unwrap_err();
        assert_eq!(err, VerifyError::MissingHeader(missing));
        assert_eq!(err.status(), 400);
    }
    let err = verify_published_headers(&HeaderMap::new()).unwrap_err();
    assert_eq!(err.status(), 400);
}

#[test]
fn empty_id_and_empty_signature_list_are_400() {
    let ts = published::TIMESTAMP.to_string();
    let h = headers("webhook", "", &ts, published::SIGNATURE);
    assert_malformed(&verify_published_headers(&h).unwrap_err());

    for sig in ["", " ", "   "] {
        assert_malformed(&verify_published(sig).unwrap_err());
    }
}

#[test]
fn non_visible_ascii_header_value_is_400() {
    let mut h = published_headers(published::SIGNATURE);
    h.insert(
        "webhook-id",
        HeaderValue::from_bytes(b"msg_\xff\xfe").unwrap(),
    );
    assert_malformed(&verify_published_headers(&h).unwrap_err());
}

// ---------------------------------------------------------------------------
// Signature list
// ---------------------------------------------------------------------------

#[test]
fn any_valid_signature_among_several_passes() {
    let wrong = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    for sig in [
        format!("{} {wrong} {wrong}", published::SIGNATURE),
        format!("{wrong} {} {wrong}", published::SIGNATURE),
        format!("{wrong} {wrong} {}", published::SIGNATURE),
        // Runs of spaces are just separators.
        format!("{wrong}   {}  ", published::SIGNATURE),
    ] {
        assert!(verify_published(&sig).is_ok(), "{sig}");
    }
}

#[test]
fn other_versions_and_entries_without_comma_are_skipped() {
    let bare = published::SIGNATURE.trim_start_matches("v1,");
    // The right HMAC labelled as another version does not count…
    for sig in [
        format!("v2,{bare}"),
        format!("v1a,{bare}"),
        format!("v0,{bare}"),
        bare.to_owned(),
        format!("v1{bare}"),
        format!(",{bare}"),
    ] {
        assert_eq!(
            verify_published(&sig),
            Err(VerifyError::NoMatchingSignature),
            "{sig}"
        );
    }
    // …and such entries do not stop a valid one from being found.
    let sig = format!(
        "v2,{bare} {bare} nonsense v3,x,y ,,, {}",
        published::SIGNATURE
    );
    assert!(verify_published(&sig).is_ok());
}

#[test]
fn empty_and_short_v1_signatures_never_match() {
    assert_no_match(&[
        "v1,",
        "v1,abcd",
        "v1,=",
        "v1,g0hM9SsE",
        // 31 and 33 bytes.
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1A==",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OEA",
        // The right bytes, but as hex / URL-safe base64 / unpadded.
        "v1,83484df52b04f8e3a53131adfed98828b4b2665137b852442d594d20e2c9d4e1",
        "v1,g0hM9SsE-OTPJTGt_tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE",
    ]);
}

#[test]
fn the_right_tag_is_found_among_31_well_formed_wrong_ones() {
    // Every entry decodes (the tags past the first two are kept apart).
    let wrong = vec!["v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="; 31].join(" ");
    assert!(verify_published(&format!("{wrong} {}", published::SIGNATURE)).is_ok());
    assert!(verify_published(&format!("{} {wrong}", published::SIGNATURE)).is_ok());
    let wrong = vec!["v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="; 32].join(" ");
    assert_eq!(
        verify_published(&format!("{wrong} {}", published::SIGNATURE)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn only_the_first_32_entries_are_considered() {
    let junk = vec!["v2,x"; 31].join(" ");
    assert!(verify_published(&format!("{junk} {}", published::SIGNATURE)).is_ok());
    let junk = vec!["v2,x"; 32].join(" ");
    assert_eq!(
        verify_published(&format!("{junk} {}", published::SIGNATURE)),
        Err(VerifyError::NoMatchingSignature)
    );
}

// ---------------------------------------------------------------------------
// Body, secrets, rotation
// ---------------------------------------------------------------------------

#[test]
fn non_utf8_body_verifies_over_exact_bytes() {
    let body: &[u8] = b"\xff\xfe\x00binary\x80\xc3\x28 payload";
    let v = published_verifier();
    let h = v
        .sign_headers("msg_binary", published::TIMESTAMP, body)
        .unwrap();
    let ts = published::TIMESTAMP.to_string();
    assert_eq!(
        h["webhook-signature"].to_str().unwrap(),
        independent_v1(
            &B64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(),
            "msg_binary",
            &ts,
            body
        )
    );
    assert!(v.verify(&h, body, at(published::TIMESTAMP)).is_ok());

    // No normalisation: lossy UTF-8, one byte changed or dropped are all refused.
    let lossy = String::from_utf8_lossy(body).into_owned();
    let mut flipped = body.to_vec();
    flipped[0] ^= 1;
    for other in [lossy.as_bytes(), &flipped, &body[1..], &[]] {
        assert_eq!(
            v.verify(&h, other, at(published::TIMESTAMP)),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

#[test]
fn rotation_reports_which_secret_matched() {
    let secrets = [
        "whsec_bmV3IHNlY3JldCBmb3IgdGhlIHJvdGF0aW9u",
        published::SECRET,
        "whsec_b2xkZXN0IHNlY3JldCBvZiB0aGUgdGhyZWU=",
    ];
    let v = secrets
        .iter()
        .fold(StandardWebhooks::builder(), StandardWebhooksBuilder::secret)
        .build()
        .unwrap();
    for (index, secret) in secrets.iter().enumerate() {
        let sig = Signer::hmac(secret).unwrap().sign(
            published::ID,
            published::TIMESTAMP,
            published::BODY,
        );
        let verified = verify_published_with(&v, &sig).unwrap();
        assert_eq!(verified.matched_key, MatchedKey::Secret(index));
        assert_eq!(verified.matched_key.to_string(), format!("secret#{index}"));
    }
    // A sender mid-rotation signs with both: the first configured secret wins.
    let old = Signer::hmac(secrets[2]).unwrap().sign(
        published::ID,
        published::TIMESTAMP,
        published::BODY,
    );
    let both = format!("{old} {}", published::SIGNATURE);
    let verified = v
        .verify(
            &published_headers(&both),
            published::BODY,
            at(published::TIMESTAMP),
        )
        .unwrap();
    assert_eq!(verified.matched_key, MatchedKey::Secret(1));

    // A secret that is not configured is refused.
    let stranger = Signer::hmac("whsec_YSBzZWNyZXQgbm9ib2R5IGNvbmZpZ3VyZWQ=")
        .unwrap()
        .sign(published::ID, published::TIMESTAMP, published::BODY);
    assert_eq!(
        v.verify(
            &published_headers(&stranger),
            published::BODY,
            at(published::TIMESTAMP)
        ),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn raw_byte_secrets_are_used_as_is() {
    // The published secret's bytes, given raw, verify the published vector.
    let raw = B64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let v = StandardWebhooks::builder()
        .raw_secret(&raw)
        .build()
        .unwrap();
    assert!(
        v.verify(
            &published_headers(published::SIGNATURE),
            published::BODY,
            at(published::TIMESTAMP)
        )
        .is_ok()
    );

    // A raw secret that happens to look like base64 is not decoded.
    let raw = b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let v = StandardWebhooks::builder().raw_secret(raw).build().unwrap();
    assert_eq!(
        v.verify(
            &published_headers(published::SIGNATURE),
            published::BODY,
            at(published::TIMESTAMP)
        ),
        Err(VerifyError::NoMatchingSignature)
    );
    let sig = independent_v1(raw, published::ID, "1614265330", published::BODY);
    assert!(verify_published_with(&v, &sig).is_ok());

    // Any byte, including NUL and non-UTF-8, and longer than a SHA-256 block.
    let long: Vec<u8> = (0..=255u8).cycle().take(200).collect();
    let v = StandardWebhooks::builder()
        .raw_secret(b"\x00\xff")
        .raw_secret(&long)
        .build()
        .unwrap();
    for (index, secret) in [&b"\x00\xff"[..], &long].into_iter().enumerate() {
        let sig = independent_v1(secret, "msg_raw", "1614265330", b"body");
        let h = headers("webhook", "msg_raw", "1614265330", &sig);
        let verified = v.verify(&h, b"body", at(published::TIMESTAMP)).unwrap();
        assert_eq!(verified.matched_key, MatchedKey::Secret(index));
    }
}

// ---------------------------------------------------------------------------
// v1a (ed25519)
// ---------------------------------------------------------------------------

#[test]
fn v1a_verifies_against_a_trust_list() {
    let trusted = fixed_ed25519(1);
    let other = fixed_ed25519(2);
    let v = StandardWebhooks::builder()
        .public_key(other.public_key().unwrap())
        .public_key(trusted.public_key().unwrap())
        .build()
        .unwrap();
    let h = trusted
        .headers(published::ID, published::TIMESTAMP, published::BODY)
        .unwrap();
    assert!(h["webhook-signature"].to_str().unwrap().starts_with("v1a,"));
    let verified = v
        .verify(&h, published::BODY, at(published::TIMESTAMP))
        .unwrap();
    assert_eq!(verified.matched_key, MatchedKey::PublicKey(1));
    assert_eq!(verified.matched_key.to_string(), "public_key#1");

    // The same signature over a different body, id or timestamp is refused.
    assert_eq!(
        v.verify(&h, b"{}", at(published::TIMESTAMP)),
        Err(VerifyError::NoMatchingSignature)
    );
    let sig = h["webhook-signature"].to_str().unwrap();
    let moved = headers("webhook", published::ID, "1614265331", sig);
    assert_eq!(
        v.verify(&moved, published::BODY, at(published::TIMESTAMP)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn v1a_from_a_key_not_in_the_trust_list_is_refused() {
    let untrusted = fixed_ed25519(3);
    let v = StandardWebhooks::builder()
        .public_key(fixed_ed25519(1).public_key().unwrap())
        .public_key(fixed_ed25519(2).public_key().unwrap())
        .build()
        .unwrap();
    let h = untrusted
        .headers(published::ID, published::TIMESTAMP, published::BODY)
        .unwrap();
    let err = v
        .verify(&h, published::BODY, at(published::TIMESTAMP))
        .unwrap_err();
    assert_eq!(err, VerifyError::NoMatchingSignature);
    assert_eq!(err.status(), 401);

    // A verifier with only HMAC secrets never accepts v1a.
    assert_eq!(
        verify_published_headers(&h),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn v1_and_v1a_together() {
    let ed = fixed_ed25519(9);
    let v = StandardWebhooks::builder()
        .secret(published::SECRET)
        .public_key(ed.public_key().unwrap())
        .build()
        .unwrap();
    let v1a = ed.sign(published::ID, published::TIMESTAMP, published::BODY);
    for (sig, matched) in [
        (published::SIGNATURE.to_owned(), MatchedKey::Secret(0)),
        (v1a.clone(), MatchedKey::PublicKey(0)),
        (
            format!("{v1a} {}", published::SIGNATURE),
            MatchedKey::Secret(0),
        ),
        (
            format!("{PUBLISHED_ONE_CHAR_OFF} {v1a}"),
            MatchedKey::PublicKey(0),
        ),
    ] {
        let verified = verify_published_with(&v, &sig).unwrap();
        assert_eq!(verified.matched_key, matched, "{sig}");
    }
    // A 64-byte signature that is not a valid ed25519 signature.
    let zeros = format!("v1a,{}", B64.encode([0u8; 64]));
    assert_eq!(
        verify_published_with(&v, &zeros),
        Err(VerifyError::NoMatchingSignature)
    );
}

fn verify_published_with(
    v: &StandardWebhooks,
    signature: &str,
) -> Result<webhooks_core::Verified, VerifyError> {
    v.verify(
        &published_headers(signature),
        published::BODY,
        at(published::TIMESTAMP),
    )
}

#[test]
fn ed25519_signer_accepts_the_64_byte_form() {
    let seed: Vec<u8> = (0u8..32).collect();
    let short = Signer::ed25519(format!("whsk_{}", B64.encode(&seed))).unwrap();
    let public = B64
        .decode(short.public_key().unwrap().trim_start_matches("whpk_"))
        .unwrap();
    let mut full = seed.clone();
    full.extend_from_slice(&public);
    let long = Signer::ed25519(format!("whsk_{}", B64.encode(&full))).unwrap();
    assert_eq!(
        long.sign("msg", 1, b"x"),
        short.sign("msg", 1, b"x"),
        "same key"
    );
    // A 64-byte form whose public half does not match is refused.
    let mut wrong = full.clone();
    wrong[40] ^= 1;
    assert!(Signer::ed25519(format!("whsk_{}", B64.encode(&wrong))).is_err());
    assert!(Signer::ed25519(format!("whsk_{}", B64.encode([1u8; 31]))).is_err());
}

// ---------------------------------------------------------------------------
// Timestamps
// ---------------------------------------------------------------------------

#[test]
fn tolerance_is_inclusive_on_both_sides() {
    let now = 1_700_000_000u64;
    for tolerance in [300u64, 60, 1, 0] {
        let v = StandardWebhooks::builder()
            .secret(published::SECRET)
            .tolerance(Duration::from_secs(tolerance))
            .build()
            .unwrap();
        let check = |ts: u64| {
            let h = v.sign_headers("msg_ts", ts, b"{}").unwrap();
            v.verify(&h, b"{}", at(now)).map(|ok| ok.timestamp)
        };
        assert_eq!(check(now - tolerance), Ok(Some(now - tolerance)));
        assert_eq!(check(now + tolerance), Ok(Some(now + tolerance)));
        assert_eq!(check(now), Ok(Some(now)));
        let old = check(now - tolerance - 1).unwrap_err();
        assert_eq!(old, VerifyError::TimestampTooOld);
        assert_eq!(old.status(), 401);
        let new = check(now + tolerance + 1).unwrap_err();
        assert_eq!(new, VerifyError::TimestampTooNew);
        assert_eq!(new.status(), 401);
    }
}

#[test]
fn default_tolerance_is_five_minutes() {
    let v = published_verifier();
    assert_eq!(v.tolerance(), Duration::from_secs(300));
    let ts = published::TIMESTAMP;
    let check = |now| {
        v.verify(
            &published_headers(published::SIGNATURE),
            published::BODY,
            at(now),
        )
    };
    assert!(check(ts + 300).is_ok());
    assert!(check(ts - 300).is_ok());
    assert_eq!(check(ts + 301), Err(VerifyError::TimestampTooOld));
    assert_eq!(check(ts - 301), Err(VerifyError::TimestampTooNew));
    // The published vector is years old: refused against a real clock.
    assert_eq!(
        v.verify(
            &published_headers(published::SIGNATURE),
            published::BODY,
            SystemTime::now()
        ),
        Err(VerifyError::TimestampTooOld)
    );
}

#[test]
fn malformed_timestamps_are_400() {
    for ts in [
        "-1",
        "-1614265330",
        "+1614265330",
        "hello",
        "1614265330.0",
        "1.6e9",
        "0x60379a32",
        "1614265330s",
        "99999999999999999999999",
        "18446744073709551616",
        "",
    ] {
        let h = headers("webhook", published::ID, ts, published::SIGNATURE);
        let err = verify_published_headers(&h).unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::MalformedHeader {
                    header: "webhook-timestamp",
                    ..
                }
            ),
            "{ts:?}: {err:?}"
        );
        assert_eq!(err.status(), 400, "{ts:?}");
    }
    // svix- headers are named as such.
    let h = headers("svix", published::ID, "-1", published::SIGNATURE);
    assert!(matches!(
        verify_published_headers(&h),
        Err(VerifyError::MalformedHeader {
            header: "svix-timestamp",
            ..
        })
    ));
}

#[test]
fn largest_timestamp_is_well_formed_but_too_new() {
    let h = headers(
        "webhook",
        published::ID,
        &u64::MAX.to_string(),
        published::SIGNATURE,
    );
    assert_eq!(
        verify_published_headers(&h),
        Err(VerifyError::TimestampTooNew)
    );
}

#[test]
fn changed_timestamp_is_refused_even_within_tolerance() {
    // svix/svix-webhooks rust/src/webhooks.rs (test_verify_incorrect_timestamp):
    // the header timestamp is signed, not just checked.
    let h = headers(
        "webhook",
        published::ID,
        &(published::TIMESTAMP + 1).to_string(),
        published::SIGNATURE,
    );
    assert_eq!(
        verify_published_headers(&h),
        Err(VerifyError::NoMatchingSignature)
    );
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

#[test]
fn empty_secrets_and_keys_are_refused_at_build() {
    for secret in ["", "whsec_", "   ", "whsec_  "] {
        assert_eq!(
            StandardWebhooks::new(secret).unwrap_err(),
            ConfigError::Empty("secret"),
            "{secret:?}"
        );
    }
    assert_eq!(
        StandardWebhooks::builder()
            .raw_secret(b"")
            .build()
            .unwrap_err(),
        ConfigError::Empty("secret")
    );
    assert_eq!(
        StandardWebhooks::builder()
            .public_key("whpk_")
            .build()
            .unwrap_err(),
        ConfigError::Empty("public key")
    );
    assert_eq!(
        StandardWebhooks::builder().build().unwrap_err(),
        ConfigError::NoKeys
    );
    // One bad secret among good ones still fails the build.
    assert!(
        StandardWebhooks::builder()
            .secret(published::SECRET)
            .secret("")
            .build()
            .is_err()
    );
    assert!(Signer::hmac("").is_err());
    assert!(Signer::hmac("whsec_").is_err());
    assert!(Signer::ed25519("").is_err());
    assert!(Signer::ed25519("whsk_").is_err());
}

#[test]
fn undecodable_secrets_and_keys_are_refused_at_build() {
    for secret in [
        "whsec_not base64!",
        "whsec_%%%%",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",
    ] {
        assert!(
            matches!(
                StandardWebhooks::new(secret),
                Err(ConfigError::Invalid { what: "secret", .. })
            ),
            "{secret}"
        );
    }
    for key in [
        "whpk_not base64",
        // 31 bytes.
        &format!("whpk_{}", B64.encode([1u8; 31])),
    ] {
        assert!(
            matches!(
                StandardWebhooks::builder().public_key(key).build(),
                Err(ConfigError::Invalid {
                    what: "public key",
                    ..
                })
            ),
            "{key}"
        );
    }
    // An HMAC verifier cannot sign without a secret.
    let v = StandardWebhooks::builder()
        .public_key(fixed_ed25519(1).public_key().unwrap())
        .build()
        .unwrap();
    assert_eq!(v.sign("msg", 1, b""), Err(ConfigError::NoKeys));
    assert!(
        Signer::hmac(published::SECRET)
            .unwrap()
            .public_key()
            .is_none()
    );
}

// ---------------------------------------------------------------------------
// Nothing secret leaks
// ---------------------------------------------------------------------------

const RAW_SECRET: &[u8] = b"raw-secret-do-not-print";

/// Forms in which secret material could appear in text.
fn secret_forms() -> Vec<String> {
    let published_bytes = B64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    vec![
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        "raw-secret".into(),
        format!("{:?}", &published_bytes[..4])
            .trim_end_matches(']')
            .to_owned(),
        format!("{:?}", &RAW_SECRET[..4])
            .trim_end_matches(']')
            .to_owned(),
        format!(
            "{:02x}{:02x}{:02x}",
            published_bytes[0], published_bytes[1], published_bytes[2]
        ),
        go_asymmetric::SEED.trim_end_matches('=').to_owned(),
        "TESTSIGNINGKEY".into(),
        // The seed's bytes, as Debug would print them.
        format!("{:?}", &B64.decode(go_asymmetric::SEED).unwrap()[..4])
            .trim_end_matches(']')
            .to_owned(),
    ]
}

fn assert_no_secret(shown: &str) {
    for form in secret_forms() {
        assert!(!shown.contains(&form), "{form:?} in {shown}");
    }
}

#[test]
fn debug_never_shows_secrets() {
    let builder = StandardWebhooks::builder()
        .secret(published::SECRET)
        .raw_secret(RAW_SECRET)
        .public_key(
            Signer::ed25519(go_asymmetric::SEED)
                .unwrap()
                .public_key()
                .unwrap(),
        );
    let builder_debug = format!("{builder:?} {builder:#?}");
    assert_no_secret(&builder_debug);
    assert!(builder_debug.contains("StandardWebhooksBuilder"));

    let v = builder.build().unwrap();
    let debug = format!("{v:?} {v:#?}");
    assert_no_secret(&debug);
    assert!(debug.contains("StandardWebhooks"), "{debug}");

    // The builder still holding an error does not print the bad input either.
    let failed = StandardWebhooks::builder().secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS!");
    assert_no_secret(&format!("{failed:?}"));

    for signer in [
        Signer::hmac(published::SECRET).unwrap(),
        Signer::ed25519(go_asymmetric::SEED).unwrap(),
        Signer::ed25519(format!("whsk_{}", go_asymmetric::SEED)).unwrap(),
    ] {
        let shown = format!("{signer:?} {signer:#?}");
        assert_no_secret(&shown);
        assert!(shown.contains("redacted"), "{shown}");
    }

    // Config errors name what is wrong, never the value.
    for err in [
        StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS!").unwrap_err(),
        StandardWebhooks::new("whsec_").unwrap_err(),
        Signer::ed25519(format!(
            "whsk_{}",
            B64.encode(b"TESTSIGNINGKEYDONOTUSETHISFORANYx")
        ))
        .unwrap_err(),
    ] {
        assert_no_secret(&format!("{err} {err:?}"));
    }
}

#[test]
fn errors_have_the_right_status_and_reveal_nothing() {
    let v = StandardWebhooks::builder()
        .secret(published::SECRET)
        .raw_secret(RAW_SECRET)
        .build()
        .unwrap();
    let body: &[u8] = br#"{"secret_body_marker": 2432232314}"#;
    let ts = published::TIMESTAMP.to_string();
    let expected = v.sign(published::ID, published::TIMESTAMP, body).unwrap();
    let expected_b64 = expected.trim_start_matches("v1,");
    let now = at(published::TIMESTAMP);

    let mut cases: Vec<(HeaderMap, u16)> = vec![
        (HeaderMap::new(), 400),
        (headers("webhook", published::ID, "nope", &expected), 400),
        (headers("webhook", published::ID, "-5", &expected), 400),
        (headers("webhook", "", &ts, &expected), 400),
        (headers("webhook", published::ID, &ts, " "), 400),
        (
            headers("webhook", published::ID, &ts, PUBLISHED_ONE_CHAR_OFF),
            401,
        ),
        (headers("webhook", published::ID, &ts, "v1,"), 401),
        (headers("webhook", published::ID, &ts, "v2,abcd"), 401),
        (
            headers("webhook", published::ID, "1614264000", &expected),
            401,
        ),
        (
            headers("webhook", published::ID, "1614267000", &expected),
            401,
        ),
    ];
    let mut tampered = headers("webhook", published::ID, &ts, &expected);
    tampered.insert("webhook-id", HeaderValue::from_static("msg_other"));
    cases.push((tampered, 401));

    for (h, status) in cases {
        let err = v.verify(&h, body, now).unwrap_err();
        assert_eq!(err.status().as_u16(), status, "{err:?}");
        let reason = format!("{err} {err:?} {}", err.kind());
        assert_no_secret(&reason);
        for leak in [
            expected_b64,
            &expected_b64[..12],
            "secret_body_marker",
            "2432232314",
            "g0hM9SsE",
        ] {
            assert!(!reason.contains(leak), "{leak:?} in {reason}");
        }
    }
    // The right signature over a different body: still nothing of either body.
    let err = v
        .verify(
            &headers("webhook", published::ID, &ts, &expected),
            b"other",
            now,
        )
        .unwrap_err();
    assert_eq!(err, VerifyError::NoMatchingSignature);
    assert_eq!(err.to_string(), "no matching signature");
}

/// Issue 10, item 6 and issue 25, item 4: a request costs at most 8 ed25519
/// checks, whatever it carries: the distinct well-formed `v1a` signatures, in
/// the order listed, each against every trusted key, until 8 (signature, key)
/// pairs are spent, and no others.
#[test]
fn v1a_work_per_request_is_bounded() {
    let trusted = fixed_ed25519(1);
    let attacker = fixed_ed25519(3);
    let one_key = with_keys(&[&trusted]);
    let two_keys = with_keys(&[&fixed_ed25519(2), &trusted]);
    let genuine = trusted.sign(published::ID, published::TIMESTAMP, published::BODY);
    // Well-formed signatures (by a key nobody trusts, of other content).
    let decoy = |i: usize| attacker.sign(&format!("other_{i}"), published::TIMESTAMP, b"{}");
    let after = |decoys: Vec<String>| {
        let mut entries = decoys;
        entries.push(genuine.clone());
        entries.join(" ")
    };
    let decoys = |n: usize| (0..n).map(decoy).collect::<Vec<_>>();
    let accepted = |v: &StandardWebhooks, sig: &str| verify_published_with(v, sig).is_ok();

    assert!(
        accepted(&one_key, &after(decoys(7))),
        "8th signature, 1 key"
    );
    assert!(
        !accepted(&one_key, &after(decoys(8))),
        "9th signature is never tried"
    );
    assert!(
        accepted(&two_keys, &after(decoys(3))),
        "4th signature, 2 keys"
    );
    assert!(
        !accepted(&two_keys, &after(decoys(4))),
        "5th signature, 2 keys"
    );
    // Repeats and signatures that can never verify (`s` ≥ 2^253) take no share.
    assert!(accepted(&one_key, &after(vec![decoy(0); 20])), "repeats");
    let high_s = format!("v1a,{}", B64.encode([0xffu8; 64]));
    assert!(accepted(&one_key, &after(vec![high_s; 20])), "malformed s");
}

/// A verifier trusting these ed25519 signers' public keys, in this order.
fn with_keys(keys: &[&Signer]) -> StandardWebhooks {
    (keys.iter())
        .fold(StandardWebhooks::builder(), |b, k| {
            b.public_key(k.public_key().unwrap())
        })
        .build()
        .unwrap()
}

/// Issue 25, item 4: with 3 trusted keys, a sender that lists a retired
/// key's signature first and the valid one second is accepted, whichever
/// trusted key made the valid one (the budget was once split `4 / keys`, so
/// only the first signature was tried); the total stays at 8 pairs.
#[test]
fn v1a_budget_is_spent_per_signature_and_key_pair() {
    let keys = [fixed_ed25519(1), fixed_ed25519(2), fixed_ed25519(4)];
    let verifier = with_keys(&[&keys[0], &keys[1], &keys[2]]);
    let retired = fixed_ed25519(3).sign(published::ID, published::TIMESTAMP, published::BODY);
    for (index, key) in keys.iter().enumerate() {
        let valid = key.sign(published::ID, published::TIMESTAMP, published::BODY);
        let verified = verify_published_with(&verifier, &format!("{retired} {valid}"))
            .unwrap_or_else(|e| panic!("valid signature by key {index}, listed second: {e}"));
        assert_eq!(verified.matched_key, MatchedKey::PublicKey(index));
    }
    // Third signature: pairs 7 and 8 reach keys 0 and 1, key 2 would be the 9th.
    let decoy =
        |i: usize| fixed_ed25519(3).sign(&format!("other_{i}"), published::TIMESTAMP, b"{}");
    for (index, key) in keys.iter().enumerate() {
        let valid = key.sign(published::ID, published::TIMESTAMP, published::BODY);
        let third = format!("{} {} {valid}", decoy(0), decoy(1));
        assert_eq!(
            verify_published_with(&verifier, &third).is_ok(),
            index < 2,
            "third signature, key {index}"
        );
    }
}
