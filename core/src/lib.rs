//! # webhooks-core
//!
//! The framework-agnostic core of [`tower-webhooks`] and [`actix-webhooks`]:
//! signature schemes ([`scheme`]), verification errors, the receive pipeline
//! ([`Receiver`]) and the deduplication stores ([`dedup`]).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::StandardWebhooks};
//!
//! let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let headers = verifier.sign_headers("msg_1", 1_700_000_000, b"{\"a\":1}")?;
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//!
//! assert!(verifier.verify(&headers, b"{\"a\":1}", now).is_ok());
//! // One byte changed: refused with a 401.
//! let err = verifier.verify(&headers, b"{\"a\":2}", now).unwrap_err();
//! assert_eq!(err, VerifyError::NoMatchingSignature);
//! assert_eq!(err.status(), 401);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`tower-webhooks`]: https://docs.rs/tower-webhooks
//! [`actix-webhooks`]: https://docs.rs/actix-webhooks

#![cfg_attr(docsrs, feature(doc_cfg))]
// Library code never unwraps: an invariant it relies on is an `expect` that says why.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod body;
#[cfg(feature = "console")]
#[cfg_attr(docsrs, doc(cfg(feature = "console")))]
pub mod console;
mod cross_site;
pub mod dedup;
mod delivery;
mod error;
pub mod event;
mod handshake;
pub mod headers;
pub mod inbox;
mod key;
pub mod ordering;
mod public_url;
pub mod receiver;
pub mod redact;
mod refusal;
mod rejection;
pub mod scheme;
pub mod signals;
pub mod testing;
#[cfg(any(feature = "redis-tls", feature = "sns-reqwest", feature = "rabbitmq"))]
mod tls;
mod verify;

pub use body::BodyCollector;
pub use delivery::Delivery;
pub use error::{ConfigError, VerifyError};
pub use handshake::Handshake;
pub use headers::HeaderLookup;
pub use public_url::PublicUrl;
pub use receiver::{
    Admission, ClaimGuard, Incoming, Receiver, ReceiverBuilder, ResponseBudget, StoreFailure,
};
pub use refusal::{MAX_REASON_LEN, Refusal, RefusalKind};
pub use rejection::{DUPLICATE_HEADER, ExtractError, Rejection, ResponseParts};
pub use verify::{Identity, MatchedKey, RequestHead, RequestVerifier, Verified, Verifier};
