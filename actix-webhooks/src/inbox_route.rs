//! An inbox-mode route: the pipeline alone, no handler.

use actix_web::dev::HttpServiceFactory;
use actix_web::{HttpResponse, web};
use webhooks_core::Receiver;

use crate::Webhooks;

/// A resource at `path` whose receiver stores deliveries in an inbox
/// ([`ReceiverBuilder::inbox`](webhooks_core::ReceiverBuilder::inbox)):
/// verified deliveries are stored and answered (`202`), workers run the
/// handler, so the route needs none. Any method reaches the pipeline.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// # #[cfg(feature = "sqlite")] {
/// use std::sync::Arc;
/// use actix_web::App;
/// use webhooks_core::{Receiver, inbox::SqliteInbox, scheme::StandardWebhooks};
///
/// let inbox = SqliteInbox::connect("sqlite::memory:").await?;
/// inbox.migrate().await?;
/// let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
/// let receiver = Receiver::builder(verifier).inbox(Arc::new(inbox)).build();
/// let app = App::new().service(actix_webhooks::inbox_route("/webhooks", receiver));
/// # let _ = app; }
/// # Ok(()) }
/// ```
///
/// # Panics
///
/// When `receiver` has no inbox: its deliveries would need a handler.
pub fn inbox_route(path: &str, receiver: Receiver) -> impl HttpServiceFactory + 'static {
    assert!(
        receiver.has_inbox(),
        "inbox_route needs a receiver with an inbox (ReceiverBuilder::inbox)"
    );
    // Never reached: an inbox-mode pipeline answers every request itself.
    web::resource(path)
        .wrap(Webhooks::from_receiver(receiver))
        .default_service(web::to(HttpResponse::InternalServerError))
}
