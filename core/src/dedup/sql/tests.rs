use super::*;

use std::cell::Cell;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::dedup::{ClaimToken, DedupStore, Transition};

thread_local! {
    /// How far this thread's application clock is off, while a
    /// [`Skewed`] future is polled.
    pub(super) static APP_CLOCK_SKEW_MS: Cell<i64> = const { Cell::new(0) };
}

/// Polls `inner` as an instance whose clock is `skew_ms` off would.
struct Skewed<F> {
    skew_ms: i64,
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Skewed<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let previous = APP_CLOCK_SKEW_MS.replace(self.skew_ms);
        let result = self.inner.as_mut().poll(cx);
        APP_CLOCK_SKEW_MS.set(previous);
        result
    }
}

fn skewed<F: Future>(skew: i64, inner: F) -> Skewed<F> {
    Skewed {
        skew_ms: skew,
        inner: Box::pin(inner),
    }
}

const HOUR: i64 = 3_600_000;

/// Two instances on one table whose application clocks are an hour
/// apart (far more than any lease) still exclude each other, and each
/// sees the other's completions and expiries as they really are.
async fn skewed_instances_exclude_each_other(a: &dyn DedupStore, b: &dyn DedupStore) {
    let lease = Duration::from_secs(30);
    let day = Duration::from_secs(86_400);
    let fresh = || format!("webhooks:skew:{}", ClaimToken::random().to_hex());

    // B runs an hour ahead: A's live claim is not taken over.
    let key = fresh();
    let mine = ClaimToken::random();
    assert_eq!(a.claim(&key, mine, lease).await.unwrap(), Claim::Claimed);
    let theirs = skewed(HOUR, b.claim(&key, ClaimToken::random(), lease)).await;
    assert!(
        matches!(theirs.unwrap(), Claim::InFlight { .. }),
        "B (+1 h) took over a live claim"
    );
    // An instance ahead can still complete its own claim.
    let key = fresh();
    let token = ClaimToken::random();
    assert_eq!(
        skewed(HOUR, b.claim(&key, token, lease)).await.unwrap(),
        Claim::Claimed
    );
    let done = skewed(HOUR, b.complete(&key, token, day)).await.unwrap();
    assert_eq!(
        done,
        Transition::Applied,
        "B (+1 h) could not complete its own claim"
    );
    assert_eq!(
        a.claim(&key, ClaimToken::random(), lease).await.unwrap(),
        Claim::Completed
    );

    // B runs an hour behind: its claim is not dead for A.
    let key = fresh();
    let token = ClaimToken::random();
    assert_eq!(
        skewed(-HOUR, b.claim(&key, token, lease)).await.unwrap(),
        Claim::Claimed
    );
    let ours = a.claim(&key, ClaimToken::random(), lease).await.unwrap();
    assert!(
        matches!(ours, Claim::InFlight { .. }),
        "A took over the claim of B (-1 h): {ours:?}"
    );
    let done = skewed(-HOUR, b.complete(&key, token, day)).await.unwrap();
    assert_eq!(done, Transition::Applied);
    assert_eq!(
        a.claim(&key, ClaimToken::random(), lease).await.unwrap(),
        Claim::Completed
    );

    // A short lease of A really runs out for B (-1 h): B takes over.
    let key = fresh();
    let short = Duration::from_millis(300);
    assert_eq!(
        a.claim(&key, ClaimToken::random(), short).await.unwrap(),
        Claim::Claimed
    );
    tokio::time::sleep(Duration::from_millis(450)).await;
    let theirs = skewed(-HOUR, b.claim(&key, ClaimToken::random(), lease))
        .await
        .unwrap();
    assert_eq!(
        theirs,
        Claim::Claimed,
        "B (-1 h) waits an hour for an expired lease"
    );
}

/// `env`'s URL (or `default`) when its server accepts connections;
/// `None` (skipped, said on stderr) without one, a panic under `CI=true`.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) async fn server_url(env: &str, default: &str) -> Option<String> {
    let url = std::env::var(env).unwrap_or_else(|_| default.to_owned());
    let authority = url.split_once("://").map(|(_, rest)| {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let start = rest[..end].rfind('@').map_or(0, |at| at + 1);
        rest[start..end].to_owned()
    })?;
    let reachable = matches!(
        tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(&authority)
        )
        .await,
        Ok(Ok(_))
    );
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    if !reachable {
        assert!(!ci, "{env}: {authority} is not reachable, and CI=true");
        eprintln!("SKIPPED: {authority} ({env}) is not reachable");
        return None;
    }
    Some(url)
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_instances_with_skewed_clocks_exclude_each_other() {
    let path = std::env::temp_dir().join(format!(
        "webhooks-dedup-skew-{}.db",
        ClaimToken::random().to_hex()
    ));
    let url = format!("sqlite://{}", path.display());
    let a = SqliteStore::connect(&url).await.unwrap();
    a.migrate().await.unwrap();
    let b = SqliteStore::connect(&url).await.unwrap();
    skewed_instances_exclude_each_other(&a, &b).await;
    a.pool().close().await;
    b.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_instances_with_skewed_clocks_exclude_each_other() {
    let Some(url) = server_url(
        "WEBHOOKS_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )
    .await
    else {
        return;
    };
    let table = format!("dedup_skew_{}", &ClaimToken::random().to_hex()[..12]);
    let a = PostgresStore::builder(&url)
        .table(&table)
        .connect()
        .await
        .unwrap();
    a.migrate().await.unwrap();
    let b = PostgresStore::builder(&url)
        .table(&table)
        .connect()
        .await
        .unwrap();
    skewed_instances_exclude_each_other(&a, &b).await;
    let drop_table = format!("DROP TABLE \"{table}\"");
    sqlx::query(&drop_table).execute(a.pool()).await.unwrap();
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn mysql_instances_with_skewed_clocks_exclude_each_other() {
    let Some(url) = server_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test").await
    else {
        return;
    };
    let table = format!("dedup_skew_{}", &ClaimToken::random().to_hex()[..12]);
    let a = MySqlStore::builder(&url)
        .table(&table)
        .connect()
        .await
        .unwrap();
    a.migrate().await.unwrap();
    let b = MySqlStore::builder(&url)
        .table(&table)
        .connect()
        .await
        .unwrap();
    skewed_instances_exclude_each_other(&a, &b).await;
    let drop_table = format!("DROP TABLE `{table}`");
    sqlx::query(&drop_table).execute(a.pool()).await.unwrap();
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_data_errors_are_permanent() {
    let Some(url) = server_url(
        "WEBHOOKS_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )
    .await
    else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
    // SQLSTATE 22021: PostgreSQL text cannot hold a NUL byte.
    let error = sqlx::query("SELECT $1::text")
        .bind("msg\0nul")
        .execute(store.pool())
        .await
        .unwrap_err();
    assert!(store_error(error).is_permanent());
    // A connection failure is not.
    let refused = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect("postgres://postgres@127.0.0.1:1/test")
        .await
        .unwrap_err();
    assert!(!store_error(refused).is_permanent());
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn mysql_data_errors_are_permanent() {
    let Some(url) = server_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test").await
    else {
        return;
    };
    let store = MySqlStore::connect(&url).await.unwrap();
    let table = format!("data_err_{}", &ClaimToken::random().to_hex()[..12]);
    sqlx::query(&format!("CREATE TABLE `{table}` (v VARCHAR(4) NOT NULL)"))
        .execute(store.pool())
        .await
        .unwrap();
    // Strict mode (the default): 1406, data too long.
    let error = sqlx::query(&format!("INSERT INTO `{table}` (v) VALUES (?)"))
        .bind("longer than four")
        .execute(store.pool())
        .await
        .unwrap_err();
    sqlx::query(&format!("DROP TABLE `{table}`"))
        .execute(store.pool())
        .await
        .unwrap();
    assert!(store_error(error).is_permanent());
}

#[test]
fn a_skewed_future_sets_the_clock_only_while_polled() {
    let before = now_ms();
    let inside = futures_util::FutureExt::now_or_never(skewed(HOUR, async { now_ms() })).unwrap();
    assert!(inside - before >= HOUR - 1_000, "{inside} vs {before}");
    assert!(now_ms() - before < 1_000);
}

#[test]
fn table_names_are_plain_identifiers() {
    assert!(validate_table("webhooks_dedup").is_ok());
    assert!(validate_table("_t9").is_ok());
    for bad in [
        "",
        "9t",
        "a-b",
        "a.b",
        "t;drop",
        "\"t\"",
        "ü",
        &"t".repeat(49),
    ] {
        assert!(validate_table(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn keys_split_at_the_first_colon() {
    let key = RowKey::new("webhooks:standard-webhooks:msg_1");
    assert_eq!(key.namespace, "webhooks");
    assert_eq!(key.id, "standard-webhooks:msg_1");
    assert_eq!(RowKey::new("bare").namespace, "");
}

#[test]
fn long_parts_are_digested_injectively() {
    let long = "x".repeat(MAX_ID_LEN + 1);
    let key = RowKey::new(&format!("ns:{long}"));
    assert!(key.id.starts_with(DIGEST_MARKER));
    assert_eq!(key.id.len(), DIGEST_MARKER.len() + 64);
    // A short id that looks like a digest is digested too.
    let lookalike = RowKey::new(&format!("ns:{}", key.id));
    assert_ne!(lookalike.id, key.id);
    assert_eq!(RowKey::new(&"x".repeat(MAX_ID_LEN)).id.len(), MAX_ID_LEN);
}
