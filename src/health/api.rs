//! Objects that extend or partition the API: APIService, CustomResourceDefinition,
//! Namespace.
//!
//! Sources: Argo CD `gitops-engine/pkg/health/health_apiservice.go`, kstatus `core.go`
//! (CRD), the Kubernetes API for each (`Available`; `Established`, `NamesAccepted`;
//! `status.phase` `Active` / `Terminating`).
//!
//! | kind | rule |
//! |---|---|
//! | APIService | `Available=True` → Healthy; otherwise Progressing with the condition (`Available=False (MissingEndpoints): …`) |
//! | CustomResourceDefinition | `NamesAccepted=False` → Degraded (names clash with another CRD); `Established=True` → Healthy; `Established=False` with a reason other than `Installing` → Degraded; else Progressing |
//! | Namespace | phase `Terminating` → Progressing; else Healthy |

use serde_json::Value;

use super::{Health, fields};

/// Health of an APIService (`apiregistration.k8s.io/v1`).
pub fn api_service(obj: &Value) -> Health {
    match fields::condition(obj, "Available") {
        Some(c) if c.is_true() => Health::healthy(""),
        Some(c) => Health::progressing(c.describe()),
        None => Health::progressing("waiting for the Available condition"),
    }
}

/// Health of a CustomResourceDefinition (`apiextensions.k8s.io/v1`).
pub fn custom_resource_definition(obj: &Value) -> Health {
    if let Some(c) = fields::condition(obj, "NamesAccepted").filter(|c| c.is_false()) {
        return Health::degraded(c.describe());
    }
    match fields::condition(obj, "Established") {
        Some(c) if c.is_true() => Health::healthy(""),
        Some(c) if c.is_false() && c.reason != "Installing" => Health::degraded(c.describe()),
        Some(c) => Health::progressing(c.describe()),
        None => Health::progressing("waiting for the Established condition"),
    }
}

/// Health of a Namespace (`v1`).
pub fn namespace(obj: &Value) -> Health {
    if fields::str_at(obj, "/status/phase") == Some("Terminating") {
        return Health::progressing("namespace is terminating");
    }
    Health::healthy("")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{
        HealthStatus::{self, *},
        test_support::assess_at,
    };

    #[test]
    fn api_objects() {
        let apis = |conditions: Value| {
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.metrics.k8s.io"},
                "status": {"conditions": conditions}})
        };
        let crd = |conditions: Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
                "status": {"conditions": conditions}})
        };
        let ns = |phase: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}, "status": {"phase": phase}});
        let cases: Vec<(&str, Value, HealthStatus, &str)> = vec![
            ("api available", apis(json!([{"type": "Available", "status": "True"}])), Healthy, ""),
            (
                "api without endpoints",
                apis(json!([{"type": "Available", "status": "False", "reason": "MissingEndpoints"}])),
                Progressing,
                "Available=False (MissingEndpoints)",
            ),
            (
                "crd established",
                crd(json!([{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}])),
                Healthy,
                "",
            ),
            (
                "crd installing",
                crd(
                    json!([{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "False", "reason": "Installing"}]),
                ),
                Progressing,
                "Established=False (Installing)",
            ),
            (
                "crd names clash",
                crd(
                    json!([{"type": "NamesAccepted", "status": "False", "reason": "ListKindConflict", "message": "\"WidgetList\" is already in use"}]),
                ),
                Degraded,
                "NamesAccepted=False (ListKindConflict): \"WidgetList\" is already in use",
            ),
            (
                "crd not established",
                crd(json!([{"type": "Established", "status": "False", "reason": "NotAccepted"}])),
                Degraded,
                "Established=False (NotAccepted)",
            ),
            ("namespace active", ns("Active"), Healthy, ""),
            ("namespace terminating", ns("Terminating"), Progressing, "namespace is terminating"),
        ];
        for (what, obj, status, message) in &cases {
            let h = assess_at(obj, &[]);
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "{what}");
        }
    }
}
