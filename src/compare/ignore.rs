//! `ignoreDifferences`: fields that differ on purpose because another controller owns
//! them (an HPA owns `/spec/replicas`, an injector owns a `caBundle`).
//!
//! A rule selects objects by group and kind (globs; an omitted group means any group),
//! and optionally name and namespace, and names fields three ways (Argo CD's format):
//! RFC 6901 `jsonPointers` (`~1` is `/`, `~0` is `~`), `jqPathExpressions` (see
//! [`crate::config::jq`]), and `managedFieldsManagers` (every field the live object's
//! `managedFields` attribute to those managers). Ignored fields are removed from both
//! sides before diffing (a missing path is not an error), and from the applied
//! configuration of an existing object so that plumb's field manager never claims them
//! (the creation of a new object keeps Git's value).

use globset::{Glob, GlobMatcher};
use serde_json::Value;

pub use super::pointer::parse_pointer;
use crate::{
    config::{IgnoreDifference, jq::JqPath},
    tracking::ObjectKey,
};

/// Compiled ignore rules of one application (environment rules, then application rules).
#[derive(Debug, Clone, Default)]
pub struct IgnoreRules {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    group: Option<Pattern>,
    kind: Pattern,
    name: Option<String>,
    namespace: Option<String>,
    pointers: Vec<Vec<String>>,
    jq: Vec<JqPath>,
    managers: Vec<String>,
}

/// A glob, or the literal text when it is not a valid glob (rejected at validation).
#[derive(Debug, Clone)]
enum Pattern {
    Glob(GlobMatcher),
    Exact(String),
}

impl Pattern {
    fn is_match(&self, s: &str) -> bool {
        match self {
            Pattern::Glob(g) => g.is_match(s),
            Pattern::Exact(e) => e == s,
        }
    }
}

fn glob(s: &str) -> Pattern {
    Glob::new(s).map_or_else(|_| Pattern::Exact(s.to_string()), |g| Pattern::Glob(g.compile_matcher()))
}

impl IgnoreRules {
    /// Compiles policy rules. Rules that do not compile were rejected when the policy was
    /// validated; here an invalid jq expression is skipped.
    pub fn new<'a>(rules: impl IntoIterator<Item = &'a IgnoreDifference>) -> Self {
        Self {
            rules: rules
                .into_iter()
                .map(|r| Rule {
                    group: r.group.as_deref().map(glob),
                    kind: glob(&r.kind),
                    name: r.name.clone(),
                    namespace: r.namespace.clone(),
                    pointers: r.json_pointers.iter().map(|p| parse_pointer(&p.value)).collect(),
                    jq: r.jq_path_expressions.iter().filter_map(|q| JqPath::compile(&q.value).ok()).collect(),
                    managers: r.managed_fields_managers.clone(),
                })
                .collect(),
        }
    }

    /// These rules and one per object of `held` (exact group, kind, name; its namespace
    /// when the manifest names one): its fields are ignored as an `ignoreDifferences`
    /// pointer is — compared on neither side, the live value kept in the applied
    /// configuration of an existing object, Git's (the render's) on create.
    #[must_use]
    pub fn with_held(mut self, held: &[crate::render::HeldFields]) -> Self {
        self.rules.extend(held.iter().map(|h| Rule {
            group: Some(Pattern::Exact(h.key.group.clone())),
            kind: Pattern::Exact(h.key.kind.clone()),
            name: Some(h.key.name.clone()),
            namespace: (!h.key.namespace.is_empty()).then(|| h.key.namespace.clone()),
            pointers: h.pointers.iter().map(|p| parse_pointer(p)).collect(),
            jq: vec![],
            managers: vec![],
        }));
        self
    }

    fn matching<'a>(&'a self, key: &'a ObjectKey) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules.iter().filter(move |r| {
            r.group.as_ref().is_none_or(|g| g.is_match(&key.group))
                && r.kind.is_match(&key.kind)
                && r.name.as_ref().is_none_or(|n| *n == key.name)
                && r.namespace.as_ref().is_none_or(|n| *n == key.namespace)
        })
    }

    /// The ignored paths of object `key`: pointers, jq selections on `obj`, and fields of
    /// `live` owned by the listed managers.
    ///
    /// # Errors
    /// A jq expression that fails on this object.
    pub fn paths(&self, key: &ObjectKey, obj: &Value, live: Option<&Value>) -> Result<Vec<Vec<String>>, String> {
        let mut out = Vec::new();
        for r in self.matching(key) {
            out.extend(r.pointers.iter().cloned());
            for q in &r.jq {
                out.extend(q.paths(obj)?);
                if let Some(l) = live {
                    out.extend(q.paths(l)?);
                }
            }
            if let Some(l) = live {
                for m in &r.managers {
                    out.extend(super::managers::owned_paths(l, m));
                }
            }
        }
        Ok(out)
    }

    /// Removes the ignored fields of `key` from `obj`, in place. `live` is the live
    /// object (for `managedFieldsManagers`).
    ///
    /// # Errors
    /// A jq expression that fails on this object.
    pub fn strip(&self, key: &ObjectKey, obj: &mut Value, live: Option<&Value>) -> Result<(), String> {
        let mut paths = self.paths(key, obj, live)?;
        // deepest and highest index first, so removing array elements keeps the others valid
        paths.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| cmp_tokens(b, a)));
        paths.dedup();
        for p in &paths {
            remove_path(obj, p);
        }
        Ok(())
    }
}

impl IgnoreRules {
    /// Prepares the applied configuration of an **existing** object (Flux's
    /// strip-or-adopt rule): an ignored field that another manager also owns in `live` is
    /// left out, so plumb never claims it and SSA keeps the other owner's value; an
    /// ignored field that only plumb owns gets the live value instead (leaving it out
    /// would make SSA delete it, resetting e.g. `replicas` to its default).
    ///
    /// # Errors
    /// A jq expression that fails on this object.
    pub fn prepare_apply(&self, key: &ObjectKey, apply: &mut Value, live: &Value) -> Result<(), String> {
        let mut paths = self.paths(key, apply, Some(live))?;
        paths.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| cmp_tokens(b, a)));
        paths.dedup();
        for p in &paths {
            let pointer: String = p.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect();
            if apply.pointer(&pointer).is_none() {
                continue;
            }
            let foreign = super::managers::owner_of(live, &pointer, crate::FIELD_MANAGER).is_some();
            match (foreign, live.pointer(&pointer)) {
                (false, Some(v)) => {
                    let v = v.clone();
                    if let Some(slot) = apply.pointer_mut(&pointer) {
                        *slot = v;
                    }
                }
                _ => remove_path(apply, p),
            }
        }
        Ok(())
    }
}

impl IgnoreRules {
    /// Prepares the body of a full replace (`Replace=true`) of an **existing** object:
    /// every ignored field gets its live value (absent live: left out), since a replace
    /// removes whatever the body does not carry, whoever owns it.
    ///
    /// # Errors
    /// A jq expression that fails on this object.
    pub fn keep_live(&self, key: &ObjectKey, body: &mut Value, live: &Value) -> Result<(), String> {
        let mut paths = self.paths(key, body, Some(live))?;
        paths.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| cmp_tokens(b, a)));
        paths.dedup();
        for p in &paths {
            let pointer: String = p.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect();
            match live.pointer(&pointer) {
                Some(v) => set_path(body, p, v.clone()),
                None => remove_path(body, p),
            }
        }
        Ok(())
    }
}

/// Sets `value` at `path` in `obj`, creating missing objects on the way; an array
/// index out of range (or a non-container on the way) leaves `obj` as it is.
fn set_path(obj: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = obj;
    for t in parents {
        let next = match cur {
            Value::Object(m) => Some(m.entry(t.clone()).or_insert_with(|| Value::Object(serde_json::Map::new()))),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        let Some(n) = next else { return };
        cur = n;
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                *slot = value;
            }
        }
        _ => {}
    }
}

fn cmp_tokens(a: &[String], b: &[String]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x.parse::<usize>(), y.parse::<usize>()) {
            (Ok(i), Ok(j)) => i.cmp(&j),
            _ => x.cmp(y),
        };
        if o.is_ne() {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn remove_path(v: &mut Value, tokens: &[String]) {
    let Some((last, parents)) = tokens.split_last() else { return };
    let mut cur = v;
    for t in parents {
        cur = match cur {
            Value::Object(m) => match m.get_mut(t) {
                Some(x) => x,
                None => return,
            },
            Value::Array(a) => match t.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(x) => x,
                None => return,
            },
            _ => return,
        };
    }
    match cur {
        Value::Object(m) => {
            m.remove(last);
        }
        Value::Array(a) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serde_saphyr::{Location, Spanned};

    use super::*;

    fn sp(s: &str) -> Spanned<String> {
        Spanned::new(s.to_string(), Location::UNKNOWN, Location::UNKNOWN)
    }

    fn rule(group: Option<&str>, kind: &str, name: Option<&str>, ptrs: &[&str]) -> IgnoreDifference {
        IgnoreDifference {
            group: group.map(Into::into),
            kind: kind.into(),
            name: name.map(Into::into),
            namespace: None,
            json_pointers: ptrs.iter().map(|p| sp(p)).collect(),
            jq_path_expressions: vec![],
            managed_fields_managers: vec![],
        }
    }

    fn key(group: &str, kind: &str, name: &str) -> ObjectKey {
        ObjectKey { group: group.into(), kind: kind.into(), namespace: "lab".into(), name: name.into() }
    }

    #[test]
    fn table() {
        let obj = json!({"spec": {"replicas": 5, "template": {"metadata": {"annotations": {"a/b": "x"}}}}});
        let cases: &[(IgnoreDifference, ObjectKey, Value)] = &[
            (
                rule(Some("apps"), "Deployment", None, &["/spec/replicas"]),
                key("apps", "Deployment", "web"),
                json!({"spec": {"template": {"metadata": {"annotations": {"a/b": "x"}}}}}),
            ),
            (
                rule(None, "Deployment", None, &["/spec/template/metadata/annotations/a~1b"]),
                key("apps", "Deployment", "web"),
                json!({"spec": {"replicas": 5, "template": {"metadata": {"annotations": {}}}}}),
            ),
            (
                rule(Some("*"), "Deploy*", None, &["/spec/replicas"]),
                key("apps", "Deployment", "web"),
                json!({"spec": {"template": {"metadata": {"annotations": {"a/b": "x"}}}}}),
            ),
            // group mismatch, name mismatch, missing path: nothing removed
            (rule(Some(""), "Deployment", None, &["/spec/replicas"]), key("apps", "Deployment", "web"), obj.clone()),
            (
                rule(Some("*.k8s.io"), "Deployment", None, &["/spec/replicas"]),
                key("apps", "Deployment", "web"),
                obj.clone(),
            ),
            (
                rule(Some("apps"), "Deployment", Some("api"), &["/spec/replicas"]),
                key("apps", "Deployment", "web"),
                obj.clone(),
            ),
            (
                rule(Some("apps"), "Deployment", None, &["/spec/nope/deeper", "/spec/template/9"]),
                key("apps", "Deployment", "web"),
                obj.clone(),
            ),
        ];
        for (i, (r, k, want)) in cases.iter().enumerate() {
            let rules = IgnoreRules::new(std::slice::from_ref(r));
            let mut got = obj.clone();
            rules.strip(k, &mut got, None).expect("strip");
            assert_eq!(&got, want, "case {i}");
        }
    }

    #[test]
    fn a_replace_carries_live_values_of_ignored_fields() {
        let rules = IgnoreRules::new(&[rule(Some("apps"), "Deployment", None, &["/spec/replicas", "/spec/paused"])]);
        let mut body = json!({"spec": {"template": {}}});
        let live = json!({"spec": {"replicas": 8, "template": {}}});
        rules.keep_live(&key("apps", "Deployment", "web"), &mut body, &live).expect("no jq");
        assert_eq!(body, json!({"spec": {"replicas": 8, "template": {}}}), "live value kept, absent stays absent");
        let mut body = json!({"spec": {"paused": true}});
        rules.keep_live(&key("apps", "Deployment", "web"), &mut body, &live).expect("no jq");
        assert_eq!(body, json!({"spec": {"replicas": 8}}), "Git's value of an ignored field is not written");
    }

    #[test]
    fn array_index_pointer() {
        let rules = IgnoreRules::new(&[rule(None, "Pod", None, &["/spec/containers/1"])]);
        let mut v = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        rules.strip(&key("", "Pod", "p"), &mut v, None).expect("strip");
        assert_eq!(v, json!({"spec": {"containers": [{"name": "a"}]}}));
    }

    #[test]
    fn apply_strips_what_others_own_and_adopts_what_only_plumb_owns() {
        let rules = IgnoreRules::new(&[rule(Some("apps"), "Deployment", None, &["/spec/replicas"])]);
        let k = key("apps", "Deployment", "web");
        let shared = json!({"metadata": {"managedFields": [
            {"manager": "plumb", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]}, "spec": {"replicas": 6}});
        let mut apply = json!({"spec": {"replicas": 2, "paused": false}});
        rules.prepare_apply(&k, &mut apply, &shared).expect("prepare");
        assert_eq!(apply, json!({"spec": {"paused": false}}), "HPA co-owns: leave it out");
        let alone = json!({"metadata": {"managedFields": [
            {"manager": "plumb", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]}, "spec": {"replicas": 6}});
        let mut apply = json!({"spec": {"replicas": 2}});
        rules.prepare_apply(&k, &mut apply, &alone).expect("prepare");
        assert_eq!(apply, json!({"spec": {"replicas": 6}}), "only plumb owns it: keep the live value");
    }

    #[test]
    fn jq_and_managers() {
        let mut r = rule(Some("admissionregistration.k8s.io"), "MutatingWebhookConfiguration", None, &[]);
        r.jq_path_expressions = vec![sp(".webhooks[]?.clientConfig.caBundle")];
        let mut m = rule(Some("apps"), "Deployment", None, &[]);
        m.managed_fields_managers = vec!["kube-controller-manager".into()];
        let rules = IgnoreRules::new([&r, &m]);
        let mut hook = json!({"webhooks": [{"clientConfig": {"caBundle": "Zm9v", "url": "u"}}, {"clientConfig": {"caBundle": "YmFy"}}]});
        rules
            .strip(&key("admissionregistration.k8s.io", "MutatingWebhookConfiguration", "h"), &mut hook, None)
            .expect("strip");
        assert_eq!(hook, json!({"webhooks": [{"clientConfig": {"url": "u"}}, {"clientConfig": {}}]}));

        let live = json!({"metadata": {"managedFields": [
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "plumb", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}}
        ]}, "spec": {"replicas": 8, "paused": false}});
        let mut desired = json!({"spec": {"replicas": 3, "paused": false}});
        rules.strip(&key("apps", "Deployment", "web"), &mut desired, Some(&live)).expect("strip");
        assert_eq!(desired, json!({"spec": {"paused": false}}));
    }

    /// Held fields of a render are ignored for their object only: the live value is
    /// kept in the applied configuration of an existing object.
    #[test]
    fn held_fields_keep_the_live_value_of_their_object_only() {
        let held = crate::render::HeldFields {
            key: ObjectKey { group: "".into(), kind: "Secret".into(), namespace: String::new(), name: "token".into() },
            pointers: vec!["/data/password".into()],
            why: crate::render::HeldWhy::Unstable,
        };
        let rules = IgnoreRules::default().with_held(&[held]);
        let live = json!({"metadata": {"managedFields": [
            {"manager": "plumb", "operation": "Apply", "fieldsV1": {"f:data": {"f:password": {}}}}
        ]}, "data": {"password": "b2xk", "user": "dQ=="}});
        let mut apply = json!({"data": {"password": "bmV3", "user": "dQ=="}});
        rules.prepare_apply(&key("", "Secret", "token"), &mut apply, &live).expect("prepare");
        assert_eq!(apply, json!({"data": {"password": "b2xk", "user": "dQ=="}}));
        let mut other = json!({"data": {"password": "bmV3"}});
        rules.strip(&key("", "Secret", "other"), &mut other, None).expect("strip");
        assert_eq!(other, json!({"data": {"password": "bmV3"}}), "another Secret keeps its field");
    }
}
