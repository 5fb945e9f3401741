//! One reconcile pass of one application — the one place that sequences IO and the pure
//! core, as a short list of stage calls ([`Context::run_pass`]):
//!
//! 1. **source**: resolve the revision, read and render the application's files
//!    ([`crate::source::Pool`]);
//! 2. **compare** each object with its live version ([`compare`](self) here for the IO,
//!    [`crate::compare::object`] for the judgement); list what the application owns that
//!    Git no longer declares (prune candidates, [`inventory`](self));
//! 3. **plan** what a sync would do ([`crate::plan::plan`]), holding back what moved to
//!    another application ([`crate::plan::hand_over`]);
//! 4. **assess** health and status ([`crate::health`], [`crate::status::roll_up`]);
//! 5. **decide** whether to sync ([`crate::plan::decide`]: policy, selfHeal backoff,
//!    refusals recorded once) and **apply** ([`crate::apply`]: waves, CRD waits, prune);
//! 6. **record** status and history in the cluster, Events and metrics.
//!
//! A failed fetch or render stops the pass before anything is compared or written: the
//! application becomes Unknown with the error, and the last synced revision stays
//! recorded as what runs.

mod compare;
mod inventory;
mod memo;

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Instant,
};

use futures::{FutureExt, StreamExt, stream};
use serde_json::Value;
use tokio::sync::RwLock;

use self::{compare::Scope, inventory::Candidates, memo::Memo};
use crate::{
    apply,
    cluster::Cluster,
    compare::{Compared, IgnoreRules, SyncStatus, object},
    config::{Application, Config, Environment, Repository},
    health::{self, Health, HealthStatus},
    metrics::{Metrics, PassLabels, StatusLabels},
    plan::{self, DesiredItem, PruneCandidate, SyncOptions, SyncReason},
    source::{self, Desired},
    status::{self, AppStatus, Condition, ConditionType, Exclusions, ResourceStatus, SyncRecord, SyncResult},
    tracking::{self, ObjectKey},
    watch::LiveCache,
};
pub use crate::{compare::ObjectDiff, plan::Mode};

/// How many objects are compared at once.
const CONCURRENCY: usize = 16;

/// Everything a pass needs, shared by all applications of one process.
pub struct Context {
    /// The cluster.
    pub cluster: Cluster,
    /// Status store.
    pub store: status::Store,
    /// The policy.
    pub config: Arc<Config>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Repository mirrors and renders.
    sources: source::Pool,
    /// The latest status of each application.
    statuses: RwLock<HashMap<String, AppStatus>>,
    /// Watch cache (`plumb serve`); one-shot commands read from the API server.
    live: Option<LiveCache>,
    drift_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    watch_token: tokio_util::sync::CancellationToken,
    memo: Memo,
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

/// What the compare stage found.
struct Found {
    compared: Vec<Arc<Compared>>,
    candidates: Candidates,
    /// `object: error` of every object that could not be compared, and listing errors.
    errors: Vec<String>,
}

impl Context {
    /// A context over `cluster` for `config`, keeping repository mirrors in `cache_dir`.
    pub fn new(cluster: Cluster, config: Arc<Config>, cache_dir: PathBuf, metrics: Arc<Metrics>) -> Self {
        let store = status::Store::new(cluster.client().clone(), &config.settings.status_namespace);
        Self {
            cluster,
            store,
            config,
            metrics,
            sources: source::Pool::new(cache_dir),
            statuses: RwLock::default(),
            live: None,
            drift_rx: Mutex::default(),
            watch_token: tokio_util::sync::CancellationToken::new(),
            memo: Memo::default(),
        }
    }

    /// Reads live objects from watches (see [`crate::watch`]) instead of per-pass GETs
    /// and LISTs, and reports the applications whose objects drift (see
    /// [`Context::take_drift_receiver`]). Used by `plumb serve`; one-shot commands
    /// don't need it.
    #[must_use]
    pub fn with_watches(mut self) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.live = Some(LiveCache::new(self.cluster.client().clone(), tx, self.watch_token.clone()));
        self.drift_rx = Mutex::new(Some(rx));
        self
    }

    /// The names of applications whose objects drifted, from the watches of
    /// [`Context::with_watches`] (taken once, by whoever triggers passes).
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

    /// The sync history of `app`, newest first.
    ///
    /// # Errors
    /// [`Error::Status`].
    pub async fn history(&self, app: &str) -> Result<Vec<SyncRecord>, Error> {
        Ok(self.store.load(app).await?.1)
    }

    fn app(&self, name: &str) -> Result<(&Application, &Environment, &Repository), Error> {
        let c = &self.config;
        let unknown = || Error::UnknownApp(name.into());
        let app = c.applications.iter().find(|a| a.name.value == name).ok_or_else(unknown)?;
        let env = c.environments.iter().find(|e| e.name.value == app.environment.value).ok_or_else(unknown)?;
        let repo = c.repositories.iter().find(|r| r.name.value == app.repository.value).ok_or_else(unknown)?;
        Ok((app, env, repo))
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
        let (previous, history) = match self.statuses.read().await.get(name) {
            Some(s) => (s.clone(), None),
            None => self.store.load(name).await.map(|(s, h)| (s, Some(h)))?,
        };
        let mut st = AppStatus {
            app: name.into(),
            environment: env.name.value.clone(),
            synced_revision: previous.synced_revision.clone(),
            kinds: previous.kinds.clone(),
            last_sync: previous.last_sync.clone(),
            ..AppStatus::default()
        };

        // 1. source and render
        let wanted = revision.unwrap_or(&app.revision.value);
        let (snapshot, manifests) = match self.sources.desired(name, repo, wanted, &app.path.value).await {
            Desired::Rendered(snapshot, manifests) => (snapshot, manifests),
            Desired::FetchFailed(e) => {
                let message = format!("fetch {}: {e}", repo.url.value);
                return self.finish_early(st, previous, history, message, started, mode).await;
            }
            Desired::RenderFailed(snapshot, e) => {
                (st.revision, st.subject) = (snapshot.revision.clone(), snapshot.subject.clone());
                let message = format!("render {}: {e}", short(&snapshot.revision));
                return self.finish_early(st, previous, history, message, started, mode).await;
            }
        };
        (st.revision, st.subject) = (snapshot.revision.clone(), snapshot.subject.clone());

        // 2. compare, and what the application owns that Git no longer declares
        let rules = IgnoreRules::new(env.ignore_differences.iter().chain(&app.ignore_differences));
        let app_options = SyncOptions::parse(env.sync_policy.sync_options.iter().map(String::as_str));
        let crds = object::crd_kinds(manifests.iter().map(|m| &m.object));
        let scope = Scope {
            app: name,
            namespace: &app.namespace.value,
            rules: &rules,
            crds: &crds,
            defaults: &app_options,
            validate_new: !mode.writes(),
        };
        let mut kinds: BTreeSet<(String, String)> = st.kinds.iter().cloned().collect();
        let mut found = self.compare_all(&scope, manifests, &mut kinds).await;

        // 3. what a sync would do (also shown by previews and the status)
        let (prune, approved) = mode.prune(env.sync_policy.prune);
        let items = self.desired_items(name, &found.compared, &app_options);
        let mut candidates: Vec<PruneCandidate> = found.candidates.orphans.iter().map(|(o, _)| o.clone()).collect();
        if prune {
            found.candidates.extraneous.extend(self.hand_over(name, &mut candidates).await);
        }
        let guards = plan::Guards {
            app: name,
            prune,
            allow_empty: env.sync_policy.allow_empty,
            manual: mode.manual(),
            approved,
            protect_data_loss: env.sync_policy.protect_data_loss,
            max_prune_percent: env.sync_policy.max_prune_percent,
        };
        let the_plan = plan::plan(&items, &candidates, guards);

        // 4. status and health
        let excluded = self.assess(&mut st, app, env, &found, &the_plan, &kinds).await;
        let diffs = diffs(&found, &st);

        // 5. sync
        let drifted = drifted(&found.compared);
        let heal = self.memo.heal(name);
        let decision = plan::decide(&plan::GateInput {
            app: name,
            mode,
            policy: &env.sync_policy,
            revision: &st.revision,
            synced_revision: &previous.synced_revision,
            out_of_sync: st.sync != SyncStatus::Synced,
            plan: &the_plan,
            compare_errors: &found.errors,
            last_sync: previous.last_sync.as_ref(),
            shared: st.conditions.iter().any(|c| c.type_ == ConditionType::SharedResourceWarning),
            fail_on_shared: app_options.fail_on_shared,
            drifted: &drifted,
            heal: heal.as_ref(),
            now: Instant::now(),
        });
        st.conditions.extend(decision.conditions);
        if decision.settled {
            st.synced_revision = st.revision.clone();
        }
        let mut heal = decision.heal;
        let mut record = None;
        if let Some(reason) = decision.reason {
            if app_options.create_namespace {
                self.ensure_namespace(&app.namespace.value).await;
            }
            let rec = self.sync(&mut st, &snapshot, reason, &the_plan, &found, &scope, &excluded, started_at).await;
            if let (SyncReason::SelfHeal, Some(h)) = (reason, heal.as_mut()) {
                h.failed = rec.result != SyncResult::Succeeded;
            }
            record = Some(status::continue_sync(previous.last_sync.as_ref(), rec));
        } else if decision.settled && mode.writes() {
            record = finished_running(previous.last_sync.as_ref(), &st.revision);
        }
        self.memo.set_heal(name, heal);
        st.kinds = kinds.into_iter().collect();
        if let Some(r) = &record {
            st.last_sync = Some(r.clone());
        }

        // 6. record
        self.record(&st, &previous, history, record.clone(), mode, started).await?;
        Ok(PassReport { status: st, diffs, sync: record, plan: the_plan })
    }

    /// Compares every manifest (16 at once), fails objects declared twice or going into
    /// a namespace that will not exist, then lists the prune candidates of every kind
    /// the application ever applied (`kinds`, extended with this render's).
    async fn compare_all(
        &self,
        scope: &Scope<'_>,
        manifests: Vec<crate::render::Manifest>,
        kinds: &mut BTreeSet<(String, String)>,
    ) -> Found {
        let jobs: Vec<_> = manifests.into_iter().map(|m| self.compare_one(scope, m.object, m.source).boxed()).collect();
        let mut compared: Vec<Arc<Compared>> = stream::iter(jobs).buffered(CONCURRENCY).collect().await;
        object::declared_twice(&mut compared);
        let create = scope.defaults.create_namespace;
        self.check_namespaces(&mut compared, scope.namespace, create).await;
        let mut errors: Vec<String> = compared
            .iter()
            .filter(|c| c.sync() == SyncStatus::Unknown)
            .map(|c| format!("{}: {}", c.key, c.reason))
            .collect();
        kinds.extend(applied_kinds(&compared));
        let desired: HashSet<ObjectKey> = compared.iter().map(|c| c.key.clone()).collect();
        let mut candidates = self.prune_candidates(scope.app, &desired, kinds, scope.defaults).await;
        errors.append(&mut candidates.errors);
        Found { compared, candidates, errors }
    }

    /// The plan's view of each compared object.
    fn desired_items(&self, app: &str, compared: &[Arc<Compared>], defaults: &SyncOptions) -> Vec<DesiredItem> {
        let installation = self.config.settings.installation_id.as_deref();
        compared
            .iter()
            .map(|c| DesiredItem {
                key: c.key.clone(),
                out_of_sync: c.sync() != SyncStatus::Synced,
                tracked: c.live.as_ref().is_some_and(|l| tracking::is_owned_by(l, app, installation)),
                error: c.sync() == SyncStatus::Unknown,
                immutable: c.immutable(),
                wave: c.wave,
                options: defaults.with_object(&c.options),
            })
            .collect()
    }

    /// Health of every object and the application's status: resources, roll-up,
    /// conditions (shared objects, comparison errors, stalls, orphaned resources).
    /// Returns what the roll-up leaves out, for the roll-up after a sync.
    async fn assess(
        &self,
        st: &mut AppStatus,
        app: &Application,
        env: &Environment,
        found: &Found,
        the_plan: &plan::Plan,
        kinds: &BTreeSet<(String, String)>,
    ) -> Exclusions {
        let settings = health::HealthSettings::from_policy(&env.health);
        let overrides = health::overrides_for(app, env);
        let now = jiff::Timestamp::now();
        let mut excluded = Exclusions { extraneous: found.candidates.extraneous.clone(), ..Exclusions::default() };
        for c in &found.compared {
            if c.live.as_ref().is_some_and(health::ignores_health_check) {
                excluded.no_health_check.insert(c.key.to_string());
            }
            let (pods, replica_sets) = self.children(c).await;
            let (pod_refs, rs_refs): (Vec<&Value>, Vec<&Value>) =
                (pods.iter().collect(), replica_sets.iter().collect());
            let h = match c.sync() {
                SyncStatus::Unknown => Health { status: HealthStatus::Unknown, message: String::new() },
                _ => health::assess_with(
                    &health::HealthInput::new(c.live.as_ref(), now, &settings)
                        .children(&pod_refs, &rs_refs)
                        .overrides(&overrides),
                ),
            };
            st.resources.push(ResourceStatus {
                object: c.key.to_string(),
                sync: c.sync(),
                reason: c.reason.to_string(),
                health: h.status,
                health_message: h.message,
            });
        }
        let reasons = plan::prune_reasons(the_plan);
        for (o, _) in &found.candidates.orphans {
            let object = o.key.to_string();
            st.resources.push(ResourceStatus {
                reason: reasons.get(&object).cloned().unwrap_or_else(|| "requires pruning".into()),
                sync: SyncStatus::OutOfSync,
                health: HealthStatus::Healthy,
                health_message: String::new(),
                object: object.clone(),
            });
            excluded.prune_candidates.insert(object);
        }
        for c in &found.compared {
            if let Some(other) = c.live.as_ref().and_then(tracking::tracked_app).filter(|a| *a != st.app) {
                st.conditions.push(Condition::new(
                    ConditionType::SharedResourceWarning,
                    format!("{} is also tracked by application {other}; both declare it", c.key),
                ));
            }
        }
        if !found.errors.is_empty() {
            st.conditions.push(Condition::new(ConditionType::ComparisonError, found.errors.join("; ")));
        }
        (st.sync, st.health) = status::roll_up(&st.resources, &excluded, !found.errors.is_empty());
        // Objects Progressing for too long: a warning, health stays Progressing.
        self.memo.progressing(&st.app, |previous| {
            let statuses = found.compared.iter().zip(&st.resources).map(|(c, r)| (&c.key, r.health));
            let since = health::track_progressing(previous, statuses, now);
            if let Some(stall) = health::stalled(&since, now, settings.stall_after) {
                st.conditions.push(Condition::new(ConditionType::HealthStalled, stall.message));
            }
            since
        });
        if st.sync == SyncStatus::Synced {
            st.synced_revision = st.revision.clone();
        }
        if env.orphaned_resources.warn {
            self.warn_orphaned(st, env, &found.compared, &app.namespace.value, kinds).await;
        }
        excluded
    }

    /// `orphanedResources.warn`: the condition and `status.orphaned`.
    async fn warn_orphaned(
        &self,
        st: &mut AppStatus,
        env: &Environment,
        compared: &[Arc<Compared>],
        namespace: &str,
        kinds: &BTreeSet<(String, String)>,
    ) {
        let mut namespaces: BTreeSet<String> =
            compared.iter().map(|c| c.key.namespace.clone()).filter(|n| !n.is_empty()).collect();
        namespaces.insert(namespace.to_string());
        match self.orphaned_resources(env, &namespaces, kinds).await {
            Ok(found) if !found.is_empty() => {
                let shown: Vec<&str> = found.iter().take(10).map(String::as_str).collect();
                let more = found.len().saturating_sub(shown.len());
                st.conditions.push(Condition::new(
                    ConditionType::OrphanedResourceWarning,
                    format!(
                        "{} object(s) in the application's namespaces are tracked by no application (never deleted): {}{}",
                        found.len(),
                        shown.join(", "),
                        if more > 0 { format!(" and {more} more") } else { String::new() }
                    ),
                ));
                st.orphaned = found;
            }
            Ok(_) => {}
            Err(e) => st.conditions.push(Condition::new(
                ConditionType::OrphanedResourceWarning,
                format!("orphaned resources could not be listed: {e}"),
            )),
        }
    }

    /// Runs a planned sync ([`crate::apply::run`]) and records its outcome in `st`:
    /// applied objects Synced, pruned ones gone, the result ([`plan::result`]) with its
    /// condition, the roll-up again.
    #[allow(clippy::too_many_arguments)]
    async fn sync(
        &self,
        st: &mut AppStatus,
        snapshot: &source::Snapshot,
        reason: SyncReason,
        p: &plan::Plan,
        found: &Found,
        scope: &Scope<'_>,
        excluded: &Exclusions,
        started_at: String,
    ) -> SyncRecord {
        let mut rec = SyncRecord {
            revision: snapshot.revision.clone(),
            subject: snapshot.subject.clone(),
            started_at,
            finished_at: String::new(),
            reason: format!("{reason:?}"),
            result: SyncResult::Succeeded,
            message: String::new(),
            applied: vec![],
            pruned: vec![],
        };
        if let Some(refusal) = &p.refused {
            (rec.result, rec.message, rec.finished_at) = (SyncResult::Refused, refusal.clone(), status::now());
            st.conditions.push(Condition::new(ConditionType::SyncError, refusal.clone()));
            tracing::warn!(app = %st.app, revision = %rec.revision, "{refusal}");
            return rec;
        }
        let compared = &found.compared;
        let app = st.app.clone();
        let health =
            compared
                .iter()
                .zip(&st.resources)
                .map(|(c, r)| {
                    if excluded.no_health_check.contains(&c.key.to_string()) { HealthStatus::Healthy } else { r.health }
                })
                .collect();
        let job = apply::Job {
            app: &app,
            revision: &snapshot.revision,
            subject: &snapshot.subject,
            reason,
            plan: p,
            compared,
            orphans: &found.candidates.orphans,
            compared_cleanly: found.errors.is_empty(),
            app_options: scope.defaults,
            no_health_check: &excluded.no_health_check,
            health,
        };
        let recompare = |c: Arc<Compared>| self.recompare(scope, c).boxed();
        let outcome = apply::run(&self.cluster, &job, &recompare, &|k, rv| self.memo.wrote(k, rv)).await;
        for (idx, obj) in &outcome.applied {
            let key = compared[*idx].key.to_string();
            if let Some(rs) = st.resources.iter_mut().find(|r| r.object == key) {
                let h = health::assess(Some(obj));
                (rs.sync, rs.health, rs.health_message) = (SyncStatus::Synced, h.status, h.message);
                rs.reason.clear();
            }
            rec.applied.push(key);
        }
        rec.applied.sort();
        for key in outcome.pruned.iter().map(ToString::to_string) {
            st.resources.retain(|r| r.object != key);
            rec.pruned.push(key);
        }
        let mut problems: Vec<String> = outcome.failures.iter().map(ToString::to_string).collect();
        problems.extend(plan::held_prunes(p).filter(|_| outcome.prunes_held));
        problems.extend(found.errors.iter().cloned());
        (rec.result, rec.message) = plan::result(&problems, outcome.waiting.as_deref());
        match rec.result {
            SyncResult::Failed => st.conditions.push(Condition::new(ConditionType::SyncError, rec.message.clone())),
            SyncResult::Running => {
                tracing::info!(app = %st.app, revision = %rec.revision, "sync running: {}", rec.message);
                st.conditions.push(Condition::new(ConditionType::SyncRunning, rec.message.clone()));
            }
            SyncResult::Succeeded => st.synced_revision = rec.revision.clone(),
            SyncResult::Refused => {}
        }
        (st.sync, st.health) = status::roll_up(&st.resources, excluded, !found.errors.is_empty());
        rec.finished_at = status::now();
        rec
    }

    /// An object whose kind a CRD of this sync defines: once that CRD is served,
    /// compared again (now with its kind, namespace and tracking-id).
    async fn recompare(&self, scope: &Scope<'_>, c: Arc<Compared>) -> Result<Arc<Compared>, String> {
        let api_version = c.apply.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        self.cluster.wait_kind(api_version, &c.key.kind, apply::CRD_TIMEOUT).await.map_err(|e| e.to_string())?;
        let no_crds = object::CrdKinds::new();
        let scope = Scope { crds: &no_crds, validate_new: false, ..*scope };
        let fresh = self.compare_one(&scope, c.apply.clone(), c.source.clone()).await;
        match fresh.sync() {
            SyncStatus::Unknown => Err(fresh.reason.to_string()),
            _ => Ok(fresh),
        }
    }

    /// The end of a pass that could not read its source: Unknown with the error; the
    /// last objects' status and health stay as they were.
    async fn finish_early(
        &self,
        mut st: AppStatus,
        previous: AppStatus,
        history: Option<Vec<SyncRecord>>,
        message: String,
        started: Instant,
        mode: Mode,
    ) -> Result<PassReport, Error> {
        tracing::warn!(app = %st.app, "{message}");
        (st.sync, st.health, st.resources) = (SyncStatus::Unknown, previous.health, previous.resources.clone());
        st.conditions.push(Condition::new(ConditionType::ComparisonError, message));
        if st.revision.is_empty() {
            (st.revision, st.subject) = (previous.revision.clone(), previous.subject.clone());
        }
        self.record(&st, &previous, history, None, mode, started).await?;
        Ok(PassReport { status: st, diffs: vec![], sync: None, plan: plan::Plan::default() })
    }

    /// Records a pass: a `HealthChanged` Event when health changed, status and history
    /// saved when they changed (writing modes only), pass metrics.
    async fn record(
        &self,
        st: &AppStatus,
        previous: &AppStatus,
        history: Option<Vec<SyncRecord>>,
        record: Option<SyncRecord>,
        mode: Mode,
        started: Instant,
    ) -> Result<(), Error> {
        let result = match (&record, st.sync) {
            (Some(r), _) if r.result == SyncResult::Succeeded => "applied",
            (Some(r), _) if r.result == SyncResult::Refused => "refused",
            (Some(r), _) if r.result == SyncResult::Running => "running",
            (Some(_), _) => "failed",
            (None, SyncStatus::Unknown) => "error",
            (None, _) => "compared",
        };
        if mode.writes() {
            if previous.health != st.health && !previous.app.is_empty() {
                self.health_changed(st, previous).await;
            }
            self.save(st, previous, history, record).await?;
        }
        self.metrics.passes.get_or_create(&PassLabels { app: st.app.clone(), result: result.into() }).inc();
        self.metrics
            .pass_seconds
            .get_or_create(&StatusLabels { app: st.app.clone(), status: result.into() })
            .observe(started.elapsed().as_secs_f64());
        self.metrics.set_status(&st.app, st.sync, st.health);
        Ok(())
    }

    /// A `HealthChanged` Event on the status ConfigMap, naming Degraded objects.
    async fn health_changed(&self, st: &AppStatus, previous: &AppStatus) {
        let degraded = st
            .resources
            .iter()
            .filter(|r| r.health == HealthStatus::Degraded)
            .map(|r| format!("{}: {}", r.object, r.health_message));
        let note = std::iter::once(format!("health {} → {} at {}", previous.health, st.health, short(&st.revision)))
            .chain(degraded)
            .collect::<Vec<_>>()
            .join("; ");
        tracing::info!(app = %st.app, "{note}");
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": status::configmap_name(&st.app), "namespace": self.config.settings.status_namespace}});
        self.cluster.event(&cm, st.health == HealthStatus::Degraded, "HealthChanged", "Assess", note).await;
    }

    async fn save(
        &self,
        st: &AppStatus,
        previous: &AppStatus,
        history: Option<Vec<SyncRecord>>,
        record: Option<SyncRecord>,
    ) -> Result<(), Error> {
        if st != previous || record.is_some() {
            let mut h = match history {
                Some(h) => h,
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
}

/// A Running sync with nothing left to do (its last objects got there some other way)
/// is over: its entry says so instead of staying Running.
fn finished_running(last: Option<&SyncRecord>, revision: &str) -> Option<SyncRecord> {
    let prev = last.filter(|l| l.result == SyncResult::Running && l.revision == revision)?;
    let mut done = prev.clone();
    (done.result, done.message, done.finished_at) =
        (SyncResult::Succeeded, "finished: nothing left to do".into(), status::now());
    Some(done)
}

/// `(apiVersion, kind)` of every compared object of a served kind (or awaiting its CRD):
/// remembered so that the last object of a kind is still pruned.
fn applied_kinds(compared: &[Arc<Compared>]) -> impl Iterator<Item = (String, String)> + '_ {
    compared.iter().filter(|c| c.kind.is_some() || c.awaits_crd()).filter_map(|c| {
        let av = c.apply.get("apiVersion").and_then(Value::as_str)?;
        Some((av.to_string(), c.key.kind.clone()))
    })
}

/// The OutOfSync objects and their differences, as the selfHeal gate sees them.
fn drifted(compared: &[Arc<Compared>]) -> Vec<plan::Drifted<'_>> {
    compared
        .iter()
        .filter(|c| c.sync() == SyncStatus::OutOfSync)
        .map(|c| plan::Drifted {
            key: &c.key,
            fields: c
                .diff
                .differences
                .iter()
                .map(|d| {
                    let desired = d.desired.as_ref().map(ToString::to_string);
                    (d.path.as_str(), desired, d.manager.as_ref().map(|m| m.manager.as_str()))
                })
                .collect(),
        })
        .collect()
}

/// Per-object comparisons for `plumb diff`: the desired objects, then the prune
/// candidates with the reason the status gives them.
fn diffs(found: &Found, st: &AppStatus) -> Vec<ObjectDiff> {
    let mut diffs: Vec<ObjectDiff> = found.compared.iter().map(|c| c.diff.clone()).collect();
    let n = found.compared.len();
    diffs.extend(st.resources[n..].iter().map(|r| ObjectDiff {
        object: r.object.clone(),
        desired: Value::Null,
        live: None,
        differences: vec![],
        reason: r.reason.clone(),
        verdict: None,
    }));
    diffs
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(result: SyncResult, revision: &str) -> SyncRecord {
        SyncRecord {
            revision: revision.into(),
            subject: String::new(),
            started_at: "t0".into(),
            finished_at: String::new(),
            reason: "NewRevision".into(),
            result,
            message: "wave 1 waits".into(),
            applied: vec!["a".into()],
            pruned: vec![],
        }
    }

    #[test]
    fn only_a_running_sync_at_the_same_revision_is_finished() {
        let done = finished_running(Some(&record(SyncResult::Running, "abc")), "abc").expect("finished");
        assert_eq!(
            (done.result, done.message.as_str(), done.started_at.as_str()),
            (SyncResult::Succeeded, "finished: nothing left to do", "t0")
        );
        assert_eq!(done.applied, ["a"]);
        assert!(finished_running(Some(&record(SyncResult::Running, "abc")), "def").is_none());
        assert!(finished_running(Some(&record(SyncResult::Succeeded, "abc")), "abc").is_none());
        assert!(finished_running(None, "abc").is_none());
    }
}
