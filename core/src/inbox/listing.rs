//! What the operators' views list: dead letters and deliveries, the
//! filters and cursors that page through them, and the in-memory paging of
//! the brokers that cannot page at the source.

use std::fmt;
use std::time::SystemTime;

use bytes::Bytes;

use super::EventMeta;
#[cfg(doc)]
use super::Inbox;
#[cfg(any(feature = "nats", feature = "rabbitmq"))]
use super::to_ms;
use crate::ConfigError;

/// A dead-lettered event: listed without its body, inspected with it.
///
/// `Debug` shows the body's length, never its content.
#[derive(Clone)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The metadata.
    pub meta: EventMeta,
    /// How many attempts ran.
    pub attempts: u32,
    /// The last attempt's error (the handler's message, a timeout, a panic,
    /// or an expired lease), never the body.
    pub last_error: Option<String>,
    /// When the event was dead-lettered (the database's clock).
    pub dead_at: SystemTime,
    /// The body; empty in [`Inbox::dead_letters`] listings.
    pub body: Bytes,
}

impl fmt::Debug for DeadLetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("meta", &self.meta)
            .field("attempts", &self.attempts)
            .field("last_error", &self.last_error)
            .field("dead_at", &self.dead_at)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// Which dead letters [`Inbox::dead_letters`] lists, oldest receipt first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetterFilter {
    /// Only this scheme.
    pub scheme: Option<String>,
    /// Only this event type.
    pub event_type: Option<String>,
    /// Only events received at or after this time.
    pub received_from: Option<SystemTime>,
    /// Only events received before this time.
    pub received_until: Option<SystemTime>,
    /// Only events matching this search (payload values, last error; see
    /// [`Search`](crate::inbox::Search)).
    pub search: Option<crate::inbox::Search>,
    /// Continue after this page's [`next`](DeadLetterPage::next) cursor.
    pub after: Option<DeadLetterCursor>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<u32>,
}

impl DeadLetterFilter {
    /// The page size: `limit`, 50 by default, within 1 to 1000.
    #[must_use]
    pub fn page_size(&self) -> u32 {
        self.limit.unwrap_or(50).clamp(1, 1000)
    }
}

/// Where a page of dead letters ended: pass it back as
/// [`DeadLetterFilter::after`]. Its string form (`Display` / `FromStr`) is
/// what the admin routers use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterCursor {
    /// The last listed event's receipt time, epoch milliseconds.
    pub received_at_ms: i64,
    /// The last listed event's key.
    pub key: String,
}

impl fmt::Display for DeadLetterCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.received_at_ms, self.key)
    }
}

impl std::str::FromStr for DeadLetterCursor {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = ConfigError::Invalid {
            what: "dead-letter cursor",
            reason: "expected <milliseconds>.<key>",
        };
        let (ms, key) = s.split_once('.').ok_or(invalid.clone())?;
        Ok(Self {
            received_at_ms: ms.parse().map_err(|_| invalid)?,
            key: key.to_owned(),
        })
    }
}

/// One page of dead letters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeadLetterPage {
    /// The dead letters, bodies left out.
    pub items: Vec<DeadLetter>,
    /// The cursor of the next page: set when this one is full, and on Redis
    /// also when the listing stopped after examining
    /// `DEAD_LETTER_SCAN_BUDGET` entries (the page
    /// may then be short, even empty). Follow it until it is `None`.
    pub next: Option<DeadLetterCursor>,
    /// How many stored dead letters this call examined, matched or not:
    /// on Redis counted by the listing script (at most
    /// `DEAD_LETTER_SCAN_BUDGET` per partition, however few match), on SQL
    /// the rows returned (the database applies the filter). What a caller
    /// bounds its own scans with (the console stops at 10,000).
    pub examined: u64,
}

/// Which deliveries [`Inbox::deliveries`] lists: the state an event is in.
///
/// `Due` and `Retrying` split the pending events by their due time: an
/// event is accepted, replayed or released due now, so a pending event not
/// yet due is one whose last attempt failed and that waits for its backoff.
/// A retrying event becomes due when its time comes, without any write:
/// between two pages it may move from one listing to the other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeliveryState {
    /// Pending and due now: the next lease may take it.
    #[default]
    Due,
    /// Pending, due later: waiting for the backoff after a failed attempt.
    Retrying,
    /// Leased by a worker (its lease may have expired and not yet been
    /// taken over).
    InFlight,
    /// Dead-lettered.
    Dead,
    /// Completed, not yet purged.
    Completed,
}

impl DeliveryState {
    /// Every state, in the console's order.
    pub const ALL: [Self; 5] = [
        Self::Due,
        Self::Retrying,
        Self::InFlight,
        Self::Dead,
        Self::Completed,
    ];

    /// The name the admin API and the console use: `due`, `retrying`,
    /// `in_flight`, `dead`, `completed`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Due => "due",
            Self::Retrying => "retrying",
            Self::InFlight => "in_flight",
            Self::Dead => "dead",
            Self::Completed => "completed",
        }
    }
}

impl fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DeliveryState {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or(ConfigError::Invalid {
                what: "delivery state",
                reason: "expected due, retrying, in_flight, dead or completed",
            })
    }
}

/// The order of an [`Inbox::deliveries`] listing, by receipt time (then
/// key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeliveryOrder {
    /// The most recently received first (the console's default).
    #[default]
    NewestFirst,
    /// The oldest first (the dead-letter listing's order).
    OldestFirst,
}

impl DeliveryOrder {
    /// The name the admin API and the console use: `newest` or `oldest`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NewestFirst => "newest",
            Self::OldestFirst => "oldest",
        }
    }
}

impl std::str::FromStr for DeliveryOrder {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "newest" => Ok(Self::NewestFirst),
            "oldest" => Ok(Self::OldestFirst),
            _ => Err(ConfigError::Invalid {
                what: "delivery order",
                reason: "expected newest or oldest",
            }),
        }
    }
}

/// Which deliveries [`Inbox::deliveries`] lists, and in which order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeliveryFilter {
    /// The state (default [`DeliveryState::Due`]).
    pub state: DeliveryState,
    /// The order (default [`DeliveryOrder::NewestFirst`]).
    pub order: DeliveryOrder,
    /// Only this scheme.
    pub scheme: Option<String>,
    /// Only this event type.
    pub event_type: Option<String>,
    /// Only this sender's delivery id.
    pub delivery_id: Option<String>,
    /// Only events received at or after this time.
    pub received_from: Option<SystemTime>,
    /// Only events received before this time.
    pub received_until: Option<SystemTime>,
    /// Only events matching this search (payload values, last error; see
    /// [`Search`](crate::inbox::Search)).
    pub search: Option<crate::inbox::Search>,
    /// Continue after this page's [`next`](DeliveryPage::next) cursor: past
    /// its position in this filter's `order` (older than it when newest
    /// first, newer when oldest first).
    pub after: Option<DeliveryCursor>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<u32>,
}

impl DeliveryFilter {
    /// A filter for `state`, newest first, without other conditions.
    #[must_use]
    pub fn state(state: DeliveryState) -> Self {
        Self {
            state,
            ..Self::default()
        }
    }

    /// The page size: `limit`, 50 by default, within 1 to 1000.
    #[must_use]
    pub fn page_size(&self) -> u32 {
        self.limit.unwrap_or(50).clamp(1, 1000)
    }
}

/// Where a page of deliveries ended: pass it back as
/// [`DeliveryFilter::after`] with the same order. It remembers the order it
/// was made for; its string form (`Display` / `FromStr`,
/// `<n|o>.<milliseconds>.<key>`) is what the admin API and the console use,
/// and they refuse a cursor of the other order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryCursor {
    /// The order of the listing that made it.
    pub order: DeliveryOrder,
    /// The last listed (or examined) event's receipt time, epoch milliseconds.
    pub received_at_ms: i64,
    /// The last listed (or examined) event's key.
    pub key: String,
}

impl fmt::Display for DeliveryCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order = match self.order {
            DeliveryOrder::NewestFirst => 'n',
            DeliveryOrder::OldestFirst => 'o',
        };
        write!(f, "{order}.{}.{}", self.received_at_ms, self.key)
    }
}

impl std::str::FromStr for DeliveryCursor {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = ConfigError::Invalid {
            what: "delivery cursor",
            reason: "expected <n|o>.<milliseconds>.<key>",
        };
        let (order, rest) = s.split_once('.').ok_or(invalid.clone())?;
        let order = match order {
            "n" => DeliveryOrder::NewestFirst,
            "o" => DeliveryOrder::OldestFirst,
            _ => return Err(invalid),
        };
        let (ms, key) = rest.split_once('.').ok_or(invalid.clone())?;
        Ok(Self {
            order,
            received_at_ms: ms.parse().map_err(|_| invalid)?,
            key: key.to_owned(),
        })
    }
}

/// A delivery in any state, as [`Inbox::deliveries`] lists it (without its
/// body) and [`Inbox::delivery_get`] shows it (with it).
///
/// `Debug` shows the body's length, never its content.
#[derive(Clone)]
#[non_exhaustive]
pub struct Delivery {
    /// The metadata.
    pub meta: EventMeta,
    /// Its state when it was read.
    pub state: DeliveryState,
    /// How many attempts started.
    pub attempts: u32,
    /// The last failed attempt's error, if any (never the body).
    pub last_error: Option<String>,
    /// When a pending event is (or was) due; `None` in other states.
    pub due_at: Option<SystemTime>,
    /// When an in-flight event's lease ends; `None` in other states.
    pub lease_until: Option<SystemTime>,
    /// The last transition (the completion time of a completed event, the
    /// dead-letter time of a dead one).
    pub updated_at: SystemTime,
    /// The body; empty in [`Inbox::deliveries`] listings.
    pub body: Bytes,
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("meta", &self.meta)
            .field("state", &self.state)
            .field("attempts", &self.attempts)
            .field("last_error", &self.last_error)
            .field("due_at", &self.due_at)
            .field("lease_until", &self.lease_until)
            .field("updated_at", &self.updated_at)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// One page of deliveries.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeliveryPage {
    /// The deliveries, bodies left out, in the filter's order.
    pub items: Vec<Delivery>,
    /// The cursor of the next page: set when this one is full, and on Redis
    /// also when a scan stopped after examining
    /// `DELIVERY_SCAN_BUDGET` entries (the page may then be short, even
    /// empty). Follow it until it is `None`.
    pub next: Option<DeliveryCursor>,
}

/// One page of `items` as `filter` asks: for the engines that list a whole
/// state from the broker and cannot filter, order or page at the source
/// (JetStream, RabbitMQ). Filters by scheme, event type, delivery id and
/// received time, orders by `(received_at, key)` and resumes after the
/// filter's cursor.
#[cfg(any(feature = "nats", feature = "rabbitmq"))]
pub(crate) fn page_in_memory(mut items: Vec<Delivery>, filter: &DeliveryFilter) -> DeliveryPage {
    items.retain(|d| {
        filter.scheme.as_ref().is_none_or(|x| *x == d.meta.scheme)
            && filter
                .event_type
                .as_ref()
                .is_none_or(|x| Some(x) == d.meta.event_type.as_ref())
            && filter
                .delivery_id
                .as_ref()
                .is_none_or(|x| Some(x) == d.meta.delivery_id.as_ref())
            && filter.received_from.is_none_or(|t| d.meta.received_at >= t)
            && filter.received_until.is_none_or(|t| d.meta.received_at < t)
    });
    let position = |d: &Delivery| (to_ms(d.meta.received_at), d.meta.key.clone());
    items.sort_by_key(position);
    if filter.order == DeliveryOrder::NewestFirst {
        items.reverse();
    }
    if let Some(after) = &filter.after {
        let cursor = (after.received_at_ms, after.key.clone());
        items.retain(|d| match filter.order {
            DeliveryOrder::NewestFirst => position(d) < cursor,
            DeliveryOrder::OldestFirst => position(d) > cursor,
        });
    }
    let size = filter.page_size() as usize;
    let next = (items.len() > size).then(|| {
        let (received_at_ms, key) = position(&items[size - 1]);
        DeliveryCursor {
            order: filter.order,
            received_at_ms,
            key,
        }
    });
    items.truncate(size);
    DeliveryPage { items, next }
}

#[cfg(test)]
mod tests {
    #[cfg(any(feature = "nats", feature = "rabbitmq"))]
    use std::time::Duration;

    use super::*;

    /// The brokers' listing: filtered, newest first, in pages that resume
    /// after their cursor; the last page has none.
    #[cfg(any(feature = "nats", feature = "rabbitmq"))]
    #[test]
    fn page_in_memory_filters_orders_and_resumes() {
        let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let item = |key: &str, scheme: &str, ms: u64| Delivery {
            meta: EventMeta {
                key: key.to_owned(),
                scheme: scheme.to_owned(),
                delivery_id: None,
                event_type: None,
                matched_key: String::new(),
                headers: Vec::new(),
                received_at: at(ms),
                signed_at: None,
            },
            state: DeliveryState::Dead,
            attempts: 1,
            last_error: None,
            due_at: None,
            lease_until: None,
            updated_at: at(ms),
            body: Bytes::new(),
        };
        let all = || {
            vec![
                item("b", "stripe", 20),
                item("x", "github", 25),
                item("a", "stripe", 20),
                item("c", "stripe", 30),
                item("d", "stripe", 40),
            ]
        };
        let keys = |page: &DeliveryPage| -> Vec<String> {
            page.items.iter().map(|d| d.meta.key.clone()).collect()
        };
        let mut filter = DeliveryFilter {
            state: DeliveryState::Dead,
            order: DeliveryOrder::NewestFirst,
            scheme: Some("stripe".to_owned()),
            limit: Some(2),
            ..DeliveryFilter::default()
        };
        let first = page_in_memory(all(), &filter);
        assert_eq!(keys(&first), ["d", "c"]);
        filter.after = first.next;
        let second = page_in_memory(all(), &filter);
        assert_eq!(keys(&second), ["b", "a"], "ties ordered by key");
        assert!(second.next.is_none(), "the last page has no cursor");
        filter.after = None;
        filter.order = DeliveryOrder::OldestFirst;
        filter.received_from = Some(at(21));
        filter.limit = Some(10);
        let oldest = page_in_memory(all(), &filter);
        assert_eq!(keys(&oldest), ["c", "d"]);
        assert!(oldest.next.is_none());
    }

    #[test]
    fn cursors_round_trip() {
        let cursor = DeadLetterCursor {
            received_at_ms: 17,
            key: "a.b:c".into(),
        };
        assert_eq!(
            cursor.to_string().parse::<DeadLetterCursor>().unwrap(),
            cursor
        );
        assert!("x".parse::<DeadLetterCursor>().is_err());
    }
}
