//! README and `docs/` snippets that rustdoc cannot run as written: tests
//! (`#[cfg(test)]` modules are not compiled in doc tests) and code that needs
//! a feature. Each file under `readme/` is a code block of a README or of a
//! `docs/*.md` file, verbatim: compiled and run here, and
//! `readme_blocks_are_these_files` fails when the Markdown drifts from them.

/// The workspace README's first screen: step 3 (the app) and step 4 (its test).
mod first_screen {
    include!("readme/step3_app.rs");
    include!("readme/step4_test.rs");
}

/// `docs/testing.md`: the actix-web handler test.
mod actix_test {
    include!("readme/actix_test.rs");
}

/// `docs/inbox.md`: the transactional worker (feature `postgres`; compiled only).
#[cfg(feature = "postgres")]
#[allow(dead_code)]
mod transactional {
    include!("readme/transactional.rs");
}

/// `tower-webhooks/README.md`: the app and its test.
mod tower_readme {
    include!("readme/tower_app.rs");
    include!("readme/tower_test.rs");
}

/// `actix-webhooks/README.md`: the routes, `main` (compiled only) and the test.
#[allow(dead_code)]
mod actix_readme {
    include!("readme/actix_crate.rs");
}

#[test]
fn readme_blocks_are_these_files() {
    let workspace = include_str!("../../README.md");
    let tower = include_str!("../../tower-webhooks/README.md");
    let actix = include_str!("../../actix-webhooks/README.md");
    let testing = include_str!("../../docs/testing.md");
    let inbox = include_str!("../../docs/inbox.md");
    for (readme, name, block) in [
        (
            workspace,
            "step3_app.rs",
            include_str!("readme/step3_app.rs"),
        ),
        (
            workspace,
            "step4_test.rs",
            include_str!("readme/step4_test.rs"),
        ),
        (
            testing,
            "actix_test.rs",
            include_str!("readme/actix_test.rs"),
        ),
        (
            inbox,
            "transactional.rs",
            include_str!("readme/transactional.rs"),
        ),
        (tower, "tower_app.rs", include_str!("readme/tower_app.rs")),
        (tower, "tower_test.rs", include_str!("readme/tower_test.rs")),
        (
            actix,
            "actix_crate.rs",
            include_str!("readme/actix_crate.rs"),
        ),
    ] {
        let fenced = format!("\n{block}```\n");
        assert!(
            readme.contains(&fenced),
            "no code block of its README or docs/*.md file is equal to tests/tests/readme/{name}"
        );
    }
}
