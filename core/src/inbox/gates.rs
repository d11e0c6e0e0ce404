//! Per-type pauses and limits: stopping one event type or scheme instead of
//! the whole inbox, and bounding how many events of a type run at once and
//! how many start per second, across every worker of every process.
//!
//! A [`Selector`] names events by scheme and event type, with `*` wildcards:
//! `stripe:invoice.*` (Stripe's invoice events), `*:invoice.*` (invoice
//! events of any scheme), `shopify` (everything Shopify sends). Matching is
//! ASCII case-insensitive, and an event without a type has the empty type.
//!
//! - **Pauses** live in the inbox's store ([`Inbox::set_gate_paused`]): from
//!   their next poll, no worker of any process leases an event a paused
//!   selector matches; the others flow as before. Deliveries keep being
//!   accepted. On SQL the lease's own statement reads the gates table
//!   (`<table>_gates`); on Redis the lease script sets matching events
//!   aside (`P parked`) until their selector is resumed.
//! - **Limits** are set on the worker ([`WorkerBuilder::limit`]): before
//!   running an event a limit's selector matches, the worker takes a permit
//!   from the store ([`Inbox::acquire_permit`]), which grants it only while
//!   fewer than [`Limit::concurrency`] permits are held and a token of
//!   [`Limit::per_second`] (a bucket holding one second's worth) is left.
//!   A permit is held for the lease's duration, renewed with the lease and
//!   returned when the attempt settles, so a crashed process's permits
//!   free themselves when its leases would have expired. An event refused
//!   a permit is handed back unstarted ([`Inbox::defer`]), due again when
//!   the store says a permit may be free: its attempt is not counted.
//!
//! The console's overview shows each gate live (paused or not, permits
//! held now / concurrency, rate), and pauses or resumes one; the admin API
//! (`GET /gates`, `POST /gates/pause`, `POST /gates/resume`) and the CLI
//! (`webhooks inbox gates`, `webhooks inbox pause --only`, `webhooks inbox
//! resume --only`) do the same.
//!
//! ```
//! use webhooks_core::inbox::gates::{Limit, Selector};
//!
//! let invoices: Selector = "stripe:invoice.*".parse()?;
//! assert!(invoices.matches("stripe", Some("invoice.paid")));
//! assert!(!invoices.matches("stripe", Some("charge.succeeded")));
//! assert!(!invoices.matches("github", Some("invoice.paid")));
//!
//! let shopify: Selector = "Shopify".parse()?;
//! assert_eq!(shopify.to_string(), "shopify:*");
//! assert!(shopify.matches("shopify", Some("orders/create")));
//!
//! let limit = Limit::concurrency(2).and_per_second(10);
//! assert_eq!((limit.concurrency, limit.per_second), (Some(2), Some(10)));
//! # Ok::<(), webhooks_core::inbox::gates::SelectorError>(())
//! ```
//!
//! [`Inbox::set_gate_paused`]: crate::inbox::Inbox::set_gate_paused
//! [`Inbox::acquire_permit`]: crate::inbox::Inbox::acquire_permit
//! [`Inbox::defer`]: crate::inbox::Inbox::defer
//! [`WorkerBuilder::limit`]: crate::inbox::WorkerBuilder::limit

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The longest selector, in bytes of its text form.
pub const MAX_SELECTOR_LEN: usize = 200;

/// The most gates an inbox keeps (paused selectors and limits together): a
/// pause beyond it is refused. Every lease reads the paused ones.
pub const MAX_GATES: usize = 64;

/// How long an event refused a permit for its concurrency waits before it
/// is due again, when the store cannot tell when a permit frees.
pub const DEFER_BUSY: Duration = Duration::from_millis(500);

/// Names events by scheme and event type, each a pattern where `*` stands
/// for any run of characters; see [the module](self).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Selector {
    scheme: String,
    event_type: String,
}

/// Why a selector's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// Empty, or an empty scheme or type pattern.
    #[error("a selector needs a scheme pattern, e.g. `stripe:invoice.*` or `*:invoice.*`")]
    Empty,
    /// Longer than [`MAX_SELECTOR_LEN`].
    #[error("a selector is at most {MAX_SELECTOR_LEN} bytes")]
    TooLong,
    /// A character outside printable ASCII, or a space.
    #[error("a selector holds printable ASCII without spaces")]
    Character,
    /// The pattern matches every event: pause the whole inbox instead.
    #[error("`*:*` matches every event: pause the whole inbox instead")]
    Everything,
}

impl Selector {
    /// A selector from a scheme pattern and an event type pattern (`*` for
    /// any type).
    ///
    /// # Errors
    ///
    /// [`SelectorError`] for an empty, over-long or non-ASCII pattern, or
    /// `*` for both.
    pub fn new(scheme: &str, event_type: &str) -> Result<Self, SelectorError> {
        if scheme.is_empty() || event_type.is_empty() {
            return Err(SelectorError::Empty);
        }
        if scheme.len() + event_type.len() + 1 > MAX_SELECTOR_LEN {
            return Err(SelectorError::TooLong);
        }
        let valid = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        if !valid(scheme) || !valid(event_type) || scheme.contains(':') {
            return Err(SelectorError::Character);
        }
        let scheme = collapse(&scheme.to_ascii_lowercase());
        let event_type = collapse(&event_type.to_ascii_lowercase());
        if scheme == "*" && event_type == "*" {
            return Err(SelectorError::Everything);
        }
        Ok(Self { scheme, event_type })
    }

    /// The scheme pattern (lowercase).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The event type pattern (lowercase; `*` for any).
    pub fn event_type(&self) -> &str {
        &self.event_type
    }

    /// Whether an event of `scheme` and `event_type` is one this selects.
    pub fn matches(&self, scheme: &str, event_type: Option<&str>) -> bool {
        glob(&self.scheme, scheme) && glob(&self.event_type, event_type.unwrap_or(""))
    }

    /// The scheme pattern as a SQL `LIKE` pattern with `!` as its escape
    /// character, compared with the lowercased column.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
        allow(dead_code, reason = "used by the SQL backends")
    )]
    pub(crate) fn scheme_like(&self) -> String {
        like(&self.scheme)
    }

    /// The event type pattern as a SQL `LIKE` pattern (see
    /// [`scheme_like`](Self::scheme_like)).
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
        allow(dead_code, reason = "used by the SQL backends")
    )]
    pub(crate) fn type_like(&self) -> String {
        like(&self.event_type)
    }
}

/// `**` is `*`.
fn collapse(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if !(c == '*' && out.ends_with('*')) {
            out.push(c);
        }
    }
    out
}

/// `pattern` (lowercase, `*` wildcards) against `text`, ASCII
/// case-insensitively: the pieces between stars in order, the first
/// anchored at the start and the last at the end.
fn glob(pattern: &str, text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    let pieces: Vec<&str> = pattern.split('*').collect();
    if pieces.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// A glob as a `LIKE` pattern escaped with `!`.
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    allow(dead_code, reason = "used by the SQL backends")
)]
fn like(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    for c in pattern.chars() {
        match c {
            '*' => out.push('%'),
            '%' | '_' | '!' => {
                out.push('!');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

impl FromStr for Selector {
    type Err = SelectorError;

    /// `scheme:type`, or `scheme` alone for every type of the scheme.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        match text.split_once(':') {
            Some((scheme, event_type)) => Self::new(scheme, event_type),
            None => Self::new(text, "*"),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scheme, self.event_type)
    }
}

impl fmt::Debug for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Selector({self})")
    }
}

impl serde::Serialize for Selector {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// How many events a selector's events may run at once and start per
/// second, across every worker of every process sharing the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub struct Limit {
    /// At most this many running at once (`None`: no bound).
    pub concurrency: Option<u32>,
    /// At most this many started per second, with bursts of up to one
    /// second's worth (`None`: no bound).
    pub per_second: Option<u32>,
}

impl Limit {
    /// At most `n` (at least 1) running at once.
    pub fn concurrency(n: u32) -> Self {
        Self {
            concurrency: Some(n.max(1)),
            per_second: None,
        }
    }

    /// At most `n` (at least 1) started per second.
    pub fn per_second(n: u32) -> Self {
        Self {
            concurrency: None,
            per_second: Some(n.max(1)),
        }
    }

    /// This limit, also bounded to `n` (at least 1) started per second.
    #[must_use]
    pub fn and_per_second(mut self, n: u32) -> Self {
        self.per_second = Some(n.max(1));
        self
    }

    /// This limit, also bounded to `n` (at least 1) running at once.
    #[must_use]
    pub fn and_concurrency(mut self, n: u32) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }
}

/// The store's answer to [`Inbox::acquire_permit`](crate::inbox::Inbox::acquire_permit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Held (newly, or renewed by its holder) until the hold ends.
    Granted,
    /// Refused: the limit is reached. `retry_after`: when a token of the
    /// rate is next due, or [`DEFER_BUSY`] when the concurrency is what is
    /// full.
    Denied {
        /// How long until trying again may succeed.
        retry_after: Duration,
    },
}

/// One gate as the store holds it: a selector paused, limited, or both.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gate {
    /// What it selects.
    pub selector: Selector,
    /// Whether its events are paused.
    pub paused: bool,
    /// The limit the workers last asked for (`None`: never limited).
    pub limit: Option<Limit>,
    /// Permits held now (events running under the limit).
    pub running: u64,
    /// When a worker or an operator last touched it (ms since the epoch).
    pub updated_at: i64,
}

/// The token bucket of a limit's rate, in thousandths of a token: the
/// tokens after `elapsed_ms` of refill (capped at one second's worth), and
/// whether one can be taken.
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    allow(dead_code, reason = "used by the SQL backends")
)]
pub(crate) fn refill(tokens_milli: i64, elapsed_ms: i64, per_second: u32) -> i64 {
    let cap = i64::from(per_second) * 1000;
    tokens_milli
        .saturating_add(elapsed_ms.max(0).saturating_mul(i64::from(per_second)))
        .min(cap)
}

/// How long until a bucket holding `tokens_milli` has a whole token.
#[cfg_attr(
    not(any(
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite",
        feature = "redis"
    )),
    allow(dead_code, reason = "used by the database backends")
)]
pub(crate) fn until_token(tokens_milli: i64, per_second: u32) -> Duration {
    let missing = (1000 - tokens_milli).max(0);
    let ms = (missing + i64::from(per_second) - 1) / i64::from(per_second.max(1));
    Duration::from_millis(u64::try_from(ms.max(1)).unwrap_or(1))
}

/// The first limit of `limits` whose selector matches the event.
pub(crate) fn limit_for<'a>(
    limits: &'a [(Selector, Limit)],
    scheme: &str,
    event_type: Option<&str>,
) -> Option<&'a (Selector, Limit)> {
    limits.iter().find(|(s, _)| s.matches(scheme, event_type))
}

/// Refuses gate operations on an inbox that does not keep gates.
pub(crate) fn unsupported(inbox: &str) -> crate::inbox::InboxError {
    crate::inbox::InboxError::Protocol(format!(
        "the {inbox} inbox does not pause or limit by event type: that needs a database inbox \
         (SQLite, PostgreSQL, MySQL/MariaDB, Redis; see docs/inbox.md)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_and_match() {
        let s: Selector = "stripe:invoice.*".parse().unwrap();
        assert!(s.matches("stripe", Some("invoice.paid")));
        assert!(s.matches("STRIPE", Some("Invoice.Paid")));
        assert!(!s.matches("stripe", Some("invoice")));
        assert!(!s.matches("stripe", None));
        let any: Selector = "*:*.created".parse().unwrap();
        assert!(any.matches("github", Some("repository.created")));
        assert!(!any.matches("github", Some("repository.created.x")));
        let mid: Selector = "*:a*b*c".parse().unwrap();
        assert!(mid.matches("x", Some("abc")));
        assert!(mid.matches("x", Some("a-b-b-c")));
        assert!(!mid.matches("x", Some("ab")));
        assert!(!mid.matches("x", Some("acb")));
        let scheme: Selector = "github".parse().unwrap();
        assert!(scheme.matches("github", None));
        assert_eq!(scheme.to_string(), "github:*");
        let slash: Selector = "shopify:orders/create".parse().unwrap();
        assert!(slash.matches("shopify", Some("orders/create")));
        assert_eq!("*:**".parse::<Selector>(), Err(SelectorError::Everything));
        assert_eq!("".parse::<Selector>(), Err(SelectorError::Empty));
        assert_eq!("a:".parse::<Selector>(), Err(SelectorError::Empty));
        assert_eq!("a b".parse::<Selector>(), Err(SelectorError::Character));
        assert_eq!("é".parse::<Selector>(), Err(SelectorError::Character));
        let long = "x".repeat(MAX_SELECTOR_LEN);
        assert_eq!(long.parse::<Selector>(), Err(SelectorError::TooLong));
        // A `:` in the type is the type's.
        let colon: Selector = "s:a:b".parse().unwrap();
        assert_eq!(colon.event_type(), "a:b");
    }

    #[test]
    fn like_patterns_escape_sql_wildcards() {
        let s: Selector = "st_ri%pe!:inv*".parse().unwrap();
        assert_eq!(s.scheme_like(), "st!_ri!%pe!!");
        assert_eq!(s.type_like(), "inv%");
    }

    #[test]
    fn the_bucket_refills_up_to_one_second() {
        assert_eq!(refill(0, 100, 10), 1000);
        assert_eq!(refill(0, 10_000, 10), 10_000);
        assert_eq!(refill(500, 0, 10), 500);
        assert_eq!(refill(500, -5, 10), 500);
        assert_eq!(until_token(0, 10), Duration::from_millis(100));
        assert_eq!(until_token(999, 1000), Duration::from_millis(1));
        assert_eq!(until_token(1000, 1), Duration::from_millis(1));
    }

    #[test]
    fn the_first_matching_limit_applies() {
        let limits = vec![
            ("stripe:invoice.*".parse().unwrap(), Limit::concurrency(1)),
            ("stripe".parse().unwrap(), Limit::per_second(5)),
        ];
        let hit = limit_for(&limits, "stripe", Some("invoice.paid")).unwrap();
        assert_eq!(hit.1, Limit::concurrency(1));
        let hit = limit_for(&limits, "stripe", Some("charge.failed")).unwrap();
        assert_eq!(hit.1, Limit::per_second(5));
        assert!(limit_for(&limits, "github", Some("push")).is_none());
    }
}
