//! The handler behaviour every framework's test app hosts, so that one
//! scenario list can hold both to the same contract.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use webhooks_core::{Refusal, Verified};

/// The message of the `panic-once` handler's panic: the scenarios that cause
/// it keep it quiet with `webhooks_core::testing::expect_panics`.
pub const PANIC_ON_PURPOSE: &str = "handler panicked on purpose";

/// The mode whose handler refuses the delivery for good.
pub const REFUSE_PERMANENT: &str = "refuse-permanent";
/// The mode whose handler refuses the delivery for now.
pub const REFUSE_TRANSIENT: &str = "refuse-transient";
/// The reason the refusing handlers give.
pub const REFUSAL_REASON: &str = "refused on purpose";

/// The header a scenario uses to choose what the handler does.
pub const MODE_HEADER: &str = "x-test-mode";
/// The header a scenario sets to check the verified event type.
pub const EXPECT_EVENT_HEADER: &str = "x-test-expect-event";

/// What a route handler read from the request's test headers.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestHeaders<'a> {
    /// `x-test-mode` (default `ok`).
    pub mode: Option<&'a str>,
    /// `x-test-expect-event`, if set.
    pub expect_event: Option<&'a [u8]>,
}

/// Counts handler runs per delivery id and acts as the request's mode says.
#[derive(Debug, Default)]
pub struct Behaviour {
    calls: Mutex<HashMap<String, u32>>,
    total: AtomicUsize,
}

impl Behaviour {
    /// Runs the handler for delivery `id` in `mode` and returns the status:
    ///
    /// * `ok` → 204;
    /// * `sleep:<ms>` → sleeps, then 204;
    /// * `sleep-first:<ms>` → sleeps on this id's first run only, then 204;
    /// * `sleep-fail:<ms>` → sleeps, then 500;
    /// * `fail` → 500; `fail-once` → 500 on this id's first run, then 204;
    /// * `panic-once` → panics on this id's first run, then 204.
    pub async fn handle(&self, mode: &str, id: &str) -> u16 {
        let run = {
            let mut calls = self
                .calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = calls.entry(id.to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        self.total.fetch_add(1, Ordering::SeqCst);
        let (name, arg) = mode.split_once(':').unwrap_or((mode, ""));
        let ms = Duration::from_millis(arg.parse().unwrap_or(0));
        match name {
            "sleep" => {
                tokio::time::sleep(ms).await;
                204
            }
            "sleep-first" => {
                if run == 1 {
                    tokio::time::sleep(ms).await;
                }
                204
            }
            "fail" => 500,
            "sleep-fail" => {
                tokio::time::sleep(ms).await;
                500
            }
            "fail-once" if run == 1 => 500,
            "panic-once" if run == 1 => panic!("{PANIC_ON_PURPOSE}"),
            _ => 204,
        }
    }

    /// The `/hook` (and `/github`) route, the same on every framework: 418 if
    /// the body the handler read is not the verified one or the event type is
    /// not the expected one; otherwise [`handle`](Self::handle).
    pub async fn hook(&self, test: TestHeaders<'_>, meta: &Verified, body_intact: bool) -> u16 {
        let event_ok = test
            .expect_event
            .is_none_or(|want| Some(want) == meta.event_type.as_deref().map(str::as_bytes));
        if !body_intact || !event_ok {
            return 418;
        }
        self.handle(test.mode.unwrap_or("ok"), meta.id.as_deref().unwrap_or(""))
            .await
    }

    /// The `/hook` route's answer: like [`hook`](Self::hook) (the run is
    /// counted), except that modes `refuse-permanent` and `refuse-transient`
    /// (a 2 s `Retry-After`) answer with a [`Refusal`] the adapter renders
    /// for the delivery's provider.
    pub async fn hook_answer(
        &self,
        test: TestHeaders<'_>,
        meta: &Verified,
        body_intact: bool,
    ) -> Result<u16, Refusal> {
        let refusal = match test.mode {
            Some(REFUSE_PERMANENT) => Some(Refusal::permanent(REFUSAL_REASON)),
            Some(REFUSE_TRANSIENT) => {
                Some(Refusal::transient(REFUSAL_REASON).retry_after(Duration::from_secs(2)))
            }
            _ => None,
        };
        let mode = if refusal.is_some() {
            Some("ok")
        } else {
            test.mode
        };
        let status = self
            .hook(TestHeaders { mode, ..test }, meta, body_intact)
            .await;
        match refusal {
            Some(refusal) if status == 204 => Err(refusal),
            _ => Ok(status),
        }
    }

    /// The `/typed` route: the typed event must be complete.
    pub async fn typed(&self, test: TestHeaders<'_>, meta: &Verified, event: &TypedEvent) -> u16 {
        if event.kind.is_empty() {
            return 418;
        }
        let _ = event.data.count;
        self.handle(test.mode.unwrap_or("ok"), meta.id.as_deref().unwrap_or(""))
            .await
    }

    /// How many times the handler ran for `id`.
    pub fn calls(&self, id: &str) -> u32 {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .copied()
            .unwrap_or(0)
    }

    /// How many times the handler ran in all.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
}

/// The typed event of the `/typed` route.
#[derive(Debug, serde::Deserialize)]
pub struct TypedEvent {
    /// The event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its data.
    pub data: TypedData,
}

/// The data of a [`TypedEvent`].
#[derive(Debug, serde::Deserialize)]
pub struct TypedData {
    /// A number; scenarios send a string here to provoke a 422.
    pub count: u32,
}

/// Whether `form`, as a form extractor decoded it, is what `body` says: the
/// same number of `name=value` pairs, with the same names in order.
pub fn form_matches(form: &[(String, String)], body: &[u8]) -> bool {
    let pairs: Vec<&[u8]> = body
        .split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .collect();
    pairs.len() == form.len()
        && pairs
            .iter()
            .zip(form)
            .all(|(pair, (name, _))| pair.split(|&b| b == b'=').next() == Some(name.as_bytes()))
}
