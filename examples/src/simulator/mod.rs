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
//! transport errors are retried with exponential backoff and jitter, waiting at
//! least `Retry-After` (up to `max_retry_after`); other `4xx` are final. The [`Summary`] counts accepted
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

/// The command-line options [`SimulatorConfig::parse_args`] understands.
pub const USAGE: &str = "\
Options (each also as --name=value):
  --url URL             where to post (default http://127.0.0.1:3000/webhooks/email)
  --scheme NAME         standard | stripe | github | slack | shopify (default standard)
  --emails M            emails (default 20)
  --events N            genuine events in all (default 200)
  --concurrency C       deliveries in flight (default 8)
  --duplicates F        fraction re-sent as sender retries (default 0.1)
  --reorder F           fraction moved out of timestamp order (default 0.2)
  --tampered F          fraction shadowed by a tampered body (default 0)
  --wrong-secret F      fraction shadowed by a forgery with another secret (default 0)
  --stale F             fraction replayed with an hour-old signature (default 0)
  --unknown F           fraction accompanied by an unknown event type (default 0)
  --seed S              plan and jitter seed (default 1)
  --max-attempts A      attempts per delivery (default 6)
  --max-retry-after S   longest Retry-After honoured, in seconds (default 60)
The secret comes from WEBHOOK_SECRET, never from the command line.";

impl SimulatorConfig {
    /// Reads `--name value` / `--name=value` options (see [`USAGE`]) over the defaults.
    ///
    /// # Errors
    ///
    /// A message naming the option that is unknown or malformed.
    pub fn parse_args(mut self, args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                None => (arg, None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| format!("{name} needs a value"))
            };
            fn number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
                v.trim()
                    .parse()
                    .map_err(|_| format!("{name}: not a number"))
            }
            fn fraction(name: &str, v: &str) -> Result<f64, String> {
                let f: f64 = number(name, v)?;
                if (0.0..=1.0).contains(&f) {
                    Ok(f)
                } else {
                    Err(format!("{name}: a fraction between 0 and 1"))
                }
            }
            match name.as_str() {
                "--url" => self.url = value()?,
                "--scheme" => self.scheme = value()?.parse()?,
                "--emails" => self.emails = number(&name, &value()?)?,
                "--events" => self.events = number(&name, &value()?)?,
                "--concurrency" => self.concurrency = number(&name, &value()?)?,
                "--duplicates" => self.duplicates = fraction(&name, &value()?)?,
                "--reorder" => self.reorder = fraction(&name, &value()?)?,
                "--tampered" => self.tampered = fraction(&name, &value()?)?,
                "--wrong-secret" => self.wrong_secret_rate = fraction(&name, &value()?)?,
                "--stale" => self.stale = fraction(&name, &value()?)?,
                "--unknown" => self.unknown = fraction(&name, &value()?)?,
                "--seed" => self.seed = number(&name, &value()?)?,
                "--max-attempts" => self.max_attempts = number(&name, &value()?)?,
                "--max-retry-after" => {
                    self.max_retry_after = Duration::from_secs(number(&name, &value()?)?);
                }
                _ => return Err(format!("unknown option {name}\n\n{USAGE}")),
            }
        }
        Ok(self)
    }

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
    Secret(webhooks_core::ConfigError),
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

/// SplitMix64: small, fast, and reproducible from a seed. Not for secrets.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

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
    fn options_parse_in_both_forms() {
        let args = [
            "--events=30",
            "--emails",
            "3",
            "--scheme",
            "github",
            "--stale",
            "0",
        ];
        let c = SimulatorConfig::default()
            .parse_args(args.map(String::from))
            .unwrap();
        assert_eq!((c.events, c.emails, c.scheme), (30, 3, Scheme::GitHub));
        assert!(
            SimulatorConfig::default()
                .parse_args(["--nope".to_owned()])
                .is_err()
        );
        assert!(
            SimulatorConfig::default()
                .parse_args(["--reorder=2".to_owned()])
                .is_err()
        );
    }

    #[test]
    fn debug_shows_no_secret() {
        let shown = format!("{:?}", config());
        assert!(!shown.contains("whsec"), "{shown}");
    }
}
