//! More attacks kept as regression tests: one history entry per sync, guard refusals
//! recorded once per revision, `maxPrunePercent`, `Validate=false` and previews. Each
//! doc comment gives the setup and the behaviour the user guide (docs/user-guide.md) promises.
#![allow(clippy::unwrap_used)]

mod support;

use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use support::*;

const STATUS_NS: &str = "plumb-guards-more";

const AUTO_NS: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}";

async fn app(name: &str, ns: &str, env: &str, files: &[(&str, &str)]) -> App {
    App::new(STATUS_NS, name, ns, env, files).await
}

fn cm(name: &str, ns: &str, annotations: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{{annotations}}}\ndata: {{{data}}}\n"
    )
}

/// A PersistentVolumeClaim no provisioner ever binds: Pending (Progressing) for good.
fn pending_pvc(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: {ns}}}\nspec:\n  storageClassName: none-such\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n"
    )
}

fn exists(ns: &str, kind: &str, name: &str) -> bool {
    kubectl(&["-n", ns, "get", kind, "-o", "name"]).lines().any(|l| l.rsplit('/').next() == Some(name))
}

fn history(app: &str) -> Vec<plumb::status::SyncRecord> {
    let text = kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", app, "-o", "jsonpath={.status.history}"]);
    serde_json::from_str(&text).unwrap_or_default()
}

/// Guards against: the "every tracked object would be deleted" guard counts orphans that will
/// never be deleted (`Prune=false`), refuses the whole automated sync, and so a new
/// object is never applied.
///
/// Setup: automated sync with prune; the application tracks ConfigMap `a`, annotated
/// `Prune=false`. One commit replaces `a.yaml` by `b.yaml` (ConfigMap `b`).
///
/// Expected (user guide: `Prune=false` "never delete the object"; the guard is about
/// syncs that "would remove every tracked object"): nothing would be deleted, so the
/// sync applies `b` and `a` is kept ("prune skipped").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_false_orphan_does_not_trip_the_delete_everything_guard() {
    let ns = "b2-keepall";
    let a =
        app("b2keepall", ns, AUTO_NS, &[("a.yaml", &cm("a", ns, "plumb.dev/sync-options: Prune=false", "k: v"))]).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);

    a.commit(&[("b.yaml", &cm("b", ns, "", "k: v"))], &["a.yaml"]);
    let r = a.pass(Mode::Policy).await;
    assert!(exists(ns, "configmaps", "a"), "Prune=false object deleted");
    let rec = r.sync.as_ref().map(|s| (s.result, s.message.clone()));
    assert!(exists(ns, "configmaps", "b"), "new object never applied; sync {rec:?}");
}

/// Guards against: a selfHeal sync long after a `Running` sync that was never continued is
/// merged into that old sync's history entry: the original entry is lost and the
/// selfHeal sync is recorded with the old start time.
///
/// Setup: a Pending PVC (never Healthy), ConfigMaps `keep` and `old` (`PruneLast=true`).
/// Git drops `old`: the sync is `Running` (PruneLast waits for the PVC). An operator
/// deletes `old` by hand; the next pass has nothing left to do and closes the `Running`
/// entry ("finished: nothing left to do"). Later `keep` drifts and selfHeal reverts it.
///
/// Expected (user guide: one history entry per sync): two entries for the two syncs — the
/// `NewRevision` one and the `SelfHeal` one, the latter starting after the drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_self_heal_is_not_merged_into_an_abandoned_running_sync() {
    let ns = "b2-abandon";
    let a = app(
        "b2abandon",
        ns,
        AUTO_NS,
        &[
            ("pvc.yaml", &pending_pvc(ns)),
            ("keep.yaml", &cm("keep", ns, "", "k: v")),
            ("old.yaml", &cm("old", ns, "plumb.dev/sync-options: PruneLast=true", "k: v")),
        ],
    )
    .await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    a.commit(&[], &["old.yaml"]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Running, "{rec:?}");
    let running_start = rec.started_at.clone();

    kubectl(&["-n", ns, "delete", "configmap", "old"]);
    let done = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!((done.result, done.message.as_str()), (SyncResult::Succeeded, "finished: nothing left to do"));
    assert_eq!(done.started_at, running_start, "the Running sync's own entry is closed");

    let before_drift = plumb::status::now();
    kubectl(&["-n", ns, "patch", "configmap", "keep", "--type", "merge", "-p", "{\"data\":{\"k\":\"drifted\"}}"]);
    let heal = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(heal.result, SyncResult::Succeeded, "{heal:?}");
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "keep", "-o", "jsonpath={.data.k}"]), "v");
    let h = history("b2abandon");
    let summary: Vec<(String, String, SyncResult)> =
        h.iter().map(|r| (r.reason.to_string(), r.started_at.clone(), r.result)).collect();
    assert!(
        heal.started_at >= before_drift,
        "the selfHeal sync is recorded as started at {} (the abandoned Running sync began {running_start}); history {summary:?}",
        heal.started_at
    );
    assert!(
        h.iter().any(|r| r.started_at == running_start && r.reason == "NewRevision"),
        "the NewRevision sync's entry was lost: {summary:?}"
    );
}

/// Attack: a maxPrunePercent refusal is recorded once per revision, the
/// SyncError condition stays on later passes, and a manual sync still prunes.
///
/// Setup: `maxPrunePercent: 50`, three tracked ConfigMaps; Git drops two (66 %).
///
/// Expected: one Refused entry; the next pass makes no record but keeps the SyncError
/// condition and OutOfSync; `plumb sync` prunes both; afterwards Synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_recorded_once_and_a_manual_sync_still_prunes() {
    let ns = "b2-refuse";
    let env = "syncPolicy: {automated: true, prune: true, selfHeal: true, maxPrunePercent: 50, syncOptions: [CreateNamespace=true]}";
    let files: Vec<(String, String)> =
        ["a", "b", "c"].iter().map(|n| (format!("{n}.yaml"), cm(n, ns, "", "k: v"))).collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let a = app("b2refuse", ns, env, &files).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);

    a.commit(&[], &["b.yaml", "c.yaml"]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Refused, "{rec:?}");
    assert!(rec.message.contains("2 of 3") && rec.message.contains("66 %"), "{}", rec.message);
    for _ in 0..2 {
        let r = a.pass(Mode::Policy).await;
        assert!(r.sync.is_none(), "refusal recorded again: {:?}", r.sync);
        assert_eq!(r.status.sync, SyncStatus::OutOfSync);
        assert!(
            r.status.conditions.iter().any(|c| c.type_ == "SyncError" && c.message == rec.message),
            "{:?}",
            r.status
        );
    }
    assert_eq!(history("b2refuse").len(), 2);

    let (code, out, err) = plumb_cli(&["sync", "b2refuse", "--local", "--config", a.policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!exists(ns, "configmaps", "b") && !exists(ns, "configmaps", "c"), "{out}");
    let r = a.pass(Mode::Policy).await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status);
    assert_eq!(history("b2refuse").len(), 3);
}

fn validate_deployment(ns: &str, env: &str, toleration_extra: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n  annotations: {{plumb.dev/sync-options: Validate=false}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      tolerations:\n        - {{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}\n        - {{key: other, operator: Exists{toleration_extra}}}\n      containers:\n        - name: main\n          image: registry.example/web:1\n          bogusField: x\n          env: [{env}]\n"
    )
}

/// Attack: Validate=false with an unknown field inside a container (a keyed list element):
/// the sync succeeds, the next pass is Synced, and an env var Git drops is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_false_strips_a_nested_unknown_field_and_removes_what_git_dropped() {
    let ns = "b2-validate";
    let both = "{name: A, value: '1'}, {name: B, value: '2'}";
    let a = app("b2validate", ns, AUTO_NS, &[("web.yaml", &validate_deployment(ns, both, ""))]).await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    let r = a.pass(Mode::Policy).await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status);

    a.commit(&[("web.yaml", &validate_deployment(ns, "{name: A, value: '1'}", ""))], &[]);
    a.pass(Mode::Policy).await;
    let env = kubectl(&[
        "-n",
        ns,
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].env[*].name}",
    ]);
    assert_eq!(env, "A");
}

/// Guards against: `Validate=false` cannot drop an unknown field in an element of an atomic
/// list (the server names it by index), so the sync fails.
///
/// Setup: a Deployment with `Validate=false` whose *second* toleration (tolerations is
/// an atomic list) carries an unknown field `bogusTol`.
///
/// Expected (user guide: with `Validate=false` "the server drops unknown fields instead of
/// refusing the object"): the field is dropped, the sync succeeds, then Synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_false_strips_an_unknown_field_in_an_atomic_list_element() {
    let ns = "b2-validateatomic";
    let a = app(
        "b2validateatomic",
        ns,
        AUTO_NS,
        &[("web.yaml", &validate_deployment(ns, "{name: A, value: '1'}", ", bogusTol: y"))],
    )
    .await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    let r = a.pass(Mode::Policy).await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status);
}

/// A preview writes nothing for an application whose namespace CreateNamespace=true
/// will create (neither the namespace nor a status). Once the namespace exists, a new
/// object the API server would reject is an error in the preview (exit 1: its create
/// is dry-run), and the sync does not apply it. (While the namespace does not exist
/// yet, nothing can validate such an object: it shows as "create".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_writes_nothing_and_reports_an_invalid_new_object() {
    let ns = "b2-previewns";
    let a = app("b2previewns", ns, AUTO_NS, &[("cfg.yaml", &cm("cfg", ns, "", "k: v"))]).await;
    let policy = a.policy.to_str().unwrap();
    let (code, out, err) = plumb_cli(&["sync", "b2previewns", "--config", policy, "--dry-run"]);
    assert!(!kubectl(&["get", "namespaces", "-o", "name"]).lines().any(|l| l == format!("namespace/{ns}")), "{out}");
    assert!(control_plane().kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", "b2previewns"]).is_err());
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("ConfigMap/{ns}/cfg")), "{out}");

    kubectl(&["create", "namespace", ns]);
    a.commit(&[("bad.yaml", &cm("bad", ns, "", "'bad key': x"))], &[]);
    let (code, out, err) = plumb_cli(&["sync", "b2previewns", "--config", policy, "--dry-run"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains(&format!("error    ConfigMap/{ns}/bad")) && out.contains("valid config key"), "{out}");
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.applied, [format!("ConfigMap/{ns}/cfg")], "the invalid object is not applied: {rec:?}");
}
