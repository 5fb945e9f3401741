//! The status store: one `Application` resource (`applications.plumb.dev/v1alpha1`)
//! per application, named after it, in the status namespace. `spec` mirrors the policy
//! ([`Store::mirror`]); the `status` subresource holds the [`AppStatus`] fields, the
//! conditions in Kubernetes' shape plus `Ready` ([`kube_conditions`]), `history` (the
//! last [`HISTORY_LEN`](super::HISTORY_LEN) [`SyncRecord`]s, newest first) and
//! `observedGeneration`; capped by [`super::fit`]. Requests to the server are
//! annotations on it ([`Controls`]).
//!
//! The definition (`deploy/base/crd.yaml`) is installed when missing. Status
//! ConfigMaps of earlier versions (`plumb-app-<app>`) are read when no resource exists
//! yet and moved by [`Store::migrate`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use super::{
    AppStatus, ConditionType, Pin, REFRESH_ANNOTATION, ROLLBACK_ANNOTATION, SUSPEND_ANNOTATION, SYNC_ANNOTATION,
    Suspension, SyncRecord, SyncStatus, merge_history,
};
use crate::health::HealthStatus;

const MANAGER: &str = "plumb-status";

/// Attempts of one save before giving up on conflicts.
const SAVE_ATTEMPTS: usize = 8;

/// The definition of the `Application` resource, as shipped in `deploy/`.
pub const CRD_YAML: &str = include_str!("../../deploy/base/crd.yaml");

/// Group, version and kind of the `Application` resource.
pub const API_VERSION: &str = "plumb.dev/v1alpha1";

/// The `Application` resource type.
pub fn application_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("plumb.dev", "v1alpha1", "Application"), "applications")
}

/// The object an Event about `app` is recorded on (its `Application`), with its `uid`
/// when known: `kubectl describe` lists only the Events whose `regarding` names the
/// object's uid.
pub fn event_object(namespace: &str, app: &str, uid: Option<&str>) -> Value {
    let mut metadata = json!({"name": app, "namespace": namespace});
    if let Some(uid) = uid {
        metadata["uid"] = uid.into();
    }
    json!({"apiVersion": API_VERSION, "kind": "Application", "metadata": metadata})
}

/// Label of the `Application` definition naming its revision, raised with every
/// change of `deploy/base/crd.yaml` (a definition without it is revision 1).
pub const DEFINITION_REVISION_LABEL: &str = "plumb.dev/definition-revision";

/// The revision a definition's labels name ([`DEFINITION_REVISION_LABEL`]; 1 without it
/// or for a value that is not a number).
pub fn revision_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u32 {
    meta.labels.as_ref().and_then(|l| l.get(DEFINITION_REVISION_LABEL)).and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// What to do about the cluster's definition of revision `installed` given this
/// plumb's `ours`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionStep {
    /// The same revision: nothing.
    Keep,
    /// Older: replace it by this plumb's (server-side apply).
    Replace,
    /// Newer: a newer plumb installed it; this one must not run against it (it would
    /// drop fields it does not know when it writes statuses).
    Refuse {
        /// The cluster's revision.
        installed: u32,
        /// This plumb's.
        ours: u32,
    },
}

/// [`DefinitionStep`] for revisions `installed` and `ours`. Pure.
pub fn definition_step(installed: u32, ours: u32) -> DefinitionStep {
    match installed.cmp(&ours) {
        std::cmp::Ordering::Equal => DefinitionStep::Keep,
        std::cmp::Ordering::Less => DefinitionStep::Replace,
        std::cmp::Ordering::Greater => DefinitionStep::Refuse { installed, ours },
    }
}

/// Reads and writes application statuses.
#[derive(Clone)]
pub struct Store {
    api: Api<DynamicObject>,
    legacy: Api<ConfigMap>,
    namespace: String,
    client: Client,
    /// The uid of each application's resource, as last read (see [`Store::event_object`]).
    uids: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    /// A digest of the delete hooks last kept for each application ([`Store::keep_hooks`]).
    hooks: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
    /// Resources read by one paged LIST ([`Store::prime`]), serving reads in place of a
    /// GET each until written or [`PRIMED_FOR`] old.
    primed: std::sync::Arc<std::sync::Mutex<Primed>>,
}

/// How long the resources read by [`Store::prime`] serve reads (seconds: 120): the
/// passes of the applications primed read them before their first status write.
pub const PRIMED_FOR: std::time::Duration = std::time::Duration::from_secs(120);

/// How many resources one page of [`Store::prime`]'s LIST holds.
const PRIME_PAGE: u32 = 500;

/// The resources [`Store::prime`] read, by application (`None`: none exists), and when it
/// last read any (all expire together, [`PRIMED_FOR`] after).
/// Each is kept as its JSON text (without `managedFields`): a few times smaller than
/// the parsed object, parsed again when read.
#[derive(Default)]
struct Primed {
    at: Option<std::time::Instant>,
    objects: std::collections::HashMap<String, Option<String>>,
}

impl Primed {
    /// The resource of `app` as primed: `None` when not primed or expired.
    fn get(&mut self, app: &str) -> Option<Option<DynamicObject>> {
        self.expire();
        match self.objects.get(app)? {
            Some(text) => serde_json::from_str(text).ok().map(Some),
            None => Some(None),
        }
    }

    /// Drops everything once [`PRIMED_FOR`] old.
    fn expire(&mut self) {
        if self.at.is_some_and(|at| at.elapsed() >= PRIMED_FOR) {
            *self = Self::default();
        }
    }

    /// `o` as kept: its JSON text without `managedFields`.
    fn text(mut o: DynamicObject) -> Option<String> {
        o.metadata.managed_fields = None;
        serde_json::to_string(&o).ok()
    }
}

/// The field of an `Application` resource's `spec` that keeps the application's
/// delete hooks (`crate::plan::decommission::Hooks`), written by its passes.
pub const HOOKS_FIELD: &str = "decommissionHooks";

/// The field of an `Application` resource's `spec` that keeps what a later
/// decommission needs (`crate::plan::decommission::Record`), mirrored from the policy.
pub const DECOMMISSION_FIELD: &str = "decommission";

/// Annotation on a leaving application's resource naming the delete hook phases that
/// ran (`PreDelete`, `PostDelete`, comma-separated), so that a phase runs once per
/// decommission; removed when the policy declares the application again
/// ([`Store::mirror`]).
pub const HOOKS_RAN_ANNOTATION: &str = "plumb.dev/decommission-hooks-ran";

/// The field manager of [`HOOKS_FIELD`].
const HOOKS_MANAGER: &str = "plumb-decommission";

/// Failure of the status store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// API request failed.
    #[error("status of {name} (applications.plumb.dev in the status namespace): {source}")]
    Kube {
        /// Application (or what was being done).
        name: String,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Every attempt to write conflicted with another writer.
    #[error("status of {name}: still conflicting after {attempts} attempts")]
    Conflict {
        /// Application.
        name: String,
        /// Attempts made.
        attempts: usize,
    },
    /// The resource definition could not be installed or did not become established.
    #[error("installing the Application resource definition (applications.plumb.dev): {0}")]
    Definition(String),
    /// The cluster serves a newer revision of the definition than this plumb knows
    /// (label [`DEFINITION_REVISION_LABEL`]): a newer plumb installed it.
    #[error(
        "the cluster's Application resource definition (applications.plumb.dev) is revision {installed}, newer \
         than this plumb's {ours}: run the plumb version that installed it, or a newer one"
    )]
    NewerDefinition {
        /// The cluster's revision.
        installed: u32,
        /// This plumb's.
        ours: u32,
    },
    /// A write dropped: the pass's shard is no longer held by this replica
    /// ([`crate::fence`]).
    #[error(transparent)]
    Fenced(#[from] crate::fence::Closed),
}

/// Before a write of `app`'s resource: `Ok` unless the pass's fence closed.
fn fenced(app: &str) -> Result<(), Error> {
    Ok(crate::fence::check(|| format!("write applications.plumb.dev/{app}"))?)
}

/// Annotation by which a server acknowledges a pass request: the value of
/// [`REFRESH_ANNOTATION`] its last finished pass had seen (`plumb refresh` waits for it;
/// a sync request is acknowledged in the status, `syncRequest`).
pub const OBSERVED_ANNOTATION: &str = "plumb.dev/refresh-observed";

/// When an Event happened last: its series' last observation, else its last or first
/// timestamp, else its event time (RFC 3339 to the second; empty when none is set).
pub fn event_time(e: &Event) -> String {
    let t = e
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or_else(|| e.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0));
    t.map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()).unwrap_or_default()
}

/// Name of the status ConfigMap of `app` in versions before the `Application` resource
/// (read and migrated, never written).
pub fn configmap_name(app: &str) -> String {
    format!("plumb-app-{app}")
}

/// The requests of every application as last seen on their resources, shared between
/// the watch that reads them (`leader::watch_requests`) and the passes. `None` until
/// that watch runs: passes then read the resource themselves.
pub type SharedControls = std::sync::Arc<std::sync::RwLock<Option<std::collections::HashMap<String, Controls>>>>;

/// What people asked of an application on its resource (annotations), as the server
/// reads them before a pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Controls {
    /// [`REFRESH_ANNOTATION`]'s value.
    pub refresh: Option<String>,
    /// [`OBSERVED_ANNOTATION`]'s value: the last pass request a finished pass had seen.
    pub observed: Option<String>,
    /// [`SYNC_ANNOTATION`]'s value.
    pub sync: Option<String>,
    /// [`SUSPEND_ANNOTATION`], parsed (an unparsable value is ignored with a warning).
    pub suspend: Option<Suspension>,
    /// [`ROLLBACK_ANNOTATION`], parsed.
    pub pin: Option<Pin>,
    /// [`super::ROLLBACK_OVERRIDE_ANNOTATION`]'s value.
    pub pin_override: Option<String>,
    /// [`super::ALLOW_UNVERIFIED_ANNOTATION`]'s value.
    pub allow_unverified: Option<String>,
}

impl Controls {
    /// Whether `other` asks something else of the server than `self` (the
    /// acknowledgement of a pass request, written by the server, asks nothing).
    pub fn asks_differently(&self, other: &Self) -> bool {
        Self { observed: None, ..self.clone() } != Self { observed: None, ..other.clone() }
    }

    /// Whether a pass that saw pass request `value` (or a later one) has finished.
    /// Values are [`super::now`] times, which sort as text.
    pub fn answered(&self, value: &str) -> bool {
        self.observed.as_deref().is_some_and(|o| o >= value)
    }

    /// The pass request not acknowledged yet, if any.
    pub fn unanswered_refresh(&self) -> Option<String> {
        self.refresh.clone().filter(|v| self.observed.as_ref() != Some(v))
    }

    /// The controls in `annotations` of application `app`. Pure.
    pub fn from_annotations(app: &str, annotations: &BTreeMap<String, String>) -> Self {
        fn parsed<T: serde::de::DeserializeOwned>(app: &str, key: &str, v: Option<&String>) -> Option<T> {
            let v = v?;
            match serde_json::from_str(v) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(app = %app, "annotation {key} ignored: {e}");
                    None
                }
            }
        }
        Self {
            refresh: annotations.get(REFRESH_ANNOTATION).cloned(),
            observed: annotations.get(OBSERVED_ANNOTATION).cloned(),
            sync: annotations.get(SYNC_ANNOTATION).cloned(),
            suspend: parsed(app, SUSPEND_ANNOTATION, annotations.get(SUSPEND_ANNOTATION)),
            pin: parsed(app, ROLLBACK_ANNOTATION, annotations.get(ROLLBACK_ANNOTATION)),
            pin_override: annotations.get(super::ROLLBACK_OVERRIDE_ANNOTATION).cloned(),
            allow_unverified: annotations.get(super::ALLOW_UNVERIFIED_ANNOTATION).cloned(),
        }
    }
}

/// The conditions of `status` in Kubernetes' shape (`type`, `status`, `reason`,
/// `message`, `lastTransitionTime`, `observedGeneration`; as `metav1.Condition`), one
/// per type (messages of a type joined by `; `), then `Ready`: `True` when the
/// application is Synced and Healthy with no `…Error` condition. A condition keeps the
/// `lastTransitionTime` of `current` (the stored ones) while its status is unchanged.
/// Pure.
pub fn kube_conditions(status: &AppStatus, current: &[Value], generation: i64, now: &str) -> Vec<Value> {
    let since = |type_: &str, state: &str| -> String {
        current
            .iter()
            .find(|c| c["type"] == type_ && c["status"] == state)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .unwrap_or(now)
            .to_string()
    };
    let mut by_type: Vec<(ConditionType, Vec<&str>)> = Vec::new();
    for c in &status.conditions {
        match by_type.iter_mut().find(|(t, _)| *t == c.type_) {
            Some((_, messages)) => messages.push(&c.message),
            None => by_type.push((c.type_, vec![&c.message])),
        }
    }
    let mut out: Vec<Value> = by_type
        .into_iter()
        .map(|(t, messages)| {
            json!({"type": t.as_str(), "status": "True", "reason": t.as_str(), "message": messages.join("; "),
                   "lastTransitionTime": since(t.as_str(), "True"), "observedGeneration": generation})
        })
        .collect();
    let error = status.conditions.iter().find(|c| {
        c.type_.ends_with("Error")
            || matches!(c.type_, ConditionType::DecommissionPending | ConditionType::Decommissioning)
    });
    let ready = status.sync == SyncStatus::Synced && status.health == HealthStatus::Healthy && error.is_none();
    let reason = match (error, status.sync, status.health) {
        (_, _, _) if ready => "Synced".to_string(),
        (Some(e), _, _) => e.type_.as_str().to_string(),
        (None, SyncStatus::OutOfSync | SyncStatus::Unknown, _) => status.sync.to_string(),
        (None, _, h) => h.to_string(),
    };
    let state = if ready { "True" } else { "False" };
    let revision: String = status.revision.chars().take(7).collect();
    out.push(json!({"type": "Ready", "status": state, "reason": reason,
        "message": format!("{} and {} at {revision}", status.sync, status.health),
        "lastTransitionTime": since("Ready", state), "observedGeneration": generation}));
    out
}

impl Store {
    /// A store in `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced_with(client.clone(), namespace, &application_resource()),
            legacy: Api::namespaced(client.clone(), namespace),
            namespace: namespace.into(),
            client,
            uids: std::sync::Arc::default(),
            hooks: std::sync::Arc::default(),
            primed: std::sync::Arc::default(),
        }
    }

    /// Reads the resources of the applications `keep` selects with one paged LIST
    /// ([`PRIME_PAGE`] a page) instead of a GET each: until each is written, or for
    /// [`PRIMED_FOR`], its reads ([`Store::load`], [`Store::mirror`],
    /// [`Store::keep_hooks`], [`Store::save`]) are served from it, and an application
    /// of `keep` without a resource reads as none. Adds to what an earlier call read
    /// (a replica taking a second shard while the first one's passes run).
    /// A status write of a resource changed since fails on its resourceVersion and is
    /// read again ([`Store::save`]).
    ///
    /// # Errors
    /// [`Error::Kube`]: nothing is primed.
    pub async fn prime<'a>(&self, keep: impl IntoIterator<Item = &'a str>) -> Result<(), Error> {
        let mut objects: std::collections::HashMap<String, Option<String>> =
            keep.into_iter().map(|a| (a.to_string(), None)).collect();
        let mut uids = Vec::new();
        let mut lp = kube::api::ListParams::default().limit(PRIME_PAGE);
        loop {
            let page = match self.api.list(&lp).await {
                Ok(page) => page,
                // the definition is not installed yet: there is no resource
                Err(kube::Error::Api(s)) if s.code == 404 => break,
                Err(e) => return Err(Self::kube_err("(list)")(e)),
            };
            for o in page.items {
                let Some(slot) = o.metadata.name.as_ref().and_then(|n| objects.get_mut(n)) else { continue };
                if let (Some(name), Some(uid)) = (&o.metadata.name, &o.metadata.uid) {
                    uids.push((name.clone(), uid.clone()));
                }
                *slot = Primed::text(o);
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(c) => lp = lp.continue_token(&c),
                None => break,
            }
        }
        if let Ok(mut known) = self.uids.lock() {
            known.extend(uids);
        }
        if let Ok(mut p) = self.primed.lock() {
            p.expire();
            p.objects.extend(objects);
            p.at = Some(std::time::Instant::now());
        }
        Ok(())
    }

    /// After a write of `app`'s resource: its primed copy is `written` (the object the
    /// write returned) or, with `None`, no longer serves reads.
    fn written(&self, app: &str, written: Option<DynamicObject>) {
        let Ok(mut p) = self.primed.lock() else { return };
        p.expire();
        match (written.and_then(Primed::text), p.objects.get_mut(app)) {
            (Some(text), Some(slot)) => *slot = Some(text),
            _ => {
                p.objects.remove(app);
            }
        }
    }

    /// At the end of a pass of `app`: its primed resource (if any) serves no more reads.
    pub fn unprime(&self, app: &str) {
        self.written(app, None);
    }

    /// The object an Event about `app` is recorded on ([`event_object`]), with the uid
    /// of its resource as this store last read it.
    pub fn event_object(&self, app: &str) -> Value {
        let uid = self.uids.lock().ok().and_then(|u| u.get(app).cloned());
        event_object(&self.namespace, app, uid.as_deref())
    }

    /// The status namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Creates the status namespace when missing (by server-side apply).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn ensure_namespace(&self) -> Result<(), Error> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        // An existing namespace is left alone: plumb may hold no right on Namespaces
        // (the least-privilege RBAC profile).
        if let Ok(Some(_)) = api.get_opt(&self.namespace).await {
            return Ok(());
        }
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}});
        api.patch(&self.namespace, &PatchParams::apply(MANAGER), &Patch::Apply(&ns))
            .await
            .map_err(|e| Error::Kube { name: self.namespace.clone(), source: Box::new(e) })?;
        Ok(())
    }

    /// Installs the `Application` definition ([`CRD_YAML`]) when the cluster does not
    /// serve it, replaces an older revision of it ([`definition_step`]), and waits (at
    /// most 30 s) until it is established. Without the right to replace an older one,
    /// a warning names the command that does.
    ///
    /// # Errors
    /// [`Error::Definition`] (no right to create it, or not established in time);
    /// [`Error::NewerDefinition`] when the cluster's is newer than this plumb's.
    pub async fn ensure_definition(&self) -> Result<(), Error> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let name = "applications.plumb.dev";
        let established = |crd: &CustomResourceDefinition| {
            crd.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
        };
        let ours: CustomResourceDefinition =
            serde_saphyr::from_str(CRD_YAML).map_err(|e| Error::Definition(e.to_string()))?;
        match api.get_opt(name).await {
            Ok(Some(crd)) => match definition_step(revision_of(&crd.metadata), revision_of(&ours.metadata)) {
                DefinitionStep::Keep if established(&crd) => return Ok(()),
                DefinitionStep::Keep => {}
                DefinitionStep::Refuse { installed, ours } => return Err(Error::NewerDefinition { installed, ours }),
                DefinitionStep::Replace => {
                    let params = PatchParams::apply(MANAGER).force();
                    match api.patch(name, &params, &Patch::Apply(&ours)).await {
                        Ok(_) => tracing::info!(
                            "replaced the Application resource definition (applications.plumb.dev) revision {} by {}",
                            revision_of(&crd.metadata),
                            revision_of(&ours.metadata)
                        ),
                        Err(e) => tracing::warn!(
                            "the Application resource definition is revision {}, older than this plumb's {}, and \
                             cannot be replaced ({e}): run `kubectl apply -f deploy/base/crd.yaml`",
                            revision_of(&crd.metadata),
                            revision_of(&ours.metadata)
                        ),
                    }
                }
            },
            Ok(None) | Err(_) => {
                match api.create(&PostParams { field_manager: Some(MANAGER.into()), ..Default::default() }, &ours).await
                {
                    Ok(_) => tracing::info!("installed the Application resource definition (applications.plumb.dev)"),
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(Error::Definition(e.to_string())),
                }
            }
        }
        for _ in 0..300 {
            if let Ok(Some(crd)) = api.get_opt(name).await
                && established(&crd)
            {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Err(Error::Definition("not established within 30 s".into()))
    }

    fn kube_err(name: &str) -> impl Fn(kube::Error) -> Error + '_ {
        move |e| Error::Kube { name: name.to_string(), source: Box::new(e) }
    }

    /// Reads status and history of `app` (defaults when never written; from the
    /// status ConfigMap of an earlier version when there is no resource yet).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn load(&self, app: &str) -> Result<(AppStatus, Vec<SyncRecord>), Error> {
        match self.get(app).await? {
            Some(obj) => Ok(from_object(&obj)),
            None => self.load_legacy(app).await,
        }
    }

    async fn get(&self, app: &str) -> Result<Option<DynamicObject>, Error> {
        if let Some(primed) = self.primed.lock().ok().and_then(|mut p| p.get(app)) {
            return Ok(primed);
        }
        match self.api.get_opt(app).await {
            Ok(o) => {
                if let (Some(uid), Ok(mut uids)) = (o.as_ref().and_then(|o| o.metadata.uid.clone()), self.uids.lock()) {
                    uids.insert(app.to_string(), uid);
                }
                Ok(o)
            }
            // the definition is not installed yet: nothing was written
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(Self::kube_err(app)(e)),
        }
    }

    async fn load_legacy(&self, app: &str) -> Result<(AppStatus, Vec<SyncRecord>), Error> {
        let name = configmap_name(app);
        let cm = self.legacy.get_opt(&name).await.map_err(Self::kube_err(app))?;
        let data = cm.and_then(|c| c.data).unwrap_or_default();
        let status = data.get("status.json").and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
        let history = data.get("history.json").and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
        Ok((status, history))
    }

    /// Reads status and history of `app`; `None` when it has neither a resource nor a
    /// status ConfigMap of an earlier version (the application is not served in this
    /// namespace).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn find(&self, app: &str) -> Result<Option<(AppStatus, Vec<SyncRecord>)>, Error> {
        if let Some(obj) = self.get(app).await? {
            let (mut status, history) = from_object(&obj);
            if status.app.is_empty() {
                status.app = app.to_string();
            }
            return Ok(Some((status, history)));
        }
        // a status ConfigMap of an earlier version, where the caller may read ConfigMaps
        // (the shipped plumb-viewer and plumb-operator roles may not: for them an
        // application without a resource is simply not found)
        let legacy = match self.legacy.get_opt(&configmap_name(app)).await {
            Err(kube::Error::Api(e)) if e.code == 403 => None,
            other => other.map_err(Self::kube_err(app))?,
        };
        Ok(match legacy {
            Some(_) => Some(self.load_legacy(app).await?),
            None => None,
        })
    }

    /// Records that a pass which started after request `value` of `app` has finished
    /// (and saved its status): a client following the request stops waiting.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn acknowledge(&self, app: &str, value: &str) -> Result<(), Error> {
        let patch = json!({"metadata": {"annotations": {OBSERVED_ANNOTATION: value}}});
        fenced(app)?;
        self.written(app, None);
        self.api.patch(app, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(Self::kube_err(app))?;
        Ok(())
    }

    /// The Kubernetes Events about `app` (recorded on its resource, see
    /// [`event_object`]: `SyncSucceeded`, `SyncFailed`, `HealthChanged`, `Pruned`, …),
    /// oldest first.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn events(&self, app: &str) -> Result<Vec<Event>, Error> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = kube::api::ListParams::default()
            .fields(&format!("involvedObject.kind=Application,involvedObject.name={app}"));
        let mut events = api.list(&lp).await.map_err(Self::kube_err(app))?.items;
        events.sort_by_key(event_time);
        Ok(events)
    }

    /// The requests recorded on `app`'s resource (none when it does not exist).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn controls(&self, app: &str) -> Result<Controls, Error> {
        Ok(self
            .get(app)
            .await?
            .map(|o| Controls::from_annotations(app, &o.metadata.annotations.unwrap_or_default()))
            .unwrap_or_default())
    }

    /// Lists every application status in the namespace, by name.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn list(&self) -> Result<Vec<AppStatus>, Error> {
        let list = match self.api.list(&kube::api::ListParams::default()).await {
            Ok(l) => l.items,
            Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
            Err(e) => return Err(Self::kube_err("(list)")(e)),
        };
        let mut out: Vec<AppStatus> =
            list.iter().map(|o| from_object(o).0).filter(|s: &AppStatus| !s.app.is_empty()).collect();
        out.sort_by(|a, b| a.app.cmp(&b.app));
        Ok(out)
    }

    /// Sets the `spec` of `app`'s resource to `spec` (the policy's declaration of it),
    /// creating the resource when missing, and forgets which delete hooks ran
    /// ([`HOOKS_RAN_ANNOTATION`]). Writes nothing when equal.
    ///
    /// # Errors
    /// [`Error::Kube`], [`Error::Definition`].
    pub async fn mirror(&self, app: &str, spec: &Value) -> Result<(), Error> {
        let current = self.get(app).await?;
        let mirrored = |o: &DynamicObject| {
            let mut s = o.data["spec"].clone();
            if let Some(m) = s.as_object_mut() {
                m.remove(HOOKS_FIELD);
            }
            &s == spec
        };
        let ran = current
            .as_ref()
            .and_then(|o| o.metadata.annotations.as_ref())
            .is_some_and(|a| a.contains_key(HOOKS_RAN_ANNOTATION));
        if ran {
            // declared again: a later decommission runs its hooks again
            let patch = json!({"metadata": {"annotations": {HOOKS_RAN_ANNOTATION: null}}});
            fenced(app)?;
            let o = self.api.patch(app, &PatchParams::default(), &Patch::Merge(&patch)).await;
            self.written(app, Some(o.map_err(Self::kube_err(app))?));
        }
        if current.as_ref().is_some_and(mirrored) {
            return Ok(());
        }
        let patch = json!({"apiVersion": API_VERSION, "kind": "Application",
            "metadata": {"name": app, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "plumb"}},
            "spec": spec});
        let pp = PatchParams::apply(MANAGER).force();
        fenced(app)?;
        let o = match self.api.patch(app, &pp, &Patch::Apply(&patch)).await {
            Ok(o) => o,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.ensure_definition().await?;
                fenced(app)?;
                self.api.patch(app, &pp, &Patch::Apply(&patch)).await.map_err(Self::kube_err(app))?
            }
            Err(e) => return Err(Self::kube_err(app)(e)),
        };
        self.written(app, Some(o));
        Ok(())
    }

    /// Sets (or with `None` removes) the annotation `key` of `app`'s resource, creating
    /// the resource when missing: how requests reach the server.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn annotate(&self, app: &str, key: &str, value: Option<&str>) -> Result<(), Error> {
        self.annotate_all(app, &[(key, value)]).await
    }

    /// Sets (or with `None` removes) each annotation of `pairs` on `app`'s resource in
    /// one write (an admission policy sees them together), creating the resource when
    /// missing.
    ///
    /// # Errors
    /// [`Error::Kube`] (a denial by an admission policy carries its message).
    pub async fn annotate_all(&self, app: &str, pairs: &[(&str, Option<&str>)]) -> Result<(), Error> {
        if self.get(app).await?.is_none() {
            self.mirror(app, &json!({})).await?;
        }
        let annotations: serde_json::Map<String, Value> =
            pairs.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect();
        let patch = json!({"metadata": {"annotations": annotations}});
        fenced(app)?;
        self.written(app, None);
        self.api.patch(app, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(Self::kube_err(app))?;
        Ok(())
    }

    /// Sets the annotations of `pairs` on `app`'s resource when it exists (a request
    /// about an application that must not be created by asking); false when there is
    /// none.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn annotate_existing(&self, app: &str, pairs: &[(&str, Option<&str>)]) -> Result<bool, Error> {
        if self.get(app).await?.is_none() {
            return Ok(false);
        }
        let annotations: serde_json::Map<String, Value> =
            pairs.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect();
        let patch = json!({"metadata": {"annotations": annotations}});
        fenced(app)?;
        self.written(app, None);
        self.api.patch(app, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(Self::kube_err(app))?;
        Ok(true)
    }

    /// Keeps `hooks` (an application's delete hooks, see
    /// [`HOOKS_FIELD`]) in `spec` of its existing resource, as
    /// field manager `plumb-decommission` (the policy's mirror, [`Store::mirror`], leaves
    /// the field alone). Writes nothing when this process last wrote the same, or the
    /// resource holds it already (no field counts as no hooks: `{}`); creates no
    /// resource.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn keep_hooks(&self, app: &str, hooks: &Value) -> Result<(), Error> {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        hooks.to_string().hash(&mut h);
        let digest = h.finish();
        if self.hooks.lock().ok().and_then(|m| m.get(app).copied()) == Some(digest) {
            return Ok(());
        }
        let Some(current) = self.get(app).await? else { return Ok(()) };
        // no field reads as no hooks (`crate::decommission`): none is written for none
        let kept = &current.data["spec"][HOOKS_FIELD];
        if kept != hooks && !(kept.is_null() && hooks.as_object().is_some_and(serde_json::Map::is_empty)) {
            let patch = json!({"apiVersion": API_VERSION, "kind": "Application",
                "metadata": {"name": app, "namespace": self.namespace}, "spec": {HOOKS_FIELD: hooks}});
            let pp = PatchParams::apply(HOOKS_MANAGER).force();
            fenced(app)?;
            let o = self.api.patch(app, &pp, &Patch::Apply(&patch)).await.map_err(Self::kube_err(app))?;
            self.written(app, Some(o));
        }
        if let Ok(mut m) = self.hooks.lock() {
            m.insert(app.to_string(), digest);
        }
        Ok(())
    }

    /// Every `Application` resource of the namespace, as stored (the decommission reads
    /// `spec` and annotations of those the policy no longer declares).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn list_resources(&self) -> Result<Vec<DynamicObject>, Error> {
        match self.api.list(&kube::api::ListParams::default()).await {
            Ok(l) => Ok(l.items),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
            Err(e) => Err(Self::kube_err("(list)")(e)),
        }
    }

    /// Deletes `app`'s resource (with its status and history) if its UID is still `uid`.
    ///
    /// # Errors
    /// [`Error::Kube`] (gone already is no error).
    pub async fn remove(&self, app: &str, uid: &str) -> Result<(), Error> {
        let dp = kube::api::DeleteParams::default()
            .preconditions(kube::api::Preconditions { uid: Some(uid.into()), resource_version: None });
        fenced(app)?;
        self.written(app, None);
        match self.api.delete(app, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Self::kube_err(app)(e)),
        }
        if let Ok(mut m) = self.uids.lock() {
            m.remove(app);
        }
        if let Ok(mut m) = self.hooks.lock() {
            m.remove(app);
        }
        Ok(())
    }

    /// Moves the status ConfigMaps of earlier versions (`plumb-app-<app>`) to
    /// `Application` resources (status and history kept), then deletes them. Returns
    /// the applications moved.
    ///
    /// # Errors
    /// [`Error::Kube`], [`Error::Definition`].
    pub async fn migrate(&self) -> Result<Vec<String>, Error> {
        let lp = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=plumb");
        let old = self.legacy.list(&lp).await.map_err(Self::kube_err("(status ConfigMaps)"))?;
        let mut moved = Vec::new();
        for cm in old.items {
            let Some(app) = cm.metadata.labels.as_ref().and_then(|l| l.get("plumb.dev/status-of")).cloned() else {
                continue;
            };
            if self.get(&app).await?.is_none() {
                let (status, history) = self.load_legacy(&app).await?;
                if !status.app.is_empty() {
                    self.save(&status, &history).await?;
                }
            }
            let name = configmap_name(&app);
            match self.legacy.delete(&name, &Default::default()).await {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(e) => return Err(Self::kube_err(&app)(e)),
            }
            tracing::info!(app = %app, "status moved from ConfigMap {name} to applications.plumb.dev/{app}");
            moved.push(app);
        }
        Ok(moved)
    }

    /// Writes status and history of `status.app` to its resource's status
    /// subresource (creating the resource when missing), replacing the version just
    /// read; on a conflict, reads again and merges the histories.
    ///
    /// # Errors
    /// [`Error::Kube`], [`Error::Conflict`], [`Error::Definition`].
    pub async fn save(&self, status: &AppStatus, history: &[SyncRecord]) -> Result<(), Error> {
        let name = status.app.clone();
        for _ in 0..SAVE_ATTEMPTS {
            let current = match self.get(&name).await? {
                Some(o) => o,
                None => {
                    self.mirror(&name, &json!({})).await?;
                    continue;
                }
            };
            // a primed copy serves one attempt: on a conflict, read again
            self.written(&name, None);
            let stored = from_object(&current).1;
            let merged = merge_history(&stored, history);
            let generation = current.metadata.generation.unwrap_or(0);
            let no_conditions = Vec::new();
            let conditions = current.data["status"]["conditions"].as_array().unwrap_or(&no_conditions);
            let body = status_body(status, &merged, conditions, generation, &super::now());
            let mut obj = current.clone();
            obj.metadata.managed_fields = None;
            obj.data["status"] = body;
            let pp = PostParams { field_manager: Some(MANAGER.into()), ..Default::default() };
            fenced(&name)?;
            match self.api.replace_status(&name, &pp, &obj).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::debug!(app = %name, "status write conflicted; reading again and merging");
                }
                Err(e) => return Err(Self::kube_err(&name)(e)),
            }
        }
        Err(Error::Conflict { name, attempts: SAVE_ATTEMPTS })
    }
}

/// The `status` of an application's resource: `status` (capped by [`super::fit`]) with
/// its conditions in Kubernetes' shape, `history`, `observedGeneration`. Pure.
pub fn status_body(
    status: &AppStatus,
    history: &[SyncRecord],
    current_conditions: &[Value],
    generation: i64,
    now: &str,
) -> Value {
    let fitted = super::fit::stored(status, history);
    let mut body: Value = serde_json::from_str(&fitted.status).unwrap_or_else(|_| json!({}));
    body["conditions"] = Value::Array(kube_conditions(status, current_conditions, generation, now));
    body["history"] = serde_json::from_str(&fitted.history).unwrap_or_else(|_| json!([]));
    body["observedGeneration"] = json!(generation);
    body
}

/// Status and history read from an application's resource. Pure.
pub fn from_object(obj: &DynamicObject) -> (AppStatus, Vec<SyncRecord>) {
    let s = &obj.data["status"];
    let status = serde_json::from_value(s.clone()).unwrap_or_default();
    let history = serde_json::from_value(s["history"].clone()).unwrap_or_default();
    (status, history)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::status::Condition;

    #[test]
    fn primed_resources_serve_reads_until_they_expire() {
        let mut primed = Primed { at: Some(std::time::Instant::now()), objects: Default::default() };
        let web = DynamicObject::new("web", &application_resource());
        primed.objects.insert("web".into(), Primed::text(web));
        primed.objects.insert("api".into(), None);
        assert!(primed.get("web").is_some_and(|o| o.is_some()), "a primed resource");
        assert!(primed.get("api").is_some_and(|o| o.is_none()), "primed as absent: no GET either");
        assert!(primed.get("db").is_none(), "not primed: read with a GET");
        primed.at = std::time::Instant::now().checked_sub(PRIMED_FOR);
        assert!(primed.get("web").is_none(), "expired");
        assert!(primed.objects.is_empty(), "an expired priming is dropped whole");
    }

    #[test]
    fn an_older_definition_is_replaced_and_a_newer_one_refused() {
        let ours: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_saphyr::from_str(CRD_YAML).expect("crd");
        let ours = revision_of(&ours.metadata);
        assert!(ours >= 2, "the shipped definition names its revision: {ours}");
        let unlabelled = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::default();
        assert_eq!(revision_of(&unlabelled), 1);
        assert_eq!(definition_step(revision_of(&unlabelled), ours), DefinitionStep::Replace);
        assert_eq!(definition_step(ours, ours), DefinitionStep::Keep);
        assert_eq!(definition_step(ours + 1, ours), DefinitionStep::Refuse { installed: ours + 1, ours });
    }

    fn status(sync: SyncStatus, health: HealthStatus, conditions: Vec<Condition>) -> AppStatus {
        AppStatus { app: "web".into(), revision: "0123456789".into(), sync, health, conditions, ..Default::default() }
    }

    #[test]
    fn ready_is_true_only_when_synced_healthy_and_without_errors() {
        let ok = kube_conditions(&status(SyncStatus::Synced, HealthStatus::Healthy, vec![]), &[], 3, "T1");
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0]["type"], "Ready");
        assert_eq!(ok[0]["status"], "True");
        assert_eq!(ok[0]["observedGeneration"], 3);
        assert_eq!(ok[0]["message"], "Synced and Healthy at 0123456");
        let degraded = kube_conditions(&status(SyncStatus::Synced, HealthStatus::Degraded, vec![]), &[], 1, "T1");
        assert_eq!((&degraded[0]["status"], &degraded[0]["reason"]), (&json!("False"), &json!("Degraded")));
        let out = kube_conditions(&status(SyncStatus::OutOfSync, HealthStatus::Healthy, vec![]), &[], 1, "T1");
        assert_eq!(out[0]["reason"], "OutOfSync");
        let err = Condition::new(ConditionType::SyncError, "refused");
        let failed = kube_conditions(&status(SyncStatus::Synced, HealthStatus::Healthy, vec![err]), &[], 1, "T1");
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0]["type"], "SyncError");
        assert_eq!(failed[0]["status"], "True");
        assert_eq!((&failed[1]["status"], &failed[1]["reason"]), (&json!("False"), &json!("SyncError")));
    }

    #[test]
    fn one_condition_per_type_and_transition_times_kept_while_unchanged() {
        let warnings = vec![
            Condition::new(ConditionType::RenderWarning, "a.yaml: x"),
            Condition::new(ConditionType::RenderWarning, "b.yaml: y"),
        ];
        let st = status(SyncStatus::Synced, HealthStatus::Healthy, warnings);
        let first = kube_conditions(&st, &[], 1, "T1");
        assert_eq!(first.len(), 2);
        assert_eq!(first[0]["message"], "a.yaml: x; b.yaml: y");
        let again = kube_conditions(&st, &first, 2, "T2");
        assert_eq!(again[0]["lastTransitionTime"], "T1");
        assert_eq!(again[1]["lastTransitionTime"], "T1");
        let worse = status(SyncStatus::OutOfSync, HealthStatus::Healthy, vec![]);
        let changed = kube_conditions(&worse, &again, 3, "T3");
        assert_eq!((&changed[0]["type"], &changed[0]["lastTransitionTime"]), (&json!("Ready"), &json!("T3")));
    }

    #[test]
    fn the_stored_body_reads_back_as_the_same_status() {
        let st = status(
            SyncStatus::OutOfSync,
            HealthStatus::Progressing,
            vec![Condition::new(ConditionType::SyncError, "boom")],
        );
        let body = status_body(&st, &[], &[], 4, "T");
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": API_VERSION, "kind": "Application", "metadata": {"name": "web"}, "status": body}))
        .unwrap();
        let (back, history) = from_object(&obj);
        assert_eq!(back, st, "Ready and the Kubernetes fields are dropped when read");
        assert!(history.is_empty());
    }

    #[test]
    fn controls_are_read_from_annotations_and_bad_ones_ignored() {
        let mut a = BTreeMap::new();
        a.insert(
            SUSPEND_ANNOTATION.to_string(),
            r#"{"until":"2026-12-01T00:00:00Z","by":"ann","reason":"incident 42"}"#.into(),
        );
        a.insert(ROLLBACK_ANNOTATION.to_string(), "not json".into());
        a.insert(SYNC_ANNOTATION.to_string(), "T".into());
        let c = Controls::from_annotations("web", &a);
        assert_eq!(c.suspend.as_ref().map(|s| s.reason.as_str()), Some("incident 42"));
        assert!(c.pin.is_none());
        assert_eq!(c.sync.as_deref(), Some("T"));
        assert!(c.refresh.is_none());
        // the server's acknowledgement asks nothing new; a new request does
        let mut acked = c.clone();
        acked.observed = Some("T".into());
        assert!(!c.asks_differently(&acked));
        let mut asked = acked.clone();
        asked.refresh = Some("T2".into());
        assert!(acked.asks_differently(&asked));
        assert_eq!(asked.unanswered_refresh().as_deref(), Some("T2"));
        asked.observed = Some("T2".into());
        assert!(asked.unanswered_refresh().is_none());
    }
}
