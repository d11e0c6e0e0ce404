//! `testing::expect_panics`: the panics a test causes on purpose print
//! nothing while the guard lives, on any thread; every other panic still
//! reaches the hook that was installed before. Its own test binary: the
//! hook is process-wide.

use std::sync::{Arc, Mutex};

use webhooks_core::testing::expect_panics;

fn panic_on_a_thread(message: &'static str) {
    let joined = std::thread::spawn(move || panic!("{message} (detail)")).join();
    assert!(joined.is_err());
}

#[test]
fn expected_panics_are_quiet_and_others_are_not() {
    let printed = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = Arc::clone(&printed);
    // Stands for the default hook (which prints): records what reaches it.
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        record.lock().unwrap().push(text);
    }));

    let quiet = expect_panics("handler panicked on purpose");
    panic_on_a_thread("handler panicked on purpose");
    panic_on_a_thread("a real failure");
    // A second guard for another message, dropped first.
    let other = expect_panics("second");
    panic_on_a_thread("second");
    drop(other);
    panic_on_a_thread("second");
    drop(quiet);
    panic_on_a_thread("handler panicked on purpose");

    assert_eq!(
        *printed.lock().unwrap(),
        [
            "a real failure (detail)",
            "second (detail)",
            "handler panicked on purpose (detail)"
        ]
    );
}
