//! # The email-events example
//!
//! A receiver for an email provider's webhooks, as one is written in the
//! field, with a simulator that plays the provider and a demo that checks the
//! result.
//!
//! | module | what |
//! |---|---|
//! | [`event`] | the events (`email.sent` … `email.clicked`), unknown types acknowledged |
//! | [`state`] | the pure per-email state machine: event time not arrival, terminal states, suppressions |
//! | [`store`] | the state in SQLite, one transaction per event |
//! | [`app`] | configuration from the environment, the webhook pipeline, the axum app |
//! | [`schemes`] | the signature schemes, chosen by name |
//! | [`observe`] | logs (text or JSON) and the Prometheus `/metrics` route |
//! | [`simulator`] | the provider: signs, duplicates, reorders, forges, retries, measures |
//!
//! | binary | run with |
//! |---|---|
//! | `demo` | `cargo run -p examples --bin demo` |
//! | `receiver` (axum) | `WEBHOOK_SECRET=whsec_… cargo run -p examples --bin receiver` |
//! | `actix_receiver` | `WEBHOOK_SECRET=whsec_… cargo run -p examples --bin actix_receiver` |
//! | `simulator` | `WEBHOOK_SECRET=whsec_… cargo run -p examples --bin simulator -- --events 500` |
//!
//! ```
//! use examples::event::EmailEvent;
//! use examples::state::{DeliveryStatus, Ledger};
//!
//! let events: Vec<EmailEvent> = serde_json::from_str(r#"[
//!   {"type":"email.bounced",  "id":"evt_2","occurred_at":2000,"data":{"email_id":"em_1","recipient":"ada@example.com","smtp_status":"550 5.1.1"}},
//!   {"type":"email.delivered","id":"evt_3","occurred_at":3000,"data":{"email_id":"em_1","recipient":"ada@example.com"}},
//!   {"type":"email.sent",     "id":"evt_1","occurred_at":1000,"data":{"email_id":"em_1","recipient":"ada@example.com"}}
//! ]"#)?;
//! let ledger = Ledger::from_events(&events);
//! assert_eq!(ledger.emails["em_1"].status, Some(DeliveryStatus::Bounced));
//! assert!(ledger.suppressions.contains_key("ada@example.com"));
//! # Ok::<(), serde_json::Error>(())
//! ```

pub mod app;
pub mod event;
pub mod observe;
pub mod schemes;
pub mod simulator;
pub mod state;
pub mod store;
