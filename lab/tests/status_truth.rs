//! Status that never lies (shared cases pipecd-01, argocd-20, argocd-18, flux-14 and
//! the Job that the cluster removes by its own rule), on the real control plane: a
//! deletion is done when a read through a served version says the object is gone,
//! objects that wait by design do not block a sync, and hand changes are hand changes
//! whichever way they were made. Expected values come from each case's `expected.md`.
#![allow(clippy::unwrap_used)]

mod support;

use std::{path::PathBuf, time::Duration};

use plumb::{
    compare::SyncStatus,
    health::HealthStatus,
    reconcile::Mode,
    status::{ConditionType, SyncResult},
};
use support::*;

fn case_file(case: &str, file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/cases").join(case).join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const AUTO: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true}";

/// Applies a manifest with `kubectl apply --server-side` from a file.
fn kubectl_apply(dir: &std::path::Path, name: &str, text: &str, extra: &[&str]) -> String {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    let mut args = vec!["apply", "--server-side", "-f", f.to_str().unwrap()];
    args.extend_from_slice(extra);
    kubectl(&args)
}

/// pipecd-01: after a CRD upgrade stops serving the version a Widget was created
/// through, a fresh process still finds it through the served version (diff exit 1,
/// `requires pruning`), and a long-running process that cached the old version prunes
/// it for real (a 404 from the unserved version is not "gone").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipecd_01_pruning_finds_objects_through_any_served_version() {
    let ns = "st-p01";
    let desired = case_file("pipecd-01", "desired.yaml").replace("namespace: gitops-lab", &format!("namespace: {ns}"));
    kubectl(&["create", "namespace", ns]);
    let app = App::new("plumb-st-p01", "web-p01", ns, AUTO, &[("widget.yaml", &desired)]).await;
    let tmp = app.lab.tmp.path().to_path_buf();
    kubectl_apply(&tmp, "crd.yaml", &case_file("pipecd-01", "live.yaml"), &[]);
    kubectl(&["wait", "--for=condition=Established", "crd/widgets.acme.example", "--timeout=60s"]);
    // the long-running process (watches) sees steps 2-3
    let serve = context_for(&app.policy, &tmp.join("serve-cache"), true).await;
    let first = serve.run_pass("web-p01", Mode::Policy, None).await.unwrap();
    assert_eq!(first.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", first.status);
    assert!(
        first.status.kinds.iter().any(|(av, k)| av == "acme.example/v1alpha1" && k == "Widget"),
        "{:?}",
        first.status.kinds
    );
    let cm_uid = || kubectl(&["-n", ns, "get", "cm", "web-settings", "-o", "jsonpath={.metadata.uid}"]);
    let uid = cm_uid();
    // the watch store of the Widget's version is ready before the upgrade
    wait_for("a settled pass with watches", Duration::from_secs(30), || async {
        let r = serve.run_pass("web-p01", Mode::Policy, None).await.unwrap();
        (r.status.sync == SyncStatus::Synced && r.sync.is_none()).then_some(())
    })
    .await;

    kubectl_apply(&tmp, "crd-upgrade.yaml", &case_file("pipecd-01", "crd-upgrade.yaml"), &["--force-conflicts"]);
    wait_for("v1alpha1 to stop being served", Duration::from_secs(30), || async {
        let out = control_plane().kubectl(&["get", "--raw", "/apis/acme.example/v1alpha1"]);
        out.is_err().then_some(())
    })
    .await;
    kubectl(&["-n", ns, "get", "widgets.v1.acme.example", "web-widget"]);

    // commit 2: the Widget leaves Git, the ConfigMap stays
    let configmap = desired.split("---").nth(1).unwrap().to_string();
    app.commit(&[("widget.yaml", &configmap)], &[]);

    // step 5: a fresh CLI process
    let policy = app.policy.to_str().unwrap();
    let (code, out, err) = plumb_cli(&["diff", "web-p01", "-c", policy]);
    assert_eq!(code, 1, "diff exit 1: {out}\n{err}");
    assert!(out.contains(&format!("Widget.acme.example/{ns}/web-widget")) && out.contains("requires pruning"), "{out}");

    // step 6: the long-running process prunes it through the served version
    let r = serve.run_pass("web-p01", Mode::Policy, None).await.unwrap();
    let rec = r.sync.expect("a sync of commit 2");
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    assert_eq!(rec.pruned, [format!("Widget.acme.example/{ns}/web-widget")], "{rec:?}");
    // (a foreground deletion: the garbage collector removes it a moment later)
    wait_for("the Widget to be gone", Duration::from_secs(30), || async {
        let gone = control_plane().kubectl(&["-n", ns, "get", "widgets.v1.acme.example", "web-widget"]);
        gone.is_err_and(|e| format!("{e:#}").contains("NotFound")).then_some(())
    })
    .await;
    assert_eq!(cm_uid(), uid, "the ConfigMap is untouched");
    let after = app.pass(Mode::Policy).await;
    assert_eq!(after.status.sync, SyncStatus::Synced, "{:?}", after.status.resources);
    kubectl(&["delete", "crd", "widgets.acme.example", "--wait=false"]);
}

fn finalizers(ns: &str, name: &str) -> String {
    kubectl(&["-n", ns, "get", "cm", name, "-o", "jsonpath={.metadata.finalizers}"])
}

/// argocd-20: an object held by a finalizer after its prune stays listed (OutOfSync,
/// `deletion pending … (finalizers: …)`), gets no DELETE storm, a `PruneStuck`
/// condition after the stall limit, a new DELETE when the propagation changes, and the
/// application turns Synced once it is really gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_20_an_object_held_by_a_finalizer_is_not_synced() {
    let ns = "st-a20";
    let desired = case_file("argocd-20", "desired.yaml").replace("namespace: gitops-lab", &format!("namespace: {ns}"));
    kubectl(&["create", "namespace", ns]);
    let env = format!("{AUTO}\nhealth: {{stallAfter: 3}}");
    let app = App::new("plumb-st-a20", "web-a20", ns, &env, &[("config.yaml", &desired)]).await;
    assert_eq!(app.settle().await.status.sync, SyncStatus::Synced);
    kubectl(&[
        "-n",
        ns,
        "patch",
        "cm",
        "web-legacy-routes",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["acme.example/route-cleanup"]}}"#,
    ]);
    // a dependent that blocks the owner's foreground deletion and is held itself, so the
    // garbage collector's `foregroundDeletion` finalizer stays on the owner (step 5)
    let owner_uid = kubectl(&["-n", ns, "get", "cm", "web-legacy-routes", "-o", "jsonpath={.metadata.uid}"]);
    let child = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"web-legacy-child","namespace":"{ns}","finalizers":["acme.example/hold"],"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"web-legacy-routes","uid":"{owner_uid}","blockOwnerDeletion":true}}]}}}}"#
    );
    kubectl_apply(app.lab.tmp.path(), "child.json", &child, &[]);
    let settings = desired.split("---").next().unwrap().to_string();
    app.commit(&[("config.yaml", &settings)], &[]);

    // step 3-4: the prune is accepted, the object stays: not pruned, not Synced
    let r = app.pass(Mode::Policy).await;
    let rec = r.sync.as_ref().expect("the sync of commit 2");
    assert!(rec.pruned.is_empty(), "a held object is not recorded as pruned: {rec:?}");
    assert!(rec.message.contains("web-legacy-routes"), "{rec:?}");
    let object = format!("ConfigMap/{ns}/web-legacy-routes");
    let listed = |st: &plumb::status::AppStatus| st.resources.iter().find(|x| x.object == object).cloned();
    let res = listed(&r.status).expect("still listed");
    assert_eq!(res.sync, SyncStatus::OutOfSync);
    assert!(
        res.reason.starts_with("requires pruning; deletion pending since ")
            && res.reason.contains("acme.example/route-cleanup"),
        "{}",
        res.reason
    );
    assert_eq!(r.status.sync, SyncStatus::OutOfSync);
    assert_eq!(r.status.health, HealthStatus::Healthy, "not desired: not in health");
    let (code, out, err) = plumb_cli(&["diff", "web-a20", "-c", app.policy.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&object) && out.contains("deletion pending since"), "{out}\n{err}");

    // no DELETE storm: later passes write nothing and stay OutOfSync
    let writes = app.ctx.cluster.requests().1;
    let again = app.pass(Mode::Policy).await;
    assert!(again.sync.is_none(), "{:?}", again.sync);
    assert_eq!(again.status.sync, SyncStatus::OutOfSync);
    assert_eq!(app.ctx.cluster.requests().1, writes, "no second DELETE with the same propagation");
    assert!(!again.status.conditions.iter().any(|c| c.type_ == ConditionType::PruneStuck), "within the grace period");

    // after the stall limit: a condition names the object and its finalizer
    tokio::time::sleep(Duration::from_secs(4)).await;
    let late = app.pass(Mode::Policy).await;
    let stuck = late.status.conditions.iter().find(|c| c.type_ == ConditionType::PruneStuck).expect("PruneStuck");
    assert!(stuck.message.contains(&object) && stuck.message.contains("acme.example/route-cleanup"), "{stuck:?}");
    assert_eq!(late.status.health, HealthStatus::Healthy);

    // step 5: pruned with foreground (the default); background now: one new DELETE
    assert!(finalizers(ns, "web-legacy-routes").contains("foregroundDeletion"));
    let (code, out, err) = plumb_cli(&["prune", "web-a20", "-c", app.policy.to_str().unwrap()]);
    assert_eq!(code, 0, "same propagation: nothing to do\n{out}\n{err}");
    std::fs::write(
        &app.policy,
        std::fs::read_to_string(&app.policy)
            .unwrap()
            .replace("selfHeal: true}", "selfHeal: true, syncOptions: [PrunePropagationPolicy=background]}"),
    )
    .unwrap();
    let (code, out, err) = plumb_cli(&["prune", "web-a20", "-c", app.policy.to_str().unwrap()]);
    assert!(
        !finalizers(ns, "web-legacy-routes").contains("foregroundDeletion"),
        "re-issued with background\n{out}\n{err}"
    );
    assert_eq!(code, 0, "{out}\n{err}");

    // step 6: the finalizers go, the object goes, the next pass is Synced and records nothing
    for name in ["web-legacy-child", "web-legacy-routes"] {
        kubectl(&[
            "-n",
            ns,
            "patch",
            "cm",
            name,
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ]);
    }
    wait_for("the object to go", Duration::from_secs(30), || async {
        control_plane().kubectl(&["-n", ns, "get", "cm", "web-legacy-routes"]).is_err().then_some(())
    })
    .await;
    let history = app.ctx.history("web-a20").await.unwrap().len();
    let done = app.pass(Mode::Policy).await;
    assert_eq!(done.status.sync, SyncStatus::Synced, "{:?}", done.status.resources);
    assert!(done.sync.is_none());
    assert_eq!(app.ctx.history("web-a20").await.unwrap().len(), history, "nothing else recorded");
}

/// flux-14: fields set with `kubectl apply --server-side --force-conflicts` (manager
/// `kubectl`, operation Apply) are drift selfHeal removes (part A), and fields Git drops
/// go although kubectl co-owned them (part B).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_14_fields_applied_server_side_by_hand_are_hand_changes() {
    let ns = "st-f14";
    let rename = |t: String| t.replace("namespace: gitops-lab", &format!("namespace: {ns}"));
    let desired = rename(case_file("flux-14", "desired.yaml"));
    kubectl(&["create", "namespace", ns]);
    let app = App::new("plumb-st-f14", "web-f14", ns, AUTO, &[("deploy.yaml", &desired)]).await;
    assert_eq!(app.settle().await.status.sync, SyncStatus::Synced);
    let tmp = app.lab.tmp.path().to_path_buf();
    kubectl_apply(&tmp, "hand-apply.yaml", &rename(case_file("flux-14", "hand-apply.yaml")), &["--force-conflicts"]);
    let env = || kubectl(&["-n", ns, "get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].env}"]);
    assert!(env().contains("DEBUG_SQL"));

    // part A: reported, set by kubectl, and reverted
    let policy = app.policy.to_str().unwrap();
    let (code, out, err) = plumb_cli(&["diff", "web-f14", "-c", policy]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("/spec/template/spec/containers/0/env/2") && out.contains("set by kubectl"), "{out}");
    let healed = app.pass(Mode::Policy).await;
    assert_eq!(healed.sync.as_ref().map(|s| s.reason.as_str()), Some("SelfHeal"), "{:?}", healed.status);
    assert!(!env().contains("DEBUG_SQL"), "{}", env());
    assert_eq!(app.pass(Mode::Policy).await.status.sync, SyncStatus::Synced);

    // part B: what Git drops goes, though kubectl had applied it too
    let dropped = desired
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("  annotations:\n    acme.example/owner-team: storefront\n", "")
        .replace("            - {name: FEATURE_X, value: \"on\"}\n", "");
    assert!(!dropped.contains("FEATURE_X") && !dropped.contains("owner-team"), "the case changed: {dropped}");
    kubectl_apply(&tmp, "hand-apply.yaml", &rename(case_file("flux-14", "hand-apply.yaml")), &["--force-conflicts"]);
    app.commit(&[("deploy.yaml", &dropped)], &[]);
    let r = app.settle().await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
    let live_env = env();
    assert!(!live_env.contains("FEATURE_X") && !live_env.contains("DEBUG_SQL"), "{live_env}");
    let annotations = kubectl(&["-n", ns, "get", "deploy", "web", "-o", "jsonpath={.metadata.annotations}"]);
    assert!(!annotations.contains("owner-team"), "{annotations}");
    let (code, out, _) = plumb_cli(&["diff", "web-f14", "-c", policy]);
    assert_eq!(code, 0, "{out}");
}

/// An object first made with `kubectl create -f` from the very manifest Git holds is
/// Synced: the fields the API server defaulted on create (and attributed to
/// `kubectl-create`) are what it would hold after plumb's apply too, so no drift line
/// names them and the pass writes nothing (resourceVersion unchanged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_made_with_kubectl_create_from_git_is_synced_and_not_rewritten() {
    let ns = "st-create";
    let manifest = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n  labels: {{plumb.dev/app: web-create}}\n  annotations: {{plumb.dev/tracking-id: \"web-create:apps/Deployment:{ns}/web\"}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers:\n        - name: web\n          image: registry.example/web:1.4.2\n          ports: [{{containerPort: 8080}}]\n          resources: {{limits: {{cpu: 500m, memory: 256Mi}}}}\n"
    );
    kubectl(&["create", "namespace", ns]);
    let app = App::new("plumb-st-create", "web-create", ns, AUTO, &[("deploy.yaml", &manifest)]).await;
    let file = app.lab.tmp.path().join("deploy.yaml");
    std::fs::write(&file, &manifest).unwrap();
    kubectl(&["create", "-f", file.to_str().unwrap()]);
    let rv = || kubectl(&["-n", ns, "get", "deploy", "web", "-o", "jsonpath={.metadata.resourceVersion}"]);
    let managers = kubectl(&[
        "-n",
        ns,
        "get",
        "deploy",
        "web",
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ]);
    assert!(managers.contains("kubectl-create"), "{managers}");
    let defaulted = kubectl(&[
        "-n",
        ns,
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.progressDeadlineSeconds} {.spec.template.spec.containers[0].imagePullPolicy} {.spec.template.spec.dnsPolicy}",
    ]);
    assert_eq!(defaulted, "600 IfNotPresent ClusterFirst", "the server defaulted them on create");
    let (before, writes) = (rv(), app.ctx.cluster.requests().1);

    let r = app.pass(Mode::Policy).await;
    let row = r.status.resources.iter().find(|x| x.object == format!("Deployment.apps/{ns}/web")).unwrap();
    assert_eq!((r.status.sync, row.sync, row.reason.as_str()), (SyncStatus::Synced, SyncStatus::Synced, ""), "{row:?}");
    assert!(r.sync.is_none(), "nothing to sync: {:?}", r.sync);
    assert_eq!(app.ctx.cluster.requests().1, writes, "the pass sends no mutating request");
    assert_eq!(rv(), before, "the object is not rewritten");
    let (code, out, err) = plumb_cli(&["diff", "web-create", "-c", app.policy.to_str().unwrap()]);
    assert_eq!(code, 0, "no differences\n{out}\n{err}");
    assert!(!out.contains("kubectl-create"), "{out}");
}

/// argocd-18: a claim of a `WaitForFirstConsumer` class in wave -1 does not hold back
/// wave 0, which holds the pod that consumes it: one sync creates both, the claim is
/// Healthy "waiting for first consumer" meanwhile, and `sync --wait` succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_18_a_claim_waiting_for_its_consumer_does_not_block_the_next_wave() {
    let ns = "st-a18";
    let desired = case_file("argocd-18", "desired.yaml").replace("namespace: gitops-lab", &format!("namespace: {ns}"));
    kubectl(&["create", "namespace", ns]);
    let app = App::new("plumb-st-a18", "web-a18", ns, AUTO, &[("storage.yaml", &desired)]).await;
    kubectl_apply(app.lab.tmp.path(), "live.yaml", &case_file("argocd-18", "live.yaml"), &[]);

    let r = app.pass(Mode::Policy).await;
    let rec = r.sync.as_ref().expect("a sync");
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    assert_eq!(
        rec.applied,
        [format!("Deployment.apps/{ns}/web"), format!("PersistentVolumeClaim/{ns}/web-data")],
        "both waves in one sync"
    );
    let claim = r.status.resources.iter().find(|x| x.object.starts_with("PersistentVolumeClaim/")).unwrap();
    assert_eq!(claim.health, HealthStatus::Healthy, "{claim:?}");
    assert!(claim.health_message.starts_with("waiting for first consumer"), "{claim:?}");
    assert!(!r.status.conditions.iter().any(|c| c.type_ == ConditionType::HealthStalled));
    kubectl(&["-n", ns, "get", "deployment", "web"]);

    // the command a person runs: no wave waits on the claim
    let (code, out, err) =
        plumb_cli(&["sync", "web-a18", "--local", "-c", app.policy.to_str().unwrap(), "--wait", "--timeout", "3m"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!out.contains("waits until wave"), "{out}");
}

/// Waiting commands stop on errors: `plumb sync --wait` on a render error exits 2 with
/// the error at once (a timeout would exit 1); after "Synced and Healthy" the stored
/// status says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_wait_stops_on_errors_and_leaves_the_status_it_printed() {
    let ns = "st-wait";
    kubectl(&["create", "namespace", ns]);
    let deploy = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: \"nginx:1.27.3\"}}]}}\n"
    );
    let app = App::new("plumb-st-wait", "web-wait", ns, "syncPolicy: {prune: true}", &[("deploy.yaml", &deploy)]).await;
    let policy = app.policy.to_str().unwrap();
    let (code, out, err) = plumb_cli(&["sync", "web-wait", "--local", "-c", policy, "--wait", "--timeout", "2m"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Synced and Healthy"), "{out}");
    let (stored, _) = app.ctx.store.load("web-wait").await.unwrap();
    assert_eq!((stored.sync, stored.health), (SyncStatus::Synced, HealthStatus::Healthy), "{stored:?}");

    // a render error: exit 2 with the error, not a wait until the timeout
    app.commit(&[("broken.yaml", "kind: [unclosed\n")], &[]);
    let (code, out, err) = plumb_cli(&["sync", "web-wait", "--local", "-c", policy, "--wait", "--timeout", "5m"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.contains("ComparisonError") && out.contains("broken.yaml"), "{out}");
    let (stored, _) = app.ctx.store.load("web-wait").await.unwrap();
    assert_eq!(stored.sync, SyncStatus::Unknown, "{stored:?}");
}

/// What the cluster removes by a rule the manifest declares is not drift: a Job with
/// `ttlSecondsAfterFinished` runs, finishes, is deleted by the TTL controller, and is not
/// created again (no second run of a migration), also by a fresh process; a changed Job
/// manifest runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_removed_by_its_ttl_after_finishing_is_not_run_again() {
    let ns = "st-ttl";
    kubectl(&["create", "namespace", ns]);
    let job = |image: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: migrate, namespace: {ns}}}\nspec:\n  ttlSecondsAfterFinished: 2\n  template:\n    spec:\n      restartPolicy: Never\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: m, image: {image}}}]\n"
        )
    };
    let cm =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}}}\ndata: {{a: b}}\n");
    let first = job("registry.example.test/migrate:1");
    let app = App::new("plumb-st-ttl", "web-ttl", ns, AUTO, &[("job.yaml", &first), ("cm.yaml", &cm)]).await;
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| s.applied.len()), Some(2), "{:?}", r.status);
    let uid = kubectl(&["-n", ns, "get", "job", "migrate", "-o", "jsonpath={.metadata.uid}"]);
    wait_for("the Job to finish and be removed by its TTL", Duration::from_secs(90), || async {
        app.pass(Mode::Policy).await; // a pass may or may not see it finished
        control_plane().kubectl(&["-n", ns, "get", "job", "migrate"]).is_err().then_some(())
    })
    .await;
    for _ in 0..2 {
        let r = app.pass(Mode::Policy).await;
        assert!(r.sync.is_none(), "not created again: {:?}", r.sync);
        assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
        let res = r.status.resources.iter().find(|x| x.object == format!("Job.batch/{ns}/migrate")).unwrap();
        assert!(res.health_message.contains("ttlSecondsAfterFinished"), "{res:?}");
    }
    assert!(control_plane().kubectl(&["-n", ns, "get", "job", "migrate"]).is_err(), "no second run");
    let (code, out, err) = plumb_cli(&["diff", "web-ttl", "-c", app.policy.to_str().unwrap()]);
    assert_eq!(code, 0, "a fresh process knows it too\n{out}\n{err}");

    // a changed manifest runs once
    app.commit(&[("job.yaml", &job("registry.example.test/migrate:2"))], &[]);
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| s.applied.clone()), Some(vec![format!("Job.batch/{ns}/migrate")]));
    let again = kubectl(&["-n", ns, "get", "job", "migrate", "-o", "jsonpath={.metadata.uid}"]);
    assert_ne!(again, uid);
}

/// argocd-21: an object another controller took over (`controller: true` owner
/// reference to a live owner) is left to it when Git drops it: listed as "controlled by
/// …", never deleted; a mere dependency link (`controller: false`) does not protect it;
/// removing the owner too leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_21_an_object_controlled_by_another_owner_is_not_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    kubectl_apply(tmp.path(), "crd.yaml", &case_file("argocd-21", "crd.yaml"), &[]);
    kubectl(&["wait", "--for=condition=Established", "crd/certificates.pki.acme.example", "--timeout=60s"]);
    for (variant, controller) in [("a", true), ("b", false)] {
        let ns = format!("st-a21{variant}");
        let app_name = format!("web-a21{variant}");
        let desired =
            case_file("argocd-21", "desired.yaml").replace("namespace: gitops-lab", &format!("namespace: {ns}"));
        kubectl(&["create", "namespace", &ns]);
        let app = App::new(&format!("plumb-st-a21{variant}"), &app_name, &ns, AUTO, &[("tls.yaml", &desired)]).await;
        assert_eq!(app.settle().await.status.sync, SyncStatus::Synced);
        let cert_uid =
            kubectl(&["-n", &ns, "get", "certificates.pki.acme.example", "web-tls", "-o", "jsonpath={.metadata.uid}"]);
        let patch = format!(
            r#"{{"metadata":{{"ownerReferences":[{{"apiVersion":"pki.acme.example/v1","kind":"Certificate","name":"web-tls","uid":"{cert_uid}","controller":{controller},"blockOwnerDeletion":true}}]}}}}"#
        );
        kubectl(&["-n", &ns, "patch", "secret", "web-tls", "--type", "merge", "-p", &patch]);
        let secret_uid =
            || control_plane().kubectl(&["-n", &ns, "get", "secret", "web-tls", "-o", "jsonpath={.metadata.uid}"]);
        let uid = secret_uid().unwrap();

        // commit 2: the placeholder Secret leaves Git, the Certificate stays
        let docs: Vec<&str> = desired.split("---").collect();
        app.commit(&[("tls.yaml", &format!("{}---{}", docs[0], docs[2]))], &[]);
        let (code, out, _) = plumb_cli(&["diff", &app_name, "-c", app.policy.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}");
        let r = app.settle().await;
        if controller {
            let line = format!(
                "Secret/{ns}/web-tls (requires pruning; controlled by Certificate.pki.acme.example/{ns}/web-tls — left to its controller)"
            );
            assert!(out.contains(&line), "{out}");
            assert_eq!(secret_uid().ok().as_deref(), Some(uid.as_str()), "not deleted");
            assert_eq!(r.status.sync, SyncStatus::Synced, "handed to its controller: {:?}", r.status.resources);
        } else {
            assert!(out.contains(&format!("Secret/{ns}/web-tls (requires pruning)")), "{out}");
            wait_for("the Secret pruned", Duration::from_secs(30), || async { secret_uid().is_err().then_some(()) })
                .await;
        }

        // commit 3: the Certificate goes too: nothing is left behind
        app.commit(&[("tls.yaml", docs[2])], &[]);
        wait_for("the Certificate and its Secret gone", Duration::from_secs(60), || async {
            let r = app.pass(Mode::Policy).await;
            let left =
                control_plane().kubectl(&["-n", &ns, "get", "secret,certificates.pki.acme.example", "-o", "name"]);
            (left.is_ok_and(|l| l.trim().is_empty()) && r.status.sync == SyncStatus::Synced).then_some(())
        })
        .await;
    }
    kubectl(&["delete", "crd", "certificates.pki.acme.example", "--wait=false"]);
}
