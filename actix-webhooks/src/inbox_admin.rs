//! The dead-letter admin API as an actix scope (feature `inbox-admin`).

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, Scope, web};
use webhooks_core::inbox::{Inbox, admin};

/// The inbox's dead-letter admin API (list, inspect, replay, discard, stats,
/// purge — see [`webhooks_core::inbox::admin`]) as a scope at `path`,
/// answering JSON. Mount it **behind your own authentication**:
///
/// ```no_run
/// # fn run(inbox: std::sync::Arc<dyn webhooks_core::inbox::Inbox>) {
/// use actix_web::App;
///
/// let app = App::new().service(actix_webhooks::inbox_admin("/admin/inbox", inbox));
///     // .wrap(your_auth_middleware) on the scope
/// # let _ = app; }
/// ```
pub fn inbox_admin(path: &str, inbox: Arc<dyn Inbox>) -> Scope {
    let mount = path.trim_end_matches('/').to_owned();
    web::scope(path).default_service(web::to(move |req: HttpRequest| {
        let inbox = Arc::clone(&inbox);
        let mount = mount.clone();
        async move {
            let relative = req.path().strip_prefix(&mount).unwrap_or(req.path());
            let method = http::Method::from_bytes(req.method().as_str().as_bytes())
                .unwrap_or(http::Method::GET);
            let query = (!req.query_string().is_empty()).then(|| req.query_string());
            let answer = admin::handle(&*inbox, &method, relative, query).await;
            let status = StatusCode::from_u16(answer.status.as_u16())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = HttpResponse::build(status);
            if answer.body.is_null() {
                response.finish()
            } else {
                response
                    .content_type("application/json")
                    .body(answer.body_bytes())
            }
        }
    }))
}
