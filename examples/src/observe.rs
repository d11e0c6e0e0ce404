//! Logs and metrics for the example receivers: `tracing-subscriber` (text or
//! JSON lines) and a Prometheus `/metrics` route fed by the library's
//! [`signals`](webhooks_core::signals).
//!
//! ```no_run
//! use examples::observe::{LogFormat, init_logging, install_metrics, metrics_router};
//!
//! init_logging(LogFormat::Json);
//! let handle = install_metrics().expect("the only metrics recorder");
//! let app: axum::Router = metrics_router(handle); // merge it into the app
//! ```

use std::str::FromStr;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line, with the `webhook` span's fields.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("unknown log format {other:?} (text or json)")),
        }
    }
}

/// The `--log-format` value among `args` (`--log-format json` or
/// `--log-format=json`), text by default.
///
/// # Errors
///
/// When the value is neither `text` nor `json`, or missing.
pub fn log_format_from_args(args: impl IntoIterator<Item = String>) -> Result<LogFormat, String> {
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if let Some(value) = arg.strip_prefix("--log-format=") {
            return value.parse();
        }
        if arg == "--log-format" {
            return args
                .next()
                .ok_or("--log-format needs a value (text or json)")?
                .parse();
        }
    }
    Ok(LogFormat::Text)
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

    #[test]
    fn log_format_flag() {
        let parse = |a: &[&str]| log_format_from_args(a.iter().map(|s| (*s).to_owned()));
        assert_eq!(parse(&[]), Ok(LogFormat::Text));
        assert_eq!(parse(&["--log-format", "json"]), Ok(LogFormat::Json));
        assert_eq!(parse(&["--log-format=text"]), Ok(LogFormat::Text));
        assert!(parse(&["--log-format", "xml"]).is_err());
        assert!(parse(&["--log-format"]).is_err());
    }
}
