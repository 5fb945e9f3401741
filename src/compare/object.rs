//! One object of a render, prepared for the cluster and judged against its live
//! version. Pure: the caller reads the live object and runs the dry-run; these functions
//! say what to send and what the answer means.
//!
//! - [`prepare`]: defaults the namespace of namespaced kinds (and drops it from
//!   cluster-scoped ones), reads the identity, the sync wave and the sync options, and
//!   stamps the tracking-id;
//! - [`judge`]: differences between the dry-run result and the live object (both
//!   normalized, ignored fields stripped), the field manager of each live value, and the
//!   fields held by client-side tools that plumb must take over;
//! - [`Compared`]: the outcome, with its typed [`ObjectReason`].

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::{Difference, SyncStatus, managers};
use crate::{
    kind::Kind,
    plan::{self, SyncOptions},
    tracking::{self, ObjectKey},
};

/// Why an object is (or is not) in sync — typed; [`Display`](std::fmt::Display) gives
/// the wording shown in status, diffs and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectReason {
    /// Live equals Git (shown as the empty string).
    Synced,
    /// Not in the cluster: `missing`.
    Missing,
    /// Its kind is defined by a CustomResourceDefinition of the same render, not served
    /// yet: created once that CRD is Established.
    AwaitsCrd,
    /// Fields differ: their descriptions (see [`Difference::describe`]); `client_side`
    /// when the server refused the dry-run and the comparison was made here.
    Differs {
        /// One description per differing field.
        fields: Vec<String>,
        /// Compared on plumb's side.
        client_side: bool,
    },
    /// Git changes fields that cannot change (their paths): only a delete and re-create
    /// (`Force=true`) syncs it.
    Immutable(Vec<String>),
    /// Fields held by a client-side tool (the manager named) are to be taken over.
    TakeOver(String),
    /// The object could not be compared (bad annotation, unknown kind, API error…): it
    /// is never applied, and holds every prune back.
    Error(String),
    /// Another application (or plumb installation) tracks it, having synced it first:
    /// never written by this one (the text names the owner).
    OwnedBy(String),
    /// The application's boundaries refuse it ([`crate::plan::Boundary`]): never
    /// written, and the whole sync is refused. The text names its file and the rule.
    Refused(String),
    /// A Job that ran this very manifest to the end and that the cluster then removed
    /// by the rule the manifest declares (`spec.ttlSecondsAfterFinished`): in sync, not
    /// re-created until its manifest changes (shown as the empty string; the health
    /// message says it).
    Finished(crate::status::Finished),
}

impl ObjectReason {
    /// The object's sync status: Synced, Unknown for an error, else OutOfSync.
    pub fn sync(&self) -> SyncStatus {
        match self {
            Self::Synced | Self::Finished(_) => SyncStatus::Synced,
            Self::Error(_) | Self::Refused(_) => SyncStatus::Unknown,
            _ => SyncStatus::OutOfSync,
        }
    }
}

impl std::fmt::Display for ObjectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Synced | Self::Finished(_) => Ok(()),
            Self::Missing => f.write_str("missing"),
            Self::AwaitsCrd => f.write_str("missing (its CustomResourceDefinition is applied first in this sync)"),
            Self::Differs { fields, client_side } => {
                let how = if *client_side { " (client-side comparison: the server refused the dry-run)" } else { "" };
                write!(f, "differs at {}{how}", fields.join("; "))
            }
            Self::Immutable(fields) => write!(
                f,
                "differs at immutable field(s) {}: the object must be deleted and re-created (sync option Force=true)",
                fields.join(", ")
            ),
            Self::TakeOver(manager) => write!(f, "fields held by {manager} to be taken over by plumb"),
            Self::Error(e) => f.write_str(e),
            Self::Refused(why) => write!(f, "refused: {why}"),
            Self::OwnedBy(who) => write!(f, "owned by {who}, which synced it first: not written by this application"),
        }
    }
}

/// One object's comparison, for `plumb diff`.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectDiff {
    /// The object.
    pub object: String,
    /// Git's side (dry-run result, normalized, ignored fields removed).
    pub desired: Value,
    /// The live side (normalized, ignored fields removed); `None` when missing.
    pub live: Option<Value>,
    /// Differing fields; empty when Synced.
    pub differences: Vec<Difference>,
    /// `missing`, `requires pruning`, `differs at …`, an error, or empty.
    pub reason: String,
    /// The typed reason of a desired object; `None` for a prune candidate (an owned
    /// object Git no longer declares).
    #[serde(skip)]
    pub verdict: Option<ObjectReason>,
}

/// One desired object, compared.
#[derive(Debug, Clone)]
pub struct Compared {
    /// Its identity (namespace defaulted).
    pub key: ObjectKey,
    /// Its served kind; `None` when not served (an error, or awaiting its CRD).
    pub kind: Option<Kind>,
    /// What is sent when applying (tracking-stamped; ignored fields removed when live
    /// exists).
    pub apply: Value,
    /// The live object, when it exists.
    pub live: Option<super::Live>,
    /// Why it is (not) in sync.
    pub reason: ObjectReason,
    /// Git's side as compared (dry-run result, normalized, ignored fields removed).
    pub desired: Value,
    /// The live side as compared (normalized, ignored fields removed); `None` when
    /// missing.
    pub live_compared: Option<Value>,
    /// Differing fields, each with the manager of its live value; empty when Synced.
    pub differences: Vec<Difference>,
    /// `managedFields` to install before applying: the takeover of fields held by
    /// client-side tools (see [`managers::takeover`]).
    pub takeover: Option<Value>,
    /// Where the manifest came from (`file#document`).
    pub source: String,
    /// Sync wave (`plumb.dev/sync-wave`).
    pub wave: i32,
    /// The object's own sync options (`plumb.dev/sync-options`).
    pub options: SyncOptions,
    /// [`finished_digest`] of its manifest: a Job the cluster removes once finished.
    pub finished_digest: Option<String>,
    /// Fields its environment marks sensitive ([`Self::with_marked`]).
    pub marked: super::sensitive::Marked,
    /// The installation's key its sensitive values are marked with in every later
    /// output ([`super::sensitive::MaskKey`]; none: `(sensitive)`).
    pub mask_key: super::sensitive::MaskKey,
}

impl Compared {
    /// An object whose comparison ended early with `reason` (an error, missing, or
    /// awaiting its CRD): Git's side is `obj` as it is. An error text is scrubbed of
    /// `obj`'s sensitive values ([`super::sensitive::scrub`]; unmarked: no key yet).
    pub fn early(key: ObjectKey, obj: Value, kind: Option<Kind>, reason: ObjectReason, source: &str) -> Self {
        let no_key = super::sensitive::MaskKey::none();
        let reason = match reason {
            ObjectReason::Error(e) => ObjectReason::Error(super::sensitive::scrub(&e, &[&obj], &no_key)),
            r => r,
        };
        Compared {
            desired: obj.clone(),
            live_compared: None,
            differences: vec![],
            key,
            kind,
            apply: obj,
            live: None,
            reason,
            takeover: None,
            source: source.to_string(),
            wave: 0,
            options: SyncOptions::default(),
            finished_digest: None,
            marked: super::sensitive::Marked::default(),
            mask_key: no_key,
        }
    }

    /// An object known in sync with `live` (a remembered verdict): its compared sides are
    /// not kept (`desired` is `null`, `live_compared` `None`), as there is no difference
    /// to show.
    pub fn synced(key: ObjectKey, apply: Value, kind: Kind, live: super::Live, source: &str) -> Self {
        let mut c = Self::early(key, Value::Null, Some(kind), ObjectReason::Synced, source);
        (c.apply, c.live) = (apply, Some(live));
        c
    }

    /// This object with the fields its environment marks sensitive (`sensitiveFields`)
    /// masked in its differences and reason, and in every later output ([`Self::diff`],
    /// [`Self::scrub`]).
    #[must_use]
    pub fn with_marked(mut self, marked: super::sensitive::Marked) -> Self {
        if marked.is_empty() {
            return self;
        }
        super::sensitive::mask_differences_with(false, &marked, &self.mask_key, &mut self.differences);
        self.reason = match self.reason {
            ObjectReason::Differs { client_side, .. } => ObjectReason::Differs {
                fields: self.differences.iter().map(Difference::describe).collect(),
                client_side,
            },
            ObjectReason::Error(e) => {
                let mut sides = vec![&self.apply];
                sides.extend(self.live.as_deref());
                ObjectReason::Error(super::sensitive::scrub_with(&e, &sides, &marked, &self.mask_key))
            }
            r => r,
        };
        self.marked = marked;
        self
    }

    /// The object's sync status.
    pub fn sync(&self) -> SyncStatus {
        self.reason.sync()
    }

    /// Whether its CRD is applied first in this sync.
    pub fn awaits_crd(&self) -> bool {
        self.reason == ObjectReason::AwaitsCrd
    }

    /// Whether Git changes an immutable field of it.
    pub fn immutable(&self) -> bool {
        matches!(self.reason, ObjectReason::Immutable(_))
    }

    /// Both sides, the differences and the reason, for `plumb diff`; sensitive values
    /// masked ([`super::sensitive`]).
    pub fn diff(&self) -> ObjectDiff {
        ObjectDiff {
            object: self.key.to_string(),
            desired: super::sensitive::mask_object_with(&self.desired, &self.marked, &self.mask_key),
            live: self
                .live_compared
                .as_ref()
                .map(|l| super::sensitive::mask_object_with(l, &self.marked, &self.mask_key)),
            differences: self.differences.clone(),
            reason: self.reason.to_string(),
            verdict: Some(self.reason.clone()),
        }
    }

    /// This object, failed with `error` (Unknown: never applied, holds prune back),
    /// scrubbed of its sensitive values.
    #[must_use]
    pub fn failed(&self, error: String) -> Self {
        let mut u = self.clone();
        u.reason = ObjectReason::Error(self.scrub(&error));
        u
    }

    /// `message` (an error about this object) with the sensitive values of its Git and
    /// live sides masked ([`super::sensitive::scrub`]).
    pub fn scrub(&self, message: &str) -> String {
        let mut sides = vec![&self.apply];
        sides.extend(self.live.as_deref());
        super::sensitive::scrub_with(message, &sides, &self.marked, &self.mask_key)
    }
}

/// Kinds defined by the CustomResourceDefinitions of a render: (group, kind) →
/// namespaced.
pub type CrdKinds = HashMap<(String, String), bool>;

/// The kinds the CRDs among `objects` define.
pub fn crd_kinds<'a>(objects: impl IntoIterator<Item = &'a Value>) -> CrdKinds {
    objects
        .into_iter()
        .filter(|o| {
            o.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
                && o.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
        })
        .filter_map(|o| {
            let group = o.pointer("/spec/group")?.as_str()?;
            let kind = o.pointer("/spec/names/kind")?.as_str()?;
            let namespaced = o.pointer("/spec/scope").and_then(Value::as_str) != Some("Cluster");
            Some(((group.to_string(), kind.to_string()), namespaced))
        })
        .collect()
}

/// Placeholder identity of a manifest that has none (reported as an error).
pub fn unknown_key() -> ObjectKey {
    ObjectKey { group: String::new(), kind: "?".into(), namespace: String::new(), name: "?".into() }
}

/// An object whose kind is not served: awaiting its CRD when one of the same render
/// defines it (namespace defaulted, wave and options read), otherwise an error naming
/// `not_served` and the source.
pub fn unserved(obj: Value, crds: &CrdKinds, namespace: &str, not_served: &str, source: &str) -> Compared {
    let mut key = ObjectKey::of(&obj).unwrap_or_else(unknown_key);
    let Some(&namespaced) = crds.get(&(key.group.clone(), key.kind.clone())) else {
        return Compared::early(key, obj, None, ObjectReason::Error(format!("{not_served} ({source})")), source);
    };
    if namespaced && key.namespace.is_empty() {
        key.namespace = namespace.to_string();
    }
    let (wave, options) = (plan::sync_wave(&obj).unwrap_or(0), SyncOptions::of_object(&obj));
    let mut c = Compared::early(key, obj, None, ObjectReason::AwaitsCrd, source);
    (c.wave, c.options) = (wave, options);
    c
}

/// The digest of a manifest the cluster removes once it finished by a rule the
/// manifest itself declares — a `batch` Job with `spec.ttlSecondsAfterFinished`
/// (Kubernetes docs, "Automatic Cleanup for Finished Jobs") — as the first 16 hex digits
/// of the SHA-256 of its JSON; `None` for any other manifest. A Job of the same digest
/// that finished is not re-created when it is gone: it already ran; a changed manifest
/// (a new digest) runs once.
pub fn finished_digest(obj: &Value) -> Option<String> {
    use sha2::Digest as _;
    let job = obj.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("batch/"))
        && obj.get("kind").and_then(Value::as_str) == Some("Job");
    if !job || obj.pointer("/spec/ttlSecondsAfterFinished").is_none_or(Value::is_null) {
        return None;
    }
    let digest = sha2::Sha256::digest(serde_json::to_vec(obj).ok()?);
    Some(hex::encode(digest)[..16].to_string())
}

/// What is remembered of a Job whose live version `live` finished (its health
/// `health` is Healthy "job completed" or Degraded "job failed…") when its manifest has
/// a [`finished_digest`]; `None` while it runs, or for other objects.
pub fn finished(c: &Compared, health: &crate::health::Health) -> Option<crate::status::Finished> {
    use crate::health::HealthStatus;
    let digest = c.finished_digest.as_ref()?;
    let live = c.live.as_ref()?;
    let done = |t: &str| {
        live.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
            cs.iter().any(|x| {
                x.get("type").and_then(Value::as_str) == Some(t)
                    && x.get("status").and_then(Value::as_str) == Some("True")
            })
        })
    };
    let finished =
        (done("Complete") || done("Failed")) && matches!(health.status, HealthStatus::Healthy | HealthStatus::Degraded);
    finished.then(|| crate::status::Finished {
        object: c.key.to_string(),
        manifest: digest.clone(),
        health: health.status,
        message: health.message.clone(),
    })
}

/// The health shown for a Job that [`ran_before`] and is gone: how it ended, when plumb
/// saw it finish; else Missing (it is not there; the application's health does not
/// count a Missing object while others exist), saying it is not created again.
pub fn finished_health(f: &crate::status::Finished) -> crate::health::Health {
    use crate::health::{Health, HealthStatus};
    match f.health {
        HealthStatus::Missing => Health::new(
            HealthStatus::Missing,
            "removed (ttlSecondsAfterFinished, or by hand) before plumb saw it finish; not created again for the same manifest",
        ),
        status => Health::new(status, format!("{}; removed by its ttlSecondsAfterFinished", f.message)),
    }
}

/// The record of `key`'s manifest `digest` among `remembered`: plumb created that Job,
/// or saw it finish.
pub fn ran_before<'a>(
    key: &ObjectKey,
    digest: Option<&str>,
    remembered: &'a [crate::status::Finished],
) -> Option<&'a crate::status::Finished> {
    let digest = digest?;
    let object = key.to_string();
    remembered.iter().find(|f| f.object == object && f.manifest == digest)
}

/// A manifest ready to be sent: identity, wave, options, tracking-stamped body.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Its identity.
    pub key: ObjectKey,
    /// The body to send.
    pub obj: Value,
    /// Its sync wave.
    pub wave: i32,
    /// Its own sync options.
    pub options: SyncOptions,
}

/// A manifest [`prepare`] refused: as far as it got, and why.
#[derive(Debug, Clone)]
pub struct Rejected {
    /// Its identity, or [`unknown_key`] when it has none.
    pub key: ObjectKey,
    /// The manifest.
    pub obj: Value,
    /// The message, naming the source.
    pub message: String,
}

/// The identity [`prepare`] gives `obj` (of a served kind, `namespaced` or not, going
/// into `namespace` when it names none), read without copying or changing it; `None`
/// when it has none (then [`prepare`] refuses it).
pub fn identity(obj: &Value, namespaced: bool, namespace: &str) -> Option<ObjectKey> {
    let mut key = ObjectKey::of(obj)?;
    if !namespaced {
        key.namespace.clear();
    } else if key.namespace.is_empty() {
        namespace.clone_into(&mut key.namespace);
    }
    Some(key)
}

/// Prepares `obj` of a served kind (`namespaced` or not) for application `app`:
/// defaults the namespace to `namespace` (or drops it for cluster-scoped kinds), reads
/// identity, sync wave and options, stamps the tracking-id (and `installation`).
///
/// # Errors
/// [`Rejected`] when it has no name, a bad sync wave or bad sync options.
pub fn prepare(
    mut obj: Value,
    namespaced: bool,
    app: &str,
    namespace: &str,
    installation: Option<&str>,
    source: &str,
) -> Result<Prepared, Box<Rejected>> {
    let reject = |key, obj, message| Err(Box::new(Rejected { key, obj, message }));
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if namespaced {
            if meta.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty) {
                meta.insert("namespace".into(), Value::String(namespace.into()));
            }
        } else {
            meta.remove("namespace");
        }
    }
    let Some(key) = ObjectKey::of(&obj) else {
        return reject(unknown_key(), obj, format!("{source}: no identity"));
    };
    let wave = match plan::sync_wave(&obj) {
        Ok(w) => w,
        Err(e) => return reject(key, obj, format!("{source}: {e}")),
    };
    if let Some(e) = SyncOptions::problems(&obj).into_iter().next() {
        let e = format!("{source}: annotation {}: {e}", tracking::SYNC_OPTIONS_ANNOTATION);
        return reject(key, obj, e);
    }
    let options = SyncOptions::of_object(&obj);
    tracking::stamp(&mut obj, app, &key, installation);
    Ok(Prepared { key, obj, wave, options })
}

/// What [`judge`] found.
#[derive(Debug, Clone)]
pub struct Judgement {
    /// Differing fields, each with the manager of its live value.
    pub differences: Vec<Difference>,
    /// Why (not) in sync.
    pub reason: ObjectReason,
    /// `managedFields` to install before applying (client-side tools' fields taken
    /// over), when any.
    pub takeover: Option<Value>,
}

/// What Git's side of a comparison ([`judge`]'s `desired`) says of the fields hand
/// tools hold ([`managers::HAND_MANAGERS`]), which plumb takes over before it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// `Replace=true`: the object is written whole; nothing is taken over.
    Replaced,
    /// `desired` is what the server would hold after plumb's apply *with* the takeover
    /// (the dry-run answer, asked again without the fields the takeover releases:
    /// [`managers::released`]), or nothing is released: the differences are the whole
    /// truth, and the takeover is made only by a write that happens anyway.
    Released,
    /// `desired` still holds the hand tools' fields (the server could not be asked
    /// without them): each field they hold that Git does not declare is a difference,
    /// and the takeover alone makes the object OutOfSync.
    Kept,
}

/// How [`judge`] reads its sides.
#[derive(Debug, Clone)]
pub struct Judging<'a> {
    /// `desired` is `apply` itself: the server refused the dry-run, and the comparison
    /// is made on plumb's side.
    pub client_side: bool,
    /// What `desired` says of the fields hand tools hold.
    pub held: Held,
    /// Whose fields plumb takes over.
    pub takeover: managers::Takeover<'a>,
    /// The installation's key sensitive values are marked with.
    pub key: super::sensitive::MaskKey,
}

/// Judges one existing object: `desired` (the dry-run result, or `apply` itself when
/// `how.client_side`) against `live` (both normalized, ignored fields stripped), with
/// `live_obj` the live object as read (its managedFields name who set what) and `apply`
/// what plumb sends. A Secret's values are masked in the differences under `how.key`.
pub fn judge(desired: &Value, live: &Value, live_obj: &Value, apply: &Value, how: &Judging<'_>) -> Judgement {
    let Judging { client_side, held, takeover, ref key } = *how;
    let ours = takeover.ours;
    let mut differences =
        if client_side { super::client_side::diff_subset(desired, live) } else { super::diff(desired, live) };
    for d in &mut differences {
        d.manager = managers::owner_of(live_obj, &d.path, ours);
    }
    // Fields held by client-side tools: Git no longer declaring them would not remove
    // them (SSA keeps another manager's fields), so plumb takes them over first.
    let hand = takeover;
    let mut takeover = if held == Held::Replaced { None } else { managers::takeover(live_obj, hand) };
    let legacy_owner = if held == Held::Kept && takeover.is_some() {
        legacy_differences(live_obj, apply, hand, &mut differences)
    } else {
        None
    };
    super::sensitive::mask_differences(
        super::sensitive::is_secret(apply) || super::sensitive::is_secret(live_obj),
        key,
        &mut differences,
    );
    if held == Held::Released && differences.is_empty() {
        // nothing would change: no write, and so no takeover
        takeover = None;
    }
    let reason = if !differences.is_empty() {
        ObjectReason::Differs { fields: differences.iter().map(Difference::describe).collect(), client_side }
    } else if let Some(m) = legacy_owner {
        ObjectReason::TakeOver(m)
    } else {
        ObjectReason::Synced
    };
    Judgement { differences, reason, takeover }
}

/// [`Held::Kept`]: the fields of `live_obj` that hand tools hold and Git (`apply`) does
/// not declare, added to `differences` (the highest undeclared field of each: a whole
/// list element a person added is one difference); returns the first such manager.
fn legacy_differences(
    live_obj: &Value,
    apply: &Value,
    hand: managers::Takeover<'_>,
    differences: &mut Vec<Difference>,
) -> Option<String> {
    let mut legacy_owner = None;
    for (tokens, owner) in managers::legacy_paths(live_obj, hand) {
        let mut pointer = String::new();
        for t in &tokens {
            pointer.push('/');
            pointer.push_str(&t.replace('~', "~0").replace('/', "~1"));
            if apply.pointer(&pointer).is_none() {
                break;
            }
        }
        legacy_owner.get_or_insert_with(|| owner.manager.clone());
        if apply.pointer(&pointer).is_some()
            || pointer.ends_with("last-applied-configuration")
            || differences.iter().any(|d| d.path == pointer)
        {
            continue;
        }
        differences.push(Difference {
            desired: None,
            live: live_obj.pointer(&pointer).cloned(),
            path: pointer,
            manager: Some(owner),
        });
    }
    legacy_owner
}

/// Marks objects declared more than once (after namespaces were defaulted: one
/// manifest with `metadata.namespace`, one without) as failed, naming both sources.
pub fn declared_twice(compared: &mut [std::sync::Arc<Compared>]) {
    let mut first: HashMap<&ObjectKey, usize> = HashMap::with_capacity(compared.len());
    let mut twice = Vec::new();
    for (i, c) in compared.iter().enumerate() {
        if c.key.kind == "?" {
            continue;
        }
        if let Some(&j) = first.get(&c.key) {
            twice.push((j, i));
        } else {
            first.insert(&c.key, i);
        }
    }
    drop(first);
    for (j, i) in twice {
        let why = format!("{} is declared twice: {} and {}", compared[i].key, compared[j].source, compared[i].source);
        compared[j] = std::sync::Arc::new(compared[j].failed(why.clone()));
        compared[i] = std::sync::Arc::new(compared[i].failed(why));
    }
}

/// Whose a live object is, for application `app` of installation `installation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Its tracking-id names `app` (plumb created it, or adopted it).
    Ours,
    /// It carries no tracking-id plumb could honour and adoption is allowed: taken
    /// over, marked [`tracking::ADOPTED_ANNOTATION`].
    Adopt,
    /// Another application (or another plumb installation) tracks it: never taken over.
    Theirs(String),
    /// It exists, plumb did not create it, and adoption is not allowed.
    Unmanaged,
}

/// Whose `live` is ([`Ownership`]); `adopt` is `Adopt=true` (object or application).
/// A tracking-id naming `app` but another object (copied by hand) counts as the
/// application's: plumb stamps the right one.
pub fn ownership(live: &Value, app: &str, installation: Option<&str>, adopt: bool) -> Ownership {
    let theirs = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(tracking::INSTALLATION_ANNOTATION))
        .and_then(Value::as_str);
    if theirs.is_some() && theirs != installation {
        return Ownership::Theirs(format!("another plumb installation ({})", theirs.unwrap_or("")));
    }
    let created_for = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(tracking::CREATED_FOR_ANNOTATION))
        .and_then(Value::as_str);
    match tracking::tracked_app(live) {
        Some(a) if a == app => Ownership::Ours,
        None if created_for == Some(app) => Ownership::Ours,
        Some(other) => Ownership::Theirs(format!("application {other}")),
        None if adopt => Ownership::Adopt,
        None => Ownership::Unmanaged,
    }
}

/// Marks the objects `boundary` refuses ([`crate::plan::Boundary::check`]) as
/// [`ObjectReason::Refused`], naming their file: objects whose kind awaits a CRD of the
/// render (checked with that CRD's scope; served kinds are checked before they are
/// read). An object of an unknown kind is left to its error.
pub fn refuse_outside(compared: &mut [std::sync::Arc<Compared>], boundary: &crate::plan::Boundary, crds: &CrdKinds) {
    for c in compared.iter_mut() {
        let namespaced = match &c.kind {
            Some(k) => k.namespaced,
            None => match crds.get(&(c.key.group.clone(), c.key.kind.clone())) {
                Some(&n) if c.awaits_crd() => n,
                _ => continue,
            },
        };
        if let Err(why) = boundary.check(&c.key, namespaced, &c.apply) {
            let mut refused = (**c).clone();
            refused.reason =
                ObjectReason::Refused(format!("({}) outside the application's boundaries: {why}", c.source));
            *c = std::sync::Arc::new(refused);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    const PLUMB: managers::Takeover<'static> = managers::Takeover { ours: "plumb", extra: &[] };

    /// A server-side comparison with `held`, marks under one installation's key.
    fn how(held: Held) -> Judging<'static> {
        Judging { client_side: false, held, takeover: PLUMB, key: key() }
    }

    fn key() -> super::super::sensitive::MaskKey {
        super::super::sensitive::MaskKey::new(b"one installation")
    }

    fn cm(annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "annotations": annotations}, "data": {"a": "1"}})
    }

    #[test]
    fn prepare_defaults_the_namespace_and_refuses_bad_annotations() {
        // (manifest, namespaced) → Ok(key, wave) or the error
        type Case = (Value, bool, Result<(&'static str, i32), &'static str>);
        let cases: Vec<Case> = vec![
            (cm(json!({})), true, Ok(("ConfigMap/lab/cfg", 0))),
            (cm(json!({"plumb.dev/sync-wave": "-2"})), true, Ok(("ConfigMap/lab/cfg", -2))),
            (
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "namespace": "x"}}),
                false,
                Ok(("Namespace/team", 0)),
            ),
            (cm(json!({"plumb.dev/sync-wave": "soon"})), true, Err("cm.yaml#0: ")),
            (
                cm(json!({"plumb.dev/sync-options": "Prune=maybe"})),
                true,
                Err("cm.yaml#0: annotation plumb.dev/sync-options: "),
            ),
            (json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}), true, Err("cm.yaml#0: no identity")),
        ];
        for (obj, namespaced, want) in cases {
            match (prepare(obj.clone(), namespaced, "web", "lab", None, "cm.yaml#0"), want) {
                (Ok(p), Ok((key, wave))) => {
                    assert_eq!((p.key.to_string().as_str(), p.wave), (key, wave), "{obj}");
                    assert_eq!(tracking::tracked_app(&p.obj), Some("web"), "stamped: {}", p.obj);
                }
                (Err(r), Err(prefix)) => assert!(r.message.starts_with(prefix), "{} / {prefix}", r.message),
                (got, want) => panic!("{obj}: got {:?}, want {want:?}", got.map(|p| p.key)),
            }
        }
    }

    #[test]
    fn identity_is_the_key_prepare_gives() {
        let meta = |m: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": m});
        let cases = [
            (cm(json!({})), true),
            (cm(json!({})), false),
            (meta(json!({"name": "web", "namespace": "other"})), true),
            (meta(json!({"name": "web", "namespace": "other"})), false),
            (meta(json!({"name": "web", "namespace": ""})), true),
            (meta(json!({"name": "web", "namespace": 7})), true),
            (meta(json!({"name": "web", "namespace": null})), true),
            (meta(json!({"namespace": "x"})), true),
            (meta(json!("web")), true),
            (json!({"kind": "ConfigMap", "metadata": {"name": "a"}}), true),
        ];
        for (obj, namespaced) in cases {
            let prepared = prepare(obj.clone(), namespaced, "web", "lab", None, "x.yaml#1").ok().map(|p| p.key);
            assert_eq!(identity(&obj, namespaced, "lab"), prepared, "{obj} namespaced={namespaced}");
        }
    }

    #[test]
    fn an_unserved_kind_waits_for_its_crd_only_when_the_render_defines_it() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"group": "demo.example.com", "scope": "Namespaced", "names": {"kind": "Widget"}}});
        let crds = crd_kinds([&crd]);
        let widget = json!({"apiVersion": "demo.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        let c = unserved(widget.clone(), &crds, "lab", "unknown kind", "w.yaml#0");
        assert_eq!(
            (c.key.to_string(), c.sync(), c.awaits_crd()),
            ("Widget.demo.example.com/lab/w".into(), SyncStatus::OutOfSync, true)
        );
        assert_eq!(c.reason.to_string(), "missing (its CustomResourceDefinition is applied first in this sync)");
        let c = unserved(widget, &CrdKinds::new(), "lab", "unknown kind", "w.yaml#0");
        assert_eq!((c.sync(), c.reason.to_string()), (SyncStatus::Unknown, "unknown kind (w.yaml#0)".into()));
    }

    #[test]
    fn judge_names_fields_managers_and_takeovers() {
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "managedFields": [
            {"manager": "plumb", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "kubectl", "operation": "Update", "subresource": "scale", "time": "2026-11-29T14:02:11Z",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}, "spec": {"replicas": 5}});
        let desired = json!({"spec": {"replicas": 3}});
        let j = judge(&desired, &json!({"spec": {"replicas": 5}}), &live, &desired, &how(Held::Kept));
        assert_eq!(
            j.reason.to_string(),
            "differs at /spec/replicas 5→3 (set by kubectl via scale at 2026-11-29T14:02:11Z)"
        );
        assert_eq!(j.reason.sync(), SyncStatus::OutOfSync);
        let same = judge(&desired, &desired, &live, &desired, &how(Held::Kept));
        assert_eq!((same.reason, same.differences.len()), (ObjectReason::Synced, 0));
        // a field only a client-side tool holds, that Git no longer declares: taken over, then removed
        let legacy = json!({"metadata": {"name": "web", "managedFields": [
            {"manager": "kubectl-client-side-apply", "operation": "Update",
             "fieldsV1": {"f:data": {"f:a": {}, "f:old": {}}}}]}, "data": {"a": "1", "old": "x"}});
        let apply = json!({"data": {"a": "1"}});
        let j = judge(&apply, &apply, &legacy, &apply, &how(Held::Kept));
        assert!(j.takeover.is_some(), "{j:?}");
        assert_eq!(j.reason.to_string(), "differs at /data/old x→(absent) (set by kubectl-client-side-apply)");
        let replaced = judge(&apply, &apply, &legacy, &apply, &how(Held::Replaced));
        assert!(
            replaced.takeover.is_none() && replaced.reason == ObjectReason::Synced,
            "Replace=true owns what it writes"
        );
        // flux-14 part A: an env entry added with `kubectl apply --server-side` is one
        // difference (the element), set by kubectl
        let live = json!({"metadata": {"name": "web", "managedFields": [
            {"manager": "kubectl", "operation": "Apply", "time": "2026-11-30T09:00:00Z", "fieldsV1": {"f:spec": {"f:env": {
                "k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}},
                "k:{\"name\":\"DEBUG_SQL\"}": {".": {}, "f:name": {}, "f:value": {}}}}}}]},
            "spec": {"env": [{"name": "A", "value": "1"}, {"name": "DEBUG_SQL", "value": "true"}]}});
        let apply = json!({"spec": {"env": [{"name": "A", "value": "1"}]}});
        let j = judge(&apply, &apply, &live, &apply, &how(Held::Kept));
        let paths: Vec<(&str, Option<&str>)> =
            j.differences.iter().map(|d| (d.path.as_str(), d.manager.as_ref().map(|m| m.manager.as_str()))).collect();
        assert_eq!(paths, [("/spec/env/1", Some("kubectl"))]);
        assert!(j.takeover.is_some());
    }

    /// An object made with `kubectl create` from Git's own manifest: the server's answer
    /// after the takeover holds the defaults it filled in, so nothing differs, nothing
    /// is taken over and nothing is written; judged by the field list (`Kept`, the
    /// answer could not be asked again) every default was drift "(set by kubectl-create)".
    #[test]
    fn an_object_made_with_kubectl_create_is_synced_not_drift_in_its_defaults() {
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "managedFields": [
            {"manager": "kubectl-create", "operation": "Update", "time": "2026-12-01T10:00:00Z", "fieldsV1": {"f:spec": {
                "f:replicas": {}, "f:progressDeadlineSeconds": {}, "f:template": {"f:spec": {"f:dnsPolicy": {}}}}}}]},
            "spec": {"replicas": 2, "progressDeadlineSeconds": 600, "template": {"spec": {"dnsPolicy": "ClusterFirst"}}}});
        let apply = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
        let answer = json!({"spec": {"replicas": 2, "progressDeadlineSeconds": 600, "template": {"spec": {"dnsPolicy": "ClusterFirst"}}}});
        let j = judge(&answer, &answer, &live, &apply, &how(Held::Released));
        assert_eq!((&j.reason, j.differences.len(), j.takeover.is_none()), (&ObjectReason::Synced, 0, true), "{j:?}");
        let old = judge(&answer, &answer, &live, &apply, &how(Held::Kept));
        assert!(
            old.reason.to_string().contains("/spec/progressDeadlineSeconds 600→(absent) (set by kubectl-create"),
            "{}",
            old.reason
        );
        // a field the takeover would really remove is still drift, and the write takes over
        let gone = json!({"spec": {"replicas": 2}});
        let j = judge(&gone, &answer, &live, &apply, &how(Held::Released));
        assert!(
            j.reason.to_string().contains("/spec/progressDeadlineSeconds 600→(absent) (set by kubectl-create"),
            "{}",
            j.reason
        );
        assert!(j.takeover.is_some());
    }

    /// A Job whose manifest declares its removal after finishing is remembered by the
    /// digest of that manifest; other objects and other manifests are not.
    #[test]
    fn finished_jobs_are_remembered_by_their_manifest() {
        use crate::health::{Health, HealthStatus};
        let job = |ttl: Value, image: &str| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate", "namespace": "ns"}, "spec": {"ttlSecondsAfterFinished": ttl, "template": {"spec": {"containers": [{"name": "m", "image": image}]}}}});
        let d1 = finished_digest(&job(json!(60), "m:1")).expect("a TTL job");
        assert_eq!(d1.len(), 16);
        assert_eq!(finished_digest(&job(json!(60), "m:1")).as_deref(), Some(d1.as_str()), "stable");
        assert_ne!(finished_digest(&job(json!(60), "m:2")), Some(d1.clone()), "another manifest");
        assert_eq!(finished_digest(&job(Value::Null, "m:1")), None, "no TTL: the Job stays");
        assert_eq!(
            finished_digest(&json!({"apiVersion": "v1", "kind": "ConfigMap", "spec": {"ttlSecondsAfterFinished": 1}})),
            None
        );

        let key =
            ObjectKey { group: "batch".into(), kind: "Job".into(), namespace: "ns".into(), name: "migrate".into() };
        let mut c = Compared::early(key.clone(), job(json!(60), "m:1"), None, ObjectReason::Synced, "job.yaml#0");
        c.finished_digest = Some(d1.clone());
        let running = json!({"status": {"active": 1}});
        c.live = Some(running.into());
        assert_eq!(finished(&c, &Health::new(HealthStatus::Progressing, "job running")), None);
        c.live = Some(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}).into());
        let done = finished(&c, &Health::new(HealthStatus::Healthy, "job completed")).expect("finished");
        assert_eq!((done.object.as_str(), done.manifest.as_str()), ("Job.batch/ns/migrate", d1.as_str()));
        let remembered = [done];
        assert!(ran_before(&key, Some(&d1), &remembered).is_some());
        assert!(ran_before(&key, Some("0000000000000000"), &remembered).is_none(), "a changed manifest runs");
        let h = finished_health(&remembered[0]);
        assert_eq!(
            (h.status, h.message.as_str()),
            (HealthStatus::Healthy, "job completed; removed by its ttlSecondsAfterFinished")
        );
        let unseen = crate::status::Finished {
            health: HealthStatus::Missing,
            message: "created by plumb".into(),
            ..remembered[0].clone()
        };
        assert_eq!(finished_health(&unseen).status, HealthStatus::Missing);
        assert_eq!(ObjectReason::Finished(unseen).sync(), SyncStatus::Synced);
    }

    /// Adoption is explicit; another application's object is never taken over.
    #[test]
    fn whose_a_live_object_is() {
        let live = |annotations: Value| json!({"metadata": {"name": "x", "annotations": annotations}});
        let table: &[(Value, Option<&str>, bool, Ownership)] = &[
            (live(json!({"plumb.dev/tracking-id": "web:/ConfigMap:ns/x"})), None, false, Ownership::Ours),
            (live(json!({"plumb.dev/tracking-id": "web:/ConfigMap:ns/copied"})), None, false, Ownership::Ours),
            (
                live(json!({"plumb.dev/tracking-id": "shop:/ConfigMap:ns/x"})),
                None,
                true,
                Ownership::Theirs("application shop".into()),
            ),
            (live(json!({})), None, false, Ownership::Unmanaged),
            (live(Value::Null), None, true, Ownership::Adopt),
            (live(json!({"plumb.dev/created-for": "web"})), None, false, Ownership::Ours),
            (live(json!({"plumb.dev/created-for": "shop"})), None, false, Ownership::Unmanaged),
            (
                live(json!({"plumb.dev/tracking-id": "web:/ConfigMap:ns/x", "plumb.dev/installation-id": "blue"})),
                Some("green"),
                true,
                Ownership::Theirs("another plumb installation (blue)".into()),
            ),
        ];
        for (obj, installation, adopt, want) in table {
            assert_eq!(&ownership(obj, "web", *installation, *adopt), want, "{obj}");
        }
        let mut obj = json!({"metadata": {"name": "x", "annotations": null}});
        tracking::mark_adopted(&mut obj);
        assert!(tracking::is_adopted(&obj));
    }

    /// k8s-04: a drifted Secret's reason, diff and error name the field, never a value.
    #[test]
    fn a_secret_reports_paths_and_marks_never_values() {
        let git = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-db"},
            "data": {"password": "Y2hhbmdlbWUtMQ==", "host": "ZGIuZ2l0b3BzLWxhYi5zdmM="}});
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-db"},
            "data": {"password": "aHVudGVyLXR3bw==", "host": "ZGIuZ2l0b3BzLWxhYi5zdmM="}});
        let j = judge(&git, &live, &live, &git, &how(Held::Kept));
        let key = ObjectKey::of(&git).unwrap();
        let mut c = Compared::early(key, git.clone(), None, j.reason, "s.yaml#0");
        (c.desired, c.live_compared, c.differences, c.live) =
            (git.clone(), Some(live.clone()), j.differences, Some(live.into()));
        let failed = c.failed("Secret \"web-db\" is invalid: data[password]: \"aHVudGVyLXR3bw==\"".into());
        let d = c.diff();
        let out = [c.reason.to_string(), serde_json::to_string(&d).unwrap(), failed.reason.to_string()].join("\n");
        for v in ["Y2hhbmdlbWUtMQ==", "aHVudGVyLXR3bw==", "ZGIuZ2l0b3BzLWxhYi5zdmM="] {
            assert!(!out.contains(v), "{v} in {out}");
        }
        assert!(c.reason.to_string().starts_with("differs at /data/password (sensitive, hmac:"), "{}", c.reason);
        assert_eq!(c.sync(), SyncStatus::OutOfSync, "the drift is still seen");
        assert!(failed.reason.to_string().contains("data[password]"), "{}", failed.reason);
    }

    /// Issue 12: a field the environment marks sensitive is reported like a Secret's:
    /// reason, diff and errors name the field, never the value; drift is still seen.
    #[test]
    fn a_marked_field_reports_paths_and_marks_never_values() {
        let git = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"},
            "data": {"apiKey": "cm-key-original-7f3a", "mode": "plain"}});
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"},
            "data": {"apiKey": "cm-key-handmade-9b2e", "mode": "plain"}});
        let j = judge(&git, &live, &live, &git, &how(Held::Kept));
        let key = ObjectKey::of(&git).unwrap();
        let mut c = Compared::early(key, git.clone(), None, j.reason, "s.yaml#0");
        (c.desired, c.live_compared, c.differences, c.live) =
            (git.clone(), Some(live.clone()), j.differences, Some(live.into()));
        assert!(c.reason.to_string().contains("cm-key-original-7f3a"), "without the rule the value shows");
        c.mask_key = self::key();
        let c = c.with_marked(super::super::sensitive::Marked(vec!["/data/apiKey".into()]));
        let failed = c.failed("ConfigMap \"web\" is invalid: data[apiKey]: \"cm-key-original-7f3a\"".into());
        let d = c.diff();
        let out = [c.reason.to_string(), serde_json::to_string(&d).unwrap(), failed.reason.to_string()].join("\n");
        for v in ["cm-key-original-7f3a", "cm-key-handmade-9b2e"] {
            assert!(!out.contains(v), "{v} in {out}");
        }
        assert!(c.reason.to_string().starts_with("differs at /data/apiKey (sensitive, hmac:"), "{}", c.reason);
        assert_eq!(c.sync(), SyncStatus::OutOfSync, "the drift is still seen");
        assert_eq!(d.desired["data"]["mode"], "plain", "other fields stay");
    }

    #[test]
    fn an_object_declared_twice_fails_naming_both_files() {
        let key =
            ObjectKey { group: String::new(), kind: "ConfigMap".into(), namespace: "lab".into(), name: "cfg".into() };
        let one =
            |src: &str| std::sync::Arc::new(Compared::early(key.clone(), json!({}), None, ObjectReason::Missing, src));
        let mut all = [one("a.yaml#0"), one("b.yaml#0")];
        declared_twice(&mut all);
        for c in &all {
            assert_eq!(
                c.reason,
                ObjectReason::Error("ConfigMap/lab/cfg is declared twice: a.yaml#0 and b.yaml#0".into())
            );
            assert_eq!(
                (c.sync(), c.diff().reason.as_str()),
                (SyncStatus::Unknown, "ConfigMap/lab/cfg is declared twice: a.yaml#0 and b.yaml#0")
            );
        }
    }
}
