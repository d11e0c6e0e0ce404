//! Query strings and path keys.

use std::time::{Duration, UNIX_EPOCH};

use crate::inbox::{DeliveryCursor, DeliveryFilter, Search};

/// The search in `q` (see [`Search`]); `None` when absent or blank.
///
/// # Errors
///
/// What is wrong with it, for a `400`.
pub(crate) fn search_of(value: Option<&str>) -> Result<Option<Search>, String> {
    match value.filter(|v| !v.trim().is_empty()) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|e| format!("q: {e}")),
    }
}

/// The static refusal of a malformed `q` (the routes answer
/// [`search_of`]'s detailed one first).
const BAD_SEARCH: &str = "q is not a search (see the search syntax in docs/inbox.md)";

/// Parses the query of `GET /deliveries` (also the console's list page):
/// `state` (`due` by default, `retrying`, `in_flight`, `dead`,
/// `completed`), `order` (`newest` by default, `oldest`), `scheme`,
/// `event_type`, `delivery_id` (empty means any), `from` / `until` (Unix
/// seconds), `after` (a [`DeliveryCursor`] of the same order), `limit`,
/// `q` (a [`Search`]: `data.object.customer = cus_123 and error ~ 502`).
/// Unknown names are ignored; a later repetition of a name is ignored.
///
/// # Errors
///
/// A short message for a `400` when a value is malformed.
pub fn parse_delivery_query(query: &str) -> Result<DeliveryFilter, &'static str> {
    let params = parse_query(query);
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let mut filter = delivery_filter_from(
        get,
        |value| {
            value
                .parse::<u64>()
                .ok()
                .and_then(|secs| UNIX_EPOCH.checked_add(Duration::from_secs(secs)))
        },
        "from and until are Unix seconds",
    )?;
    if let Some(limit) = get("limit").filter(|v| !v.is_empty()) {
        filter.limit = Some(limit.parse().map_err(|_| "limit is a number")?);
    }
    Ok(filter)
}

/// The deliveries filter both the admin API and the console read: `scheme`,
/// `event_type`, `delivery_id` (empty means any), `state`, `order`, `from` /
/// `until` (read by `time`, refused with `time_error`) and `after` (a
/// cursor of the same order). `get` answers a query value by name; the
/// caller decides whether an empty `state` or `order` is absent or wrong.
pub(crate) fn delivery_filter_from<'q>(
    get: impl Fn(&str) -> Option<&'q str>,
    time: impl Fn(&str) -> Option<std::time::SystemTime>,
    time_error: &'static str,
) -> Result<DeliveryFilter, &'static str> {
    let text = |name: &str| get(name).filter(|v| !v.is_empty()).map(str::to_owned);
    let mut filter = DeliveryFilter {
        scheme: text("scheme"),
        event_type: text("event_type"),
        delivery_id: text("delivery_id"),
        search: search_of(get("q")).map_err(|_| BAD_SEARCH)?,
        ..DeliveryFilter::default()
    };
    if let Some(state) = get("state") {
        filter.state = state
            .parse()
            .map_err(|_| "state is due, retrying, in_flight, dead or completed")?;
    }
    if let Some(order) = get("order") {
        filter.order = order.parse().map_err(|_| "order is newest or oldest")?;
    }
    for (name, slot) in [
        ("from", &mut filter.received_from),
        ("until", &mut filter.received_until),
    ] {
        if let Some(value) = get(name).filter(|v| !v.is_empty()) {
            *slot = Some(time(value).ok_or(time_error)?);
        }
    }
    if let Some(after) = get("after").filter(|v| !v.is_empty()) {
        let cursor = after
            .parse::<DeliveryCursor>()
            .map_err(|_| "malformed cursor")?;
        if cursor.order != filter.order {
            return Err("the cursor was made for the other order");
        }
        filter.after = Some(cursor);
    }
    Ok(filter)
}

/// The query's pairs, decoded as a form (`+` is a space, `%XX` a byte;
/// invalid UTF-8 replaced), through the `form_urlencoded` crate (off the
/// delivery path: only the admin API reads queries).
pub(super) fn parse_query(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

/// A key from the path: `%XX` escapes decoded (a `+` stays a `+`; invalid
/// escapes are kept as they are, invalid UTF-8 replaced).
pub(super) fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}
