//! The metrics every scenario's app reports, read back from one debugging
//! recorder installed for the whole conformance binary. Each scenario's app
//! has its own namespace, which is the `route` label, so a scenario reads
//! exactly its own series.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        // Fails only if a recorder is already installed, which this binary
        // never does elsewhere.
        let _ = recorder.install();
        snapshotter
    })
}

/// Installs the recorder; call it before the first app starts (the
/// pipeline resolves its metric handles on first use).
pub fn install() {
    snapshotter();
}

/// The series of `route`, as `name{label=value,…}` (the `route` label left
/// out) → count (a counter's value, a histogram's number of samples).
///
/// Snapshots drain what they read and scenarios run concurrently, so every
/// snapshot is folded into one accumulated view.
pub fn series(route: &str) -> BTreeMap<String, u64> {
    static SEEN: Mutex<BTreeMap<(String, String), u64>> = Mutex::new(BTreeMap::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let key = key.key();
        let Some(of) = key.labels().find(|l| l.key() == "route") else {
            continue;
        };
        let labels: Vec<String> = key
            .labels()
            .filter(|l| l.key() != "route")
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let id = (
            of.value().to_owned(),
            format!("{}{{{}}}", key.name(), labels.join(",")),
        );
        let n = match value {
            DebugValue::Counter(n) => n,
            DebugValue::Histogram(samples) => samples.len() as u64,
            DebugValue::Gauge(_) => continue,
        };
        *seen.entry(id).or_default() += n;
    }
    seen.iter()
        .filter(|((r, _), n)| r == route && **n > 0)
        .map(|((_, name), n)| (name.clone(), *n))
        .collect()
}
