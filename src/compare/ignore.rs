//! `ignoreDifferences`: fields that differ on purpose because another controller owns
//! them (an HPA owns `/spec/replicas`, an injector owns a `caBundle`).
//!
//! A rule selects objects by group (omitted = any group), kind, and optionally name and
//! namespace, and names fields by RFC 6901 JSON pointers (`~1` is `/`, `~0` is `~`).
//! Ignored fields are removed from both sides before diffing (a missing path is not an
//! error), and from the applied configuration of an existing object so that plumb's
//! field manager never claims them (the creation of a new object keeps Git's value).

use serde_json::Value;

use crate::{config::IgnoreDifference, tracking::ObjectKey};

/// Compiled ignore rules of one application.
#[derive(Debug, Clone, Default)]
pub struct IgnoreRules {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    group: Option<String>,
    kind: String,
    name: Option<String>,
    namespace: Option<String>,
    pointers: Vec<Vec<String>>,
}

impl IgnoreRules {
    /// Compiles policy rules.
    pub fn new(rules: &[IgnoreDifference]) -> Self {
        Self {
            rules: rules
                .iter()
                .map(|r| Rule {
                    group: r.group.clone(),
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    namespace: r.namespace.clone(),
                    pointers: r.json_pointers.iter().map(|p| parse_pointer(&p.value)).collect(),
                })
                .collect(),
        }
    }

    /// JSON pointers (as token lists) ignored for object `key`.
    fn pointers_for<'a>(&'a self, key: &'a ObjectKey) -> impl Iterator<Item = &'a Vec<String>> + 'a {
        self.rules
            .iter()
            .filter(move |r| {
                r.group.as_ref().is_none_or(|g| *g == key.group)
                    && (r.kind == key.kind || r.kind == "*")
                    && r.name.as_ref().is_none_or(|n| *n == key.name)
                    && r.namespace.as_ref().is_none_or(|n| *n == key.namespace)
            })
            .flat_map(|r| r.pointers.iter())
    }

    /// Removes the ignored fields of `key` from `obj`, in place.
    pub fn strip(&self, key: &ObjectKey, obj: &mut Value) {
        for p in self.pointers_for(key) {
            remove_path(obj, p);
        }
    }

    /// Whether any rule ignores something of `key`.
    pub fn applies_to(&self, key: &ObjectKey) -> bool {
        self.pointers_for(key).next().is_some()
    }
}

/// Splits an RFC 6901 pointer into unescaped tokens (`""` → root, no tokens).
pub fn parse_pointer(p: &str) -> Vec<String> {
    if p.is_empty() {
        return vec![];
    }
    p.trim_start_matches('/').split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect()
}

fn remove_path(v: &mut Value, tokens: &[String]) {
    let Some((last, parents)) = tokens.split_last() else {
        return;
    };
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
            if let Ok(i) = last.parse::<usize>() {
                if i < a.len() {
                    a.remove(i);
                }
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

    fn rule(group: Option<&str>, kind: &str, name: Option<&str>, ptrs: &[&str]) -> IgnoreDifference {
        IgnoreDifference {
            group: group.map(Into::into),
            kind: kind.into(),
            name: name.map(Into::into),
            namespace: None,
            json_pointers: ptrs
                .iter()
                .map(|p| Spanned::new(p.to_string(), Location::UNKNOWN, Location::UNKNOWN))
                .collect(),
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
            // group mismatch, name mismatch, missing path: nothing removed
            (rule(Some(""), "Deployment", None, &["/spec/replicas"]), key("apps", "Deployment", "web"), obj.clone()),
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
            rules.strip(k, &mut got);
            assert_eq!(&got, want, "case {i}");
        }
    }

    #[test]
    fn array_index_pointer() {
        let rules = IgnoreRules::new(&[rule(None, "Pod", None, &["/spec/containers/1"])]);
        let mut v = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        rules.strip(&key("", "Pod", "p"), &mut v);
        assert_eq!(v, json!({"spec": {"containers": [{"name": "a"}]}}));
    }
}
