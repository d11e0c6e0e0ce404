//! A provider simulator: plays the sender of email events over HTTP.
//!
//! It plans the lifecycles of `emails` emails (`events` genuine events in all,
//! each with its own timestamp), then sends them at a given concurrency with
//! what real senders and attackers add:
//!
//! | knob | what is sent | a correct receiver answers |
//! |---|---|---|
//! | `duplicates` | the same delivery again (a sender retry), soon after or concurrently | `200` + `webhook-duplicate: true`, or `409` then that |
//! | `reorder` | deliveries moved up to 32 places from timestamp order | `2xx`, and the state follows the timestamps |
//! | `tampered` | a genuine signature over a changed body | `401` |
//! | `wrong_secret` | a made-up event signed with another secret | `401` |
//! | `stale` | a genuine event re-signed an hour ago (a captured request replayed) | `401` |
//! | `unknown` | a correctly signed event of a type the receiver does not know | `2xx` |
//!
//! Each attempt is signed when it is sent. Answers `409`, `429`, `5xx` and
//! transport errors are retried with exponential backoff and jitter (backon),
//! waiting at least `Retry-After` (up to `max_retry_after`); other `4xx` are final. The [`Summary`] counts accepted
//! deliveries, acknowledged duplicates, rejections by status and reason,
//! retries and latency percentiles. Bodies and secrets are never printed.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use examples::simulator::{Plan, SimulatorConfig, run};
//!
//! let config = SimulatorConfig {
//!     url: "http://127.0.0.1:3000/webhooks/email".into(),
//!     secret: std::env::var("WEBHOOK_SECRET")?,
//!     ..SimulatorConfig::default()
//! };
//! let plan = Plan::generate(&config)?;
//! let summary = run(&config, &plan).await?;
//! println!("{summary}");
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::schemes::Scheme;

mod plan;
mod send;
mod summary;

pub use plan::{Intent, Plan, PlannedDelivery};
pub use send::run;
pub use summary::{Answer, Outcome, Summary};

/// How far back a stale replay's signature is dated.
pub const STALE_BY: Duration = Duration::from_secs(3600);

/// The simulator's settings.
///
/// `Debug` shows neither secret.
#[derive(Clone)]
pub struct SimulatorConfig {
    /// Where to post: `http://host:port/path` (plain HTTP, this machine).
    pub url: String,
    /// The scheme to sign with.
    pub scheme: Scheme,
    /// The receiver's secret.
    pub secret: String,
    /// The secret forgeries are signed with.
    pub wrong_secret: String,
    /// How many emails.
    pub emails: usize,
    /// How many genuine events in all (at least one per email).
    pub events: usize,
    /// How many deliveries in flight at once.
    pub concurrency: usize,
    /// Fraction of genuine events also sent a second time.
    pub duplicates: f64,
    /// Fraction of deliveries moved out of timestamp order.
    pub reorder: f64,
    /// Fraction of genuine events also sent with a tampered body.
    pub tampered: f64,
    /// Fraction of genuine events also shadowed by a forgery signed with `wrong_secret`.
    pub wrong_secret_rate: f64,
    /// Fraction of genuine events also replayed with an hour-old signature.
    pub stale: f64,
    /// Fraction of genuine events also accompanied by an unknown event type.
    pub unknown: f64,
    /// Seed of the plan and the jitter: the same seed, the same plan.
    pub seed: u64,
    /// Attempts per delivery, the first included.
    pub max_attempts: u32,
    /// The first retry's backoff (doubled each time, with jitter).
    pub base_backoff: Duration,
    /// The longest backoff (a longer `Retry-After` is still honoured).
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured. The pipeline's `409` asks for the
    /// rest of the other attempt's lease (up to a minute by default) even when
    /// that attempt ends in milliseconds; a retry sent sooner is simply
    /// answered `409` again.
    pub max_retry_after: Duration,
    /// How long one attempt may take.
    pub request_timeout: Duration,
}

impl fmt::Debug for SimulatorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatorConfig")
            .field("url", &self.url)
            .field("scheme", &self.scheme)
            .field("emails", &self.emails)
            .field("events", &self.events)
            .field("concurrency", &self.concurrency)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:3000/webhooks/email".to_owned(),
            scheme: Scheme::Standard,
            secret: String::new(),
            // A fixed, public value: only ever used to sign forgeries.
            wrong_secret: "whsec_Zm9yZ2VkLWJ5LWFuLWF0dGFja2VyLTAwMDAwMDA=".to_owned(),
            emails: 20,
            events: 200,
            concurrency: 8,
            duplicates: 0.1,
            reorder: 0.2,
            tampered: 0.0,
            wrong_secret_rate: 0.0,
            stale: 0.0,
            unknown: 0.0,
            seed: 1,
            max_attempts: 6,
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// The simulator's command line (clap): each option given replaces that
/// setting of a [`SimulatorConfig`] (see [`apply`](Self::apply)), so the
/// defaults live in one place, `SimulatorConfig::default()`. The secret comes
/// from `WEBHOOK_SECRET`, never from the command line.
#[derive(Debug, Clone, Default, clap::Parser)]
#[command(
    name = "simulator",
    about = "Plays an email provider against a receiver on this machine.",
    after_help = "The secret comes from WEBHOOK_SECRET, never from the command line."
)]
pub struct SimulatorArgs {
    /// Where to post [default: http://127.0.0.1:3000/webhooks/email]
    #[arg(long)]
    pub url: Option<String>,
    /// standard | stripe | github | slack | shopify [default: standard]
    #[arg(long)]
    pub scheme: Option<Scheme>,
    /// Emails [default: 20]
    #[arg(long)]
    pub emails: Option<usize>,
    /// Genuine events in all [default: 200]
    #[arg(long)]
    pub events: Option<usize>,
    /// Deliveries in flight [default: 8]
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Fraction re-sent as sender retries [default: 0.1]
    #[arg(long, value_parser = fraction)]
    pub duplicates: Option<f64>,
    /// Fraction moved out of timestamp order [default: 0.2]
    #[arg(long, value_parser = fraction)]
    pub reorder: Option<f64>,
    /// Fraction shadowed by a tampered body [default: 0]
    #[arg(long, value_parser = fraction)]
    pub tampered: Option<f64>,
    /// Fraction shadowed by a forgery with another secret [default: 0]
    #[arg(long = "wrong-secret", value_parser = fraction)]
    pub wrong_secret_rate: Option<f64>,
    /// Fraction replayed with an hour-old signature [default: 0]
    #[arg(long, value_parser = fraction)]
    pub stale: Option<f64>,
    /// Fraction accompanied by an unknown event type [default: 0]
    #[arg(long, value_parser = fraction)]
    pub unknown: Option<f64>,
    /// Plan and jitter seed [default: 1]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Attempts per delivery [default: 6]
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Longest Retry-After honoured, in seconds [default: 60]
    #[arg(long)]
    pub max_retry_after: Option<u64>,
}

/// A number between 0 and 1.
fn fraction(value: &str) -> Result<f64, String> {
    let f: f64 = value
        .trim()
        .parse()
        .map_err(|_| "not a number".to_owned())?;
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err("a fraction between 0 and 1".to_owned())
    }
}

impl SimulatorArgs {
    /// `config` with the options given replacing its settings.
    #[must_use]
    pub fn apply(self, config: SimulatorConfig) -> SimulatorConfig {
        SimulatorConfig {
            url: self.url.unwrap_or(config.url),
            scheme: self.scheme.unwrap_or(config.scheme),
            emails: self.emails.unwrap_or(config.emails),
            events: self.events.unwrap_or(config.events),
            concurrency: self.concurrency.unwrap_or(config.concurrency),
            duplicates: self.duplicates.unwrap_or(config.duplicates),
            reorder: self.reorder.unwrap_or(config.reorder),
            tampered: self.tampered.unwrap_or(config.tampered),
            wrong_secret_rate: self.wrong_secret_rate.unwrap_or(config.wrong_secret_rate),
            stale: self.stale.unwrap_or(config.stale),
            unknown: self.unknown.unwrap_or(config.unknown),
            seed: self.seed.unwrap_or(config.seed),
            max_attempts: self.max_attempts.unwrap_or(config.max_attempts),
            max_retry_after: self
                .max_retry_after
                .map_or(config.max_retry_after, Duration::from_secs),
            ..config
        }
    }
}

impl SimulatorConfig {
    fn check(&self) -> Result<(), SimulatorError> {
        let bad = |what: &str| Err(SimulatorError::Config(what.to_owned()));
        if self.emails == 0 || self.events < self.emails {
            return bad("need at least one email and one event per email");
        }
        if self.concurrency == 0 || self.max_attempts == 0 {
            return bad("concurrency and max attempts must be at least 1");
        }
        if self.stale > 0.0 && !self.scheme.signs_timestamp() {
            return bad("this scheme signs no timestamp, so a stale replay cannot be told apart");
        }
        Ok(())
    }
}

/// Why the simulator could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum SimulatorError {
    /// The settings do not make sense.
    Config(String),
    /// A secret is unusable for the scheme.
    Secret(tower_webhooks::core::ConfigError),
}

impl fmt::Display for SimulatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(what) => write!(f, "invalid settings: {what}"),
            Self::Secret(e) => write!(f, "unusable secret: {e}"),
        }
    }
}

impl std::error::Error for SimulatorError {}

fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The plan's and the jitter's generator: seeded, so the same seed gives the
/// same plan (wyrand, through fastrand). Not for secrets.
type Rng = fastrand::Rng;

#[cfg(test)]
mod tests {
    use super::*;

    /// A small configuration with every fault enabled (shared with `plan`'s tests).
    pub(super) fn config() -> SimulatorConfig {
        SimulatorConfig {
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            emails: 10,
            events: 57,
            duplicates: 0.3,
            tampered: 0.1,
            wrong_secret_rate: 0.1,
            stale: 0.1,
            unknown: 0.1,
            ..SimulatorConfig::default()
        }
    }

    #[test]
    fn options_parse_in_both_forms_and_replace_only_their_setting() {
        use clap::Parser as _;
        let args = [
            "simulator",
            "--events=30",
            "--emails",
            "3",
            "--scheme",
            "github",
            "--stale",
            "0",
        ];
        let base = config();
        let c = SimulatorArgs::try_parse_from(args)
            .unwrap()
            .apply(base.clone());
        assert_eq!((c.events, c.emails, c.scheme), (30, 3, Scheme::GitHub));
        assert_eq!(c.stale, 0.0);
        assert_eq!(
            (c.duplicates, c.unknown, &c.secret),
            (base.duplicates, base.unknown, &base.secret)
        );
        assert!(SimulatorArgs::try_parse_from(["simulator", "--nope"]).is_err());
        assert!(SimulatorArgs::try_parse_from(["simulator", "--reorder=2"]).is_err());
        assert!(SimulatorArgs::try_parse_from(["simulator", "--scheme", "nope"]).is_err());
    }

    #[test]
    fn debug_shows_no_secret() {
        let shown = format!("{:?}", config());
        assert!(!shown.contains("whsec"), "{shown}");
    }
}
