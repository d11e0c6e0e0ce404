//! Logs and metrics for the example receivers: `tracing-subscriber` (text or
//! JSON lines) and a Prometheus `/metrics` route fed by the library's
//! [`signals`](tower_webhooks::core::signals).
//!
//! ```no_run
//! use examples::observe::{LogFormat, init_logging, install_metrics, metrics_router};
//!
//! init_logging(LogFormat::Json);
//! let handle = install_metrics().expect("the only metrics recorder");
//! let app: axum::Router = metrics_router(handle); // merge it into the app
//! ```

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line, with the `webhook` span's fields.
    Json,
}

/// The logging flags of the example binaries: `--log-format text|json`
/// (also `--log-format=json`), text by default. Flatten it into a binary's
/// `clap::Parser`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LogArgs {
    /// How log lines are written to stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Installs the global subscriber: `RUST_LOG` filters (default `info`; set
/// `webhooks_core=debug` to see every handled delivery).
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
    };
}

/// Installs the Prometheus recorder, with histogram buckets for the
/// library's durations (1 ms … 10 s) and body sizes (256 B … 4 MiB). Call it
/// before the first delivery.
///
/// # Errors
///
/// When another recorder is already installed.
pub fn install_metrics() -> Result<PrometheusHandle, BuildError> {
    const SECONDS: &[f64] = &[
        0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
        0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    const BYTES: &[f64] = &[
        256.0,
        1024.0,
        4096.0,
        16_384.0,
        65_536.0,
        262_144.0,
        1_048_576.0,
        4_194_304.0,
    ];
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)?
        .set_buckets_for_metric(Matcher::Suffix("_bytes".into()), BYTES)?
        .install_recorder()
}

/// `GET /metrics`: the Prometheus text exposition.
pub fn metrics_router<S: Clone + Send + Sync + 'static>(handle: PrometheusHandle) -> Router<S> {
    Router::new().route("/metrics", get(move || std::future::ready(handle.render())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
    }

    #[test]
    fn log_format_flag() {
        use clap::Parser as _;
        let parse = |a: &[&str]| {
            Cli::try_parse_from(std::iter::once("bin").chain(a.iter().copied()))
                .map(|c| c.log.log_format)
        };
        assert_eq!(parse(&[]).unwrap(), LogFormat::Text);
        assert_eq!(parse(&["--log-format", "json"]).unwrap(), LogFormat::Json);
        assert_eq!(parse(&["--log-format=text"]).unwrap(), LogFormat::Text);
        assert!(parse(&["--log-format", "xml"]).is_err());
        assert!(parse(&["--log-format"]).is_err());
    }
}
