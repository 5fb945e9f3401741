use super::*;

fn docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).expect("yaml").into_iter().filter(|d| !d.is_null()).collect()
}

/// The policy validates as plumb loads it (no secret files named).
fn validates(imported: &Imported) -> crate::config::Config {
    let text = serde_saphyr::to_string(&imported.policy).expect("yaml");
    crate::config::load_str(&text, std::path::Path::new("imported.yaml"), std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn the_argo_cd_example_becomes_a_policy_of_the_same_applications() {
    let imported = import(&docs(include_str!("../../config/examples/argocd/applications.yaml")));
    let config = validates(&imported);
    assert_eq!(imported.applications, 2);
    assert_eq!(config.repositories.len(), 1);
    assert_eq!(config.repositories[0].url.value, "https://git.example.com/acme/fleet.git");
    let app = |n: &str| config.applications.iter().find(|a| a.name.value == n).expect(n);
    let (web, prod) = (app("web"), app("web-prod"));
    assert_eq!(
        (web.path.value.as_str(), web.namespace.value.as_str(), web.revision.value.as_str()),
        ("apps/web", "gitops-lab", "main")
    );
    assert_eq!((prod.path.value.as_str(), prod.namespace.value.as_str()), ("kustomize/web/overlays/prod", "web-prod"));
    assert_eq!(web.environment.value, prod.environment.value, "one project, one sync policy: one environment");
    let env = &config.environments[0];
    assert_eq!(env.name.value, "lab");
    let p = &env.sync_policy;
    assert!(p.automated && p.prune && p.self_heal && !p.allow_empty, "{p:?}");
    assert_eq!(p.sync_options, ["CreateNamespace=true"], "ServerSideApply is plumb's only way");
    assert_eq!(
        imported.notes,
        [
            "Application/argocd/web: syncPolicy.retry not mapped (plumb retries with its own backoff)",
            "Application/argocd/web-prod: syncPolicy.retry not mapped (plumb retries with its own backoff)",
            "AppProject/argocd/lab: spec.sourceRepos not mapped (plumb: see environments in docs/reference.md)",
        ]
    );
}

#[test]
fn the_flux_example_becomes_a_policy_of_the_same_applications() {
    let imported = import(&docs(include_str!("../../config/examples/flux/fleet.yaml")));
    let config = validates(&imported);
    assert_eq!((imported.applications, config.repositories.len()), (2, 1));
    let app = |n: &str| config.applications.iter().find(|a| a.name.value == n).expect(n);
    let (web, prod) = (app("web"), app("web-prod"));
    assert_eq!((web.path.value.as_str(), web.namespace.value.as_str()), ("apps/web", "gitops-lab"));
    assert_eq!((prod.path.value.as_str(), prod.namespace.value.as_str()), ("kustomize/web/overlays/prod", "web-prod"));
    assert_eq!(prod.depends_on.iter().map(|d| d.value.as_str()).collect::<Vec<_>>(), ["web"]);
    let env = &config.environments[0];
    assert!(env.sync_policy.automated && env.sync_policy.prune && env.sync_policy.self_heal);
    assert_eq!(env.reconcile_interval, Some(std::time::Duration::from_secs(180)));
    assert!(imported.notes.is_empty(), "{:?}", imported.notes);
}

#[test]
fn what_has_no_plumb_meaning_is_noted_not_dropped() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: Charts_App, namespace: argocd}
spec:
  project: default
  sources:
    - {repoURL: https://charts.example.com, chart: web, targetRevision: 1.2.3}
    - {repoURL: https://git.example.com/acme/values.git, ref: values}
  destination: {name: other-cluster, namespace: web}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: helm-in-git, namespace: argocd}
spec:
  source:
    repoURL: git@git.example.com:acme/fleet.git
    path: charts/web
    helm:
      releaseName: web
      valueFiles: [values-prod.yaml]
      values: |
        replicas: 3
    kustomize: {images: ["nginx=registry.example.com/nginx:1.27@sha256:abc", "redis:7"]}
  destination: {namespace: web}
  syncPolicy: {syncOptions: [SkipDryRunOnMissingResource=true, Prune=false]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: stray, namespace: x}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: orphan, namespace: flux-system}
spec: {path: ./x, sourceRef: {kind: GitRepository, name: missing}, postBuild: {substitute: {a: b}}}
"#;
    let imported = import(&docs(text));
    let config = validates(&imported);
    assert_eq!(imported.applications, 1, "{:#?}", imported.policy);
    let app = &config.applications[0];
    assert_eq!((app.name.value.as_str(), app.path.value.as_str()), ("helm-in-git", "charts/web"));
    assert!(!config.environments[0].sync_policy.automated, "no automated block: manual syncs");
    assert_eq!(config.environments[0].sync_policy.sync_options, ["Prune=false"]);
    let policy_app = &imported.policy["applications"][0]["source"];
    assert_eq!(policy_app["valueFiles"], json!(["charts/web/values-prod.yaml"]), "from the repository's root");
    assert_eq!(policy_app["values"], json!({"replicas": 3}));
    assert_eq!(policy_app["releaseName"], "web");
    assert_eq!(
        policy_app["images"],
        json!([{"name": "nginx", "newName": "registry.example.com/nginx", "newTag": "1.27", "digest": "sha256:abc"}, {"name": "redis", "newTag": "7"}])
    );
    let notes = imported.notes.join("\n");
    for part in [
        "Application/argocd/Charts_App: spec.sources has 2 sources: only the first is imported",
        "destination cluster other-cluster",
        "a chart from the chart repository https://charts.example.com: not imported",
        "name: web, version: '1.2.3'",
        "sync option `SkipDryRunOnMissingResource=true` has no plumb equivalent",
        "ConfigMap/x/stray: not an Argo CD or Flux object plumb imports; skipped",
        "Kustomization/flux-system/orphan: sourceRef GitRepository missing is not among the files: skipped",
    ] {
        assert!(notes.contains(part), "{part}:\n{notes}");
    }
}

#[test]
fn go_durations_and_names() {
    assert_eq!(go_duration_seconds("1h30m"), Some(5400));
    assert_eq!(go_duration_seconds("90s"), Some(90));
    assert_eq!(go_duration_seconds("5x"), None);
    assert_eq!(go_duration_seconds("10"), None);
    assert_eq!(dns_label("Charts_App", "app"), "charts-app");
    assert_eq!(unique("web", ["web", "web-2"].into_iter()), "web-3");
}
