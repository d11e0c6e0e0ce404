//! `TenantVerifier` with an in-memory `KeyLookup`: known, unknown and failing
//! tenants, where the tenant id comes from, and what the cache saves.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::tenant::{KeyLookup, LookupError, Secret, TenantVerifier};
use webhooks_core::scheme::{GitHub, Stripe};
use webhooks_core::{
    ConfigError, MatchedKey, Receiver, Rejection, RequestHead, RequestVerifier, VerifyError,
};

const T: u64 = 1_700_000_000;
const BODY: &[u8] = br#"{"id":"evt_1","type":"invoice.paid"}"#;

/// Tenants' secrets in a map; `vault-down` fails; every call is counted and
/// takes `delay` (a database round trip).
#[derive(Default)]
struct InMemory {
    tenants: HashMap<&'static str, Vec<&'static str>>,
    calls: AtomicUsize,
    delay: Duration,
}

#[async_trait::async_trait]
impl KeyLookup for InMemory {
    async fn secrets(&self, tenant: &str) -> Result<Option<Vec<Secret>>, LookupError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        if tenant == "vault-down" {
            return Err(LookupError::new(std::io::Error::other(
                "connection refused",
            )));
        }
        Ok(self
            .tenants
            .get(tenant)
            .map(|secrets| secrets.iter().copied().map(Secret::from).collect()))
    }
}

fn lookup() -> Arc<InMemory> {
    Arc::new(InMemory {
        tenants: HashMap::from([
            ("acme", vec!["whsec_acme"]),
            ("globex", vec!["whsec_globex_new", "whsec_globex_old"]),
            ("empty", vec![]),
            ("broken", vec![""]),
        ]),
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    })
}

/// [`lookup`] whose every call takes 20 ms.
fn slow_lookup() -> Arc<InMemory> {
    let mut lookup = Arc::into_inner(lookup()).unwrap();
    lookup.delay = Duration::from_millis(20);
    Arc::new(lookup)
}

fn stripe_factory(secrets: &[Secret]) -> Result<Stripe, ConfigError> {
    Stripe::builder().secrets(secrets).build()
}

fn by_path(lookup: &Arc<InMemory>) -> TenantVerifier {
    TenantVerifier::builder(Arc::clone(lookup), stripe_factory)
        .tenant_from_path_segment(1)
        .build()
        .unwrap()
}

fn signed(secret: &str) -> HeaderMap {
    Stripe::new(secret).unwrap().sign_headers(T, BODY).unwrap()
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T)
}

async fn verify(
    v: &TenantVerifier,
    path: &str,
    headers: &HeaderMap,
) -> Result<webhooks_core::Verified, VerifyError> {
    v.verify_request(RequestHead::new(path, headers), BODY, now())
        .await
}

#[tokio::test]
async fn known_tenant_verifies_and_is_named_in_the_matched_key() {
    let lookup = lookup();
    let v = by_path(&lookup);
    let ok = verify(&v, "/hooks/acme/stripe", &signed("whsec_acme"))
        .await
        .unwrap();
    assert_eq!(
        ok.matched_key,
        MatchedKey::Lookup {
            key_id: "acme".into(),
            index: 0
        }
    );
    assert_eq!((ok.scheme, ok.id.as_deref()), ("stripe", Some("evt_1")));
}

#[tokio::test]
async fn tenant_rotation_reports_the_index() {
    let v = by_path(&lookup());
    let ok = verify(&v, "/hooks/globex", &signed("whsec_globex_old"))
        .await
        .unwrap();
    assert_eq!(ok.matched_key.to_string(), "globex#1");
}

#[tokio::test]
async fn another_tenants_secret_is_401() {
    let v = by_path(&lookup());
    let r = verify(&v, "/hooks/acme", &signed("whsec_globex_new")).await;
    assert_eq!(r, Err(VerifyError::NoMatchingSignature));
}

#[tokio::test]
async fn unknown_tenant_is_401_and_remembered() {
    let lookup = lookup();
    let v = by_path(&lookup);
    for _ in 0..3 {
        let r = verify(&v, "/hooks/initech", &signed("whsec_acme")).await;
        assert_eq!(r, Err(VerifyError::UnknownKey));
        assert_eq!(r.unwrap_err().status(), 401);
    }
    assert_eq!(
        lookup.calls.load(Ordering::SeqCst),
        1,
        "negative result cached"
    );
    let r = verify(&v, "/hooks/empty", &signed("whsec_acme")).await;
    assert_eq!(r, Err(VerifyError::UnknownKey), "a tenant without secrets");
}

#[tokio::test]
async fn lookup_failure_is_503_and_not_cached() {
    let lookup = lookup();
    let v = by_path(&lookup);
    for _ in 0..2 {
        let r = verify(&v, "/hooks/vault-down", &signed("whsec_acme")).await;
        assert_eq!(r, Err(VerifyError::KeyLookupUnavailable));
        assert_eq!(r.unwrap_err().status(), 503);
    }
    assert_eq!(
        lookup.calls.load(Ordering::SeqCst),
        2,
        "failures are retried"
    );
}

#[tokio::test]
async fn unusable_stored_secret_is_503() {
    let v = by_path(&lookup());
    let r = verify(&v, "/hooks/broken", &signed("whsec_acme")).await;
    assert_eq!(r, Err(VerifyError::KeyLookupUnavailable));
}

#[tokio::test]
async fn cache_hit_does_not_call_the_lookup_again() {
    let lookup = lookup();
    let v = by_path(&lookup);
    let h = signed("whsec_acme");
    for _ in 0..5 {
        verify(&v, "/hooks/acme", &h).await.unwrap();
    }
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 1);
    // A forged request for a cached tenant does not reach the lookup either.
    let _ = verify(&v, "/hooks/acme", &signed("whsec_forged")).await;
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 1);
    v.invalidate("acme").await;
    verify(&v, "/hooks/acme", &h).await.unwrap();
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 2, "invalidate forgets");
}

/// Issue 10, item 11: N concurrent requests for a tenant not yet cached
/// share one lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_for_one_tenant_share_one_lookup() {
    let lookup = slow_lookup();
    let v = Arc::new(by_path(&lookup));
    let h = signed("whsec_acme");
    let requests = (0..200).map(|_| {
        let (v, h) = (Arc::clone(&v), h.clone());
        tokio::spawn(async move { verify(&v, "/hooks/acme", &h).await })
    });
    for r in futures_util::future::join_all(requests).await {
        r.unwrap().unwrap();
    }
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 1);
}

/// Issue 10, item 11: 20,000 requests for unknown tenants cost one lookup per
/// distinct tenant id, not one per request, even when they arrive together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tenants_are_looked_up_once_each() {
    let lookup = slow_lookup();
    let v = Arc::new(by_path(&lookup));
    let h = signed("whsec_acme");
    let paths: Vec<String> = (0..100).map(|i| format!("/hooks/nobody-{i}")).collect();
    let requests = (0..20_000).map(|i| {
        let (v, h, path) = (Arc::clone(&v), h.clone(), paths[i % 100].clone());
        tokio::spawn(async move { verify(&v, &path, &h).await })
    });
    for r in futures_util::future::join_all(requests).await {
        assert_eq!(r.unwrap(), Err(VerifyError::UnknownKey));
    }
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 100);
}

/// Issue 10, item 11: "unknown" is remembered for the negative TTL only.
#[tokio::test]
async fn unknown_tenants_are_remembered_briefly() {
    let lookup = lookup();
    let v = TenantVerifier::builder(Arc::clone(&lookup), stripe_factory)
        .tenant_from_path_segment(1)
        .negative_cache_ttl(Duration::from_millis(50))
        .build()
        .unwrap();
    let h = signed("whsec_acme");
    for _ in 0..3 {
        assert_eq!(
            verify(&v, "/hooks/initech", &h).await,
            Err(VerifyError::UnknownKey)
        );
    }
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(
        verify(&v, "/hooks/initech", &h).await,
        Err(VerifyError::UnknownKey)
    );
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 2, "looked up again");
    // Known tenants keep the (longer) positive TTL meanwhile.
    verify(&v, "/hooks/acme", &h).await.unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    verify(&v, "/hooks/acme", &h).await.unwrap();
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn cache_entries_expire() {
    let lookup = lookup();
    let v = TenantVerifier::builder(Arc::clone(&lookup), stripe_factory)
        .tenant_from_path_segment(1)
        .cache_ttl(Duration::from_millis(20))
        .build()
        .unwrap();
    let h = signed("whsec_acme");
    verify(&v, "/hooks/acme", &h).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    verify(&v, "/hooks/acme", &h).await.unwrap();
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_full_cache_still_verifies() {
    let lookup = lookup();
    let v = TenantVerifier::builder(Arc::clone(&lookup), stripe_factory)
        .tenant_from_path_segment(1)
        .cache_capacity(1)
        .build()
        .unwrap();
    for _ in 0..2 {
        verify(&v, "/hooks/acme", &signed("whsec_acme"))
            .await
            .unwrap();
        verify(&v, "/hooks/globex", &signed("whsec_globex_new"))
            .await
            .unwrap();
    }
    let calls = lookup.calls.load(Ordering::SeqCst);
    assert!((2..=4).contains(&calls), "{calls} lookups");
}

#[tokio::test]
async fn no_tenant_id_is_400() {
    let lookup = lookup();
    let h = signed("whsec_acme");
    let v = by_path(&lookup);
    for path in ["/hooks", "/hooks/", "/", ""] {
        let r = verify(&v, path, &h).await;
        assert!(
            matches!(r, Err(VerifyError::MalformedHeader { .. })),
            "{path:?}: {r:?}"
        );
        assert_eq!(r.unwrap_err().status(), 400);
    }
    let by_header = TenantVerifier::builder(Arc::clone(&lookup), stripe_factory)
        .tenant_from_header("x-tenant-id")
        .build()
        .unwrap();
    assert_eq!(
        verify(&by_header, "/hooks", &h).await,
        Err(VerifyError::MissingHeader("x-tenant-id"))
    );
    let by_fn = TenantVerifier::builder(Arc::clone(&lookup), stripe_factory)
        .tenant_from(|head| head.path.strip_prefix("/t-").map(str::to_owned))
        .build()
        .unwrap();
    assert!(matches!(
        verify(&by_fn, "/hooks", &h).await,
        Err(VerifyError::MalformedHeader { .. })
    ));
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn tenant_from_header_and_from_a_function() {
    let lookup = lookup();
    let mut h = signed("whsec_acme");
    h.insert("x-tenant-id", HeaderValue::from_static("acme"));
    let by_header = TenantVerifier::builder(Arc::clone(&lookup), stripe_factory)
        .tenant_from_header("x-tenant-id")
        .build()
        .unwrap();
    assert!(verify(&by_header, "/hooks", &h).await.is_ok());
    let by_fn = TenantVerifier::builder(Arc::clone(&lookup), stripe_factory)
        .tenant_from(|head| head.path.strip_prefix("/t-").map(str::to_owned))
        .build()
        .unwrap();
    assert!(verify(&by_fn, "/t-acme", &h).await.is_ok());
}

#[tokio::test]
async fn odd_tenant_ids_are_400_before_any_lookup() {
    let lookup = lookup();
    let v = by_path(&lookup);
    let long = format!("/hooks/{}", "a".repeat(257));
    for path in [long.as_str(), "/hooks/caf\u{e9}"] {
        let r = verify(&v, path, &signed("whsec_acme")).await;
        assert!(
            matches!(r, Err(VerifyError::MalformedHeader { .. })),
            "{r:?}"
        );
    }
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn any_scheme_can_be_the_inner_verifier() {
    let lookup = lookup();
    let v = TenantVerifier::builder(Arc::clone(&lookup), |secrets: &[Secret]| {
        GitHub::builder().secrets(secrets).build()
    })
    .tenant_from_path_segment(0)
    .build()
    .unwrap();
    let h = GitHub::new("whsec_acme")
        .unwrap()
        .sign_headers("d-1", "push", BODY)
        .unwrap();
    let ok = verify(&v, "/acme", &h).await.unwrap();
    assert_eq!((ok.scheme, ok.id.as_deref()), ("github", Some("d-1")));
}

#[tokio::test]
async fn in_a_receiver_the_statuses_hold() {
    let lookup = lookup();
    let receiver = Receiver::new(by_path(&lookup));
    let handler = |_parts, _delivery| async move { 204u16 };
    // The receiver reads its own clock: sign for now.
    let fresh = |path: &str| {
        let (mut parts, ()) = http::Request::post(path).body(()).unwrap().into_parts();
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        parts.headers = Stripe::new("whsec_acme")
            .unwrap()
            .sign_headers(t, BODY)
            .unwrap();
        parts
    };
    let ok = receiver
        .process(
            fresh("/hooks/acme"),
            Bytes::from_static(BODY),
            handler,
            |s| *s,
        )
        .await;
    assert_eq!(ok, Ok(204));
    let unknown = receiver
        .process(
            fresh("/hooks/nobody"),
            Bytes::from_static(BODY),
            handler,
            |s| *s,
        )
        .await;
    assert_eq!(unknown, Err(Rejection::Verify(VerifyError::UnknownKey)));
    let down = receiver
        .process(
            fresh("/hooks/vault-down"),
            Bytes::from_static(BODY),
            handler,
            |s| *s,
        )
        .await;
    assert_eq!(
        down,
        Err(Rejection::Verify(VerifyError::KeyLookupUnavailable))
    );
}

/// Issue 10, item 1: the tenant scopes the delivery's identity.
#[tokio::test]
async fn the_tenant_scopes_the_dedup_key() {
    let v = by_path(&lookup());
    let acme = verify(&v, "/hooks/acme", &signed("whsec_acme"))
        .await
        .unwrap();
    let globex = verify(&v, "/hooks/globex", &signed("whsec_globex_new"))
        .await
        .unwrap();
    assert_eq!(acme.id, globex.id, "the same event id");
    assert_eq!(acme.scope.as_deref(), Some("acme"));
    assert_eq!(
        acme.dedup_key("webhooks", "evt_1"),
        "webhooks:stripe@acme:evt_1"
    );
    assert_ne!(
        acme.dedup_key("webhooks", "evt_1"),
        globex.dedup_key("webhooks", "evt_1")
    );
}

/// Issue 10, item 1, through the pipeline: tenant B's delivery of an id does
/// not make tenant A's delivery of that id a duplicate.
#[tokio::test]
async fn another_tenants_delivery_of_the_same_id_does_not_suppress() {
    let receiver = Receiver::new(by_path(&lookup()));
    let deliver = |path: &'static str, secret: &'static str| {
        let receiver = receiver.clone();
        async move {
            let (mut parts, ()) = http::Request::post(path).body(()).unwrap().into_parts();
            let t = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            parts.headers = Stripe::new(secret).unwrap().sign_headers(t, BODY).unwrap();
            let handler = |_, _| async { 204u16 };
            receiver
                .process(parts, Bytes::from_static(BODY), handler, |s| *s)
                .await
        }
    };
    assert_eq!(deliver("/hooks/globex", "whsec_globex_new").await, Ok(204));
    assert_eq!(deliver("/hooks/acme", "whsec_acme").await, Ok(204));
    assert_eq!(
        deliver("/hooks/acme", "whsec_acme").await,
        Err(Rejection::Duplicate)
    );
}

#[test]
fn configuration_and_debug() {
    let err = TenantVerifier::builder(lookup(), stripe_factory)
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::Setting("no tenant id source"));
    assert!(
        TenantVerifier::builder(lookup(), stripe_factory)
            .tenant_from_header("bad header")
            .build()
            .is_err()
    );
    let shown = format!("{:?}", Secret::from("whsec_hidden"));
    assert!(!shown.contains("hidden"), "{shown}");
    let v = by_path(&lookup());
    assert!(format!("{v:?}").contains("PathSegment(1)"));
}
