//! The conformance suite: one list of scenarios ([`scenarios::SCENARIOS`]),
//! each run against every framework adapter ([`apps::Framework`]) on every
//! dedup backend ([`backends::Backend`]). Run it with
//! `cargo test -p webhooks-conformance --all-features`.

pub mod apps;
pub mod backends;
pub mod behaviour;
pub mod client;
pub mod gates;
pub mod keys;
pub mod providers;
pub mod providers_email;
pub mod refusals;
pub mod scenarios;
pub mod signals;

/// The README's Rust snippets, each compiled and run as a doc test
/// (`cargo test -p webhooks-conformance --doc`), so they cannot drift.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct Readme;

/// The long-form documents under `docs/`, whose snippets are compiled and run
/// the same way.
#[doc = include_str!("../../docs/backends.md")]
#[cfg(doctest)]
pub struct DocsBackends;

#[doc = include_str!("../../docs/console.md")]
#[cfg(doctest)]
pub struct DocsConsole;

#[doc = include_str!("../../docs/development.md")]
#[cfg(doctest)]
pub struct DocsDevelopment;

#[doc = include_str!("../../docs/inbox.md")]
#[cfg(doctest)]
pub struct DocsInbox;

#[doc = include_str!("../../docs/performance.md")]
#[cfg(doctest)]
pub struct DocsPerformance;

#[doc = include_str!("../../docs/reference.md")]
#[cfg(doctest)]
pub struct DocsReference;

#[doc = include_str!("../../docs/schemes.md")]
#[cfg(doctest)]
pub struct DocsSchemes;

#[doc = include_str!("../../docs/security.md")]
#[cfg(doctest)]
pub struct DocsSecurity;

#[doc = include_str!("../../docs/testing.md")]
#[cfg(doctest)]
pub struct DocsTesting;

/// `docs/typed-events.md` needs the crates of the `typed-*` features.
#[doc = include_str!("../../docs/typed-events.md")]
#[cfg(all(
    doctest,
    feature = "typed-stripe",
    feature = "typed-github",
    feature = "typed-aws"
))]
pub struct DocsTypedEvents;

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
