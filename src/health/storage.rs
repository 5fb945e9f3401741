//! PersistentVolumeClaim.
//!
//! Source: Argo CD `gitops-engine/pkg/health/health_pvc.go`, the Kubernetes
//! PersistentVolumeClaim API (`status.phase`: `Pending`, `Bound`, `Lost`) and the
//! StorageClass `volumeBindingMode` (Kubernetes docs, "Storage Classes", volume binding
//! mode).
//!
//! `Bound` → Healthy; `Lost` → Degraded (its volume is gone); no phase yet →
//! Progressing. `Pending` depends on the class: with `volumeBindingMode:
//! WaitForFirstConsumer` the claim is neither bound nor provisioned until the scheduler
//! picks a node for a pod that uses it (it then annotates the claim
//! `volume.kubernetes.io/selected-node`), so Pending without that annotation is the
//! expected steady state → Healthy "waiting for first consumer" (its consumer may well
//! be in a later sync wave, or a suspended CronJob); with the annotation, binding is
//! now due → Progressing. Any other class, or a class that could not be read →
//! Progressing.

use serde_json::Value;

use super::{Health, fields};

/// The annotation the scheduler puts on a `WaitForFirstConsumer` claim once a pod
/// using it is scheduled.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// The annotation that marks the cluster's default StorageClass (Kubernetes docs,
/// "Change the default StorageClass").
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// Health of a PersistentVolumeClaim (`v1`); `class` is its StorageClass when known.
pub fn persistent_volume_claim(obj: &Value, class: Option<&Value>) -> Health {
    match fields::str_at(obj, "/status/phase") {
        Some("Bound") => match fields::str_at(obj, "/spec/volumeName") {
            Some(v) => Health::healthy(format!("bound to {v}")),
            None => Health::healthy("bound"),
        },
        Some("Lost") => Health::degraded("claim lost its volume"),
        Some("Pending") if waits_for_first_consumer(class) => {
            let name = class.and_then(|c| fields::str_at(c, "/metadata/name")).unwrap_or("");
            match obj.pointer("/metadata/annotations").and_then(|a| a.get(SELECTED_NODE_ANNOTATION)) {
                Some(node) => Health::progressing(format!(
                    "waiting for a volume on node {} (Pending)",
                    node.as_str().unwrap_or("")
                )),
                None => Health::healthy(format!(
                    "waiting for first consumer (StorageClass {name} binds when a pod using the claim is scheduled)"
                )),
            }
        }
        Some("Pending") => Health::progressing("waiting for a volume (Pending)"),
        _ => Health::progressing("waiting for a volume"),
    }
}

fn waits_for_first_consumer(class: Option<&Value>) -> bool {
    class.and_then(|c| fields::str_at(c, "/volumeBindingMode")) == Some("WaitForFirstConsumer")
}

/// The name of the StorageClass a claim binds through: `spec.storageClassName`, else
/// the default class among `classes` (the one annotated
/// [`DEFAULT_CLASS_ANNOTATION`]`: "true"`; `None` when there is none, or several). An
/// empty `storageClassName` asks for no class at all → `None`.
pub fn class_of<'a>(claim: &'a Value, classes: &'a [Value]) -> Option<&'a str> {
    match claim.pointer("/spec/storageClassName") {
        Some(Value::String(name)) if name.is_empty() => None,
        Some(Value::String(name)) => Some(name),
        _ => {
            let mut defaults = classes.iter().filter(|c| {
                c.pointer("/metadata/annotations").and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION)).and_then(Value::as_str)
                    == Some("true")
            });
            match (defaults.next(), defaults.next()) {
                (Some(c), None) => fields::str_at(c, "/metadata/name"),
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{
        super::{HealthStatus::*, test_support::assess_at},
        *,
    };

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

    /// argocd-18: a Pending claim of a `WaitForFirstConsumer` class waits by design
    /// until a pod using it is scheduled; an `Immediate` class, or an unknown class,
    /// stays Progressing.
    #[test]
    fn claims_that_wait_for_their_first_consumer() {
        let class = |mode: &str| json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"}, "volumeBindingMode": mode});
        let pending = |annotations: serde_json::Value| {
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "annotations": annotations},
                "spec": {"storageClassName": "local"}, "status": {"phase": "Pending"}})
        };
        let (wffc, immediate) = (class("WaitForFirstConsumer"), class("Immediate"));
        let selected = json!({SELECTED_NODE_ANNOTATION: "kwok-node-0"});
        for (claim, class, status, message) in [
            (
                pending(json!({})),
                Some(&wffc),
                Healthy,
                "waiting for first consumer (StorageClass local binds when a pod using the claim is scheduled)",
            ),
            (pending(selected.clone()), Some(&wffc), Progressing, "waiting for a volume on node kwok-node-0 (Pending)"),
            (pending(json!({})), Some(&immediate), Progressing, "waiting for a volume (Pending)"),
            (pending(json!({})), None, Progressing, "waiting for a volume (Pending)"),
        ] {
            let h = persistent_volume_claim(&claim, class);
            assert_eq!((h.status, h.message.as_str()), (status, message), "{claim} {class:?}");
        }
        // which class: the claim's own, else the single default; "" asks for none
        let default =
            |name: &str, on: &str| json!({"metadata": {"name": name, "annotations": {DEFAULT_CLASS_ANNOTATION: on}}});
        let classes = [default("standard", "true"), default("fast", "false")];
        let claim = |spec: serde_json::Value| json!({"spec": spec});
        assert_eq!(class_of(&claim(json!({"storageClassName": "local"})), &classes), Some("local"));
        assert_eq!(class_of(&claim(json!({})), &classes), Some("standard"));
        assert_eq!(class_of(&claim(json!({"storageClassName": ""})), &classes), None);
        let two = [default("a", "true"), default("b", "true")];
        assert_eq!(class_of(&claim(json!({})), &two), None, "two defaults: cannot tell");
    }
}
