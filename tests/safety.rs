//! Prune safety against the real control plane: data-loss classes wait for approval.
#![allow(clippy::unwrap_used)]

mod support;

use std::{sync::Arc, time::Duration};

use plumb::{
    cluster::Cluster,
    metrics::Metrics,
    reconcile::{Context, Mode},
};
use support::*;

/// A PersistentVolumeClaim dropped from Git is not deleted by an automated prune: it
/// stays, marked "prune needs approval"; `plumb sync --approve` deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_prune_waits_for_approval() {
    let ns = "safety-pvc";
    let lab = Lab::new("safety");
    lab.repo
        .write(
            "app/cm.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: keep, namespace: {ns}}}\ndata: {{a: b}}\n"),
        )
        .unwrap();
    lab.repo.write("app/pvc.yaml", &format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: {ns}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n")).unwrap();
    lab.repo.commit("app with a volume claim").unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-safety}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\napplications:\n  - {{name: safety, repository: r, revision: main, path: app, namespace: {ns}, environment: e}}\n",
            lab.url
        ),
    );
    let config = plumb::config::load(&policy).unwrap_or_else(|e| panic!("{e}"));
    let cluster = Cluster::new(control_plane().client().await.unwrap()).await.unwrap();
    let ctx =
        Arc::new(Context::new(cluster, Arc::new(config), lab.tmp.path().join("cache"), Arc::new(Metrics::default())));
    ctx.store.ensure_namespace().await.unwrap();
    let r = ctx.run_pass("safety", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.unwrap().applied.len(), 2);

    lab.repo.remove("app/pvc.yaml").unwrap();
    lab.repo.commit("drop the claim").unwrap();
    let r = ctx.run_pass("safety", Mode::Policy, None).await.unwrap();
    let pvc = r.status.resources.iter().find(|x| x.object == format!("PersistentVolumeClaim/{ns}/data")).unwrap();
    assert!(
        pvc.reason.contains("prune needs approval") && pvc.reason.contains("data-loss class PersistentVolumeClaim"),
        "{pvc:?}"
    );
    assert!(r.sync.unwrap().pruned.is_empty());
    assert!(kubectl(&["-n", ns, "get", "pvc", "-o", "name"]).contains("data"));

    let (code, out, err) =
        plumb_cli(&["sync", "safety", "--config", policy.to_str().unwrap(), "--prune", "true", "--approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("pruned  PersistentVolumeClaim/{ns}/data")), "{out}");
    wait_for("claim gone", Duration::from_secs(30), || async {
        (!kubectl(&["-n", ns, "get", "pvc", "-o", "name"]).contains("data")).then_some(())
    })
    .await;
    assert!(kubectl(&["-n", ns, "get", "configmap", "keep", "-o", "name"]).contains("keep"));
}
