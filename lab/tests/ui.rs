//! `plumb ui` against the lab control plane, with the roles `deploy/` ships for people.
//!
//! One application (`web`: a Deployment of two replicas and a ConfigMap) is synced, then
//! drifted by hand (`kubectl scale`, selfHeal off). `plumb ui` is served in this process
//! ([`plumb::cli::ui::serve`], what the command runs) twice: with a kubeconfig of
//! ServiceAccount `viewer` (ClusterRole `plumb-viewer` in the status namespace, `view`
//! in the application's) and one of `operator` (`plumb-operator`, `edit` in the
//! application's namespace). The viewer sees the
//! list, the resource tree (Deployment → ReplicaSet → Pods, live, with health), the
//! drift of one object and the Events, and its action is refused by the API server
//! (403 shown); cross-site posts, a missing or wrong form token and a foreign `Host`
//! are refused before anything is asked. The operator's pause lands, recorded with the
//! name the API server gives the operator. Then Chromium, driven through chromedriver,
//! clicks as the operator: resumes, opens a sync of the history, and approves a prune
//! held by `Prune=confirm`, which plumb then carries out (the viewer's approval is
//! refused by the API server). Headless Chromium loads the pages
//! (`--dump-dom`) and takes screenshots at 1280 and 375 px wide: into
//! `target/tmp/screenshots/`, or with `PLUMB_UPDATE_SCREENSHOTS=1` into
//! `docs/screenshots/` (the ones README shows).
//!
//! No Chromium → the test fails and says how to install it; it never skips.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use plumb::{compare::SyncStatus, health::HealthStatus};
use support::{
    browser::{Driven, browse, chromium, screenshot},
    *,
};

const NS: &str = "ui-web";
const STATUS_NS: &str = "plumb-ui";

fn screenshot_dir() -> PathBuf {
    let dir = if std::env::var_os("PLUMB_UPDATE_SCREENSHOTS").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots")
    };
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `plumb ui` as ServiceAccount `STATUS_NS/who`, on a loopback port of this process.
async fn ui_as(kubeconfig: &Path) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let client = plumb::cluster::client(Some(kubeconfig)).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        plumb::cli::ui::serve(listener, client, STATUS_NS, false, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (addr, stop)
}

/// The operator at a browser (Chromium through WebDriver), clicking: resumes the pause,
/// opens a sync of the history, and approves a held prune, which plumb then carries
/// out; the viewer's approval of the same prune is refused by the API server.
async fn by_clicks_in_a_browser(o: SocketAddr, plumb: &Plumb, lab: &Lab, who: &str, viewer: &Path) {
    let browser = Driven::start((1280, 1000)).await;
    let app_page = format!("http://{o}/applications/web");
    browser.client.goto(&app_page).await.unwrap();
    let confirm = browser.click("Resume…").await;
    assert!(confirm.contains("Resume automated sync of web?"), "{confirm}");
    let done = browser.click("Resume").await;
    assert!(done.contains("web: Resume recorded"), "{done}");
    wait_for("web resumed in its status", Duration::from_secs(60), || async {
        plumb.status("web").await.filter(|s| s.suspended.is_none())
    })
    .await;

    // a sync of the history: its objects
    browser.client.goto(&app_page).await.unwrap();
    let link = browser.client.find(fantoccini::Locator::Css("a[href*='/syncs/']")).await.unwrap();
    link.click().await.unwrap();
    reaches(&browser, "/syncs/").await;
    let sync = browser.client.source().await.unwrap();
    assert!(sync.contains("Sync of web at"), "{sync}");
    assert!(sync.contains(&format!("<code>Deployment.apps/{NS}/web</code>")), "the objects it applied: {sync}");

    // a prune held for an approval (Prune=confirm), approved from the page
    lab.repo.remove("app/keep.yaml").unwrap();
    lab.repo.commit("web: drop web-keep").unwrap();
    let held = format!("ConfigMap/{NS}/web-keep");
    wait_for("web-keep's prune held for an approval", Duration::from_secs(120), || async {
        plumb
            .status("web")
            .await
            .filter(|s| s.resources.iter().any(|r| r.object == held && plumb::plan::awaits_approval(&r.reason)))
    })
    .await;
    // the viewer may read but not annotate the object: the API server says no
    let (v, stop_viewer) = ui_as(viewer).await;
    let (_, confirm) = http_request(
        v,
        "GET",
        &format!("/applications/web/confirm?action=approve&object=ConfigMap%2F{NS}%2Fweb-keep"),
        &[],
        b"",
    )
    .await;
    assert!(confirm.contains(&format!("Approve deleting {held} of web?")), "{confirm}");
    let origin = [("origin".to_string(), format!("http://{v}")), ("sec-fetch-site".into(), "same-origin".into())];
    let form = format!("csrf={}&action=approve&object=ConfigMap%2F{NS}%2Fweb-keep", csrf_of(&confirm));
    let (code, refused) = post_action(v, &form, &origin).await;
    assert_eq!(code, 403, "{refused}");
    assert!(refused.contains("needs patch on configmaps"), "{refused}");
    let _ = stop_viewer.send(());
    // nothing else can be approved: an object whose prune does not wait
    let (_, confirm) = http_request(
        o,
        "GET",
        "/applications/web/confirm?action=approve&object=Deployment.apps%2Fui-web%2Fweb",
        &[],
        b"",
    )
    .await;
    assert!(confirm.contains("Nothing to approve") && !confirm.contains("<form method=post"), "{confirm}");

    let held_png = screenshot_dir().join("ui-held-prune.png");
    assert_eq!(screenshot(&app_page, &held_png, (1280, 700)).await.0, 1280);
    eprintln!("a held prune on the page: {}", held_png.display());
    browser.client.goto(&app_page).await.unwrap();
    let confirm = browser.click("Approve prune…").await;
    assert!(confirm.contains(&format!("Approve deleting {held} of web?")), "{confirm}");
    let done = browser.click("Approve prune").await;
    assert!(done.contains("web: Approve prune recorded") && done.contains(who), "{done}");
    wait_for("web-keep pruned after the approval", Duration::from_secs(120), || async {
        let out = kubectl(&["-n", NS, "get", "configmap", "web-keep", "--ignore-not-found", "-o", "name"]);
        out.trim().is_empty().then_some(())
    })
    .await;
    let last = plumb.status("web").await.unwrap().last_sync.unwrap();
    assert!(last.pruned.contains(&held), "{last:?}");
    browser.client.close().await.unwrap();
}

/// Waits until the browser is on a page whose URL contains `part` and has a heading.
async fn reaches(browser: &Driven, part: &str) {
    for _ in 0..100 {
        if browser.client.current_url().await.unwrap().as_str().contains(part) {
            browser.client.wait().for_element(fantoccini::Locator::Css("h1")).await.unwrap();
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the browser never reached a page like {part}");
}

/// The form token of the confirmation page `html`.
fn csrf_of(html: &str) -> String {
    let (_, rest) = html.split_once("name=csrf value=\"").unwrap_or_else(|| panic!("no token in {html}"));
    rest.split('"').next().unwrap().to_string()
}

/// POSTs an action form as a browser on the page would (same-origin).
async fn post_action(addr: SocketAddr, form: &str, extra: &[(String, String)]) -> (u16, String) {
    let mut headers = vec![("content-type".to_string(), "application/x-www-form-urlencoded".to_string())];
    headers.extend_from_slice(extra);
    http_request(addr, "POST", "/applications/web/actions", &headers, form.as_bytes()).await
}

/// `GET /` with `Host: host`; the whole response.
async fn raw_get(addr: SocketAddr, host: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn plumb_ui_reads_as_the_viewer_and_acts_as_the_operator() {
    let browser = chromium();
    let lab = Lab::new("ui");
    lab.repo
        .write(
            "app/deployment.yaml",
            &format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: web, image: 'nginx:1.27.3'}}]\n"
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
            "app/keep.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-keep\n  namespace: {NS}\n  annotations: {{plumb.dev/sync-options: Prune=confirm}}\ndata: {{a: b}}\n"),
        )
        .unwrap();
    lab.repo.commit("web: 2 replicas <b>bold</b>").unwrap();
    kubectl(&["create", "namespace", NS]);
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: {STATUS_NS}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: prod\n    syncPolicy: {{automated: true, prune: true, selfHeal: false}}\n    reconcileInterval: 2s\napplications:\n  - {{name: web, repository: r, revision: main, path: app, namespace: {NS}, environment: prod}}\n",
            lab.url
        ),
    );
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;
    wait_for("web Synced and Healthy", Duration::from_secs(120), || async {
        plumb.status("web").await.filter(|s| s.sync == SyncStatus::Synced && s.health == HealthStatus::Healthy)
    })
    .await;
    kubectl(&["-n", NS, "scale", "deployment", "web", "--replicas=3"]);
    wait_for("web OutOfSync on /spec/replicas", Duration::from_secs(120), || async {
        plumb.status("web").await.filter(|s| s.resources.iter().any(|r| r.reason.contains("/spec/replicas 3→2")))
    })
    .await;

    // the roles deploy/ ships for people; both may read the application's workloads
    let roles = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/role.yaml")).unwrap();
    for doc in roles.split("\n---\n").filter(|d| d.contains("name: plumb-viewer") || d.contains("name: plumb-operator"))
    {
        kubectl_apply(doc);
    }
    let dir = tempfile::tempdir().unwrap();
    let viewer = service_account_kubeconfig(STATUS_NS, "viewer", &dir.path().join("viewer"));
    let operator = service_account_kubeconfig(STATUS_NS, "operator", &dir.path().join("operator"));
    // in the application's namespace the viewer may read (`view`); the operator may also
    // change objects (`edit`), which approving a held prune needs
    for (who, role, there) in [("viewer", "plumb-viewer", "view"), ("operator", "plumb-operator", "edit")] {
        let account = format!("--serviceaccount={STATUS_NS}:{who}");
        kubectl(&["-n", STATUS_NS, "create", "rolebinding", who, &format!("--clusterrole={role}"), &account]);
        kubectl(&[
            "-n",
            NS,
            "create",
            "rolebinding",
            &format!("{who}-{there}"),
            &format!("--clusterrole={there}"),
            &account,
        ]);
    }

    // the viewer: reads everything, acts on nothing
    let (v, stop_viewer) = ui_as(&viewer).await;
    let base = format!("http://{v}/");
    let dom = browse(&["--dump-dom".into(), base.clone()]).await;
    assert!(dom.contains("<a href=\"applications/web\">web</a>"), "{dom}");
    assert!(dom.contains(&format!("as <code>system:serviceaccount:{STATUS_NS}:viewer</code>")), "{dom}");
    assert!(dom.contains("web: 2 replicas &lt;b&gt;bold&lt;/b&gt;"), "escaped: {dom}");
    let dom = browse(&["--dump-dom".into(), format!("{base}applications/web")]).await;
    assert!(dom.contains("<h2 id=\"tree\">Resource tree</h2>"), "{dom}");
    assert!(dom.contains(&format!("<code>ReplicaSet.apps/{NS}/web-")), "the live ReplicaSet: {dom}");
    assert!(dom.contains(&format!("<code>Pod/{NS}/web-")), "its Pods: {dom}");
    assert!(dom.contains("<h2 id=\"events\">Events</h2>"), "{dom}");
    assert!(dom.contains(">SyncSucceeded<") || dom.contains(">Synced<"), "an Event of the sync: {dom}");
    assert!(dom.contains("<code>/spec/replicas</code>"), "drift: {dom}");
    let (code, object) =
        http_request(v, "GET", &format!("/applications/web/objects/Deployment.apps%2F{NS}%2Fweb"), &[], b"").await;
    assert_eq!(code, 200, "{object}");
    assert!(object.contains("<td><code>/spec/replicas</code></td><td>3→2</td><td>kubectl"), "{object}");
    assert!(object.contains("<h2>Live tree</h2>"), "{object}");
    let token = std::fs::read_to_string(&viewer).unwrap();
    let bearer_token = token.split("token: ").nth(1).unwrap().lines().next().unwrap().trim().to_string();
    let (code, confirm) = http_request(v, "GET", "/applications/web/confirm?action=sync", &[], b"").await;
    assert_eq!(code, 200, "{confirm}");
    assert!(confirm.contains("<h1>Sync web now?</h1>"), "{confirm}");
    for page in [&dom, &object, &confirm] {
        assert!(!page.contains(&bearer_token), "no credential in a page");
        assert!(!page.to_ascii_lowercase().contains("<script"), "{page}");
    }
    let csrf = csrf_of(&confirm);
    let origin = [("origin".to_string(), format!("http://{v}")), ("sec-fetch-site".into(), "same-origin".into())];
    let (code, refused) = post_action(v, &format!("csrf={csrf}&action=sync"), &origin).await;
    assert_eq!(code, 403, "the API server refuses the viewer: {refused}");
    assert!(refused.contains("web: Sync refused") && refused.contains("forbidden"), "{refused}");
    // refused before anything is asked: no token, a wrong one, another site, another Host
    for (form, headers) in [
        ("action=sync".to_string(), origin.to_vec()),
        ("csrf=0000&action=sync".to_string(), origin.to_vec()),
        (format!("csrf={csrf}&action=sync"), vec![("origin".to_string(), "http://evil.example".to_string())]),
        (format!("csrf={csrf}&action=sync"), vec![("sec-fetch-site".to_string(), "cross-site".to_string())]),
    ] {
        let (code, body) = post_action(v, &form, &headers).await;
        assert_eq!(code, 403, "{form} {headers:?}: {body}");
        assert!(body.contains("<h1>Refused</h1>"), "{body}");
    }
    // a page of another site whose name resolves to loopback (DNS rebinding) reads nothing
    let foreign = raw_get(v, &format!("evil.example:{}", v.port())).await;
    assert!(foreign.starts_with("HTTP/1.1 403"), "a foreign Host: {foreign}");
    assert!(raw_get(v, &format!("localhost:{}", v.port())).await.starts_with("HTTP/1.1 200"));
    let _ = stop_viewer.send(());

    // the operator: a pause lands, recorded with the API server's name for the operator
    let (o, stop_operator) = ui_as(&operator).await;
    let (_, confirm) = http_request(o, "GET", "/applications/web/confirm?action=suspend", &[], b"").await;
    let csrf = csrf_of(&confirm);
    let origin = [("origin".to_string(), format!("http://{o}")), ("sec-fetch-site".into(), "same-origin".into())];
    let (code, done) =
        post_action(o, &format!("csrf={csrf}&action=suspend&for=1h&reason=from+the+page"), &origin).await;
    assert_eq!(code, 200, "{done}");
    let who = format!("system:serviceaccount:{STATUS_NS}:operator");
    assert!(done.contains("Suspend recorded") && done.contains(&who), "{done}");
    let annotations =
        kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", "web", "-o", "jsonpath={.metadata.annotations}"]);
    assert!(annotations.contains("from the page") && annotations.contains(&who), "{annotations}");
    let paused = wait_for("web paused in its status", Duration::from_secs(60), || async {
        plumb.status("web").await.and_then(|s| s.suspended)
    })
    .await;
    assert_eq!(paused.by, who);
    by_clicks_in_a_browser(o, &plumb, &lab, &who, &viewer).await;

    let shots = screenshot_dir();
    let list_png = shots.join("ui-list.png");
    assert_eq!(screenshot(&format!("http://{o}/"), &list_png, (1280, 300)).await.0, 1280);
    let wide = shots.join("ui-application.png");
    assert_eq!(screenshot(&format!("http://{o}/applications/web"), &wide, (1280, 1400)).await.0, 1280);
    let phone = shots.join("ui-application-375.png");
    let (w, _) = screenshot(&format!("http://{o}/applications/web"), &phone, (375, 1800)).await;
    assert!(w <= 500, "a phone-wide screenshot: {w}");
    eprintln!("screenshots by {}: {} {} {}", browser.display(), list_png.display(), wide.display(), phone.display());
    let _ = stop_operator.send(());
    plumb.stop().await;
}
