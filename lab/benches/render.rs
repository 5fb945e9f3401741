//! Benchmark: a kustomize application of 200 objects (a base of 100 ConfigMaps and 100
//! Services, a prod overlay with a namespace, a label and a patch), side by side with
//! `kustomize build | kubectl apply --server-side` on the same tree and control plane.
//!
//! Prints: plumb's cold render (the tool's run), a cached render (an unchanged tree: no
//! child process), the first pass (render, compare, apply) and a no-op pass; then the
//! script's first and repeated runs. Run: `cargo bench -p plumb-lab --bench render`
//! (needs `tools/testbins/build.sh kustomize`; `PASSES=10` to change the count).
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use plumb::{
    compare::SyncStatus,
    config::load,
    reconcile::Mode,
    source::{Desired, Pool, Since},
};
use support::*;

const NS: &str = "bench-render";
const NS_SCRIPT: &str = "bench-render-kubectl";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn base() -> String {
    let mut t = String::new();
    for i in 0..100 {
        t.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i:03}}}\ndata: {{key: \"value-{i}\"}}\n"
        ));
        t.push_str(&format!("---\napiVersion: v1\nkind: Service\nmetadata: {{name: s-{i:03}}}\nspec: {{selector: {{app: a-{i:03}}}, ports: [{{port: 80}}]}}\n"));
    }
    t
}

fn overlay(ns: &str) -> String {
    format!(
        "namespace: {ns}\nresources: [../../base]\nlabels:\n  - pairs: {{tier: prod}}\npatches:\n  - patch: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {{name: cm-000}}\n      data: {{key: patched}}\n"
    )
}

/// `kustomize build DIR | kubectl apply --server-side -f -`: wall time.
fn script(kustomize: &std::path::Path, dir: &std::path::Path) -> Duration {
    let t = Instant::now();
    let built = Command::new(kustomize).arg("build").arg(dir).output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let mut apply = Command::new("kubectl")
        .args(["apply", "--server-side", "--field-manager=script", "-f", "-"])
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    apply.stdin.take().unwrap().write_all(&built.stdout).unwrap();
    assert!(apply.wait().unwrap().success());
    t.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let passes: usize = std::env::var("PASSES").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let kustomize = plumb_lab::testbins_dir().join("kustomize/current/bin/kustomize");
    assert!(kustomize.is_file(), "run tools/testbins/build.sh kustomize");
    let lab = Lab::new("bench-render");
    lab.repo.write("app/base/kustomization.yaml", "resources: [all.yaml]\n").unwrap();
    lab.repo.write("app/base/all.yaml", &base()).unwrap();
    lab.repo.write("app/overlays/prod/kustomization.yaml", &overlay(NS)).unwrap();
    lab.repo.write("app/overlays/script/kustomization.yaml", &overlay(NS_SCRIPT)).unwrap();
    lab.repo.commit("200 objects").unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-bench, renderTools: {{kustomize: {}}}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: false, syncOptions: [CreateNamespace=true]}}\napplications:\n  - {{name: big, repository: r, revision: main, path: app/overlays/prod, namespace: {NS}, environment: e}}\n",
            kustomize.display(),
            lab.url
        ),
    );

    // render alone: a cold pool (tool run) and the same pool again (cache)
    let config = Arc::new(load(&policy).unwrap());
    let repo = &config.repositories[0];
    let mut cold = Vec::new();
    let mut cached = Vec::new();
    for i in 0..passes {
        let pool = Pool::new(lab.tmp.path().join(format!("cache-{i}")), config.clone());
        let Desired::Rendered(_, r, _) =
            pool.desired("big", repo, "main", "app/overlays/prod", Since::at(Instant::now())).await
        else {
            panic!("render")
        };
        assert_eq!(r.manifests.len(), 200);
        cold.push(ms(r.took));
        let t = Instant::now();
        let Desired::Rendered(..) =
            pool.desired("big", repo, "main", "app/overlays/prod", Since::at(Instant::now())).await
        else {
            panic!("render")
        };
        cached.push(ms(t.elapsed()));
        assert_eq!(pool.tool_runs(), 2, "version + one build; the second call starts nothing");
    }

    // plumb: first pass (render, compare, apply 200 objects), then no-op passes
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let t = Instant::now();
    let first = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
    let first_ms = ms(t.elapsed());
    assert_eq!(first.sync.as_ref().map(|s| s.applied.len()), Some(200), "{:?}", first.status.conditions);
    let runs = ctx.render_tool_runs();
    let mut noop = Vec::new();
    for _ in 0..passes {
        let t = Instant::now();
        let r = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
        noop.push(ms(t.elapsed()));
        assert_eq!(r.status.sync, SyncStatus::Synced);
    }
    assert_eq!(ctx.render_tool_runs(), runs, "no-op passes start no kustomize");

    // the script on the same tree (its own namespace)
    kubectl(&["create", "namespace", NS_SCRIPT]);
    let dir = lab.repo.work.join("app/overlays/script");
    let script_first = ms(script(&kustomize, &dir));
    let mut script_again: Vec<f64> = (0..passes.min(5)).map(|_| ms(script(&kustomize, &dir))).collect();

    println!("kustomize app of 200 objects, same control plane ({passes} runs each):");
    println!("plumb   cold render (kustomize build)  median {:>8.1} ms", median(&mut cold));
    println!("plumb   cached render (unchanged tree) median {:>8.1} ms, 0 child processes", median(&mut cached));
    println!("plumb   first pass: render + compare + apply  {first_ms:>8.1} ms");
    println!("plumb   no-op pass                     median {:>8.1} ms, 0 child processes", median(&mut noop));
    println!(
        "script  kustomize build | kubectl apply --server-side: first {script_first:.1} ms, again median {:.1} ms",
        median(&mut script_again)
    );
}
