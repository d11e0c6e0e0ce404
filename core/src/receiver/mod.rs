//! The receive pipeline both framework adapters call:
//! limit → verify → claim → handler → complete or release.
//!
//! | situation | store | response |
//! |---|---|---|
//! | `Content-Length` above the limit | — | 413, before a byte of the body is read |
//! | body grows past the limit while reading | — | 413, reading stops at the limit |
//! | body not fully received within the body timeout | — | 408 |
//! | missing or malformed signature headers | — | 400 + short reason (from the head alone, before the body is read, where the scheme can tell) |
//! | bad signature, timestamp outside tolerance | — | 401 + short reason (a timestamp outside the tolerance: before the body is read) |
//! | verified, first time | claim (atomic, lease, random token) | handler runs |
//! | handler still running | lease renewed every third of the lease | — |
//! | same id while another attempt holds the claim | — | 409 + `Retry-After` (≥ 1 s) |
//! | same id after a completed attempt | — | 200 + `webhook-duplicate: true` |
//! | store unreachable at claim | — | 503 + `Retry-After` (or, with [`StoreFailure::Open`], the handler runs without a dedup key; never for a [replay token](crate::Identity::ReplayToken)) |
//! | store refuses the key for good at claim | — | 400 |
//! | handler answered 2xx | complete (token-checked; on Redis, well within the lease, one `SET … XX GET` whose old value is checked: see [`DedupStore::complete_in_lease`]) | the handler's response |
//! | complete fails after a 2xx | retried in the background with backoff, lease still renewed | the handler's response |
//! | handler answered anything else | release (token-checked) | the handler's response |
//! | handler panicked | release | 500 |
//! | request dropped mid-handler | release, in the background | — |
//! | request dropped after the handler answered | complete or release finishes (a runtime task) | — |
//! | request dropped while claiming | the lease expires; the next retry takes over | — |
//! | renewals fail and another attempt takes over | the late complete is refused and logged | the handler's response |
//! | process crashed holding the claim | the lease expires; the next retry takes over | — |
//!
//! Keys reach the store only as short printable ASCII: any other key is
//! replaced by `{namespace}:#sha256:{hex}` of it, so control bytes and
//! oversized ids are deduplicated like any other, never refused by a store.
//! An `on_reject` hook shapes the body and headers of rejections; their
//! status, `Retry-After` and `webhook-duplicate` stay the library's.
//!
//! Verification happens before the claim, so a forged request can never claim
//! a real delivery id.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::{SystemTime, UNIX_EPOCH};
//! use webhooks_core::{Receiver, Rejection, scheme::StandardWebhooks};
//!
//! let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
//! let headers = verifier.sign_headers("msg_1", now, b"{}")?;
//! let receiver = Receiver::new(verifier); // in-process dedup, 1 MiB limit
//!
//! let (mut parts, ()) = http::Request::post("/webhooks").body(())?.into_parts();
//! parts.headers = headers;
//! let handler = |_parts, _delivery| async move { 204u16 };
//! let first = receiver.process(parts.clone(), "{}".into(), handler, |s| *s).await;
//! assert_eq!(first, Ok(204));
//! // The sender retries: acknowledged, the handler does not run again.
//! let again = receiver.process(parts, "{}".into(), handler, |s| *s).await;
//! assert_eq!(again, Err(Rejection::Duplicate));
//! # Ok(()) }
//! ```

// The pipeline, by concern (each file adds to the types defined here):
// `builder`: `ReceiverBuilder`, the receiver's configuration.
// `pipeline`: `process` and `receive`, the whole request in its `webhook` span.
// `admission`: `Receiver::admit`, verification then the claim (or the inbox),
//   and the `Admission` it yields.
// `run`: `Admission::run`, the handler's future then the settlement.
// `settlement`: `ClaimGuard`, its completion (retried in the background) and
//   release; `renewal`: the lease renewal task; `detached`: settlement work
//   that survives the request's future; `pending`: the completions this
//   process still retries.
// The store keys are derived in `crate::key`, shared with the inbox.
mod admission;
mod budget;
mod builder;
mod detached;
mod pending;
mod pipeline;
mod renewal;
mod run;
mod settlement;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{Response, header};

use crate::dedup::DedupStore;
use crate::signals::Signals;
use crate::{Rejection, RequestHead, RequestVerifier, Verified};

pub use self::admission::Admission;
pub use self::budget::{DEFAULT_BUDGET_MARGIN, ResponseBudget};
pub use self::builder::ReceiverBuilder;
pub use self::settlement::ClaimGuard;
pub use crate::key::{MAX_STORE_KEY_LEN, REPLAY_NAMESPACE};

use self::pending::PendingCompletions;

/// The default body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The default claim lease: how long one attempt may run before a retry may take over.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// The default retention of completed ids: 7 days (senders retry for up to 3).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The default `Retry-After` when the store is unavailable.
pub const DEFAULT_STORE_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The default longest `Retry-After` sent with a 409 while another attempt
/// holds the delivery.
pub const DEFAULT_IN_FLIGHT_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The default key namespace.
pub const DEFAULT_NAMESPACE: &str = "webhooks";
/// The default longest time reading a request body may take: 30 s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time a failed `complete` is retried in the background: 5 minutes.
pub const DEFAULT_COMPLETE_RETRY: Duration = Duration::from_secs(300);

/// A framework's request, as the pipeline needs to see it before the handler:
/// its path and headers. The adapters implement it for their request types.
pub trait Incoming {
    /// The path and headers.
    fn head(&self) -> RequestHead<'_>;
}

impl Incoming for http::request::Parts {
    fn head(&self) -> RequestHead<'_> {
        RequestHead::new(self.uri.path(), &self.headers).with_query(self.uri.query())
    }
}

/// What to do when the dedup store cannot be reached at claim time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreFailure {
    /// Answer `503` with `Retry-After`; the handler does not run (the default).
    #[default]
    Closed,
    /// Run the handler without deduplication, and log a warning.
    Open,
}

type KeyFn = Arc<dyn Fn(&Verified, &[u8]) -> Option<String> + Send + Sync>;
type RejectFn = Arc<dyn Fn(&Rejection) -> Response<Bytes> + Send + Sync>;
type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

struct Inner {
    verifier: Arc<dyn RequestVerifier>,
    store: Option<Arc<dyn DedupStore>>,
    body_limit: usize,
    body_timeout: Duration,
    lease: Duration,
    retention: Duration,
    namespace: String,
    key_fn: Option<KeyFn>,
    store_failure: StoreFailure,
    store_retry_after: Duration,
    in_flight_retry_after: Duration,
    complete_retry: Duration,
    on_reject: Option<RejectFn>,
    clock: Clock,
    inbox: Option<crate::inbox::accept::InboxAccept>,
    /// The response budget's inbox and duration.
    budget: Option<self::budget::Handoff>,
    signals: Arc<Signals>,
    /// Completions this process retries in the background.
    pending: Arc<PendingCompletions>,
}

/// The configured receive pipeline. Cheap to clone (one `Arc`).
///
/// Build it with [`Receiver::new`] (in-process dedup, defaults everywhere) or
/// [`Receiver::builder`]. The framework adapters wrap one of these.
#[derive(Clone)]
pub struct Receiver {
    inner: Arc<Inner>,
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Receiver")
            .field("body_limit", &i.body_limit)
            .field("body_timeout", &i.body_timeout)
            .field("dedup", &i.store.is_some())
            .field("lease", &i.lease)
            .field("retention", &i.retention)
            .field("namespace", &i.namespace)
            .field("store_failure", &i.store_failure)
            .field("inbox", &i.inbox.is_some())
            .finish_non_exhaustive()
    }
}

/// A `Content-Length` value as a number: what `u64`'s parser accepts of the
/// value as text ([`HeaderValue::to_str`](http::HeaderValue::to_str))
/// trimmed, read from the bytes (the property test
/// `content_length_reads_what_the_parser_reads` compares them).
fn content_length(value: &[u8]) -> Option<u64> {
    if !crate::headers::is_text(value) {
        return None;
    }
    // Text's only whitespace is spaces and tabs; `u64` takes one `+`.
    let digits = value.trim_ascii();
    let digits = digits.strip_prefix(b"+").unwrap_or(digits);
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        (digit <= 9).then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// `Content-Length`, as a group of names for
/// [`HeaderLookup::get_first_of`](crate::HeaderLookup::get_first_of)
/// (each group a static of its own: a header name holds `Bytes`).
static CONTENT_LENGTH_NAME: [http::HeaderName; 1] = [header::CONTENT_LENGTH];
static CONTENT_LENGTH: [&[http::HeaderName]; 1] = [&CONTENT_LENGTH_NAME];

impl Receiver {
    /// A pipeline with the defaults: 1 MiB body limit, in-process dedup
    /// (with the `memory` feature; none without it), 60 s lease, 7 days retention.
    #[track_caller]
    pub fn new(verifier: impl RequestVerifier + 'static) -> Self {
        Self::builder(verifier).build()
    }

    /// A builder to change the defaults.
    #[track_caller]
    pub fn builder(verifier: impl RequestVerifier + 'static) -> ReceiverBuilder {
        ReceiverBuilder::new(Arc::new(verifier), std::panic::Location::caller())
    }

    /// The body limit in bytes.
    #[must_use]
    pub fn body_limit(&self) -> usize {
        self.inner.body_limit
    }

    /// Whether an [`on_reject`](ReceiverBuilder::on_reject) hook shapes
    /// rejection responses. Without one, [`rejection_response`](Self::rejection_response)
    /// is [`Rejection::to_response`], so an adapter's extractors need the
    /// receiver only when this is `true`.
    #[must_use]
    pub fn has_on_reject(&self) -> bool {
        self.inner.on_reject.is_some()
    }

    /// Whether this pipeline stores deliveries in an inbox
    /// ([`ReceiverBuilder::inbox`]): then no route handler ever runs, and
    /// the adapters' inbox routes need none.
    #[must_use]
    pub fn has_inbox(&self) -> bool {
        self.inner.inbox.is_some()
    }

    /// The [response budget](ReceiverBuilder::response_budget): how long a
    /// handler runs inline before its delivery is handed to the inbox.
    #[must_use]
    pub fn response_budget(&self) -> Option<Duration> {
        self.inner.budget.as_ref().map(|b| b.budget)
    }

    /// How long reading the body may take.
    #[must_use]
    pub fn body_timeout(&self) -> Duration {
        self.inner.body_timeout
    }

    /// The first step, before reading the body: refuses a `Content-Length`
    /// above the limit (413) or one that is not a number (400).
    ///
    /// # Errors
    ///
    /// [`Rejection::PayloadTooLarge`] or [`Rejection::BodyRead`].
    pub fn check_head(&self, headers: &dyn crate::HeaderLookup) -> Result<(), Rejection> {
        // As a `'static` group: a framework's own map (actix's) finds it
        // by hash, with the name converted once.
        let mut found = [None];
        headers.get_first_of(&CONTENT_LENGTH, &mut found);
        let [Some((_, value))] = found else {
            return Ok(());
        };
        let length = content_length(value).ok_or(Rejection::BodyRead)?;
        if length > self.inner.body_limit as u64 {
            return Err(Rejection::PayloadTooLarge {
                limit: self.inner.body_limit,
            });
        }
        Ok(())
    }

    /// The scheme's checks of the head before the body is read
    /// ([`RequestVerifier::check_head`]: signature header present and
    /// well-formed, signed timestamp inside the tolerance): a request that
    /// must fail is answered at once, without waiting for its body.
    fn check_signature_head(&self, head: RequestHead<'_>) -> Result<(), Rejection> {
        let started = Instant::now();
        let now = (self.inner.clock)();
        self.inner.verifier.check_head(head, now).map_err(|error| {
            (self.inner.signals).verify_failed(self.inner.verifier.scheme(), started.elapsed());
            error.into()
        })
    }

    /// Runs `read` (an adapter's limited body read) under the body timeout.
    ///
    /// # Errors
    ///
    /// [`Rejection::BodyTimeout`] when `read` has not finished within
    /// [`body_timeout`](Self::body_timeout); otherwise `read`'s own rejection.
    pub async fn read_body<F>(&self, read: F) -> Result<Bytes, Rejection>
    where
        F: Future<Output = Result<Bytes, Rejection>>,
    {
        let read = std::pin::pin!(read);
        let (body, _) = self.read_checked(read, None).await?;
        Ok(body)
    }

    /// `read` under the body timeout, with the scheme's checks of `head`
    /// ([`check_signature_head`](Self::check_signature_head)), when given,
    /// where they help: a body that came with the head (most do) is
    /// verified with it, and the verification refuses what the head's
    /// check would, with the same error ([`RequestVerifier::check_head`]'s
    /// contract), so the head is checked once. Otherwise the head is checked
    /// first: a request that must fail is answered without waiting for its
    /// body (which an attacker can trickle for the whole body timeout), and
    /// a head's error comes before the body's. A body already here needs no
    /// timer: the deadline is armed (and boxed, or it would take room in
    /// every request's state) only when the read must wait.
    ///
    /// "Must wait" is decided at the second poll, not the first: a read
    /// that is not ready at once wakes its task and is polled again before
    /// anything else is done. A server that calls the service as soon as
    /// the head is parsed and hands it the body it read with the head just
    /// after (actix-web does so on every request) then costs neither the
    /// head's check nor a timer; a body that is really on its way (or
    /// never comes) is still met by the check a moment later.
    ///
    /// One future, polled by one `await`: the pipeline's state holds the
    /// read once.
    ///
    /// Answers the body, and whether it was waited for (then `head`, if
    /// given, was checked).
    pub(crate) fn read_checked<'a, F>(
        &'a self,
        mut read: Pin<&'a mut F>,
        head: Option<RequestHead<'a>>,
    ) -> impl Future<Output = Result<(Bytes, bool), Rejection>> + 'a
    where
        F: Future<Output = Result<Bytes, Rejection>>,
    {
        let check = move || head.map_or(Ok(()), |head| self.check_signature_head(head));
        // Polls before the read was found waiting (0, 1), then 2.
        let mut polls = 0_u8;
        let mut deadline: Option<Pin<Box<tokio::time::Sleep>>> = None;
        std::future::poll_fn(move |cx| {
            let read = read.as_mut().poll(cx);
            if polls < 2 {
                polls += 1;
                match read {
                    Poll::Ready(Ok(body)) => return Poll::Ready(Ok((body, false))),
                    Poll::Ready(Err(rejection)) => {
                        return Poll::Ready(check().and(Err(rejection)));
                    }
                    // Once more, at once: the body may be handed over next.
                    Poll::Pending if polls == 1 => {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    Poll::Pending => {
                        if let Err(rejection) = check() {
                            return Poll::Ready(Err(rejection));
                        }
                    }
                }
            } else if let Poll::Ready(done) = read {
                return Poll::Ready(done.map(|body| (body, true)));
            }
            let deadline = deadline
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(self.inner.body_timeout)));
            match deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(Rejection::BodyTimeout)),
                Poll::Pending => Poll::Pending,
            }
        })
    }

    /// The response for a rejection: the user's `on_reject` function shapes
    /// the body and headers, otherwise [`Rejection::to_response`]. Either way
    /// the status, `Retry-After` and `webhook-duplicate` are the library's,
    /// set after the hook ran.
    #[must_use]
    pub fn rejection_response(&self, rejection: &Rejection) -> Response<Bytes> {
        match &self.inner.on_reject {
            // A stored delivery is an acknowledgement, not a failure to
            // shape; a handshake's answer is the provider's protocol.
            Some(f)
                if !matches!(
                    rejection,
                    Rejection::Stored { .. } | Rejection::Handshake(_)
                ) =>
            {
                let mut response = f(rejection);
                rejection.apply_protocol(&mut response);
                response
            }
            _ => rejection.to_response(),
        }
    }

    /// The response for a rejection in parts
    /// ([`Rejection::response_parts`]) when it is the library's own, or
    /// `None` when the `on_reject` hook shapes it (then
    /// [`rejection_response`](Self::rejection_response)): for an adapter to
    /// build its framework's response without an intermediate
    /// [`http::Response`].
    #[must_use]
    pub fn rejection_parts(&self, rejection: &Rejection) -> Option<crate::ResponseParts> {
        let shaped = self.inner.on_reject.is_some()
            && !matches!(
                rejection,
                Rejection::Stored { .. } | Rejection::Handshake(_)
            );
        (!shaped).then(|| rejection.response_parts())
    }
}

#[cfg(test)]
mod content_length_tests {
    use super::content_length;

    proptest::proptest! {
        /// Digits, signs, spaces, tabs and other bytes, in any order: the
        /// same answer as the text's trimmed `parse::<u64>()`.
        #[test]
        fn content_length_reads_what_the_parser_reads(
            value in proptest::collection::vec(
                proptest::prop_oneof![
                    6 => b'0'..=b'9',
                    1 => proptest::sample::select(vec![b' ', b'\t', b'+', b'-', b'a', 0, 0x7f, 0xc3, 0xa9]),
                ],
                0..24,
            )
        ) {
            let expected = crate::headers::header_str(&value).and_then(|t| t.trim().parse::<u64>().ok());
            proptest::prop_assert_eq!(content_length(&value), expected);
        }
    }

    #[test]
    fn content_length_edges() {
        for (value, expected) in [
            (&b"18446744073709551615"[..], Some(u64::MAX)),
            (b"18446744073709551616", None),
            (b" +42\t", Some(42)),
            (b"+", None),
            (b"++1", None),
            (b"-0", None),
            (b"", None),
            (b"4 2", None),
        ] {
            assert_eq!(content_length(value), expected, "{value:?}");
        }
    }
}
