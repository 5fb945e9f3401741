//! Two `plumb serve` processes with leader election against one control plane: only the
//! Lease holder syncs, a webhook sent to the follower reaches the leader, and when the
//! leader is killed (SIGKILL) in the middle of a sync the other replica takes the Lease
//! over, finishes that sync, and the history has exactly one entry for it and keeps the
//! one before.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use plumb::status::{SyncRecord, SyncResult};
use support::{Lab, bearer, control_plane, http_request, kubectl, reader_token, wait_for};

const STATUS_NS: &str = "failover-status";
const NS: &str = "failover-app";
const LEASE: &str = "plumb-failover";
const NODE_LABEL: &str = "plumb-test/failover-ready";

/// A `plumb serve --leader-elect` process, killed on drop.
struct Replica {
    identity: String,
    /// The webhook.
    addr: SocketAddr,
    /// Metrics (bearer token).
    internal: SocketAddr,
    /// `/healthz`, `/readyz`.
    probes: SocketAddr,
    child: Child,
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

impl Replica {
    fn start(identity: &str, policy: &Path, dir: &Path) -> Replica {
        let (addr, internal, probes) = (free_addr(), free_addr(), free_addr());
        let log = std::fs::File::create(dir.join(format!("{identity}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args(["serve", "--leader-elect", "--lease-name", LEASE, "--identity", identity, "--listen"])
            .arg(addr.to_string())
            .args(["--internal-listen", &internal.to_string(), "--probe-listen", &probes.to_string()])
            .arg("--config")
            .arg(policy)
            .arg("--cache-dir")
            .arg(dir.join(format!("cache-{identity}")))
            .env("KUBECONFIG", &control_plane().kubeconfig)
            .env("PLUMB_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Replica { identity: identity.into(), addr, internal, probes, child }
    }

    /// A probe.
    async fn probe(&self, path: &str) -> Option<(u16, String)> {
        let conn = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(self.probes)).await;
        if !matches!(conn, Ok(Ok(_))) {
            return None;
        }
        Some(http_request(self.probes, "GET", path, &[], b"").await)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn holder() -> String {
    control_plane()
        .kubectl(&["-n", STATUS_NS, "get", "lease", LEASE, "-o", "jsonpath={.spec.holderIdentity}"])
        .unwrap_or_default()
}

fn history() -> Vec<SyncRecord> {
    let text = control_plane()
        .kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", "failover", "-o", "jsonpath={.status.history}"])
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_default()
}

fn deployment() -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      nodeSelector: {{{NODE_LABEL}: \"yes\"}}\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: main, image: registry.example/web:1}}]\n"
    )
}

fn configmap(name: &str, wave: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NS}\n  annotations: {{plumb.dev/sync-wave: \"{wave}\"}}\ndata: {{k: v}}\n"
    )
}

fn read_log(dir: &Path, identity: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{identity}.log"))).unwrap_or_default()
}

/// The leader is SIGKILLed while a sync waits on its wave 0 (a Deployment whose Pod
/// cannot be scheduled until the node gets a label); the follower takes over (printed:
/// seconds from the kill to the new holder in the Lease), finishes the sync once the
/// Pod runs, and the history holds the earlier sync and one entry for this one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follower_takes_over_a_killed_leaders_sync() {
    let cp = control_plane();
    let _ = cp.kubectl(&["label", "node", "kwok-node-0", &format!("{NODE_LABEL}-")]);
    let lab = Lab::new("failover");
    lab.repo.write("app/before.yaml", &configmap("before", "0")).unwrap();
    let first = lab.repo.commit("first").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: {STATUS_NS}}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\napplications:\n  - {{name: failover, repository: r, revision: main, path: app, namespace: {NS}, environment: e}}\n",
            lab.url
        ),
    );
    let dir = lab.tmp.path().to_path_buf();
    let mut replicas = vec![Replica::start("replica-a", &policy, &dir), Replica::start("replica-b", &policy, &dir)];

    let leader = wait_for("a replica to hold the Lease", Duration::from_secs(60), || async {
        let h = holder();
        replicas.iter().position(|r| r.identity == h)
    })
    .await;
    let follower = 1 - leader;
    wait_for("the first sync", Duration::from_secs(60), || async {
        history().first().filter(|h| h.revision == first && h.result == SyncResult::Succeeded).cloned()
    })
    .await;
    for r in &replicas {
        wait_for("both replicas ready", Duration::from_secs(30), || async {
            r.probe("/readyz").await.filter(|(code, _)| *code == 200)
        })
        .await;
    }

    // The new commit reaches the leader only through the webhook sent to the follower
    // (the poll interval is an hour).
    lab.repo.write("app/web.yaml", &deployment()).unwrap();
    lab.repo.write("app/after.yaml", &configmap("after", "1")).unwrap();
    let second = lab.repo.commit("second").unwrap();
    let (headers, body) = lab.gitea_push(&lab.url, &first, &second, &lab.secret);
    let (code, answer) = http_request(replicas[follower].addr, "POST", "/api/webhook", &headers, &body).await;
    assert_eq!(code, 202, "{answer}");
    let running = wait_for("the leader to start the sync of the second commit", Duration::from_secs(60), || async {
        history().first().filter(|h| h.revision == second && h.result == SyncResult::Running).cloned()
    })
    .await;
    assert!(
        read_log(&dir, &replicas[follower].identity).contains("webhook forwarded to the replica running it"),
        "{}",
        read_log(&dir, &replicas[follower].identity)
    );

    let killed = Instant::now();
    replicas[leader].child.kill().unwrap();
    replicas[leader].child.wait().unwrap();
    kubectl(&["label", "node", "kwok-node-0", &format!("{NODE_LABEL}=yes"), "--overwrite"]);
    let next = replicas[follower].identity.clone();
    wait_for("the follower to hold the Lease", Duration::from_secs(60), || async { (holder() == next).then_some(()) })
        .await;
    let takeover = killed.elapsed();
    println!("failover: the Lease changed holder {:.1} s after SIGKILL of the leader", takeover.as_secs_f64());
    assert!(takeover < Duration::from_secs(15) + Duration::from_secs(10), "took {takeover:?} (bound: 15 s)");

    let done = wait_for("the new leader to finish the sync", Duration::from_secs(120), || async {
        history().first().filter(|h| h.revision == second && h.result != SyncResult::Running).cloned()
    })
    .await;
    println!("failover: the sync finished {:.1} s after the kill", killed.elapsed().as_secs_f64());
    let _ = cp.kubectl(&["label", "node", "kwok-node-0", &format!("{NODE_LABEL}-")]);
    assert_eq!(done.result, SyncResult::Succeeded, "{done:?}");
    assert_eq!(done.started_at, running.started_at, "the same sync, continued: {done:?}");
    assert!(done.applied.contains(&format!("ConfigMap/{NS}/after")), "{done:?}");
    let h = history();
    let entries: Vec<(&str, SyncResult)> = h.iter().map(|r| (r.revision.as_str(), r.result)).collect();
    assert_eq!(
        entries,
        [(second.as_str(), SyncResult::Succeeded), (first.as_str(), SyncResult::Succeeded)],
        "one entry per sync, none lost"
    );
    assert!(kubectl(&["-n", NS, "get", "configmap", "after", "-o", "name"]).contains("after"));
    let (code, _) = replicas[follower].probe("/healthz").await.unwrap();
    assert_eq!(code, 200);
    let (_, metrics) =
        http_request(replicas[follower].internal, "GET", "/metrics", &[bearer(reader_token())], b"").await;
    for expected in [
        "plumb_kube_requests_total{verb=\"patch\",code=\"200\"}".to_string(),
        format!(
            "plumb_app_info{{app=\"failover\",environment=\"e\",repository=\"r\",revision=\"{second}\",sync_status=\"Synced\""
        ),
        "plumb_app_last_sync_timestamp_seconds{app=\"failover\",result=\"Succeeded\"}".to_string(),
        "plumb_build_info{version=".to_string(),
    ] {
        assert!(metrics.contains(&expected), "{expected} not in:\n{metrics}");
    }
}

/// Eight writers save the status of one application at once, each with a history of
/// its own single entry, all read from an empty store: with resourceVersion
/// preconditions and the merge on conflict, all eight entries are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_status_writes_lose_no_history_entry() {
    let store = plumb::status::store::Store::new(control_plane().client().await.unwrap(), "failover-store");
    store.ensure_namespace().await.unwrap();
    let status = plumb::status::AppStatus { app: "concurrent".into(), ..Default::default() };
    let writes = (0..8).map(|i| {
        let (store, status) = (store.clone(), status.clone());
        tokio::spawn(async move {
            let record = SyncRecord {
                started_at: format!("2026-11-30T12:00:0{i}.000Z"),
                ..SyncRecord::new(format!("rev{i}"), plumb::status::SyncReason::NewRevision)
            };
            store.save(&status, &[record]).await
        })
    });
    for w in futures::future::join_all(writes).await {
        w.unwrap().unwrap();
    }
    let (_, history) = store.load("concurrent").await.unwrap();
    let revisions: Vec<&str> = history.iter().map(|r| r.revision.as_str()).collect();
    assert_eq!(revisions, ["rev7", "rev6", "rev5", "rev4", "rev3", "rev2", "rev1", "rev0"]);
}

/// A replica taking a shard reads its applications' resources with one LIST
/// (`Store::prime`). A copy that another writer made stale since is served to reads,
/// but never written back over the resource: the status write carries the copy's
/// resourceVersion, conflicts, reads again and merges the history.
#[tokio::test]
async fn a_stale_primed_copy_is_read_again_before_its_status_is_written() {
    let client = control_plane().client().await.unwrap();
    let taker = plumb::status::store::Store::new(client.clone(), "failover-primed");
    let other = plumb::status::store::Store::new(client, "failover-primed");
    taker.ensure_namespace().await.unwrap();
    let status = plumb::status::AppStatus { app: "primed".into(), ..Default::default() };
    let record = |rev: &str, second: u32| SyncRecord {
        started_at: format!("2026-11-30T12:00:0{second}.000Z"),
        ..SyncRecord::new(rev.to_string(), plumb::status::SyncReason::NewRevision)
    };
    other.save(&status, &[record("rev0", 0)]).await.unwrap();
    taker.prime(["primed", "never-written"]).await.unwrap();
    // another writer changes the resource after the LIST
    other.save(&status, &[record("rev1", 1)]).await.unwrap();
    let revisions = |h: &[SyncRecord]| h.iter().map(|r| r.revision.clone()).collect::<Vec<_>>();
    let (_, primed) = taker.load("primed").await.unwrap();
    assert_eq!(revisions(&primed), ["rev0"], "the primed copy serves the read");
    taker.save(&status, &[record("rev2", 2)]).await.unwrap();
    let (_, stored) = other.load("primed").await.unwrap();
    assert_eq!(revisions(&stored), ["rev2", "rev1", "rev0"], "the other writer's entry is kept");
    let (_, fresh) = taker.load("primed").await.unwrap();
    assert_eq!(revisions(&fresh), ["rev2", "rev1", "rev0"], "once written, the copy serves no more reads");
    // primed as absent: read as none, and its first save creates the resource
    assert!(taker.find("never-written").await.unwrap().is_none());
    let absent = plumb::status::AppStatus { app: "never-written".into(), ..Default::default() };
    taker.save(&absent, &[record("rev0", 0)]).await.unwrap();
    let (_, created) = other.find("never-written").await.unwrap().unwrap();
    assert_eq!(revisions(&created), ["rev0"]);
}
