//! Run with: cargo run -p examples --bin receiver
//!
//! The email-events receiver on axum: `POST /webhooks/email` (behind
//! `WebhookLayer`), `GET /emails/{id}`, `GET /suppressions`, on 127.0.0.1.
//!
//! Configuration from the environment: `WEBHOOK_SECRET` (required),
//! `WEBHOOK_SCHEME` (default `standard`), `PORT` (default 3000), `DEDUP_URL`
//! (default `memory://`), `DATABASE_URL` (default an SQLite file in the temp
//! dir). `GET /metrics` serves the Prometheus text exposition; logs go to
//! stderr, as text or, with `--log-format json`, as JSON lines (`RUST_LOG`
//! filters them). For example:
//!
//! ```text
//! WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw cargo run -p examples --bin receiver
//! WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw cargo run -p examples --bin simulator
//! curl -s 127.0.0.1:3000/emails/em_0000
//! curl -s 127.0.0.1:3000/metrics | grep webhooks_
//! ```

use std::process::ExitCode;

use clap::Parser;
use examples::app::{Config, WEBHOOK_PATH, open, router};
use examples::observe::{LogArgs, init_logging, install_metrics, metrics_router};

/// The command line: only the log format (the rest comes from the environment).
#[derive(Parser)]
#[command(
    name = "receiver",
    about = "The email-events receiver on axum.",
    after_help = "Configuration comes from the environment: WEBHOOK_SECRET, WEBHOOK_SCHEME, PORT, DEDUP_URL, DATABASE_URL."
)]
struct Cli {
    #[command(flatten)]
    log: LogArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    match serve().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("receiver: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    init_logging(Cli::parse().log.log_format);
    let metrics = install_metrics()?;
    let config = Config::from_env()?;
    let (receiver, store) = open(&config).await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port)).await?;
    let address = listener.local_addr()?;
    println!(
        "receiver (axum, {} scheme) listening on http://{address}{WEBHOOK_PATH}",
        config.scheme
    );
    let app = router(receiver, store.clone()).merge(metrics_router(metrics));
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    store.close().await;
    Ok(())
}
