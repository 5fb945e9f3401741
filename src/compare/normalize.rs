//! Normalization: remove what the API server fills in by itself, so that equal objects
//! compare equal.
//!
//! Removed: `metadata.{managedFields, resourceVersion, uid, generation,
//! creationTimestamp, selfLink, deletionTimestamp, deletionGracePeriodSeconds}`, the
//! whole `status`, the `kubectl.kubernetes.io/last-applied-configuration` and
//! `deployment.kubernetes.io/revision` annotations (written by kubectl and the
//! Deployment controller), and empty `annotations`/`labels` maps (the API treats empty
//! and absent alike). Server defaults need no rule here: the desired side is a dry-run
//! result, which carries them already.

use serde_json::Value;

const METADATA_SERVER_FIELDS: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

const SERVER_ANNOTATIONS: &[&str] =
    &["kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision"];

/// Returns `obj` without server-populated fields. Idempotent.
pub fn normalize(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("status");
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in METADATA_SERVER_FIELDS {
                meta.remove(*f);
            }
            if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                for a in SERVER_ANNOTATIONS {
                    ann.remove(*a);
                }
            }
            for f in ["annotations", "labels"] {
                if meta.get(f).is_some_and(|x| x.as_object().is_some_and(|o| o.is_empty()) || x.is_null()) {
                    meta.remove(f);
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn strips_server_fields() {
        let live = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "uid": "u", "resourceVersion": "7", "generation": 1,
                          "creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [{}],
                          "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}, "labels": {}},
            "data": {"k": "v"}, "status": {"x": 1}
        });
        assert_eq!(
            normalize(&live),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": {"k": "v"}})
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::from)
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("metadata".to_string()),
                        Just("status".to_string()),
                        Just("annotations".to_string()),
                        Just("uid".to_string()),
                        "[a-z]{1,5}"
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn idempotent(v in arb_json()) {
            let once = normalize(&v);
            prop_assert_eq!(normalize(&once), once);
        }
    }
}
