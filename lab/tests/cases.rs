//! Shared cases (`../shared/cases`: bug reports of Argo CD and Flux turned into inputs)
//! run against the real control plane. Each test names its case; the expected values
//! come from the case's `expected.md`. Namespaces are renamed per test so cases that
//! share a namespace name don't collide.
#![allow(clippy::unwrap_used)]

mod support;

use std::{path::PathBuf, sync::Arc};

use plumb::{
    cluster::Cluster,
    compare::SyncStatus,
    metrics::Metrics,
    reconcile::{Context, Mode, PassReport},
};
use support::*;

fn case_file(case: &str, file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/cases").join(case).join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A repository with `files` under `app/`, and a Context (no server, no watches) for an
/// application `app` in `namespace` with the given environment policy (YAML flow map
/// fields of an environment entry).
async fn setup(name: &str, namespace: &str, files: &[(&str, String)], env: &str) -> (Lab, Arc<Context>) {
    let lab = Lab::new(name);
    for (f, text) in files {
        lab.repo.write(&format!("app/{f}"), text).unwrap();
    }
    lab.repo.commit(&format!("{name}: initial")).unwrap();
    let policy = lab.app_policy("plumb-cases", name, namespace, env);
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    kubectl(&["create", "namespace", namespace]);
    (lab, ctx)
}

async fn pass(ctx: &Context, app: &str) -> PassReport {
    ctx.run_pass(app, Mode::Policy, None).await.unwrap()
}

const AUTO: &str = "    syncPolicy: {automated: true, prune: true, selfHeal: true}";

/// flux-10's desired.yaml requests 1.2 CPU under a 1 CPU limit, which a real API server
/// rejects (requests must not exceed limits); the tests raise the limit to `2000m`,
/// another non-canonical form (stored as `"2"`).
fn flux_10_desired(ns: &str) -> String {
    let text = case_file("flux-10", "desired.yaml").replace("namespace: shop", &format!("namespace: {ns}"));
    assert!(text.contains(r#"limits: {cpu: "1000m""#), "the case changed; revisit this test");
    text.replace(r#"limits: {cpu: "1000m""#, r#"limits: {cpu: "2000m""#)
}

/// argocd-01 (quantities in non-canonical forms) and flux-10 (quantities + defaulted
/// fields): after the first sync the comparison is Synced and later passes write nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_01_and_flux_10_equivalent_quantities_and_defaults_are_not_drift() {
    for (case, app, ns, deploy) in
        [("argocd-01", "case-argocd-01", "case-a01", "quota-demo"), ("flux-10", "case-flux-10", "case-f10", "pricing")]
    {
        let desired = if case == "flux-10" {
            flux_10_desired(ns)
        } else {
            case_file(case, "desired.yaml").replace("namespace: demo-a", &format!("namespace: {ns}"))
        };
        let (_lab, ctx) = setup(app, ns, &[("desired.yaml", desired)], AUTO).await;
        let first = pass(&ctx, app).await;
        assert!(first.sync.as_ref().is_some_and(|r| r.applied.len() == 1), "{case}: created: {:?}", first.status);
        // (the Deployment controller keeps writing status, so resourceVersion moves; the
        // spec's generation and plumb's own write count must not)
        let generation = || kubectl(&["-n", ns, "get", "deployment", deploy, "-o", "jsonpath={.metadata.generation}"]);
        let (g, writes) = (generation(), ctx.cluster.requests().1);
        for i in 0..3 {
            let r = pass(&ctx, app).await;
            assert_eq!(r.status.sync, SyncStatus::Synced, "{case} pass {i}: {:?}", r.status.resources);
            assert!(r.sync.is_none(), "{case}: no second apply for the same revision");
        }
        assert_eq!((generation(), ctx.cluster.requests().1), (g, writes), "{case}: no write after the first sync");
    }
}

/// flux-10 negative controls: `1100m` vs Git's `1.2` is drift, and so is
/// terminationGracePeriodSeconds 10 live vs 30 in Git.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_10_negative_controls_are_drift() {
    let ns = "case-f10n";
    let desired = flux_10_desired(ns);
    let (lab, ctx) =
        setup("case-flux-10n", ns, &[("desired.yaml", desired.clone())], "    syncPolicy: {automated: false}").await;
    let _ = ctx.run_pass("case-flux-10n", Mode::Manual { prune: false, approve: false }, None).await.unwrap();
    kubectl(&[
        "-n",
        ns,
        "patch",
        "deployment",
        "pricing",
        "--field-manager=kubectl-edit",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/resources/requests/cpu","value":"1100m"}]"#,
    ]);
    let r = pass(&ctx, "case-flux-10n").await;
    assert_eq!(r.status.sync, SyncStatus::OutOfSync);
    let d = r.diffs().into_iter().find(|d| d.object.starts_with("Deployment")).unwrap();
    assert_eq!(
        d.differences.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(),
        ["/spec/template/spec/containers/0/resources/requests/cpu"]
    );
    assert_eq!(d.differences[0].manager.as_ref().map(|m| m.manager.as_str()), Some("kubectl-edit"));

    // Git now sets terminationGracePeriodSeconds: 30 while live has the default.
    let _ = ctx.run_pass("case-flux-10n", Mode::Manual { prune: false, approve: false }, None).await.unwrap();
    kubectl(&[
        "-n",
        ns,
        "patch",
        "deployment",
        "pricing",
        "--field-manager=kubectl-edit",
        "--type=merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":10}}}}"#,
    ]);
    lab.repo
        .write(
            "app/desired.yaml",
            &desired.replace("      containers:", "      terminationGracePeriodSeconds: 30\n      containers:"),
        )
        .unwrap();
    lab.repo.commit("grace 30").unwrap();
    let r = pass(&ctx, "case-flux-10n").await;
    let d = r.diffs().into_iter().find(|d| d.object.starts_with("Deployment")).unwrap();
    assert_eq!(
        d.differences.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(),
        ["/spec/template/spec/terminationGracePeriodSeconds"]
    );
    assert_eq!((d.differences[0].live.clone(), d.differences[0].desired.clone()), (Some(10.into()), Some(30.into())));
}

/// argocd-04 and flux-02 (B): an HPA owns replicas; with `/spec/replicas` ignored, a new
/// image is applied and replicas stay where the other manager put them; creation used
/// Git's value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_04_ignored_replicas_stay_where_the_hpa_put_them() {
    let ns = "case-a04";
    let desired = case_file("argocd-04", "desired.yaml").replace("namespace: shop", &format!("namespace: {ns}"));
    let old = desired.replace("api:2.3.1", "api:2.3.0");
    let env = format!(
        "{AUTO}\n    ignoreDifferences:\n      - {{group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}}"
    );
    let (lab, ctx) = setup("case-argocd-04", ns, &[("desired.yaml", old)], &env).await;
    pass(&ctx, "case-argocd-04").await;
    let replicas = || kubectl(&["-n", ns, "get", "deployment", "api", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(replicas(), "2", "creation: Git's value");
    // the HPA (kube-controller-manager through the scale subresource) scales to 6
    kubectl(&["-n", ns, "scale", "deployment", "api", "--replicas=6"]);
    let r = pass(&ctx, "case-argocd-04").await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "replica changes alone are not drift: {:?}", r.status.resources);
    assert!(r.sync.is_none(), "selfHeal never triggers on replica changes alone");
    lab.repo.write("app/desired.yaml", &desired).unwrap();
    lab.repo.commit("api 2.3.1").unwrap();
    let r = pass(&ctx, "case-argocd-04").await;
    let d = r.diffs().into_iter().find(|d| d.object.starts_with("Deployment")).unwrap();
    assert_eq!(
        d.differences.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(),
        ["/spec/template/spec/containers/0/image"],
        "exactly one path"
    );
    assert!(r.sync.is_some_and(|s| s.result == plumb::status::SyncResult::Succeeded));
    assert_eq!(
        kubectl(&["-n", ns, "get", "deployment", "api", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]),
        "registry.example.test/api:2.3.1"
    );
    assert_eq!(replicas(), "6", "the sync left replicas where the HPA put them");
    // the check behind the "rule matches no kind" warning
    assert!(ctx.cluster.serves_kind_like(Some("apps"), "Deployment").await);
    assert!(ctx.cluster.serves_kind_like(None, "Deploy*").await);
    assert!(!ctx.cluster.serves_kind_like(Some("app"), "Deployment").await, "a typo in the group");
    assert_eq!(pass(&ctx, "case-argocd-04").await.status.sync, SyncStatus::Synced);
}

/// argocd-03: a controller-injected caBundle. plumb's comparison is server-side-apply
/// aware: a field Git does not declare and another manager owns is never drift, with or
/// without a rule (checked first). When Git *does* declare a caBundle and a certificate
/// controller rewrites it, the jq rule makes it Synced and the apply leaves the field to
/// the controller; without the rule exactly one path differs (the case's negative test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_03_injected_ca_bundle_is_ignored_by_jq_rule() {
    let ns = "case-a03";
    // Keep the webhook harmless on the shared control plane: it must never intercept the
    // other tests' pods.
    let base = case_file("argocd-03", "desired.yaml")
        .replace("sidecar-injector.example.test\n", "case-a03.example.test\n")
        .replace("    sideEffects: None\n", "    sideEffects: None\n    failurePolicy: Ignore\n    namespaceSelector: {matchLabels: {plumb-case: never}}\n");
    let get_rv = || {
        kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            "case-a03.example.test",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    let inject = |v: &str| {
        kubectl(&[
            "patch",
            "mutatingwebhookconfiguration",
            "case-a03.example.test",
            "--field-manager=cert-injector",
            "--type=json",
            "-p",
            &format!(r#"[{{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"{v}"}}]"#),
        ]);
    };
    let rule = "    ignoreDifferences:\n      - {group: admissionregistration.k8s.io, kind: MutatingWebhookConfiguration, jqPathExpressions: ['.webhooks[]?.clientConfig.caBundle']}";
    let (lab, ctx) = setup(
        "case-argocd-03",
        ns,
        &[("hook.yaml", base.clone())],
        &format!("{AUTO}\n{rule}\n    clusterResources: [{{group: admissionregistration.k8s.io, kind: MutatingWebhookConfiguration}}]"),
    )
    .await;
    pass(&ctx, "case-argocd-03").await;
    inject("Y2EtYnVuZGxl");
    let rv = get_rv();
    let r = pass(&ctx, "case-argocd-03").await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
    assert!(r.sync.is_none());
    assert_eq!(get_rv(), rv, "no write");

    // Git declares a caBundle; the controller keeps rewriting it.
    let with_bundle =
        base.replace("        path: /inject\n", "        path: /inject\n      caBundle: Z2l0LWJ1bmRsZQ==\n");
    assert_ne!(with_bundle, base);
    lab.repo.write("app/hook.yaml", &with_bundle).unwrap();
    lab.repo.commit("declare a caBundle").unwrap();
    pass(&ctx, "case-argocd-03").await;
    inject("aW5qZWN0ZWQ=");
    let rv = get_rv();
    let r = pass(&ctx, "case-argocd-03").await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
    assert!(r.sync.is_none(), "ApplyOutOfSyncOnly: nothing is sent");
    assert_eq!(get_rv(), rv);
    assert_eq!(
        kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            "case-a03.example.test",
            "-o",
            "jsonpath={.webhooks[0].clientConfig.caBundle}"
        ]),
        "aW5qZWN0ZWQ="
    );

    // negative test: the same application without the rule
    let policy = lab.tmp.path().join("no-rule.yaml");
    let text = std::fs::read_to_string(lab.tmp.path().join("policy.yaml")).unwrap().replace(&format!("\n{rule}"), "");
    assert!(!text.contains("jqPathExpressions"));
    std::fs::write(&policy, text).unwrap();
    let config = plumb::config::load(&policy).unwrap_or_else(|e| panic!("{e}"));
    let cluster = Cluster::new(control_plane().client().await.unwrap()).await.unwrap();
    let ctx2 = Context::new(cluster, Arc::new(config), lab.tmp.path().join("cache2"), Arc::new(Metrics::default()));
    let r = ctx2.run_pass("case-argocd-03", Mode::CompareOnly, None).await.unwrap();
    let d = r.diffs().into_iter().find(|d| d.object.contains("MutatingWebhookConfiguration")).unwrap();
    assert_eq!(
        d.differences.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(),
        ["/webhooks/0/clientConfig/caBundle"]
    );
    assert_eq!(d.differences[0].manager.as_ref().map(|m| m.manager.as_str()), Some("cert-injector"));
}

/// argocd-10: a tracking-id copied onto another object makes nothing ours; a
/// cluster-scoped object whose id carries a namespace is still ours; objects of another
/// installation are never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_10_tracking_ids_must_name_the_object_itself() {
    let ns = "case-a10";
    let app = "shop-app";
    let rename =
        |s: String| s.replace("namespace: shop", &format!("namespace: {ns}")).replace("shop-reader", "case-a10-reader");
    let desired = rename(case_file("argocd-10", "desired.yaml"));
    // this plumb is installation cluster-east-1 (the Service and ClusterRole are its own)
    let env = format!("{AUTO}\n    clusterResources: [{{group: rbac.authorization.k8s.io, kind: ClusterRole}}]");
    let (_lab, _) = setup(app, ns, &[("desired.yaml", desired)], &env).await;
    let policy = _lab.tmp.path().join("policy.yaml");
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, text.replace("settings: {", "settings: {installationId: cluster-east-1, ")).unwrap();
    let ctx = context_for(&policy, &_lab.tmp.path().join("cache"), false).await;
    // live objects as in live.yaml, with plumb's annotation names
    let live = rename(case_file("argocd-10", "live.yaml"))
        .replace("argocd.argoproj.io/tracking-id", "plumb.dev/tracking-id")
        .replace("argocd.argoproj.io/installation-id", "plumb.dev/installation-id")
        .replace(":shop/", &format!(":{ns}/"))
        .replace("clusterIP: 10.96.14.7", "")
        .replace("  annotations:", "  labels: {plumb.dev/app: shop-app}\n  annotations:");
    let f = _lab.tmp.path().join("live.yaml");
    std::fs::write(&f, live).unwrap();
    kubectl(&["apply", "--server-side", "--field-manager=argocd-controller", "-f", f.to_str().unwrap()]);
    let r = pass(&ctx, app).await;
    let objects: Vec<(&str, SyncStatus, &str)> =
        r.status.resources.iter().map(|x| (x.object.as_str(), x.sync, x.reason.as_str())).collect();
    assert!(!objects.iter().any(|o| o.0.contains("ConfigMap")), "a copied id makes nothing ours: {objects:?}");
    assert!(!objects.iter().any(|o| o.0.contains("Secret")), "another installation's object: {objects:?}");
    assert!(
        kubectl(&["-n", ns, "get", "configmap", "frontend-endpoints-cache", "-o", "name"])
            .contains("frontend-endpoints-cache"),
        "never pruned"
    );
    assert!(
        kubectl(&["-n", ns, "get", "secret", "legacy-token", "-o", "name"]).contains("legacy-token"),
        "never pruned"
    );
    let r = pass(&ctx, app).await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
    assert_eq!(r.status.resources.len(), 2, "Service and ClusterRole: {:?}", r.status.resources);
}

/// argocd-06: a field the server does not know. Strict field validation turns it into a
/// failed sync naming the field (never "succeeded but still OutOfSync", never a loop);
/// the next commit without it syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_06_unknown_field_fails_the_sync_naming_the_field() {
    let ns = "case-a06";
    let desired = case_file("argocd-06", "desired.yaml").replace("namespace: demo-f", &format!("namespace: {ns}"));
    assert!(desired.contains("randomField"));
    let (lab, ctx) = setup("case-argocd-06", ns, &[("desired.yaml", desired.clone())], AUTO).await;
    let r = pass(&ctx, "case-argocd-06").await;
    let rec = r.sync.expect("a sync was attempted");
    assert_eq!(rec.result, plumb::status::SyncResult::Failed);
    assert!(rec.message.contains("randomField"), "{}", rec.message);
    assert!(r.status.conditions.iter().any(|c| c.type_ == "SyncError" && c.message.contains("randomField")));
    assert_eq!(r.status.synced_revision, "", "nothing runs from R1");
    lab.repo.write("app/desired.yaml", &desired.replace("          randomField: randomValue\n", "")).unwrap();
    let r2 = lab.repo.commit("drop randomField").unwrap();
    let r = pass(&ctx, "case-argocd-06").await;
    assert!(r.sync.is_some_and(|s| s.result == plumb::status::SyncResult::Succeeded));
    let r = pass(&ctx, "case-argocd-06").await;
    assert_eq!((r.status.sync, r.status.synced_revision.as_str()), (SyncStatus::Synced, r2.as_str()));
}

fn flux_02_desired(ns: &str) -> String {
    // The case's HorizontalPodAutoscaler is left out: the test plays the HPA itself
    // (kube-controller-manager writing replicas through the scale subresource), so the
    // outcome does not depend on metrics the lab cannot serve.
    let text = case_file("flux-02", "desired.yaml").replace("namespace: shop", &format!("namespace: {ns}"));
    text.split("\n---").next().unwrap().to_string()
}

/// Sets replicas to 5 through the scale subresource as kube-controller-manager, whenever
/// they are not 5, until `stop` (like an HPA that disagrees with Git).
async fn hpa(ns: &'static str, stop: tokio_util::sync::CancellationToken) {
    use k8s_openapi::api::apps::v1::Deployment;
    let client = control_plane().client().await.unwrap();
    let api: kube::Api<Deployment> = kube::Api::namespaced(client, ns);
    let pp = kube::api::PatchParams { field_manager: Some("kube-controller-manager".into()), ..Default::default() };
    while !stop.is_cancelled() {
        if let Ok(d) = api.get("cart-api").await
            && d.spec.and_then(|s| s.replicas) != Some(5)
        {
            let _ = api
                .patch_scale("cart-api", &pp, &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 5}})))
                .await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// flux-02 variant A: no ignore rule, an HPA keeps setting replicas. selfHeal reverts
/// once, sees the same drift come straight back, stops, and says which field, which
/// manager, and which ignore rule would end the fight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_02_a_self_heal_stops_fighting_another_controller() {
    let ns = "case-f02a";
    let (_lab, ctx) = setup("case-flux-02a", ns, &[("desired.yaml", flux_02_desired(ns))], AUTO).await;
    pass(&ctx, "case-flux-02a").await;
    let stop = tokio_util::sync::CancellationToken::new();
    let fighter = tokio::spawn(hpa(ns, stop.clone()));
    wait_for("the HPA scaled to 5", std::time::Duration::from_secs(20), || async {
        (kubectl(&["-n", ns, "get", "deployment", "cart-api", "-o", "jsonpath={.spec.replicas}"]) == "5").then_some(())
    })
    .await;
    let mut heals = 0;
    let mut stuck = None;
    for _ in 0..10 {
        let r = pass(&ctx, "case-flux-02a").await;
        heals += usize::from(r.sync.is_some());
        if let Some(c) = r.status.conditions.iter().find(|c| c.type_ == "NonConverging") {
            stuck = Some(c.message.clone());
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    stop.cancel();
    fighter.await.unwrap();
    let stuck = stuck.expect("a NonConverging condition");
    assert!(
        stuck.contains("/spec/replicas")
            && stuck.contains("kube-controller-manager")
            && stuck.contains("ignoreDifferences"),
        "{stuck}"
    );
    assert_eq!(heals, 1, "one revert, then plumb stops fighting");
}

/// flux-02 variants B and C: with `/spec/replicas` ignored (B) or removed from Git (C),
/// the other manager's 5 stays, the app is Synced, and no apply conflicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_02_b_and_c_replicas_left_to_the_hpa() {
    let ns = "case-f02b";
    let env = format!(
        "{AUTO}\n    ignoreDifferences:\n      - {{group: apps, kind: Deployment, name: cart-api, jsonPointers: [/spec/replicas]}}"
    );
    let (lab, ctx) = setup("case-flux-02b", ns, &[("desired.yaml", flux_02_desired(ns))], &env).await;
    pass(&ctx, "case-flux-02b").await;
    kubectl(&["-n", ns, "scale", "deployment", "cart-api", "--replicas=5"]);
    // (the Deployment controller writes status, so compare plumb's writes, not resourceVersion)
    let writes = ctx.cluster.requests().1;
    let r = pass(&ctx, "case-flux-02b").await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "B: {:?}", r.status.resources);
    assert_eq!(ctx.cluster.requests().1, writes, "B: no PATCH");
    // C: Git drops replicas (and the rule stays harmless)
    lab.repo.write("app/desired.yaml", &flux_02_desired(ns).replace("  replicas: 2\n", "")).unwrap();
    lab.repo.commit("replicas belong to the HPA").unwrap();
    let r = pass(&ctx, "case-flux-02b").await;
    assert!(r.sync.as_ref().is_none_or(|s| s.result == plumb::status::SyncResult::Succeeded), "C: {:?}", r.sync);
    assert_eq!(
        kubectl(&["-n", ns, "get", "deployment", "cart-api", "-o", "jsonpath={.spec.replicas}"]),
        "5",
        "C: value stays"
    );
    assert_eq!(pass(&ctx, "case-flux-02b").await.status.sync, SyncStatus::Synced);
}

/// flux-01: an object made with `kubectl apply` (client-side) and touched by
/// `kubectl edit`: plumb takes the client-side managers' fields over, so the field and
/// label Git does not declare are really removed; the next pass writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_01_fields_of_client_side_apply_are_taken_over() {
    let ns = "case-f01";
    let desired = case_file("flux-01", "desired.yaml").replace("namespace: shop", &format!("namespace: {ns}"));
    // the object exists before plumb: taken over only when adoption is asked for
    let adopt = "    syncPolicy: {automated: true, prune: true, selfHeal: true, adopt: true}";
    let (lab, ctx) = setup("case-flux-01", ns, &[("desired.yaml", desired)], adopt).await;
    let old = lab.tmp.path().join("old.yaml");
    std::fs::write(&old, format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cart-settings\n  namespace: {ns}\ndata:\n  mode: fast\n  legacy-flag: \"on\"\n")).unwrap();
    kubectl(&["apply", "-f", old.to_str().unwrap()]);
    kubectl(&[
        "-n",
        ns,
        "patch",
        "configmap",
        "cart-settings",
        "--field-manager=kubectl-edit",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"hotfix":"true"}}}"#,
    ]);

    let r = ctx.run_pass("case-flux-01", Mode::CompareOnly, None).await.unwrap();
    let d = r.diffs().into_iter().find(|d| d.object.starts_with("ConfigMap")).unwrap();
    let paths: Vec<&str> = d.differences.iter().map(|d| d.path.as_str()).collect();
    assert!(paths.contains(&"/data/legacy-flag") && paths.contains(&"/metadata/labels/hotfix"), "{paths:?}");
    let r = pass(&ctx, "case-flux-01").await;
    assert!(r.sync.is_some_and(|s| s.result == plumb::status::SyncResult::Succeeded));
    let live: serde_json::Value = serde_json::from_str(&kubectl(&[
        "-n",
        ns,
        "get",
        "configmap",
        "cart-settings",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(live["data"], serde_json::json!({"mode": "fast"}));
    assert!(live["metadata"]["labels"].get("hotfix").is_none(), "{}", live["metadata"]);
    assert!(
        live["metadata"]["annotations"].get("kubectl.kubernetes.io/last-applied-configuration").is_none(),
        "{}",
        live["metadata"]
    );
    let managers: Vec<&str> =
        live["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|e| e["manager"].as_str()).collect();
    assert_eq!(managers, ["plumb"], "only plumb's entry remains");
    let writes = ctx.cluster.requests().1;
    let r = pass(&ctx, "case-flux-01").await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.resources);
    assert_eq!(ctx.cluster.requests().1, writes, "the second pass sends no mutating request");
}
