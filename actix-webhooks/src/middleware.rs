//! The middleware and its service.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::{Ready, ready};
use std::rc::Rc;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{
    Extensions, Payload, Service, ServiceRequest, ServiceResponse, Transform, forward_ready,
};
use actix_web::http::Uri;
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::{Error, HttpMessage as _, web};
use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::future::LocalBoxFuture;
use webhooks_core::headers::{CopiedOnDemand, FirstOf, ForeignHeaders, NotText, header_str};
use webhooks_core::{
    BodyCollector, Delivery, Incoming, Receiver, Rejection, RequestHead, RequestVerifier,
};

use crate::error::{WebhookRejection, parts_response, rejection_response};

/// Verifies, deduplicates and guards every request to the wrapped service.
///
/// Wrap a route with it (`web::post().to(h).wrap(..)`, so the resource's other
/// methods still answer `405`; a resource, scope or app `wrap` puts it in
/// front of everything under them); the handlers behind
/// it take [`VerifiedWebhook<T>`](crate::VerifiedWebhook),
/// [`RawWebhook`](crate::RawWebhook) or [`WebhookMeta`](crate::WebhookMeta),
/// and `web::Bytes` or `web::Json` still see the exact body.
///
/// The receiver's body limit is the one `web::Bytes`, `String`, `web::Json`
/// and `web::Form` apply behind the middleware: it adds a
/// [`web::PayloadConfig`], a [`web::JsonConfig`] and a [`web::FormConfig`]
/// with that limit to the request's app data, so a body the middleware
/// verified is never refused by the handler's extractor after the claim
/// (actix's own defaults are 256 KiB, 2 MiB and 16 KiB). A config set on the
/// resource itself still takes precedence: keep its limit at least the
/// receiver's.
///
/// ```
/// use std::time::Duration;
/// use actix_webhooks::Webhooks;
/// use actix_webhooks::core::{Receiver, scheme::StandardWebhooks};
///
/// # fn main() -> Result<(), actix_webhooks::core::ConfigError> {
/// let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
/// // Defaults: 1 MiB limit, in-process dedup.
/// let webhooks = Webhooks::new(verifier.clone());
/// // Or configured:
/// let webhooks = Webhooks::from_receiver(
///     Receiver::builder(verifier)
///         .body_limit(256 * 1024)
///         .lease(Duration::from_secs(30))
///         .build(),
/// );
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Webhooks {
    receiver: Receiver,
}

impl fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhooks")
            .field("receiver", &self.receiver)
            .finish()
    }
}

impl Webhooks {
    /// The middleware with the default pipeline around `verifier`.
    ///
    /// Built again by each actix worker (in `HttpServer::new`'s factory),
    /// the same `Webhooks::new` call shares one in-process dedup store across
    /// the workers of the running actix `System` (see
    /// [`ReceiverBuilder::share_default_store`](webhooks_core::ReceiverBuilder::share_default_store)):
    /// two retries of one delivery on two workers run the handler once.
    /// Building a [`Receiver`] yourself inside the factory, call
    /// `share_default_store` too, or build it once outside and clone it in.
    #[must_use]
    #[track_caller]
    pub fn new(verifier: impl RequestVerifier + 'static) -> Self {
        let builder = Receiver::builder(verifier);
        let receiver = match actix_web::rt::System::try_current() {
            Some(system) => builder.share_default_store(system.id() as u64),
            None => builder,
        };
        Self::from_receiver(receiver.build())
    }

    /// The middleware around a configured pipeline.
    #[must_use]
    pub fn from_receiver(receiver: Receiver) -> Self {
        Self { receiver }
    }
}

impl From<Receiver> for Webhooks {
    fn from(receiver: Receiver) -> Self {
        Self::from_receiver(receiver)
    }
}

impl<S, B> Transform<S, ServiceRequest> for Webhooks
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    S::Future: 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Transform = WebhooksMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        let mut payload_config = Extensions::new();
        let limit = self.receiver.body_limit();
        payload_config.insert(web::PayloadConfig::new(limit));
        payload_config.insert(web::JsonConfig::default().limit(limit));
        payload_config.insert(web::FormConfig::default().limit(limit));
        ready(Ok(WebhooksMiddleware {
            service: Rc::new(service),
            receiver: self.receiver.clone(),
            payload_config: Rc::new(payload_config),
        }))
    }
}

/// The service [`Webhooks`] wraps around the inner one.
///
/// Rejections are responses (the left body is the inner service's, the right
/// one a rejection's), carrying the [`Rejection`] in their extensions. The one
/// exception is a handler panic, answered with a [`WebhookRejection`] error.
pub struct WebhooksMiddleware<S> {
    service: Rc<S>,
    receiver: Receiver,
    /// `PayloadConfig`, `JsonConfig` and `FormConfig` with the receiver's
    /// limit, for the handler's extractors.
    payload_config: Rc<Extensions>,
}

impl<S> fmt::Debug for WebhooksMiddleware<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhooksMiddleware")
            .field("receiver", &self.receiver)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<ServiceRequest> for WebhooksMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    S::Future: 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    forward_ready!(service);

    fn call(&self, mut req: ServiceRequest) -> Self::Future {
        let service = Rc::clone(&self.service);
        let receiver = self.receiver.clone();
        let payload_config = Rc::clone(&self.payload_config);
        Box::pin(async move {
            let payload = req.extract::<web::Payload>().await;
            // The target and the headers are read in place: moved out of
            // the request (no copy) for the pipeline, and put back before the
            // handler runs or the rejection is answered (`IncomingHead`'s
            // drop).
            let returned = Cell::new(None);
            let head = IncomingHead {
                uri: std::mem::take(&mut req.head_mut().uri),
                headers: CopiedOnDemand::new(ActixHeaders::new(std::mem::take(req.headers_mut()))),
                returned: &returned,
            };
            let limit = receiver.body_limit();
            let read = || read_limited(payload, limit);
            // The request stays here until the handler runs, so that a
            // rejection before it can still be answered with a response.
            let mut waiting = Some(req);
            let handler = |head: IncomingHead<'_>, delivery: Delivery| {
                let mut req = waiting.take().expect("core runs the handler at most once");
                drop(head);
                restore_headers(&mut req, &returned);
                req.set_payload(Payload::from(delivery.body.clone()));
                req.add_data_container(payload_config);
                req.extensions_mut().insert(delivery);
                // The extractors render their rejections with the receiver's
                // hook, when it has one (each insert is an allocation).
                if receiver.has_on_reject() {
                    req.extensions_mut().insert(receiver.clone());
                }
                service.call(req)
            };
            let status = |result: &Result<ServiceResponse<B>, Error>| match result {
                Ok(response) => response.status().as_u16(),
                Err(error) => error.as_response_error().status_code().as_u16(),
            };
            // Under a response budget, core hands a late handler's delivery
            // to the inbox (its future runs on in this worker's `LocalSet`).
            let received = receiver.receive_local(head, read, handler, status).await;
            match received {
                Ok(result) => result.map(ServiceResponse::map_into_left_body),
                Err(r) => match waiting {
                    Some(mut req) => {
                        restore_headers(&mut req, &returned);
                        Ok(reject(&receiver, req, r))
                    }
                    None => {
                        let response = receiver.rejection_response(&r);
                        Err(WebhookRejection::rendered(r, response).into())
                    }
                },
            }
        })
    }
}

/// What the pipeline sees of an actix request before the handler: the
/// request's URI and actix's own header map, both moved out of the request
/// and read in place.
struct IncomingHead<'r> {
    uri: Uri,
    headers: CopiedOnDemand<ActixHeaders>,
    /// Where the URI and the header map go when the pipeline is done with
    /// this head.
    returned: &'r Cell<Option<(Uri, HeaderMap)>>,
}

impl Incoming for IncomingHead<'_> {
    fn head(&self) -> RequestHead<'_> {
        let target = self
            .uri
            .path_and_query()
            .map_or(self.uri.path(), |target| target.as_str());
        RequestHead::from_path_and_query(target, &self.headers)
    }
}

impl Drop for IncomingHead<'_> {
    fn drop(&mut self) {
        let headers = self.headers.inner_mut().take();
        self.returned
            .set(Some((std::mem::take(&mut self.uri), headers)));
    }
}

/// Puts the request's URI and headers back, once the pipeline dropped its
/// head.
fn restore_headers(req: &mut ServiceRequest, returned: &Cell<Option<(Uri, HeaderMap)>>) {
    if let Some((uri, headers)) = returned.take() {
        let head = req.head_mut();
        head.uri = uri;
        head.headers = headers;
    }
}

/// actix's header map (http 0.2) as the pipeline reads headers
/// ([`ForeignHeaders`]).
///
/// The `'static` names a scheme reads in a group
/// ([`get_first_of`](ForeignHeaders::get_first_of)) are looked up
/// in the map's hash table, made http 0.2 names once per thread. A name that
/// is not `'static` is found by comparing names, without parsing it into an
/// http 0.2 name (which allocates for names that are not standard ones, such
/// as `webhook-id`); actix caps a request's headers, so that scan is bounded.
struct ActixHeaders {
    map: HeaderMap,
}

impl ActixHeaders {
    fn new(map: HeaderMap) -> Self {
        Self { map }
    }

    /// The map, taken back.
    fn take(&mut self) -> HeaderMap {
        std::mem::take(&mut self.map)
    }
}

/// The most groups whose http 0.2 names a thread keeps ([`NAMES`]): far
/// more than the schemes of a program read (each reads one or two groups).
const NAMED_GROUPS: usize = 64;

/// The groups of a `'static` name list, as http 0.2 names.
type ConvertedGroups = Box<[Box<[HeaderName]>]>;

thread_local! {
    /// For each `'static` list of groups read on this thread (by address),
    /// its names as http 0.2 names, made once: an actix worker is one
    /// thread, so this is read without a lock.
    static NAMES: RefCell<Vec<(usize, ConvertedGroups)>> = const { RefCell::new(Vec::new()) };
}

/// `groups` as http 0.2 names. An http 1.x name is lower-case token
/// characters, at most 64 KiB: what http 0.2's `from_static` accepts, so it
/// cannot panic (the tests `static_names_convert` and
/// `standard_names_convert` check generated and standard names).
fn convert(groups: &'static [&'static [http::HeaderName]]) -> ConvertedGroups {
    groups
        .iter()
        .map(|names| {
            names
                .iter()
                .map(|name| HeaderName::from_static(name.as_str()))
                .collect()
        })
        .collect()
}

/// Calls `f` with `groups` as http 0.2 names, converted once per thread.
fn with_names<R>(
    groups: &'static [&'static [http::HeaderName]],
    f: impl FnOnce(&[Box<[HeaderName]>]) -> R,
) -> R {
    let key = groups.as_ptr() as usize;
    NAMES.with(|cache| {
        let mut cache = cache.borrow_mut();
        let found = (cache.iter()).position(|(k, names)| *k == key && names.len() == groups.len());
        let at = match found {
            Some(at) => at,
            None if cache.len() >= NAMED_GROUPS => return f(&convert(groups)),
            None => {
                cache.push((key, convert(groups)));
                cache.len() - 1
            }
        };
        f(&cache[at].1)
    })
}

/// A value as text ([`ForeignHeaders::get_str`]), as `to_str` reads it
/// (checked eight bytes at a time).
fn value_str(value: &HeaderValue) -> Result<&str, NotText> {
    header_str(value.as_bytes()).ok_or(NotText)
}

impl ForeignHeaders for ActixHeaders {
    fn get(&self, name: &http::HeaderName) -> Option<&[u8]> {
        let name = name.as_str();
        self.map
            .iter()
            .find(|(key, _)| key.as_str() == name)
            .map(|(_, value)| value.as_bytes())
    }

    fn get_str(&self, name: &http::HeaderName) -> Option<Result<&str, NotText>> {
        let name = name.as_str();
        self.map
            .iter()
            .find(|(key, _)| key.as_str() == name)
            .map(|(_, value)| value_str(value))
    }

    // Each name looked up by hash, as an http 0.2 name made once per thread.
    fn get_first_of<'h>(
        &'h self,
        groups: &'static [&'static [http::HeaderName]],
        out: &mut [FirstOf<'h>],
    ) {
        with_names(groups, |groups| {
            for (names, slot) in groups.iter().zip(out) {
                *slot = (names.iter().enumerate())
                    .find_map(|(i, name)| self.map.get(name).map(|v| (i, v.as_bytes())));
            }
        });
    }

    fn for_each_value(&self, name: &http::HeaderName, f: &mut dyn FnMut(&[u8])) {
        let name = name.as_str();
        for (key, value) in &self.map {
            if key.as_str() == name {
                f(value.as_bytes());
            }
        }
    }

    fn for_each(&self, f: &mut dyn FnMut(&str, &[u8])) {
        for (key, value) in &self.map {
            f(key.as_str(), value.as_bytes());
        }
    }

    fn len_keys(&self) -> usize {
        self.map.len_keys()
    }
}

/// Reads the payload into a [`BodyCollector`], which refuses a chunk that
/// would take it past `limit` before keeping it.
async fn read_limited(
    payload: Result<web::Payload, Error>,
    limit: usize,
) -> Result<Bytes, Rejection> {
    let mut payload = payload.map_err(|_| Rejection::BodyRead)?;
    let mut collected = BodyCollector::new(limit);
    while let Some(chunk) = payload.next().await {
        collected.push(chunk.map_err(|_| Rejection::BodyRead)?)?;
    }
    Ok(collected.finish())
}

/// Answers `rejection` with the receiver's response.
fn reject<B>(
    receiver: &Receiver,
    req: ServiceRequest,
    rejection: Rejection,
) -> ServiceResponse<EitherBody<B>> {
    let response = match receiver.rejection_parts(&rejection) {
        // The library's own response: built as actix's at once.
        Some(parts) => parts_response(&rejection, parts),
        None => rejection_response(&rejection, &receiver.rejection_response(&rejection)),
    };
    req.into_response(response).map_into_right_body()
}

#[cfg(test)]
mod header_tests {
    use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
    use proptest::prelude::*;
    use webhooks_core::HeaderLookup;
    use webhooks_core::headers::{
        CopiedOnDemand, HEADER_VALUES_CAPACITY, copy_header_map, first_of_by_lookup,
    };

    use super::ActixHeaders;

    /// What the view answers for `name` (first value, every value) against
    /// what the http 1.x copy answers, which is what the pipeline read before.
    fn assert_same(view: &CopiedOnDemand<ActixHeaders>, copy: &http::HeaderMap, name: &str) {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        let want_first = copy.get(&name).map(http::HeaderValue::as_bytes);
        assert_eq!(HeaderLookup::get(view, &name), want_first, "{name}");
        let want_all: Vec<&[u8]> = copy.get_all(&name).iter().map(|v| v.as_bytes()).collect();
        let mut got_all = Vec::new();
        view.for_each_value(&name, &mut |v| got_all.push(v.to_vec()));
        assert_eq!(got_all, want_all, "{name}");
    }

    #[test]
    fn the_view_answers_what_the_copy_answered() {
        let mut headers = HeaderMap::new();
        let pairs: [(&str, &[u8]); 8] = [
            ("Webhook-Id", b"msg_1"),
            ("webhook-signature", b"v1,AAAA v1,BBBB"),
            ("X-Multi", b"first"),
            ("x-multi", b"second"),
            ("x-MULTI", b"third"),
            ("x-empty", b""),
            ("x-raw", b"caf\xc3\xa9 \xff"),
            ("content-type", b"application/json"),
        ];
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        // Values beyond the copy's first buffer, so that it grows while the
        // earlier values still hold slices of it.
        for i in 0..3 {
            let value = char::from(b'a' + i)
                .to_string()
                .repeat(HEADER_VALUES_CAPACITY - 100);
            headers.append(
                HeaderName::from_static("x-long"),
                HeaderValue::from_str(&value).unwrap(),
            );
        }
        let view = CopiedOnDemand::new(ActixHeaders::new(headers));
        assert!(!view.copied(), "reading in place copies nothing");
        for name in [
            "webhook-id",
            "WEBHOOK-ID",
            "x-multi",
            "X-Multi",
            "x-empty",
            "x-raw",
            "x-long",
            "content-type",
            "absent",
        ] {
            let copy = copy_header_map(&view, 0);
            assert_same(&view, &copy, name);
        }
        assert!(!view.copied());
        // The first multi value, case-insensitively, and non-UTF-8 bytes as sent.
        let multi = http::HeaderName::from_bytes(b"X-MULTI").unwrap();
        assert_eq!(HeaderLookup::get(&view, &multi), Some(&b"first"[..]));
        let raw = http::HeaderName::from_static("x-raw");
        assert_eq!(
            HeaderLookup::get(&view, &raw),
            Some(&b"caf\xc3\xa9 \xff"[..])
        );
        // The map made on demand, once, holds every value.
        let map = view.header_map();
        assert!(view.copied());
        assert_eq!(map.len(), pairs.len() + 3);
        assert!(std::ptr::eq(map, view.header_map()), "made once");
        assert_eq!(map.get_all("x-multi").iter().count(), 3);
    }

    // Header names hold `Bytes` (interior mutability): each group is a
    // static of its own.
    static ID_OR_SIGNATURE: [http::HeaderName; 2] = [
        http::HeaderName::from_static("webhook-id"),
        http::HeaderName::from_static("svix-signature"),
    ];
    static A: [http::HeaderName; 1] = [http::HeaderName::from_static("x-a")];
    static B_TYPE_A: [http::HeaderName; 3] = [
        http::HeaderName::from_static("x-b"),
        http::header::CONTENT_TYPE,
        http::HeaderName::from_static("x-a"),
    ];
    static SIGNATURE: [http::HeaderName; 1] = [http::HeaderName::from_static("svix-signature")];
    static TYPE_ID: [http::HeaderName; 2] = [
        http::header::CONTENT_TYPE,
        http::HeaderName::from_static("webhook-id"),
    ];
    /// Groups of names read together (`x-a` in two of them).
    static GROUPS: [&[http::HeaderName]; 3] = [&ID_OR_SIGNATURE, &A, &B_TYPE_A];
    /// Other groups, read after [`GROUPS`].
    static OTHER_GROUPS: [&[http::HeaderName]; 2] = [&SIGNATURE, &TYPE_ID];

    fn header_name() -> impl Strategy<Value = String> {
        // A few names, in any case, so that they repeat.
        (
            prop::sample::select(vec![
                "webhook-id",
                "x-a",
                "x-b",
                "content-type",
                "svix-signature",
            ]),
            any::<u8>(),
        )
            .prop_map(|(name, mask)| {
                name.chars()
                    .enumerate()
                    .map(|(i, c)| {
                        if mask >> (i % 8) & 1 == 1 {
                            c.to_ascii_uppercase()
                        } else {
                            c
                        }
                    })
                    .collect()
            })
    }

    fn header_value() -> impl Strategy<Value = Vec<u8>> {
        // Any bytes a header value may hold: visible ASCII, tabs, spaces,
        // and obs-text (not UTF-8).
        prop::collection::vec(prop_oneof![Just(b'\t'), 0x20u8..0x7f, 0x80u8..=0xff], 0..24)
            .prop_filter("no leading or trailing whitespace issue", |v| {
                HeaderValue::from_bytes(v).is_ok()
            })
    }

    proptest! {
        #[test]
        fn the_view_and_the_copy_agree(
            pairs in prop::collection::vec((header_name(), header_value()), 0..12),
            query in header_name(),
        ) {
            let mut headers = HeaderMap::new();
            let mut reference = http::HeaderMap::new();
            for (name, value) in &pairs {
                headers.append(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_bytes(value).unwrap(),
                );
                // Built independently, as http 1.x would receive it.
                reference.append(
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    http::HeaderValue::from_bytes(value).unwrap(),
                );
            }
            let view = CopiedOnDemand::new(ActixHeaders::new(headers));
            assert_same(&view, &reference, &query);
            // The copy made on demand agrees with the reference, name by name.
            let copy = view.header_map();
            prop_assert_eq!(copy.len(), reference.len());
            for name in reference.keys() {
                let a: Vec<_> = copy.get_all(name).iter().collect();
                let b: Vec<_> = reference.get_all(name).iter().collect();
                prop_assert_eq!(a, b);
            }
            // The verifiers' text reading agrees with `to_str`.
            let name = http::HeaderName::from_bytes(query.as_bytes()).unwrap();
            let text = HeaderLookup::get(&view, &name).and_then(webhooks_core::headers::header_str);
            let want = reference.get(&name).and_then(|v| v.to_str().ok());
            prop_assert_eq!(text, want);
            let text = view.get_str(&name).and_then(Result::ok);
            prop_assert_eq!(text, want);
            prop_assert_eq!(view.get_str(&name).is_some(), reference.get(&name).is_some());
            // Several names looked up by hash, twice, answer what one
            // lookup per name in the http 1.x map answers.
            let mut want = [None; 3];
            first_of_by_lookup(&GROUPS, &mut want, |name| reference.get(name).map(|v| v.as_bytes()));
            for _ in 0..2 {
                let mut got = [None; 3];
                view.get_first_of(&GROUPS, &mut got);
                prop_assert_eq!(got, want);
            }
            let mut fewer = [None; 2];
            view.get_first_of(&OTHER_GROUPS, &mut fewer);
            first_of_by_lookup(&OTHER_GROUPS, &mut want[..2], |name| reference.get(name).map(|v| v.as_bytes()));
            prop_assert_eq!(&fewer[..], &want[..2]);
        }
    }

    fn token_name() -> impl Strategy<Value = String> {
        // Lower-case token characters, as every http 1.x name holds.
        "[a-z0-9!#$%&'*+.^_`|~-]{1,40}"
    }

    proptest! {
        /// Every `'static` http 1.x name becomes the http 0.2 name parsing
        /// its text gives, without a panic: the standard names and any
        /// token.
        #[test]
        fn static_names_convert(text in token_name()) {
            let name: &'static http::HeaderName =
                Box::leak(Box::new(http::HeaderName::from_bytes(text.as_bytes()).unwrap()));
            let converted = HeaderName::from_static(name.as_str());
            prop_assert_eq!(&converted, &HeaderName::from_bytes(text.as_bytes()).unwrap());
            prop_assert_eq!(converted.as_str(), name.as_str());
        }
    }

    #[test]
    fn standard_names_convert() {
        let mut map = http::HeaderMap::new();
        // Every standard name http 1.x knows, through its own parser.
        for text in [
            "accept",
            "accept-charset",
            "accept-encoding",
            "accept-language",
            "accept-ranges",
            "access-control-allow-credentials",
            "access-control-allow-headers",
            "access-control-allow-methods",
            "access-control-allow-origin",
            "access-control-expose-headers",
            "access-control-max-age",
            "access-control-request-headers",
            "access-control-request-method",
            "age",
            "allow",
            "alt-svc",
            "authorization",
            "cache-control",
            "cache-status",
            "cdn-cache-control",
            "connection",
            "content-disposition",
            "content-encoding",
            "content-language",
            "content-length",
            "content-location",
            "content-range",
            "content-security-policy",
            "content-security-policy-report-only",
            "content-type",
            "cookie",
            "dnt",
            "date",
            "etag",
            "expect",
            "expires",
            "forwarded",
            "from",
            "host",
            "if-match",
            "if-modified-since",
            "if-none-match",
            "if-range",
            "if-unmodified-since",
            "last-modified",
            "link",
            "location",
            "max-forwards",
            "origin",
            "pragma",
            "proxy-authenticate",
            "proxy-authorization",
            "public-key-pins",
            "public-key-pins-report-only",
            "range",
            "referer",
            "referrer-policy",
            "refresh",
            "retry-after",
            "sec-websocket-accept",
            "sec-websocket-extensions",
            "sec-websocket-key",
            "sec-websocket-protocol",
            "sec-websocket-version",
            "server",
            "set-cookie",
            "strict-transport-security",
            "te",
            "trailer",
            "transfer-encoding",
            "user-agent",
            "upgrade",
            "upgrade-insecure-requests",
            "vary",
            "via",
            "warning",
            "www-authenticate",
            "x-content-type-options",
            "x-dns-prefetch-control",
            "x-frame-options",
            "x-xss-protection",
        ] {
            let name = http::HeaderName::from_static(text);
            map.insert(name.clone(), http::HeaderValue::from_static("v"));
            let name: &'static http::HeaderName = Box::leak(Box::new(name));
            assert_eq!(HeaderName::from_static(name.as_str()).as_str(), text);
        }
        assert!(map.len() > 80);
    }
}
