//! Fuzzes `TenantVerifier` (tenant id from a header or a path segment, each
//! tenant with its own Stripe secret) over arbitrary tenant ids, headers and
//! bodies: it never panics, refuses with a 400/401 (503 only for the tenant
//! whose lookup fails), and accepts only a request carrying a MAC made with
//! the secret of the tenant it names; a tenant's signature never verifies
//! for another tenant.
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run tenant -- -max_total_time=600
//! ```

#![no_main]

mod common;

use std::sync::LazyLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use common::{OTHER, SECRET, TOLERANCE, Timestamp, hex, hmac256, insert};
use libfuzzer_sys::fuzz_target;
use webhooks_core::scheme::Stripe;
use webhooks_core::scheme::tenant::{KeyLookup, LookupError, Secret, TenantVerifier};
use webhooks_core::{MatchedKey, RequestHead, RequestVerifier};

/// `acme` signs with `SECRET`, `globex` with `OTHER`, `broken`'s lookup
/// fails, `empty` has no secret, every other tenant is unknown.
struct Tenants;

#[async_trait::async_trait]
impl KeyLookup for Tenants {
    async fn secrets(&self, tenant: &str) -> Result<Option<Vec<Secret>>, LookupError> {
        match tenant {
            "acme" => Ok(Some(vec![SECRET.into()])),
            "globex" => Ok(Some(vec![OTHER.into()])),
            "broken" => Err(LookupError::new("lookup down")),
            "empty" => Ok(Some(Vec::new())),
            _ => Ok(None),
        }
    }
}

fn secret_of(tenant: &str) -> Option<&'static str> {
    match tenant {
        "acme" => Some(SECRET),
        "globex" => Some(OTHER),
        _ => None,
    }
}

fn verifier(by_header: bool) -> TenantVerifier {
    let builder = TenantVerifier::builder(Tenants, |secrets: &[Secret]| {
        Stripe::builder()
            .secrets(secrets)
            .tolerance(Duration::from_secs(TOLERANCE))
            .build()
    })
    .cache_capacity(8);
    let builder = if by_header {
        builder.tenant_from_header("x-tenant-id")
    } else {
        builder.tenant_from_path_segment(1)
    };
    builder.build().unwrap()
}

static BY_HEADER: LazyLock<TenantVerifier> = LazyLock::new(|| verifier(true));
static BY_PATH: LazyLock<TenantVerifier> = LazyLock::new(|| verifier(false));
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
});

#[derive(Arbitrary, Debug)]
enum Tenant {
    Acme,
    Globex,
    Broken,
    Empty,
    /// A known id with surrounding spaces or another case.
    Mangled { spaces: u8, upper: bool },
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Signer {
    /// Signed with acme's secret.
    Acme,
    /// Signed with globex's secret.
    Globex,
    /// A flipped bit of acme's signature.
    Flipped(u8),
    /// Anything.
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    by_header: bool,
    tenant: Option<Tenant>,
    path_prefix: String,
    path_suffix: String,
    timestamp: Timestamp,
    signer: Option<Signer>,
    extra: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    skew: i16,
}

fuzz_target!(|input: Input| {
    let tenant = match &input.tenant {
        None => String::new(),
        Some(Tenant::Acme) => "acme".into(),
        Some(Tenant::Globex) => "globex".into(),
        Some(Tenant::Broken) => "broken".into(),
        Some(Tenant::Empty) => "empty".into(),
        Some(Tenant::Mangled { spaces, upper }) => {
            let pad = " ".repeat(usize::from(spaces % 3));
            let id = if *upper { "ACME" } else { "acme" };
            format!("{pad}{id}{pad}")
        }
        Some(Tenant::Raw(s)) => s.clone(),
    };
    let ts = input.timestamp.text();
    let trimmed = ts.trim_ascii();
    let mac = |key: &str| hmac256(key, &[trimmed, b".", &input.body]);

    let mut h = http::HeaderMap::new();
    if let Some(signer) = &input.signer {
        let v1 = match signer {
            Signer::Acme => hex(&mac(SECRET)),
            Signer::Globex => hex(&mac(OTHER)),
            Signer::Flipped(bit) => {
                let mut sig = mac(SECRET);
                sig[usize::from(bit / 8) % 32] ^= 1 << (bit % 8);
                hex(&sig)
            }
            Signer::Raw(s) => s.clone(),
        };
        let value = [b"t=".as_slice(), &ts, b",v1=", v1.as_bytes()].concat();
        insert(&mut h, "stripe-signature", &value);
    }
    let path = if input.by_header {
        if input.tenant.is_some() {
            insert(&mut h, "x-tenant-id", tenant.as_bytes());
        }
        format!("/{}", input.path_prefix)
    } else {
        format!("/{}/{tenant}/{}", input.path_prefix, input.path_suffix)
    };
    for (name, value) in &input.extra {
        insert(&mut h, name, value);
    }

    let verifier = if input.by_header { &*BY_HEADER } else { &*BY_PATH };
    let now = common::clock(input.skew);
    let result = RUNTIME.block_on(verifier.verify_request(RequestHead::new(&path, &h), &input.body, now));
    match result {
        Ok(verified) => {
            let MatchedKey::Lookup { key_id, .. } = &verified.matched_key else {
                panic!("a tenant's key is named: {verified:?}");
            };
            let secret = secret_of(key_id).unwrap_or_else(|| panic!("accepted for tenant {key_id:?}"));
            // The tenant the request names is the tenant whose secret verified it.
            if input.by_header {
                let sent = h.get("x-tenant-id").expect("accepted without a tenant id");
                assert_eq!(sent.to_str().unwrap().trim(), &**key_id);
            } else {
                assert_eq!(path.trim_start_matches('/').split('/').nth(1), Some(&**key_id));
            }
            let t = verified.timestamp.expect("Stripe reports the signed timestamp");
            let sent = h.get("stripe-signature").expect("accepted without a signature");
            let carried = common::signed_forms(trimmed, Some(t))
                .iter()
                .any(|form| common::carries(sent.as_bytes(), &hmac256(secret, &[form, b".", &input.body])));
            assert!(carried, "accepted without {key_id}'s MAC: {h:?}");
        }
        Err(err) => {
            // 503 is only for the tenant whose lookup fails, or whose
            // secrets cannot build a verifier.
            let unavailable: &[u16] = if tenant.trim() == "broken" || tenant.trim() == "empty" {
                &[503]
            } else {
                &[]
            };
            common::check_refusal(&err, &[&mac(SECRET), &mac(OTHER)], unavailable);
        }
    }
});
