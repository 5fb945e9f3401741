//! Issue 12: the status of a 2,000-object application and its history stay under the
//! API server's 1 MiB object size limit, and are read back (by a new plumb process: a new
//! Context) with counts of what was left out.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Instant;

use plumb::{
    compare::SyncStatus,
    reconcile::Mode,
    status::{AppStatus, SyncRecord},
};
use support::*;

const NS: &str = "scale";
const STATUS_NS: &str = "plumb-scale";
const OBJECTS: usize = 2000;

fn manifests(round: usize) -> String {
    (0..OBJECTS)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings-of-a-large-application-{i:05}}}\ndata: {{n: \"{i}-{round}\"}}\n"
            )
        })
        .collect()
}

/// Ten syncs of 2,000 changed objects fill the history; as pretty JSON with every
/// object named (before issue 12) status and history come to about 1.5 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_2000_objects_stays_under_the_object_size_limit() {
    let lab = Lab::new("scale");
    kubectl(&["create", "namespace", NS]);
    let policy = lab.app_policy(STATUS_NS, "big", NS, "    syncPolicy: {automated: true, prune: true}");
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let mut uncapped = 0;
    for round in 0..plumb::status::HISTORY_LEN {
        lab.repo.write("app/all.yaml", &manifests(round)).unwrap();
        lab.repo.commit(&format!("2,000 ConfigMaps, round {round}")).unwrap();
        let started = Instant::now();
        let r = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
        eprintln!("sync {round} of {OBJECTS} objects: {:?}", started.elapsed());
        let rec = r.sync.as_ref().unwrap();
        assert_eq!(rec.applied.len(), OBJECTS, "{:?}", r.status.conditions);
        assert_eq!(r.status.resources.len(), OBJECTS, "the pass itself knows every object");
        // what the ConfigMap held before: pretty JSON, every object named
        uncapped = serde_json::to_string_pretty(&r.status).unwrap().len()
            + (round + 1) * serde_json::to_string_pretty(rec).unwrap().len();
    }

    // the stored resource: under 1 MiB, its status and history readable
    let obj: serde_json::Value =
        serde_json::from_str(&kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", "big", "-o", "json"]))
            .unwrap();
    let status_json = serde_json::to_string(&obj["status"]).unwrap();
    let history_json = serde_json::to_string(&obj["status"]["history"]).unwrap();
    let size = serde_json::to_string(&obj).unwrap().len();
    eprintln!(
        "Application resource of {OBJECTS} objects, 10 syncs: {size} bytes (status {} B, of which history {} B); uncapped pretty JSON: {uncapped} B",
        status_json.len(),
        history_json.len()
    );
    assert!(uncapped > 1024 * 1024, "the case would not fit uncapped: {uncapped}");
    assert!(size < 1024 * 1024, "{size}");
    let stored: AppStatus = serde_json::from_str(&status_json).unwrap();
    assert_eq!(stored.resources.len() + stored.resources_omitted, OBJECTS);
    let history: Vec<SyncRecord> = serde_json::from_str(&history_json).unwrap();
    assert_eq!(history.len(), plumb::status::HISTORY_LEN);
    for h in &history {
        assert_eq!(h.applied.len() + h.applied_omitted, OBJECTS, "{h:?}");
    }

    // `plumb history` counts every object of each sync
    let (code, out, err) = plumb_cli(&["history", "big", "--config", policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(out.lines().filter(|l| l.contains(&format!("(+{OBJECTS} -0)"))).count(), 10, "{out}");

    // a new plumb reads it back and goes on: the next pass finds all Synced
    let again = context_for(&policy, &lab.tmp.path().join("cache-2"), false).await;
    let (loaded, history) = again.store.load("big").await.unwrap();
    assert_eq!(loaded.resources.len() + loaded.resources_omitted, OBJECTS);
    assert_eq!(history.len(), plumb::status::HISTORY_LEN);
    let started = Instant::now();
    let r = again.run_pass("big", Mode::Policy, None).await.unwrap();
    eprintln!("pass of a new plumb (compare only, all Synced): {:?}", started.elapsed());
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.conditions);
    assert!(r.sync.is_none());
}
