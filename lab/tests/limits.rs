//! Limits (issue 12) on the real control plane: a file over the size limit, too many
//! files, too many rendered bytes, a file of many small alias bombs, and a Git server
//! that accepts connections and never answers. Each fails its own application's pass
//! naming the file and the limit, prunes nothing, and the other applications sync.
#![allow(clippy::unwrap_used)]

mod support;

use std::{net::TcpListener, time::Duration};

use plumb::{compare::SyncStatus, reconcile::Mode};
use support::*;

const NS: &str = "limits";

fn cm(name: &str, payload: usize) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{v: \"{}\"}}\n", "x".repeat(payload))
}

/// `documents` ConfigMaps in one file, each a small alias bomb (`10^4` nodes expanded).
fn alias_bombs(documents: usize) -> String {
    let mut one =
        String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb-N}\nl0: &l0 [\"aaaaaaaaaaaaaaaa\"]\n");
    for l in 1..=4 {
        one.push_str(&format!("l{l}: &l{l} [{}]\n", vec![format!("*l{}", l - 1); 10].join(",")));
    }
    (0..documents).map(|i| format!("---\n{}", one.replace("bomb-N", &format!("bomb-{i}")))).collect()
}

/// The ComparisonError of a failed pass.
fn failure(r: &plumb::reconcile::PassReport) -> String {
    assert_eq!(r.status.sync, SyncStatus::Unknown, "{:#?}", r.status);
    assert!(r.sync.is_none(), "nothing applied or pruned: {:?}", r.sync);
    r.status.conditions.iter().map(|c| c.message.clone()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_exceeded_limit_fails_its_application_only() {
    let lab = Lab::new("limits");
    lab.repo.write("good/cm.yaml", &cm("good", 10)).unwrap();
    lab.repo.write("bomb/keep.yaml", &cm("keep", 10)).unwrap();
    lab.repo.write("big/big.yaml", &cm("big", 300_000)).unwrap();
    for i in 0..60 {
        lab.repo.write(&format!("many/cm-{i:02}.yaml"), &cm(&format!("many-{i}"), 10)).unwrap();
    }
    for i in 0..10 {
        lab.repo.write(&format!("rendered/cm-{i}.yaml"), &cm(&format!("rendered-{i}"), 150_000)).unwrap();
    }
    lab.repo.commit("one application per limit").unwrap();
    // a Git server that accepts connections and never answers
    let hung = TcpListener::bind("127.0.0.1:0").unwrap();
    let hung_url = format!("http://{}/fleet.git", hung.local_addr().unwrap());
    let apps = ["good", "bomb", "big", "many", "rendered"];
    let mut policy = format!(
        "settings:\n  statusNamespace: plumb-limits\n  limits: {{maxFileBytes: 200000, maxFiles: 50, maxRenderedBytes: 1000000, sourceTimeoutSeconds: 5}}\n\
         repositories:\n  - {{name: r, url: {}}}\n  - {{name: hung, url: {hung_url}}}\n\
         environments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true}}\napplications:\n",
        lab.url
    );
    for app in apps {
        policy.push_str(&format!(
            "  - {{name: {app}, repository: r, revision: main, path: {app}, namespace: {NS}, environment: e}}\n"
        ));
    }
    policy.push_str(&format!(
        "  - {{name: hung, repository: hung, revision: main, path: x, namespace: {NS}, environment: e}}\n"
    ));
    let policy = lab.policy("policy.yaml", &policy);
    kubectl(&["create", "namespace", NS]);
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let pass = |app: &'static str| {
        let ctx = ctx.clone();
        async move { ctx.run_pass(app, Mode::Policy, None).await.unwrap() }
    };
    let exists =
        |name: &str| kubectl(&["-n", NS, "get", "configmap", "--ignore-not-found", "-o", "name", name]).contains(name);

    // the bomb application first syncs a healthy commit
    assert_eq!(pass("bomb").await.status.sync, SyncStatus::Synced);
    assert!(exists("keep"));

    // the hung repository's pass ends at its limit while the others run
    let hung_pass = tokio::spawn(pass("hung"));
    assert_eq!(pass("good").await.status.sync, SyncStatus::Synced);
    assert!(exists("good"));

    let msg = failure(&pass("big").await);
    assert!(
        msg.contains("big/big.yaml is 3000")
            && msg.contains("over the limit of 200000 bytes per file (settings.limits.maxFileBytes)"),
        "{msg}"
    );
    let msg = failure(&pass("many").await);
    assert!(msg.contains("more than 50 manifest files under the application path (settings.limits.maxFiles)"), "{msg}");
    let msg = failure(&pass("rendered").await);
    assert!(
        msg.contains("rendered objects reach")
            && msg.contains("at rendered/cm-6.yaml, over the limit of 1000000 bytes per application"),
        "{msg}"
    );
    assert!(!exists("big") && !exists("many-0") && !exists("rendered-0"), "nothing of a refused commit is applied");

    // a file of many small alias bombs replaces the healthy file: refused as a whole,
    // and what the application had is not pruned
    lab.repo.remove("bomb/keep.yaml").unwrap();
    let bombs = alias_bombs(200);
    assert!(bombs.len() < 100_000, "small on disk: {} bytes", bombs.len());
    lab.repo.write("bomb/bombs.yaml", &bombs).unwrap();
    lab.repo.commit("alias bombs").unwrap();
    let started = std::time::Instant::now();
    let msg = failure(&pass("bomb").await);
    eprintln!("alias-bomb file ({} bytes, 200 documents) refused in {:?}: {msg}", bombs.len(), started.elapsed());
    assert!(msg.contains("bomb/bombs.yaml: YAML expansion budget per file exceeded"), "{msg}");
    assert!(exists("keep"), "no prune after a refused render");

    let r = tokio::time::timeout(Duration::from_secs(60), hung_pass).await.expect("the hung pass returns").unwrap();
    let msg = failure(&r);
    assert!(msg.contains("did not finish within 5 s (settings.limits.sourceTimeoutSeconds)"), "{msg}");
    drop(hung);
}
