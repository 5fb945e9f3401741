//! Benchmark: the webhook door of the real HTTP server on loopback.
//!
//! The server is plumb's own stack (`server::router` + `server::serve_http` with the
//! default limits, the intake with dedupe, the bounded queue, the dispatcher and real
//! per-application scheduler actors) on a 2-worker tokio runtime in this process. The
//! pass is a stand-in that sleeps `PASS_MS` (default 100 ms, about a fetch + compare of
//! a small application) and counts itself: the figures are what reaches the scheduler
//! and what its coalescing lets through, without a cluster.
//!
//! 1. **Throughput**: `wrk` (Debian package `wrk`) POSTs 8 KiB Gitea-style signed push
//!    bodies for `SECONDS` (default 10) over `WRK_CONNECTIONS` (default 16) keep-alive
//!    connections from `WRK_THREADS` (default 1) threads, cycling through
//!    1000 distinct pre-signed pushes; every request is verified (HMAC-SHA256 over the
//!    8 KiB) and parsed. Run twice: production dedupe (first sight of each push → 202, a
//!    repeat → 200 duplicate) and dedupe off (every request → 202 → queue → scheduler).
//!    Prints requests/s, p50/p99 latency from wrk and the status mix from the metrics.
//! 2. **Flood**: 100,000 valid deliveries to one application from 16 connections of an
//!    in-process HTTP/1.1 client: (a) one push delivered 100,000 times under new
//!    delivery ids (a redelivery / replay storm), (b) 100,000 different pushes. Prints
//!    how many passes the actor ran beyond its start pass.
//! 3. **Peak RSS** of this process (`VmHWM`), which holds the server, the client of the
//!    flood and the generated bodies (wrk is a separate process): after the wrk runs
//!    and at the end.
//!
//! Printed first: the time of `Receiver::decide` alone for one 8 KiB push on one thread.
//!
//! Run: `cargo bench --bench webhook` (release build). Needs `wrk` on PATH
//! (`apt-get install -y wrk`); without it the bench says so and exits with status 2.
#![allow(clippy::unwrap_used)]

use std::{
    fmt::Write as _,
    net::SocketAddr,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::body::Body;
use hmac::{Hmac, KeyInit, Mac};
use hyper_util::rt::TokioIo;
use plumb::{
    metrics::Metrics,
    scheduler::Scheduler,
    server::{self, AppState, Intake, Limits},
    webhook::{Dedupe, Receiver, RepoKey, Secret, Watch, WatchedRepository},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

const URL: &str = "https://gitea.example.invalid/acme/fleet.git";
const SECRET: &[u8] = b"bench-secret-7d1f";
const BODY_BYTES: usize = 8 * 1024;
const DISTINCT: usize = 1000;
const FLOOD: usize = 100_000;

struct Server {
    addr: SocketAddr,
    passes: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    token: CancellationToken,
    tracker: TaskTracker,
}

fn receiver() -> Receiver {
    let key = RepoKey::from_url(URL).unwrap();
    Receiver {
        repositories: vec![WatchedRepository {
            key: key.clone(),
            secret: Some(Secret::new(SECRET)),
            allow_sha1: false,
            provider: None,
        }],
        watches: vec![Watch { app: "web".into(), repo: key, revision: "main".into(), path_filter: None }],
        max_body_bytes: Limits::default().max_body_bytes,
    }
}

async fn start(dedupe: bool, pass_time: Duration) -> Server {
    let receiver = receiver();
    let limits = Limits::default();
    let metrics = Arc::new(Metrics::default());
    let token = CancellationToken::new();
    let tracker = TaskTracker::new();
    let passes = Arc::new(AtomicUsize::new(0));
    let p = passes.clone();
    let pass = move |_app: String, _cause: plumb::scheduler::Cause, (): ()| {
        let p = p.clone();
        async move {
            p.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(pass_time).await;
            (false, ())
        }
    };
    let scheduler = Scheduler::start_with(
        [("web".to_string(), Duration::from_secs(3600))],
        pass,
        plumb::serve::trigger_metrics(metrics.clone()),
        &tracker,
        token.clone(),
    );
    let (intake, queue) = Intake::new(receiver, dedupe.then(Dedupe::default), limits.queue_capacity, metrics.clone());
    let leadership = plumb::leader::Leadership::always();
    tracker.spawn(plumb::serve::dispatch(queue, scheduler, leadership, None, token.clone()));
    let state = AppState { intake: Arc::new(intake), max_body_bytes: limits.max_body_bytes };
    let app = server::router(state, &limits);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tracker.spawn(server::serve_http(listener, app, limits, token.clone()));
    tracker.close();
    // Wait for the start pass.
    while passes.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Server { addr, passes, metrics, token, tracker }
}

impl Server {
    async fn stop(self) {
        self.token.cancel();
        self.tracker.wait().await;
    }

    /// Delivery counts by `action` and `code` from the metrics.
    fn mix(&self) -> String {
        let text = self.metrics.encode();
        let mut out = String::new();
        for line in text.lines().filter(|l| l.starts_with("plumb_webhook_deliveries_total{")) {
            let action = line.split("action=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("?");
            let code = line.split("code=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("?");
            let n = line.rsplit(' ').next().unwrap_or("?");
            let _ = write!(out, "{action}/{code}: {n}  ");
        }
        out
    }
}

fn sha(i: usize, salt: u8) -> String {
    format!("{salt:02x}{i:038x}")
}

/// A Gitea push body of exactly `BODY_BYTES` (padded in the commit message), and its
/// `X-Gitea-Signature`.
fn gitea_body(after: &str, size: usize) -> (String, String) {
    let make = |pad: usize| {
        serde_json::json!({
            "ref": "refs/heads/main", "before": "1".repeat(40), "after": after,
            "compare_url": "https://gitea.example.invalid/acme/fleet/compare/x...y",
            "commits": [{
                "id": after, "message": format!("deploy: bump web\n\n{}", "x".repeat(pad)),
                "url": format!("https://gitea.example.invalid/acme/fleet/commit/{after}"),
                "author": {"name": "dev1", "email": "dev1@example.invalid", "username": "dev1"},
                "committer": {"name": "dev1", "email": "dev1@example.invalid", "username": "dev1"},
                "timestamp": "2026-01-01T00:00:00Z",
                "added": [], "removed": [], "modified": ["apps/web/deployment.yaml"]
            }],
            "total_commits": 1,
            "head_commit": {"id": after, "message": "deploy: bump web"},
            "repository": {
                "id": 1, "name": "fleet", "full_name": "acme/fleet", "private": false,
                "html_url": "https://gitea.example.invalid/acme/fleet",
                "clone_url": URL, "ssh_url": "git@gitea.example.invalid:acme/fleet.git",
                "default_branch": "main"
            },
            "pusher": {"id": 1, "login": "dev1"}, "sender": {"id": 1, "login": "dev1"}
        })
        .to_string()
    };
    let base = make(0).len();
    let body = make(size.saturating_sub(base));
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(body.as_bytes());
    (body, hex::encode(mac.finalize().into_bytes()))
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

const LUA: &str = r#"
-- Cycles through pre-signed deliveries: one per line, "<signature> <delivery id> <body>".
local reqs = {}
local n = 0
function init(args)
  for line in io.lines(args[1]) do
    local sig, id, body = line:match("^(%S+) (%S+) (.*)$")
    n = n + 1
    reqs[n] = wrk.format("POST", "/api/webhook", {
      ["Content-Type"] = "application/json",
      ["X-Gitea-Event"] = "push",
      ["X-Gitea-Event-Type"] = "push",
      ["X-Gitea-Delivery"] = id,
      ["X-Gitea-Signature"] = sig,
    }, body)
  end
  i = math.random(n)
end
function request()
  i = i % n + 1
  return reqs[i]
end
"#;

struct WrkResult {
    rps: f64,
    p50: String,
    p99: String,
    requests: String,
    errors: String,
}

fn run_wrk(addr: SocketAddr, data: &std::path::Path, script: &std::path::Path, args: &[String]) -> WrkResult {
    let out = Command::new("wrk")
        .args(args)
        .args(["--latency", "-s"])
        .arg(script)
        .arg(format!("http://{addr}/api/webhook"))
        .arg("--")
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "wrk failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let field = |prefix: &str| {
        text.lines().find(|l| l.trim_start().starts_with(prefix)).map(|l| l.trim().to_string()).unwrap_or_default()
    };
    let rps = field("Requests/sec:").split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let p50 = field("50%").split_whitespace().nth(1).unwrap_or("?").to_string();
    let p99 = field("99%").split_whitespace().nth(1).unwrap_or("?").to_string();
    let requests = text.lines().find(|l| l.contains("requests in")).map(|l| l.trim().to_string()).unwrap_or_default();
    let errors = [field("Non-2xx"), field("Socket errors")].join(" ");
    WrkResult { rps, p50, p99, requests, errors }
}

/// Sends `FLOOD` deliveries over `connections` keep-alive connections; delivery `i` is
/// `make(i)` = (signature, delivery id, body), built and signed on the fly. Returns the
/// status counts.
async fn flood(addr: SocketAddr, make: fn(usize) -> (String, String, String), connections: usize) -> Vec<(u16, usize)> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(conn);
            let mut codes = std::collections::HashMap::<u16, usize>::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= FLOOD {
                    break;
                }
                let (sig, id, body) = make(i);
                let req = hyper::Request::post("/api/webhook")
                    .header("host", addr.to_string())
                    .header("content-type", "application/json")
                    .header("x-gitea-event", "push")
                    .header("x-gitea-delivery", id)
                    .header("x-gitea-signature", sig)
                    .body(Body::from(body))
                    .unwrap();
                sender.ready().await.unwrap();
                let resp = sender.send_request(req).await.unwrap();
                *codes.entry(resp.status().as_u16()).or_default() += 1;
                let _ = axum::body::to_bytes(Body::new(resp.into_body()), 1 << 20).await;
            }
            codes
        }));
    }
    let mut total = std::collections::BTreeMap::<u16, usize>::new();
    for t in tasks {
        for (code, n) in t.await.unwrap() {
            *total.entry(code).or_default() += n;
        }
    }
    total.into_iter().collect()
}

/// The same push (same `after`) under delivery id `i`.
fn storm(i: usize) -> (String, String, String) {
    let (body, sig) = gitea_body(&sha(1, 0xbb), 512);
    (sig, format!("storm-{i}"), body)
}

/// Push number `i`: a different `after` every time.
fn distinct(i: usize) -> (String, String, String) {
    let (body, sig) = gitea_body(&sha(i, 0xcc), 512);
    (sig, format!("distinct-{i}"), body)
}

/// Appends a row of the summary table (`scripts/bench`) to the file named by
/// `BENCH_ROWS`, when set: id, figure, plumb, alternative, ratio, target, verdict.
fn row(cells: [&str; 7]) {
    if let Ok(path) = std::env::var("BENCH_ROWS") {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        writeln!(f, "{}", cells.join("\t")).unwrap();
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Builds delivery `n` of a flood: (signature, delivery id, body).
type MakeDelivery = fn(usize) -> (String, String, String);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds: u64 = env_or("SECONDS", 10);
    let pass_ms: u64 = env_or("PASS_MS", 100);
    let threads: u32 = env_or("WRK_THREADS", 1);
    let connections: u32 = env_or("WRK_CONNECTIONS", 16);
    let pass_time = Duration::from_millis(pass_ms);
    if Command::new("wrk").arg("--version").output().is_err() {
        eprintln!(
            "webhook bench: the load generator `wrk` is not installed (Debian: apt-get install -y wrk); no figures."
        );
        std::process::exit(2);
    }
    println!(
        "webhook bench: server on 2 tokio workers, {} CPUs on this machine (shared with wrk)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let baseline = vm_hwm_kib();

    // 0. The pure decision alone.
    {
        let (body, sig) = gitea_body(&sha(7, 0xdd), BODY_BYTES);
        let headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-gitea-event".to_string(), "push".to_string()),
            ("x-gitea-signature".to_string(), sig),
        ];
        let receiver = receiver();
        let n = 20_000;
        let started = Instant::now();
        for _ in 0..n {
            assert_eq!(receiver.decide(&headers, body.as_bytes()).http_status, 202);
        }
        let each = started.elapsed().as_secs_f64() / f64::from(n) * 1e6;
        println!("Receiver::decide alone (verify + parse + match, 8 KiB push, one thread): {each:.1} µs per delivery");
    }

    // 1. Throughput with wrk.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("deliveries.txt");
    let script = dir.path().join("post.lua");
    let mut lines = String::new();
    for i in 0..DISTINCT {
        let (body, sig) = gitea_body(&sha(i, 0xaa), BODY_BYTES);
        assert_eq!(body.len(), BODY_BYTES);
        let _ = writeln!(lines, "{sig} bench-{i} {body}");
    }
    std::fs::write(&data, lines).unwrap();
    std::fs::write(&script, LUA).unwrap();
    let args = vec![format!("-t{threads}"), format!("-c{connections}"), format!("-d{seconds}s")];
    for dedupe in [true, false] {
        let server = start(dedupe, pass_time).await;
        let r = tokio::task::spawn_blocking({
            let (data, script, addr, args) = (data.clone(), script.clone(), server.addr, args.clone());
            move || run_wrk(addr, &data, &script, &args)
        })
        .await
        .unwrap();
        println!(
            "throughput (8 KiB Gitea pushes, wrk {}, dedupe {}): {:.0} verified deliveries/s, p50 {}, p99 {}  [{}] {}",
            args.join(" "),
            if dedupe { "on" } else { "off" },
            r.rps,
            r.p50,
            r.p99,
            r.requests,
            r.errors.trim()
        );
        if dedupe {
            let verdict = if r.rps >= 20_000.0 { "met" } else { "NOT met" };
            row([
                "P5",
                "webhook: verified 8 KiB signed pushes per second (wrk, 2 cores shared with wrk)",
                &format!("{:.0} req/s", r.rps),
                "—",
                "—",
                "≥ 20,000 req/s",
                verdict,
            ]);
        }
        println!(
            "  responses: {}; passes after the start pass: {}",
            server.mix(),
            server.passes.load(Ordering::SeqCst) - 1
        );
        server.stop().await;
    }
    let after_wrk = vm_hwm_kib();

    // 2. Floods of 100,000 valid deliveries to one application.
    let floods: [(&str, MakeDelivery); 2] =
        [("one push redelivered 100,000 times", storm), ("100,000 different pushes", distinct)];
    for (name, make) in floods {
        let server = start(true, pass_time).await;
        let started = Instant::now();
        let codes = flood(server.addr, make, 16).await;
        let took = started.elapsed();
        // Let a queued pass start and finish.
        tokio::time::sleep(pass_time * 3 + Duration::from_millis(200)).await;
        let passes = server.passes.load(Ordering::SeqCst) - 1;
        println!(
            "flood ({name}, 16 connections, {:.1} s, {:.0}/s): passes after the start pass: {passes} (pass = {pass_ms} ms stand-in); responses {:?}",
            took.as_secs_f64(),
            FLOOD as f64 / took.as_secs_f64(),
            codes
        );
        if name == "100,000 different pushes" {
            let verdict = if passes <= 2 { "met" } else { "NOT met" };
            row([
                "P5",
                &format!(
                    "100,000 distinct signed pushes to one app in {:.1} s → passes ({pass_ms} ms stand-in pass)",
                    took.as_secs_f64()
                ),
                &format!("{passes} passes"),
                "—",
                "—",
                "≤ 2 passes",
                verdict,
            ]);
        }
        server.stop().await;
    }

    println!(
        "peak RSS (VmHWM of the bench process, server inside): {after_wrk} KiB after the wrk runs (+ 8 MB of bodies), {} KiB at the end (+ flood client), {baseline} KiB at start",
        vm_hwm_kib()
    );
}
