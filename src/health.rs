//! Health: is the object actually working? A pure function of the live object.
//!
//! Independent of sync status: *Synced but Degraded* (Git's image cannot start) and
//! *OutOfSync but Healthy* (a hand-scaled Deployment runs fine) are both real states.
//!
//! Rules, in order (after kstatus, `sigs.k8s.io/cli-utils/pkg/kstatus/status`, and Argo
//! CD's `gitops-engine/pkg/health`):
//! - no live object → `Missing`; being deleted → `Progressing`;
//! - `metadata.generation` > `status.observedGeneration` → `Progressing` (the controller
//!   has not seen the latest spec);
//! - Deployment: `spec.paused` → `Suspended`; condition `Progressing` with reason
//!   `ProgressDeadlineExceeded` → `Degraded`; fewer updated / available replicas than
//!   `spec.replicas` → `Progressing` ("2/3 replicas available");
//! - Pod: phase `Succeeded` → Healthy, `Failed` → Degraded; a container waiting with
//!   `CrashLoopBackOff`, `ImagePullBackOff`, `ErrImagePull`, `CreateContainerConfigError`
//!   … → Degraded; Running and Ready → Healthy; otherwise Progressing;
//! - other kinds: generic conditions (`Stalled=True` → Degraded, `Reconciling=True` →
//!   Progressing, `Ready=False` → Progressing), else Healthy when present.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Health status, ordered from best to worst for the roll-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub enum HealthStatus {
    /// Working as declared.
    Healthy,
    /// Deliberately paused or suspended.
    Suspended,
    /// Not yet working, expected to get there.
    Progressing,
    /// Declared in Git, absent live.
    Missing,
    /// Failed, will not get better by waiting.
    Degraded,
    /// Could not be assessed.
    #[default]
    Unknown,
}

impl std::fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A status with a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The status.
    pub status: HealthStatus,
    /// Human reason (empty when Healthy without remark).
    pub message: String,
}

impl Health {
    fn new(status: HealthStatus, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }
}

/// Health of a live object (`None` = does not exist).
pub fn assess(live: Option<&Value>) -> Health {
    let Some(obj) = live else {
        return Health::new(HealthStatus::Missing, "not found in the cluster");
    };
    if obj.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null()) {
        return Health::new(HealthStatus::Progressing, "being deleted");
    }
    let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = obj.pointer("/status/observedGeneration").and_then(Value::as_i64);
    if let (Some(g), Some(o)) = (generation, observed) {
        if g > o {
            return Health::new(HealthStatus::Progressing, format!("generation {g} not yet observed (at {o})"));
        }
    }
    let group = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    match (group, obj.get("kind").and_then(Value::as_str).unwrap_or("")) {
        ("apps/v1", "Deployment") => deployment(obj),
        ("v1", "Pod") => pod(obj),
        _ => generic(obj),
    }
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn field<'a>(c: &'a Value, f: &str) -> &'a str {
    c.get(f).and_then(Value::as_str).unwrap_or("")
}

fn deployment(obj: &Value) -> Health {
    if obj.pointer("/spec/paused").and_then(Value::as_bool) == Some(true) {
        return Health::new(HealthStatus::Suspended, "deployment is paused");
    }
    if let Some(c) = condition(obj, "Progressing") {
        if field(c, "reason") == "ProgressDeadlineExceeded" {
            return Health::new(HealthStatus::Degraded, format!("ProgressDeadlineExceeded: {}", field(c, "message")));
        }
    }
    let n = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let want = obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    let (updated, available, total) =
        (n("/status/updatedReplicas"), n("/status/availableReplicas"), n("/status/replicas"));
    if updated < want {
        return Health::new(HealthStatus::Progressing, format!("{updated}/{want} replicas updated"));
    }
    if total > updated {
        return Health::new(HealthStatus::Progressing, format!("{} old replicas pending termination", total - updated));
    }
    if available < want {
        return Health::new(HealthStatus::Progressing, format!("{available}/{want} replicas available"));
    }
    Health::new(HealthStatus::Healthy, format!("{available}/{want} replicas available"))
}

const DEGRADED_WAITING: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

fn pod(obj: &Value) -> Health {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    match obj.pointer("/status/phase").and_then(Value::as_str) {
        Some("Succeeded") => return Health::new(HealthStatus::Healthy, "pod completed"),
        Some("Failed") => {
            let why = obj.pointer("/status/reason").and_then(Value::as_str).unwrap_or("Failed");
            return Health::new(HealthStatus::Degraded, format!("pod {name} {why}"));
        }
        _ => {}
    }
    for list in ["/status/initContainerStatuses", "/status/containerStatuses"] {
        for cs in obj.pointer(list).and_then(Value::as_array).into_iter().flatten() {
            let reason = cs.pointer("/state/waiting/reason").and_then(Value::as_str).unwrap_or("");
            if DEGRADED_WAITING.contains(&reason) {
                let restarts = cs.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
                return Health::new(HealthStatus::Degraded, format!("pod {name} {reason}, {restarts} restarts"));
            }
        }
    }
    match condition(obj, "Ready") {
        Some(c) if field(c, "status") == "True" => Health::new(HealthStatus::Healthy, ""),
        _ => Health::new(HealthStatus::Progressing, format!("pod {name} not ready")),
    }
}

fn generic(obj: &Value) -> Health {
    if let Some(c) = condition(obj, "Stalled").filter(|c| field(c, "status") == "True") {
        return Health::new(HealthStatus::Degraded, format!("Stalled: {}", field(c, "message")));
    }
    if let Some(c) = condition(obj, "Reconciling").filter(|c| field(c, "status") == "True") {
        return Health::new(HealthStatus::Progressing, format!("Reconciling: {}", field(c, "message")));
    }
    if let Some(c) = condition(obj, "Ready").filter(|c| field(c, "status") == "False") {
        return Health::new(HealthStatus::Progressing, format!("not Ready: {}", field(c, "message")));
    }
    Health::new(HealthStatus::Healthy, "")
}

/// Application health: the worst of its objects' health. `Missing` objects do not make
/// the application Missing while others exist (sync status already says OutOfSync):
/// they count as Progressing unless nothing exists at all. No objects → Healthy.
pub fn roll_up<'a>(healths: impl IntoIterator<Item = &'a HealthStatus>) -> HealthStatus {
    let all: Vec<HealthStatus> = healths.into_iter().copied().collect();
    if !all.is_empty() && all.iter().all(|h| *h == HealthStatus::Missing) {
        return HealthStatus::Missing;
    }
    all.into_iter()
        .map(|h| if h == HealthStatus::Missing { HealthStatus::Progressing } else { h })
        .max()
        .unwrap_or(HealthStatus::Healthy)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{HealthStatus::*, *};

    fn deploy(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "generation": 2}, "spec": spec, "status": status})
    }

    #[test]
    fn deployments() {
        let cases = [
            (
                deploy(
                    json!({"replicas": 3}),
                    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
                ),
                Healthy,
            ),
            (
                deploy(
                    json!({"replicas": 3}),
                    json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
                ),
                Progressing,
            ),
            (
                deploy(
                    json!({"replicas": 3}),
                    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2}),
                ),
                Progressing,
            ),
            (
                deploy(
                    json!({"replicas": 3}),
                    json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
                ),
                Progressing,
            ),
            (deploy(json!({"replicas": 3, "paused": true}), json!({"observedGeneration": 2})), Suspended),
            (
                deploy(
                    json!({"replicas": 3}),
                    json!({"observedGeneration": 2, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
                ),
                Degraded,
            ),
            (deploy(json!({"replicas": 0}), json!({"observedGeneration": 2})), Healthy),
        ];
        for (i, (obj, want)) in cases.iter().enumerate() {
            assert_eq!(assess(Some(obj)).status, *want, "case {i}: {}", assess(Some(obj)).message);
        }
        assert_eq!(assess(Some(&cases[2].0)).message, "2/3 replicas available");
    }

    #[test]
    fn pods() {
        let p =
            |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"}, "status": status});
        let crash = p(
            json!({"phase": "Running", "containerStatuses": [{"restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        assert_eq!(assess(Some(&crash)), Health::new(Degraded, "pod web-1 CrashLoopBackOff, 4 restarts"));
        assert_eq!(
            assess(Some(&p(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})))).status,
            Healthy
        );
        assert_eq!(assess(Some(&p(json!({"phase": "Pending"})))).status, Progressing);
        assert_eq!(assess(Some(&p(json!({"phase": "Succeeded"})))).status, Healthy);
        assert_eq!(assess(Some(&p(json!({"phase": "Failed"})))).status, Degraded);
    }

    #[test]
    fn others_and_roll_up() {
        assert_eq!(assess(None).status, Missing);
        assert_eq!(
            assess(Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))).status,
            Healthy
        );
        assert_eq!(roll_up(&[Healthy, Missing]), Progressing);
        assert_eq!(roll_up(&[Missing, Missing]), Missing);
        assert_eq!(roll_up(&[Healthy, Degraded, Progressing]), Degraded);
        assert_eq!(roll_up(&[]), Healthy);
    }
}
