//! The body to sign: a built-in fixture (`--event`), a file (`--body-file`,
//! `-` for stdin) or inline text (`--body`), edited with `--set`.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use clap::Args;

use crate::error::Failure;
use crate::fixtures::{self, FORM, JSON};

/// The body options.
#[derive(Debug, Clone, Args)]
pub(crate) struct BodyArgs {
    /// A built-in event (see `webhooks events <scheme>`; default: the
    /// scheme's first). With --body or --body-file, the event type sent in a
    /// header by the schemes that send one (GitHub, Shopify, GitLab, Linear).
    #[arg(long, short = 'e', value_name = "NAME")]
    pub(crate) event: Option<String>,
    /// The body itself (sent byte for byte).
    #[arg(long, conflicts_with = "body_file", value_name = "TEXT")]
    pub(crate) body: Option<String>,
    /// A file holding the body (sent byte for byte); `-` reads stdin.
    #[arg(long, value_name = "PATH")]
    pub(crate) body_file: Option<PathBuf>,
    /// Edits the body: `data.object.amount=500` (a dotted path in a JSON
    /// body, array indexes as numbers; a field name in a form body). Numbers,
    /// true, false and null are JSON; anything else a string. Repeatable.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub(crate) set: Vec<String>,
    /// The Content-Type to send (default: the fixture's, or JSON; form for
    /// a body that is not JSON sent to a form scheme).
    #[arg(long, value_name = "TYPE")]
    pub(crate) content_type: Option<String>,
}

/// A piece of a body template: bytes of its text, or a placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// `text[start..end]`, as is.
    Text(usize, usize),
    /// `{{id}}`.
    Id,
    /// `{{timestamp}}`.
    Timestamp,
    /// `{{timestamp_ms}}`.
    TimestampMs,
    /// `{{iso}}`.
    Iso,
}

/// `text` cut at its placeholders, once: rendering a delivery is then one
/// pass that copies the pieces (`send --repeat` renders every delivery).
fn pieces(text: &[u8]) -> Vec<Piece> {
    const PLACEHOLDERS: [(&[u8], Piece); 4] = [
        (b"{{id}}", Piece::Id),
        (b"{{timestamp_ms}}", Piece::TimestampMs),
        (b"{{timestamp}}", Piece::Timestamp),
        (b"{{iso}}", Piece::Iso),
    ];
    let mut pieces = Vec::new();
    let (mut start, mut at) = (0, 0);
    while at < text.len() {
        let found = match text[at] {
            b'{' => PLACEHOLDERS
                .iter()
                .find(|(name, _)| text[at..].starts_with(name)),
            _ => None,
        };
        match found {
            Some((name, piece)) => {
                if start < at {
                    pieces.push(Piece::Text(start, at));
                }
                pieces.push(*piece);
                at += name.len();
                start = at;
            }
            None => at += 1,
        }
    }
    if start < text.len() {
        pieces.push(Piece::Text(start, text.len()));
    }
    pieces
}

/// A body before each delivery's id and time go in.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    text: Vec<u8>,
    /// The text cut at its placeholders (fixtures only: a body of your own
    /// is one piece, sent byte for byte).
    pieces: Vec<Piece>,
    edits: Vec<(Vec<String>, serde_json::Value)>,
    /// The Content-Type to send.
    pub(crate) content_type: String,
    /// The event type for the schemes that send it in a header.
    pub(crate) header_event: Option<String>,
    /// The fixture's name, when one is used.
    pub(crate) fixture: Option<&'static str>,
}

impl BodyArgs {
    /// The template these options describe for `scheme`.
    pub(crate) fn template(&self, scheme: &str) -> Result<Template, Failure> {
        let edits = self
            .set
            .iter()
            .map(|s| parse_set(s))
            .collect::<Result<_, _>>()?;
        let given = match (&self.body, &self.body_file) {
            (Some(text), _) => Some(text.clone().into_bytes()),
            (None, Some(path)) if path.as_os_str() == "-" => {
                let mut text = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut text)
                    .map_err(|e| Failure::usage(format!("cannot read the body from stdin: {e}")))?;
                Some(text)
            }
            (None, Some(path)) => Some(std::fs::read(path).map_err(|e| {
                Failure::usage(format!("cannot read --body-file {}: {e}", path.display()))
            })?),
            (None, None) => None,
        };
        let template = match given {
            Some(text) => {
                let json = serde_json::from_slice::<serde_json::Value>(&text).is_ok();
                let form_scheme = webhooks_core::scheme::registry::find(scheme)
                    .is_ok_and(|s| s.content_type == FORM);
                let content_type = match (json, form_scheme) {
                    (false, true) => FORM,
                    _ => JSON,
                };
                Template {
                    pieces: vec![Piece::Text(0, text.len())],
                    text,
                    edits,
                    content_type: content_type.to_owned(),
                    header_event: self.event.clone(),
                    fixture: None,
                }
            }
            None => {
                let fixture = fixtures::find(scheme, self.event.as_deref())?;
                Template {
                    text: fixture.body.as_bytes().to_vec(),
                    pieces: pieces(fixture.body.as_bytes()),
                    edits,
                    content_type: fixture.content_type.to_owned(),
                    header_event: fixture.header_event.map(str::to_owned),
                    fixture: Some(fixture.event),
                }
            }
        };
        Ok(Template {
            content_type: self.content_type.clone().unwrap_or(template.content_type),
            ..template
        })
    }
}

fn parse_set(spec: &str) -> Result<(Vec<String>, serde_json::Value), Failure> {
    let (path, value) = spec
        .split_once('=')
        .ok_or_else(|| Failure::usage("--set needs PATH=VALUE (e.g. data.object.amount=500)"))?;
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(Failure::usage(format!(
            "--set: {path:?} is not a dotted path"
        )));
    }
    let value = match serde_json::from_str::<serde_json::Value>(value) {
        Ok(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v,
        Ok(serde_json::Value::Null) => serde_json::Value::Null,
        _ => serde_json::Value::String(value.to_owned()),
    };
    Ok((path.split('.').map(str::to_owned).collect(), value))
}

impl Template {
    /// The body of the delivery `id` signed at `timestamp`.
    pub(crate) fn render(&self, id: &str, timestamp: u64) -> Result<Vec<u8>, Failure> {
        let mut text = Vec::with_capacity(self.text.len() + 64);
        for piece in &self.pieces {
            match *piece {
                Piece::Text(start, end) => text.extend_from_slice(&self.text[start..end]),
                Piece::Id => text.extend_from_slice(id.as_bytes()),
                Piece::Timestamp => {
                    let _ = write!(text, "{timestamp}");
                }
                Piece::TimestampMs => {
                    let _ = write!(text, "{}", timestamp.saturating_mul(1000));
                }
                Piece::Iso => {
                    text.extend_from_slice(webhooks_core::testing::iso8601(timestamp).as_bytes());
                }
            }
        }
        if self.edits.is_empty() {
            return Ok(text);
        }
        if self.content_type.starts_with(FORM) {
            return Ok(edit_form(&text, &self.edits)?.into_bytes());
        }
        let mut value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
            Failure::usage(format!(
                "--set needs a JSON body; this one is not JSON ({e})"
            ))
        })?;
        for (path, new) in &self.edits {
            set_path(&mut value, path, new.clone())?;
        }
        let mut text = serde_json::to_vec_pretty(&value).unwrap_or_default();
        text.push(b'\n');
        Ok(text)
    }
}

fn set_path(
    value: &mut serde_json::Value,
    path: &[String],
    new: serde_json::Value,
) -> Result<(), Failure> {
    let mut at = value;
    for (depth, key) in path.iter().enumerate() {
        let last = depth + 1 == path.len();
        let here = path[..depth].join(".");
        let here = if here.is_empty() {
            "the body".to_owned()
        } else {
            here
        };
        at = match at {
            serde_json::Value::Object(map) => {
                if last {
                    map.insert(key.clone(), new);
                    return Ok(());
                }
                map.get_mut(key)
                    .ok_or_else(|| Failure::usage(format!("--set: no field {key:?} in {here}")))?
            }
            serde_json::Value::Array(items) => {
                let index: usize = key.parse().map_err(|_| {
                    Failure::usage(format!(
                        "--set: {here} is an array; {key:?} is not an index"
                    ))
                })?;
                let len = items.len();
                let item = items.get_mut(index).ok_or_else(|| {
                    Failure::usage(format!(
                        "--set: index {index} is out of {here} ({len} items)"
                    ))
                })?;
                if last {
                    *item = new;
                    return Ok(());
                }
                item
            }
            _ => {
                return Err(Failure::usage(format!(
                    "--set: {here} is not an object or an array"
                )));
            }
        };
    }
    Ok(())
}

fn edit_form(text: &[u8], edits: &[(Vec<String>, serde_json::Value)]) -> Result<String, Failure> {
    let text = String::from_utf8_lossy(text);
    let mut pairs: Vec<(String, String)> = text
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (p.to_owned(), String::new()),
        })
        .collect();
    for (path, value) in edits {
        if path.len() != 1 {
            return Err(Failure::usage(
                "--set on a form body takes a field name, not a dotted path",
            ));
        }
        let value = match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let value = form_encode(&value);
        match pairs.iter_mut().find(|(k, _)| *k == path[0]) {
            Some(pair) => pair.1 = value,
            None => pairs.push((path[0].clone(), value)),
        }
    }
    Ok(pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&"))
}

/// `application/x-www-form-urlencoded` encoding of a value.
fn form_encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_in_one_pass() {
        let text = b"{\"id\":\"{{id}}\",\"t\":{{timestamp}},\"ms\":{{timestamp_ms}},\"at\":\"{{iso}}\",\"x\":\"{{other}}{\"}";
        let template = Template {
            text: text.to_vec(),
            pieces: pieces(text),
            edits: Vec::new(),
            content_type: JSON.to_owned(),
            header_event: None,
            fixture: None,
        };
        assert_eq!(
            String::from_utf8(template.render("evt_1", 1_700_000_000).unwrap()).unwrap(),
            r#"{"id":"evt_1","t":1700000000,"ms":1700000000000,"at":"2023-11-14T22:13:20Z","x":"{{other}}{"}"#
        );
        assert_eq!(pieces(b""), vec![]);
        assert_eq!(pieces(b"{{id}}"), vec![Piece::Id]);
    }

    #[test]
    fn set_edits_json_paths() {
        let mut v = serde_json::json!({"data": {"object": {"amount": 1}, "items": [{"q": 1}]}});
        set_path(
            &mut v,
            &["data".into(), "object".into(), "amount".into()],
            500.into(),
        )
        .unwrap();
        set_path(
            &mut v,
            &["data".into(), "items".into(), "0".into(), "q".into()],
            2.into(),
        )
        .unwrap();
        assert_eq!(v["data"]["object"]["amount"], 500);
        assert_eq!(v["data"]["items"][0]["q"], 2);
        let err = set_path(
            &mut v,
            &["data".into(), "nope".into(), "x".into()],
            1.into(),
        )
        .unwrap_err();
        assert!(
            err.message.contains("no field \"nope\" in data"),
            "{}",
            err.message
        );
        let err = set_path(
            &mut v,
            &["data".into(), "items".into(), "7".into()],
            1.into(),
        )
        .unwrap_err();
        assert!(err.message.contains("out of data.items"), "{}", err.message);
    }

    #[test]
    fn set_values_are_typed() {
        assert_eq!(parse_set("a=500").unwrap().1, serde_json::json!(500));
        assert_eq!(parse_set("a=true").unwrap().1, serde_json::json!(true));
        assert_eq!(parse_set("a=null").unwrap().1, serde_json::Value::Null);
        assert_eq!(parse_set("a=usd").unwrap().1, serde_json::json!("usd"));
        assert_eq!(
            parse_set("a={\"x\":1}").unwrap().1,
            serde_json::json!("{\"x\":1}")
        );
        assert!(parse_set("novalue").is_err());
        assert!(parse_set("a..b=1").is_err());
    }

    #[test]
    fn set_edits_form_fields() {
        let edits = vec![(vec!["Body".to_owned()], serde_json::json!("hi there&x"))];
        let text = edit_form(b"From=%2B1&Body=hello", &edits).unwrap();
        assert_eq!(text, "From=%2B1&Body=hi+there%26x");
    }
}
