//! Run with: cargo run -p examples --bin actix_receiver
//!
//! The same receiver on actix-web, with the same domain code: the `Webhooks`
//! middleware verifies and deduplicates, the handler applies the event in one
//! SQLite transaction. Same environment as `receiver`: `WEBHOOK_SECRET`
//! (required), `WEBHOOK_SCHEME`, `PORT` (default 3000), `DEDUP_URL`,
//! `DATABASE_URL`.
//!
//! ```text
//! WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw cargo run -p examples --bin actix_receiver
//! ```

use std::process::ExitCode;

use actix_web::{App, HttpResponse, HttpServer, web};
use actix_webhooks::{VerifiedWebhook, Webhooks};
use examples::app::{Config, WEBHOOK_PATH, open};
use examples::event::EmailEvent;
use examples::store::EmailStore;

fn main() -> ExitCode {
    match actix_web::rt::System::new().block_on(serve()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("actix_receiver: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::from_env()?;
    let (receiver, store) = open(&config).await?;
    let data = web::Data::new(store.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .service(
                web::resource(WEBHOOK_PATH).route(
                    web::post()
                        .to(on_email)
                        .wrap(Webhooks::from_receiver(receiver.clone())),
                ),
            )
            .route("/emails/{id}", web::get().to(get_email))
            .route("/suppressions", web::get().to(get_suppressions))
    })
    .workers(2)
    .bind(("127.0.0.1", config.port))?;
    for address in server.addrs() {
        println!(
            "receiver (actix-web, {} scheme) listening on http://{address}{WEBHOOK_PATH}",
            config.scheme
        );
    }
    server.run().await?;
    store.close().await;
    Ok(())
}

async fn on_email(
    store: web::Data<EmailStore>,
    VerifiedWebhook(event): VerifiedWebhook<EmailEvent>,
) -> HttpResponse {
    match store.apply(&event).await {
        Ok(_) => HttpResponse::NoContent().finish(),
        Err(error) => {
            eprintln!("applying a {} event failed: {error}", event.kind());
            HttpResponse::InternalServerError().finish()
        }
    }
}

async fn get_email(store: web::Data<EmailStore>, id: web::Path<String>) -> HttpResponse {
    match store.email(&id).await {
        Ok(Some(state)) => HttpResponse::Ok().json(state),
        Ok(None) => HttpResponse::NotFound().body("no such email"),
        Err(error) => {
            eprintln!("database error: {error}");
            HttpResponse::InternalServerError().finish()
        }
    }
}

async fn get_suppressions(store: web::Data<EmailStore>) -> HttpResponse {
    match store.suppressions().await {
        Ok(list) => HttpResponse::Ok().json(list),
        Err(error) => {
            eprintln!("database error: {error}");
            HttpResponse::InternalServerError().finish()
        }
    }
}
