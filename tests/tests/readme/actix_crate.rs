use actix_web::{App, HttpResponse, HttpServer, web};
use actix_webhooks::{VerifiedWebhook, Webhooks, core::scheme::StandardWebhooks};

#[derive(serde::Deserialize)]
struct EmailEvent {
    #[serde(rename = "type")]
    kind: String,
}

async fn on_email(VerifiedWebhook(event): VerifiedWebhook<EmailEvent>) -> HttpResponse {
    println!("{}", event.kind);
    HttpResponse::NoContent().finish()
}

/// The webhook route; build `webhooks` once, outside `HttpServer::new`, so
/// that every worker shares its dedup store.
fn routes(webhooks: Webhooks) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        cfg.service(
            web::resource("/webhooks/email").route(web::post().to(on_email).wrap(webhooks)),
        );
    }
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let webhooks = Webhooks::new(StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?);
    HttpServer::new(move || App::new().configure(routes(webhooks.clone())))
        .bind(("127.0.0.1", 8080))?
        .run()
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use actix_web::{App, test};
    use actix_webhooks::testing::signed_request;
    use actix_webhooks::{Webhooks, core::scheme::StandardWebhooks};

    use super::routes;

    #[actix_web::test]
    async fn email_is_acknowledged() -> Result<(), Box<dyn std::error::Error>> {
        let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
        let app = test::init_service(App::new().configure(routes(Webhooks::new(verifier.clone())))).await;
        let request = signed_request(&verifier, "/webhooks/email", r#"{"type":"email.sent"}"#)?;
        let response = test::call_service(&app, request.to_request()).await;
        assert_eq!(response.status(), 204);
        Ok(())
    }
}
