//! Prune safety against the real control plane: data-loss classes wait for approval.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::reconcile::Mode;
use support::*;

/// A PersistentVolumeClaim dropped from Git is not deleted by an automated prune: it
/// stays, marked "prune needs approval"; `plumb sync --approve` deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_prune_waits_for_approval() {
    let ns = "safety-pvc";
    let lab = Lab::new("safety");
    lab.repo
        .write(
            "app/cm.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: keep, namespace: {ns}}}\ndata: {{a: b}}\n"),
        )
        .unwrap();
    lab.repo.write("app/pvc.yaml", &format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: {ns}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n")).unwrap();
    lab.repo.commit("app with a volume claim").unwrap();
    let policy = lab.app_policy(
        "plumb-safety",
        "safety",
        ns,
        "    syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}",
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("safety", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.unwrap().applied.len(), 2);

    lab.repo.remove("app/pvc.yaml").unwrap();
    lab.repo.commit("drop the claim").unwrap();
    let r = ctx.run_pass("safety", Mode::Policy, None).await.unwrap();
    let pvc = r.status.resources.iter().find(|x| x.object == format!("PersistentVolumeClaim/{ns}/data")).unwrap();
    assert!(
        pvc.reason.contains("prune needs approval") && pvc.reason.contains("data-loss class PersistentVolumeClaim"),
        "{pvc:?}"
    );
    assert!(r.sync.is_none(), "nothing an automated sync may do: no sync");
    assert!(kubectl(&["-n", ns, "get", "pvc", "-o", "name"]).contains("data"));

    let (code, out, err) =
        plumb_cli(&["sync", "safety", "--local", "--config", policy.to_str().unwrap(), "--prune", "true", "--approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("pruned  PersistentVolumeClaim/{ns}/data")), "{out}");
    wait_for("claim gone", Duration::from_secs(30), || async {
        (!kubectl(&["-n", ns, "get", "pvc", "-o", "name"]).contains("data")).then_some(())
    })
    .await;
    assert!(kubectl(&["-n", ns, "get", "configmap", "keep", "-o", "name"]).contains("keep"));
}

/// Two applications declare the same ConfigMap: each pass says so
/// (SharedResourceWarning naming the other application), and with
/// `FailOnSharedResource=true` the second application refuses to take it over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_resources_are_named_and_can_fail_the_sync() {
    let ns = "safety-shared";
    let lab = Lab::new("shared");
    let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: common, namespace: {ns}}}\ndata: {{a: b}}\n");
    lab.repo.write("one/cm.yaml", &cm).unwrap();
    lab.repo.write("two/cm.yaml", &cm.replace("a: b", "a: c")).unwrap();
    lab.repo.commit("two apps, one ConfigMap").unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-safety}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true, FailOnSharedResource=true]}}\napplications:\n  - {{name: one, repository: r, revision: main, path: one, namespace: {ns}, environment: e}}\n  - {{name: two, repository: r, revision: main, path: two, namespace: {ns}, environment: e}}\n",
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    assert!(ctx.run_pass("one", Mode::Policy, None).await.unwrap().sync.is_some());
    let r = ctx.run_pass("two", Mode::Policy, None).await.unwrap();
    let warn = r.status.conditions.iter().find(|c| c.type_ == "SharedResourceWarning").expect("warning");
    assert!(
        warn.message.contains(&format!("ConfigMap/{ns}/common")) && warn.message.contains("application one"),
        "{warn:?}"
    );
    assert!(r.sync.is_none(), "FailOnSharedResource: no sync");
    assert!(r.status.conditions.iter().any(|c| c.type_ == "SyncError" && c.message.contains("FailOnSharedResource")));
    assert_eq!(
        kubectl(&["-n", ns, "get", "configmap", "common", "-o", "jsonpath={.data.a}"]),
        "b",
        "app one's value stays"
    );
}

/// `Prune=confirm` by annotation: the object Git dropped waits ("prune needs
/// approval"); annotating it `plumb.dev/prune-approved=<now>` lets the next automated
/// pass delete it. A stale approval (older than a day) does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_confirm_approved_by_annotation() {
    let ns = "safety-confirm";
    let lab = Lab::new("confirm");
    let cm = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{plumb.dev/sync-options: Prune=confirm}}\ndata: {{a: b}}\n"
        )
    };
    lab.repo.write("app/keep.yaml", &cm("keep")).unwrap();
    lab.repo.write("app/old.yaml", &cm("old")).unwrap();
    lab.repo.write("app/stale.yaml", &cm("stale")).unwrap();
    lab.repo.commit("three").unwrap();
    let policy = lab.app_policy(
        "plumb-safety",
        "confirm",
        ns,
        "    syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}",
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    ctx.run_pass("confirm", Mode::Policy, None).await.unwrap();
    lab.repo.remove("app/old.yaml").unwrap();
    lab.repo.remove("app/stale.yaml").unwrap();
    lab.repo.commit("drop two").unwrap();
    let r = ctx.run_pass("confirm", Mode::Policy, None).await.unwrap();
    let old = r.status.resources.iter().find(|x| x.object == format!("ConfigMap/{ns}/old")).unwrap();
    assert!(old.reason.contains("prune needs approval (Prune=confirm)"), "{old:?}");

    let now = jiff::Timestamp::now();
    let stale = now.checked_sub(jiff::SignedDuration::from_hours(48)).unwrap();
    kubectl(&["-n", ns, "annotate", "configmap", "old", &format!("plumb.dev/prune-approved={now}")]);
    kubectl(&["-n", ns, "annotate", "configmap", "stale", &format!("plumb.dev/prune-approved={stale}")]);
    let r = ctx.run_pass("confirm", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.unwrap().pruned, [format!("ConfigMap/{ns}/old")]);
    let names = kubectl(&["-n", ns, "get", "configmaps", "-o", "name"]);
    assert!(names.contains("stale") && names.contains("keep"), "{names}");
}

/// One repository that never answers (a tarpit: it accepts connections and sends
/// nothing) holds up no other application's prune: deciding whether a pruned object
/// moved to another application reads only the applications whose boundaries could own
/// it, each within 10 s; the tarpit's application holds back only what it could own
/// (`c`, in a namespace it may write), not `b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_repository_holds_only_the_prunes_its_application_could_own() {
    let (ns, shared) = ("safety-tarpit", "safety-tarpit-shared");
    kubectl(&["create", "namespace", shared]);
    let tarpit = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tarpit.local_addr().unwrap().port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::<std::net::TcpStream>::new()));
    let holds = held.clone();
    std::thread::spawn(move || {
        for conn in tarpit.incoming().flatten() {
            holds.lock().unwrap().push(conn);
        }
    });
    let lab = Lab::new("tarpit");
    let cm = |name: &str, ns: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{a: b}}\n")
    };
    lab.repo.write("app/a.yaml", &cm("a", ns)).unwrap();
    lab.repo.write("app/b.yaml", &cm("b", ns)).unwrap();
    lab.repo.write("app/c.yaml", &cm("c", shared)).unwrap();
    lab.repo.commit("three").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-tarpit}}\nrepositories:\n  - {{name: r, url: {}}}\n  - {{name: t, url: 'http://127.0.0.1:{port}/tarpit.git'}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, syncOptions: [CreateNamespace=true]}}\napplications:\n  - {{name: web, repository: r, revision: main, path: app, namespace: {ns}, environment: e, destinations: {{namespaces: [{ns}, {shared}]}}}}\n  - {{name: stuck, repository: t, revision: main, path: app, namespace: {shared}, environment: e}}\n",
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.unwrap().applied.len(), 3);

    lab.repo.remove("app/b.yaml").unwrap();
    lab.repo.remove("app/c.yaml").unwrap();
    lab.repo.commit("drop b and c").unwrap();
    let pass = tokio::time::timeout(Duration::from_secs(90), ctx.run_pass("web", Mode::Policy, None)).await;
    // the tarpit lets go: the fetch still waiting on it ends (and the test's runtime with it)
    for conn in held.lock().unwrap().drain(..) {
        let _ = conn.shutdown(std::net::Shutdown::Both);
    }
    let r = pass.expect("the pass ends while the tarpit still holds its connection").unwrap();
    let sync = r.sync.expect("a sync of the new commit");
    assert_eq!(sync.pruned, [format!("ConfigMap/{ns}/b")], "{sync:?}");
    let c = r.status.resources.iter().find(|x| x.object == format!("ConfigMap/{shared}/c")).unwrap();
    assert!(c.reason.contains("the desired state of stuck") && c.reason.contains("(no answer within 10s)"), "{c:?}");
    let left = kubectl(&["get", "cm", "-A", "-o", "name"]);
    assert!(left.contains("configmap/a") && !left.contains("configmap/b") && left.contains("configmap/c"), "{left}");
}
