//! Server-set metadata committed to Git (manifests exported with `kubectl get -o yaml`):
//! `metadata.resourceVersion`, `uid`, `managedFields`, `creationTimestamp`,
//! `generation`, `selfLink` and the top-level `status` are owned by the API server.
//! Sent in a write they act as preconditions (`uid`, `resourceVersion`: a stale one
//! makes every later apply fail with 409 "the object has been modified"), are refused
//! (`managedFields`: "must be nil" in an apply) or are ignored (the rest; `status` on a
//! kind with a status subresource). plumb removes them before comparing and applying,
//! and says so: one warning per document naming the file, document and fields.
//!
//! Empty values (`creationTimestamp: null`, `status: {}`, as
//! `kubectl create --dry-run=client -o yaml` writes them) carry nothing from another
//! cluster: they are removed without a warning. (Flux removes `creationTimestamp` the
//! same way, fluxcd/pkg ssa; the rule for the rest is the API conventions' "read-only"
//! fields, <https://kubernetes.io/docs/reference/using-api/api-concepts/>.)

use serde_json::Value;

/// The `metadata` fields the API server sets (removed before compare and apply).
pub const SERVER_SET_METADATA: [&str; 6] =
    ["resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink"];

/// Removes the server-set fields of `object` (see the module docs) and returns the
/// dotted names of those that carried a value (`metadata.uid`, `status`), in the order
/// of [`SERVER_SET_METADATA`], `status` last. An object with none returns an empty list.
pub fn strip(object: &mut Value) -> Vec<String> {
    let mut removed = Vec::new();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_SET_METADATA {
            if let Some(v) = meta.remove(field)
                && !is_empty(&v)
            {
                removed.push(format!("metadata.{field}"));
            }
        }
    }
    if let Some(map) = object.as_object_mut()
        && let Some(v) = map.remove("status")
        && !is_empty(&v)
    {
        removed.push("status".into());
    }
    removed
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strips_and_names_what_had_a_value() {
        let cases = [
            // variant A of k8s-05: exported from another cluster
            (
                json!({"metadata": {"name": "a", "uid": "3f0d", "resourceVersion": "918273",
                    "creationTimestamp": "2025-11-03T08:15:00Z"}, "data": {"k": "v"}}),
                vec!["metadata.resourceVersion", "metadata.uid", "metadata.creationTimestamp"],
            ),
            // variant B
            (
                json!({"metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]}}),
                vec!["metadata.managedFields"],
            ),
            // variant C
            (
                json!({"metadata": {"name": "a", "generation": 4, "selfLink": "/api/v1/x"}}),
                vec!["metadata.generation", "metadata.selfLink"],
            ),
            // variant D
            (json!({"metadata": {"name": "a"}, "status": {"replicas": 3}}), vec!["status"]),
            // kubectl create --dry-run=client -o yaml: nothing worth a warning
            (json!({"metadata": {"name": "a", "creationTimestamp": null}, "status": {}}), vec![]),
            (json!({"metadata": {"name": "a"}, "spec": {"status": "kept"}}), vec![]),
        ];
        for (mut object, expected) in cases {
            let removed = strip(&mut object);
            assert_eq!(removed, expected, "{object}");
            let meta = object["metadata"].as_object().expect("metadata");
            assert!(SERVER_SET_METADATA.iter().all(|f| !meta.contains_key(*f)), "{object}");
            assert!(object.get("status").is_none());
            assert_eq!(object["metadata"]["name"], "a");
        }
        let mut nested = json!({"metadata": {"name": "a"}, "spec": {"status": "kept"}});
        strip(&mut nested);
        assert_eq!(nested["spec"]["status"], "kept", "only the top-level status");
    }
}
