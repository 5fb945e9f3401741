//! Status and history of each application, kept **in the cluster** so that they survive
//! a restart of plumb and `kubectl` can read them:
//!
//! ```text
//! kubectl -n plumb-system get configmap plumb-app-web -o jsonpath='{.data.status\.json}'
//! ```
//!
//! One ConfigMap per application, `plumb-app-<app>` in the status namespace, with keys
//! `status.json` ([`AppStatus`]) and `history.json` (the last [`HISTORY_LEN`]
//! [`SyncRecord`]s, newest first). Written by server-side apply with field manager
//! `plumb-status`, and only when the content changed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde::{Deserialize, Serialize};

use crate::{compare::SyncStatus, health::HealthStatus};

/// How many sync records are kept per application.
pub const HISTORY_LEN: usize = 10;
const MANAGER: &str = "plumb-status";

/// Status of one object of an application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceStatus {
    /// `Kind[.group]/namespace/name`.
    pub object: String,
    /// Sync status.
    pub sync: SyncStatus,
    /// Why it is not Synced: `missing`, `differs at /spec/replicas`, `requires pruning`,
    /// or the compare error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Health status.
    pub health: HealthStatus,
    /// Health reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health_message: String,
}

/// A condition on the application (`ComparisonError`, `SyncError`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// What happened, naming the file, object or revision concerned.
    pub message: String,
}

/// Result of one sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncResult {
    /// Everything planned was applied (and pruned).
    Succeeded,
    /// Something failed; see the message. Nothing was pruned.
    Failed,
    /// A guard refused the sync; nothing was written.
    Refused,
    /// Part of the sync is done; a later sync wave (or a `PruneLast` prune) waits for
    /// objects to become Healthy, and the next pass goes on (see the message).
    Running,
}

/// One sync, as recorded in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncRecord {
    /// Commit SHA synced.
    pub revision: String,
    /// Commit subject (what people read in an incident).
    pub subject: String,
    /// When the sync started (RFC 3339).
    pub started_at: String,
    /// When it finished (RFC 3339).
    pub finished_at: String,
    /// Why it ran: `NewRevision`, `SelfHeal` or `Manual`.
    pub reason: String,
    /// Outcome.
    pub result: SyncResult,
    /// Details (errors, refusal reason).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Objects applied.
    #[serde(default)]
    pub applied: Vec<String>,
    /// Objects pruned.
    #[serde(default)]
    pub pruned: Vec<String>,
}

/// The state of one application after its last pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    /// Application name.
    pub app: String,
    /// Environment name.
    pub environment: String,
    /// Revision (commit SHA) the last pass compared against.
    #[serde(default)]
    pub revision: String,
    /// Subject of that commit.
    #[serde(default)]
    pub subject: String,
    /// Revision of the last successful sync: what runs.
    #[serde(default)]
    pub synced_revision: String,
    /// Application sync status.
    #[serde(default)]
    pub sync: SyncStatus,
    /// Application health status.
    #[serde(default)]
    pub health: HealthStatus,
    /// Per-object status.
    #[serde(default)]
    pub resources: Vec<ResourceStatus>,
    /// Conditions (errors, refusals).
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `apiVersion kind` of every kind this application ever applied; prune candidates
    /// are listed from these, so the last object of a kind is still pruned.
    #[serde(default)]
    pub kinds: Vec<(String, String)>,
    /// The newest sync record, if any.
    #[serde(default)]
    pub last_sync: Option<SyncRecord>,
    /// Objects in the application's namespaces that no application tracks
    /// (`orphanedResources.warn`), as `Kind/namespace/name`. Reported, never deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphaned: Vec<String>,
}

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
        data.insert("status.json".to_string(), serde_json::to_string_pretty(status).unwrap_or_default());
        data.insert("history.json".to_string(), serde_json::to_string_pretty(history).unwrap_or_default());
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

/// Now, RFC 3339 (UTC).
pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Pushes `record` to the front of `history`, keeping at most [`HISTORY_LEN`]. A
/// record continuing the newest one (see [`continue_sync`]: same revision and start)
/// replaces it: one sync is one entry, however many passes its waves took.
pub fn push_history(history: &mut Vec<SyncRecord>, record: SyncRecord) {
    if history.first().is_some_and(|h| h.revision == record.revision && h.started_at == record.started_at) {
        history[0] = record;
        return;
    }
    history.insert(0, record);
    history.truncate(HISTORY_LEN);
}

/// The record of a pass that goes on with a `Running` sync (`previous`, at the same
/// revision, for the same reason): it keeps the sync's start and adds up what each
/// pass applied and pruned. Any other `next` is returned as it is.
pub fn continue_sync(previous: Option<&SyncRecord>, mut next: SyncRecord) -> SyncRecord {
    if let Some(p) =
        previous.filter(|p| p.result == SyncResult::Running && p.revision == next.revision && p.reason == next.reason)
    {
        next.started_at.clone_from(&p.started_at);
        let mut applied = p.applied.clone();
        applied.extend(next.applied.drain(..).filter(|a| !p.applied.contains(a)));
        applied.sort();
        next.applied = applied;
        let mut pruned = p.pruned.clone();
        pruned.append(&mut next.pruned);
        next.pruned = pruned;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(started: &str, result: SyncResult, applied: &[&str]) -> SyncRecord {
        SyncRecord {
            revision: "abc".into(),
            subject: "s".into(),
            started_at: started.into(),
            finished_at: String::new(),
            reason: "NewRevision".into(),
            result,
            message: String::new(),
            applied: applied.iter().map(|a| (*a).to_string()).collect(),
            pruned: vec![],
        }
    }

    #[test]
    fn a_sync_over_several_passes_is_one_entry() {
        let mut history = vec![record("t0", SyncResult::Succeeded, &["old"])];
        let first = record("t1", SyncResult::Running, &["a"]);
        push_history(&mut history, first.clone());
        let second = continue_sync(Some(&first), record("t2", SyncResult::Running, &[]));
        push_history(&mut history, second.clone());
        let last = continue_sync(Some(&second), record("t3", SyncResult::Succeeded, &["b"]));
        push_history(&mut history, last);
        assert_eq!(history.len(), 2);
        assert_eq!((history[0].started_at.as_str(), history[0].result), ("t1", SyncResult::Succeeded));
        assert_eq!(history[0].applied, ["a", "b"]);
        let fresh = continue_sync(Some(&history[0].clone()), record("t4", SyncResult::Succeeded, &["c"]));
        assert_eq!(fresh.started_at, "t4", "a finished sync is not continued");
        let running = record("t5", SyncResult::Running, &[]);
        let mut heal = record("t6", SyncResult::Succeeded, &[]);
        heal.reason = "SelfHeal".into();
        assert_eq!(continue_sync(Some(&running), heal).started_at, "t6", "another reason is another sync");
    }

    #[test]
    fn timestamps_have_one_width() {
        let t = now();
        assert_eq!(t.len(), "2026-11-29T18:00:00.000Z".len(), "{t}");
        assert!(t.parse::<jiff::Timestamp>().is_ok());
    }
}
