//! Helm charts on the real control plane (issue 13): one chart in the repository, two
//! applications (dev, prod) each with its own value file, rendered by the real `helm
//! template` (built by `tools/testbins/build.sh helm`), sandboxed and cached.
#![allow(clippy::unwrap_used)]

mod support;

use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use support::*;

fn helm_bin() -> std::path::PathBuf {
    let bin = plumb_lab::testbins_dir().join("helm/current/bin/helm");
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh helm", bin.display());
    bin
}

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app.kubernetes.io/instance: {{ .Release.Name | quote }}}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: web
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
"#;

const CONFIGMAP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  namespace: {{ .Release.Namespace }}
data:
  LOG_LEVEL: {{ .Values.logLevel | quote }}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_chart_with_a_values_file_per_environment() {
    let lab = Lab::new("rh-fleet");
    let files = [
        ("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
        (
            "charts/web/values.yaml",
            "replicas: 1\nimage: {repository: registry.example.test/acme/web, tag: 1.0.0}\nlogLevel: info\n",
        ),
        ("charts/web/templates/deployment.yaml", DEPLOYMENT),
        ("charts/web/templates/configmap.yaml", CONFIGMAP),
        ("envs/dev.yaml", "logLevel: debug\n"),
        ("envs/prod.yaml", "replicas: 3\nimage: {tag: 2.0.0}\n"),
    ];
    for (f, text) in files {
        lab.repo.write(f, text).unwrap();
    }
    lab.repo.commit("web chart").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-render, renderTools: {{helm: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
  - {{name: rh-dev, repository: r, path: charts/web, namespace: rh-dev, environment: e,
     source: {{valueFiles: [envs/dev.yaml]}}}}
  - {{name: rh-prod, repository: r, path: charts/web, namespace: rh-prod, environment: e,
     source: {{type: helm, releaseName: web, valueFiles: [envs/prod.yaml], values: {{logLevel: warn}}}}}}
",
            helm_bin().display(),
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let get = |ns: &str, kind: &str, name: &str, path: &str| {
        kubectl(&["-n", ns, "get", kind, name, "-o", &format!("jsonpath={path}")])
    };
    for app in ["rh-dev", "rh-prod"] {
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        assert_eq!(
            r.sync.as_ref().map(|s| (s.result, s.applied.len())),
            Some((SyncResult::Succeeded, 2)),
            "{app}: {:?}",
            r.status
        );
    }
    // dev: chart defaults + dev.yaml; release named after the application
    assert_eq!(get("rh-dev", "deployment", "rh-dev", "{.spec.replicas}"), "1");
    assert_eq!(get("rh-dev", "cm", "rh-dev-settings", "{.data.LOG_LEVEL}"), "debug");
    // prod: prod.yaml, then inline values; release name `web`
    assert_eq!(get("rh-prod", "deployment", "web", "{.spec.replicas}"), "3");
    assert_eq!(
        get("rh-prod", "deployment", "web", "{.spec.template.spec.containers[0].image}"),
        "registry.example.test/acme/web:2.0.0"
    );
    assert_eq!(get("rh-prod", "cm", "web-settings", "{.data.LOG_LEVEL}"), "warn");
    assert_eq!(ctx.render_tool_runs(), 3, "`helm version` once, one template per application");

    // synced once: rendered again as an upgrade (`.Release.IsUpgrade`), once
    for app in ["rh-dev", "rh-prod"] {
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "{app}: {:?}", r.status);
    }
    assert_eq!(ctx.render_tool_runs(), 5, "one `helm template --is-upgrade` per application");
    // no new commit: no child process
    for app in ["rh-dev", "rh-prod"] {
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "{app}: {:?}", r.status);
    }
    assert_eq!(ctx.render_tool_runs(), 5);

    // a template error: the render fails naming the template, nothing goes
    let uid = get("rh-prod", "deployment", "web", "{.metadata.uid}");
    lab.repo.write("charts/web/templates/broken.yaml", "{{ .Values.missing.field }}\n").unwrap();
    lab.repo.commit("a broken template").unwrap();
    let r = ctx.run_pass("rh-prod", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true));
    let msg = r.status.conditions.iter().find(|c| c.type_ == "ComparisonError").map(|c| c.message.clone()).unwrap();
    assert!(msg.contains("helm template web charts/web") && msg.contains("broken.yaml"), "{msg}");
    assert_eq!(get("rh-prod", "deployment", "web", "{.metadata.uid}"), uid, "nothing deleted");
}
