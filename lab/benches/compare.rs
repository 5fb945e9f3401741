//! Benchmark: comparing an application of 1,000 objects (600 ConfigMaps, 200
//! Deployments with 0 replicas, 200 Services) with the live cluster, side by side with
//! `kubectl diff --server-side` on the same files and the same control plane.
//!
//! Prints, for plumb with its watch cache: a no-op pass (wall time, API requests,
//! writes, dry-runs) and a pass after one object drifted; for kubectl: the same two
//! diffs. Run: `cargo bench -p plumb-lab --bench compare` (`PASSES=20` to change the count).
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use plumb::{
    cluster::Cluster,
    compare::SyncStatus,
    metrics::Metrics,
    reconcile::{Context, Mode},
};
use support::*;

const NS: &str = "bench-compare";

fn manifests() -> String {
    let mut t = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n");
    for i in 0..600 {
        t.push_str(&format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i:03}, namespace: {NS}}}\ndata: {{key: \"value-{i}\", other: \"{}\"}}\n", "x".repeat(100)));
    }
    for i in 0..200 {
        t.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d-{i:03}, namespace: {NS}}}\nspec:\n  replicas: 0\n  selector: {{matchLabels: {{app: d-{i:03}}}}}\n  template:\n    metadata: {{labels: {{app: d-{i:03}}}}}\n    spec:\n      containers: [{{name: c, image: \"nginx:1.27.3\", resources: {{requests: {{cpu: \"0.1\", memory: 64Mi}}}}}}]\n"
        ));
        t.push_str(&format!("---\napiVersion: v1\nkind: Service\nmetadata: {{name: s-{i:03}, namespace: {NS}}}\nspec: {{selector: {{app: d-{i:03}}}, ports: [{{port: 80}}]}}\n"));
    }
    t
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn kubectl_diff(file: &std::path::Path) -> Duration {
    let t = Instant::now();
    let out = std::process::Command::new("kubectl")
        .args(["diff", "--server-side", "--force-conflicts", "--field-manager=plumb", "-f"])
        .arg(file)
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "kubectl diff: {}", String::from_utf8_lossy(&out.stderr));
    t.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let passes: usize = std::env::var("PASSES").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let lab = Lab::new("bench");
    let text = manifests();
    lab.repo.write("app/all.yaml", &text).unwrap();
    lab.repo.commit("1000 objects").unwrap();
    let file = lab.tmp.path().join("all.yaml");
    std::fs::write(&file, &text).unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-bench}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: false}}\napplications:\n  - {{name: big, repository: r, revision: main, path: app, namespace: {NS}, environment: e}}\n",
            lab.url
        ),
    );
    let config = plumb::config::load(&policy).unwrap();
    let cluster = Cluster::new(control_plane().client().await.unwrap()).await.unwrap();
    let ctx = Arc::new(
        Context::new(cluster, Arc::new(config), lab.tmp.path().join("cache"), Arc::new(Metrics::default()))
            .with_watches(),
    );
    ctx.store.ensure_namespace().await.unwrap();
    let t = Instant::now();
    let first = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
    println!(
        "initial sync of 1,000 objects: {:.0} ms ({:?})",
        ms(t.elapsed()),
        first.sync.as_ref().map(|s| (s.result, s.applied.len()))
    );
    // warm: the watches list every kind, the dry-run cache fills
    for _ in 0..3 {
        let r = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
        if r.status.sync == SyncStatus::Synced {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let (req0, w0) = ctx.cluster.requests();
    let d0 = ctx.cluster.dry_runs();
    let mut noop = Vec::new();
    for _ in 0..passes {
        let t = Instant::now();
        let r = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
        noop.push(ms(t.elapsed()));
        assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.conditions);
    }
    let (req1, w1) = ctx.cluster.requests();
    let d1 = ctx.cluster.dry_runs();

    // one object drifts (another manager edits a ConfigMap)
    kubectl(&[
        "-n",
        NS,
        "patch",
        "configmap",
        "cm-007",
        "--field-manager=kubectl-edit",
        "--type=merge",
        "-p",
        r#"{"data":{"key":"hand-edited"}}"#,
    ]);
    tokio::time::sleep(Duration::from_secs(1)).await; // let the watch see it
    let t = Instant::now();
    let r = ctx.run_pass("big", Mode::CompareOnly, None).await.unwrap();
    let drift_ms = ms(t.elapsed());
    let (req2, _) = ctx.cluster.requests();
    assert_eq!(r.status.sync, SyncStatus::OutOfSync);

    let kubectl_drift = kubectl_diff(&file);
    kubectl(&[
        "-n",
        NS,
        "patch",
        "configmap",
        "cm-007",
        "--field-manager=plumb",
        "--type=merge",
        "-p",
        r#"{"data":{"key":"value-7"}}"#,
    ]);
    let mut kubectl_noop: Vec<f64> = (0..3).map(|_| ms(kubectl_diff(&file))).collect();

    let p50 = median(&mut noop);
    let k50 = median(&mut kubectl_noop);
    println!("compare 1,000 objects, same control plane:");
    println!(
        "plumb   no-op pass        median {p50:>9.1} ms over {passes} passes; per pass: {:.1} API requests, {:.1} writes, {:.1} dry-runs",
        (req1 - req0) as f64 / passes as f64,
        (w1 - w0) as f64 / passes as f64,
        (d1 - d0) as f64 / passes as f64
    );
    println!("plumb   one object drifted        {drift_ms:>9.1} ms; {} API requests", req2 - req1);
    println!("kubectl diff --server-side no-op median {k50:>9.1} ms over 3 runs");
    println!("kubectl diff --server-side drifted    {:>9.1} ms", ms(kubectl_drift));
    println!("speed-up (no-op, median): {:.0}x", k50 / p50);
}
