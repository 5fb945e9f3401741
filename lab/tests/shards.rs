//! `plumb serve --shards N` with several replicas (processes) against one control plane:
//! every application is run by exactly one replica, a killed replica's shards pass to
//! the others, a joining replica takes its share without two replicas writing one
//! application, a replica whose clock is off neither loses nor steals a shard, and a
//! replica cut off from the API server stops writing before its Lease can expire and
//! writes nothing after the network comes back, and a shard whose Lease is deleted under
//! its holder runs again once taken back (and a replica stopped deletes its membership);
//! a pass asked for while a renew is late runs once the renew lands; Git never writes a
//! `--lease-namespace` of its own; a policy reload moves no shard; a shard taken over
//! keeps the commit its previous holder applied.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use plumb::{plan::shards::shard_of, status::AppStatus};
use support::{Lab, bearer, control_plane, http_request, plumb_cli, reader_token, wait_for};

/// Seconds a shard's Lease lasts without renewal in these tests (`--lease-duration`).
const DURATION: u64 = 6;

/// A `plumb serve --shards N` process, killed on drop.
struct Replica {
    identity: String,
    child: Child,
    log: PathBuf,
    /// The internal listener (metrics).
    internal: SocketAddr,
    /// The public listener (webhooks).
    public: SocketAddr,
}

fn free_addr() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string()
}

impl Replica {
    fn start(identity: &str, policy: &Path, dir: &Path, shards: u32, extra: &[&str], kubeconfig: &Path) -> Replica {
        let log = dir.join(format!("{identity}.log"));
        let (internal, public) = (free_addr(), free_addr());
        let child = Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args(["serve", "--leader-elect", "--identity", identity, "--shards", &shards.to_string()])
            .args(["--lease-duration", &DURATION.to_string(), "--lease-grace", "2", "--log-format", "json"])
            .args(["--listen", &public, "--internal-listen", &internal, "--probe-listen", &free_addr()])
            .args(extra)
            .arg("--config")
            .arg(policy)
            .arg("--cache-dir")
            .arg(dir.join(format!("cache-{identity}")))
            .env("KUBECONFIG", kubeconfig)
            .env("PLUMB_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Replica {
            identity: identity.into(),
            child,
            log,
            internal: internal.parse().unwrap(),
            public: public.parse().unwrap(),
        }
    }

    /// The JSON log lines this replica wrote so far.
    fn lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The applications whose objects this replica wrote (its `plumb::apply` lines:
    /// created, applied, deleted), with how many times.
    fn object_writes(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for l in self.lines() {
            if l["target"].as_str().is_some_and(|t| t.starts_with("plumb::apply"))
                && let Some(app) = l["app"].as_str()
            {
                *out.entry(app.to_string()).or_default() += 1;
            }
        }
        out
    }

    /// The dry-runs this replica asked for so far (`plumb_kube_requests_total`).
    async fn dry_runs(&self) -> f64 {
        let (_, text) = http_request(self.internal, "GET", "/metrics", &[bearer(reader_token())], b"").await;
        let prefix = "plumb_kube_requests_total{verb=\"dryrun\",";
        text.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
    }

    fn logged(&self, part: &str) -> bool {
        self.lines().iter().any(|l| message_has(l, part))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A fleet policy of `apps` applications (one ConfigMap each, `app-NN/`) in
/// `status_ns`, polled every hour (passes come from the replicas, not the poller).
fn fleet(lab: &Lab, status_ns: &str, ns: &str, apps: usize) -> PathBuf {
    for i in 0..apps {
        let cm = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i:02}, namespace: {ns}}}\ndata: {{k: v}}\n"
        );
        lab.repo.write(&format!("app-{i:02}/cm.yaml"), &cm).unwrap();
    }
    lab.repo.commit("fleet").unwrap();
    let mut text = format!(
        "settings: {{statusNamespace: {status_ns}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\napplications:\n",
        lab.url
    );
    for i in 0..apps {
        text.push_str(&format!(
            "  - {{name: app-{i:02}, repository: r, revision: main, path: app-{i:02}, namespace: {ns}, environment: e}}\n"
        ));
    }
    lab.policy("policy.yaml", &text)
}

/// Every application resource's status in `status_ns`, by name.
fn statuses(status_ns: &str) -> BTreeMap<String, AppStatus> {
    let text =
        control_plane().kubectl(&["-n", status_ns, "get", "applications.plumb.dev", "-o", "json"]).unwrap_or_default();
    let list: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|o| {
            let name = o["metadata"]["name"].as_str()?.to_string();
            Some((name, serde_json::from_value(o["status"].clone()).ok()?))
        })
        .collect()
}

/// The replica that last reconciled each application, once every one of `apps` is
/// Synced and named a reconciler among `replicas`.
fn reconcilers(status_ns: &str, apps: usize, replicas: &[&str]) -> Option<BTreeMap<String, (String, u32)>> {
    let all = statuses(status_ns);
    let out: BTreeMap<String, (String, u32)> = all
        .iter()
        .filter(|(_, s)| s.sync == plumb::compare::SyncStatus::Synced)
        .filter_map(|(n, s)| s.reconciler.as_ref().map(|r| (n.clone(), (r.replica.clone(), r.shard))))
        .filter(|(_, (r, _))| replicas.contains(&r.as_str()))
        .collect();
    (out.len() == apps).then_some(out)
}

/// Each shard's replica, once one replica last ran all of a shard's applications
/// (`None` while a shard's statuses name two, as while it changes hands); each
/// application's shard is its rendezvous shard.
fn shard_owners(by: &BTreeMap<String, (String, u32)>, shards: u32) -> Option<BTreeMap<u32, String>> {
    let mut owners: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for (app, (replica, shard)) in by {
        assert_eq!(*shard, shard_of(app, shards), "{app}");
        owners.entry(*shard).or_default().insert(replica.clone());
    }
    owners.into_iter().map(|(s, r)| (r.len() == 1).then(|| (s, r.into_iter().next().unwrap()))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_shards_take_over_a_killed_one_and_hand_shards_to_a_new_one() {
    const STATUS: &str = "shards-status";
    const APPS: usize = 60;
    let lab = Lab::new("shards");
    let policy = fleet(&lab, STATUS, "shards-app", APPS);
    let dir = lab.tmp.path().to_path_buf();
    let kubeconfig = control_plane().kubeconfig.clone();
    let start = |id: &str| Replica::start(id, &policy, &dir, 6, &[], &kubeconfig);
    let mut replicas = vec![start("replica-a"), start("replica-b"), start("replica-c")];
    let three = ["replica-a", "replica-b", "replica-c"];
    let started = Instant::now();
    let by = wait_for("60 applications Synced, each named by its reconciler", Duration::from_secs(180), || async {
        reconcilers(STATUS, APPS, &three)
    })
    .await;
    println!("shards: 60 applications Synced over 3 replicas {:.1} s after start", started.elapsed().as_secs_f64());
    // two shards each, whatever the order they started in (a first replica alone may
    // take all six, and hands them over as the others join)
    let balanced = wait_for("two shards per replica", Duration::from_secs(60), || async {
        let owners = shard_owners(&reconcilers(STATUS, APPS, &three)?, 6)?;
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for r in owners.values() {
            *per.entry(r.clone()).or_default() += 1;
        }
        (owners.len() == 6 && per.values().all(|n| *n == 2)).then_some(owners)
    })
    .await;
    // every application's objects were written by one replica only
    let mut writers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &replicas {
        for app in r.object_writes().into_keys() {
            writers.entry(app).or_default().insert(r.identity.clone());
        }
    }
    assert_eq!(writers.len(), APPS, "{writers:?}");
    for (app, w) in &writers {
        assert_eq!(w.len(), 1, "{app} written by {w:?} ({by:?})");
    }
    // a pass that synced seals nothing (it compared before its writes); the pass that
    // confirms it (settling, within 5 s) does: the takeover below trusts those seals
    wait_for("every application's last judgement sealed", Duration::from_secs(60), || async {
        (statuses(STATUS).values().filter(|s| !s.synced_seal.is_empty()).count() == APPS).then_some(())
    })
    .await;
    let writes_before: Vec<BTreeMap<String, usize>> = replicas.iter().map(Replica::object_writes).collect();
    let mut dry_runs_before = BTreeMap::new();
    for r in &replicas {
        dry_runs_before.insert(r.identity.clone(), r.dry_runs().await);
    }

    // SIGKILL one replica: its two shards pass to the two others
    let victim = balanced[&0].clone();
    let killed = Instant::now();
    replicas.iter_mut().find(|r| r.identity == victim).unwrap().kill();
    let survivors: Vec<&str> = three.iter().copied().filter(|r| *r != victim).collect();
    wait_for("the killed replica's applications reconciled by the others", Duration::from_secs(60), || async {
        reconcilers(STATUS, APPS, &survivors)
    })
    .await;
    println!(
        "shards: SIGKILL of {victim}: its applications Synced under the others {:.1} s later (Lease duration {DURATION} s)",
        killed.elapsed().as_secs_f64()
    );
    for (r, before) in replicas.iter().zip(&writes_before).filter(|(r, _)| r.identity != victim) {
        assert_eq!(&r.object_writes(), before, "{}: a takeover writes no object (all were Synced)", r.identity);
        // the killed replica's passes sealed their judgement: nothing changed, no dry-run
        let dry_runs = r.dry_runs().await;
        assert_eq!(dry_runs, dry_runs_before[&r.identity], "{}: a takeover dry-runs no unchanged object", r.identity);
    }

    // a fourth replica joins (and the killed one is gone): 3 live replicas, 2 shards each
    replicas.push(start("replica-d"));
    let live: Vec<&str> = survivors.iter().copied().chain(["replica-d"]).collect();
    wait_for("the new replica to run two shards", Duration::from_secs(90), || async {
        let owners = shard_owners(&reconcilers(STATUS, APPS, &live)?, 6)?;
        (owners.values().filter(|r| *r == "replica-d").count() == 2).then_some(())
    })
    .await;
    for r in &replicas {
        if r.identity == victim {
            continue;
        }
        let before = writes_before.iter().zip(&replicas).find(|(_, x)| x.identity == r.identity).map(|(w, _)| w);
        assert_eq!(
            Some(&r.object_writes()),
            before.or(Some(&BTreeMap::new())),
            "{}: no object written again",
            r.identity
        );
    }
}

/// The skewed replica writes `renewTime`s 30 s in the past; the other judges expiry by
/// when it saw the record change, so it never takes the skewed replica's shard, and the
/// skewed replica never takes the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_clock_is_30_s_off_neither_loses_nor_takes_a_shard() {
    const STATUS: &str = "shards-skew-status";
    let lab = Lab::new("shards-skew");
    let policy = fleet(&lab, STATUS, "shards-skew-app", 8);
    let dir = lab.tmp.path().to_path_buf();
    let kubeconfig = control_plane().kubeconfig.clone();
    let _straight = Replica::start("straight", &policy, &dir, 2, &[], &kubeconfig);
    let _skewed = Replica::start("skewed", &policy, &dir, 2, &["--lease-clock-offset=-30"], &kubeconfig);
    let owners = wait_for("one shard each", Duration::from_secs(90), || async {
        let owners = shard_owners(&reconcilers(STATUS, 8, &["straight", "skewed"])?, 2)?;
        (owners.len() == 2 && owners.values().collect::<BTreeSet<_>>().len() == 2).then_some(owners)
    })
    .await;
    let transitions = || {
        (0..2)
            .map(|s| {
                let lease = format!("plumb-shard-{s}");
                let what = "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}";
                control_plane().kubectl(&["-n", STATUS, "get", "lease", &lease, "-o", what]).unwrap_or_default()
            })
            .collect::<Vec<_>>()
    };
    let before = transitions();
    // five Lease durations: any judgement by renewTime would have expired the skewed
    // replica's Lease (renewed "30 s ago") at once
    tokio::time::sleep(Duration::from_secs(5 * DURATION)).await;
    assert_eq!(transitions(), before, "no shard changed hands ({owners:?})");
    let owners_after = shard_owners(&reconcilers(STATUS, 8, &["straight", "skewed"]).unwrap(), 2).unwrap();
    assert_eq!(owners_after, owners);
}

/// A TCP proxy in front of the API server that can be cut (every connection dropped,
/// new ones refused) and opened again.
struct Cut {
    addr: SocketAddr,
    closed: Arc<Mutex<bool>>,
    conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Cut {
    async fn start(upstream: SocketAddr) -> Cut {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let closed = Arc::new(Mutex::new(false));
        let conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (c, k) = (closed.clone(), conns.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                if *c.lock().unwrap() {
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
                k.lock().unwrap().push(task);
            }
        });
        Cut { addr, closed, conns }
    }

    fn cut(&self) {
        *self.closed.lock().unwrap() = true;
        for t in self.conns.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    fn open(&self) {
        *self.closed.lock().unwrap() = false;
    }
}

/// A kubeconfig like the control plane's, reaching the API server through `via`.
fn kubeconfig_via(via: SocketAddr, dir: &Path) -> (PathBuf, SocketAddr) {
    let cp = control_plane();
    let text = std::fs::read_to_string(&cp.kubeconfig).unwrap();
    let server = cp.server.trim_start_matches("https://").to_string();
    let upstream: SocketAddr = server.parse().unwrap();
    let path = dir.join("via-proxy.kubeconfig");
    std::fs::write(&path, text.replace(&server, &via.to_string())).unwrap();
    (path, upstream)
}

/// The field `field` (RFC 3339) of the first line of `r`'s log whose message contains
/// `part`.
fn logged_at(r: &Replica, part: &str, field: &str) -> Option<jiff::Timestamp> {
    r.lines().iter().find(|l| message_has(l, part)).and_then(|l| l[field].as_str()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_stops_writing_before_its_lease_can_expire_and_writes_nothing_after() {
    const STATUS: &str = "shards-cut-status";
    let lab = Lab::new("shards-cut");
    let policy = fleet(&lab, STATUS, "shards-cut-app", 4);
    let dir = lab.tmp.path().to_path_buf();
    let upstream: SocketAddr = control_plane().server.trim_start_matches("https://").parse().unwrap();
    let proxy = Cut::start(upstream).await;
    let (via, _) = kubeconfig_via(proxy.addr, &dir);
    let cut_off = Replica::start("cut-off", &policy, &dir, 1, &[], &via);
    wait_for("the replica behind the proxy to run every application", Duration::from_secs(90), || async {
        reconcilers(STATUS, 4, &["cut-off"])
    })
    .await;
    let other = Replica::start("other", &policy, &dir, 1, &[], &control_plane().kubeconfig);
    // the other replica is a member, holding nothing
    wait_for("the other replica's membership", Duration::from_secs(30), || async {
        control_plane().kubectl(&["-n", STATUS, "get", "lease", "plumb-member-other", "-o", "name"]).ok()
    })
    .await;
    let cut_at = jiff::Timestamp::now();
    proxy.cut();
    wait_for("the other replica to take the shard over", Duration::from_secs(60), || async {
        reconcilers(STATUS, 4, &["other"])
    })
    .await;
    // when the renew deadline passed (logged once the replica noticed), and when the
    // other replica's take-over landed
    let stopped =
        logged_at(&cut_off, "its writes stopped", "stopped_at").expect("the cut-off replica stopped its writes");
    let taken = logged_at(&other, "holding the shard", "timestamp").expect("the other replica took the shard");
    println!(
        "shards: cut off at {cut_at}; writes stopped at {stopped} ({:.1} s later); taken over at {taken}",
        cut_at.duration_until(stopped).as_secs_f64()
    );
    assert!(stopped < taken, "the cut-off replica stopped ({stopped}) before the shard was taken ({taken})");
    // a new commit for the new holder, then the network comes back
    lab.repo
        .write(
            "app-00/extra.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: shards-cut-app}\n",
        )
        .unwrap();
    lab.repo.commit("extra").unwrap();
    let writes_before = cut_off.object_writes();
    proxy.open();
    tokio::time::sleep(Duration::from_secs(3 * DURATION)).await;
    assert_eq!(holder(STATUS, "plumb"), "other", "the healed replica did not take the Lease back with a stale record");
    assert_eq!(cut_off.object_writes(), writes_before, "nothing the cut-off replica queued landed");
    let all = statuses(STATUS);
    assert!(all.values().all(|s| s.reconciler.as_ref().is_some_and(|r| r.replica == "other")), "{all:?}");
    assert!(!other.logged("lost the shard"), "the new holder kept it");
}

/// A shard's Lease deleted under its holder (an operator's `kubectl delete lease`): the
/// holder's renew fails, and it takes the shard again in the same round under a new
/// hold — whose applications must then run again (set up in the new hold), not wait for
/// a set-up that never comes while the replica renews a shard it runs nothing of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_whose_lease_is_deleted_under_its_holder_is_taken_again_and_runs() {
    const STATUS: &str = "shards-retake-status";
    const NS: &str = "shards-retake-app";
    let lab = Lab::new("shards-retake");
    let policy = fleet(&lab, STATUS, NS, 4);
    let dir = lab.tmp.path().to_path_buf();
    let mut solo = Replica::start("solo", &policy, &dir, 2, &[], &control_plane().kubeconfig);
    wait_for("the replica to run every application", Duration::from_secs(90), || async {
        reconcilers(STATUS, 4, &["solo"])
    })
    .await;
    let app = (0..4).map(|i| format!("app-{i:02}")).find(|a| shard_of(a, 2) == 0).expect("an application of shard 0");
    let cm = format!("cm-{}", app.trim_start_matches("app-"));
    control_plane().kubectl(&["-n", STATUS, "delete", "lease", "plumb-shard-0"]).unwrap();
    wait_for("the replica to take shard 0 again", Duration::from_secs(30), || async {
        let taken = solo.lines().iter().filter(|l| l["shard"] == 0 && message_has(l, "holding the shard")).count();
        (solo.logged("lost the shard") && taken >= 2).then_some(())
    })
    .await;
    // a hand change of that shard's application: healed only if its passes run
    control_plane().kubectl(&["-n", NS, "delete", "configmap", &cm]).unwrap();
    wait_for(&format!("{app}'s ConfigMap {cm} made again"), Duration::from_secs(60), || async {
        control_plane().kubectl(&["-n", NS, "get", "configmap", &cm, "-o", "name"]).ok()
    })
    .await;
    // stopped (SIGTERM): its membership Lease is deleted, its shards' released
    let member = "plumb-member-solo";
    assert!(control_plane().kubectl(&["-n", STATUS, "get", "lease", member, "-o", "name"]).is_ok());
    let term = Command::new("kill").args(["-TERM", &solo.child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while solo.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the replica did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(control_plane().kubectl(&["-n", STATUS, "get", "lease", member, "-o", "name"]).is_err(), "deleted");
    assert_eq!(holder(STATUS, "plumb-shard-0"), "", "released");
}

/// The `holderIdentity` of Lease `name` in `ns` (empty when released).
fn holder(ns: &str, name: &str) -> String {
    control_plane().kubectl(&["-n", ns, "get", "lease", name, "-o", "jsonpath={.spec.holderIdentity}"]).unwrap()
}

/// Whether the JSON log line `line`'s message contains `part`.
fn message_has(line: &serde_json::Value, part: &str) -> bool {
    line["message"].as_str().is_some_and(|m| m.contains(part))
}

/// `plumb serve`'s client, through kube's request buffer and retries, against the real
/// API server: a write whose fence closed is refused before it is sent (the object is
/// unchanged), while reads under that fence and writes under an open one go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_client_sends_a_write_only_while_its_fence_is_open() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{
        Api,
        api::{Patch, PatchParams, PostParams},
    };
    use plumb::fence::{Fence, Hold, Holds, within};

    let ns = "shards-fenced-client";
    support::kubectl(&["create", "namespace", ns]);
    let config = plumb::cluster::config(Some(&control_plane().kubeconfig)).await.unwrap();
    let client = plumb::kube_metrics::client(config, Arc::new(plumb::metrics::Metrics::default())).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let holds = Arc::new(Holds::with_deadline(Duration::from_secs(7)));
    holds.set(0, Hold { generation: 1, renewed_at: plumb::clock::Instant::now(), transitions: 0 });
    let fence = Some(Fence::of("r".into(), 0, 1, holds.clone()).unwrap());
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "c"}, "data": {"k": "1"}})).unwrap();
    within(fence.clone(), api.create(&PostParams::default(), &cm)).await.expect("an open fence");
    holds.end(0);
    let patch = Patch::Merge(serde_json::json!({"data": {"k": "2"}}));
    let refused = within(fence.clone(), api.patch("c", &PatchParams::default(), &patch)).await;
    let e = refused.expect_err("a closed fence");
    assert!(e.to_string().contains("dropped"), "{e}");
    let read = within(fence.clone(), api.get("c")).await.expect("a read under a closed fence");
    assert_eq!(read.data.unwrap()["k"], "1", "the refused write never reached the API server");
}

/// With the Leases in a namespace of their own (`settings.leaseNamespace`, repeated by
/// `--lease-namespace`), an application whose Git writes there (here a Lease of the same
/// name as the replica's, held by an intruder for an hour, adopted by its annotation) is
/// refused by its boundary as in plumb's own namespace, by the replica and by a person's
/// `plumb sync --local`: the replica keeps its Lease and runs the other applications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_never_writes_the_lease_namespace() {
    const STATUS: &str = "shards-leasens-status";
    const LEASES: &str = "shards-leasens-leases";
    const NS: &str = "shards-leasens-app";
    let lab = Lab::new("shards-leasens");
    control_plane().kubectl(&["create", "namespace", LEASES]).unwrap();
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let forged = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: plumb, namespace: {LEASES}, annotations: {{plumb.dev/sync-options: Adopt=true}}}}\nspec: {{holderIdentity: intruder, leaseDurationSeconds: 3600, acquireTime: '{now}', renewTime: '{now}'}}\n"
    );
    lab.repo.write("intruder/lease.yaml", &forged).unwrap();
    lab.repo
        .write("web/cm.yaml", &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {NS}}}\n"))
        .unwrap();
    lab.repo.commit("an application deploying to the Leases' namespace").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: {STATUS}, leaseNamespace: {LEASES}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\napplications:\n  - {{name: web, repository: r, revision: main, path: web, namespace: {NS}, environment: e}}\n  - {{name: intruder, repository: r, revision: main, path: intruder, namespace: {LEASES}, environment: e}}\n",
            lab.url
        ),
    );
    let dir = lab.tmp.path().to_path_buf();
    let replica =
        Replica::start("keeper", &policy, &dir, 1, &["--lease-namespace", LEASES], &control_plane().kubeconfig);
    let refused = wait_for("the intruder's sync to be refused", Duration::from_secs(90), || async {
        let all = statuses(STATUS);
        let web_synced = all.get("web").is_some_and(|s| s.sync == plumb::compare::SyncStatus::Synced);
        let rec = all.get("intruder")?.last_sync.clone()?;
        (web_synced && rec.result == plumb::status::SyncResult::Refused).then_some(rec.message)
    })
    .await;
    assert!(
        refused.contains(&format!(
            "namespace \"{LEASES}\" holds plumb's Leases (settings.leaseNamespace or --lease-namespace)"
        )),
        "{refused}"
    );
    // a few renews later: still the replica's, never lost
    tokio::time::sleep(Duration::from_secs(DURATION)).await;
    assert_eq!(holder(LEASES, "plumb"), "keeper");
    assert!(!replica.logged("lost the shard"), "the replica kept its Lease");
    assert!(!replica.object_writes().contains_key("intruder"), "{:?}", replica.object_writes());
    // a person's sync from their machine reads settings.leaseNamespace: refused too, and
    // it sees the serving replica there
    let (code, out, err) = plumb_cli(&["sync", "intruder", "--local", "-c", policy.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("holds plumb's Leases (settings.leaseNamespace or --lease-namespace)"),
        "{out}\n{err}"
    );
    assert!(err.contains("plumb server keeper serves namespace"), "{err}");
    assert_eq!(holder(LEASES, "plumb"), "keeper");
}

/// A pass asked for while the replica's fence is closed for now — its renews late, not
/// lost: the process was stopped past the renew deadline but not past the Lease, like a
/// long pause of a VM — is not lost: it runs once the next renew opens the fence again
/// (here a signed push delivered while the process was stopped; the poller's next look
/// is minutes away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_asked_for_while_a_renew_is_late_runs_once_the_renew_lands() {
    const STATUS: &str = "shards-late-status";
    const NS: &str = "shards-late-app";
    let lab = Lab::new("shards-late");
    let policy = fleet(&lab, STATUS, NS, 1);
    let text = std::fs::read_to_string(&policy).unwrap();
    let text = text.replacen(
        &format!("url: {}}}", lab.url),
        &format!("url: {}, webhookSecretFile: webhook-secret}}", lab.url),
        1,
    );
    std::fs::write(&policy, text).unwrap();
    let mut before = lab.repo.commit("start").unwrap();
    let dir = lab.tmp.path().to_path_buf();
    let replica = Replica::start("late", &policy, &dir, 1, &[], &control_plane().kubeconfig);
    wait_for("the replica to run the application", Duration::from_secs(90), || async {
        reconcilers(STATUS, 1, &["late"])
    })
    .await;
    let pid = replica.child.id().to_string();
    let signal = |s: &str| assert!(Command::new("kill").args([s, &pid]).status().unwrap().success());
    // the push's pass meets the closed fence only when the process, once resumed,
    // reads the delivery before its renew is answered (the API server writes etcd
    // first): most often; tried up to five times
    for k in 0..5 {
        let cm = format!("late-{k}");
        lab.repo
            .write(
                &format!("app-00/{cm}.yaml"),
                &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {cm}, namespace: {NS}}}\n"),
            )
            .unwrap();
        let after = lab.repo.commit(&cm).unwrap();
        let (headers, body) = lab.gitea_push(&lab.url, &before, &after, &lab.secret);
        before = after;
        signal("-STOP");
        // past the renew deadline (DURATION - grace = 4 s), within the Lease's 6 s
        tokio::time::sleep(Duration::from_millis(500)).await;
        let public = replica.public;
        let delivered =
            tokio::spawn(async move { http_request(public, "POST", "/api/webhook", &headers, &body).await.0 });
        tokio::time::sleep(Duration::from_millis(4_500)).await;
        signal("-CONT");
        assert!((200..300).contains(&delivered.await.unwrap()), "the push was taken");
        wait_for(&format!("ConfigMap {cm} applied by the push's pass"), Duration::from_secs(20), || async {
            control_plane().kubectl(&["-n", NS, "get", "configmap", &cm, "-o", "name"]).ok()
        })
        .await;
        if replica.logged("its pass is asked again in a second") {
            assert!(!replica.logged("lost the shard"), "paused, not lost");
            return;
        }
    }
    panic!("the push's pass never met the closed fence in five tries");
}

/// A policy reload (here one that adds an application) lets no shard go: each shard's
/// Lease keeps its holder and its hold (`leaseTransitions`, `acquireTime`) through both
/// replicas' reloads, no application changes replica, and the new application runs.
/// (A reload that restarted the election released every shard: the other replica took
/// them at once and handed them back later, and every application moved twice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_reload_moves_no_shard() {
    const STATUS: &str = "shards-reload-status";
    const NS: &str = "shards-reload-app";
    let lab = Lab::new("shards-reload");
    let full = fleet(&lab, STATUS, NS, 5);
    let text = std::fs::read_to_string(&full).unwrap();
    let four: String = text.lines().filter(|l| !l.contains("name: app-04,")).map(|l| format!("{l}\n")).collect();
    let policy = lab.policy("four.yaml", &four);
    let dir = lab.tmp.path().to_path_buf();
    let kubeconfig = &control_plane().kubeconfig;
    let reload = ["--reload-every", "1"];
    let a = Replica::start("ra", &policy, &dir, 2, &reload, kubeconfig);
    let b = Replica::start("rb", &policy, &dir, 2, &reload, kubeconfig);
    let before = wait_for("both replicas to run a shard each", Duration::from_secs(90), || async {
        let by = reconcilers(STATUS, 4, &["ra", "rb"])?;
        let owners = shard_owners(&by, 2)?;
        (owners.len() == 2 && owners[&0] != owners[&1]).then_some(by)
    })
    .await;
    let hold = |shard: u32| {
        let path = "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions} {.spec.acquireTime}";
        control_plane().kubectl(&["-n", STATUS, "get", "lease", &format!("plumb-shard-{shard}"), "-o", path]).unwrap()
    };
    let holds = [hold(0), hold(1)];

    std::fs::write(&policy, &text).unwrap();
    wait_for("app-04 Synced after the reload", Duration::from_secs(90), || async {
        reconcilers(STATUS, 5, &["ra", "rb"])
    })
    .await;
    let reloads = |r: &Replica| r.lines().iter().filter(|l| message_has(l, "plumb serving")).count();
    wait_for("both replicas serving the second policy", Duration::from_secs(30), || async {
        (reloads(&a) == 2 && reloads(&b) == 2).then_some(())
    })
    .await;
    // time for a shard let go to be taken by the other replica, and handed back
    tokio::time::sleep(Duration::from_secs(DURATION)).await;
    let after = reconcilers(STATUS, 5, &["ra", "rb"]).expect("every application Synced");
    assert_eq!([hold(0), hold(1)], holds, "the same holder and hold of each shard");
    for (app, (replica, shard)) in &before {
        assert_eq!(after[app], (replica.clone(), *shard), "{app} stayed where it ran");
    }
    assert!(!a.logged("lost the shard") && !b.logged("lost the shard"));
    for r in [&a, &b] {
        let taken = r.lines().iter().filter(|l| message_has(l, "holding the shard")).count();
        assert_eq!(taken, 1, "{} took one shard, once", r.identity);
    }
}

/// A replica taking over a shard reads refs asked for after the take, not the last
/// ones it read for its own shards: a push the killed holder applied is not rolled
/// back by the survivor, whose own refs (from its start, the next poll an hour away)
/// still name the commit before it. The take's passes share one such advertisement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_taken_over_keeps_the_commit_its_holder_applied() {
    const STATUS: &str = "shards-refs-status";
    const NS: &str = "shards-refs-app";
    let lab = Lab::new("shards-refs");
    let policy = fleet(&lab, STATUS, NS, 4);
    let dir = lab.tmp.path().to_path_buf();
    let kubeconfig = &control_plane().kubeconfig;
    let mut replicas = [
        Replica::start("refs-a", &policy, &dir, 2, &[], kubeconfig),
        Replica::start("refs-b", &policy, &dir, 2, &[], kubeconfig),
    ];
    let by = wait_for("both replicas to run a shard each", Duration::from_secs(90), || async {
        let by = reconcilers(STATUS, 4, &["refs-a", "refs-b"])?;
        let owners = shard_owners(&by, 2)?;
        (owners.len() == 2 && owners[&0] != owners[&1]).then_some(by)
    })
    .await;
    let holder = by["app-00"].0.clone();
    let (holder_at, survivor_at) = if replicas[0].identity == holder { (0, 1) } else { (1, 0) };
    let survivor_lines = replicas[survivor_at].lines().len();

    // a commit the holder applies, asked by a refresh of app-00 alone: the survivor
    // reads no refs meanwhile (a push would name its applications too)
    let cm =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-00, namespace: {NS}}}\ndata: {{k: pushed}}\n");
    lab.repo.write("app-00/cm.yaml", &cm).unwrap();
    let after = lab.repo.commit("pushed").unwrap();
    let (code, _, err) = plumb_cli(&["refresh", "app-00", "-n", STATUS, "--timeout", "60s"]);
    assert_eq!(code, 0, "{err}");
    let value = || control_plane().kubectl(&["-n", NS, "get", "configmap", "cm-00", "-o", "jsonpath={.data.k}"]);
    wait_for("the new commit applied by the holder", Duration::from_secs(30), || async {
        let s = statuses(STATUS).remove("app-00")?;
        (value().ok()? == "pushed" && s.synced_revision == after && s.sync == plumb::compare::SyncStatus::Synced)
            .then_some(())
    })
    .await;

    // the survivor read nothing new meanwhile (its log: no pass since)
    let since: Vec<_> = replicas[survivor_at].lines().into_iter().skip(survivor_lines).collect();
    assert!(!since.iter().any(|l| message_has(l, "pass")), "{since:#?}");
    replicas[holder_at].kill();
    let survivor = replicas[survivor_at].identity.clone();
    wait_for("the survivor to pass app-00", Duration::from_secs(60), || async {
        let s = statuses(STATUS).remove("app-00")?;
        s.reconciler.is_some_and(|r| r.replica == survivor).then_some(())
    })
    .await;
    // time for a pass of stale refs to land, were there one
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = statuses(STATUS).remove("app-00").unwrap();
    assert_eq!((status.revision.as_str(), status.synced_revision.as_str()), (after.as_str(), after.as_str()));
    assert_eq!(value().unwrap(), "pushed", "the survivor applied nothing older");
    assert!(reconcilers(STATUS, 4, &[survivor.as_str()]).is_some(), "every application Synced under the survivor");
    let writes = replicas[survivor_at].object_writes();
    assert!(!writes.contains_key("app-00"), "the takeover wrote nothing of app-00: {writes:?}");
}
