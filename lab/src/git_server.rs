//! Bare repositories over smart HTTP: Git's own `git http-backend` behind a CGI bridge.
//!
//! Read-only (clone and fetch): `GIT_HTTP_EXPORT_ALL` is set and receive-pack stays off,
//! so pushes go to the bare repository on disk.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::Context as _;
use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, Uri},
    response::Response,
};
use tokio::io::AsyncWriteExt;

/// A running Git HTTP server. Dropping it stops the server.
pub struct GitServer {
    /// Base URL, `http://127.0.0.1:<port>`; a repository `x.git` in the root is at
    /// `<base>/x.git`.
    pub base: String,
    /// What has been asked of the server so far (see [`GitServer::counts`]).
    counts: Arc<Counters>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn backend() -> PathBuf {
    let out = std::process::Command::new("git").arg("--exec-path").output();
    let dir = out
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "/usr/lib/git-core".into());
    Path::new(&dir).join("git-http-backend")
}

impl GitServer {
    /// Serves the bare repositories under `root` on a free loopback port, from a
    /// dedicated thread (so it outlives the caller's runtime).
    ///
    /// # Errors
    /// When no port can be bound.
    pub fn start(root: &Path) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr: SocketAddr = listener.local_addr()?;
        let root = root.to_path_buf();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let counts = Arc::new(Counters::default());
        let counters = counts.clone();
        let thread = std::thread::Builder::new()
            .name("git-http".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let app = Router::new().fallback(cgi).with_state((root, counters));
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .await;
                });
            })
            .context("git server thread")?;
        Ok(Self { base: format!("http://{addr}"), counts, shutdown: Some(tx), thread: Some(thread) })
    }

    /// Requests served so far: `(advertisements, fetches, bytes sent for fetches)`. An
    /// advertisement (`GET …/info/refs`) is what `git ls-remote` costs and what starts
    /// every fetch; a fetch is a `POST …/git-upload-pack` (objects sent).
    pub fn counts(&self) -> (u64, u64, u64) {
        let c = &self.counts;
        (c.adverts.load(Ordering::Relaxed), c.fetches.load(Ordering::Relaxed), c.fetch_bytes.load(Ordering::Relaxed))
    }

    /// Stops serving and returns once the port is closed (clients then get connection
    /// refused). Dropping the server does the same.
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Request counters of one server.
#[derive(Default)]
struct Counters {
    adverts: AtomicU64,
    fetches: AtomicU64,
    fetch_bytes: AtomicU64,
}

async fn cgi(
    State((root, counts)): State<(PathBuf, Arc<Counters>)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    req: Request,
) -> Response {
    let body: Bytes = match axum::body::to_bytes(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(_) => return status(StatusCode::PAYLOAD_TOO_LARGE),
    };
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let mut cmd = tokio::process::Command::new(backend());
    cmd.env_clear()
        .env("GIT_PROJECT_ROOT", &root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or(""))
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let Ok(mut child) = cmd.spawn() else {
        return status(StatusCode::INTERNAL_SERVER_ERROR);
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&body).await;
    }
    let Ok(out) = child.wait_with_output().await else {
        return status(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let raw = out.stdout;
    if uri.path().ends_with("/info/refs") {
        counts.adverts.fetch_add(1, Ordering::Relaxed);
    } else if uri.path().ends_with("/git-upload-pack") {
        counts.fetches.fetch_add(1, Ordering::Relaxed);
        counts.fetch_bytes.fetch_add(raw.len() as u64, Ordering::Relaxed);
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, sep)) = split else {
        return status(StatusCode::BAD_GATEWAY);
    };
    let mut resp = Response::builder();
    let mut code = StatusCode::OK;
    for line in String::from_utf8_lossy(&raw[..end]).lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("status") {
            code = v
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::OK);
        } else {
            resp = resp.header(k.trim(), v);
        }
    }
    resp.status(code).body(Body::from(raw[end + sep..].to_vec())).unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY))
}

fn status(code: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = code;
    r
}
