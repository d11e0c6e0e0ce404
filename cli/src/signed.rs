//! A signed delivery, built through webhooks-core's own test signers
//! (`scheme::registry::signer`, `testing::SignTest`): the headers and body
//! the provider would send.

use std::path::PathBuf;

use bytes::Bytes;
use clap::Args;
use http::{HeaderMap, HeaderName, HeaderValue};
use webhooks_core::scheme::GenericHmacSpec;
use webhooks_core::scheme::registry::{self, HMAC, SchemeInfo, SchemeOptions, SchemeSigner};
use webhooks_core::testing::{SignTest as _, TestDelivery};

use crate::body::{BodyArgs, Template};
use crate::error::Failure;
use crate::secret::SecretArgs;

/// The `hmac` scheme's spec: how the provider signs (`send`, `sign`,
/// `verify`, `listen`).
#[derive(Debug, Clone, Args)]
pub(crate) struct HmacSpecArgs {
    /// For the scheme `hmac`: how the provider signs, as
    /// `key=value;…` (e.g. `header=X-Acme-Signature;prefix=sha256=;content={timestamp}.{body};timestamp-header=X-Acme-Timestamp`;
    /// keys: name, header, json-field, algorithm, encoding, prefix, content,
    /// content-prefix, timestamp-header, timestamp-json-field,
    /// timestamp-unit, separator, tolerance, id-header, event-type-header).
    #[arg(long, value_name = "SPEC", conflicts_with = "hmac_spec_file")]
    pub(crate) hmac_spec: Option<String>,
    /// For the scheme `hmac`: a file holding the spec (entries separated by
    /// `;` or line breaks).
    #[arg(long, value_name = "PATH")]
    pub(crate) hmac_spec_file: Option<PathBuf>,
}

impl HmacSpecArgs {
    /// The spec given, parsed; `None` when none was given.
    pub(crate) fn spec(&self) -> Result<Option<GenericHmacSpec>, Failure> {
        let text = match (&self.hmac_spec, &self.hmac_spec_file) {
            (Some(text), _) => text.clone(),
            (None, Some(path)) => std::fs::read_to_string(path).map_err(|e| {
                Failure::usage(format!(
                    "cannot read --hmac-spec-file {}: {e}",
                    path.display()
                ))
            })?,
            (None, None) => return Ok(None),
        };
        Ok(Some(text.parse()?))
    }

    /// `options` with the spec, for `scheme`: required by `hmac`, refused
    /// for the others.
    pub(crate) fn options(
        &self,
        scheme: &SchemeInfo,
        options: SchemeOptions,
    ) -> Result<SchemeOptions, Failure> {
        let given = self.hmac_spec.is_some() || self.hmac_spec_file.is_some();
        if given && scheme.name != HMAC.name {
            return Err(Failure::usage(format!(
                "--hmac-spec is for the hmac scheme, not {}",
                scheme.name
            )));
        }
        match (scheme.name == HMAC.name, self.spec()?) {
            (true, Some(spec)) => Ok(options.hmac_spec(spec)),
            (true, None) => Err(Failure::usage(
                "hmac needs --hmac-spec SPEC (or --hmac-spec-file PATH): how the provider signs, \
                 e.g. 'header=X-Acme-Signature;prefix=sha256=' (see docs/cli.md)",
            )),
            (false, _) => Ok(options),
        }
    }
}

/// What `hmac` signs when no body is given (it has no built-in events):
/// `{"type":EVENT,…}`, the event `webhooks.test` unless `--event` names one
/// (sent in the spec's event type header too).
fn hmac_default_body(event: Option<&str>) -> String {
    let event = serde_json::Value::from(event.unwrap_or("webhooks.test"));
    format!(r#"{{"type":{event},"data":{{"message":"a test delivery from the webhooks CLI"}}}}"#)
}

/// What `send` and `sign` share.
#[derive(Debug, Clone, Args)]
pub(crate) struct SigningArgs {
    /// The signing scheme (see `webhooks schemes`; `hmac` with --hmac-spec
    /// for any other HMAC provider).
    pub(crate) scheme: String,
    #[command(flatten)]
    pub(crate) secret: SecretArgs,
    #[command(flatten)]
    pub(crate) hmac: HmacSpecArgs,
    #[command(flatten)]
    pub(crate) body: BodyArgs,
    /// The delivery id (default: a fresh random one per delivery).
    #[arg(long, value_name = "ID")]
    pub(crate) id: Option<String>,
    /// The signed time, Unix seconds (default: now).
    #[arg(long, value_name = "UNIX")]
    pub(crate) timestamp: Option<u64>,
    /// An extra header, `Name: value` (repeatable; replaces a signed one of
    /// the same name).
    #[arg(long = "header", short = 'H', value_name = "NAME:VALUE")]
    pub(crate) headers: Vec<String>,
    /// The URL the URL-signing schemes (Twilio, Square, Mandrill, HubSpot)
    /// sign, when it is not the one called (behind a proxy or tunnel).
    #[arg(long, value_name = "URL")]
    pub(crate) signed_url: Option<String>,
    /// Amazon SNS: the `SigningCertURL` to name (the receiver pins this
    /// key's certificate there; default: a test URL on SNS's us-east-1 host).
    #[arg(long, value_name = "URL")]
    pub(crate) certificate_url: Option<String>,
    /// Amazon SNS: the topic to publish to (default:
    /// arn:aws:sns:us-east-1:123456789012:webhooks-test).
    #[arg(long, value_name = "ARN")]
    pub(crate) topic_arn: Option<String>,
}

/// One signed delivery.
#[derive(Debug, Clone)]
pub(crate) struct SignedRequest {
    /// The delivery id.
    pub(crate) id: String,
    /// The signed Unix time.
    pub(crate) timestamp: u64,
    /// The headers to send, `Content-Type` included.
    pub(crate) headers: HeaderMap,
    /// The body to send.
    pub(crate) body: Bytes,
    /// The URL signed (URL-signing schemes).
    pub(crate) signed_url: Option<String>,
}

/// A signer and a body template, ready to sign deliveries.
#[derive(Debug)]
pub(crate) struct Signing {
    signer: SchemeSigner,
    /// The scheme as configured (for `hmac`, what its spec signs).
    info: SchemeInfo,
    /// The `hmac` spec, written back.
    pub(crate) hmac_spec: Option<String>,
    pub(crate) template: Template,
    extra: HeaderMap,
    id: Option<String>,
    timestamp: Option<u64>,
    signed_url: Option<String>,
}

/// A fresh random id in the provider's style.
fn fresh_id(scheme: &str) -> String {
    // TestDelivery's own random id: `msg_` and 32 hex digits.
    let random = TestDelivery::new(Bytes::new()).delivery_id().to_owned();
    let hex = random.trim_start_matches("msg_");
    match scheme {
        "stripe" | "paddle" => format!("evt_{hex}"),
        "standard-webhooks" => format!("msg_{hex}"),
        _ if hex.len() == 32 => format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ),
        _ => random.clone(),
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The scheme called `name`, for `verify` and `listen`: one whose verifier
/// the registry builds (not Amazon SNS, whose verifier fetches AWS's
/// certificates).
pub(crate) fn find_verifiable(name: &str) -> Result<&'static SchemeInfo, Failure> {
    let info = registry::find(name)?;
    if info.name == registry::SNS.name {
        return Err(Failure::usage(
            "sns: verify and listen do not check SNS messages (its verifier fetches AWS's \
             signing certificates: use webhooks_core::scheme::Sns in your app); send and sign \
             sign them",
        ));
    }
    Ok(info)
}

/// `Name: value` as a header.
pub(crate) fn parse_header(spec: &str) -> Result<(HeaderName, HeaderValue), Failure> {
    let (name, value) = spec
        .split_once(':')
        .ok_or_else(|| Failure::usage("--header needs NAME:VALUE"))?;
    let name = HeaderName::try_from(name.trim())
        .map_err(|_| Failure::usage(format!("--header: {:?} is not a header name", name.trim())))?;
    let value = HeaderValue::try_from(value.trim())
        .map_err(|_| Failure::usage(format!("--header {name}: not a valid header value")))?;
    Ok((name, value))
}

impl Signing {
    /// The signer and template `args` describe; `target` is the URL called,
    /// signed by the URL-signing schemes unless `--signed-url` says otherwise.
    pub(crate) fn new(args: &SigningArgs, target: Option<&str>) -> Result<Self, Failure> {
        let info = registry::find(&args.scheme)?;
        let mut options = args.hmac.options(info, SchemeOptions::new())?;
        let template = match (info.name, &args.body.body, &args.body.body_file) {
            ("hmac", None, None) => {
                let mut body = args.body.clone();
                body.body = Some(hmac_default_body(body.event.as_deref()));
                body.template(info.name)?
            }
            _ => args.body.template(info.name)?,
        };
        let secret = args.secret.first()?;
        match (info.name, &args.certificate_url, &args.topic_arn) {
            ("sns", url, topic) => {
                if let Some(url) = url {
                    options = options.certificate_url(url.clone());
                }
                if let Some(topic) = topic {
                    options = options.topic_arn(topic.clone());
                }
            }
            (_, None, None) => {}
            (name, _, _) => {
                return Err(Failure::usage(format!(
                    "--certificate-url and --topic-arn are for sns, not {name}"
                )));
            }
        }
        let signer = registry::signer(info.name, &secret, &options)?;
        let hmac_spec = options.hmac_spec.as_ref().map(ToString::to_string);
        let info = registry::describe(info.name, &options)?;
        let mut extra = HeaderMap::new();
        for spec in &args.headers {
            let (name, value) = parse_header(spec)?;
            extra.insert(name, value);
        }
        let signed_url = args
            .signed_url
            .clone()
            .or_else(|| target.map(str::to_owned));
        if info.signs_url && signed_url.is_none() {
            return Err(Failure::usage(format!(
                "{} signs the URL it calls: give --url (or --signed-url)",
                info.name
            )));
        }
        let signing = Self {
            signer,
            info,
            hmac_spec,
            template,
            extra,
            id: args.id.clone(),
            timestamp: args.timestamp,
            signed_url,
        };
        // Bad input (a --set path, a body the scheme cannot sign) fails here, once.
        signing.sign(None, 0)?;
        Ok(signing)
    }

    /// The scheme, as configured.
    pub(crate) fn info(&self) -> &SchemeInfo {
        &self.info
    }

    /// For a key pair, the public key to verify with.
    pub(crate) fn public_key(&self) -> Option<&str> {
        self.signer.public_key()
    }

    /// Signs one delivery: with `id` (else `--id`, else a fresh one), at the
    /// given time shifted by `shift` seconds.
    pub(crate) fn sign(&self, id: Option<&str>, shift: i64) -> Result<SignedRequest, Failure> {
        let info = self.info();
        let id = id
            .map(str::to_owned)
            .or_else(|| self.id.clone())
            .unwrap_or_else(|| fresh_id(info.name));
        let timestamp = self
            .timestamp
            .unwrap_or_else(unix_now)
            .saturating_add_signed(shift);
        let body = self.template.render(&id, timestamp)?;
        let mut delivery = TestDelivery::new(body)
            .id(id.clone())
            .timestamp(timestamp)
            .content_type(self.template.content_type.clone());
        if let Some(event) = &self.template.header_event {
            delivery = delivery.event_type(event.clone());
        }
        if let Some(url) = &self.signed_url {
            delivery = delivery.url(url.clone());
        }
        let mut headers = self.signer.sign_test(&delivery)?;
        let body = self.signer.sign_test_body(&delivery)?;
        let content_type = match info.name {
            // Mailgun's signed body is JSON whatever the event data was;
            // SNS sends its JSON envelope as text/plain.
            "mailgun" => crate::fixtures::JSON.to_owned(),
            "sns" => info.content_type.to_owned(),
            _ => self.template.content_type.clone(),
        };
        let content_type = HeaderValue::try_from(content_type)
            .map_err(|_| Failure::usage("--content-type is not a valid header value"))?;
        headers.insert(http::header::CONTENT_TYPE, content_type);
        for (name, value) in &self.extra {
            headers.insert(name.clone(), value.clone());
        }
        Ok(SignedRequest {
            id,
            timestamp,
            headers,
            body,
            signed_url: self.signed_url.clone().filter(|_| info.signs_url),
        })
    }
}
