//! Diff of two normalized objects: the list of differing fields as JSON pointers, with
//! both values, plus a readable unified YAML diff.

use serde::Serialize;
use serde_json::Value;

/// One differing field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// RFC 6901 pointer of the field, e.g. `/spec/replicas`.
    pub path: String,
    /// Git's value (absent when Git does not declare the field).
    pub desired: Option<Value>,
    /// The live value (absent when the field is missing live).
    pub live: Option<Value>,
    /// The field manager that set the live value, when it is not plumb.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manager: Option<super::managers::Owner>,
}

impl Difference {
    /// One line: `/spec/replicas 5→3 (set by kubectl via scale at 2026-11-29T14:02:11Z)`.
    pub fn describe(&self) -> String {
        let show = |v: &Option<Value>| match v {
            None => "(absent)".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                let t = v.to_string();
                if t.len() > 60 { format!("{}…", &t[..t.floor_char_boundary(60)]) } else { t }
            }
        };
        let mut s = format!("{} {}→{}", self.path, show(&self.live), show(&self.desired));
        if let Some(o) = &self.manager {
            s.push_str(&format!(" (set by {}", o.manager));
            if let Some(sub) = &o.subresource {
                s.push_str(&format!(" via {sub}"));
            }
            if let Some(t) = &o.time {
                s.push_str(&format!(" at {t}"));
            }
            s.push(')');
        }
        s
    }
}

/// Fields that differ between `desired` and `live` (both already normalized), in
/// path order; empty when equal. Computed from the RFC 6902 patch live → desired
/// (json-patch crate), so every path is the shallowest that differs.
pub fn diff(desired: &Value, live: &Value) -> Vec<Difference> {
    let patch = json_patch::diff(live, desired);
    let mut out: Vec<Difference> = patch
        .0
        .iter()
        .map(|op| {
            let path = match op {
                json_patch::PatchOperation::Add(o) => o.path.to_string(),
                json_patch::PatchOperation::Remove(o) => o.path.to_string(),
                json_patch::PatchOperation::Replace(o) => o.path.to_string(),
                json_patch::PatchOperation::Move(o) => o.path.to_string(),
                json_patch::PatchOperation::Copy(o) => o.path.to_string(),
                json_patch::PatchOperation::Test(o) => o.path.to_string(),
            };
            Difference {
                desired: desired.pointer(&path).cloned(),
                live: live.pointer(&path).cloned(),
                path,
                manager: None,
            }
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    out
}

/// A unified diff of the YAML forms of `live` (`-`) and `desired` (`+`), with `label`
/// in the headers; empty when both are equal.
pub fn unified(label: &str, desired: &Value, live: Option<&Value>) -> String {
    let to_yaml = |v: &Value| serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# cannot render: {e}\n"));
    let old = live.map(to_yaml).unwrap_or_default();
    let new = to_yaml(desired);
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("live/{label}"), &format!("git/{label}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z/~]{0,4}".prop_map(Value::from)
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z/~]{1,4}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// diff(x, x) is empty, and normalizing both sides keeps it empty, for any object.
        #[test]
        fn nothing_differs_from_itself(v in arb_json()) {
            proptest::prop_assert!(diff(&v, &v).is_empty());
            let n = super::super::normalize(&v);
            proptest::prop_assert!(diff(&n, &super::super::normalize(&v)).is_empty());
        }

        /// Every reported path exists on at least one side.
        #[test]
        fn reported_paths_exist(a in arb_json(), b in arb_json()) {
            for d in diff(&a, &b) {
                proptest::prop_assert!(a.pointer(&d.path).is_some() || b.pointer(&d.path).is_some(), "{}", d.path);
            }
        }
    }

    #[test]
    fn equal_objects_have_no_difference() {
        let v = json!({"a": [1, {"b": 2}], "c": "x"});
        assert!(diff(&v, &v).is_empty());
        assert!(unified("x", &v, Some(&v)).is_empty());
    }

    #[test]
    fn replicas_drift() {
        let git = json!({"spec": {"replicas": 3, "x": 1}});
        let live = json!({"spec": {"replicas": 5, "x": 1, "extra": true}});
        let d = diff(&git, &live);
        assert_eq!(d.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(), ["/spec/extra", "/spec/replicas"]);
        assert_eq!(d[1].desired, Some(json!(3)));
        assert_eq!(d[1].live, Some(json!(5)));
        let u = unified("Deployment/web", &git, Some(&live));
        assert!(u.contains("-  replicas: 5") && u.contains("+  replicas: 3"), "{u}");
    }
}
