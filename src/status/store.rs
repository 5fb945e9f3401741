//! The status store: one ConfigMap per application, `plumb-app-<app>` in the status
//! namespace, with keys `status.json` ([`AppStatus`]) and `history.json` (the last
//! [`HISTORY_LEN`](super::HISTORY_LEN) [`SyncRecord`]s, newest first). Written by
//! server-side apply with field manager `plumb-status`, and only when the content changed
//! (the caller decides); compact JSON, capped by [`super::fit`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};

use super::{AppStatus, SyncRecord};

const MANAGER: &str = "plumb-status";

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

    /// Creates the status namespace when missing.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn ensure_namespace(&self) -> Result<(), Error> {
        let api: Api<Namespace> = Api::all(self.client.clone());
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

    /// Writes status and history of `status.app`.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn save(&self, status: &AppStatus, history: &[SyncRecord]) -> Result<(), Error> {
        let name = configmap_name(&status.app);
        let mut data = BTreeMap::new();
        // capped to stay under the ConfigMap size limit, counts of what was left out
        let stored = super::fit::stored(status, history);
        data.insert("status.json".to_string(), stored.status);
        data.insert("history.json".to_string(), stored.history);
        let cm = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "plumb", "plumb.dev/status-of": status.app}},
            "data": data,
        });
        self.api
            .patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&cm))
            .await
            .map_err(|e| Error::Kube { name, source: Box::new(e) })?;
        Ok(())
    }
}
