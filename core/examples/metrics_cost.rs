//! Instructions per delivery through the pipeline, with and without the
//! `metrics` feature, for `valgrind --tool=callgrind` (which counts
//! instructions, so the figure does not depend on the machine's load):
//!
//! ```text
//! cargo build --release -p webhooks-core --example metrics_cost --no-default-features --features memory
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/metrics_cost 20000
//! cargo build --release -p webhooks-core --example metrics_cost --features metrics-util/debugging
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/metrics_cost 20000
//! ```
//!
//! It signs `N` distinct 1 KiB deliveries up front, then runs them through
//! `Receiver::process` (verify, claim, handler, complete) with the default
//! in-process store. With the feature, a recorder is installed first
//! (`metrics-util`'s `DebuggingRecorder`: atomic counters, histograms
//! appended to a lock-free bucket, as the Prometheus exporter does). Compare
//! the totals of a run with `N` and one with `2N`: the difference over `N` is
//! the cost of one delivery, start-up excluded.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use webhooks_core::Receiver;
use webhooks_core::scheme::StandardWebhooks;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    #[cfg(feature = "metrics")]
    {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("one recorder");
        std::mem::forget(snapshotter);
    }
    let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let body = Bytes::from(vec![b'a'; 1024]);
    let requests: Vec<http::request::Parts> = (0..n)
        .map(|i| {
            let (mut parts, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
            parts.headers = verifier
                .sign_headers(&format!("msg_{i}"), now, &body)
                .unwrap();
            parts
        })
        .collect();
    let receiver = Receiver::new(verifier);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut ok = 0usize;
        for parts in requests {
            let status = receiver
                .process(parts, body.clone(), |_, _| async { 204u16 }, |s| *s)
                .await;
            ok += usize::from(status == Ok(204));
        }
        assert_eq!(ok, n);
    });
}
