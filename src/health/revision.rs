//! Which pods of a workload run its *update revision* (the spec Git asked for), and
//! whether one of them fails past the deadline.
//!
//! This is where plumb is stricter than Argo CD and kstatus, which never mark a
//! StatefulSet or DaemonSet Degraded (Argo CD issues #6527, #11473): a rollout whose new
//! pods crash-loop stays "Progressing" there forever. Here a workload is **Degraded**,
//! naming the pod, when a pod of its update revision has a container that cannot start
//! ([`super::pod::failing_container`]) and has restarted at least
//! `pod_restart_limit` times (default 3) or been failing for `pod_failure_after`
//! (default 10 min; counted from the pod's `Ready=False` transition, else its start).
//! Pods of older revisions do not count: the rollout may be replacing them.
//!
//! The update revision, per kind:
//! - StatefulSet: pods whose label `controller-revision-hash` equals
//!   `status.updateRevision`;
//! - Deployment: pods whose `pod-template-hash` equals that of the ReplicaSet carrying
//!   the Deployment's `deployment.kubernetes.io/revision` annotation value;
//! - DaemonSet (its status names no revision), and the two above when their data is
//!   missing: the revision label of the youngest pod — a controller only creates pods of
//!   its update revision, so the newest pod carries it;
//! - ReplicaSet: all its pods.

use jiff::SignedDuration;
use serde_json::Value;

use super::{
    Clock, HealthSettings,
    fields::{self, age},
    pod::{self, ContainerFailure},
};

/// Label of StatefulSet and DaemonSet pods naming their ControllerRevision.
pub const CONTROLLER_REVISION_LABEL: &str = "controller-revision-hash";
/// Label of Deployment pods and ReplicaSets: the hash of the pod template.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// Annotation of a Deployment and its ReplicaSets: the rollout revision number.
pub const DEPLOYMENT_REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

/// How a workload's pods are told apart by revision.
#[derive(Debug, Clone, Copy)]
pub enum Revision<'a> {
    /// Every pod counts (ReplicaSet).
    All,
    /// Pods whose label `label` equals `value`; when `value` is `None`, the value the
    /// youngest pod carries.
    Label {
        /// The revision label.
        label: &'a str,
        /// The update revision, when the owner says it.
        value: Option<&'a str>,
    },
}

/// The pods of `pods` that belong to the update revision (terminating pods left out).
pub fn update_revision_pods<'p>(pods: &[&'p Value], revision: Revision<'_>) -> Vec<&'p Value> {
    let alive =
        pods.iter().copied().filter(|p| fields::at(p, "/metadata/deletionTimestamp").is_none_or(Value::is_null));
    match revision {
        Revision::All => alive.collect(),
        Revision::Label { label, value } => {
            let youngest = || {
                // RFC 3339 UTC timestamps of the API server sort as text.
                pods.iter()
                    .copied()
                    .filter(|p| fields::label(p, label).is_some())
                    .max_by_key(|p| fields::str_at(p, "/metadata/creationTimestamp").unwrap_or(""))
                    .and_then(|p| fields::label(p, label))
            };
            let Some(want) = value.or_else(youngest) else {
                return Vec::new();
            };
            alive.filter(|p| fields::label(p, label) == Some(want)).collect()
        }
    }
}

/// The revision selector of a Deployment: the `pod-template-hash` of its current
/// ReplicaSet among `replica_sets`, else the youngest pod's.
pub fn deployment_revision<'a>(deployment: &Value, replica_sets: &[&'a Value]) -> Revision<'a> {
    let current = fields::annotation(deployment, DEPLOYMENT_REVISION_ANNOTATION);
    let value = current.and_then(|rev| {
        replica_sets
            .iter()
            .find(|rs| fields::annotation(rs, DEPLOYMENT_REVISION_ANNOTATION) == Some(rev))
            .and_then(|rs| fields::label(rs, POD_TEMPLATE_HASH_LABEL))
    });
    Revision::Label { label: POD_TEMPLATE_HASH_LABEL, value }
}

/// A failing pod of the update revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFailure {
    /// The failing container.
    pub container: ContainerFailure,
    /// How long the pod has not been ready.
    pub failing_for: SignedDuration,
    /// Whether it passed the restart limit or the deadline.
    pub past_deadline: bool,
}

impl PodFailure {
    /// `pod web-1 CrashLoopBackOff, 4 restarts`; `pod web-1 ImagePullBackOff for 12m`.
    pub fn message(&self) -> String {
        let mut s = self.container.message();
        if self.container.restarts == 0 && self.failing_for > SignedDuration::ZERO {
            s.push_str(&format!(" for {}", age(self.failing_for)));
        }
        s
    }
}

/// The worst failing pod of `pods`: one past the deadline first, then the one with the
/// most restarts, then the one failing longest. `None` when no container fails (the
/// clock is read only for failing pods).
pub fn worst_failure(pods: &[&Value], clock: Clock<'_>, settings: &HealthSettings) -> Option<PodFailure> {
    let deadline = SignedDuration::try_from(settings.pod_failure_after).unwrap_or(SignedDuration::MAX);
    pods.iter()
        .filter_map(|p| {
            let container = pod::failing_container(p)?;
            let failing_for = fields::elapsed(clock.now(), pod::not_ready_since(p));
            let past_deadline = container.restarts >= i64::from(settings.pod_restart_limit) || failing_for >= deadline;
            Some(PodFailure { container, failing_for, past_deadline })
        })
        .max_by_key(|f| (f.past_deadline, f.container.restarts, f.failing_for))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::{Value, json};

    use super::*;
    use crate::health::test_support::{ago, now};

    fn pod(name: &str, hash: &str, created: i64, restarts: i64, reason: Option<&str>) -> Value {
        let state = match reason {
            Some(r) => json!({"waiting": {"reason": r}}),
            None => json!({"running": {}}),
        };
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "creationTimestamp": ago(created), "labels": {"controller-revision-hash": hash}},
            "status": {"phase": "Running", "startTime": ago(created),
                "conditions": [{"type": "Ready", "status": if reason.is_some() {"False"} else {"True"}, "lastTransitionTime": ago(created)}],
                "containerStatuses": [{"name": "app", "restartCount": restarts, "state": state}]}})
    }

    #[test]
    fn update_revision_is_the_owners_or_the_youngest_pods() {
        let (old, new1, new2) =
            (pod("a", "v1", 900, 0, None), pod("b", "v2", 60, 0, None), pod("c", "v2", 30, 0, None));
        let pods = [&old, &new1, &new2];
        let names = |v: Vec<&Value>| v.iter().map(|p| fields::name(p).to_string()).collect::<Vec<_>>();
        let by_owner = Revision::Label { label: CONTROLLER_REVISION_LABEL, value: Some("v1") };
        assert_eq!(names(update_revision_pods(&pods, by_owner)), ["a"]);
        let youngest = Revision::Label { label: CONTROLLER_REVISION_LABEL, value: None };
        assert_eq!(names(update_revision_pods(&pods, youngest)), ["b", "c"]);
        assert_eq!(update_revision_pods(&pods, Revision::All).len(), 3);
    }

    #[test]
    fn a_deployments_revision_comes_from_its_current_replica_set() {
        let deploy = json!({"metadata": {"annotations": {"deployment.kubernetes.io/revision": "4"}}});
        let rs = |rev: &str, hash: &str| json!({"metadata": {"annotations": {"deployment.kubernetes.io/revision": rev}, "labels": {"pod-template-hash": hash}}});
        let (old, cur) = (rs("3", "aaa"), rs("4", "bbb"));
        assert!(matches!(deployment_revision(&deploy, &[&old, &cur]), Revision::Label { value: Some("bbb"), .. }));
        assert!(matches!(deployment_revision(&deploy, &[]), Revision::Label { value: None, .. }));
    }

    #[test]
    fn restarts_or_time_pass_the_deadline() {
        let s = HealthSettings::default();
        let cases = [
            // (pod, past deadline, message)
            (pod("w-0", "v2", 120, 2, Some("CrashLoopBackOff")), false, "pod w-0 CrashLoopBackOff, 2 restarts"),
            (pod("w-0", "v2", 120, 3, Some("CrashLoopBackOff")), true, "pod w-0 CrashLoopBackOff, 3 restarts"),
            (pod("w-0", "v2", 300, 0, Some("ImagePullBackOff")), false, "pod w-0 ImagePullBackOff for 5m"),
            (pod("w-0", "v2", 720, 0, Some("ImagePullBackOff")), true, "pod w-0 ImagePullBackOff for 12m"),
        ];
        for (p, past, message) in &cases {
            let f = worst_failure(&[p], now().into(), &s).unwrap();
            assert_eq!((f.past_deadline, f.message().as_str()), (*past, *message));
        }
        let strict = HealthSettings { pod_restart_limit: 1, ..HealthSettings::default() };
        assert!(worst_failure(&[&cases[0].0], now().into(), &strict).unwrap().past_deadline);
        assert_eq!(worst_failure(&[&pod("w-0", "v2", 60, 0, None)], now().into(), &s), None);
        let worst = worst_failure(&[&cases[0].0, &cases[3].0], now().into(), &s).unwrap();
        assert!(worst.past_deadline, "the pod past its deadline is the one named");
    }
}
