//! Issue 25, item 7: claim tokens across a real `fork()`.
//!
//! Forking a multi-threaded test harness is unsafe in practice (another
//! thread may hold a lock the child needs), so the test re-executes its own
//! binary with only itself selected on one thread; that process makes a
//! token (seeding its generator), forks with the `fork` crate's safe
//! wrapper, and parent and child each print their next token. Without the
//! reseed on a process id change they print the same one.
#![cfg(unix)]

use std::process::Command;

use webhooks_core::dedup::ClaimToken;

const CHILD_ENV: &str = "WEBHOOKS_TOKEN_FORK_CHILD";
const NAME: &str = "parent_and_forked_child_make_different_tokens";

#[test]
fn parent_and_forked_child_make_different_tokens() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return fork_and_print();
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--test-threads=1", "--nocapture", "-q"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let token = |who: &str| {
        let prefix = format!("{who} token ");
        let line = stdout.lines().find(|l| l.starts_with(&prefix));
        let hex = line.unwrap_or_else(|| panic!("no {who} line in {stdout:?}"));
        ClaimToken::from_hex(&hex[prefix.len()..]).unwrap()
    };
    let (parent, child) = (token("parent"), token("child"));
    assert_ne!(parent, child, "the child repeated the parent's token");
}

/// Runs in the re-executed process: seed, fork, print one token each.
fn fork_and_print() {
    use std::io::Write as _;
    let _seeded = ClaimToken::random();
    std::io::stdout().flush().unwrap();
    match fork::fork().unwrap() {
        fork::Fork::Child => {
            println!("child token {}", ClaimToken::random().to_hex());
            std::io::stdout().flush().unwrap();
            // Leave at once: the harness belongs to the parent.
            std::process::exit(0);
        }
        fork::Fork::Parent(pid) => {
            let token = ClaimToken::random().to_hex();
            let status = fork::waitpid(pid).unwrap();
            assert_eq!(status, 0, "child exit status");
            println!("parent token {token}");
        }
    }
}
