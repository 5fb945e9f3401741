//! The status store: one ConfigMap per application, `plumb-app-<app>` in the status
//! namespace, with keys `status.json` ([`AppStatus`]) and `history.json` (the last
//! [`HISTORY_LEN`](super::HISTORY_LEN) [`SyncRecord`]s, newest first). Written by
//! server-side apply with field manager `plumb-status`, and only when the content changed
//! (the caller decides); compact JSON, capped by [`super::fit`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};

use super::{AppStatus, SyncRecord, merge_history};

const MANAGER: &str = "plumb-status";

/// Attempts of one save before giving up on conflicts.
const SAVE_ATTEMPTS: usize = 8;

/// Reads and writes application status ConfigMaps.
#[derive(Clone)]
pub struct Store {
    api: Api<ConfigMap>,
    namespace: String,
    client: Client,
}

/// Failure of the status store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// API request failed.
    #[error("status ConfigMap {name}: {source}")]
    Kube {
        /// ConfigMap name.
        name: String,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Every attempt to write conflicted with another writer.
    #[error("status ConfigMap {name}: still conflicting after {attempts} attempts")]
    Conflict {
        /// ConfigMap name.
        name: String,
        /// Attempts made.
        attempts: usize,
    },
}

/// Annotation on an application's status object by which a pass is asked for (a
/// follower forwarding a webhook, `plumb sync`, `plumb refresh`; value: the time of the
/// request, RFC 3339; any change triggers). Written by [`crate::leader::forward`].
pub const REFRESH_ANNOTATION: &str = "plumb.dev/refresh-requested";

/// Annotation by which a server acknowledges a pass request: the value of
/// [`crate::leader::REFRESH_ANNOTATION`] its last finished pass had seen.
pub const OBSERVED_ANNOTATION: &str = "plumb.dev/refresh-observed";

/// The pass requests of an application ([`Store::requests`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    /// The last request (RFC 3339 time of the request), if any.
    pub requested: Option<String>,
    /// The last request a finished pass had seen.
    pub observed: Option<String>,
}

impl Requests {
    /// Whether a pass that saw request `value` (or a later one) has finished. Values are
    /// [`super::now`] times, which sort as text.
    pub fn answered(&self, value: &str) -> bool {
        self.observed.as_deref().is_some_and(|o| o >= value)
    }
}

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

/// Name of the status ConfigMap of `app`.
pub fn configmap_name(app: &str) -> String {
    format!("plumb-app-{app}")
}

impl Store {
    /// A store in `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self { api: Api::namespaced(client.clone(), namespace), namespace: namespace.into(), client }
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

    /// Reads status and history of `app` (defaults when never written).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn load(&self, app: &str) -> Result<(AppStatus, Vec<SyncRecord>), Error> {
        let name = configmap_name(app);
        let cm = self.api.get_opt(&name).await.map_err(|e| Error::Kube { name: name.clone(), source: Box::new(e) })?;
        let data = cm.and_then(|c| c.data).unwrap_or_default();
        let status = data.get("status.json").and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
        let history = data.get("history.json").and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
        Ok((status, history))
    }

    /// Reads status and history of `app`; `None` when no status object exists (the
    /// application never ran in this namespace, or plumb's namespace is another one).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn find(&self, app: &str) -> Result<Option<(AppStatus, Vec<SyncRecord>)>, Error> {
        let name = configmap_name(app);
        let cm = self.api.get_opt(&name).await.map_err(|e| Error::Kube { name: name.clone(), source: Box::new(e) })?;
        Ok(cm.map(|c| {
            let data = c.data.unwrap_or_default();
            let status = data.get("status.json").and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
            let history = data.get("history.json").and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
            (status, history)
        }))
    }

    /// The pass requests of `app` (see [`crate::leader::forward`]): the last value asked
    /// for and the last value a server acknowledged (after the pass that saw it).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn requests(&self, app: &str) -> Result<Requests, Error> {
        let name = configmap_name(app);
        let cm = self.api.get_opt(&name).await.map_err(|e| Error::Kube { name: name.clone(), source: Box::new(e) })?;
        let mut annotations = cm.and_then(|c| c.metadata.annotations).unwrap_or_default();
        Ok(Requests {
            requested: annotations.remove(REFRESH_ANNOTATION),
            observed: annotations.remove(OBSERVED_ANNOTATION),
        })
    }

    /// Records that a pass which started after request `value` of `app` has finished
    /// (and saved its status): a client following the request stops waiting.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn acknowledge(&self, app: &str, value: &str) -> Result<(), Error> {
        let name = configmap_name(app);
        let patch = serde_json::json!({"metadata": {"annotations": {OBSERVED_ANNOTATION: value}}});
        self.api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::Kube { name: name.clone(), source: Box::new(e) })?;
        Ok(())
    }

    /// The Kubernetes Events about `app`'s status object (what the server records:
    /// `SyncSucceeded`, `SyncFailed`, `HealthChanged`, `Pruned`, …), oldest first.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn events(&self, app: &str) -> Result<Vec<Event>, Error> {
        let name = configmap_name(app);
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = kube::api::ListParams::default()
            .fields(&format!("involvedObject.kind=ConfigMap,involvedObject.name={name}"));
        let mut events =
            api.list(&lp).await.map_err(|e| Error::Kube { name: name.clone(), source: Box::new(e) })?.items;
        events.sort_by_key(event_time);
        Ok(events)
    }

    /// Lists every application status in the namespace.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn list(&self) -> Result<Vec<AppStatus>, Error> {
        let lp = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=plumb");
        let list = self.api.list(&lp).await.map_err(|e| Error::Kube { name: "(list)".into(), source: Box::new(e) })?;
        let mut out: Vec<AppStatus> = list
            .items
            .into_iter()
            .filter_map(|c| c.data?.get("status.json").and_then(|s| serde_json::from_str(s).ok()))
            .collect();
        out.sort_by(|a, b| a.app.cmp(&b.app));
        Ok(out)
    }

    /// Writes status and history of `status.app`: create when missing, else replace
    /// the version just read; on a conflict, read again and merge the histories.
    ///
    /// # Errors
    /// [`Error::Kube`], [`Error::Conflict`].
    pub async fn save(&self, status: &AppStatus, history: &[SyncRecord]) -> Result<(), Error> {
        let name = configmap_name(&status.app);
        let kube_err = |e| Error::Kube { name: name.clone(), source: Box::new(e) };
        for _ in 0..SAVE_ATTEMPTS {
            let current = self.api.get_opt(&name).await.map_err(kube_err)?;
            let stored: Vec<SyncRecord> = current
                .as_ref()
                .and_then(|c| c.data.as_ref()?.get("history.json"))
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or_default();
            let merged = merge_history(&stored, history);
            let mut cm = current.clone().unwrap_or_default();
            cm.metadata.name = Some(name.clone());
            cm.metadata.namespace = Some(self.namespace.clone());
            cm.metadata.managed_fields = None;
            let labels = cm.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.insert("app.kubernetes.io/managed-by".into(), "plumb".into());
            labels.insert("plumb.dev/status-of".into(), status.app.clone());
            let data = cm.data.get_or_insert_with(BTreeMap::new);
            // capped to stay under the ConfigMap size limit, counts of what was left out
            let fitted = super::fit::stored(status, &merged);
            data.insert("status.json".into(), fitted.status);
            data.insert("history.json".into(), fitted.history);
            let written = match current {
                None => {
                    self.api
                        .create(&PostParams { field_manager: Some(MANAGER.into()), ..Default::default() }, &cm)
                        .await
                }
                Some(_) => {
                    self.api
                        .replace(&name, &PostParams { field_manager: Some(MANAGER.into()), ..Default::default() }, &cm)
                        .await
                }
            };
            match written {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::debug!(configmap = %name, "status write conflicted; reading again and merging");
                }
                Err(e) => return Err(kube_err(e)),
            }
        }
        Err(Error::Conflict { name, attempts: SAVE_ATTEMPTS })
    }
}
