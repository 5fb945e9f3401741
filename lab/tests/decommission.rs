//! An application that leaves the policy file, on a real control plane: by default its
//! objects stay (`orphan`) and only its `Application` resource goes; under
//! `deletionPolicy: delete` its objects are deleted, a PersistentVolumeClaim only after
//! `plumb decommission APP --approve`, an object another application claims never;
//! two applications removed in one edit are both held until `--confirm`; under `wait`
//! the resource reports what is left until the last finalizer goes.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{Lab, Plumb, control_plane, kubectl, plumb_cli, wait_for};

/// One application of the policy: name, path in the repository, namespace, extra
/// fields (`, deletionPolicy: delete`).
struct App<'a>(&'a str, &'a str, &'a str, &'a str);

fn policy(lab: &Lab, status_ns: &str, apps: &[App<'_>]) -> std::path::PathBuf {
    let apps: String = apps
        .iter()
        .map(|App(name, path, ns, extra)| {
            format!("  - {{name: {name}, repository: r, revision: main, path: {path}, namespace: {ns}, environment: e{extra}}}\n")
        })
        .collect();
    lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: {status_ns}}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\napplications:\n{apps}",
            lab.url
        ),
    )
}

fn cm(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: v}}\n")
}

fn resource(status_ns: &str, app: &str) -> Option<serde_json::Value> {
    let text = control_plane().kubectl(&["-n", status_ns, "get", "applications.plumb.dev", app, "-o", "json"]).ok()?;
    serde_json::from_str(&text).ok()
}

fn condition(status_ns: &str, app: &str, type_: &str) -> Option<String> {
    let r = resource(status_ns, app)?;
    let conditions = r["status"]["conditions"].as_array()?.clone();
    conditions.into_iter().find(|c| c["type"] == type_).and_then(|c| c["message"].as_str().map(String::from))
}

fn exists(ns: &str, what: &str) -> bool {
    control_plane().kubectl(&["-n", ns, "get", what, "-o", "name"]).is_ok()
}

/// Whether `ns/what` is gone or being deleted.
fn going(ns: &str, what: &str) -> bool {
    match control_plane().kubectl(&["-n", ns, "get", what, "-o", "jsonpath={.metadata.deletionTimestamp}"]) {
        Ok(t) => !t.trim().is_empty(),
        Err(_) => true,
    }
}

fn events(status_ns: &str, reason: &str) -> String {
    kubectl(&["-n", status_ns, "get", "events", "--field-selector", &format!("reason={reason}"), "-o", "json"])
}

async fn synced(status_ns: &str, apps: &[&str]) {
    for app in apps {
        wait_for(&format!("{app} synced"), Duration::from_secs(90), || async {
            resource(status_ns, app).filter(|r| r["status"]["sync"] == "Synced").map(|_| ())
        })
        .await;
    }
}

fn cli(args: &[&str], status_ns: &str) -> (i32, String) {
    let mut all = args.to_vec();
    all.extend(["-n", status_ns]);
    let (code, out, err) = plumb_cli(&all);
    (code, format!("{out}{err}"))
}

/// Starts plumb on `apps`, waits until `wait` are synced, stops it; then starts it on
/// `then` (the edit that removes applications) and returns it running.
async fn serve_then_edit(lab: &Lab, status_ns: &str, apps: &[App<'_>], wait: &[&str], then: &[App<'_>]) -> Plumb {
    let cache = lab.tmp.path().join("cache");
    let file = policy(lab, status_ns, apps);
    let first = Plumb::start(&file, &cache).await;
    synced(status_ns, wait).await;
    first.stop().await;
    let file = policy(lab, status_ns, then);
    Plumb::start(&file, &cache).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_removed_from_the_policy_leaves_its_objects_by_default() {
    let (status_ns, ns) = ("plumb-decom-orphan", "decom-orphan");
    let lab = Lab::new("decomorphan");
    lab.repo.write("gone/cm.yaml", &cm("orphaned")).unwrap();
    lab.repo.write("keep/cm.yaml", &cm("kept")).unwrap();
    lab.repo.commit("first").unwrap();
    let both = [App("orphan-gone", "gone", ns, ""), App("orphan-keep", "keep", ns, "")];
    let plumb = serve_then_edit(&lab, status_ns, &both, &["orphan-gone", "orphan-keep"], &both[1..]).await;
    wait_for("orphan-gone's Application resource deleted", Duration::from_secs(60), || async {
        resource(status_ns, "orphan-gone").is_none().then_some(())
    })
    .await;
    // the objects stay, tracking marks left on them
    let tracking = kubectl(&[
        "-n",
        ns,
        "get",
        "configmap",
        "orphaned",
        "-o",
        "jsonpath={.metadata.annotations.plumb\\.dev/tracking-id}",
    ]);
    assert!(tracking.starts_with("orphan-gone:"), "{tracking}");
    assert!(exists(ns, "configmap/kept"));
    assert!(resource(status_ns, "orphan-keep").is_some(), "the application still declared keeps its resource");
    let ev = events(status_ns, "Decommissioned");
    assert!(ev.contains("orphan-gone") && ev.contains("deletionPolicy orphan"), "{ev}");
    plumb.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_objects_holds_the_claim_until_approved_and_never_touches_a_claimed_object() {
    let (status_ns, ns) = ("plumb-decom-delete", "decom-delete");
    let lab = Lab::new("decomdelete");
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx}]}\n";
    let pvc = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";
    lab.repo.write("drop/deploy.yaml", deployment).unwrap();
    lab.repo.write("drop/cm.yaml", &cm("settings")).unwrap();
    lab.repo.write("drop/shared.yaml", &cm("shared")).unwrap();
    lab.repo.write("drop/pvc.yaml", pvc).unwrap();
    // an object that existed before, taken over (Adopt=true): Git did not create it
    let adopted = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: adopted\n  annotations: {plumb.dev/sync-options: Adopt=true}\ndata: {k: v}\n";
    lab.repo.write("drop/adopted.yaml", adopted).unwrap();
    kubectl(&["create", "namespace", ns]);
    kubectl(&["-n", ns, "create", "configmap", "adopted", "--from-literal=k=before"]);
    lab.repo.write("stay/shared.yaml", &cm("shared")).unwrap();
    lab.repo.write("stay/own.yaml", &cm("own")).unwrap();
    lab.repo.commit("first").unwrap();
    let cache = lab.tmp.path().join("cache");
    let drop = App("del-drop", "drop", ns, ", deletionPolicy: delete");
    let stay = App("del-stay", "stay", ns, "");
    // del-drop syncs first and owns `shared`; del-stay then declares it too (claims it)
    let first = Plumb::start(&policy(&lab, status_ns, &[App(drop.0, drop.1, drop.2, drop.3)]), &cache).await;
    synced(status_ns, &["del-drop"]).await;
    first.stop().await;
    let both = [App(drop.0, drop.1, drop.2, drop.3), App(stay.0, stay.1, stay.2, stay.3)];
    let cache2 = cache.clone();
    let running = Plumb::start(&policy(&lab, status_ns, &both), &cache2).await;
    wait_for("del-stay lists the shared ConfigMap", Duration::from_secs(90), || async {
        resource(status_ns, "del-stay")
            .filter(|r| r["status"]["resources"].to_string().contains("ConfigMap/decom-delete/shared"))
            .map(|_| ())
    })
    .await;
    let owner = kubectl(&[
        "-n",
        ns,
        "get",
        "configmap",
        "shared",
        "-o",
        "jsonpath={.metadata.annotations.plumb\\.dev/tracking-id}",
    ]);
    assert!(owner.starts_with("del-drop:"), "del-drop owns it: {owner}");
    running.stop().await;
    let plumb = Plumb::start(&policy(&lab, status_ns, &[App(stay.0, stay.1, stay.2, stay.3)]), &cache).await;
    let spec = resource(status_ns, "del-drop").map(|r| r["spec"]["decommission"].clone());
    assert!(spec.is_none_or(|s| s["deletionPolicy"] == "delete" && s["protectDataLoss"] == true));
    wait_for("the Deployment and ConfigMap deleted", Duration::from_secs(90), || async {
        (going(ns, "deployment/web") && going(ns, "configmap/settings")).then_some(())
    })
    .await;
    let pending = wait_for("the claim held for approval", Duration::from_secs(60), || async {
        condition(status_ns, "del-drop", "DecommissionPending")
    })
    .await;
    assert!(pending.contains("PersistentVolumeClaim/decom-delete/data") && pending.contains("--approve"), "{pending}");
    assert!(pending.contains("ConfigMap/decom-delete/adopted"), "{pending}");
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(!going(ns, "persistentvolumeclaim/data"), "held: not deleted without approval");
    assert!(!going(ns, "configmap/adopted"), "an adopted object waits for the same approval");
    assert!(resource(status_ns, "del-drop").is_some(), "the resource stays while something is held");
    assert!(events(status_ns, "DecommissionHeld").contains("del-drop"));
    let (code, out) = cli(&["decommission", "del-drop", "--approve"], status_ns);
    assert_eq!(code, 0, "{out}");
    wait_for("the claim deleted once approved, then the resource", Duration::from_secs(60), || async {
        (going(ns, "persistentvolumeclaim/data") && resource(status_ns, "del-drop").is_none()).then_some(())
    })
    .await;
    assert!(going(ns, "configmap/adopted"));
    // the object del-stay claims, and del-stay's own, stay
    assert!(!going(ns, "configmap/shared"), "a claimed object is never deleted");
    assert!(!going(ns, "configmap/own"));
    let ev = events(status_ns, "Decommissioned");
    assert!(ev.contains("del-drop") && ev.contains("ConfigMap/decom-delete/shared"), "{ev}");
    plumb.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_applications_removed_in_one_edit_are_held_until_confirmed() {
    let (status_ns, ns) = ("plumb-decom-mass", "decom-mass");
    let lab = Lab::new("decommass");
    for app in ["m1", "m2", "m3"] {
        lab.repo.write(&format!("{app}/cm.yaml"), &cm(&format!("cm-{app}"))).unwrap();
    }
    lab.repo.commit("first").unwrap();
    let delete = ", deletionPolicy: delete";
    let all = [App("mass-m1", "m1", ns, delete), App("mass-m2", "m2", ns, delete), App("mass-m3", "m3", ns, delete)];
    let plumb = serve_then_edit(&lab, status_ns, &all, &["mass-m1", "mass-m2", "mass-m3"], &all[2..]).await;
    for app in ["mass-m1", "mass-m2"] {
        let held = wait_for(&format!("{app} held"), Duration::from_secs(60), || async {
            condition(status_ns, app, "DecommissionPending")
        })
        .await;
        assert!(held.contains("2 applications leave the policy at once"), "{held}");
        assert!(held.contains("plumb decommission mass-m1 mass-m2 --confirm"), "{held}");
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    for cm in ["cm-m1", "cm-m2", "cm-m3"] {
        assert!(!going(ns, &format!("configmap/{cm}")), "{cm}: nothing deleted while held");
    }
    assert!(events(status_ns, "DecommissionHeld").contains("mass-m1"));
    // confirming one releases only that one
    let (code, out) = cli(&["decommission", "mass-m1", "--confirm"], status_ns);
    assert_eq!(code, 0, "{out}");
    wait_for("mass-m1 decommissioned", Duration::from_secs(60), || async {
        (going(ns, "configmap/cm-m1") && resource(status_ns, "mass-m1").is_none()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(!going(ns, "configmap/cm-m2"), "mass-m2 stays held until confirmed itself");
    assert!(condition(status_ns, "mass-m2", "DecommissionPending").is_some());
    let (code, out) = cli(&["decommission", "mass-m2", "--confirm"], status_ns);
    assert_eq!(code, 0, "{out}");
    wait_for("mass-m2 decommissioned", Duration::from_secs(60), || async {
        (going(ns, "configmap/cm-m2") && resource(status_ns, "mass-m2").is_none()).then_some(())
    })
    .await;
    assert!(!going(ns, "configmap/cm-m3"));
    // an application without a resource is reported
    let (code, out) = cli(&["decommission", "mass-nothing", "--confirm"], status_ns);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("nothing to decommission"), "{out}");
    plumb.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_reports_what_is_left_until_the_last_finalizer_goes() {
    let (status_ns, ns) = ("plumb-decom-wait", "decom-wait");
    let lab = Lab::new("decomwait");
    lab.repo.write("w/held.yaml", &cm("held")).unwrap();
    lab.repo.write("w/free.yaml", &cm("free")).unwrap();
    lab.repo.write("k/cm.yaml", &cm("other")).unwrap();
    lab.repo.commit("first").unwrap();
    let both = [App("wait-w", "w", ns, ", deletionPolicy: wait"), App("wait-k", "k", ns, "")];
    let cache = lab.tmp.path().join("cache");
    let first = Plumb::start(&policy(&lab, status_ns, &both), &cache).await;
    synced(status_ns, &["wait-w", "wait-k"]).await;
    first.stop().await;
    kubectl(&[
        "-n",
        ns,
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    let plumb = Plumb::start(&policy(&lab, status_ns, &both[1..]), &cache).await;
    let progress = wait_for("progress naming the held object", Duration::from_secs(60), || async {
        condition(status_ns, "wait-w", "Decommissioning").filter(|m| m.contains("waiting for 1 to go"))
    })
    .await;
    assert!(progress.contains("ConfigMap/decom-wait/held (finalizers: example.com/hold)"), "{progress}");
    assert!(!exists(ns, "configmap/free"), "the free one is gone");
    let ready = resource(status_ns, "wait-w").unwrap()["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap();
    assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("Decommissioning")));
    let (code, out) = cli(&["get", "wait-w"], status_ns);
    assert!(out.contains("Decommissioning"), "{code} {out}");
    let (code, page) = plumb.get("/applications/wait-w").await;
    assert!(code == 200 && page.contains("Decommissioning"), "the status page shows it: {code} {page}");
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(resource(status_ns, "wait-w").is_some(), "the resource waits for the finalizer");
    kubectl(&["-n", ns, "patch", "configmap", "held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    wait_for("the resource deleted once everything is gone", Duration::from_secs(60), || async {
        resource(status_ns, "wait-w").is_none().then_some(())
    })
    .await;
    assert!(!exists(ns, "configmap/held"));
    assert!(events(status_ns, "Decommissioning").contains("wait-w"));
    assert!(events(status_ns, "Decommissioned").contains("wait-w"));
    plumb.stop().await;
}

/// PreDelete hooks run, and complete, before any object is deleted; PostDelete hooks
/// after; both kept on the resource by the passes (the application's render is gone
/// by then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_delete_hooks_complete_before_the_objects_go_and_post_delete_hooks_run_after() {
    let (status_ns, ns) = ("plumb-decom-hooks", "decom-hooks");
    let lab = Lab::new("decomhooks");
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: drain\n  annotations: {plumb.dev/hook: PreDelete}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: drain, image: busybox}]\n";
    let post = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: farewell\n  annotations: {helm.sh/hook: post-delete}\ndata: {k: v}\n";
    lab.repo.write("h/cfg.yaml", &cm("cfg")).unwrap();
    lab.repo.write("h/job.yaml", job).unwrap();
    lab.repo.write("h/post.yaml", post).unwrap();
    lab.repo.write("k/cm.yaml", &cm("other")).unwrap();
    lab.repo.commit("first").unwrap();
    let both = [App("hooks-h", "h", ns, ", deletionPolicy: delete"), App("hooks-k", "k", ns, "")];
    let cache = lab.tmp.path().join("cache");
    let first = Plumb::start(&policy(&lab, status_ns, &both), &cache).await;
    synced(status_ns, &["hooks-h", "hooks-k"]).await;
    let kept = resource(status_ns, "hooks-h").unwrap()["spec"]["decommissionHooks"]["hooks"].clone();
    let phases: Vec<(&str, &str)> = kept
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["manifest"]["metadata"]["name"].as_str().unwrap(), h["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(phases, [("drain", "PreDelete"), ("farewell", "PostDelete")]);
    first.stop().await;
    // delete hooks run only when the application goes: a sync never applies them
    assert!(!exists(ns, "job/drain") && !exists(ns, "configmap/farewell"), "a sync applied a delete hook");
    let plumb = Plumb::start(&policy(&lab, status_ns, &both[1..]), &cache).await;
    let gone_at = wait_for("cfg deleted", Duration::from_secs(120), || async {
        going(ns, "configmap/cfg").then(jiff::Timestamp::now)
    })
    .await;
    let completed = kubectl(&["-n", ns, "get", "job", "drain", "-o", "jsonpath={.status.completionTime}"]);
    let completed: jiff::Timestamp = completed.trim().parse().unwrap_or_else(|e| panic!("{completed}: {e}"));
    assert!(completed <= gone_at, "the PreDelete Job completed ({completed}) before cfg went ({gone_at})");
    wait_for("the resource deleted", Duration::from_secs(60), || async {
        resource(status_ns, "hooks-h").is_none().then_some(())
    })
    .await;
    assert!(exists(ns, "configmap/farewell"), "the PostDelete hook ran");
    let ev = events(status_ns, "Decommissioned");
    assert!(ev.contains("PostDelete hooks completed"), "{ev}");
    plumb.stop().await;
}

/// A delete hook kept on the resource runs only in the application's own namespace and
/// never over an object that is not its hook: a Git author's PreDelete Job aimed at
/// another namespace (its sync was refused, but the hook was kept) holds the
/// decommission with the refusal named, and nothing is created or deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_hook_outside_the_application_s_namespace_is_refused_and_nothing_is_deleted() {
    let (status_ns, ns) = ("plumb-decom-escape", "decom-escape");
    let lab = Lab::new("decomescape");
    lab.repo.write("h/cfg.yaml", &cm("cfg")).unwrap();
    lab.repo.commit("first").unwrap();
    let apps = [App("escape-h", "h", ns, ", deletionPolicy: delete"), App("escape-k", "k", ns, "")];
    lab.repo.write("k/cm.yaml", &cm("other")).unwrap();
    lab.repo.commit("second").unwrap();
    let cache = lab.tmp.path().join("cache");
    let first = Plumb::start(&policy(&lab, status_ns, &apps), &cache).await;
    synced(status_ns, &["escape-h", "escape-k"]).await;
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: escape\n  namespace: kube-system\n  annotations: {plumb.dev/hook: PreDelete}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: x, image: busybox}]\n";
    lab.repo.write("h/job.yaml", job).unwrap();
    lab.repo.commit("a hook elsewhere").unwrap();
    // the sync refuses the hook (outside the boundary); its pass keeps it regardless
    let _ = cli(&["refresh", "escape-h"], status_ns);
    wait_for("the hook kept on the resource", Duration::from_secs(60), || async {
        let r = resource(status_ns, "escape-h")?;
        r["spec"]["decommissionHooks"]["hooks"].as_array().filter(|h| !h.is_empty()).map(|_| ())
    })
    .await;
    first.stop().await;
    let plumb = Plumb::start(&policy(&lab, status_ns, &apps[1..]), &cache).await;
    let message = wait_for("the decommission held on the refused hook", Duration::from_secs(60), || async {
        condition(status_ns, "escape-h", "Decommissioning").filter(|m| m.contains("refused"))
    })
    .await;
    assert!(message.contains("hook Job.batch/kube-system/escape refused"), "{message}");
    assert!(message.contains("nothing deleted"), "{message}");
    assert!(!exists("kube-system", "job/escape"), "the hook was created outside the application's namespace");
    assert!(exists(ns, "configmap/cfg") && !going(ns, "configmap/cfg"), "an object was deleted");
    plumb.stop().await;
}

/// `spec` of the resource is writable by whoever may `patch` it (the operator role);
/// the digest of what plumb kept there lives in the status, which only plumb writes.
/// A `deletionPolicy` changed by hand from orphan to delete is not trusted: the
/// application is orphaned, nothing deleted, and the Event says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decommission_record_changed_by_hand_is_not_trusted() {
    let (status_ns, ns) = ("plumb-decom-tamper", "decom-tamper");
    let lab = Lab::new("decomtamper");
    lab.repo.write("t/cm.yaml", &cm("precious")).unwrap();
    lab.repo.write("k/cm.yaml", &cm("other")).unwrap();
    lab.repo.commit("first").unwrap();
    let apps = [App("tamper-t", "t", ns, ""), App("tamper-k", "k", ns, "")];
    let cache = lab.tmp.path().join("cache");
    let first = Plumb::start(&policy(&lab, status_ns, &apps), &cache).await;
    synced(status_ns, &["tamper-t", "tamper-k"]).await;
    let kept = resource(status_ns, "tamper-t").unwrap();
    assert_eq!(kept["spec"]["decommission"]["deletionPolicy"], "orphan");
    assert!(kept["status"]["decommissionDigest"].as_str().is_some_and(|d| d.len() == 64), "{}", kept["status"]);
    first.stop().await;
    kubectl(&[
        "-n",
        status_ns,
        "patch",
        "applications.plumb.dev",
        "tamper-t",
        "--type=merge",
        "-p",
        r#"{"spec":{"decommission":{"deletionPolicy":"delete"}}}"#,
    ]);
    let plumb = Plumb::start(&policy(&lab, status_ns, &apps[1..]), &cache).await;
    wait_for("the resource deleted", Duration::from_secs(60), || async {
        resource(status_ns, "tamper-t").is_none().then_some(())
    })
    .await;
    assert!(exists(ns, "configmap/precious") && !going(ns, "configmap/precious"), "a hand-made record deleted");
    let ev = events(status_ns, "Decommissioned");
    assert!(ev.contains("not trusted: nothing deleted, no hook run"), "{ev}");
    plumb.stop().await;
}
