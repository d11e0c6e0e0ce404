//! The load benchmark: server CPU per webhook delivery over real HTTP.
//!
//! ```text
//! cd core/bench && cargo build --release --bins
//! target/release/loadbench                      # the table (axum + actix, every config)
//! target/release/loadbench --memory             # peak RSS under 256 concurrent 1 MiB uploads
//! target/release/loadbench --help
//! ```
//!
//! For each round, each configuration and each framework (interleaved, the
//! configuration order rotated every round), it starts `load_server` pinned to
//! one core (`taskset`), signs fresh distinct Standard Webhooks deliveries
//! (1 KiB JSON bodies, or `--body-len` bytes) into a file, and runs `wrk` pinned to another core for
//! a few seconds with a Lua script that sends them one after the other. The
//! server's CPU time (user + system, from `/proc/<pid>/stat`) over the run
//! divided by the requests answered is its CPU cost per request; Redis' and
//! PostgreSQL's own CPU (every `redis-server` / `postgres` process, so other
//! clients of those servers show up too) is reported beside it. It prints
//! medians with min–max over the rounds, and each configuration's ratio to
//! the bare route measured in the same round.
//!
//! Needs `wrk` and `taskset`; Redis and PostgreSQL at `WEBHOOKS_REDIS_URL` /
//! `WEBHOOKS_POSTGRES_URL` (defaults `redis://127.0.0.1:6379`,
//! `postgres://postgres@127.0.0.1:5432/test`, `psql` to empty the table).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The bodies' length unless `--body-len` says otherwise.
const BODY_LEN: usize = 1024;
const CONFIGS: [&str; 8] = [
    "bare", "verify", "dedup", "dup", "peer", "floor", "redis", "postgres",
];
const LABELS: [(&str, &str); 8] = [
    ("bare", "bare route reading the body"),
    (
        "peer",
        "`standardwebhooks` crate verifying inside the handler",
    ),
    ("floor", "hand-written middleware: verify + dedup map"),
    ("verify", "layer, verification only (`no_dedup`)"),
    ("dedup", "layer + in-process dedup (default)"),
    ("dup", "layer + in-process dedup, duplicates only"),
    ("redis", "layer + Redis dedup"),
    ("postgres", "layer + PostgreSQL dedup"),
];
/// Distinct deliveries signed per second of run: above what one core serves.
const MAX_RATE: u64 = 150_000;

const LUA: &str = r#"
-- Sends pre-signed deliveries in order: args = body file, deliveries file, mode.
local ids, sigs, n, i = {}, {}, 0, 0
local dup = false
function init(args)
  local f = assert(io.open(args[1], "rb")); wrk.body = f:read("*a"); f:close()
  dup = args[3] == "dup"
  local ts
  for line in io.lines(args[2]) do
    if not ts then ts = line else
      local id, sig = line:match("^(%S+) (%S+)$")
      n = n + 1; ids[n] = id; sigs[n] = sig
    end
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["webhook-timestamp"] = ts
end
function request()
  i = i + 1
  if i > n then i = 1 end
  local k = dup and 1 or i
  wrk.headers["webhook-id"] = ids[k]
  wrk.headers["webhook-signature"] = sigs[k]
  return wrk.format()
end
"#;

struct Options {
    rounds: usize,
    secs: u64,
    conns: usize,
    frameworks: Vec<String>,
    configs: Vec<String>,
    server: PathBuf,
    server_cpu: String,
    client_cpu: String,
    memory: bool,
    /// Bytes in each delivery's JSON body.
    body_len: usize,
    /// Another build of `load_server` (e.g. of the parent commit): every
    /// configuration but `bare` also runs on it, as `<config>@base`,
    /// interleaved with this build's runs.
    baseline: Option<PathBuf>,
}

fn options() -> Options {
    let exe = std::env::current_exe().expect("exe");
    let dir = exe.parent().expect("dir").to_path_buf();
    let mut o = Options {
        rounds: 3,
        secs: 3,
        conns: 64,
        frameworks: vec!["axum".into(), "actix".into()],
        configs: CONFIGS.iter().map(|s| (*s).to_owned()).collect(),
        server: dir.join("load_server"),
        server_cpu: "1".into(),
        client_cpu: "0".into(),
        memory: false,
        body_len: BODY_LEN,
        baseline: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("a value after the option");
        match arg.as_str() {
            "--rounds" => o.rounds = value().parse().expect("rounds"),
            "--secs" => o.secs = value().parse().expect("secs"),
            "--conns" => o.conns = value().parse().expect("conns"),
            "--frameworks" => o.frameworks = value().split(',').map(Into::into).collect(),
            "--configs" => o.configs = value().split(',').map(Into::into).collect(),
            "--server" => o.server = value().into(),
            "--server-cpu" => o.server_cpu = value(),
            "--client-cpu" => o.client_cpu = value(),
            "--memory" => o.memory = true,
            "--body-len" => o.body_len = value().parse().expect("body length"),
            "--baseline" => o.baseline = Some(value().into()),
            _ => {
                println!(
                    "loadbench [--rounds 3] [--secs 3] [--conns 64] [--frameworks axum,actix]\n  \
                     [--configs {}] [--server PATH] [--server-cpu 1] [--client-cpu 0] [--memory]\n  \
                     [--body-len 1024] [--baseline PATH-TO-ANOTHER-load_server]",
                    CONFIGS.join(",")
                );
                std::process::exit(if arg == "--help" { 0 } else { 2 });
            }
        }
    }
    if o.baseline.is_some() {
        let base: Vec<String> = o
            .configs
            .iter()
            .filter(|c| *c != "bare")
            .map(|c| format!("{c}@base"))
            .collect();
        o.configs.extend(base);
    }
    o
}

/// A configuration's name without its `@base` suffix, and the server binary
/// that runs it.
fn server_for<'a>(o: &'a Options, config: &'a str) -> (&'a str, &'a Path) {
    match (config.strip_suffix("@base"), &o.baseline) {
        (Some(config), Some(base)) => (config, base),
        _ => (config, &o.server),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// A JSON body of `len` bytes (at least its fixed part's 48).
fn body(len: usize) -> Vec<u8> {
    let mut body = br#"{"type":"invoice.paid","data":{"id":"in_1","note":""#.to_vec();
    while body.len() < len.saturating_sub(3) {
        body.push(b'a' + (body.len() % 26) as u8);
    }
    body.extend_from_slice(b"\"}}");
    body
}

/// User + system CPU time of a process, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// CPU ticks of every process whose command name starts with `prefix`.
fn cpu_of(prefix: &str) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.starts_with(prefix)
            && let Some(t) = cpu_ticks(pid)
        {
            out.insert(pid, t);
        }
    }
    out
}

/// Ticks used between two `cpu_of` snapshots (processes born meanwhile count whole).
fn ticks_between(before: &BTreeMap<u32, u64>, after: &BTreeMap<u32, u64>) -> u64 {
    after
        .iter()
        .map(|(pid, t)| t.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum()
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

struct Server {
    child: Child,
}

impl Server {
    fn start(o: &Options, framework: &str, config: &str, port: u16, namespace: &str) -> Self {
        let (config, path) = server_for(o, config);
        let server_config = if config == "dup" { "dedup" } else { config };
        let mut child = Command::new("taskset")
            .args(["-c", &o.server_cpu])
            .arg(path)
            .args([framework, server_config, &port.to_string(), namespace])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start load_server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("ready line");
        assert_eq!(line.trim(), "ready", "{framework} {config} did not start");
        // Wait until it accepts connections.
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "server never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak and current resident set, in KiB.
    fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        (field("VmHWM:"), field("VmRSS:"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid().to_string()).status();
        let _ = self.child.wait();
    }
}

/// A raw HTTP/1.1 POST of a signed delivery; returns the status code.
fn post(port: u16, id: &str, ts: u64, signature: &str, body: &[u8]) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let head = format!(
        "POST /hook HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         webhook-id: {id}\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {signature}\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("write");
    stream.write_all(body).expect("write");
    status_of(&mut stream)
}

fn status_of(stream: &mut TcpStream) -> u16 {
    let mut buf = [0u8; 12];
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    match stream.read_exact(&mut buf) {
        Ok(()) => std::str::from_utf8(&buf[9..12])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        Err(_) => 0,
    }
}

/// One measured run.
#[derive(Clone, Copy, Default)]
struct Run {
    requests: u64,
    non_2xx: u64,
    server_us: f64,
    redis_us: f64,
    postgres_us: f64,
    rate: f64,
}

fn run_one(o: &Options, dir: &Path, framework: &str, config: &str, tag: &str) -> Run {
    let port = 18_000 + (std::process::id() % 1000) as u16;
    let namespace = format!("lb{tag}").replace('@', "_");
    let server = server_for(o, config).0;
    if server == "postgres" {
        let url = env_or(
            "WEBHOOKS_POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/test",
        );
        let _ = Command::new("psql")
            .args([&url, "-qc", "TRUNCATE loadbench_dedup"])
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .status();
    }
    let server = Server::start(o, framework, config, port, &namespace);
    let config = server_for(o, config).0;

    let verifier = StandardWebhooks::new(SECRET).expect("secret");
    let body = body(o.body_len);
    let ts = unix_now();
    let n = if config == "dup" {
        1
    } else {
        MAX_RATE * o.secs
    };
    let mut data = format!("{ts}\n");
    for i in 0..n {
        let id = format!("msg_{tag}_{i}");
        let sig = verifier.sign(&id, ts, &body).expect("sign");
        writeln!(data, "{id} {sig}").expect("write");
    }
    let data_path = dir.join("deliveries.txt");
    std::fs::write(&data_path, data).expect("deliveries");
    if config == "dup" {
        let sig = verifier.sign(&format!("msg_{tag}_0"), ts, &body).unwrap();
        assert_eq!(post(port, &format!("msg_{tag}_0"), ts, &sig, &body), 204);
    }

    let pg_before = cpu_of("postgres");
    let redis_before = cpu_of("redis-server");
    let before = cpu_ticks(server.pid()).expect("server stat");
    let out = Command::new("taskset")
        .args(["-c", &o.client_cpu, "wrk", "-t1"])
        .arg(format!("-c{}", o.conns))
        .arg(format!("-d{}s", o.secs))
        .arg("-s")
        .arg(dir.join("deliveries.lua"))
        .arg(format!("http://127.0.0.1:{port}/hook"))
        .arg("--")
        .arg(dir.join("body.json"))
        .arg(&data_path)
        .arg(if config == "dup" { "dup" } else { "distinct" })
        .output()
        .expect("wrk");
    let after = cpu_ticks(server.pid()).expect("server stat");
    let redis = ticks_between(&redis_before, &cpu_of("redis-server"));
    let pg = ticks_between(&pg_before, &cpu_of("postgres"));
    drop(server);

    let text = String::from_utf8_lossy(&out.stdout);
    let number_before = |marker: &str| -> Option<f64> {
        let at = text.find(marker)?;
        text[..at].split_whitespace().last()?.parse().ok()
    };
    let number_after = |marker: &str| -> Option<f64> {
        let at = text.find(marker)? + marker.len();
        text[at..].split_whitespace().next()?.parse().ok()
    };
    let requests = number_before("requests in").unwrap_or(0.0) as u64;
    assert!(requests > 0, "wrk: {text}");
    assert!(
        config == "dup" || requests <= n,
        "more requests than distinct deliveries: raise MAX_RATE"
    );
    let per = |ticks: u64| ticks as f64 * 10_000.0 / requests as f64;
    Run {
        requests,
        non_2xx: number_after("Non-2xx or 3xx responses:").unwrap_or(0.0) as u64,
        server_us: per(after - before),
        redis_us: per(redis),
        postgres_us: per(pg),
        rate: number_after("Requests/sec:").unwrap_or(0.0),
    }
}

/// Whether this CPU has the SHA extensions (SHA-NI) that sha2 uses for
/// SHA-256, as `/proc/cpuinfo` says: "yes", "no" or "unknown".
fn sha_extensions() -> &'static str {
    match std::fs::read_to_string("/proc/cpuinfo") {
        Ok(info) if info.split_whitespace().any(|flag| flag == "sha_ni") => "yes",
        Ok(_) => "no",
        Err(_) => "unknown",
    }
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let mid = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (mid, v[0], v[v.len() - 1])
}

fn load(o: &Options) {
    let dir = std::env::temp_dir().join(format!("loadbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("deliveries.lua"), LUA).expect("lua");
    std::fs::write(dir.join("body.json"), body(o.body_len)).expect("body");
    let mut runs: BTreeMap<(String, String), Vec<Run>> = BTreeMap::new();
    let mut ratios: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for round in 0..o.rounds {
        let mut order = o.configs.clone();
        let len = order.len().max(1);
        order.rotate_left(round % len);
        let mut this_round: BTreeMap<(String, String), Run> = BTreeMap::new();
        for config in &order {
            for framework in &o.frameworks {
                let tag = format!("{}_{round}_{framework}_{config}", std::process::id());
                let run = run_one(o, &dir, framework, config, &tag);
                eprintln!(
                    "round {round} {framework:5} {config:8} {:>8.0} req/s {:6.1} µs/req server \
                     {:5.1} redis {:6.1} postgres ({} requests, {} non-2xx)",
                    run.rate,
                    run.server_us,
                    run.redis_us,
                    run.postgres_us,
                    run.requests,
                    run.non_2xx
                );
                this_round.insert((framework.clone(), config.clone()), run);
            }
        }
        for ((framework, config), run) in &this_round {
            if let Some(bare) = this_round.get(&(framework.clone(), "bare".to_owned())) {
                ratios
                    .entry((framework.clone(), config.clone()))
                    .or_default()
                    .push(run.server_us / bare.server_us);
            }
            runs.entry((framework.clone(), config.clone()))
                .or_default()
                .push(*run);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);

    let cell = |v: Vec<f64>, digits: usize| {
        if v.is_empty() {
            return String::new();
        }
        let (mid, lo, hi) = median(v);
        format!("{mid:.digits$} [{lo:.digits$}–{hi:.digits$}]")
    };
    let mut header = String::from("| config |");
    let mut rule = String::from("|---|");
    for f in &o.frameworks {
        write!(header, " {f} µs/req | × bare |").unwrap();
        rule.push_str("---:|---:|");
    }
    println!(
        "\nServer CPU per request, median [min–max] of {} rounds of {} s, {} connections, \
         {}-byte bodies, SHA extensions {}:\n",
        o.rounds,
        o.secs,
        o.conns,
        o.body_len,
        sha_extensions()
    );
    println!("{header}\n{rule}");
    let rows = LABELS.iter().flat_map(|&(config, label)| {
        [
            (config.to_owned(), label.to_owned()),
            (format!("{config}@base"), format!("{label}, baseline build")),
        ]
    });
    for (config, label) in rows {
        if !o.configs.contains(&config) {
            continue;
        }
        let mut line = format!("| {label} |");
        for f in &o.frameworks {
            let key = (f.clone(), config.clone());
            let us = runs
                .get(&key)
                .map(|r| r.iter().map(|r| r.server_us).collect())
                .unwrap_or_default();
            let x = ratios.get(&key).cloned().unwrap_or_default();
            write!(line, " {} | {} |", cell(us, 1), cell(x, 2)).unwrap();
        }
        println!("{line}");
    }
    println!("\nThroughput and the stores' own CPU per request (medians):\n");
    println!(
        "| config | framework | req/s | server µs/req | Redis µs/req | PostgreSQL µs/req | non-2xx |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let rows = LABELS
        .iter()
        .flat_map(|&(config, _)| [config.to_owned(), format!("{config}@base")]);
    for config in rows {
        let kind = config.trim_end_matches("@base");
        for f in &o.frameworks {
            let Some(r) = runs.get(&(f.clone(), config.clone())) else {
                continue;
            };
            let m = |g: fn(&Run) -> f64| median(r.iter().map(g).collect()).0;
            let non_2xx: u64 = r.iter().map(|r| r.non_2xx).sum();
            println!(
                "| {config} | {f} | {:.0} | {:.1} | {} | {} | {non_2xx} |",
                m(|r| r.rate),
                m(|r| r.server_us),
                if kind == "redis" {
                    format!("{:.1}", m(|r| r.redis_us))
                } else {
                    "—".into()
                },
                if kind == "postgres" {
                    format!("{:.1}", m(|r| r.postgres_us))
                } else {
                    "—".into()
                },
            );
        }
    }
}

/// Peak RSS with 256 concurrent 1 MiB uploads held at their last byte, and
/// an over-limit chunked upload answered 413 before it ends.
fn memory(o: &Options) {
    const UPLOADS: usize = 256;
    const LIMIT: usize = 1024 * 1024;
    println!(
        "| framework | idle RSS | peak RSS, {UPLOADS} × 1 MiB | budget (limit × {UPLOADS} + 64 MiB) | 204s | over-limit chunked upload |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    for framework in &o.frameworks {
        let port = 19_000 + (std::process::id() % 1000) as u16;
        // The default route, unless `--configs` names another (e.g. `bare`).
        let config = if o.configs.len() == 1 {
            &o.configs[0]
        } else {
            "dedup"
        };
        let server = Server::start(o, framework, config, port, "mem");
        let idle = server.rss_kib().1;
        let verifier = StandardWebhooks::new(SECRET).unwrap();
        let ts = unix_now();
        let body: Arc<Vec<u8>> = Arc::new((0..LIMIT).map(|i| b'a' + (i % 26) as u8).collect());
        let barrier = Arc::new(Barrier::new(UPLOADS));
        let handles: Vec<_> = (0..UPLOADS)
            .map(|i| {
                let id = format!("mem_{}_{framework}_{i}", std::process::id());
                let sig = verifier.sign(&id, ts, &body).unwrap();
                let (body, barrier) = (Arc::clone(&body), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                    let head = format!(
                        "POST /hook HTTP/1.1\r\nhost: x\r\nwebhook-id: {id}\r\n\
                         webhook-timestamp: {ts}\r\nwebhook-signature: {sig}\r\n\
                         content-length: {LIMIT}\r\nconnection: close\r\n\r\n"
                    );
                    s.write_all(head.as_bytes()).unwrap();
                    s.write_all(&body[..LIMIT - 1]).unwrap();
                    // Every upload is held by the server at once.
                    barrier.wait();
                    std::thread::sleep(Duration::from_millis(500));
                    s.write_all(&body[LIMIT - 1..]).unwrap();
                    status_of(&mut s)
                })
            })
            .collect();
        let ok = handles
            .into_iter()
            .filter(|_| true)
            .map(|h| h.join().unwrap())
            .filter(|&s| s == 204)
            .count();
        let (peak, _) = server.rss_kib();

        // Over the limit, chunked (no Content-Length to refuse up front):
        // send the limit and 256 KiB more, then stop; the 413 must come
        // without the upload ever ending.
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let sig = verifier.sign("mem_over", ts, b"").unwrap();
        let head = format!(
            "POST /hook HTTP/1.1\r\nhost: x\r\nwebhook-id: mem_over\r\nwebhook-timestamp: {ts}\r\n\
             webhook-signature: {sig}\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent < LIMIT + 256 * 1024 {
            if s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .is_err()
                || s.write_all(&chunk).is_err()
                || s.write_all(b"\r\n").is_err()
            {
                break;
            }
            sent += chunk.len();
        }
        let status = status_of(&mut s);
        let mib = |kib: u64| kib as f64 / 1024.0;
        println!(
            "| {framework} | {:.0} MiB | {:.0} MiB | {} MiB | {ok}/{UPLOADS} | {} after {} KiB sent, upload never finished |",
            mib(idle),
            mib(peak),
            (LIMIT * UPLOADS) / (1024 * 1024) + 64,
            status,
            sent / 1024
        );
    }
}

fn main() {
    let o = options();
    if o.memory {
        memory(&o);
    } else {
        load(&o);
    }
}
