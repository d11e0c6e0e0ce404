//! The middleware and extractors against an actix test service.

use std::io::{Read as _, Write as _};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix_web::dev::Payload;
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::test::{self, TestRequest};
use actix_web::{App, HttpResponse, HttpServer, web};
use bytes::Bytes;
use futures_util::stream::{self, Stream};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection};

use crate::{RawWebhook, VerifiedWebhook, WebhookMeta, WebhookRejection, Webhooks};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const BODY: &str = r#"{"type":"email.sent","data":{"count":3}}"#;

#[derive(Debug, serde::Deserialize)]
struct Event {
    r#type: String,
    data: Data,
}

#[derive(Debug, serde::Deserialize)]
struct Data {
    count: u32,
}

fn verifier() -> StandardWebhooks {
    StandardWebhooks::new(SECRET).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A POST to `/hook` signed as a sender would sign it.
fn signed(id: &str, body: &'static str) -> TestRequest {
    let headers = verifier().sign_headers(id, now(), body.as_bytes()).unwrap();
    let mut request = TestRequest::post()
        .uri("/hook")
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .set_payload(body);
    for (name, value) in &headers {
        request = request.insert_header((name.as_str(), value.to_str().unwrap()));
    }
    request
}

/// The value of a response header (panics when it is missing).
fn header_of<B>(
    response: &actix_web::dev::ServiceResponse<B>,
    name: impl actix_web::http::header::AsHeaderName,
) -> &[u8] {
    response.headers().get(name).unwrap().as_bytes()
}

/// A streamed payload of `chunks`.
fn boxed(chunks: impl Stream<Item = Result<Bytes, PayloadError>> + 'static) -> Payload {
    let stream: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(chunks);
    Payload::from(stream)
}

/// An app with `handler` on `POST /hook`, wrapped by `webhooks`.
macro_rules! app {
    ($webhooks:expr, $handler:expr) => {
        test::init_service(
            App::new().service(
                web::resource("/hook")
                    .wrap($webhooks)
                    .route(web::post().to($handler)),
            ),
        )
        .await
    };
}

async fn typed(VerifiedWebhook(event): VerifiedWebhook<Event>) -> HttpResponse {
    HttpResponse::Ok().body(format!("{} {}", event.r#type, event.data.count))
}

async fn no_content() -> HttpResponse {
    HttpResponse::NoContent().finish()
}

#[actix_web::test]
async fn valid_request_reaches_the_handler_with_every_extractor() {
    async fn handler(
        VerifiedWebhook(event): VerifiedWebhook<Event>,
        WebhookMeta(meta): WebhookMeta,
        raw: RawWebhook,
        bytes: web::Bytes,
    ) -> HttpResponse {
        assert_eq!(bytes, BODY.as_bytes());
        assert_eq!(raw.body, BODY.as_bytes());
        assert_eq!(raw.meta, meta);
        HttpResponse::Ok().body(format!(
            "{} {} {} {}",
            event.r#type,
            event.data.count,
            meta.scheme,
            meta.id.unwrap_or_default()
        ))
    }
    let app = app!(Webhooks::new(verifier()), handler);
    let response = test::call_service(&app, signed("msg_ok", BODY).to_request()).await;
    assert_eq!(response.status(), 200);
    let body = test::read_body(response).await;
    assert_eq!(body, "email.sent 3 standard-webhooks msg_ok");
}

#[actix_web::test]
async fn actix_json_still_reads_the_body() {
    async fn handler(web::Json(json): web::Json<serde_json::Value>) -> HttpResponse {
        HttpResponse::Ok().body(json["data"]["count"].to_string())
    }
    let app = app!(Webhooks::new(verifier()), handler);
    let response = test::call_service(&app, signed("msg_json", BODY).to_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(test::read_body(response).await, "3");
}

#[actix_web::test]
async fn bad_signature_is_401() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let app = app!(Webhooks::new(verifier()), move || {
        counter.fetch_add(1, Ordering::SeqCst);
        no_content()
    });
    // Signed for another body.
    let headers = verifier().sign_headers("msg_bad", now(), b"{}").unwrap();
    let mut request = TestRequest::post().uri("/hook").set_payload(BODY);
    for (name, value) in &headers {
        request = request.insert_header((name.as_str(), value.to_str().unwrap()));
    }
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 401);
    assert!(matches!(
        response.response().extensions().get::<Rejection>(),
        Some(Rejection::Verify(_))
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[actix_web::test]
async fn missing_signature_is_400() {
    let app = app!(Webhooks::new(verifier()), no_content);
    let request = TestRequest::post().uri("/hook").set_payload(BODY);
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 400);
}

#[actix_web::test]
async fn duplicate_is_acknowledged_exactly_as_core_renders_it() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let app = app!(Webhooks::new(verifier()), move || {
        counter.fetch_add(1, Ordering::SeqCst);
        no_content()
    });
    let first = test::call_service(&app, signed("msg_dup", BODY).to_request()).await;
    assert_eq!(first.status(), 204);
    let again = test::call_service(&app, signed("msg_dup", BODY).to_request()).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let expected = Rejection::Duplicate.to_response();
    assert_eq!(again.status(), 200);
    assert_eq!(header_of(&again, "webhook-duplicate"), b"true");
    assert_eq!(again.headers().len(), expected.headers().len());
    for (name, value) in expected.headers() {
        assert_eq!(header_of(&again, name.as_str()), value.as_bytes());
    }
    assert_eq!(
        again.response().extensions().get::<Rejection>(),
        Some(&Rejection::Duplicate)
    );
    assert_eq!(test::read_body(again).await, expected.body());
}

#[actix_web::test]
async fn concurrent_retry_is_409_with_retry_after() {
    let app = app!(Webhooks::new(verifier()), || async {
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
        HttpResponse::NoContent().finish()
    });
    let (a, b) = futures_util::future::join(
        test::call_service(&app, signed("msg_busy", BODY).to_request()),
        test::call_service(&app, signed("msg_busy", BODY).to_request()),
    )
    .await;
    let mut statuses = [a.status().as_u16(), b.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [204, 409]);
    let busy = if a.status() == 409 { a } else { b };
    let after: u64 = String::from_utf8_lossy(header_of(&busy, header::RETRY_AFTER))
        .parse()
        .unwrap();
    assert!((1..=60).contains(&after), "{after}");
}

#[actix_web::test]
async fn content_length_above_the_limit_is_413_before_reading() {
    let receiver = Receiver::builder(verifier()).body_limit(16).build();
    let app = app!(Webhooks::from_receiver(receiver), no_content);
    // The body is small; the declared length alone is refused.
    let request = signed("msg_big", "{}").insert_header((header::CONTENT_LENGTH, "1000000"));
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 413);
}

#[actix_web::test]
async fn streamed_body_above_the_limit_is_413_and_reading_stops() {
    let receiver = Receiver::builder(verifier()).body_limit(1024).build();
    let app = app!(Webhooks::from_receiver(receiver), no_content);
    let mut request = signed("msg_stream", BODY).to_request();
    request.headers_mut().remove(header::CONTENT_LENGTH);
    // An endless body: the test only ends if reading stops at the limit.
    let endless = stream::repeat_with(|| Ok::<_, PayloadError>(Bytes::from_static(&[b' '; 100])));
    let (request, _) = request.replace_payload(boxed(endless));
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 413);
    assert_eq!(
        response.response().extensions().get::<Rejection>(),
        Some(&Rejection::PayloadTooLarge { limit: 1024 })
    );
}

#[actix_web::test]
async fn body_read_error_is_400() {
    let app = app!(Webhooks::new(verifier()), no_content);
    let mut request = signed("msg_broken", BODY).to_request();
    request.headers_mut().remove(header::CONTENT_LENGTH);
    let broken = stream::iter([
        Ok(Bytes::from_static(b"{")),
        Err(PayloadError::Incomplete(None)),
    ]);
    let (request, _) = request.replace_payload(boxed(broken));
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.response().extensions().get::<Rejection>(),
        Some(&Rejection::BodyRead)
    );
}

#[actix_web::test]
async fn extractor_without_the_middleware_is_500() {
    let app = test::init_service(App::new().route("/hook", web::post().to(typed))).await;
    let response = test::call_service(&app, signed("msg_bare", BODY).to_request()).await;
    assert_eq!(response.status(), 500);
    let body = test::read_body(response).await;
    assert!(
        String::from_utf8_lossy(&body).contains("middleware installed"),
        "{body:?}"
    );
}

#[actix_web::test]
async fn json_misfit_is_422_with_the_path_and_the_retry_runs_again() {
    const MISFIT: &str = r#"{"type":"email.sent","data":{"count":"many"}}"#;
    let app = app!(Webhooks::new(verifier()), typed);
    for _ in 0..2 {
        let response = test::call_service(&app, signed("msg_misfit", MISFIT).to_request()).await;
        // The claim was released: the retry is not acknowledged as a duplicate.
        assert_eq!(response.status(), 422);
        let body = test::read_body(response).await;
        let body = String::from_utf8_lossy(&body);
        assert!(body.contains("`data.count`"), "{body}");
        assert!(!body.contains("many"), "{body}");
    }
}

#[actix_web::test]
async fn handler_error_status_decides_complete_or_release() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let app = app!(Webhooks::new(verifier()), move || {
        let call = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            if call == 0 {
                Err(actix_web::error::ErrorServiceUnavailable("not yet"))
            } else {
                Ok(HttpResponse::NoContent().finish())
            }
        }
    });
    let first = test::call_service(&app, signed("msg_err", BODY).to_request()).await;
    assert_eq!(first.status(), 503);
    let retry = test::call_service(&app, signed("msg_err", BODY).to_request()).await;
    assert_eq!(retry.status(), 204);
    let again = test::call_service(&app, signed("msg_err", BODY).to_request()).await;
    assert_eq!(header_of(&again, "webhook-duplicate"), b"true");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[actix_web::test]
async fn panicking_handler_is_500_and_the_retry_is_processed() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let app = app!(Webhooks::new(verifier()), move || {
        let call = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            assert!(call > 0, "first attempt panics");
            HttpResponse::NoContent().finish()
        }
    });
    let panicked = test::try_call_service(&app, signed("msg_panic", BODY).to_request()).await;
    let error = panicked.expect_err("the request went down with the handler");
    assert_eq!(error.as_response_error().status_code(), 500);
    let rejection = error.as_error::<WebhookRejection>().unwrap();
    assert_eq!(rejection.rejection(), &Rejection::HandlerPanicked);
    let response = error.error_response();
    let expected = Rejection::HandlerPanicked.to_response();
    assert_eq!(
        response
            .headers()
            .get(header::CONTENT_TYPE)
            .unwrap()
            .as_bytes(),
        expected.headers()[http::header::CONTENT_TYPE].as_bytes()
    );
    let body = actix_web::body::to_bytes(response.into_body())
        .await
        .unwrap();
    assert_eq!(body, expected.body());

    let retry = test::call_service(&app, signed("msg_panic", BODY).to_request()).await;
    assert_eq!(retry.status(), 204);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[actix_web::test]
async fn on_reject_shapes_the_response() {
    let receiver = Receiver::builder(verifier())
        .on_reject(|rejection| {
            http::Response::builder()
                .status(rejection.status())
                .header("x-reason", rejection.kind())
                .header("x-reason", "twice")
                .body(Bytes::from_static(b"custom"))
                .unwrap()
        })
        .build();
    let app = app!(Webhooks::from_receiver(receiver), no_content);
    let request = TestRequest::post().uri("/hook").set_payload(BODY);
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 400);
    let reasons: Vec<_> = response.headers().get_all("x-reason").collect();
    assert_eq!(reasons, ["missing_header", "twice"]);
    assert_eq!(test::read_body(response).await, "custom");
}

/// Over a real socket, the panic's error becomes core's 500 response.
#[actix_web::test]
async fn panic_answers_500_over_the_wire() {
    let calls = Arc::new(AtomicUsize::new(0));
    let server = HttpServer::new(move || {
        let counter = Arc::clone(&calls);
        App::new().service(
            web::resource("/hook")
                .wrap(Webhooks::new(verifier()))
                .route(web::post().to(move || {
                    let call = counter.fetch_add(1, Ordering::SeqCst);
                    async move {
                        assert!(call > 0, "first attempt panics");
                        HttpResponse::NoContent().finish()
                    }
                })),
        )
    })
    .workers(1)
    .disable_signals()
    .bind(("127.0.0.1", 0))
    .unwrap();
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);

    let headers = verifier()
        .sign_headers("msg_wire", now(), BODY.as_bytes())
        .unwrap();
    let mut raw = format!(
        "POST /hook HTTP/1.1\r\nhost: test\r\nconnection: close\r\ncontent-length: {}\r\n",
        BODY.len()
    );
    for (name, value) in &headers {
        raw.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
    }
    raw.push_str("\r\n");
    raw.push_str(BODY);
    let send = move || {
        let raw = raw.clone();
        actix_web::rt::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.write_all(raw.as_bytes()).unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            response
        })
    };
    let first = send().await.unwrap();
    assert!(first.starts_with("HTTP/1.1 500"), "{first}");
    assert!(first.ends_with("\r\n\r\ninternal error"), "{first}");
    let retry = send().await.unwrap();
    assert!(retry.starts_with("HTTP/1.1 204"), "{retry}");
    handle.stop(true).await;
}

#[actix_web::test]
async fn body_of_exactly_the_limit_is_read() {
    let receiver = Receiver::builder(verifier()).body_limit(BODY.len()).build();
    let app = app!(Webhooks::from_receiver(receiver), typed);
    let mut request = signed("msg_exact", BODY).to_request();
    request.headers_mut().remove(header::CONTENT_LENGTH);
    let (head, tail) = BODY.split_at(10);
    let chunks = stream::iter([
        Ok(Bytes::from_static(head.as_bytes())),
        Ok(Bytes::from_static(tail.as_bytes())),
    ]);
    let (request, _) = request.replace_payload(boxed(chunks));
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), 200);
}

/// Wrapping the whole app: routing and path extraction run after the
/// middleware, on a request it holds no other reference to.
#[actix_web::test]
async fn wraps_an_app_with_routing_behind_it() {
    async fn handler(
        kind: web::Path<String>,
        VerifiedWebhook(event): VerifiedWebhook<Event>,
    ) -> HttpResponse {
        HttpResponse::Ok().body(format!("{kind} {}", event.r#type))
    }
    let app = test::init_service(
        App::new()
            .wrap(Webhooks::new(verifier()))
            .service(web::scope("/hooks").route("/{kind}", web::post().to(handler))),
    )
    .await;
    let request = signed("msg_scope", BODY).uri("/hooks/email");
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(test::read_body(response).await, "email email.sent");
}

/// actix-web builds the app once per worker thread, so `Webhooks::new(v)` in
/// the factory builds one receiver per worker: they share the process's
/// default store (per namespace), and concurrent retries of one delivery
/// spread over 4 workers run the handler once.
#[actix_web::test]
async fn workers_share_the_default_store() {
    use std::collections::HashSet;
    use std::sync::Mutex;

    const RETRIES: usize = 16;
    let calls = Arc::new(AtomicUsize::new(0));
    let workers = Arc::new(Mutex::new(HashSet::new()));
    let (counter, seen) = (Arc::clone(&calls), Arc::clone(&workers));
    let server = HttpServer::new(move || {
        let counter = Arc::clone(&counter);
        let seen = Arc::clone(&seen);
        // The last `wrap` is the outermost: it sees every request.
        App::new()
            .wrap(Webhooks::new(verifier()))
            .wrap_fn(move |req, srv| {
                seen.lock().unwrap().insert(std::thread::current().id());
                actix_web::dev::Service::call(srv, req)
            })
            .route(
                "/hook",
                web::post().to(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async {
                        // Long enough for every retry to arrive meanwhile.
                        actix_web::rt::time::sleep(Duration::from_millis(300)).await;
                        HttpResponse::NoContent().finish()
                    }
                }),
            )
    })
    .workers(4)
    .disable_signals()
    .bind(("127.0.0.1", 0))
    .unwrap();
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);

    let headers = verifier()
        .sign_headers("msg_workers", now(), BODY.as_bytes())
        .unwrap();
    let mut raw = format!(
        "POST /hook HTTP/1.1\r\nhost: test\r\nconnection: close\r\ncontent-length: {}\r\n",
        BODY.len()
    );
    for (name, value) in &headers {
        raw.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
    }
    raw.push_str("\r\n");
    raw.push_str(BODY);
    // One connection each, all at once: actix hands connections to its
    // workers in turn.
    let barrier = Arc::new(std::sync::Barrier::new(RETRIES));
    let sends: Vec<_> = (0..RETRIES)
        .map(|_| {
            let (raw, barrier) = (raw.clone(), Arc::clone(&barrier));
            actix_web::rt::task::spawn_blocking(move || {
                barrier.wait();
                let mut stream = std::net::TcpStream::connect(addr).unwrap();
                stream.write_all(raw.as_bytes()).unwrap();
                let mut response = String::new();
                stream.read_to_string(&mut response).unwrap();
                response
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for send in sends {
        let response = send.await.unwrap();
        statuses.push(response.get(9..12).unwrap_or_default().to_owned());
    }
    handle.stop(true).await;

    assert!(
        workers.lock().unwrap().len() > 1,
        "the retries reached one worker only: the test proves nothing"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "statuses: {statuses:?}");
    assert_eq!(
        statuses.iter().filter(|s| *s == "204").count(),
        1,
        "{statuses:?}"
    );
    // The others were told to retry later (in flight) or that it is done.
    assert!(
        statuses
            .iter()
            .all(|s| ["204", "409", "200"].contains(&s.as_str())),
        "{statuses:?}"
    );
}

/// The middleware reads the request's URI and headers in place, moving them
/// out of the request while the pipeline runs: the handler, and what wraps
/// the middleware, see them back, whether the handler ran or the request was
/// rejected.
#[actix_web::test]
async fn the_request_keeps_its_headers_on_every_path() {
    use actix_web::dev::Service as _;

    async fn handler(req: actix_web::HttpRequest) -> HttpResponse {
        let values: Vec<_> = req
            .headers()
            .get_all("x-multi")
            .map(|v| v.as_bytes().to_vec())
            .collect();
        assert_eq!(values, [b"one".to_vec(), b"two".to_vec()]);
        assert!(req.headers().contains_key("webhook-signature"));
        assert_eq!(req.uri(), "/hook?source=test");
        assert_eq!(req.query_string(), "source=test");
        HttpResponse::NoContent().finish()
    }
    let app = test::init_service(
        App::new().service(
            web::resource("/hook")
                .wrap(Webhooks::new(verifier()))
                // Outside the middleware: reads the request its response carries.
                .wrap_fn(|req, srv| {
                    let fut = srv.call(req);
                    async move {
                        let response = fut.await?;
                        let seen = response.request().headers().get_all("x-multi").count();
                        assert_eq!(response.request().uri(), "/hook?source=test");
                        let mut response = response;
                        response.headers_mut().insert(
                            header::HeaderName::from_static("x-seen"),
                            header::HeaderValue::from(seen),
                        );
                        Ok(response)
                    }
                })
                .route(web::post().to(handler)),
        ),
    )
    .await;
    let with_multi = |request: TestRequest| {
        request
            .uri("/hook?source=test")
            .append_header(("X-Multi", "one"))
            .append_header(("x-multi", "two"))
    };
    // Handled, then a duplicate (rejected before the handler), then a bad signature.
    let response = test::call_service(&app, with_multi(signed("msg_hdr", BODY)).to_request()).await;
    assert_eq!(response.status(), 204);
    assert_eq!(header_of(&response, "x-seen"), b"2");
    let response = test::call_service(&app, with_multi(signed("msg_hdr", BODY)).to_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header_of(&response, "webhook-duplicate"), b"true");
    assert_eq!(header_of(&response, "x-seen"), b"2");
    let response = test::call_service(
        &app,
        with_multi(signed("msg_hdr2", BODY))
            .insert_header(("webhook-signature", "v1,AAAA"))
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), 401);
    assert_eq!(header_of(&response, "x-seen"), b"2");
}
