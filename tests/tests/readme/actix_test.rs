#[cfg(test)]
mod tests {
    use actix_web::{App, HttpResponse, test, web};
    use actix_webhooks::testing::signed_request;
    use actix_webhooks::{VerifiedWebhook, Webhooks, core::scheme::StandardWebhooks};

    #[derive(serde::Deserialize)]
    struct EmailEvent {
        #[serde(rename = "type")]
        kind: String,
    }

    async fn on_email(VerifiedWebhook(event): VerifiedWebhook<EmailEvent>) -> HttpResponse {
        assert_eq!(event.kind, "email.sent");
        HttpResponse::NoContent().finish()
    }

    #[actix_web::test]
    async fn email_is_acknowledged() -> Result<(), Box<dyn std::error::Error>> {
        let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
        let app = test::init_service(App::new().service(web::resource("/webhooks/email").route(
            web::post().to(on_email).wrap(Webhooks::new(verifier.clone())),
        )))
        .await;
        let request = signed_request(&verifier, "/webhooks/email", r#"{"type":"email.sent"}"#)?;
        let response = test::call_service(&app, request.to_request()).await;
        assert_eq!(response.status(), 204);
        Ok(())
    }
}
