#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use tower::ServiceExt as _; // oneshot
    use tower_webhooks::{core::scheme::StandardWebhooks, testing::signed_request};

    use super::app;

    #[tokio::test]
    async fn email_is_acknowledged() -> Result<(), Box<dyn std::error::Error>> {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let verifier = StandardWebhooks::new(secret)?;
        let request = signed_request(&verifier, "/webhooks/email", r#"{"type":"email.sent"}"#)?;
        let response = app(secret)?.oneshot(request).await?;
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        Ok(())
    }
}
