//! Deployment, StatefulSet, DaemonSet and ReplicaSet: replica counts and rollout state
//! from the object's own status, and — from the pods the caller passes — the failing pod
//! to name, and plumb's update-revision rule ([`super::revision`]).
//!
//! Sources: Argo CD `gitops-engine/pkg/health/health_{deployment,statefulset,daemonset,
//! replicaset}.go`, kstatus `core.go`, the Kubernetes Deployment / StatefulSet /
//! DaemonSet documentation (`progressDeadlineSeconds`, `updateStrategy`, `partition`).
//!
//! | kind | rule (after the generic checks) |
//! |---|---|
//! | all four | no `status.observedGeneration` yet → Progressing; a pod of the update revision failing past the deadline → Degraded naming it |
//! | Deployment | `spec.paused` → Suspended; `Progressing` reason `ProgressDeadlineExceeded` → Degraded; updated < `spec.replicas`, old replicas still running, or available < updated → Progressing (`0/3 replicas available`) |
//! | StatefulSet | extra replicas, updated < replicas (− `partition`), `currentRevision` ≠ `updateRevision`, ready < replicas → Progressing; `OnDelete` → Healthy once ready (updates wait for deletions) |
//! | DaemonSet | no `desiredNumberScheduled` → Progressing; updated (not with `OnDelete`) or available < desired → Progressing |
//! | ReplicaSet | `ReplicaFailure=True` → Degraded; available < replicas → Progressing |
//!
//! While Progressing, the message ends with the failing pod not yet past its deadline
//! (`1/3 replicas available; pod web-7f9c-x2 CrashLoopBackOff, 1 restart`).

use serde_json::Value;

use super::{
    Health, HealthInput,
    fields::{self, count},
    revision::{self, CONTROLLER_REVISION_LABEL, PodFailure, Revision},
};

/// The failure among the update-revision pods; `Err` is the Degraded health when it is
/// past the deadline, `Ok` a hint for a Progressing message.
fn pod_check(input: &HealthInput<'_>, revision: Revision<'_>) -> Result<Option<PodFailure>, Health> {
    let pods = revision::update_revision_pods(input.pods, revision);
    match revision::worst_failure(&pods, input.clock, input.settings) {
        Some(f) if f.past_deadline => Err(Health::degraded(f.message())),
        other => Ok(other),
    }
}

/// Progressing with the parts joined, and the failing pod appended.
fn progressing(parts: &[String], hint: Option<&PodFailure>) -> Health {
    let mut s = parts.join(", ");
    if let Some(f) = hint {
        s.push_str("; ");
        s.push_str(&f.message());
    }
    Health::progressing(s)
}

fn not_observed(obj: &Value, controller: &str) -> Option<Health> {
    fields::i64_at(obj, "/status/observedGeneration")
        .is_none()
        .then(|| Health::progressing(format!("waiting for the {controller} controller to observe it")))
}

/// `spec.replicas`, default 1.
fn wanted(obj: &Value) -> i64 {
    fields::i64_at(obj, "/spec/replicas").unwrap_or(1)
}

/// Health of a Deployment (`apps/v1`).
pub fn deployment(obj: &Value, input: &HealthInput<'_>) -> Health {
    if fields::bool_at(obj, "/spec/paused") {
        return Health::suspended("deployment is paused");
    }
    if let Some(h) = not_observed(obj, "deployment") {
        return h;
    }
    let pods = pod_check(input, revision::deployment_revision(obj, input.replica_sets));
    if let Some(c) = fields::condition(obj, "Progressing").filter(|c| c.reason == "ProgressDeadlineExceeded") {
        let cause = match &pods {
            Err(h) => h.message.clone(),
            Ok(Some(f)) => f.message(),
            Ok(None) => c.message.to_string(),
        };
        let sep = if cause.is_empty() { "" } else { ": " };
        return Health::degraded(format!("ProgressDeadlineExceeded{sep}{cause}"));
    }
    let hint = match pods {
        Err(h) => return h,
        Ok(hint) => hint,
    };
    let want = wanted(obj);
    let (total, updated, available) = (
        count(obj, "/status/replicas"),
        count(obj, "/status/updatedReplicas"),
        count(obj, "/status/availableReplicas"),
    );
    if updated < want {
        return progressing(&[format!("{updated}/{want} replicas updated")], hint.as_ref());
    }
    if total > updated {
        return progressing(&[format!("{} old replicas pending termination", total - updated)], hint.as_ref());
    }
    if available < updated {
        return progressing(&[format!("{available}/{want} replicas available")], hint.as_ref());
    }
    Health::healthy(format!("{available}/{want} replicas available"))
}

/// Health of a StatefulSet (`apps/v1`).
pub fn stateful_set(obj: &Value, input: &HealthInput<'_>) -> Health {
    if let Some(h) = not_observed(obj, "statefulset") {
        return h;
    }
    let update_revision = fields::str_at(obj, "/status/updateRevision");
    let hint = match pod_check(input, Revision::Label { label: CONTROLLER_REVISION_LABEL, value: update_revision }) {
        Err(h) => return h,
        Ok(hint) => hint,
    };
    let want = wanted(obj);
    let (total, ready, updated) =
        (count(obj, "/status/replicas"), count(obj, "/status/readyReplicas"), count(obj, "/status/updatedReplicas"));
    let on_delete = fields::str_at(obj, "/spec/updateStrategy/type") == Some("OnDelete");
    let partition = fields::i64_at(obj, "/spec/updateStrategy/rollingUpdate/partition").unwrap_or(0).max(0);
    let mut parts = Vec::new();
    if total > want {
        parts.push(format!("{} extra replicas terminating", total - want));
    }
    if on_delete {
        // updates wait for someone to delete the pods: not a progress to wait for
    } else if partition > 0 {
        let due = (want - partition).max(0);
        if updated < due {
            parts.push(format!("{updated}/{due} replicas updated (partition {partition})"));
        }
    } else if updated < want {
        parts.push(format!("{updated}/{want} replicas updated"));
    } else if let (Some(cur), Some(upd)) = (fields::str_at(obj, "/status/currentRevision"), update_revision)
        && cur != upd
    {
        parts.push(format!("rolling update from revision {cur} to {upd}"));
    }
    if ready < want {
        parts.push(format!("{ready}/{want} replicas ready"));
    }
    if !parts.is_empty() {
        return progressing(&parts, hint.as_ref());
    }
    let mut message = format!("{ready}/{want} replicas ready");
    if on_delete && updated < want {
        message.push_str(&format!("; {updated}/{want} updated, the rest wait for deletion (OnDelete)"));
    } else if partition > 0 {
        message.push_str(&format!("; partition {partition}: {updated}/{want} updated"));
    }
    Health::healthy(message)
}

/// Health of a DaemonSet (`apps/v1`).
pub fn daemon_set(obj: &Value, input: &HealthInput<'_>) -> Health {
    if let Some(h) = not_observed(obj, "daemonset") {
        return h;
    }
    let Some(desired) = fields::i64_at(obj, "/status/desiredNumberScheduled") else {
        return Health::progressing("waiting for the daemonset controller to schedule it");
    };
    let hint = match pod_check(input, Revision::Label { label: CONTROLLER_REVISION_LABEL, value: None }) {
        Err(h) => return h,
        Ok(hint) => hint,
    };
    let (updated, available) = (count(obj, "/status/updatedNumberScheduled"), count(obj, "/status/numberAvailable"));
    let on_delete = fields::str_at(obj, "/spec/updateStrategy/type") == Some("OnDelete");
    let mut parts = Vec::new();
    if !on_delete && updated < desired {
        parts.push(format!("{updated}/{desired} pods updated"));
    }
    if available < desired {
        parts.push(format!("{available}/{desired} pods available"));
    }
    if !parts.is_empty() {
        return progressing(&parts, hint.as_ref());
    }
    Health::healthy(format!("{available}/{desired} pods available"))
}

/// Health of a ReplicaSet (`apps/v1`).
pub fn replica_set(obj: &Value, input: &HealthInput<'_>) -> Health {
    if let Some(c) = fields::condition(obj, "ReplicaFailure").filter(|c| c.is_true()) {
        return Health::degraded(c.describe());
    }
    if let Some(h) = not_observed(obj, "replicaset") {
        return h;
    }
    let hint = match pod_check(input, Revision::All) {
        Err(h) => return h,
        Ok(hint) => hint,
    };
    let want = wanted(obj);
    let (total, available) = (count(obj, "/status/replicas"), count(obj, "/status/availableReplicas"));
    let mut parts = Vec::new();
    if total > want {
        parts.push(format!("{} extra replicas terminating", total - want));
    }
    if available < want {
        parts.push(format!("{available}/{want} replicas available"));
    }
    if !parts.is_empty() {
        return progressing(&parts, hint.as_ref());
    }
    Health::healthy(format!("{available}/{want} replicas available"))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{
        HealthInput, HealthSettings,
        HealthStatus::{self, *},
        assess_with,
        test_support::{ago, assess_at, now},
    };

    fn deploy(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "generation": 2, "annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": spec, "status": status})
    }

    /// A pod of `hash` (under label `label`), `created` seconds ago, in `state`.
    fn pod(name: &str, label: &str, hash: &str, created: i64, restarts: i64, waiting: Option<&str>) -> Value {
        let (state, ready) = match waiting {
            Some(r) => (json!({"waiting": {"reason": r}}), "False"),
            None => (json!({"running": {}}), "True"),
        };
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "creationTimestamp": ago(created), "labels": {label: hash}},
            "status": {"phase": "Running", "startTime": ago(created),
                "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": ago(created)}],
                "containerStatuses": [{"name": "app", "restartCount": restarts, "state": state}]}})
    }

    fn check(cases: &[(&str, Value, HealthStatus, &str)], pods: &[&Value]) {
        for (what, obj, status, message) in cases {
            let h = assess_at(obj, pods);
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "{what}");
        }
    }

    #[test]
    fn deployment_status() {
        let ok = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3});
        check(
            &[
                ("all available", deploy(json!({"replicas": 3}), ok.clone()), Healthy, "3/3 replicas available"),
                (
                    "hand-scaled, running fine",
                    deploy(
                        json!({"replicas": 5}),
                        json!({"observedGeneration": 2, "replicas": 5, "updatedReplicas": 5, "availableReplicas": 5}),
                    ),
                    Healthy,
                    "5/5 replicas available",
                ),
                (
                    "spec not observed",
                    deploy(
                        json!({"replicas": 3}),
                        json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
                    ),
                    Progressing,
                    "generation 2 not yet observed (controller at 1)",
                ),
                (
                    "no status yet",
                    deploy(json!({"replicas": 3}), json!({})),
                    Progressing,
                    "waiting for the deployment controller to observe it",
                ),
                (
                    "rolling out",
                    deploy(
                        json!({"replicas": 3}),
                        json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 1, "availableReplicas": 3}),
                    ),
                    Progressing,
                    "1/3 replicas updated",
                ),
                (
                    "old replicas terminating",
                    deploy(
                        json!({"replicas": 3}),
                        json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
                    ),
                    Progressing,
                    "1 old replicas pending termination",
                ),
                (
                    "new pods not yet available",
                    deploy(
                        json!({"replicas": 3}),
                        json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3}),
                    ),
                    Progressing,
                    "0/3 replicas available",
                ),
                (
                    "paused",
                    deploy(json!({"replicas": 3, "paused": true}), json!({"observedGeneration": 2})),
                    Suspended,
                    "deployment is paused",
                ),
                (
                    "progress deadline exceeded",
                    deploy(
                        json!({"replicas": 3}),
                        json!({"observedGeneration": 2, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"web-7f9c\" has timed out progressing."}]}),
                    ),
                    Degraded,
                    "ProgressDeadlineExceeded: ReplicaSet \"web-7f9c\" has timed out progressing.",
                ),
                (
                    "scaled to zero",
                    deploy(json!({"replicas": 0}), json!({"observedGeneration": 2})),
                    Healthy,
                    "0/0 replicas available",
                ),
            ],
            &[],
        );
    }

    #[test]
    fn deployment_names_the_failing_pod_of_its_current_replica_set() {
        let status = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2});
        let d = deploy(json!({"replicas": 3}), status);
        let rs = |rev: &str, hash: &str| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": format!("web-{hash}"),
                "annotations": {"deployment.kubernetes.io/revision": rev}, "labels": {"pod-template-hash": hash}}})
        };
        let (rs_old, rs_new) = (rs("1", "5d4b"), rs("2", "7f9c"));
        let settings = HealthSettings::default();
        let at = |pods: &[&Value], sets: &[&Value]| {
            assess_with(&HealthInput::new(Some(&d), now(), &settings).children(pods, sets))
        };
        let young = pod("web-7f9c-x2", "pod-template-hash", "7f9c", 120, 1, Some("CrashLoopBackOff"));
        let h = at(&[&young], &[&rs_old, &rs_new]);
        assert_eq!(
            (h.status, h.message.as_str()),
            (Progressing, "2/3 replicas available; pod web-7f9c-x2 CrashLoopBackOff, 1 restart")
        );
        let looping = pod("web-7f9c-x2", "pod-template-hash", "7f9c", 300, 4, Some("CrashLoopBackOff"));
        let h = at(&[&looping], &[&rs_old, &rs_new]);
        assert_eq!((h.status, h.message.as_str()), (Degraded, "pod web-7f9c-x2 CrashLoopBackOff, 4 restarts"));
        // the same pod in the *old* ReplicaSet is not the rollout's fault
        let old = pod("web-5d4b-q1", "pod-template-hash", "5d4b", 300, 4, Some("CrashLoopBackOff"));
        let fine = pod("web-7f9c-x2", "pod-template-hash", "7f9c", 60, 0, None);
        assert_eq!(at(&[&old, &fine], &[&rs_old, &rs_new]).status, Progressing);
        // without ReplicaSets, the youngest pod's hash stands for the current revision
        assert_eq!(at(&[&old, &looping], &[]).status, Degraded);
        // with a progress deadline exceeded, the pod is the cause named
        let stuck = deploy(
            json!({"replicas": 3}),
            json!({"observedGeneration": 2, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
        );
        let h = assess_with(&HealthInput::new(Some(&stuck), now(), &settings).children(&[&young], &[&rs_new]));
        assert_eq!(h.message, "ProgressDeadlineExceeded: pod web-7f9c-x2 CrashLoopBackOff, 1 restart");
    }

    fn sts(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "generation": 3}, "spec": spec, "status": status})
    }

    #[test]
    fn stateful_set_status() {
        let st = |replicas: i64, ready: i64, updated: i64, cur: &str, upd: &str| {
            json!({"observedGeneration": 3, "replicas": replicas, "readyReplicas": ready, "updatedReplicas": updated,
                "currentReplicas": updated, "currentRevision": cur, "updateRevision": upd})
        };
        check(
            &[
                ("all ready", sts(json!({"replicas": 3}), st(3, 3, 3, "db-b", "db-b")), Healthy, "3/3 replicas ready"),
                (
                    "rolling update",
                    sts(json!({"replicas": 3}), st(3, 2, 1, "db-a", "db-b")),
                    Progressing,
                    "1/3 replicas updated, 2/3 replicas ready",
                ),
                (
                    "updated, revision not yet switched",
                    sts(json!({"replicas": 3}), st(3, 3, 3, "db-a", "db-b")),
                    Progressing,
                    "rolling update from revision db-a to db-b",
                ),
                (
                    "scaling down",
                    sts(json!({"replicas": 2}), st(3, 3, 3, "db-b", "db-b")),
                    Progressing,
                    "1 extra replicas terminating",
                ),
                (
                    "partition reached",
                    sts(
                        json!({"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}),
                        st(3, 3, 1, "db-a", "db-b"),
                    ),
                    Healthy,
                    "3/3 replicas ready; partition 2: 1/3 updated",
                ),
                (
                    "partition not reached",
                    sts(
                        json!({"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}),
                        st(3, 3, 1, "db-a", "db-b"),
                    ),
                    Progressing,
                    "1/2 replicas updated (partition 1)",
                ),
                (
                    "OnDelete waits for deletions",
                    sts(json!({"replicas": 3, "updateStrategy": {"type": "OnDelete"}}), st(3, 3, 0, "db-a", "db-b")),
                    Healthy,
                    "3/3 replicas ready; 0/3 updated, the rest wait for deletion (OnDelete)",
                ),
                (
                    "OnDelete still needs ready pods",
                    sts(json!({"replicas": 3, "updateStrategy": {"type": "OnDelete"}}), st(3, 1, 0, "db-a", "db-b")),
                    Progressing,
                    "1/3 replicas ready",
                ),
            ],
            &[],
        );
    }

    /// argocd-15 (Argo CD issues #6527, #11473): a StatefulSet whose new pod crash-loops
    /// is Degraded past the deadline, naming the pod, and Healthy again once fixed.
    #[test]
    fn stateful_set_with_a_crash_looping_update_revision_pod_is_degraded() {
        let rolling = sts(
            json!({"replicas": 3}),
            json!({"observedGeneration": 3, "replicas": 3, "readyReplicas": 2, "updatedReplicas": 1, "currentReplicas": 2,
                "currentRevision": "db-a", "updateRevision": "db-b"}),
        );
        let (p0, p1) = (
            pod("db-0", "controller-revision-hash", "db-a", 9000, 0, None),
            pod("db-1", "controller-revision-hash", "db-a", 9000, 0, None),
        );
        let cases = [
            (
                pod("db-2", "controller-revision-hash", "db-b", 90, 1, Some("CrashLoopBackOff")),
                Progressing,
                "1/3 replicas updated, 2/3 replicas ready; pod db-2 CrashLoopBackOff, 1 restart",
            ),
            (
                pod("db-2", "controller-revision-hash", "db-b", 400, 3, Some("CrashLoopBackOff")),
                Degraded,
                "pod db-2 CrashLoopBackOff, 3 restarts",
            ),
            (
                pod("db-2", "controller-revision-hash", "db-b", 240, 0, Some("ImagePullBackOff")),
                Progressing,
                "1/3 replicas updated, 2/3 replicas ready; pod db-2 ImagePullBackOff for 4m",
            ),
            (
                pod("db-2", "controller-revision-hash", "db-b", 660, 0, Some("ImagePullBackOff")),
                Degraded,
                "pod db-2 ImagePullBackOff for 11m",
            ),
        ];
        for (p2, status, message) in &cases {
            let h = assess_at(&rolling, &[&p0, &p1, p2]);
            assert_eq!((h.status, h.message.as_str()), (*status, *message));
        }
        // an old-revision pod failing does not make it Degraded
        let old_bad = pod("db-0", "controller-revision-hash", "db-a", 9000, 7, Some("CrashLoopBackOff"));
        assert_eq!(assess_at(&rolling, &[&old_bad]).status, Progressing);
        // fixed: the new revision rolled out and every pod is ready
        let fixed = sts(
            json!({"replicas": 3}),
            json!({"observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "currentReplicas": 3,
                "currentRevision": "db-c", "updateRevision": "db-c"}),
        );
        let ok: Vec<Value> =
            (0..3).map(|i| pod(&format!("db-{i}"), "controller-revision-hash", "db-c", 60, 0, None)).collect();
        let h = assess_at(&fixed, &ok.iter().collect::<Vec<_>>());
        assert_eq!((h.status, h.message.as_str()), (Healthy, "3/3 replicas ready"));
    }

    fn ds(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "generation": 2}, "spec": spec, "status": status})
    }

    #[test]
    fn daemon_set_status() {
        let st = |desired: i64, updated: i64, available: i64| json!({"observedGeneration": 2, "desiredNumberScheduled": desired, "updatedNumberScheduled": updated, "numberAvailable": available});
        check(
            &[
                ("all available", ds(json!({}), st(3, 3, 3)), Healthy, "3/3 pods available"),
                ("rolling", ds(json!({}), st(3, 1, 2)), Progressing, "1/3 pods updated, 2/3 pods available"),
                (
                    "OnDelete",
                    ds(json!({"updateStrategy": {"type": "OnDelete"}}), st(3, 0, 3)),
                    Healthy,
                    "3/3 pods available",
                ),
                (
                    "not scheduled yet",
                    ds(json!({}), json!({"observedGeneration": 2})),
                    Progressing,
                    "waiting for the daemonset controller to schedule it",
                ),
            ],
            &[],
        );
        // the youngest pod carries the update revision; its failure past the deadline degrades
        let old = pod("agent-a1", "controller-revision-hash", "5d7c", 9000, 0, None);
        let new = pod("agent-b2", "controller-revision-hash", "6f8d", 700, 0, Some("ErrImagePull"));
        let h = assess_at(&ds(json!({}), st(3, 1, 2)), &[&old, &new]);
        assert_eq!((h.status, h.message.as_str()), (Degraded, "pod agent-b2 ErrImagePull for 11m"));
    }

    #[test]
    fn replica_set_status() {
        let rs = |status: Value| json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-7f9c", "generation": 1}, "spec": {"replicas": 2}, "status": status});
        check(
            &[
                (
                    "available",
                    rs(json!({"observedGeneration": 1, "replicas": 2, "availableReplicas": 2})),
                    Healthy,
                    "2/2 replicas available",
                ),
                (
                    "starting",
                    rs(json!({"observedGeneration": 1, "replicas": 2, "availableReplicas": 1})),
                    Progressing,
                    "1/2 replicas available",
                ),
                (
                    "quota exceeded",
                    rs(
                        json!({"observedGeneration": 1, "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "exceeded quota"}]}),
                    ),
                    Degraded,
                    "ReplicaFailure=True (FailedCreate): exceeded quota",
                ),
            ],
            &[],
        );
    }
}
