//! Ownership marks: which application an object belongs to.
//!
//! Every object plumb applies carries the annotation
//! `plumb.dev/tracking-id: <app>:<group>/<kind>:<namespace>/<name>` (core group and
//! cluster-scoped namespace are empty slots) and the label `plumb.dev/app: <app>`,
//! which mirrors the annotation so that the API server can select an application's
//! objects. An object is **owned** only when its tracking-id names the application *and
//! the object itself*: a tracking-id copied onto another object makes nothing ours
//! (Argo CD's annotation tracking follows the same rule).

use std::fmt;

use serde_json::Value;

/// Annotation holding the tracking-id.
pub const TRACKING_ANNOTATION: &str = "plumb.dev/tracking-id";
/// Label mirroring the application name of the tracking-id (for label selectors).
pub const APP_LABEL: &str = "plumb.dev/app";
/// Per-object sync options annotation (comma list, e.g. `Prune=false`).
pub const SYNC_OPTIONS_ANNOTATION: &str = "plumb.dev/sync-options";

/// The identity of a Kubernetes object: group, kind, namespace and name
/// (the version is left out: one object is served under several versions).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ObjectKey {
    /// API group; empty for the core group.
    pub group: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of a manifest or live object (`apiVersion`, `kind`, `metadata`).
    /// Returns `None` when kind or name is missing.
    pub fn of(obj: &Value) -> Option<ObjectKey> {
        let api_version = obj.get("apiVersion")?.as_str()?;
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Some(ObjectKey {
            group: group.to_string(),
            kind: obj.get("kind")?.as_str()?.to_string(),
            namespace: obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string(),
            name: obj.pointer("/metadata/name")?.as_str()?.to_string(),
        })
    }

    /// The tracking-id of this object in application `app`.
    pub fn tracking_id(&self, app: &str) -> String {
        format!("{app}:{}/{}:{}/{}", self.group, self.kind, self.namespace, self.name)
    }
}

impl fmt::Display for ObjectKey {
    /// `kind/namespace/name` (or `kind/name` when cluster-scoped), group-qualified kind
    /// for non-core groups: `Deployment.apps/web/api`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.kind)?;
        } else {
            write!(f, "{}.{}", self.kind, self.group)?;
        }
        if !self.namespace.is_empty() {
            write!(f, "/{}", self.namespace)?;
        }
        write!(f, "/{}", self.name)
    }
}

/// Whether live object `obj` is owned by application `app`: its tracking-id names `app`
/// and the object's own group, kind, namespace and name.
pub fn is_owned_by(obj: &Value, app: &str) -> bool {
    let Some(key) = ObjectKey::of(obj) else {
        return false;
    };
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(TRACKING_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|id| id == key.tracking_id(app))
}

/// The application named by an object's tracking-id, if any (whether or not the id
/// refers to the object itself).
pub fn tracked_app(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/annotations")?.get(TRACKING_ANNOTATION)?.as_str()?.split_once(':').map(|(a, _)| a)
}

/// Sets the tracking annotation and the app label on a desired object.
pub fn stamp(obj: &mut Value, app: &str, key: &ObjectKey) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let ann = meta.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
    if let Some(a) = ann.as_object_mut() {
        a.insert(TRACKING_ANNOTATION.into(), Value::String(key.tracking_id(app)));
    }
    let labels = meta.entry("labels").or_insert_with(|| Value::Object(Default::default()));
    if let Some(l) = labels.as_object_mut() {
        l.insert(APP_LABEL.into(), Value::String(app.into()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cm(ns: &str, name: &str, id: Option<&str>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}});
        if let Some(id) = id {
            v["metadata"]["annotations"] = json!({TRACKING_ANNOTATION: id});
        }
        v
    }

    #[test]
    fn ownership_needs_app_and_self_reference() {
        assert!(is_owned_by(&cm("lab", "cfg", Some("web:/ConfigMap:lab/cfg")), "web"));
        assert!(!is_owned_by(&cm("lab", "cfg", Some("api:/ConfigMap:lab/cfg")), "web"), "other app");
        assert!(!is_owned_by(&cm("lab", "copy", Some("web:/ConfigMap:lab/cfg")), "web"), "copied id");
        assert!(!is_owned_by(&cm("other", "cfg", Some("web:/ConfigMap:lab/cfg")), "web"), "other namespace");
        assert!(!is_owned_by(&cm("lab", "cfg", None), "web"), "untracked");
    }

    #[test]
    fn tracking_id_shapes() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "lab"}});
        assert_eq!(ObjectKey::of(&d).map(|k| k.tracking_id("web")).as_deref(), Some("web:apps/Deployment:lab/web"));
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}});
        assert_eq!(ObjectKey::of(&ns).map(|k| k.tracking_id("web")).as_deref(), Some("web:/Namespace:/lab"));
        assert_eq!(ObjectKey::of(&d).map(|k| k.to_string()).as_deref(), Some("Deployment.apps/lab/web"));
    }

    #[test]
    fn stamp_then_owned() {
        let mut d =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "lab"}});
        let key = ObjectKey::of(&d).expect("key");
        stamp(&mut d, "web", &key);
        assert!(is_owned_by(&d, "web"));
        assert_eq!(d["metadata"]["labels"][APP_LABEL], "web");
        assert_eq!(tracked_app(&d), Some("web"));
    }
}
