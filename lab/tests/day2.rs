//! Issue 15: the `Application` resource (`applications.plumb.dev`) on a real control
//! plane: status with printer columns and Kubernetes conditions (`kubectl wait
//! --for=condition=Ready`), status ConfigMaps of earlier versions migrated, and the
//! requests recorded on it: a sync through the server, a pause that ends by itself, a
//! rollback pinned until released, a rollback to a revision synced before that history
//! rewriting left outside the tracked ref.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::status::SyncRecord;
use support::{Lab, Plumb, control_plane, kubectl, plumb_cli, wait_for};

fn cm(value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata: {{value: \"{value}\"}}\n")
}

fn policy(lab: &Lab, status_ns: &str, app: &str, ns: &str) -> std::path::PathBuf {
    lab.app_policy(
        status_ns,
        app,
        ns,
        "    syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}\n    reconcileInterval: 1h",
    )
}

fn resource(ns: &str, app: &str) -> serde_json::Value {
    serde_json::from_str(&kubectl(&["-n", ns, "get", "applications.plumb.dev", app, "-o", "json"])).unwrap()
}

fn live_value(ns: &str) -> String {
    control_plane()
        .kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.value}"])
        .unwrap_or_default()
}

async fn value_becomes(ns: &str, want: &str) {
    wait_for(&format!("settings = {want}"), Duration::from_secs(60), || async {
        (live_value(ns) == want).then_some(())
    })
    .await;
}

fn cli(args: &[&str], status_ns: &str) -> String {
    let mut all = args.to_vec();
    all.extend(["-n", status_ns]);
    let (code, out, err) = plumb_cli(&all);
    assert_eq!(code, 0, "plumb {}: {out}\n{err}", args.join(" "));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_resource_carries_status_conditions_and_migrated_history() {
    let (status_ns, ns, app) = ("plumb-d2-res", "d2-res", "resweb");
    let lab = Lab::new("d2res");
    lab.repo.write("app/settings.yaml", &cm("1")).unwrap();
    lab.repo.commit("first").unwrap();
    let file = policy(&lab, status_ns, app, ns);
    // a status ConfigMap as an earlier version wrote it, with one history entry
    kubectl(&["create", "namespace", status_ns]);
    let old = SyncRecord {
        subject: "before the upgrade".into(),
        started_at: "2026-11-01T00:00:00.000Z".into(),
        finished_at: "2026-11-01T00:00:01.000Z".into(),
        result: plumb::status::SyncResult::Succeeded,
        ..SyncRecord::new("0123456789abcdef0123456789abcdef01234567", plumb::status::SyncReason::NewRevision)
    };
    let legacy = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("plumb-app-{app}"), "namespace": status_ns,
                     "labels": {"app.kubernetes.io/managed-by": "plumb", "plumb.dev/status-of": app}},
        "data": {"status.json": serde_json::json!({"app": app, "environment": "e"}).to_string(),
                 "history.json": serde_json::to_string(&[&old]).unwrap()}});
    let legacy_file = lab.tmp.path().join("legacy.json");
    std::fs::write(&legacy_file, legacy.to_string()).unwrap();
    kubectl(&["apply", "-f", legacy_file.to_str().unwrap()]);

    let plumb = Plumb::start(&file, &lab.tmp.path().join("cache")).await;
    value_becomes(ns, "1").await;
    let (code, out, err) = {
        let o = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&control_plane().kubeconfig)
            .args(["-n", status_ns, "wait", "--for=condition=Ready", &format!("application.plumb.dev/{app}")])
            .arg("--timeout=60s")
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    assert_eq!(code, Some(0), "kubectl wait: {out}\n{err}");
    assert!(out.contains("condition met"), "{out}");

    let r = resource(status_ns, app);
    assert_eq!(r["spec"]["path"], "app", "spec mirrors the policy: {r}");
    assert_eq!(r["spec"]["environment"], "e");
    assert_eq!(r["status"]["sync"], "Synced");
    assert_eq!(r["status"]["health"], "Healthy");
    let ready = r["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap().clone();
    assert_eq!(ready["status"], "True", "{ready}");
    assert!(ready["lastTransitionTime"].as_str().is_some_and(|t| t.ends_with('Z')), "{ready}");
    assert_eq!(ready["observedGeneration"], r["metadata"]["generation"]);
    let history: Vec<SyncRecord> = serde_json::from_value(r["status"]["history"].clone()).unwrap();
    assert_eq!(history.len(), 2, "the migrated entry and the first sync: {history:?}");
    assert_eq!(history[1], old);
    assert!(
        control_plane().kubectl(&["-n", status_ns, "get", "configmap", &format!("plumb-app-{app}")]).is_err(),
        "the old status ConfigMap is removed once moved"
    );

    // printer columns
    let table = kubectl(&["-n", status_ns, "get", "applications.plumb.dev"]);
    let header = table.lines().next().unwrap();
    for column in ["NAME", "SYNC", "HEALTH", "REVISION", "AGE"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(table.lines().any(|l| l.starts_with(app) && l.contains("Synced") && l.contains("Healthy")), "{table}");

    // an OutOfSync application is not Ready
    lab.repo
        .write("app/bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {'bad key': x}\n")
        .unwrap();
    lab.repo.commit("an invalid object").unwrap();
    assert!(plumb::leader::forward(plumb.ctx.cluster.client(), status_ns, app).await.unwrap(), "the resource exists");
    wait_for("Ready False", Duration::from_secs(60), || async {
        let r = resource(status_ns, app);
        let ready = r["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?.clone();
        (ready["status"] == "False").then_some(ready)
    })
    .await;
    plumb.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_requests_pauses_and_rollbacks_go_through_the_resource() {
    let (status_ns, ns, app) = ("plumb-d2-req", "d2-req", "reqweb");
    let lab = Lab::new("d2req");
    lab.repo.write("app/settings.yaml", &cm("1")).unwrap();
    let c1 = lab.repo.commit("one").unwrap();
    let file = policy(&lab, status_ns, app, ns);
    let plumb = Plumb::start(&file, &lab.tmp.path().join("cache")).await;
    value_becomes(ns, "1").await;
    let client = plumb.ctx.cluster.client().clone();

    // a sync request: the server syncs the new commit (no webhook, a 1 h interval)
    lab.repo.write("app/settings.yaml", &cm("2")).unwrap();
    let c2 = lab.repo.commit("two").unwrap();
    let asked = plumb::leader::request(&client, status_ns, app, plumb::status::SYNC_ANNOTATION)
        .await
        .unwrap()
        .expect("the application exists");
    value_becomes(ns, "2").await;
    wait_for("the request recorded as handled", Duration::from_secs(30), || async {
        (resource(status_ns, app)["status"]["syncRequest"] == asked.as_str()).then_some(())
    })
    .await;

    // a pause: a new commit is not synced while it lasts, and is once it ends by itself
    let out = cli(&["suspend", app, "--for", "8s", "--reason", "incident 42"], status_ns);
    assert!(out.contains("paused until"), "{out}");
    lab.repo.write("app/settings.yaml", &cm("3")).unwrap();
    let c3 = lab.repo.commit("three").unwrap();
    let paused = wait_for("the pause in the status", Duration::from_secs(30), || async {
        let s = resource(status_ns, app)["status"].clone();
        (s["suspended"]["reason"] == "incident 42" && s["revision"].as_str().is_some_and(|r| r != c1)).then_some(s)
    })
    .await;
    assert_eq!(paused["suspended"]["by"], "plumb-admin", "who paused, from the API server: {paused}");
    assert!(
        paused["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "SyncPaused" && c["message"].as_str().unwrap().contains("incident 42")),
        "{paused}"
    );
    assert!(plumb::leader::forward(&client, status_ns, app).await.unwrap(), "the resource exists");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(live_value(ns), "2", "no automated sync while paused");
    value_becomes(ns, "3").await;
    wait_for("the pause gone from the status", Duration::from_secs(30), || async {
        resource(status_ns, app)["status"].get("suspended").is_none().then_some(())
    })
    .await;
    let events =
        kubectl(&["-n", status_ns, "get", "events", "--field-selector", &format!("involvedObject.name={app}")]);
    assert!(events.contains("Paused") && events.contains("incident 42"), "{events}");
    // one Event per sync, each naming its own revision (not a series keeping the first)
    for c in [&c1, &c2, &c3] {
        assert!(events.contains(&format!("sync of {} (", &c[..7])), "{c}: {events}");
    }

    // a rollback: back to one, pinned there while new commits arrive, until released
    cli(&["rollback", app, &c1[..8]], status_ns);
    value_becomes(ns, "1").await;
    lab.repo.write("app/settings.yaml", &cm("4")).unwrap();
    lab.repo.commit("four").unwrap();
    assert!(plumb::leader::forward(&client, status_ns, app).await.unwrap(), "the resource exists");
    let pinned = wait_for("the pin in the status", Duration::from_secs(30), || async {
        let s = resource(status_ns, app)["status"].clone();
        (s["pinned"]["revision"] == c1.as_str()).then_some(s)
    })
    .await;
    let history: Vec<SyncRecord> = serde_json::from_value(pinned["history"].clone()).unwrap();
    assert_eq!((history[0].revision.as_str(), history[0].reason.as_str()), (c1.as_str(), "Rollback"), "{history:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(live_value(ns), "1", "pinned: the new commit is not synced");
    cli(&["rollback", app, "--release"], status_ns);
    value_becomes(ns, "4").await;

    // history rewritten: a revision synced before is no ancestor of the tracked ref any
    // more, and still runs (a commit never synced is refused: lab/tests/rollback.rs)
    let unrelated = lab.repo.commit_unrelated("rewritten").unwrap();
    assert_ne!(unrelated, c1);
    cli(&["rollback", app, &c1], status_ns);
    value_becomes(ns, "1").await;
    plumb.stop().await;
}
