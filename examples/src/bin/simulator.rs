//! Run with: cargo run -p examples --bin simulator -- --events 500 --emails 25
//!
//! Plays an email provider against a receiver on this machine: plans the
//! lifecycles of M emails (N genuine events), signs each attempt, sends at a
//! given concurrency with duplicates, reordering, tampered bodies, forgeries
//! and stale replays, retries with backoff, and prints a summary. The secret
//! comes from `WEBHOOK_SECRET`. `--help` lists the options.
//!
//! ```text
//! WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw \
//!   cargo run -p examples --bin simulator -- --events 1000 --emails 50 --concurrency 16 --tampered 0.05 --stale 0.05
//! ```

use std::process::ExitCode;

use clap::Parser as _;
use examples::simulator::{Plan, SimulatorArgs, SimulatorConfig, run};

#[tokio::main]
async fn main() -> ExitCode {
    let args = SimulatorArgs::parse();
    let Some(secret) = std::env::var("WEBHOOK_SECRET")
        .ok()
        .filter(|s| !s.is_empty())
    else {
        eprintln!("simulator: WEBHOOK_SECRET is not set");
        return ExitCode::FAILURE;
    };
    let config = args.apply(SimulatorConfig {
        secret,
        ..SimulatorConfig::default()
    });
    let summary = match Plan::generate(&config) {
        Ok(plan) => {
            let counts = plan.counts();
            let shown: Vec<String> = counts.iter().map(|(i, n)| format!("{n} {i}")).collect();
            println!(
                "sending {} deliveries to {} ({} scheme, concurrency {}): {}",
                plan.deliveries.len(),
                config.url,
                config.scheme,
                config.concurrency,
                shown.join(", ")
            );
            run(&config, &plan).await
        }
        Err(error) => Err(error),
    };
    match summary {
        Ok(summary) => {
            println!("{summary}");
            let failed = summary
                .outcomes
                .iter()
                .filter(|o| o.status().is_none())
                .count();
            if failed > 0 {
                eprintln!("simulator: {failed} deliveries got no HTTP answer");
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("simulator: {error}");
            ExitCode::FAILURE
        }
    }
}
