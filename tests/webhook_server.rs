//! The webhook door of the real HTTP server on loopback: the whole stack plumb serves
//! (`server::router` + `server::serve_http` with its limits, the intake, the queue, the
//! dispatcher `plumb serve` runs and real scheduler actors) — only the pass is replaced by a counter, so no
//! cluster is needed. Every test is bounded: clients give up after a few seconds and
//! the server stops with its cancellation token.
#![allow(clippy::unwrap_used)]

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use hmac::{Hmac, KeyInit, Mac};
use plumb::{
    metrics::Metrics,
    scheduler::Scheduler,
    server::{self, AppState, Intake, Limits},
    webhook::{Dedupe, Receiver, RepoKey, Secret, Watch, WatchedRepository},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

const URL: &str = "https://gitea.example.invalid/acme/fleet.git";
const SECRET: &[u8] = b"test-secret";

struct Server {
    addr: SocketAddr,
    probes: SocketAddr,
    passes: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Server {
    async fn start(limits: Limits) -> Server {
        let key = RepoKey::from_url(URL).unwrap();
        let receiver = Receiver {
            repositories: vec![WatchedRepository {
                key: key.clone(),
                secret: Some(Secret::new(SECRET)),
                allow_sha1: false,
                provider: None,
            }],
            watches: vec![Watch { app: "web".into(), repo: key, revision: "main".into(), path_filter: None }],
            max_body_bytes: limits.max_body_bytes,
        };
        let metrics = Arc::new(Metrics::default());
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        let passes = Arc::new(AtomicUsize::new(0));
        let p = passes.clone();
        let pass = move |_app: String, _cause: plumb::scheduler::Cause, (): ()| {
            let p = p.clone();
            async move {
                p.fetch_add(1, Ordering::SeqCst);
                (false, ())
            }
        };
        let apps = [("web".to_string(), Duration::from_secs(3600))];
        let scheduler =
            Scheduler::start_with(apps, pass, plumb::serve::trigger_metrics(metrics.clone()), &tracker, token.clone());
        let (intake, queue) = Intake::new(receiver, Some(Dedupe::default()), limits.queue_capacity, metrics.clone());
        let intake = intake.with_buffered_bytes(limits.max_buffered_bytes);
        let leadership = plumb::leader::Leadership::always();
        tracker.spawn(plumb::serve::dispatch(queue, scheduler, leadership, None, token.clone()));
        let state = AppState { intake: Arc::new(intake), max_body_bytes: limits.max_body_bytes };
        let app = server::router(state, &limits);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tracker.spawn(server::serve_http(listener, app, limits, token.clone()));
        let probe_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let probes = probe_listener.local_addr().unwrap();
        let probe_router = plumb::probes::router(Arc::new(plumb::probes::Probes::new(Vec::new())), Vec::new);
        tracker.spawn(server::serve_probes(probe_listener, probe_router, token.clone()));
        tracker.close();
        Server { addr, probes, passes, metrics, token, tracker }
    }

    async fn stop(self) {
        self.token.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.tracker.wait()).await.expect("server stops within 10 s");
    }
}

fn gitea_push(after: &str, delivery: &str) -> (Vec<(String, String)>, Vec<u8>) {
    let body = serde_json::json!({
        "ref": "refs/heads/main", "before": "1".repeat(40), "after": after,
        "repository": {"clone_url": URL},
        "head_commit": {"id": after},
        "commits": [{"id": after, "added": [], "removed": [], "modified": ["apps/web/a.yaml"]}],
        "total_commits": 1
    })
    .to_string()
    .into_bytes();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(&body);
    let headers = vec![
        ("Content-Type".to_string(), "application/json".to_string()),
        ("X-Gitea-Event".to_string(), "push".to_string()),
        ("X-Gitea-Delivery".to_string(), delivery.to_string()),
        ("X-Gitea-Signature".to_string(), hex::encode(mac.finalize().into_bytes())),
    ];
    (headers, body)
}

fn head(addr: SocketAddr, extra: &str) -> String {
    format!("POST /api/webhook HTTP/1.1\r\nHost: {addr}\r\n{extra}\r\n")
}

/// One request with `Content-Length`; returns (status, body). Gives up after 10 s.
async fn post(addr: SocketAddr, headers: &[(String, String)], body: &[u8]) -> (u16, String) {
    let mut extra = format!("Connection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        extra.push_str(&format!("{k}: {v}\r\n"));
    }
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head(addr, &extra).as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await.expect("answer within 10 s").unwrap();
    parse_response(&out)
}

fn parse_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw).to_string();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// Reads until the peer closes; returns what it sent and when it closed. Panics after `limit`.
async fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, Instant) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await.expect("server closes the connection in time") {
            Ok(0) | Err(_) => return (out, Instant::now()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn metric(text: &str, prefix: &str) -> u64 {
    text.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum()
}

async fn wait_passes(server: &Server, n: usize) {
    let start = Instant::now();
    while server.passes.load(Ordering::SeqCst) < n {
        assert!(start.elapsed() < Duration::from_secs(10), "waited 10 s for pass {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Signed push → 202 and one pass through queue, dispatcher and actor; the GitHub-style
/// redelivery (same id) and the Gitea-style replay (same content, new id) → 200
/// duplicate, no pass; another content type → 415; counted by provider, event and
/// outcome; receipt-to-pass timed.
#[tokio::test]
async fn push_queues_one_pass_and_repeats_are_duplicates() {
    let server = Server::start(Limits::default()).await;
    wait_passes(&server, 1).await; // the actor's start pass
    let after = "2".repeat(40);
    let (headers, body) = gitea_push(&after, "d-1");
    let (code, answer) = post(server.addr, &headers, &body).await;
    assert_eq!(code, 202, "{answer}");
    assert!(answer.contains("\"queued\":1"), "{answer}");
    wait_passes(&server, 2).await;

    let (code, answer) = post(server.addr, &headers, &body).await;
    assert_eq!((code, answer.contains("duplicate")), (200, true), "{answer}");
    let (replay_headers, _) = gitea_push(&after, "d-2");
    let (code, _) = post(server.addr, &replay_headers, &body).await;
    assert_eq!(code, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.passes.load(Ordering::SeqCst), 2, "duplicates start no pass");

    // Content types other than JSON and form-encoded: 415, before any signature check.
    let plain: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| if k == "Content-Type" { (k.clone(), "text/plain".to_string()) } else { (k.clone(), v.clone()) })
        .collect();
    assert_eq!(post(server.addr, &plain, &body).await.0, 415);

    let text = server.metrics.encode();
    let labels = |action: &str, code: u16| {
        format!(
            "plumb_webhook_deliveries_total{{provider=\"gitea\",event=\"push\",action=\"{action}\",code=\"{code}\"}}"
        )
    };
    assert_eq!(metric(&text, &labels("reconcile", 202)), 1, "{text}");
    assert_eq!(metric(&text, &labels("duplicate", 200)), 2, "{text}");
    assert_eq!(metric(&text, "plumb_webhook_to_pass_seconds_count"), 1, "{text}");
    server.stop().await;
}

/// A client that sends its request head one byte at a time, or nothing at all, is
/// disconnected after the header read timeout.
#[tokio::test]
async fn slow_loris_head_is_disconnected() {
    let timeout = Duration::from_millis(500);
    let server = Server::start(Limits { header_read_timeout: timeout, ..Limits::default() }).await;
    let addr = server.addr;

    let mut slow = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let drip = tokio::spawn(async move {
        // Never finishes the head; stops when the server has closed.
        for b in head(addr, "Content-Length: 2\r\n").bytes().cycle().take(200) {
            let mut s = [0u8; 1];
            s[0] = if b == b'\r' || b == b'\n' { b'x' } else { b };
            tokio::time::sleep(Duration::from_millis(50)).await;
            if slow.write_all(&s).await.is_err() {
                return (slow, Instant::now());
            }
            if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(1), slow.read(&mut [0u8; 64])).await {
                return (slow, Instant::now());
            }
        }
        panic!("still connected after 10 s of dripping");
    });
    let (_, closed) = tokio::time::timeout(Duration::from_secs(15), drip).await.unwrap().unwrap();
    let held = closed - started;
    assert!(held >= timeout && held < Duration::from_secs(5), "slow head held the connection for {held:?}");

    let mut idle = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let (_, closed) = read_until_closed(&mut idle, Duration::from_secs(5)).await;
    assert!(closed - started >= timeout, "idle connection closed after {:?}", closed - started);

    // The server still answers.
    let (code, _) = post(addr, &[], b"{}").await;
    assert_eq!(code, 400, "no provider headers");
    server.stop().await;
}

/// A body that trickles in is answered 408 once the request timeout passes.
#[tokio::test]
async fn slow_body_gets_408() {
    let timeout = Duration::from_millis(800);
    let server = Server::start(Limits { request_timeout: timeout, ..Limits::default() }).await;
    let (headers, body) = gitea_push(&"3".repeat(40), "slow");
    let mut extra = format!("Content-Length: {}\r\n", body.len());
    for (k, v) in &headers {
        extra.push_str(&format!("{k}: {v}\r\n"));
    }
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(head(server.addr, &extra).as_bytes()).await.unwrap();
    let started = Instant::now();
    let (mut rd, mut wr) = s.into_split();
    let writer = tokio::spawn(async move {
        for b in body.iter().take(100) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if wr.write_all(&[*b]).await.is_err() {
                break;
            }
        }
    });
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf)).await.expect("408 within 5 s").unwrap();
        assert!(n > 0, "closed without an answer");
        out.extend_from_slice(&buf[..n]);
    }
    let waited = started.elapsed();
    assert_eq!(parse_response(&out).0, 408);
    assert!(waited >= timeout && waited < Duration::from_secs(4), "answered after {waited:?}");
    writer.abort();
    assert_eq!(server.passes.load(Ordering::SeqCst), 1, "only the start pass");
    server.stop().await;
}

/// A chunked body without `Content-Length` is cut at the limit while it is read: the
/// 413 comes back while the client is still sending, long before the 256 MiB it meant
/// to send; a declared `Content-Length` over the limit is refused before the body.
#[tokio::test]
async fn oversized_bodies_are_cut_at_the_limit() {
    let limit = 64 * 1024;
    let server = Server::start(Limits { max_body_bytes: limit, ..Limits::default() }).await;
    let (headers, _) = gitea_push(&"4".repeat(40), "big");
    let mut extra = "Transfer-Encoding: chunked\r\n".to_string();
    for (k, v) in &headers {
        extra.push_str(&format!("{k}: {v}\r\n"));
    }
    let s = TcpStream::connect(server.addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    wr.write_all(head(server.addr, &extra).as_bytes()).await.unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    let writer = tokio::spawn(async move {
        let chunk = [b"4000\r\n".as_slice(), &[b' '; 0x4000], b"\r\n"].concat();
        for _ in 0..(256 * 1024 * 1024 / 0x4000) {
            if wr.write_all(&chunk).await.is_err() {
                return;
            }
            counter.fetch_add(0x4000, Ordering::SeqCst);
        }
    });
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        let n =
            tokio::time::timeout(Duration::from_secs(10), rd.read(&mut buf)).await.expect("413 within 10 s").unwrap();
        assert!(n > 0, "closed without an answer");
        out.extend_from_slice(&buf[..n]);
    }
    let at_answer = sent.load(Ordering::SeqCst);
    assert_eq!(parse_response(&out).0, 413);
    tokio::time::timeout(Duration::from_secs(10), writer).await.expect("the server hangs up on the sender").unwrap();
    let total = sent.load(Ordering::SeqCst);
    assert!(total < 64 * 1024 * 1024, "server accepted {total} bytes ({at_answer} when it answered) of a 256 MiB body");

    let huge = format!("Content-Length: {}\r\nConnection: close\r\nX-Gitea-Event: push\r\n", 10u64 << 30);
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(head(server.addr, &huge).as_bytes()).await.unwrap();
    let (raw, _) = read_until_closed(&mut s, Duration::from_secs(5)).await;
    let (code, answer) = parse_response(&raw);
    assert_eq!(code, 413, "{answer}");

    let text = server.metrics.encode();
    assert_eq!(
        metric(
            &text,
            "plumb_webhook_deliveries_total{provider=\"gitea\",event=\"push\",action=\"reject\",code=\"413\"}"
        ),
        2,
        "{text}"
    );
    server.stop().await;
}

/// With two request slots held by slow bodies, a third request waits for a slot.
#[tokio::test]
async fn concurrent_requests_are_bounded() {
    let timeout = Duration::from_millis(1500);
    let limits = Limits { max_concurrent_requests: 2, request_timeout: timeout, ..Limits::default() };
    let server = Server::start(limits).await;
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        s.write_all(head(server.addr, "Content-Length: 10\r\nX-Gitea-Event: push\r\n").as_bytes()).await.unwrap();
        holders.push(s); // never sends the body
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.addr).as_bytes())
        .await
        .unwrap();
    let (raw, _) = read_until_closed(&mut s, Duration::from_secs(10)).await;
    let waited = started.elapsed();
    let code = parse_response(&raw).0;
    // the public listener serves no metrics (404), but even its 404 waits for a slot
    assert!(code == 404 || code == 408, "{code}");
    assert!(waited >= Duration::from_millis(900), "the third request did not wait for a slot ({waited:?})");
    for mut h in holders {
        let (raw, _) = read_until_closed(&mut h, Duration::from_secs(10)).await;
        assert_eq!(parse_response(&raw).0, 408);
    }
    server.stop().await;
}

/// Issue 12: with every webhook request slot and connection slot held by slow bodies,
/// the probes still answer at once on their own listener (before the held requests
/// time out), and the webhook listener serves no probe.
#[tokio::test]
async fn probes_answer_while_the_webhook_is_saturated() {
    let hold = Duration::from_secs(8);
    let limits = Limits { max_concurrent_requests: 2, max_connections: 3, request_timeout: hold, ..Limits::default() };
    let server = Server::start(limits).await;
    let mut holders = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        s.write_all(head(server.addr, "Content-Length: 10\r\nX-Gitea-Event: push\r\n").as_bytes()).await.unwrap();
        holders.push(s); // never sends the body
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    for path in ["/healthz", "/readyz"] {
        let mut s = TcpStream::connect(server.probes).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
        let (raw, _) = read_until_closed(&mut s, hold / 2).await;
        assert_eq!(parse_response(&raw), (200, "ok".to_string()), "{path}");
    }
    assert!(started.elapsed() < hold / 2, "the probes waited for the webhook ({:?})", started.elapsed());
    drop(holders);
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let (raw, _) = read_until_closed(&mut s, hold * 2).await;
    assert_eq!(parse_response(&raw).0, 404, "probes only on their own listener");
    for path in ["/metrics", "/api/v1/applications"] {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
        let (raw, _) = read_until_closed(&mut s, hold * 2).await;
        assert_eq!(parse_response(&raw).0, 404, "{path} only on the internal listener");
    }
    server.stop().await;
}

/// Issue 12: the bodies of requests being read share one memory budget. A slow upload
/// holding most of it (its declared length is taken up front) makes a second delivery
/// that would go over it answer 503 at once; once the slow one is gone, the same
/// delivery is accepted.
#[tokio::test]
async fn unverified_bodies_share_one_memory_budget() {
    let limits = Limits { max_body_bytes: 80_000, max_buffered_bytes: 100_000, ..Limits::default() };
    let server = Server::start(limits).await;
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(head(server.addr, "Content-Length: 80000\r\nX-Gitea-Event: push\r\n").as_bytes()).await.unwrap();
    slow.write_all(&[b' '; 1000]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let after = "2".repeat(40);
    let body = serde_json::json!({
        "ref": "refs/heads/main", "before": "1".repeat(40), "after": after,
        "repository": {"clone_url": URL}, "head_commit": {"id": after},
        "commits": [{"id": after, "message": "x".repeat(30_000)}], "total_commits": 1
    })
    .to_string()
    .into_bytes();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(&body);
    let signed = |delivery: &str| {
        vec![
            ("Content-Type".to_string(), "application/json".to_string()),
            ("X-Gitea-Event".to_string(), "push".to_string()),
            ("X-Gitea-Delivery".to_string(), delivery.to_string()),
            ("X-Gitea-Signature".to_string(), hex::encode(mac.clone().finalize().into_bytes())),
        ]
    };
    let (code, answer) = post(server.addr, &signed("d-1"), &body).await;
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("memory budget"), "{answer}");
    drop(slow);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, answer) = post(server.addr, &signed("d-2"), &body).await;
    assert_eq!(code, 202, "{answer}");
    server.stop().await;
}
