//! Benchmark: a signed push → every object of a 50-object application applied.
//!
//! Side by side on one control plane (etcd + kube-apiserver, loopback), each over the
//! same sequence of pushes that change all 50 objects:
//! - **plumb**: a Gitea-signed webhook is POSTed; the clock stops when a watch on the
//!   namespace has seen all 50 ConfigMaps at the new value;
//! - **sync.sh** (MISSION.md's script): `git pull` over HTTP, `kubectl diff
//!   --server-side`, `kubectl apply --server-side` on the same files; the clock stops
//!   when the script returns (the apply is synchronous).
//!
//! Prints p50, p95 and max in milliseconds. Run: `cargo bench -p plumb-lab --bench push_to_apply`
//! (`PUSHES=40` to change the count).
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    process::Command,
    time::{Duration, Instant},
};

use support::*;

const OBJECTS: usize = 50;

fn write_app(repo: &plumb_lab::Repo, dir: &str, ns: &str, rev: usize) {
    let mut text = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n");
    for i in 0..OBJECTS - 1 {
        text.push_str(&format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:02}\n  namespace: {ns}\ndata:\n  rev: \"{rev}\"\n  payload: \"{}\"\n", "x".repeat(200)));
    }
    repo.write(&format!("{dir}/all.yaml"), &text).unwrap();
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn summary(name: &str, v: &mut [f64]) -> String {
    format!(
        "{name:<34} n={:<3} p50 {:>8.1} ms   p95 {:>8.1} ms   max {:>8.1} ms",
        v.len(),
        pct(v, 0.5),
        pct(v, 0.95),
        pct(v, 1.0)
    )
}

fn sh(dir: &std::path::Path, cmd: &str) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .output()
        .unwrap();
    // kubectl diff exits 1 when there are differences
    if !(out.status.success() || out.status.code() == Some(1)) {
        panic!("{cmd}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let pushes: usize = std::env::var("PUSHES").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let lab = Lab::new("bench");
    write_app(&lab.repo, "apps/plumb", "bench-plumb", 0);
    write_app(&lab.repo, "apps/script", "bench-script", 0);
    let mut prev = lab.repo.commit("bench: 50 objects").unwrap();
    let policy = lab.policy(
        "bench.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-bench}}\nrepositories:\n  - {{name: fleet, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: dev\n    syncPolicy: {{automated: true, prune: true, selfHeal: true}}\n    reconcileInterval: 1h\napplications:\n  - {{name: bench, repository: fleet, revision: main, path: apps/plumb, namespace: bench-plumb, environment: dev}}\n",
            lab.url
        ),
    );
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;
    wait_for("initial sync", Duration::from_secs(60), || async {
        plumb.status("bench").await.filter(|s| s.sync == plumb::compare::SyncStatus::Synced)
    })
    .await;

    // Watch the namespace: name → rev.
    let client = control_plane().client().await.unwrap();
    let rx = revisions_seen(&client, "bench-plumb");

    // The script's clone, pulled over HTTP like sync.sh does.
    let clone = lab.tmp.path().join("script-clone");
    sh(lab.tmp.path(), &format!("git clone -q {} {}", lab.url, clone.display()));
    sh(&clone, "kubectl apply --server-side --field-manager=sync-sh -f apps/script/all.yaml >/dev/null");

    let mut plumb_ms = Vec::new();
    let mut script_ms = Vec::new();
    for rev in 1..=pushes {
        write_app(&lab.repo, "apps/plumb", "bench-plumb", rev);
        write_app(&lab.repo, "apps/script", "bench-script", rev);
        let sha = lab.repo.commit(&format!("bench: rev {rev}")).unwrap();

        let (headers, body) = lab.gitea_push(&lab.url, &prev, &sha, &lab.secret);
        let mut rx = rx.clone();
        let want = rev.to_string();
        let t = Instant::now();
        assert_eq!(plumb.post_webhook(&headers, &body).await, 202);
        all_seen_at(&mut rx, &want, OBJECTS - 1, "plumb").await;
        plumb_ms.push(t.elapsed().as_secs_f64() * 1000.0);

        let t = Instant::now();
        sh(
            &clone,
            "git pull -q --ff-only && kubectl diff --server-side --field-manager=sync-sh -f apps/script/all.yaml >/dev/null; kubectl apply --server-side --field-manager=sync-sh -f apps/script/all.yaml >/dev/null",
        );
        script_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        prev = sha;
        // let plumb's follow-up pass settle so runs don't overlap
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (p50p, p50s) = (pct(&mut plumb_ms, 0.5), pct(&mut script_ms, 0.5));
    println!("push → {OBJECTS} objects applied, {pushes} pushes, same control plane:");
    println!("{}", summary("plumb (signed webhook)", &mut plumb_ms));
    println!("{}", summary("sync.sh (git pull, kubectl diff+apply)", &mut script_ms));
    println!("speed-up at p50: {:.1}x", p50s / p50p);
    plumb.stop().await;
}
