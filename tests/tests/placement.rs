//! Where the layer goes: the placement the README leads with
//! (`post(h).route_layer(..)` / `Router::route_layer` on axum,
//! `web::post().to(h).wrap(..)` on actix-web) leaves every other route, the
//! nested router or scope, `404` and `405` exactly as they are without it, on
//! both frameworks; only the webhook routes verify.

use axum::Router;
use axum::routing::{get, post};
use http::StatusCode;
use tower::ServiceExt as _;
use webhooks_core::scheme::{GitHub, StandardWebhooks};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const GITHUB_SECRET: &str = "placement-github-secret";

fn standard() -> StandardWebhooks {
    StandardWebhooks::new(SECRET).unwrap()
}

fn github() -> GitHub {
    GitHub::new(GITHUB_SECRET).unwrap()
}

/// Every request that is not a webhook delivery, with the status it gets
/// from the app whether or not the webhook routes are layered: (method, path,
/// axum, actix-web). The frameworks differ only where they do without the
/// layer too (axum answers `HEAD` with its `GET` route and 405 for another
/// method; actix-web's `App::route` answers both 404).
const PROBES: &[(&str, &str, u16, u16)] = &[
    ("GET", "/health", 200, 200),
    ("HEAD", "/health", 200, 404),
    ("POST", "/health", 405, 404),
    ("GET", "/nowhere", 404, 404),
    ("POST", "/nowhere", 404, 404),
    // The webhook route answers other methods with 405, not 400.
    ("GET", "/webhooks/email", 405, 405),
    ("PUT", "/webhooks/email", 405, 405),
    ("DELETE", "/webhooks/email", 405, 405),
    // A nested router / scope with ordinary routes.
    ("GET", "/api/items", 200, 200),
    ("POST", "/api/items", 201, 201),
    ("DELETE", "/api/items", 405, 405),
    ("GET", "/api/nowhere", 404, 404),
    // A webhook route inside a nested router / scope.
    ("GET", "/hooks/github", 405, 405),
    ("GET", "/hooks/nowhere", 404, 404),
];

/// A probe's status and `Allow` header (which 405 must keep listing).
type Answer = (u16, Option<String>);

mod axum_app {
    use super::*;
    use axum::body::Body;
    use http::Request;
    use tower_webhooks::{RawWebhook, WebhookLayer};

    async fn on_webhook(RawWebhook { .. }: RawWebhook) -> StatusCode {
        StatusCode::NO_CONTENT
    }

    /// The app; with `layered`, the webhook routes have the README's placement.
    pub(super) fn app(layered: bool) -> Router {
        let email = if layered {
            post(on_webhook).route_layer(WebhookLayer::new(standard()))
        } else {
            post(on_webhook)
        };
        let github_route = if layered {
            post(on_webhook).route_layer(WebhookLayer::new(github()))
        } else {
            post(on_webhook)
        };
        let hooks = Router::new().route("/github", github_route);
        let api = Router::new().route(
            "/items",
            get(|| async { "items" }).post(|| async { StatusCode::CREATED }),
        );
        Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/webhooks/email", email)
            .nest("/api", api)
            .nest("/hooks", hooks)
            .fallback(|| async { (StatusCode::NOT_FOUND, "nothing here") })
    }

    pub(super) async fn call(app: &Router, request: Request<Body>) -> Answer {
        let response = app.clone().oneshot(request).await.unwrap();
        let allow = response
            .headers()
            .get(http::header::ALLOW)
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status().as_u16(), allow)
    }

    pub(super) fn probe(method: &str, path: &str) -> Request<Body> {
        Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap()
    }
}

mod actix_app {
    use super::*;
    use actix_web::dev::{Service, ServiceResponse};
    use actix_web::{App, HttpResponse, test, web};
    use actix_webhooks::{RawWebhook, Webhooks};

    async fn on_webhook(_: RawWebhook) -> HttpResponse {
        HttpResponse::NoContent().finish()
    }

    /// The app; with `layered`, the webhook routes have the README's placement.
    pub(super) async fn app(
        layered: bool,
    ) -> impl Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>
    {
        let email = if layered {
            web::post().to(on_webhook).wrap(Webhooks::new(standard()))
        } else {
            web::post().to(on_webhook)
        };
        let github_route = if layered {
            web::post().to(on_webhook).wrap(Webhooks::new(github()))
        } else {
            web::post().to(on_webhook)
        };
        test::init_service(
            App::new()
                .route("/health", web::get().to(|| async { "ok" }))
                .service(web::resource("/webhooks/email").route(email))
                .service(
                    web::scope("/api").service(
                        web::resource("/items")
                            .route(web::get().to(|| async { "items" }))
                            .route(web::post().to(|| async { HttpResponse::Created().finish() })),
                    ),
                )
                .service(web::scope("/hooks").service(web::resource("/github").route(github_route)))
                .default_service(web::to(|| async {
                    HttpResponse::NotFound().body("nothing here")
                })),
        )
        .await
    }

    pub(super) async fn call(
        app: &impl Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
        request: actix_http::Request,
    ) -> Answer {
        let response = test::call_service(app, request).await;
        let allow = response
            .headers()
            .get(actix_web::http::header::ALLOW)
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status().as_u16(), allow)
    }

    pub(super) fn probe(method: &str, path: &str) -> actix_http::Request {
        let method = actix_web::http::Method::from_bytes(method.as_bytes()).unwrap();
        test::TestRequest::default()
            .method(method)
            .uri(path)
            .to_request()
    }
}

#[tokio::test]
async fn axum_route_layer_leaves_other_routes_404_and_405_untouched() {
    let (layered, bare) = (axum_app::app(true), axum_app::app(false));
    for &(method, path, status, _) in PROBES {
        let with = axum_app::call(&layered, axum_app::probe(method, path)).await;
        let without = axum_app::call(&bare, axum_app::probe(method, path)).await;
        assert_eq!(with, without, "{method} {path}");
        assert_eq!(with.0, status, "{method} {path}");
        if status == 405 {
            assert!(with.1.is_some(), "{method} {path}: 405 without Allow");
        }
    }
    // The webhook routes verify: unsigned is refused, signed is delivered.
    for (path, signed) in [
        (
            "/webhooks/email",
            tower_webhooks::testing::signed_request(&standard(), "/webhooks/email", "{}").unwrap(),
        ),
        (
            "/hooks/github",
            tower_webhooks::testing::signed_request(&github(), "/hooks/github", "{}").unwrap(),
        ),
    ] {
        let unsigned = axum_app::call(&layered, axum_app::probe("POST", path)).await;
        assert_eq!(unsigned.0, 400, "{path}");
        assert_eq!(axum_app::call(&layered, signed).await.0, 204, "{path}");
    }
}

#[actix_web::test]
async fn actix_route_wrap_leaves_other_routes_404_and_405_untouched() {
    let layered = actix_app::app(true).await;
    let bare = actix_app::app(false).await;
    for &(method, path, _, status) in PROBES {
        let with = actix_app::call(&layered, actix_app::probe(method, path)).await;
        let without = actix_app::call(&bare, actix_app::probe(method, path)).await;
        assert_eq!(with, without, "{method} {path}");
        assert_eq!(with.0, status, "{method} {path}");
    }
    for (path, signed) in [
        (
            "/webhooks/email",
            actix_webhooks::testing::signed_request(&standard(), "/webhooks/email", "{}").unwrap(),
        ),
        (
            "/hooks/github",
            actix_webhooks::testing::signed_request(&github(), "/hooks/github", "{}").unwrap(),
        ),
    ] {
        let unsigned = actix_app::call(&layered, actix_app::probe("POST", path)).await;
        assert_eq!(unsigned.0, 400, "{path}");
        assert_eq!(
            actix_app::call(&layered, signed.to_request()).await.0,
            204,
            "{path}"
        );
    }
}

/// Why the README leads with `post(h).route_layer(..)`: `Router::layer` puts
/// the layer in front of every route and the fallback (`/health` and unknown
/// paths answer the webhook's `400`), and `Router::route_layer` leaves `404`
/// alone but still wraps each route's method fallback, so a `GET` to the
/// webhook route answers `400` instead of `405` (axum 0.8 applies
/// `MethodRouter::layer`, not `route_layer`, to each route). If a framework
/// change ever makes them transparent, this fails and the README can say so.
#[tokio::test]
async fn axum_router_layer_and_router_route_layer_would_intercept() {
    let routes = || {
        Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/webhooks/email", post(|| async { StatusCode::NO_CONTENT }))
    };
    let layer = || tower_webhooks::WebhookLayer::new(standard());
    let app = routes().layer(layer());
    for (method, path) in [
        ("GET", "/health"),
        ("GET", "/webhooks/email"),
        ("GET", "/nowhere"),
    ] {
        let (status, _) = axum_app::call(&app, axum_app::probe(method, path)).await;
        assert_eq!(status, 400, "layer: {method} {path}");
    }
    let app = Router::new()
        .route("/webhooks/email", post(|| async { StatusCode::NO_CONTENT }))
        .route_layer(layer())
        .route("/health", get(|| async { "ok" }));
    let answers = [
        ("GET", "/health", 200),
        ("GET", "/nowhere", 404),
        ("GET", "/webhooks/email", 400),
    ];
    for (method, path, expected) in answers {
        let (status, _) = axum_app::call(&app, axum_app::probe(method, path)).await;
        assert_eq!(status, expected, "route_layer: {method} {path}");
    }
}

#[actix_web::test]
async fn actix_resource_wrap_would_answer_other_methods_400() {
    use actix_web::{App, HttpResponse, test, web};
    let app = test::init_service(
        App::new().service(
            web::resource("/webhooks/email")
                .wrap(actix_webhooks::Webhooks::new(standard()))
                .route(web::post().to(HttpResponse::NoContent)),
        ),
    )
    .await;
    let (status, _) = actix_app::call(&app, actix_app::probe("GET", "/webhooks/email")).await;
    assert_eq!(status, 400);
}
