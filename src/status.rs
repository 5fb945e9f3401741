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

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

pub use assess::{Exclusions, roll_up};
pub use event::EventReason;
pub use published::Published;
pub use record::{continue_sync, finished_running, fold_failure, merge_history, now, push_history, rfc3339};

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
#[serde(rename_all = "camelCase")]
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
    #[serde(alias = "health_message")]
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
    /// application runs the previous policy. Also: a generated application kept while
    /// its applicationSet generates nothing (held, [`crate::config::generators::Held`]).
    PolicyWarning,
    /// `plumb suspend`: automated sync and selfHeal are paused until a time; the
    /// message names who paused, why and until when.
    SyncPaused,
    /// `plumb rollback`: the application is pinned to a recorded revision; new commits
    /// of the tracked ref are not synced until the pin is released.
    Pinned,
    /// ignoreDifferences rules of the application or its environment match no kind the
    /// cluster serves or the render declares (a typo ignores nothing): named each.
    IgnoreDifferencesWarning,
    /// Objects labelled `plumb.dev/app` for the application carry no tracking-id and
    /// Git does not declare them: plumb neither compares nor prunes them (named).
    UntrackedResourceWarning,
    /// Two renders of the same inputs differed (a Helm chart calling `lookup`, `rand*`,
    /// `gen*`, `now`): one condition per object, naming its fields. A new object is
    /// created with the first render's value; an existing one keeps its live value
    /// (plumb does not write those fields), so the application converges instead of
    /// rotating the value on every render.
    NonDeterministicRender,
    /// The application left the policy and its decommission waits for a person: the
    /// mass guard (`plumb decommission APP… --confirm`) or data-loss class objects
    /// (`plumb decommission APP --approve`); the message names which and the command.
    DecommissionPending,
    /// The application left the policy and its objects are being deleted
    /// (`deletionPolicy: delete|wait`): the message says what is left.
    Decommissioning,
    /// `dependsOn`: automated sync and selfHeal wait until every dependency is Synced
    /// and Healthy at its current revision; the message names which and why.
    WaitingForDependency,
    /// A sync window holds syncs (`syncWindows`): the message names the window and
    /// when syncs may next start.
    SyncWindowClosed,
    /// `verifyCommits`: the newest revision is not signed by a trusted key (unsigned,
    /// an unknown key, a bad signature, a key expired or outside its validity): it is
    /// not synced; the message names the commit, its author and why, and the last
    /// verified revision the application keeps.
    UnverifiedRevision,
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
            Self::IgnoreDifferencesWarning => "IgnoreDifferencesWarning",
            Self::UntrackedResourceWarning => "UntrackedResourceWarning",
            Self::NonDeterministicRender => "NonDeterministicRender",
            Self::DecommissionPending => "DecommissionPending",
            Self::Decommissioning => "Decommissioning",
            Self::WaitingForDependency => "WaitingForDependency",
            Self::SyncWindowClosed => "SyncWindowClosed",
            Self::UnverifiedRevision => "UnverifiedRevision",
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
    /// It was `Running` (waiting for a wave's health, `PruneLast`, a hook) when a sync
    /// of a newer revision started: that sync replaced the wait (Flux's
    /// `CancelHealthCheckOnNewRevision`). What it applied stays applied.
    Superseded,
}

impl SyncResult {
    /// `Succeeded`, `Failed`, `Refused`, `Running` or `Superseded`: the word the history stores, the
    /// CLI and page show, and the `Sync…` Event reasons end with.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncResult::Succeeded => "Succeeded",
            SyncResult::Failed => "Failed",
            SyncResult::Refused => "Refused",
            SyncResult::Running => "Running",
            SyncResult::Superseded => "Superseded",
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
#[serde(rename_all = "camelCase")]
pub struct SyncRecord {
    /// Commit SHA synced.
    pub revision: String,
    /// Commit subject (what people read in an incident).
    pub subject: String,
    /// When the sync started (RFC 3339).
    #[serde(alias = "started_at")]
    pub started_at: String,
    /// When it finished (RFC 3339).
    #[serde(alias = "finished_at")]
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
    #[serde(alias = "applied_omitted")]
    pub applied_omitted: usize,
    /// Objects pruned but not named in `pruned`.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[serde(alias = "pruned_omitted")]
    pub pruned_omitted: usize,
    /// Identical failures folded into this entry after the first (same revision,
    /// reason, message and objects; see [`record::push_history`]): `started_at` is the
    /// first one's start, `finished_at` the last one's end.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: usize,
    /// The chart synced (`source.chart`): repository, name, resolved version, digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<crate::render::ChartRef>,
    /// The hooks this sync ran or skipped ([`crate::plan::hooks`]), in the order they
    /// started: at most [`HOOK_RUNS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
    /// Hooks run but not named in `hooks`.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[serde(alias = "hooks_omitted")]
    pub hooks_omitted: usize,
    /// The revision failed `verifyCommits` and was synced because this user asked
    /// (`plumb sync --allow-unverified`, [`ALLOW_UNVERIFIED_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "allowed_unverified_by")]
    pub allowed_unverified_by: String,
    /// This is the application's first sync (Helm's install: `pre-install` and
    /// `post-install` hooks run, `pre-upgrade` and `post-upgrade` do not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub install: bool,
}

/// Most hooks one sync record names ([`SyncRecord::hooks`]); the rest are counted.
pub const HOOK_RUNS: usize = 20;
/// Most bytes of one hook's message ([`HookRun::message`]).
pub const HOOK_MESSAGE_BYTES: usize = 512;

/// One hook of a sync, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    /// The phase it ran in (`PreSync`, `Sync`, `PostSync`, `SyncFail`, …).
    pub phase: String,
    /// Its live object, `kind/namespace/name` (the name carries the revision).
    pub object: String,
    /// `Succeeded`, `Failed`, `Running`, `TimedOut` or `Skipped`.
    pub result: String,
    /// When it was created (RFC 3339; empty when skipped).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "started_at")]
    pub started_at: String,
    /// When it finished (RFC 3339; empty while it runs).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[serde(alias = "finished_at")]
    pub finished_at: String,
    /// Seconds from start to finish (or to now while it runs).
    #[serde(default)]
    #[serde(alias = "duration_seconds")]
    pub duration_seconds: u64,
    /// Why it failed or was skipped (at most [`HOOK_MESSAGE_BYTES`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl HookRun {
    /// The run's line in `plumb history`: `  hook PreSync Job/web/migrate-0123456 Succeeded 12s`.
    pub fn line(&self) -> String {
        let mut out = format!("hook {} {} {} {}s", self.phase, self.object, self.result, self.duration_seconds);
        if !self.message.is_empty() {
            out.push_str(": ");
            out.push_str(&self.message);
        }
        out
    }
}

/// `hooks` merged into `into` (same phase and object: the newer one wins), at most
/// [`HOOK_RUNS`] kept, the rest counted in `omitted`; messages cut at
/// [`HOOK_MESSAGE_BYTES`].
pub fn merge_hook_runs(into: &mut Vec<HookRun>, omitted: &mut usize, hooks: Vec<HookRun>) {
    for mut h in hooks {
        if h.message.len() > HOOK_MESSAGE_BYTES {
            let mut end = HOOK_MESSAGE_BYTES - 3;
            while !h.message.is_char_boundary(end) {
                end -= 1;
            }
            h.message.truncate(end);
            h.message.push('…');
        }
        let room = into.len() < HOOK_RUNS;
        match into.iter_mut().find(|o| o.phase == h.phase && o.object == h.object) {
            Some(o) => *o = h,
            None if room => into.push(h),
            None => *omitted += 1,
        }
    }
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
            chart: None,
            pruned_omitted: 0,
            retries: 0,
            hooks: vec![],
            hooks_omitted: 0,
            allowed_unverified_by: String::new(),
            install: false,
        }
    }
}

impl SyncRecord {
    /// How many syncs this entry stands for, shown after its result: `""`, or ` ×4`
    /// when three identical failures were folded into it (see [`SyncRecord::retries`]).
    pub fn times(&self) -> String {
        if self.retries == 0 { String::new() } else { format!(" ×{}", self.retries + 1) }
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
    /// The chart of `source.chart` the last render used: repository, name, the version
    /// resolved and its digest; `None` for other sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<crate::render::ChartRef>,
    /// Automated sync and selfHeal paused (`plumb suspend`), while in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<Suspension>,
    /// Pinned to a recorded revision (`plumb rollback`), while in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Pin>,
    /// The value of the last sync request ([`SYNC_ANNOTATION`]) a pass acted on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sync_request: String,
    /// What the environment's sync windows said at the last pass (the active windows,
    /// what they hold, the next change), when any applies to the application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_windows: Option<SyncWindows>,
    /// The SHA-256 (hex) of what the last pass kept on the resource's `spec` for a
    /// later decommission (its record and delete hooks,
    /// [`crate::plan::decommission::digest`]): written in the status subresource, which
    /// only plumb writes, so a `spec` changed by someone else is not trusted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub decommission_digest: String,
    /// The replica and shard whose pass wrote this status (`plumb serve`; see
    /// [`crate::leader`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciler: Option<Reconciler>,
    /// The seal of the last pass that found every object Synced and wrote nothing
    /// ([`crate::compare::seal`], 64 hex characters): lets the next owner of the
    /// application (another replica, a restart) skip the dry-runs while nothing changed.
    /// Empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub synced_seal: String,
    /// The signature check of the newest revision of the tracked ref (`verifyCommits`;
    /// see [`crate::verify`]); `None` when the application verifies nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
}

/// What the signature check of a revision found (`verifyCommits`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// The commit checked (in mode `tag`: the commit the tag points at).
    pub revision: String,
    /// `head` (the commit is signed) or `tag` (the annotated tag is).
    pub mode: String,
    /// Signed by a trusted key.
    pub verified: bool,
    /// The author of the commit (mode `tag`: the tagger), `Name <email>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub author: String,
    /// Who signed (allowed signers principals or OpenPGP user id), when verified.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signer: String,
    /// The signing key's fingerprint, when the signature names one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
    /// Why the revision is not trusted (`unsigned`, `signed by an unknown key …`),
    /// empty when verified.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Synced anyway by `plumb sync --allow-unverified`: who asked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub allowed_by: String,
}

impl Verification {
    /// One line for `plumb get` and `plumb diff`: `abc1234 signed by ada@example.com
    /// (SHA256:…)`, `abc1234 not trusted: unsigned`, or, synced anyway, who allowed it.
    pub fn summary(&self) -> String {
        let rev = short(&self.revision);
        let key = if self.fingerprint.is_empty() { String::new() } else { format!(" ({})", self.fingerprint) };
        if self.verified {
            format!("{rev} signed by {}{key} [{}]", self.signer, self.mode)
        } else if !self.allowed_by.is_empty() {
            format!(
                "{rev} not trusted: {}; synced by {} with --allow-unverified [{}]",
                self.reason, self.allowed_by, self.mode
            )
        } else {
            format!("{rev} not trusted: {} [{}]", self.reason, self.mode)
        }
    }
}

/// Who reconciled an application: the replica (its identity, the pod name in the
/// cluster), the shard of the application and how many there are, and the shard
/// Lease's `leaseTransitions` when the replica took it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconciler {
    /// The replica's identity.
    pub replica: String,
    /// The application's shard (0-based).
    pub shard: u32,
    /// How many shards there are.
    pub shards: u32,
    /// The shard Lease's `leaseTransitions` when this replica took it.
    pub lease_transitions: i32,
}

impl Reconciler {
    /// The reconciler a pass inside `fence` names.
    pub fn of(fence: &crate::fence::Fence) -> Self {
        Self {
            replica: fence.replica.to_string(),
            shard: fence.shard,
            shards: fence.shards,
            lease_transitions: fence.hold.transitions,
        }
    }

    /// `replica (shard 2/6)`.
    pub fn summary(&self) -> String {
        format!("{} (shard {}/{})", self.replica, self.shard, self.shards)
    }
}

/// What the sync windows say for one application at one time (kept in its status;
/// made by [`crate::plan::windows::verdict`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncWindows {
    /// Why automated sync and selfHeal are held now, naming the window and when syncs
    /// may next start; `None`: they may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<String>,
    /// Why a person's sync is held now; `None`: it may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_closed: Option<String>,
    /// The windows that apply and are active now, each described with its end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// When whether automated sync may run changes next (RFC 3339, UTC); `None` when no
    /// window applies, or nothing changes within [`crate::plan::windows::HORIZON`] window boundaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_change: Option<String>,
}

impl SyncWindows {
    /// On one line: whether automated and manual syncs may run, the active windows,
    /// the next change (`plumb get`, the status page).
    pub fn summary(&self) -> String {
        let state = match (&self.closed, &self.manual_closed) {
            (None, _) => "automated sync allowed",
            (Some(_), None) => "automated sync held, manual sync allowed",
            (Some(_), Some(_)) => "all syncs held",
        };
        let active = if self.active.is_empty() {
            "no window active".to_string()
        } else {
            format!("active: {}", self.active.join(", "))
        };
        let next = self.next_change.as_deref().map_or_else(String::new, |t| format!("; next change at {t}"));
        format!("{state}; {active}{next}")
    }

    /// Whether any window applies (there is something to show).
    pub fn any(&self) -> bool {
        self.closed.is_some() || self.manual_closed.is_some() || !self.active.is_empty() || self.next_change.is_some()
    }
}

/// A pause of automated sync and selfHeal (`plumb suspend APP --for 2h --reason …`),
/// recorded as the annotation [`SUSPEND_ANNOTATION`] on the application's resource.
/// It ends by itself at `until`; manual syncs still run.
///
/// Everything in the annotation is what the writing client says: `by` is a claim
/// (the CLI writes the user its `SelfSubjectReview` named, any client with `patch`
/// may write any name), shown as "claimed by", never as who paused. plumb caps `until`
/// at its environment's `maxPause` after it first saw the pause ([`Suspension::capped`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    /// End of the pause, RFC 3339 UTC (in the status: the end in force, capped).
    pub until: String,
    /// Who the writing client says paused: a claim, not verified.
    #[serde(default)]
    pub by: String,
    /// Why (free text, shown as given).
    #[serde(default)]
    pub reason: String,
    /// The end the request asked, when `maxPause` cut it short (set by plumb).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub asked_until: String,
    /// When plumb first saw the pause, RFC 3339 UTC: `maxPause` counts from here (set
    /// by plumb, kept in the status while the same pause stays).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub seen: String,
}

impl Suspension {
    /// Whether the pause is still in force at `now` (an unreadable `until` is not).
    pub fn in_force(&self, now: jiff::Timestamp) -> bool {
        self.until.parse::<jiff::Timestamp>().is_ok_and(|until| until > now)
    }

    /// The pause in force for request `self` (as read from the annotation): seen at
    /// `now` unless `previous` (the status's pause) is the same request, whose `seen`
    /// is kept; `until` cut to `seen + max` (the environment's `maxPause`), the asked
    /// end then kept in `asked_until`. An unreadable `until` is left as is (never in
    /// force). Pure.
    pub fn capped(mut self, previous: Option<&Suspension>, max: std::time::Duration, now: jiff::Timestamp) -> Self {
        let same = previous.filter(|p| {
            let asked = if p.asked_until.is_empty() { &p.until } else { &p.asked_until };
            p.by == self.by && p.reason == self.reason && *asked == self.until && !p.seen.is_empty()
        });
        let seen = same.and_then(|p| p.seen.parse::<jiff::Timestamp>().ok()).unwrap_or(now);
        self.seen = seen.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        self.asked_until.clear();
        let limit = jiff::SignedDuration::try_from(max).ok().and_then(|m| seen.checked_add(m).ok());
        if let (Ok(until), Some(limit)) = (self.until.parse::<jiff::Timestamp>(), limit)
            && until > limit
        {
            self.asked_until = std::mem::replace(&mut self.until, limit.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
        }
        self
    }

    /// The pause as status, Events and the CLI say it: `until T (capped by maxPause
    /// 604800s; asked until T2): REASON (claimed by NAME)`.
    pub fn describe(&self, max: std::time::Duration) -> String {
        let mut out = format!("until {}", self.until);
        if !self.asked_until.is_empty() {
            let _ = write!(
                out,
                " (capped by the environment's maxPause {}; asked until {})",
                crate::config::shown_duration(max),
                self.asked_until
            );
        }
        let _ = write!(out, ": {}", self.reason);
        if !self.by.is_empty() {
            let _ = write!(out, " (claimed by {}, not verified)", self.by);
        }
        out
    }
}

/// A pin to a recorded revision (`plumb rollback APP REVISION`), recorded as the
/// annotation [`ROLLBACK_ANNOTATION`]: passes compare and sync that revision instead of
/// the tracked ref's head until `plumb rollback APP --release`, or the next commit on
/// the tracked ref when `until_next_commit`.
///
/// A pin names a commit: what the request names (a SHA, a prefix, or a branch or tag)
/// is resolved once, when plumb first sees the pin, and the full commit id recorded in
/// the status's `pinned.revision`; later passes run that commit and never resolve the
/// name again (a pin to a branch does not follow its pushes). A commit that is neither
/// in the tracked ref's history nor a revision synced before runs only with `force` and
/// [`ROLLBACK_OVERRIDE_ANNOTATION`], a right apart from `patch` (see
/// [`ROLLBACK_OVERRIDE_POLICY_YAML`]; Argo CD separates `override` from `sync` so).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The revision to run: in the request, as asked; in the status, the full commit id
    /// it was resolved to.
    pub revision: String,
    /// Who the writing client says asked: a claim, not verified.
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
    /// The revision the request named, as written (set by plumb in the status: the
    /// same request is not resolved again).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub requested: String,
}

/// Annotation that lets a pin ([`ROLLBACK_ANNOTATION`]) with `force` run a commit
/// outside the tracked history; its value must equal the pin's `revision` as written.
/// Setting or changing it needs the verb `override` on the application's resource,
/// which the API server checks for the requesting user by
/// [`ROLLBACK_OVERRIDE_POLICY_YAML`]; plumb honours it only while that policy is
/// installed.
pub const ROLLBACK_OVERRIDE_ANNOTATION: &str = "plumb.dev/rollback-override";

/// Name of the ValidatingAdmissionPolicy and of its binding that check the `override`
/// right ([`ROLLBACK_OVERRIDE_POLICY_YAML`]).
pub const ROLLBACK_OVERRIDE_POLICY: &str = "plumb-rollback-override";

/// The ValidatingAdmissionPolicy and binding (Kubernetes >= 1.30) that deny setting or
/// changing [`ROLLBACK_OVERRIDE_ANNOTATION`] to a user without the verb `override` on
/// `applications.plumb.dev/APP`, as shipped in `deploy/admission/`.
pub const ROLLBACK_OVERRIDE_POLICY_YAML: &str = include_str!("../deploy/admission/rollback-override.yaml");

/// Annotation that lets one commit that fails `verifyCommits` be synced
/// (`plumb sync APP --allow-unverified`). Its value is `COMMIT USER`: the full commit
/// id, a space, and the user who asked as the API server authenticated them. Setting or
/// changing it needs the verb `allow-unverified` on the application's resource and a
/// `USER` equal to the requesting user, both checked by the API server through
/// [`ALLOW_UNVERIFIED_POLICY_YAML`]; plumb honours it only while that policy is
/// installed as shipped, and only for the commit it names.
pub const ALLOW_UNVERIFIED_ANNOTATION: &str = "plumb.dev/allow-unverified";

/// Name of the ValidatingAdmissionPolicy and of its binding that check the
/// `allow-unverified` right ([`ALLOW_UNVERIFIED_POLICY_YAML`]).
pub const ALLOW_UNVERIFIED_POLICY: &str = "plumb-allow-unverified";

/// The ValidatingAdmissionPolicy and binding (Kubernetes >= 1.30) that deny setting or
/// changing [`ALLOW_UNVERIFIED_ANNOTATION`] to a user without the verb
/// `allow-unverified` on `applications.plumb.dev/APP`, or with a value naming someone
/// else, as shipped in `deploy/admission/`.
pub const ALLOW_UNVERIFIED_POLICY_YAML: &str = include_str!("../deploy/admission/allow-unverified.yaml");

/// The commit and the user an [`ALLOW_UNVERIFIED_ANNOTATION`] value names (`COMMIT
/// USER`); `None` for a value of another shape. Pure.
pub fn allowance(value: &str) -> Option<(&str, &str)> {
    let (commit, by) = value.trim().split_once(' ')?;
    let hex = (commit.len() == 40 || commit.len() == 64) && commit.bytes().all(|b| b.is_ascii_hexdigit());
    (hex && !by.trim().is_empty()).then_some((commit, by.trim()))
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

    /// Every key of `v`, at any depth.
    fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    out.push(k.clone());
                    keys(v, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }

    /// One casing in the status and its history: camelCase keys only; records and
    /// objects stored with snake_case keys by earlier versions still read the same.
    #[test]
    fn the_status_is_camel_case_and_snake_case_records_still_read() {
        let run = HookRun {
            phase: "PreSync".into(),
            object: "Job/web/migrate".into(),
            result: "Succeeded".into(),
            started_at: "t0".into(),
            finished_at: "t1".into(),
            duration_seconds: 3,
            message: "done".into(),
        };
        let record = SyncRecord {
            subject: "web: bump".into(),
            message: "m".into(),
            applied: vec!["a".into()],
            recreated: vec!["r".into()],
            pruned: vec!["p".into()],
            applied_omitted: 1,
            pruned_omitted: 2,
            retries: 3,
            hooks: vec![run],
            hooks_omitted: 4,
            allowed_unverified_by: "alice".into(),
            install: true,
            ..SyncRecord::new("a".repeat(40), SyncReason::NewRevision)
        };
        let status = AppStatus {
            app: "web".into(),
            resources: vec![ResourceStatus {
                object: "Deployment.apps/web/web".into(),
                sync: SyncStatus::Synced,
                reason: String::new(),
                health: HealthStatus::Progressing,
                health_message: "1/2 replicas available".into(),
            }],
            last_sync: Some(record.clone()),
            ..AppStatus::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        let mut all = vec![];
        keys(&json, &mut all);
        assert!(all.contains(&"startedAt".to_string()) && all.contains(&"healthMessage".to_string()), "{all:?}");
        let snake: Vec<&String> = all.iter().filter(|k| k.contains('_')).collect();
        assert!(snake.is_empty(), "snake_case keys: {snake:?}");
        // what an earlier version stored
        let mut old = serde_json::to_value(&record).unwrap();
        let o = old.as_object_mut().unwrap();
        for (new, was) in [
            ("startedAt", "started_at"),
            ("finishedAt", "finished_at"),
            ("appliedOmitted", "applied_omitted"),
            ("prunedOmitted", "pruned_omitted"),
            ("hooksOmitted", "hooks_omitted"),
            ("allowedUnverifiedBy", "allowed_unverified_by"),
        ] {
            let v = o.remove(new).unwrap();
            o.insert(was.into(), v);
        }
        let hook = o.get_mut("hooks").unwrap()[0].as_object_mut().unwrap();
        for (new, was) in
            [("startedAt", "started_at"), ("finishedAt", "finished_at"), ("durationSeconds", "duration_seconds")]
        {
            let v = hook.remove(new).unwrap();
            hook.insert(was.into(), v);
        }
        assert_eq!(serde_json::from_value::<SyncRecord>(old).unwrap(), record);
        let old_resource = serde_json::json!({"object": "v1/ConfigMap/a/b", "sync": "Synced", "health": "Healthy", "health_message": "ok"});
        assert_eq!(serde_json::from_value::<ResourceStatus>(old_resource).unwrap().health_message, "ok");
    }

    fn at(t: &str) -> jiff::Timestamp {
        t.parse().unwrap()
    }

    #[test]
    fn hook_runs_merge_by_phase_and_object_within_their_bound() {
        let run = |object: &str, result: &str, message: &str| HookRun {
            phase: "PreSync".into(),
            object: object.into(),
            result: result.into(),
            started_at: String::new(),
            finished_at: String::new(),
            duration_seconds: 0,
            message: message.into(),
        };
        let (mut runs, mut omitted) = (vec![run("Job/a", "Running", "")], 0);
        merge_hook_runs(
            &mut runs,
            &mut omitted,
            vec![run("Job/a", "Succeeded", ""), run("Job/b", "Failed", &"x".repeat(600))],
        );
        assert_eq!(runs.iter().map(|r| r.result.as_str()).collect::<Vec<_>>(), ["Succeeded", "Failed"]);
        assert!(
            runs[1].message.len() <= HOOK_MESSAGE_BYTES && runs[1].message.ends_with('…'),
            "{}",
            runs[1].message.len()
        );
        let more: Vec<HookRun> = (0..25).map(|i| run(&format!("Job/m{i}"), "Running", "")).collect();
        merge_hook_runs(&mut runs, &mut omitted, more);
        assert_eq!((runs.len(), omitted), (HOOK_RUNS, 7));
        // a sync over several passes keeps its hooks in one record
        let first = SyncRecord {
            result: SyncResult::Running,
            hooks: vec![run("Job/a", "Running", "")],
            install: true,
            ..SyncRecord::new("abc", SyncReason::NewRevision)
        };
        let next = SyncRecord {
            hooks: vec![run("Job/a", "Succeeded", ""), run("Job/p", "Running", "")],
            ..SyncRecord::new("abc", SyncReason::NewRevision)
        };
        let merged = continue_sync(Some(&first), next);
        assert_eq!(
            merged.hooks.iter().map(|r| (r.object.as_str(), r.result.as_str())).collect::<Vec<_>>(),
            [("Job/a", "Succeeded"), ("Job/p", "Running")]
        );
        assert!(merged.install, "the first sync stays the first across its passes");
    }

    #[test]
    fn a_pause_to_the_year_9000_ends_at_max_pause_after_plumb_first_saw_it() {
        let week = std::time::Duration::from_secs(7 * 24 * 3600);
        let asked = Suspension {
            until: "9000-01-01T00:00:00Z".into(),
            by: "the-ceo".into(),
            reason: "forever".into(),
            ..Suspension::default()
        };
        let first = asked.clone().capped(None, week, at("2026-12-01T10:00:00Z"));
        assert_eq!(first.until, "2026-12-08T10:00:00Z");
        assert_eq!((first.asked_until.as_str(), first.seen.as_str()), ("9000-01-01T00:00:00Z", "2026-12-01T10:00:00Z"));
        // the same request seen again keeps its start: the cap does not slide
        let later = asked.clone().capped(Some(&first), week, at("2026-12-05T00:00:00Z"));
        assert_eq!(later, first);
        assert!(
            !later.clone().capped(Some(&later), week, at("2026-12-08T10:00:01Z")).in_force(at("2026-12-08T10:00:01Z"))
        );
        // another request (another end, reason or claimed name) starts again
        let other = Suspension { reason: "again".into(), ..asked.clone() };
        assert_eq!(other.capped(Some(&first), week, at("2026-12-05T00:00:00Z")).until, "2026-12-12T00:00:00Z");
        // within the cap: as asked, nothing noted
        let short = Suspension { until: "2026-12-01T12:00:00Z".into(), ..asked.clone() };
        let kept = short.capped(None, week, at("2026-12-01T10:00:00Z"));
        assert_eq!((kept.until.as_str(), kept.asked_until.as_str()), ("2026-12-01T12:00:00Z", ""));
        // an unreadable end is never in force
        let bad = Suspension { until: "soon".into(), ..asked.clone() }.capped(None, week, at("2026-12-01T10:00:00Z"));
        assert!(!bad.in_force(at("2026-12-01T10:00:00Z")));
        // the claimed name is shown as a claim, the cap with the asked end
        let text = first.describe(week);
        assert!(text.contains("(claimed by the-ceo, not verified)"), "{text}");
        assert!(
            text.contains("capped by the environment's maxPause 604800s; asked until 9000-01-01T00:00:00Z"),
            "{text}"
        );
        assert!(!text.contains("paused by the-ceo"), "{text}");
    }

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
