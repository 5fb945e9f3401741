//! Who set a field: the field manager that owns a path in the live object's
//! `metadata.managedFields` (server-side apply's ownership records; format `FieldsV1`,
//! Kubernetes API reference "ManagedFieldsEntry": keys `f:<field>`, `k:<json key of an
//! associative-list element>`, `v:<json value of a set element>`, `i:<index>`).
//!
//! Used to say *why* something drifted: `spec.replicas 5→3 (set by kubectl-scale at
//! 14:02:11)`.

use serde::Serialize;
use serde_json::{Map, Value};

/// The annotation `kubectl apply` (client-side) keeps the applied configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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

/// Field managers of the tools people change objects with by hand; plumb takes their
/// fields over before it applies, whatever the operation (`Update`, or `Apply` for
/// `kubectl apply --server-side`): server-side apply removes a field only when no
/// manager owns it any more, so without the takeover a field Git removed would stay
/// forever and a field only a person added would never show as drift (Flux does the
/// same, fluxcd/kustomize-controller PR 527). The names are kubectl's own
/// (`kubectl apply --server-side` uses `kubectl`; client-side apply, edit, patch,
/// label, annotate, set, replace and create use `kubectl-<command>`); an environment
/// adds others with `syncPolicy.takeOverManagers`. Controllers' managers
/// (`kube-controller-manager`, an HPA through the `scale` subresource, operators) are
/// never taken over, nor is any entry of a subresource. Unlike Flux,
/// `before-first-apply` is left alone: the API server attributes its own creation-time
/// defaults to it (a Namespace's `kubernetes.io/metadata.name` label and
/// `spec.finalizers`), which are not Git's to remove. `kubectl rollout restart`
/// (`kubectl-rollout`) is left alone too: removing its annotation would restart the
/// pods once more.
pub const HAND_MANAGERS: &[&str] = &[
    "kubectl",
    "kubectl-client-side-apply",
    "kubectl-edit",
    "kubectl-patch",
    "kubectl-label",
    "kubectl-annotate",
    "kubectl-set",
    "kubectl-replace",
    "kubectl-create",
];

/// Annotation value that opts an object out of the takeover: `plumb.dev/ssa: Merge`.
pub const SSA_ANNOTATION: &str = "plumb.dev/ssa";

/// Whose fields plumb takes over: its own field manager (its `Update` entries, e.g.
/// from `Replace=true`, join its `Apply` entry) and the managers of hand tools
/// ([`HAND_MANAGERS`] plus an environment's `takeOverManagers`).
#[derive(Debug, Clone, Copy)]
pub struct Takeover<'a> {
    /// plumb's field manager.
    pub ours: &'a str,
    /// Managers an environment adds to [`HAND_MANAGERS`].
    pub extra: &'a [String],
}

impl Takeover<'_> {
    fn takes(&self, entry: &Value) -> bool {
        let manager = entry.get("manager").and_then(Value::as_str).unwrap_or("");
        let op = entry.get("operation").and_then(Value::as_str).unwrap_or("");
        let hand = HAND_MANAGERS.contains(&manager) || self.extra.iter().any(|m| m == manager);
        entry.get("subresource").and_then(Value::as_str).is_none_or(str::is_empty)
            && (hand || (manager == self.ours && op == "Update"))
    }
}

/// The `managedFields` of `live` after a takeover by manager `t.ours`: every entry
/// [`Takeover`] takes is merged into `ours`'s Apply entry of the same apiVersion. `None` when
/// there is nothing to take over, or the object opts out with `plumb.dev/ssa: Merge`.
/// Entries of other controllers and any subresource entry are kept as they are.
pub fn takeover(live: &Value, t: Takeover<'_>) -> Option<Value> {
    let ours = t.ours;
    if live.pointer("/metadata/annotations").and_then(|a| a.get(SSA_ANNOTATION)).and_then(Value::as_str)
        == Some("Merge")
    {
        return None;
    }
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    if !entries.iter().any(|e| t.takes(e)) {
        return None;
    }
    let mut out: Vec<Value> = Vec::new();
    let mut moved: Vec<&Value> = Vec::new();
    for e in entries {
        if t.takes(e) { moved.push(e) } else { out.push(e.clone()) }
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

/// Paths of `live` held by the managers [`takeover`] takes, with their owner.
pub fn legacy_paths(live: &Value, t: Takeover<'_>) -> Vec<(Vec<String>, Owner)> {
    let Some(entries) = live.pointer("/metadata/managedFields").and_then(Value::as_array) else { return vec![] };
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| t.takes(e)) {
        let owner = Owner {
            manager: e.get("manager").and_then(Value::as_str).unwrap_or("").to_string(),
            operation: e.get("operation").and_then(Value::as_str).unwrap_or("Update").to_string(),
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

/// The fields plumb's apply of `apply` would remove from the object once plumb took the
/// hand tools' fields over ([`takeover`]): read from `answer`, the API server's dry-run
/// answer for that apply *without* the takeover (its `managedFields` still list the hand
/// tools' entries, and its list indexes are the ones the apply produces). A field is
/// released when a taken-over manager holds it, Git (`apply`) does not declare it, and
/// no manager that stays (a controller, a subresource entry, `before-first-apply`)
/// holds it or anything at or below it. Each is given as the highest RFC 6901 pointer
/// Git does not declare (a whole list element a person added is one pointer); the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation is never listed (it
/// goes with the takeover of a write made anyway, and is nobody's drift). Sorted, each
/// once.
///
/// Removing these from `answer` and asking the server again ([`without`]) gives what it
/// would hold after plumb's apply: the fields it defaults come back with their values
/// (an object made with `kubectl create` is not drift for them), the others stay gone.
pub fn released(answer: &Value, apply: &Value, t: Takeover<'_>) -> Vec<String> {
    let Some(entries) = answer.pointer("/metadata/managedFields").and_then(Value::as_array) else { return vec![] };
    let stays: Vec<&Value> = entries
        .iter()
        .filter(|e| !t.takes(e) && e.get("manager").and_then(Value::as_str) != Some(t.ours))
        .filter_map(|e| e.get("fieldsV1"))
        .collect();
    let mut undeclared = Vec::new();
    for set in entries.iter().filter(|e| t.takes(e)).filter_map(|e| e.get("fieldsV1")) {
        walk_undeclared(set, answer, Some(apply), &mut Vec::new(), &mut undeclared);
    }
    let last_applied = ["metadata".to_string(), "annotations".to_string(), LAST_APPLIED.to_string()];
    let mut out: Vec<String> = undeclared
        .into_iter()
        .filter(|(tokens, leaves)| !tokens.is_empty() && leaves.iter().any(|l| l[..] != last_applied[..]))
        .filter(|(tokens, _)| !stays.iter().any(|set| owns(set, answer, tokens)))
        .map(|(tokens, _)| tokens.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The highest fields of `obj` that field set `set` holds and `apply` does not declare
/// (matched by the set's own keys: a list element by its `k:`/`v:` key, so the order of
/// `apply`'s lists does not matter), as paths of `obj` (list indexes its own), each with
/// the leaves of the set below it (full paths).
fn walk_undeclared(
    set: &Value,
    obj: &Value,
    apply: Option<&Value>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Vec<Vec<String>>)>,
) {
    let Some(apply) = apply else {
        let mut leaves = Vec::new();
        collect(set, obj, path, &mut leaves);
        out.push((path.clone(), leaves));
        return;
    };
    let Some(map) = set.as_object() else { return };
    for (k, child) in map {
        if k == "." {
            continue;
        }
        if let Some(field) = k.strip_prefix("f:") {
            if let Some(v) = obj.get(field) {
                path.push(field.to_string());
                walk_undeclared(child, v, apply.get(field), path, out);
                path.pop();
            }
        } else if let Some(a) = obj.as_array() {
            // the key is read once: a list of n elements costs n·n comparisons, no parse each
            let parsed = ElementKey::parse(k);
            for (i, elem) in a.iter().enumerate() {
                if parsed.matches(elem, i, false) {
                    let declared = apply.as_array().and_then(|items| {
                        items.iter().enumerate().find(|(j, x)| parsed.matches(x, *j, true)).map(|(_, x)| x)
                    });
                    path.push(i.to_string());
                    walk_undeclared(child, elem, declared, path, out);
                    path.pop();
                }
            }
        }
    }
}

/// `obj` without the fields at `pointers` (RFC 6901, as [`released`] gives them) and
/// without its `managedFields`: the body of the dry-run that asks the server what it
/// would hold once they are released. Elements of one list are removed from the last
/// one first, so every index keeps meaning what it meant in `obj`.
pub fn without(obj: &Value, pointers: &[String]) -> Value {
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    let mut paths: Vec<Vec<String>> = pointers.iter().map(|p| parse_pointer(p)).collect();
    let index = |t: &String| t.parse::<usize>().ok();
    paths.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| match (index(x), index(y)) {
                (Some(i), Some(j)) => i.cmp(&j),
                _ => x.cmp(y),
            })
            .find(|o| o.is_ne())
            .unwrap_or_else(|| a.len().cmp(&b.len()))
    });
    for tokens in paths.iter().rev() {
        let Some((last, parents)) = tokens.split_last() else { continue };
        let parent: String = parents.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect();
        match out.pointer_mut(&parent) {
            Some(Value::Object(m)) => {
                m.remove(last);
            }
            Some(Value::Array(a)) => {
                if let Some(i) = index(last).filter(|&i| i < a.len()) {
                    a.remove(i);
                }
            }
            _ => {}
        }
    }
    out
}

/// The key of a list element in a field set (`k:{json}`, `v:{json}`, `i:<index>`), read.
enum ElementKey {
    /// `k:`: the element's key fields.
    Keyed(Map<String, Value>),
    /// `v:`: the element itself (a set).
    Value(Value),
    /// `i:`: its position.
    Index(usize),
    /// Anything else: matches nothing.
    Unknown,
}

impl ElementKey {
    fn parse(key: &str) -> Self {
        if let Some(json) = key.strip_prefix("k:") {
            return match serde_json::from_str::<Value>(json) {
                Ok(Value::Object(m)) => Self::Keyed(m),
                _ => Self::Unknown,
            };
        }
        if let Some(json) = key.strip_prefix("v:") {
            return serde_json::from_str::<Value>(json).map_or(Self::Unknown, Self::Value);
        }
        key.strip_prefix("i:").and_then(|i| i.parse().ok()).map_or(Self::Unknown, Self::Index)
    }

    /// Whether `elem` (at `index`) is this element. `as_git_writes`: `elem` is Git's, which
    /// may leave a key field to the server's default (a port's `protocol`): only the key
    /// fields it has must match, and at least one must be there.
    fn matches(&self, elem: &Value, index: usize, as_git_writes: bool) -> bool {
        match self {
            Self::Keyed(want) => {
                let Some(have) = elem.as_object() else { return false };
                if !as_git_writes {
                    return subset(want, have);
                }
                let present: Map<String, Value> = want
                    .iter()
                    .filter(|(k, _)| have.get(*k).is_some_and(|v| !v.is_null()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                !present.is_empty() && subset(&present, have)
            }
            Self::Value(v) => v == elem,
            Self::Index(i) => *i == index,
            Self::Unknown => false,
        }
    }
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

    const PLUMB: Takeover<'static> = Takeover { ours: "plumb", extra: &[] };

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
        let fields = takeover(&live, PLUMB).expect("something to take over");
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
            legacy_paths(&live, PLUMB).into_iter().map(|(p, o)| format!("{}:{}", o.manager, p.join("/"))).collect();
        assert_eq!(paths, ["kubectl-client-side-apply:data/legacy-flag", "kubectl-client-side-apply:data/mode"]);
        let mut opted_out = live.clone();
        opted_out["metadata"]["annotations"] = json!({SSA_ANNOTATION: "Merge"});
        assert_eq!(takeover(&opted_out, PLUMB), None);
    }

    /// flux-14 and the rule: hand tools' managers are taken over in any operation
    /// (`kubectl apply --server-side` writes `kubectl`/`Apply`), an environment adds
    /// names, controllers and subresource entries are left alone.
    #[test]
    fn which_managers_are_taken_over() {
        let extra = ["k9s".to_string()];
        let env = Takeover { ours: "plumb", extra: &extra };
        // (manager, operation, subresource) → taken over
        let table: &[(&str, &str, Option<&str>, bool)] = &[
            ("kubectl", "Apply", None, true),
            ("kubectl", "Update", None, true),
            ("kubectl-client-side-apply", "Update", None, true),
            ("kubectl-edit", "Update", None, true),
            ("kubectl-patch", "Update", None, true),
            ("kubectl-label", "Update", None, true),
            ("kubectl-annotate", "Update", None, true),
            ("k9s", "Update", None, true),
            ("plumb", "Update", None, true),
            ("plumb", "Apply", None, false),
            ("kubectl", "Update", Some("scale"), false),
            ("kubectl-rollout", "Update", None, false),
            ("kube-controller-manager", "Update", None, false),
            ("before-first-apply", "Update", None, false),
            ("cert-manager-operator", "Apply", None, false),
        ];
        for (manager, operation, subresource, want) in table {
            let mut e = json!({"manager": manager, "operation": operation});
            if let Some(sub) = subresource {
                e["subresource"] = json!(sub);
            }
            assert_eq!(env.takes(&e), *want, "{manager} {operation} {subresource:?}");
        }
        assert!(!PLUMB.takes(&json!({"manager": "k9s", "operation": "Update"})), "only where listed");
        // flux-14 part A: DEBUG_SQL only kubectl (Apply) owns is a legacy path, named as such
        let live = json!({"metadata": {"managedFields": [
            {"manager": "plumb", "operation": "Apply", "apiVersion": "apps/v1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:env": {"k:{\"name\":\"LOG_LEVEL\"}": {}}}}}}}}},
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:env": {"k:{\"name\":\"LOG_LEVEL\"}": {}, "k:{\"name\":\"DEBUG_SQL\"}": {".": {}, "f:name": {}, "f:value": {}}}}}}}}}}
        ]}, "spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "DEBUG_SQL", "value": "true"}]}]}}}});
        let paths: Vec<String> = legacy_paths(&live, PLUMB)
            .into_iter()
            .map(|(p, o)| format!("{} {}:{}", o.manager, o.operation, p.join("/")))
            .collect();
        assert!(paths.contains(&"kubectl Apply:spec/template/spec/containers/0/env/1/value".to_string()), "{paths:?}");
        let fields = takeover(&live, PLUMB).expect("taken over");
        assert_eq!(fields.as_array().map(Vec::len), Some(1), "kubectl's Apply entry joins plumb's: {fields}");
    }

    /// What the takeover releases of an object made with `kubectl create`: the fields
    /// the server defaulted (Git does not declare them) and a label added by hand, at
    /// the indexes the answer has; not what Git declares, not what a controller also
    /// holds, not the last-applied annotation; a list element Git declares without its
    /// defaulted key field (a port's `protocol`) is still Git's. Without them the body
    /// asks the server again (defaults come back there).
    #[test]
    fn the_takeover_releases_what_git_does_not_declare_and_nobody_else_holds() {
        let answer = json!({"metadata": {"name": "web", "resourceVersion": "7",
            "labels": {"app": "web", "hotfix": "1"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "managedFields": [
            {"manager": "plumb", "operation": "Apply", "apiVersion": "apps/v1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}},
            {"manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:progressDeadlineSeconds": {}, "f:revisionHistoryLimit": {}, "f:template": {"f:spec": {
                    "f:dnsPolicy": {},
                    "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}}}}}}}}},
            {"manager": "kubectl-label", "operation": "Update", "apiVersion": "apps/v1", "fieldsV1": {"f:metadata": {"f:labels": {"f:hotfix": {}}}}},
            {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "fieldsV1": {"f:spec": {"f:revisionHistoryLimit": {}}}}
        ]}, "spec": {"progressDeadlineSeconds": 600, "revisionHistoryLimit": 10, "template": {"spec": {"dnsPolicy": "ClusterFirst",
            "containers": [{"name": "side", "image": "s:1"}, {"name": "web", "image": "web:1", "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}}}});
        let apply = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:1", "ports": [{"containerPort": 8080}]}]}}}});
        let released = released(&answer, &apply, PLUMB);
        assert_eq!(
            released,
            [
                "/metadata/labels/hotfix",
                "/spec/progressDeadlineSeconds",
                "/spec/template/spec/containers/1/imagePullPolicy",
                "/spec/template/spec/containers/1/ports/0/protocol",
                "/spec/template/spec/dnsPolicy",
            ]
        );
        let body = without(&answer, &released);
        assert_eq!(body["metadata"]["labels"], json!({"app": "web"}));
        assert!(body["metadata"].get("managedFields").is_none(), "the server keeps its own record");
        assert_eq!(body["metadata"]["resourceVersion"], "7", "the precondition stays");
        assert_eq!(
            body["spec"],
            json!({"revisionHistoryLimit": 10, "template": {"spec": {"containers": [{"name": "side", "image": "s:1"}, {"name": "web", "image": "web:1", "ports": [{"containerPort": 8080}]}]}}})
        );
        // two elements of one list: the later goes first, so both indexes hold
        let list = json!({"l": [{"a": 1}, {"b": 2}, {"c": 3}]});
        assert_eq!(without(&list, &["/l/0".into(), "/l/2".into()]), json!({"l": [{"b": 2}]}));
        assert_eq!(without(&list, &["/l/9".into(), "/m/x".into()]), list, "absent: nothing removed");
        assert!(super::released(&json!({"spec": {}}), &apply, PLUMB).is_empty(), "no managedFields");
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
