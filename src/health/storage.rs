//! PersistentVolumeClaim.
//!
//! Source: Argo CD `gitops-engine/pkg/health/health_pvc.go`, the Kubernetes
//! PersistentVolumeClaim API (`status.phase`: `Pending`, `Bound`, `Lost`).
//!
//! `Bound` → Healthy; `Pending` → Progressing (a `WaitForFirstConsumer` class binds only
//! when a pod uses the claim); `Lost` → Degraded (its volume is gone); no phase yet →
//! Progressing.

use serde_json::Value;

use super::{Health, fields};

/// Health of a PersistentVolumeClaim (`v1`).
pub fn persistent_volume_claim(obj: &Value) -> Health {
    match fields::str_at(obj, "/status/phase") {
        Some("Bound") => match fields::str_at(obj, "/spec/volumeName") {
            Some(v) => Health::healthy(format!("bound to {v}")),
            None => Health::healthy("bound"),
        },
        Some("Lost") => Health::degraded("claim lost its volume"),
        Some("Pending") => Health::progressing("waiting for a volume (Pending)"),
        _ => Health::progressing("waiting for a volume"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{HealthStatus::*, test_support::assess_at};

    #[test]
    fn claims() {
        let pvc = |spec: serde_json::Value, phase: Option<&str>| {
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": spec,
                "status": phase.map_or(json!({}), |p| json!({"phase": p}))})
        };
        for (obj, status, message) in [
            (pvc(json!({"volumeName": "pv-1"}), Some("Bound")), Healthy, "bound to pv-1"),
            (pvc(json!({}), Some("Pending")), Progressing, "waiting for a volume (Pending)"),
            (pvc(json!({"volumeName": "pv-1"}), Some("Lost")), Degraded, "claim lost its volume"),
            (pvc(json!({}), None), Progressing, "waiting for a volume"),
        ] {
            let h = assess_at(&obj, &[]);
            assert_eq!((h.status, h.message.as_str()), (status, message));
        }
    }
}
