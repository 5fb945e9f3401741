//! Sync order and sync options against the real control plane: a CRD with its custom
//! resource and a Namespace with its objects in one pass (cases flux-04, flux-05),
//! sync waves and PruneLast, immutable fields and `Force=true`, `Validate=false`,
//! `Replace=true`, `PrunePropagationPolicy`, the allowEmpty guard (case argocd-07) and
//! orphaned-resource warnings.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{compare::SyncStatus, health::HealthStatus, reconcile::Mode, status::SyncResult};
use support::*;

const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/cases");

async fn app(name: &str, ns: &str, env: &str, files: &[(&str, &str)]) -> App {
    App::new("plumb-order", name, ns, env, files).await
}

const AUTO: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true}";
const AUTO_NS: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}";

fn uid(args: &[&str]) -> String {
    kubectl(&[args, &["-o", "jsonpath={.metadata.uid}"]].concat())
}

/// flux-04: a CRD, a Namespace and a custom resource of that CRD, listed CR first,
/// sync in one pass; a preview reports the custom resource "would be created" and
/// writes nothing; the prune goes the other way (Widget before CRD and Namespace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_and_its_resource_in_one_pass_flux_04() {
    let desired = std::fs::read_to_string(format!("{CASES}/flux-04/desired.yaml")).unwrap();
    let env = format!("{AUTO}\nclusterResources: [{{group: apiextensions.k8s.io, kind: CustomResourceDefinition}}]");
    let a = app("flux04", "widgets", &env, &[("all.yaml", &desired)]).await;

    let preview = plumb::cli::preview(&a.pass(Mode::Preview { prune: true, approve: false }).await);
    assert!(
        preview.contains(
            "create   Widget.demo.example.com/widgets/w1  (missing (its CustomResourceDefinition is applied first in this sync))"
        ),
        "{preview}"
    );
    let order: Vec<&str> = preview.lines().filter_map(|l| l.strip_prefix("create   ")).collect();
    assert!(
        order[0] == "Namespace/widgets" && order[1].starts_with("CustomResourceDefinition.apiextensions.k8s.io/"),
        "{preview}"
    );
    assert!(!kubectl(&["get", "crd", "-o", "name"]).contains("widgets.demo.example.com"), "a preview writes nothing");

    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    assert_eq!(rec.applied.len(), 3, "{:?}", rec.applied);
    let r = a.pass(Mode::Policy).await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
    assert_eq!(kubectl(&["-n", "widgets", "get", "widgets", "w1", "-o", "jsonpath={.spec.size}"]), "3");

    // Everything removed: a person prunes with approval (CRD and Namespace are data-loss classes).
    a.commit(&[("README.md", "nothing to deploy\n")], &["all.yaml"]);
    let (code, out, err) = plumb_cli(&["prune", "flux04", "--config", a.policy.to_str().unwrap(), "--approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let pruned: Vec<&str> = out.lines().filter_map(|l| l.trim().strip_prefix("pruned  ")).collect();
    assert_eq!(
        pruned,
        [
            "Widget.demo.example.com/widgets/w1",
            "CustomResourceDefinition.apiextensions.k8s.io/widgets.demo.example.com",
            "Namespace/widgets"
        ],
        "{out}"
    );
}

/// flux-05: objects whose Namespace is in the same commit: the preview says both
/// "would be created" without creating the Namespace; an object in a namespace that
/// is neither in the cluster nor in Git is an error naming it; the sync creates all
/// three in one pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_and_its_objects_in_one_pass_flux_05() {
    let desired = std::fs::read_to_string(format!("{CASES}/flux-05/desired.yaml")).unwrap();
    let stray = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stray, namespace: ledger-nowhere}\n";
    let env = format!("{AUTO}\ndestinations: {{namespaces: [ledger, ledger-*]}}");
    let a = app("flux05", "ledger", &env, &[("all.yaml", &desired), ("stray.yaml", stray)]).await;

    let r = a.pass(Mode::Preview { prune: true, approve: false }).await;
    let preview = plumb::cli::preview(&r);
    assert!(preview.contains("create   ConfigMap/ledger/ledger-config"), "{preview}");
    assert!(preview.contains("create   ServiceAccount/ledger/ledger-runner"), "{preview}");
    assert!(
        preview.contains("error    ConfigMap/ledger-nowhere/stray  namespace \"ledger-nowhere\" not found"),
        "{preview}"
    );
    assert_eq!(r.status.sync, SyncStatus::Unknown);
    assert!(!kubectl(&["get", "namespaces", "-o", "name"]).contains("namespace/ledger\n"), "no side effect");

    a.commit(&[], &["stray.yaml"]);
    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    assert_eq!((rec.result, rec.applied.len()), (SyncResult::Succeeded, 3), "{}", rec.message);
    assert_eq!(a.pass(Mode::Policy).await.status.sync, SyncStatus::Synced);
}

fn cm(name: &str, ns: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{{annotations}}}\ndata: {{k: v}}\n"
    )
}

fn deployment(name: &str, ns: &str, image: &str, annotations: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{{annotations}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: main, image: {image}}}]\n"
    )
}

/// Waves: wave -1 (a ConfigMap, Healthy at once) and wave 0 (a Deployment) go in the
/// first pass; wave 1 waits until the Deployment is Healthy. PruneLast: an object
/// removed from Git with `PruneLast=true` is deleted only after the changed
/// Deployment is Healthy again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_wait_for_health_and_prune_last_goes_last() {
    let ns = "order-waves";
    let first = cm("first", ns, "plumb.dev/sync-wave: \"-1\", plumb.dev/sync-options: PruneLast=true");
    let web = deployment("web", ns, "registry.example/web:1", "");
    let after = cm("after", ns, "plumb.dev/sync-wave: \"1\"");
    let a = app("waves", ns, AUTO_NS, &[("first.yaml", &first), ("web.yaml", &web), ("after.yaml", &after)]).await;

    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Running, "{}", rec.message);
    assert_eq!(rec.applied, [format!("ConfigMap/{ns}/first"), format!("Deployment.apps/{ns}/web")]);
    assert!(rec.message.contains("wave 1 waits until wave 0 is Healthy"), "{}", rec.message);
    assert!(!kubectl(&["-n", ns, "get", "configmaps", "-o", "name"]).contains("after"));

    let r = a.settle().await;
    assert_eq!((r.status.sync, r.status.health), (SyncStatus::Synced, HealthStatus::Healthy), "{:?}", r.status);
    assert!(kubectl(&["-n", ns, "get", "configmaps", "-o", "name"]).contains("after"));
    let history = a.ctx.history("waves").await.unwrap();
    assert_eq!(history.len(), 1, "one sync, one entry, however many passes: {history:?}");
    assert_eq!((history[0].result, history[0].applied.len()), (SyncResult::Succeeded, 3), "{history:?}");

    // "first" leaves Git while the Deployment rolls out: it goes once all is Healthy.
    a.commit(&[("web.yaml", &deployment("web", ns, "registry.example/web:2", ""))], &["first.yaml"]);
    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Running, "{}", rec.message);
    assert!(rec.pruned.is_empty() && rec.message.starts_with("PruneLast"), "{rec:?}");
    assert!(kubectl(&["-n", ns, "get", "configmaps", "-o", "name"]).contains("first"));
    let r = a.settle().await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status);
    let history = a.ctx.history("waves").await.unwrap();
    assert!(history.iter().any(|h| h.pruned == [format!("ConfigMap/{ns}/first")]), "{history:?}");
    assert!(!kubectl(&["-n", ns, "get", "configmaps", "-o", "name"]).contains("first"));
}

fn job(image: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: order-force\n  annotations: {{{annotations}}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: m, image: {image}}}]\n"
    )
}

/// A Job's template cannot change: the sync fails naming `spec.template` and
/// suggesting `Force=true`; with `Force=true` plumb deletes and re-creates the Job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immutable_fields_are_named_and_force_recreates() {
    let ns = "order-force";
    let a = app("force", ns, AUTO_NS, &[("job.yaml", &job("registry.example/migrate:1", ""))]).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let before = uid(&["-n", ns, "get", "job", "migrate"]);

    a.commit(&[("job.yaml", &job("registry.example/migrate:2", ""))], &[]);
    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Failed);
    assert!(
        rec.message.contains("immutable field(s) spec.template") && rec.message.contains("Force=true"),
        "{}",
        rec.message
    );
    assert_eq!(uid(&["-n", ns, "get", "job", "migrate"]), before, "nothing re-created without Force=true");

    a.commit(&[("job.yaml", &job("registry.example/migrate:2", "plumb.dev/sync-options: Force=true"))], &[]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    assert_ne!(uid(&["-n", ns, "get", "job", "migrate"]), before, "re-created");
    assert_eq!(
        kubectl(&["-n", ns, "get", "job", "migrate", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]),
        "registry.example/migrate:2"
    );
}

fn limited_job(backoff: u32, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: order-admission\n  annotations: {{{annotations}}}\nspec:\n  backoffLimit: {backoff}\n  template:\n    spec:\n      restartPolicy: Never\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: m, image: registry.example/migrate:1}}]\n"
    )
}

/// flux2#3627 class: a ValidatingAdmissionPolicy that denies changing a Job's
/// `spec.backoffLimit` with "is immutable" makes that field immutable for plumb: the
/// sync fails naming it and suggesting `Force=true`; with `Force=true` the Job is
/// deleted and created again, and the sync record and the Job's Event say `recreated`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_an_admission_policy_calls_immutable_is_recreated_with_force() {
    let ns = "order-admission";
    let a = app("force-adm", ns, AUTO_NS, &[("job.yaml", &limited_job(2, ""))]).await;
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    let before = uid(&["-n", ns, "get", "job", "migrate"]);
    kubectl_apply(&format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: order-frozen-backoff}}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules: [{{apiGroups: [batch], apiVersions: [v1], operations: [UPDATE], resources: [jobs]}}]\n  validations:\n    - expression: \"object.spec.backoffLimit == oldObject.spec.backoffLimit\"\n      message: \"spec.backoffLimit is immutable\"\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: order-frozen-backoff}}\nspec:\n  policyName: order-frozen-backoff\n  validationActions: [Deny]\n  matchResources:\n    namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}\n"
    ));
    let patch = [
        "-n",
        ns,
        "patch",
        "job",
        "migrate",
        "--dry-run=server",
        "--type=merge",
        "-p",
        r#"{"spec":{"backoffLimit":9}}"#,
    ];
    let denial = wait_for("the policy to deny", Duration::from_secs(30), || async {
        control_plane().kubectl(&patch).err().map(|e| format!("{e:#}"))
    })
    .await;
    assert!(denial.contains("denied request: spec.backoffLimit is immutable"), "{denial}");

    a.commit(&[("job.yaml", &limited_job(3, ""))], &[]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Failed, "{rec:?}");
    assert!(
        rec.message.contains(
            "immutable field(s) spec.backoffLimit (denied by ValidatingAdmissionPolicy 'order-frozen-backoff')"
        ) && rec.message.contains("Force=true"),
        "{}",
        rec.message
    );
    assert_eq!(uid(&["-n", ns, "get", "job", "migrate"]), before, "nothing re-created without Force=true");

    a.commit(&[("job.yaml", &limited_job(3, "plumb.dev/sync-options: Force=true"))], &[]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    let job = format!("Job.batch/{ns}/migrate");
    assert_eq!((rec.applied.as_slice(), rec.recreated.as_slice()), (&[job.clone()][..], &[job][..]), "{rec:?}");
    assert_ne!(uid(&["-n", ns, "get", "job", "migrate"]), before, "re-created");
    assert_eq!(kubectl(&["-n", ns, "get", "job", "migrate", "-o", "jsonpath={.spec.backoffLimit}"]), "3");
    let events = wait_for("the Recreated Event on the Job", Duration::from_secs(30), || async {
        let ev = kubectl(&["-n", ns, "get", "events", "--field-selector", "involvedObject.name=migrate", "-o", "yaml"]);
        ev.contains("reason: Recreated").then_some(ev)
    })
    .await;
    assert!(
        events.contains("recreated (deleted and created again, Force=true: immutable field(s) spec.backoffLimit"),
        "{events}"
    );
    kubectl(&["delete", "validatingadmissionpolicybinding", "order-frozen-backoff"]);
    kubectl(&["delete", "validatingadmissionpolicy", "order-frozen-backoff"]);
}

/// `Validate=false` lets the server drop an unknown field (strict validation rejects
/// it otherwise); `Replace=true` removes a field another manager added;
/// `PrunePropagationPolicy=orphan` leaves a pruned Deployment's ReplicaSet in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_replace_and_propagation_options() {
    let ns = "order-options";
    let sloppy = |opts: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sloppy\n  namespace: {ns}\n  annotations: {{{opts}}}\ndata: {{k: v}}\nextra: field\n"
        )
    };
    let replaced = cm("replaced", ns, "plumb.dev/sync-options: Replace=true");
    let web = deployment("web", ns, "registry.example/web:1", "plumb.dev/sync-options: PrunePropagationPolicy=orphan");
    let a =
        app("options", ns, AUTO_NS, &[("sloppy.yaml", &sloppy("")), ("replaced.yaml", &replaced), ("web.yaml", &web)])
            .await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Failed);
    assert!(rec.message.contains("sloppy") && rec.message.contains("extra"), "strict: {}", rec.message);

    a.commit(&[("sloppy.yaml", &sloppy("plumb.dev/sync-options: Validate=false"))], &[]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    assert_eq!(a.pass(Mode::Policy).await.status.sync, SyncStatus::Synced, "the dropped field is no drift");

    kubectl(&["-n", ns, "label", "configmap", "replaced", "added-by=hand"]);
    a.commit(&[("replaced.yaml", &replaced.replace("k: v", "k: w"))], &[]);
    assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "replaced", "-o", "jsonpath={.metadata.labels.added-by}"]), "");
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "replaced", "-o", "jsonpath={.data.k}"]), "w");

    let rs = wait_for("the ReplicaSet of web", Duration::from_secs(60), || async {
        let name =
            kubectl(&["-n", ns, "get", "replicasets", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}"]);
        (!name.is_empty()).then_some(name)
    })
    .await;
    a.commit(&[], &["web.yaml"]);
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.pruned, [format!("Deployment.apps/{ns}/web")], "{}", rec.message);
    wait_for("web gone", Duration::from_secs(60), || async {
        (!kubectl(&["-n", ns, "get", "deployments", "-o", "name"]).contains("web")).then_some(())
    })
    .await;
    assert_eq!(
        kubectl(&["-n", ns, "get", "replicaset", &rs, "-o", "jsonpath={.metadata.ownerReferences}"]),
        "",
        "orphaned, not deleted"
    );
}

/// argocd-07: the last manifest leaves Git. allowEmpty false: the automated sync is
/// skipped saying it would delete all (1) tracked objects; a person's `plumb sync
/// --prune true` deletes it. allowEmpty true: the automated sync prunes it and the
/// application ends Synced, health not Missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_empty_guard_argocd_07() {
    for (variant, allow) in [("a", false), ("b", true)] {
        let ns = format!("solo-{variant}");
        let env = format!(
            "syncPolicy: {{automated: true, prune: true, allowEmpty: {allow}, syncOptions: [CreateNamespace=true]}}"
        );
        let solo = deployment("solo", &ns, "registry.example.test/solo:3.1.0", "");
        let a = app(&format!("solo-{variant}"), &ns, &env, &[("deployment.yaml", &solo)]).await;
        assert_eq!(a.pass(Mode::Policy).await.sync.unwrap().result, SyncResult::Succeeded);
        // renamed to deployment.yaml.bak: the render succeeds with zero objects
        a.commit(&[("deployment.yaml.bak", &solo)], &["deployment.yaml"]);
        let r = a.pass(Mode::Policy).await;
        let rec = r.sync.unwrap();
        if allow {
            assert_eq!(rec.pruned, [format!("Deployment.apps/{ns}/solo")], "{}", rec.message);
            // (a foreground deletion: listed as deletion pending until its pods are gone)
            let r = wait_for("the Deployment to be gone", Duration::from_secs(60), || async {
                let r = a.pass(Mode::Policy).await;
                (r.status.sync == SyncStatus::Synced).then_some(r)
            })
            .await;
            assert_ne!(r.status.health, HealthStatus::Missing);
        } else {
            assert_eq!(rec.result, SyncResult::Refused);
            assert!(rec.message.contains("delete all (1)") && rec.message.contains("allowEmpty"), "{}", rec.message);
            assert_eq!(r.status.sync, SyncStatus::OutOfSync);
            assert!(r.status.resources[0].reason.starts_with("requires pruning"), "{:?}", r.status.resources);
            assert!(kubectl(&["-n", &ns, "get", "deployments", "-o", "name"]).contains("solo"));
            let again = a.pass(Mode::Policy).await;
            assert!(again.sync.is_none(), "a refusal is recorded once per revision");
            assert!(again.status.conditions.iter().any(|c| c.type_ == "SyncError" && c.message.contains("allowEmpty")));
            let refused =
                a.ctx.history(&a.name).await.unwrap().iter().filter(|h| h.result == SyncResult::Refused).count();
            assert_eq!(refused, 1);
            let (code, out, err) =
                plumb_cli(&["sync", &a.name, "--local", "--config", a.policy.to_str().unwrap(), "--prune", "true"]);
            assert_eq!(code, 0, "{out}\n{err}");
            assert!(out.contains(&format!("pruned  Deployment.apps/{ns}/solo")), "{out}");
        }
    }
}

/// `orphanedResources.warn`: a hand-made ConfigMap in the application's namespace is
/// reported (condition and list), never deleted; Kubernetes' own objects and ignored
/// ones are not reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_resources_are_reported_never_deleted() {
    let ns = "order-orphans";
    let env = "syncPolicy: {automated: true, prune: true, syncOptions: [CreateNamespace=true]}\norphanedResources: {warn: true, ignore: [{kind: Secret, name: 'ignored-*'}]}";
    let a = app("orphans", ns, env, &[("cm.yaml", &cm("declared", ns, ""))]).await;
    a.pass(Mode::Policy).await;
    kubectl(&["-n", ns, "create", "configmap", "hand-made", "--from-literal=a=b"]);
    kubectl(&["-n", ns, "create", "secret", "generic", "ignored-token", "--from-literal=a=b"]);
    let r = a.pass(Mode::Policy).await;
    assert_eq!(r.status.orphaned, [format!("ConfigMap/{ns}/hand-made")]);
    let c = r.status.conditions.iter().find(|c| c.type_ == "OrphanedResourceWarning").expect("warning");
    assert!(c.message.contains("1 object(s)") && c.message.contains("hand-made"), "{c:?}");
    assert_eq!(r.status.sync, SyncStatus::Synced, "an orphan is not drift");
    assert!(kubectl(&["-n", ns, "get", "configmaps", "-o", "name"]).contains("hand-made"));
}

/// Issue 31, "A fix must not wait behind a broken revision": a sync waiting for an
/// unhealthy wave is replaced by the sync of a new commit (Flux's
/// `CancelHealthCheckOnNewRevision`): the old one is recorded `Superseded` with what it
/// waited for, the new one runs at once and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_commit_supersedes_a_sync_stuck_on_an_unhealthy_wave() {
    let ns = "order-supersede";
    // a node selector no node matches: its pod is never scheduled
    let stuck = deployment("web", ns, "registry.example/web:1", "")
        .replace("      tolerations:", "      nodeSelector: {plumb.dev/nowhere: \"true\"}\n      tolerations:");
    let after = cm("after", ns, "plumb.dev/sync-wave: \"1\"");
    let a = app("supersede", ns, AUTO_NS, &[("web.yaml", &stuck), ("after.yaml", &after)]).await;
    let first = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(first.result, SyncResult::Running, "{}", first.message);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!((still.result, still.started_at.as_str()), (SyncResult::Running, first.started_at.as_str()));
    assert!(still.message.contains("wave 1 waits until wave 0 is Healthy"), "{}", still.message);

    a.commit(&[("web.yaml", &deployment("web", ns, "registry.example/web:2", ""))], &[]);
    let next = a.pass(Mode::Policy).await.sync.unwrap();
    assert_ne!(next.revision, first.revision, "the new commit's sync starts at once");
    let history = a.ctx.history(&a.name).await.unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    let old = &history[1];
    assert_eq!((old.revision.as_str(), old.result), (first.revision.as_str(), SyncResult::Superseded), "{history:?}");
    assert!(old.message.contains("wave 1 waits until wave 0 is Healthy"), "{}", old.message);
    let r = a.settle().await;
    assert_eq!((r.status.sync, r.status.health), (SyncStatus::Synced, HealthStatus::Healthy), "{:?}", r.status);
    let history = a.ctx.history(&a.name).await.unwrap();
    assert_eq!((history[0].result, history[1].result), (SyncResult::Succeeded, SyncResult::Superseded), "{history:?}");
    let events = kubectl(&["-n", "plumb-order", "get", "events", "-o", "custom-columns=R:.reason,M:.message"]);
    assert!(events.lines().any(|l| l.starts_with("SyncSuperseded") && l.contains("superseded by")), "{events}");
}
