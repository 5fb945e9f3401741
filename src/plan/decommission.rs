//! Decommission: what happens to an application that left the policy file (or that a
//! generator stopped producing). Pure: the loop (`crate::decommission`) reads the
//! `Application` resources and the live objects, feeds them here, and does what comes
//! back.
//!
//! - **What is remembered** ([`Record`], `spec.decommission` of the resource): once the
//!   application left the policy its settings are gone, so each pass keeps on its
//!   resource the [`DeletionPolicy`], whether the data-loss guards apply
//!   (`protectDataLoss`) and the identity its writes impersonate; its passes keep its
//!   PreDelete / PostDelete hooks' manifests ([`Hooks`], `spec.decommissionHooks`, at
//!   most [`MAX_HOOK_BYTES`]).
//! - **What to do** ([`decide`]): `orphan` leaves the objects; `delete` and `wait`
//!   delete them. The mass guard holds every leaving application when more than one
//!   leaves at once, or when one leaves an environment with no application left, until
//!   each is confirmed (`plumb decommission APP… --confirm`, [`CONFIRM_ANNOTATION`],
//!   valid [`CONFIRM_VALIDITY`] seconds) — never a silent mass delete from one edit
//!   (argo-cd#6046, #18614).
//! - **What is deleted, in which order** ([`delete_plan`]): only objects whose
//!   tracking-id names the leaving application and that no live application claims;
//!   highest sync wave first, inside a wave the reverse of the apply order; the
//!   data-loss classes ([`super::data_loss_class`]), `Prune=confirm` and adopted objects
//!   held until `plumb decommission APP --approve` ([`APPROVE_ANNOTATION`]), as their
//!   prune would be; `Prune=false` and `helm.sh/resource-policy: keep` objects left in
//!   place.
//!
//! Tracking marks of orphaned objects are **left** (as Argo CD's non-cascading delete
//! leaves them; Flux removes its labels): removing them is one write per object — a
//! mass write caused by one edit, with the leaving application's identity possibly no
//! longer allowed — and a later application declaring the same objects takes them over
//! as it takes over any other application's (the tracking-id then names it).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::config::DeletionPolicy;
use crate::tracking::ObjectKey;

/// Annotation on an `Application` resource confirming its decommission despite the
/// mass guard: an RFC 3339 time (`plumb decommission APP --confirm` writes now).
pub const CONFIRM_ANNOTATION: &str = "plumb.dev/decommission-confirmed";

/// Annotation on an `Application` resource approving the deletion of its data-loss
/// classes (PersistentVolumeClaims, Namespaces, CRDs): an RFC 3339 time
/// (`plumb decommission APP --approve`).
pub const APPROVE_ANNOTATION: &str = "plumb.dev/decommission-approved";

/// How long a confirmation or approval stays valid, in seconds (24 h, as a prune
/// approval, [`super::APPROVAL_VALIDITY`]): an old one does not approve a later,
/// unrelated removal.
pub const CONFIRM_VALIDITY: i64 = super::APPROVAL_VALIDITY;

/// The most bytes of hook manifests (serialized JSON) a [`Record`] keeps: the
/// `Application` resource must stay far below the API server's object size limit
/// (1.5 MiB, etcd's request limit). Hooks beyond it are counted in
/// [`Record::hooks_omitted`] and not run.
pub const MAX_HOOK_BYTES: usize = 64 * 1024;

/// A hook's phase ([`super::hooks::Phase`]); a decommission runs `PreDelete` and
/// `PostDelete`.
pub use super::hooks::Phase;

/// One hook of a delete phase, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    /// Its phase.
    pub phase: Phase,
    /// Order inside the phase (lowest first): `plumb.dev/sync-wave`, else
    /// `helm.sh/hook-weight`; 0 when neither is an integer.
    pub weight: i32,
    /// The rendered manifest, applied as is.
    pub manifest: Value,
}

/// What an `Application` resource remembers for a later decommission
/// (`spec.decommission`): written with each policy's declaration of the application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Record {
    /// What to do with the objects.
    pub deletion_policy: DeletionPolicy,
    /// Whether the data-loss classes need an approval (the environment's
    /// `protectDataLoss`).
    pub protect_data_loss: bool,
    /// The user its writes impersonate (`system:serviceaccount:NS:NAME`), or none
    /// (plumb's own identity): deletes and hooks run as it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonate: Option<String>,
    /// Its environment.
    pub environment: String,
}

impl Record {
    /// What application `app` of environment `env` leaves for its decommission, as the
    /// policy declares it now.
    pub fn of(app: &crate::config::Application, env: &crate::config::Environment) -> Self {
        Self {
            deletion_policy: app.deletion_policy(env),
            protect_data_loss: env.sync_policy.protect_data_loss,
            impersonate: app.impersonates(env),
            environment: env.name.value.clone(),
        }
    }
}

/// The delete hooks of an application's last render, kept on its resource
/// (`spec.decommissionHooks`, written by its passes; [`delete_hooks`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Hooks {
    /// PreDelete and PostDelete hooks, in the order they run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    /// Hooks left out for [`MAX_HOOK_BYTES`] (not run).
    #[serde(skip_serializing_if = "is_zero")]
    pub omitted: usize,
}

impl Hooks {
    /// The hooks of `phase`, in order.
    pub fn of(&self, phase: Phase) -> impl Iterator<Item = &Hook> {
        self.hooks.iter().filter(move |h| h.phase == phase)
    }
}

impl Default for Record {
    /// `orphan`, the data-loss guards on (a field missing from a stored record never
    /// turns a guard off), plumb's own identity, no hooks.
    fn default() -> Self {
        Self {
            deletion_policy: DeletionPolicy::Orphan,
            protect_data_loss: true,
            impersonate: None,
            environment: String::new(),
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The delete phases (`PreDelete`, `PostDelete`) a manifest is a hook of, read as a
/// sync reads hooks ([`super::hooks::classify`]: `plumb.dev/hook`,
/// `argocd.argoproj.io/hook`, `helm.sh/hook` pre-delete/post-delete), with its order
/// inside the phase. Empty for an object that is no delete hook.
pub fn delete_phases(obj: &Value) -> (Vec<Phase>, i32) {
    match super::hooks::classify(obj) {
        Ok(super::hooks::Classified::Hook(h)) => {
            let mut phases: Vec<Phase> = h
                .phases
                .iter()
                .map(|&(p, _)| p)
                .filter(|p| matches!(p, Phase::PreDelete | Phase::PostDelete))
                .collect();
            phases.sort();
            phases.dedup();
            (phases, h.order)
        }
        _ => (vec![], 0),
    }
}

/// Whether a manifest is a hook of any phase (a sync's or a delete's) or an object no
/// sync applies (a Helm test; [`super::hooks::classify`], an unreadable hook annotation
/// counts as a hook): hooks are never part of the application's inventory, so a
/// decommission never deletes them as objects.
pub fn is_hook(obj: &Value) -> bool {
    !matches!(super::hooks::classify(obj), Ok(super::hooks::Classified::Object))
}

/// The delete hooks among `manifests`, ordered by phase then weight then render order,
/// keeping at most [`MAX_HOOK_BYTES`] of them; those left out are counted, and so are
/// Secrets, never kept: the resource is readable by whoever may read statuses, and a
/// Secret's values never leave it through plumb.
pub fn delete_hooks(manifests: &[Value]) -> Hooks {
    let secret = |m: &Value| m["kind"] == "Secret" && m["apiVersion"] == "v1";
    let secrets = manifests.iter().filter(|m| secret(m) && !delete_phases(m).0.is_empty()).count();
    let mut hooks: Vec<Hook> = manifests
        .iter()
        .filter(|m| !secret(m))
        .flat_map(|m| {
            let (phases, weight) = delete_phases(m);
            phases.into_iter().map(move |phase| Hook { phase, weight, manifest: m.clone() })
        })
        .collect();
    hooks.sort_by_key(|h| (h.phase, h.weight));
    let (mut kept, mut bytes, mut omitted) = (Vec::new(), 0usize, secrets);
    for h in hooks {
        let size = serde_json::to_string(&h.manifest).map_or(usize::MAX, |s| s.len());
        if bytes.saturating_add(size) > MAX_HOOK_BYTES {
            omitted += 1;
            continue;
        }
        bytes += size;
        kept.push(h);
    }
    Hooks { hooks: kept, omitted }
}

/// The SHA-256 (hex) of `record` and `hooks` as JSON with sorted keys: kept by each
/// pass in the application's status (which only plumb writes) and compared, at the
/// decommission, with what `spec` holds then (which whoever may `patch` the resource
/// can change). Pure.
pub fn digest(record: &Record, hooks: &Hooks) -> String {
    use sha2::Digest as _;
    // serde_json's maps are sorted by key (its `preserve_order` feature is off): the
    // text is the same whatever order the API server returns the fields in
    let text = serde_json::to_string(&serde_json::json!([record, hooks])).unwrap_or_default();
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// What a decommission may trust of a leaving application's resource: its `spec`
/// record and hooks when their [`digest`] is the one its last pass kept in the status;
/// otherwise nothing — no record (so `orphan`, guards on) and no hooks, and `true`
/// (tampered): a `spec` changed by someone other than plumb never makes it delete or
/// run anything. Pure.
pub fn trusted(record: Option<Record>, hooks: Hooks, kept_digest: &str) -> (Option<Record>, Hooks, bool) {
    match record {
        None => (None, Hooks::default(), !hooks.hooks.is_empty()),
        Some(r) if !kept_digest.is_empty() && digest(&r, &hooks) == kept_digest => (Some(r), hooks, false),
        Some(_) => (None, Hooks::default(), true),
    }
}

/// Whether an RFC 3339 `stamp` (a confirmation or approval annotation) is valid at
/// `now`: not older than [`CONFIRM_VALIDITY`] seconds and not in the future (a minute
/// of clock skew allowed).
pub fn stamp_valid(stamp: Option<&str>, now: jiff::Timestamp) -> bool {
    let Some(t) = stamp.and_then(|s| s.trim().parse::<jiff::Timestamp>().ok()) else { return false };
    let age = now.as_second() - t.as_second();
    (-60..=CONFIRM_VALIDITY).contains(&age)
}

/// One application whose `Application` resource exists but which the policy no
/// longer declares.
#[derive(Debug, Clone, Default)]
pub struct Leaving {
    /// The application.
    pub app: String,
    /// What its resource remembers (`None`: written by a version that recorded nothing;
    /// read as `orphan`).
    pub record: Option<Record>,
    /// [`CONFIRM_ANNOTATION`]'s value.
    pub confirmed: Option<String>,
    /// Whether its decommission already started (a `Decommissioning` condition): it
    /// goes on, and no longer counts for the mass guard.
    pub started: bool,
    /// Whether the mass guard held it before (a `DecommissionPending` condition before
    /// it started): it stays held until confirmed, even once the others went.
    pub held: bool,
}

/// What to do with one leaving application now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Leave its objects; delete its `Application` resource.
    Orphan,
    /// Delete its objects (see [`delete_plan`]); with `wait`, keep the resource until
    /// every one is gone.
    Delete {
        /// `deletionPolicy: wait`.
        wait: bool,
    },
    /// Nothing yet: the mass guard holds it, for this reason (naming the command that
    /// confirms).
    Hold(String),
}

/// What to do with each of `leaving` (in its order) at `now`, given how many
/// applications each environment keeps in the new policy (`remaining`, by environment
/// name; a missing environment keeps none).
///
/// The mass guard: when more than one application leaves at once (those whose
/// decommission has not started), or one leaves an environment that keeps no
/// application, every such application without a valid confirmation
/// ([`stamp_valid`]) is held — whatever its policy: an edit that drops several
/// applications (a generator's input gone, a bad merge) is more often a mistake than a
/// decision, and even `orphan` loses their status and history. One held stays held
/// ([`Leaving::held`]) until confirmed: confirming one of them releases no other.
pub fn decide(leaving: &[Leaving], remaining: &BTreeMap<String, usize>, now: jiff::Timestamp) -> Vec<Action> {
    let fresh: Vec<&Leaving> = leaving.iter().filter(|l| !l.started).collect();
    let env_of = |l: &Leaving| l.record.as_ref().map(|r| r.environment.clone()).unwrap_or_default();
    let emptied: HashSet<String> = fresh
        .iter()
        .map(|l| env_of(l))
        .filter(|e| !e.is_empty() && remaining.get(e).copied().unwrap_or(0) == 0)
        .collect();
    let names: Vec<&str> = fresh.iter().map(|l| l.app.as_str()).collect();
    leaving
        .iter()
        .map(|l| {
            let env = env_of(l);
            let mass = fresh.len() > 1 || emptied.contains(&env) || l.held;
            if !l.started && mass && !stamp_valid(l.confirmed.as_deref(), now) {
                let why = if fresh.len() > 1 {
                    format!("{} applications leave the policy at once ({})", fresh.len(), names.join(", "))
                } else if emptied.contains(&env) {
                    format!("environment `{env}` keeps no application")
                } else {
                    "it left the policy together with other applications".to_string()
                };
                return Action::Hold(format!(
                    "{why}: held until confirmed with `plumb decommission {} --confirm` (valid 24 h)",
                    names.join(" ")
                ));
            }
            match l.record.as_ref().map(|r| r.deletion_policy).unwrap_or_default() {
                DeletionPolicy::Orphan => Action::Orphan,
                DeletionPolicy::Delete => Action::Delete { wait: false },
                DeletionPolicy::Wait => Action::Delete { wait: true },
            }
        })
        .collect()
}

/// One live object of the leaving application, as [`delete_plan`] judges it.
#[derive(Debug, Clone)]
pub struct Owned {
    /// Its key.
    pub key: ObjectKey,
    /// Its UID (the delete's precondition).
    pub uid: String,
    /// Its sync wave ([`super::sync_wave`]; 0 when unreadable).
    pub wave: i32,
    /// Already being deleted (a deletionTimestamp), with its finalizers.
    pub deleting: Option<Vec<String>>,
    /// `Prune=false` or `helm.sh/resource-policy: keep`: never deleted.
    pub kept: bool,
    /// `Prune=confirm`, or taken over rather than created (`Adopt=true`): deleted only
    /// with an approval, as its prune would be, whatever `protectDataLoss` says.
    pub confirm: bool,
    /// How its delete propagates: its `PrunePropagationPolicy`, else foreground (as a
    /// prune: dependents go first, the object last).
    pub propagation: crate::config::Propagation,
}

impl Owned {
    /// The object `obj` (a live object whose tracking-id names the application).
    pub fn of(obj: &Value) -> Option<Self> {
        let key = ObjectKey::of(obj)?;
        let options = crate::config::SyncOptions::of_object(obj);
        let deleting = obj.pointer("/metadata/deletionTimestamp").map(|_| {
            obj.pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        });
        Some(Self {
            key,
            uid: obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string(),
            wave: super::sync_wave(obj).unwrap_or(0),
            deleting,
            kept: super::keeps(obj) || options.prune_disabled,
            confirm: options.prune_confirm || crate::tracking::is_adopted(obj),
            propagation: options.propagation.unwrap_or(crate::config::Propagation::Foreground),
        })
    }
}

/// What a decommission deletes of the objects found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeletePlan {
    /// Indexes into the objects to delete now: the highest wave with anything left,
    /// in reverse apply order (empty when every deletable object is gone or going).
    pub now: Vec<usize>,
    /// Objects being deleted, held by finalizers: `Kind/ns/name (finalizers: a, b)`.
    pub terminating: Vec<String>,
    /// Objects waiting for `plumb decommission APP --approve`: data-loss classes,
    /// `Prune=confirm` and adopted objects.
    pub held: Vec<String>,
    /// Objects a live application claims: never deleted.
    pub claimed: Vec<String>,
    /// `Prune=false` / resource-policy keep objects: left in place.
    pub kept: Vec<String>,
}

impl DeletePlan {
    /// Whether nothing is left to delete or wait for (held, claimed and kept objects
    /// stay; held ones are named by [`DeletePlan::held`]).
    pub fn done(&self) -> bool {
        self.now.is_empty() && self.terminating.is_empty()
    }
}

/// What to delete of `objects` (the leaving application's, owned by it): those in
/// `claimed` (keys of objects a live application tracks or declares, as
/// [`ObjectKey`]'s display) are never touched; kept ones are left; data-loss classes
/// wait unless `approved` or `!protect`, `Prune=confirm` and adopted objects (an
/// existing object the application took over: Git must not be able to make plumb
/// delete what it did not create) unless `approved`. The rest go one wave at a time, the highest
/// first: the next wave starts once every object of the higher ones is gone or
/// accepted for deletion (`deleting`), as a prune reverses the apply order.
pub fn delete_plan(objects: &[Owned], claimed: &HashSet<String>, protect: bool, approved: bool) -> DeletePlan {
    let mut out = DeletePlan::default();
    let mut waves: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, o) in objects.iter().enumerate() {
        let name = o.key.to_string();
        if claimed.contains(&name) {
            out.claimed.push(name);
        } else if o.kept {
            out.kept.push(name);
        } else if let Some(finalizers) = &o.deleting {
            out.terminating.push(if finalizers.is_empty() {
                name
            } else {
                format!("{name} (finalizers: {})", finalizers.join(", "))
            });
        } else if !approved && (o.confirm || protect && super::data_loss_class(&o.key.group, &o.key.kind).is_some()) {
            out.held.push(name);
        } else {
            waves.entry(o.wave).or_default().push(i);
        }
    }
    if let Some((_, mut top)) = waves.into_iter().next_back() {
        top.sort_by_key(|&i| {
            let k = &objects[i].key;
            (std::cmp::Reverse(super::kind_rank(&k.group, &k.kind)), k.clone())
        });
        out.now = top;
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-12-02T12:00:00Z".parse().unwrap()
    }

    fn leaving(app: &str, env: &str, policy: DeletionPolicy) -> Leaving {
        let record = Record { deletion_policy: policy, environment: env.into(), ..Default::default() };
        Leaving { app: app.into(), record: Some(record), ..Default::default() }
    }

    fn remaining(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
        pairs.iter().map(|(e, n)| ((*e).to_string(), *n)).collect()
    }

    #[test]
    fn each_policy_decides_its_action_when_one_application_leaves() {
        let keep = remaining(&[("e", 2)]);
        for (policy, want) in [
            (DeletionPolicy::Orphan, Action::Orphan),
            (DeletionPolicy::Delete, Action::Delete { wait: false }),
            (DeletionPolicy::Wait, Action::Delete { wait: true }),
        ] {
            assert_eq!(decide(&[leaving("a", "e", policy)], &keep, now()), [want]);
        }
        // a resource written before anything was recorded: orphan, the policy that deletes nothing
        let bare = Leaving { app: "old".into(), ..Default::default() };
        assert_eq!(decide(&[bare], &keep, now()), [Action::Orphan]);
    }

    #[test]
    fn the_mass_guard_holds_every_application_of_one_edit_until_each_is_confirmed() {
        let keep = remaining(&[("e", 3)]);
        let two = [leaving("a", "e", DeletionPolicy::Delete), leaving("b", "e", DeletionPolicy::Orphan)];
        let out = decide(&two, &keep, now());
        for a in &out {
            let Action::Hold(why) = a else { panic!("{out:?}") };
            assert!(why.contains("2 applications leave the policy at once (a, b)"), "{why}");
            assert!(why.contains("plumb decommission a b --confirm"), "{why}");
        }
        // one confirmed: it goes, the other stays held
        let mut confirmed = two.clone();
        confirmed[0].confirmed = Some("2026-12-02T11:00:00Z".into());
        let out = decide(&confirmed, &keep, now());
        assert_eq!(out[0], Action::Delete { wait: false });
        assert!(matches!(out[1], Action::Hold(_)));
        // the confirmed one went; the other, held before, stays held alone
        let mut alone = two[1].clone();
        alone.held = true;
        assert!(matches!(decide(&[alone.clone()], &keep, now())[0], Action::Hold(_)));
        alone.confirmed = Some("2026-12-02T11:30:00Z".into());
        assert_eq!(decide(&[alone], &keep, now()), [Action::Orphan]);
        // a confirmation older than 24 h, in the future or unreadable confirms nothing
        for stale in ["2026-11-30T11:00:00Z", "2026-12-02T13:00:00Z", "yesterday"] {
            confirmed[0].confirmed = Some(stale.into());
            assert!(matches!(decide(&confirmed, &keep, now())[0], Action::Hold(_)), "{stale}");
        }
        // once one started, only the other is left: it leaves alone and goes
        let mut started = two.clone();
        started[0].started = true;
        assert_eq!(decide(&started, &keep, now()), [Action::Delete { wait: false }, Action::Orphan]);
    }

    #[test]
    fn the_last_application_of_an_environment_is_held_even_alone() {
        let out = decide(&[leaving("a", "prod", DeletionPolicy::Orphan)], &remaining(&[("dev", 4)]), now());
        let [Action::Hold(why)] = out.as_slice() else { panic!("{out:?}") };
        assert!(why.contains("environment `prod` keeps no application"), "{why}");
        assert!(why.contains("plumb decommission a --confirm"), "{why}");
        let zero = remaining(&[("prod", 0)]);
        assert!(matches!(decide(&[leaving("a", "prod", DeletionPolicy::Delete)], &zero, now())[0], Action::Hold(_)));
    }

    fn owned(kind: &str, name: &str, wave: i32) -> Owned {
        let group = if kind == "Deployment" { "apps" } else { "" };
        Owned {
            key: ObjectKey { group: group.into(), kind: kind.into(), namespace: "ns".into(), name: name.into() },
            uid: format!("uid-{name}"),
            wave,
            deleting: None,
            kept: false,
            confirm: false,
            propagation: crate::config::Propagation::Foreground,
        }
    }

    #[test]
    fn objects_go_highest_wave_first_in_reverse_apply_order() {
        let objs = [owned("ConfigMap", "cfg", 0), owned("Deployment", "web", 0), owned("ConfigMap", "late", 2)];
        let none = HashSet::new();
        let first = delete_plan(&objs, &none, true, false);
        assert_eq!(first.now, [2], "wave 2 first");
        let mut rest = objs.clone();
        rest[2].deleting = Some(vec![]);
        let second = delete_plan(&rest, &none, true, false);
        assert_eq!(second.now, [1, 0], "the Deployment before its ConfigMap");
        assert_eq!(second.terminating, ["ConfigMap/ns/late"]);
        assert!(!second.done());
        let gone = delete_plan(&[], &none, true, false);
        assert!(gone.done());
    }

    #[test]
    fn data_loss_classes_wait_for_approval_and_claimed_or_kept_objects_stay() {
        let mut kept = owned("ConfigMap", "keep", 0);
        kept.kept = true;
        let objs = [owned("PersistentVolumeClaim", "data", 0), owned("ConfigMap", "shared", 0), kept];
        let claimed: HashSet<String> = ["ConfigMap/ns/shared".to_string()].into();
        let p = delete_plan(&objs, &claimed, true, false);
        assert!(p.now.is_empty() && p.done(), "{p:?}");
        assert_eq!(p.held, ["PersistentVolumeClaim/ns/data"]);
        assert_eq!(p.claimed, ["ConfigMap/ns/shared"]);
        assert_eq!(p.kept, ["ConfigMap/ns/keep"]);
        assert_eq!(delete_plan(&objs, &claimed, true, true).now, [0], "approved");
        assert_eq!(delete_plan(&objs, &claimed, false, false).now, [0], "protectDataLoss: false");
        // adopted or Prune=confirm: approval needed whatever protectDataLoss says
        let mut adopted = owned("ConfigMap", "adopted", 0);
        adopted.confirm = true;
        assert_eq!(delete_plan(std::slice::from_ref(&adopted), &claimed, false, false).held, ["ConfigMap/ns/adopted"]);
        assert_eq!(delete_plan(&[adopted], &claimed, false, true).now, [0]);
        // a finalizer keeps it terminating, named
        let mut stuck = owned("ConfigMap", "stuck", 0);
        stuck.deleting = Some(vec!["example.com/hold".into()]);
        assert_eq!(
            delete_plan(&[stuck], &claimed, true, false).terminating,
            ["ConfigMap/ns/stuck (finalizers: example.com/hold)"]
        );
    }

    #[test]
    fn an_owned_object_is_read_with_its_wave_deletion_and_keep_marks() {
        let o = Owned::of(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1", "deletionTimestamp": "2026-12-02T11:00:00Z",
                "finalizers": ["f"], "annotations": {"plumb.dev/sync-wave": "3", "plumb.dev/sync-options": "Prune=false"}}}))
        .unwrap();
        assert_eq!((o.wave, o.uid.as_str(), o.deleting, o.kept), (3, "u1", Some(vec!["f".to_string()]), true));
        assert!(!o.confirm);
        let adopted = Owned::of(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "annotations": {"plumb.dev/adopted": "true"}}}))
        .unwrap();
        let confirm = Owned::of(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"plumb.dev/sync-options": "Prune=confirm"}}}))
        .unwrap();
        assert!(adopted.confirm && confirm.confirm && !adopted.kept);
        let helm = Owned::of(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "annotations": {"helm.sh/resource-policy": "keep"}}}))
        .unwrap();
        assert!(helm.kept && helm.deleting.is_none());
    }

    #[test]
    fn delete_hooks_are_read_from_three_annotations_ordered_and_bounded() {
        let hook = |name: &str, key: &str, value: &str, weight: Option<&str>| {
            let mut ann = json!({key: value});
            if let Some(w) = weight {
                ann["helm.sh/hook-weight"] = json!(w);
            }
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "annotations": ann}})
        };
        let manifests = [
            hook("post", "plumb.dev/hook", "PostDelete", None),
            hook("argo", "argocd.argoproj.io/hook", "PreSync,PreDelete", None),
            hook("helm", "helm.sh/hook", "pre-delete,post-install", Some("-5")),
            hook("sync", "plumb.dev/hook", "PreSync", None),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}}),
        ];
        let Hooks { hooks, omitted } = delete_hooks(&manifests);
        let names: Vec<(&str, Phase)> =
            hooks.iter().map(|h| (h.manifest["metadata"]["name"].as_str().unwrap(), h.phase)).collect();
        assert_eq!(names, [("helm", Phase::PreDelete), ("argo", Phase::PreDelete), ("post", Phase::PostDelete)]);
        assert_eq!(omitted, 0);
        assert!(is_hook(&manifests[3]) && !is_hook(&manifests[4]));
        // too large: left out and counted
        let big = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "big",
            "annotations": {"plumb.dev/hook": "PreDelete"}}, "spec": {"x": "y".repeat(MAX_HOOK_BYTES)}});
        let kept = delete_hooks(&[big, manifests[0].clone()]);
        assert_eq!((kept.hooks.len(), kept.omitted), (1, 1));
        assert_eq!(kept.of(Phase::PostDelete).count(), 1);
        assert_eq!(kept.of(Phase::PreDelete).count(), 0);
        // a Secret is never kept (readers of the resource would see its values): counted
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
            "annotations": {"helm.sh/hook": "pre-install,pre-delete"}}, "stringData": {"password": "hunter2"}});
        let kept = delete_hooks(&[secret, manifests[0].clone()]);
        assert_eq!((kept.hooks.len(), kept.omitted), (1, 1));
        assert!(!serde_json::to_string(&kept).unwrap().contains("hunter2"));
    }

    #[test]
    fn a_spec_changed_by_someone_else_is_not_trusted() {
        let record = Record { deletion_policy: DeletionPolicy::Delete, ..Record::default() };
        let hook = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "drain", "annotations": {"plumb.dev/hook": "PreDelete"}}});
        let hooks = delete_hooks(&[hook]);
        let kept = digest(&record, &hooks);
        let (r, h, tampered) = trusted(Some(record.clone()), hooks.clone(), &kept);
        assert!(!tampered && r == Some(record.clone()) && h == hooks);
        // key order does not matter: the resource comes back from the API server
        let reordered: Hooks = serde_json::from_str(
            r#"{"hooks": [{"manifest": {"metadata": {"name": "drain", "annotations": {"plumb.dev/hook": "PreDelete"}},
                "kind": "Job", "apiVersion": "batch/v1"}, "weight": 0, "phase": "PreDelete"}]}"#,
        )
        .unwrap();
        assert_eq!(digest(&record, &reordered), kept);
        // a changed policy, identity or hook is not trusted: orphan, no hooks
        for changed in [
            Record { deletion_policy: DeletionPolicy::Wait, ..record.clone() },
            Record { impersonate: Some("system:serviceaccount:web:admin".into()), ..record.clone() },
            Record { protect_data_loss: false, ..record.clone() },
        ] {
            let (r, h, tampered) = trusted(Some(changed), hooks.clone(), &kept);
            assert!(tampered && r.is_none() && h.hooks.is_empty());
        }
        let mut other = hooks.clone();
        other.hooks[0].manifest["metadata"]["namespace"] = json!("kube-system");
        assert!(trusted(Some(record.clone()), other, &kept).2);
        // no digest kept (a resource from before): not trusted either
        assert!(trusted(Some(record), hooks.clone(), "").2);
        // hooks without a record: none run
        let (r, h, tampered) = trusted(None, hooks, &kept);
        assert!(tampered && r.is_none() && h.hooks.is_empty());
    }

    #[test]
    fn a_record_reads_back_from_the_resource_spec() {
        let r = Record {
            deletion_policy: DeletionPolicy::Wait,
            protect_data_loss: true,
            impersonate: Some("system:serviceaccount:ns:deployer".into()),
            environment: "prod".into(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["deletionPolicy"], "wait");
        assert_eq!(serde_json::from_value::<Record>(v).unwrap(), r);
        let bare = serde_json::from_value::<Record>(json!({})).unwrap();
        assert_eq!((bare.deletion_policy, bare.protect_data_loss), (DeletionPolicy::Orphan, true));
    }
}
