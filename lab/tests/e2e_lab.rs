//! The acceptance scenario of MISSION.md ("the lab") against a real control plane
//! (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and a real Git
//! repository served over HTTP.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{compare::SyncStatus, health::HealthStatus};
use support::*;

const NAMESPACE: &str = "gitops-lab";
const PROD_NAMESPACE: &str = "gitops-lab-prod";

fn manifests(ns: &str, image: &str) -> Vec<(String, String)> {
    vec![
        ("namespace.yaml".into(), format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")),
        (
            "deployment.yaml".into(),
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: {image}\n          ports: [{{containerPort: 80}}]\n"
            ),
        ),
        (
            "service.yaml".into(),
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  selector: {{app: web}}\n  ports: [{{port: 80, targetPort: 80}}]\n"
            ),
        ),
        (
            "configmap.yaml".into(),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-site\n  namespace: {ns}\ndata:\n  index.html: hello\n"
            ),
        ),
    ]
}

fn policy(url: &str, interval: &str) -> String {
    format!(
        "settings: {{statusNamespace: plumb-lab}}\nrepositories:\n  - name: fleet\n    url: {url}\n    webhookSecretFile: webhook-secret\nenvironments:\n  - name: dev\n    syncPolicy: {{automated: true, prune: true, selfHeal: true}}\n    reconcileInterval: {interval}\n  - name: prod\n    syncPolicy: {{automated: true, prune: false, selfHeal: true}}\n    reconcileInterval: {interval}\napplications:\n  - {{name: web, repository: fleet, revision: main, path: apps/web, namespace: {NAMESPACE}, environment: dev}}\n  - {{name: web-prod, repository: fleet, revision: main, path: apps/web-prod, namespace: {PROD_NAMESPACE}, environment: prod}}\n"
    )
}

fn image_of(ns: &str) -> String {
    kubectl(&["-n", ns, "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"])
}

fn replicas_of(ns: &str) -> String {
    kubectl(&["-n", ns, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"])
}

fn resource_versions(ns: &str) -> String {
    kubectl(&[
        "-n",
        ns,
        "get",
        "deployment,service,configmap",
        "-l",
        "plumb.dev/app",
        "-o",
        "jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion} {end}",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // one scenario from first sync to prune, read top to bottom
async fn the_lab_scenario() {
    let lab = Lab::new("fleet");
    for (f, text) in manifests(NAMESPACE, "nginx:1.27.3") {
        lab.repo.write(&format!("apps/web/{f}"), &text).unwrap();
    }
    for (f, text) in manifests(PROD_NAMESPACE, "nginx:1.27.3") {
        lab.repo.write(&format!("apps/web-prod/{f}"), &text).unwrap();
    }
    let c1 = lab.repo.commit("web: initial manifests").unwrap();
    let cache = lab.tmp.path().join("cache");

    // ---- Phase A: reconcile interval of an hour, so only the start pass and webhooks act.
    let slow = lab.policy("slow.yaml", &policy(&lab.url, "1h"));
    let plumb = Plumb::start(&slow, &cache).await;

    // 1. Everything applied, Synced, history with SHA and subject; `plumb status` shows them.
    let st = wait_for("web Synced at c1", Duration::from_secs(60), || async {
        plumb.status("web").await.filter(|s| s.sync == SyncStatus::Synced && s.revision == c1)
    })
    .await;
    assert_eq!(st.subject, "web: initial manifests");
    assert_eq!(st.resources.len(), 4, "{:?}", st.resources);
    assert_eq!(image_of(NAMESPACE), "nginx:1.27.3");
    let history = plumb.ctx.history("web").await.unwrap();
    assert_eq!(history[0].revision, c1);
    assert_eq!(history[0].subject, "web: initial manifests");
    assert_eq!(history[0].applied.len(), 4);
    // kwok runs the pods: the Deployment becomes Healthy (passes repeat while Progressing).
    wait_for("web Healthy", Duration::from_secs(60), || async {
        plumb.status("web").await.filter(|s| s.health == HealthStatus::Healthy)
    })
    .await;
    let (code, out, err) = plumb_cli(&["status", "--config", slow.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.starts_with("web ")).unwrap_or_else(|| panic!("no web row in:\n{out}"));
    assert!(
        row.contains(&c1[..7])
            && row.contains("Synced")
            && row.contains("Healthy")
            && row.contains("web: initial manifests"),
        "{out}"
    );
    assert!(
        kubectl(&["-n", "plumb-lab", "get", "applications.plumb.dev", "web", "-o", "jsonpath={.status.history}"])
            .contains(&c1)
    );

    // 3. A new commit, announced by a signed Gitea webhook, is live shortly after.
    for (f, text) in manifests(NAMESPACE, "nginx:1.27.4") {
        lab.repo.write(&format!("apps/web/{f}"), &text).unwrap();
    }
    let c2 = lab.repo.commit("web: bump nginx to 1.27.4").unwrap();
    let (headers, body) = lab.gitea_push(&lab.url, &c1, &c2, &lab.secret);
    assert_eq!(plumb.post_webhook(&headers, &body).await, 202);
    wait_for("image 1.27.4 live", Duration::from_secs(15), || async {
        (image_of(NAMESPACE) == "nginx:1.27.4").then_some(())
    })
    .await;
    let st = wait_for("web Synced at c2", Duration::from_secs(15), || async {
        plumb.status("web").await.filter(|s| s.sync == SyncStatus::Synced && s.revision == c2)
    })
    .await;
    assert_eq!(st.synced_revision, c2);

    // 6. Bad deliveries: wrong signature 401, malformed 400, unknown repository 2xx; none triggers a pass.
    // First the passes that follow the sync (the watch seeing plumb's own writes, settling
    // while Progressing: every 5 s) must be over, so that any pass after this is the
    // deliveries' doing.
    let passes = || async { plumb.passes("web").await + plumb.passes("web-prod").await };
    let mut before = passes().await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(6)).await;
        let now = passes().await;
        if now == before {
            break;
        }
        before = now;
    }
    let (h, b) = lab.gitea_push(&lab.url, &c1, &c2, b"wrong-secret");
    assert_eq!(plumb.post_webhook(&h, &b).await, 401);
    let (mut h, _) = lab.gitea_push(&lab.url, &c1, &c2, &lab.secret);
    let bad = b"{\"ref\": \"refs/heads/main\", ";
    let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(&lab.secret).unwrap();
    hmac::Mac::update(&mut mac, bad);
    h.retain(|(k, _)| k != "X-Gitea-Signature");
    h.push(("X-Gitea-Signature".into(), hex::encode(hmac::Mac::finalize(mac).into_bytes())));
    assert_eq!(plumb.post_webhook(&h, bad).await, 400);
    let (h, b) = lab.gitea_push("http://127.0.0.1:1/somebody/else.git", &c1, &c2, &lab.secret);
    let code = plumb.post_webhook(&h, &b).await;
    assert!((200..300).contains(&code) && code != 202, "unknown repository: {code}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = passes().await;
    assert_eq!(before, after, "rejected or unmatched deliveries must not trigger passes");
    plumb.stop().await;

    // ---- Phase B: plumb restarts, now polling every 2 s.
    // 8. History survives; nothing is re-applied when nothing changed.
    let rv_before = resource_versions(NAMESPACE);
    let fast = lab.policy("fast.yaml", &policy(&lab.url, "2s"));
    let plumb = Plumb::start(&fast, &cache).await;
    wait_for("two passes after restart", Duration::from_secs(30), || async {
        (plumb.passes("web").await >= 2).then_some(())
    })
    .await;
    assert_eq!(resource_versions(NAMESPACE), rv_before, "a pass with nothing to do must not write");
    assert_eq!(plumb.ctx.cluster.requests().1, 0, "no write request at all after the restart");
    let history = plumb.ctx.history("web").await.unwrap();
    assert_eq!(history.iter().map(|r| r.revision.as_str()).collect::<Vec<_>>(), [c2.as_str(), c1.as_str()]);

    plumb.stop().await;

    // 2. Hand drift through the scale subresource (field manager kubectl-scale).
    kubectl(&["-n", NAMESPACE, "scale", "deployment", "web", "--replicas=5"]);
    let (code, out, err) = plumb_cli(&["diff", "web", "--config", fast.to_str().unwrap()]);
    assert_eq!(code, 1, "plumb diff must exit 1 on drift\n{out}\n{err}");
    assert!(out.contains("/spec/replicas"), "{out}");
    assert!(out.contains("-  replicas: 5") && out.contains("+  replicas: 3"), "{out}");
    // why: the field manager that made the hand change is named
    assert!(out.contains("/spec/replicas 5→3 (set by kubectl"), "{out}");
    let (code, json, _) = plumb_cli(&["diff", "web", "--config", fast.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 1);
    let diffs: serde_json::Value = serde_json::from_str(&json).unwrap();
    let d = &diffs.as_array().unwrap().iter().find(|d| d["object"] == "Deployment.apps/gitops-lab/web").unwrap()["differences"]
        [0];
    assert_eq!(
        (d["path"].as_str(), d["live"].as_i64(), d["desired"].as_i64()),
        (Some("/spec/replicas"), Some(5), Some(3)),
        "{d}"
    );
    assert!(d["manager"]["manager"].as_str().is_some_and(|m| m.starts_with("kubectl")), "{d}");
    let (code, out, _) = plumb_cli(&["diff", "web-prod", "--config", fast.to_str().unwrap()]);
    assert_eq!(code, 0, "no drift in web-prod:\n{out}");

    // … and with plumb running again, selfHeal reverts it.
    let plumb = Plumb::start(&fast, &cache).await;
    wait_for("replicas back to 3", Duration::from_secs(20), || async { (replicas_of(NAMESPACE) == "3").then_some(()) })
        .await;
    // the revert is applied before its record is written: wait for the record too
    let history = wait_for("the SelfHeal record", Duration::from_secs(20), || async {
        let h = plumb.ctx.history("web").await.ok()?;
        (h.first()?.reason == "SelfHeal").then_some(h)
    })
    .await;
    assert_eq!(history[0].applied, ["Deployment.apps/gitops-lab/web"]);
    let events = kubectl(&[
        "-n",
        NAMESPACE,
        "get",
        "events",
        "--field-selector",
        "reason=SelfHealed",
        "-o",
        "jsonpath={.items[*].note}{.items[*].message}",
    ]);
    assert!(
        events.contains("reverted /spec/replicas 5→3 (set by kubectl") && events.contains(&c2[..7]),
        "event: {events}"
    );

    // 4 + 7. A commit deletes the ConfigMap, with no webhook: the poller finds it; dev prunes, prod keeps it.
    lab.repo.remove("apps/web/configmap.yaml").unwrap();
    lab.repo.remove("apps/web-prod/configmap.yaml").unwrap();
    let c3 = lab.repo.commit("web: drop the site ConfigMap").unwrap();
    wait_for("ConfigMap pruned in dev", Duration::from_secs(30), || async {
        kubectl(&["-n", NAMESPACE, "get", "configmap", "-o", "name"]).contains("web-site").then_some(()).xor(Some(()))
    })
    .await;
    let st = wait_for("web-prod OutOfSync requires pruning at c3", Duration::from_secs(30), || async {
        plumb.status("web-prod").await.filter(|s| s.revision == c3 && s.sync == SyncStatus::OutOfSync)
    })
    .await;
    let cm = st.resources.iter().find(|r| r.object == format!("ConfigMap/{PROD_NAMESPACE}/web-site")).unwrap();
    assert!(cm.reason.contains("requires pruning"), "{cm:?}");
    assert!(kubectl(&["-n", PROD_NAMESPACE, "get", "configmap", "-o", "name"]).contains("web-site"));
    let st = plumb.status("web").await.unwrap();
    assert_eq!(st.sync, SyncStatus::Synced, "{st:?}");
    assert_eq!(plumb.ctx.history("web").await.unwrap()[0].pruned, [format!("ConfigMap/{NAMESPACE}/web-site")]);

    // 5. A commit empties the app's directory: nothing is deleted, the status says why.
    for f in ["namespace.yaml", "deployment.yaml", "service.yaml"] {
        lab.repo.remove(&format!("apps/web/{f}")).unwrap();
    }
    lab.repo.write("apps/web/.gitkeep", "").unwrap();
    let c4 = lab.repo.commit("web: empty the directory by mistake").unwrap();
    let st = wait_for("allowEmpty refusal at c4", Duration::from_secs(30), || async {
        plumb.status("web").await.filter(|s| s.revision == c4 && s.conditions.iter().any(|c| c.type_ == "SyncError"))
    })
    .await;
    let cond = st.conditions.iter().find(|c| c.type_ == "SyncError").unwrap();
    assert!(cond.message.contains("allowEmpty"), "{cond:?}");
    assert_eq!(st.sync, SyncStatus::OutOfSync);
    assert_eq!(st.synced_revision, c3, "the last good revision stays recorded as what runs");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(image_of(NAMESPACE), "nginx:1.27.4", "nothing was deleted");
    assert!(kubectl(&["get", "namespace", NAMESPACE, "-o", "name"]).contains(NAMESPACE));
    plumb.stop().await;
}

/// A commit pushed without a webhook reaches an application polled hourly at its
/// repository poller's next round: the poller asks the remote for its refs at the
/// smallest reconcile interval of the repository's applications (another one's, 2 s)
/// and starts a pass of each application whose revision moved. The application's own
/// timer would not pass it for an hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poller_passes_an_application_whose_branch_moved() {
    let lab = Lab::new("polled");
    let cm = |ns: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: site\n  namespace: {ns}\ndata:\n  value: {value}\n"
        )
    };
    let value_in = |ns: &str| kubectl(&["-n", ns, "get", "configmap", "site", "-o", "jsonpath={.data.value}"]);
    for ns in ["poll-hourly", "poll-often"] {
        kubectl(&["create", "namespace", ns]);
        lab.repo.write(&format!("apps/{ns}/cm.yaml"), &cm(ns, "one")).unwrap();
    }
    let c1 = lab.repo.commit("two applications").unwrap();
    let policy = lab.policy(
        "poll.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-poll}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: hourly\n    syncPolicy: {{automated: true}}\n    reconcileInterval: 1h\n  - name: often\n    syncPolicy: {{automated: true}}\n    reconcileInterval: 2s\napplications:\n  - {{name: hourly, repository: r, revision: main, path: apps/poll-hourly, namespace: poll-hourly, environment: hourly}}\n  - {{name: often, repository: r, revision: main, path: apps/poll-often, namespace: poll-often, environment: often}}\n",
            lab.url
        ),
    );
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;
    for app in ["hourly", "often"] {
        wait_for(&format!("{app} Synced at c1"), Duration::from_secs(60), || async {
            plumb.status(app).await.filter(|s| s.sync == SyncStatus::Synced && s.revision == c1)
        })
        .await;
    }
    // the passes that follow the sync (the watch seeing plumb's writes, the settle pass
    // 5 s after) must be over: any pass of `hourly` after this is the poller's doing
    let mut before = plumb.passes("hourly").await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(6)).await;
        let now = plumb.passes("hourly").await;
        if now == before {
            break;
        }
        before = now;
    }
    assert_eq!(value_in("poll-hourly"), "one");

    lab.repo.write("apps/poll-hourly/cm.yaml", &cm("poll-hourly", "two")).unwrap();
    let c2 = lab.repo.commit("hourly: two").unwrap();
    wait_for("hourly applies c2 (no webhook)", Duration::from_secs(30), || async {
        (value_in("poll-hourly") == "two").then_some(())
    })
    .await;
    let st = wait_for("hourly Synced at c2", Duration::from_secs(15), || async {
        plumb.status("hourly").await.filter(|s| s.sync == SyncStatus::Synced && s.revision == c2)
    })
    .await;
    assert_eq!(st.synced_revision, c2);
    assert!(plumb.passes("hourly").await > before, "a pass of hourly, started by the poller");
    plumb.stop().await;
}
