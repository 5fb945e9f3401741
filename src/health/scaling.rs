//! HorizontalPodAutoscaler and PodDisruptionBudget.
//!
//! Sources: Argo CD `gitops-engine/pkg/health/health_hpa.go` (degrading reasons), the
//! Kubernetes autoscaling API (`autoscaling/v2` `status.conditions`; `autoscaling/v1`
//! carries the same list as JSON in annotation `autoscaling.alpha.kubernetes.io/
//! conditions`) and the policy/v1 PodDisruptionBudget API (`currentHealthy`,
//! `desiredHealthy`, `disruptionsAllowed`).
//!
//! | kind | rule |
//! |---|---|
//! | HorizontalPodAutoscaler | `AbleToScale=False` with `FailedGetScale` / `FailedUpdateScale`, or `ScalingActive=False` with `FailedGet…Metric`, `FailedComputeMetricsReplicas`, `InvalidSelector`, `InvalidMetricSourceType` → Degraded; `ScalingActive=False` reason `ScalingDisabled` (target scaled to 0) → Suspended; `AbleToScale=True` → Healthy; no conditions yet → Progressing (`waiting to autoscale`) |
//! | PodDisruptionBudget | fewer healthy pods than it needs → Progressing (`1/2 healthy pods`); else Healthy (`1 disruption allowed`) — Progressing rather than Degraded: a rollout or a node drain goes through this state |

use serde_json::Value;

use super::{
    Health,
    fields::{self, Condition, count},
};

const HPA_CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";

/// Reasons of `ScalingActive=False` / `AbleToScale=False` that need a human.
fn hpa_degrading(c: &Condition<'_>) -> bool {
    c.is_false()
        && (matches!(
            c.reason,
            "FailedGetScale"
                | "FailedUpdateScale"
                | "FailedComputeMetricsReplicas"
                | "InvalidSelector"
                | "InvalidMetricSourceType"
        ) || (c.reason.starts_with("FailedGet") && c.reason.ends_with("Metric")))
}

/// Health of a HorizontalPodAutoscaler (`autoscaling/v1` and `v2`).
pub fn horizontal_pod_autoscaler(obj: &Value) -> Health {
    let from_annotation: Option<Value> =
        fields::annotation(obj, HPA_CONDITIONS_ANNOTATION).and_then(|s| serde_json::from_str(s).ok());
    let Some(list) = fields::at(obj, "/status/conditions").or(from_annotation.as_ref()) else {
        return Health::progressing("waiting to autoscale");
    };
    let conditions: Vec<Condition<'_>> = list.as_array().into_iter().flatten().map(Condition::of).collect();
    if let Some(c) = conditions.iter().find(|c| hpa_degrading(c)) {
        return Health::degraded(c.describe());
    }
    if let Some(c) =
        conditions.iter().find(|c| c.type_() == "ScalingActive" && c.is_false() && c.reason == "ScalingDisabled")
    {
        return Health::suspended(c.describe());
    }
    if conditions.iter().any(|c| c.type_() == "AbleToScale" && c.is_true()) {
        let limited = conditions.iter().find(|c| c.type_() == "ScalingLimited" && c.is_true());
        return Health::healthy(limited.map_or(String::new(), Condition::describe));
    }
    Health::progressing("waiting to autoscale")
}

/// Health of a PodDisruptionBudget (`policy/v1`).
pub fn pod_disruption_budget(obj: &Value) -> Health {
    let (current, desired) = (count(obj, "/status/currentHealthy"), count(obj, "/status/desiredHealthy"));
    if current < desired {
        return Health::progressing(format!("{current}/{desired} healthy pods"));
    }
    let allowed = count(obj, "/status/disruptionsAllowed");
    Health::healthy(if allowed == 1 { "1 disruption allowed".into() } else { format!("{allowed} disruptions allowed") })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{
        HealthStatus::{self, *},
        test_support::assess_at,
    };

    #[test]
    fn autoscalers_and_budgets() {
        let hpa = |conditions: Value| {
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
                "status": {"conditions": conditions}})
        };
        let able = json!({"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"});
        let pdb = |current: i64, desired: i64, allowed: i64| {
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                "status": {"currentHealthy": current, "desiredHealthy": desired, "disruptionsAllowed": allowed}})
        };
        let cases: Vec<(&str, Value, HealthStatus, &str)> = vec![
            (
                "scaling",
                hpa(json!([able, {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"}])),
                Healthy,
                "",
            ),
            (
                "at its maximum",
                hpa(
                    json!([able, {"type": "ScalingLimited", "status": "True", "reason": "TooManyReplicas", "message": "the desired replica count is more than the maximum replica count"}]),
                ),
                Healthy,
                "ScalingLimited=True (TooManyReplicas): the desired replica count is more than the maximum replica count",
            ),
            (
                "metrics missing",
                hpa(
                    json!([able, {"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric", "message": "no metrics returned"}]),
                ),
                Degraded,
                "ScalingActive=False (FailedGetResourceMetric): no metrics returned",
            ),
            (
                "target missing",
                hpa(json!([{"type": "AbleToScale", "status": "False", "reason": "FailedGetScale"}])),
                Degraded,
                "AbleToScale=False (FailedGetScale)",
            ),
            (
                "target scaled to zero",
                hpa(json!([able, {"type": "ScalingActive", "status": "False", "reason": "ScalingDisabled"}])),
                Suspended,
                "ScalingActive=False (ScalingDisabled)",
            ),
            (
                "no status yet",
                json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"}}),
                Progressing,
                "waiting to autoscale",
            ),
            (
                "autoscaling/v1 conditions annotation",
                json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "annotations": {
                    "autoscaling.alpha.kubernetes.io/conditions": "[{\"type\":\"AbleToScale\",\"status\":\"False\",\"reason\":\"FailedUpdateScale\"}]"}}}),
                Degraded,
                "AbleToScale=False (FailedUpdateScale)",
            ),
            ("budget met", pdb(3, 2, 1), Healthy, "1 disruption allowed"),
            ("budget not met", pdb(1, 2, 0), Progressing, "1/2 healthy pods"),
        ];
        for (what, obj, status, message) in &cases {
            let h = assess_at(obj, &[]);
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "{what}");
        }
    }
}
