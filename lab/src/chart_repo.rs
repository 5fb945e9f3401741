//! Chart sources for the lab: a Helm chart repository served over HTTP by the lab
//! itself (the files of a directory: `index.yaml` and packages, as `helm repo index`
//! writes them), optionally behind basic auth; and a local OCI registry, the real
//! `crane registry serve` built from its Go module by `tools/testbins/build.sh crane`.
//! Charts are packaged and pushed with the real helm (`helm package`, `helm repo
//! index`, `helm push`).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{StatusCode, header},
    response::Response,
};

/// A running chart repository. Dropping it stops the server.
pub struct ChartRepo {
    /// Base URL, `http://127.0.0.1:<port>`: the index is `<base>/index.yaml`.
    pub base: String,
    /// The directory served.
    pub dir: PathBuf,
    requests: Arc<AtomicU64>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the server reads: the directory and the credentials it asks for.
#[derive(Clone)]
struct Served {
    dir: PathBuf,
    /// `Basic <base64(user:password)>` expected, when set.
    auth: Option<String>,
    requests: Arc<AtomicU64>,
}

impl ChartRepo {
    /// Serves the files of `dir` on a free loopback port, from a dedicated thread;
    /// with `basic` = `(user, password)`, every request must carry them (else `401`).
    ///
    /// # Errors
    /// When no port can be bound.
    pub fn start(dir: &Path, basic: Option<(&str, &str)>) -> anyhow::Result<Self> {
        use base64::Engine as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr: SocketAddr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let served = Served {
            dir: dir.to_path_buf(),
            auth: basic.map(|(u, p)| {
                format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}")))
            }),
            requests: requests.clone(),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("chart-repo".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let app = Router::new().fallback(serve_file).with_state(served);
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .await;
                });
            })
            .context("chart repository thread")?;
        Ok(Self {
            base: format!("http://{addr}"),
            dir: dir.to_path_buf(),
            requests,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// Requests served so far (any answer).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Stops serving (clients then get connection refused).
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ChartRepo {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve_file(State(s): State<Served>, req: Request) -> Response {
    s.requests.fetch_add(1, Ordering::Relaxed);
    let status = |code: StatusCode| {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = code;
        r
    };
    if let Some(want) = &s.auth {
        let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if given != Some(want.as_str()) {
            let mut r = status(StatusCode::UNAUTHORIZED);
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Basic realm=\"charts\""));
            return r;
        }
    }
    let path = req.uri().path().trim_start_matches('/');
    if path.is_empty() || path.split('/').any(|seg| seg == ".." || seg.is_empty()) {
        return status(StatusCode::NOT_FOUND);
    }
    match std::fs::read(s.dir.join(path)) {
        Ok(bytes) => Response::new(Body::from(bytes)),
        Err(_) => status(StatusCode::NOT_FOUND),
    }
}

/// The helm of the lab (`tools/testbins/build.sh helm`).
pub fn helm_bin() -> PathBuf {
    crate::testbins_dir().join("helm/current/bin/helm")
}

/// Runs the lab's helm with `args` in `dir`, with a `HOME` and registry config of
/// `dir`'s own; its standard output, then its standard error.
///
/// # Errors
/// When it cannot start or fails (its standard error in the message).
pub fn helm(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let home = dir.join(".helm-home");
    std::fs::create_dir_all(&home)?;
    let out = std::process::Command::new(helm_bin())
        .args(args)
        .current_dir(dir)
        .env("HOME", &home)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{}: cannot start", helm_bin().display()))?;
    if !out.status.success() {
        bail!("helm {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    }
    Ok(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Writes chart `name` version `version` (the files `files`, paths inside the chart)
/// under `work`, packages it with helm into `into` and returns the package's path.
///
/// # Errors
/// When a file cannot be written or helm fails.
pub fn package_chart(
    work: &Path,
    into: &Path,
    name: &str,
    version: &str,
    files: &[(&str, &str)],
) -> anyhow::Result<PathBuf> {
    let src = work.join(format!("src-{name}-{version}")).join(name);
    std::fs::create_dir_all(&src)?;
    std::fs::write(src.join("Chart.yaml"), format!("apiVersion: v2\nname: {name}\nversion: {version}\n"))?;
    for (f, text) in files {
        let p = src.join(f);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(p, text)?;
    }
    std::fs::create_dir_all(into)?;
    let (s, i) = (src.display().to_string(), into.display().to_string());
    helm(work, &["package", &s, "--destination", &i])?;
    Ok(into.join(format!("{name}-{version}.tgz")))
}

/// A running `crane registry serve` (in memory, anonymous, plain HTTP). Dropping it
/// kills it.
pub struct OciRegistry {
    /// `127.0.0.1:<port>`.
    pub host: String,
    child: std::process::Child,
}

impl OciRegistry {
    /// Starts the lab's crane registry on a free loopback port and waits until it
    /// answers `/v2/`.
    ///
    /// # Errors
    /// When crane is missing (build it: `tools/testbins/build.sh crane`) or does not
    /// answer within 20 s.
    pub fn start() -> anyhow::Result<Self> {
        let bin = crate::testbins_dir().join("crane/current/bin/crane");
        if !bin.is_file() {
            bail!("{} is missing: run tools/testbins/build.sh crane", bin.display());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let host = format!("127.0.0.1:{port}");
        let child = std::process::Command::new(&bin)
            .args(["registry", "serve", "--address", &host])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("{}: cannot start", bin.display()))?;
        let reg = Self { host, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(&reg.host).is_ok() {
                return Ok(reg);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("crane registry on {} did not answer within 20 s", reg.host)
    }

    /// Pushes package `tgz` with helm to `oci://<host>/<path>` (plain HTTP); returns
    /// the digest helm prints (the manifest's, `sha256:…`).
    ///
    /// # Errors
    /// When helm fails or prints no digest.
    pub fn push(&self, work: &Path, tgz: &Path, path: &str) -> anyhow::Result<String> {
        let (t, to) = (tgz.display().to_string(), format!("oci://{}/{path}", self.host));
        let out = helm(work, &["push", &t, &to, "--plain-http"])?;
        let digest = out.lines().find_map(|l| l.strip_prefix("Digest: ")).map(str::trim);
        digest.map(str::to_string).with_context(|| format!("helm push printed no digest: {out}"))
    }
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
