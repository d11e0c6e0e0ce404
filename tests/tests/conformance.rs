//! Runs every scenario on every framework × backend, as separate tests named
//! `<framework>/<backend>/<scenario>`.

use libtest_mimic::{Arguments, Failed, Trial};
use webhooks_conformance::apps::Framework;
use webhooks_conformance::backends::Backend;
use webhooks_conformance::scenarios::{Env, SCENARIOS, ScenarioFn};

fn run(
    framework: Framework,
    backend: Backend,
    name: &'static str,
    f: ScenarioFn,
) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::from(e.to_string()))?;
    runtime
        .block_on(async move {
            let Some(store) = backend.store().await? else {
                eprintln!(
                    "skipping {}/{}/{name}: server not reachable (set CI=true to make this fail)",
                    framework.name(),
                    backend.name()
                );
                return Ok(());
            };
            f(Env::new(framework, backend, store, name)).await
        })
        .map_err(Failed::from)
}

fn main() {
    let args = Arguments::from_args();
    webhooks_conformance::signals::install();
    let mut trials = Vec::new();
    for &framework in Framework::ALL {
        for backend in Backend::all() {
            for &(name, f) in SCENARIOS {
                trials.push(Trial::test(
                    format!("{}/{}/{name}", framework.name(), backend.name()),
                    move || run(framework, backend, name, f),
                ));
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
