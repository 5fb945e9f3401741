//! Attacks on plumb's sync-safety features (prune guards, ownership, ordering, sync
//! options) against the real control plane, kept as regression tests: each doc comment
//! gives the setup and the behaviour the user guide (docs/user-guide.md) promises.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use support::*;

/// Status namespace of every application of this binary.
const STATUS_NS: &str = "plumb-breaker";

async fn app(name: &str, ns: &str, env: &str, files: &[(&str, &str)]) -> App {
    App::new(STATUS_NS, name, ns, env, files).await
}

const AUTO_NS: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}";

/// [`AUTO_NS`], with CustomResourceDefinitions among the cluster-scoped kinds allowed.
const AUTO_NS_CRDS: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}\nclusterResources: [{group: apiextensions.k8s.io, kind: CustomResourceDefinition}]";

fn cm(name: &str, ns: &str, annotations: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{{annotations}}}\ndata: {{{data}}}\n"
    )
}

fn deployment(name: &str, ns: &str, image: &str, annotations: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{{annotations}}}\nspec:\n  replicas: 3\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: main, image: {image}}}]\n"
    )
}

fn job(ns: &str, image: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {ns}\n  annotations: {{{annotations}}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: m, image: {image}}}]\n"
    )
}

fn pvc(ns: &str, mode: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: {ns}\n  annotations: {{{annotations}}}\nspec:\n  accessModes: [{mode}]\n  resources: {{requests: {{storage: 1Gi}}}}\n"
    )
}

fn jsonpath(ns: &str, what: &str, path: &str) -> String {
    let mut args = vec![];
    if !ns.is_empty() {
        args.extend(["-n", ns]);
    }
    args.extend(["get", what, "-o"]);
    let p = format!("jsonpath={path}");
    args.push(&p);
    kubectl(&args)
}

fn uid(ns: &str, what: &str) -> String {
    jsonpath(ns, what, "{.metadata.uid}")
}

fn exists(ns: &str, kind: &str, name: &str) -> bool {
    let mut args = vec![];
    if !ns.is_empty() {
        args.extend(["-n", ns]);
    }
    args.extend(["get", kind, "-o", "name"]);
    kubectl(&args).lines().any(|l| l.rsplit('/').next() == Some(name))
}

/// Guards against: an object whose `plumb.dev/sync-options` or `plumb.dev/sync-wave`
/// annotation is invalid is still written to the cluster.
///
/// Expected (user guide: a bad annotation is an error naming the annotation and the file;
/// such an object is not compared, so it must not be applied): the sync fails naming
/// the annotations, and `cfg` and `waved` keep their live content and their tracking-id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_with_a_bad_annotation_is_not_applied() {
    let ns = "brk-badann";
    let a = app(
        "badann",
        ns,
        AUTO_NS,
        &[("cfg.yaml", &cm("cfg", ns, "", "k: v1")), ("waved.yaml", &cm("waved", ns, "", "k: v1"))],
    )
    .await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    assert_eq!(jsonpath(ns, "configmap/cfg", "{.metadata.labels.plumb\\.dev/app}"), "badann");

    a.commit(
        &[
            ("cfg.yaml", &cm("cfg", ns, "plumb.dev/sync-options: Prune=flase", "k: v2")),
            ("waved.yaml", &cm("waved", ns, "plumb.dev/sync-wave: two", "k: v2")),
        ],
        &[],
    );
    let r = a.pass(Mode::Policy).await;
    assert_eq!(r.status.sync, SyncStatus::Unknown, "{:?}", r.status);
    let err = r.status.conditions.iter().find(|c| c.type_ == "ComparisonError").unwrap();
    assert!(err.message.contains("plumb.dev/sync-options") && err.message.contains("cfg.yaml"), "{err:?}");
    assert!(err.message.contains("plumb.dev/sync-wave") && err.message.contains("waved.yaml"), "{err:?}");
    let applied = r.sync.map(|s| s.applied).unwrap_or_default();
    for name in ["cfg", "waved"] {
        let what = format!("configmap/{name}");
        let live = (
            jsonpath(ns, &what, "{.data.k}"),
            jsonpath(ns, &what, "{.metadata.annotations.plumb\\.dev/tracking-id}"),
            jsonpath(ns, &what, "{.metadata.labels.plumb\\.dev/app}"),
        );
        let want = ("v1".to_string(), format!("badann:/ConfigMap:{ns}/{name}"), "badann".to_string());
        assert_eq!(live, want, "{name} (data.k, tracking-id, app label) after a sync that applied {applied:?}");
    }
}

/// Guards against: the "every tracked object would be pruned" guard only looks at whether
/// declared objects *exist*, not whether they are *tracked*.
///
/// Setup: automated sync, prune on, allowEmpty false (default); the application tracks
/// ConfigMaps `a` and `b`. One commit removes both and adds a manifest of the
/// application's own Namespace (which exists — CreateNamespace made it — but no
/// application tracks it).
///
/// Expected (user guide: never prune "by an automated sync when the render … would remove
/// every tracked object (unless allowEmpty)"): the automated sync is refused, `a` and
/// `b` stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_every_tracked_object_guard_counts_tracked_objects_only() {
    let ns = "brk-allgone";
    // the Namespace exists (CreateNamespace) before Git declares it: adopted
    let adopt =
        "syncPolicy: {automated: true, prune: true, selfHeal: true, adopt: true, syncOptions: [CreateNamespace=true]}";
    let a =
        app("allgone", ns, adopt, &[("a.yaml", &cm("a", ns, "", "k: v")), ("b.yaml", &cm("b", ns, "", "k: v"))]).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    assert!(exists(ns, "configmaps", "a") && exists(ns, "configmaps", "b"));

    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n");
    a.commit(&[("namespace.yaml", &namespace)], &["a.yaml", "b.yaml"]);
    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    assert!(
        exists(ns, "configmaps", "a") && exists(ns, "configmaps", "b"),
        "an automated sync deleted every tracked object: {rec:?}"
    );
    assert_eq!(rec.result, SyncResult::Refused, "{rec:?}");
    assert!(rec.message.contains("delete all (2)") && rec.message.contains("allowEmpty"), "{}", rec.message);
}

/// Guards against: `Force=true` deletes and re-creates a PersistentVolumeClaim — a data-loss
/// class — that even carries `Prune=false`, without any approval.
///
/// Setup: `Force=true` app-wide (`syncPolicy.syncOptions`), a PVC annotated
/// `Prune=false` (what the user guide recommends for stateful objects). Git then changes
/// its `accessModes` (immutable after creation).
///
/// Expected: a PVC's delete loses its volume's data whether it is called a prune or a
/// re-creation: the data-loss protection (approval) and `Prune=false` ("never delete
/// the object") hold, the sync fails naming the immutable field, and the claim keeps
/// its UID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_never_recreates_a_protected_object() {
    let ns = "brk-forcepvc";
    let env =
        "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true, Force=true]}";
    let a = app("forcepvc", ns, env, &[("pvc.yaml", &pvc(ns, "ReadWriteOnce", "plumb.dev/sync-options: Prune=false"))])
        .await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let before = uid(ns, "pvc/data");
    assert!(!before.is_empty());

    a.commit(&[("pvc.yaml", &pvc(ns, "ReadWriteMany", "plumb.dev/sync-options: Prune=false"))], &[]);
    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    let after = uid(ns, "pvc/data");
    assert_eq!(after, before, "the claim was deleted and re-created: {rec:?}");
    assert_ne!(rec.result, SyncResult::Succeeded, "{rec:?}");
}

/// Guards against: a preview (`plumb sync APP --dry-run`) hides a `Force=true` delete and
/// re-create.
///
/// Setup: a Job with `Force=true`; Git changes its template (immutable).
///
/// Expected: the preview says the Job would be deleted and re-created (or, without
/// Force, that the sync fails on the immutable field) — a preview must show every
/// delete it plans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_shows_a_force_recreate() {
    let ns = "brk-forcepreview";
    let a = app(
        "forcepreview",
        ns,
        AUTO_NS,
        &[("job.yaml", &job(ns, "registry.example/migrate:1", "plumb.dev/sync-options: Force=true"))],
    )
    .await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let before = uid(ns, "job/migrate");

    a.commit(&[("job.yaml", &job(ns, "registry.example/migrate:2", "plumb.dev/sync-options: Force=true"))], &[]);
    let preview = plumb::cli::preview(&a.pass(Mode::Preview { prune: true, approve: false }).await);
    assert_eq!(uid(ns, "job/migrate"), before, "a preview writes nothing");
    let line = preview.lines().find(|l| l.contains("Job.batch/brk-forcepreview/migrate")).unwrap_or("");
    assert!(
        !line.contains("ApplyOutOfSyncOnly=false") && (line.contains("re-create") || line.contains("delete")),
        "the preview does not say the Job is deleted and re-created:\n{preview}"
    );
}

fn gadget_crd() -> String {
    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.brk.example.com}\nspec:\n  group: brk.example.com\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n".into()
}

fn gadget(name: &str, ns: &str) -> String {
    format!(
        "apiVersion: brk.example.com/v1\nkind: Gadget\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{size: 1}}\n"
    )
}

/// Guards against: a custom resource created in the same sync as its CRD is never recorded
/// as a kind of the application, so when Git drops it before another pass compared it,
/// it is never pruned and the application reports Synced.
///
/// Setup: one commit with a CRD and one custom resource `g1`; one automated pass
/// creates both. The next commit removes `g1` (the CRD stays).
///
/// Expected: `g1` "requires pruning" and the automated sync (prune on) deletes it — or
/// at least the application is OutOfSync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_created_with_its_crd_is_pruned_later() {
    let ns = "brk-crdkinds";
    let a = app("crdkinds", ns, AUTO_NS_CRDS, &[("crd.yaml", &gadget_crd()), ("g1.yaml", &gadget("g1", ns))]).await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    assert!(exists(ns, "gadgets", "g1"));

    a.commit(&[], &["g1.yaml"]);
    let r = a.pass(Mode::Policy).await;
    let pruned = r.sync.as_ref().map(|s| s.pruned.clone()).unwrap_or_default();
    assert_eq!(pruned, [format!("Gadget.brk.example.com/{ns}/g1")], "{:?}", r.sync);
}

/// Guards against: a custom resource whose CRD is part of the same render, but which
/// fails its comparison (here: its namespace exists nowhere), is dropped from the
/// application's kinds, although its kind is recorded for an object of a served kind
/// that fails the same way.
///
/// Setup: a render with a CRD (never applied: compare-only pass) and one custom
/// resource of it in namespace `brk-nowhere`, which neither exists nor is declared.
///
/// Expected: the custom resource is an error naming the namespace, and its kind is among
/// the application's kinds (`status.kinds`), as for any object of the render.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_awaiting_its_crd_that_fails_keeps_its_kind() {
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.nons.brk.example.com}\nspec:\n  group: nons.brk.example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";
    let widget = "apiVersion: nons.brk.example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: brk-nowhere}\nspec: {size: 1}\n";
    let a = app(
        "crdkindsnons",
        "brk-crdkindsnons",
        "syncPolicy: {automated: false}\ndestinations: {namespaces: [brk-*]}\nclusterResources: [{group: apiextensions.k8s.io, kind: CustomResourceDefinition}]",
        &[("crd.yaml", crd), ("w1.yaml", widget)],
    )
    .await;
    let r = a.pass(Mode::CompareOnly).await;
    let w1 = r.status.resources.iter().find(|x| x.object == "Widget.nons.brk.example.com/brk-nowhere/w1").unwrap();
    assert_eq!(w1.sync, SyncStatus::Unknown, "{w1:?}");
    assert!(w1.reason.contains("namespace \"brk-nowhere\" not found"), "{w1:?}");
    let widget_kind = ("nons.brk.example.com/v1".to_string(), "Widget".to_string());
    assert!(r.status.kinds.contains(&widget_kind), "kinds: {:?}", r.status.kinds);
}

/// Guards against: with `Replace=true`, a field left to another manager by
/// `ignoreDifferences` is reset to its default by the next sync — here a selfHeal
/// pass with no change in Git at all.
///
/// Setup: `ignoreDifferences: /spec/replicas` for Deployments (an HPA owns replicas);
/// a Deployment with `Replace=true` and 3 replicas in Git; the "HPA" (field manager
/// `hpa-sim`) sets 8; one automated pass; then Git changes the image and one more pass.
///
/// Expected: replicas stay 8 (ignored fields are left to their owner: user guide "Fields
/// that must not be reverted").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_keeps_a_field_ignore_differences_leaves_to_another_manager() {
    let ns = "brk-replaceignore";
    let env = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}\nignoreDifferences: [{group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}]";
    let opts = "plumb.dev/sync-options: Replace=true";
    let a =
        app("replaceignore", ns, env, &[("web.yaml", &deployment("web", ns, "registry.example/web:1", opts))]).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    kubectl(&[
        "-n",
        ns,
        "patch",
        "deployment",
        "web",
        "--type",
        "merge",
        "--field-manager",
        "hpa-sim",
        "-p",
        "{\"spec\":{\"replicas\":8}}",
    ]);
    a.pass(Mode::Policy).await;

    a.commit(&[("web.yaml", &deployment("web", ns, "registry.example/web:2", opts))], &[]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    assert_eq!(jsonpath(ns, "deployment/web", "{.spec.template.spec.containers[0].image}"), "registry.example/web:2");
    let replicas = jsonpath(ns, "deployment/web", "{.spec.replicas}");
    assert_eq!(replicas, "8", "the ignored field was reset to {replicas}: {rec:?}");
}

/// Guards against: an object written with `Replace=true` is never Synced: every pass calls it
/// OutOfSync over the fields the API server defaulted, and selfHeal rewrites it with a
/// full replace at each attempt (until it gives up with NonConverging), logging
/// "reverted /spec/progressDeadlineSeconds 600→(absent) …" though nothing is reverted.
///
/// Setup: a Deployment with `Replace=true`; one automated pass creates it; the next
/// pass, with nothing changed in Git or in the cluster.
///
/// Expected: Synced, no sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_object_is_synced() {
    let ns = "brk-replacesynced";
    let opts = "plumb.dev/sync-options: Replace=true";
    let a = app("replacesynced", ns, AUTO_NS, &[("web.yaml", &deployment("web", ns, "registry.example/web:1", opts))])
        .await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let r = a.pass(Mode::Policy).await;
    assert!(r.sync.is_none(), "nothing changed, yet a sync: {:?}", r.sync);
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
}

/// Guards against: `Force=true` deletes an object on an error that is not an immutable field
/// at all, and the re-create then fails: the object is gone.
///
/// Setup: a ConfigMap with `Force=true`; Git adds a data key that is not a valid
/// ConfigMap key and happens to contain the word "immutable" (`immutable key`).
///
/// Expected (user guide: Force deletes and re-creates "when Git changes an immutable
/// field"): an invalid object is an error naming the key; the ConfigMap stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_ignores_a_validation_error_quoting_the_word_immutable() {
    let ns = "brk-forceword";
    let opts = "plumb.dev/sync-options: Force=true";
    let a = app("forceword", ns, AUTO_NS, &[("cfg.yaml", &cm("cfg", ns, opts, "k: v"))]).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let before = uid(ns, "configmap/cfg");

    a.commit(&[("cfg.yaml", &cm("cfg", ns, opts, "k: v, 'immutable key': x"))], &[]);
    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.as_ref().expect("the due sync is recorded as failed");
    assert!(rec.result == SyncResult::Failed && rec.applied.is_empty(), "not applied: {rec:?}");
    assert!(a.pass(Mode::Policy).await.sync.is_none(), "the same failure is recorded once");
    assert_eq!(r.status.sync, SyncStatus::Unknown);
    assert!(
        r.status
            .conditions
            .iter()
            .any(|c| c.message.contains("a valid config key") && !c.message.contains("differs at")),
        "{:?}",
        r.status.conditions
    );
    assert!(exists(ns, "configmaps", "cfg"), "Force=true deleted the ConfigMap on a validation error");
    assert_eq!(uid(ns, "configmap/cfg"), before);
}

/// Guards against: with `Validate=false` a field Git stops declaring stays live, and plumb
/// reports the application Synced.
///
/// Expected: "Synced" means equal to Git — either the field is removed, or the
/// application is OutOfSync naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_false_removes_a_field_git_dropped() {
    let ns = "brk-validate";
    let opts = "plumb.dev/sync-options: Validate=false";
    let a = app("validate", ns, AUTO_NS, &[("cfg.yaml", &cm("cfg", ns, opts, "a: '1', b: '2'"))]).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    assert_eq!(jsonpath(ns, "configmap/cfg", "{.data.b}"), "2");

    a.commit(&[("cfg.yaml", &cm("cfg", ns, opts, "a: '1'"))], &[]);
    let r = a.pass(Mode::Policy).await;
    let b = jsonpath(ns, "configmap/cfg", "{.data.b}");
    assert!(
        b.is_empty() || r.status.sync == SyncStatus::OutOfSync,
        "data.b={b:?} still live, status {:?}",
        r.status.sync
    );
    let r = a.pass(Mode::Policy).await;
    let b = jsonpath(ns, "configmap/cfg", "{.data.b}");
    assert!(
        b.is_empty() || r.status.sync == SyncStatus::OutOfSync,
        "data.b={b:?} still live, status {:?}",
        r.status.sync
    );
}

/// Guards against: the same object declared twice — once with `metadata.namespace`, once
/// without (the application's namespace) — is not "declared twice".
///
/// Expected: a render error naming both files (as for two identical declarations), so
/// nothing is applied from a contradictory commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_declared_twice_is_an_error() {
    let ns = "brk-twice";
    let without = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {k: one}\n";
    let a = app("twice", ns, AUTO_NS, &[("a.yaml", &cm("cfg", ns, "", "k: two")), ("b.yaml", without)]).await;
    let r = a.pass(Mode::Policy).await;
    assert!(!exists(ns, "configmaps", "cfg"), "a contradictory commit was applied: {:?}", r.sync);
    let err = r.status.conditions.iter().find(|c| c.type_ == "ComparisonError").unwrap();
    assert!(err.message.contains("declared twice"), "{err:?}");
}

// ---------------------------------------------------------------------------------
// Attacks plumb withstood (coverage not found in sync_order.rs, faults.rs, safety.rs).
// ---------------------------------------------------------------------------------

/// Attack: a CRD whose names clash with an existing CRD (NamesAccepted=False, never
/// Established), with a custom resource of it and a ConfigMap dropped in the same
/// commit: the sync fails naming the CRD; the custom resource is not attempted; nothing
/// is pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_that_never_becomes_established_blocks_its_resources_and_prune() {
    let ns = "brk-crdclash";
    // An existing CRD owning listKind ClashList.
    let first = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: firsts.clash.example.com}\nspec:\n  group: clash.example.com\n  scope: Namespaced\n  names: {plural: firsts, singular: first, kind: First, listKind: ClashList}\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";
    let lab_tmp = tempfile::tempdir().unwrap();
    let path = lab_tmp.path().join("first.yaml");
    std::fs::write(&path, first).unwrap();
    kubectl(&["apply", "-f", path.to_str().unwrap()]);
    kubectl(&["wait", "--for=condition=Established", "crd/firsts.clash.example.com", "--timeout=60s"]);

    let a = app(
        "crdclash",
        ns,
        AUTO_NS_CRDS,
        &[("old.yaml", &cm("old", ns, "", "k: v")), ("keep.yaml", &cm("keep", ns, "", "k: v"))],
    )
    .await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let second = first.replace("firsts", "seconds").replace("first", "second").replace("First", "Second");
    let cr = format!("apiVersion: clash.example.com/v1\nkind: Second\nmetadata: {{name: s1, namespace: {ns}}}\n");
    a.commit(&[("crd.yaml", &second), ("cr.yaml", &cr)], &["old.yaml"]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Failed, "{rec:?}");
    assert!(rec.message.contains("seconds.clash.example.com"), "{}", rec.message);
    assert!(rec.pruned.is_empty(), "{rec:?}");
    assert!(exists(ns, "configmaps", "old"), "nothing pruned");
    assert!(!rec.applied.iter().any(|o| o.contains("Second.clash.example.com")), "{rec:?}");
}

/// Attack: a cluster-scoped object (ClusterRole) moves from application A (one
/// repository) to application B (another repository); A passes first, with B's commit
/// already pushed: A hands it over (not deleted, same UID), then B adopts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_object_moved_across_repositories_is_handed_over() {
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: brk-moved-reader}\nrules: [{apiGroups: [''], resources: [configmaps], verbs: [get]}]\n";
    let one = Lab::new("moveone");
    let two = Lab::new("movetwo");
    one.repo.write("a/role.yaml", role).unwrap();
    one.repo.write("a/cm.yaml", &cm("stay", "brk-move-a", "", "k: v")).unwrap();
    one.repo.commit("a").unwrap();
    two.repo.write("b/cm.yaml", &cm("stay", "brk-move-b", "", "k: v")).unwrap();
    two.repo.commit("b").unwrap();
    let policy = one.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: {STATUS_NS}}}\nrepositories:\n  - {{name: one, url: {}, webhookSecretFile: webhook-secret}}\n  - {{name: two, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    {AUTO_NS}\n    clusterResources: [{{group: rbac.authorization.k8s.io, kind: ClusterRole}}]\napplications:\n  - {{name: move-a, repository: one, revision: main, path: a, namespace: brk-move-a, environment: e}}\n  - {{name: move-b, repository: two, revision: main, path: b, namespace: brk-move-b, environment: e}}\n",
            one.url, two.url
        ),
    );
    let ctx = context_for(&policy, &one.tmp.path().join("cache"), false).await;
    assert_eq!(ctx.run_pass("move-a", Mode::Policy, None).await.unwrap().sync.unwrap().result, SyncResult::Succeeded);
    assert_eq!(ctx.run_pass("move-b", Mode::Policy, None).await.unwrap().sync.unwrap().result, SyncResult::Succeeded);
    let before = uid("", "clusterrole/brk-moved-reader");

    two.repo.write("b/role.yaml", role).unwrap();
    two.repo.commit("b takes the role").unwrap();
    one.repo.remove("a/role.yaml").unwrap();
    one.repo.commit("a gives the role away").unwrap();
    let r = ctx.run_pass("move-a", Mode::Policy, None).await.unwrap();
    assert!(r.sync.as_ref().is_none_or(|s| s.pruned.is_empty()), "{:?}", r.sync);
    assert_eq!(uid("", "clusterrole/brk-moved-reader"), before);
    let r = ctx.run_pass("move-b", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.unwrap().result, SyncResult::Succeeded);
    assert_eq!(
        jsonpath("", "clusterrole/brk-moved-reader", "{.metadata.annotations.plumb\\.dev/tracking-id}"),
        "move-b:rbac.authorization.k8s.io/ClusterRole:/brk-moved-reader"
    );
    let r = ctx.run_pass("move-a", Mode::Policy, None).await.unwrap();
    assert!(r.sync.as_ref().is_none_or(|s| s.pruned.is_empty()), "{:?}", r.sync);
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status);
    assert_eq!(uid("", "clusterrole/brk-moved-reader"), before);
}

/// Attack: `Prune=confirm` app-wide with `Prune=false` on one object, and a
/// `plumb.dev/prune-approved` dated an hour in the future on another: neither is
/// deleted by an automated pass; `plumb prune --approve` deletes the approved-later
/// one and still keeps the `Prune=false` one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_app_wide_with_prune_false_and_future_approval() {
    let ns = "brk-confirm";
    let env = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true, Prune=confirm]}";
    let a = app(
        "confirmwide",
        ns,
        env,
        &[
            ("keep.yaml", &cm("keep", ns, "", "k: v")),
            ("never.yaml", &cm("never", ns, "plumb.dev/sync-options: Prune=false", "k: v")),
            ("future.yaml", &cm("future", ns, "", "k: v")),
        ],
    )
    .await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let later = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_hours(1)).unwrap();
    kubectl(&["-n", ns, "annotate", "configmap", "future", &format!("plumb.dev/prune-approved={later}")]);
    kubectl(&[
        "-n",
        ns,
        "annotate",
        "configmap",
        "never",
        &format!("plumb.dev/prune-approved={}", jiff::Timestamp::now()),
    ]);
    a.commit(&[], &["never.yaml", "future.yaml"]);
    let r = a.pass(Mode::Policy).await;
    assert!(r.sync.as_ref().is_none_or(|s| s.pruned.is_empty()), "{:?}", r.sync);
    assert!(exists(ns, "configmaps", "never") && exists(ns, "configmaps", "future"));

    let (code, out, err) = plumb_cli(&["prune", "confirmwide", "--config", a.policy.to_str().unwrap(), "--approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("pruned  ConfigMap/{ns}/future")), "{out}");
    assert!(!out.contains("pruned  ConfigMap/brk-confirm/never"), "{out}");
    wait_for("future gone", Duration::from_secs(30), || async { (!exists(ns, "configmaps", "future")).then_some(()) })
        .await;
    assert!(exists(ns, "configmaps", "never") && exists(ns, "configmaps", "keep"));
}
