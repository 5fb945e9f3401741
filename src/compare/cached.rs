//! [`Cached`]: a watched object as the watch cache ([`crate::watch`]) keeps it.

use std::borrow::Cow;

use kube::{api::DynamicObject, runtime::reflector::Lookup};
use serde_json::Value;

/// A watched object as the watch cache keeps it: the metadata a pass reads of every
/// object (name, namespace, uid, resourceVersion, labels, annotations, the uids of its
/// owners) as fields, and the whole object as compact JSON text, parsed only when
/// something reads past those ([`Cached::json`]).
///
/// Memory: a `DynamicObject` holds every JSON map as a B-tree whose first node takes
/// about 500 bytes however few its entries; a ConfigMap of one key, labelled and
/// annotated by plumb, took about 3.6 KB that way and takes about 1 KB as this (heap
/// profile of `plumb serve` holding 10,000 of them: 36.5 MB before).
#[derive(Debug, Clone)]
pub struct Cached {
    name: Box<str>,
    namespace: Option<Box<str>>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    labels: Box<[(Box<str>, Box<str>)]>,
    annotations: Box<[(Box<str>, Box<str>)]>,
    /// The uid of each owner reference, in order (an owner named twice is twice here).
    owners: Box<[Box<str>]>,
    /// The object as compact JSON (as received, `apiVersion` and `kind` when it had them).
    text: Box<str>,
}

impl Cached {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.namespace`; `None` for a cluster-scoped object.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// `metadata.labels[key]`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
    }

    /// `metadata.annotations[key]`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
    }

    /// The uid of each of `metadata.ownerReferences`, in order.
    pub fn owner_uids(&self) -> impl Iterator<Item = &str> {
        self.owners.iter().map(|u| &**u)
    }

    /// The object as JSON, as it was received (a listed object may lack `apiVersion`
    /// and `kind`; see [`Cached::json`]).
    pub fn value(&self) -> Value {
        // the text was written by serde_json from a JSON model: it parses
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// The object as JSON with its `apiVersion` and `kind` (those of the watch that
    /// delivered it).
    pub fn json(&self, api_version: &str, kind: &str) -> Value {
        let mut v = self.value();
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(api_version.to_string()));
            m.insert("kind".into(), Value::String(kind.to_string()));
        }
        v
    }
}

impl From<DynamicObject> for Cached {
    fn from(obj: DynamicObject) -> Self {
        // a `DynamicObject` (string keys, JSON values) always serializes
        let text = serde_json::to_string(&obj).unwrap_or_default().into_boxed_str();
        let m = obj.metadata;
        let pairs = |map: Option<std::collections::BTreeMap<String, String>>| {
            map.unwrap_or_default().into_iter().map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str())).collect()
        };
        Self {
            name: m.name.unwrap_or_default().into_boxed_str(),
            namespace: m.namespace.map(String::into_boxed_str),
            uid: m.uid.map(String::into_boxed_str),
            resource_version: m.resource_version.map(String::into_boxed_str),
            labels: pairs(m.labels),
            annotations: pairs(m.annotations),
            owners: m.owner_references.unwrap_or_default().into_iter().map(|r| r.uid.into_boxed_str()).collect(),
            text,
        }
    }
}

/// The reflector's key of a cached object: its name and namespace (each store holds
/// one kind, so the key names no kind).
impl Lookup for Cached {
    type DynamicType = ();

    fn kind((): &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn group((): &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn version((): &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn plural((): &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.namespace.as_deref().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.resource_version.as_deref().map(Cow::Borrowed)
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        self.uid.as_deref().map(Cow::Borrowed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// What a pass reads of the metadata answers as the object says; the JSON is the
    /// object, with the kind of the watch when it came without one.
    #[test]
    fn a_cached_object_answers_its_metadata_and_gives_back_the_object() {
        let object = json!({
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "7",
                "labels": {"app": "web"}, "annotations": {"note": "y"},
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1"},
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "cm-1"}
                ]
            },
            "spec": {"containers": [{"name": "a", "image": "x"}]}
        });
        let c = Cached::from(serde_json::from_value::<DynamicObject>(object.clone()).unwrap());
        assert_eq!(
            (c.name(), c.namespace(), c.uid(), c.resource_version()),
            ("web-1", Some("shop"), Some("u-1"), Some("7"))
        );
        assert_eq!((c.label("app"), c.label("other"), c.annotation("note")), (Some("web"), None, Some("y")));
        assert_eq!(c.owner_uids().collect::<Vec<_>>(), ["rs-1", "cm-1"]);
        assert_eq!(c.value(), object);
        let mut typed = object;
        typed["apiVersion"] = "v1".into();
        typed["kind"] = "Pod".into();
        assert_eq!(c.json("v1", "Pod"), typed);

        let cluster_scoped =
            Cached::from(serde_json::from_value::<DynamicObject>(json!({"metadata": {"name": "n"}})).unwrap());
        assert_eq!(
            (cluster_scoped.namespace(), cluster_scoped.uid(), cluster_scoped.owner_uids().count()),
            (None, None, 0)
        );
    }
}
