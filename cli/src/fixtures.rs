//! The built-in event fixtures: realistic bodies with each provider's own
//! field names, kept as files under `cli/fixtures/<scheme>/` and compiled
//! in. A fixture is a template: `{{id}}` becomes the delivery id,
//! `{{timestamp}}` the signed Unix time, `{{timestamp_ms}}` the same in
//! milliseconds and `{{iso}}` the same as RFC 3339 text.

use webhooks_core::scheme::registry::{self, HMAC, SCHEMES, SNS, SchemeInfo};

use crate::error::Failure;
use crate::output::{BOLD, DIM, Out, paint};

/// `application/json`.
pub(crate) const JSON: &str = "application/json";
/// `application/x-www-form-urlencoded`.
pub(crate) const FORM: &str = "application/x-www-form-urlencoded";

/// One built-in event.
#[derive(Debug)]
pub(crate) struct Fixture {
    /// The scheme's name.
    pub(crate) scheme: &'static str,
    /// The event's name (`--event`).
    pub(crate) event: &'static str,
    /// The body template.
    pub(crate) body: &'static str,
    /// Its content type.
    pub(crate) content_type: &'static str,
    /// The event type sent in a header (GitHub's `X-GitHub-Event`…), for
    /// the schemes that send one.
    pub(crate) header_event: Option<&'static str>,
}

macro_rules! fixture {
    ($scheme:literal, $event:literal, $file:literal, $ct:ident, $header:expr) => {
        Fixture {
            scheme: $scheme,
            event: $event,
            body: include_str!(concat!("../fixtures/", $scheme, "/", $file)),
            content_type: $ct,
            header_event: $header,
        }
    };
}

/// Every fixture, the default event of each scheme first.
pub(crate) static FIXTURES: &[Fixture] = &[
    fixture!(
        "standard-webhooks",
        "email.sent",
        "email.sent.json",
        JSON,
        None
    ),
    fixture!(
        "standard-webhooks",
        "email.bounced",
        "email.bounced.json",
        JSON,
        None
    ),
    fixture!(
        "standard-webhooks",
        "email.delivered",
        "email.delivered.json",
        JSON,
        None
    ),
    fixture!("stripe", "invoice.paid", "invoice.paid.json", JSON, None),
    fixture!(
        "stripe",
        "checkout.session.completed",
        "checkout.session.completed.json",
        JSON,
        None
    ),
    fixture!(
        "stripe",
        "customer.subscription.deleted",
        "customer.subscription.deleted.json",
        JSON,
        None
    ),
    fixture!(
        "stripe",
        "payment_intent.succeeded",
        "payment_intent.succeeded.json",
        JSON,
        None
    ),
    fixture!("github", "push", "push.json", JSON, Some("push")),
    fixture!(
        "github",
        "issues.opened",
        "issues.opened.json",
        JSON,
        Some("issues")
    ),
    fixture!("github", "ping", "ping.json", JSON, Some("ping")),
    fixture!(
        "github",
        "pull_request.opened",
        "pull_request.opened.json",
        JSON,
        Some("pull_request")
    ),
    fixture!(
        "slack",
        "event_callback.app_mention",
        "event_callback.app_mention.json",
        JSON,
        None
    ),
    fixture!("slack", "slash_command", "slash_command.form", FORM, None),
    fixture!(
        "slack",
        "url_verification",
        "url_verification.json",
        JSON,
        None
    ),
    fixture!(
        "shopify",
        "orders/create",
        "orders_create.json",
        JSON,
        Some("orders/create")
    ),
    fixture!(
        "shopify",
        "app/uninstalled",
        "app_uninstalled.json",
        JSON,
        Some("app/uninstalled")
    ),
    fixture!(
        "shopify",
        "products/update",
        "products_update.json",
        JSON,
        Some("products/update")
    ),
    fixture!(
        "twilio",
        "message.received",
        "message.received.form",
        FORM,
        None
    ),
    fixture!(
        "twilio",
        "call.completed",
        "call.completed.form",
        FORM,
        None
    ),
    fixture!(
        "twilio",
        "message.status",
        "message.status.form",
        FORM,
        None
    ),
    fixture!(
        "square",
        "payment.created",
        "payment.created.json",
        JSON,
        None
    ),
    fixture!(
        "square",
        "invoice.published",
        "invoice.published.json",
        JSON,
        None
    ),
    fixture!(
        "square",
        "refund.created",
        "refund.created.json",
        JSON,
        None
    ),
    fixture!("mandrill", "send", "send.form", FORM, None),
    fixture!("mandrill", "click", "click.form", FORM, None),
    fixture!("mandrill", "open", "open.form", FORM, None),
    fixture!(
        "hubspot",
        "contact.creation",
        "contact.creation.json",
        JSON,
        None
    ),
    fixture!(
        "hubspot",
        "contact.propertyChange",
        "contact.propertyChange.json",
        JSON,
        None
    ),
    fixture!("hubspot", "deal.deletion", "deal.deletion.json", JSON, None),
    fixture!(
        "discord",
        "application_command",
        "application_command.json",
        JSON,
        None
    ),
    fixture!(
        "discord",
        "message_component",
        "message_component.json",
        JSON,
        None
    ),
    fixture!("discord", "ping", "ping.json", JSON, None),
    fixture!("gitlab", "push", "push.json", JSON, Some("Push Hook")),
    fixture!("gitlab", "issue", "issue.json", JSON, Some("Issue Hook")),
    fixture!(
        "gitlab",
        "merge_request",
        "merge_request.json",
        JSON,
        Some("Merge Request Hook")
    ),
    fixture!(
        "linear",
        "Issue.create",
        "Issue.create.json",
        JSON,
        Some("Issue")
    ),
    fixture!(
        "linear",
        "Comment.create",
        "Comment.create.json",
        JSON,
        Some("Comment")
    ),
    fixture!(
        "linear",
        "Issue.update",
        "Issue.update.json",
        JSON,
        Some("Issue")
    ),
    fixture!(
        "zoom",
        "meeting.started",
        "meeting.started.json",
        JSON,
        None
    ),
    fixture!("zoom", "meeting.ended", "meeting.ended.json", JSON, None),
    fixture!(
        "zoom",
        "recording.completed",
        "recording.completed.json",
        JSON,
        None
    ),
    fixture!(
        "paddle",
        "transaction.completed",
        "transaction.completed.json",
        JSON,
        None
    ),
    fixture!(
        "paddle",
        "subscription.canceled",
        "subscription.canceled.json",
        JSON,
        None
    ),
    fixture!(
        "paddle",
        "subscription.created",
        "subscription.created.json",
        JSON,
        None
    ),
    fixture!(
        "intercom",
        "conversation.user.created",
        "conversation.user.created.json",
        JSON,
        None
    ),
    fixture!(
        "intercom",
        "contact.user.created",
        "contact.user.created.json",
        JSON,
        None
    ),
    fixture!("intercom", "ping", "ping.json", JSON, None),
    fixture!(
        "typeform",
        "form_response",
        "form_response.json",
        JSON,
        None
    ),
    fixture!(
        "typeform",
        "form_response.scored",
        "form_response.scored.json",
        JSON,
        None
    ),
    fixture!(
        "typeform",
        "form_response_partial",
        "form_response_partial.json",
        JSON,
        None
    ),
    fixture!("sendgrid", "delivered", "delivered.json", JSON, None),
    fixture!("sendgrid", "bounce", "bounce.json", JSON, None),
    fixture!("sendgrid", "open", "open.json", JSON, None),
    // Amazon SNS: the fixture is the notification's `Message` (here Amazon
    // SES's email events); the signer wraps it in the signed envelope.
    fixture!("sns", "ses.bounce", "ses.bounce.json", JSON, None),
    fixture!("sns", "ses.complaint", "ses.complaint.json", JSON, None),
    fixture!("sns", "ses.delivery", "ses.delivery.json", JSON, None),
    fixture!("mailgun", "delivered", "delivered.json", JSON, None),
    fixture!("mailgun", "failed", "failed.json", JSON, None),
    fixture!("mailgun", "opened", "opened.json", JSON, None),
    fixture!("postmark", "Delivery", "Delivery.json", JSON, None),
    fixture!("postmark", "Bounce", "Bounce.json", JSON, None),
    fixture!("postmark", "Open", "Open.json", JSON, None),
];

/// The fixtures of `scheme`, its default first.
pub(crate) fn of(scheme: &str) -> impl Iterator<Item = &'static Fixture> {
    FIXTURES.iter().filter(move |f| f.scheme == scheme)
}

/// The fixture `event` of `scheme` (its default without `event`).
pub(crate) fn find(scheme: &str, event: Option<&str>) -> Result<&'static Fixture, Failure> {
    let mut all = of(scheme);
    let found = match event {
        None => all.next(),
        Some(event) => all.find(|f| f.event == event),
    };
    found.ok_or_else(|| {
        let known: Vec<_> = of(scheme).map(|f| f.event).collect();
        Failure::usage(format!(
            "no built-in {scheme} event of that name; known: {} (or give --body / --body-file)",
            known.join(", ")
        ))
    })
}

/// Every scheme the command knows: the registry's, then Amazon SNS (which
/// `send` and `sign` sign; its verifier fetches AWS's certificates, so
/// `verify` and `listen` do not build it), then `hmac` (any HMAC provider,
/// described by `--hmac-spec`).
pub(crate) fn all_schemes() -> impl Iterator<Item = &'static SchemeInfo> {
    SCHEMES.iter().chain([&SNS, &HMAC])
}

/// `webhooks events [scheme]`.
pub(crate) fn list(scheme: Option<&str>, out: &Out) -> Result<(), Failure> {
    let schemes: Vec<&str> = match scheme {
        Some(name) => vec![registry::find(name)?.name],
        None => all_schemes().map(|s| s.name).collect(),
    };
    if out.json {
        let value: serde_json::Map<String, serde_json::Value> = schemes
            .iter()
            .map(|s| {
                let events = of(s)
                    .map(|f| {
                        serde_json::json!({
                            "event": f.event,
                            "content_type": f.content_type,
                            "header_event": f.header_event,
                        })
                    })
                    .collect();
                ((*s).to_owned(), serde_json::Value::Array(events))
            })
            .collect();
        out.json(&serde_json::Value::Object(value));
        return Ok(());
    }
    for s in schemes {
        out.line(paint(BOLD, s));
        for (i, f) in of(s).enumerate() {
            let default = if i == 0 { " (default)" } else { "" };
            let form = if f.content_type == FORM { " form" } else { "" };
            out.line(format!(
                "  {}{}",
                f.event,
                paint(DIM, format!("{form}{default}"))
            ));
        }
    }
    Ok(())
}

/// `webhooks schemes`.
pub(crate) fn schemes(out: &Out) -> Result<(), Failure> {
    if out.json {
        let list = all_schemes()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "provider": s.provider,
                    "key": s.key_format,
                    "key_pair": s.key == registry::KeyKind::KeyPair,
                    "signs_url": s.signs_url,
                    "signs_body": s.signs_body,
                    "signs_timestamp": s.signs_timestamp,
                    "signature_header": s.signature_header,
                    "tolerance_seconds": s.default_tolerance.map(|t| t.as_secs()),
                    "available": s.is_available(),
                    "verifies": s.name != SNS.name,
                })
            })
            .collect();
        out.json(&serde_json::Value::Array(list));
        return Ok(());
    }
    for s in all_schemes() {
        let mut signs = vec![];
        if s.signs_body {
            signs.push("body");
        }
        if s.signs_url {
            signs.push("URL");
        }
        if s.signs_timestamp {
            signs.push("timestamp");
        }
        let mut signs = match signs.is_empty() {
            true => "a shared token, nothing signed".to_owned(),
            false => format!("signs {}", signs.join(" + ")),
        };
        if s.name == SNS.name {
            signs.push_str(" (send and sign only)");
        }
        out.line(format!(
            "{} {}  {}",
            paint(BOLD, format!("{:<18}", s.name)),
            s.provider,
            paint(DIM, format!("{signs}; key: {}", s.key_format))
        ));
    }
    Ok(())
}
