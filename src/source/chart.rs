//! Charts from chart repositories and OCI registries (`source.chart`): which version a
//! constraint names now, and the package, downloaded once and kept on disk by digest.
//!
//! A chart repository (`https://…`): its `index.yaml` is read (at most
//! [`ChartLimits::index_bytes`]), the highest version in range chosen
//! ([`pick::Constraint`]), and its package downloaded (at most
//! [`ChartLimits::chart_bytes`]) and checked against the index's sha256 `digest`; an
//! entry without a digest is refused. An OCI registry (`oci://host/path`): the tags of
//! `path/name` are listed (for a range; an exact version is read as its tag), the
//! tag's manifest must be a Helm chart's, and its chart layer is downloaded and checked
//! against the layer digest; the digest reported is the manifest's (what `helm push`
//! prints). A registry that answers `401` with a Bearer challenge is asked for a token
//! (with the configured credentials, if any), as the distribution token flow says.
//!
//! What a constraint names is remembered for the application's reconcile interval
//! ([`Charts::resolve`]'s `ttl`), so a new version in range is seen at the next poll
//! without a Git commit; a package is kept under `<cache>/charts/<digest>.tgz` and never
//! downloaded again. Credentials travel in headers only, are read from files
//! (`passwordFile`, `tokenFile`; Secret references are written to files first, see
//! [`crate::secret_refs`]), and never appear in a message: URLs are shown without
//! credentials. Redirects are followed (at most [`MAX_REDIRECTS`]); credentials are not
//! sent to another host.

pub mod pick;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, Instant},
};

use bytes::Bytes;
use http::{Request, StatusCode, header};

use crate::{
    config::{ChartSource, read_secret, repo_url::redact},
    forge::http::{HttpClient, HttpError},
    render::{self, ChartRef, tools::Chart},
};

/// Most redirects followed for one request.
pub const MAX_REDIRECTS: usize = 5;

/// Largest provenance file read, in bytes.
pub const PROV_BYTES: usize = 1 << 20;

/// How much one chart source may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChartLimits {
    /// Largest `index.yaml`, tag list or manifest, in bytes (default 32 MiB: the
    /// largest public indexes are a few tens of MiB).
    pub index_bytes: usize,
    /// Largest chart package, in bytes (default 16 MiB; Helm's own limit is 20 MiB
    /// unpacked per file).
    pub chart_bytes: usize,
    /// Longest one request may take, in seconds.
    pub timeout: Duration,
}

impl Default for ChartLimits {
    fn default() -> Self {
        Self { index_bytes: 32 << 20, chart_bytes: 16 << 20, timeout: Duration::from_secs(30) }
    }
}

/// The chart a constraint names now, ready to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What is reported: repository (without credentials), name, version, digest.
    pub chart: ChartRef,
    /// Where the package is and its content digest (`sha256:<hex>`).
    package: (url::Url, String),
    /// The provenance file's URL (chart repositories, when a keyring is configured).
    prov: Option<url::Url>,
}

/// How a request authenticates.
#[derive(Clone, Default)]
enum Auth {
    #[default]
    None,
    Basic(String),
    Bearer(String),
}

impl Auth {
    fn of(c: &ChartSource) -> Result<Self, String> {
        let read = |f: &Path| {
            read_secret(f)
                .map_err(|e| format!("credential file {}: {e}", f.display()))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        if let (Some(user), Some(f)) = (&c.username, &c.password_file) {
            use base64::Engine as _;
            let pair = format!("{user}:{}", read(f)?);
            return Ok(Self::Basic(base64::engine::general_purpose::STANDARD.encode(pair)));
        }
        if let Some(f) = &c.token_file {
            return Ok(Self::Bearer(read(f)?.trim().to_string()));
        }
        if c.password_secret_ref.is_some() || c.token_secret_ref.is_some() {
            return Err("the credential's Secret was not read (it is read by `plumb serve` from the cluster)".into());
        }
        Ok(Self::None)
    }

    fn header(&self) -> Option<String> {
        match self {
            Self::None => None,
            Self::Basic(b) => Some(format!("Basic {b}")),
            Self::Bearer(t) => Some(format!("Bearer {t}")),
        }
    }
}

/// The chart sources of one process: an HTTP client, what constraints named (for a
/// while), and the package cache directory.
pub struct Charts {
    dir: PathBuf,
    limits: ChartLimits,
    http: Option<HttpClient>,
    named: Mutex<HashMap<String, (Instant, Resolved)>>,
    downloads: std::sync::atomic::AtomicU64,
}

impl Charts {
    /// Chart sources keeping packages under `cache_dir/charts`.
    pub fn new(cache_dir: &Path, limits: ChartLimits) -> Self {
        let http = HttpClient::new().map_err(|e| tracing::warn!("chart sources: {e}")).ok();
        Self {
            dir: cache_dir.join("charts"),
            limits,
            http,
            named: Mutex::default(),
            downloads: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many packages were downloaded (not found in the cache).
    pub fn downloads(&self) -> u64 {
        self.downloads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The chart `c` names now: the answer of the last `ttl` if there is one, else the
    /// index or tag list read again.
    ///
    /// # Errors
    /// [`render::Error::Chart`], naming the chart and the repository (without
    /// credentials): unreachable, an HTTP error (401/403: the credentials), no chart or
    /// no version in range, an answer too large or unreadable.
    pub async fn resolve(&self, c: &ChartSource, ttl: Duration) -> Result<Resolved, render::Error> {
        let key = format!("{c:?}");
        if let Some((at, r)) = self.named.lock().ok().and_then(|m| m.get(&key).cloned())
            && at.elapsed() < ttl
        {
            return Ok(r);
        }
        let r = self.resolve_now(c).await.map_err(|message| chart_error(c, message))?;
        if let Ok(mut m) = self.named.lock() {
            m.insert(key, (Instant::now(), r.clone()));
        }
        Ok(r)
    }

    async fn resolve_now(&self, c: &ChartSource) -> Result<Resolved, String> {
        let constraint = pick::Constraint::parse(&c.version)?;
        let auth = Auth::of(c)?;
        if c.is_oci() {
            return self.resolve_oci(c, &constraint, &auth).await;
        }
        let base = if c.repository.ends_with('/') { c.repository.clone() } else { format!("{}/", c.repository) };
        let index_url = pick::join_url(&base, "index.yaml")?;
        let body = self.get(&index_url, &auth, self.limits.index_bytes, "").await?;
        let index = pick::parse_index(&body).map_err(|e| format!("{}: {e}", redact(index_url.as_str())))?;
        let entry = index.choose(&c.name, &constraint)?;
        let digest = entry.digest.as_deref().ok_or_else(|| {
            format!("chart `{}` {} has no digest in the index: plumb cannot check it", c.name, entry.version)
        })?;
        let first = entry.urls.first().ok_or_else(|| format!("chart `{}` {} has no URL", c.name, entry.version))?;
        let url = pick::join_url(index_url.as_str(), first)?;
        let digest = if digest.contains(':') {
            digest.to_ascii_lowercase()
        } else {
            format!("sha256:{}", digest.to_ascii_lowercase())
        };
        let prov = c
            .keyring_file
            .as_ref()
            .map(|_| pick::join_url(url.as_str(), &format!("{}.prov", last_segment(&url))))
            .transpose()?;
        Ok(Resolved {
            chart: ChartRef {
                repository: shown(&c.repository),
                name: c.name.clone(),
                version: entry.version.clone(),
                digest: digest.clone(),
            },
            package: (url, digest),
            prov,
        })
    }

    async fn resolve_oci(
        &self,
        c: &ChartSource,
        constraint: &pick::Constraint,
        auth: &Auth,
    ) -> Result<Resolved, String> {
        let (host, repo) = pick::oci_repository(&c.repository, &c.name)?;
        let scheme = if c.insecure { "http" } else { "https" };
        let api =
            |path: &str| url::Url::parse(&format!("{scheme}://{host}/v2/{repo}/{path}")).map_err(|e| e.to_string());
        let mut session = auth.clone();
        let exact = c.version.trim().trim_start_matches(['v', '=']);
        let version = if pick::lenient(exact).is_some_and(|v| v.to_string() == exact) && !exact.contains(' ') {
            exact.to_string()
        } else {
            let list = self.get_oci(&api("tags/list")?, &mut session, self.limits.index_bytes, "").await?;
            let tags = pick::tag_versions(&list)?;
            constraint
                .pick(tags.iter().map(String::as_str))
                .ok_or_else(|| {
                    let mut known = tags.clone();
                    known.truncate(8);
                    format!("chart `{}` has no version in `{}` (tags: {})", c.name, constraint.text, known.join(", "))
                })?
                .to_string()
        };
        let tag = version.replace('+', "_");
        let manifest = self
            .get_oci(&api(&format!("manifests/{tag}"))?, &mut session, self.limits.index_bytes, pick::MANIFEST_ACCEPT)
            .await?;
        let layer = pick::chart_layer(&manifest).map_err(|e| format!("{}:{tag}: {e}", redact(&c.repository)))?;
        if usize::try_from(layer.size).unwrap_or(usize::MAX) > self.limits.chart_bytes {
            return Err(format!(
                "chart layer of {} bytes is over the limit of {} bytes",
                layer.size, self.limits.chart_bytes
            ));
        }
        Ok(Resolved {
            chart: ChartRef {
                repository: shown(&c.repository),
                name: c.name.clone(),
                version,
                digest: pick::sha256(&manifest),
            },
            package: (api(&format!("blobs/{}", layer.digest))?, layer.digest),
            prov: None,
        })
    }

    /// The package of `r` on disk (downloaded and checked on first use), with its
    /// provenance file when `c` has a keyring.
    ///
    /// # Errors
    /// [`render::Error::Chart`]: the download fails, the package does not match its
    /// digest (naming the chart and both digests), the cache cannot be written.
    pub async fn fetch(&self, c: &ChartSource, r: &Resolved) -> Result<Chart, render::Error> {
        self.fetch_now(c, r).await.map_err(|message| chart_error(c, message))
    }

    async fn fetch_now(&self, c: &ChartSource, r: &Resolved) -> Result<Chart, String> {
        let (url, digest) = &r.package;
        let hex = digest.strip_prefix("sha256:").ok_or_else(|| format!("digest `{digest}` is not sha256"))?;
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("digest `{digest}` is not sha256"));
        }
        let path = self.dir.join(format!("sha256-{hex}.tgz"));
        let mut session = Auth::of(c)?;
        if !path.is_file() {
            let body = if c.is_oci() {
                self.get_oci(url, &mut session, self.limits.chart_bytes, "").await?
            } else {
                self.get(url, &session, self.limits.chart_bytes, "").await?
            };
            pick::check_digest(&body, digest).map_err(|e| {
                format!("{} {} ({}): {e}: refused", r.chart.name, r.chart.version, redact(url.as_str()))
            })?;
            self.downloads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            write_atomic(&path, &body).map_err(|e| format!("cache {}: {e}", path.display()))?;
        }
        let provenance = match &r.prov {
            None => None,
            Some(prov) => {
                let body = self.get(prov, &session, PROV_BYTES, "").await?;
                let p = self.dir.join(format!("sha256-{hex}.tgz.prov"));
                write_atomic(&p, &body).map_err(|e| format!("cache {}: {e}", p.display()))?;
                Some(p)
            }
        };
        Ok(Chart { reference: r.chart.clone(), package: path, provenance, keyring: c.keyring_file.clone() })
    }

    /// GET `url` with `auth`, following redirects (credentials only to the same host);
    /// the body of a 2xx answer.
    async fn get(&self, url: &url::Url, auth: &Auth, max: usize, accept: &str) -> Result<Bytes, String> {
        let (status, _, body) = self.request(url, auth, max, accept).await?;
        if status.is_success() {
            return Ok(body);
        }
        Err(status_message(url, status))
    }

    /// As [`Charts::get`] for a registry: a `401` with a Bearer challenge is answered by
    /// asking the realm for a token (with `auth`'s credentials), kept in `auth`.
    async fn get_oci(&self, url: &url::Url, auth: &mut Auth, max: usize, accept: &str) -> Result<Bytes, String> {
        let (status, headers, body) = self.request(url, auth, max, accept).await?;
        if status.is_success() {
            return Ok(body);
        }
        let challenge =
            headers.get(header::WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).and_then(pick::Challenge::parse);
        let (StatusCode::UNAUTHORIZED, Some(ch)) = (status, challenge) else {
            return Err(status_message(url, status));
        };
        let mut realm = url::Url::parse(&ch.realm).map_err(|e| format!("token realm `{}`: {e}", ch.realm))?;
        {
            let mut q = realm.query_pairs_mut();
            if let Some(s) = &ch.service {
                q.append_pair("service", s);
            }
            if let Some(s) = &ch.scope {
                q.append_pair("scope", s);
            }
        }
        let creds = match &*auth {
            Auth::Bearer(_) => Auth::None,
            other => other.clone(),
        };
        let answer = self.get(&realm, &creds, 1 << 20, "").await?;
        #[derive(serde::Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let t: Token =
            serde_json::from_slice(&answer).map_err(|e| format!("token from {}: {e}", redact(realm.as_str())))?;
        let token = t.token.or(t.access_token).ok_or_else(|| format!("no token from {}", redact(realm.as_str())))?;
        *auth = Auth::Bearer(token);
        let (status, _, body) = self.request(url, auth, max, accept).await?;
        if status.is_success() { Ok(body) } else { Err(status_message(url, status)) }
    }

    async fn request(
        &self,
        url: &url::Url,
        auth: &Auth,
        max: usize,
        accept: &str,
    ) -> Result<(StatusCode, http::HeaderMap, Bytes), String> {
        let http = self.http.as_ref().ok_or("no HTTP client (TLS setup failed)")?;
        let mut at = url.clone();
        for _ in 0..=MAX_REDIRECTS {
            let mut req = Request::get(at.as_str()).header(header::USER_AGENT, "plumb");
            if !accept.is_empty() {
                req = req.header(header::ACCEPT, accept);
            }
            if at.host_str() == url.host_str()
                && at.port_or_known_default() == url.port_or_known_default()
                && let Some(h) = auth.header()
            {
                req = req.header(header::AUTHORIZATION, h);
            }
            let req = req.body(Bytes::new()).map_err(|e| format!("{}: {e}", redact(at.as_str())))?;
            let (status, headers, body) = http.exchange(req, self.limits.timeout, max).await.map_err(|e| match e {
                HttpError::Transport { url, message } => format!("{url} is unreachable: {}", short(&message)),
                other => other.to_string(),
            })?;
            if status.is_redirection()
                && let Some(loc) = headers.get(header::LOCATION).and_then(|v| v.to_str().ok())
            {
                at = at.join(loc).map_err(|e| format!("redirect from {}: {e}", redact(at.as_str())))?;
                continue;
            }
            return Ok((status, headers, body));
        }
        Err(format!("{}: more than {MAX_REDIRECTS} redirects", redact(url.as_str())))
    }
}

/// A repository URL as configured, or without its credentials when it has any
/// (validation refuses them; a URL never carries them into a message).
fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) if u.username().is_empty() && u.password().is_none() => url.to_string(),
        _ => redact(url),
    }
}

/// The last path segment of `url` (a package's file name).
fn last_segment(url: &url::Url) -> String {
    url.path_segments().and_then(|mut s| s.next_back().map(str::to_string)).unwrap_or_default()
}

/// A transport error's message without the repetitions hyper adds.
fn short(message: &str) -> String {
    message.split(": ").last().unwrap_or(message).to_string()
}

fn status_message(url: &url::Url, status: StatusCode) -> String {
    let hint = match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            ": check the credentials (source.chart username and passwordFile / tokenFile, or their Secret)"
        }
        _ => "",
    };
    format!("{} answered {status}{hint}", redact(url.as_str()))
}

fn chart_error(c: &ChartSource, message: String) -> render::Error {
    render::Error::Chart { chart: c.name.clone(), repository: shown(&c.repository), message }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = tempfile::NamedTempFile::new_in(path.parent().unwrap_or(Path::new(".")))?;
    std::fs::write(tmp.path(), bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::{
        Router,
        extract::{Request, State},
        response::{IntoResponse, Response},
    };

    use super::*;

    /// A registry speaking the distribution token flow: every `/v2/` request needs
    /// `Bearer good-token`, which `/token` gives for `lab:pw` only.
    /// The manifest, the chart layer and the registry's base URL.
    type Served = Arc<(Vec<u8>, Vec<u8>, String)>;

    async fn registry(State(blob): State<Served>, req: Request) -> Response {
        let (manifest, layer, base) = &*blob;
        let auth = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let path = req.uri().path().to_string();
        if path == "/token" {
            use base64::Engine as _;
            let good = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("lab:pw"));
            let q = req.uri().query().unwrap_or_default();
            if auth != good || !q.contains("scope=repository%3Acharts%2Fweb%3Apull") {
                return StatusCode::UNAUTHORIZED.into_response();
            }
            return r#"{"token":"good-token"}"#.into_response();
        }
        if auth != "Bearer good-token" {
            let challenge = format!(r#"Bearer realm="{base}/token",service="reg",scope="repository:charts/web:pull""#);
            return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge)]).into_response();
        }
        match path.as_str() {
            "/v2/charts/web/tags/list" => {
                r#"{"name":"charts/web","tags":["0.9.0","1.0.0","1.1.0","2.0.0"]}"#.into_response()
            }
            "/v2/charts/web/manifests/1.1.0" => manifest.clone().into_response(),
            p if p == format!("/v2/charts/web/blobs/{}", pick::sha256(layer)) => layer.clone().into_response(),
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }

    /// A chart of a registry that asks for a token: the tag in range is chosen, the
    /// manifest's digest reported, the layer downloaded once and kept; a wrong password
    /// fails naming the status and the settings, never the password.
    #[tokio::test]
    async fn an_oci_chart_through_the_token_flow() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let layer = b"chart package bytes".to_vec();
        let manifest = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{}","digest":"sha256:00","size":2}},"layers":[{{"mediaType":"{}","digest":"{}","size":{}}}]}}"#,
            pick::HELM_CONFIG_MEDIA_TYPE,
            pick::HELM_CHART_MEDIA_TYPE,
            pick::sha256(&layer),
            layer.len()
        )
        .into_bytes();
        let state = Arc::new((manifest.clone(), layer.clone(), format!("http://{addr}")));
        let app = Router::new().fallback(registry).with_state(state);
        tokio::spawn(async move { axum::serve(listener, app).await });

        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("pw"), "pw\n").expect("pw");
        std::fs::write(dir.path().join("bad"), "wrong-secret\n").expect("bad");
        let charts = Charts::new(dir.path(), ChartLimits::default());
        let source = ChartSource {
            repository: format!("oci://{addr}/charts"),
            name: "web".into(),
            version: "^1".into(),
            username: Some("lab".into()),
            password_file: Some(dir.path().join("pw")),
            password_secret_ref: None,
            token_file: None,
            token_secret_ref: None,
            insecure: true,
            keyring_file: None,
        };
        let r = charts.resolve(&source, Duration::from_secs(60)).await.expect("resolves");
        assert_eq!((r.chart.version.as_str(), r.chart.digest.clone()), ("1.1.0", pick::sha256(&manifest)));
        let c = charts.fetch(&source, &r).await.expect("fetches");
        assert_eq!(std::fs::read(&c.package).expect("package"), layer);
        assert_eq!(charts.fetch(&source, &r).await.expect("cached").package, c.package);
        assert_eq!(charts.downloads(), 1, "kept by digest");

        let wrong = ChartSource { password_file: Some(dir.path().join("bad")), ..source.clone() };
        let e = charts.resolve(&wrong, Duration::from_secs(60)).await.expect_err("wrong password").to_string();
        assert!(
            e.starts_with(&format!("chart `web` from oci://{addr}/charts: http://{addr}/token?service=reg")),
            "{e}"
        );
        assert!(e.contains("401 Unauthorized: check the credentials"), "{e}");
        assert!(!e.contains("wrong-secret"), "{e}");

        // a package that is not the one listed is refused, and not kept
        let forged = Resolved { package: (r.package.0.clone(), pick::sha256(b"other")), ..r.clone() };
        let e = charts.fetch(&source, &forged).await.expect_err("mismatch").to_string();
        assert!(e.contains("web 1.1.0") && e.contains("digest mismatch"), "{e}");
        assert_eq!(charts.downloads(), 1);
    }
}
