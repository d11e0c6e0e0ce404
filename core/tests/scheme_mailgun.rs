//! The Mailgun scheme on the vectors of Mailgun's own PHP library (cited
//! above the constants), in the JSON and the legacy form encodings, then
//! every rule one test at a time.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Mailgun;
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

/// mailgun/mailgun-php `tests/Api/WebhookTest.php`, `testVerifyWebhookGood`
/// (and, with another token under the same signature, `testVerifyWebhookBad`).
mod mailgun_php {
    pub(crate) const KEY: &str = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";
    pub(crate) const TIMESTAMP: u64 = 1_403_645_220;
    pub(crate) const TOKEN: &str = "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6";
    pub(crate) const SIGNATURE: &str =
        "9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33";
    pub(crate) const BAD_TOKEN: &str = "owyldpe6nxhmrn78epljl6bj0orrki1u3d2v5e6cnlmmuox8jr";
}

fn at(ts: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(ts)
}

fn json(timestamp: &str, token: &str, signature: &str) -> Vec<u8> {
    format!(
        r#"{{"signature":{{"timestamp":{timestamp},"token":"{token}","signature":"{signature}"}},"event-data":{{"event":"delivered","id":"CPgfbmQMTCKtHW6uIWtuVe","recipient":"alice@example.com"}}}}"#
    )
    .into_bytes()
}

fn vector_body() -> Vec<u8> {
    json(
        &format!("\"{}\"", mailgun_php::TIMESTAMP),
        mailgun_php::TOKEN,
        mailgun_php::SIGNATURE,
    )
}

fn form_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "content-type",
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    h
}

fn rotating() -> Mailgun {
    Mailgun::builder()
        .secret("key-new-signing-key")
        .secret(mailgun_php::KEY)
        .build()
        .unwrap()
}

#[test]
fn php_vector_verifies_as_json() {
    let v = rotating()
        .verify(
            &HeaderMap::new(),
            &vector_body(),
            at(mailgun_php::TIMESTAMP),
        )
        .unwrap();
    assert_eq!(v.scheme, "mailgun");
    assert_eq!(v.id.as_deref(), Some(mailgun_php::TOKEN));
    assert_eq!(v.timestamp, Some(mailgun_php::TIMESTAMP));
    assert_eq!(v.event_type.as_deref(), Some("delivered"));
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    // An unquoted timestamp is read the same way.
    let unquoted = json(
        &mailgun_php::TIMESTAMP.to_string(),
        mailgun_php::TOKEN,
        mailgun_php::SIGNATURE,
    );
    assert!(
        rotating()
            .verify(&HeaderMap::new(), &unquoted, at(mailgun_php::TIMESTAMP))
            .is_ok()
    );
}

#[test]
fn php_vector_verifies_as_a_legacy_form() {
    let body = format!(
        "event=delivered&recipient=alice%40example.com&timestamp={}&token={}&signature={}",
        mailgun_php::TIMESTAMP,
        mailgun_php::TOKEN,
        mailgun_php::SIGNATURE
    );
    let v = Mailgun::new(mailgun_php::KEY)
        .unwrap()
        .verify(&form_headers(), body.as_bytes(), at(mailgun_php::TIMESTAMP))
        .unwrap();
    assert_eq!(v.id.as_deref(), Some(mailgun_php::TOKEN));
    assert_eq!(v.event_type.as_deref(), Some("delivered"));
}

#[test]
fn sign_reproduces_the_vector() {
    let mailgun = Mailgun::new(mailgun_php::KEY).unwrap();
    assert_eq!(
        mailgun.sign(mailgun_php::TIMESTAMP, mailgun_php::TOKEN),
        mailgun_php::SIGNATURE
    );
}

#[test]
fn php_bad_token_and_wrong_key_are_401() {
    let now = at(mailgun_php::TIMESTAMP);
    // `testVerifyWebhookBad`: the signature of another token.
    let bad = json(
        &format!("\"{}\"", mailgun_php::TIMESTAMP),
        mailgun_php::BAD_TOKEN,
        mailgun_php::SIGNATURE,
    );
    let err = rotating().verify(&HeaderMap::new(), &bad, now).unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::NoMatchingSignature, 401)
    );
    let wrong = Mailgun::new("key-not-the-one").unwrap();
    assert_eq!(
        wrong.verify(&HeaderMap::new(), &vector_body(), now),
        Err(VerifyError::NoMatchingSignature)
    );
    // Another signed timestamp under the same signature.
    let moved = json(
        &format!("\"{}\"", mailgun_php::TIMESTAMP + 1),
        mailgun_php::TOKEN,
        mailgun_php::SIGNATURE,
    );
    assert_eq!(
        rotating().verify(&HeaderMap::new(), &moved, now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn event_data_is_not_signed_so_the_token_is_the_id() {
    // Tampering with event-data does not break the signature (Mailgun does
    // not sign it): the token, which dedup remembers, is what stops a replay.
    let mailgun = Mailgun::new(mailgun_php::KEY).unwrap();
    let forged = String::from_utf8(vector_body())
        .unwrap()
        .replace("delivered", "failed");
    let v = mailgun
        .verify(
            &HeaderMap::new(),
            forged.as_bytes(),
            at(mailgun_php::TIMESTAMP),
        )
        .unwrap();
    assert_eq!(v.id.as_deref(), Some(mailgun_php::TOKEN));
}

#[test]
fn stale_and_future_timestamps_are_401() {
    let mailgun = Mailgun::new(mailgun_php::KEY).unwrap();
    let body = vector_body();
    let ts = mailgun_php::TIMESTAMP;
    assert!(
        mailgun
            .verify(&HeaderMap::new(), &body, at(ts + 300))
            .is_ok()
    );
    assert!(
        mailgun
            .verify(&HeaderMap::new(), &body, at(ts - 300))
            .is_ok()
    );
    let err = mailgun
        .verify(&HeaderMap::new(), &body, at(ts + 301))
        .unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::TimestampTooOld, 401)
    );
    assert_eq!(
        mailgun.verify(&HeaderMap::new(), &body, at(ts - 301)),
        Err(VerifyError::TimestampTooNew)
    );
    let wide = Mailgun::builder()
        .secret(mailgun_php::KEY)
        .tolerance(Duration::from_secs(3600))
        .build()
        .unwrap();
    assert_eq!(wide.tolerance(), Duration::from_secs(3600));
    assert!(wide.verify(&HeaderMap::new(), &body, at(ts + 3600)).is_ok());
}

#[test]
fn missing_fields_are_400() {
    let mailgun = Mailgun::new(mailgun_php::KEY).unwrap();
    let now = at(mailgun_php::TIMESTAMP);
    let cases: [(&[u8], &str); 5] = [
        (br#"{"event-data":{"event":"delivered"}}"#, "signature"),
        (
            br#"{"signature":{"token":"t","signature":"00"}}"#,
            "signature.timestamp",
        ),
        (
            br#"{"signature":{"timestamp":"1","signature":"00"}}"#,
            "signature.token",
        ),
        (
            br#"{"signature":{"timestamp":"1","token":"t"}}"#,
            "signature.signature",
        ),
        // A form without the fields (and no body at all).
        (b"", "signature.timestamp"),
    ];
    for (body, field) in cases {
        let err = mailgun.verify(&form_headers(), body, now).unwrap_err();
        assert_eq!(err, VerifyError::MissingField(field), "{body:?}");
        assert_eq!(err.status(), 400);
    }
}

#[test]
fn malformed_fields_are_400() {
    let mailgun = Mailgun::new(mailgun_php::KEY).unwrap();
    let now = at(mailgun_php::TIMESTAMP);
    let ts = format!("\"{}\"", mailgun_php::TIMESTAMP);
    let long_token = "t".repeat(300);
    let bodies = [
        b"{not json".to_vec(),
        br#"["signature"]"#.to_vec(),
        json("\"-5\"", mailgun_php::TOKEN, mailgun_php::SIGNATURE),
        json("\"1.5\"", mailgun_php::TOKEN, mailgun_php::SIGNATURE),
        json(
            "\"99999999999999999999999\"",
            mailgun_php::TOKEN,
            mailgun_php::SIGNATURE,
        ),
        json(&ts, mailgun_php::TOKEN, "zz"),
        json(&ts, mailgun_php::TOKEN, &mailgun_php::SIGNATURE[..62]),
        json(&ts, "", mailgun_php::SIGNATURE),
        json(&ts, "with space", mailgun_php::SIGNATURE),
        json(&ts, &long_token, mailgun_php::SIGNATURE),
        b"timestamp=1&token=t&signature=%zz".to_vec(),
    ];
    for body in bodies {
        let err = mailgun.verify(&form_headers(), &body, now).unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedField { .. }),
            "{}: {err:?}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(err.status(), 400);
    }
    let mut multipart = HeaderMap::new();
    multipart.insert(
        "content-type",
        HeaderValue::from_static("multipart/form-data; boundary=x"),
    );
    let err = mailgun.verify(&multipart, b"--x", now).unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(err.to_string().contains("multipart"), "{err}");
}

#[test]
fn configuration_errors_and_redacted_debug() {
    assert_eq!(Mailgun::builder().build().unwrap_err(), ConfigError::NoKeys);
    assert_eq!(Mailgun::new("").unwrap_err(), ConfigError::Empty("secret"));
    let shown = format!("{:?}", rotating());
    assert_eq!(shown, "Mailgun { secrets: 2, tolerance: 300s }");
    assert!(!shown.contains("key-"));
}

/// Issue 25, item 1: Mailgun signs only `{timestamp}{token}`, with an
/// account-wide key, so a signature block seen on one route could carry
/// forged `event-data` to a sibling route (its own namespace, even its own
/// dedup key function). The token is claimed under one namespace for every
/// route: the second route refuses it, and runs no handler.
#[cfg(feature = "memory")]
mod replay_across_routes {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use webhooks_core::dedup::{
        Claim, ClaimToken, DedupStore, MemoryStore, StoreError, Transition,
    };
    use webhooks_core::receiver::REPLAY_NAMESPACE;
    use webhooks_core::scheme::Mailgun;
    use webhooks_core::{Receiver, Rejection, StoreFailure};

    const KEY: &str = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";
    const TOKEN: &str = "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6";

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    /// The same signature block (timestamp, token, signature) with `event_data`.
    fn body(event_data: serde_json::Value) -> bytes::Bytes {
        Mailgun::new(KEY)
            .unwrap()
            .sign_body(now(), TOKEN, &event_data)
            .into()
    }

    async fn deliver(
        receiver: &Receiver,
        body: bytes::Bytes,
        runs: &Arc<AtomicUsize>,
    ) -> Result<u16, Rejection> {
        let (parts, ()) = http::Request::post("/mailgun")
            .body(())
            .unwrap()
            .into_parts();
        let runs = Arc::clone(runs);
        let handler = move |_, _| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            200u16
        };
        receiver.process(parts, body, handler, |s| *s).await
    }

    #[tokio::test]
    async fn a_token_seen_on_one_route_is_refused_on_another() {
        let store: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
        let route = |namespace: &str| {
            Receiver::builder(Mailgun::new(KEY).unwrap())
                .shared_store(Arc::clone(&store))
                .namespace(namespace)
        };
        let bounces = route("mailgun-bounces").build();
        // A custom dedup key on the sibling route does not replace the token.
        let unsubscribes = route("mailgun-unsubscribes")
            .dedup_key_json_pointer("/event-data/id")
            .build();
        let runs = Arc::new(AtomicUsize::new(0));

        let genuine = body(serde_json::json!({"event": "bounced", "id": "evt_1"}));
        assert_eq!(deliver(&bounces, genuine, &runs).await, Ok(200));
        let forged = body(serde_json::json!({"event": "unsubscribed", "id": "evt_forged"}));
        assert_eq!(
            deliver(&unsubscribes, forged, &runs).await,
            Err(Rejection::Duplicate)
        );
        let again = body(serde_json::json!({"event": "complained", "id": "evt_2"}));
        assert_eq!(
            deliver(&bounces, again, &runs).await,
            Err(Rejection::Duplicate)
        );
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "only the genuine delivery ran"
        );
    }

    /// Records the keys claimed; every claim fails when `down`.
    #[derive(Default)]
    struct Keys {
        inner: MemoryStore,
        keys: std::sync::Mutex<Vec<String>>,
        down: bool,
    }

    #[async_trait::async_trait]
    impl DedupStore for Keys {
        async fn claim(
            &self,
            key: &str,
            token: ClaimToken,
            lease: Duration,
        ) -> Result<Claim, StoreError> {
            self.keys.lock().unwrap().push(key.to_owned());
            if self.down {
                return Err(StoreError::Timeout);
            }
            self.inner.claim(key, token, lease).await
        }
        async fn complete(
            &self,
            key: &str,
            token: ClaimToken,
            retention: Duration,
        ) -> Result<Transition, StoreError> {
            self.inner.complete(key, token, retention).await
        }
        async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
            self.inner.release(key, token).await
        }
        async fn extend(
            &self,
            key: &str,
            token: ClaimToken,
            lease: Duration,
        ) -> Result<Transition, StoreError> {
            self.inner.extend(key, token, lease).await
        }
    }

    #[tokio::test]
    async fn the_token_key_is_route_independent_and_never_fails_open() {
        let store = Arc::new(Keys::default());
        let receiver = Receiver::builder(Mailgun::new(KEY).unwrap())
            .shared_store(Arc::clone(&store) as Arc<dyn DedupStore>)
            .namespace("route-a")
            .dedup_key(|_, _| Some("custom".to_owned()))
            .build();
        let runs = Arc::new(AtomicUsize::new(0));
        let event = serde_json::json!({"event": "opened"});
        assert_eq!(
            deliver(&receiver, body(event.clone()), &runs).await,
            Ok(200)
        );
        assert_eq!(
            *store.keys.lock().unwrap(),
            [format!("{REPLAY_NAMESPACE}:mailgun:{TOKEN}")]
        );

        // Fail-open is not applied to the token: the store down is a 503.
        let down = Arc::new(Keys {
            down: true,
            ..Keys::default()
        });
        let open = Receiver::builder(Mailgun::new(KEY).unwrap())
            .shared_store(down as Arc<dyn DedupStore>)
            .on_store_failure(StoreFailure::Open)
            .build();
        let result = deliver(&open, body(event), &runs).await;
        assert!(
            matches!(result, Err(Rejection::StoreUnavailable { .. })),
            "{result:?}"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
