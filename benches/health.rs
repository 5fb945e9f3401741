//! Benchmark: health of an application of 1,000 live objects, from memory.
//!
//! Builds 1,000 mixed live objects as a watch cache would hold them — Deployments with
//! their ReplicaSets and pods (some crash-looping), StatefulSets and DaemonSets with
//! pods, Services (some LoadBalancers without an address), Ingresses, ConfigMaps,
//! Secrets, Pods, Jobs, CronJobs, HPAs, PVCs, PDBs and custom resources — then times one
//! full assessment pass (every object assessed with its children and two overrides,
//! roll-up, stall tracking). Target: ≤ 5 ms per pass. Health takes values only: no
//! Kubernetes client exists in this process, so the API requests issued are 0 by
//! construction.
//!
//! Run: `cargo bench --bench health` (`PASSES=500` to change the count).
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use jiff::{SignedDuration, Timestamp};
use plumb::{
    config::HealthOverride,
    health::{self, HealthInput, HealthSettings, HealthStatus, ProgressingSince},
    tracking::ObjectKey,
};
use serde_json::{Value, json};

const OBJECTS: usize = 1000;

/// One object and the children the caller would pass from its watch cache.
struct Entry {
    live: Value,
    pods: Vec<Value>,
    replica_sets: Vec<Value>,
}

fn ago(now: Timestamp, secs: i64) -> String {
    (now - SignedDuration::from_secs(secs)).to_string()
}

fn pod(now: Timestamp, name: &str, label: (&str, &str), crash: bool) -> Value {
    let (state, ready, restarts) = if crash {
        (json!({"waiting": {"reason": "CrashLoopBackOff"}}), "False", 5)
    } else {
        (json!({"running": {"startedAt": ago(now, 3000)}}), "True", 0)
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "creationTimestamp": ago(now, 3600), "labels": {label.0: label.1, "app": "web"}},
        "spec": {"restartPolicy": "Always", "containers": [{"name": "app", "image": "registry.example.test/web:1.4.2"}]},
        "status": {"phase": "Running", "startTime": ago(now, 3600),
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": ago(now, 3000)},
                           {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": ready == "True", "restartCount": restarts, "state": state}]}})
}

// The fixture: one literal per kind of object (the line limit is for src/).
#[allow(clippy::too_many_lines)]
fn build(now: Timestamp) -> Vec<Entry> {
    let mut out = Vec::with_capacity(OBJECTS);
    let mut push =
        |live: Value, pods: Vec<Value>, replica_sets: Vec<Value>| out.push(Entry { live, pods, replica_sets });
    let meta = |name: String| json!({"name": name, "namespace": "bench", "generation": 2, "creationTimestamp": ago(now, 7200)});
    for i in 0..150 {
        let hash = format!("h{i:04}");
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(format!("web-{i}")),
            "spec": {"replicas": 3}, "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
            "conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}});
        d["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "2"});
        let crash = i % 10 == 0;
        if crash {
            d["status"]["availableReplicas"] = json!(2);
        }
        let rs = |rev: &str, h: &str| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": format!("web-{i}-{h}"),
                "annotations": {"deployment.kubernetes.io/revision": rev}, "labels": {"pod-template-hash": h}}})
        };
        let pods = (0..3)
            .map(|p| pod(now, &format!("web-{i}-{hash}-{p}"), ("pod-template-hash", &hash), crash && p == 0))
            .collect();
        push(d, pods, vec![rs("1", "old"), rs("2", &hash)]);
    }
    for i in 0..50 {
        let s = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta(format!("db-{i}")), "spec": {"replicas": 3},
            "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "currentReplicas": 3,
                "currentRevision": format!("db-{i}-r2"), "updateRevision": format!("db-{i}-r2")}});
        let rev = format!("db-{i}-r2");
        let pods =
            (0..3).map(|p| pod(now, &format!("db-{i}-{p}"), ("controller-revision-hash", &rev), false)).collect();
        push(s, pods, vec![]);
    }
    for i in 0..20 {
        let d = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta(format!("agent-{i}")),
            "status": {"observedGeneration": 2, "desiredNumberScheduled": 5, "updatedNumberScheduled": 5, "numberAvailable": 5}});
        let pods =
            (0..5).map(|p| pod(now, &format!("agent-{i}-{p}"), ("controller-revision-hash", "abc"), false)).collect();
        push(d, pods, vec![]);
    }
    for i in 0..150 {
        let lb = i % 5 == 0;
        push(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(format!("svc-{i}")),
                "spec": {"type": if lb {"LoadBalancer"} else {"ClusterIP"}, "ports": [{"port": 80}]}, "status": {"loadBalancer": {}}}),
            vec![],
            vec![],
        );
    }
    for i in 0..50 {
        let class = if i % 2 == 0 { "internal-nginx" } else { "public" };
        push(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta(format!("ing-{i}")),
                "spec": {"ingressClassName": class}, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}),
            vec![],
            vec![],
        );
    }
    for i in 0..300 {
        push(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(format!("cm-{i}")), "data": {"k": "v"}}),
            vec![],
            vec![],
        );
    }
    for i in 0..100 {
        push(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(format!("sec-{i}")), "data": {"k": "dg=="}}),
            vec![],
            vec![],
        );
    }
    for i in 0..50 {
        push(pod(now, &format!("solo-{i}"), ("x", "y"), i % 7 == 0), vec![], vec![]);
    }
    for i in 0..30 {
        push(
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(format!("job-{i}")),
                "status": {"startTime": ago(now, 600), "succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}),
            vec![],
            vec![],
        );
    }
    for i in 0..20 {
        push(
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(format!("cron-{i}")), "spec": {"suspend": i % 4 == 0},
                "status": {"lastScheduleTime": ago(now, 300), "lastSuccessfulTime": ago(now, 290)}}),
            vec![],
            vec![],
        );
    }
    for i in 0..20 {
        push(
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta(format!("hpa-{i}")),
                "status": {"conditions": [{"type": "AbleToScale", "status": "True"}, {"type": "ScalingActive", "status": "True"}]}}),
            vec![],
            vec![],
        );
    }
    for i in 0..20 {
        push(
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta(format!("data-{i}")),
                "spec": {"volumeName": format!("pv-{i}")}, "status": {"phase": "Bound"}}),
            vec![],
            vec![],
        );
    }
    for i in 0..20 {
        push(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(format!("pdb-{i}")),
                "status": {"observedGeneration": 2, "currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1}}),
            vec![],
            vec![],
        );
    }
    for i in 0..20 {
        push(
            json!({"apiVersion": "db.example.com/v1", "kind": "Cluster", "metadata": meta(format!("pg-{i}")),
                "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}}),
            vec![],
            vec![],
        );
    }
    out
}

fn main() {
    let passes: usize = std::env::var("PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let now = Timestamp::now();
    let entries = build(now);
    assert_eq!(entries.len(), OBJECTS);
    let keys: Vec<ObjectKey> = entries.iter().map(|e| ObjectKey::of(&e.live).unwrap()).collect();
    let children: Vec<(Vec<&Value>, Vec<&Value>)> =
        entries.iter().map(|e| (e.pods.iter().collect(), e.replica_sets.iter().collect())).collect();
    let overrides: Vec<HealthOverride> = serde_saphyr::from_str(
        "- {group: networking.k8s.io, kind: Ingress, match: {ingressClassName: internal-nginx}, rule: healthy-when-present}\n\
         - {group: db.example.com, kind: Cluster, conditions: [{type: Ready, status: \"True\", health: Healthy}], otherwise: Progressing}\n",
    )
    .unwrap();
    let overrides: Vec<&HealthOverride> = overrides.iter().collect();
    let settings = HealthSettings::default();
    let child_count: usize = entries.iter().map(|e| e.pods.len() + e.replica_sets.len()).sum();

    let mut since = ProgressingSince::new();
    let mut times = Vec::with_capacity(passes);
    let mut last = (HealthStatus::Unknown, Vec::new());
    for _ in 0..passes {
        let start = Instant::now();
        let healths: Vec<HealthStatus> = entries
            .iter()
            .zip(&children)
            .map(|(e, (pods, sets))| {
                let input = HealthInput::new(Some(&e.live), now, &settings).children(pods, sets).overrides(&overrides);
                health::assess_with(&input).status
            })
            .collect();
        let app = health::roll_up(healths.iter());
        since = health::track_progressing(&since, keys.iter().zip(healths.iter().copied()), now);
        let stall = health::stalled(&since, now, settings.stall_after);
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        last = (app, healths);
        std::hint::black_box(stall);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
    let count = |s: HealthStatus| last.1.iter().filter(|h| **h == s).count();
    println!(
        "health of {OBJECTS} objects ({child_count} child pods/ReplicaSets): app {}, {} Healthy, {} Progressing, {} Degraded, {} Suspended",
        last.0,
        count(HealthStatus::Healthy),
        count(HealthStatus::Progressing),
        count(HealthStatus::Degraded),
        count(HealthStatus::Suspended)
    );
    println!(
        "assess + roll-up + stall tracking, n={passes}: p50 {:.3} ms   p95 {:.3} ms   max {:.3} ms   (target <= 5 ms)",
        pct(0.5),
        pct(0.95),
        pct(1.0)
    );
    println!(
        "API requests issued: 0 (health takes values from the watch cache; no Kubernetes client exists in this process)"
    );
}
