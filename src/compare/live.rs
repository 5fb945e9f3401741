//! The live version of a compared object ([`super::Compared::live`]): JSON, or the
//! watch cache's object, turned into JSON only when something reads past its metadata.
//!
//! A policy pass that reuses the comparisons of the pass before (`reconcile/reuse.rs`)
//! gives each one the watch cache's object. Most of what such a pass reads is metadata
//! (the resourceVersion its health memory is keyed by, annotations, the uid owning
//! children), which [`Live`] answers from the cached object's fields; the JSON of the
//! whole object (its spec and status) is parsed once, on first use (`Deref`), e.g. when
//! health must be assessed again.

use std::{
    ops::Deref,
    sync::{Arc, OnceLock},
};

use kube::discovery::ApiResource;
use serde_json::Value;

use super::Cached;

/// A live object. Dereferences to its JSON (with `apiVersion` and `kind`).
#[derive(Debug, Clone)]
pub struct Live {
    json: OnceLock<Value>,
    /// The cached object and its kind's resource (shared: no copy of `apiVersion` and
    /// `kind` per object).
    cached: Option<(Arc<Cached>, Arc<ApiResource>)>,
}

impl Live {
    /// The watch cache's `obj`, of kind `kind` (a cached object may not carry it).
    pub fn cached(obj: Arc<Cached>, kind: &crate::kind::Kind) -> Self {
        Self { json: OnceLock::new(), cached: Some((obj, kind.resource.clone())) }
    }

    /// The cached object while its JSON has not been made.
    fn typed(&self) -> Option<&Cached> {
        self.cached.as_ref().filter(|_| self.json.get().is_none()).map(|(o, _)| o.as_ref())
    }

    /// `metadata.annotations[key]`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        match self.typed() {
            Some(o) => o.annotation(key),
            None => self.pointer("/metadata/annotations")?.get(key)?.as_str(),
        }
    }

    /// `metadata.labels[key]`.
    pub fn label(&self, key: &str) -> Option<&str> {
        match self.typed() {
            Some(o) => o.label(key),
            None => self.pointer("/metadata/labels")?.get(key)?.as_str(),
        }
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        match self.typed() {
            Some(o) => o.uid(),
            None => self.pointer("/metadata/uid")?.as_str(),
        }
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        match self.typed() {
            Some(o) => o.resource_version(),
            None => self.pointer("/metadata/resourceVersion")?.as_str(),
        }
    }

    /// [`crate::tracking::is_owned_by`], from the cached object's metadata when there is
    /// one (its JSON is not made for it: every pass asks this of every object).
    pub fn is_owned_by(&self, app: &str, installation: Option<&str>) -> bool {
        match (self.typed(), &self.cached) {
            (Some(o), Some((_, resource))) => {
                let marks = crate::tracking::Marks {
                    tracking_id: o.annotation(crate::tracking::TRACKING_ANNOTATION),
                    installation: o.annotation(crate::tracking::INSTALLATION_ANNOTATION),
                };
                let namespace = o.namespace().unwrap_or("");
                marks.own(&resource.api_version, &resource.kind, namespace, o.name(), app, installation)
            }
            _ => crate::tracking::is_owned_by(self, app, installation),
        }
    }
}

impl From<Value> for Live {
    fn from(json: Value) -> Self {
        Self { json: OnceLock::from(json), cached: None }
    }
}

impl Deref for Live {
    type Target = Value;

    /// The JSON, made from the cached object on first use.
    fn deref(&self) -> &Value {
        self.json.get_or_init(|| match &self.cached {
            Some((obj, resource)) => obj.json(&resource.api_version, &resource.kind),
            None => Value::Null,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn object() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a", "namespace": "n", "uid": "u-1", "resourceVersion": "7",
                "labels": {"app": "x"}, "annotations": {"note": "y"}
            },
            "data": {"k": "v"}
        })
    }

    fn config_maps() -> crate::kind::Kind {
        let resource = ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
        };
        crate::kind::Kind { resource: Arc::new(resource), namespaced: true }
    }

    #[test]
    fn a_cached_object_answers_metadata_typed_and_its_json_is_the_object() {
        let mut obj: kube::core::DynamicObject = serde_json::from_value(object()).unwrap();
        obj.types = None;
        let live = Live::cached(Arc::new(Cached::from(obj)), &config_maps());
        assert_eq!(
            (live.uid(), live.resource_version(), live.label("app"), live.annotation("note")),
            (Some("u-1"), Some("7"), Some("x"), Some("y"))
        );
        assert!(live.json.get().is_none(), "metadata reads made no JSON");
        assert_eq!(live.annotation("other"), None);
        assert_eq!(*live, object());
        // once made, the JSON answers
        assert_eq!((live.uid(), live.label("app")), (Some("u-1"), Some("x")));
    }

    #[test]
    fn ownership_is_read_from_the_cached_metadata_as_from_the_json() {
        use crate::tracking::{INSTALLATION_ANNOTATION as INSTALLATION, TRACKING_ANNOTATION as TRACKING};
        let cases = [
            (json!({TRACKING: "web:/ConfigMap:n/a"}), "web", None, true),
            (json!({TRACKING: "api:/ConfigMap:n/a"}), "web", None, false),
            (json!({TRACKING: "web:/ConfigMap:n/b"}), "web", None, false),
            (json!({TRACKING: "web:/ConfigMap:other/a"}), "web", None, false),
            (json!({TRACKING: "web:/Secret:n/a"}), "web", None, false),
            (json!({TRACKING: "web:/ConfigMap:n/a", INSTALLATION: "east"}), "web", Some("east"), true),
            (json!({TRACKING: "web:/ConfigMap:n/a", INSTALLATION: "east"}), "web", Some("west"), false),
            (json!({TRACKING: "web:/ConfigMap:n/a", INSTALLATION: "east"}), "web", None, false),
            (json!({}), "web", None, false),
        ];
        for (annotations, app, installation, owned) in cases {
            let mut json = object();
            json["metadata"]["annotations"] = annotations.clone();
            let mut obj: kube::core::DynamicObject = serde_json::from_value(json.clone()).unwrap();
            obj.types = None;
            let cached = Live::cached(Arc::new(Cached::from(obj)), &config_maps());
            assert_eq!(cached.is_owned_by(app, installation), owned, "{annotations} {app} {installation:?}");
            assert!(cached.json.get().is_none(), "no JSON made for it");
            assert_eq!(crate::tracking::is_owned_by(&json, app, installation), owned, "{annotations}");
            assert_eq!(Live::from(json).is_owned_by(app, installation), owned);
        }
    }

    #[test]
    fn json_answers_the_same() {
        let live = Live::from(object());
        assert_eq!(
            (live.uid(), live.resource_version(), live.label("app"), live.annotation("note")),
            (Some("u-1"), Some("7"), Some("x"), Some("y"))
        );
        assert_eq!(*live, object());
    }
}
