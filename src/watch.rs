//! Watches: a cache of the live objects plumb manages, and drift triggers.
//!
//! One kube-runtime watcher per kind an application uses, cluster-wide, filtered by the
//! label `plumb.dev/app` (present on everything plumb applies) with the values of the
//! policy's applications ([`app_selector`]), feeding a reflector store. The children
//! that workloads' health reads (Pods, ReplicaSets, ControllerRevisions…) carry no such
//! label: they are watched whole, but only in the namespaces whose workloads asked
//! for them ([`LiveCache::by_owner`]), so a large cluster's other Pods cost nothing;
//! such a watch stops once its namespace holds no managed workload
//! ([`LiveCache::tidy`]).
//! Passes read live objects from the store instead of GETting each one, and list an
//! application's owned objects from it instead of LISTing. When an object's spec-like
//! content changes (anything but `status`, `resourceVersion`, `managedFields` and the
//! other server-populated fields of [normalize](fn@crate::compare::normalize)), the application
//! named by its label gets a pass within seconds instead of at the next poll.
//! Status-only changes (a controller updating `status`) trigger nothing. A deleted
//! object, or one whose label was removed by hand, triggers the application it was
//! last seen with. The cache keeps objects without plumb's own `managedFields` field
//! set ([`compact`]), each as a `compare::Cached` (the metadata a pass reads, and the
//! object as compact JSON text).

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use kube::{
    Api, Client,
    api::DynamicObject,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    cluster::Kind,
    compare::{Cached, normalize},
    tracking::{APP_LABEL, ObjectKey, group_of},
};

/// Which objects of a kind one watch holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Held {
    /// Those with plumb's app label, cluster-wide (the objects plumb manages).
    Labelled,
    /// Every object of one namespace (the children of managed workloads: Pods,
    /// ReplicaSets…), watched only in namespaces whose workloads' health asked for them.
    Namespace(String),
}

type KindId = (String, String, Held);

/// One running watch.
struct Running {
    store: Store<Cached>,
    /// Stops this watch alone (a child of the cache's token).
    stop: CancellationToken,
    /// When a pass last asked for it.
    read: Instant,
}

/// How long a namespace's children watch outlives its last read once the namespace holds
/// no managed workload ([`LiveCache::stop_unneeded_children`]). A pass that creates a
/// workload reads its children before the labelled watch may have delivered the workload:
/// this long covers that.
pub const CHILDREN_GRACE: Duration = Duration::from_secs(60);

/// Whether objects of `group`/`kind` have children their health reads (Pods, and a
/// Deployment's ReplicaSets): Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs.
pub fn has_children(group: &str, kind: &str) -> bool {
    matches!((group, kind), ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") | ("batch", "Job"))
}

/// Objects by the uid of an owner they name ([`LiveCache::by_owner`]).
pub type ByOwner = HashMap<String, Vec<Arc<Cached>>>;

/// The watch cache of one process.
pub struct LiveCache {
    client: Client,
    stores: Mutex<HashMap<KindId, Running>>,
    /// When [`LiveCache::tidy`] last looked.
    tidied: Mutex<Instant>,
    /// The last error of each kind's watch (by kind name, e.g. `ConfigMap`), until it
    /// delivers again: a 403 means plumb's identity may not list or watch that kind.
    errors: std::sync::Arc<Mutex<HashMap<String, String>>>,
    drift: mpsc::UnboundedSender<String>,
    token: CancellationToken,
    /// The label selector of the labelled watches ([`app_selector`]).
    selector: String,
    /// How many events the labelled watches of each (group, kind) have delivered.
    epochs: Mutex<HashMap<(String, String), Arc<AtomicU64>>>,
}

impl LiveCache {
    /// A cache whose watchers stop when `token` is cancelled; applications whose objects
    /// drift are sent on `drift`. `apps`: the applications of the policy, whose objects
    /// alone the labelled watches hold ([`app_selector`]).
    pub fn new(client: Client, drift: mpsc::UnboundedSender<String>, token: CancellationToken, apps: &[&str]) -> Self {
        Self {
            client,
            stores: Mutex::default(),
            tidied: Mutex::new(Instant::now()),
            errors: std::sync::Arc::default(),
            drift,
            token,
            selector: app_selector(apps),
            epochs: Mutex::default(),
        }
    }

    /// How many objects the labelled watches hold (all kinds).
    pub fn cached(&self) -> usize {
        let Ok(stores) = self.stores.lock() else { return 0 };
        stores.iter().filter(|((_, _, held), _)| *held == Held::Labelled).map(|(_, w)| w.store.state().len()).sum()
    }

    /// The store of `kind` once its initial list has arrived; starts the watcher on first
    /// use (and returns `None` until it is ready).
    fn store(&self, kind: &Kind) -> Option<Store<Cached>> {
        self.store_of(kind, Held::Labelled)
    }

    /// Starts the watch of `kind` when it is not running and waits, at most `timeout`,
    /// for its first list (or its first error: a kind plumb may not list is not waited
    /// for). One LIST answers for every object of the kind: a pass that waits here
    /// instead of GETting each object costs one request per kind.
    pub async fn ready(&self, kind: &Kind, timeout: Duration) {
        let Some(store) = self.watch(kind, Held::Labelled) else { return };
        let failed = async {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if self.error(&kind.resource.kind).is_some() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(timeout, async {
            tokio::select! {
                _ = store.wait_until_ready() => {}
                () = failed => {}
            }
        })
        .await;
    }

    /// The store of the watch of `kind` holding `held` (a labelled watch has drift
    /// triggers; a namespace's watch of children has none).
    fn store_of(&self, kind: &Kind, held: Held) -> Option<Store<Cached>> {
        let store = self.watch(kind, held)?;
        // `wait_until_ready` resolves once the first full list is in.
        futures::FutureExt::now_or_never(store.wait_until_ready()).and_then(Result::ok).map(|()| store)
    }

    /// The store of the watch of `kind` holding `held`, started when not running (listed
    /// or not).
    fn watch(&self, kind: &Kind, held: Held) -> Option<Store<Cached>> {
        let id = (kind.resource.api_version.clone(), kind.resource.kind.clone(), held);
        let mut stores = self.stores.lock().ok()?;
        let running = stores.entry(id.clone()).or_insert_with(|| {
            let stop = self.token.child_token();
            Running { store: self.start(kind, &id.2, stop.clone()), stop, read: Instant::now() }
        });
        running.read = Instant::now();
        Some(running.store.clone())
    }

    /// Stops the children watches ([`LiveCache::by_owner`]) of the namespaces that hold
    /// no managed workload any more (no object of a kind with children, see
    /// [`has_children`], in the labelled watches) and that no pass has read for `grace`.
    /// Stops nothing while a labelled watch of such a kind has not listed (its namespaces
    /// are not known yet). Returns the watches stopped, named as [`LiveCache::watches`]
    /// names them.
    pub fn stop_unneeded_children(&self, grace: Duration) -> Vec<String> {
        let Ok(mut stores) = self.stores.lock() else { return vec![] };
        let mut busy: std::collections::HashSet<String> = std::collections::HashSet::new();
        for ((api_version, kind, held), w) in stores.iter() {
            if *held != Held::Labelled || !has_children(group_of(api_version), kind) {
                continue;
            }
            if futures::FutureExt::now_or_never(w.store.wait_until_ready()).is_none() {
                return vec![];
            }
            busy.extend(w.store.state().iter().filter_map(|o| o.namespace()).map(str::to_string));
        }
        let mut stopped = Vec::new();
        stores.retain(|(api_version, kind, held), w| {
            let Held::Namespace(ns) = held else { return true };
            if busy.contains(ns) || w.read.elapsed() < grace {
                return true;
            }
            w.stop.cancel();
            stopped.push(format!("{kind} ({api_version}) in {ns}"));
            false
        });
        stopped.sort();
        stopped
    }

    /// [`LiveCache::stop_unneeded_children`] with [`CHILDREN_GRACE`], at most once per
    /// [`CHILDREN_GRACE`] (each pass calls it).
    pub fn tidy(&self) {
        {
            let Ok(mut tidied) = self.tidied.lock() else { return };
            if tidied.elapsed() < CHILDREN_GRACE {
                return;
            }
            *tidied = Instant::now();
        }
        for w in self.stop_unneeded_children(CHILDREN_GRACE) {
            tracing::debug!("watch stopped: {w} (no managed workload left there)");
        }
    }

    fn start(&self, kind: &Kind, held: &Held, token: CancellationToken) -> Store<Cached> {
        let writer = reflector::store::Writer::new(());
        let store = writer.as_reader();
        let (api, config): (Api<DynamicObject>, _) = match held {
            Held::Labelled => {
                (Api::all_with(self.client.clone(), &*kind.resource), watcher::Config::default().labels(&self.selector))
            }
            Held::Namespace(ns) => {
                (Api::namespaced_with(self.client.clone(), ns, &*kind.resource), watcher::Config::default())
            }
        };
        let labelled = *held == Held::Labelled;
        let events = watcher(api, config).default_backoff().modify(compact).map_ok(slim);
        let stream = reflector::reflector(writer, events);
        let drift = self.drift.clone();
        let name = kind.resource.kind.clone();
        let errors = self.errors.clone();
        let epoch = labelled.then(|| self.epoch_counter(kind));
        tokio::spawn(async move {
            // uid → (content hash, application) of the labelled objects seen
            let mut seen: HashMap<String, (u64, String)> = HashMap::new();
            let mut events = stream.boxed();
            loop {
                let next = tokio::select! {
                    () = token.cancelled() => return,
                    n = events.next() => n,
                };
                // Every event counts, relists and errors included, once the reflector has
                // applied it to the store: see `LiveCache::epoch`.
                if let Some(e) = &epoch {
                    e.fetch_add(1, Ordering::AcqRel);
                }
                let (next, gone) = match next {
                    Some(Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj))) => (Some(Ok(obj)), false),
                    Some(Ok(watcher::Event::Delete(obj))) => (Some(Ok(obj)), true),
                    Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => continue,
                    Some(Err(e)) => (Some(Err(e)), false),
                    None => (None, false),
                };
                match next {
                    Some(Ok(obj)) => {
                        if let Ok(mut e) = errors.lock() {
                            e.remove(&name);
                        }
                        // drift triggers: labelled watches only (children trigger nothing, so
                        // their content is neither hashed nor remembered). A labelled object
                        // that is deleted, or leaves the selector (its label removed by hand),
                        // triggers the application that it was seen with.
                        if labelled {
                            let uid = obj.uid().unwrap_or_default();
                            let trigger = match (gone, obj.label(APP_LABEL)) {
                                (true, _) => seen.remove(uid).map(|(_, app)| app),
                                (false, Some(app)) => {
                                    let json = obj.value();
                                    let deleting = json.pointer("/metadata/deletionTimestamp").is_some();
                                    let h = value_hash(&normalize(&json));
                                    let before = seen.insert(uid.to_string(), (h, app.to_string()));
                                    (before.is_none_or(|(b, _)| b != h) || deleting).then(|| app.to_string())
                                }
                                (false, None) => None,
                            };
                            if let Some(app) = trigger {
                                let _ = drift.send(app);
                            }
                        }
                    }
                    Some(Err(e)) => {
                        tracing::debug!(kind = %name, "watch: {e}");
                        if let Ok(mut errs) = errors.lock() {
                            errs.insert(name.clone(), e.to_string());
                        }
                    }
                    None => return,
                }
            }
        });
        store
    }

    /// The event count of the labelled watches of `kind`'s group and kind (shared by its
    /// versions).
    fn epoch_counter(&self, kind: &Kind) -> Arc<AtomicU64> {
        let id = (kind.resource.group.clone(), kind.resource.kind.clone());
        let mut epochs = self.epochs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        epochs.entry(id).or_default().clone()
    }

    /// How many events the labelled watches of `group`/`kind` have delivered (their
    /// lists, relists, changes, deletions and errors), once each of them has listed;
    /// `None` when none runs or one has not listed yet. An event is counted after the
    /// cache applied it: while the count stays where it was when a pass started, the
    /// cache holds every object of the kind as that pass could read it.
    pub fn epoch(&self, group: &str, kind: &str) -> Option<u64> {
        let stores = self.stores.lock().ok()?;
        let mut watched = stores.iter().filter(|((api_version, k, held), _)| {
            *held == Held::Labelled && k == kind && group_of(api_version) == group
        });
        let mut any = false;
        let all_listed = watched.all(|(_, w)| {
            any = true;
            futures::FutureExt::now_or_never(w.store.wait_until_ready()).is_some_and(|r| r.is_ok())
        });
        drop(stores);
        if !(any && all_listed) {
            return None;
        }
        let epochs = self.epochs.lock().ok()?;
        epochs.get(&(group.to_string(), kind.to_string())).map(|e| e.load(Ordering::Acquire))
    }

    /// The event count of every labelled watch by (group, kind), listed or not (see
    /// [`LiveCache::epoch`]).
    pub fn epochs(&self) -> HashMap<(String, String), u64> {
        let Ok(epochs) = self.epochs.lock() else { return HashMap::new() };
        epochs.iter().map(|(id, e)| (id.clone(), e.load(Ordering::Acquire))).collect()
    }

    /// The last error of the watch of kind `kind` (e.g. `ConfigMap`), while it has not
    /// delivered since.
    pub fn error(&self, kind: &str) -> Option<String> {
        self.errors.lock().ok()?.get(kind).cloned()
    }

    /// Every running watch, sorted: `Kind (apiVersion), labelled` for one of the objects
    /// plumb manages (cluster-wide, by label), `Kind (apiVersion) in namespace` for one
    /// of a namespace's children.
    pub fn watches(&self) -> Vec<String> {
        let Ok(stores) = self.stores.lock() else { return vec![] };
        let mut out: Vec<String> = stores
            .keys()
            .map(|(api_version, kind, held)| match held {
                Held::Labelled => format!("{kind} ({api_version}), labelled"),
                Held::Namespace(ns) => format!("{kind} ({api_version}) in {ns}"),
            })
            .collect();
        out.sort();
        out
    }

    /// The kinds whose labelled watch has not delivered its first full list yet
    /// (`Kind (apiVersion)`), for the readiness probe. A namespace's children watch is
    /// not counted: it starts when a pass first assesses a workload there, and that pass
    /// uses the workload's status alone until it lists.
    pub fn unsynced(&self) -> Vec<String> {
        let Ok(stores) = self.stores.lock() else { return vec!["(watch cache poisoned)".into()] };
        let mut out: Vec<String> = stores
            .iter()
            .filter(|((_, _, held), w)| {
                *held == Held::Labelled && futures::FutureExt::now_or_never(w.store.wait_until_ready()).is_none()
            })
            .map(|((api_version, kind, _), _)| format!("{kind} ({api_version})"))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The cached object `key` of `kind`: `Some(Some(obj))` found, `Some(None)` absent
    /// from a ready cache (it may still exist without plumb's label: the caller decides),
    /// `None` when the cache of that kind is not ready yet.
    pub fn get_arc(&self, kind: &Kind, key: &ObjectKey) -> Option<Option<Arc<Cached>>> {
        let store = self.store(kind)?;
        let mut r = ObjectRef::<Cached>::new(&key.name);
        if kind.namespaced {
            r = r.within(&key.namespace);
        }
        Some(store.get(&r))
    }

    /// Every cached object of `kind` labelled for `app`; `None` when not ready.
    pub fn list_app(&self, kind: &Kind, app: &str) -> Option<Vec<Arc<Cached>>> {
        let store = self.store(kind)?;
        Some(store.state().into_iter().filter(|o| o.label(APP_LABEL) == Some(app)).collect())
    }

    /// The objects of namespaced `kind` in `namespace` (any object, labelled or not:
    /// Pods of a workload, ReplicaSets of a Deployment) by the uid of each owner their
    /// owner references name, read in one scan of the cache for all the workloads of
    /// the namespace. The first call for a namespace starts its watch of `kind` (only
    /// namespaces holding managed workloads are watched, not the cluster); `None`
    /// until that watch is ready.
    pub fn by_owner(&self, kind: &Kind, namespace: &str) -> Option<ByOwner> {
        if namespace.is_empty() || !kind.namespaced {
            return None;
        }
        let store = self.store_of(kind, Held::Namespace(namespace.to_string()))?;
        Some(by_owner(store.state()))
    }
}

/// `objects` by the uid of each owner their owner references name (an object is listed
/// once under each owner, however many references name it). Pure; what
/// [`LiveCache::by_owner`] returns, and what a process without watches makes of a
/// LIST ([`crate::cluster::Cluster::list_children`]), so that both judge a workload
/// from the same children.
pub fn by_owner(objects: impl IntoIterator<Item = Arc<Cached>>) -> ByOwner {
    let mut out = ByOwner::new();
    for o in objects {
        for (i, uid) in o.owner_uids().enumerate() {
            if !o.owner_uids().take(i).any(|earlier| earlier == uid) {
                out.entry(uid.to_string()).or_default().push(o.clone());
            }
        }
    }
    out
}

/// What the cache keeps of an object: all of it but the field set of plumb's own
/// server-side apply entry in `managedFields` (usually the largest part of the
/// metadata). Comparing never reads it (a difference is explained by the other
/// managers' entries); a takeover of hand-made fields, which merges into it, reads the
/// whole object from the API server first.
fn compact(obj: &mut DynamicObject) {
    for e in obj.metadata.managed_fields.iter_mut().flatten() {
        if e.manager.as_deref() == Some(crate::FIELD_MANAGER) && e.operation.as_deref() == Some("Apply") {
            e.fields_v1 = None;
        }
    }
}

/// Whether `live` (as JSON) came from the cache without plumb's own field set (see
/// [`compact`]).
pub fn compacted(live: &Value) -> bool {
    live.pointer("/metadata/managedFields").and_then(Value::as_array).is_some_and(|entries| {
        entries.iter().any(|e| {
            e.get("manager").and_then(Value::as_str) == Some(crate::FIELD_MANAGER)
                && e.get("operation").and_then(Value::as_str) == Some("Apply")
                && e.get("fieldsV1").is_none()
        })
    })
}

/// The longest label selector [`app_selector`] writes (bytes): the request line of a
/// watch stays well within what API servers and proxies in front of them accept.
pub const MAX_SELECTOR_BYTES: usize = 8 * 1024;

/// The label selector of the labelled watches: the objects of applications `apps`
/// (`plumb.dev/app in (a,b)`; application names are DNS-1123 labels, checked when the
/// policy is loaded, so each is a valid label value). Objects labelled by another plumb
/// installation, or left by an application no longer in the policy, are then neither
/// cached nor watched. Any value of the label when that selector would be longer than
/// [`MAX_SELECTOR_BYTES`] (objects the cache then holds for other applications cost
/// memory only). Label selector syntax: Kubernetes API docs, "Labels and Selectors".
pub fn app_selector(apps: &[&str]) -> String {
    let mut names: Vec<&str> = apps.to_vec();
    names.sort_unstable();
    names.dedup();
    let selector = format!("{APP_LABEL} in ({})", names.join(","));
    if names.is_empty() || selector.len() > MAX_SELECTOR_BYTES { APP_LABEL.to_string() } else { selector }
}

/// A cached object as JSON, with the apiVersion and kind of `kind`.
pub fn with_types(obj: &Cached, kind: &Kind) -> Value {
    obj.json(&kind.resource.api_version, &kind.resource.kind)
}

/// What the cache keeps of a watch event's object (see [`Cached`]).
fn slim(event: watcher::Event<DynamicObject>) -> watcher::Event<Cached> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(o.into()),
        watcher::Event::Delete(o) => watcher::Event::Delete(o.into()),
        watcher::Event::InitApply(o) => watcher::Event::InitApply(o.into()),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Hash of a JSON value, for the caches of one process keyed by content: equal values
/// hash equal (object keys in any order); it walks the value, printing nothing. Not
/// stable across builds: never stored.
pub fn value_hash(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::{APP_LABEL, MAX_SELECTOR_BYTES, app_selector, value_hash};

    #[test]
    fn the_watches_select_the_policy_s_applications() {
        assert_eq!(app_selector(&["web", "api", "web"]), format!("{APP_LABEL} in (api,web)"));
        assert_eq!(app_selector(&[]), APP_LABEL, "no application: the label's presence");
        let many: Vec<String> = (0..2_000).map(|i| format!("application-{i:04}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(app_selector(&many), APP_LABEL, "too long for a request line");
        assert!(app_selector(&many[..400]).len() <= MAX_SELECTOR_BYTES);
        assert!(app_selector(&many[..400]).starts_with(&format!("{APP_LABEL} in (")));
    }

    #[test]
    fn equal_values_hash_equal_and_a_changed_field_does_not() {
        let a = json!({"kind": "ConfigMap", "data": {"a": "1", "b": 2}});
        let b: serde_json::Value =
            serde_json::from_str(r#"{"data": {"b": 2, "a": "1"}, "kind": "ConfigMap"}"#).unwrap();
        assert_eq!(value_hash(&a), value_hash(&b));
        assert_ne!(value_hash(&a), value_hash(&json!({"kind": "ConfigMap", "data": {"a": "1", "b": 3}})));
        assert_ne!(value_hash(&json!({"a": "1"})), value_hash(&json!({"a": 1})));
        assert_ne!(value_hash(&json!(["a", "b"])), value_hash(&json!(["ab"])));
    }
}
