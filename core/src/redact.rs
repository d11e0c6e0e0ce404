//! What the console, the inbox admin API and `webhooks inbox show` show of
//! a kept event: credential headers and payload fields masked, to admins
//! too, and whatever an application hook decides.
//!
//! **Headers.** A header is a credential when its name says so
//! ([`is_credential_header`]: `Authorization`, `Proxy-Authorization`,
//! `Cookie`, `Set-Cookie`, and any name containing `signature`, `hmac`,
//! `token`, `secret`, `auth`, `password`, `api-key`, `apikey`, `credential`
//! or `session`), or when it was named explicitly ([`Redaction::header`]):
//! every header your verifier reads ([`Redaction::verifier`], through
//! [`RequestVerifier::credential_headers`]), or any other.
//!
//! **Payload fields.** In a JSON body, every object member whose key is
//! named like a credential ([`is_credential_field`]: `client_secret`,
//! `api_key`, `password`, `access-token`…), at any depth, and every
//! configured path ([`Redaction::field`]: `data.object.customer.email`;
//! arrays are stepped through, so `data.items.price` names the `price` of
//! every item) is shown as its type and size only
//! ([`Redaction::mask_field`]: `"redacted (string, 24 bytes)"`). Key order
//! and the spelling of everything else are kept. Bodies that are not JSON
//! are shown as they are; JSON bodies longer than the limit a surface
//! parses ([`DEFAULT_BODY_LIMIT`], the console's `body_cap`) are not parsed
//! and so not shown ([`ShownBody::NotParsed`]), nor are bodies that start
//! like JSON but do not parse ([`ShownBody::Malformed`]).
//!
//! **The hook** ([`Redaction::hook`]) sees every header, every field and
//! the body as a whole, with the surface, scheme and event type, and
//! decides [`Decision::Show`], [`Decision::Mask`] or [`Decision::Hide`];
//! [`RedactionContext::default_decision`] is what the rules above decided.
//!
//! ```
//! use webhooks_core::redact::{Decision, Redaction, ShownBody, Surface, Target, is_credential_header};
//!
//! assert!(is_credential_header("X-Shopify-Hmac-Sha256"));
//! assert!(!is_credential_header("X-Shopify-Topic"));
//! assert_eq!(Redaction::mask("hunter2"), "redacted (7 bytes)");
//!
//! let redaction = Redaction::new()
//!     .header(http::HeaderName::from_static("x-digest"))
//!     .field("data.object.customer.email")
//!     .hook(|ctx| match ctx.target() {
//!         // Nobody needs the card's fingerprint, not even masked.
//!         Target::Field { key: "fingerprint", .. } => Decision::Hide,
//!         _ => ctx.default_decision(),
//!     });
//! assert!(redaction.is_redacted("X-Digest"));
//!
//! let body = br#"{"id":"pi_1","client_secret":"pi_1_secret_abc","data":{"object":
//!     {"customer":{"email":"a@example.com","name":"Ada"},"card":{"fingerprint":"Xt5"}}}}"#;
//! let event = redaction.event(Surface::Console, "stripe", Some("payment_intent.created"));
//! let ShownBody::Json { text, redacted } = event.body(body, 64 * 1024) else {
//!     panic!("a JSON body");
//! };
//! assert_eq!(redacted, 3);
//! assert_eq!(
//!     text,
//!     r#"{"id":"pi_1","client_secret":"redacted (string, 15 bytes)","data":{"object":{"customer":{"email":"redacted (string, 13 bytes)","name":"Ada"},"card":{}}}}"#
//! );
//! ```

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use http::HeaderName;

use crate::RequestVerifier;

/// Parts of a header name that mark its value as a credential.
const CREDENTIAL_PARTS: &[&str] = &[
    "signature",
    "hmac",
    "auth",
    "cookie",
    "token",
    "secret",
    "password",
    "api-key",
    "apikey",
    "credential",
    "session",
];

/// Parts of a JSON key that mark its value as a credential (`-` read as
/// `_`). Narrower than the headers' `auth`: payloads carry `author`s.
const FIELD_PARTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "hmac",
    "signature",
    "api_key",
    "apikey",
    "credential",
    "session",
    "authorization",
];

/// The longest JSON body the admin API and the CLI parse to redact its
/// fields (64 KiB, the console's default `body_cap`): a longer JSON body is
/// not shown ([`ShownBody::NotParsed`]).
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;

/// The deepest JSON nesting parsed; a deeper body is not shown
/// ([`ShownBody::NotParsed`]).
const MAX_DEPTH: usize = 512;

/// Whether a header named `name` (any case; `_` read as `-`) carries a
/// credential by its name alone: see the [module](self).
#[must_use]
pub fn is_credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    CREDENTIAL_PARTS.iter().any(|part| name.contains(part))
}

/// Whether a JSON object key (any case; `-` read as `_`) names a credential:
/// it contains `token`, `secret`, `password`, `hmac`, `signature`,
/// `api_key`, `apikey`, `credential`, `session` or `authorization`.
#[must_use]
pub fn is_credential_field(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('-', "_");
    FIELD_PARTS.iter().any(|part| key.contains(part))
}

/// Where a kept event is being shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Surface {
    /// The web console's pages.
    Console,
    /// The inbox admin API's JSON answers.
    AdminApi,
    /// `webhooks inbox show` (and `--json`).
    Cli,
}

/// What is shown of a header, a field or a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// As it is.
    Show,
    /// Its type and size only ([`Redaction::mask`], [`Redaction::mask_field`]).
    Mask,
    /// Nothing: the header, the member or the body is left out.
    Hide,
}

/// What a [`RedactionContext`] asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target<'a> {
    /// A kept header (its name as kept).
    Header(&'a str),
    /// A member of a JSON object: `path` is the keys from the root joined by
    /// `.` (arrays stepped through: `data.items.price`), `key` the last one.
    Field {
        /// `data.object.customer.email`.
        path: &'a str,
        /// `email`.
        key: &'a str,
    },
    /// The body as a whole, asked first: [`Decision::Mask`] shows its size
    /// only, [`Decision::Hide`] nothing, [`Decision::Show`] goes on to its
    /// fields.
    Body,
}

/// What a [`Redaction::hook`] is asked about: where, which event, what.
/// Never holds the value itself.
#[derive(Debug, Clone, Copy)]
pub struct RedactionContext<'a> {
    surface: Surface,
    scheme: &'a str,
    event_type: Option<&'a str>,
    target: Target<'a>,
    default: Decision,
}

impl<'a> RedactionContext<'a> {
    /// Where the event is shown.
    #[must_use]
    pub fn surface(&self) -> Surface {
        self.surface
    }

    /// The event's scheme (`stripe`).
    #[must_use]
    pub fn scheme(&self) -> &'a str {
        self.scheme
    }

    /// The event's type, when its scheme names one.
    #[must_use]
    pub fn event_type(&self) -> Option<&'a str> {
        self.event_type
    }

    /// The header, the field or the body asked about.
    #[must_use]
    pub fn target(&self) -> Target<'a> {
        self.target
    }

    /// The header's name, when a header is asked about.
    #[must_use]
    pub fn header_name(&self) -> Option<&'a str> {
        match self.target {
            Target::Header(name) => Some(name),
            _ => None,
        }
    }

    /// The field's path, when a JSON member is asked about.
    #[must_use]
    pub fn field_path(&self) -> Option<&'a str> {
        match self.target {
            Target::Field { path, .. } => Some(path),
            _ => None,
        }
    }

    /// What the built-in rules and the configured names decided: return it
    /// for everything your hook has no opinion on.
    #[must_use]
    pub fn default_decision(&self) -> Decision {
        self.default
    }
}

/// The application's decision, shared by every clone.
type Hook = Arc<dyn Fn(&RedactionContext<'_>) -> Decision + Send + Sync + 'static>;

/// What is redacted: the headers and fields named like credentials, the
/// ones configured here, and whatever the [hook](Self::hook) decides. Cheap
/// to clone; its `Debug` shows the configured names, never a value.
#[derive(Clone, Default)]
pub struct Redaction {
    extra: Vec<HeaderName>,
    fields: Vec<String>,
    hook: Option<Hook>,
}

impl fmt::Debug for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redaction")
            .field("headers", &self.extra)
            .field("fields", &self.fields)
            .field("hook", &self.hook.as_ref().map(|_| "Fn"))
            .finish()
    }
}

impl Redaction {
    /// Only the names [`is_credential_header`] and [`is_credential_field`]
    /// recognise.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Redacts the header `name` too.
    #[must_use]
    pub fn header(mut self, name: HeaderName) -> Self {
        if !self.extra.contains(&name) {
            self.extra.push(name);
        }
        self
    }

    /// Redacts each of `names` too.
    #[must_use]
    pub fn headers(self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        names.into_iter().fold(self, Self::header)
    }

    /// Redacts every header `verifier` reads a credential from
    /// ([`RequestVerifier::credential_headers`]): a generic HMAC scheme's
    /// configured signature header, say, whatever its name.
    #[must_use]
    pub fn verifier(self, verifier: &(impl RequestVerifier + ?Sized)) -> Self {
        self.headers(verifier.credential_headers())
    }

    /// Masks the JSON member at `path` too: keys from the root joined by
    /// `.` (`data.object.customer.email`), exact case; arrays are stepped
    /// through (`data.items.price`, or `data.items[].price`).
    #[must_use]
    pub fn field(mut self, path: impl Into<String>) -> Self {
        let path = path.into().replace("[]", "");
        if !self.fields.contains(&path) {
            self.fields.push(path);
        }
        self
    }

    /// Masks each of `paths` too ([`field`](Self::field)).
    #[must_use]
    pub fn fields<S: Into<String>>(self, paths: impl IntoIterator<Item = S>) -> Self {
        paths.into_iter().fold(self, Self::field)
    }

    /// Lets `decide` say what is shown of every header, every JSON member
    /// and every body, wherever it is shown (console, admin API, CLI run
    /// through this library). It is given the rules' decision
    /// ([`RedactionContext::default_decision`]): return it when you have no
    /// opinion. It may show what the rules would mask, so keep it narrow.
    /// A second call replaces the first.
    #[must_use]
    pub fn hook(
        mut self,
        decide: impl Fn(&RedactionContext<'_>) -> Decision + Send + Sync + 'static,
    ) -> Self {
        self.hook = Some(Arc::new(decide));
        self
    }

    /// Whether the header `name` is redacted by the rules (its name, the
    /// configured ones), before any hook.
    #[must_use]
    pub fn is_redacted(&self, name: &str) -> bool {
        is_credential_header(name) || self.is_configured(name)
    }

    /// Whether `name` is one of the names configured here (not recognised
    /// by [`is_credential_header`] alone).
    pub(crate) fn is_configured(&self, name: &str) -> bool {
        self.extra
            .iter()
            .any(|extra| extra.as_str().eq_ignore_ascii_case(name))
    }

    /// What is shown instead of a redacted header value: its length only.
    #[must_use]
    pub fn mask(value: &str) -> String {
        format!("redacted ({} bytes)", value.len())
    }

    /// What is shown instead of a redacted JSON value: its type and size
    /// (`redacted (string, 24 bytes)`, `redacted (object, 310 bytes)`;
    /// a string's size is its decoded length, any other's as sent).
    #[must_use]
    pub fn mask_field(kind: &str, bytes: usize) -> String {
        format!("redacted ({kind}, {bytes} bytes)")
    }

    /// `headers` as shown, without an event's context (the hook sees an
    /// empty scheme): each redacted value replaced by its [`mask`](Self::mask),
    /// hidden ones left out. Prefer [`event`](Self::event).
    #[must_use]
    pub fn apply(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        self.event(Surface::AdminApi, "", None).apply(headers)
    }

    /// The redaction of one event's headers and body on `surface`.
    #[must_use]
    pub fn event<'a>(
        &'a self,
        surface: Surface,
        scheme: &'a str,
        event_type: Option<&'a str>,
    ) -> EventRedaction<'a> {
        EventRedaction {
            redaction: self,
            surface,
            scheme,
            event_type,
        }
    }
}

/// One header as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownHeader {
    /// Its name as kept.
    pub name: String,
    /// Its value, or the mask when `masked`.
    pub value: String,
    /// Whether `value` is the [mask](Redaction::mask).
    pub masked: bool,
}

/// A body as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShownBody<'b> {
    /// JSON: exactly as sent when nothing was redacted, else compact with
    /// the key order and spelling kept and `redacted` members masked or
    /// left out.
    Json {
        /// The text to show.
        text: Cow<'b, str>,
        /// How many members were masked or left out.
        redacted: usize,
    },
    /// UTF-8 that is not JSON: as sent.
    Text(&'b str),
    /// Not UTF-8.
    Binary {
        /// Its size.
        len: usize,
    },
    /// A JSON body longer than the limit (or nested deeper than 512): not
    /// parsed, so its fields could not be redacted, so not shown.
    NotParsed {
        /// Its size.
        len: usize,
        /// The limit it is over.
        limit: usize,
    },
    /// Starts like JSON (`{`, `[`) but does not parse: its fields could not
    /// be redacted, so it is not shown (the console's raw download has it).
    Malformed {
        /// Its size.
        len: usize,
    },
    /// The hook masked the body as a whole.
    Masked {
        /// Its size.
        len: usize,
    },
    /// The hook hid the body.
    Hidden,
}

impl ShownBody<'_> {
    /// The JSON members an answer shows for this body (the admin API's item
    /// answers and `webhooks inbox show --json`): `body` (the text, or
    /// `null`), `body_redacted` (how many fields, when any), `body_base64`
    /// for binary (`bytes`, the body as kept), `body_omitted` (why `null`).
    #[must_use]
    pub fn json_members(&self, bytes: &[u8]) -> Vec<(&'static str, serde_json::Value)> {
        use base64::Engine as _;
        use serde_json::Value;
        match self {
            Self::Json { text, redacted } => {
                let mut members = vec![("body", Value::String(text.clone().into_owned()))];
                if *redacted > 0 {
                    members.push(("body_redacted", Value::from(*redacted)));
                }
                members
            }
            Self::Text(text) => vec![("body", Value::String((*text).to_owned()))],
            Self::Binary { .. } => vec![(
                "body_base64",
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
            )],
            other => vec![
                ("body", Value::Null),
                (
                    "body_omitted",
                    Value::String(other.note().unwrap_or_default()),
                ),
            ],
        }
    }

    /// A one-line note for what is not shown as text (`None` for
    /// [`Json`](Self::Json) and [`Text`](Self::Text)).
    #[must_use]
    pub fn note(&self) -> Option<String> {
        match self {
            Self::Json { .. } | Self::Text(_) => None,
            Self::Binary { len } => Some(format!("binary, {len} bytes")),
            Self::NotParsed { len, limit } => Some(format!(
                "not shown: {len} bytes of JSON is over the {limit}-byte limit parsed for redaction"
            )),
            Self::Malformed { len } => Some(format!(
                "not shown: {len} bytes that start like JSON but do not parse, so their fields could not be redacted"
            )),
            Self::Masked { len } => Some(format!("redacted ({len} bytes)")),
            Self::Hidden => Some("hidden".to_owned()),
        }
    }
}

/// A [`Redaction`] applied to one event: see [`Redaction::event`].
#[derive(Clone, Copy)]
pub struct EventRedaction<'a> {
    redaction: &'a Redaction,
    surface: Surface,
    scheme: &'a str,
    event_type: Option<&'a str>,
}

impl fmt::Debug for EventRedaction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventRedaction")
            .field("surface", &self.surface)
            .field("scheme", &self.scheme)
            .field("event_type", &self.event_type)
            .finish_non_exhaustive()
    }
}

impl<'a> EventRedaction<'a> {
    fn decide(&self, target: Target<'_>, default: Decision) -> Decision {
        match &self.redaction.hook {
            None => default,
            Some(hook) => hook(&RedactionContext {
                surface: self.surface,
                scheme: self.scheme,
                event_type: self.event_type,
                target,
                default,
            }),
        }
    }

    /// What is shown of the header `name`.
    #[must_use]
    pub fn header(&self, name: &str) -> Decision {
        let default = if self.redaction.is_redacted(name) {
            Decision::Mask
        } else {
            Decision::Show
        };
        self.decide(Target::Header(name), default)
    }

    /// `headers` as shown: masked values replaced, hidden ones left out.
    #[must_use]
    pub fn headers(&self, headers: &[(String, String)]) -> Vec<ShownHeader> {
        headers
            .iter()
            .filter_map(|(name, value)| {
                let (value, masked) = match self.header(name) {
                    Decision::Show => (value.clone(), false),
                    Decision::Mask => (Redaction::mask(value), true),
                    Decision::Hide => return None,
                };
                Some(ShownHeader {
                    name: name.clone(),
                    value,
                    masked,
                })
            })
            .collect()
    }

    /// `headers` as shown, as name–value pairs.
    #[must_use]
    pub fn apply(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        self.headers(headers)
            .into_iter()
            .map(|h| (h.name, h.value))
            .collect()
    }

    /// What the hook decides for the body as a whole ([`Target::Body`];
    /// [`Decision::Show`] without a hook).
    #[must_use]
    pub fn body_decision(&self) -> Decision {
        self.decide(Target::Body, Decision::Show)
    }

    /// What is shown of `body`: a JSON body up to `limit` bytes with its
    /// fields redacted (a longer one is not parsed, and not shown), other
    /// text as sent, binary as its size.
    #[must_use]
    pub fn body<'b>(&self, body: &'b [u8], limit: usize) -> ShownBody<'b> {
        match self.body_decision() {
            Decision::Show => {}
            Decision::Mask => return ShownBody::Masked { len: body.len() },
            Decision::Hide => return ShownBody::Hidden,
        }
        let Ok(text) = std::str::from_utf8(body) else {
            return ShownBody::Binary { len: body.len() };
        };
        let looks_json = matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['));
        if !looks_json {
            // Scalars (`"x"`, `12`) have no members to redact.
            return ShownBody::Text(text);
        }
        if text.len() > limit {
            return ShownBody::NotParsed {
                len: text.len(),
                limit,
            };
        }
        let mut walker = Walker {
            text,
            pos: 0,
            out: String::with_capacity(text.len()),
            path: String::new(),
            redacted: 0,
            depth: 0,
            event: self,
        };
        match walker.document() {
            Ok(()) if walker.redacted == 0 => ShownBody::Json {
                text: Cow::Borrowed(text),
                redacted: 0,
            },
            Ok(()) => ShownBody::Json {
                text: Cow::Owned(walker.out),
                redacted: walker.redacted,
            },
            Err(Bad::TooDeep) => ShownBody::NotParsed {
                len: text.len(),
                limit,
            },
            // Starts like JSON but is not: a truncated body may still hold
            // a credential that could not be found.
            Err(Bad::Malformed) => ShownBody::Malformed { len: text.len() },
        }
    }

    fn field(&self, path: &str, key: &str) -> Decision {
        let default = if is_credential_field(key) || self.redaction.fields.iter().any(|f| f == path)
        {
            Decision::Mask
        } else {
            Decision::Show
        };
        self.decide(Target::Field { path, key }, default)
    }
}

/// Why a body is not redacted as JSON.
#[derive(Debug, PartialEq, Eq)]
enum Bad {
    Malformed,
    TooDeep,
}

/// Re-prints a JSON text compactly, keys in order and every scalar as
/// spelled, with members masked or left out as decided.
struct Walker<'t, 'e> {
    text: &'t str,
    pos: usize,
    out: String,
    path: String,
    redacted: usize,
    depth: usize,
    event: &'e EventRedaction<'e>,
}

impl<'t> Walker<'t, '_> {
    fn document(&mut self) -> Result<(), Bad> {
        self.value()?;
        self.skip_ws();
        if self.pos == self.text.len() {
            Ok(())
        } else {
            Err(Bad::Malformed)
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), Bad> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Bad::Malformed)
        }
    }

    /// The raw string token at the cursor, quotes included.
    fn string(&mut self) -> Result<&'t str, Bad> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() != Some(b'"') {
            return Err(Bad::Malformed);
        }
        self.pos += 1;
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            self.pos += 1;
            match b {
                b'\\' => self.pos += 1,
                b'"' => return self.text.get(start..self.pos).ok_or(Bad::Malformed),
                _ => {}
            }
        }
        Err(Bad::Malformed)
    }

    /// A number, `true`, `false` or `null`, as spelled.
    fn scalar(&mut self) -> Result<&'t str, Bad> {
        let start = self.pos;
        while self.peek().is_some_and(|b| {
            !b.is_ascii_whitespace() && !matches!(b, b',' | b'}' | b']' | b':' | b'"' | b'{' | b'[')
        }) {
            self.pos += 1;
        }
        match self.text.get(start..self.pos) {
            Some(s) if !s.is_empty() => Ok(s),
            _ => Err(Bad::Malformed),
        }
    }

    fn nest(&mut self) -> Result<(), Bad> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Bad::TooDeep);
        }
        Ok(())
    }

    /// Copies the value at the cursor to the output.
    fn value(&mut self) -> Result<(), Bad> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                let s = self.string()?;
                self.out.push_str(s);
                Ok(())
            }
            _ => {
                let s = self.scalar()?;
                self.out.push_str(s);
                Ok(())
            }
        }
    }

    fn array(&mut self) -> Result<(), Bad> {
        self.nest()?;
        self.pos += 1;
        self.out.push('[');
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.value()?;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.out.push(',');
                    }
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Bad::Malformed),
                }
            }
        }
        self.out.push(']');
        self.depth -= 1;
        Ok(())
    }

    fn object(&mut self) -> Result<(), Bad> {
        self.nest()?;
        self.pos += 1;
        self.out.push('{');
        let mut first = true;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                let raw_key = self.string()?;
                let key: Cow<'_, str> = if raw_key.contains('\\') {
                    Cow::Owned(serde_json::from_str::<String>(raw_key).map_err(|_| Bad::Malformed)?)
                } else {
                    Cow::Borrowed(raw_key.get(1..raw_key.len() - 1).ok_or(Bad::Malformed)?)
                };
                self.expect(b':')?;
                let parent = self.path.len();
                if !self.path.is_empty() {
                    self.path.push('.');
                }
                self.path.push_str(&key);
                let decision = self.event.field(&self.path, &key);
                if decision != Decision::Hide {
                    if !first {
                        self.out.push(',');
                    }
                    first = false;
                    self.out.push_str(raw_key);
                    self.out.push(':');
                }
                match decision {
                    Decision::Show => self.value()?,
                    Decision::Mask => {
                        let mask = self.skip_value()?;
                        self.out.push('"');
                        self.out.push_str(&mask);
                        self.out.push('"');
                        self.redacted += 1;
                    }
                    Decision::Hide => {
                        self.skip_value()?;
                        self.redacted += 1;
                    }
                }
                self.path.truncate(parent);
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Bad::Malformed),
                }
            }
        }
        self.out.push('}');
        self.depth -= 1;
        Ok(())
    }

    /// Passes the value at the cursor without copying it; its mask.
    fn skip_value(&mut self) -> Result<String, Bad> {
        self.skip_ws();
        let start = self.pos;
        let kind = match self.peek() {
            Some(b'{') => "object",
            Some(b'[') => "array",
            Some(b'"') => {
                let raw = self.string()?;
                let len = serde_json::from_str::<String>(raw)
                    .map_err(|_| Bad::Malformed)?
                    .len();
                return Ok(Redaction::mask_field("string", len));
            }
            Some(b't' | b'f') => "boolean",
            Some(b'n') => "null",
            _ => "number",
        };
        if matches!(kind, "object" | "array") {
            // Nested members are not decided: the whole value is masked.
            self.container_extent()?;
        } else {
            self.scalar()?;
        }
        Ok(Redaction::mask_field(kind, self.pos - start))
    }

    /// Passes an object or array, strings aware, without deciding anything.
    fn container_extent(&mut self) -> Result<(), Bad> {
        let mut depth = 0_usize;
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'{' | b'[') => {
                    depth += 1;
                    if self.depth + depth > MAX_DEPTH {
                        return Err(Bad::TooDeep);
                    }
                    self.pos += 1;
                }
                Some(b'}' | b']') => {
                    self.pos += 1;
                    depth = depth.checked_sub(1).ok_or(Bad::Malformed)?;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                Some(_) => self.pos += 1,
                None => return Err(Bad::Malformed),
            }
        }
    }
}

#[cfg(test)]
mod tests;
