//! Status and history of each application, kept **in the cluster** so that they survive
//! a restart of plumb and `kubectl` can read them: one `Application` resource
//! (`applications.plumb.dev`, see `deploy/base/crd.yaml`) per application, named after
//! it, in the status namespace:
//!
//! ```text
//! kubectl -n plumb-system get applications.plumb.dev
//! kubectl -n plumb-system wait --for=condition=Ready application.plumb.dev/web
//! ```
//!
//! Its `spec` mirrors the policy file; its `status` subresource holds the
//! [`AppStatus`], conditions in Kubernetes' shape (with `Ready`) and the last
//! [`HISTORY_LEN`] [`SyncRecord`]s, newest first, capped to stay under the object size
//! limit with counts of what was left out ([`fit`]). Written only when the content
//! changed, with resourceVersion preconditions.

mod assess;
mod event;
pub mod fit;
mod published;
mod record;
pub mod store;

use serde::{Deserialize, Serialize};

pub use assess::{Exclusions, roll_up};
pub use event::EventReason;
pub use published::Published;
pub use record::{continue_sync, finished_running, merge_history, now, push_history, rfc3339};

use crate::health::HealthStatus;

/// Sync status of an object or an application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SyncStatus {
    /// Live equals Git.
    Synced,
    /// Live differs from Git (or is missing, or must be pruned).
    OutOfSync,
    /// Could not be compared (fetch, render or compare error).
    #[default]
    Unknown,
}

impl std::fmt::Display for SyncStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Synced => "Synced",
            Self::OutOfSync => "OutOfSync",
            Self::Unknown => "Unknown",
        })
    }
}

/// Roll-up: Unknown if any is Unknown, else OutOfSync if any is, else Synced.
pub fn roll_up_sync(statuses: impl IntoIterator<Item = SyncStatus>) -> SyncStatus {
    let mut out = SyncStatus::Synced;
    for s in statuses {
        match s {
            SyncStatus::Unknown => return SyncStatus::Unknown,
            SyncStatus::OutOfSync => out = SyncStatus::OutOfSync,
            SyncStatus::Synced => {}
        }
    }
    out
}

/// How many sync records are kept per application.
pub const HISTORY_LEN: usize = 10;

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
    pub type_: ConditionType,
    /// What happened, naming the file, object or revision concerned.
    pub message: String,
}

impl Condition {
    /// A condition of type `type_` saying `message`.
    pub fn new(type_: ConditionType, message: impl Into<String>) -> Self {
        Self { type_, message: message.into() }
    }
}

/// The types of [`Condition`]: errors (`…Error`) stop or fail something, warnings
/// (`…Warning`, `HealthStalled`, `NonConverging`, `PruneStuck`) report, the rest say what a sync is
/// doing. Serialized (and displayed) by the variant's name, as Argo CD's application
/// conditions are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionType {
    /// The desired state could not be read or compared (fetch, render, an object's
    /// comparison, listing the live objects): sync status is Unknown.
    ComparisonError,
    /// A sync failed, was refused by a guard, or was not started (shared objects with
    /// `FailOnSharedResource=true`).
    SyncError,
    /// A sync goes on over several passes: a later wave or a `PruneLast` prune waits for
    /// objects to become Healthy.
    SyncRunning,
    /// Live drifted from Git and selfHeal is off: nothing reverts it before the next
    /// commit or a manual sync.
    OutOfSync,
    /// Another application also tracks one of this application's objects.
    SharedResourceWarning,
    /// `orphanedResources.warn`: objects in the application's namespaces that no
    /// application tracks.
    OrphanedResourceWarning,
    /// Objects have been Progressing longer than the environment's stall limit.
    HealthStalled,
    /// selfHeal gave up: the drift it reverted came straight back at the same revision.
    NonConverging,
    /// selfHeal waits before its next attempt (backoff 2 s ×3, capped at 300 s).
    SelfHealBackoff,
    /// The render succeeded but something in Git should be fixed (server-set fields
    /// removed, …); each names the file and document.
    RenderWarning,
    /// Objects plumb deleted (or someone did) still exist after the environment's stall
    /// limit, held by finalizers: the condition names each object and its finalizers.
    PruneStuck,
    /// A watch of a kind the application uses fails (e.g. 403: plumb may not list or
    /// watch it); named with the error.
    WatchError,
    /// The tracked ref moved to a commit that does not descend from the last synced
    /// one: automated sync holds until a person syncs.
    HistoryRewritten,
    /// The policy file on disk was changed and rejected (its errors, file:line): the
    /// application runs the previous policy.
    PolicyWarning,
    /// `plumb suspend`: automated sync and selfHeal are paused until a time; the
    /// message names who paused, why and until when.
    SyncPaused,
    /// `plumb rollback`: the application is pinned to a recorded revision; new commits
    /// of the tracked ref are not synced until the pin is released.
    Pinned,
}

impl ConditionType {
    /// The type's name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ComparisonError => "ComparisonError",
            Self::SyncError => "SyncError",
            Self::SyncRunning => "SyncRunning",
            Self::OutOfSync => "OutOfSync",
            Self::SharedResourceWarning => "SharedResourceWarning",
            Self::OrphanedResourceWarning => "OrphanedResourceWarning",
            Self::HealthStalled => "HealthStalled",
            Self::NonConverging => "NonConverging",
            Self::SelfHealBackoff => "SelfHealBackoff",
            Self::RenderWarning => "RenderWarning",
            Self::PruneStuck => "PruneStuck",
            Self::WatchError => "WatchError",
            Self::HistoryRewritten => "HistoryRewritten",
            Self::SyncPaused => "SyncPaused",
            Self::PolicyWarning => "PolicyWarning",
            Self::Pinned => "Pinned",
        }
    }

    /// Whether the name ends with `suffix` (`Error`, `Warning`).
    pub fn ends_with(self, suffix: &str) -> bool {
        self.as_str().ends_with(suffix)
    }
}

impl std::fmt::Display for ConditionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ConditionType {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ConditionType {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A commit's short name as Git shows it: the first 7 characters of `revision` (all of
/// it when shorter; never splits a character, whatever the input).
pub fn short(revision: &str) -> &str {
    revision.get(..revision.char_indices().nth(7).map_or(revision.len(), |(i, _)| i)).unwrap_or(revision)
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

impl SyncResult {
    /// `Succeeded`, `Failed`, `Refused` or `Running`: the word the history stores, the
    /// CLI and page show, and the `Sync…` Event reasons end with.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncResult::Succeeded => "Succeeded",
            SyncResult::Failed => "Failed",
            SyncResult::Refused => "Refused",
            SyncResult::Running => "Running",
        }
    }
}

impl std::fmt::Display for SyncResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a sync is started, as the history records it (serialized by its variant's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SyncReason {
    /// Automated sync: the revision changed since the last sync.
    NewRevision,
    /// Automated sync with selfHeal: live drifted at the same revision.
    SelfHeal,
    /// `plumb sync`: a person asked for it, whatever the policy.
    Manual,
    /// The new revision is a pin (`plumb rollback`): recorded instead of `NewRevision`.
    /// The gate never starts a sync for this reason; the driver names it so.
    Rollback,
}

impl SyncReason {
    /// `NewRevision`, `SelfHeal`, `Manual` or `Rollback`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncReason::NewRevision => "NewRevision",
            SyncReason::SelfHeal => "SelfHeal",
            SyncReason::Manual => "Manual",
            SyncReason::Rollback => "Rollback",
        }
    }
}

impl std::fmt::Display for SyncReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for SyncReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
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
    /// Why it ran.
    pub reason: SyncReason,
    /// Outcome.
    pub result: SyncResult,
    /// Details (errors, refusal reason).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Objects applied.
    #[serde(default)]
    pub applied: Vec<String>,
    /// Those of `applied` that were deleted and created again (`Force=true`: Git changed
    /// a field that cannot change), shown as `recreated` rather than `applied`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recreated: Vec<String>,
    /// Objects pruned.
    #[serde(default)]
    pub pruned: Vec<String>,
    /// Objects applied but not named in `applied` (stored records name at most
    /// [`fit::RECORD_OBJECTS`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub applied_omitted: usize,
    /// Objects pruned but not named in `pruned`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pruned_omitted: usize,
}

impl SyncRecord {
    /// A sync of `revision` for `reason` that has not started or done anything yet:
    /// `Succeeded` with no subject, times, message or objects; set the rest with struct
    /// update syntax (`SyncRecord { result, ..SyncRecord::new(sha, reason) }`).
    pub fn new(revision: impl Into<String>, reason: SyncReason) -> Self {
        Self {
            revision: revision.into(),
            subject: String::new(),
            started_at: String::new(),
            finished_at: String::new(),
            reason,
            result: SyncResult::Succeeded,
            message: String::new(),
            applied: vec![],
            recreated: vec![],
            pruned: vec![],
            applied_omitted: 0,
            pruned_omitted: 0,
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &usize) -> bool {
    *n == 0
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
    /// Per-object status (in the status ConfigMap: those not Synced and Healthy first,
    /// then the others while they fit; see [`fit`]).
    #[serde(default)]
    pub resources: Vec<ResourceStatus>,
    /// Objects of this application left out of `resources` when stored ([`fit`]); 0
    /// when all are listed. The sync and health status cover all of them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resources_omitted: usize,
    /// Conditions (errors, refusals). Conditions of a type this build does not know
    /// (written by another version) are dropped when read: every pass makes them anew,
    /// and the rest of the status must still load.
    #[serde(default, deserialize_with = "known_conditions")]
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
    /// Jobs of this application that finished and that the cluster removes by a rule
    /// their manifest declares (`spec.ttlSecondsAfterFinished`): while Git declares the
    /// same manifest, their absence is that removal, not drift (see
    /// [`crate::compare::object::finished_digest`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finished: Vec<Finished>,
    /// The render this pass used: its tool, the time it took when it ran (a cached
    /// render reuses it) and the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<RenderTime>,
    /// Automated sync and selfHeal paused (`plumb suspend`), while in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<Suspension>,
    /// Pinned to a recorded revision (`plumb rollback`), while in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Pin>,
    /// The value of the last sync request ([`SYNC_ANNOTATION`]) a pass acted on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sync_request: String,
}

/// A pause of automated sync and selfHeal (`plumb suspend APP --for 2h --reason …`),
/// recorded as the annotation [`SUSPEND_ANNOTATION`] on the application's resource.
/// It ends by itself at `until`; manual syncs still run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    /// End of the pause, RFC 3339 UTC.
    pub until: String,
    /// Who paused (the Kubernetes user the API server named to the CLI).
    #[serde(default)]
    pub by: String,
    /// Why (free text, shown as given).
    #[serde(default)]
    pub reason: String,
}

impl Suspension {
    /// Whether the pause is still in force at `now` (an unreadable `until` is not).
    pub fn in_force(&self, now: jiff::Timestamp) -> bool {
        self.until.parse::<jiff::Timestamp>().is_ok_and(|until| until > now)
    }
}

/// A pin to a recorded revision (`plumb rollback APP REVISION`), recorded as the
/// annotation [`ROLLBACK_ANNOTATION`]: passes compare and sync that revision instead of
/// the tracked ref's head until `plumb rollback APP --release`, or the next commit on
/// the tracked ref when `until_next_commit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The revision (commit SHA, or a prefix of one) to run.
    pub revision: String,
    /// Who asked.
    #[serde(default)]
    pub by: String,
    /// When, RFC 3339 UTC.
    #[serde(default)]
    pub at: String,
    /// Release the pin when the tracked ref moves past `tracked`.
    #[serde(default)]
    pub until_next_commit: bool,
    /// Allow a revision that is not an ancestor of the tracked ref's head.
    #[serde(default)]
    pub force: bool,
    /// The tracked ref's head when the pin was first seen (set by plumb).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tracked: String,
}

/// Annotation of a pass request on an application's resource (value: a time): the
/// serving leader runs a pass of the application ([`crate::leader::forward`]).
pub const REFRESH_ANNOTATION: &str = "plumb.dev/refresh-requested";
/// Annotation of a sync request (value: a time): the serving leader runs a manual
/// sync of the application, as `plumb sync --local` would.
pub const SYNC_ANNOTATION: &str = "plumb.dev/sync-requested";
/// Annotation holding a [`Suspension`] as JSON.
pub const SUSPEND_ANNOTATION: &str = "plumb.dev/suspend";
/// Annotation holding a [`Pin`] as JSON.
pub const ROLLBACK_ANNOTATION: &str = "plumb.dev/rollback";

/// How long the stages of an application's last pass took, in milliseconds (kept in
/// memory by the running plumb, not stored: they change at every pass).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PassTimings {
    /// When the pass started, RFC 3339 UTC.
    pub at: String,
    /// Fetch and render (a cached render costs nothing).
    pub source_millis: u64,
    /// Comparison with the live objects (dry-runs included).
    pub compare_millis: u64,
    /// The sync (applies, prunes), 0 when there was none.
    pub sync_millis: u64,
    /// The whole pass.
    pub total_millis: u64,
}

/// How long an application's render took, and with what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderTime {
    /// `plain`, `kustomize`, `helm`, …
    pub tool: String,
    /// Wall-clock milliseconds of the render (child processes included).
    pub millis: u64,
    /// The revision rendered.
    pub revision: String,
}

/// A Job that finished, remembered by the digest of its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// `Kind[.group]/namespace/name`.
    pub object: String,
    /// [`crate::compare::object::finished_digest`] of the manifest that ran.
    pub manifest: String,
    /// Its health when it finished (Healthy: completed; Degraded: failed).
    pub health: HealthStatus,
    /// The health message then (`job completed`, `job failed: …`).
    pub message: String,
}

/// The conditions of a stored status whose type this build knows.
fn known_conditions<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Condition>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Known(Condition),
        Other(serde::de::IgnoredAny),
    }
    Ok(Vec::<Stored>::deserialize(d)?
        .into_iter()
        .filter_map(|c| match c {
            Stored::Known(c) => Some(c),
            Stored::Other(_) => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_stored_status_loads_whatever_its_condition_types() {
        let stored = r#"{"app": "web", "environment": "dev", "syncedRevision": "abc", "sync": "OutOfSync", "health": "Healthy",
            "conditions": [{"type": "SyncError", "message": "m"}, {"type": "FromANewerPlumb", "message": "x"}],
            "kinds": [["v1", "ConfigMap"]]}"#;
        let st: AppStatus = serde_json::from_str(stored).unwrap();
        assert_eq!(st.synced_revision, "abc");
        assert_eq!(st.kinds, [("v1".to_string(), "ConfigMap".to_string())]);
        assert_eq!(st.conditions, [Condition::new(ConditionType::SyncError, "m")]);
        // and conditions are written by their type's name, as before
        let json = serde_json::to_value(&st.conditions).unwrap();
        assert_eq!(json, serde_json::json!([{"type": "SyncError", "message": "m"}]));
    }
}
