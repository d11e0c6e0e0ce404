//! The console's requests read: the mount path, forms and query strings,
//! the lists' filters, UTC times and durations as operators type them.

use std::time::{Duration, SystemTime};

use crate::inbox::bulk::BulkAction;
use crate::inbox::{DeadLetterCursor, DeadLetterFilter, DeliveryFilter};

use super::render;

/// The deliveries page's filter: `state`, `order` (`newest` by default),
/// the list's filters (from / until as UTC times), the cursor; pages of 50.
pub(super) fn delivery_filter(query: &[(String, String)]) -> Result<DeliveryFilter, String> {
    // The search's own message first (the shared reader's is generic).
    crate::inbox::admin::search_of(field(query, "q"))?;
    // An empty form field means "any", `state` and `order` included.
    let mut filter = crate::inbox::admin::delivery_filter_from(
        |name| field(query, name).filter(|v| !v.is_empty()),
        parse_utc,
        "from and until are UTC times: 2026-12-01T15:30",
    )
    .map_err(str::to_owned)?;
    filter.limit = Some(50);
    Ok(filter)
}

/// The mount path, only if it is a plain absolute path (never `//host`).
pub(super) fn clean_base(base: &str) -> &str {
    let base = base.trim_end_matches('/');
    if base.starts_with('/')
        && !base.starts_with("//")
        && !base.contains(['\\', '"', '\'', '<', '>', '?', '#'])
    {
        base
    } else {
        ""
    }
}

pub(super) fn parse_form(bytes: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(bytes)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

pub(super) fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

pub(super) fn list_filter(query: &[(String, String)]) -> Result<DeadLetterFilter, String> {
    let non_empty = |name| {
        field(query, name)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let mut filter = DeadLetterFilter {
        scheme: non_empty("scheme"),
        event_type: non_empty("event_type"),
        search: crate::inbox::admin::search_of(field(query, "q"))?,
        limit: Some(50),
        ..DeadLetterFilter::default()
    };
    for (name, slot) in [
        ("from", &mut filter.received_from),
        ("until", &mut filter.received_until),
    ] {
        if let Some(text) = non_empty(name) {
            *slot = Some(parse_utc(&text).ok_or("from and until are UTC times: 2026-12-01T15:30")?);
        }
    }
    if let Some(after) = non_empty("after") {
        filter.after = Some(
            after
                .parse::<DeadLetterCursor>()
                .map_err(|_| "malformed cursor".to_owned())?,
        );
    }
    Ok(filter)
}

/// A request to act on every dead letter matching a filter (`action`, the
/// list's filter and search, no cursor): the confirmation page's and the
/// action's.
pub(super) fn bulk_request(
    form: &[(String, String)],
) -> Result<(BulkAction, DeadLetterFilter), String> {
    let action = field(form, "action")
        .and_then(BulkAction::parse)
        .ok_or("action is replay or discard")?;
    let filter = DeadLetterFilter {
        after: None,
        ..list_filter(form)?
    };
    Ok((action, filter))
}

/// The list's filter as the request spells it.
pub(super) fn list_params(query: &[(String, String)]) -> render::ListParams<'_> {
    let get = |name| field(query, name).unwrap_or("");
    render::ListParams {
        scheme: get("scheme"),
        event_type: get("event_type"),
        delivery_id: get("delivery_id"),
        from: get("from"),
        until: get("until"),
        q: get("q"),
    }
}

/// `2026-12-01`, `2026-12-01T15:30` or `2026-12-01T15:30:45` (what an
/// `<input type="datetime-local">` sends), read as UTC.
pub(super) fn parse_utc(text: &str) -> Option<SystemTime> {
    let (date, time) = text
        .trim()
        .split_once('T')
        .unwrap_or((text.trim(), "00:00"));
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let mut time = time.splitn(3, ':').map(str::parse::<u64>);
    let (hour, minute) = (time.next()?.ok()?, time.next()?.ok()?);
    let second = time.next().transpose().ok()?.unwrap_or(0);
    if !(1970..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

/// The confirmation shown after an action redirected back.
pub(super) fn notice(query: &[(String, String)]) -> Option<String> {
    let n: u64 = field(query, "n")?.parse().ok()?;
    let already = n == 0;
    if let Some(only) = field(query, "only") {
        return super::gates::notice(field(query, "done")?, !already, only);
    }
    let what = match field(query, "done")? {
        "pause" if already => return Some("Processing was already paused.".to_owned()),
        "pause" => {
            return Some(
                "Processing paused: workers start no new events until it is resumed.".to_owned(),
            );
        }
        "resume" if already => return Some("Processing was already running.".to_owned()),
        "resume" => return Some("Processing resumed.".to_owned()),
        "replay" => "replayed",
        "discard" => "discarded",
        "purge" => "purged (completed events)",
        _ => return None,
    };
    Some(format!("{n} {what}."))
}

/// `90s`, `30m`, `12h`, `7d`, or plain seconds.
pub(super) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let number: u64 = number.trim().parse().ok()?;
    let secs = match unit {
        's' => Some(number),
        'm' => number.checked_mul(60),
        'h' => number.checked_mul(3_600),
        'd' => number.checked_mul(86_400),
        _ => None,
    }?;
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("12h"), Some(Duration::from_secs(43_200)));
        assert_eq!(parse_duration(" 7d "), Some(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("120"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("7w"), None);
        assert_eq!(parse_duration("d"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("18446744073709551615d"), None);
    }

    #[test]
    fn utc_times() {
        let at = |secs| Some(std::time::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(parse_utc("1970-01-01"), at(0));
        assert_eq!(parse_utc("2026-12-01T15:57"), at(1_796_140_620));
        assert_eq!(parse_utc("2026-12-01T15:57:21"), at(1_796_140_641));
        assert_eq!(parse_utc("2000-03-01"), at(951_868_800));
        for bad in [
            "",
            "2026-13-01",
            "2026-12-01T24:00",
            "yesterday",
            "2026-12",
            "1969-12-31",
            "2026-12-01T10",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }

    #[test]
    fn bases_are_plain_paths() {
        assert_eq!(clean_base("/ops/webhooks/"), "/ops/webhooks");
        assert_eq!(clean_base("//evil.example"), "");
        assert_eq!(clean_base("ops"), "");
        assert_eq!(clean_base("/a\"b"), "");
        assert_eq!(clean_base(""), "");
    }
}
