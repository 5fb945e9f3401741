//! Pod health.
//!
//! Sources: Argo CD `gitops-engine/pkg/health/health_pod.go` (waiting reasons, restart
//! policy), kstatus `core.go` (Unschedulable after a grace period), the Kubernetes pod
//! lifecycle documentation (phases, container states, `restartPolicy`).
//!
//! | state | health |
//! |---|---|
//! | phase `Succeeded` | Healthy (`pod completed`) |
//! | phase `Failed` | Degraded, naming the reason: `OOMKilled`, exit code, eviction |
//! | phase `Unknown` | Unknown (node lost) |
//! | a container waiting with `CrashLoopBackOff`, `ImagePullBackOff`, `ErrImagePull`, `CreateContainerConfigError`, … (any reason starting `Err` or ending `Error`/`BackOff`, or `InvalidImageName`) | Degraded: `pod web-1 CrashLoopBackOff, 4 restarts` (`(OOMKilled)` when the last run was killed for memory) |
//! | Pending, `PodScheduled=False` reason `Unschedulable` | Progressing, Degraded once unschedulable longer than `unschedulable_after` |
//! | Pending otherwise | Progressing (`pod web-1 Pending: ContainerCreating`) |
//! | Running, `restartPolicy: Always`, `Ready=True` | Healthy |
//! | Running, `Always`, not ready after a restart | Degraded (`pod web-1 not ready after 2 restarts, last OOMKilled`) |
//! | Running, `Always`, not ready | Progressing |
//! | Running, `OnFailure` / `Never` | Progressing: the pod runs to completion, readiness does not apply |

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::{
    Clock, Health, HealthSettings, HealthStatus,
    fields::{self, age, restarts},
};

/// Whether a container waiting reason means the container cannot start (Argo CD's rule:
/// prefix `Err`, suffix `Error` or `BackOff`; plus `InvalidImageName`).
pub fn is_failing_reason(reason: &str) -> bool {
    reason.starts_with("Err")
        || reason.ends_with("Error")
        || reason.ends_with("BackOff")
        || reason == "InvalidImageName"
}

/// A container of a pod that cannot start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFailure {
    /// Pod name.
    pub pod: String,
    /// Container name; `None` when the pod has a single container (not worth naming).
    pub container: Option<String>,
    /// The waiting reason, e.g. `CrashLoopBackOff`.
    pub reason: String,
    /// `restartCount` of the container.
    pub restarts: i64,
    /// Reason of the container's last termination, when it was `OOMKilled`.
    pub oom_killed: bool,
}

impl ContainerFailure {
    /// `pod web-1 CrashLoopBackOff, 4 restarts`; `pod web-1 container app
    /// CrashLoopBackOff (OOMKilled), 4 restarts`; `pod web-1 ImagePullBackOff`.
    pub fn message(&self) -> String {
        let mut s = format!("pod {}", self.pod);
        if let Some(c) = &self.container {
            s.push_str(&format!(" container {c}"));
        }
        s.push(' ');
        s.push_str(&self.reason);
        if self.oom_killed {
            s.push_str(" (OOMKilled)");
        }
        if self.restarts > 0 {
            s.push_str(&format!(", {}", restarts(self.restarts)));
        }
        s
    }
}

/// The first container (init containers first) of `pod` waiting with a failing reason
/// ([`is_failing_reason`]).
pub fn failing_container(pod: &Value) -> Option<ContainerFailure> {
    let init = fields::at(pod, "/status/initContainerStatuses").and_then(Value::as_array);
    let main = fields::at(pod, "/status/containerStatuses").and_then(Value::as_array);
    let several = init.map_or(0, Vec::len) + main.map_or(0, Vec::len) > 1;
    init.into_iter().chain(main).flatten().find_map(|cs| {
        let reason = fields::str_at(cs, "/state/waiting/reason").filter(|r| is_failing_reason(r))?;
        Some(ContainerFailure {
            pod: fields::name(pod).to_string(),
            container: several.then(|| fields::str_at(cs, "/name").unwrap_or("").to_string()),
            reason: reason.to_string(),
            restarts: fields::count(cs, "/restartCount"),
            oom_killed: fields::str_at(cs, "/lastState/terminated/reason") == Some("OOMKilled"),
        })
    })
}

/// Since when `pod` has not been ready: the `Ready=False` condition's transition time,
/// else `status.startTime`, else `metadata.creationTimestamp`.
pub fn not_ready_since(pod: &Value) -> Option<Timestamp> {
    fields::condition(pod, "Ready")
        .filter(|c| !c.is_true())
        .and_then(|c| c.since())
        .or_else(|| fields::timestamp(pod, "/status/startTime"))
        .or_else(|| fields::timestamp(pod, "/metadata/creationTimestamp"))
}

/// Health of a Pod (table in the module documentation).
pub fn pod(obj: &Value, clock: Clock<'_>, settings: &HealthSettings) -> Health {
    let name = fields::name(obj);
    let phase = fields::str_at(obj, "/status/phase").unwrap_or("");
    match phase {
        "Succeeded" => return Health::healthy("pod completed"),
        "Failed" => return Health::degraded(format!("pod {name} failed: {}", failure_cause(obj))),
        "Unknown" => {
            let why = fields::str_at(obj, "/status/message").unwrap_or("node not reporting");
            return Health::new(HealthStatus::Unknown, format!("pod {name} phase Unknown: {why}"));
        }
        _ => {}
    }
    if let Some(f) = failing_container(obj) {
        return Health::degraded(f.message());
    }
    if phase == "Running" {
        let policy = fields::str_at(obj, "/spec/restartPolicy").unwrap_or("Always");
        if policy != "Always" {
            return Health::progressing(format!("pod {name} running (restartPolicy {policy})"));
        }
        if fields::condition(obj, "Ready").is_some_and(|c| c.is_true()) {
            return Health::healthy("");
        }
        if let Some((n, last)) = last_restart(obj) {
            return Health::degraded(format!("pod {name} not ready after {}, last {last}", restarts(n)));
        }
        return Health::progressing(format!("pod {name} not ready"));
    }
    // Pending (or no phase yet)
    if let Some(c) = fields::condition(obj, "PodScheduled").filter(|c| c.is_false() && c.reason == "Unschedulable") {
        let since = c.since().or_else(|| fields::timestamp(obj, "/metadata/creationTimestamp"));
        let waited = fields::elapsed(clock.now(), since);
        let detail = if c.message.is_empty() { String::new() } else { format!(": {}", c.message) };
        return if waited >= SignedDuration::try_from(settings.unschedulable_after).unwrap_or(SignedDuration::MAX) {
            Health::degraded(format!("pod {name} Unschedulable for {}{detail}", age(waited)))
        } else {
            Health::progressing(format!("pod {name} waiting to be scheduled{detail}"))
        };
    }
    let waiting = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .filter_map(|p| fields::at(obj, p).and_then(Value::as_array))
        .flatten()
        .find_map(|cs| fields::str_at(cs, "/state/waiting/reason"));
    match waiting {
        Some(r) => Health::progressing(format!("pod {name} Pending: {r}")),
        None => Health::progressing(format!("pod {name} Pending")),
    }
}

/// The largest restart count among the containers and the reason of the last
/// termination of that container (`OOMKilled`, `exit code 1`), when any restarted.
fn last_restart(obj: &Value) -> Option<(i64, String)> {
    let statuses = fields::at(obj, "/status/containerStatuses").and_then(Value::as_array)?;
    let cs = statuses
        .iter()
        .filter(|cs| fields::count(cs, "/restartCount") > 0)
        .max_by_key(|cs| fields::count(cs, "/restartCount"))?;
    let terminated = fields::at(cs, "/lastState/terminated")?;
    Some((fields::count(cs, "/restartCount"), termination(terminated)))
}

/// `OOMKilled`, `exit code 1`, `Error (exit code 2)`.
fn termination(t: &Value) -> String {
    let code = fields::i64_at(t, "/exitCode");
    match (fields::str_at(t, "/reason"), code) {
        (Some("OOMKilled"), _) => "OOMKilled".into(),
        (Some(r), Some(c)) if r != "Error" && r != "Completed" => format!("{r} (exit code {c})"),
        (_, Some(c)) => format!("exit code {c}"),
        (Some(r), None) => r.to_string(),
        (None, None) => "terminated".into(),
    }
}

/// Why a Failed pod failed: pod-level reason (`Evicted: …`, `DeadlineExceeded`), else
/// the first container that terminated unsuccessfully.
fn failure_cause(obj: &Value) -> String {
    if let Some(r) = fields::str_at(obj, "/status/reason") {
        return match fields::str_at(obj, "/status/message") {
            Some(m) if !m.is_empty() => format!("{r}: {m}"),
            _ => r.to_string(),
        };
    }
    let statuses = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .filter_map(|p| fields::at(obj, p).and_then(Value::as_array))
        .flatten();
    for cs in statuses {
        if let Some(t) = fields::at(cs, "/state/terminated").filter(|t| fields::i64_at(t, "/exitCode") != Some(0)) {
            return format!("container {} {}", fields::str_at(cs, "/name").unwrap_or(""), termination(t));
        }
    }
    "Failed".into()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{
        HealthStatus::{self, *},
        test_support::{ago, assess_at},
    };

    fn pod(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "creationTimestamp": ago(3600)}, "spec": spec, "status": status})
    }

    fn waiting(reason: &str, restarts: i64) -> Value {
        json!({"name": "app", "restartCount": restarts, "state": {"waiting": {"reason": reason}}})
    }

    fn check(cases: &[(&str, Value, HealthStatus, &str)]) {
        for (what, obj, status, message) in cases {
            let h = assess_at(obj, &[]);
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "{what}");
        }
    }

    #[test]
    fn finished_and_failing_pods() {
        let cases: Vec<(&str, Value, HealthStatus, &str)> = vec![
            ("completed", pod(json!({}), json!({"phase": "Succeeded"})), Healthy, "pod completed"),
            (
                "failed with OOMKilled",
                pod(
                    json!({"restartPolicy": "Never"}),
                    json!({"phase": "Failed", "containerStatuses": [{"name": "app", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}),
                ),
                Degraded,
                "pod web-1 failed: container app OOMKilled",
            ),
            (
                "failed with an exit code",
                pod(
                    json!({"restartPolicy": "Never"}),
                    json!({"phase": "Failed", "containerStatuses": [{"name": "app", "state": {"terminated": {"reason": "Error", "exitCode": 2}}}]}),
                ),
                Degraded,
                "pod web-1 failed: container app exit code 2",
            ),
            (
                "evicted",
                pod(json!({}), json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"})),
                Degraded,
                "pod web-1 failed: Evicted: low on memory",
            ),
            (
                "crash loop",
                pod(json!({}), json!({"phase": "Running", "containerStatuses": [waiting("CrashLoopBackOff", 4)]})),
                Degraded,
                "pod web-1 CrashLoopBackOff, 4 restarts",
            ),
            (
                "crash loop after OOM",
                pod(
                    json!({}),
                    json!({"phase": "Running", "containerStatuses": [{"name": "app", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"reason": "OOMKilled"}}}]}),
                ),
                Degraded,
                "pod web-1 CrashLoopBackOff (OOMKilled), 2 restarts",
            ),
            (
                "image pull back-off",
                pod(json!({}), json!({"phase": "Pending", "containerStatuses": [waiting("ImagePullBackOff", 0)]})),
                Degraded,
                "pod web-1 ImagePullBackOff",
            ),
            (
                "image pull error, container named among several",
                pod(
                    json!({}),
                    json!({"phase": "Pending", "containerStatuses": [waiting("ContainerCreating", 0), {"name": "side", "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull"}}}]}),
                ),
                Degraded,
                "pod web-1 container side ErrImagePull",
            ),
            (
                "config error in an init container",
                pod(
                    json!({}),
                    json!({"phase": "Pending", "initContainerStatuses": [waiting("CreateContainerConfigError", 0)]}),
                ),
                Degraded,
                "pod web-1 CreateContainerConfigError",
            ),
            (
                "pull failures count whatever the restart policy",
                pod(
                    json!({"restartPolicy": "Never"}),
                    json!({"phase": "Pending", "containerStatuses": [waiting("InvalidImageName", 0)]}),
                ),
                Degraded,
                "pod web-1 InvalidImageName",
            ),
        ];
        check(&cases);
    }

    #[test]
    fn running_and_pending_pods() {
        let ready = json!([{"type": "Ready", "status": "True"}]);
        let not_ready = json!([{"type": "Ready", "status": "False"}]);
        let cases: Vec<(&str, Value, HealthStatus, &str)> = vec![
            ("running and ready", pod(json!({}), json!({"phase": "Running", "conditions": ready})), Healthy, ""),
            (
                "running, not ready yet",
                pod(
                    json!({}),
                    json!({"phase": "Running", "conditions": not_ready, "containerStatuses": [{"name": "app", "restartCount": 0, "state": {"running": {}}}]}),
                ),
                Progressing,
                "pod web-1 not ready",
            ),
            (
                "running, not ready after restarts",
                pod(
                    json!({}),
                    json!({"phase": "Running", "conditions": not_ready, "containerStatuses": [{"name": "app", "restartCount": 2, "state": {"running": {}}, "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}),
                ),
                Degraded,
                "pod web-1 not ready after 2 restarts, last OOMKilled",
            ),
            (
                "run-to-completion pod while running",
                pod(json!({"restartPolicy": "OnFailure"}), json!({"phase": "Running", "conditions": not_ready})),
                Progressing,
                "pod web-1 running (restartPolicy OnFailure)",
            ),
            (
                "pending, creating",
                pod(json!({}), json!({"phase": "Pending", "containerStatuses": [waiting("ContainerCreating", 0)]})),
                Progressing,
                "pod web-1 Pending: ContainerCreating",
            ),
            ("no status yet", pod(json!({}), json!({})), Progressing, "pod web-1 Pending"),
            (
                "unschedulable within the grace period",
                pod(
                    json!({}),
                    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available", "lastTransitionTime": ago(60)}]}),
                ),
                Progressing,
                "pod web-1 waiting to be scheduled: 0/3 nodes are available",
            ),
            (
                "unschedulable beyond the grace period",
                pod(
                    json!({}),
                    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available", "lastTransitionTime": ago(360)}]}),
                ),
                Degraded,
                "pod web-1 Unschedulable for 6m: 0/3 nodes are available",
            ),
            (
                "node lost",
                pod(json!({}), json!({"phase": "Unknown"})),
                Unknown,
                "pod web-1 phase Unknown: node not reporting",
            ),
        ];
        check(&cases);
    }
}
