//! The conformance suite: one list of scenarios ([`scenarios::SCENARIOS`]),
//! each run against every framework adapter ([`apps::Framework`]) on every
//! dedup backend ([`backends::Backend`]). Run it with
//! `cargo test -p webhooks-conformance --all-features`.

pub mod apps;
pub mod backends;
pub mod behaviour;
pub mod client;
pub mod keys;
pub mod providers;
pub mod providers_email;
pub mod scenarios;
pub mod signals;

/// The README's Rust snippets, each compiled and run as a doc test
/// (`cargo test -p webhooks-conformance --doc`), so they cannot drift.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct Readme;

/// The crates' own READMEs (shown on crates.io), compiled and run the same way.
#[doc = include_str!("../../core/README.md")]
#[cfg(doctest)]
pub struct CoreReadme;

#[doc = include_str!("../../tower-webhooks/README.md")]
#[cfg(doctest)]
pub struct TowerReadme;

#[doc = include_str!("../../actix-webhooks/README.md")]
#[cfg(doctest)]
pub struct ActixReadme;
