//! The IO half of comparing one object: resolve its kind, read it live (watch cache,
//! else GET), dry-run it (or reuse a remembered answer), then let
//! [`crate::compare::object`] prepare and judge it.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use futures::StreamExt as _;
use serde_json::Value;

use super::{
    Io,
    memo::{DryRunAnswer, Remembered},
};
use crate::{
    cluster::Kind,
    compare::{
        Compared, IgnoreRules, Live, ObjectReason, normalize,
        object::{self, CrdKinds, Ownership},
    },
    plan::SyncOptions,
    render::Manifest,
    tracking::{self, ObjectKey},
    watch::value_hash,
};

/// What comparing one object needs to know of the application.
#[derive(Clone, Copy)]
pub(super) struct Scope<'a> {
    /// The cluster writes and dry-runs go through (impersonating the application's
    /// ServiceAccount when it has one).
    pub writer: &'a crate::cluster::Cluster,
    pub app: &'a str,
    /// Destination namespace (default of namespaced objects).
    pub namespace: &'a str,
    pub rules: &'a IgnoreRules,
    /// The environment's `sensitiveFields`.
    pub sensitive: &'a crate::compare::sensitive::SensitiveRules,
    /// The installation's key sensitive values are marked with.
    pub mask_key: &'a crate::compare::sensitive::MaskKey,
    /// Kinds defined by CRDs of the same render.
    pub crds: &'a CrdKinds,
    /// The application's sync options.
    pub defaults: &'a SyncOptions,
    /// Field managers of hand tools the environment adds to
    /// [`crate::compare::managers::HAND_MANAGERS`] (`syncPolicy.takeOverManagers`).
    pub take_over: &'a [String],
    /// Where the application may write ([`crate::plan::Boundary`]).
    pub boundary: &'a crate::plan::Boundary,
    /// Jobs that finished, from the last status ([`object::ran_before`]).
    pub finished: &'a [crate::status::Finished],
    /// Dry-run the create of missing objects, so a preview reports what the server would
    /// reject (a sync does not need it: a create that fails writes nothing).
    pub validate_new: bool,
    /// Objects known absent from the cluster this pass ([`Io::known_absent`]): not
    /// read again one by one.
    pub absent: Option<&'a HashSet<ObjectKey>>,
    /// Keep both compared sides of an object found in sync (`plumb diff -o json` and
    /// previews show them). The policy's passes drop them once judged: nothing reads
    /// them, and in the pass after a first sync every object of every application is
    /// compared at once.
    pub keep_sides: bool,
    /// Which advertisements of the remotes' refs answer the pass, also for the renders
    /// of other applications it reads ([`crate::source::Freshness::since`]).
    pub refs_since: crate::source::Since,
}

/// Fewest objects of one kind and namespace missing from the watch cache for which one
/// metadata LIST ([`crate::cluster::Cluster::names`]) replaces their GETs.
const LIST_FROM: usize = 4;

impl Io<'_> {
    /// The objects of `manifests` that do not exist, known with one metadata LIST per kind
    /// and namespace where at least [`LIST_FROM`] of them are missing from the watch cache
    /// or their kind's watch has not listed yet (a first sync; the LISTs run
    /// [`super::CONCURRENCY`] at once). The cache holds only objects with plumb's label,
    /// so an object missing from it may still exist unlabelled. The others are read one
    /// by one.
    pub(super) async fn known_absent(self, scope: &Scope<'_>, manifests: &[Manifest]) -> HashSet<ObjectKey> {
        let mut absent = HashSet::new();
        let Some(live) = &self.live else { return absent };
        let mut missing: HashMap<(String, String, String), (Kind, Vec<ObjectKey>)> = HashMap::new();
        for m in manifests {
            let object = m.object();
            let (Ok(kind), Some(mut key)) =
                (self.cluster.kind(m.api_version(), m.kind()).await, ObjectKey::of(&object))
            else {
                continue;
            };
            if !kind.namespaced {
                key.namespace.clear();
            } else if key.namespace.is_empty() {
                scope.namespace.clone_into(&mut key.namespace);
            }
            // outside the application's boundaries: not read on its behalf
            if scope.boundary.check(&key, kind.namespaced, &object).is_err() {
                continue;
            }
            // absent from the cache, or its kind not listed yet (a first pass: this runs
            // while the watches list), and not just written by plumb
            if live.get_arc(&kind, &key).is_none_or(|cached| cached.is_none()) && self.memo.written(&key).is_none() {
                let id = (kind.resource.api_version.clone(), kind.resource.kind.clone(), key.namespace.clone());
                missing.entry(id).or_insert_with(|| (kind, vec![])).1.push(key);
            }
        }
        // the LISTs [`super::CONCURRENCY`] at once (a render may name many namespaces)
        let listed = missing.into_values().filter(|(_, keys)| keys.len() >= LIST_FROM).map(|(kind, keys)| async move {
            let names = self.cluster.names(&kind, &keys[0].namespace).await;
            (names, keys)
        });
        let listed: Vec<_> = futures::stream::iter(listed).buffer_unordered(super::CONCURRENCY).collect().await;
        for (names, keys) in listed {
            let Ok(names) = names else { continue };
            absent.extend(keys.into_iter().filter(|k| !names.contains(&k.name)));
        }
        absent
    }

    /// Whether the application of `scope` may write `obj` over `live`
    /// ([`object::ownership`]): `None` when it is its own (marking `obj` adopted when it
    /// is taken over now, or was before), else why not — another application owns it,
    /// or it exists unmanaged and adoption was not asked for (which refuses the sync).
    async fn claim(
        self,
        live: &Value,
        key: &crate::tracking::ObjectKey,
        obj: &mut Value,
        scope: &Scope<'_>,
        adopt: bool,
        source: &str,
    ) -> Option<ObjectReason> {
        let app = scope.app;
        let installation = self.config.settings.installation_id.as_deref();
        match object::ownership(live, app, installation, adopt) {
            Ownership::Ours => {}
            Ownership::Adopt => tracking::mark_adopted(obj),
            // moved here from an application that no longer declares it: taken over
            Ownership::Theirs(_) if self.moved_here(live, key, scope.refs_since).await => {}
            Ownership::Theirs(who) => return Some(ObjectReason::OwnedBy(who)),
            Ownership::Unmanaged => {
                return Some(ObjectReason::Refused(format!(
                    "({source}) it exists and is not managed by plumb; to take it over, annotate it in Git {}: Adopt=true (or set syncPolicy.adopt: true)",
                    tracking::SYNC_OPTIONS_ANNOTATION
                )));
            }
        }
        if tracking::is_adopted(live) {
            tracking::mark_adopted(obj); // remembered on every apply
        }
        None
    }

    /// Compares one manifest of the render with its live object; the fields the
    /// environment marks sensitive, and those holding a value decrypted from SOPS, are
    /// masked in the outcome.
    pub(super) async fn compare_one(self, scope: &Scope<'_>, m: &Manifest) -> Arc<Compared> {
        let object = m.object();
        let marked = scope.sensitive.marked_manifest(m, &object);
        let c = self.compare_unmasked(scope, m, object).await;
        if marked.is_empty() { c } else { Arc::new((*c).clone().with_marked(marked)) }
    }

    /// The watch cache's object for `key`, unless it is older than plumb's own last
    /// write of it (right after an apply the watch may not have delivered it yet).
    fn trusted_cached(self, kind: &Kind, key: &ObjectKey) -> Option<Arc<crate::compare::Cached>> {
        let cached = self.live.as_ref().and_then(|c| c.get_arc(kind, key)).flatten()?;
        match self.memo.written(key) {
            Some(w) if cached.resource_version() != Some(w.as_str()) => None,
            Some(_) => {
                self.memo.seen(key);
                Some(cached)
            }
            None => Some(cached),
        }
    }

    /// What the process remembers for manifest `m` (its object `object`) of `kind`:
    /// found before the object is prepared, which changes neither its identity nor what
    /// the boundaries read. Same manifest and same live resourceVersion as last time:
    /// same answer.
    fn recall(self, scope: &Scope<'_>, m: &Manifest, object: &Value, kind: &Kind) -> Recalled {
        let installation = self.config.settings.installation_id.as_deref();
        let manifest_hash = prepared_hash(m.digest(), scope, installation, kind.namespaced, &m.source);
        let inside = object::identity(object, kind.namespaced, scope.namespace)
            .filter(|key| scope.boundary.check(key, kind.namespaced, object).is_ok());
        let cached = inside.as_ref().and_then(|key| self.trusted_cached(kind, key));
        let live_rv = cached.as_ref().and_then(|o| o.resource_version().map(str::to_string));
        let remembered = match (&inside, &live_rv) {
            (Some(key), Some(rv)) => self.memo.compared(key, manifest_hash, rv),
            _ => None,
        };
        Recalled { manifest_hash, cached, live_rv, remembered }
    }

    /// One manifest compared, as a straight line: its kind → what is remembered →
    /// prepared (its effective options merged once) → inside the boundaries → its live
    /// object → missing, or claimed, dry-run and judged. Each step that ends the
    /// comparison early returns the comparison it ended with.
    async fn compare_unmasked(self, scope: &Scope<'_>, m: &Manifest, object: Value) -> Arc<Compared> {
        let source = m.source.as_str();
        let kind = match self.cluster.kind(m.api_version(), m.kind()).await {
            Ok(k) => k,
            Err(e) => return Arc::new(object::unserved(object, scope.crds, scope.namespace, &e.to_string(), source)),
        };
        let recalled = self.recall(scope, m, &object, &kind);
        if let Some(Remembered::Whole(c)) = &recalled.remembered {
            return c.clone();
        }
        let installation = self.config.settings.installation_id.as_deref();
        let prepared = object::prepare(object, kind.namespaced, scope.app, scope.namespace, installation, source);
        let s = match prepared {
            Ok(p) => Subject::new(p, kind, scope.defaults, source).with_key(scope.mask_key),
            Err(r) => {
                return Arc::new(Compared::early(r.key, r.obj, Some(kind), ObjectReason::Error(r.message), source));
            }
        };
        match self.compare_prepared(scope, &s, &recalled).await {
            Ok(c) | Err(c) => c,
        }
    }

    /// [`Io::compare_unmasked`] once the object is prepared.
    async fn compare_prepared(
        self,
        scope: &Scope<'_>,
        s: &Subject<'_>,
        recalled: &Recalled,
    ) -> Result<Arc<Compared>, Arc<Compared>> {
        // outside the application's boundaries: neither read nor dry-run on its behalf
        if let Err(why) = scope.boundary.check(&s.key, s.kind.namespaced, &s.obj) {
            let why = format!("({}) outside the application's boundaries: {why}", s.source);
            return Err(s.early(s.obj.clone(), ObjectReason::Refused(why)));
        }
        // in sync against this very resourceVersion: rebuilt from the manifest and the
        // cached object (an object applied whole, ApplyOutOfSyncOnly=false, is compared
        // again: what is sent must have its ignored fields removed)
        if let (Some(Remembered::Synced), Some(_)) = (&recalled.remembered, &recalled.cached)
            && !s.effective.apply_all
        {
            let c =
                Compared::synced(s.key.clone(), s.obj.clone(), s.kind.clone(), s.kept(recalled, Value::Null), s.source);
            return Ok(s.with(c));
        }
        let Some(live_obj) = self.live_of(scope, s, recalled).await? else {
            return self.compare_missing(scope, s).await;
        };
        // Whose it is: ours, adopted now (Adopt=true), another application's, or nobody's
        let mut obj = s.obj.clone();
        if let Some(reason) = self.claim(&live_obj, &s.key, &mut obj, scope, s.effective.adopt, s.source).await {
            let mut c = Compared::early(s.key.clone(), obj, Some(s.kind.clone()), reason, s.source);
            c.live = Some(live_obj.into());
            return Err(s.with(c));
        }
        // Ignored fields are not sent for an existing object, so plumb never owns them;
        // Replace=true writes the whole object: ignored fields carry their live values.
        let mut apply = obj;
        let prepared = if s.effective.replace {
            scope.rules.keep_live(&s.key, &mut apply, &live_obj)
        } else {
            scope.rules.prepare_apply(&s.key, &mut apply, &live_obj)
        };
        if let Err(e) = prepared {
            return Err(s.early(apply, ObjectReason::Error(e)));
        }
        let c = self.dry_run_and_judge(scope, s, apply, live_obj, recalled).await?;
        if let Some(rv) = &recalled.live_rv {
            self.memo.remember_compared(recalled.manifest_hash, rv.clone(), c.clone());
        }
        Ok(c)
    }

    /// The live object of `s`: the watch cache's when trusted, else read (not when
    /// known absent); read whole when a takeover needs its `managedFields` (the cache
    /// compacts them).
    async fn live_of(
        self,
        scope: &Scope<'_>,
        s: &Subject<'_>,
        recalled: &Recalled,
    ) -> Result<Option<Value>, Arc<Compared>> {
        let get = || async {
            self.cluster
                .get(&s.kind, &s.key)
                .await
                .map_err(|e| s.early(s.obj.clone(), ObjectReason::Error(e.to_string())))
        };
        let live = match recalled.cached.as_ref().map(|o| crate::watch::with_types(o, &s.kind)) {
            Some(l) => Some(l),
            // not watched yet, absent from the cache (it may exist without our label), or
            // older than plumb's own last write: read it from the API server
            None if scope.absent.is_some_and(|a| a.contains(&s.key)) => None,
            None => {
                let l = get().await?;
                self.memo.seen(&s.key);
                l
            }
        };
        // A takeover merges hand-made fields into plumb's own managedFields entry, which
        // the watch cache does not keep: read the whole object for it.
        match live {
            Some(l)
                if crate::watch::compacted(&l) && crate::compare::managers::takeover(&l, s.hand(scope)).is_some() =>
            {
                get().await
            }
            other => Ok(other),
        }
    }

    /// An object with no live object: a Job that ran this manifest to the end (removed
    /// by its own rule: done), else missing; in a preview, a dry-run of the create shows
    /// what the server would reject (not possible yet when its namespace is still to be
    /// created: 404). A sync skips it: a create that fails writes nothing and fails the
    /// sync anyway.
    async fn compare_missing(self, scope: &Scope<'_>, s: &Subject<'_>) -> Result<Arc<Compared>, Arc<Compared>> {
        if let Some(f) = object::ran_before(&s.key, s.digest.as_deref(), scope.finished) {
            return Ok(s.with(Compared::early(
                s.key.clone(),
                s.obj.clone(),
                Some(s.kind.clone()),
                ObjectReason::Finished(f.clone()),
                s.source,
            )));
        }
        let desired = if scope.validate_new {
            match scope.writer.apply_validated(&s.kind, &s.key, &s.obj, true, s.strict()).await {
                Ok(d) => normalize(&d),
                Err(e) if e.not_found() || e.refuses_dry_run() => normalize(&s.obj),
                Err(e) => return Err(s.early(s.obj.clone(), ObjectReason::Error(e.to_string()))),
            }
        } else if scope.keep_sides {
            normalize(&s.obj)
        } else {
            // a policy pass shows no sides (`keep_sides`): it sends `obj`
            Value::Null
        };
        let mut c =
            Compared::early(s.key.clone(), s.obj.clone(), Some(s.kind.clone()), ObjectReason::Missing, s.source);
        c.desired = desired;
        Ok(s.with(c))
    }

    /// Git's side as the server answers it for `apply` (remembered, or a dry-run: on our
    /// side when the server cannot answer one), judged against `live_obj`.
    async fn dry_run_and_judge(
        self,
        scope: &Scope<'_>,
        s: &Subject<'_>,
        mut apply: Value,
        live_obj: Value,
        recalled: &Recalled,
    ) -> Result<Arc<Compared>, Arc<Compared>> {
        let rules = scope.rules;
        let apply_hash = value_hash(&apply);
        let normalized_live = normalize(&live_obj);
        let live_hash = live_hash(&normalized_live, &live_obj);
        let mut client_side = false;
        let (desired, held) =
            match self.recalled_dry_run(&s.key, (apply_hash, live_hash), &live_obj, &normalized_live, rules) {
                // judged in sync against this very content: still in sync
                Some(DryRunAnswer::Synced) => {
                    let c = Compared::early(s.key.clone(), apply, Some(s.kind.clone()), ObjectReason::Synced, s.source);
                    let desired = if scope.keep_sides { c.desired } else { Value::Null };
                    return Ok(s.with(Compared { desired, live: Some(s.kept(recalled, live_obj)), ..c }));
                }
                Some(DryRunAnswer::Desired(d, held)) => (d, held),
                None => {
                    let dry = match scope.writer.apply_validated(&s.kind, &s.key, &apply, true, s.strict()).await {
                        Ok(d) => d,
                        // The server cannot answer a dry-run for this object: compare on our side.
                        Err(e) if e.refuses_dry_run() => {
                            client_side = true;
                            apply.clone()
                        }
                        // Git changes a field that cannot change: known to differ, needs re-creation.
                        Err(e) if !e.immutable_fields().is_empty() => {
                            let reason = ObjectReason::Immutable(e.immutable_fields());
                            let mut c = Compared::early(s.key.clone(), apply, Some(s.kind.clone()), reason, s.source);
                            (c.desired, c.live_compared, c.live) =
                                (normalize(&c.apply), Some(normalized_live), Some(live_obj.into()));
                            return Err(s.with(c));
                        }
                        Err(e) => return Err(s.early(apply, ObjectReason::Error(e.to_string()))),
                    };
                    let (dry, held) = self.after_takeover(scope, s, dry, &apply, client_side).await;
                    let mut desired = normalize(&dry);
                    if let Err(e) = rules.strip(&s.key, &mut desired, Some(&live_obj)) {
                        return Err(s.early(apply, ObjectReason::Error(e)));
                    }
                    (desired, held)
                }
            };
        let mut live_n = normalized_live;
        if let Err(e) = rules.strip(&s.key, &mut live_n, Some(&live_obj)) {
            return Err(s.early(std::mem::take(&mut apply), ObjectReason::Error(e)));
        }
        let how = object::Judging { client_side, held, takeover: s.hand(scope), key: scope.mask_key.clone() };
        let j = object::judge(&desired, &live_n, &live_obj, &apply, &how);
        if !client_side {
            self.memo.remember_dry_run(&s.key, apply_hash, live_hash, DryRunAnswer::of(&j, &desired, held));
        }
        let in_sync = j.reason == ObjectReason::Synced && j.differences.is_empty() && j.takeover.is_none();
        let (desired, live_n) =
            if in_sync && !scope.keep_sides { (Value::Null, None) } else { (desired, Some(live_n)) };
        let c = Compared::early(s.key.clone(), apply, Some(s.kind.clone()), j.reason, s.source);
        let (live_compared, live, takeover) = (live_n, Some(s.kept(recalled, live_obj)), j.takeover);
        Ok(s.with(Compared { desired, live_compared, differences: j.differences, live, takeover, ..c }))
    }

    /// What the server would hold after plumb's apply of `apply` once the hand tools'
    /// fields are taken over, from `dry`, its dry-run answer without the takeover: `dry`
    /// itself when the takeover releases nothing ([`crate::compare::managers::released`]),
    /// else the answer to a dry-run replace of `dry` without the released fields (the
    /// server defaults, admits and validates it as it would the real write). When that
    /// second dry-run fails, `dry` is judged by the hand tools' field lists
    /// ([`object::Held::Kept`]). `Replace=true` takes nothing over; a comparison made on
    /// plumb's side has no answer to ask again.
    async fn after_takeover(
        self,
        scope: &Scope<'_>,
        s: &Subject<'_>,
        dry: Value,
        apply: &Value,
        client_side: bool,
    ) -> (Value, object::Held) {
        use crate::compare::managers;
        if s.effective.replace {
            return (dry, object::Held::Replaced);
        }
        if client_side {
            return (dry, object::Held::Kept);
        }
        let released = managers::released(&dry, apply, s.hand(scope));
        if released.is_empty() {
            return (dry, object::Held::Released);
        }
        let body = managers::without(&dry, &released);
        match scope.writer.replace_dry_run(&s.kind, &s.key, &body).await {
            Ok(answer) => (answer, object::Held::Released),
            Err(e) => {
                tracing::debug!(object = %s.key, "dry-run without the fields hand tools hold: {e}");
                (dry, object::Held::Kept)
            }
        }
    }

    /// The answer a dry-run of the body hashing `hashes.0` on the live object (`live_obj`,
    /// its content hashing `hashes.1`) would give, when it is known without asking: the
    /// one remembered for both, or, when plumb's own server-side apply of this very body
    /// wrote `live_obj` and nothing has since, the object itself (normalized and
    /// stripped as a dry-run's answer is; see `Memo::applied_here`).
    fn recalled_dry_run(
        self,
        key: &ObjectKey,
        (apply_hash, live_hash): (u64, u64),
        live_obj: &Value,
        normalized_live: &Value,
        rules: &IgnoreRules,
    ) -> Option<DryRunAnswer> {
        self.memo.dry_run(key, apply_hash, live_hash).or_else(|| {
            let rv = live_obj.pointer("/metadata/resourceVersion")?.as_str()?;
            if !self.memo.applied_here(key, apply_hash, rv) {
                return None;
            }
            let mut desired = normalized_live.clone();
            rules.strip(key, &mut desired, Some(live_obj)).ok()?;
            Some(DryRunAnswer::Desired(desired, object::Held::Released))
        })
    }
}

/// One prepared object being compared: its identity, the body to send, and what the
/// steps of its comparison read of it.
struct Subject<'a> {
    key: ObjectKey,
    obj: Value,
    kind: Kind,
    source: &'a str,
    wave: i32,
    /// The object's own sync options (kept in its comparison).
    options: SyncOptions,
    /// The application's options with the object's, merged once
    /// ([`SyncOptions::with_object`]).
    effective: SyncOptions,
    digest: Option<String>,
    /// The installation's key, kept in its comparison.
    mask_key: crate::compare::sensitive::MaskKey,
}

impl<'a> Subject<'a> {
    fn new(p: object::Prepared, kind: Kind, defaults: &SyncOptions, source: &'a str) -> Self {
        let object::Prepared { key, obj, wave, options } = p;
        let digest = object::finished_digest(&obj);
        let (effective, mask_key) = (defaults.with_object(&options), crate::compare::sensitive::MaskKey::none());
        Self { key, obj, kind, source, wave, effective, options, digest, mask_key }
    }

    /// This subject, its comparison's sensitive values marked under `key`.
    fn with_key(mut self, key: &crate::compare::sensitive::MaskKey) -> Self {
        self.mask_key = key.clone();
        self
    }

    /// `c` with the object's wave, options, finished digest and mask key.
    fn with(&self, mut c: Compared) -> Arc<Compared> {
        (c.wave, c.options, c.finished_digest) = (self.wave, self.options.clone(), self.digest.clone());
        c.mask_key = self.mask_key.clone();
        Arc::new(c)
    }

    /// The comparison ended early with `reason`, Git's side `obj`.
    fn early(&self, obj: Value, reason: ObjectReason) -> Arc<Compared> {
        Arc::new(Compared::early(self.key.clone(), obj, Some(self.kind.clone()), reason, self.source))
    }

    /// The live object as a compared object keeps it: the cache's own when it came from
    /// there (the JSON parsed to compare it is not kept).
    fn kept(&self, recalled: &Recalled, live: Value) -> Live {
        recalled.cached.as_ref().map_or_else(|| live.into(), |o| Live::cached(o.clone(), &self.kind))
    }

    /// Dry-runs validate the schema unless `Validate=false`.
    fn strict(&self) -> bool {
        !self.effective.validate_disabled
    }

    /// The field managers whose fields plumb takes over.
    fn hand<'s>(&self, scope: &Scope<'s>) -> crate::compare::managers::Takeover<'s> {
        crate::compare::managers::Takeover { ours: crate::FIELD_MANAGER, extra: scope.take_over }
    }
}

/// What [`Io::recall`] found.
struct Recalled {
    /// The key of the manifest into the memory of comparisons ([`prepared_hash`]).
    manifest_hash: u64,
    /// The watch cache's object, when trusted ([`Io::trusted_cached`]).
    cached: Option<Arc<crate::compare::Cached>>,
    /// Its resourceVersion.
    live_rv: Option<String>,
    /// The verdict remembered for this manifest and resourceVersion.
    remembered: Option<Remembered>,
}

/// What keys a remembered comparison to the manifest: its content as rendered
/// (`digest`) and everything [`object::prepare`] makes of it (the application and its
/// namespace, the installation, whether the kind is namespaced), and its source, which
/// the comparison names.
pub(super) fn prepared_hash(
    digest: u64,
    scope: &Scope<'_>,
    installation: Option<&str>,
    namespaced: bool,
    source: &str,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (digest, scope.app, scope.namespace, installation, namespaced, source).hash(&mut h);
    h.finish()
}

/// What keys a dry-run answer to the live object: its content without status (a
/// controller writing status does not invalidate it) and who manages which field (the
/// judgement reads `managedFields`).
fn live_hash(normalized_live: &Value, live_obj: &Value) -> u64 {
    let managed = live_obj.pointer("/metadata/managedFields").map_or(0, value_hash);
    value_hash(normalized_live) ^ managed.rotate_left(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// The object's options merge over the application's once, for every step's
    /// decisions; its comparison keeps its own, with its wave and finished digest.
    #[test]
    fn a_subject_merges_its_options_once_and_keeps_its_own() {
        let obj = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "web"}, "spec": {"ttlSecondsAfterFinished": 60}});
        let key = ObjectKey::of(&obj).unwrap();
        let own = SyncOptions::parse(["Replace=true"]);
        let p = object::Prepared { key: key.clone(), obj: obj.clone(), wave: 2, options: own.clone() };
        let resource = kube::core::ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&());
        let kind = Kind { resource: Arc::new(resource), namespaced: true };
        let app = SyncOptions::parse(["Validate=false", "Adopt=true"]);
        let s = Subject::new(p, kind, &app, "job.yaml#1");
        assert!(s.effective.replace && s.effective.adopt && !s.strict(), "{:?}", s.effective);
        let c = s.with(Compared::early(key, obj, None, ObjectReason::Missing, "job.yaml#1"));
        assert_eq!((c.wave, &c.options), (2, &own));
        assert!(c.finished_digest.is_some(), "a Job the cluster removes once finished keeps its manifest digest");
        assert_eq!(s.early(Value::Null, ObjectReason::Error("x".into())).wave, 0, "an early end carries no wave");
    }
}
