//! What one process remembers between passes of any application, per object, so that
//! a pass with nothing new costs no API request: dry-run answers, whole comparisons,
//! plumb's own last writes, health verdicts. Every entry is keyed so that it can never
//! answer for changed content. (What one application's passes carry over is its
//! [`super::AppState`].)
//!
//! Memory: of an object in sync only that is remembered ([`Remembered::Synced`]): the
//! next pass has its manifest and the watch cache has its live object. Only objects that
//! differ keep their comparison and the dry-run answer their differences were found with.

use std::{collections::HashMap, sync::Mutex};

use serde_json::Value;

use crate::{compare::Compared, health::Health, tracking::ObjectKey};

/// A dry-run answer: valid while neither the applied configuration (`apply_hash`) nor
/// the live object without status (`live_hash`) changed.
struct DryRun {
    apply_hash: u64,
    live_hash: u64,
    answer: DryRunAnswer,
}

/// What a remembered dry-run answers.
#[derive(Clone, Debug, PartialEq)]
pub enum DryRunAnswer {
    /// The object was judged in sync against this very live content (with its
    /// `managedFields`): it still is, without comparing again.
    Synced,
    /// Git's side as the server answered it (normalized, ignored fields stripped), and
    /// what it says of the fields hand tools hold.
    Desired(Value, crate::compare::object::Held),
}

/// A whole comparison: valid while the manifest (its hash) and the live object (its
/// resourceVersion) are as they were.
type ComparedMemo = (u64, Box<str>, Remembered);

/// The memory of one process. Lock poisoning only loses memory (the next pass asks
/// the API server again), never correctness.
#[derive(Default)]
pub struct Memo {
    /// What is remembered of each object, under one key per object ([`memo_key`]: one
    /// string of about 40 bytes; an entry of the table takes 170 bytes).
    objects: Mutex<HashMap<Box<str>, Remembers>>,
    /// Application → the objects it declares that another application owns, as
    /// (object, owner): see [`Memo::also_declared`].
    deferred: Mutex<HashMap<String, Vec<(String, String)>>>,
}

/// What is remembered of one object.
#[derive(Default)]
struct Remembers {
    dry_run: Option<DryRun>,
    /// (manifest hash, live resourceVersion, result).
    compared: Option<ComparedMemo>,
    /// resourceVersion of plumb's last write, until the watch shows it.
    written: Option<Box<str>>,
    /// (hash of the body, resourceVersion written) of plumb's last server-side apply,
    /// until a comparison asks for it: see [`Memo::applied_here`].
    applied: Option<(u64, Box<str>)>,
    /// (hash of what the assessment read, verdict): see [`Memo::health`].
    health: Option<(u64, Health)>,
}

/// A comparison as remembered for the next pass.
#[derive(Clone, Debug)]
pub enum Remembered {
    /// In sync, with nothing to take over: nothing of the object is kept (the pass
    /// rebuilds its comparison from the manifest it rendered and the watch cache's
    /// object at the same resourceVersion). Two full copies of each object fewer
    /// for the process's lifetime.
    Synced,
    /// Any other verdict, whole (its differences are shown and acted on).
    Whole(std::sync::Arc<Compared>),
}

impl Remembered {
    /// What to remember of `c`.
    pub fn of(c: std::sync::Arc<Compared>) -> Self {
        let synced =
            c.reason == crate::compare::ObjectReason::Synced && c.differences.is_empty() && c.takeover.is_none();
        if synced { Self::Synced } else { Self::Whole(c) }
    }
}

impl DryRunAnswer {
    /// What to remember of a judgement `j` made against `desired` (`held`): in sync
    /// (nothing to take over), only that; otherwise the answer itself.
    pub fn of(j: &crate::compare::object::Judgement, desired: &Value, held: crate::compare::object::Held) -> Self {
        if j.reason == crate::compare::ObjectReason::Synced && j.differences.is_empty() && j.takeover.is_none() {
            Self::Synced
        } else {
            Self::Desired(desired.clone(), held)
        }
    }
}

impl Memo {
    /// Records the objects application `app` declares that others own, as (object,
    /// owner), replacing what its last pass recorded.
    pub fn defer(&self, app: &str, owned_elsewhere: Vec<(String, String)>) {
        if let Ok(mut d) = self.deferred.lock() {
            if owned_elsewhere.is_empty() {
                d.remove(app);
            } else {
                d.insert(app.to_string(), owned_elsewhere);
            }
        }
    }

    /// The objects of `owner` that other applications also declare (and leave to it),
    /// as (object, other application), sorted.
    pub fn also_declared(&self, owner: &str) -> Vec<(String, String)> {
        let Ok(d) = self.deferred.lock() else { return vec![] };
        let mut out: Vec<(String, String)> = d
            .iter()
            .flat_map(|(other, objects)| {
                objects.iter().filter(|(_, o)| o == owner).map(move |(key, _)| (key.clone(), other.clone()))
            })
            .collect();
        out.sort();
        out
    }

    /// Reads what is remembered of `key`.
    fn read<T>(&self, key: &ObjectKey, f: impl FnOnce(&Remembers) -> Option<T>) -> Option<T> {
        self.objects.lock().ok()?.get(&*memo_key(key)).and_then(f)
    }

    /// Changes what is remembered of `key`.
    fn write(&self, key: &ObjectKey, f: impl FnOnce(&mut Remembers)) {
        if let Ok(mut m) = self.objects.lock() {
            f(m.entry(memo_key(key)).or_default());
        }
    }

    /// The dry-run answer for `key` when the applied body and the live object are as
    /// they were.
    pub fn dry_run(&self, key: &ObjectKey, apply_hash: u64, live_hash: u64) -> Option<DryRunAnswer> {
        self.read(key, |r| {
            r.dry_run
                .as_ref()
                .filter(|d| d.apply_hash == apply_hash && d.live_hash == live_hash)
                .map(|d| d.answer.clone())
        })
    }

    /// Remembers a dry-run answer.
    pub fn remember_dry_run(&self, key: &ObjectKey, apply_hash: u64, live_hash: u64, answer: DryRunAnswer) {
        self.write(key, |r| r.dry_run = Some(DryRun { apply_hash, live_hash, answer }));
    }

    /// The comparison of `key` when its manifest and live resourceVersion are as they
    /// were.
    pub fn compared(&self, key: &ObjectKey, manifest_hash: u64, live_rv: &str) -> Option<Remembered> {
        self.read(key, |r| {
            r.compared.as_ref().filter(|(h, rv, _)| *h == manifest_hash && **rv == *live_rv).map(|(_, _, c)| c.clone())
        })
    }

    /// Remembers `key`, of the manifest hashing `manifest_hash`, as Synced against live
    /// resourceVersion `live_rv`, without a comparison of this process (a seal said so:
    /// [`crate::compare::seal`]).
    pub fn remember_synced(&self, key: &ObjectKey, manifest_hash: u64, live_rv: &str) {
        self.write(key, |r| r.compared = Some((manifest_hash, live_rv.into(), Remembered::Synced)));
    }

    /// Remembers a comparison ([`Remembered::of`]).
    pub fn remember_compared(&self, manifest_hash: u64, live_rv: String, c: std::sync::Arc<Compared>) {
        let key = c.key.clone();
        self.write(&key, |r| r.compared = Some((manifest_hash, live_rv.into(), Remembered::of(c))));
    }

    /// The health of `key` when what its assessment read is as it was (`inputs`: a hash
    /// of the application, the live object's resourceVersion and its children's
    /// versions). Only assessments that did not read the clock are remembered (see
    /// [`crate::health::Clock`]): their verdict does not change with time.
    pub fn health(&self, key: &ObjectKey, inputs: u64) -> Option<Health> {
        self.read(key, |r| r.health.as_ref().filter(|(i, _)| *i == inputs).map(|(_, h)| h.clone()))
    }

    /// Remembers a health verdict that did not read the clock.
    pub fn remember_health(&self, key: &ObjectKey, inputs: u64, health: Health) {
        self.write(key, |r| r.health = Some((inputs, health)));
    }

    /// The resourceVersion plumb last wrote `key` at, while the watch has not shown it.
    pub fn written(&self, key: &ObjectKey) -> Option<String> {
        self.read(key, |r| r.written.as_deref().map(str::to_string))
    }

    /// Records plumb's write of `key` at `resource_version`; `applied`: the body, when
    /// the write was a server-side apply of it (see [`Memo::applied_here`]).
    pub fn wrote(&self, key: &ObjectKey, resource_version: &str, applied: Option<&Value>) {
        let applied = applied.map(|body| (crate::watch::value_hash(body), resource_version.into()));
        self.write(key, |r| (r.written, r.applied) = (Some(resource_version.into()), applied));
    }

    /// Whether the live object at `live_rv` is what plumb's last server-side apply of
    /// a body hashing `apply_hash` ([`crate::watch::value_hash`]) wrote: nothing wrote it
    /// since (same resourceVersion), so a dry-run of the same apply would answer the
    /// object unchanged. Server-side apply is idempotent (Kubernetes API docs,
    /// "Server-Side Apply"), and so must mutating admission webhooks be ("Dynamic
    /// Admission Control", idempotence). After the pass that wrote it, the next
    /// comparison then costs no dry-run. Asked once: the record is dropped either way
    /// (a later resourceVersion never matches it again).
    pub fn applied_here(&self, key: &ObjectKey, apply_hash: u64, live_rv: &str) -> bool {
        let Ok(mut m) = self.objects.lock() else { return false };
        let Some(r) = m.get_mut(&*memo_key(key)) else { return false };
        r.applied.take().is_some_and(|(h, rv)| h == apply_hash && *rv == *live_rv)
    }

    /// The watch (or a GET) has shown plumb's last write of `key`.
    pub fn seen(&self, key: &ObjectKey) {
        if let Ok(mut m) = self.objects.lock()
            && let Some(r) = m.get_mut(&*memo_key(key))
        {
            r.written = None;
        }
    }
}

/// The key of `key`'s memory: its group, kind, namespace and name in one string. The
/// memory holds only objects the API server accepted, whose parts never contain `/`
/// (Kubernetes names are path segments): their keys have exactly three, and no other
/// object's key equals one of them.
fn memo_key(key: &ObjectKey) -> Box<str> {
    format!("{}/{}/{}/{}", key.group, key.kind, key.namespace, key.name).into_boxed_str()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::compare::{Difference, ObjectReason};

    fn compared(reason: ObjectReason) -> Compared {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}, "data": {"k": "v"}});
        Compared::early(ObjectKey::of(&obj).unwrap(), obj, None, reason, "a.yaml#1")
    }

    /// Only a verdict in sync with nothing to take over is kept without the object; any
    /// other keeps the whole comparison, and a remembered answer is keyed by manifest
    /// hash and live resourceVersion.
    #[test]
    fn only_an_object_in_sync_is_remembered_without_its_copies() {
        assert!(matches!(Remembered::of(Arc::new(compared(ObjectReason::Synced))), Remembered::Synced));
        let mut differs = compared(ObjectReason::Synced);
        differs.differences.push(Difference { path: "/data/k".into(), desired: None, live: None, manager: None });
        assert!(matches!(Remembered::of(Arc::new(differs)), Remembered::Whole(_)));
        let mut takeover = compared(ObjectReason::Synced);
        takeover.takeover = Some(json!([]));
        assert!(matches!(Remembered::of(Arc::new(takeover)), Remembered::Whole(_)));
        assert!(matches!(Remembered::of(Arc::new(compared(ObjectReason::Missing))), Remembered::Whole(_)));

        let memo = Memo::default();
        let c = Arc::new(compared(ObjectReason::Synced));
        let key = c.key.clone();
        memo.remember_compared(7, "41".into(), c);
        assert!(matches!(memo.compared(&key, 7, "41"), Some(Remembered::Synced)));
        assert!(memo.compared(&key, 8, "41").is_none(), "another manifest");
        assert!(memo.compared(&key, 7, "42").is_none(), "another live version");
        memo.wrote(&key, "43", None);
        assert_eq!(memo.written(&key).as_deref(), Some("43"));
        let other = ObjectKey { name: "b".into(), ..key.clone() };
        assert_eq!((memo.written(&other), memo.compared(&other, 7, "41").is_none()), (None, true), "another object");
        memo.seen(&key);
        assert_eq!(memo.written(&key), None);
        assert!(matches!(memo.compared(&key, 7, "41"), Some(Remembered::Synced)), "seen forgets only the write");
    }

    /// plumb's own apply answers the next comparison once, for that very body at that
    /// very resourceVersion, and only when it was a server-side apply.
    #[test]
    fn an_own_apply_answers_for_the_object_it_wrote_once() {
        let memo = Memo::default();
        let key = compared(ObjectReason::Synced).key;
        let body = json!({"data": {"k": "v"}});
        let hash = crate::watch::value_hash(&body);
        memo.wrote(&key, "50", Some(&body));
        assert!(!memo.applied_here(&key, hash, "51"), "written since");
        assert!(!memo.applied_here(&key, hash, "50"), "asked once");
        memo.wrote(&key, "52", Some(&body));
        assert!(!memo.applied_here(&key, crate::watch::value_hash(&json!({"data": {"k": "w"}})), "52"), "another body");
        memo.wrote(&key, "53", Some(&body));
        assert!(memo.applied_here(&key, hash, "53"));
        memo.wrote(&key, "54", None);
        assert!(!memo.applied_here(&key, hash, "54"), "a replace (PUT) answers nothing");
        let other = ObjectKey { name: "b".into(), ..key.clone() };
        assert!(!memo.applied_here(&other, hash, "54"), "another object");
    }
}
