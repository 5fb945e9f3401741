//! One reconcile pass of one application — the only place that sequences IO and the
//! pure core:
//!
//! 1. **source**: resolve the revision and read the application's files (git2);
//! 2. **render** the manifests; stamp each with its tracking-id;
//! 3. **compare**: for each object, read it live and, when it exists, server-side-apply
//!    dry-run it; normalize both, strip ignored fields, diff; list the application's
//!    owned objects that Git no longer declares ("requires pruning");
//! 4. **health** of every object; roll-ups;
//! 5. **sync** when the policy (or a person) says so and the plan ([`crate::plan`]) has
//!    something to do: apply wave by wave in kind order (a later wave once the earlier
//!    ones are Healthy; custom resources once their CRD is Established), then prune —
//!    only if the render succeeded, every compare and every apply succeeded, no other
//!    application now declares the object, and the guards agree;
//! 6. **record** status and history in the cluster.
//!
//! A failed fetch or render stops the pass before anything is compared or written: the
//! application becomes Unknown with the error, and the last synced revision stays
//! recorded as what runs.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Instant,
};

use futures::{FutureExt, StreamExt, stream};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::RwLock;

use crate::{
    cluster::{Cluster, Kind},
    compare::{self, Difference, IgnoreRules, SyncStatus, normalize},
    config::{Application, Config, Environment, Repository, read_secret},
    health::{self, Health, HealthStatus},
    metrics::{Metrics, PassLabels, StatusLabels},
    plan::{self, DesiredItem, PruneCandidate, SyncOptions, SyncReason},
    render,
    source::{self, Credentials, Mirror},
    status::{self, AppStatus, Condition, ResourceStatus, SyncRecord, SyncResult},
    tracking::{self, ObjectKey},
    watch::LiveCache,
};

/// How many objects are compared or applied at once.
const CONCURRENCY: usize = 16;

/// Longest wait for a CustomResourceDefinition to be Established (and its kind
/// served), or for a `Force=true` delete to finish: 60 s (Flux's staged apply waits as
/// long).
const CRD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// What [`Context::compare_one`] needs to know of the application.
#[derive(Clone, Copy)]
struct Scope<'a> {
    app: &'a str,
    /// Destination namespace (default of namespaced objects).
    namespace: &'a str,
    rules: &'a IgnoreRules,
    /// Kinds defined by CRDs of the same render.
    crds: &'a CrdKinds,
    /// The application's sync options.
    defaults: &'a SyncOptions,
    /// Dry-run the create of missing objects, so a preview reports what the server would
    /// reject (a sync does not need it: a create that fails writes nothing).
    validate_new: bool,
}

/// Everything [`Context::execute`] needs from the pass.
struct SyncJob<'a> {
    snapshot: &'a source::Snapshot,
    reason: SyncReason,
    plan: &'a plan::Plan,
    compared: &'a [Arc<Compared>],
    orphans: &'a [(PruneCandidate, Kind)],
    compare_errors: &'a [String],
    started_at: &'a str,
    app_options: &'a SyncOptions,
    rules: &'a IgnoreRules,
    namespace: &'a str,
    no_health_check: &'a HashSet<String>,
}

/// What a pass may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Follow the environment's sync policy (the server's passes).
    Policy,
    /// Sync now whatever the policy (`plumb sync`); `prune` as given.
    Manual {
        /// Prune objects Git no longer declares.
        prune: bool,
        /// Also prune objects that need approval (`Prune=confirm`, data-loss classes).
        approve: bool,
    },
    /// Compare only; write nothing (`plumb diff`, health waits).
    CompareOnly,
    /// Compare and plan as [`Mode::Manual`] would, write nothing (`plumb sync --dry-run`):
    /// the report's plan says what would be created, updated, pruned and skipped.
    Preview {
        /// Plan the prune of objects Git no longer declares.
        prune: bool,
        /// Plan the prune of objects that need approval.
        approve: bool,
    },
}

impl Mode {
    /// Whether passes in this mode write to the cluster (objects, status, history).
    pub fn writes(self) -> bool {
        matches!(self, Mode::Policy | Mode::Manual { .. })
    }
}

/// Everything a pass needs, shared by all applications of one process.
pub struct Context {
    /// The cluster.
    pub cluster: Cluster,
    /// Status store.
    pub store: status::Store,
    /// The policy.
    pub config: Arc<Config>,
    /// Where repository mirrors live.
    pub cache_dir: PathBuf,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    mirrors: Mutex<HashMap<String, Arc<Mutex<Mirror>>>>,
    statuses: RwLock<HashMap<String, AppStatus>>,
    live: Option<LiveCache>,
    drift_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    watch_token: tokio_util::sync::CancellationToken,
    dry_runs: Mutex<HashMap<ObjectKey, DryRun>>,
    heal: Mutex<HashMap<String, HealState>>,
    /// Comparison results by object: (manifest hash, live resourceVersion, result).
    compared: Mutex<HashMap<ObjectKey, CompareMemo>>,
    /// Rendered manifests by application: (revision, path, manifests).
    rendered: Mutex<HashMap<String, RenderMemo>>,
    /// Since when each object of each application has been Progressing.
    progressing: Mutex<HashMap<String, health::ProgressingSince>>,
    /// resourceVersion of plumb's last write of each object, until the watch shows it.
    written: Mutex<HashMap<ObjectKey, String>>,
}

/// A remembered dry-run: valid while neither the applied configuration nor the live
/// object (resourceVersion) changed.
type CompareMemo = (u64, String, Arc<Compared>);
type RenderMemo = (String, String, Vec<render::Manifest>);

/// selfHeal bookkeeping of one application at one revision.
struct HealState {
    revision: String,
    /// Hash of the drift the last attempt reverted.
    drift: u64,
    attempts: u32,
    next: tokio::time::Instant,
    /// Set when the same drift came back right after a successful revert.
    stuck: Option<String>,
    /// Whether the last attempt's sync failed (then the same drift is retried with
    /// backoff instead of being called non-converging).
    failed: bool,
}

/// Wait before selfHeal attempt `n` (1-based): none, then 2 s ×3 each time, capped at
/// 300 s (Argo CD's defaults: 2, 6, 18, 54, 162, 300 s).
pub fn heal_backoff(attempt: u32) -> std::time::Duration {
    if attempt <= 1 {
        return std::time::Duration::ZERO;
    }
    let secs = 2u64.saturating_mul(3u64.saturating_pow(attempt - 2));
    std::time::Duration::from_secs(secs.min(300))
}

struct DryRun {
    apply_hash: u64,
    live_version: String,
    desired: Value,
}

impl Drop for Context {
    fn drop(&mut self) {
        self.watch_token.cancel();
    }
}

/// Why a pass could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No application of that name in the policy.
    #[error("no application `{0}` in the policy")]
    UnknownApp(String),
    /// The status store failed.
    #[error(transparent)]
    Status(#[from] status::Error),
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
}

/// The outcome of one pass.
#[derive(Debug, Clone)]
pub struct PassReport {
    /// The application's status after the pass.
    pub status: AppStatus,
    /// Per-object comparisons (before any sync of this pass).
    pub diffs: Vec<ObjectDiff>,
    /// The sync made in this pass, if any.
    pub sync: Option<SyncRecord>,
    /// What a sync of this pass does (or would do): waves, prunes, skips, refusal. Its
    /// indexes point into `diffs`.
    pub plan: plan::Plan,
}

#[derive(Clone)]
struct Compared {
    key: ObjectKey,
    kind: Option<Kind>,
    /// What is sent when applying (tracking-stamped; ignored fields removed when live exists).
    apply: Value,
    live: Option<Value>,
    sync: SyncStatus,
    reason: String,
    diff: ObjectDiff,
    /// `managedFields` to install before applying: the takeover of fields held by
    /// client-side tools (see [`compare::managers::takeover`]).
    takeover: Option<Value>,
    /// Where the manifest came from (`file#document`).
    source: String,
    /// The kind is not served yet, but a CustomResourceDefinition of this render defines
    /// it: the object is created after that CRD is Established.
    awaits_crd: bool,
    /// Git changes an immutable field: only a delete and re-create (`Force=true`) syncs it.
    immutable: bool,
    /// Sync wave (`plumb.dev/sync-wave`).
    wave: i32,
    /// The object's own sync options (`plumb.dev/sync-options`).
    options: SyncOptions,
}

/// Kinds defined by the CustomResourceDefinitions of a render: (group, kind) → namespaced.
type CrdKinds = HashMap<(String, String), bool>;

fn crd_kinds(manifests: &[render::Manifest]) -> CrdKinds {
    manifests
        .iter()
        .filter(|m| {
            m.object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
                && m.object
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
        })
        .filter_map(|m| {
            let group = m.object.pointer("/spec/group")?.as_str()?;
            let kind = m.object.pointer("/spec/names/kind")?.as_str()?;
            let namespaced = m.object.pointer("/spec/scope").and_then(Value::as_str) != Some("Cluster");
            Some(((group.to_string(), kind.to_string()), namespaced))
        })
        .collect()
}

impl Context {
    /// A context over `cluster` for `config`.
    pub fn new(cluster: Cluster, config: Arc<Config>, cache_dir: PathBuf, metrics: Arc<Metrics>) -> Self {
        let store = status::Store::new(cluster.client().clone(), &config.settings.status_namespace);
        Self {
            cluster,
            store,
            config,
            cache_dir,
            metrics,
            mirrors: Mutex::default(),
            statuses: RwLock::default(),
            live: None,
            drift_rx: Mutex::default(),
            watch_token: tokio_util::sync::CancellationToken::new(),
            dry_runs: Mutex::default(),
            heal: Mutex::default(),
            compared: Mutex::default(),
            rendered: Mutex::default(),
            progressing: Mutex::default(),
            written: Mutex::default(),
        }
    }

    /// Pods (and, for a Deployment, ReplicaSets) a workload owns, from the watch cache;
    /// empty without watches or before they are ready (health then uses status only).
    async fn children(&self, c: &Compared) -> (Vec<Value>, Vec<Value>) {
        let (Some(cache), Some(live)) = (&self.live, &c.live) else { return (vec![], vec![]) };
        let workload = matches!(
            (c.key.group.as_str(), c.key.kind.as_str()),
            ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") | ("batch", "Job")
        );
        let Some(uid) = live.pointer("/metadata/uid").and_then(Value::as_str).filter(|_| workload) else {
            return (vec![], vec![]);
        };
        let (Ok(pod_kind), Ok(rs_kind)) =
            (self.cluster.kind("v1", "Pod").await, self.cluster.kind("apps/v1", "ReplicaSet").await)
        else {
            return (vec![], vec![]);
        };
        let ns = &c.key.namespace;
        if c.key.kind == "Deployment" {
            let rss = cache.owned_by(&rs_kind, ns, uid).unwrap_or_default();
            let mut pods = Vec::new();
            for rs in &rss {
                if let Some(rs_uid) = rs.pointer("/metadata/uid").and_then(Value::as_str) {
                    pods.extend(cache.owned_by(&pod_kind, ns, rs_uid).unwrap_or_default());
                }
            }
            (pods, rss)
        } else {
            (cache.owned_by(&pod_kind, ns, uid).unwrap_or_default(), vec![])
        }
    }

    fn forget_heal(&self, app: &str) {
        if let Ok(mut h) = self.heal.lock() {
            h.remove(app);
        }
    }

    fn heal_condition(&self, app: &str) -> Option<Condition> {
        let h = self.heal.lock().ok()?;
        let state = h.get(app)?;
        if let Some(stuck) = &state.stuck {
            return Some(Condition { type_: "NonConverging".into(), message: stuck.clone() });
        }
        let now = tokio::time::Instant::now();
        (state.next > now).then(|| Condition {
            type_: "SelfHealBackoff".into(),
            message: format!(
                "the next selfHeal sync may start in {}s if drift remains (attempt {}; backoff 2 s ×3, capped at 300 s)",
                (state.next - now).as_secs(),
                state.attempts + 1
            ),
        })
    }

    /// Whether a selfHeal sync may run now. Holds it back during the backoff, and for
    /// good when the very drift the last attempt reverted came straight back at the same
    /// revision (a mutating webhook, another controller, or a field the server drops):
    /// re-applying would fight forever, so the application gets a NonConverging
    /// condition naming the fields, their manager, and the ignore rule that would end it.
    fn self_heal_gate(&self, app: &str, st: &AppStatus, compared: &[Arc<Compared>]) -> Option<SyncReason> {
        let drifted: Vec<&Arc<Compared>> = compared.iter().filter(|c| c.sync == SyncStatus::OutOfSync).collect();
        let mut hasher = std::hash::DefaultHasher::new();
        for c in &drifted {
            std::hash::Hash::hash(&c.key, &mut hasher);
            for d in &c.diff.differences {
                std::hash::Hash::hash(&d.path, &mut hasher);
                std::hash::Hash::hash(&d.desired.as_ref().map(ToString::to_string), &mut hasher);
            }
        }
        let drift = std::hash::Hasher::finish(&hasher);
        let now = tokio::time::Instant::now();
        let mut heal = self.heal.lock().ok()?;
        let fresh = || HealState {
            revision: st.revision.clone(),
            drift: 0,
            attempts: 0,
            next: now,
            stuck: None,
            failed: false,
        };
        let state = heal.entry(app.to_string()).or_insert_with(fresh);
        if state.revision != st.revision {
            *state = fresh();
        }
        if state.stuck.is_some() && state.drift == drift {
            return None;
        }
        if state.attempts > 0 && state.drift == drift && !state.failed {
            let mut what = Vec::new();
            for c in &drifted {
                for d in &c.diff.differences {
                    let by = d.manager.as_ref().map_or_else(
                        || "an unknown writer (the server or a mutating webhook)".to_string(),
                        |m| m.manager.clone(),
                    );
                    what.push(format!(
                        "{} {} keeps changing (by {by}); to leave it to its owner add ignoreDifferences {{group: \"{}\", kind: {}, name: {}, jsonPointers: [\"{}\"]}}",
                        c.key, d.path, c.key.group, c.key.kind, c.key.name, d.path
                    ));
                }
            }
            state.stuck = Some(format!(
                "selfHeal stopped: the same drift came back right after it was reverted at {}: {}",
                &st.revision[..st.revision.len().min(7)],
                what.join("; ")
            ));
            tracing::warn!(app, "{}", state.stuck.as_deref().unwrap_or(""));
            return None;
        }
        if now < state.next {
            return None;
        }
        state.attempts += 1;
        state.drift = drift;
        state.stuck = None;
        state.next = now + heal_backoff(state.attempts + 1);
        Some(SyncReason::SelfHeal)
    }

    /// Reads live objects from watches (see [`crate::watch`]) instead of per-pass GETs
    /// and LISTs, and lets the scheduler trigger a pass when an object drifts. Used by
    /// `plumb serve`; one-shot commands don't need it.
    #[must_use]
    pub fn with_watches(mut self) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.live = Some(LiveCache::new(self.cluster.client().clone(), tx, self.watch_token.clone()));
        self.drift_rx = Mutex::new(Some(rx));
        self
    }

    /// The drift notifications of [`Context::with_watches`] (taken once, by the scheduler).
    pub fn take_drift_receiver(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.drift_rx.lock().ok()?.take()
    }

    /// The latest status of every application (in memory; loaded from the cluster on
    /// the first pass of each).
    pub async fn statuses(&self) -> Vec<AppStatus> {
        let mut v: Vec<AppStatus> = self.statuses.read().await.values().cloned().collect();
        v.sort_by(|a, b| a.app.cmp(&b.app));
        v
    }

    fn mirror(&self, repo: &Repository) -> Result<Arc<Mutex<Mirror>>, String> {
        let mut mirrors = self.mirrors.lock().map_err(|_| "mirror cache poisoned".to_string())?;
        if let Some(m) = mirrors.get(&repo.name.value) {
            return Ok(m.clone());
        }
        let mut creds = Credentials::default();
        if let Some(f) = &repo.token_file {
            let token = read_secret(&f.value).map_err(|e| format!("tokenFile {}: {e}", f.value.display()))?;
            creds.token = Some((repo.username.clone().unwrap_or_else(|| "git".into()), token));
        }
        creds.ssh_key = repo.ssh_key_file.as_ref().map(|f| f.value.clone());
        creds.known_hosts = repo.known_hosts_file.as_ref().map(|f| f.value.clone());
        let m = Mirror::open(&self.cache_dir, &repo.url.value, creds).map_err(|e| e.to_string())?;
        let m = Arc::new(Mutex::new(m));
        mirrors.insert(repo.name.value.clone(), m.clone());
        Ok(m)
    }

    fn app(&self, name: &str) -> Result<(&Application, &Environment, &Repository), Error> {
        let c = &self.config;
        let app = c.applications.iter().find(|a| a.name.value == name).ok_or_else(|| Error::UnknownApp(name.into()))?;
        let env = c
            .environments
            .iter()
            .find(|e| e.name.value == app.environment.value)
            .ok_or_else(|| Error::UnknownApp(name.into()))?;
        let repo = c
            .repositories
            .iter()
            .find(|r| r.name.value == app.repository.value)
            .ok_or_else(|| Error::UnknownApp(name.into()))?;
        Ok((app, env, repo))
    }

    /// Fetches `wanted` of `repo` (blocking git2 off the async threads) and renders the
    /// files under `path`; renders are remembered by revision and path.
    async fn desired(&self, name: &str, repo: &Repository, wanted: String, path: String) -> Desired {
        let dir = path.clone();
        let fetched = match self.mirror(repo) {
            Err(e) => Err(e),
            Ok(m) => tokio::task::spawn_blocking(move || -> Result<source::Snapshot, String> {
                let m = m.lock().map_err(|_| "mirror lock poisoned".to_string())?;
                let resolved = m.resolve(&wanted).map_err(|e| e.to_string())?;
                m.snapshot(&resolved.revision, &dir).map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(format!("source task: {e}"))),
        };
        let snapshot = match fetched {
            Ok(s) => s,
            Err(e) => return Desired::FetchFailed(e),
        };
        let memo = self.rendered.lock().ok().and_then(|m| {
            m.get(name).filter(|(rev, p, _)| *rev == snapshot.revision && *p == path).map(|(_, _, v)| v.clone())
        });
        match memo.map_or_else(|| render::render(&snapshot.files), Ok) {
            Ok(m) => {
                if let Ok(mut r) = self.rendered.lock() {
                    r.insert(name.to_string(), (snapshot.revision.clone(), path, m.clone()));
                }
                Desired::Rendered(snapshot, m)
            }
            Err(e) => Desired::RenderFailed(snapshot, e.to_string()),
        }
    }

    /// Runs one pass of application `name`. `revision` overrides the configured
    /// revision (only with [`Mode::CompareOnly`], for previews).
    ///
    /// # Errors
    /// [`Error::UnknownApp`]; [`Error::Status`] when status cannot be read or written.
    /// Fetch, render, compare and apply failures are not errors of the pass: they are
    /// reported in the returned status (and stored).
    pub async fn run_pass(&self, name: &str, mode: Mode, revision: Option<&str>) -> Result<PassReport, Error> {
        let started = Instant::now();
        let started_at = status::now();
        let (app, env, repo) = self.app(name)?;
        let (previous, mut history) = match self.statuses.read().await.get(name) {
            Some(s) => (s.clone(), None),
            None => {
                let (s, h) = self.store.load(name).await?;
                (s, Some(h))
            }
        };
        let mut st = AppStatus {
            app: name.into(),
            environment: env.name.value.clone(),
            synced_revision: previous.synced_revision.clone(),
            kinds: previous.kinds.clone(),
            last_sync: previous.last_sync.clone(),
            ..AppStatus::default()
        };

        // 1–2. source and render
        let wanted = revision.unwrap_or(&app.revision.value).to_string();
        let (snapshot, manifests) = match self.desired(name, repo, wanted, app.path.value.clone()).await {
            Desired::Rendered(snapshot, manifests) => (snapshot, manifests),
            Desired::FetchFailed(e) => {
                let message = format!("fetch {}: {e}", repo.url.value);
                return self.finish_early(st, previous, history, "ComparisonError", message, started, mode).await;
            }
            Desired::RenderFailed(snapshot, e) => {
                st.revision = snapshot.revision.clone();
                st.subject = snapshot.subject.clone();
                let message = format!("render {}: {e}", &snapshot.revision[..7.min(snapshot.revision.len())]);
                return self.finish_early(st, previous, history, "ComparisonError", message, started, mode).await;
            }
        };
        st.revision = snapshot.revision.clone();
        st.subject = snapshot.subject.clone();
        let t_source = started.elapsed();

        // 3. compare
        let rules = IgnoreRules::new(env.ignore_differences.iter().chain(&app.ignore_differences));
        let namespace = app.namespace.value.clone();
        let crds = crd_kinds(&manifests);
        let app_options = SyncOptions::parse(env.sync_policy.sync_options.iter().map(String::as_str));
        let scope = Scope {
            app: name,
            namespace: &namespace,
            rules: &rules,
            crds: &crds,
            defaults: &app_options,
            validate_new: !mode.writes(),
        };
        let mut jobs = Vec::with_capacity(manifests.len());
        for m in manifests {
            jobs.push(self.compare_one(&scope, m.object, m.source).boxed());
        }
        let mut compared: Vec<Arc<Compared>> = stream::iter(jobs).buffered(CONCURRENCY).collect().await;
        declared_twice(&mut compared);
        self.check_namespaces(&mut compared, &namespace, app_options.create_namespace).await;
        let t_compare = started.elapsed();
        let desired_keys: HashSet<ObjectKey> = compared.iter().map(|c| c.key.clone()).collect();
        let mut compare_errors: Vec<String> = compared
            .iter()
            .filter(|c| c.sync == SyncStatus::Unknown)
            .map(|c| format!("{}: {}", c.key, c.reason))
            .collect();

        // owned objects no longer in Git
        let mut kinds: BTreeSet<(String, String)> = st.kinds.iter().cloned().collect();
        for c in &compared {
            if let Some(av) = c.apply.get("apiVersion").and_then(Value::as_str)
                && (c.kind.is_some() || c.awaits_crd)
            {
                kinds.insert((av.to_string(), c.key.kind.clone()));
            }
        }
        let mut orphans: Vec<(PruneCandidate, Kind)> = Vec::new();
        let mut extraneous: HashSet<String> = HashSet::new();
        for (api_version, kind_name) in &kinds {
            let kind = match self.cluster.kind(api_version, kind_name).await {
                Ok(k) => k,
                Err(crate::cluster::Error::UnknownKind { .. }) => continue, // kind gone from the cluster: nothing to prune
                Err(e) => {
                    compare_errors.push(e.to_string());
                    continue;
                }
            };
            let listed = match self.live.as_ref().and_then(|c| c.list_app(&kind, name)) {
                Some(objs) => Ok(objs
                    .iter()
                    .filter(|o| {
                        let key = ObjectKey {
                            group: kind.resource.group.clone(),
                            kind: kind.resource.kind.clone(),
                            namespace: o.metadata.namespace.clone().unwrap_or_default(),
                            name: o.metadata.name.clone().unwrap_or_default(),
                        };
                        !desired_keys.contains(&key)
                    })
                    .map(|o| crate::watch::with_types(o, &kind))
                    .collect()),
                None => self.cluster.list_app(&kind, name).await,
            };
            match listed {
                Ok(objs) => {
                    for o in objs
                        .iter()
                        .filter(|o| tracking::is_owned_by(o, name, self.config.settings.installation_id.as_deref()))
                    {
                        let Some(key) = ObjectKey::of(o) else { continue };
                        // already being deleted (a foreground prune waits for dependents): done
                        let terminating = o.pointer("/metadata/deletionTimestamp").is_some();
                        if terminating || desired_keys.contains(&key) || orphans.iter().any(|(c, _)| c.key == key) {
                            continue;
                        }
                        let uid = o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
                        if plan::ignores_extraneous(o) {
                            extraneous.insert(key.to_string());
                        }
                        let approval = plan::prune_approval(o, jiff::Timestamp::now());
                        let candidate = PruneCandidate {
                            key,
                            uid,
                            options: app_options.with_object(&SyncOptions::of_object(o)),
                            approved: approval == Ok(true),
                            approval_problem: approval.err(),
                            held: None,
                        };
                        orphans.push((candidate, kind.clone()));
                    }
                }
                Err(e) => compare_errors.push(e.to_string()),
            }
        }

        // what a sync would do (also shown by previews and the status)
        let (prune, approved) = match mode {
            Mode::Manual { prune, approve } | Mode::Preview { prune, approve } => (prune, approve),
            _ => (env.sync_policy.prune, false),
        };
        let installation = self.config.settings.installation_id.as_deref();
        let items: Vec<DesiredItem> = compared
            .iter()
            .map(|c| DesiredItem {
                key: c.key.clone(),
                out_of_sync: c.sync != SyncStatus::Synced,
                tracked: c.live.as_ref().is_some_and(|l| tracking::is_owned_by(l, name, installation)),
                error: c.sync == SyncStatus::Unknown,
                immutable: c.immutable,
                wave: c.wave,
                options: app_options.with_object(&c.options),
            })
            .collect();
        let mut candidates: Vec<PruneCandidate> = orphans.iter().map(|(o, _)| o.clone()).collect();
        if prune {
            extraneous.extend(self.hand_over(name, &mut candidates).await);
        }
        let guards = plan::Guards {
            app: name,
            prune,
            allow_empty: env.sync_policy.allow_empty,
            manual: matches!(mode, Mode::Manual { .. } | Mode::Preview { .. }),
            approved,
            protect_data_loss: env.sync_policy.protect_data_loss,
            max_prune_percent: env.sync_policy.max_prune_percent,
        };
        let the_plan = plan::plan(&items, &candidates, guards);
        let orphan_reasons: HashMap<String, String> = the_plan
            .skipped
            .iter()
            .map(|(o, why)| {
                let why =
                    if why.starts_with("requires pruning") { why.clone() } else { format!("requires pruning; {why}") };
                (o.clone(), why)
            })
            .chain(the_plan.prune.iter().chain(&the_plan.prune_last).map(|c| {
                let class = plan::data_loss_class(&c.key.group, &c.key.kind)
                    .map_or_else(String::new, |k| format!(" (data-loss class {k})"));
                let last = if c.options.prune_last { "; PruneLast" } else { "" };
                (c.key.to_string(), format!("requires pruning{class}{last}"))
            }))
            .collect();
        let t_orphans = started.elapsed();
        tracing::debug!(app = name, ?t_source, ?t_compare, ?t_orphans, objects = compared.len(), "pass stages");
        // 4. status and health
        let settings = health::HealthSettings::from_policy(&env.health);
        let overrides = health::overrides_for(app, env);
        let now = jiff::Timestamp::now();
        let mut no_health_check: HashSet<String> = HashSet::new();
        let mut resources = Vec::new();
        for c in &compared {
            if c.live.as_ref().is_some_and(health::ignores_health_check) {
                no_health_check.insert(c.key.to_string());
            }
            let (pods, replica_sets) = self.children(c).await;
            let (pod_refs, rs_refs): (Vec<&Value>, Vec<&Value>) =
                (pods.iter().collect(), replica_sets.iter().collect());
            let h = match (&c.kind, c.sync) {
                (_, SyncStatus::Unknown) => Health { status: HealthStatus::Unknown, message: String::new() },
                _ => health::assess_with(
                    &health::HealthInput::new(c.live.as_ref(), now, &settings)
                        .children(&pod_refs, &rs_refs)
                        .overrides(&overrides),
                ),
            };
            resources.push(ResourceStatus {
                object: c.key.to_string(),
                sync: c.sync,
                reason: c.reason.clone(),
                health: h.status,
                health_message: h.message,
            });
        }
        let orphan_reason =
            |k: &ObjectKey| orphan_reasons.get(&k.to_string()).cloned().unwrap_or_else(|| "requires pruning".into());
        for (o, _) in &orphans {
            resources.push(ResourceStatus {
                object: o.key.to_string(),
                sync: SyncStatus::OutOfSync,
                reason: orphan_reason(&o.key),
                health: HealthStatus::Healthy,
                health_message: String::new(),
            });
        }
        let mut diffs: Vec<ObjectDiff> = compared.iter().map(|c| c.diff.clone()).collect();
        diffs.extend(orphans.iter().map(|(o, _)| ObjectDiff {
            object: o.key.to_string(),
            desired: Value::Null,
            live: None,
            differences: vec![],
            reason: orphan_reason(&o.key),
        }));
        st.resources = resources;
        st.sync = compare::roll_up(st.resources.iter().filter(|r| !extraneous.contains(&r.object)).map(|r| r.sync));
        for c in &compared {
            if let Some(other) = c.live.as_ref().and_then(tracking::tracked_app).filter(|a| *a != name) {
                st.conditions.push(Condition {
                    type_: "SharedResourceWarning".into(),
                    message: format!("{} is also tracked by application {other}; both declare it", c.key),
                });
            }
        }
        if !compare_errors.is_empty() {
            st.sync = SyncStatus::Unknown;
            st.conditions.push(Condition { type_: "ComparisonError".into(), message: compare_errors.join("; ") });
        }
        st.health = health::roll_up(
            st.resources
                .iter()
                .filter(|r| !r.reason.starts_with("requires pruning") && !no_health_check.contains(&r.object))
                .map(|r| &r.health),
        );
        // Objects Progressing for too long: a warning, health stays Progressing.
        if let Ok(mut all) = self.progressing.lock() {
            let previous = all.remove(name).unwrap_or_default();
            let statuses: Vec<(ObjectKey, HealthStatus)> =
                compared.iter().zip(&st.resources).map(|(c, r)| (c.key.clone(), r.health)).collect();
            let since = health::track_progressing(&previous, statuses.iter().map(|(k, h)| (k, *h)), now);
            if let Some(stall) = health::stalled(&since, now, settings.stall_after) {
                st.conditions.push(Condition { type_: "HealthStalled".into(), message: stall.message });
            }
            all.insert(name.to_string(), since);
        }
        if st.sync == SyncStatus::Synced {
            st.synced_revision = st.revision.clone();
        }
        if env.orphaned_resources.warn {
            let mut namespaces: BTreeSet<String> =
                compared.iter().map(|c| c.key.namespace.clone()).filter(|n| !n.is_empty()).collect();
            namespaces.insert(namespace.clone());
            match self.orphaned_resources(env, &namespaces, &kinds).await {
                Ok(found) if !found.is_empty() => {
                    let shown: Vec<&str> = found.iter().take(10).map(String::as_str).collect();
                    let more = found.len().saturating_sub(shown.len());
                    st.conditions.push(Condition {
                        type_: "OrphanedResourceWarning".into(),
                        message: format!(
                            "{} object(s) in the application's namespaces are tracked by no application (never deleted): {}{}",
                            found.len(),
                            shown.join(", "),
                            if more > 0 { format!(" and {more} more") } else { String::new() }
                        ),
                    });
                    st.orphaned = found;
                }
                Ok(_) => {}
                Err(e) => st.conditions.push(Condition {
                    type_: "OrphanedResourceWarning".into(),
                    message: format!("orphaned resources could not be listed: {e}"),
                }),
            }
        }

        // 5. sync
        let out_of_sync = st.sync != SyncStatus::Synced;
        let revision_changed = st.revision != previous.synced_revision;
        // What a guard keeps (Prune=false, prune off, awaiting approval) leaves the
        // application OutOfSync, but no automated sync can change it: none is started.
        let actionable = the_plan.refused.is_some()
            || the_plan.waves.iter().any(|w| !w.apply.is_empty())
            || !the_plan.prune.is_empty()
            || !the_plan.prune_last.is_empty();
        if !actionable && compare_errors.is_empty() {
            st.synced_revision = st.revision.clone();
        }
        // Objects that fail their comparison are never applied; a sync due with only
        // those is recorded as Failed naming them — once per revision and errors.
        let errors = compare_errors.join("; ");
        let failed_before = previous
            .last_sync
            .as_ref()
            .is_some_and(|l| l.result == SyncResult::Failed && l.revision == st.revision && l.message == errors);
        if !actionable && !compare_errors.is_empty() && failed_before {
            st.conditions.push(Condition { type_: "SyncError".into(), message: errors.clone() });
        }
        let actionable = actionable || (!compare_errors.is_empty() && !failed_before);
        let out_of_sync = out_of_sync && actionable;
        // a prune approved by annotation since the last sync is a reason to sync
        let approval = the_plan.prune.iter().chain(&the_plan.prune_last).any(|c| c.approved);
        let revision_changed = revision_changed || approval;
        let reason = match mode {
            Mode::CompareOnly | Mode::Preview { .. } => None,
            Mode::Manual { .. } => plan::sync_reason(&env.sync_policy, out_of_sync, revision_changed, true),
            Mode::Policy => plan::sync_reason(&env.sync_policy, out_of_sync, revision_changed, false),
        };
        let reason = match reason {
            Some(SyncReason::SelfHeal) => self.self_heal_gate(name, &st, &compared),
            Some(r) => {
                self.forget_heal(name);
                Some(r)
            }
            None => {
                if st.sync == SyncStatus::Synced {
                    self.forget_heal(name);
                }
                None
            }
        };
        if let Some(c) = self.heal_condition(name) {
            st.conditions.push(c);
        }
        let shared = st.conditions.iter().any(|c| c.type_ == "SharedResourceWarning");
        let reason = if reason.is_some() && shared && app_options.fail_on_shared {
            st.conditions.push(Condition {
                type_: "SyncError".into(),
                message: "FailOnSharedResource=true: not syncing objects another application tracks".into(),
            });
            None
        } else {
            reason
        };
        // A guard's refusal is recorded once per revision, not at every pass.
        let refused_again = the_plan.refused.as_ref().is_some_and(|why| {
            previous
                .last_sync
                .as_ref()
                .is_some_and(|l| l.result == SyncResult::Refused && l.revision == st.revision && &l.message == why)
        });
        let reason = match (reason, &the_plan.refused) {
            (Some(SyncReason::Manual), _) | (_, None) => reason,
            (Some(_), Some(why)) if refused_again => {
                st.conditions.push(Condition { type_: "SyncError".into(), message: why.clone() });
                None
            }
            (r, _) => r,
        };
        let mut record = None;
        if let Some(reason) = reason {
            if app_options.create_namespace {
                self.ensure_namespace(&namespace).await;
            }
            let heal = reason == SyncReason::SelfHeal;
            let job = SyncJob {
                snapshot: &snapshot,
                reason,
                plan: &the_plan,
                compared: &compared,
                orphans: &orphans,
                compare_errors: &compare_errors,
                started_at: &started_at,
                app_options: &app_options,
                rules: &rules,
                namespace: &namespace,
                no_health_check: &no_health_check,
            };
            let rec = self.execute(&mut st, &job).await;
            for k in compared.iter().filter(|k| k.kind.is_some() || k.awaits_crd) {
                if let Some(av) = k.apply.get("apiVersion").and_then(Value::as_str) {
                    kinds.insert((av.to_string(), k.key.kind.clone()));
                }
            }
            if heal
                && let Ok(mut h) = self.heal.lock()
                && let Some(state) = h.get_mut(name)
            {
                state.failed = rec.result != SyncResult::Succeeded;
            }
            record = Some(status::continue_sync(previous.last_sync.as_ref(), rec));
        } else if out_of_sync
            && env.sync_policy.automated
            && !env.sync_policy.self_heal
            && !revision_changed
            && mode == Mode::Policy
        {
            st.conditions.push(Condition {
                type_: "OutOfSync".into(),
                message:
                    "live state drifted from Git; selfHeal is off, so plumb waits for the next commit or `plumb sync`"
                        .into(),
            });
        }
        // A Running sync with nothing left to do (its last objects got there some other
        // way) is over: its entry says so instead of staying Running.
        if let Some(prev) = previous.last_sync.as_ref().filter(|l| {
            record.is_none()
                && l.result == SyncResult::Running
                && l.revision == st.revision
                && !actionable
                && compare_errors.is_empty()
                && mode.writes()
        }) {
            let mut done = prev.clone();
            done.result = SyncResult::Succeeded;
            done.message = "finished: nothing left to do".into();
            done.finished_at = status::now();
            record = Some(done);
        }
        st.kinds = kinds.into_iter().collect();
        if let Some(r) = &record {
            st.last_sync = Some(r.clone());
        }

        // 6. record
        if mode.writes() && previous.health != st.health && !previous.app.is_empty() {
            let degraded = st
                .resources
                .iter()
                .filter(|r| r.health == HealthStatus::Degraded)
                .map(|r| format!("{}: {}", r.object, r.health_message));
            let note = std::iter::once(format!(
                "health {} → {} at {}",
                previous.health,
                st.health,
                &st.revision[..st.revision.len().min(7)]
            ))
            .chain(degraded)
            .collect::<Vec<_>>()
            .join("; ");
            tracing::info!(app = name, "{note}");
            let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": status::configmap_name(name), "namespace": self.config.settings.status_namespace}});
            self.cluster.event(&cm, st.health == HealthStatus::Degraded, "HealthChanged", "Assess", note).await;
        }
        let result_word = match (&record, st.sync) {
            (Some(r), _) if r.result == SyncResult::Succeeded => "applied",
            (Some(r), _) if r.result == SyncResult::Refused => "refused",
            (Some(r), _) if r.result == SyncResult::Running => "running",
            (Some(_), _) => "failed",
            (None, SyncStatus::Unknown) => "error",
            (None, _) => "compared",
        };
        if mode.writes() {
            self.save(&st, &previous, history.as_mut(), record.clone()).await?;
        }
        self.observe(name, result_word, &st, started);
        Ok(PassReport { status: st, diffs, sync: record, plan: the_plan })
    }

    async fn compare_one(&self, scope: &Scope<'_>, mut obj: Value, source: String) -> Arc<Compared> {
        let Scope { app, namespace, rules, crds, defaults, validate_new } = *scope;
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
        let kind_name = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let src = source.clone();
        let unknown = |key: ObjectKey, obj: Value, kind: Option<Kind>, reason: String| Compared {
            diff: ObjectDiff {
                object: key.to_string(),
                desired: obj.clone(),
                live: None,
                differences: vec![],
                reason: reason.clone(),
            },
            key,
            kind,
            apply: obj,
            live: None,
            sync: SyncStatus::Unknown,
            reason,
            takeover: None,
            source: src.clone(),
            awaits_crd: false,
            immutable: false,
            wave: 0,
            options: SyncOptions::default(),
        };
        let kind = match self.cluster.kind(&api_version, &kind_name).await {
            Ok(k) => k,
            Err(e) => {
                let mut key = ObjectKey::of(&obj).unwrap_or_else(unknown_key);
                let Some(&namespaced) = crds.get(&(key.group.clone(), key.kind.clone())) else {
                    return Arc::new(unknown(key, obj, None, format!("{e} ({source})")));
                };
                // Its CRD is part of this render: created after the CRD is Established.
                if namespaced && key.namespace.is_empty() {
                    key.namespace = namespace.to_string();
                }
                let reason = "missing (its CustomResourceDefinition is applied first in this sync)".to_string();
                let (wave, options) = (plan::sync_wave(&obj).unwrap_or(0), SyncOptions::of_object(&obj));
                let mut c = unknown(key, obj, None, reason);
                (c.sync, c.awaits_crd, c.wave, c.options) = (SyncStatus::OutOfSync, true, wave, options);
                return Arc::new(c);
            }
        };
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            if kind.namespaced {
                if meta.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty) {
                    meta.insert("namespace".into(), Value::String(namespace.into()));
                }
            } else {
                meta.remove("namespace");
            }
        }
        let Some(key) = ObjectKey::of(&obj) else {
            return Arc::new(unknown(unknown_key(), obj, Some(kind), format!("{source}: no identity")));
        };
        let wave = match plan::sync_wave(&obj) {
            Ok(w) => w,
            Err(e) => return Arc::new(unknown(key, obj, Some(kind), format!("{source}: {e}"))),
        };
        if let Some(e) = SyncOptions::problems(&obj).into_iter().next() {
            let e = format!("{source}: annotation {}: {e}", tracking::SYNC_OPTIONS_ANNOTATION);
            return Arc::new(unknown(key, obj, Some(kind), e));
        }
        let options = SyncOptions::of_object(&obj);
        tracking::stamp(&mut obj, app, &key, self.config.settings.installation_id.as_deref());
        // Same manifest and same live resourceVersion as last time: same answer.
        let manifest_hash = crate::watch::value_hash(&obj);
        let mut cached = self.live.as_ref().and_then(|c| c.get_arc(&kind, &key)).flatten();
        // Right after plumb applied an object the watch may not have delivered the new
        // version yet: a cached object older than plumb's own write is not trusted.
        let written = self.written.lock().ok().and_then(|m| m.get(&key).cloned());
        if let (Some(w), Some(c)) = (&written, &cached) {
            if c.metadata.resource_version.as_ref() == Some(w) {
                if let Ok(mut m) = self.written.lock() {
                    m.remove(&key);
                }
            } else {
                cached = None;
            }
        }
        let live_rv = cached.as_ref().and_then(|o| o.metadata.resource_version.clone());
        if let Some(rv) = &live_rv {
            let memo = self.compared.lock().ok().and_then(|m| {
                m.get(&key).filter(|(h, r, _)| *h == manifest_hash && r == rv).map(|(_, _, c)| c.clone())
            });
            if let Some(c) = memo {
                return c;
            }
        }
        let cached = cached.map(|o| crate::watch::with_types(&o, &kind));
        let live = match cached {
            Some(l) => Some(l),
            // not watched yet, absent from the cache (it may exist without our label), or
            // older than plumb's own last write: read it from the API server
            None => match self.cluster.get(&kind, &key).await {
                Ok(l) => {
                    if let Ok(mut m) = self.written.lock() {
                        m.remove(&key);
                    }
                    l
                }
                Err(e) => return Arc::new(unknown(key, obj, Some(kind), e.to_string())),
            },
        };
        let Some(live_obj) = live else {
            // In a preview, a dry-run of the create shows what the server would reject
            // (not possible yet when its namespace is still to be created: 404). A sync
            // skips it: a create that fails writes nothing and fails the sync anyway.
            let strict = !(defaults.validate_disabled || options.validate_disabled);
            let desired = if validate_new {
                match self.cluster.apply_validated(&kind, &key, &obj, true, strict).await {
                    Ok(d) => normalize(&d),
                    Err(e) if e.not_found() || e.refuses_dry_run() => normalize(&obj),
                    Err(e) => return Arc::new(unknown(key, obj, Some(kind), e.to_string())),
                }
            } else {
                normalize(&obj)
            };
            let mut c = unknown(key, obj, Some(kind), "missing".into());
            c.diff.desired = desired;
            (c.sync, c.wave, c.options) = (SyncStatus::OutOfSync, wave, options);
            return Arc::new(c);
        };
        // Ignored fields are not sent for an existing object, so plumb never owns them.
        let mut apply = obj;
        // Replace=true writes the whole object: ignored fields carry their live values.
        let replace = defaults.replace || options.replace;
        let prepared = if replace {
            rules.keep_live(&key, &mut apply, &live_obj)
        } else {
            rules.prepare_apply(&key, &mut apply, &live_obj)
        };
        if let Err(e) = prepared {
            return Arc::new(unknown(key, apply, Some(kind), e));
        }
        let apply_hash = crate::watch::value_hash(&apply);
        // keyed by the live content without status: a controller writing status does not
        // invalidate the dry-run
        let normalized_live = normalize(&live_obj);
        let live_version = crate::watch::value_hash(&normalized_live).to_string();
        let remembered = self.dry_runs.lock().ok().and_then(|m| {
            m.get(&key)
                .filter(|d| d.apply_hash == apply_hash && d.live_version == live_version)
                .map(|d| d.desired.clone())
        });
        let mut client_side = false;
        let desired = match remembered {
            Some(d) => d,
            None => {
                let strict = !(defaults.validate_disabled || options.validate_disabled);
                let dry = match self.cluster.apply_validated(&kind, &key, &apply, true, strict).await {
                    Ok(d) => d,
                    // The server cannot answer a dry-run for this object: compare on our side.
                    Err(e) if e.refuses_dry_run() => {
                        client_side = true;
                        apply.clone()
                    }
                    // Git changes a field that cannot change: known to differ, needs re-creation.
                    Err(e) if !e.immutable_fields().is_empty() => {
                        let reason = format!(
                            "differs at immutable field(s) {}: the object must be deleted and re-created (sync option Force=true)",
                            e.immutable_fields().join(", ")
                        );
                        return Arc::new(Compared {
                            diff: ObjectDiff {
                                object: key.to_string(),
                                desired: normalize(&apply),
                                live: Some(normalized_live),
                                differences: vec![],
                                reason: reason.clone(),
                            },
                            key,
                            kind: Some(kind),
                            apply,
                            live: Some(live_obj),
                            sync: SyncStatus::OutOfSync,
                            reason,
                            takeover: None,
                            source,
                            awaits_crd: false,
                            immutable: true,
                            wave,
                            options,
                        });
                    }
                    Err(e) => return Arc::new(unknown(key, apply, Some(kind), e.to_string())),
                };
                let mut desired = normalize(&dry);
                if let Err(e) = rules.strip(&key, &mut desired, Some(&live_obj)) {
                    return Arc::new(unknown(key, apply, Some(kind), e));
                }
                if let (false, Ok(mut m)) = (client_side, self.dry_runs.lock()) {
                    m.insert(key.clone(), DryRun { apply_hash, live_version, desired: desired.clone() });
                }
                desired
            }
        };
        let mut live_n = normalized_live;
        if let Err(e) = rules.strip(&key, &mut live_n, Some(&live_obj)) {
            return Arc::new(unknown(key, apply, Some(kind), e));
        }
        let mut differences = if client_side {
            compare::client_side::diff_subset(&desired, &live_n)
        } else {
            compare::diff(&desired, &live_n)
        };
        for d in &mut differences {
            d.manager = compare::managers::owner_of(&live_obj, &d.path, crate::FIELD_MANAGER);
        }
        // Fields held by client-side tools: Git no longer declaring them would not remove
        // them (SSA keeps another manager's fields), so plumb takes them over first.
        // (a replace owns every field it writes: nothing to take over)
        let takeover = if replace { None } else { compare::managers::takeover(&live_obj, crate::FIELD_MANAGER) };
        let mut legacy_owner = None;
        if takeover.is_some() {
            for (tokens, owner) in compare::managers::legacy_paths(&live_obj, crate::FIELD_MANAGER) {
                let pointer: String =
                    tokens.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect();
                legacy_owner.get_or_insert_with(|| owner.manager.clone());
                if apply.pointer(&pointer).is_some()
                    || pointer.ends_with("last-applied-configuration")
                    || differences.iter().any(|d| d.path == pointer)
                {
                    continue;
                }
                differences.push(compare::Difference {
                    desired: None,
                    live: live_obj.pointer(&pointer).cloned(),
                    path: pointer,
                    manager: Some(owner),
                });
            }
        }
        let (sync, reason) = if !differences.is_empty() {
            let what: Vec<String> = differences.iter().map(compare::Difference::describe).collect();
            let how = if client_side { " (client-side comparison: the server refused the dry-run)" } else { "" };
            (SyncStatus::OutOfSync, format!("differs at {}{how}", what.join("; ")))
        } else if let Some(m) = legacy_owner {
            (SyncStatus::OutOfSync, format!("fields held by {m} to be taken over by plumb"))
        } else {
            (SyncStatus::Synced, String::new())
        };
        let result = Arc::new(Compared {
            diff: ObjectDiff {
                object: key.to_string(),
                desired,
                live: Some(live_n),
                differences,
                reason: reason.clone(),
            },
            key,
            kind: Some(kind),
            apply,
            live: Some(live_obj),
            sync,
            reason,
            takeover,
            source,
            awaits_crd: false,
            immutable: false,
            wave,
            options,
        });
        if let (Some(rv), Ok(mut m)) = (live_rv, self.compared.lock()) {
            m.insert(result.key.clone(), (manifest_hash, rv, result.clone()));
        }
        result
    }

    /// Runs a planned sync: wave by wave (kind order within a wave, concurrently within
    /// a kind), waiting for applied CustomResourceDefinitions to be Established before
    /// the custom resources they define; a later wave starts only when every object of
    /// the earlier ones is Healthy — otherwise the sync is `Running` and the next pass
    /// goes on. Prunes follow the last wave, only when nothing failed; `PruneLast`
    /// objects only once everything is Healthy.
    async fn execute(&self, st: &mut AppStatus, job: &SyncJob<'_>) -> SyncRecord {
        let p = job.plan;
        let mut rec = SyncRecord {
            revision: job.snapshot.revision.clone(),
            subject: job.snapshot.subject.clone(),
            started_at: job.started_at.into(),
            finished_at: String::new(),
            reason: format!("{:?}", job.reason),
            result: SyncResult::Succeeded,
            message: String::new(),
            applied: vec![],
            pruned: vec![],
        };
        if let Some(refusal) = &p.refused {
            rec.result = SyncResult::Refused;
            rec.message = refusal.clone();
            rec.finished_at = status::now();
            st.conditions.push(Condition { type_: "SyncError".into(), message: refusal.clone() });
            tracing::warn!(app = %st.app, revision = %rec.revision, "{refusal}");
            return rec;
        }
        // Health of every desired object: as assessed this pass, then as applied.
        let mut health: Vec<HealthStatus> = st.resources.iter().take(job.compared.len()).map(|r| r.health).collect();
        for (i, c) in job.compared.iter().enumerate() {
            if job.no_health_check.contains(&c.key.to_string()) {
                health[i] = HealthStatus::Healthy;
            }
        }
        let mut failures = Vec::new();
        let mut waiting = None;
        'waves: for (w, wave) in p.waves.iter().enumerate() {
            let mut i = 0;
            while i < wave.apply.len() {
                let rank = |j: usize| {
                    let c = &job.compared[wave.apply[j]];
                    plan::kind_rank(&c.key.group, &c.key.kind)
                };
                let r = rank(i);
                let mut end = i;
                while end < wave.apply.len() && rank(end) == r {
                    end += 1;
                }
                let mut targets = Vec::with_capacity(end - i);
                for &idx in &wave.apply[i..end] {
                    match self.resolve_deferred(&st.app, job, &job.compared[idx]).await {
                        Ok(c) => targets.push((idx, c)),
                        Err(e) => failures.push(format!("{}: {e}", job.compared[idx].key)),
                    }
                }
                let mut jobs = Vec::with_capacity(targets.len());
                for (idx, c) in &targets {
                    let options = job.app_options.with_object(&c.options);
                    let idx = *idx;
                    let may_recreate = p.recreate.contains(&idx);
                    jobs.push(async move { (idx, self.apply_one(c, &options, may_recreate).await) }.boxed());
                }
                let results: Vec<(usize, Result<Value, String>)> =
                    stream::iter(jobs).buffer_unordered(CONCURRENCY).collect().await;
                for (idx, res) in results {
                    let c = &job.compared[idx];
                    match res {
                        Ok(obj) => {
                            health[idx] = if job.no_health_check.contains(&c.key.to_string()) {
                                HealthStatus::Healthy
                            } else {
                                health::assess(Some(&obj)).status
                            };
                            self.applied(st, &mut rec, c, job.reason, &obj).await;
                        }
                        Err(e) => failures.push(format!("{}: {e}", c.key)),
                    }
                }
                // Custom resources need their CRD served before they can be applied.
                for (_, c) in targets.iter().filter(|(idx, _)| {
                    let k = &job.compared[*idx].key;
                    k.group == "apiextensions.k8s.io" && k.kind == "CustomResourceDefinition"
                }) {
                    if let Err(e) = self.cluster.wait_established(&c.key.name, CRD_TIMEOUT).await {
                        failures.push(e);
                    }
                }
                if !failures.is_empty() {
                    break 'waves; // later objects may depend on what failed
                }
                i = end;
            }
            // The next wave (with something to apply) starts when this one is Healthy.
            if let Some(next) = p.waves[w + 1..].iter().find(|n| !n.apply.is_empty()) {
                let not_ready: Vec<String> = wave
                    .members
                    .iter()
                    .filter(|&&m| !plan::health_ready(health[m]))
                    .map(|&m| format!("{} {}", job.compared[m].key, health[m]))
                    .collect();
                if !not_ready.is_empty() {
                    waiting = Some(format!(
                        "wave {} waits until wave {} is Healthy: {}",
                        next.wave,
                        wave.wave,
                        not_ready.join(", ")
                    ));
                    break;
                }
            }
        }
        rec.applied.sort();
        let clean = failures.is_empty() && job.compare_errors.is_empty();
        if clean && waiting.is_none() {
            self.prune(st, &mut rec, &p.prune, job.orphans, &mut failures).await;
            if !p.prune_last.is_empty() {
                let not_ready: Vec<String> = health
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| !plan::health_ready(**h))
                    .map(|(m, h)| format!("{} {h}", job.compared[m].key))
                    .collect();
                if not_ready.is_empty() && failures.is_empty() {
                    self.prune(st, &mut rec, &p.prune_last, job.orphans, &mut failures).await;
                } else if failures.is_empty() {
                    waiting = Some(format!(
                        "PruneLast: {} object(s) are pruned once everything is Healthy: {}",
                        p.prune_last.len(),
                        not_ready.join(", ")
                    ));
                }
            }
        } else if !clean && (!p.prune.is_empty() || !p.prune_last.is_empty()) {
            let held: Vec<String> = p.prune.iter().chain(&p.prune_last).map(|c| c.key.to_string()).collect();
            failures.push(format!(
                "{} prune(s) held back because the sync was not clean: {}",
                held.len(),
                held.join(", ")
            ));
        }
        for (obj, why) in &p.skipped {
            if let Some(rs) = st.resources.iter_mut().find(|r| &r.object == obj) {
                rs.reason =
                    if why.starts_with("requires pruning") { why.clone() } else { format!("requires pruning; {why}") };
            }
        }
        let mut problems = failures;
        problems.extend(job.compare_errors.iter().cloned());
        if !problems.is_empty() {
            rec.result = SyncResult::Failed;
            rec.message = problems.join("; ");
            st.conditions.push(Condition { type_: "SyncError".into(), message: rec.message.clone() });
        } else if let Some(w) = waiting {
            tracing::info!(app = %st.app, revision = %rec.revision, "sync running: {w}");
            rec.result = SyncResult::Running;
            rec.message = w.clone();
            st.conditions.push(Condition { type_: "SyncRunning".into(), message: w });
        }
        st.sync = compare::roll_up(st.resources.iter().map(|r| r.sync));
        if !job.compare_errors.is_empty() {
            st.sync = SyncStatus::Unknown;
        }
        st.health = health::roll_up(
            st.resources
                .iter()
                .filter(|r| !r.reason.starts_with("requires pruning") && !job.no_health_check.contains(&r.object))
                .map(|r| &r.health),
        );
        if rec.result == SyncResult::Succeeded {
            st.synced_revision = rec.revision.clone();
        }
        rec.finished_at = status::now();
        rec
    }

    /// Records one successful apply: log, Event, written resourceVersion, status.
    async fn applied(&self, st: &mut AppStatus, rec: &mut SyncRecord, c: &Compared, reason: SyncReason, obj: &Value) {
        rec.applied.push(c.key.to_string());
        if let (Some(rv), Ok(mut m)) =
            (obj.pointer("/metadata/resourceVersion").and_then(Value::as_str), self.written.lock())
        {
            m.insert(c.key.clone(), rv.to_string());
        }
        let git = format!("Git {} \"{}\"", &rec.revision[..rec.revision.len().min(7)], rec.subject);
        let fields = || c.diff.differences.iter().map(compare::Difference::describe).collect::<Vec<_>>().join("; ");
        match (&c.live, reason) {
            (None, _) => tracing::info!(app = %st.app, object = %c.key, "created ({git})"),
            (Some(live), SyncReason::SelfHeal) => {
                let line = format!("reverted {} ({git})", fields());
                tracing::info!(app = %st.app, object = %c.key, "{line}");
                self.cluster.event(live, true, "SelfHealed", "Revert", line).await;
            }
            (Some(live), _) => {
                let line = format!("updated {} ({git})", fields());
                tracing::info!(app = %st.app, object = %c.key, "{line}");
                self.cluster.event(live, false, "Synced", "Apply", line).await;
            }
        }
        if let Some(rs) = st.resources.iter_mut().find(|r| r.object == c.key.to_string()) {
            rs.sync = SyncStatus::Synced;
            rs.reason.clear();
            let h = health::assess(Some(obj));
            rs.health = h.status;
            rs.health_message = h.message;
        }
    }

    /// Deletes `candidates` in order (UID precondition, their propagation policy).
    async fn prune(
        &self,
        st: &mut AppStatus,
        rec: &mut SyncRecord,
        candidates: &[PruneCandidate],
        orphans: &[(PruneCandidate, Kind)],
        failures: &mut Vec<String>,
    ) {
        for cand in candidates {
            let Some((_, kind)) = orphans.iter().find(|(o, _)| o.key == cand.key) else {
                continue;
            };
            let propagation = cand.options.propagation.unwrap_or_default();
            match self.cluster.delete(kind, &cand.key, &cand.uid, propagation).await {
                Ok(()) => {
                    tracing::info!(app = %st.app, object = %cand.key, revision = %rec.revision, ?propagation, "pruned: no longer in Git");
                    rec.pruned.push(cand.key.to_string());
                    st.resources.retain(|r| r.object != cand.key.to_string());
                }
                Err(e) => failures.push(format!("prune {}: {e}", cand.key)),
            }
        }
    }

    /// An object whose kind a CRD of this sync defines: once that CRD is served,
    /// compared again (now with its kind, namespace and tracking-id). Others as they are.
    async fn resolve_deferred(&self, app: &str, job: &SyncJob<'_>, c: &Arc<Compared>) -> Result<Arc<Compared>, String> {
        if !c.awaits_crd {
            return Ok(c.clone());
        }
        let api_version = c.apply.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        self.cluster.wait_kind(api_version, &c.key.kind, CRD_TIMEOUT).await.map_err(|e| e.to_string())?;
        let no_crds = CrdKinds::new();
        let scope = Scope {
            app,
            namespace: job.namespace,
            rules: job.rules,
            crds: &no_crds,
            defaults: job.app_options,
            validate_new: false,
        };
        let fresh = self.compare_one(&scope, c.apply.clone(), c.source.clone()).await;
        match fresh.sync {
            SyncStatus::Unknown => Err(fresh.reason.clone()),
            _ => Ok(fresh),
        }
    }

    /// Writes one object: server-side apply (or a replace with `Replace=true`), after
    /// taking over client-side tools' fields. A change to an immutable field is
    /// refused with the field named and `Force=true` suggested; with `Force=true` the
    /// object is deleted (UID precondition) and created again.
    async fn apply_one(&self, c: &Compared, options: &SyncOptions, may_recreate: bool) -> Result<Value, String> {
        let Some(kind) = &c.kind else { return Err(c.reason.clone()) };
        if let Some(fields) = &c.takeover {
            self.cluster.replace_managed_fields(kind, &c.key, fields).await.map_err(|e| e.to_string())?;
        }
        let write = || async {
            if options.replace {
                self.cluster.replace(kind, &c.key, &c.apply).await
            } else {
                self.cluster.apply_validated(kind, &c.key, &c.apply, false, !options.validate_disabled).await
            }
        };
        let err = match write().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let fields = err.immutable_fields();
        let uid = c.live.as_ref().and_then(|l| l.pointer("/metadata/uid")).and_then(Value::as_str);
        match (fields.is_empty(), options.force, may_recreate, uid) {
            (true, ..) => Err(err.to_string()),
            (false, true, true, Some(uid)) => {
                tracing::warn!(object = %c.key, fields = %fields.join(", "), "Force=true: deleting and re-creating (immutable fields changed)");
                self.cluster
                    .delete(kind, &c.key, uid, plan::Propagation::Foreground)
                    .await
                    .map_err(|e| format!("Force=true: {e}"))?;
                self.cluster.wait_gone(kind, &c.key, uid, CRD_TIMEOUT).await.map_err(|e| format!("Force=true: {e}"))?;
                write().await.map_err(|e| format!("Force=true: re-create: {e}"))
            }
            (false, true, ..) => Err(format!(
                "immutable field(s) {} changed in Git: the object must be deleted and re-created, but it is protected from deletion (Prune=false, Prune=confirm or a data-loss class), so Force=true does not apply; re-create it by hand",
                fields.join(", ")
            )),
            (false, false, ..) => Err(format!(
                "immutable field(s) {} changed in Git: the object must be deleted and re-created; to let plumb do it, annotate it {}: Force=true",
                fields.join(", "),
                tracking::SYNC_OPTIONS_ANNOTATION
            )),
        }
    }

    /// Marks objects that would be created in a namespace neither in the cluster nor
    /// declared in Git (nor created by `CreateNamespace=true`) as errors, so a preview
    /// does not promise what the sync cannot do. A namespace declared in Git makes its
    /// objects "missing" (created after it), never an error.
    async fn check_namespaces(&self, compared: &mut [Arc<Compared>], app_namespace: &str, create: bool) {
        let declared: HashSet<String> = compared
            .iter()
            .filter(|c| c.key.group.is_empty() && c.key.kind == "Namespace")
            .map(|c| c.key.name.clone())
            .collect();
        let mut known: HashMap<String, bool> = HashMap::new();
        for c in compared.iter_mut() {
            let namespaced = c.awaits_crd || c.kind.as_ref().is_some_and(|k| k.namespaced);
            let ns = c.key.namespace.clone();
            if c.live.is_some() || c.sync != SyncStatus::OutOfSync || !namespaced || ns.is_empty() {
                continue;
            }
            if declared.contains(&ns) || (create && ns == app_namespace) {
                continue;
            }
            let exists = match known.get(&ns) {
                Some(e) => *e,
                None => {
                    let e = self.namespace_exists(&ns).await;
                    known.insert(ns.clone(), e);
                    e
                }
            };
            if !exists {
                *c = failed(
                    c,
                    format!("namespace \"{ns}\" not found: it is neither in the cluster nor declared in Git"),
                );
            }
        }
    }

    /// Whether a Namespace exists (true when that cannot be told: the apply will say).
    async fn namespace_exists(&self, name: &str) -> bool {
        match self.cluster.kind("v1", "Namespace").await {
            Ok(kind) => !matches!(self.cluster.get(&kind, &namespace_key(name)).await, Ok(None)),
            Err(_) => true,
        }
    }

    /// Before anything is pruned: objects another application declares (at its own
    /// revision) moved there — they are held for it to adopt, never deleted. When
    /// another application's desired state cannot be read, every candidate is held.
    /// Returns the objects handed over.
    async fn hand_over(&self, name: &str, candidates: &mut [PruneCandidate]) -> Vec<String> {
        if candidates.is_empty() {
            return vec![];
        }
        let mut claims: HashMap<ObjectKey, String> = HashMap::new();
        let mut unreadable = Vec::new();
        for other in self.config.applications.iter().filter(|a| a.name.value != name) {
            let Ok((app, _, repo)) = self.app(&other.name.value) else { continue };
            let who = &app.name.value;
            match self.desired(who, repo, app.revision.value.clone(), app.path.value.clone()).await {
                Desired::Rendered(_, manifests) => {
                    for m in manifests {
                        if let Some(mut k) = ObjectKey::of(&m.object) {
                            if k.namespace.is_empty() {
                                k.namespace = app.namespace.value.clone();
                            }
                            claims.entry(k).or_insert_with(|| who.clone());
                        }
                    }
                }
                Desired::FetchFailed(e) | Desired::RenderFailed(_, e) => unreadable.push(format!("{who}: {e}")),
            }
        }
        let claimed = |k: &ObjectKey| -> Option<String> {
            claims.get(k).cloned().or_else(|| {
                // cluster-scoped: the other application's manifest got its namespace
                k.namespace.is_empty().then_some(())?;
                claims
                    .iter()
                    .find(|(c, _)| c.group == k.group && c.kind == k.kind && c.name == k.name)
                    .map(|(_, a)| a.clone())
            })
        };
        let mut handed = Vec::new();
        for c in candidates.iter_mut() {
            if !unreadable.is_empty() {
                c.held = Some(format!(
                    "prune held back: the desired state of other applications could not be read, so plumb cannot tell whether {} moved there ({})",
                    c.key,
                    unreadable.join("; ")
                ));
            } else if let Some(other) = claimed(&c.key) {
                tracing::info!(app = name, object = %c.key, to = %other, "moved to another application: not pruned");
                handed.push(c.key.to_string());
                c.held =
                    Some(format!("moved to application {other}, which declares it: left for it to adopt, not deleted"));
            }
        }
        handed
    }

    /// `orphanedResources.warn`: objects in the application's namespaces that no
    /// application tracks, as `Kind/namespace/name`, sorted. Looks at the common
    /// namespaced kinds and every kind the application applied.
    async fn orphaned_resources(
        &self,
        env: &Environment,
        namespaces: &BTreeSet<String>,
        kinds: &BTreeSet<(String, String)>,
    ) -> Result<Vec<String>, String> {
        const COMMON: &[(&str, &str)] = &[
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("v1", "Service"),
            ("v1", "ServiceAccount"),
            ("v1", "PersistentVolumeClaim"),
            ("apps/v1", "Deployment"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "DaemonSet"),
            ("batch/v1", "Job"),
            ("batch/v1", "CronJob"),
            ("networking.k8s.io/v1", "Ingress"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ];
        let mut all: BTreeSet<(String, String)> =
            COMMON.iter().map(|(a, k)| ((*a).to_string(), (*k).to_string())).collect();
        all.extend(kinds.iter().cloned());
        let mut out = Vec::new();
        for (api_version, kind_name) in &all {
            let Ok(kind) = self.cluster.kind(api_version, kind_name).await else { continue };
            if !kind.namespaced {
                continue;
            }
            for ns in namespaces {
                for o in self.cluster.list_unlabelled(&kind, ns).await.map_err(|e| e.to_string())? {
                    if plan::orphan_reported(&o, &env.orphaned_resources.ignore)
                        && let Some(k) = ObjectKey::of(&o)
                    {
                        out.push(k.to_string());
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// `CreateNamespace=true`: creates `namespace` when it does not exist; failures are
    /// logged (the applies into it then say what went wrong).
    async fn ensure_namespace(&self, namespace: &str) {
        if self.namespace_exists(namespace).await {
            return;
        }
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        let created = match self.cluster.kind("v1", "Namespace").await {
            Ok(kind) => self.cluster.apply(&kind, &namespace_key(namespace), &ns, false).await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = created {
            tracing::warn!(namespace, "CreateNamespace: {e}");
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn finish_early(
        &self,
        mut st: AppStatus,
        previous: AppStatus,
        mut history: Option<Vec<SyncRecord>>,
        condition: &str,
        message: String,
        started: Instant,
        mode: Mode,
    ) -> Result<PassReport, Error> {
        tracing::warn!(app = %st.app, "{message}");
        st.sync = SyncStatus::Unknown;
        st.health = previous.health;
        st.resources = previous.resources.clone();
        st.conditions.push(Condition { type_: condition.into(), message });
        if st.revision.is_empty() {
            st.revision = previous.revision.clone();
            st.subject = previous.subject.clone();
        }
        if mode.writes() {
            self.save(&st, &previous, history.as_mut(), None).await?;
        }
        self.observe(&st.app.clone(), "error", &st, started);
        Ok(PassReport { status: st, diffs: vec![], sync: None, plan: plan::Plan::default() })
    }

    async fn save(
        &self,
        st: &AppStatus,
        previous: &AppStatus,
        history: Option<&mut Vec<SyncRecord>>,
        record: Option<SyncRecord>,
    ) -> Result<(), Error> {
        let changed = st != previous || record.is_some();
        if changed {
            let mut h = match history {
                Some(h) => std::mem::take(h),
                None => self.store.load(&st.app).await?.1,
            };
            if let Some(r) = record {
                status::push_history(&mut h, r);
            }
            self.store.save(st, &h).await?;
        }
        self.statuses.write().await.insert(st.app.clone(), st.clone());
        Ok(())
    }

    fn observe(&self, app: &str, result: &str, st: &AppStatus, started: Instant) {
        self.metrics.passes.get_or_create(&PassLabels { app: app.into(), result: result.into() }).inc();
        self.metrics
            .pass_seconds
            .get_or_create(&StatusLabels { app: app.into(), status: result.into() })
            .observe(started.elapsed().as_secs_f64());
        self.metrics.set_status(app, st.sync, st.health);
    }

    /// The sync history of `app`, newest first.
    ///
    /// # Errors
    /// [`Error::Status`].
    pub async fn history(&self, app: &str) -> Result<Vec<SyncRecord>, Error> {
        Ok(self.store.load(app).await?.1)
    }
}

/// `c`, compared as failed with `reason` (Unknown: never applied, holds prune back).
fn failed(c: &Compared, reason: String) -> Arc<Compared> {
    let mut u = c.clone();
    u.sync = SyncStatus::Unknown;
    u.diff.reason.clone_from(&reason);
    u.reason = reason;
    Arc::new(u)
}

/// Marks objects declared more than once (after namespaces were defaulted: one
/// manifest with `metadata.namespace`, one without) as failed, naming both sources.
fn declared_twice(compared: &mut [Arc<Compared>]) {
    let mut first: HashMap<ObjectKey, usize> = HashMap::new();
    let mut twice = Vec::new();
    for (i, c) in compared.iter().enumerate() {
        if c.key.kind == "?" {
            continue;
        }
        match first.get(&c.key) {
            Some(&j) => twice.push((j, i)),
            None => {
                first.insert(c.key.clone(), i);
            }
        }
    }
    for (j, i) in twice {
        let why = format!("{} is declared twice: {} and {}", compared[i].key, compared[j].source, compared[i].source);
        compared[j] = failed(&compared[j], why.clone());
        compared[i] = failed(&compared[i], why);
    }
}

/// The outcome of fetching and rendering an application's source.
enum Desired {
    /// The commit and its manifests.
    Rendered(source::Snapshot, Vec<render::Manifest>),
    /// The repository could not be read.
    FetchFailed(String),
    /// The commit was read but does not render.
    RenderFailed(source::Snapshot, String),
}

/// The identity of Namespace `name`.
fn namespace_key(name: &str) -> ObjectKey {
    ObjectKey { group: String::new(), kind: "Namespace".into(), namespace: String::new(), name: name.into() }
}

/// Placeholder identity of a manifest that has none (reported as an error).
fn unknown_key() -> ObjectKey {
    ObjectKey { group: String::new(), kind: "?".into(), namespace: String::new(), name: "?".into() }
}

#[cfg(test)]
mod tests {
    use super::heal_backoff;

    #[test]
    fn self_heal_backoff_is_2s_times_3_capped_at_300s() {
        let secs: Vec<u64> = (1..=8).map(|n| heal_backoff(n).as_secs()).collect();
        assert_eq!(secs, [0, 2, 6, 18, 54, 162, 300, 300]);
    }
}
