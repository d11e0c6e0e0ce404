//! Search: deliveries and dead letters filtered by a value in the JSON
//! payload or by text in the last error, pushed down to the store.
//!
//! One language for the console's search box, the admin API's `q=` and
//! `webhooks inbox ls --where`: terms joined by ` and `, each
//!
//! | term | matches the events whose |
//! |---|---|
//! | `data.object.customer = cus_123` | payload has the scalar `cus_123` at that path |
//! | `data.object.customer != cus_123` | payload has a scalar other than `cus_123` there |
//! | `data.object.id ^= in_1` | payload has a scalar starting with `in_1` there |
//! | `error ~ timed out` | last error contains `timed out` |
//!
//! A path is keys joined by `.` (letters, digits, `_`, `-`, `$`, `@`);
//! a key of digits only is an array index (`items.0.price.id`). A value
//! is the rest of the term, trimmed; quote it (`"…"`, with `\"` and `\\`)
//! to keep spaces at its ends or to hold ` and `. Scalars compare by their
//! text: a string by its content, a number as written (SQLite writes
//! reals in its own shortest form), `true` / `false`; a JSON `null`, an
//! object or an array is no scalar (matches no term), nor is a missing
//! path or a body that is not JSON. Comparisons are exact (case and
//! accents count).
//!
//! Every value reaches the database as a bound parameter, never inside
//! the statement: PostgreSQL reads the body through the
//! `<table>_payload(bytea)` function `migrate()` creates (`jsonb`; an
//! equality uses a `jsonb_path_ops` GIN index on it when one exists, see
//! docs/inbox.md), MySQL/MariaDB through `JSON_VALUE`, SQLite through
//! `json_extract`; Redis decodes bodies in its listing scripts, within
//! their scan budget (a page cut short by the budget has a `next` cursor).
//!
//! ```
//! use webhooks_core::inbox::Search;
//!
//! let search: Search = "data.object.customer = cus_123 and error ~ card declined".parse()?;
//! assert!(search.matches(br#"{"data":{"object":{"customer":"cus_123"}}}"#, Some("402: card declined")));
//! assert!(!search.matches(br#"{"data":{"object":{"customer":"cus_999"}}}"#, Some("402: card declined")));
//! assert_eq!(search.to_string(), "data.object.customer = cus_123 and error ~ \"card declined\"");
//! assert!("data..x = 1".parse::<Search>().is_err());
//! # Ok::<(), webhooks_core::inbox::SearchError>(())
//! ```

use std::fmt;
use std::str::FromStr;

/// The most terms a search holds.
pub const MAX_SEARCH_TERMS: usize = 4;

/// The most keys in a path.
pub const MAX_PATH_DEPTH: usize = 16;

/// The longest value, in bytes.
pub const MAX_SEARCH_VALUE_LEN: usize = 256;

/// The longest path, in bytes.
pub const MAX_PATH_LEN: usize = 256;

/// The longest search text, in bytes: room for the longest canonical text
/// ([`MAX_SEARCH_TERMS`] terms of the longest path and value, every
/// character of the value escaped), so that what `Display` prints always
/// parses back.
pub const MAX_SEARCH_LEN: usize = 4_096;

/// How a payload term compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SearchOp {
    /// `=`: the scalar is the value.
    Eq,
    /// `!=`: the scalar is another value.
    Ne,
    /// `^=`: the scalar starts with the value.
    Prefix,
}

impl SearchOp {
    /// `=`, `!=` or `^=`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::Ne => "!=",
            Self::Prefix => "^=",
        }
    }
}

/// One key of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// An object's key.
    Key(String),
    /// An array's index (a key of digits only).
    Index(u32),
}

/// One term of a [`Search`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SearchTerm {
    /// A scalar in the payload at `path`.
    Payload {
        /// The path from the root.
        path: Vec<Segment>,
        /// The comparison.
        op: SearchOp,
        /// The value.
        value: String,
    },
    /// Text in the last error.
    ErrorContains(String),
}

/// A parsed search: its terms, all of which must match.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Search {
    terms: Vec<SearchTerm>,
}

/// Why a search text does not parse; its message says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("search: {0}")]
pub struct SearchError(String);

impl Search {
    /// The terms, in order.
    #[must_use]
    pub fn terms(&self) -> &[SearchTerm] {
        &self.terms
    }

    /// Whether `body` and `last_error` match every term (the stores'
    /// semantics, for stores that filter in process and for tests).
    #[must_use]
    pub fn matches(&self, body: &[u8], last_error: Option<&str>) -> bool {
        let mut payload: Option<Option<serde_json::Value>> = None;
        self.terms.iter().all(|term| match term {
            SearchTerm::ErrorContains(text) => {
                last_error.is_some_and(|e| e.contains(text.as_str()))
            }
            SearchTerm::Payload { path, op, value } => {
                let parsed = payload.get_or_insert_with(|| serde_json::from_slice(body).ok());
                let Some(found) = parsed.as_ref().and_then(|v| scalar_at(v, path)) else {
                    return false;
                };
                match op {
                    SearchOp::Eq => found == *value,
                    SearchOp::Ne => found != *value,
                    SearchOp::Prefix => found.starts_with(value.as_str()),
                }
            }
        })
    }
}

/// The scalar's text at `path`, if there is one.
fn scalar_at(root: &serde_json::Value, path: &[Segment]) -> Option<String> {
    let mut at = root;
    for segment in path {
        at = match (segment, at) {
            (Segment::Key(key), serde_json::Value::Object(map)) => map.get(key)?,
            (Segment::Index(i), serde_json::Value::Array(items)) => items.get(*i as usize)?,
            _ => return None,
        };
    }
    match at {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The broker-backed inboxes list from their broker's state, without
/// the bodies' values at hand: a search there is refused, saying so.
#[cfg(any(feature = "nats", feature = "rabbitmq"))]
pub(crate) fn refuse_in_broker(
    search: Option<&Search>,
    inbox: &str,
) -> Result<(), super::InboxError> {
    match search {
        None => Ok(()),
        Some(_) => Err(super::InboxError::Protocol(format!(
            "the {inbox} inbox does not search payloads or errors: search needs a database \
             inbox (SQLite, PostgreSQL, MySQL/MariaDB, Redis; see docs/inbox.md)"
        ))),
    }
}

/// The path as SQLite and MySQL read it: `$."data"."items"[0]`.
#[cfg_attr(not(feature = "_sql"), allow(dead_code))]
pub(crate) fn json_path(path: &[Segment]) -> String {
    let mut out = String::from("$");
    for segment in path {
        match segment {
            Segment::Key(key) => {
                out.push_str(".\"");
                out.push_str(key);
                out.push('"');
            }
            Segment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// The path as PostgreSQL's `#>` reads it: `{data,items,0}`.
#[cfg_attr(not(feature = "_sql"), allow(dead_code))]
pub(crate) fn pg_path(path: &[Segment]) -> String {
    let keys: Vec<String> = path
        .iter()
        .map(|segment| match segment {
            Segment::Key(key) => key.clone(),
            Segment::Index(i) => i.to_string(),
        })
        .collect();
    format!("{{{}}}", keys.join(","))
}

/// The JSON documents an equality is contained in (PostgreSQL's `@>`, which
/// a `jsonb_path_ops` index answers): the value as a string, and as the
/// number or boolean it spells when it spells one. An index segment
/// becomes a one-element array (containment then matches any element; the
/// exact comparison that follows keeps the indexed one).
#[cfg_attr(not(feature = "_sql"), allow(dead_code))]
pub(crate) fn containments(path: &[Segment], value: &str) -> Vec<String> {
    let mut leaves = vec![serde_json::Value::String(value.to_owned())];
    if let Ok(number) = value.parse::<serde_json::Number>()
        && number.to_string() == value
    {
        leaves.push(serde_json::Value::Number(number));
    }
    if let Ok(flag) = value.parse::<bool>() {
        leaves.push(serde_json::Value::Bool(flag));
    }
    leaves
        .into_iter()
        .map(|leaf| {
            let mut doc = leaf;
            for segment in path.iter().rev() {
                doc = match segment {
                    Segment::Key(key) => {
                        let mut map = serde_json::Map::new();
                        map.insert(key.clone(), doc);
                        serde_json::Value::Object(map)
                    }
                    Segment::Index(_) => serde_json::Value::Array(vec![doc]),
                };
            }
            doc.to_string()
        })
        .collect()
}

/// The terms as Redis' listing scripts read them: a JSON array of
/// `[op, [key or index, ...], value]` (`op`: `eq`, `ne`, `pre`, `err`;
/// an index as a number).
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn script_spec(search: &Search) -> String {
    let terms: Vec<serde_json::Value> = search
        .terms
        .iter()
        .map(|term| match term {
            SearchTerm::ErrorContains(text) => serde_json::json!(["err", [], text]),
            SearchTerm::Payload { path, op, value } => {
                let op = match op {
                    SearchOp::Eq => "eq",
                    SearchOp::Ne => "ne",
                    SearchOp::Prefix => "pre",
                };
                let path: Vec<serde_json::Value> = path
                    .iter()
                    .map(|segment| match segment {
                        Segment::Key(key) => serde_json::Value::String(key.clone()),
                        Segment::Index(i) => serde_json::Value::from(*i),
                    })
                    .collect();
                serde_json::json!([op, path, value])
            }
        })
        .collect();
    serde_json::Value::Array(terms).to_string()
}

fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$' | '@')
}

/// Splits `text` at ` and ` (any case) outside quotes.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if quoted {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => quoted = false,
                _ => {}
            }
        } else if b == b'"' {
            quoted = true;
        } else if b == b' '
            && bytes.len() >= i + 5
            && bytes[i + 1..i + 4].eq_ignore_ascii_case(b"and")
            && bytes[i + 4] == b' '
        {
            terms.push(&text[start..i]);
            start = i + 5;
            i += 5;
            continue;
        }
        i += 1;
    }
    terms.push(&text[start..]);
    terms
}

/// A value: quoted (escapes `\"`, `\\`) or the trimmed rest.
fn parse_value(raw: &str) -> Result<String, SearchError> {
    let raw = raw.trim();
    let quoted = raw.starts_with('"');
    let value = if let Some(inner) = raw.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = inner.chars();
        let mut closed = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e @ ('"' | '\\')) => out.push(e),
                    _ => {
                        return Err(SearchError(
                            "in a quoted value, \\ escapes only \" and \\".into(),
                        ));
                    }
                },
                '"' => {
                    closed = true;
                    break;
                }
                c => out.push(c),
            }
        }
        if !closed {
            return Err(SearchError("a quoted value has no closing \"".into()));
        }
        if !chars.as_str().trim().is_empty() {
            return Err(SearchError("text after a quoted value".into()));
        }
        out
    } else {
        raw.to_owned()
    };
    if value.is_empty() && !quoted {
        return Err(SearchError(
            "a term has no value (quote \"\" for an empty one)".into(),
        ));
    }
    if value.len() > MAX_SEARCH_VALUE_LEN {
        return Err(SearchError(format!(
            "a value is longer than {MAX_SEARCH_VALUE_LEN} bytes"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(SearchError("a value holds a control character".into()));
    }
    Ok(value)
}

fn parse_path(raw: &str) -> Result<Vec<Segment>, SearchError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(SearchError(
            "a term starts with a path (data.object.customer) or `error`".into(),
        ));
    }
    let mut path = Vec::new();
    for key in raw.split('.') {
        if key.is_empty() || !key.chars().all(key_char) {
            return Err(SearchError(format!(
                "`{}` is not a path: keys of letters, digits, _ - $ @ joined by `.`",
                raw.chars().take(64).collect::<String>()
            )));
        }
        path.push(match key.parse::<u32>() {
            Ok(i) if key.bytes().all(|b| b.is_ascii_digit()) => Segment::Index(i),
            _ => Segment::Key(key.to_owned()),
        });
    }
    if raw.len() > MAX_PATH_LEN {
        return Err(SearchError(format!(
            "a path is longer than {MAX_PATH_LEN} bytes"
        )));
    }
    if path.len() > MAX_PATH_DEPTH {
        return Err(SearchError(format!(
            "a path has more than {MAX_PATH_DEPTH} keys"
        )));
    }
    Ok(path)
}

fn parse_term(text: &str) -> Result<SearchTerm, SearchError> {
    // The operator: the first `!=`, `^=`, `=` or `~` outside the path.
    let at = text.find(['=', '~']).ok_or_else(|| {
        SearchError(format!(
            "`{}` has no operator (=, !=, ^=, or ~ after error)",
            text.trim()
        ))
    })?;
    let (op_start, op) = match (&text[at..at + 1], text[..at].chars().last()) {
        ("~", _) => (at, None),
        ("=", Some('!')) => (at - 1, Some(SearchOp::Ne)),
        ("=", Some('^')) => (at - 1, Some(SearchOp::Prefix)),
        _ => (at, Some(SearchOp::Eq)),
    };
    let value = parse_value(&text[at + 1..])?;
    match op {
        None => {
            if text[..op_start].trim() != "error" {
                return Err(SearchError("`~` (contains) is for `error ~ text`".into()));
            }
            if value.is_empty() {
                return Err(SearchError("`error ~` needs text".into()));
            }
            Ok(SearchTerm::ErrorContains(value))
        }
        Some(op) => Ok(SearchTerm::Payload {
            path: parse_path(&text[..op_start])?,
            op,
            value,
        }),
    }
}

impl FromStr for Search {
    type Err = SearchError;

    fn from_str(text: &str) -> Result<Self, SearchError> {
        if text.len() > MAX_SEARCH_LEN {
            return Err(SearchError(format!("longer than {MAX_SEARCH_LEN} bytes")));
        }
        if text.trim().is_empty() {
            return Err(SearchError("empty".into()));
        }
        let parts = split_terms(text);
        if parts.len() > MAX_SEARCH_TERMS {
            return Err(SearchError(format!("more than {MAX_SEARCH_TERMS} terms")));
        }
        let terms = parts
            .into_iter()
            .map(parse_term)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { terms })
    }
}

/// A value as the canonical text writes it: quoted when empty, when it
/// holds a space or starts with a quote (escaping `"` and `\`), else bare.
fn write_value(f: &mut fmt::Formatter<'_>, value: &str) -> fmt::Result {
    if !(value.is_empty() || value.contains(' ') || value.starts_with('"')) {
        return f.write_str(value);
    }
    f.write_str("\"")?;
    for c in value.chars() {
        if matches!(c, '"' | '\\') {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

impl fmt::Display for Search {
    /// The canonical text (parses back to the same search); values with
    /// spaces are quoted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(" and ")?;
            }
            match term {
                SearchTerm::ErrorContains(text) => {
                    f.write_str("error ~ ")?;
                    write_value(f, text)?;
                }
                SearchTerm::Payload { path, op, value } => {
                    for (j, segment) in path.iter().enumerate() {
                        if j > 0 {
                            f.write_str(".")?;
                        }
                        match segment {
                            Segment::Key(key) => f.write_str(key)?,
                            Segment::Index(i) => write!(f, "{i}")?,
                        }
                    }
                    write!(f, " {} ", op.as_str())?;
                    write_value(f, value)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Search {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn terms_parse() {
        let s = parse("data.object.customer = cus_123 AND items.0.sku ^= SKU- and error ~ 502");
        assert_eq!(
            s.terms(),
            [
                SearchTerm::Payload {
                    path: vec![
                        Segment::Key("data".into()),
                        Segment::Key("object".into()),
                        Segment::Key("customer".into())
                    ],
                    op: SearchOp::Eq,
                    value: "cus_123".into()
                },
                SearchTerm::Payload {
                    path: vec![
                        Segment::Key("items".into()),
                        Segment::Index(0),
                        Segment::Key("sku".into())
                    ],
                    op: SearchOp::Prefix,
                    value: "SKU-".into()
                },
                SearchTerm::ErrorContains("502".into()),
            ]
        );
        assert_eq!(
            parse("a!=b").terms(),
            [SearchTerm::Payload {
                path: vec![Segment::Key("a".into())],
                op: SearchOp::Ne,
                value: "b".into()
            }]
        );
        // Quoted values keep spaces, `and` and `=`.
        assert_eq!(
            parse(r#"note = " rock and roll = \"yes\" ""#).terms(),
            [SearchTerm::Payload {
                path: vec![Segment::Key("note".into())],
                op: SearchOp::Eq,
                value: r#" rock and roll = "yes" "#.into()
            }]
        );
        assert_eq!(parse(r#"a = """#).terms().len(), 1);
    }

    #[test]
    fn bad_searches_say_why() {
        for (text, says) in [
            ("", "empty"),
            ("data.object", "no operator"),
            ("data..x = 1", "not a path"),
            ("da ta = 1", "not a path"),
            ("x = ", "no value"),
            ("body ~ x", "error ~ text"),
            ("x = \"open", "closing"),
            ("x = \"a\" b", "after a quoted"),
            ("x = a\u{7}", "control"),
            ("a=1 and b=2 and c=3 and d=4 and e=5", "more than 4"),
        ] {
            let error = text.parse::<Search>().expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
        let deep = vec!["k"; MAX_PATH_DEPTH + 1].join(".") + " = 1";
        assert!(deep.parse::<Search>().is_err());
        let long = format!("k = {}", "v".repeat(MAX_SEARCH_VALUE_LEN + 1));
        assert!(long.parse::<Search>().is_err());
    }

    #[test]
    fn the_longest_canonical_text_parses_back() {
        let path = vec!["k".repeat(15); MAX_PATH_DEPTH].join(".");
        assert!(path.len() <= MAX_PATH_LEN);
        let value = "\"".repeat(MAX_SEARCH_VALUE_LEN);
        let term = format!("{path} != {}", serde_json::Value::String(value.clone()));
        let text = vec![term; MAX_SEARCH_TERMS].join(" and ");
        let search = parse(&text);
        let printed = search.to_string();
        assert!(printed.len() <= MAX_SEARCH_LEN, "{}", printed.len());
        assert_eq!(parse(&printed), search);
        let long_path = format!("{} = 1", "k".repeat(MAX_PATH_LEN + 1));
        assert!(long_path.parse::<Search>().is_err());
    }

    #[test]
    fn display_parses_back() {
        for text in [
            "data.object.customer = cus_123",
            "a.0.b != x and error ~ \"timed out\"",
            r#"note = " rock and roll = \"yes\" ""#,
            "a ^= pre",
            "a = \"\"",
        ] {
            let search = parse(text);
            assert_eq!(parse(&search.to_string()), search, "{text} → {search}");
        }
    }

    #[test]
    fn matching_is_on_scalars() {
        let body = br#"{"data":{"object":{"customer":"cus_123","amount":1500,"paid":true,"note":null,"lines":[{"sku":"SKU-1"}],"meta":{}}}}"#;
        let yes = |text: &str| parse(text).matches(body, Some("upstream said 502"));
        assert!(yes("data.object.customer = cus_123"));
        assert!(yes("data.object.amount = 1500"));
        assert!(yes("data.object.paid = true"));
        assert!(yes("data.object.lines.0.sku ^= SKU-"));
        assert!(yes("data.object.customer != cus_999"));
        assert!(yes("error ~ said 502"));
        assert!(!yes("error ~ 503"));
        assert!(!yes("data.object.note = null"), "null is no scalar");
        assert!(!yes("data.object.note != x"), "nor for !=");
        assert!(!yes("data.object.meta != x"), "an object is no scalar");
        assert!(
            !yes("data.object.missing != x"),
            "a missing path matches nothing"
        );
        assert!(!yes("data.object.customer = CUS_123"), "exact");
        assert!(!parse("a = 1").matches(b"not json", None));
        assert!(!parse("error ~ x").matches(b"{}", None));
    }

    #[test]
    fn paths_for_each_store() {
        let path = parse("data.items.0.id = x");
        let SearchTerm::Payload { path, .. } = &path.terms()[0] else {
            panic!()
        };
        assert_eq!(json_path(path), "$.\"data\".\"items\"[0].\"id\"");
        assert_eq!(pg_path(path), "{data,items,0,id}");
        assert_eq!(
            containments(path, "42"),
            [
                r#"{"data":{"items":[{"id":"42"}]}}"#,
                r#"{"data":{"items":[{"id":42}]}}"#
            ]
        );
        assert_eq!(
            script_spec(&parse("a.1 ^= x and error ~ y")),
            r#"[["pre",["a",1],"x"],["err",[],"y"]]"#
        );
    }
}
