//! The inbox search language (issue 34, item 2), from any text: a search
//! that parses prints back to text that parses to the same search; every
//! limit holds; matching any body never panics; and on a real SQLite inbox
//! (the statement built from the search, its values bound) the dead
//! letters found are exactly those `Search::matches` finds among a fixed
//! set of bodies of every JSON shape (strings, numbers, booleans, nulls,
//! arrays, nesting, Unicode, a body that is not JSON).

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use webhooks_core::inbox::{
    ClaimToken, DeadLetterFilter, Inbox, MAX_SEARCH_TERMS, MAX_SEARCH_VALUE_LEN, NewEvent, Search,
    SearchTerm, SqliteInbox, Transition,
};

/// The dead letters' bodies and last errors.
const EVENTS: &[(&str, &str)] = &[
    (r#"{"data":{"object":{"customer":"cus_1","amount":1500,"paid":true}}}"#, "upstream said 502"),
    (r#"{"data":{"object":{"customer":"cus_12","amount":-3,"paid":false,"note":null}}}"#, "timed out"),
    (r#"{"data":{"object":{"customer":"cus_1 ","lines":[{"sku":"A-1"},{"sku":"B-2"}]}}}"#, ""),
    (r#"[{"sku":"A-1"},"x",3]"#, "card declined: 402"),
    (r#"{"a":{"b":{"c":{"d":"deep"}}},"é":"café ☕","k-1":"dash","$x":"dollar","0":"zero"}"#, "é"),
    (r#"{"n":1.5,"big":12345678901234567890,"e":1e3,"s":"1.5","t":"true"}"#, "x and y"),
    ("not json at all", "bad json"),
    (r#"{"q":"a\"b","bs":"a\\b","nl":"a\nb"}"#, "quote \" inside"),
];

struct Fixture {
    runtime: tokio::runtime::Runtime,
    inbox: SqliteInbox,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let inbox = runtime.block_on(async {
            let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
            inbox.migrate().await.unwrap();
            for (i, (body, _)) in EVENTS.iter().enumerate() {
                inbox
                    .accept(&NewEvent::new(format!("k{i}"), "test", body.to_string()))
                    .await
                    .unwrap();
            }
            let token = ClaimToken::random();
            let leased = inbox
                .lease(token, 100, Duration::from_secs(3_600), 5)
                .await
                .unwrap();
            assert_eq!(leased.len(), EVENTS.len());
            for (i, (_, error)) in EVENTS.iter().enumerate() {
                let dead = inbox.dead_letter(&format!("k{i}"), token, error).await.unwrap();
                assert_eq!(dead, Transition::Applied);
            }
            inbox
        });
        Fixture { runtime, inbox }
    })
}

#[derive(Arbitrary, Debug)]
struct Input {
    text: String,
    body: Vec<u8>,
    error: Option<String>,
}

fuzz_target!(|input: Input| {
    let Ok(search) = input.text.parse::<Search>() else {
        return;
    };
    // Limits.
    assert!(!search.terms().is_empty() && search.terms().len() <= MAX_SEARCH_TERMS);
    for term in search.terms() {
        let value = match term {
            SearchTerm::Payload { value, .. } | SearchTerm::ErrorContains(value) => value,
            _ => continue,
        };
        assert!(value.len() <= MAX_SEARCH_VALUE_LEN, "{value:?}");
        assert!(!value.chars().any(char::is_control), "{value:?}");
    }
    // Printed, it parses back to the same search.
    let printed = search.to_string();
    let again: Search = printed
        .parse()
        .unwrap_or_else(|e| panic!("{printed:?} does not parse back: {e}"));
    assert_eq!(again, search, "{printed:?}");
    // Any body.
    let _ = search.matches(&input.body, input.error.as_deref());
    // SQLite agrees with the oracle.
    let expected: Vec<String> = EVENTS
        .iter()
        .enumerate()
        .filter(|(_, (body, error))| search.matches(body.as_bytes(), Some(error)))
        .map(|(i, _)| format!("k{i}"))
        .collect();
    let f = fixture();
    let mut filter = DeadLetterFilter::default();
    filter.search = Some(search.clone());
    let page = f
        .runtime
        .block_on(f.inbox.dead_letters(&filter))
        .unwrap_or_else(|e| panic!("{printed:?}: {e}"));
    let mut found: Vec<String> = page.items.into_iter().map(|d| d.meta.key).collect();
    found.sort();
    assert_eq!(found, expected, "{printed:?}");
});
