//! Health: is the object actually working? Pure functions of the live object, the pods
//! it owns and the time — no client, no clock of their own.
//!
//! Independent of sync status: *Synced but Degraded* (Git's image cannot start) and
//! *OutOfSync but Healthy* (a hand-scaled Deployment runs fine) are both real states.
//!
//! [`assess_with`] applies, in order (after Argo CD's `gitops-engine/pkg/health` and
//! kstatus, `sigs.k8s.io/cli-utils/pkg/kstatus/status`):
//!
//! 1. no live object → `Missing`;
//! 2. [`generic`] lifecycle: being deleted → `Progressing`; `metadata.generation` >
//!    `status.observedGeneration` → `Progressing` (the controller has not seen the latest
//!    spec);
//! 3. [`overrides`]: the first [`HealthOverride`] of the object's group/kind whose
//!    `match` holds, from the application, then the environment policy;
//! 4. kstatus conditions: `Stalled=True` → `Degraded`, `Reconciling=True` → `Progressing`;
//! 5. the rule of the kind: [`workloads`] (Deployment, StatefulSet, DaemonSet,
//!    ReplicaSet — including plumb's own rule that a workload whose *update revision*
//!    pods crash-loop or fail to pull past a deadline is `Degraded`, naming the pod,
//!    see [`revision`]), [`pod`], [`network`] (Service, Ingress), [`batch`] (Job,
//!    CronJob), [`storage`] (PersistentVolumeClaim, which reads its StorageClass),
//!    [`scaling`]
//!    (HorizontalPodAutoscaler, PodDisruptionBudget), [`api`] (APIService,
//!    CustomResourceDefinition, Namespace); ConfigMap, Secret, ServiceAccount, RBAC and
//!    the other passive kinds are `Healthy` when present;
//! 6. any other kind (custom resources): its `Ready` / `Available` condition
//!    ([`generic::conditions`]), `Healthy` when it has none.
//!
//! Around single objects: [`roll_up`] gives an application's health, objects annotated
//! `plumb.dev/compare-options: IgnoreHealthCheck` stay out of it
//! ([`ignores_health_check`]), and [`stall`] turns "Progressing for too long" into a
//! warning that names the objects, without ever flipping them to `Degraded`.

pub mod api;
pub mod batch;
mod fields;
pub mod generic;
pub mod network;
pub mod overrides;
pub mod pod;
pub mod revision;
mod rollup;
pub mod scaling;
pub mod stall;
pub mod storage;
pub mod workloads;

#[cfg(test)]
mod cases;

use std::{cell::Cell, time::Duration};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::config::{ConditionHealth, HealthOverride, HealthRule, HealthStatus};
pub use fields::age;
pub use rollup::{
    COMPARE_OPTIONS_ANNOTATION, IGNORE_HEALTH_CHECK, ignores_health_check, ignores_health_check_by, roll_up,
};
pub use stall::{ProgressingSince, Stall, stalled, track_progressing};

/// A status with a one-line message naming the cause (`pod web-7f9c-x2
/// CrashLoopBackOff, 4 restarts`, `0/3 replicas available`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The status.
    pub status: HealthStatus,
    /// Human reason, one line (may be empty when Healthy without remark).
    pub message: String,
}

impl Health {
    /// A health of `status` with `message`.
    pub fn new(status: HealthStatus, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }
    pub(crate) fn healthy(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::Healthy, message)
    }
    pub(crate) fn progressing(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::Progressing, message)
    }
    pub(crate) fn degraded(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::Degraded, message)
    }
    pub(crate) fn suspended(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::Suspended, message)
    }
}

/// Thresholds of the time-dependent rules. Built from an environment's
/// [`crate::config::HealthPolicy`] with [`HealthSettings::from_policy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSettings {
    /// Restarts after which a crash-looping pod of a workload's update revision makes the
    /// workload Degraded. Default 3.
    pub pod_restart_limit: u32,
    /// How long a pod of a workload's update revision may fail (crash loop, image pull,
    /// config error) before the workload is Degraded. Default 10 min.
    pub pod_failure_after: Duration,
    /// How long a Pending pod may be `Unschedulable` before it is Degraded. Default 5 min
    /// (kstatus uses 15 s, too short for a cluster autoscaler to add a node).
    pub unschedulable_after: Duration,
    /// How long an object may stay Progressing before the application carries a
    /// *stalled* warning naming it ([`stalled`]). Default 10 min.
    pub stall_after: Duration,
}

impl Default for HealthSettings {
    fn default() -> Self {
        Self {
            pod_restart_limit: 3,
            pod_failure_after: Duration::from_secs(600),
            unschedulable_after: Duration::from_secs(300),
            stall_after: Duration::from_secs(600),
        }
    }
}

impl HealthSettings {
    /// The settings of a policy's `health:` block, defaults for what it leaves out.
    pub fn from_policy(policy: &crate::config::HealthPolicy) -> Self {
        let d = Self::default();
        Self {
            pod_restart_limit: policy.pod_restart_limit.unwrap_or(d.pod_restart_limit),
            pod_failure_after: policy.pod_failure_after.unwrap_or(d.pod_failure_after),
            unschedulable_after: policy.unschedulable_after.unwrap_or(d.unschedulable_after),
            stall_after: policy.stall_after.unwrap_or(d.stall_after),
        }
    }
}

/// The overrides that apply to `app` in `env`, in the order they are tried: the
/// application's `healthOverrides`, then the environment's `health.overrides`.
pub fn overrides_for<'a>(
    app: &'a crate::config::Application,
    env: &'a crate::config::Environment,
) -> Vec<&'a HealthOverride> {
    app.health_overrides.iter().chain(&env.health.overrides).collect()
}

/// The time an assessment is made at, which a rule reads only where it needs it (an
/// age, a deadline, a grace period). With a flag ([`HealthInput::noting_clock`]),
/// reading it sets the flag: an assessment that never read the time gives the same
/// verdict at any time for the same objects, which lets a caller remember it.
#[derive(Debug, Clone, Copy)]
pub struct Clock<'a> {
    at: Timestamp,
    read: Option<&'a Cell<bool>>,
}

impl Clock<'_> {
    /// The time, noted as read.
    pub fn now(&self) -> Timestamp {
        if let Some(read) = self.read {
            read.set(true);
        }
        self.at
    }
}

impl From<Timestamp> for Clock<'_> {
    fn from(at: Timestamp) -> Self {
        Self { at, read: None }
    }
}

/// Everything one assessment looks at. The caller reads `pods` and `replica_sets` from
/// its watch cache (never a LIST per object per pass), so assessing costs no API
/// request.
#[derive(Debug, Clone, Copy)]
pub struct HealthInput<'a> {
    /// The live object; `None` when it does not exist (→ Missing).
    pub live: Option<&'a Value>,
    /// Pods owned by `live`: directly for StatefulSets, DaemonSets, ReplicaSets and
    /// Jobs; through its ReplicaSets for a Deployment. Used to name the failing pod and
    /// for the update-revision rule ([`revision`]); empty is fine (status only).
    pub pods: &'a [&'a Value],
    /// ReplicaSets owned by a Deployment `live`, to tell which pods belong to its
    /// current revision (annotation `deployment.kubernetes.io/revision`). When empty, the
    /// youngest pod's `pod-template-hash` stands for the current revision.
    pub replica_sets: &'a [&'a Value],
    /// The time the assessment is made at (ages, deadlines, grace periods).
    pub clock: Clock<'a>,
    /// Thresholds.
    pub settings: &'a HealthSettings,
    /// Overrides, first match wins ([`overrides_for`]).
    pub overrides: &'a [&'a HealthOverride],
    /// For a PersistentVolumeClaim: the StorageClass it binds through (its
    /// `spec.storageClassName`, else the cluster's default class), when it could be
    /// read; see [`storage`].
    pub storage_class: Option<&'a Value>,
}

impl<'a> HealthInput<'a> {
    /// An input with no children and no overrides.
    pub fn new(live: Option<&'a Value>, now: Timestamp, settings: &'a HealthSettings) -> Self {
        Self { live, pods: &[], replica_sets: &[], clock: now.into(), settings, overrides: &[], storage_class: None }
    }

    /// Notes in `read` whether the assessment reads the time (see [`Clock`]).
    pub fn noting_clock(mut self, read: &'a Cell<bool>) -> Self {
        self.clock.read = Some(read);
        self
    }

    /// With the pods (and, for a Deployment, ReplicaSets) `live` owns.
    pub fn children(mut self, pods: &'a [&'a Value], replica_sets: &'a [&'a Value]) -> Self {
        self.pods = pods;
        self.replica_sets = replica_sets;
        self
    }

    /// With overrides.
    pub fn overrides(mut self, overrides: &'a [&'a HealthOverride]) -> Self {
        self.overrides = overrides;
        self
    }

    /// With the StorageClass of a PersistentVolumeClaim `live`.
    pub fn storage_class(mut self, class: Option<&'a Value>) -> Self {
        self.storage_class = class;
        self
    }
}

/// Health of a live object (`None` = does not exist) with default settings, no children,
/// no overrides, at the current time. For callers that have nothing more; prefer
/// [`assess_with`].
pub fn assess(live: Option<&Value>) -> Health {
    let settings = HealthSettings::default();
    assess_with(&HealthInput::new(live, Timestamp::now(), &settings))
}

/// Kinds that are Healthy as soon as they exist: passive data and policy objects no
/// controller reports on. `(group, kind)`.
const PRESENT_IS_HEALTHY: &[(&str, &str)] = &[
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "ServiceAccount"),
    ("", "Endpoints"),
    ("", "LimitRange"),
    ("", "ResourceQuota"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("networking.k8s.io", "IngressClass"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
];

/// Health of one object: the rules listed in the module documentation, in that order.
pub fn assess_with(input: &HealthInput<'_>) -> Health {
    let Some(obj) = input.live else {
        return Health::new(HealthStatus::Missing, "not found in the cluster");
    };
    if let Some(h) = generic::lifecycle(obj) {
        return h;
    }
    if let Some(h) = overrides::apply(obj, input.overrides) {
        return h;
    }
    if let Some(h) = generic::kstatus_conditions(obj) {
        return h;
    }
    let (group, kind) = (fields::group(obj), fields::kind(obj));
    match (group, kind) {
        ("apps" | "extensions", "Deployment") => workloads::deployment(obj, input),
        ("apps", "StatefulSet") => workloads::stateful_set(obj, input),
        ("apps" | "extensions", "DaemonSet") => workloads::daemon_set(obj, input),
        ("apps" | "extensions", "ReplicaSet") => workloads::replica_set(obj, input),
        ("", "Pod") => pod::pod(obj, input.clock, input.settings),
        ("", "PersistentVolumeClaim") => storage::persistent_volume_claim(obj, input.storage_class),
        ("", "Service") => network::service(obj, input.clock),
        ("networking.k8s.io" | "extensions", "Ingress") => network::ingress(obj, input.clock),
        ("batch", "Job") => batch::job(obj, input),
        ("batch", "CronJob") => batch::cron_job(obj),
        ("autoscaling", "HorizontalPodAutoscaler") => scaling::horizontal_pod_autoscaler(obj),
        ("policy", "PodDisruptionBudget") => scaling::pod_disruption_budget(obj),
        ("apiregistration.k8s.io", "APIService") => api::api_service(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => api::custom_resource_definition(obj),
        ("", "Namespace") => api::namespace(obj),
        (g, k) if PRESENT_IS_HEALTHY.iter().any(|&(pg, pk)| pg == g && pk == k) => Health::healthy(""),
        _ => generic::conditions(obj),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Small builders shared by the rule tests.
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A fixed "now" for the tests: 2025-02-01T12:00:00Z.
    pub(crate) fn now() -> Timestamp {
        "2025-02-01T12:00:00Z".parse().unwrap()
    }

    /// RFC 3339 text of `now() - secs`.
    pub(crate) fn ago(secs: i64) -> String {
        (now() - jiff::SignedDuration::from_secs(secs)).to_string()
    }

    /// Assesses `obj` at [`now`] with default settings and the given pods.
    pub(crate) fn assess_at(obj: &Value, pods: &[&Value]) -> Health {
        let settings = HealthSettings::default();
        assess_with(&HealthInput::new(Some(obj), now(), &settings).children(pods, &[]))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{test_support::ago, *};

    /// A verdict that reads the time is told apart from one that cannot change with it:
    /// ages and deadlines read the clock, only where they are needed.
    #[test]
    fn an_assessment_notes_whether_it_read_the_clock() {
        let settings = HealthSettings::default();
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "generation": 1, "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "spec": {"replicas": 1},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}});
        let pod = |waiting: Option<&str>| {
            let state = waiting.map_or_else(|| json!({"running": {}}), |r| json!({"waiting": {"reason": r}}));
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "creationTimestamp": ago(60), "labels": {"pod-template-hash": "h"}},
                "status": {"phase": "Running", "containerStatuses": [{"name": "c", "restartCount": 0, "state": state}]}})
        };
        let (running, failing) = (pod(None), pod(Some("ImagePullBackOff")));
        let service = |type_: &str| {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s",
            "creationTimestamp": ago(60)}, "spec": {"type": type_}})
        };
        let (cluster_ip, balancer) = (service("ClusterIP"), service("LoadBalancer"));
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        // (object, pods, reads the clock)
        let cases: [(&Value, &[&Value], bool); 5] = [
            (&cm, &[], false),
            (&cluster_ip, &[], false),
            (&balancer, &[], true),
            (&deploy, &[&running], false),
            (&deploy, &[&failing], true),
        ];
        for (obj, pods, reads) in cases {
            let read = Cell::new(false);
            let at = Timestamp::now();
            let input = HealthInput::new(Some(obj), at, &settings).children(pods, &[]).noting_clock(&read);
            let h = assess_with(&input);
            assert_eq!(read.get(), reads, "{obj} with {pods:?}: {h:?}");
        }
    }

    /// An environment's `health:` block becomes the thresholds; defaults fill the rest.
    #[test]
    fn settings_from_a_loaded_policy() {
        let text = "\
repositories:
  - name: fleet
    url: https://git.example/fleet.git
environments:
  - name: dev
    health:
      stallAfter: 2m
      podRestartLimit: 5
      overrides:
        - group: networking.k8s.io
          kind: Ingress
          match: {ingressClassName: internal-nginx}
          rule: healthy-when-present
applications: []
";
        let path = std::path::Path::new("dev.yaml");
        let config = crate::config::load_str(text, path, std::path::Path::new(".")).expect("valid");
        let settings = HealthSettings::from_policy(&config.environments[0].health);
        assert_eq!((settings.pod_restart_limit, settings.stall_after.as_secs()), (5, 120));
        assert_eq!(settings.pod_failure_after.as_secs(), 600, "defaults fill the rest");
    }
}
