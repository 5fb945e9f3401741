//! `plumb import` end to end: the Argo CD and Flux declarations of the demo's two
//! applications (`config/examples/argocd/`, `config/examples/flux/`) become policies
//! that validate and sync the same objects as the demo's own policy — the plain
//! `apps/web` and the kustomize overlay `kustomize/web/overlays/prod` — on the real
//! control plane. (Namespaces and the repository URL are rewritten for this lab.)
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use plumb::{compare::SyncStatus, reconcile::Mode};
use support::*;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/examples");

/// Every file under `dir` (relative to it), sorted.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

async fn imported_policy_syncs_the_demo_s_objects(tool: &str, example: &str) {
    let lab = Lab::new(&format!("import-{tool}"));
    let (web_ns, prod_ns) = (format!("imp-{tool}-lab"), format!("imp-{tool}-prod"));
    let rewrite = |text: &str| {
        text.replace("gitops-lab", &web_ns)
            .replace("web-prod", &prod_ns)
            .replace("https://git.example.com/acme/fleet.git", &lab.url)
    };
    let root = Path::new(EXAMPLES);
    for dir in ["apps", "kustomize"] {
        for f in files(&root.join(dir)) {
            let rel = f.strip_prefix(root).unwrap().display().to_string();
            lab.repo.write(&rel, &rewrite(&std::fs::read_to_string(&f).unwrap())).unwrap();
        }
    }
    lab.repo.commit("the demo's applications").unwrap();
    // the two tests' applications get names of their own: an application's objects
    // carry its name (plumb's tracking-id), and one plumb would prune another's `web`
    let web = format!("{tool}-web");
    let text = rewrite(&std::fs::read_to_string(root.join(example)).unwrap())
        .replace("{name: web,", &format!("{{name: {web},"))
        .replace("[{name: web}]", &format!("[{{name: {web}}}]"));
    let declared = lab.policy("declared.yaml", &text);
    let (code, policy, err) = plumb_cli(&["import", declared.to_str().unwrap()]);
    assert_eq!(code, 0, "{policy}\n{err}");
    let kustomize = plumb_lab::testbins_dir().join("kustomize/current/bin/kustomize");
    let settings = format!(
        "settings: {{statusNamespace: plumb-import-{tool}, renderTools: {{kustomize: {}}}}}\n",
        kustomize.display()
    );
    let file = lab.policy("imported.yaml", &format!("{settings}{policy}"));
    let (code, out, err) = plumb_cli(&["validate", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}\n{policy}");
    if tool == "flux" {
        // Flux creates no namespace: a Flux repository declares it, or it exists
        let _ = control_plane().kubectl(&["create", "namespace", &prod_ns]);
    }
    let ctx = context_for(&file, &lab.tmp.path().join("cache"), false).await;
    // passes of both, as a server runs them (Flux's dependsOn waits until `web` is
    // Healthy: its pods run on kwok's nodes)
    wait_for("both synced", std::time::Duration::from_secs(90), || async {
        let mut synced = true;
        for app in [&web, &prod_ns] {
            let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
            synced &= r.status.sync == SyncStatus::Synced;
        }
        if !synced {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        synced.then_some(())
    })
    .await;
    // the same objects the demo's policy syncs: the plain Deployment and the overlay's
    let image = |ns: &str| {
        kubectl(&["-n", ns, "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"])
    };
    assert_eq!(image(&web_ns), "nginx:1.27.3");
    assert!(image(&prod_ns).starts_with("registry.example.test/acme/web:"), "{}", image(&prod_ns));
    let replicas = kubectl(&["-n", &prod_ns, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(replicas, "3", "the overlay's replica patch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_argo_cd_policy_syncs_the_same_objects() {
    imported_policy_syncs_the_demo_s_objects("argo", "argocd/applications.yaml").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_flux_policy_syncs_the_same_objects() {
    imported_policy_syncs_the_demo_s_objects("flux", "flux/fleet.yaml").await;
}

/// The Argo CD declarations read from the live cluster (`plumb import --from-cluster`)
/// give the same policy as the same objects in a file; Flux's kinds, not served by this
/// cluster, are named on standard error.
#[tokio::test(flavor = "multi_thread")]
async fn the_live_clusters_argo_cd_objects_import_as_their_file_does() {
    let crd = |kind: &str, plural: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {plural}.argoproj.io}}\nspec:\n  group: argoproj.io\n  scope: Namespaced\n  names: {{kind: {kind}, plural: {plural}, singular: {}}}\n  versions:\n    - name: v1alpha1\n      served: true\n      storage: true\n      schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n",
            kind.to_lowercase()
        )
    };
    kubectl_apply(&format!("{}---\n{}", crd("Application", "applications"), crd("AppProject", "appprojects")));
    kubectl(&["wait", "--for=condition=Established", "crd/applications.argoproj.io", "crd/appprojects.argoproj.io"]);
    kubectl_apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: argocd-import}\n");
    let text = std::fs::read_to_string(Path::new(EXAMPLES).join("argocd/applications.yaml"))
        .unwrap()
        .replace("namespace: argocd}", "namespace: argocd-import}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("argo.yaml");
    std::fs::write(&file, &text).unwrap();
    kubectl(&["apply", "-f", file.to_str().unwrap()]);

    let (code, from_file, err) = plumb_cli(&["import", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, live, err) = plumb_cli(&["import", "--from-cluster"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(live, from_file);
    assert!(live.contains("path: kustomize/web/overlays/prod"), "{live}");
    for kind in ["GitRepository", "Kustomization", "HelmRelease"] {
        assert!(err.contains(&format!("note: {kind}.")) && err.contains("not served by this cluster"), "{err}");
    }
    // files and the cluster are one or the other
    let (code, _, err) = plumb_cli(&["import", "--from-cluster", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
}
