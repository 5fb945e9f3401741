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
/// Marks an object plumb took over instead of creating (`Adopt=true`): its prune needs
/// an approval, as with `Prune=confirm`.
pub const ADOPTED_ANNOTATION: &str = "plumb.dev/adopted";
/// Names the application a Namespace was created for by `CreateNamespace=true`: plumb
/// created it, so that application may declare it in Git without adopting it.
pub const CREATED_FOR_ANNOTATION: &str = "plumb.dev/created-for";
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
        let group = group_of(api_version);
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

/// Annotation naming the plumb installation that applied an object (set only when
/// `settings.installationId` is configured).
pub const INSTALLATION_ANNOTATION: &str = "plumb.dev/installation-id";

/// Whether live object `obj` is owned by application `app` of installation
/// `installation`: its tracking-id names `app` and the object's own group, kind,
/// namespace and name, and its installation id (if any) is ours. A cluster-scoped
/// object whose id carries a namespace is still recognised (ids written by tools that
/// put the application's namespace there).
pub fn is_owned_by(obj: &Value, app: &str, installation: Option<&str>) -> bool {
    // read in place: called for every object of every pass
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str)
    }
    let meta = obj.get("metadata");
    let (Some(api_version), Some(kind), Some(name)) =
        (text(obj.get("apiVersion")), text(obj.get("kind")), text(meta.and_then(|m| m.get("name"))))
    else {
        return false;
    };
    let ann = meta.and_then(|m| m.get("annotations"));
    let marks = Marks {
        tracking_id: text(ann.and_then(|a| a.get(TRACKING_ANNOTATION))),
        installation: text(ann.and_then(|a| a.get(INSTALLATION_ANNOTATION))),
    };
    let namespace = text(meta.and_then(|m| m.get("namespace"))).unwrap_or("");
    marks.own(api_version, kind, namespace, name, app, installation)
}

/// What of a live object's annotations tells whose it is: its tracking-id
/// ([`TRACKING_ANNOTATION`]) and installation id ([`INSTALLATION_ANNOTATION`]).
#[derive(Debug, Clone, Copy)]
pub struct Marks<'a> {
    /// The tracking-id, `{app}:{group}/{kind}:{namespace}/{name}`.
    pub tracking_id: Option<&'a str>,
    /// The installation id.
    pub installation: Option<&'a str>,
}

impl Marks<'_> {
    /// [`is_owned_by`] for the object of `api_version`, `kind`, `namespace` (empty when
    /// cluster-scoped) and `name` that carries these marks.
    pub fn own(
        self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        app: &str,
        ours: Option<&str>,
    ) -> bool {
        if self.installation.is_some() && self.installation != ours {
            return false;
        }
        let Some(id) = self.tracking_id else { return false };
        let group = group_of(api_version);
        // `{app}:{group}/{kind}:{namespace}/{name}` (see ObjectKey::tracking_id), the
        // namespace left out of the comparison for a cluster-scoped object
        let Some(rest) = id.strip_prefix(app).and_then(|r| r.strip_prefix(':')) else { return false };
        let Some(rest) = rest.strip_prefix(group).and_then(|r| r.strip_prefix('/')) else { return false };
        let Some(rest) = rest.strip_prefix(kind).and_then(|r| r.strip_prefix(':')) else { return false };
        if rest.strip_prefix(namespace).and_then(|r| r.strip_prefix('/')) == Some(name) {
            return true;
        }
        namespace.is_empty() && rest.rsplit_once('/').is_some_and(|(_, n)| n == name)
    }
}

/// The application named by an object's tracking-id, if any (whether or not the id
/// refers to the object itself).
pub fn tracked_app(obj: &Value) -> Option<&str> {
    tracked_app_by(obj.pointer("/metadata/annotations")?.get(TRACKING_ANNOTATION)?.as_str()?)
}

/// [`tracked_app`] from the value of the [`TRACKING_ANNOTATION`]
/// (`{app}:{group}/{kind}:{namespace}/{name}`).
pub fn tracked_app_by(tracking_id: &str) -> Option<&str> {
    tracking_id.split_once(':').map(|(a, _)| a)
}

/// Sets the tracking annotation, the app label and (when configured) the installation
/// id on a desired object.
pub fn stamp(obj: &mut Value, app: &str, key: &ObjectKey, installation: Option<&str>) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    // `annotations:` / `labels:` written empty are YAML null, which the API server
    // reads as an absent map (werf/werf#4933): a null map becomes a new one.
    for field in ["annotations", "labels"] {
        if meta.get(field).is_none_or(Value::is_null) {
            meta.insert(field.into(), Value::Object(Default::default()));
        }
    }
    let ann = meta.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
    if let Some(a) = ann.as_object_mut() {
        a.insert(TRACKING_ANNOTATION.into(), Value::String(key.tracking_id(app)));
        if let Some(i) = installation {
            a.insert(INSTALLATION_ANNOTATION.into(), Value::String(i.into()));
        }
    }
    let labels = meta.entry("labels").or_insert_with(|| Value::Object(Default::default()));
    if let Some(l) = labels.as_object_mut() {
        l.insert(APP_LABEL.into(), Value::String(app.into()));
    }
}

/// Marks `obj` [`ADOPTED_ANNOTATION`]`: "true"` (plumb took it over rather than
/// created it); kept on every later apply of the object.
pub fn mark_adopted(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let ann = meta.entry("annotations").or_insert(Value::Null);
    if !ann.is_object() {
        *ann = Value::Object(Default::default());
    }
    if let Some(a) = ann.as_object_mut() {
        a.insert(ADOPTED_ANNOTATION.into(), Value::String("true".into()));
    }
}

/// Whether `obj` carries [`ADOPTED_ANNOTATION`].
pub fn is_adopted(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations").and_then(|a| a.get(ADOPTED_ANNOTATION)).is_some()
}

/// The API group of an `apiVersion`: `apps/v1` → `apps`, the core group's `v1` → `""`
/// (Kubernetes API concepts: "API groups and versioning").
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
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
        assert!(is_owned_by(&cm("lab", "cfg", Some("web:/ConfigMap:lab/cfg")), "web", None));
        assert!(!is_owned_by(&cm("lab", "cfg", Some("api:/ConfigMap:lab/cfg")), "web", None), "other app");
        assert!(!is_owned_by(&cm("lab", "copy", Some("web:/ConfigMap:lab/cfg")), "web", None), "copied id");
        assert!(!is_owned_by(&cm("other", "cfg", Some("web:/ConfigMap:lab/cfg")), "web", None), "other namespace");
        assert!(!is_owned_by(&cm("lab", "cfg", None), "web", None), "untracked");
        let mut other = cm("lab", "cfg", Some("web:/ConfigMap:lab/cfg"));
        other["metadata"]["annotations"][INSTALLATION_ANNOTATION] = "east".into();
        assert!(!is_owned_by(&other, "web", None), "another installation");
        assert!(!is_owned_by(&other, "web", Some("west")), "another installation");
        assert!(is_owned_by(&other, "web", Some("east")));
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader", "annotations": {TRACKING_ANNOTATION: "web:rbac.authorization.k8s.io/ClusterRole:shop/reader"}}});
        assert!(is_owned_by(&role, "web", None), "cluster-scoped with a namespace in the id");
    }

    #[test]
    fn tracking_id_shapes() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "lab"}});
        assert_eq!(ObjectKey::of(&d).map(|k| k.tracking_id("web")).as_deref(), Some("web:apps/Deployment:lab/web"));
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}});
        assert_eq!(ObjectKey::of(&ns).map(|k| k.tracking_id("web")).as_deref(), Some("web:/Namespace:/lab"));
        assert_eq!(ObjectKey::of(&d).map(|k| k.to_string()).as_deref(), Some("Deployment.apps/lab/web"));
    }

    /// werf-01: `annotations:` / `labels:` written empty (YAML null) or `{}` get the
    /// same marks as absent maps; existing entries are kept.
    #[test]
    fn stamp_treats_null_and_empty_maps_as_missing() {
        let metas = [
            json!({"name": "web-flags", "namespace": "gitops-lab"}),
            json!({"name": "web-flags", "namespace": "gitops-lab", "annotations": null, "labels": null}),
            json!({"name": "web-flags", "namespace": "gitops-lab", "annotations": null}),
            json!({"name": "web-flags", "namespace": "gitops-lab", "labels": null}),
            json!({"name": "web-flags", "namespace": "gitops-lab", "annotations": {}, "labels": {}}),
            json!({"name": "web-flags", "namespace": "gitops-lab", "annotations": {"a": "1"}, "labels": {"l": "2"}}),
        ];
        for meta in metas {
            let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta.clone()});
            let key = ObjectKey::of(&obj).expect("key");
            stamp(&mut obj, "web", &key, None);
            assert_eq!(
                obj["metadata"]["annotations"][TRACKING_ANNOTATION], "web:/ConfigMap:gitops-lab/web-flags",
                "{meta}"
            );
            assert_eq!(obj["metadata"]["labels"][APP_LABEL], "web", "{meta}");
            assert!(is_owned_by(&obj, "web", None), "{meta}");
            for (field, k) in [("annotations", "a"), ("labels", "l")] {
                assert_eq!(obj["metadata"][field].get(k), meta[field].get(k), "{meta}: kept");
            }
        }
    }

    #[test]
    fn stamp_then_owned() {
        let mut d =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "lab"}});
        let key = ObjectKey::of(&d).expect("key");
        stamp(&mut d, "web", &key, None);
        assert!(is_owned_by(&d, "web", None));
        assert_eq!(d["metadata"]["labels"][APP_LABEL], "web");
        assert_eq!(tracked_app(&d), Some("web"));
    }
}
