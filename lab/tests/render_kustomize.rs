//! kustomize applications on the real control plane (issue 13): a base and a prod
//! overlay with a patch and an image override, detected from the kustomization file,
//! rendered by the real `kustomize` (built by `tools/testbins/build.sh kustomize`),
//! sandboxed and cached — a pass over an unchanged tree starts no child process.
#![allow(clippy::unwrap_used)]

mod support;

use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use support::*;

fn kustomize_bin() -> std::path::PathBuf {
    let bin = plumb_lab::testbins_dir().join("kustomize/current/bin/kustomize");
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh kustomize", bin.display());
    bin
}

const BASE_DEPLOY: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example.test/acme/web:1.0.0
";

fn overlay(ns: &str, tag: &str, extra: &str) -> String {
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ns}
resources:
  - ../../base
{extra}patches:
  - path: replicas.yaml
images:
  - name: registry.example.test/acme/web
    newTag: {tag}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_overlay_is_built_sandboxed_and_cached() {
    let ns = "rk-prod";
    let app = "rk-web";
    let lab = Lab::new(app);
    let files = [
        ("app/base/kustomization.yaml", "resources: [deployment.yaml, configmap.yaml]\n".to_string()),
        ("app/base/deployment.yaml", BASE_DEPLOY.to_string()),
        (
            "app/base/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-settings}\ndata: {LOG_LEVEL: info}\n".into(),
        ),
        ("app/overlays/prod/kustomization.yaml", overlay(ns, "2.0.0", "")),
        (
            "app/overlays/prod/replicas.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n".into(),
        ),
        ("app/secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: host}\n".into()),
    ];
    for (f, text) in &files {
        lab.repo.write(f, text).unwrap();
    }
    let first = lab.repo.commit("web: base and prod overlay").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-render, renderTools: {{kustomize: {}, timeoutSeconds: 30}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
  - {{name: {app}, repository: r, revision: main, path: app/overlays/prod, namespace: {ns}, environment: e}}
  - {{name: rk-canary, repository: r, path: app/overlays/prod, namespace: {ns}, environment: e,
     source: {{images: [{{name: registry.example.test/acme/web, newTag: 3.0.0-rc1}}], namePrefix: canary-}}}}
",
            kustomize_bin().display(),
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let pass = |mode| {
        let ctx = ctx.clone();
        async move { ctx.run_pass(app, mode, None).await.unwrap() }
    };
    let get = |path: &str| kubectl(&["-n", ns, "get", "deployment", "web", "-o", &format!("jsonpath={path}")]);

    // first pass: kustomize located (version) and run once; overlay applied
    let r = pass(Mode::Policy).await;
    assert_eq!(
        r.sync.as_ref().map(|s| (s.result, s.applied.len())),
        Some((SyncResult::Succeeded, 2)),
        "{:?}",
        r.status
    );
    assert_eq!(
        get("{.spec.template.spec.containers[0].image}"),
        "registry.example.test/acme/web:2.0.0",
        "image override"
    );
    assert_eq!(get("{.spec.replicas}"), "3", "the overlay's patch");
    assert_eq!(ctx.render_tool_runs(), 2, "`kustomize version` and one build");

    // unchanged commit, then a commit that leaves the tree as it was: no child process
    for i in 0..2 {
        let r = pass(Mode::Policy).await;
        assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "pass {i}: {:?}", r.status);
    }
    lab.repo.commit("an empty commit: same tree").unwrap();
    let r = pass(Mode::Policy).await;
    assert_eq!(r.status.sync, SyncStatus::Synced);
    assert_eq!(ctx.render_tool_runs(), 2, "a no-op pass runs no kustomize");

    // a new tag: one more build, the Deployment follows
    lab.repo.write("app/overlays/prod/kustomization.yaml", &overlay(ns, "2.1.0", "")).unwrap();
    lab.repo.commit("web 2.1.0").unwrap();
    let r = pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    assert_eq!(get("{.spec.template.spec.containers[0].image}"), "registry.example.test/acme/web:2.1.0");
    assert_eq!(ctx.render_tool_runs(), 3);
    let metrics = ctx.metrics.encode();
    assert!(
        metrics.contains(&format!("plumb_render_duration_seconds_count{{app=\"{app}\",tool=\"kustomize\"}} 2\n")),
        "two renders ran, the cached ones are not observed: {metrics}"
    );
    let uid = get("{.metadata.uid}");

    // `plumb render`: the objects, the tool and its version; `--revision` an older commit
    let render = |rev: Option<&str>| {
        let mut args = vec!["render", app, "--config", policy.to_str().unwrap()];
        args.extend(rev.map(|r| ["--revision", r]).into_iter().flatten());
        plumb_cli(&args)
    };
    let (code, out, err) = render(None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# Source: app/overlays/prod (kustomize build)#1\n"), "{out}");
    assert!(out.contains("image: registry.example.test/acme/web:2.1.0") && out.contains("replicas: 3"), "{out}");
    assert!(
        err.starts_with(&format!("{app} at ")) && err.contains(": 2 objects, kustomize v5.8.1, rendered in "),
        "{err}"
    );
    let (code, out, _) = render(Some(&first));
    assert_eq!(code, 0);
    assert!(out.contains("image: registry.example.test/acme/web:2.0.0"), "{out}");
    // per-application overrides on the same overlay
    let (code, out, err) = plumb_cli(&["render", "rk-canary", "--config", policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("name: canary-web\n") && out.contains("name: canary-web-settings\n"), "{out}");
    assert!(out.contains("image: registry.example.test/acme/web:3.0.0-rc1"), "{out}");

    // failures name the cause and prune nothing: a missing file (kustomize's own error),
    // a file outside the kustomization root (load restrictor), a remote base (off)
    let cases = [
        (overlay(ns, "2.1.0", "  - missing.yaml\n"), "missing.yaml"),
        (overlay(ns, "2.1.0", "  - ../../secret.yaml\n"), "is not in or below"),
        (
            overlay(ns, "2.1.0", "  - https://example.test/acme/base.yaml\n"),
            "app/overlays/prod/kustomization.yaml: `https://example.test/acme/base.yaml` is remote; remote bases are off",
        ),
    ];
    for (text, expected) in cases {
        lab.repo.write("app/overlays/prod/kustomization.yaml", &text).unwrap();
        lab.repo.commit("broken overlay").unwrap();
        let r = pass(Mode::Policy).await;
        assert_eq!(r.status.sync, SyncStatus::Unknown, "{expected}");
        assert!(r.sync.is_none(), "no sync on a failed render");
        let msg = r.status.conditions.iter().find(|c| c.type_ == "ComparisonError").map(|c| c.message.clone()).unwrap();
        assert!(msg.contains(expected), "{expected}: {msg}");
        if !expected.contains("remote") {
            assert!(msg.contains("kustomize build app/overlays/prod"), "names the tool: {msg}");
        }
    }
    assert_eq!(get("{.metadata.uid}"), uid, "nothing deleted");
    assert!(!kubectl(&["-n", ns, "get", "cm", "web-settings", "-o", "name"]).is_empty());
    let (code, out, err) = plumb_cli(&["diff", app, "--config", policy.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
}
