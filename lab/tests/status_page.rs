//! Issue 15: the status page on the internal listener, loaded in a real browser.
//!
//! Two applications are synced from a Git repository served over HTTP into the lab
//! control plane; on `web` a hand `kubectl scale` makes drift (selfHeal off, so it
//! stays, with an `OutOfSync` condition), `docs` is paused with `plumb suspend`; then headless Chromium (Debian's `chromium`, installed by
//! `tools/browser/install.sh`) loads the list and the application's page through a
//! loopback proxy that adds the reader's bearer token (a browser cannot send one from
//! its command line). The test reads the DOM Chromium built (`--dump-dom`) and saves
//! screenshots: into `target/tmp/screenshots/`, or with `PLUMB_UPDATE_SCREENSHOTS=1` into
//! `docs/screenshots/` (the ones docs/user-guide.md shows).
//!
//! No Chromium → the test fails and says how to install it; it never skips.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use plumb::{compare::SyncStatus, health::HealthStatus, status::ConditionType};
use support::{
    browser::{browse, chromium, screenshot},
    *,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

const NS: &str = "page-web";
const STATUS_NS: &str = "plumb-page";
const SUBJECT: &str = "web: 3 replicas <script>alert(1)</script>";
const ESCAPED: &str = "web: 3 replicas &lt;script&gt;alert(1)&lt;/script&gt;";

/// The DOM Chromium built from `url`.
async fn dump_dom(url: &str) -> String {
    browse(&["--dump-dom".into(), url.into()]).await
}

/// A loopback HTTP proxy in front of `upstream` that adds `Authorization: Bearer
/// <token>` to every request and asks for the connection to close after it (so every
/// request of the browser goes through here with the header).
async fn token_proxy(upstream: SocketAddr, token: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(forward(client, upstream, token));
        }
    });
    addr
}

async fn forward(mut client: TcpStream, upstream: SocketAddr, token: &str) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match client.read(&mut buf).await {
            Ok(n) if n > 0 && head.len() < 64 * 1024 => head.extend_from_slice(&buf[..n]),
            _ => return,
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let mut request = format!("{}\r\n", lines.next().unwrap_or_default());
    for line in lines {
        let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
        if !matches!(name.as_str(), "authorization" | "connection" | "keep-alive" | "proxy-connection") {
            request.push_str(line);
            request.push_str("\r\n");
        }
    }
    request.push_str(&format!("Authorization: Bearer {token}\r\nConnection: close\r\n\r\n"));
    let Ok(mut server) = TcpStream::connect(upstream).await else { return };
    if server.write_all(request.as_bytes()).await.is_err() || server.write_all(&head[end + 4..]).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

/// The status line and headers of a GET of `path` with `token`, lower-cased.
async fn response_head(addr: SocketAddr, path: &str, token: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).to_ascii_lowercase();
    text.split_once("\r\n\r\n").map_or(text.clone(), |(head, _)| head.to_string())
}

fn screenshot_dir() -> PathBuf {
    let dir = if std::env::var_os("PLUMB_UPDATE_SCREENSHOTS").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots")
    };
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn status_page_in_a_browser() {
    let browser = chromium(); // fail first, and clearly, without a browser
    let lab = Lab::new("page");
    lab.repo
        .write(
            "app/deployment.yaml",
            &format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  replicas: 3\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: web, image: 'nginx:1.27.3'}}]\n"
            ),
        )
        .unwrap();
    lab.repo
        .write(
            "app/site.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web-site, namespace: {NS}}}\ndata: {{index.html: hello}}\n"),
        )
        .unwrap();
    lab.repo
        .write(
            "docs/site.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: docs-site, namespace: {NS}}}\ndata: {{index.html: docs}}\n"),
        )
        .unwrap();
    let c1 = lab.repo.commit(SUBJECT).unwrap();
    kubectl(&["create", "namespace", NS]);
    // two applications: `web` (drifted below) and `docs` (left alone)
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: {STATUS_NS}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: prod\n    syncPolicy: {{automated: true, prune: true, selfHeal: false}}\n    reconcileInterval: 2s\napplications:\n  - {{name: web, repository: r, revision: main, path: app, namespace: {NS}, environment: prod}}\n  - {{name: docs, repository: r, revision: main, path: docs, namespace: {NS}, environment: prod}}\n",
            lab.url
        ),
    );
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;
    for app in ["web", "docs"] {
        wait_for(&format!("{app} Synced and Healthy"), Duration::from_secs(120), || async {
            plumb.status(app).await.filter(|s| s.sync == SyncStatus::Synced && s.health == HealthStatus::Healthy)
        })
        .await;
    }

    // a hand change, kept (selfHeal off): OutOfSync with the manager named, and a condition
    kubectl(&["-n", NS, "scale", "deployment", "web", "--replicas=5"]);
    let st = wait_for("web OutOfSync on /spec/replicas, Healthy", Duration::from_secs(120), || async {
        plumb.status("web").await.filter(|s| {
            s.sync == SyncStatus::OutOfSync
                && s.health == HealthStatus::Healthy
                && s.resources.iter().any(|r| r.reason.contains("/spec/replicas 5→3 (set by kubectl"))
        })
    })
    .await;
    assert!(st.conditions.iter().any(|c| c.type_ == ConditionType::OutOfSync), "{:?}", st.conditions);
    // and `docs` paused during an incident
    let (code, out, err) = plumb_cli(&["suspend", "docs", "--for", "2h", "--reason", "incident 42", "-n", STATUS_NS]);
    assert_eq!(code, 0, "plumb suspend: {out}\n{err}");
    let paused = wait_for("docs paused in its status", Duration::from_secs(60), || async {
        plumb.status("docs").await.and_then(|s| s.suspended)
    })
    .await;

    // the page is behind the status API's right, like the status API
    assert_eq!(http_request(plumb.internal, "GET", "/", &[], b"").await.0, 401);
    assert_eq!(http_request(plumb.internal, "GET", "/applications/web", &[], b"").await.0, 401);
    let (code, raw) = plumb.get("/applications/web").await;
    assert_eq!(code, 200, "{raw}");
    assert!(!raw.to_ascii_lowercase().contains("<script"), "served HTML has no script element:\n{raw}");
    let head = response_head(plumb.internal, "/applications/web", reader_token()).await;
    for header in [
        "content-type: text/html; charset=utf-8",
        "content-security-policy: default-src 'none'; style-src 'unsafe-inline';",
        "x-content-type-options: nosniff",
        "cache-control: no-store",
    ] {
        assert!(head.contains(header), "{header} in:\n{head}");
    }
    assert_eq!(plumb.get("/applications/nope").await.0, 404);
    // each sync of the history: its page, behind the same right
    let (_, link) = raw.split_once("<td><a href=\"web/syncs/").unwrap_or_else(|| panic!("no sync link in {raw}"));
    let sync_path = format!("/applications/web/syncs/{}", link.split('"').next().unwrap());
    assert_eq!(http_request(plumb.internal, "GET", &sync_path, &[], b"").await.0, 401);
    let (code, sync) = plumb.get(&sync_path).await;
    assert_eq!(code, 200, "{sync}");
    assert!(sync.contains("<h1>Sync of web at") && sync.contains("<h2>Applied ("), "{sync}");
    assert_eq!(plumb.get("/applications/web/syncs/2000-01-01T00%3A00%3A00Z").await.0, 404);

    let proxy = token_proxy(plumb.internal, reader_token()).await;
    let base = format!("http://{proxy}/");
    let short = &c1[..7];

    // the list
    let dom = dump_dom(&base).await;
    assert!(dom.contains("<a href=\"applications/web\">web</a>"), "{dom}");
    let docs =
        dom.split("<tr>").find(|row| row.contains(">docs</a>")).unwrap_or_else(|| panic!("no row for docs: {dom}"));
    assert!(docs.contains(">Synced</span>") && docs.contains(">Healthy</span>"), "{docs}");
    assert!(docs.contains("<span class=\"hold\">paused</span> until"), "{docs}");
    assert!(docs.contains(&format!("(claimed by {}, not verified): incident 42", paused.by)), "who and why: {docs}");
    assert!(dom.contains(">OutOfSync</span>") && dom.contains(">Healthy</span>"), "{dom}");
    assert!(dom.contains(&format!("{short}</code> {ESCAPED}")), "revision and escaped subject: {dom}");
    assert!(dom.contains(">Succeeded</span>"), "last sync: {dom}");
    assert!(!dom.to_ascii_lowercase().contains("<script"), "the subject is text, not a script element: {dom}");

    // the application's page
    let dom = dump_dom(&format!("{base}applications/web")).await;
    assert!(dom.contains("<h1>web</h1>"), "{dom}");
    assert!(dom.contains(&format!("<code>Deployment.apps/{NS}/web</code>")), "{dom}");
    assert!(dom.contains(&format!("<code>ConfigMap/{NS}/web-site</code>")), "{dom}");
    let drift = dom
        .split("<tr>")
        .find(|row| row.contains("<code>/spec/replicas</code>"))
        .unwrap_or_else(|| panic!("no drift row for /spec/replicas: {dom}"));
    assert!(drift.contains(&format!("Deployment.apps/{NS}/web")) && drift.contains("<td>5→3</td>"), "{drift}");
    assert!(drift.contains("<td>kubectl"), "the drift names its field manager: {drift}");
    assert!(dom.contains("<td>OutOfSync</td><td>"), "the OutOfSync condition: {dom}");
    assert!(dom.contains(ESCAPED), "{dom}");
    assert!(dom.contains("<dt>Render</dt><dd>plain in "), "render timing: {dom}");
    assert!(dom.contains("<dt>Last pass</dt><dd>at ") && dom.contains(", compare "), "stage timings: {dom}");
    assert!(dom.contains("<h2>History</h2>") && dom.contains(">NewRevision<"), "{dom}");
    assert!(!dom.to_ascii_lowercase().contains("<script"), "{dom}");

    let dir = screenshot_dir();
    let list_png = dir.join("status-list.png");
    assert_eq!(screenshot(&base, &list_png, (1280, 280)).await, (1280, 280));
    let app_png = dir.join("status-application.png");
    assert_eq!(screenshot(&format!("{base}applications/web"), &app_png, (1280, 860)).await, (1280, 860));
    eprintln!("screenshots by {}: {} {}", browser.display(), list_png.display(), app_png.display());
    plumb.stop().await;
}
