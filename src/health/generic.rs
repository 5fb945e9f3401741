//! Rules that hold for every kind, and the fallback for kinds without a rule of their
//! own (custom resources).
//!
//! Sources: kstatus `pkg/kstatus/status/generic.go` (deletion, `observedGeneration`,
//! `Reconciling` / `Stalled` — the conditions of the Kubernetes API conventions'
//! "abnormal-true" pattern) and the `Ready` fallback of kstatus `status.go`, which plumb
//! extends: `Ready=False` with a terminal reason is Degraded, where kstatus keeps it
//! InProgress forever.

use serde_json::Value;

use super::{
    Health,
    fields::{self, Condition},
};

/// Being deleted → Progressing; `metadata.generation` > `status.observedGeneration` →
/// Progressing. `None` when neither applies (an absent `observedGeneration` skips the
/// second check, as in kstatus: not every kind reports one).
///
/// The same holds for each condition health reads (`Ready`, `Available`, `Stalled`,
/// `Reconciling`) that carries its own `observedGeneration` (Kubernetes API
/// conventions, `metav1.Condition`): one older than `metadata.generation` describes the
/// previous spec, so it is no evidence either way → Progressing until the controller
/// has observed the current generation.
pub fn lifecycle(obj: &Value) -> Option<Health> {
    if fields::at(obj, "/metadata/deletionTimestamp").is_some_and(|v| !v.is_null()) {
        return Some(Health::progressing("being deleted"));
    }
    let generation = fields::i64_at(obj, "/metadata/generation")?;
    if let Some(observed) = fields::i64_at(obj, "/status/observedGeneration")
        && generation > observed
    {
        return Some(Health::progressing(format!(
            "generation {generation} not yet observed (controller at {observed})"
        )));
    }
    EVIDENCE.iter().filter_map(|t| fields::condition(obj, t)).find_map(|c| {
        let observed = c.observed_generation()?;
        (generation > observed).then(|| {
            Health::progressing(format!(
                "generation {generation} not yet observed: condition {} describes generation {observed}",
                c.type_()
            ))
        })
    })
}

/// The conditions health reads as evidence.
const EVIDENCE: [&str; 4] = ["Ready", "Available", "Stalled", "Reconciling"];

/// kstatus conditions: `Stalled=True` → Degraded, `Reconciling=True` → Progressing.
pub fn kstatus_conditions(obj: &Value) -> Option<Health> {
    if let Some(c) = fields::condition(obj, "Stalled").filter(Condition::is_true) {
        return Some(Health::degraded(c.describe()));
    }
    if let Some(c) = fields::condition(obj, "Reconciling").filter(Condition::is_true) {
        return Some(Health::progressing(c.describe()));
    }
    None
}

/// Whether a condition reason says the controller gave up (it will not get better by
/// waiting): `Failed`, `…Failed` (`InstallFailed`, `ReconciliationFailed`), `…Failure`,
/// `…Error` (`ReconcileError`), `Invalid…` (`InvalidSpec`). Reasons are CamelCase by
/// the API conventions, so the suffix/prefix test is exact.
pub fn is_terminal_reason(reason: &str) -> bool {
    reason.ends_with("Failed")
        || reason.ends_with("Failure")
        || reason.ends_with("Error")
        || reason.starts_with("Invalid")
}

/// Kinds without a rule: the `Ready` condition, else `Available`.
///
/// - `True` → Healthy;
/// - `False` with a terminal reason ([`is_terminal_reason`]) → Degraded;
/// - `False` or `Unknown` otherwise → Progressing;
/// - neither condition → Healthy (nothing says otherwise; kstatus' "Current").
pub fn conditions(obj: &Value) -> Health {
    for type_ in ["Ready", "Available"] {
        let Some(c) = fields::condition(obj, type_) else {
            continue;
        };
        return if c.is_true() {
            Health::healthy(c.message)
        } else if c.is_false() && is_terminal_reason(c.reason) {
            Health::degraded(c.describe())
        } else {
            Health::progressing(c.describe())
        };
    }
    Health::healthy("")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{HealthStatus::*, test_support::assess_at};

    #[test]
    fn generic_rules_come_first() {
        let widget = |metadata: serde_json::Value, status: serde_json::Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": metadata, "status": status});
        let ready = json!([{"type": "Ready", "status": "True"}]);
        let cases = [
            // (object, status, message)
            (
                widget(json!({"name": "w", "deletionTimestamp": "2025-02-01T11:00:00Z"}), json!({"conditions": ready})),
                Progressing,
                "being deleted",
            ),
            (
                widget(json!({"name": "w", "generation": 3}), json!({"observedGeneration": 2, "conditions": ready})),
                Progressing,
                "generation 3 not yet observed (controller at 2)",
            ),
            // no observedGeneration: the check is skipped
            (widget(json!({"name": "w", "generation": 3}), json!({"conditions": ready})), Healthy, ""),
            // a condition of the previous spec is no evidence, whatever it says
            (
                widget(
                    json!({"name": "w", "generation": 3}),
                    json!({"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}]}),
                ),
                Progressing,
                "generation 3 not yet observed: condition Ready describes generation 2",
            ),
            (
                widget(
                    json!({"name": "w", "generation": 3}),
                    json!({"conditions": [{"type": "Stalled", "status": "True", "reason": "BadSpec", "observedGeneration": 2}]}),
                ),
                Progressing,
                "generation 3 not yet observed: condition Stalled describes generation 2",
            ),
            (
                widget(
                    json!({"name": "w", "generation": 3}),
                    json!({"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3}, {"type": "Synced", "status": "True", "observedGeneration": 1}]}),
                ),
                Healthy,
                "",
            ),
            (
                widget(
                    json!({"name": "w"}),
                    json!({"conditions": [{"type": "Stalled", "status": "True", "reason": "BadSpec", "message": "no"}]}),
                ),
                Degraded,
                "Stalled=True (BadSpec): no",
            ),
            (
                widget(json!({"name": "w"}), json!({"conditions": [{"type": "Reconciling", "status": "True"}]})),
                Progressing,
                "Reconciling=True",
            ),
            (
                widget(json!({"name": "w"}), json!({"conditions": [{"type": "Stalled", "status": "False"}]})),
                Healthy,
                "",
            ),
            (
                widget(
                    json!({"name": "w"}),
                    json!({"conditions": [{"type": "Ready", "status": "False", "reason": "InstallFailed", "message": "chart not found"}]}),
                ),
                Degraded,
                "Ready=False (InstallFailed): chart not found",
            ),
            (
                widget(
                    json!({"name": "w"}),
                    json!({"conditions": [{"type": "Ready", "status": "False", "reason": "DependencyNotReady"}]}),
                ),
                Progressing,
                "Ready=False (DependencyNotReady)",
            ),
            (
                widget(json!({"name": "w"}), json!({"conditions": [{"type": "Ready", "status": "Unknown"}]})),
                Progressing,
                "Ready=Unknown",
            ),
            (
                widget(
                    json!({"name": "w"}),
                    json!({"conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]}),
                ),
                Progressing,
                "Available=False (MinimumReplicasUnavailable)",
            ),
            (widget(json!({"name": "w"}), json!({})), Healthy, ""),
        ];
        for (i, (obj, status, message)) in cases.iter().enumerate() {
            let h = assess_at(obj, &[]);
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "case {i}");
        }
    }

    #[test]
    fn terminal_reasons() {
        for r in ["Failed", "InstallFailed", "ReconcileError", "InvalidSpec", "ProvisioningFailure"] {
            assert!(super::is_terminal_reason(r), "{r}");
        }
        for r in ["", "Progressing", "DependencyNotReady", "Installing", "ErrorBudget"] {
            assert!(!super::is_terminal_reason(r), "{r}");
        }
    }
}
