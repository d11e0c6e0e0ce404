//! The middleware and its service.

use std::fmt;
use std::future::{Ready, ready};
use std::rc::Rc;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{
    Extensions, Payload, Service, ServiceRequest, ServiceResponse, Transform, forward_ready,
};
use actix_web::{Error, HttpMessage as _, web};
use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::future::LocalBoxFuture;
use webhooks_core::{
    BodyCollector, Delivery, Incoming, Receiver, Rejection, RequestHead, RequestVerifier,
};

use crate::error::{WebhookRejection, rejection_response};

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
/// use webhooks_core::{Receiver, scheme::StandardWebhooks};
///
/// # fn main() -> Result<(), webhooks_core::ConfigError> {
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
    #[must_use]
    pub fn new(verifier: impl RequestVerifier + 'static) -> Self {
        Self::from_receiver(Receiver::new(verifier))
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
            let head = IncomingHead {
                path: req
                    .uri()
                    .path_and_query()
                    .map_or_else(|| req.path().to_owned(), ToString::to_string),
                headers: to_http_headers(req.headers()),
            };
            let payload = req.extract::<web::Payload>().await;
            let read = read_limited(payload, receiver.body_limit());
            // The request stays here until the handler runs, so that a
            // rejection before it can still be answered with a response.
            let mut waiting = Some(req);
            let handler = |_: IncomingHead, delivery: Delivery| {
                let mut req = waiting.take().expect("core runs the handler at most once");
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
            match receiver.receive(head, read, handler, status).await {
                Ok(result) => result.map(ServiceResponse::map_into_left_body),
                Err(r) => match waiting {
                    Some(req) => Ok(reject(&receiver, req, r)),
                    None => {
                        let response = receiver.rejection_response(&r);
                        Err(WebhookRejection::rendered(r, response).into())
                    }
                },
            }
        })
    }
}

/// What the pipeline sees of an actix request before the handler.
struct IncomingHead {
    path: String,
    headers: http::HeaderMap,
}

impl Incoming for IncomingHead {
    fn head(&self) -> RequestHead<'_> {
        RequestHead::from_path_and_query(&self.path, &self.headers)
    }
}

/// actix's headers (http 0.2) as an http 1.x map. The values are copied
/// once into one buffer and each is a slice of it: one allocation for all
/// of them instead of one per value.
fn to_http_headers(headers: &actix_web::http::header::HeaderMap) -> http::HeaderMap {
    let total = headers.iter().map(|(_, value)| value.len()).sum();
    let mut values = bytes::BytesMut::with_capacity(total);
    for (_, value) in headers {
        values.extend_from_slice(value.as_bytes());
    }
    let values = values.freeze();
    let mut out = http::HeaderMap::with_capacity(headers.len());
    let mut at = 0;
    for (name, value) in headers {
        let range = at..at + value.len();
        at = range.end;
        // Valid in http 0.2 is valid in http 1.x: the same grammar.
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_str().as_bytes()),
            http::HeaderValue::from_maybe_shared(values.slice(range)),
        ) {
            out.append(name, value);
        }
    }
    out
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
    let response = receiver.rejection_response(&rejection);
    req.into_response(rejection_response(&rejection, &response))
        .map_into_right_body()
}

#[cfg(test)]
mod header_tests {
    use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};

    #[test]
    fn every_header_value_survives_the_conversion_in_order() {
        let mut headers = HeaderMap::new();
        let pairs = [
            ("webhook-id", "msg_1"),
            ("webhook-signature", "v1,AAAA v1,BBBB"),
            ("x-multi", "first"),
            ("x-multi", "second"),
            ("x-empty", ""),
            ("content-type", "application/json"),
        ];
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let converted = super::to_http_headers(&headers);
        assert_eq!(converted.len(), pairs.len());
        for (name, _) in pairs {
            let want: Vec<&[u8]> = headers.get_all(name).map(|v| v.as_bytes()).collect();
            let got: Vec<&[u8]> = converted
                .get_all(name)
                .iter()
                .map(|v| v.as_bytes())
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }
}
