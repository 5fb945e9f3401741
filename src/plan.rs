//! Plan: from the comparison of one pass and the sync policy, decide what to apply, in
//! which order, what to prune, what to skip and why — or refuse the sync. Pure.
//!
//! Guards (all on by default):
//! - `allowEmpty: false` refuses an automated sync whose render produced zero objects,
//!   or in which every tracked object would be pruned (one commit pointing the path at
//!   an empty or different folder must not delete everything; Argo CD's rule);
//! - prune only when `prune` is on, only objects this application owns (see
//!   [`crate::tracking`]), never those annotated `Prune=false`; `Prune=confirm` and the
//!   data-loss classes of [`data_loss_class`] wait for an approval;
//! - `PruneLast=true` objects are pruned only once everything else is applied and
//!   Healthy;
//! - the caller runs prune only when the render succeeded and every apply succeeded.
//!
//! Order: sync waves (`plumb.dev/sync-wave`, an integer, default 0, lowest first; the
//! next wave starts when the previous one is Healthy), and within a wave by kind:
//! Namespaces, CRDs, ServiceAccounts and RBAC, ConfigMaps and Secrets, PVCs, Services,
//! workloads, custom resources, then everything else. Prune goes in the reverse order.

mod boundary;
mod decide;
pub mod decommission;
pub mod depends;
mod hand_over;
pub mod hooks;
mod progress;
pub mod shards;
pub mod windows;

use serde::Serialize;

pub use boundary::{Boundary, DEFINITION, POLICY_CONFIG_MAP};
pub use decide::{Decision, Drifted, GateInput, HealState, Mode, decide, heal_backoff};
pub use hand_over::{Claims, Unknown, hand_over};
pub use progress::{held_prunes, prune_last_gate, result, wave_gate};

pub use crate::config::{Propagation, SyncOptions};
/// Why a sync is started (recorded in the history, so it is the status's word).
pub use crate::status::SyncReason;
use crate::{health::HealthStatus, tracking::ObjectKey};

/// Annotation holding an object's sync wave (an integer, negative allowed; default 0).
pub const SYNC_WAVE_ANNOTATION: &str = "plumb.dev/sync-wave";

/// Annotation approving the prune of one object: an RFC 3339 timestamp
/// (`kubectl annotate cm/x plumb.dev/prune-approved=2026-11-29T18:00:00Z`). Valid for
/// [`APPROVAL_VALIDITY`] seconds after that time.
pub const PRUNE_APPROVED_ANNOTATION: &str = "plumb.dev/prune-approved";

/// The words that start the reason of a prune held for an approval
/// ([`Skip::NeedsApproval`]), in the status of its object (`requires pruning; prune
/// needs approval (…)`): what [`crate::notify`] looks for.
pub const NEEDS_APPROVAL: &str = "prune needs approval";

/// Whether an object's status `reason` ([`prune_reasons`]) says its prune is held for
/// an approval: it starts `requires pruning; prune needs approval` — a reason plumb
/// wrote, never one that merely quotes those words (an API error, a field's value).
pub fn awaits_approval(reason: &str) -> bool {
    reason.strip_prefix("requires pruning; ").is_some_and(|rest| rest.starts_with(NEEDS_APPROVAL))
}

/// How long a [`PRUNE_APPROVED_ANNOTATION`] approval stays valid, in seconds (24 h): an
/// old approval left on an object does not approve a later, unrelated prune.
pub const APPROVAL_VALIDITY: i64 = 24 * 3600;

/// The garbage collector's own finalizers: they go once dependents are deleted or
/// orphaned (Kubernetes docs, "Garbage Collection", foreground and orphan deletion).
pub const GC_FINALIZERS: [&str; 2] = ["foregroundDeletion", "orphan"];

/// An object's sync wave from [`SYNC_WAVE_ANNOTATION`]; 0 when absent.
///
/// # Errors
/// A message naming the annotation and the value when it is not a 32-bit integer.
pub fn sync_wave(obj: &serde_json::Value) -> Result<i32, String> {
    match obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SYNC_WAVE_ANNOTATION))
        .and_then(serde_json::Value::as_str)
    {
        None => Ok(0),
        Some(v) => v.trim().parse().map_err(|_| {
            format!("annotation {SYNC_WAVE_ANNOTATION}: `{v}` is not an integer (e.g. \"-1\", \"0\", \"5\")")
        }),
    }
}

/// Whether a live object carries a prune approval ([`PRUNE_APPROVED_ANNOTATION`]) valid
/// at `now`: a timestamp no older than [`APPROVAL_VALIDITY`] and not more than 5
/// minutes in the future (clock skew). `Ok(false)` without the annotation.
///
/// # Errors
/// Why an annotation present does not approve: not an RFC 3339 time, expired, or in
/// the future.
pub fn prune_approval(obj: &serde_json::Value, now: jiff::Timestamp) -> Result<bool, String> {
    let Some(text) = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PRUNE_APPROVED_ANNOTATION))
        .and_then(serde_json::Value::as_str)
    else {
        return Ok(false);
    };
    let at = text
        .parse::<jiff::Timestamp>()
        .map_err(|_| format!("{PRUNE_APPROVED_ANNOTATION} `{text}` is not an RFC 3339 time (e.g. {now:.0})"))?;
    let age = now.as_second() - at.as_second();
    if age > APPROVAL_VALIDITY {
        return Err(format!("{PRUNE_APPROVED_ANNOTATION} `{text}` has expired (approvals last 24 h)"));
    }
    if age < -300 {
        return Err(format!("{PRUNE_APPROVED_ANNOTATION} `{text}` is in the future"));
    }
    match set_by_someone_else(obj, PRUNE_APPROVED_ANNOTATION, crate::FIELD_MANAGER) {
        Some(true) => Ok(true),
        Some(false) => Err(format!(
            "{PRUNE_APPROVED_ANNOTATION} came from Git (written by plumb): an approval counts only when a person sets it on the live object (kubectl annotate)"
        )),
        None => Err(format!(
            "{PRUNE_APPROVED_ANNOTATION} could not be verified: the object was read without plumb's own managedFields entry"
        )),
    }
}

/// Whether annotation `name` of `obj` is owned, in `metadata.managedFields`, by a field
/// manager other than `ours`: someone wrote it on the live object, rather than plumb
/// applying it from Git. An object without managedFields says nothing either way and
/// counts as someone else's (the API server always records them for writes). `None`
/// when `ours` has a server-side apply entry whose field set is absent (an object as
/// the watch cache keeps it, `watch::compact`): who wrote the annotation is unknown
/// until the object is read whole.
fn set_by_someone_else(obj: &serde_json::Value, name: &str, ours: &str) -> Option<bool> {
    let Some(entries) = obj.pointer("/metadata/managedFields").and_then(serde_json::Value::as_array) else {
        return Some(true);
    };
    let field = format!("f:{name}");
    let owners: Vec<&str> = entries
        .iter()
        .filter(|e| e.pointer("/fieldsV1/f:metadata/f:annotations").and_then(|a| a.get(&field)).is_some())
        .filter_map(|e| e.get("manager").and_then(serde_json::Value::as_str))
        .collect();
    if owners.iter().any(|m| *m != ours) {
        return Some(true);
    }
    let field_set_dropped = entries.iter().any(|e| {
        e.get("manager").and_then(serde_json::Value::as_str) == Some(ours)
            && e.get("operation").and_then(serde_json::Value::as_str) == Some("Apply")
            && e.get("fieldsV1").is_none()
    });
    if field_set_dropped {
        return None;
    }
    Some(owners.is_empty())
}

/// Whether an object carries `plumb.dev/compare-options: IgnoreExtraneous`: when Git
/// no longer declares it, it still "requires pruning" but does not make the
/// application OutOfSync.
pub fn ignores_extraneous(obj: &serde_json::Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get("plumb.dev/compare-options"))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|s| s.split(',').any(|o| o.trim() == "IgnoreExtraneous"))
}

/// The data-loss class of a kind, if deleting it can lose data that Git cannot bring
/// back: PersistentVolumeClaims (volumes), Namespaces (everything inside) and
/// CustomResourceDefinitions (every custom resource of that type). Objects of these
/// classes are pruned only with an approval, as if annotated `Prune=confirm`, unless
/// the policy sets `protectDataLoss: false`.
pub fn data_loss_class(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("", "PersistentVolumeClaim") => Some("PersistentVolumeClaim (its volume's data)"),
        ("", "Namespace") => Some("Namespace (every object inside it)"),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            Some("CustomResourceDefinition (every resource of that type)")
        }
        _ => None,
    }
}

/// Whether an untracked object found in an application's namespace is reported as
/// orphaned (`orphanedResources.warn`): not when a controller owns it
/// (`ownerReferences`: ReplicaSets, Pods, …), not when any application tracks it, not
/// the objects Kubernetes creates in every namespace (ServiceAccount `default`,
/// ConfigMap `kube-root-ca.crt`, service-account token Secrets), and not when an
/// `ignore` entry matches (group/kind/name globs).
pub fn orphan_reported(obj: &serde_json::Value, ignore: &[crate::config::OrphanIgnore]) -> bool {
    let Some(key) = ObjectKey::of(obj) else { return false };
    let owned =
        obj.pointer("/metadata/ownerReferences").and_then(serde_json::Value::as_array).is_some_and(|r| !r.is_empty());
    let tracked =
        obj.pointer("/metadata/annotations").and_then(|a| a.get(crate::tracking::TRACKING_ANNOTATION)).is_some();
    let system = matches!(
        (key.group.as_str(), key.kind.as_str(), key.name.as_str()),
        ("", "ServiceAccount", "default") | ("", "ConfigMap", "kube-root-ca.crt")
    ) || obj.get("type").and_then(serde_json::Value::as_str)
        == Some("kubernetes.io/service-account-token");
    let glob = |pattern: &Option<String>, value: &str| {
        pattern.as_deref().is_none_or(|p| globset::Glob::new(p).is_ok_and(|g| g.compile_matcher().is_match(value)))
    };
    let ignored =
        ignore.iter().any(|i| glob(&i.group, &key.group) && glob(&i.kind, &key.kind) && glob(&i.name, &key.name));
    !(owned || tracked || system || ignored)
}

/// Whether an API group is one of Kubernetes' own (core, `apps`, `batch`, `*.k8s.io`, …)
/// rather than a custom resource's.
pub fn builtin_group(group: &str) -> bool {
    !group.contains('.') || group.ends_with(".k8s.io")
}

/// Apply order rank of a kind within a wave (lower first).
pub fn kind_rank(group: &str, kind: &str) -> u8 {
    match (group, kind) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        ("", "ServiceAccount") => 2,
        ("rbac.authorization.k8s.io", _) => 3,
        ("", "ConfigMap" | "Secret") => 4,
        ("", "PersistentVolumeClaim") => 5,
        ("", "Service") => 6,
        ("apps", _) | ("batch", _) | ("", "Pod" | "ReplicationController") => 7,
        (g, _) if !builtin_group(g) => 8,
        _ => 9,
    }
}

/// Whether a health status lets the next sync wave start (or PruneLast proceed):
/// Healthy, or Suspended (deliberately paused; waiting would never end).
pub fn health_ready(h: HealthStatus) -> bool {
    matches!(h, HealthStatus::Healthy | HealthStatus::Suspended)
}

/// State of one desired object after comparison.
#[derive(Debug, Clone)]
pub struct DesiredItem {
    /// The object.
    pub key: ObjectKey,
    /// Whether it differs from live (missing counts as differing).
    pub out_of_sync: bool,
    /// Whether it exists live *and* this application tracks it (see
    /// [`crate::tracking::is_owned_by`]).
    pub tracked: bool,
    /// Its comparison failed (bad annotation, unknown kind, …): never applied.
    pub error: bool,
    /// Git changes an immutable field of it: only a delete and re-create syncs it.
    pub immutable: bool,
    /// Its sync wave.
    pub wave: i32,
    /// Its options, the application's included.
    pub options: SyncOptions,
    /// Why the application's boundaries refuse it ([`Boundary::check`]), with its file:
    /// the whole sync is then refused.
    pub refused: Option<String>,
    /// Who owns it instead (another application that synced it first): never written.
    pub owned_by: Option<String>,
}

impl DesiredItem {
    /// Object `key`, in sync or not (`out_of_sync`), with the default options: not
    /// tracked, no error, no immutable change, wave 0, not refused or owned. Set the
    /// rest with struct update syntax.
    pub fn new(key: ObjectKey, out_of_sync: bool) -> Self {
        Self {
            key,
            out_of_sync,
            tracked: false,
            error: false,
            immutable: false,
            wave: 0,
            options: SyncOptions::default(),
            refused: None,
            owned_by: None,
        }
    }
}

/// A live object owned by the application that Git no longer declares.
#[derive(Debug, Clone)]
pub struct PruneCandidate {
    /// The object.
    pub key: ObjectKey,
    /// Its UID (deletes carry it as a precondition).
    pub uid: String,
    /// Its options, the application's included.
    pub options: SyncOptions,
    /// Whether it carries a valid [`PRUNE_APPROVED_ANNOTATION`].
    pub approved: bool,
    /// Why its [`PRUNE_APPROVED_ANNOTATION`] does not approve, when it has one.
    pub approval_problem: Option<String>,
    /// Why it must not be pruned whatever the options, e.g. another application now
    /// declares it (it moved there), or that could not be checked.
    pub held: Option<String>,
    /// It is already being deleted (`metadata.deletionTimestamp` set) and still exists.
    pub deletion: Option<Deletion>,
    /// plumb adopted it ([`crate::tracking::ADOPTED_ANNOTATION`]) rather than created
    /// it: its prune needs an approval, as with `Prune=confirm`.
    pub adopted: bool,
    /// The live object carries `helm.sh/resource-policy: keep` ([`keeps`]): never
    /// pruned, reported as kept.
    pub kept: bool,
    /// Set by [`plan`]: the desired object that replaces this kustomize-generated one
    /// ([`generated_successor`]); it is pruned once everything is Healthy, like
    /// `PruneLast`.
    pub replaced_by: Option<String>,
}

impl PruneCandidate {
    /// Object `key` (UID `uid`) with the default options: not approved, held or being
    /// deleted, created by plumb. Set the rest with struct update syntax.
    pub fn new(key: ObjectKey, uid: impl Into<String>) -> Self {
        Self {
            key,
            uid: uid.into(),
            options: SyncOptions::default(),
            approved: false,
            approval_problem: None,
            held: None,
            deletion: None,
            adopted: false,
            kept: false,
            replaced_by: None,
        }
    }
}

/// Helm's annotation keeping an object when a release stops rendering it.
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";

/// Whether the live object `obj` carries `helm.sh/resource-policy: keep` (trimmed,
/// any case, as Helm reads it): `helm upgrade` and `helm uninstall` skip deleting it
/// ("Skipping delete of … due to annotation"; helm.sh/docs/howto/charts_tips_and_tricks,
/// "Tell Helm Not To Uninstall a Resource"). plumb reads it as a prune veto, whatever
/// the renderer: the object is left in place and reported as kept.
pub fn keeps(obj: &serde_json::Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(RESOURCE_POLICY_ANNOTATION))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("keep"))
}

/// The characters of a kustomize name hash: hex digits with `0 1 3 a e` replaced by
/// `g h k m t` (kustomize `api/hasher`, `encode`), ten of them.
const KUSTOMIZE_HASH: &str = "2456789bcdfghkmt";

/// The name `name` has without a kustomize content-hash suffix (`web-config-7g2mhbk9tc`
/// → `web-config`), if it has one.
pub fn without_hash_suffix(name: &str) -> Option<&str> {
    let (base, hash) = name.rsplit_once('-')?;
    (hash.len() == 10 && hash.chars().all(|c| KUSTOMIZE_HASH.contains(c)) && !base.is_empty()).then_some(base)
}

/// The desired object replacing the prune candidate `key` when both are generated by
/// kustomize from one generator: a ConfigMap or Secret whose name is `base-<hash>`
/// while Git now declares `base-<another hash>` of the same kind in the same namespace
/// (a `configMapGenerator`/`secretGenerator` whose content changed). Pods of the
/// previous ReplicaSet still mount the old name until the rollout ends, so it is
/// pruned once everything is Healthy (flux2#3378; kubernetes#22368: "both the previous
/// and new versions of the configmap must simultaneously exist").
pub fn generated_successor<'a>(key: &ObjectKey, desired: impl IntoIterator<Item = &'a ObjectKey>) -> Option<String> {
    if !key.group.is_empty() || !matches!(key.kind.as_str(), "ConfigMap" | "Secret") {
        return None;
    }
    let base = without_hash_suffix(&key.name)?;
    desired
        .into_iter()
        .find(|d| {
            d.group == key.group
                && d.kind == key.kind
                && d.namespace == key.namespace
                && d.name != key.name
                && without_hash_suffix(&d.name) == Some(base)
        })
        .map(|d| d.name.clone())
}

/// An object being deleted: it exists until every finalizer is removed (Kubernetes
/// docs, "Finalizers"), and until then it is still a difference from Git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    /// `metadata.deletionTimestamp` (RFC 3339).
    pub since: String,
    /// `metadata.finalizers`, the garbage collector's included.
    pub finalizers: Vec<String>,
}

impl Deletion {
    /// The propagation the object is being deleted with, while the garbage collector
    /// still works on its dependents: its finalizer `foregroundDeletion` → foreground,
    /// `orphan` → orphan (Kubernetes docs, "Garbage Collection"). `None` once that is
    /// done (or for a background deletion): the dependents are handled.
    pub fn propagation(&self) -> Option<Propagation> {
        if self.finalizers.iter().any(|f| f == "foregroundDeletion") {
            Some(Propagation::Foreground)
        } else if self.finalizers.iter().any(|f| f == "orphan") {
            Some(Propagation::Orphan)
        } else {
            None
        }
    }

    /// The finalizers of other controllers than Kubernetes' own: the garbage
    /// collector's ([`GC_FINALIZERS`]) and those of Kubernetes' domains
    /// (`kubernetes.io/pvc-protection`, `customresourcecleanup.apiextensions.k8s.io`, …)
    /// are left out, since the control plane removes them by itself once dependents
    /// and users are gone. A deletion they keep waiting is still listed at the next
    /// pass, and named by [`stuck_deletions`].
    pub fn blocking(&self) -> Vec<&str> {
        self.finalizers
            .iter()
            .map(String::as_str)
            .filter(|f| !GC_FINALIZERS.contains(f) && !kubernetes_own(f))
            .collect()
    }

    /// Whether a DELETE must be sent again: the garbage collector still handles the
    /// dependents with another propagation than `wanted` (the API server then updates
    /// its finalizers on the object being deleted). Otherwise one DELETE was enough.
    pub fn needs_delete(&self, wanted: Propagation) -> bool {
        self.propagation().is_some_and(|p| p != wanted)
    }
}

/// Whether finalizer `f` belongs to Kubernetes itself: its domain (before `/`, or the
/// whole name) is `kubernetes.io`, `k8s.io` or a subdomain of one (Kubernetes docs,
/// "Finalizers": finalizer names are domain-qualified).
fn kubernetes_own(f: &str) -> bool {
    let domain = f.split_once('/').map_or(f, |(d, _)| d);
    ["kubernetes.io", "k8s.io"].iter().any(|k| domain == *k || domain.ends_with(&format!(".{k}")))
}

impl std::fmt::Display for Deletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "deletion pending since {}", self.since)?;
        match self.finalizers.is_empty() {
            true => Ok(()),
            false => write!(f, " (finalizers: {})", self.finalizers.join(", ")),
        }
    }
}

/// `Kind/namespace/name (finalizers: …) since …` of each prune candidate whose deletion
/// has been pending for longer than `grace` at `now`, for the `PruneStuck` condition;
/// empty when none is.
pub fn stuck_deletions<'a>(
    candidates: impl IntoIterator<Item = &'a PruneCandidate>,
    now: jiff::Timestamp,
    grace: std::time::Duration,
) -> Vec<String> {
    let grace = jiff::SignedDuration::try_from(grace).unwrap_or(jiff::SignedDuration::MAX);
    candidates
        .into_iter()
        .filter_map(|c| Some((c, c.deletion.as_ref()?)))
        .filter(|(_, d)| d.since.parse::<jiff::Timestamp>().is_ok_and(|t| now.duration_since(t) > grace))
        .map(|(c, d)| {
            let blocking = d.blocking();
            let by = if blocking.is_empty() { d.finalizers.join(", ") } else { blocking.join(", ") };
            format!("{} (finalizers: {by}) since {}", c.key, d.since)
        })
        .collect()
}

/// What the policy (or the person) allows a sync to do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Guards<'a> {
    /// The application (named in the hints of messages).
    pub app: &'a str,
    /// Delete what Git no longer declares.
    pub prune: bool,
    /// `allowEmpty`: let an automated sync proceed with an empty render, or prune every
    /// tracked object.
    pub allow_empty: bool,
    /// A person asked (`plumb sync`): the allowEmpty guard does not apply (Argo CD: a
    /// manual sync with prune deletes the last objects).
    pub manual: bool,
    /// Approval for `Prune=confirm` objects and the data-loss classes.
    pub approved: bool,
    /// Whether the data-loss classes need approval (policy `protectDataLoss`, default on).
    pub protect_data_loss: bool,
    /// `maxPrunePercent`: an automated sync pruning more than this share of the tracked
    /// objects is refused.
    pub max_prune_percent: Option<u8>,
    /// The application's boundary: under `selfManagement`, what
    /// [`Boundary::never_pruned`] keeps is never deleted and re-created by `Force=true`
    /// either, whatever `protectDataLoss` says.
    pub boundary: Option<&'a Boundary>,
}

/// One sync wave: what to apply, and every desired object in it (for the health gate).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Wave {
    /// The wave number.
    pub wave: i32,
    /// Indexes into the desired list to apply, in kind order.
    pub apply: Vec<usize>,
    /// Indexes of every desired object of this wave.
    pub members: Vec<usize>,
}

/// What one sync will do.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Waves in order; empty waves (nothing declared) are not listed.
    pub waves: Vec<Wave>,
    /// Objects to delete after the last wave, in prune order.
    #[serde(skip)]
    pub prune: Vec<PruneCandidate>,
    /// `PruneLast=true` objects, deleted once everything else is applied and Healthy.
    #[serde(skip)]
    pub prune_last: Vec<PruneCandidate>,
    /// Indexes of desired objects `Force=true` may delete and re-create when Git changes
    /// an immutable field: not those protected from deletion (`Prune=false`,
    /// `Prune=confirm`, a data-loss class, plumb's own installation under
    /// `selfManagement`).
    pub recreate: Vec<usize>,
    /// Objects left alone (`Kind/namespace/name`), with the reason.
    pub skipped: Vec<(String, Skip)>,
    /// Set when the whole sync is refused; nothing is applied or pruned.
    pub refused: Option<String>,
}

/// Why a sync leaves an object alone. [`Display`](std::fmt::Display) gives the line
/// shown by previews, `plumb sync` and the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// A prune candidate, and prune is off.
    PruneOff,
    /// A prune candidate held back whatever the options (it moved to another
    /// application, or that cannot be told): the reason.
    Held(String),
    /// A prune candidate with `Prune=false`.
    PruneDisabled,
    /// A prune candidate whose live object carries `helm.sh/resource-policy: keep`
    /// ([`keeps`]): left in place, as Helm leaves it, and not counted as a difference.
    Kept,
    /// A prune candidate that waits for an approval: what it is protected as
    /// (`Prune=confirm`, `data-loss class PersistentVolumeClaim`), the application (for
    /// the hint), and why its approval annotation does not count, when it has one.
    NeedsApproval {
        /// `Prune=confirm` or `data-loss class <Kind>`.
        protection: String,
        /// The application.
        app: String,
        /// The approval annotation's problem.
        problem: Option<String>,
    },
    /// A prune candidate already being deleted (a DELETE was accepted, finalizers hold
    /// it) with the propagation asked for: no new DELETE.
    DeletionPending(Deletion),
    /// A desired object another application owns (it synced it first).
    OwnedBy(String),
    /// A desired object whose immutable fields changed, with `Force=true`, that is
    /// protected from deletion (`Prune=false`, `Prune=confirm`, a data-loss class,
    /// plumb's own installation under `selfManagement`): not re-created.
    NoRecreate(String),
}

impl Skip {
    /// Whether the object is a prune candidate (everything but [`Skip::NoRecreate`]
    /// and [`Skip::OwnedBy`]).
    pub fn is_prune(&self) -> bool {
        !matches!(self, Skip::NoRecreate(_) | Skip::OwnedBy(_))
    }
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::PruneOff => f.write_str("requires pruning (prune is off)"),
            Skip::Held(why) => f.write_str(why),
            Skip::PruneDisabled => f.write_str("prune skipped: Prune=false"),
            Skip::Kept => write!(
                f,
                "kept: {RESOURCE_POLICY_ANNOTATION}: keep (Git no longer declares it; plumb leaves it in place, as Helm does: delete it by hand or remove the annotation)"
            ),
            Skip::DeletionPending(d) => d.fmt(f),
            Skip::OwnedBy(who) => write!(f, "owned by {who}, which synced it first: not written"),
            Skip::NeedsApproval { protection, app, problem } => {
                write!(
                    f,
                    "{NEEDS_APPROVAL} ({protection}): plumb prune {app} --approve, or annotate {PRUNE_APPROVED_ANNOTATION}=<now, RFC 3339>"
                )?;
                problem.as_ref().map_or(Ok(()), |p| write!(f, "; {p}"))
            }
            Skip::NoRecreate(why) => {
                write!(f, "Force=true does not delete and re-create it ({why}); re-create it by hand")
            }
        }
    }
}

impl Serialize for Skip {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The reason the status gives each prune candidate (`Kind/namespace/name` → reason):
/// why it is kept (`requires pruning; prune needs approval …`, `requires pruning (prune
/// is off)`), or that it goes (`requires pruning (data-loss class …); PruneLast`).
pub fn prune_reasons(p: &Plan) -> std::collections::HashMap<String, String> {
    p.skipped
        .iter()
        .filter(|(_, why)| why.is_prune())
        .map(|(o, why)| {
            let why = match why {
                Skip::PruneOff | Skip::Kept => why.to_string(),
                _ => format!("requires pruning; {why}"),
            };
            (o.clone(), why)
        })
        .chain(p.prune.iter().chain(&p.prune_last).map(|c| {
            let class = data_loss_class(&c.key.group, &c.key.kind)
                .map_or_else(String::new, |k| format!(" (data-loss class {k})"));
            let last = match &c.replaced_by {
                _ if c.options.prune_last => "; PruneLast".to_string(),
                Some(new) => {
                    format!("; generated by kustomize and replaced by {new}: pruned once everything is Healthy")
                }
                None => String::new(),
            };
            (c.key.to_string(), format!("requires pruning{class}{last}"))
        }))
        .collect()
}

/// Whether a pass should sync, and why.
///
/// `out_of_sync` is the application's roll-up; `revision_changed` compares the
/// fetched revision with the last one synced. Automated sync without selfHeal syncs
/// only a new revision (Argo CD's rule), so a hand change stays until the next commit.
pub fn sync_reason(
    policy: &crate::config::SyncPolicy,
    out_of_sync: bool,
    revision_changed: bool,
    manual: bool,
) -> Option<SyncReason> {
    if manual {
        return Some(SyncReason::Manual);
    }
    if !policy.automated || !out_of_sync {
        return None;
    }
    if revision_changed {
        Some(SyncReason::NewRevision)
    } else if policy.self_heal {
        Some(SyncReason::SelfHeal)
    } else {
        None
    }
}

/// Plans a sync of `desired` (render output, compared) against the application's
/// `orphans` (owned live objects not in `desired`), under `guards`.
pub fn plan(desired: &[DesiredItem], orphans: &[PruneCandidate], guards: Guards<'_>) -> Plan {
    let mut p = Plan::default();
    let refusals: Vec<String> =
        desired.iter().filter_map(|d| d.refused.as_ref().map(|why| format!("{} {why}", d.key))).collect();
    if !refusals.is_empty() {
        p.refused = Some(format!("sync refused, nothing written: {}", refusals.join("; ")));
        return p;
    }
    if !guards.manual && !guards.allow_empty && desired.is_empty() {
        p.refused = Some(format!(
            "auto-sync skipped: the render produced no objects and allowEmpty is false; it would delete all ({}) tracked objects",
            orphans.len()
        ));
        return p;
    }
    let mut order: Vec<usize> = (0..desired.len()).collect();
    order.sort_by_key(|&i| (desired[i].wave, kind_rank(&desired[i].key.group, &desired[i].key.kind), i));
    for i in order {
        let d = &desired[i];
        if p.waves.last().is_none_or(|w| w.wave != d.wave) {
            p.waves.push(Wave { wave: d.wave, ..Wave::default() });
        }
        let Some(w) = p.waves.last_mut() else { continue };
        w.members.push(i);
        if let Some(who) = &d.owned_by {
            p.skipped.push((d.key.to_string(), Skip::OwnedBy(who.clone())));
        } else if !d.error && (d.out_of_sync || d.options.apply_all) {
            w.apply.push(i);
        }
        if d.options.force {
            let own = guards.boundary.and_then(|b| b.never_recreated(&d.key));
            let protected = if let Some(why) = own {
                Some(why)
            } else if d.options.prune_disabled {
                Some("Prune=false".to_string())
            } else if d.options.prune_confirm {
                Some("Prune=confirm".to_string())
            } else {
                data_loss_class(&d.key.group, &d.key.kind)
                    .filter(|_| guards.protect_data_loss)
                    .map(|c| format!("data-loss class {c}"))
            };
            match protected {
                None => p.recreate.push(i),
                Some(why) if d.immutable => p.skipped.push((d.key.to_string(), Skip::NoRecreate(why))),
                Some(_) => {}
            }
        }
    }
    for o in orphans {
        let class = data_loss_class(&o.key.group, &o.key.kind).filter(|_| guards.protect_data_loss);
        let skip = if !guards.prune {
            Some(Skip::PruneOff)
        } else if let Some(why) = &o.held {
            Some(Skip::Held(why.clone()))
        } else if o.kept {
            Some(Skip::Kept)
        } else if o.options.prune_disabled {
            Some(Skip::PruneDisabled)
        } else if !guards.approved && !o.approved && (o.options.prune_confirm || o.adopted || class.is_some()) {
            let protection = match (class, o.adopted) {
                (Some(c), _) => format!("data-loss class {c}"),
                (None, true) => "adopted: plumb did not create it".to_string(),
                (None, false) => "Prune=confirm".to_string(),
            };
            let (app, problem) = (guards.app.to_string(), o.approval_problem.clone());
            Some(Skip::NeedsApproval { protection, app, problem })
        } else {
            None
        };
        // Already going (whoever deleted it): a guard has nothing left to keep, and a
        // second DELETE is sent only to change the propagation it goes with.
        let propagation = o.options.propagation.unwrap_or_default();
        let pending = o.deletion.as_ref().filter(|d| skip.is_some() || !d.needs_delete(propagation));
        match (pending, skip) {
            (Some(d), _) => p.skipped.push((o.key.to_string(), Skip::DeletionPending(d.clone()))),
            (None, Some(skip)) => p.skipped.push((o.key.to_string(), skip)),
            (None, None) if o.options.prune_last => p.prune_last.push(o.clone()),
            (None, None) => match generated_successor(&o.key, desired.iter().map(|d| &d.key)) {
                Some(new) => p.prune_last.push(PruneCandidate { replaced_by: Some(new), ..o.clone() }),
                None => p.prune.push(o.clone()),
            },
        }
    }
    let reverse = |o: &PruneCandidate| std::cmp::Reverse(kind_rank(&o.key.group, &o.key.kind));
    p.prune.sort_by_key(reverse);
    p.prune_last.sort_by_key(reverse);
    // Counted on what would really be deleted (not what a guard keeps or what moved).
    let tracked = desired.iter().filter(|d| d.tracked).count() + orphans.len();
    let pruning = p.prune.len() + p.prune_last.len();
    if !guards.manual && !guards.allow_empty && pruning > 0 && pruning == tracked {
        return Plan {
            refused: Some(format!(
                "auto-sync skipped: it would delete all ({pruning}) tracked objects (none of the {} declared is tracked yet) and allowEmpty is false; `plumb prune {}` does it by hand",
                desired.len(),
                guards.app
            )),
            ..Plan::default()
        };
    }
    if let (false, Some(max)) = (guards.manual, guards.max_prune_percent)
        && pruning * 100 > usize::from(max) * tracked
    {
        return Plan {
            refused: Some(format!(
                "auto-sync skipped: it would delete {pruning} of {tracked} tracked objects ({} %), more than maxPrunePercent {max}; `plumb prune {}` does it by hand",
                pruning * 100 / tracked.max(1),
                guards.app
            )),
            ..Plan::default()
        };
    }
    p
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn key(group: &str, kind: &str, name: &str) -> ObjectKey {
        ObjectKey { group: group.into(), kind: kind.into(), namespace: "lab".into(), name: name.into() }
    }
    fn item(group: &str, kind: &str, out: bool) -> DesiredItem {
        DesiredItem { tracked: true, ..DesiredItem::new(key(group, kind, "x"), out) }
    }
    fn orphan(kind: &str, prune_disabled: bool) -> PruneCandidate {
        PruneCandidate {
            options: SyncOptions { prune_disabled, ..Default::default() },
            ..PruneCandidate::new(key("", kind, "old"), "u")
        }
    }
    fn order(p: &Plan) -> Vec<usize> {
        p.waves.iter().flat_map(|w| w.apply.iter().copied()).collect()
    }

    fn guards(prune: bool, approved: bool) -> Guards<'static> {
        Guards {
            app: "web",
            prune,
            allow_empty: false,
            manual: false,
            approved,
            protect_data_loss: true,
            max_prune_percent: None,
            boundary: None,
        }
    }

    /// argocd-20: a candidate already being deleted is listed (OutOfSync) as deletion
    /// pending, gets no second DELETE with the same propagation, gets one when the
    /// propagation changed, and the stuck check names it only after the grace period.
    #[test]
    fn deletions_pending_are_listed_and_deleted_again_only_for_another_propagation() {
        let deletion = |finalizers: &[&str]| Deletion {
            since: "2026-03-02T10:00:00Z".into(),
            finalizers: finalizers.iter().map(|f| (*f).to_string()).collect(),
        };
        // (finalizers, propagation asked for, prune on) → DELETE sent again?
        let table: &[(&[&str], Propagation, bool, bool)] = &[
            (&["acme.example/route-cleanup"], Propagation::Background, true, false),
            (&["foregroundDeletion", "acme.example/route-cleanup"], Propagation::Foreground, true, false),
            (&["foregroundDeletion", "acme.example/route-cleanup"], Propagation::Background, true, true),
            (&["foregroundDeletion", "acme.example/route-cleanup"], Propagation::Orphan, true, true),
            (&["orphan", "x"], Propagation::Orphan, true, false),
            (&["acme.example/route-cleanup"], Propagation::Foreground, true, false),
            (&["acme.example/route-cleanup"], Propagation::Orphan, true, false),
            (&["foregroundDeletion", "x"], Propagation::Background, false, false),
        ];
        for (finalizers, propagation, prune, again) in table {
            let mut o = orphan("ConfigMap", false);
            o.options.propagation = Some(*propagation);
            o.deletion = Some(deletion(finalizers));
            let p = plan(&[item("", "Service", false)], std::slice::from_ref(&o), guards(*prune, false));
            assert_eq!(p.prune.len() == 1, *again, "{finalizers:?} {propagation:?} prune {prune}");
            if !again {
                let reasons = prune_reasons(&p);
                let want = format!(
                    "requires pruning; deletion pending since 2026-03-02T10:00:00Z (finalizers: {})",
                    finalizers.join(", ")
                );
                assert_eq!(reasons.get("ConfigMap/lab/old"), Some(&want), "{finalizers:?}");
            }
        }
        // Prune=false or a missing approval does not keep what is already going
        let mut o = orphan("PersistentVolumeClaim", true);
        o.deletion = Some(deletion(&["kubernetes.io/pvc-protection"]));
        let p = plan(&[item("", "Service", false)], std::slice::from_ref(&o), guards(true, false));
        assert!(matches!(&p.skipped[..], [(_, Skip::DeletionPending(_))]), "{:?}", p.skipped);

        let d = deletion(&["foregroundDeletion", "acme.example/route-cleanup"]);
        assert_eq!(d.blocking(), ["acme.example/route-cleanup"]);
        assert!(
            deletion(&["kubernetes.io/pvc-protection", "foregroundDeletion"]).blocking().is_empty(),
            "Kubernetes' own"
        );
        assert!(deletion(&["customresourcecleanup.apiextensions.k8s.io"]).blocking().is_empty(), "Kubernetes' own");
        assert_eq!(
            deletion(&["k8s.io.acme.example/x", "notkubernetes.io/y"]).blocking().len(),
            2,
            "look-alikes are not"
        );
        let mut stuck = orphan("ConfigMap", false);
        stuck.deletion = Some(d);
        let grace = std::time::Duration::from_secs(300);
        let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap();
        assert!(stuck_deletions([&stuck], at("2026-03-02T10:04:59Z"), grace).is_empty(), "within the grace period");
        assert_eq!(
            stuck_deletions([&stuck, &orphan("Service", false)], at("2026-03-02T10:05:01Z"), grace),
            ["ConfigMap/lab/old (finalizers: acme.example/route-cleanup) since 2026-03-02T10:00:00Z"]
        );
    }

    #[test]
    fn namespaces_first_only_out_of_sync_applied() {
        let d = [
            item("apps", "Deployment", true),
            item("", "ConfigMap", false),
            item("", "Namespace", true),
            item("", "Service", true),
            item("demo.example.com", "Widget", true),
            item("networking.k8s.io", "Ingress", true),
        ];
        let p = plan(&d, &[], guards(true, false));
        assert_eq!(order(&p), [2, 3, 0, 4, 5], "custom resources before everything else");
        assert_eq!(p.waves.len(), 1);
        assert_eq!(p.waves[0].members.len(), 6);
        assert!(p.refused.is_none());
    }

    #[test]
    fn waves_order_before_kinds_and_apply_all() {
        let mut d = vec![item("", "Namespace", true), item("", "ConfigMap", true), item("apps", "Deployment", false)];
        d[0].wave = 1;
        d[1].wave = -2;
        d[2].options.apply_all = true;
        let p = plan(&d, &[], guards(true, false));
        let waves: Vec<(i32, Vec<usize>)> = p.waves.iter().map(|w| (w.wave, w.apply.clone())).collect();
        assert_eq!(
            waves,
            [(-2, vec![1]), (0, vec![2]), (1, vec![0])],
            "ApplyOutOfSyncOnly=false applies a synced object"
        );
    }

    /// helm-05: `helm.sh/resource-policy: keep` on the live object is a prune veto,
    /// reported as kept (not "requires pruning"), whatever prune's approval.
    #[test]
    fn an_object_helm_keeps_is_never_pruned() {
        let live = |v: &str| serde_json::json!({"metadata": {"annotations": {RESOURCE_POLICY_ANNOTATION: v}}});
        assert!(keeps(&live("keep")) && keeps(&live(" Keep ")));
        assert!(!keeps(&live("delete")) && !keeps(&serde_json::json!({"metadata": {}})));
        let kept = PruneCandidate { kept: true, ..orphan("Secret", false) };
        let p = plan(&[item("", "ConfigMap", true)], &[kept, orphan("Service", false)], guards(true, true));
        assert_eq!(p.prune.iter().map(|c| c.key.kind.as_str()).collect::<Vec<_>>(), ["Service"]);
        assert!(matches!(p.skipped.as_slice(), [(o, Skip::Kept)] if o == "Secret/lab/old"), "{:?}", p.skipped);
        let reasons = prune_reasons(&p);
        assert!(reasons["Secret/lab/old"].starts_with("kept: helm.sh/resource-policy: keep"), "{reasons:?}");
    }

    /// kustomize-01: a generated ConfigMap replaced by its next generation waits for
    /// everything to be Healthy (as `PruneLast`); one that is not a previous generation of
    /// a declared object is pruned at once.
    #[test]
    fn a_replaced_generated_config_map_is_pruned_last() {
        assert_eq!(without_hash_suffix("web-config-7g2mhbk9tc"), Some("web-config"));
        for name in ["web-config", "web-config-7g2mhbk9t", "web-config-7g2mhbk9ta", "-7g2mhbk9tc"] {
            assert_eq!(without_hash_suffix(name), None, "{name}");
        }
        let named = |kind: &str, name: &str| key("", kind, name);
        let desired =
            [DesiredItem { tracked: true, ..DesiredItem::new(named("ConfigMap", "web-config-b2c4d5f6g7"), true) }];
        let old = PruneCandidate::new(named("ConfigMap", "web-config-h2c4d5f6g7"), "u1");
        let other = PruneCandidate::new(named("ConfigMap", "db-config-h2c4d5f6g7"), "u2");
        let deployment = PruneCandidate::new(key("apps", "Deployment", "web-config-h2c4d5f6g7"), "u3");
        let p = plan(&desired, &[old, other, deployment], guards(true, false));
        let names = |cs: &[PruneCandidate]| cs.iter().map(|c| c.key.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&p.prune_last), ["ConfigMap/lab/web-config-h2c4d5f6g7"]);
        assert_eq!(p.prune_last[0].replaced_by.as_deref(), Some("web-config-b2c4d5f6g7"));
        assert_eq!(
            names(&p.prune),
            ["Deployment.apps/lab/web-config-h2c4d5f6g7", "ConfigMap/lab/db-config-h2c4d5f6g7"]
        );
        assert!(prune_reasons(&p)["ConfigMap/lab/web-config-h2c4d5f6g7"].contains("replaced by web-config-b2c4d5f6g7"));
    }

    #[test]
    fn empty_render_is_refused_unless_allowed_or_manual() {
        let orphans = [orphan("ConfigMap", false)];
        let p = plan(&[], &orphans, guards(true, false));
        assert!(p.refused.as_deref().is_some_and(|r| r.contains("allowEmpty") && r.contains("all (1)")));
        assert!(p.prune.is_empty() && p.waves.is_empty());
        let p = plan(&[], &orphans, Guards { allow_empty: true, ..guards(true, false) });
        assert!(p.refused.is_none());
        assert_eq!(p.prune.len(), 1);
        let p = plan(&[], &orphans, Guards { manual: true, ..guards(true, false) });
        assert!(p.refused.is_none(), "a person's sync with prune deletes the last objects");
        assert_eq!(p.prune.len(), 1);
    }

    #[test]
    fn pruning_every_tracked_object_is_refused() {
        let mut fresh = item("", "ConfigMap", true);
        fresh.tracked = false;
        let orphans = [orphan("ConfigMap", false)];
        let p = plan(std::slice::from_ref(&fresh), &orphans, guards(true, false));
        assert!(p.refused.as_deref().is_some_and(|r| r.contains("delete all (1)")), "{p:?}");
        let kept = [orphan("ConfigMap", true)];
        let p = plan(std::slice::from_ref(&fresh), &kept, guards(true, false));
        assert!(p.refused.is_none() && p.prune.is_empty(), "a Prune=false object is not deleted: no refusal");
        let mut moved = orphan("ConfigMap", false);
        moved.held = Some("moved to application b".into());
        let p = plan(std::slice::from_ref(&fresh), &[moved], guards(true, false));
        assert!(p.refused.is_none() && p.skipped[0].1.to_string() == "moved to application b", "{p:?}");
        // one declared object is already tracked: not everything goes
        let p = plan(&[fresh, item("", "Secret", false)], &orphans, guards(true, false));
        assert!(p.refused.is_none());
        assert_eq!(p.prune.len(), 1);
    }

    #[test]
    fn prune_switch_prune_false_confirm_and_classes() {
        let orphans = [orphan("ConfigMap", false), orphan("PersistentVolumeClaim", true), orphan("Namespace", false)];
        let d = [item("", "ConfigMap", false)];
        let off = plan(&d, &orphans, guards(false, false));
        assert!(off.prune.is_empty());
        assert_eq!(off.skipped.len(), 3);
        let on = plan(&d, &orphans, guards(true, false));
        assert_eq!(on.prune.iter().map(|o| o.key.kind.as_str()).collect::<Vec<_>>(), ["ConfigMap"]);
        assert_eq!(
            (on.skipped[0].0.as_str(), on.skipped[0].1.to_string().as_str()),
            ("PersistentVolumeClaim/lab/old", "prune skipped: Prune=false")
        );
        assert!(
            on.skipped[1].0 == "Namespace/lab/old" && on.skipped[1].1.to_string().contains("data-loss class Namespace"),
            "{:?}",
            on.skipped
        );
        let approved = plan(&d, &orphans, guards(true, true));
        assert_eq!(
            approved.prune.iter().map(|o| o.key.kind.as_str()).collect::<Vec<_>>(),
            ["ConfigMap", "Namespace"],
            "Prune=false still wins; Namespaces go last"
        );
        let unprotected = plan(&d, &orphans, Guards { protect_data_loss: false, ..guards(true, false) });
        assert_eq!(unprotected.prune.len(), 2, "protectDataLoss: false prunes the Namespace");
        let mut confirm = orphan("ConfigMap", false);
        confirm.options.prune_confirm = true;
        assert!(plan(&d, std::slice::from_ref(&confirm), guards(true, false)).prune.is_empty());
        assert_eq!(plan(&d, std::slice::from_ref(&confirm), guards(true, true)).prune.len(), 1);
        confirm.approval_problem = Some("plumb.dev/prune-approved `yes` is not an RFC 3339 time".into());
        let p = plan(&d, std::slice::from_ref(&confirm), guards(true, false));
        assert!(
            p.skipped[0].1.to_string().contains("plumb prune web --approve")
                && p.skipped[0].1.to_string().ends_with("RFC 3339 time"),
            "{p:?}"
        );
        confirm.approved = true;
        assert_eq!(plan(&d, &[confirm], guards(true, false)).prune.len(), 1, "approved by annotation");
    }

    #[test]
    fn mass_deletion_needs_a_person_when_capped() {
        let d = [item("", "ConfigMap", false)];
        let orphans = [orphan("ConfigMap", false), orphan("Secret", false)];
        let capped = Guards { max_prune_percent: Some(50), ..guards(true, false) };
        let p = plan(&d, &orphans, capped);
        assert!(p.refused.as_deref().is_some_and(|r| r.contains("delete 2 of 3 tracked objects (66 %)")), "{p:?}");
        assert!(p.prune.is_empty() && p.waves.is_empty());
        assert_eq!(plan(&d, &orphans[..1], capped).prune.len(), 1, "1 of 2 is 50 %: allowed");
        assert_eq!(plan(&d, &orphans, Guards { manual: true, ..capped }).prune.len(), 2);
    }

    #[test]
    fn errors_are_never_applied_and_force_spares_protected_objects() {
        let mut bad = item("", "ConfigMap", true);
        bad.error = true;
        let mut pvc = item("", "PersistentVolumeClaim", true);
        pvc.options.force = true;
        pvc.immutable = true;
        let mut job = item("batch", "Job", true);
        job.options.force = true;
        job.immutable = true;
        let p = plan(&[bad, pvc, job], &[], guards(true, false));
        assert_eq!(order(&p), [1, 2], "the erroring object is not applied");
        assert_eq!(p.recreate, [2], "a PersistentVolumeClaim is never deleted by Force=true");
        assert!(p.skipped[0].1.to_string().contains("data-loss class PersistentVolumeClaim"), "{:?}", p.skipped);
    }

    /// Under selfManagement, Force=true never deletes and re-creates plumb's own
    /// installation (the resource definition's deletion deletes every Application),
    /// even with protectDataLoss off; other objects, and other applications, as before.
    #[test]
    fn force_never_recreates_plumbs_own_installation() {
        let forced = |group: &str, kind: &str, name: &str| {
            let mut d = DesiredItem::new(ObjectKey { namespace: String::new(), ..key(group, kind, name) }, true);
            d.options.force = true;
            d.immutable = true;
            d
        };
        let d = [
            forced("apiextensions.k8s.io", "CustomResourceDefinition", DEFINITION),
            forced("", "Namespace", "plumb-system"),
            forced("apiextensions.k8s.io", "CustomResourceDefinition", "widgets.example.com"),
        ];
        let own = Boundary::new(
            &crate::config::Boundaries { self_management: true, ..Default::default() },
            "plumb-system",
            "plumb-system",
        )
        .expect("valid");
        let unprotected = Guards { protect_data_loss: false, ..guards(true, false) };
        let p = plan(&d, &[], Guards { boundary: Some(&own), ..unprotected });
        assert_eq!(p.recreate, [2], "{p:?}");
        let skipped: Vec<String> = p.skipped.iter().map(|(o, why)| format!("{o}: {why}")).collect();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        let crd = skipped.iter().find(|s| s.contains(DEFINITION)).expect("the definition is not re-created");
        assert!(
            crd.contains("Force=true does not delete and re-create it (plumb's own installation (")
                && crd.contains("under selfManagement"),
            "{crd}"
        );
        let plain = Boundary::new(&crate::config::Boundaries::default(), "web", "plumb-system").expect("valid");
        let sorted = |mut r: Vec<usize>| {
            r.sort_unstable();
            r
        };
        assert_eq!(sorted(plan(&d, &[], Guards { boundary: Some(&plain), ..unprotected }).recreate), [0, 1, 2]);
        assert_eq!(sorted(plan(&d, &[], unprotected).recreate), [0, 1, 2]);
    }

    #[test]
    fn prune_last_is_held_apart() {
        let mut last = orphan("ConfigMap", false);
        last.options.prune_last = true;
        let p = plan(&[item("", "Secret", false)], &[last, orphan("Service", false)], guards(true, false));
        assert_eq!(p.prune.len(), 1);
        assert_eq!(p.prune_last.len(), 1);
        assert_eq!(p.prune_last[0].key.kind, "ConfigMap");
    }

    #[test]
    fn when_to_sync() {
        use crate::config::SyncPolicy;
        let auto = SyncPolicy { automated: true, ..Default::default() };
        let heal = SyncPolicy { automated: true, self_heal: true, ..Default::default() };
        let manual = SyncPolicy::default();
        assert_eq!(sync_reason(&auto, true, true, false), Some(SyncReason::NewRevision));
        assert_eq!(sync_reason(&auto, true, false, false), None);
        assert_eq!(sync_reason(&heal, true, false, false), Some(SyncReason::SelfHeal));
        assert_eq!(sync_reason(&heal, false, true, false), None);
        assert_eq!(sync_reason(&manual, true, true, false), None);
        assert_eq!(sync_reason(&manual, false, false, true), Some(SyncReason::Manual));
    }

    #[test]
    fn ignore_extraneous_annotation() {
        let with = serde_json::json!({"metadata": {"annotations": {"plumb.dev/compare-options": "IgnoreHealthCheck, IgnoreExtraneous"}}});
        assert!(ignores_extraneous(&with));
        assert!(!ignores_extraneous(&serde_json::json!({"metadata": {}})));
    }

    #[test]
    fn options_parse_values_and_merge() {
        assert!(SyncOptions::parse(["Prune=false"]).prune_disabled);
        assert!(SyncOptions::parse(["Prune=confirm"]).prune_confirm);
        assert!(SyncOptions::parse(["CreateNamespace=true"]).create_namespace);
        let all = SyncOptions::parse([
            "PruneLast=true",
            "Replace=true",
            "Force=true",
            "ApplyOutOfSyncOnly=false",
            "Validate=false",
            "PrunePropagationPolicy=background",
        ]);
        assert!(all.prune_last && all.replace && all.force && all.apply_all && all.validate_disabled);
        assert_eq!(all.propagation, Some(Propagation::Background));
        assert!(!SyncOptions::parse(["ApplyOutOfSyncOnly=true"]).apply_all);
        assert!(SyncOptions::parse_one("Bogus=1").is_err());
        assert!(SyncOptions::parse_one("Prune").is_err());
        assert!(SyncOptions::parse_one("Prune=maybe").unwrap_err().contains("true, false, confirm"));
        assert!(SyncOptions::parse_one("PrunePropagationPolicy=cascade").is_err());
        assert!(SyncOptions::parse_one("ServerSideApply=false").unwrap_err().contains("always uses server-side apply"));
        let obj = serde_json::json!({"metadata": {"annotations": {"plumb.dev/sync-options": "PruneLast=true, Prune=false, Bogus=1"}}});
        let o = SyncOptions::of_object(&obj);
        assert!(o.prune_disabled && o.prune_last);
        assert_eq!(SyncOptions::problems(&obj).len(), 1);
        let app = SyncOptions::parse(["Prune=confirm", "PrunePropagationPolicy=orphan"]);
        let merged = app.with_object(&SyncOptions::parse(["Prune=false"]));
        assert!(merged.prune_disabled && !merged.prune_confirm);
        assert_eq!(merged.propagation, Some(Propagation::Orphan));
    }

    #[test]
    fn orphans_worth_reporting() {
        use serde_json::json;
        let cm = |name: &str, extra: serde_json::Value| {
            let mut o =
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "lab"}});
            if let (Some(m), Some(e)) = (o["metadata"].as_object_mut(), extra.as_object()) {
                m.extend(e.clone());
            }
            o
        };
        assert!(orphan_reported(&cm("hand-made", json!({})), &[]));
        assert!(!orphan_reported(&cm("kube-root-ca.crt", json!({})), &[]));
        assert!(!orphan_reported(&cm("x", json!({"ownerReferences": [{"uid": "u"}]})), &[]));
        assert!(!orphan_reported(
            &cm("x", json!({"annotations": {"plumb.dev/tracking-id": "a:/ConfigMap:lab/x"}})),
            &[]
        ));
        let sa =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "lab"}});
        assert!(!orphan_reported(&sa, &[]));
        let ignore =
            [crate::config::OrphanIgnore { group: None, kind: Some("ConfigMap".into()), name: Some("hand-*".into()) }];
        assert!(!orphan_reported(&cm("hand-made", json!({})), &ignore));
        assert!(orphan_reported(&cm("other", json!({})), &ignore));
    }

    #[test]
    fn waves_and_approvals_from_annotations() {
        let w = |v: &str| serde_json::json!({"metadata": {"annotations": {"plumb.dev/sync-wave": v}}});
        assert_eq!(sync_wave(&w("-3")), Ok(-3));
        assert_eq!(sync_wave(&serde_json::json!({"metadata": {}})), Ok(0));
        assert!(sync_wave(&w("first")).unwrap_err().contains("plumb.dev/sync-wave: `first`"));
        let now: jiff::Timestamp = "2026-11-29T18:00:00Z".parse().unwrap();
        let a = |v: &str| serde_json::json!({"metadata": {"annotations": {"plumb.dev/prune-approved": v}}});
        assert_eq!(prune_approval(&a("2026-11-29T17:00:00Z"), now), Ok(true));
        assert_eq!(prune_approval(&serde_json::json!({"metadata": {}}), now), Ok(false));
        assert!(prune_approval(&a("2026-11-27T17:00:00Z"), now).unwrap_err().contains("expired"));
        assert!(prune_approval(&a("2026-11-30T17:00:00Z"), now).unwrap_err().contains("in the future"));
        assert!(prune_approval(&a("yes"), now).unwrap_err().contains("not an RFC 3339 time"));
        // who wrote it: a person (any other field manager), not plumb applying Git
        let by = |managers: &[&str]| {
            let mut o = a("2026-11-29T17:00:00Z");
            o["metadata"]["managedFields"] = serde_json::Value::Array(
                managers
                    .iter()
                    .map(|m| {
                        serde_json::json!({
                "manager": m, "operation": "Update",
                "fieldsV1": {"f:metadata": {"f:annotations": {"f:plumb.dev/prune-approved": {}}}}})
                    })
                    .collect(),
            );
            o
        };
        assert_eq!(prune_approval(&by(&["kubectl-annotate"]), now), Ok(true));
        assert_eq!(prune_approval(&by(&["plumb", "kubectl-annotate"]), now), Ok(true));
        assert!(prune_approval(&by(&["plumb"]), now).unwrap_err().contains("came from Git"));
        // as the watch cache keeps it: plumb's own field set dropped, so unknown until read whole
        let mut cached = a("2026-11-29T17:00:00Z");
        cached["metadata"]["managedFields"] = serde_json::json!([{"manager": "plumb", "operation": "Apply"}]);
        assert!(prune_approval(&cached, now).unwrap_err().contains("could not be verified"));
        cached["metadata"]["managedFields"].as_array_mut().unwrap().push(serde_json::json!({
            "manager": "kubectl-annotate", "operation": "Update",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:plumb.dev/prune-approved": {}}}}}));
        assert_eq!(prune_approval(&cached, now), Ok(true));
        assert!(health_ready(HealthStatus::Suspended) && !health_ready(HealthStatus::Progressing));
    }

    #[test]
    fn every_prune_candidate_gets_its_status_reason_and_only_those() {
        let mut pvc = orphan("PersistentVolumeClaim", false);
        pvc.key.name = "data".into();
        let mut last = orphan("ConfigMap", false);
        (last.key.name, last.options.prune_last) = ("late".into(), true);
        let mut moved = orphan("Secret", false);
        moved.held = Some("moved to application b, which declares it: left for it to adopt, not deleted".into());
        let mut job = item("batch", "Job", true);
        (job.immutable, job.options.force, job.options.prune_disabled) = (true, true, true);
        let orphans = [orphan("ConfigMap", false), orphan("Service", true), pvc, last, moved];
        // (prune, approved) → object → reason
        type Case<'a> = ((bool, bool), &'a [(&'a str, &'a str)]);
        let cases: [Case<'_>; 3] = [
            (
                (false, false),
                &[
                    ("ConfigMap/lab/old", "requires pruning (prune is off)"),
                    ("Service/lab/old", "requires pruning (prune is off)"),
                ],
            ),
            (
                (true, false),
                &[
                    ("ConfigMap/lab/old", "requires pruning"),
                    ("Service/lab/old", "requires pruning; prune skipped: Prune=false"),
                    (
                        "PersistentVolumeClaim/lab/data",
                        "requires pruning; prune needs approval (data-loss class PersistentVolumeClaim (its volume's data)): plumb prune web --approve, or annotate plumb.dev/prune-approved=<now, RFC 3339>",
                    ),
                    ("ConfigMap/lab/late", "requires pruning; PruneLast"),
                    (
                        "Secret/lab/old",
                        "requires pruning; moved to application b, which declares it: left for it to adopt, not deleted",
                    ),
                ],
            ),
            (
                (true, true),
                &[(
                    "PersistentVolumeClaim/lab/data",
                    "requires pruning (data-loss class PersistentVolumeClaim (its volume's data))",
                )],
            ),
        ];
        for ((prune, approved), want) in cases {
            let p = plan(std::slice::from_ref(&job), &orphans, guards(prune, approved));
            let reasons = prune_reasons(&p);
            for (object, reason) in want {
                assert_eq!(reasons.get(*object).map(String::as_str), Some(*reason), "{prune} {approved} {object}");
            }
            assert_eq!(reasons.len(), orphans.len(), "one reason per candidate, none for the desired Job: {reasons:?}");
            for (object, reason) in &reasons {
                let held = (prune, approved) == (true, false) && object == "PersistentVolumeClaim/lab/data";
                assert_eq!(awaits_approval(reason), held, "{object}: {reason}");
            }
            assert!(p.skipped.iter().any(|(o, s)| o == "Job.batch/lab/x" && !s.is_prune()), "{:?}", p.skipped);
        }
    }

    #[test]
    fn only_plumbs_own_reason_awaits_approval() {
        assert!(awaits_approval("requires pruning; prune needs approval (Prune=confirm): plumb prune web --approve"));
        for quoted in [
            "differs at /data/x: \"requires pruning; prune needs approval\"",
            "compare failed: prune needs approval",
            "requires pruning (prune is off); prune needs approval",
        ] {
            assert!(!awaits_approval(quoted), "{quoted}");
        }
    }
}
