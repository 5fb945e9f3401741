//! helm-05 on the real control plane: `helm.sh/resource-policy: keep` on a live object
//! is a prune veto. A chart that stops rendering its kept Secret leaves it in place
//! (same UID, no DELETE, no `Pruned` entry), the sync goes on, the application is
//! Synced, and neither `plumb diff` (exit 1, one informational `kept` line) nor `plumb
//! prune --dry-run` offers to delete it.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;

use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use support::*;

fn case(file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/cases/helm-05").join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn helm_bin() -> PathBuf {
    let bin = plumb_lab::testbins_dir().join("helm/current/bin/helm");
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh helm", bin.display());
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_05_a_kept_secret_outlives_its_removal_from_the_chart() {
    let ns = "pk-helm05";
    let lab = Lab::new("pk-helm05");
    for f in ["Chart.yaml", "values.yaml", "templates/configmap.yaml", "templates/db-credentials.yaml"] {
        lab.repo.write(&format!("apps/web/{f}"), &case(&format!("repo/apps/web/{f}"))).unwrap();
    }
    lab.repo.commit("web chart with a bundled database").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-kept, renderTools: {{helm: {}}}}}
repositories:
  - {{name: fleet, url: {}}}
environments:
  - name: dev
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
  - {{name: web, repository: fleet, revision: main, path: apps/web, namespace: {ns}, environment: dev,
     source: {{type: helm, releaseName: web}}}}
",
            helm_bin().display(),
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    let get = |kind: &str, name: &str, path: &str| {
        kubectl(&["-n", ns, "get", kind, name, "--ignore-not-found", "-o", &format!("jsonpath={path}")])
    };
    let u1 = get("secret", "web-db-credentials", "{.metadata.uid}");
    assert!(!u1.is_empty(), "the chart's Secret was created");
    assert_eq!(get("cm", "web-settings", "{.data.DATABASE_HOST}"), "web-db");

    // commit 2: the bundled database is switched off; the chart no longer renders the Secret
    lab.repo.write("apps/web/values.yaml", &case("commit-2/apps/web/values.yaml")).unwrap();
    lab.repo.commit("managed database").unwrap();
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    let rec = r.sync.as_ref().expect("the new revision is synced");
    assert_eq!(rec.result, SyncResult::Succeeded, "the keep veto does not hold the sync: {:?}", r.status);
    assert!(rec.pruned.is_empty(), "nothing pruned: {rec:?}");
    assert_eq!(get("cm", "web-settings", "{.data.DATABASE_HOST}"), "db.managed.example.test", "the update applied");
    assert_eq!(get("secret", "web-db-credentials", "{.metadata.uid}"), u1, "the kept Secret stays, same UID");
    let row = r.status.resources.iter().find(|x| x.object == format!("Secret/{ns}/web-db-credentials")).unwrap();
    assert!(row.reason.starts_with("kept: helm.sh/resource-policy: keep"), "{row:?}");
    assert_eq!(r.status.sync, SyncStatus::Synced, "a kept object is not a difference: {:?}", r.status.resources);

    // the next pass: still there, still Synced, no sync started
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "{:?}", r.status);
    assert_eq!(get("secret", "web-db-credentials", "{.metadata.uid}"), u1);

    // plumb diff: exit 1 with the Secret named only as kept (an informational line,
    // never a pending deletion)
    let (code, out, err) = plumb_cli(&["diff", "web", "--config", policy.to_str().unwrap()]);
    let listed: Vec<&str> = out.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(listed.len(), 1, "{out}");
    assert!(
        listed[0].starts_with(&format!("# Secret/{ns}/web-db-credentials (kept: helm.sh/resource-policy: keep")),
        "{out}"
    );
    assert!(!out.contains("requires pruning"), "{out}");
    // plumb prune --dry-run: nothing to delete
    let (code, out, err) = plumb_cli(&["prune", "web", "-c", policy.to_str().unwrap(), "--dry-run"]);
    assert!(!out.lines().any(|l| l.starts_with("prune ")), "exit {code}: {out}{err}");
    assert!(out.contains("kept: helm.sh/resource-policy: keep"), "{out}{err}");
    assert_eq!(get("secret", "web-db-credentials", "{.metadata.uid}"), u1);
}
