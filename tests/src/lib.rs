//! The conformance suite: one list of scenarios ([`scenarios::SCENARIOS`]),
//! each run against every framework adapter ([`apps::Framework`]) on every
//! dedup backend ([`backends::Backend`]). Run it with
//! `cargo test -p webhooks-conformance --all-features`.

pub mod apps;
pub mod backends;
pub mod behaviour;
pub mod client;
pub mod keys;
pub mod providers_email;
pub mod scenarios;
pub mod signals;
