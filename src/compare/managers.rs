//! Who set a field: the field manager that owns a path in the live object's
//! `metadata.managedFields` (server-side apply's ownership records; format `FieldsV1`,
//! Kubernetes API reference "ManagedFieldsEntry": keys `f:<field>`, `k:<json key of an
//! associative-list element>`, `v:<json value of a set element>`, `i:<index>`).
//!
//! Used to say *why* something drifted: `spec.replicas 5→3 (set by kubectl-scale at
//! 14:02:11)`.

use serde::Serialize;
use serde_json::{Map, Value};

use super::pointer::parse_pointer;

/// The manager owning a field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// Field manager name, e.g. `kubectl-scale`, `kubectl-edit`, `kube-controller-manager`.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource written through (`scale`, `status`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// When the manager last wrote (RFC 3339), if recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// The manager other than `ignore` that owns `pointer` (an RFC 6901 path) or something
/// below it in `live`; when several do, the one that wrote last.
pub fn owner_of(live: &Value, pointer: &str, ignore: &str) -> Option<Owner> {
    let tokens = parse_pointer(pointer);
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    entries
        .iter()
        .filter(|e| e.get("manager").and_then(Value::as_str).is_some_and(|m| m != ignore))
        .filter(|e| e.get("fieldsV1").is_some_and(|f| owns(f, live, &tokens)))
        .max_by(|a, b| {
            let t = |e: &Value| e.get("time").and_then(Value::as_str).unwrap_or("").to_string();
            t(a).cmp(&t(b))
        })
        .map(|e| Owner {
            manager: e.get("manager").and_then(Value::as_str).unwrap_or("").to_string(),
            operation: e.get("operation").and_then(Value::as_str).unwrap_or("").to_string(),
            subresource: e.get("subresource").and_then(Value::as_str).map(String::from),
            time: e.get("time").and_then(Value::as_str).map(String::from),
        })
}

/// Whether field set `set` (FieldsV1) contains the path `tokens` of `obj` or anything
/// below it.
fn owns(set: &Value, obj: &Value, tokens: &[String]) -> bool {
    let Some(map) = set.as_object() else { return false };
    if map.is_empty() {
        // a leaf of the set: the whole value (and everything inside it) is owned
        return true;
    }
    let Some((first, rest)) = tokens.split_first() else {
        // reached the path: owned if the set marks it (any entry, or "." itself)
        return true;
    };
    match obj {
        Value::Object(o) => {
            let Some(child) = map.get(&format!("f:{first}")) else { return false };
            owns(child, o.get(first).unwrap_or(&Value::Null), rest)
        }
        Value::Array(a) => {
            let Some(elem) = first.parse::<usize>().ok().and_then(|i| a.get(i)) else { return false };
            map.iter().any(|(k, child)| element_matches(k, elem, first) && owns(child, elem, rest))
        }
        _ => false,
    }
}

/// Every path of `live` that field manager `manager` owns (leaves of its field set,
/// resolved against the live object: `k:`/`v:` list keys become indexes).
pub fn owned_paths(live: &Value, manager: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let Some(entries) = live.pointer("/metadata/managedFields").and_then(Value::as_array) else { return out };
    for e in entries.iter().filter(|e| e.get("manager").and_then(Value::as_str) == Some(manager)) {
        if let Some(set) = e.get("fieldsV1") {
            collect(set, live, &mut Vec::new(), &mut out);
        }
    }
    out
}

fn collect(set: &Value, obj: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Some(map) = set.as_object() else { return };
    if map.is_empty() {
        out.push(path.clone());
        return;
    }
    for (k, child) in map {
        if k == "." {
            continue;
        }
        if let Some(field) = k.strip_prefix("f:") {
            if let Some(v) = obj.get(field) {
                path.push(field.to_string());
                collect(child, v, path, out);
                path.pop();
            }
        } else if let Some(a) = obj.as_array() {
            for (i, elem) in a.iter().enumerate() {
                if element_matches(k, elem, &i.to_string()) {
                    path.push(i.to_string());
                    collect(child, elem, path, out);
                    path.pop();
                }
            }
        }
    }
}

/// Field managers of imperative or client-side tools whose fields plumb takes over
/// before its first server-side apply: without the takeover, a field Git removed would
/// stay forever, owned by `kubectl-client-side-apply`. Unlike Flux, `before-first-apply`
/// is left alone: the API server attributes its own creation-time defaults to it (a
/// Namespace's `kubernetes.io/metadata.name` label and `spec.finalizers`), which are
/// not Git's to remove.
pub const LEGACY_MANAGERS: &[&str] = &["kubectl-client-side-apply", "kubectl-edit", "kubectl"];

/// Annotation value that opts an object out of the takeover: `plumb.dev/ssa: Merge`.
pub const SSA_ANNOTATION: &str = "plumb.dev/ssa";

fn is_legacy(entry: &Value, ours: &str) -> bool {
    let manager = entry.get("manager").and_then(Value::as_str).unwrap_or("");
    let op = entry.get("operation").and_then(Value::as_str).unwrap_or("");
    entry.get("subresource").and_then(Value::as_str).is_none_or(str::is_empty)
        && op == "Update"
        && (LEGACY_MANAGERS.contains(&manager) || manager == ours)
}

/// The `managedFields` of `live` after a takeover by manager `ours`: every entry of a
/// [`LEGACY_MANAGERS`] manager (or of `ours` written with Update) without a
/// subresource is merged into `ours`'s Apply entry of the same apiVersion. `None` when
/// there is nothing to take over, or the object opts out with `plumb.dev/ssa: Merge`.
/// Entries of other controllers and any subresource entry are kept as they are.
pub fn takeover(live: &Value, ours: &str) -> Option<Value> {
    if live.pointer("/metadata/annotations").and_then(|a| a.get(SSA_ANNOTATION)).and_then(Value::as_str)
        == Some("Merge")
    {
        return None;
    }
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    if !entries.iter().any(|e| is_legacy(e, ours)) {
        return None;
    }
    let mut out: Vec<Value> = Vec::new();
    let mut moved: Vec<&Value> = Vec::new();
    for e in entries {
        if is_legacy(e, ours) { moved.push(e) } else { out.push(e.clone()) }
    }
    for e in moved {
        let api = e.get("apiVersion").cloned().unwrap_or(Value::Null);
        let fields = e.get("fieldsV1").cloned().unwrap_or_else(|| Value::Object(Map::new()));
        let target = out.iter_mut().find(|o| {
            o.get("manager").and_then(Value::as_str) == Some(ours)
                && o.get("operation").and_then(Value::as_str) == Some("Apply")
                && o.get("apiVersion") == Some(&api)
        });
        match target {
            Some(t) => {
                let mut merged = t.get("fieldsV1").cloned().unwrap_or_else(|| Value::Object(Map::new()));
                merge(&mut merged, &fields);
                t["fieldsV1"] = merged;
            }
            None => out.push(serde_json::json!({
                "manager": ours, "operation": "Apply", "apiVersion": api, "fieldsType": "FieldsV1", "fieldsV1": fields,
                "time": e.get("time").cloned().unwrap_or(Value::Null),
            })),
        }
    }
    Some(Value::Array(out))
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            match a.get_mut(k) {
                Some(existing) => merge(existing, v),
                None => {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// Paths of `live` held by legacy managers (see [`takeover`]), with their owner.
pub fn legacy_paths(live: &Value, ours: &str) -> Vec<(Vec<String>, Owner)> {
    let Some(entries) = live.pointer("/metadata/managedFields").and_then(Value::as_array) else { return vec![] };
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| is_legacy(e, ours)) {
        let owner = Owner {
            manager: e.get("manager").and_then(Value::as_str).unwrap_or("").to_string(),
            operation: "Update".into(),
            subresource: None,
            time: e.get("time").and_then(Value::as_str).map(String::from),
        };
        let mut paths = Vec::new();
        if let Some(set) = e.get("fieldsV1") {
            collect(set, live, &mut Vec::new(), &mut paths);
        }
        out.extend(paths.into_iter().map(|p| (p, owner.clone())));
    }
    out
}

fn element_matches(key: &str, elem: &Value, index: &str) -> bool {
    if let Some(json) = key.strip_prefix("k:") {
        let Ok(Value::Object(want)) = serde_json::from_str::<Value>(json) else { return false };
        let Some(have) = elem.as_object() else { return false };
        return subset(&want, have);
    }
    if let Some(json) = key.strip_prefix("v:") {
        return serde_json::from_str::<Value>(json).is_ok_and(|v| &v == elem);
    }
    key.strip_prefix("i:").is_some_and(|i| i == index)
}

fn subset(want: &Map<String, Value>, have: &Map<String, Value>) -> bool {
    want.iter().all(|(k, v)| {
        have.get(k) == Some(v) || (v.is_number() && have.get(k).is_some_and(|h| h.as_f64() == v.as_f64()))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn live() -> Value {
        json!({
            "metadata": {"managedFields": [
                {"manager": "plumb", "operation": "Apply", "time": "2026-11-29T14:00:00Z",
                 "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}},
                {"manager": "kubectl-scale", "operation": "Update", "subresource": "scale", "time": "2026-11-29T14:02:11Z",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-29T14:03:00Z",
                 "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:env": {}}}}}}}}
            ]},
            "spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]}}}
        })
    }

    /// flux-01: client-side-apply and kubectl-edit entries are merged into plumb's Apply
    /// entry; other controllers and subresource entries are kept; `Merge` opts out.
    #[test]
    fn takeover_of_legacy_managers() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"f:data": {".": {}, "f:legacy-flag": {}, "f:mode": {}}}},
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:hotfix": {}}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"f:metadata": {"f:finalizers": {}}}},
            {"manager": "kubectl", "operation": "Update", "subresource": "scale", "apiVersion": "v1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]}, "metadata_": {}, "data": {"mode": "fast", "legacy-flag": "on"}});
        let fields = takeover(&live, "plumb").expect("something to take over");
        let managers: Vec<(&str, &str)> = fields
            .as_array()
            .expect("array")
            .iter()
            .map(|e| (e["manager"].as_str().unwrap_or(""), e["operation"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(managers, [("kube-controller-manager", "Update"), ("kubectl", "Update"), ("plumb", "Apply")]);
        let ours = &fields[2]["fieldsV1"];
        assert_eq!(
            ours,
            &json!({"f:data": {".": {}, "f:legacy-flag": {}, "f:mode": {}}, "f:metadata": {"f:labels": {".": {}, "f:hotfix": {}}}})
        );
        let paths: Vec<String> =
            legacy_paths(&live, "plumb").into_iter().map(|(p, o)| format!("{}:{}", o.manager, p.join("/"))).collect();
        assert_eq!(paths, ["kubectl-client-side-apply:data/legacy-flag", "kubectl-client-side-apply:data/mode"]);
        let mut opted_out = live.clone();
        opted_out["metadata"]["annotations"] = json!({SSA_ANNOTATION: "Merge"});
        assert_eq!(takeover(&opted_out, "plumb"), None);
    }

    #[test]
    fn finds_the_foreign_manager_of_a_path() {
        let l = live();
        let o = owner_of(&l, "/spec/replicas", "plumb").expect("owned");
        assert_eq!(
            (o.manager.as_str(), o.subresource.as_deref(), o.time.as_deref()),
            ("kubectl-scale", Some("scale"), Some("2026-11-29T14:02:11Z"))
        );
        assert_eq!(
            owner_of(&l, "/spec/template/spec/containers/0/env", "plumb").map(|o| o.manager),
            Some("kubectl-edit".into())
        );
        assert_eq!(
            owner_of(&l, "/spec/template/spec/containers/0/env/0", "plumb").map(|o| o.manager),
            Some("kubectl-edit".into()),
            "below an owned list"
        );
        assert_eq!(owner_of(&l, "/spec/template/spec/containers/0/image", "plumb"), None, "only plumb owns the image");
        assert_eq!(
            owner_of(&l, "/spec/template", "plumb").map(|o| o.manager),
            Some("kubectl-edit".into()),
            "a subtree: the latest writer below it"
        );
        assert_eq!(owner_of(&l, "/spec/paused", "plumb"), None);
        assert_eq!(owner_of(&json!({"spec": {}}), "/spec", "plumb"), None, "no managedFields");
    }
}
