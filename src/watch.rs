//! Watches: a cache of the live objects plumb manages, and drift triggers.
//!
//! One kube-runtime watcher per kind an application uses, filtered by the label
//! `plumb.dev/app` (present on everything plumb applies) with the values of the policy's
//! applications ([`app_selector`]), feeding a reflector store. A namespaced kind is
//! watched in each namespace the applications deploy to, one watch per namespace
//! ([`Destinations`]); a cluster-scoped kind, or any kind when a destination is a glob,
//! cluster-wide. Either way an object is kept, and triggers a pass, only when its
//! namespace is among the destinations of the application its label names: a labelled
//! object elsewhere costs nothing and starts nothing. The children
//! that workloads' health reads (Pods, ReplicaSets, ControllerRevisions…) carry no such
//! label: they are watched whole, but only in the namespaces whose workloads asked
//! for them ([`LiveCache::by_owner`]), so a large cluster's other Pods cost nothing;
//! such a watch stops once its namespace holds no managed workload
//! ([`LiveCache::tidy`]). A change of such a child (a Pod crash-looping, a ReplicaSet
//! scaled) asks for a health look at the application owning its workload
//! ([`Changed::Child`]), found through the owner references (Pod → ReplicaSet →
//! Deployment).
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
    collections::{BTreeSet, HashMap, HashSet},
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt, future};
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
    /// Those with plumb's app label in one destination namespace.
    LabelledIn(String),
    /// Every object of one namespace (the children of managed workloads: Pods,
    /// ReplicaSets…), watched only in namespaces whose workloads' health asked for them.
    Namespace(String),
}

impl Held {
    /// Whether this watch holds managed objects (not a namespace's children).
    fn labelled(&self) -> bool {
        !matches!(self, Held::Namespace(_))
    }
}

type KindId = (String, String, Held);

/// What a watch saw change, for the application it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// One of the application's own objects changed (not only its `status`), was
    /// deleted, or left its label or destinations: its comparison may differ.
    Object(String),
    /// A child of one of the application's workloads (a Pod, a ReplicaSet) changed: its
    /// health may differ, its comparison does not.
    Child(String),
}

impl Changed {
    /// The application.
    pub fn app(&self) -> &str {
        match self {
            Changed::Object(a) | Changed::Child(a) => a,
        }
    }
}

/// The most destination namespaces watched one by one: past this many, namespaced kinds
/// are watched cluster-wide (still keeping only objects inside each application's
/// destinations). Each namespaced kind costs one watch per namespace.
pub const MAX_NAMESPACE_WATCHES: usize = 32;

/// Where each application of a policy may have objects: the namespaces of its
/// destinations (`destinations.namespaces`, globs; default: its own namespace, as
/// [`crate::plan::Boundary`] rules). The watches keep an object only when its namespace
/// is among the destinations of the application its `plumb.dev/app` label names, and
/// watch namespaced kinds only in those namespaces when every destination is a plain
/// name (at most [`MAX_NAMESPACE_WATCHES`] of them).
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    /// Application → its destination namespaces; empty: any application anywhere.
    apps: HashMap<String, Vec<Namespaces>>,
    /// The namespaces watched one by one; `None`: cluster-wide.
    namespaces: Option<BTreeSet<String>>,
}

/// Destination namespaces: one by name, or a glob (a compiled glob takes kilobytes:
/// thousands of applications each with its one namespace name need none).
#[derive(Debug, Clone)]
enum Namespaces {
    Name(Box<str>),
    Glob(globset::GlobMatcher),
}

impl Namespaces {
    fn is_match(&self, namespace: &str) -> bool {
        match self {
            Namespaces::Name(n) => **n == *namespace,
            Namespaces::Glob(g) => g.is_match(namespace),
        }
    }
}

impl Destinations {
    /// Any application's objects anywhere (the watches are cluster-wide).
    pub fn anywhere() -> Self {
        Self::default()
    }

    /// Each application with its destination namespace globs. A glob that does not
    /// compile matches nothing (the policy's validation reports it, naming the file and
    /// line).
    pub fn new<A: AsRef<str>, G: AsRef<str>>(apps: impl IntoIterator<Item = (A, Vec<G>)>) -> Self {
        let mut out = Self { apps: HashMap::new(), namespaces: Some(BTreeSet::new()) };
        for (app, globs) in apps {
            let matchers = out.apps.entry(app.as_ref().to_string()).or_default();
            for g in &globs {
                let g = g.as_ref();
                let literal = !g.is_empty() && g.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
                match &mut out.namespaces {
                    Some(set) if literal => {
                        set.insert(g.to_string());
                    }
                    _ => out.namespaces = None,
                }
                if literal {
                    matchers.push(Namespaces::Name(g.into()));
                } else {
                    matchers.extend(globset::Glob::new(g).ok().map(|g| Namespaces::Glob(g.compile_matcher())));
                }
            }
        }
        if out.namespaces.as_ref().is_some_and(|n| n.len() > MAX_NAMESPACE_WATCHES) {
            out.namespaces = None;
        }
        out
    }

    /// The destinations of every application of `config` (its own, else its
    /// environment's, else its namespace).
    pub fn of(config: &crate::config::Config) -> Self {
        Self::new(config.applications.iter().map(|app| {
            let env = config.environments.iter().find(|e| e.name.value == app.environment.value);
            let destinations = match env {
                Some(e) => app.boundaries(e).destinations,
                None => app.destinations.clone(),
            };
            let globs = destinations.map_or_else(|| vec![app.namespace.value.clone()], |d| d.namespaces);
            (app.name.value.as_str(), globs)
        }))
    }

    /// Whether an object of application `app` in `namespace` (`None`: cluster-scoped)
    /// is inside its destinations. Cluster-scoped objects always are; with no
    /// application given ([`Destinations::anywhere`]) everything is.
    pub fn allows(&self, app: &str, namespace: Option<&str>) -> bool {
        let Some(ns) = namespace.filter(|n| !n.is_empty()) else { return true };
        if self.apps.is_empty() {
            return true;
        }
        self.apps.get(app).is_some_and(|globs| globs.iter().any(|g| g.is_match(ns)))
    }

    /// The namespaces the labelled watches of namespaced kinds run in, one watch each;
    /// `None`: one watch cluster-wide.
    pub fn watched(&self) -> Option<&BTreeSet<String>> {
        self.namespaces.as_ref()
    }
}

/// Whom a workload or a child belongs to, for [`Changed::Child`]: uid → the
/// application of a managed workload, or the owners of a child that has children
/// itself (a ReplicaSet).
#[derive(Debug, Clone)]
enum Owner {
    App(String),
    Owners(Vec<String>),
}

type Owners = Arc<Mutex<HashMap<String, Owner>>>;

/// The application owning an object whose owner references name `uids`: one of them
/// is a managed workload, or is owned by one (two steps: Pod → ReplicaSet → Deployment).
fn owning_app<'a>(owners: &HashMap<String, Owner>, uids: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut up = Vec::new();
    for uid in uids {
        match owners.get(uid) {
            Some(Owner::App(app)) => return Some(app.clone()),
            Some(Owner::Owners(o)) => up.extend(o.iter().cloned()),
            None => {}
        }
    }
    up.iter().find_map(|uid| match owners.get(uid) {
        Some(Owner::App(app)) => Some(app.clone()),
        _ => None,
    })
}

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
    /// The last error of each watch (by kind name, e.g. `ConfigMap`, and namespace, empty
    /// when cluster-wide), until it delivers again: a 403 means plumb's identity may not
    /// list or watch that kind there.
    errors: std::sync::Arc<Mutex<HashMap<(String, String), String>>>,
    drift: mpsc::UnboundedSender<Changed>,
    token: CancellationToken,
    /// [`app_selector`] of every application of the policy (see [`kept_selector`]).
    every_app: String,
    /// Where each application's objects may be ([`LiveCache::within`]).
    destinations: Arc<Destinations>,
    /// The applications whose objects the labelled watches keep ([`LiveCache::keep_only`]).
    keep: Keep,
    /// The managed workloads and the children that own children, by uid.
    owners: Owners,
    /// How many events the labelled watches of each (group, kind) have delivered.
    epochs: Mutex<HashMap<(String, String), Arc<AtomicU64>>>,
    /// The labelled objects each (group, kind)'s watches have seen: kept across their
    /// restarts ([`LiveCache::keep_only`]), so that listing an object again as it was
    /// triggers nothing.
    seen: Mutex<HashMap<(String, String), Seen>>,
}

/// uid → (content hash, application) of the labelled objects of one (group, kind) seen.
type Seen = Arc<Mutex<HashMap<String, (u64, String)>>>;

impl LiveCache {
    /// A cache whose watchers stop when `token` is cancelled; what changes for an
    /// application is sent on `drift` ([`Changed`]). `apps`: the applications of the
    /// policy, whose objects alone the labelled watches hold ([`app_selector`]), anywhere
    /// in the cluster until [`LiveCache::within`] says where.
    pub fn new(client: Client, drift: mpsc::UnboundedSender<Changed>, token: CancellationToken, apps: &[&str]) -> Self {
        Self {
            client,
            stores: Mutex::default(),
            tidied: Mutex::new(Instant::now()),
            errors: std::sync::Arc::default(),
            drift,
            token,
            every_app: app_selector(apps),
            destinations: Arc::new(Destinations::anywhere()),
            keep: Keep::default(),
            owners: Owners::default(),
            epochs: Mutex::default(),
            seen: Mutex::default(),
        }
    }

    /// Keeps (and watches) each application's objects only inside its `destinations`.
    /// Before any watch starts.
    #[must_use]
    pub fn within(mut self, destinations: Destinations) -> Self {
        self.destinations = Arc::new(destinations);
        self
    }

    /// Keeps the objects of `apps` alone (`None`: of every application of the policy),
    /// for a replica that runs only some shards' applications: the objects of the others
    /// cost it no memory, and their changes trigger nothing here. A change restarts the
    /// labelled watches (each lists again once a pass reads its kind: one LIST per kind
    /// and watched namespace) with the selector of the kept applications alone, so the
    /// API server sends a replica only its own objects (beyond [`MAX_SELECTOR_BYTES`] the
    /// label's presence, filtered here); the children watches stay. Listing again triggers
    /// nothing for an object as it was seen before, nor for an object seen for the first
    /// time (an application taken over gets a pass of its own): only an object that
    /// changed meanwhile does. Returns whether it changed.
    /// Meanwhile, and for an application not kept, a read finds no ready cache and asks
    /// the API server ([`LiveCache::list_app`] is `None`; [`LiveCache::get_arc`]'s
    /// absence is checked there by its caller).
    pub fn keep_only(&self, apps: Option<HashSet<String>>) -> bool {
        {
            let mut keep = self.keep.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            if keep.as_deref() == apps.as_ref() {
                return false;
            }
            *keep = apps.map(Arc::new);
        }
        if let Ok(seen) = self.seen.lock() {
            for objects in seen.values() {
                if let Ok(mut objects) = objects.lock() {
                    objects.retain(|_, (_, app)| kept(&self.keep, app));
                }
            }
        }
        let Ok(mut stores) = self.stores.lock() else { return true };
        stores.retain(|(_, _, held), w| {
            if held.labelled() {
                w.stop.cancel();
            }
            !held.labelled()
        });
        true
    }

    /// Whether the labelled watches keep the objects of `app` ([`LiveCache::keep_only`]).
    pub fn keeps(&self, app: &str) -> bool {
        kept(&self.keep, app)
    }

    /// How many objects the labelled watches hold (all kinds).
    pub fn cached(&self) -> usize {
        let Ok(stores) = self.stores.lock() else { return 0 };
        stores.iter().filter(|((_, _, held), _)| held.labelled()).map(|(_, w)| w.store.state().len()).sum()
    }

    /// What holds the labelled objects of `kind`: one watch cluster-wide, or one per
    /// destination namespace ([`Destinations::watched`]).
    fn labelled_holds(&self, kind: &Kind) -> Vec<Held> {
        match self.destinations.watched() {
            Some(namespaces) if kind.namespaced => namespaces.iter().cloned().map(Held::LabelledIn).collect(),
            _ => vec![Held::Labelled],
        }
    }

    /// The store holding object `key` of `kind` once ready (`None`: not ready, or its
    /// namespace is not watched: the caller reads the API server).
    fn store_for(&self, kind: &Kind, key: &ObjectKey) -> Option<Store<Cached>> {
        match self.destinations.watched() {
            Some(namespaces) if kind.namespaced => {
                namespaces.contains(&key.namespace).then_some(())?;
                self.store_of(kind, Held::LabelledIn(key.namespace.clone()))
            }
            _ => self.store_of(kind, Held::Labelled),
        }
    }

    /// Starts the watch of `kind` when it is not running and waits, at most `timeout`,
    /// for its first list (or its first error: a kind plumb may not list is not waited
    /// for). One LIST answers for every object of the kind: a pass that waits here
    /// instead of GETting each object costs one request per kind.
    pub async fn ready(&self, kind: &Kind, timeout: Duration) {
        let holds = self.labelled_holds(kind);
        let stores: Option<Vec<Store<Cached>>> = holds.into_iter().map(|h| self.watch(kind, h)).collect();
        let Some(stores) = stores else { return };
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
                _ = future::join_all(stores.iter().map(Store::wait_until_ready)) => {}
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
            if !held.labelled() || !has_children(group_of(api_version), kind) {
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
        let api: Api<DynamicObject> = match held {
            Held::Labelled => Api::all_with(self.client.clone(), &*kind.resource),
            Held::LabelledIn(ns) | Held::Namespace(ns) => {
                Api::namespaced_with(self.client.clone(), ns, &*kind.resource)
            }
        };
        let labelled = held.labelled();
        let config = if labelled {
            let kept = self.keep.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            let selector = match held {
                Held::LabelledIn(ns) => namespace_selector(kept.as_deref(), &self.destinations, ns, &self.every_app),
                _ => kept_selector(kept.as_deref(), &self.every_app),
            };
            watcher::Config::default().labels(&selector)
        } else {
            watcher::Config::default()
        };
        let (destinations, keep) = (self.destinations.clone(), self.keep.clone());
        let events = watcher(api, config)
            .default_backoff()
            .modify(compact)
            .map_ok(slim)
            .filter_map(move |e| future::ready(if labelled { inside(&destinations, &keep, e) } else { Some(e) }));
        let stream = reflector::reflector(writer, events);
        let name = kind.resource.kind.clone();
        let at = match held {
            Held::Labelled => (name.clone(), String::new()),
            Held::LabelledIn(ns) | Held::Namespace(ns) => (name.clone(), ns.clone()),
        };
        let errors = self.errors.clone();
        let epoch = labelled.then(|| self.epoch_counter(kind));
        let mut deliveries = Deliveries {
            labelled,
            parent: has_children(&kind.resource.group, &kind.resource.kind),
            drift: self.drift.clone(),
            owners: self.owners.clone(),
            seen: if labelled { self.seen_of(kind) } else { Seen::default() },
        };
        tokio::spawn(async move {
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
                let (obj, gone, initial) = match next {
                    Some(Ok(watcher::Event::Apply(obj))) => (obj, false, false),
                    Some(Ok(watcher::Event::InitApply(obj))) => (obj, false, true),
                    Some(Ok(watcher::Event::Delete(obj))) => (obj, true, false),
                    Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => continue,
                    Some(Err(e)) => {
                        tracing::debug!(kind = %name, "watch: {e}");
                        if let Ok(mut errs) = errors.lock() {
                            errs.insert(at.clone(), e.to_string());
                        }
                        continue;
                    }
                    None => return,
                };
                if let Ok(mut e) = errors.lock() {
                    e.remove(&at);
                }
                deliveries.deliver(&obj, gone, initial);
            }
        });
        store
    }

    /// The labelled objects of `kind`'s group and kind seen (shared by its versions and
    /// its watches, kept across their restarts).
    fn seen_of(&self, kind: &Kind) -> Seen {
        let id = (kind.resource.group.clone(), kind.resource.kind.clone());
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.entry(id).or_default().clone()
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
        let mut watched = stores
            .iter()
            .filter(|((api_version, k, held), _)| held.labelled() && k == kind && group_of(api_version) == group);
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

    /// The last error of each watch of kind `kind` (e.g. `ConfigMap`), while it has not
    /// delivered since: `in <namespace>: <error>` for a watch of one namespace.
    pub fn error(&self, kind: &str) -> Option<String> {
        self.error_where(kind, |_| true)
    }

    /// [`LiveCache::error`], of the cluster-wide watches and those of `namespaces` only
    /// (an application's: another destination's failing watch is not its own).
    pub fn error_in(&self, kind: &str, namespaces: &BTreeSet<String>) -> Option<String> {
        self.error_where(kind, |ns| namespaces.contains(ns))
    }

    fn error_where(&self, kind: &str, namespace: impl Fn(&str) -> bool) -> Option<String> {
        let errors = self.errors.lock().ok()?;
        let mut found: Vec<String> = errors
            .iter()
            .filter(|((k, ns), _)| k == kind && (ns.is_empty() || namespace(ns)))
            .map(|((_, ns), e)| if ns.is_empty() { e.clone() } else { format!("in {ns}: {e}") })
            .collect();
        found.sort();
        (!found.is_empty()).then(|| found.join("; "))
    }

    /// Every running watch, sorted: `Kind (apiVersion), labelled` for one of the objects
    /// plumb manages (cluster-wide, by label), `Kind (apiVersion), labelled, in namespace`
    /// for one of them in one destination namespace, `Kind (apiVersion) in namespace` for
    /// one of a namespace's children.
    pub fn watches(&self) -> Vec<String> {
        let Ok(stores) = self.stores.lock() else { return vec![] };
        let mut out: Vec<String> = stores
            .keys()
            .map(|(api_version, kind, held)| match held {
                Held::Labelled => format!("{kind} ({api_version}), labelled"),
                Held::LabelledIn(ns) => format!("{kind} ({api_version}), labelled, in {ns}"),
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
                held.labelled() && futures::FutureExt::now_or_never(w.store.wait_until_ready()).is_none()
            })
            .map(|((api_version, kind, _), _)| format!("{kind} ({api_version})"))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The cached object `key` of `kind`: `Some(Some(obj))` found, `Some(None)` absent
    /// from a ready cache (it may still exist without plumb's label, or outside its
    /// application's destinations: the caller decides), `None` when the cache of that
    /// kind is not ready yet or does not watch the object's namespace.
    pub fn get_arc(&self, kind: &Kind, key: &ObjectKey) -> Option<Option<Arc<Cached>>> {
        let store = self.store_for(kind, key)?;
        let mut r = ObjectRef::<Cached>::new(&key.name);
        if kind.namespaced {
            r = r.within(&key.namespace);
        }
        Some(store.get(&r))
    }

    /// Every cached object of `kind` labelled for `app` (in its destinations); `None`
    /// until the watches of its destinations are ready.
    pub fn list_app(&self, kind: &Kind, app: &str) -> Option<Vec<Arc<Cached>>> {
        if !self.keeps(app) {
            return None;
        }
        // the watches of the application's destinations only: another destination's
        // watch failing (plumb may not list there) does not stop this one's list
        let holds = self.labelled_holds(kind).into_iter().filter(|h| match h {
            Held::LabelledIn(ns) => self.destinations.allows(app, Some(ns)),
            _ => true,
        });
        let stores: Vec<Store<Cached>> = holds.map(|held| self.store_of(kind, held)).collect::<Option<_>>()?;
        Some(stores.iter().flat_map(Store::state).filter(|o| o.label(APP_LABEL) == Some(app)).collect())
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

/// The applications whose objects the labelled watches keep; `None`: every one.
type Keep = Arc<std::sync::RwLock<Option<Arc<HashSet<String>>>>>;

/// Whether `keep` keeps the objects of `app`.
fn kept(keep: &Keep, app: &str) -> bool {
    keep.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().is_none_or(|apps| apps.contains(app))
}

/// A labelled watch's event as the cache takes it: an object outside the destinations
/// of the application its label names, or of an application not kept
/// ([`LiveCache::keep_only`]), is not kept (one already kept, now outside, is removed
/// as if deleted: its application looks again).
fn inside(
    destinations: &Destinations,
    keep: &Keep,
    event: Result<watcher::Event<Cached>, watcher::Error>,
) -> Option<Result<watcher::Event<Cached>, watcher::Error>> {
    let allowed =
        |o: &Cached| o.label(APP_LABEL).is_none_or(|app| destinations.allows(app, o.namespace()) && kept(keep, app));
    match event {
        Ok(watcher::Event::Apply(o)) if !allowed(&o) => Some(Ok(watcher::Event::Delete(o))),
        Ok(watcher::Event::InitApply(o)) if !allowed(&o) => None,
        e => Some(e),
    }
}

/// What one watch makes of the objects it delivers: drift triggers for the labelled
/// objects, health looks for the children, and the owners they are traced through.
struct Deliveries {
    /// A labelled watch (else a namespace's children).
    labelled: bool,
    /// Objects of this kind have children ([`has_children`]).
    parent: bool,
    drift: mpsc::UnboundedSender<Changed>,
    owners: Owners,
    /// The labelled objects seen ([`LiveCache::seen_of`]).
    seen: Seen,
}

impl Deliveries {
    /// `obj` arrived (`gone`: deleted; `initial`: part of a watch's (re)list).
    fn deliver(&mut self, obj: &Cached, gone: bool, initial: bool) {
        if self.labelled {
            self.managed(obj, gone, initial);
        } else {
            self.child(obj, gone, initial);
        }
    }

    /// A labelled object: its application gets a pass when its content changed (not
    /// only its status: see the module doc), when it is being deleted or deleted, or
    /// when it left the selector or its destinations (the application it was seen with).
    /// A (re)list (`initial`) of an object not seen before is no change: the watch
    /// started, and its applications get passes of their own (at start, at a takeover).
    fn managed(&mut self, obj: &Cached, gone: bool, initial: bool) {
        let uid = obj.uid().unwrap_or_default();
        if self.parent
            && let Ok(mut owners) = self.owners.lock()
        {
            match obj.label(APP_LABEL).filter(|_| !gone) {
                Some(app) => owners.insert(uid.to_string(), Owner::App(app.to_string())),
                None => owners.remove(uid),
            };
        }
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let trigger = match (gone, obj.label(APP_LABEL)) {
            (true, _) => seen.remove(uid).map(|(_, app)| app),
            (false, Some(app)) => {
                let mut json = obj.value();
                // a list's items carry no apiVersion and kind, a watch event's objects do
                if let Some(fields) = json.as_object_mut() {
                    fields.remove("apiVersion");
                    fields.remove("kind");
                }
                let deleting = json.pointer("/metadata/deletionTimestamp").is_some();
                let h = value_hash(&normalize(&json));
                let before = seen.insert(uid.to_string(), (h, app.to_string()));
                let changed = match before {
                    Some((b, _)) => b != h,
                    None => !initial,
                };
                (changed || deleting).then(|| app.to_string())
            }
            (false, None) => None,
        };
        drop(seen);
        if let Some(app) = trigger {
            let _ = self.drift.send(Changed::Object(app));
        }
    }

    /// A child (a Pod, a ReplicaSet): once listed, each change asks for a health look at
    /// the application owning it ([`owning_app`]); a child that has children itself is
    /// remembered as their way up.
    fn child(&mut self, obj: &Cached, gone: bool, initial: bool) {
        let Ok(mut owners) = self.owners.lock() else { return };
        if self.parent {
            let uid = obj.uid().unwrap_or_default().to_string();
            if gone {
                owners.remove(&uid);
            } else {
                owners.insert(uid, Owner::Owners(obj.owner_uids().map(str::to_string).collect()));
            }
        }
        if initial {
            return;
        }
        if let Some(app) = owning_app(&owners, obj.owner_uids()) {
            let _ = self.drift.send(Changed::Child(app));
        }
    }
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

/// The label selector of the labelled watches of a replica keeping the objects of `kept`
/// applications alone ([`LiveCache::keep_only`]): theirs ([`app_selector`]); `every_app`
/// (the policy's) when every application is kept or none is (a selector names at least
/// one value).
fn kept_selector(kept: Option<&HashSet<String>>, every_app: &str) -> String {
    match kept {
        Some(kept) if !kept.is_empty() => app_selector(&kept.iter().map(String::as_str).collect::<Vec<_>>()),
        _ => every_app.to_string(),
    }
}

/// The label selector of the labelled watch of a namespaced kind in `namespace`: the
/// kept applications (every application of `destinations` when `kept` is `None` or
/// empty) whose destinations include `namespace` ([`Destinations::allows`]), so that
/// its length grows with the applications of that namespace, not with all those of the
/// replica (which pass [`MAX_SELECTOR_BYTES`] at about a thousand names, and the watch
/// then lists every labelled object there); [`kept_selector`] when none may have objects
/// there.
fn namespace_selector(
    kept: Option<&HashSet<String>>,
    destinations: &Destinations,
    namespace: &str,
    every_app: &str,
) -> String {
    let candidates: Vec<&str> = match kept {
        Some(kept) if !kept.is_empty() => kept.iter().map(String::as_str).collect(),
        _ => destinations.apps.keys().map(String::as_str).collect(),
    };
    let here: Vec<&str> = candidates.into_iter().filter(|app| destinations.allows(app, Some(namespace))).collect();
    if here.is_empty() || destinations.apps.is_empty() { kept_selector(kept, every_app) } else { app_selector(&here) }
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

    use std::{collections::HashSet, sync::Arc};

    use serde_json::json;

    use super::{
        APP_LABEL, Cached, Changed, Deliveries, Destinations, Keep, MAX_NAMESPACE_WATCHES, MAX_SELECTOR_BYTES, Owner,
        Seen, app_selector, inside, kept, kept_selector, namespace_selector, owning_app, value_hash,
    };

    fn labelled(name: &str, namespace: &str, app: &str) -> Cached {
        let obj: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "uid": name, "labels": {APP_LABEL: app}},
        }))
        .unwrap();
        obj.into()
    }

    /// An application's labelled objects count only inside its destinations (its own
    /// namespace by default, as the boundaries rule): a ConfigMap labelled `web` in
    /// another team's namespace is neither kept nor a reason for a pass.
    #[test]
    fn labelled_objects_outside_an_application_s_destinations_are_not_kept() {
        let d = Destinations::new([("web", vec!["web"]), ("shop", vec!["shop", "shop-eu"])]);
        assert!(d.allows("web", Some("web")));
        assert!(!d.allows("web", Some("shop")), "another application's destination");
        assert!(!d.allows("web", Some("kube-system")));
        assert!(d.allows("shop", Some("shop-eu")));
        assert!(d.allows("web", None), "cluster-scoped: the boundaries decide");
        assert!(!d.allows("gone", Some("web")), "an application not in the policy");
        let watched: Vec<&String> = d.watched().unwrap().iter().collect();
        assert_eq!(watched, ["shop", "shop-eu", "web"], "one watch per destination namespace");

        use kube::runtime::watcher::Event;
        let every = Keep::default();
        let outside = labelled("cm", "shop", "web");
        assert!(inside(&d, &every, Ok(Event::InitApply(outside.clone()))).is_none(), "not listed into the cache");
        let Some(Ok(Event::Delete(o))) = inside(&d, &every, Ok(Event::Apply(outside))) else { panic!("removed") };
        assert_eq!(o.namespace(), Some("shop"));
        let home = labelled("cm", "web", "web");
        assert!(matches!(inside(&d, &every, Ok(Event::Apply(home))), Some(Ok(Event::Apply(_)))));
    }

    /// A replica that runs some shards keeps only their applications' objects: another
    /// shard's application's objects are not listed into its cache, and one it stops
    /// keeping is removed as if deleted.
    #[test]
    fn only_the_kept_applications_objects_are_kept() {
        use kube::runtime::watcher::Event;
        let d = Destinations::new([("web", vec!["web"]), ("shop", vec!["shop"])]);
        let keep: Keep = Arc::new(std::sync::RwLock::new(Some(Arc::new(HashSet::from(["web".to_string()])))));
        assert!(kept(&keep, "web") && !kept(&keep, "shop"));
        assert!(matches!(inside(&d, &keep, Ok(Event::InitApply(labelled("cm", "web", "web")))), Some(Ok(_))));
        assert!(inside(&d, &keep, Ok(Event::InitApply(labelled("cm", "shop", "shop")))).is_none(), "another shard's");
        let Some(Ok(Event::Delete(_))) = inside(&d, &keep, Ok(Event::Apply(labelled("cm", "shop", "shop")))) else {
            panic!("removed")
        };
        assert!(kept(&Keep::default(), "shop"), "no keep set: every application's");
    }

    /// A glob destination, or more namespaces than are watched one by one: one watch
    /// cluster-wide, still keeping only what is inside each application's destinations.
    #[test]
    fn glob_destinations_are_watched_cluster_wide_and_still_filtered() {
        let d = Destinations::new([("web", vec!["web-*"])]);
        assert!(d.watched().is_none());
        assert!(d.allows("web", Some("web-eu")) && !d.allows("web", Some("shop")));
        let many: Vec<String> = (0..=MAX_NAMESPACE_WATCHES).map(|i| format!("ns-{i}")).collect();
        let d = Destinations::new([("web", many)]);
        assert!(d.watched().is_none(), "too many namespaces to watch one by one");
        assert!(d.allows("web", Some("ns-0")) && !d.allows("web", Some("other")));
        let any = Destinations::anywhere();
        assert!(any.watched().is_none() && any.allows("web", Some("anything")));
    }

    /// A Pod's change is traced to the application of the Deployment owning its
    /// ReplicaSet, a StatefulSet's Pod to the StatefulSet's; an unowned Pod to none.
    #[test]
    fn a_child_is_traced_to_the_application_of_its_workload() {
        let owners = std::collections::HashMap::from([
            ("deploy-1".to_string(), Owner::App("web".into())),
            ("rs-1".to_string(), Owner::Owners(vec!["deploy-1".into()])),
            ("sts-1".to_string(), Owner::App("db".into())),
            ("rs-orphan".to_string(), Owner::Owners(vec![])),
        ]);
        assert_eq!(owning_app(&owners, ["rs-1"].into_iter()).as_deref(), Some("web"));
        assert_eq!(owning_app(&owners, ["sts-1"].into_iter()).as_deref(), Some("db"));
        assert_eq!(owning_app(&owners, ["rs-orphan"].into_iter()), None);
        assert_eq!(owning_app(&owners, std::iter::empty()), None);
    }

    #[test]
    fn the_watches_select_the_policy_s_applications() {
        assert_eq!(app_selector(&["web", "api", "web"]), format!("{APP_LABEL} in (api,web)"));
        let every = app_selector(&["web", "api", "db"]);
        let kept: HashSet<String> = ["db".to_string()].into();
        assert_eq!(kept_selector(Some(&kept), &every), format!("{APP_LABEL} in (db)"), "a replica asks for its own");
        assert_eq!(kept_selector(None, &every), every, "every application kept");
        assert_eq!(kept_selector(Some(&HashSet::new()), &every), every, "none kept: no empty set of values");
        assert_eq!(app_selector(&[]), APP_LABEL, "no application: the label's presence");
        let many: Vec<String> = (0..2_000).map(|i| format!("application-{i:04}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(app_selector(&many), APP_LABEL, "too long for a request line");
        assert!(app_selector(&many[..400]).len() <= MAX_SELECTOR_BYTES);
        assert!(app_selector(&many[..400]).starts_with(&format!("{APP_LABEL} in (")));
    }

    /// A namespace's watch names the applications that may have objects there: 2,000
    /// applications, 100 a namespace, give each namespace's watch a selector of 100
    /// names, where all 2,000 (too long) would select every labelled object.
    #[test]
    fn a_namespace_s_watch_names_the_applications_of_that_namespace() {
        let apps: Vec<(String, Vec<String>)> =
            (0..2_000).map(|i| (format!("application-{i:04}"), vec![format!("ns-{}", i / 100)])).collect();
        let d = Destinations::new(apps.iter().map(|(a, n)| (a.as_str(), n.clone())));
        let names: Vec<&str> = apps.iter().map(|(a, _)| a.as_str()).collect();
        let every = app_selector(&names);
        assert_eq!(every, APP_LABEL, "all of them: too long");
        let here = namespace_selector(None, &d, "ns-3", &every);
        assert_eq!(here, app_selector(&names[300..400]), "the 100 of ns-3");
        let kept: HashSet<String> =
            ["application-0301", "application-0302", "application-0999"].map(String::from).into();
        assert_eq!(
            namespace_selector(Some(&kept), &d, "ns-3", &every),
            format!("{APP_LABEL} in (application-0301,application-0302)"),
            "a replica's own of that namespace"
        );
        assert_eq!(
            namespace_selector(Some(&kept), &d, "ns-5", &every),
            kept_selector(Some(&kept), &every),
            "none of its own there: what it keeps, never the label's presence"
        );
        let globbed = Destinations::new([("web", vec!["web-*"]), ("db", vec!["db"])]);
        assert_eq!(namespace_selector(None, &globbed, "web-eu", "x"), format!("{APP_LABEL} in (web)"));
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

    /// The drift triggers of a labelled watch of ConfigMaps remembering `seen`, and what
    /// it sent for each delivery of `events` (object, deleted, part of a list).
    fn triggers(seen: &Seen, events: &[(&Cached, bool, bool)]) -> Vec<Option<String>> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut d =
            Deliveries { labelled: true, parent: false, drift: tx, owners: Default::default(), seen: seen.clone() };
        let mut sent = Vec::new();
        for (obj, gone, initial) in events {
            d.deliver(obj, *gone, *initial);
            sent.push(rx.try_recv().ok().map(|c| match c {
                Changed::Object(app) | Changed::Child(app) => app,
            }));
        }
        sent
    }

    /// A takeover restarts the labelled watches: listing again an object as it was seen,
    /// or one never seen, triggers no pass (the applications taken over get passes of
    /// their own; this replica's others were passed already); an object that changed
    /// while the watch restarted, a new object seen live, and a deletion do.
    #[test]
    fn listing_again_triggers_only_what_changed() {
        let seen = Seen::default();
        let (web, shop) = (labelled("cm-web", "web", "web"), labelled("cm-shop", "shop", "shop"));
        let mut changed: kube::api::DynamicObject = serde_json::from_value(web.value()).unwrap();
        changed.data["data"] = json!({"k": "by hand"});
        let changed: Cached = changed.into();
        assert_eq!(triggers(&seen, &[(&web, false, false)]), [Some("web".to_string())], "created, seen live");
        assert_eq!(triggers(&seen, &[(&shop, false, true)]), [None], "the first list");
        // the watch restarts (another shard taken): a new watch, the same memory; a
        // list's items carry no apiVersion and kind
        let mut listed: kube::api::DynamicObject = serde_json::from_value(web.value()).unwrap();
        listed.types = None;
        let listed: Cached = listed.into();
        assert_eq!(triggers(&seen, &[(&listed, false, true), (&shop, false, true)]), [None, None]);
        assert_eq!(triggers(&seen, &[(&changed, false, true)]), [Some("web".to_string())], "changed meanwhile");
        assert_eq!(triggers(&seen, &[(&shop, true, false)]), [Some("shop".to_string())], "deleted");
        assert_eq!(triggers(&seen, &[(&shop, true, false)]), [None], "deleted again: unknown now");
    }
}
