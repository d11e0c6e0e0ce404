//! Issue 34, item 7: a dedup retention shorter than the provider's
//! documented retry window (plus a day) is refused when the receiver is
//! built, unless overridden by name.

use std::time::Duration;

use webhooks_core::scheme::registry::{self, RETRY_WINDOW_MARGIN};
use webhooks_core::scheme::{GitHub, Stripe};
use webhooks_core::{ConfigError, Receiver};

const DAY: Duration = Duration::from_secs(86_400);

fn stripe() -> Stripe {
    Stripe::new("whsec_test_secret").unwrap()
}

#[test]
fn a_retention_below_stripes_three_days_is_refused() {
    let refused = Receiver::builder(stripe()).retention(DAY).try_build();
    assert_eq!(
        refused.err(),
        Some(ConfigError::RetentionBelowRetryWindow {
            scheme: "stripe",
            retention_secs: 86_400,
            floor_secs: 4 * 86_400,
        })
    );
    let just_under = Receiver::builder(stripe())
        .retention(4 * DAY - Duration::from_secs(1))
        .try_build();
    assert!(just_under.is_err(), "the margin counts");
    let at_floor = Receiver::builder(stripe()).retention(4 * DAY).try_build();
    assert!(at_floor.is_ok());
    // The default (7 days) is above every documented window.
    assert!(Receiver::builder(stripe()).try_build().is_ok());
}

#[test]
fn the_override_is_explicit() {
    let allowed = Receiver::builder(stripe())
        .retention(Duration::from_secs(60))
        .allow_retention_below_retry_window()
        .try_build();
    assert!(allowed.is_ok());
}

#[test]
fn build_refuses_with_the_reason() {
    let panic = std::panic::catch_unwind(|| {
        Receiver::builder(stripe())
            .retention(Duration::from_secs(3_600))
            .build()
    })
    .expect_err("build refuses a short retention");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("stripe") && message.contains("345600 s") && message.contains("3600 s"),
        "{message}"
    );
}

#[test]
fn without_dedup_nothing_is_checked() {
    let receiver = Receiver::builder(stripe())
        .retention(Duration::from_secs(60))
        .no_dedup()
        .try_build();
    assert!(receiver.is_ok(), "no dedup store: no dedup retention");
}

#[test]
fn github_documents_no_automatic_retry_and_gets_the_margin() {
    // GitHub redelivers by hand only: the margin still covers a redelivery
    // the same day.
    assert_eq!(
        registry::find("github").unwrap().retry_window,
        Some(Duration::ZERO)
    );
    let github = || GitHub::new("secret").unwrap();
    assert!(
        Receiver::builder(github())
            .retention(RETRY_WINDOW_MARGIN)
            .try_build()
            .is_ok()
    );
    assert!(
        Receiver::builder(github())
            .retention(RETRY_WINDOW_MARGIN - Duration::from_secs(1))
            .try_build()
            .is_err()
    );
}

#[test]
fn every_documented_window_is_below_the_default_retention() {
    for info in registry::SCHEMES {
        if let Some(floor) = registry::retention_floor(info.name) {
            assert!(
                floor <= webhooks_core::inbox::DEFAULT_RETENTION,
                "{}: the default retention would be refused",
                info.name
            );
        }
    }
    assert_eq!(registry::longest_retention_floor(), 4 * DAY);
}
