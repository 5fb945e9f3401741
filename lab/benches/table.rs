//! Benchmark: every figure of plumb's performance targets (P1–P4, P6–P8; P5's webhook
//! figures come from `benches/webhook.rs`, which needs no cluster), each next to its
//! alternative and the ratio, from one run on one lab control plane (etcd +
//! kube-apiserver + controller-manager + scheduler on loopback, fake nodes).
//!
//! - **P1** signed push → 50 objects applied (p50): plumb's webhook + pass, against
//!   MISSION.md's `sync.sh` (`git pull`, `kubectl diff --server-side`, `kubectl apply
//!   --server-side`); also the time from receiving the push to the start of its pass.
//! - **P2** no-op pass over 1,000 objects (600 ConfigMaps, 200 Deployments, 200
//!   Services) with the watch cache, once all are synced and Healthy (their controllers
//!   done with them) and requests are read from a watch as in `plumb serve`: median
//!   time, API requests, dry-runs, passes that took the comparisons of the pass before;
//!   against `kubectl diff --server-side`.
//! - **P3** initial sync of the same 1,000 objects: plumb's first pass, against a raw
//!   client doing only the server-side applies with plumb's concurrency (16), and
//!   `kubectl apply --server-side`.
//! - **P4** RSS of a `plumb serve` process (the product's binary): 10 applications ×
//!   1,000 ConfigMaps after their first sync, then over a soak with selfHeal churn (a
//!   hand edit every second, reverted); 1,000 applications × 10 ConfigMaps.
//! - **P6** a repository with 10,000 commits and 20,000 files: detecting a new commit,
//!   fetching one, the bytes fetched; the pass over an application whose path did not
//!   change.
//! - **P7** 1,000 applications over 10 repositories (10 ConfigMaps each): the first full
//!   sync, then a poll round with no change as `plumb serve` makes it (each repository's
//!   poller asks once, every application's poll pass reads those refs): CPU seconds,
//!   API requests, writes, Git requests per repository.
//! - **P8** 3,000 applications × 10 ConfigMaps (`SHARD_APPS`) served by one `plumb
//!   serve`, and side by side by 3 replicas with `--shards 6`: time to all Synced, RSS
//!   per replica, the memory per application. The single replica runs once before the
//!   three and once after (other namespaces each time), and its figures are the mean of
//!   the two: a run meets the objects the runs before it left on the control plane.
//!   Then SIGKILL of one replica: time until
//!   its applications are Synced under the others, with the object writes and
//!   dry-runs of the takeover.
//! - **P9** a pull request previewed in a real Gitea: 100 applications × 50 ConfigMaps
//!   in one repository, a pull request changing one ConfigMap of one of them, pushed to
//!   `PREVIEWS` (5) times: push → plumb's comment edited (p50), plumb's own part
//!   (delivery read → comment and status posted), API requests and dry-runs per
//!   preview; against `kubectl diff --server-side` of that application's 50 objects.
//!
//! Prints one Markdown table at the end (rows of `BENCH_ROWS`, a file, are appended:
//! `scripts/bench` puts the webhook bench's there). Run: `scripts/bench`, or this part
//! alone: `cargo bench -p plumb-lab --bench table`. Knobs (environment): `PUSHES` (10),
//! `PASSES` (10), `SOAK_SECS` (120), `SHARD_APPS` (3000), `PREVIEWS` (5), `SKIP` (comma list of P1…P9
//! to leave out),
//! `SERVE_WRAP` (a profiler command the `plumb serve` of P4 runs under, e.g.
//! `heaptrack -o /tmp/p4`; with `--features system-allocator`, as heaptrack sees only
//! malloc. plumb is then killed with SIGKILL at the end: the profile's "leaked" memory
//! is the heap it held at idle, its peak that of the first sync), `P8_LOG` (the
//! `PLUMB_LOG` of P8's replicas: with `plumb::kube_requests=trace` P8 prints each
//! replica's API requests by shape), `P8_PPROF` (a directory: CPU profiles of the API
//! server over the first 80 s of P8's three runs, `one.pprof`, `three.pprof` and
//! `one-after.pprof`, for `go tool pprof -top`), `P8_ONE_SHARDS` (a number: P8's single
//! replica runs with `--leader-elect --shards` that many, to tell what the election
//! costs from what the split does), `P8_PER_NAMESPACE` (P8's applications per
//! destination namespace, 100).
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams},
};
use plumb::{
    compare::SyncStatus,
    health::HealthStatus,
    poller::Poller,
    reconcile::{Context, Mode},
    scheduler::Cause,
};
use serde_json::{Value, json};
use support::*;

/// One row of the table.
struct Row {
    id: &'static str,
    figure: String,
    plumb: String,
    alternative: String,
    ratio: String,
    target: String,
    met: Option<bool>,
}

#[derive(Default)]
struct Table(Vec<Row>);

impl Table {
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        id: &'static str,
        figure: impl Into<String>,
        plumb: impl Into<String>,
        alternative: impl Into<String>,
        ratio: impl Into<String>,
        target: impl Into<String>,
        met: Option<bool>,
    ) {
        let r = Row {
            id,
            figure: figure.into(),
            plumb: plumb.into(),
            alternative: alternative.into(),
            ratio: ratio.into(),
            target: target.into(),
            met,
        };
        eprintln!("[table] {} | {} | {} | {} | {} | {}", r.id, r.figure, r.plumb, r.alternative, r.ratio, r.target);
        self.0.push(r);
    }

    fn print(&self) {
        let mut rows: Vec<[String; 7]> = self
            .0
            .iter()
            .map(|r| {
                let verdict = match r.met {
                    Some(true) => "met",
                    Some(false) => "NOT met",
                    None => "—",
                };
                [
                    r.id.to_string(),
                    r.figure.clone(),
                    r.plumb.clone(),
                    r.alternative.clone(),
                    r.ratio.clone(),
                    r.target.clone(),
                    verdict.to_string(),
                ]
            })
            .collect();
        if let Ok(extra) = std::env::var("BENCH_ROWS").map(|p| std::fs::read_to_string(p).unwrap_or_default()) {
            for line in extra.lines() {
                let cells: Vec<&str> = line.split('\t').collect();
                if let Ok(cells) = <[&str; 7]>::try_from(cells) {
                    rows.push(cells.map(String::from));
                }
            }
        }
        rows.sort_by_key(|r| r[0].clone());
        println!();
        println!("| | figure | plumb | alternative, same run | ratio | target | |");
        println!("|---|---|---|---|---|---|---|");
        for r in rows {
            println!("| {} |", r.join(" | "));
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn skipped(id: &str) -> bool {
    std::env::var("SKIP").is_ok_and(|s| s.split(',').any(|x| x.trim() == id))
}

/// CPU seconds (user + system) of process `pid` ("self" for this one).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // fields 14 and 15 of stat; after the `)`, state is index 0
    (ticks(11) + ticks(12)) / 100.0
}

/// Nanoseconds each thread of process `pid` ("self" for this one) has run, by thread id
/// (`/proc/PID/task/TID/schedstat`, its first field).
fn thread_ns(pid: &str) -> std::collections::HashMap<String, u64> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Default::default() };
    tasks
        .flatten()
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            Some((t.file_name().to_string_lossy().into_owned(), stat.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// CPU time of this process's reaped children (the Git server's `git http-backend` and
/// what it ran), in ns, from `/proc/self/stat` (`cutime` + `cstime`, 10 ms ticks).
fn children_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // fields 16 and 17 of stat; after the `)`, state is index 0
    (ticks(13) + ticks(14)) * 10_000_000
}

/// The CPU time the processes of the lab spend inside timed windows (P1's pushes):
/// each control-plane component, this process (plumb in process, and the bench's own
/// watch) and its children (Git over HTTP). What a push costs the machine, next to
/// what it takes: on `nproc` cores a window cannot be shorter than its CPU time over
/// `nproc`.
struct CpuMeter {
    /// (part, pid or "self")
    parts: Vec<(String, String)>,
    spent_ns: Vec<u64>,
    children_ns: u64,
    windows: usize,
}

/// The readings at a window's start (see [`CpuMeter::start`]).
struct CpuMark(Vec<std::collections::HashMap<String, u64>>, u64);

impl CpuMeter {
    fn new(self_name: &str) -> Self {
        let mut parts: Vec<(String, String)> =
            control_plane().pids().into_iter().map(|(name, pid)| (name, pid.to_string())).collect();
        parts.push((self_name.to_string(), "self".to_string()));
        let n = parts.len();
        Self { parts, spent_ns: vec![0; n], children_ns: 0, windows: 0 }
    }

    fn start(&self) -> CpuMark {
        CpuMark(self.parts.iter().map(|(_, pid)| thread_ns(pid)).collect(), children_ns())
    }

    fn stop(&mut self, mark: CpuMark) {
        for (i, (_, pid)) in self.parts.iter().enumerate() {
            let before = &mark.0[i];
            // threads started inside the window count from 0; ended ones are lost (few:
            // Go keeps its threads, tokio its workers)
            self.spent_ns[i] += thread_ns(pid)
                .iter()
                .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
                .sum::<u64>();
        }
        self.children_ns += children_ns().saturating_sub(mark.1);
        self.windows += 1;
    }

    /// The mean CPU time per window, by part, e.g. `kube-apiserver 120 ms, etcd 20 ms, …;
    /// all 160 ms = 80 ms on 2 cores`.
    fn per_window(&self) -> String {
        let n = self.windows.max(1) as f64;
        let each = |ns: u64| ns as f64 / 1e6 / n;
        let mut out: Vec<String> = self
            .parts
            .iter()
            .zip(&self.spent_ns)
            .filter(|(_, ns)| each(**ns) >= 0.5)
            .map(|((name, _), ns)| format!("{name} {:.0} ms", each(*ns)))
            .collect();
        out.push(format!("Git server ≈{:.0} ms", each(self.children_ns)));
        let all = each(self.spent_ns.iter().sum::<u64>() + self.children_ns);
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        format!("{}; all {all:.0} ms = {:.0} ms on {cores} cores", out.join(", "), all / cores)
    }
}

/// `(VmRSS, VmHWM)` of process `pid`, in MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The parts of a process's resident memory (`/proc/PID/smaps_rollup`): anonymous
/// (heap, stacks), file-backed (the binary's pages read) and transparent huge pages; and
/// its threads (`/proc/PID/status`).
fn rss_parts(pid: u32) -> String {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kib = |name: &str| {
        rollup.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
    };
    let (rss, anon, huge) =
        (kib("Rss:").unwrap_or(0.0), kib("Anonymous:").unwrap_or(0.0), kib("AnonHugePages:").unwrap_or(0.0));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let threads = status.lines().find_map(|l| l.strip_prefix("Threads:")).map_or("?", str::trim).to_string();
    format!(
        "anonymous {:.0} MiB, file {:.0} MiB, huge pages {:.0} MiB, {threads} threads",
        anon / 1024.0,
        (rss - anon) / 1024.0,
        huge / 1024.0
    )
}

/// Where a process's anonymous memory lies (`/proc/PID/smaps`): the `brk` heap (the C
/// libraries' malloc), the main stack, and the other anonymous mappings by size — the
/// allocator's arenas are the large ones, threads' stacks the 2 MiB ones — in MiB
/// resident.
fn anon_regions(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut regions: Vec<(String, f64, f64)> = Vec::new(); // (name, size KiB, anonymous KiB)
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            let name = words.nth(4).unwrap_or("").to_string();
            regions.push((name, 0.0, 0.0));
        } else if let Some(last) = regions.last_mut() {
            let kib = words.next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            match first {
                "Size:" => last.1 = kib,
                "Anonymous:" => last.2 = kib,
                _ => {}
            }
        }
    }
    let named = |n: &str| regions.iter().filter(|r| r.0 == n).map(|r| r.2).sum::<f64>() / 1024.0;
    let mut unnamed: Vec<&(String, f64, f64)> = regions.iter().filter(|r| r.0.is_empty() && r.2 > 0.0).collect();
    unnamed.sort_by(|a, b| b.2.total_cmp(&a.2));
    let small: Vec<&&(String, f64, f64)> = unnamed.iter().filter(|r| r.1 <= 8.0 * 1024.0 + 64.0).collect();
    let large: Vec<String> = unnamed
        .iter()
        .filter(|r| r.1 > 8.0 * 1024.0 + 64.0)
        .map(|r| format!("{:.1} of {:.0}", r.2 / 1024.0, r.1 / 1024.0))
        .collect();
    format!(
        "brk heap {:.1} MiB, main stack {:.1} MiB, {} mappings of at most 8 MiB holding {:.1} MiB, mappings above 8 MiB (MiB resident of MiB mapped): {}; in files {:.1} MiB",
        named("[heap]"),
        named("[stack]"),
        small.len(),
        small.iter().map(|r| r.2).sum::<f64>() / 1024.0,
        large.join(", "),
        regions.iter().filter(|r| r.0.starts_with('/')).map(|r| r.2).sum::<f64>() / 1024.0,
    )
}

fn sh(dir: &Path, cmd: &str) {
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

fn kubectl_timed(args: &[&str]) -> Duration {
    let t = Instant::now();
    let out = Command::new("kubectl").args(args).env("KUBECONFIG", &control_plane().kubeconfig).output().unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    t.elapsed()
}

/// Manifests as JSON documents (JSON is YAML) separated by `---`, for plumb.
fn yaml(objects: &[Value]) -> String {
    objects.iter().map(Value::to_string).collect::<Vec<_>>().join("\n---\n")
}

/// The same as a stream of JSON objects, for kubectl (which reads a file that starts
/// with `{` as JSON).
fn json_stream(objects: &[Value]) -> String {
    objects.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}

fn namespace(ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
}

fn config_map(ns: &str, name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
           "data": {"key": data, "other": "x".repeat(100)}})
}

/// 1,000 objects: 600 ConfigMaps, 200 Deployments (0 replicas), 200 headless Services
/// (the lab's Service IP range holds fewer than the three copies the bench makes).
fn thousand(ns: &str) -> Vec<Value> {
    let mut v = Vec::with_capacity(1001);
    for i in 0..600 {
        v.push(config_map(ns, &format!("cm-{i:03}"), &format!("value-{i}")));
    }
    for i in 0..200 {
        let app = format!("d-{i:03}");
        v.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "namespace": ns},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1.27.3",
                                           "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}));
        v.push(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("s-{i:03}"), "namespace": ns},
            "spec": {"clusterIP": "None", "selector": {"app": app}, "ports": [{"port": 80}]}}),
        );
    }
    v
}

/// The policy text of `apps` = (name, repository, path, namespace), one environment.
fn policy_text(
    status_ns: &str,
    repos: &[(String, String)],
    apps: &[(String, String, String, String)],
    env: &str,
) -> String {
    let mut t = format!("settings: {{statusNamespace: {status_ns}}}\nrepositories:\n");
    for (name, url) in repos {
        let _ = writeln!(t, "  - {{name: {name}, url: {url}, webhookSecretFile: webhook-secret}}");
    }
    let _ = writeln!(t, "environments:\n  - name: e\n{env}\napplications:");
    for (name, repo, path, ns) in apps {
        let _ = writeln!(
            t,
            "  - {{name: {name}, repository: {repo}, revision: main, path: {path}, namespace: {ns}, environment: e}}"
        );
    }
    t
}

/// The sum and count of a histogram in plumb's metrics text.
fn histogram(metrics: &str, name: &str) -> (f64, f64) {
    let get = |suffix: &str| {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_{suffix}")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    (get("sum"), get("count"))
}

// ---------------------------------------------------------------------------------- P1

/// P1's floor on this control plane: the requests plumb makes for a push changing 49
/// ConfigMaps (one server-side dry-run of each, then one server-side apply of each,
/// 16 at once), from a raw client with nothing else to do (no Git, no render, no
/// status), timed as P1 is: until a watch has delivered all 49. The median of `rounds`.
async fn p1_raw_floor(client: &kube::Client, rounds: usize, cpu: &mut CpuMeter, cpu_all: &mut CpuMeter) -> f64 {
    let ns = "p1-raw";
    let cm = |i: usize, rev: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:02}"), "namespace": ns},
            "data": {"rev": rev.to_string(), "payload": "x".repeat(200)}})
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<ConfigMap>(&()));
    kubectl(&["create", "namespace", ns]);
    let apply = |rev: usize, dry_run: bool| {
        let api = api.clone();
        async move {
            let mut params = PatchParams::apply("raw-client").force();
            params.dry_run = dry_run;
            let each = (0..49).map(|i| {
                let (api, params, body) = (api.clone(), params.clone(), cm(i, rev));
                async move { api.patch(&format!("cm-{i:02}"), &params, &Patch::Apply(&body)).await.map(|_| ()) }
            });
            let results: Vec<_> = futures::stream::iter(each).buffer_unordered(16).collect().await;
            assert!(results.iter().all(Result::is_ok), "raw client: {:?}", results.iter().find(|r| r.is_err()));
        }
    };
    apply(0, false).await;
    let rx = revisions_seen(client, ns);
    let mut took = Vec::new();
    for rev in 1..=rounds {
        let mut rx = rx.clone();
        let want = rev.to_string();
        let (mark, mark_all) = (cpu.start(), cpu_all.start());
        let started = Instant::now();
        apply(rev, true).await;
        apply(rev, false).await;
        all_seen_at(&mut rx, &want, 49, "raw client").await;
        took.push(ms(started.elapsed()));
        cpu.stop(mark);
        tokio::time::sleep(Duration::from_millis(300)).await;
        cpu_all.stop(mark_all);
    }
    let floor = median(&mut took);
    eprintln!(
        "P1 floor: raw client, 49 dry-runs then 49 applies (16 at once) until watched: p50 {floor:.0} ms of {rounds}"
    );
    floor
}

async fn p1(t: &mut Table) {
    const OBJECTS: usize = 50;
    let pushes: usize = env_or("PUSHES", 10);
    let write_app = |repo: &plumb_lab::Repo, dir: &str, ns: &str, rev: usize| {
        let for_kubectl = dir.ends_with("script");
        let mut objects = vec![namespace(ns)];
        for i in 0..OBJECTS - 1 {
            objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i:02}"), "namespace": ns},
                "data": {"rev": rev.to_string(), "payload": "x".repeat(200)}}));
        }
        let text = if for_kubectl { json_stream(&objects) } else { yaml(&objects) };
        repo.write(&format!("{dir}/all.yaml"), &text).unwrap();
    };
    let lab = Lab::new("p1");
    write_app(&lab.repo, "apps/plumb", "p1-plumb", 0);
    write_app(&lab.repo, "apps/script", "p1-script", 0);
    let mut prev = lab.repo.commit("bench: 50 objects").unwrap();
    let env = "    syncPolicy: {automated: true, prune: true, selfHeal: true}\n    reconcileInterval: 1h";
    let repos = [("fleet".to_string(), lab.url.clone())];
    let apps = [("p1".to_string(), "fleet".to_string(), "apps/plumb".to_string(), "p1-plumb".to_string())];
    let policy = lab.policy("p1.yaml", &policy_text("plumb-bench-p1", &repos, &apps, env));
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;
    wait_for("initial sync", Duration::from_secs(120), || async {
        plumb.status("p1").await.filter(|s| s.sync == SyncStatus::Synced)
    })
    .await;

    let client = control_plane().client().await.unwrap();
    let rx = revisions_seen(&client, "p1-plumb");
    let clone = lab.tmp.path().join("script-clone");
    sh(lab.tmp.path(), &format!("git clone -q {} {}", lab.url, clone.display()));
    sh(&clone, "kubectl apply --server-side --field-manager=sync-sh -f apps/script/all.yaml >/dev/null");

    let (before_sum, before_count) = histogram(&plumb.ctx.metrics.encode(), "plumb_webhook_to_pass_seconds");
    let mut plumb_ms = Vec::new();
    let mut script_ms = Vec::new();
    let mut plumb_cpu = CpuMeter::new("plumb");
    // the push until its passes are done (300 ms after the window; sync.sh runs after)
    let mut plumb_all = CpuMeter::new("plumb");
    // each push's pass: (source, compare, sync, whole pass) in ms
    let mut stages: [Vec<f64>; 4] = Default::default();
    // every pass that ends, as its timings: the push's, then any its own writes trigger
    let passes: Arc<std::sync::Mutex<Vec<plumb::status::PassTimings>>> = Arc::default();
    let watcher = {
        let (ctx, passes) = (plumb.ctx.clone(), passes.clone());
        tokio::spawn(async move {
            let mut last = ctx.timings("p1").map(|t| t.at);
            loop {
                if let Some(t) = ctx.timings("p1").filter(|t| Some(&t.at) != last.as_ref()) {
                    last = Some(t.at.clone());
                    passes.lock().unwrap().push(t);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    // per push, all its passes: (passes, API requests, dry-runs)
    let mut per_push: Vec<(usize, u64, u64)> = Vec::new();
    for rev in 1..=pushes {
        write_app(&lab.repo, "apps/plumb", "p1-plumb", rev);
        write_app(&lab.repo, "apps/script", "p1-script", rev);
        let sha = lab.repo.commit(&format!("bench: rev {rev}")).unwrap();
        let (headers, body) = lab.gitea_push(&lab.url, &prev, &sha, &lab.secret);
        let mut rx = rx.clone();
        let want = rev.to_string();
        passes.lock().unwrap().clear();
        let (requests, dry_runs) = (plumb.ctx.cluster.requests().0, plumb.ctx.cluster.dry_runs());
        let (mark, mark_all) = (plumb_cpu.start(), plumb_all.start());
        let started = Instant::now();
        assert_eq!(plumb.post_webhook(&headers, &body).await, 202);
        all_seen_at(&mut rx, &want, OBJECTS - 1, "plumb").await;
        plumb_ms.push(ms(started.elapsed()));
        plumb_cpu.stop(mark);
        // the passes its own writes trigger
        tokio::time::sleep(Duration::from_millis(300)).await;
        plumb_all.stop(mark_all);
        let started = Instant::now();
        sh(
            &clone,
            // kubectl diff exits 1 when there are differences; anything else fails the script
            "git pull -q --ff-only && { kubectl diff --server-side --field-manager=sync-sh -f apps/script/all.yaml >/dev/null; [ $? -le 1 ]; } && kubectl apply --server-side --field-manager=sync-sh -f apps/script/all.yaml >/dev/null && echo applied",
        );
        script_ms.push(ms(started.elapsed()));
        let rev_seen = kubectl(&["-n", "p1-script", "get", "configmap", "cm-00", "-o", "jsonpath={.data.rev}"]);
        assert_eq!(rev_seen, rev.to_string(), "sync.sh applied the new revision");
        prev = sha;
        let seen = std::mem::take(&mut *passes.lock().unwrap());
        // the push's pass: the first to end after it (its status write follows the applies)
        let t = seen.first().expect("the push's pass ended");
        for (v, x) in stages.iter_mut().zip([t.source_millis, t.compare_millis, t.sync_millis, t.total_millis]) {
            v.push(x as f64);
        }
        per_push.push((seen.len(), plumb.ctx.cluster.requests().0 - requests, plumb.ctx.cluster.dry_runs() - dry_runs));
    }
    watcher.abort();
    let (after_sum, after_count) = histogram(&plumb.ctx.metrics.encode(), "plumb_webhook_to_pass_seconds");
    plumb.stop().await;
    let (mut raw_cpu, mut raw_all) = (CpuMeter::new("raw client"), CpuMeter::new("raw client"));
    let raw = p1_raw_floor(&client, pushes, &mut raw_cpu, &mut raw_all).await;
    let (p, s) = (median(&mut plumb_ms), median(&mut script_ms));
    t.add(
        "P1",
        format!("signed push → 50 objects applied, p50 of {pushes} pushes"),
        format!("{p:.0} ms"),
        format!("sync.sh {s:.0} ms; raw client, the same requests without Git (49 dry-runs, then 49 applies, 16 at once) {raw:.0} ms"),
        format!("{:.0}×", s / p),
        "≤ 60 ms; ≥ 50×",
        Some(p <= 60.0 && s / p >= 50.0),
    );
    let [mut source, mut compare, mut sync, mut total] = stages;
    let mean = |f: fn(&(usize, u64, u64)) -> f64| per_push.iter().map(f).sum::<f64>() / per_push.len() as f64;
    t.add(
        "P1",
        "the push's pass by stage (medians); all passes of a push (means)",
        format!(
            "source {:.0} ms, compare (49 dry-runs) {:.0} ms, sync (49 applies, 49 Events) {:.0} ms; whole pass {:.0} ms. Per push: {:.1} passes, {:.0} API requests, {:.0} dry-runs",
            median(&mut source),
            median(&mut compare),
            median(&mut sync),
            median(&mut total),
            mean(|p| p.0 as f64),
            mean(|p| p.1 as f64),
            mean(|p| p.2 as f64),
        ),
        "raw client: 98 requests, 49 of them dry-runs",
        "—",
        "—",
        None,
    );
    t.add(
        "P1",
        "CPU time per push, by process (mean; with the bench's own watch): until applied",
        plumb_cpu.per_window(),
        format!("raw client: {}", raw_cpu.per_window()),
        "—",
        "—",
        None,
    );
    t.add(
        "P1",
        "the same, until 300 ms later (the passes its writes trigger included)",
        plumb_all.per_window(),
        format!("raw client: {}", raw_all.per_window()),
        "—",
        "—",
        None,
    );
    let n = after_count - before_count;
    if n > 0.0 {
        let mean = (after_sum - before_sum) / n * 1000.0;
        t.add(
            "P5",
            "a single signed push: receipt → start of its pass (mean)",
            format!("{mean:.2} ms"),
            "—",
            "—",
            "≤ 5 ms",
            Some(mean <= 5.0),
        );
    }
}

// ------------------------------------------------------------------------------ P2, P3

async fn p2_p3(t: &mut Table) {
    let passes: usize = env_or("PASSES", 10);
    let (ns, ns_raw, ns_kubectl) = ("p2-plumb", "p3-raw", "p3-kubectl");
    let lab = Lab::new("p2");
    let mut objects = vec![namespace(ns)];
    objects.extend(thousand(ns));
    lab.repo.write("app/all.yaml", &yaml(&objects)).unwrap();
    lab.repo.commit("1000 objects").unwrap();
    let file = lab.tmp.path().join("all.yaml");
    std::fs::write(&file, json_stream(&objects)).unwrap();
    let env = "    syncPolicy: {automated: true, prune: true, selfHeal: false}";
    let repos = [("r".to_string(), lab.url.clone())];
    let apps = [("big".to_string(), "r".to_string(), "app".to_string(), ns.to_string())];
    let policy = lab.policy("p2.yaml", &policy_text("plumb-bench-p2", &repos, &apps, env));
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), true).await;
    // as `plumb serve` does when it starts, before any pass: the Application resource
    // definition installed, the application's resource created
    ctx.store.ensure_definition().await.unwrap();
    ctx.store.mirror("big", &serde_json::json!({"repository": "r"})).await.unwrap();
    // the API server republishes its OpenAPI after a new definition: let it finish, as it
    // has long before a real first sync (and before the raw client's run below)
    tokio::time::sleep(Duration::from_secs(3)).await;

    // P3: plumb's first pass (fetch, render, compare, apply, status)
    let (r0, w0) = ctx.cluster.requests();
    let started = Instant::now();
    let first = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
    let plumb_initial = ms(started.elapsed());
    let (r1, w1) = ctx.cluster.requests();
    let applied = first.sync.as_ref().map_or(0, |s| s.applied.len() + s.applied_omitted);
    eprintln!("initial sync: {plumb_initial:.0} ms, {applied} applied, {} requests, {} writes", r1 - r0, w1 - w0);
    if let Some(t) = ctx.timings("big") {
        eprintln!(
            "initial sync stages: source {} ms, compare {} ms, sync {} ms, whole pass {} ms",
            t.source_millis, t.compare_millis, t.sync_millis, t.total_millis
        );
    }

    // P2: no-op passes once the watches are warm and the cluster settled: until the
    // Deployments' controller has observed them all, their status changes and a pass is
    // no no-op. Requests on the application come from a watch, as in `plumb serve`.
    let token = tokio_util::sync::CancellationToken::new();
    tokio::spawn(plumb::leader::watch_requests(
        ctx.cluster.client().clone(),
        "plumb-bench-p2".into(),
        ctx.controls(),
        plumb::leader::Leadership::always(),
        |_: &str| {},
        token.clone(),
    ));
    let mut healthy = 0;
    for _ in 0..600 {
        let r = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
        let watched = ctx.controls().read().unwrap().is_some();
        healthy = if r.status.sync == SyncStatus::Synced && r.status.health == HealthStatus::Healthy && watched {
            healthy + 1
        } else {
            0
        };
        if healthy == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(healthy, 3, "the 1,000 objects synced and healthy");
    let (req0, w0) = ctx.cluster.requests();
    let d0 = ctx.cluster.dry_runs();
    let reused0 = ctx.comparisons_reused();
    let mut noop = Vec::new();
    for _ in 0..passes {
        let started = Instant::now();
        let r = ctx.run_pass("big", Mode::Policy, None).await.unwrap();
        noop.push(ms(started.elapsed()));
        assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.conditions.first());
    }
    let (req1, w1) = ctx.cluster.requests();
    let d1 = ctx.cluster.dry_runs();
    token.cancel();
    let reused = ctx.comparisons_reused() - reused0;
    let p50 = median(&mut noop);
    let path = file.to_str().unwrap();
    let kubectl_noop =
        ms(kubectl_timed(&["diff", "--server-side", "--force-conflicts", "--field-manager=plumb", "-f", path]));
    let per = |a: u64, b: u64| (b - a) as f64 / passes as f64;
    let (req, writes, dry) = (per(req0, req1), per(w0, w1), per(d0, d1));
    t.add(
        "P2",
        format!("no-op pass over 1,000 objects, median of {passes}"),
        format!("{p50:.1} ms; {req:.0} requests, {writes:.0} writes, {dry:.0} dry-runs; {reused}/{passes} reused"),
        format!("kubectl diff --server-side {kubectl_noop:.0} ms"),
        format!("{:.0}×", kubectl_noop / p50),
        "≤ 10 ms, 0 requests, 0 dry-runs",
        Some(p50 <= 10.0 && req == 0.0 && dry == 0.0),
    );
    drop(ctx);

    // P3: a raw client doing only the applies, 16 at once (plumb's concurrency)
    let client = control_plane().client().await.unwrap();
    let resource = |v: &Value| match v["kind"].as_str() {
        Some("Namespace") => ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        Some("ConfigMap") => ApiResource::erase::<ConfigMap>(&()),
        Some("Deployment") => ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
        _ => ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
    };
    let raw_objects = thousand(ns_raw);
    let params = PatchParams::apply("raw-client").force();
    let ns_api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(&namespace(ns_raw)));
    let started = Instant::now();
    ns_api.patch(ns_raw, &params, &Patch::Apply(&namespace(ns_raw))).await.unwrap();
    let results: Vec<Result<(), String>> = futures::stream::iter(raw_objects.iter().map(|o| {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns_raw, &resource(o));
        let params = params.clone();
        async move {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            api.patch(name, &params, &Patch::Apply(o)).await.map(|_| ()).map_err(|e| format!("{name}: {e}"))
        }
    }))
    .buffer_unordered(16)
    .collect()
    .await;
    let raw_ms = ms(started.elapsed());
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if let Some(first) = failed.first() {
        eprintln!("raw client: {} of 1,000 applies failed, first: {first}", failed.len());
    }

    // and kubectl apply --server-side of the same files
    let kubectl_file = lab.tmp.path().join("kubectl.yaml");
    let mut k_objects = vec![namespace(ns_kubectl)];
    k_objects.extend(thousand(ns_kubectl));
    std::fs::write(&kubectl_file, json_stream(&k_objects)).unwrap();
    let kubectl_ms = ms(kubectl_timed(&[
        "apply",
        "--server-side",
        "--field-manager=kubectl-bench",
        "-f",
        kubectl_file.to_str().unwrap(),
    ]));
    t.add(
        "P3",
        "initial sync of 1,000 objects (plumb: whole first pass)",
        format!("{plumb_initial:.0} ms ({} requests)", r1 - r0),
        format!("raw SSA client, 16 at once {raw_ms:.0} ms (1,001 requests, {} failed); kubectl apply --server-side {kubectl_ms:.0} ms", failed.len()),
        format!("{:.2}× raw; {:.0}× faster than kubectl", plumb_initial / raw_ms, kubectl_ms / plumb_initial),
        "≤ 1.5× raw; ≥ 20× kubectl",
        Some(plumb_initial <= 1.5 * raw_ms && kubectl_ms / plumb_initial >= 20.0),
    );
}

// ---------------------------------------------------------------------------------- P4

/// A `plumb serve` process (the product's binary) on loopback ports.
struct Serve {
    child: Child,
}

impl Serve {
    fn start(policy: &Path, cache: &Path) -> Serve {
        // SERVE_WRAP="heaptrack -o /tmp/p4": run under a profiler (its RSS is then the
        // wrapper's; kill the process it leaves behind)
        let wrap = std::env::var("SERVE_WRAP").unwrap_or_default();
        let mut words = wrap.split_whitespace();
        let mut command = match words.next() {
            Some(program) => {
                let mut c = Command::new(program);
                c.args(words).arg(env!("CARGO_BIN_EXE_plumb-under-test"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_plumb-under-test")),
        };
        let child = command
            .args(["serve", "-c"])
            .arg(policy)
            .arg("--cache-dir")
            .arg(cache)
            .args(["--listen", "127.0.0.1:0", "--internal-listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0"])
            .env("KUBECONFIG", &control_plane().kubeconfig)
            .env("PLUMB_LOG", "warn")
            // as the quick start runs it: the allocator settings are the binary's own
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Serve { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the process used less than 2 % of a core over 5 s (its passes are
    /// done), at least `min` after now; returns the time waited.
    async fn idle(&self, min: Duration, max: Duration) -> Duration {
        let started = Instant::now();
        tokio::time::sleep(min).await;
        let pid = self.pid().to_string();
        loop {
            let c0 = cpu_seconds(&pid);
            tokio::time::sleep(Duration::from_secs(5)).await;
            if cpu_seconds(&pid) - c0 < 0.1 || started.elapsed() > max {
                return started.elapsed();
            }
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // under a profiler: kill plumb itself first (nothing freed on the way out: the
        // profile's leaks are what it held), and give the profiler time to write
        if std::env::var("SERVE_WRAP").is_ok_and(|w| !w.is_empty()) {
            let _ = Command::new("pkill").args(["-KILL", "-f", env!("CARGO_BIN_EXE_plumb-under-test")]).status();
            std::thread::sleep(Duration::from_secs(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many ConfigMaps carrying plumb's label are in namespaces starting with `prefix`.
async fn managed_config_maps(prefix: &str) -> usize {
    let client = control_plane().client().await.unwrap();
    let api: Api<ConfigMap> = Api::all(client);
    let list = api.list_metadata(&ListParams::default().labels("plumb.dev/app")).await.unwrap();
    list.items.iter().filter(|o| o.metadata.namespace.as_deref().is_some_and(|n| n.starts_with(prefix))).count()
}

async fn p4_ten_by_thousand(t: &mut Table) {
    let soak: u64 = env_or("SOAK_SECS", 120);
    let lab = Lab::new("p4");
    let mut apps = Vec::new();
    for a in 0..10 {
        let ns = format!("p4-ten-{a}");
        let mut objects = vec![];
        for i in 0..1000 {
            objects.push(config_map(&ns, &format!("cm-{i:04}"), &format!("value-{i}")));
        }
        lab.repo.write(&format!("apps/a{a}/all.yaml"), &yaml(&objects)).unwrap();
        apps.push((format!("ten-{a}"), "r".to_string(), format!("apps/a{a}"), ns));
    }
    lab.repo.commit("10 × 1,000").unwrap();
    for (_, _, _, ns) in &apps {
        kubectl(&["create", "namespace", ns]);
    }
    let env = "    syncPolicy: {automated: true, prune: true, selfHeal: true}\n    reconcileInterval: 1h";
    let policy = lab.policy("p4.yaml", &policy_text("plumb-bench-p4", &[("r".into(), lab.url.clone())], &apps, env));
    let serve = Serve::start(&policy, &lab.tmp.path().join("cache"));
    let started = Instant::now();
    wait_for("10 × 1,000 objects applied", Duration::from_secs(600), || async {
        (managed_config_maps("p4-ten-").await >= 10_000).then_some(())
    })
    .await;
    let synced = started.elapsed();
    serve.idle(Duration::from_secs(10), Duration::from_secs(300)).await;
    let (rss, hwm) = rss_mib(serve.pid());
    eprintln!(
        "10 × 1,000: applied in {:.1} s; RSS {rss:.0} MiB (peak {hwm:.0} MiB; {})",
        synced.as_secs_f64(),
        rss_parts(serve.pid())
    );

    // soak: a hand edit of one object per second, reverted by selfHeal
    let client = control_plane().client().await.unwrap();
    let started = Instant::now();
    let mut i = 0usize;
    let (start_rss, _) = rss_mib(serve.pid());
    while started.elapsed() < Duration::from_secs(soak) {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &format!("p4-ten-{}", i % 10));
        let patch = json!({"data": {"key": format!("hand-{i}")}});
        let name = format!("cm-{:04}", (i * 37) % 1000);
        let _ = api.patch(&name, &PatchParams::apply("hand").force(), &Patch::Apply(&patch)).await;
        i += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (end_rss, end_hwm) = rss_mib(serve.pid());
    drop(serve);
    t.add(
        "P4",
        "RSS of `plumb serve`, 10 applications × 1,000 ConfigMaps, after the first sync",
        format!("{rss:.0} MiB (peak {hwm:.0} MiB)"),
        "Argo CD controller 400–800 MiB on small installs (not run here)",
        "—",
        "≤ 64 MiB",
        Some(rss <= 64.0),
    );
    t.add(
        "P4",
        format!("the same over a {soak} s soak, one hand edit a second reverted by selfHeal ({i} edits)"),
        format!("start {start_rss:.0} MiB → end {end_rss:.0} MiB (peak {end_hwm:.0} MiB)"),
        "—",
        format!("{:+.0} MiB", end_rss - start_rss),
        "flat",
        Some(end_rss <= start_rss * 1.05 + 2.0),
    );
}

// ------------------------------------------------------------------------------ P7 + P4

async fn p7_thousand_apps(t: &mut Table) {
    let lab = Lab::new("r0");
    let mut repos = vec![("r0".to_string(), lab.url.clone(), None)];
    for r in 1..10 {
        let repo = plumb_lab::Repo::init(lab.tmp.path(), &format!("r{r}")).unwrap();
        repos.push((format!("r{r}"), format!("{}/r{r}.git", lab.git.base), Some(repo)));
    }
    let mut apps = Vec::new();
    for (r, (name, _, repo)) in repos.iter().enumerate() {
        let repo = repo.as_ref().unwrap_or(&lab.repo);
        let ns = format!("p7-{name}");
        kubectl(&["create", "namespace", &ns]);
        for a in 0..100 {
            let app = format!("a{:04}", r * 100 + a);
            let objects: Vec<Value> =
                (0..10).map(|i| config_map(&ns, &format!("{app}-cm-{i}"), &format!("value-{i}"))).collect();
            repo.write(&format!("apps/{app}/all.yaml"), &yaml(&objects)).unwrap();
            let path = format!("apps/{app}");
            apps.push((app, name.clone(), path, ns.clone()));
        }
        repo.commit("100 applications").unwrap();
    }
    let env = "    syncPolicy: {automated: true, prune: true, selfHeal: true}\n    reconcileInterval: 1h";
    let repo_urls: Vec<(String, String)> = repos.iter().map(|(n, u, _)| (n.clone(), u.clone())).collect();
    let policy = lab.policy("p7.yaml", &policy_text("plumb-bench-p7", &repo_urls, &apps, env));
    let ctx: Arc<Context> = context_for(&policy, &lab.tmp.path().join("cache"), true).await;
    let names: Vec<String> = apps.iter().map(|a| a.0.clone()).collect();
    // As `plumb serve` runs them: passes of the applications' own timers (start, settle,
    // poll) read the refs their repository's poller asked for.
    let interval = ctx.config.interval_of(&ctx.config.applications[0]);
    let round = |ctx: Arc<Context>, names: Vec<String>, cause: Cause| async move {
        let fresh = plumb::poller::freshness(cause, interval);
        futures::stream::iter(names.into_iter().map(|n| {
            let ctx = ctx.clone();
            async move { ctx.run_pass_with(&n, Mode::Policy, None, fresh).await.unwrap().status.sync }
        }))
        .buffer_unordered(16)
        .collect::<Vec<SyncStatus>>()
        .await
    };
    let mut pollers = Poller::for_config(&ctx.config);
    let (cpu0, g0) = (cpu_seconds("self"), lab.git.counts());
    let started = Instant::now();
    poller_round(&ctx, &mut pollers).await;
    round(ctx.clone(), names.clone(), Cause::Start).await;
    let first = started.elapsed();
    let (cpu1, g1) = (cpu_seconds("self"), lab.git.counts());
    // settle (the watches see plumb's writes), then one poll round with no change: each
    // repository's poller asks once, then every application's poll pass
    round(ctx.clone(), names.clone(), Cause::Settle).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ((r0, w0), cpu2, g2) = (ctx.cluster.requests(), cpu_seconds("self"), lab.git.counts());
    let started = Instant::now();
    let moved = poller_round(&ctx, &mut pollers).await;
    let statuses = round(ctx.clone(), names.clone(), Cause::Poll).await;
    let poll = started.elapsed();
    let ((r1, w1), cpu3, g3) = (ctx.cluster.requests(), cpu_seconds("self"), lab.git.counts());
    assert!(moved.is_empty(), "no revision moved: {moved:?}");
    let synced = statuses.iter().filter(|s| **s == SyncStatus::Synced).count();
    drop(ctx);
    t.add(
        "P7",
        "1,000 applications × 10 ConfigMaps over 10 repositories: first full sync (10 pollers' asks, then 16 start passes at once)",
        format!(
            "{:.1} s, {:.1} CPU s, {} Git advertisements + {} fetches",
            first.as_secs_f64(),
            cpu1 - cpu0,
            g1.0 - g0.0,
            g1.1 - g0.1
        ),
        "—",
        "—",
        "reported",
        None,
    );
    let adverts_per_repo = (g3.0 - g2.0) as f64 / 10.0;
    t.add(
        "P7",
        format!("a poll round with no change ({synced}/1,000 Synced)"),
        format!(
            "{:.1} s, {:.2} CPU s, {} API requests, {} writes, {adverts_per_repo:.0} Git requests per repository",
            poll.as_secs_f64(),
            cpu3 - cpu2,
            r1 - r0,
            w1 - w0
        ),
        "—",
        "—",
        "0 writes, ≤ 1 request per repository",
        Some(w1 == w0 && adverts_per_repo <= 1.0 && (r1 - r0) == 0),
    );

    // P4: the same 1,000 applications in a `plumb serve` process
    if skipped("P4") {
        return;
    }
    let serve = Serve::start(&policy, &lab.tmp.path().join("cache-serve"));
    let waited = serve.idle(Duration::from_secs(20), Duration::from_secs(900)).await;
    let (rss, hwm) = rss_mib(serve.pid());
    drop(serve);
    t.add(
        "P4",
        format!(
            "RSS of `plumb serve`, 1,000 applications × 10 ConfigMaps, after the start passes ({:.0} s)",
            waited.as_secs_f64()
        ),
        format!("{rss:.0} MiB (peak {hwm:.0} MiB)"),
        "—",
        "—",
        "≤ 96 MiB",
        Some(rss <= 96.0),
    );
}

// ---------------------------------------------------------------------------------- P8

/// Seconds a shard's Lease lasts in P8 (`--lease-duration`, the default).
const P8_LEASE: u64 = 10;

/// A `plumb serve` process of P8: alone, or one replica of several (`--leader-elect
/// --shards N`); JSON logs in a file, the internal listener on a known port.
struct Replica {
    identity: String,
    child: Child,
    log: PathBuf,
    internal: std::net::SocketAddr,
}

impl Replica {
    fn start(identity: &str, policy: &Path, dir: &Path, shards: Option<u32>) -> Replica {
        let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (internal, log) = (free(), dir.join(format!("{identity}.log")));
        // SERVE_WRAP (see Serve::start) runs the first of the three replicas under it
        let wrap = std::env::var("SERVE_WRAP").ok().filter(|w| !w.is_empty() && identity == "p8-a");
        let mut command = match wrap.as_deref().map(str::split_whitespace) {
            Some(mut words) => {
                let mut c = Command::new(words.next().unwrap());
                c.args(words).arg(env!("CARGO_BIN_EXE_plumb-under-test"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_plumb-under-test")),
        };
        command.args(["serve", "--identity", identity, "--log-format", "json"]);
        if let Some(n) = shards {
            let (n, lease) = (n.to_string(), P8_LEASE.to_string());
            command.args(["--leader-elect", "--shards", &n, "--lease-duration", &lease]);
        }
        let child = command
            .args(["--listen", &free().to_string(), "--probe-listen", &free().to_string()])
            .args(["--internal-listen", &internal.to_string(), "-c"])
            .arg(policy)
            .arg("--cache-dir")
            .arg(dir.join(format!("cache-{identity}")))
            .env("KUBECONFIG", &control_plane().kubeconfig)
            // the apply lines (plumb::apply, info) count the object writes; the passes'
            // ends (plumb::serve, debug) time the takeover
            .env(
                "PLUMB_LOG",
                std::env::var("P8_LOG")
                    .unwrap_or_else(|_| "warn,plumb::apply=info,plumb::serve=debug,plumb::leader=info".into()),
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Replica { identity: identity.into(), child, log, internal }
    }

    /// With `P8_LOG` naming `plumb::kube_requests=trace`: the API requests this replica
    /// made since `since` by shape (verb and path, digits as #), those made 20 times or
    /// more.
    fn print_requests(&self, phase: &str, since: jiff::Timestamp) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut shapes: BTreeMap<String, usize> = BTreeMap::new();
        let lines = text.lines().filter(|l| l.contains("plumb::kube_requests"));
        for v in lines.filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
            if v["timestamp"].as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()).is_none_or(|t| t < since) {
                continue;
            }
            let digits = |c: char| if c.is_ascii_digit() { '#' } else { c };
            let path: String = v["path"].as_str().unwrap_or("").chars().map(digits).collect();
            *shapes.entry(format!("{} {path}", v["verb"].as_str().unwrap_or(""))).or_default() += 1;
        }
        for (shape, n) in shapes.iter().filter(|(_, n)| **n >= 20) {
            eprintln!("P8 {phase}, {}: {n} × {shape}", self.identity);
        }
    }

    /// Object writes so far (the `plumb::apply` lines: created, applied, deleted).
    fn writes(&self) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter(|l| l.contains("\"target\":\"plumb::apply")).count()
    }

    /// Requests so far by verb (`plumb_kube_requests_total`, every code).
    async fn requests_by_verb(&self) -> BTreeMap<String, f64> {
        let kubeconfig = std::fs::read_to_string(&control_plane().kubeconfig).unwrap();
        let token = kubeconfig.lines().find_map(|l| l.trim().strip_prefix("token: ")).unwrap().to_string();
        let (_, text) = http_request(self.internal, "GET", "/metrics", &[bearer(&token)], b"").await;
        let mut by = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("plumb_kube_requests_total{verb=\"") else { continue };
            let (Some((verb, _)), Some(n)) = (rest.split_once('"'), line.rsplit(' ').next()) else { continue };
            *by.entry(verb.to_string()).or_insert(0.0) += n.parse::<f64>().unwrap_or(0.0);
        }
        by
    }

    /// When the last pass of any of `apps` ended (its status saved), by this replica's
    /// log ("pass done").
    fn last_pass_of(&self, apps: &[String]) -> Option<jiff::Timestamp> {
        self.passes_of(apps).into_iter().max()
    }

    /// When each pass of any of `apps` ended, by this replica's log ("pass done").
    fn passes_of(&self, apps: &[String]) -> Vec<jiff::Timestamp> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter(|l| l.contains("\"message\":\"pass done\""))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["app"].as_str().is_some_and(|a| apps.iter().any(|x| x == a)))
            .filter_map(|v| v["timestamp"].as_str()?.parse().ok())
            .collect()
    }

    /// The passes this replica asked again because its shard's renew was late (its
    /// fence closed for now), by its log.
    fn late_renews(&self) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter(|l| l.contains("shard is late: its pass is asked again")).count()
    }

    /// When this replica took a shard (`plumb::leader`'s "holding the shard"), by its log.
    fn shards_taken(&self) -> Vec<jiff::Timestamp> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter(|l| l.contains("\"message\":\"holding the shard"))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["timestamp"].as_str()?.parse().ok())
            .collect()
    }

    fn cpu_idle_after(&self, before: f64) -> bool {
        cpu_seconds(&self.child.id().to_string()) - before < 0.1
    }

    fn kill(&mut self) {
        if std::env::var("SERVE_WRAP").is_ok_and(|w| !w.is_empty()) && self.identity == "p8-a" {
            // under a profiler: kill plumb itself (see Serve's drop)
            let pattern = format!("--identity {}", self.identity);
            let _ = Command::new("pkill").args(["-KILL", "-f", &pattern]).status();
            std::thread::sleep(Duration::from_secs(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// When `replica`'s passes of `apps` ended, from `start`: the first, the median, the last.
fn pass_ends(replica: &Replica, apps: &[String], start: jiff::Timestamp) -> String {
    let mut ends: Vec<f64> =
        replica.passes_of(apps).into_iter().map(|t| start.duration_until(t).as_secs_f64()).collect();
    ends.sort_by(f64::total_cmp);
    match (ends.first(), ends.get(ends.len() / 2), ends.last()) {
        (Some(first), Some(half), Some(last)) => {
            format!(
                "{} passes ended, the first at +{first:.1} s, half by +{half:.1} s, the last at +{last:.1} s",
                ends.len()
            )
        }
        _ => "no pass ended".into(),
    }
}

/// The object writes and the API requests by verb of `replicas` so far, summed.
async fn tally(replicas: &[&Replica]) -> (usize, BTreeMap<String, f64>) {
    let mut writes = 0;
    let mut verbs = BTreeMap::new();
    for r in replicas {
        writes += r.writes();
        for (verb, n) in r.requests_by_verb().await {
            *verbs.entry(verb).or_insert(0.0) += n;
        }
    }
    (writes, verbs)
}

/// Waits until every replica used less than 2 % of a core over 5 s (their passes are
/// done), at most `max`.
async fn all_idle(replicas: &[&Replica], max: Duration) {
    let started = Instant::now();
    loop {
        let before: Vec<f64> = replicas.iter().map(|r| cpu_seconds(&r.child.id().to_string())).collect();
        tokio::time::sleep(Duration::from_secs(5)).await;
        if replicas.iter().zip(&before).all(|(r, b)| r.cpu_idle_after(*b)) || started.elapsed() > max {
            return;
        }
    }
}

/// Each Application in `status_ns` that is Synced, with the replica that last
/// reconciled it (empty outside `--leader-elect`); read with kubectl every 5 s at most
/// (the list of thousands of statuses is tens of MB: asked more often, it would load
/// the API server the replicas share).
async fn synced_apps(status_ns: &str) -> BTreeMap<String, String> {
    tokio::time::sleep(Duration::from_secs(5)).await;
    let path = "{range .items[*]}{.metadata.name} {.status.sync} {.status.reconciler.replica}{\"\\n\"}{end}";
    let ns = status_ns.to_string();
    let text = tokio::task::spawn_blocking(move || {
        control_plane()
            .kubectl(&["-n", &ns, "get", "applications.plumb.dev", "-o", &format!("jsonpath={path}")])
            .unwrap_or_default()
    })
    .await
    .unwrap();
    text.lines()
        .filter_map(|l| {
            let mut words = l.split(' ');
            let (name, sync, replica) = (words.next()?, words.next()?, words.next().unwrap_or_default());
            (sync == "Synced").then(|| (name.to_string(), replica.to_string()))
        })
        .collect()
}

/// With `P8_PPROF=DIR`: a CPU profile of the API server over the next `seconds`,
/// written to `DIR/NAME.pprof` in the background (read with `go tool pprof -top`).
fn api_profile(name: &str, seconds: u32) -> Option<Child> {
    let dir = std::env::var("P8_PPROF").ok()?;
    let out = std::fs::File::create(format!("{dir}/{name}.pprof")).ok()?;
    let url = format!("/debug/pprof/profile?seconds={seconds}");
    let kubeconfig = control_plane().kubeconfig.display().to_string();
    Command::new("kubectl").args(["--kubeconfig", &kubeconfig, "get", "--raw", &url]).stdout(out).spawn().ok()
}

/// CPU seconds so far of the control plane's components and of `replicas`, by name.
fn cpu_now(replicas: &[&Replica]) -> BTreeMap<String, f64> {
    let parts = control_plane().pids().into_iter().map(|(name, pid)| (name, pid.to_string()));
    let plumbs = replicas.iter().map(|r| (r.identity.clone(), r.child.id().to_string()));
    parts.chain(plumbs).map(|(name, pid)| (name, cpu_seconds(&pid))).collect()
}

/// The CPU seconds spent since `before` ([`cpu_now`]), as "name 1.2 s, …".
fn cpu_since(before: &BTreeMap<String, f64>, replicas: &[&Replica]) -> String {
    let now = cpu_now(replicas);
    let spent = now.iter().map(|(name, t)| format!("{name} {:.1} s", t - before.get(name).copied().unwrap_or(0.0)));
    spent.collect::<Vec<_>>().join(", ")
}

/// `SHARD_APPS` (3,000) applications × 10 ConfigMaps, served by one `plumb serve` and,
/// side by side on the same control plane (other namespaces, other status namespace),
/// by 3 replicas with `--shards 6`: time to all Synced, RSS per replica, the memory
/// per application; then SIGKILL of one replica: time until its applications are
/// Synced under the others, and the object writes and dry-runs that took.
async fn p8_shards(t: &mut Table) {
    let apps: usize = env_or("SHARD_APPS", 3000);
    let lab = Lab::new("p8");
    for a in 0..apps {
        let objects: Vec<Value> = (0..10)
            .map(|i| {
                let mut cm = config_map("x", &format!("a{a:04}-cm-{i}"), &format!("value-{i}"));
                cm["metadata"].as_object_mut().unwrap().remove("namespace");
                cm
            })
            .collect();
        lab.repo.write(&format!("apps/a{a:04}/all.yaml"), &yaml(&objects)).unwrap();
    }
    lab.repo.commit("applications").unwrap();
    let env = "    syncPolicy: {automated: true, prune: true, selfHeal: true}\n    reconcileInterval: 1h";
    let repos = [("r".to_string(), lab.url.clone())];
    // 100 applications a namespace (`P8_PER_NAMESPACE`)
    let per_namespace: usize = env_or("P8_PER_NAMESPACE", 100);
    let fleet = |set: &str| {
        let apps: Vec<(String, String, String, String)> = (0..apps)
            .map(|a| {
                let ns = format!("p8-{set}-{}", a / per_namespace);
                (format!("a{a:04}"), "r".into(), format!("apps/a{a:04}"), ns)
            })
            .collect();
        let namespaces: String = (0..apps.len().div_ceil(per_namespace))
            .map(|n| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: p8-{set}-{n}}}\n---\n"))
            .collect();
        support::kubectl_apply(&namespaces);
        lab.policy(&format!("p8-{set}.yaml"), &policy_text(&format!("plumb-bench-p8-{set}"), &repos, &apps, env))
    };
    let dir = lab.tmp.path().to_path_buf();
    let all_synced = |status_ns: String, what: String| async move {
        wait_for(&what, Duration::from_secs(1800), || async {
            (synced_apps(&status_ns).await.len() == apps).then_some(())
        })
        .await;
    };

    // one replica, its applications in the namespaces of `set`
    let (fleet, dir, all_synced) = (&fleet, &dir, &all_synced);
    let run_one = |set: &'static str| async move {
        let policy = fleet(set);
        let cpu = cpu_now(&[]);
        let one = Replica::start(
            &format!("p8-{set}"),
            &policy,
            dir,
            std::env::var("P8_ONE_SHARDS").ok().map(|s| s.parse().unwrap()),
        );
        let _profile = api_profile(set, 80);
        let started = Instant::now();
        let started_at = jiff::Timestamp::now();
        let status_ns = format!("plumb-bench-p8-{set}");
        all_synced(status_ns, format!("{apps} applications Synced by one replica")).await;
        let one_synced = started.elapsed();
        eprintln!("P8 CPU, one replica ({set}) until all Synced: {}", cpu_since(&cpu, &[&one]));
        let names: Vec<String> = (0..apps).map(|a| format!("a{a:04}")).collect();
        eprintln!("P8 one replica ({set}): {}", pass_ends(&one, &names, started_at));
        one.print_requests(&format!("one replica ({set})"), jiff::Timestamp::UNIX_EPOCH);
        all_idle(&[&one], Duration::from_secs(300)).await;
        let (one_rss, one_hwm) = rss_mib(one.child.id());
        eprintln!("P8 memory, one replica ({set}): {}; {}", rss_parts(one.child.id()), anon_regions(one.child.id()));
        eprintln!(
            "P8: one replica ({set}), {apps} applications Synced in {:.1} s; RSS {one_rss:.0} MiB (peak {one_hwm:.0} MiB)",
            one_synced.as_secs_f64()
        );
        drop(one);
        (one_synced, one_rss, one_hwm)
    };
    let run_three = || async {
        // three replicas, six shards
        let policy = fleet("three");
        let names = ["p8-a", "p8-b", "p8-c"];
        let cpu = cpu_now(&[]);
        let mut replicas: Vec<Replica> = names.iter().map(|n| Replica::start(n, &policy, dir, Some(6))).collect();
        let _profile = api_profile("three", 80);
        let started = Instant::now();
        let started_at = jiff::Timestamp::now();
        all_synced("plumb-bench-p8-three".into(), format!("{apps} applications Synced by three replicas")).await;
        let three_synced = started.elapsed();
        // a replica that exited (say, its port taken between the bench choosing it and
        // plumb binding it) leaves the others all the shards: not the run to measure
        for r in &mut replicas {
            if let Ok(Some(exit)) = r.child.try_wait() {
                let log = std::fs::read_to_string(&r.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                panic!("P8: replica {} exited ({exit}) during the run; its last log lines: {tail:#?}", r.identity);
            }
        }
        eprintln!("P8 CPU, three replicas until all Synced: {}", cpu_since(&cpu, &replicas.iter().collect::<Vec<_>>()));
        // where the time went: when each replica took its shards, and its passes' ends
        let names: Vec<String> = (0..apps).map(|a| format!("a{a:04}")).collect();
        let since = |t: jiff::Timestamp| started_at.duration_until(t).as_secs_f64();
        for r in &replicas {
            let taken: Vec<String> = r.shards_taken().into_iter().map(|t| format!("{:.1}", since(t))).collect();
            eprintln!(
                "P8 three replicas, {}: shards taken at +{} s; {}; {} passes asked again after a late renew",
                r.identity,
                taken.join(", +"),
                pass_ends(r, &names, started_at),
                r.late_renews()
            );
        }
        for r in &replicas {
            r.print_requests("three replicas", jiff::Timestamp::UNIX_EPOCH);
        }
        all_idle(&replicas.iter().collect::<Vec<_>>(), Duration::from_secs(300)).await;
        let by = synced_apps("plumb-bench-p8-three").await;
        let rss: Vec<(String, f64, f64, usize)> = replicas
            .iter()
            .map(|r| {
                let (rss, hwm) = rss_mib(r.child.id());
                (r.identity.clone(), rss, hwm, by.values().filter(|x| **x == r.identity).count())
            })
            .collect();
        for r in &replicas {
            eprintln!("P8 memory, {}: {}; {}", r.identity, rss_parts(r.child.id()), anon_regions(r.child.id()));
        }
        let shown: Vec<String> = rss
            .iter()
            .map(|(id, rss, hwm, n)| format!("{id} {rss:.0} MiB (peak {hwm:.0}), {n} applications"))
            .collect();
        eprintln!(
            "P8: three replicas, {apps} applications Synced in {:.1} s; {}",
            three_synced.as_secs_f64(),
            shown.join("; ")
        );
        (replicas, three_synced, by, rss, shown)
    };
    // one replica before the three and one after: each run meets the store the runs
    // before it left (more objects, more history), and the second run on this control
    // plane took about 20 % longer than the first whichever ran it; the mean of the two
    // single-replica runs meets the store the three replicas met
    let before = run_one("one").await;
    let (mut replicas, three_synced, by, rss, shown) = run_three().await;
    let after = run_one("one-after").await;
    let one_synced = (before.0 + after.0) / 2;
    let (one_rss, one_hwm) = ((before.1 + after.1) / 2.0, (before.2 + after.2) / 2.0);
    let mean_rss = rss.iter().map(|r| r.1).sum::<f64>() / 3.0;
    let mean_apps = rss.iter().map(|r| r.3 as f64).sum::<f64>() / 3.0;
    // the memory one more application costs a replica: the single replica's RSS against
    // the sharded replicas' mean, over the applications between them
    let per_app_kib = (one_rss - mean_rss) * 1024.0 / (apps as f64 - mean_apps);

    // SIGKILL the replica running the most applications
    let victim = rss.iter().max_by_key(|r| r.3).unwrap().0.clone();
    let moved: Vec<String> = by.iter().filter(|(_, r)| **r == victim).map(|(a, _)| a.clone()).collect();
    let (writes_before, verbs_before) =
        tally(&replicas.iter().filter(|r| r.identity != victim).collect::<Vec<_>>()).await;
    let survivor_ids: Vec<String> =
        replicas.iter().filter(|r| r.identity != victim).map(|r| r.identity.clone()).collect();
    let cpu = cpu_now(&replicas.iter().filter(|r| r.identity != victim).collect::<Vec<_>>());
    let killed = Instant::now();
    let killed_at = jiff::Timestamp::now();
    replicas.iter_mut().find(|r| r.identity == victim).unwrap().kill();
    wait_for("the killed replica's applications Synced under the others", Duration::from_secs(900), || async {
        let now = synced_apps("plumb-bench-p8-three").await;
        moved.iter().all(|a| now.get(a).is_some_and(|r| survivor_ids.contains(r))).then_some(())
    })
    .await;
    let takeover = killed.elapsed();
    // the survivors' own record of it: the end of the last moved application's pass
    // (the kubectl reads above see it up to ~5 s later)
    let passed = replicas.iter().filter(|r| r.identity != victim).filter_map(|r| r.last_pass_of(&moved)).max();
    let passed = passed.map_or(f64::NAN, |t| killed_at.duration_until(t).as_secs_f64());
    // where that time went: the Lease expiring (a shard taken), then the passes
    let since = |t: jiff::Timestamp| killed_at.duration_until(t).as_secs_f64();
    let survivors: Vec<&Replica> = replicas.iter().filter(|r| r.identity != victim).collect();
    for r in &survivors {
        let taken: Vec<String> =
            r.shards_taken().into_iter().filter(|t| *t > killed_at).map(|t| format!("{:.1}", since(t))).collect();
        let passes: Vec<f64> = r.passes_of(&moved).into_iter().filter(|t| *t > killed_at).map(since).collect();
        let (first, last) = passes.iter().fold((f64::INFINITY, 0.0f64), |(a, b), t| (a.min(*t), b.max(*t)));
        eprintln!(
            "P8 takeover, {}: shards taken at +{} s; {} passes of moved applications ended between +{first:.1} and +{last:.1} s",
            r.identity,
            taken.join(", +"),
            passes.len()
        );
    }
    eprintln!("P8 CPU, takeover until all Synced under the others: {}", cpu_since(&cpu, &survivors));
    all_idle(&survivors, Duration::from_secs(300)).await;
    for r in &survivors {
        let (rss, hwm) = rss_mib(r.child.id());
        eprintln!("P8 takeover, {}: RSS {rss:.0} MiB (peak {hwm:.0} MiB) once idle again", r.identity);
    }
    let (writes_after, verbs_after) = tally(&survivors).await;
    let since_kill =
        |verb: &str| verbs_after.get(verb).copied().unwrap_or(0.0) - verbs_before.get(verb).copied().unwrap_or(0.0);
    let (writes, dry_runs, patches) = (writes_after - writes_before, since_kill("dryrun"), since_kill("patch"));
    let asked: Vec<String> = verbs_after
        .keys()
        .map(|verb| (verb, since_kill(verb)))
        .filter(|(_, n)| *n > 0.0)
        .map(|(verb, n)| format!("{verb} {n:.0}"))
        .collect();
    eprintln!("P8 takeover: the survivors' API requests for {} applications: {}", moved.len(), asked.join(", "));
    for r in &survivors {
        r.print_requests("takeover", killed_at);
    }
    drop(replicas);
    t.add(
        "P8",
        format!("{apps} applications × 10 ConfigMaps: time to all Synced from start; RSS per replica once idle"),
        format!("3 replicas, 6 shards: {:.1} s; {}", three_synced.as_secs_f64(), shown.join("; ")),
        format!(
            "1 replica, mean of a run before and one after: {:.1} s ({:.1} and {:.1}); {one_rss:.0} MiB ({:.0} and {:.0}; peak {one_hwm:.0} MiB)",
            one_synced.as_secs_f64(),
            before.0.as_secs_f64(),
            after.0.as_secs_f64(),
            before.1,
            after.1
        ),
        format!(
            "{:.2}× the time; {:.2}× the RSS per replica",
            three_synced.as_secs_f64() / one_synced.as_secs_f64(),
            mean_rss / one_rss
        ),
        "no slower; ≈ 1/3 the RSS",
        Some(three_synced <= one_synced.mul_f64(1.1) && mean_rss <= one_rss / 2.0),
    );
    t.add(
        "P8",
        "memory per application per replica (1 replica's RSS against the 3 replicas' mean, over the applications between them)",
        format!("{per_app_kib:.1} KiB"),
        "—",
        "—",
        "reported",
        None,
    );
    t.add(
        "P8",
        format!(
            "SIGKILL of the replica running {} applications: until all of them are Synced under the 2 others",
            moved.len()
        ),
        format!(
            "{passed:.1} s to the last pass's end (status saved, by the survivors' logs), seen by kubectl after {:.1} s; \
             {writes} object writes, {dry_runs:.0} dry-runs, {patches:.0} other PATCH requests (status)",
            takeover.as_secs_f64()
        ),
        "—",
        format!("{:.1}× the Lease duration ({P8_LEASE} s)", passed / P8_LEASE as f64),
        "≤ 2 × Lease duration, 0 writes",
        Some(passed <= 2.0 * P8_LEASE as f64 && writes == 0),
    );
}

/// One round of `plumb serve`'s repository pollers (one `ls-remote` each); the
/// applications whose revision moved.
async fn poller_round(ctx: &Context, pollers: &mut [Poller]) -> Vec<String> {
    let mut moved = Vec::new();
    for p in pollers {
        moved.extend(p.round(ctx.sources()).await.unwrap());
    }
    moved
}

// ---------------------------------------------------------------------------------- P6

/// A repository of `commits` commits and `files` files outside `apps/`, made with
/// `git fast-import`, plus one small application under `apps/small/`.
fn big_repo(repo: &plumb_lab::Repo, commits: usize, files: usize) {
    let mut stream = String::new();
    let mark_base = 1;
    let small: Vec<Value> = (0..10).map(|i| config_map("p6", &format!("cm-{i}"), "v")).collect();
    let small = yaml(&small);
    for c in 0..commits {
        let _ = writeln!(stream, "commit refs/heads/main\nmark :{}", mark_base + c);
        let msg = format!("commit {c}");
        let _ = write!(
            stream,
            "committer Bench <b@example.invalid> {} +0000\ndata {}\n{msg}\n",
            1_700_000_000 + c,
            msg.len()
        );
        if c > 0 {
            let _ = writeln!(stream, "from :{}", mark_base + c - 1);
        }
        if c == 0 {
            for f in 0..files {
                let body = format!("file {f}\n");
                let _ = write!(stream, "M 644 inline data/d{:03}/f{f:05}.txt\ndata {}\n{body}\n", f % 1000, body.len());
            }
            let _ = write!(stream, "M 644 inline apps/small/all.yaml\ndata {}\n{small}\n", small.len());
        } else {
            let body = format!("change {c}\n");
            let _ = write!(
                stream,
                "M 644 inline data/d{:03}/f{:05}.txt\ndata {}\n{body}\n",
                c % 1000,
                c % files,
                body.len()
            );
        }
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&repo.bare)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), stream.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "git fast-import");
}

/// One commit on main of `repo`'s bare repository changing file `path` (fast-import).
fn commit_one(repo: &plumb_lab::Repo, path: &str, n: usize) {
    let body = format!("new change {n}\n");
    let msg = format!("new {n}");
    let stream = format!(
        "commit refs/heads/main\ncommitter Bench <b@example.invalid> {} +0000\ndata {}\n{msg}\nfrom refs/heads/main^0\nM 644 inline {path}\ndata {}\n{body}\n",
        1_800_000_000 + n,
        msg.len(),
        body.len()
    );
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&repo.bare)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), stream.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "git fast-import");
}

async fn p6(t: &mut Table) {
    let lab = Lab::new("p6");
    let started = Instant::now();
    big_repo(&lab.repo, 10_000, 20_000);
    eprintln!("P6 repository made in {:.1} s", started.elapsed().as_secs_f64());
    let cache: PathBuf = lab.tmp.path().join("mirror");
    let url = lab.url.clone();
    let mirror =
        tokio::task::spawn_blocking(move || plumb::source::Mirror::open(&cache, &url, Default::default()).unwrap())
            .await
            .unwrap();
    let mirror = Arc::new(std::sync::Mutex::new(mirror));
    let resolve = |m: Arc<std::sync::Mutex<plumb::source::Mirror>>| async move {
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let r = m.lock().unwrap().resolve("main").unwrap();
            (started.elapsed(), r)
        })
        .await
        .unwrap()
    };
    let g0 = lab.git.counts();
    let (clone_time, _) = resolve(mirror.clone()).await;
    let g1 = lab.git.counts();
    let mut detect = Vec::new();
    for _ in 0..10 {
        detect.push(ms(resolve(mirror.clone()).await.0));
    }
    let detect = median(&mut detect);
    let mut fetch = Vec::new();
    let mut bytes = Vec::new();
    for n in 0..5 {
        commit_one(&lab.repo, &format!("data/d000/f{n:05}.txt"), n);
        let g = lab.git.counts();
        let (took, r) = resolve(mirror.clone()).await;
        assert!(r.downloaded);
        fetch.push(ms(took));
        bytes.push((lab.git.counts().2 - g.2) as f64);
    }
    let fetch = median(&mut fetch);
    let bytes = median(&mut bytes);
    let full_bytes = (g1.2 - g0.2) as f64;

    // the pass of an application whose path did not change, after a new commit elsewhere
    let env = "    syncPolicy: {automated: true, prune: true, selfHeal: true}";
    let apps = [("small".to_string(), "r".to_string(), "apps/small".to_string(), "p6".to_string())];
    kubectl(&["create", "namespace", "p6"]);
    let policy = lab.policy("p6.yaml", &policy_text("plumb-bench-p6", &[("r".into(), lab.url.clone())], &apps, env));
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), true).await;
    ctx.run_pass("small", Mode::Policy, None).await.unwrap();
    ctx.run_pass("small", Mode::Policy, None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    ctx.run_pass("small", Mode::Policy, None).await.unwrap();
    let mut unchanged = Vec::new();
    // a render that ran (not a cached one) is counted in this histogram
    let renders = || histogram(&ctx.metrics.encode(), "plumb_render_duration_seconds").1;
    let renders_before = renders();
    for n in 10..15 {
        commit_one(&lab.repo, &format!("data/d001/f{n:05}.txt"), n);
        let started = Instant::now();
        ctx.run_pass("small", Mode::Policy, None).await.unwrap();
        unchanged.push(ms(started.elapsed()));
    }
    let rendered_again = renders() - renders_before;
    let unchanged = median(&mut unchanged);
    t.add(
        "P6",
        "10,000 commits, 20,000 files: detect a new commit (ls-remote, nothing new), median",
        format!("{detect:.1} ms"),
        format!("first clone {:.0} ms, {:.1} MiB", ms(clone_time), full_bytes / 1048576.0),
        "—",
        "≤ 50 ms",
        Some(detect <= 50.0),
    );
    t.add(
        "P6",
        "fetch one new commit changing one file, median",
        format!("{fetch:.1} ms, {:.1} KiB", bytes / 1024.0),
        format!("first clone {:.1} MiB", full_bytes / 1048576.0),
        format!("{:.4} of a clone's bytes", bytes / full_bytes),
        "proportional to the change",
        Some(bytes / full_bytes < 0.01),
    );
    t.add(
        "P6",
        "pass of an application whose path did not change, after a commit elsewhere (median)",
        format!("{unchanged:.1} ms; rendered again {rendered_again}/5"),
        "—",
        "—",
        "render costs nothing",
        Some(rendered_again == 0.0),
    );
}

// ---------------------------------------------------------------------------------- P9

/// P9 (see the module docs): pull request previews through a real Gitea.
async fn p9_previews(t: &mut Table) {
    let pushes: usize = env_or("PREVIEWS", 5);
    let ns = "p9";
    let gitea = plumb_lab::Gitea::start().await.unwrap();
    let (user, password) = ("bench", "Bench-Passw0rd");
    gitea.create_user(user, password).await.unwrap();
    let scopes = ["write:repository", "write:user", "write:issue"];
    let token = gitea.create_token(user, password, "plumb", &scopes).await.unwrap();
    let repo = gitea.create_repo(&token, "fleet", false).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let work = plumb_lab::Repo::init(tmp.path(), "fleet").unwrap();
    work.set_origin(&repo.clone_url.replacen("http://", &format!("http://{user}:{token}@"), 1)).unwrap();
    kubectl(&["create", "namespace", ns]);
    let objects = |app: &str, changed: &str| -> Vec<Value> {
        (0..50).map(|i| config_map(ns, &format!("{app}-cm-{i:02}"), if i == 0 { changed } else { "v0" })).collect()
    };
    let mut apps = String::new();
    for a in 0..100 {
        let app = format!("a{a:03}");
        work.write(&format!("apps/{app}/all.yaml"), &yaml(&objects(&app, "v0"))).unwrap();
        let _ =
            writeln!(apps, "  - {{name: {app}, repository: fleet, path: apps/{app}, namespace: {ns}, environment: e}}");
    }
    work.commit("100 applications").unwrap();
    std::fs::write(tmp.path().join("token"), &token).unwrap();
    std::fs::write(tmp.path().join("webhook-secret"), "p9-secret").unwrap();
    let policy = tmp.path().join("p9.yaml");
    std::fs::write(
        &policy,
        format!(
            "settings: {{statusNamespace: plumb-bench-p9}}\nrepositories:\n  - {{name: fleet, url: {}, insecure: true, webhookSecretFile: webhook-secret, commitStatus: {{provider: gitea, tokenFile: token}}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true}}\n    reconcileInterval: 1h\napplications:\n{apps}",
            repo.clone_url
        ),
    )
    .unwrap();
    let plumb = Plumb::start(&policy, &tmp.path().join("cache")).await;
    let started = Instant::now();
    wait_for("100 applications Synced", Duration::from_secs(900), || async {
        let synced = plumb.ctx.statuses().await.iter().filter(|s| s.sync == SyncStatus::Synced).count();
        (synced == 100).then_some(())
    })
    .await;
    eprintln!("P9: 100 applications × 50 ConfigMaps Synced in {:.1} s", started.elapsed().as_secs_f64());
    let hook = format!("http://{}/api/webhook", plumb.addr);
    gitea.create_webhook(&token, &repo, &hook, "p9-secret", &["pull_request", "pull_request_sync"]).await.unwrap();
    work.switch("pr").unwrap();
    work.write("apps/a042/all.yaml", &yaml(&objects("a042", "v1"))).unwrap();
    let head = work.commit_branch("a042: v1").unwrap();
    let number = gitea.create_pull(&token, &repo, "pr", "main", "a042: v1").await.unwrap();
    let comment_with = |sha: String| {
        let (gitea, token, repo) = (&gitea, &token, &repo);
        async move {
            let all = gitea.comments(token, repo, number).await.unwrap();
            all.into_iter().find(|c| c["body"].as_str().is_some_and(|b| b.contains(&sha[..7])))
        }
    };
    wait_for("the first preview comment", Duration::from_secs(120), || comment_with(head.clone())).await;
    let (mut wall, mut own, mut requests, mut dry_runs) = (vec![], vec![], vec![], vec![]);
    for i in 0..pushes {
        // one pull request is previewed at most every 10 s: each push waits that out
        tokio::time::sleep(Duration::from_secs(11)).await;
        work.write("apps/a042/all.yaml", &yaml(&objects("a042", &format!("v{}", i + 2)))).unwrap();
        let (_, text) = plumb.get("/metrics").await;
        let (sum0, n0) = histogram(&text, "plumb_preview_duration_seconds");
        let (r0, d0) = (plumb.ctx.cluster.requests().0, plumb.ctx.cluster.dry_runs());
        let started = Instant::now();
        let head = work.commit_branch(&format!("a042: v{}", i + 2)).unwrap();
        loop {
            if comment_with(head.clone()).await.is_some() {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(120), "no comment for {head}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        wall.push(ms(started.elapsed()));
        // the status is posted after the comment, and the preview timed once both are
        let (sum1, n1) = wait_for("the preview timed", Duration::from_secs(30), || async {
            let (_, text) = plumb.get("/metrics").await;
            let (sum1, n1) = histogram(&text, "plumb_preview_duration_seconds");
            (n1 > n0).then_some((sum1, n1))
        })
        .await;
        own.push((sum1 - sum0) * 1000.0 / (n1 - n0).max(1.0));
        requests.push((plumb.ctx.cluster.requests().0 - r0) as f64);
        dry_runs.push((plumb.ctx.cluster.dry_runs() - d0) as f64);
    }
    let file = tmp.path().join("a042.json");
    std::fs::write(&file, json_stream(&objects("a042", &format!("v{}", pushes + 1)))).unwrap();
    let path = file.to_str().unwrap();
    let mut kubectl_ms: Vec<f64> = (0..3)
        .map(|_| {
            ms(kubectl_timed(&["diff", "--server-side", "--force-conflicts", "--field-manager=plumb", "-f", path]))
        })
        .collect();
    plumb.stop().await;
    let (wall, own, req, dry, k) =
        (median(&mut wall), median(&mut own), median(&mut requests), median(&mut dry_runs), median(&mut kubectl_ms));
    t.add(
        "P9",
        format!("pull request touching 1 of 100 applications × 50 ConfigMaps (1 changed), real Gitea: its webhook → plumb's comment edited, p50 of {pushes}"),
        format!("webhook read → comment and status posted {own:.0} ms (push → comment seen {wall:.0} ms, most of it Gitea's own queue); {req:.0} API requests, {dry:.0} dry-runs per preview"),
        format!("kubectl diff --server-side of the application's 50 objects {k:.0} ms"),
        format!("{:.1}×", k / own),
        "≤ 1 s, ≤ 1 dry-run per changed object",
        Some(own <= 1000.0 && dry <= 1.0),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let started = Instant::now();
    let cp = control_plane();
    eprintln!("control plane up in {:.1} s ({})", started.elapsed().as_secs_f64(), cp.dir().display());
    let mut t = Table::default();
    // P2/P3 first: the initial sync and its raw client on a control plane that nothing
    // else has worked on yet
    if !skipped("P2") {
        p2_p3(&mut t).await;
    }
    if !skipped("P1") {
        p1(&mut t).await;
    }
    if !skipped("P6") {
        p6(&mut t).await;
    }
    if !skipped("P7") {
        p7_thousand_apps(&mut t).await;
    }
    if !skipped("P4") {
        p4_ten_by_thousand(&mut t).await;
    }
    if !skipped("P8") {
        p8_shards(&mut t).await;
    }
    if !skipped("P9") {
        p9_previews(&mut t).await;
    }
    eprintln!("all figures in {:.0} s", started.elapsed().as_secs_f64());
    t.print();
}
