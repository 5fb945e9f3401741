//! Test support: one real control plane per test binary, Git repositories served over
//! HTTP, a running plumb, and small HTTP/wait helpers.
#![allow(dead_code, clippy::unwrap_used)]

pub mod bootstrap;
pub mod browser;

use std::{
    future::Future,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use hmac::{Hmac, KeyInit, Mac};
use plumb::{cluster::Cluster, metrics::Metrics, reconcile::Context};
use plumb_lab::{ControlPlane, ControlPlaneOptions, GitServer, Repo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// The control plane shared by every test of this binary (started on first use; its
/// components die with the test process).
pub fn control_plane() -> &'static ControlPlane {
    let filter = std::env::var("PLUMB_TEST_LOG").unwrap_or_else(|_| "plumb=info".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    static CP: OnceLock<ControlPlane> = OnceLock::new();
    CP.get_or_init(|| match ControlPlane::start(ControlPlaneOptions::default()) {
        Ok(cp) => cp,
        Err(e) => panic!("control plane: {e:#}"),
    })
}

/// A Git repository served over HTTP, with a webhook secret.
pub struct Lab {
    pub tmp: tempfile::TempDir,
    pub repo: Repo,
    pub git: GitServer,
    pub url: String,
    pub secret: Vec<u8>,
}

impl Lab {
    pub fn new(name: &str) -> Lab {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repo::init(tmp.path(), name).unwrap();
        let git = GitServer::start(tmp.path()).unwrap();
        let url = format!("{}/{name}.git", git.base);
        let secret = b"lab-secret-\xc3\xab".to_vec();
        std::fs::write(tmp.path().join("webhook-secret"), [&secret[..], b"\n"].concat()).unwrap();
        Lab { tmp, repo, git, url, secret }
    }

    /// A policy file with one environment `e` (`env`: its YAML lines after the name,
    /// indented four spaces) and one application `app` reading `app/` of this
    /// repository into namespace `ns`; statuses in namespace `status_ns`.
    pub fn app_policy(&self, status_ns: &str, app: &str, ns: &str, env: &str) -> PathBuf {
        self.policy(
            "policy.yaml",
            &format!(
                "settings: {{statusNamespace: {status_ns}}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n{env}\napplications:\n  - {{name: {app}, repository: r, revision: main, path: app, namespace: {ns}, environment: e}}\n",
                self.url
            ),
        )
    }

    /// Writes a policy file and returns its path.
    pub fn policy(&self, name: &str, text: &str) -> PathBuf {
        let p = self.tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A Gitea-format push delivery for `after` on main, signed with `secret`.
    pub fn gitea_push(&self, url: &str, before: &str, after: &str, secret: &[u8]) -> (Vec<(String, String)>, Vec<u8>) {
        let body = serde_json::json!({
            "ref": "refs/heads/main", "before": before, "after": after,
            "repository": {"full_name": "lab/fleet", "clone_url": url, "html_url": url.trim_end_matches(".git")},
            "head_commit": {"id": after, "message": "x"},
            "commits": [{"id": after, "added": [], "removed": [], "modified": []}],
            "total_commits": 1
        })
        .to_string()
        .into_bytes();
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
        mac.update(&body);
        let sig = hex::encode(mac.finalize().into_bytes());
        let headers = vec![
            ("Content-Type".to_string(), "application/json".to_string()),
            ("X-Gitea-Event".to_string(), "push".to_string()),
            ("X-Gitea-Delivery".to_string(), format!("{after}-delivery")),
            ("X-Gitea-Signature".to_string(), sig),
        ];
        (headers, body)
    }
}

/// A Context (no server) for the policy file `policy`, its status namespace created;
/// with `watches`, live objects come from the watch cache as in `plumb serve`.
pub async fn context_for(policy: &Path, cache: &Path, watches: bool) -> Arc<Context> {
    context_on(control_plane(), policy, cache, watches).await
}

/// [`context_for`] on another control plane than the shared one.
pub async fn context_on(cp: &ControlPlane, policy: &Path, cache: &Path, watches: bool) -> Arc<Context> {
    let config = plumb::config::load(policy).unwrap_or_else(|e| panic!("{e}"));
    let cluster = Cluster::connect(Some(&cp.kubeconfig)).await.unwrap();
    let mut ctx = Context::new(cluster, Arc::new(config), cache.to_path_buf(), Arc::new(Metrics::default()));
    if watches {
        ctx = ctx.with_watches();
    }
    ctx.store.ensure_namespace().await.unwrap();
    Arc::new(ctx)
}

/// A plumb server running in this process.
pub struct Plumb {
    pub ctx: Arc<Context>,
    /// The public listener (webhook).
    pub addr: SocketAddr,
    /// The internal listener (status API, metrics; bearer token).
    pub internal: SocketAddr,
    token: CancellationToken,
    tracker: tokio_util::task::TaskTracker,
}

impl Plumb {
    pub async fn start(policy: &Path, cache: &Path) -> Plumb {
        let cp = control_plane();
        let config = plumb::config::load(policy).unwrap_or_else(|e| panic!("{e}"));
        let cluster = Cluster::connect(Some(&cp.kubeconfig)).await.unwrap();
        let ctx = Arc::new(
            Context::new(cluster, Arc::new(config), cache.to_path_buf(), Arc::new(Metrics::default())).with_watches(),
        );
        ctx.store.ensure_namespace().await.unwrap();
        let token = CancellationToken::new();
        let h = plumb::serve::serve(ctx.clone(), "127.0.0.1:0".parse().unwrap(), token.clone()).await.unwrap();
        Plumb { ctx, addr: h.addr, internal: h.internal_addr, token, tracker: h.tracker }
    }

    pub async fn stop(self) {
        self.token.cancel();
        self.tracker.wait().await;
    }

    pub async fn status(&self, app: &str) -> Option<plumb::status::AppStatus> {
        self.ctx.statuses().await.into_iter().find(|s| s.app == app)
    }

    /// POSTs to the webhook route; returns the HTTP status.
    pub async fn post_webhook(&self, headers: &[(String, String)], body: &[u8]) -> u16 {
        http_request(self.addr, "POST", "/api/webhook", headers, body).await.0
    }

    /// GETs `path` from the internal listener with [`reader_token`].
    pub async fn get(&self, path: &str) -> (u16, String) {
        http_request(self.internal, "GET", path, &[bearer(reader_token())], b"").await
    }

    /// Sum of `plumb_passes_total` for `app`.
    pub async fn passes(&self, app: &str) -> u64 {
        let (_, text) = self.get("/metrics").await;
        text.lines()
            .filter(|l| l.starts_with("plumb_passes_total{") && l.contains(&format!("app=\"{app}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

/// The rules of the ClusterRole `plumb-status-reader` in `deploy/plumb.yaml`: what a
/// reader of plumb's internal listener needs.
pub const READER_RULES: &str = "rules:
  - {apiGroups: [plumb.dev], resources: [applications], verbs: [get]}
  - {nonResourceURLs: [/metrics], verbs: [get]}
";

/// Creates ServiceAccount `ns/name` (and `ns`) when missing and returns a fresh token of
/// it, minted with the TokenRequest API (`kubectl create token`).
pub fn service_account_token(ns: &str, name: &str) -> String {
    let cp = control_plane();
    if cp.kubectl(&["get", "namespace", ns]).is_err() {
        kubectl(&["create", "namespace", ns]);
    }
    if cp.kubectl(&["-n", ns, "get", "serviceaccount", name]).is_err() {
        kubectl(&["-n", ns, "create", "serviceaccount", name]);
    }
    kubectl(&["-n", ns, "create", "token", name, "--duration", "1h"]).trim().to_string()
}

/// A kubeconfig at `path` for the shared control plane as ServiceAccount `ns/name`
/// (created when missing, see [`service_account_token`]).
pub fn service_account_kubeconfig(ns: &str, name: &str, path: &Path) -> PathBuf {
    let admin = std::fs::read_to_string(&control_plane().kubeconfig).unwrap();
    let token = service_account_token(ns, name);
    let (head, rest) = admin.split_once("    token: ").unwrap();
    let (_, tail) = rest.split_once('\n').unwrap();
    std::fs::write(path, format!("{head}    token: {token}\n{tail}")).unwrap();
    path.to_path_buf()
}

/// A Role `name` in `ns` allowing `verbs` on `applications.plumb.dev`, bound to
/// ServiceAccount `ns/account`.
pub fn application_role(ns: &str, name: &str, account: &str, verbs: &str) {
    kubectl_apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\nrules: [{{apiGroups: [plumb.dev], resources: [applications], verbs: [{verbs}]}}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\nsubjects: [{{kind: ServiceAccount, name: {account}, namespace: {ns}}}]\n"
    ));
}

/// Applies `yaml` to the shared control plane (`kubectl apply -f`).
pub fn kubectl_apply(yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(&file, yaml).unwrap();
    kubectl(&["apply", "-f", file.to_str().unwrap()]);
}

/// A token of ServiceAccount `plumb-lab-readers/reader`, bound to [`READER_RULES`]
/// (created once per test binary).
pub fn reader_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        let token = service_account_token("plumb-lab-readers", "reader");
        kubectl_apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: plumb-lab-status-reader}}\n{READER_RULES}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: plumb-lab-status-reader}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: plumb-lab-status-reader}}\nsubjects: [{{kind: ServiceAccount, name: reader, namespace: plumb-lab-readers}}]\n"
        ));
        wait_allowed("system:serviceaccount:plumb-lab-readers:reader", &["get", "applications.plumb.dev", "-A"]);
        token
    })
}

/// Waits (at most 30 s) until `user` may do `what` (`kubectl auth can-i` arguments, e.g.
/// `["get", "/metrics"]`): the API server's authorizer reads RBAC from its own cache, a
/// moment behind the write of a binding, so a review asked at once may still deny it
/// (plumb then answers 403).
pub fn wait_allowed(user: &str, what: &[&str]) {
    let as_user = format!("--as={user}");
    let args: Vec<&str> = ["auth", "can-i"].into_iter().chain(what.iter().copied()).chain([as_user.as_str()]).collect();
    let started = Instant::now();
    while control_plane().kubectl(&args).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "{user} may not {what:?} after 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `Authorization: Bearer <token>` header.
pub fn bearer(token: &str) -> (String, String) {
    ("authorization".to_string(), format!("Bearer {token}"))
}

/// A minimal HTTP/1.1 request over loopback; returns (status, body).
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

/// Polls `check` every 200 ms until it returns `Some`, or panics with `what` after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `kubectl` against the shared control plane.
pub fn kubectl(args: &[&str]) -> String {
    control_plane().kubectl(args).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Runs the `plumb` binary with the shared control plane's kubeconfig.
pub fn plumb_cli(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
        .args(args)
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .env("PLUMB_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// One application over its own repository: `app/` holds the manifests; the policy has
/// one environment `e` (see [`Lab::app_policy`]); a Context without watches.
pub struct App {
    pub lab: Lab,
    pub policy: PathBuf,
    pub ctx: Arc<Context>,
    pub name: String,
}

impl App {
    /// `files` committed under `app/`; statuses in `status_ns`; the environment's YAML
    /// lines `env` (after `name: e`, without indentation: indented here).
    pub async fn new(status_ns: &str, name: &str, ns: &str, env: &str, files: &[(&str, &str)]) -> App {
        let lab = Lab::new(name);
        for (path, text) in files {
            lab.repo.write(&format!("app/{path}"), text).unwrap();
        }
        lab.repo.commit("first").unwrap();
        let env: String = env.lines().map(|l| format!("    {l}\n")).collect();
        let policy = lab.app_policy(status_ns, name, ns, env.trim_end());
        let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
        App { lab, policy, ctx, name: name.into() }
    }

    pub async fn pass(&self, mode: plumb::reconcile::Mode) -> plumb::reconcile::PassReport {
        self.ctx.run_pass(&self.name, mode, None).await.unwrap()
    }

    /// Policy passes until one makes no sync, or a sync that is not Running.
    pub async fn settle(&self) -> plumb::reconcile::PassReport {
        wait_for("the sync to finish its waves", Duration::from_secs(120), || async {
            let r = self.pass(plumb::reconcile::Mode::Policy).await;
            if r.sync.as_ref().is_some_and(|s| s.result == plumb::status::SyncResult::Running) {
                tokio::time::sleep(Duration::from_secs(1)).await;
                return None;
            }
            Some(r)
        })
        .await
    }

    /// Writes and removes files under `app/`, commits and pushes.
    pub fn commit(&self, writes: &[(&str, &str)], removes: &[&str]) {
        for (path, text) in writes {
            self.lab.repo.write(&format!("app/{path}"), text).unwrap();
        }
        for path in removes {
            self.lab.repo.remove(&format!("app/{path}")).unwrap();
        }
        self.lab.repo.commit("change").unwrap();
    }
}

/// The `data.rev` of each ConfigMap of `ns` as a watch delivers them (the benches'
/// "applied": every object seen at the new revision).
pub fn revisions_seen(
    client: &kube::Client,
    ns: &str,
) -> tokio::sync::watch::Receiver<std::collections::HashMap<String, String>> {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client.clone(), ns);
    let (tx, rx) = tokio::sync::watch::channel(std::collections::HashMap::<String, String>::new());
    tokio::spawn(async move {
        let mut seen = std::collections::HashMap::new();
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(Ok(ev)) = stream.next().await {
            if let watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) = ev {
                let rev = cm.data.as_ref().and_then(|d| d.get("rev").cloned()).unwrap_or_default();
                seen.insert(cm.metadata.name.unwrap_or_default(), rev);
                let _ = tx.send(seen.clone());
            }
        }
    });
    rx
}

/// Waits, at most 30 s, until the watch of [`revisions_seen`] has `count` ConfigMaps at
/// revision `want`; panics naming `what` when it has not.
pub async fn all_seen_at(
    rx: &mut tokio::sync::watch::Receiver<std::collections::HashMap<String, String>>,
    want: &str,
    count: usize,
    what: &str,
) {
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        rx.wait_for(|m| m.values().filter(|v| v.as_str() == want).count() == count),
    )
    .await
    .unwrap_or_else(|_| panic!("{what}: {count} objects at revision {want} within 30 s"))
    .unwrap();
}
