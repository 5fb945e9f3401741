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
    Context,
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
    /// Objects known absent from the cluster this pass ([`Context::known_absent`]): not
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

impl Context {
    /// The objects of `manifests` that do not exist, known with one metadata LIST per kind
    /// and namespace where at least [`LIST_FROM`] of them are missing from the watch cache
    /// or their kind's watch has not listed yet (a first sync; the LISTs run
    /// [`super::CONCURRENCY`] at once). The cache holds only objects with plumb's label,
    /// so an object missing from it may still exist unlabelled. The others are read one
    /// by one.
    pub(super) async fn known_absent(&self, scope: &Scope<'_>, manifests: &[Manifest]) -> HashSet<ObjectKey> {
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
        &self,
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
    /// environment marks sensitive are masked in the outcome.
    pub(super) async fn compare_one(&self, scope: &Scope<'_>, m: &Manifest) -> Arc<Compared> {
        let object = m.object();
        let marked = scope.sensitive.marked(&object);
        let c = self.compare_unmasked(scope, m, object).await;
        if marked.is_empty() { c } else { Arc::new((*c).clone().with_marked(marked)) }
    }

    /// The watch cache's object for `key`, unless it is older than plumb's own last
    /// write of it (right after an apply the watch may not have delivered it yet).
    fn trusted_cached(&self, kind: &Kind, key: &ObjectKey) -> Option<Arc<crate::compare::Cached>> {
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
    fn recall(&self, scope: &Scope<'_>, m: &Manifest, object: &Value, kind: &Kind) -> Recalled {
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

    async fn compare_unmasked(&self, scope: &Scope<'_>, m: &Manifest, object: Value) -> Arc<Compared> {
        let Scope {
            writer, app, namespace, rules, crds, defaults, take_over, finished, boundary, validate_new, ..
        } = *scope;
        let source = m.source.as_str();
        let error =
            |key, obj, kind, e: String| Arc::new(Compared::early(key, obj, kind, ObjectReason::Error(e), source));
        let kind = match self.cluster.kind(m.api_version(), m.kind()).await {
            Ok(k) => k,
            Err(e) => return Arc::new(object::unserved(object, crds, namespace, &e.to_string(), source)),
        };
        let installation = self.config.settings.installation_id.as_deref();
        let Recalled { manifest_hash, cached, live_rv, remembered } = self.recall(scope, m, &object, &kind);
        if let Some(Remembered::Whole(c)) = remembered {
            return c;
        }
        let object::Prepared { key, obj, wave, options } =
            match object::prepare(object, kind.namespaced, app, namespace, installation, source) {
                Ok(p) => p,
                Err(r) => return error(r.key, r.obj, Some(kind), r.message),
            };
        // outside the application's boundaries: neither read nor dry-run on its behalf
        if let Err(why) = boundary.check(&key, kind.namespaced, &obj) {
            let why = format!("({source}) outside the application's boundaries: {why}");
            return Arc::new(Compared::early(key, obj, Some(kind), ObjectReason::Refused(why), source));
        }
        // (`inside`: the cache was read above for this very key)
        let digest = object::finished_digest(&obj);
        let with = |mut c: Compared| {
            (c.wave, c.options, c.finished_digest) = (wave, options.clone(), digest.clone());
            Arc::new(c)
        };
        // the live object as a compared object keeps it: the cache's own when it came from
        // there (the JSON parsed to compare it is not kept)
        let kept = |live: Value| cached.as_ref().map_or_else(|| live.into(), |o| Live::cached(o.clone(), &kind));
        // in sync against this very resourceVersion: rebuilt from the manifest and the
        // cached object (an object applied whole, ApplyOutOfSyncOnly=false, is compared
        // again: what is sent must have its ignored fields removed)
        if let (Some(Remembered::Synced), Some(_)) = (&remembered, &cached)
            && !(defaults.apply_all || options.apply_all)
        {
            return with(Compared::synced(key, obj, kind.clone(), kept(Value::Null), source));
        }
        let live = match cached.as_ref().map(|o| crate::watch::with_types(o, &kind)) {
            Some(l) => Some(l),
            // not watched yet, absent from the cache (it may exist without our label), or
            // older than plumb's own last write: read it from the API server
            None if scope.absent.is_some_and(|a| a.contains(&key)) => None,
            None => match self.cluster.get(&kind, &key).await {
                Ok(l) => {
                    self.memo.seen(&key);
                    l
                }
                Err(e) => return error(key, obj, Some(kind), e.to_string()),
            },
        };
        // A takeover merges hand-made fields into plumb's own managedFields entry, which
        // the watch cache does not keep: read the whole object for it.
        let hand = crate::compare::managers::Takeover { ours: crate::FIELD_MANAGER, extra: take_over };
        let live = match live {
            Some(l) if crate::watch::compacted(&l) && crate::compare::managers::takeover(&l, hand).is_some() => {
                match self.cluster.get(&kind, &key).await {
                    Ok(l) => l,
                    Err(e) => return error(key, obj, Some(kind), e.to_string()),
                }
            }
            other => other,
        };
        let strict = !(defaults.validate_disabled || options.validate_disabled);
        let Some(live_obj) = live else {
            // a Job that ran this manifest to the end, removed by its own rule: done
            if let Some(f) = object::ran_before(&key, digest.as_deref(), finished) {
                let reason = ObjectReason::Finished(f.clone());
                return with(Compared::early(key, obj, Some(kind), reason, source));
            }
            // In a preview, a dry-run of the create shows what the server would reject
            // (not possible yet when its namespace is still to be created: 404). A sync
            // skips it: a create that fails writes nothing and fails the sync anyway.
            let desired = if validate_new {
                match writer.apply_validated(&kind, &key, &obj, true, strict).await {
                    Ok(d) => normalize(&d),
                    Err(e) if e.not_found() || e.refuses_dry_run() => normalize(&obj),
                    Err(e) => return error(key, obj, Some(kind), e.to_string()),
                }
            } else {
                // a policy pass shows no sides (`keep_sides`): it sends `obj`
                if scope.keep_sides { normalize(&obj) } else { Value::Null }
            };
            let mut c = Compared::early(key, obj, Some(kind), ObjectReason::Missing, source);
            c.desired = desired;
            return with(c);
        };
        // Whose it is: ours, adopted now (Adopt=true), another application's, or nobody's
        let mut obj = obj;
        let adopt = defaults.adopt || options.adopt;
        if let Some(reason) = self.claim(&live_obj, &key, &mut obj, scope, adopt, source).await {
            let mut c = Compared::early(key, obj, Some(kind), reason, source);
            c.live = Some(live_obj.into());
            return with(c);
        }
        // Ignored fields are not sent for an existing object, so plumb never owns them;
        // Replace=true writes the whole object: ignored fields carry their live values.
        let mut apply = obj;
        let replace = defaults.replace || options.replace;
        let prepared = if replace {
            rules.keep_live(&key, &mut apply, &live_obj)
        } else {
            rules.prepare_apply(&key, &mut apply, &live_obj)
        };
        if let Err(e) = prepared {
            return error(key, apply, Some(kind), e);
        }
        let apply_hash = value_hash(&apply);
        let normalized_live = normalize(&live_obj);
        let live_hash = live_hash(&normalized_live, &live_obj);
        let mut client_side = false;
        let desired = match self.recalled_dry_run(&key, (apply_hash, live_hash), &live_obj, &normalized_live, rules) {
            // judged in sync against this very content: still in sync
            Some(DryRunAnswer::Synced) => {
                let c = Compared::early(key, apply, Some(kind.clone()), ObjectReason::Synced, source);
                let desired = if scope.keep_sides { c.desired } else { Value::Null };
                let result = with(Compared { desired, live: Some(kept(live_obj)), ..c });
                if let Some(rv) = live_rv {
                    self.memo.remember_compared(manifest_hash, rv, result.clone());
                }
                return result;
            }
            Some(DryRunAnswer::Desired(d)) => d,
            None => {
                let dry = match writer.apply_validated(&kind, &key, &apply, true, strict).await {
                    Ok(d) => d,
                    // The server cannot answer a dry-run for this object: compare on our side.
                    Err(e) if e.refuses_dry_run() => {
                        client_side = true;
                        apply.clone()
                    }
                    // Git changes a field that cannot change: known to differ, needs re-creation.
                    Err(e) if !e.immutable_fields().is_empty() => {
                        let reason = ObjectReason::Immutable(e.immutable_fields());
                        let mut c = Compared::early(key, apply, Some(kind), reason, source);
                        (c.desired, c.live_compared, c.live) =
                            (normalize(&c.apply), Some(normalized_live), Some(live_obj.into()));
                        return with(c);
                    }
                    Err(e) => return error(key, apply, Some(kind), e.to_string()),
                };
                let mut desired = normalize(&dry);
                if let Err(e) = rules.strip(&key, &mut desired, Some(&live_obj)) {
                    return error(key, apply, Some(kind), e);
                }
                desired
            }
        };
        let mut live_n = normalized_live;
        if let Err(e) = rules.strip(&key, &mut live_n, Some(&live_obj)) {
            return error(key, apply, Some(kind), e);
        }
        let j = object::judge(&desired, &live_n, &live_obj, &apply, client_side, replace, hand);
        if !client_side {
            self.memo.remember_dry_run(&key, apply_hash, live_hash, DryRunAnswer::of(&j, &desired));
        }
        let in_sync = j.reason == ObjectReason::Synced && j.differences.is_empty() && j.takeover.is_none();
        let (desired, live_n) =
            if in_sync && !scope.keep_sides { (Value::Null, None) } else { (desired, Some(live_n)) };
        let c = Compared::early(key, apply, Some(kind.clone()), j.reason, source);
        let (live_compared, live, takeover) = (live_n, Some(kept(live_obj)), j.takeover);
        let result = with(Compared { desired, live_compared, differences: j.differences, live, takeover, ..c });
        if let Some(rv) = live_rv {
            self.memo.remember_compared(manifest_hash, rv, result.clone());
        }
        result
    }

    /// The answer a dry-run of the body hashing `hashes.0` on the live object (`live_obj`,
    /// its content hashing `hashes.1`) would give, when it is known without asking: the
    /// one remembered for both, or, when plumb's own server-side apply of this very body
    /// wrote `live_obj` and nothing has since, the object itself (normalized and
    /// stripped as a dry-run's answer is; see `Memo::applied_here`).
    fn recalled_dry_run(
        &self,
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
            Some(DryRunAnswer::Desired(desired))
        })
    }
}

/// What [`Context::recall`] found.
struct Recalled {
    /// The key of the manifest into the memory of comparisons ([`prepared_hash`]).
    manifest_hash: u64,
    /// The watch cache's object, when trusted ([`Context::trusted_cached`]).
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
fn prepared_hash(digest: u64, scope: &Scope<'_>, installation: Option<&str>, namespaced: bool, source: &str) -> u64 {
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
