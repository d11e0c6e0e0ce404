//! Who may do what: the `authorize` hook's [`Access`], and the guards every
//! request passes before it reaches the inbox.

use std::fmt;

use http::{HeaderMap, header};

use super::{AdminConfig, AdminRequest};
use crate::cross_site;

/// What the application's `authorize` hook decides for one request, in the
/// admin API and the console alike.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Sees everything and may act; the identity is logged with each action.
    Admin(String),
    /// May read: `GET`s, without bodies unless configured (in the console
    /// too, with no action controls). Its state-changing requests answer
    /// `403`.
    ReadOnly(String),
    /// Answered `403`.
    Deny,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Admin(who) => f.debug_tuple("Admin").field(who).finish(),
            Self::ReadOnly(who) => f.debug_tuple("ReadOnly").field(who).finish(),
            Self::Deny => f.write_str("Deny"),
        }
    }
}

/// Who a request was admitted for.
pub(super) struct Caller {
    /// The identity logged with each action (`-` when unauthenticated
    /// access was allowed).
    pub(super) who: String,
    /// Whether the caller sees bodies.
    pub(super) bodies: bool,
}

/// The header every state-changing request must carry.
const REQUIRED_CONTENT_TYPE: &str = "application/json";

/// Why a request without a hook is refused, and how to allow it.
const NO_HOOK: &str = "no authorize hook is configured: give the admin API one (authorize), \
     or call allow_unauthenticated() if it is only reachable through your own authentication";

/// Admits a request, or says why it is a `403`: the hook's decision (no hook: deny,
/// unless [`AdminConfig::allow_unauthenticated`]), then, for a
/// state-changing request, the cross-site checks and the JSON content type.
pub(super) fn admit(
    config: &AdminConfig,
    access: Option<Access>,
    request: &AdminRequest<'_>,
) -> Result<Caller, &'static str> {
    let method = request.method;
    let (who, admin) = match access {
        None if config.allow_unauthenticated => ("-".to_owned(), true),
        None => return Err(NO_HOOK),
        Some(Access::Deny) => {
            return Err("access denied");
        }
        Some(Access::ReadOnly(_)) if !method.is_safe() => {
            return Err("read-only access: only GET requests are allowed");
        }
        Some(Access::Admin(who)) => (who, true),
        Some(Access::ReadOnly(who)) => (who, false),
    };
    if !method.is_safe() {
        request.site.check(
            request.headers,
            &config.allowed_origins,
            cross_site::Client::Api,
        )?;
        if !is_json(request.headers) {
            return Err("state-changing requests must carry Content-Type: application/json");
        }
    }
    Ok(Caller {
        who,
        bodies: admin || config.bodies_for_read_only,
    })
}

/// Whether the request says its body is JSON (parameters such as
/// `charset` allowed).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONTENT_TYPE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(';')
                .next()
                .is_some_and(|media| media.trim().eq_ignore_ascii_case(REQUIRED_CONTENT_TYPE))
        })
}
