//! One reconcile pass of one application — the one place that sequences IO and the pure
//! core, as a short list of stage calls ([`Context::pass`]). Each stage returns what it
//! found; its IO is in its own file, behind a view of the context ([`Io`]; the record
//! stage's [`Recorder`]) that holds no other pass's state:
//!
//! 0. **requests** on the application's resource: sync, pause, pin (`requests.rs` →
//!    `Requested`);
//! 1. **source**: resolve the revision, read and render the application's files
//!    ([`crate::source::Pool`] → `Sourced`, or a [`PassFailure`]), and what comparing
//!    needs of the application (`Prepared`: rules, options, boundary, writer);
//! 2. **compare** each object with its live version (`compare.rs` reads and dry-runs,
//!    [`crate::compare::object`] judges); list what the application owns that Git no
//!    longer declares (`inventory.rs`) → `CompareStage`;
//! 3. **plan** what a sync would do ([`crate::plan::plan`]), holding back what moved to
//!    another application ([`crate::plan::hand_over`]);
//! 4. **observe** health and the rest the status reads (`observe.rs` → `Observed`), and
//!    **assess**: the status, built by the pure assessor (`assess.rs`) from the values
//!    above, and the gate ([`crate::plan::decide`]: policy, selfHeal backoff, refusals
//!    recorded once);
//! 5. **sync** (`sync.rs`; [`crate::apply`]: waves, CRD waits, prune), its outcome in
//!    the status through the assessor;
//! 6. **record** status and history in the cluster, the Events and metrics of the
//!    pass's end (`record.rs`).
//!
//! Where things are added, one place each: a status field is set in `assess.rs` (the
//! only writer of status fields besides the record stage); a sync option is a row of
//! [`crate::config::SYNC_OPTIONS`]; a render tool is a file of `render/` and an arm of
//! [`crate::render::tools`]; an Event is a variant of [`crate::status::EventReason`].
//!
//! What one application carries from pass to pass is its [`AppState`], owned by
//! whoever runs its passes (the scheduler's actor under `plumb serve`); what the
//! process remembers of objects for every application (dry-runs, comparisons, its own
//! writes, health verdicts) is in `memo.rs`. The pass reads the clock once (`Clock`). A
//! failed fetch or render stops the pass before anything is compared or written: the
//! application becomes Unknown with the error, and the last synced revision stays
//! recorded as what runs.

mod assess;
mod compare;
mod hooks;
mod inventory;
mod memo;
mod observe;
mod record;
mod requests;
pub use requests::SELF_PAUSE_REFUSED;
mod reuse;
mod seal;
mod state;
mod sync;
mod verify;

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{FutureExt, StreamExt, future, stream};
use serde_json::Value;

pub use self::state::AppState;
use self::{compare::Scope, inventory::Candidates, memo::Memo};
use crate::{
    cluster::{Cluster, Kind},
    compare::{Compared, IgnoreRules, ObjectReason, SyncStatus, object},
    config::{Application, Config, Environment, Repository},
    metrics::Metrics,
    plan::{self, DesiredItem, PruneCandidate, SyncOptions},
    source::{self, Desired},
    status::{self, AppStatus, EventReason, SyncRecord, SyncResult, short},
    tracking::{ObjectKey, group_of},
    watch::LiveCache,
};
pub use crate::{compare::ObjectDiff, plan::Mode};

/// What `env`'s sync windows say for application `app` at `now`
/// ([`plan::windows::verdict`]); windows that do not compile (the policy was validated,
/// so none) count as absent.
fn windows_verdict(env: &Environment, app: &str, now: jiff::Timestamp) -> plan::windows::Verdict {
    match plan::windows::compile(&env.sync_windows) {
        Ok(ws) => plan::windows::verdict(&ws, app, now),
        Err(_) => plan::windows::Verdict::default(),
    }
}

/// How many objects are compared at once.
const CONCURRENCY: usize = 16;

/// The longest a pass waits for a kind's watch to deliver its first list: 10 s (then it
/// reads objects one by one).
const WATCH_READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How many desired objects the passes running at once may hold: a pass holds a few
/// copies of each of its objects (manifest, live object, both compared sides) until it
/// ends, so the process's peak memory follows this bound, not the number of passes that
/// start together. A pass of more objects than this runs alone.
pub const PASS_OBJECTS_AT_ONCE: u32 = 1_000;

/// The permits of [`PASS_OBJECTS_AT_ONCE`] a pass of `objects` objects takes.
fn objects_weight(objects: usize) -> u32 {
    u32::try_from(objects).unwrap_or(u32::MAX).clamp(1, PASS_OBJECTS_AT_ONCE)
}

/// Everything a pass needs, shared by all applications of one process.
pub struct Context {
    /// The cluster.
    pub cluster: Cluster,
    /// Status store.
    pub store: status::store::Store,
    /// The policy.
    pub config: Arc<Config>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Repository mirrors and renders.
    sources: source::Pool,
    /// How long the capabilities given to the render tools serve ([`Context::source_stage`]).
    capabilities_max_age: Duration,
    /// The latest status and timings of each application, as its passes recorded them.
    published: status::Published,
    /// The state of each application whose passes run through [`Context::run_pass`]
    /// (callers with no actor of their own).
    states: Mutex<HashMap<String, AppState>>,
    /// Requests on the applications' resources ([`Context::controls`]).
    controls: status::store::SharedControls,
    /// Why the policy file on disk is not in force, while it is rejected.
    policy_rejected: crate::reload::Rejected,
    /// Watch cache (`plumb serve`); one-shot commands read from the API server.
    live: Option<LiveCache>,
    drift_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<crate::watch::Changed>>>,
    watch_token: tokio_util::sync::CancellationToken,
    memo: Memo,
    /// Trusted keys and signature verdicts (`verifyCommits`), by application.
    verdicts: verify::Verdicts,
    /// Clusters impersonating an application's ServiceAccount, by user name.
    writers: tokio::sync::Mutex<HashMap<String, Arc<Cluster>>>,
    /// Whether passes save status and history (false: `plumb sync --local` while a
    /// server serves the namespace, which keeps its own record).
    records: bool,
    /// One permit per desired object a running pass holds ([`PASS_OBJECTS_AT_ONCE`]).
    pass_objects: tokio::sync::Semaphore,
    /// Passes that took the comparisons of the pass before ([`Context::comparisons_reused`]).
    reused: std::sync::atomic::AtomicU64,
    /// The installation's key sensitive values are marked with ([`Context::with_mask_key`]).
    mask_key: crate::compare::sensitive::MaskKey,
}

impl Drop for Context {
    fn drop(&mut self) {
        self.watch_token.cancel();
    }
}

/// What the stages of a pass may use of the context (their IO is in the stage files):
/// the cluster, the watch cache, what the process remembers of objects, the
/// repositories, the policy and the status store. Not the bookkeeping of other passes
/// (published statuses, metrics, permits, impersonating clients, per-application
/// states); the record stage has its own view ([`Recorder`]).
#[derive(Clone, Copy)]
struct Io<'a> {
    cluster: &'a Cluster,
    live: Option<&'a LiveCache>,
    memo: &'a Memo,
    sources: &'a source::Pool,
    config: &'a Config,
    store: &'a status::store::Store,
    /// The requests on each application's resource, once a watch keeps them.
    controls: &'a status::store::SharedControls,
}

impl<'a> Io<'a> {
    /// Application `name`, its environment and repository.
    ///
    /// # Errors
    /// [`Error::UnknownApp`].
    fn app(self, name: &str) -> Result<(&'a Application, &'a Environment, &'a Repository), Error> {
        let c = self.config;
        let unknown = || Error::UnknownApp(name.into());
        let app = c.applications.iter().find(|a| a.name.value == name).ok_or_else(unknown)?;
        let env = c.environments.iter().find(|e| e.name.value == app.environment.value).ok_or_else(unknown)?;
        let repo = c.repositories.iter().find(|r| r.name.value == app.repository.value).ok_or_else(unknown)?;
        Ok((app, env, repo))
    }

    /// The requests on application `name`'s resource: from the watch that keeps them
    /// when it runs (no request), else read.
    ///
    /// # Errors
    /// [`Error::Status`] when read and the read fails.
    async fn controls_of(self, name: &str) -> Result<status::store::Controls, Error> {
        let watched = self.controls.read().ok().and_then(|m| m.as_ref().map(|m| m.get(name).cloned()));
        match watched {
            Some(c) => Ok(c.unwrap_or_default()),
            None => Ok(self.store.controls(name).await?),
        }
    }

    /// An Event on application `app`'s resource.
    async fn event(self, app: &str, warning: bool, reason: EventReason, note: String) {
        let object = self.store.event_object(app);
        self.cluster.event(&object, warning, reason, note).await;
    }
}

/// What the record stage uses: where statuses, history, Events and metrics go.
struct Recorder<'a> {
    cluster: &'a Cluster,
    config: &'a Config,
    store: &'a status::store::Store,
    published: &'a status::Published,
    metrics: &'a Metrics,
    /// Whether the pass saves status and history ([`Context::without_records`]).
    records: bool,
}

/// Why a pass could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No application of that name in the policy.
    #[error("no application `{0}` in the policy")]
    UnknownApp(String),
    /// The status store failed.
    #[error(transparent)]
    Status(#[from] status::store::Error),
}

/// Why a pass stopped before it compared anything: the application is Unknown with
/// this text as its `ComparisonError` condition, and what runs stays as recorded.
#[derive(Debug, thiserror::Error)]
pub enum PassFailure {
    /// The repository could not be read.
    #[error("fetch {url}: {error}")]
    Fetch {
        /// The repository's URL, credentials redacted.
        url: String,
        /// Why.
        error: source::FetchError,
    },
    /// The commit was read but does not render.
    #[error("render {}: {error}", short(revision))]
    Render {
        /// The commit.
        revision: String,
        /// Its subject.
        subject: String,
        /// Why.
        error: crate::render::Error,
    },
    /// The application's boundaries do not compile (the policy's validation reports
    /// it first).
    #[error("boundaries of application {app}: {error}")]
    Boundary {
        /// The application.
        app: String,
        /// The glob that does not compile, named.
        error: String,
    },
    /// The client impersonating the application's ServiceAccount cannot be built.
    #[error("impersonate {user}: {error:#}")]
    Impersonation {
        /// The user impersonated (`system:serviceaccount:…`).
        user: String,
        /// Why.
        error: anyhow::Error,
    },
    /// `verifyCommits` could not judge the revision (key files, fetch).
    #[error("verify: {0}")]
    Verify(#[from] verify::VerifyFailure),
    /// The revision is not signed by a trusted key and nothing was synced before: there
    /// is nothing trusted to compare (the `UnverifiedRevision` condition says why).
    #[error("{0}")]
    Unverified(String),
}

impl PassFailure {
    /// `fetch`, `render`, `boundary`, `impersonation` or `verify`: the stage that failed (the
    /// pass's log line carries it as `stage`).
    pub fn stage(&self) -> &'static str {
        match self {
            PassFailure::Fetch { .. } => "fetch",
            PassFailure::Render { .. } => "render",
            PassFailure::Boundary { .. } => "boundary",
            PassFailure::Impersonation { .. } => "impersonation",
            PassFailure::Verify(_) | PassFailure::Unverified(_) => "verify",
        }
    }
}

/// The outcome of one pass.
#[derive(Debug, Clone)]
pub struct PassReport {
    /// The application's status after the pass.
    pub status: AppStatus,
    /// The sync made in this pass, if any.
    pub sync: Option<SyncRecord>,
    /// What a sync of this pass does (or would do): waves, prunes, skips, refusal. Its
    /// indexes point into [`PassReport::diffs`].
    pub plan: plan::Plan,
    /// The desired objects as compared (before any sync of this pass).
    compared: Vec<Arc<Compared>>,
    /// The prune candidates, as [`PassReport::diffs`] ends with them.
    candidates: Vec<ObjectDiff>,
}

impl PassReport {
    /// Per-object comparisons (before any sync of this pass): the desired objects in
    /// render order, then the prune candidates with the reason the status gives them.
    /// Built when asked (`plumb diff`, `plumb sync --local`), not by every pass: each
    /// holds a copy of both compared sides.
    pub fn diffs(&self) -> Vec<ObjectDiff> {
        self.compared.iter().map(|c| c.diff()).chain(self.candidates.iter().cloned()).collect()
    }
}

/// The kinds the CustomResourceDefinitions among `manifests` define (only those are
/// parsed).
fn crd_kinds(manifests: &[crate::render::Manifest]) -> object::CrdKinds {
    let crds: Vec<Value> =
        manifests.iter().filter(|m| m.kind() == "CustomResourceDefinition").map(|m| m.object()).collect();
    object::crd_kinds(&crds)
}

/// The pass's time, read once at its start: what the pass decides by the time (a
/// pause in force, stalls, stuck deletions) reads `now`; durations count from `started`.
struct Clock {
    started: Instant,
    /// `now` in RFC 3339 (the start of a sync, of the timings).
    started_at: String,
    now: jiff::Timestamp,
    /// Which advertisements of the remotes' refs answer the pass.
    refs_since: source::Since,
}

impl Clock {
    fn start(fresh: source::Freshness) -> Self {
        let (started, now) = (Instant::now(), jiff::Timestamp::now());
        Self { started, started_at: status::rfc3339(now), now, refs_since: fresh.since(started) }
    }

    /// The timings of a pass whose source stage just ended.
    fn timings(&self) -> status::PassTimings {
        status::PassTimings {
            at: self.started_at.clone(),
            source_millis: millis(self.started.elapsed()),
            ..Default::default()
        }
    }
}

/// What one pass works on, fixed once its requests are read.
struct PassInput<'a> {
    name: &'a str,
    app: &'a Application,
    env: &'a Environment,
    repo: &'a Repository,
    /// The status the last pass saved.
    previous: &'a AppStatus,
    /// The requests in force (and the pass's mode).
    requested: &'a requests::Requested,
    clock: &'a Clock,
}

/// What stage 1 gives the rest of the pass: the commit and its render.
struct Sourced {
    snapshot: source::Snapshot,
    rendered: Arc<crate::render::Rendered>,
}

/// What comparing needs of the application, compiled once per pass.
struct Prepared {
    rules: IgnoreRules,
    sensitive: crate::compare::sensitive::SensitiveRules,
    /// The application's sync options.
    options: SyncOptions,
    crds: object::CrdKinds,
    boundary: plan::Boundary,
    /// Impersonating the application's ServiceAccount, when it has one.
    writer: Option<Arc<Cluster>>,
}

impl Prepared {
    /// The scope of each object's comparison in pass `p`.
    fn scope<'a>(&'a self, ctx: &'a Context, p: &'a PassInput<'_>) -> Scope<'a> {
        let mode = p.requested.mode;
        Scope {
            writer: self.writer.as_deref().unwrap_or(&ctx.cluster),
            app: p.name,
            namespace: &p.app.namespace.value,
            rules: &self.rules,
            sensitive: &self.sensitive,
            mask_key: &ctx.mask_key,
            crds: &self.crds,
            defaults: &self.options,
            take_over: &p.env.sync_policy.take_over_managers,
            finished: &p.previous.finished,
            boundary: &self.boundary,
            validate_new: !mode.writes(),
            absent: None,
            keep_sides: mode != Mode::Policy,
            refs_since: p.clock.refs_since,
        }
    }
}

/// What stages 3 and 4 and the gate give the sync ([`Context::judge`]).
struct Judged {
    /// The status before any sync.
    st: AppStatus,
    plan: plan::Plan,
    /// What the roll-up leaves out.
    excluded: status::Exclusions,
    decision: plan::Decision,
    /// Why a sync that goes on by itself (its hooks still run) waits: automated (a
    /// dependency not ready, a closed window) and manual (a window without
    /// `manualSync`); as the gate holds a new one ([`plan::decide`]).
    held: (Option<status::Condition>, Option<status::Condition>),
}

/// What stage 2 gives the rest of the pass.
struct CompareStage {
    found: Found,
    /// The plan's view of the compared objects.
    items: Arc<Vec<DesiredItem>>,
    /// The kinds the application applied, this render's included.
    kinds: BTreeSet<(String, String)>,
    /// How long it took.
    took: std::time::Duration,
    /// When it compared: the watches' event counts from before.
    compared_from: Option<HashMap<(String, String), u64>>,
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
        let store = status::store::Store::new(cluster.client().clone(), &config.settings.status_namespace);
        let limits = config.settings.limits;
        Self {
            sources: source::Pool::new(cache_dir, Arc::clone(&config)).with_limits(limits),
            cluster,
            store,
            config,
            metrics,
            published: status::Published::default(),
            states: Mutex::default(),
            live: None,
            drift_rx: Mutex::default(),
            watch_token: tokio_util::sync::CancellationToken::new(),
            records: true,
            memo: Memo::default(),
            verdicts: verify::Verdicts::default(),
            writers: tokio::sync::Mutex::default(),
            controls: status::store::SharedControls::default(),
            policy_rejected: crate::reload::Rejected::default(),
            pass_objects: tokio::sync::Semaphore::new(PASS_OBJECTS_AT_ONCE as usize),
            reused: std::sync::atomic::AtomicU64::new(0),
            mask_key: crate::compare::sensitive::MaskKey::none(),
            capabilities_max_age: Duration::from_secs(source::CAPABILITIES_MAX_AGE_SECONDS),
        }
    }

    /// This context, asking the cluster's discovery for the render tools' capabilities
    /// again once they are `age` old (default
    /// [`source::CAPABILITIES_MAX_AGE_SECONDS`]; zero: every pass).
    #[must_use]
    pub fn with_capabilities_max_age(mut self, age: Duration) -> Self {
        self.capabilities_max_age = age;
        self
    }

    /// Marks sensitive values under `key` (the installation's, read from the Secret
    /// [`crate::compare::sensitive::MASK_KEY_SECRET`]); without it they print as
    /// `(sensitive)`.
    #[must_use]
    pub fn with_mask_key(mut self, key: crate::compare::sensitive::MaskKey) -> Self {
        self.mask_key = key;
        self
    }

    /// Keeps the timings of a pass that started at `started` (writing modes only).
    fn keep_timings(&self, app: &str, mode: Mode, mut timings: status::PassTimings, started: Instant) {
        timings.total_millis = millis(started.elapsed());
        if mode.writes() {
            self.published.publish_timings(app, timings);
        }
    }

    /// The stage timings of application `app`'s last pass in this process.
    pub fn timings(&self, app: &str) -> Option<status::PassTimings> {
        self.published.timings(app)
    }

    /// The commit `revision` (a branch, a ref such as `refs/pull/7/head`, a SHA) names
    /// in application `app`'s repository, fetched into its mirror, reading an
    /// advertisement of the remote's refs `asked` accepts.
    ///
    /// # Errors
    /// [`Error::UnknownApp`]; the fetch's error, as text.
    pub async fn resolve_for(&self, app: &str, revision: &str, asked: source::Since) -> Result<String, String> {
        let (_, _, repo) = self.app(app).map_err(|e| e.to_string())?;
        self.sources.resolve_since(repo, revision, asked).await.map_err(|e| e.to_string())
    }

    /// Whether application `app`'s render inputs (its path, the kustomizations it
    /// names, its Helm value files, its environment's `sharedPaths`: see
    /// [`source::Pool::render_inputs`]) differ between `head` and the commit it forked
    /// from `base` (their merge base): whether a pull request from `head` into `base`
    /// touches the application. `None` when it cannot be told (a missing commit, a
    /// tree that cannot be read): the caller previews it.
    pub async fn inputs_changed(&self, app: &str, base: &str, head: &str) -> Option<bool> {
        let (_, _, repo) = self.app(app).ok()?;
        let fork_point = self.sources.merge_base(repo, base, head).await?;
        let before = self.sources.render_inputs(app, repo, &fork_point).await.ok()?;
        let after = self.sources.render_inputs(app, repo, head).await.ok()?;
        Some(before != after)
    }

    /// The statuses and timings this context's passes publish (a shared view: what the
    /// status API and page read).
    pub fn published(&self) -> status::Published {
        self.published.clone()
    }

    /// Shows `rejected` (the rejection of a changed policy file, see
    /// [`crate::reload`]) in every application's status.
    #[must_use]
    pub fn with_policy_rejection(mut self, rejected: crate::reload::Rejected) -> Self {
        self.policy_rejected = rejected;
        self
    }

    /// The requests on each application's resource, once a watch keeps them (see
    /// `leader::watch_requests`); until then passes read them with a GET.
    pub fn controls(&self) -> status::store::SharedControls {
        self.controls.clone()
    }

    /// Whether a resource in the status namespace is named by none of `declared`, as the
    /// watch of the requests (`leader::watch_requests`, which sees every resource's name)
    /// knows them; `None` until that watch has listed.
    pub fn undeclared_resources(&self, declared: &std::collections::HashSet<&str>) -> Option<bool> {
        let controls = self.controls.read().ok()?;
        Some(controls.as_ref()?.keys().any(|name| !declared.contains(name.as_str())))
    }

    /// The requests on application `name`'s resource: from the watch that keeps them
    /// when it runs (no request), else read.
    ///
    /// # Errors
    /// [`Error::Status`] when read and the read fails.
    pub async fn controls_of(&self, name: &str) -> Result<status::store::Controls, Error> {
        self.io().controls_of(name).await
    }

    /// Reads live objects from watches (see [`crate::watch`]; only inside each
    /// application's destinations) instead of per-pass GETs and LISTs, and reports the
    /// applications whose objects drift (see
    /// [`Context::take_drift_receiver`]). Used by `plumb serve`; one-shot commands
    /// don't need it.
    #[must_use]
    pub fn with_watches(mut self) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let apps: Vec<&str> = self.config.applications.iter().map(|a| a.name.value.as_str()).collect();
        let destinations = crate::watch::Destinations::of(&self.config);
        self.live = Some(
            LiveCache::new(self.cluster.client().clone(), tx, self.watch_token.clone(), &apps).within(destinations),
        );
        self.drift_rx = Mutex::new(Some(rx));
        self
    }

    /// Passes of this context apply but save no status, history or status Events:
    /// another writer (a serving plumb) owns the status object.
    #[must_use]
    pub fn without_records(mut self) -> Self {
        self.records = false;
        self
    }

    /// What changed for which application (its objects drifted, a workload's child
    /// changed), from the watches of [`Context::with_watches`] (taken once, by whoever
    /// triggers passes).
    pub fn take_drift_receiver(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<crate::watch::Changed>> {
        self.drift_rx.lock().ok()?.take()
    }

    /// The repository mirrors and renders its passes read (a repository poller asks
    /// the remotes' refs through them: see [`crate::poller`]).
    pub fn sources(&self) -> &source::Pool {
        &self.sources
    }

    /// How many render-tool child processes (kustomize, helm, sops) this context has
    /// started: a pass over an unchanged tree adds none.
    pub fn render_tool_runs(&self) -> u64 {
        self.sources.tool_runs()
    }

    /// The watch cache keeps the objects of `apps` alone (`None`: every application's),
    /// as [`LiveCache::keep_only`]: a replica keeps its shards' applications' objects.
    /// Nothing without watches.
    pub fn keep_watching(&self, apps: Option<std::collections::HashSet<String>>) {
        if let Some(live) = &self.live
            && live.keep_only(apps)
        {
            tracing::debug!(
                "watch cache: keeping the objects of this replica's applications; labelled watches restart"
            );
        }
    }

    /// How many live objects the watch cache holds (0 without watches): only objects of
    /// the policy's applications ([`crate::watch::app_selector`]).
    pub fn cached_objects(&self) -> usize {
        self.live.as_ref().map_or(0, LiveCache::cached)
    }

    /// Every running watch ([`LiveCache::watches`]).
    pub fn watches(&self) -> Vec<String> {
        self.live.as_ref().map_or_else(Vec::new, LiveCache::watches)
    }

    /// The kinds whose watch (see [`Context::with_watches`]) has not listed yet.
    pub fn watches_unsynced(&self) -> Vec<String> {
        self.live.as_ref().map_or_else(Vec::new, LiveCache::unsynced)
    }

    /// The latest status of every application (in memory; loaded from the cluster on
    /// the first pass of each).
    pub async fn statuses(&self) -> Vec<AppStatus> {
        self.published.statuses()
    }

    /// The sync history of `app`, newest first.
    ///
    /// # Errors
    /// [`Error::Status`].
    pub async fn history(&self, app: &str) -> Result<Vec<SyncRecord>, Error> {
        Ok(self.store.load(app).await?.1)
    }

    /// The cluster application `app`'s writes (dry-runs, applies, deletes) go through:
    /// impersonating its ServiceAccount ([`Application::impersonates`]), else plumb's.
    ///
    /// # Errors
    /// [`PassFailure::Impersonation`]: the impersonating client cannot be built.
    async fn writer(&self, app: &Application, env: &Environment) -> Result<Option<Arc<Cluster>>, PassFailure> {
        let Some(user) = app.impersonates(env) else { return Ok(None) };
        let mut writers = self.writers.lock().await;
        if let Some(w) = writers.get(&user) {
            return Ok(Some(w.clone()));
        }
        let w = match self.cluster.impersonate(&user).await {
            Ok(w) => Arc::new(w),
            Err(error) => return Err(PassFailure::Impersonation { user, error }),
        };
        writers.insert(user, w.clone());
        Ok(Some(w))
    }

    /// For an automated pass: what to say when the revision of `st` does not descend
    /// from the last synced revision (the tracked ref was force-pushed or reset), unless
    /// the environment allows history rewrites or `st` is pinned (a rollback goes back
    /// in history on purpose). `None` when it descends, nothing was synced yet, or it
    /// cannot be told.
    async fn rewritten(
        &self,
        repo: &Repository,
        env: &Environment,
        st: &AppStatus,
        synced: &str,
        mode: Mode,
    ) -> Option<String> {
        let revision = st.revision.as_str();
        let pinned = st.pinned.is_some();
        if mode != Mode::Policy
            || env.sync_policy.allow_history_rewrite
            || pinned
            || synced.is_empty()
            || revision == synced
        {
            return None;
        }
        match self.sources.descends(repo, revision, synced).await {
            Some(false) => Some(format!(
                "history rewritten: {} does not descend from the last synced revision {}",
                short(revision),
                short(synced)
            )),
            _ => None,
        }
    }

    /// The status application `name`'s last pass saved (with its history when read from
    /// the store: the first pass of a process).
    async fn previous(&self, state: &AppState, name: &str) -> Result<(AppStatus, Option<Vec<SyncRecord>>), Error> {
        match &state.previous {
            Some(s) => Ok((AppStatus::clone(s), None)),
            None => Ok(self.store.load(name).await.map(|(s, h)| (s, Some(h)))?),
        }
    }

    fn app(&self, name: &str) -> Result<(&Application, &Environment, &Repository), Error> {
        self.io().app(name)
    }

    /// The view of the context its stages use.
    fn io(&self) -> Io<'_> {
        Io {
            cluster: &self.cluster,
            live: self.live.as_ref(),
            memo: &self.memo,
            sources: &self.sources,
            config: &self.config,
            store: &self.store,
            controls: &self.controls,
        }
    }

    /// The view of the context the record stage uses.
    fn recorder(&self) -> Recorder<'_> {
        Recorder {
            cluster: &self.cluster,
            config: &self.config,
            store: &self.store,
            published: &self.published,
            metrics: &self.metrics,
            records: self.records,
        }
    }

    /// Runs one pass of application `name`, reading the remote's refs as they are now
    /// ([`source::Freshness::Now`]). `revision` overrides the configured revision (only
    /// with [`Mode::CompareOnly`], for previews).
    ///
    /// # Errors
    /// [`Error::UnknownApp`]; [`Error::Status`] when status cannot be read or written.
    /// Fetch, render, compare and apply failures are not errors of the pass: they are
    /// reported in the returned status (and stored).
    pub async fn run_pass(&self, name: &str, mode: Mode, revision: Option<&str>) -> Result<PassReport, Error> {
        self.run_pass_with(name, mode, revision, source::Freshness::Now).await
    }

    /// [`Context::run_pass`], reading refs of the remotes as recent as `fresh` asks (see
    /// [`Context::pass`]). The application's [`AppState`] is kept by the context between
    /// these calls: for callers that run an application's passes in turn and own no
    /// state (tests, benches). Two calls at once for one application each start from
    /// what the one before left, and the later end wins.
    ///
    /// # Errors
    /// As [`Context::run_pass`].
    pub async fn run_pass_with(
        &self,
        name: &str,
        mode: Mode,
        revision: Option<&str>,
        fresh: source::Freshness,
    ) -> Result<PassReport, Error> {
        let mut state = self.states.lock().ok().and_then(|mut s| s.remove(name)).unwrap_or_default();
        let report = self.pass(&mut state, name, mode, revision, fresh).await;
        if let Ok(mut s) = self.states.lock() {
            s.insert(name.to_string(), state);
        }
        report
    }

    /// The `PolicyWarning` of `app`'s passes: why the policy file on disk is not in
    /// force, and why a generated application is kept while its applicationSet is held.
    fn policy_warning(&self, app: &Application) -> Option<String> {
        let rejected = self.policy_rejected.read().ok().and_then(|r| r.clone());
        match (rejected, &app.held) {
            (Some(r), Some(h)) => Some(format!("{r}; {h}")),
            (r, h) => r.or_else(|| h.clone()),
        }
    }

    /// One pass of application `name` from `state` (what its last pass left; updated for
    /// the next), reading refs of the remotes as recent as `fresh` asks: a pass of the
    /// poll timer reads those its repository's poller asked for (see
    /// [`crate::poller`]). The renders of other applications the pass looks at (what
    /// moved to or from them) read the same refs. `revision` and the errors: as
    /// [`Context::run_pass`].
    ///
    /// # Errors
    /// As [`Context::run_pass`].
    pub async fn pass(
        &self,
        state: &mut AppState,
        name: &str,
        mode: Mode,
        revision: Option<&str>,
        fresh: source::Freshness,
    ) -> Result<PassReport, Error> {
        let clock = Clock::start(fresh);
        let (app, env, repo) = self.app(name)?;
        let (previous, history) = self.previous(state, name).await?;
        // 0. requests on the application's resource: sync, pause, pin
        let requested = self.io().requested(&previous, (app, env, repo), mode, clock.now).await?;
        let rejected = self.policy_warning(app);
        let mut st = assess::started((name, &env.name.value), &previous, &requested, rejected.as_deref());
        let p = PassInput { name, app, env, repo, previous: &previous, requested: &requested, clock: &clock };
        let revision = revision.or(requested.revision.as_deref());
        // 1. source and render, and what comparing needs of the application
        let installed = !previous.synced_revision.is_empty() || previous.last_sync.is_some();
        self.sources.set_installed(name, installed);
        // the signature gate (`verifyCommits`): what the source stage may read
        let trusted = match self.verify_stage(&p, &mut st, revision).await {
            Ok(trusted) => trusted,
            Err(failure) => return self.unsourced(state, &p, st, history, &failure).await,
        };
        let mut sourced = match self.source_stage(app, repo, trusted.as_deref().or(revision), clock.refs_since).await {
            Ok(sourced) => sourced,
            Err(failure) => return self.unsourced(state, &p, st, history, &failure).await,
        };
        // hooks run around a sync: never compared, never inventory, never pruned
        let kept = state.hooks.take().filter(|s| Arc::ptr_eq(&s.from, &sourced.rendered));
        let split = match kept.map_or_else(|| hooks::split(&sourced.rendered).map(Arc::new), Ok) {
            Ok(split) => {
                sourced.rendered = split.objects.clone();
                state.hooks = Some(split.clone());
                split
            }
            Err(error) => {
                let (revision, subject) = (sourced.snapshot.revision.clone(), sourced.snapshot.subject.clone());
                let failure = PassFailure::Render { revision, subject, error };
                return self.unsourced(state, &p, st, history, &failure).await;
            }
        };
        assess::sourced(&mut st, &sourced.snapshot, &sourced.rendered);
        if requested.mode.writes()
            && let Some(digest) = self.keep_delete_hooks((name, app, env), &split.hooks).await
        {
            st.decommission_digest = digest;
        }
        let prepared = match self.prepare(app, env, &sourced.rendered).await {
            Ok(prepared) => prepared,
            Err(failure) => return self.unsourced(state, &p, st, history, &failure).await,
        };
        // held until the pass ends: its objects' copies live that long
        let _objects = self.pass_objects.acquire_many(objects_weight(sourced.rendered.manifests.len())).await.ok();
        let mut timings = clock.timings();
        let scope = prepared.scope(self, &p);
        let read = reuse::Read { render: &sourced.rendered, previous: &previous, controls: &requested.controls };
        // 2. compare; the comparisons of the last pass serve again only between passes of the policy
        let policy_pass = requested.mode == Mode::Policy && revision.is_none();
        let last = state.compares.take().filter(|_| policy_pass);
        // no comparisons of its own (a shard taken over, a restart): the last pass's seal
        if last.is_none() {
            self.unseal(&scope, &split, &previous).await;
        }
        let mut stage = self.compare_stage(&scope, &read, last.clone(), &st.kinds, &prepared.options).await;
        // 3–5. plan, health and status, the gate
        let mut judged = self.judge(&p, &st, &mut stage, (&prepared.options, &prepared.boundary), state).await;
        if judged.decision.reason.is_some() && stage.compared_from.is_none() {
            // a reused comparison holds nothing to send (`reuse.rs`): compare again, then sync
            stage = self.compare_stage(&scope, &read, None, &st.kinds, &prepared.options).await;
            judged = self.judge(&p, &st, &mut stage, (&prepared.options, &prepared.boundary), state).await;
        }
        timings.compare_millis = millis(stage.took);
        let Judged { mut st, plan: the_plan, excluded, decision, held: gates } = judged;
        verify::out_of_sync_when_unverified(&mut st);
        let unmatched = self.io().unmatched_rules(app, env, &sourced.rendered).await;
        assess::silent(&mut st, &unmatched, &stage.found.candidates.untracked);
        assess::create_only(&mut st, &sourced.rendered, &stage.found.compared);
        let candidates = assess::candidate_diffs(&stage.found, &st);
        let (mut record, mut writes) = (None, None);
        // a sync whose hooks still run goes on (in the passes that may sync: a pause holds
        // it), whether or not objects are left to apply; it is not over while they run
        let hooks_running = previous
            .last_sync
            .as_ref()
            .filter(|l| l.result == SyncResult::Running && l.revision == st.revision && !split.hooks.is_empty());
        let may_sync = match requested.mode {
            Mode::Policy => !requested.paused,
            m => matches!(m, Mode::Manual { .. }),
        };
        // the gates hold it between waves as they hold a new sync
        let gate = hooks_running
            .and_then(|l| if l.reason == plan::SyncReason::Manual { gates.1.clone() } else { gates.0.clone() });
        if let Some(c) = &gate
            && !st.conditions.iter().any(|have| have.type_ == c.type_)
        {
            st.conditions.push(c.clone());
        }
        let going_on = hooks_running.filter(|_| may_sync && gate.is_none());
        // a person's sync or selfHeal while hooks run goes on with that sync (its runs
        // keep running) instead of starting another that would re-create them
        let reason = match (decision.reason, hooks_running) {
            (Some(_), Some(l)) => Some(l.reason),
            (wanted, _) => wanted.or(going_on.map(|l| l.reason)),
        };
        if let Some(reason) = reason {
            let s = sync::SyncInput {
                snapshot: &sourced.snapshot,
                reason,
                plan: &the_plan,
                found: &stage.found,
                excluded: &excluded,
                last_sync: previous.last_sync.as_ref(),
                started_at: clock.started_at.clone(),
                create_namespace: prepared.options.create_namespace,
                hooks: &split.hooks,
                first_sync: previous.synced_revision.is_empty()
                    && previous.last_sync.as_ref().is_none_or(|l| l.install && l.result != SyncResult::Succeeded),
            };
            let sync_started = Instant::now();
            let (made, wrote) = self.io().sync(&mut st, &scope, &s).await;
            record = Some(status::fold_failure(previous.last_sync.as_ref(), made));
            writes = Some(wrote);
            timings.sync_millis = millis(sync_started.elapsed());
        } else if decision.settled && requested.mode.writes() && hooks_running.is_none() {
            record = status::finished_running(previous.last_sync.as_ref(), &st.revision);
        }
        state.heal = sync::heal_after(decision.heal, reason, record.as_ref());
        // kept for the next pass when it may serve it (a sync makes a record: it keeps none)
        state.compares = match (&stage.compared_from, policy_pass && record.is_none()) {
            (Some(before), true) => self.kept_compares(&read, before, &stage).map(Arc::new),
            (None, true) => last,
            (_, false) => None,
        };
        assess::ended(&mut st, &stage.kinds, record.as_ref());
        st.synced_seal = self.seal_of(&scope, &split, &stage.found.compared, &st, (record.as_ref(), writes.as_ref()));
        // 6. record
        self.recorder().record(state, &st, &previous, history, record.clone(), requested.mode, clock.started).await?;
        self.keep_timings(name, requested.mode, timings, clock.started);
        Ok(PassReport { status: st, sync: record, plan: the_plan, compared: stage.found.compared, candidates })
    }

    /// The signature gate (`verifyCommits`, see `verify.rs`): checks what the pass would
    /// read (`revision`, else the configured one), puts the check and any
    /// `UnverifiedRevision` condition in `st`, and returns the commit the source stage
    /// reads instead (`None`: the revision as configured; nothing to verify).
    ///
    /// # Errors
    /// [`PassFailure::Verify`] when it cannot judge; [`PassFailure::Unverified`] when
    /// the revision is not trusted and nothing was synced before.
    async fn verify_stage(
        &self,
        p: &PassInput<'_>,
        st: &mut AppStatus,
        revision: Option<&str>,
    ) -> Result<Option<String>, PassFailure> {
        let wanted = revision.unwrap_or(&p.app.revision.value);
        let apps = (p.app, p.env, p.repo);
        let (checked, fresh) = verify::check(&self.verdicts, &self.sources, apps, wanted, p.clock.refs_since).await?;
        if let Some((_, c)) = checked.as_ref().filter(|_| fresh) {
            self.metrics.count_verification(p.name, c.verdict.as_ref().err().map_or("verified", |e| e.reason()));
        }
        let (allowed, refused) = match self.allowance(p, checked.as_ref()).await {
            Ok(by) => (by, None),
            Err(why) => (None, Some(why)),
        };
        let mut held = verify::hold(checked.as_ref(), &p.previous.synced_revision, allowed.as_deref());
        // what is kept instead must be trusted too (a commit synced before verifyCommits
        // was turned on is not): checked as any revision, its verdict kept by id
        if let (Some(keep), Some((crate::config::VerifyMode::Head, c))) = (held.revision.clone(), checked.as_ref())
            && keep != c.commit
        {
            let (kept, _) = verify::check(&self.verdicts, &self.sources, apps, &keep, p.clock.refs_since).await?;
            let allowed = self.allowance(p, kept.as_ref()).await.ok().flatten();
            if let Some((_, k)) = kept.as_ref().filter(|_| allowed.is_none()) {
                held = verify::kept_untrusted(held, k);
            }
        }
        if let (Some(c), Some(why)) = (held.condition.as_mut(), refused) {
            c.message.push_str(&format!("; {why}"));
        }
        st.verification = held.verification;
        st.conditions.extend(held.condition.clone());
        if held.stop {
            return Err(PassFailure::Unverified(held.condition.map(|c| c.message).unwrap_or_default()));
        }
        Ok(held.revision)
    }

    /// Who allowed the unverified commit of `checked` (`plumb sync --allow-unverified`):
    /// the user [`status::ALLOW_UNVERIFIED_ANNOTATION`] names when it names that commit
    /// and the API server checks who writes it ([`status::ALLOW_UNVERIFIED_POLICY`]
    /// installed as shipped). `Ok(None)`: nothing allowed, or nothing to allow; `Err`:
    /// an allowance plumb does not honour, and why.
    async fn allowance(
        &self,
        p: &PassInput<'_>,
        checked: Option<&(crate::config::VerifyMode, verify::Checked)>,
    ) -> Result<Option<String>, String> {
        let Some((_, c)) = checked.filter(|(_, c)| c.verdict.is_err()) else { return Ok(None) };
        let Some(value) = p.requested.controls.allow_unverified.as_deref() else { return Ok(None) };
        let Some((commit, by)) = status::allowance(value) else {
            return Err(format!("{} ignored: not `COMMIT USER`", status::ALLOW_UNVERIFIED_ANNOTATION));
        };
        if commit != c.commit {
            return Ok(None);
        }
        let io = self.io();
        match io.admission_enforced(status::ALLOW_UNVERIFIED_POLICY, status::ALLOW_UNVERIFIED_POLICY_YAML).await {
            Ok(()) => Ok(Some(by.to_string())),
            Err(e) => Err(format!("--allow-unverified by {by} not honoured: {e}")),
        }
    }

    /// Keeps the PreDelete / PostDelete hooks of a render (`declared`, split from its
    /// objects) on application `name`'s
    /// resource ([`plan::decommission::delete_hooks`]): once the application leaves the
    /// policy, nothing renders it any more, and its decommission runs what was kept.
    /// Returns the [`plan::decommission::digest`] of what the resource now holds for a
    /// decommission (kept in the status, which only plumb writes); `None` when nothing
    /// was kept. A failure is logged: the pass goes on.
    async fn keep_delete_hooks(
        &self,
        (name, app, env): (&str, &Application, &Environment),
        declared: &hooks::Hooks,
    ) -> Option<String> {
        if !self.records {
            return None;
        }
        let deletes = |h: &plan::hooks::Hook| {
            h.phases.iter().any(|(p, _)| matches!(p, plan::hooks::Phase::PreDelete | plan::hooks::Phase::PostDelete))
        };
        let objects: Vec<Value> =
            declared.declared.iter().filter(|(h, _)| deletes(h)).map(|(_, m)| m.object()).collect();
        let hooks = plan::decommission::delete_hooks(&objects);
        let value = serde_json::to_value(&hooks).unwrap_or(Value::Null);
        if let Err(e) = self.store.keep_hooks(name, &value).await {
            tracing::warn!(app = %name, "keeping the delete hooks on the application's resource: {e}");
            return None;
        }
        Some(plan::decommission::digest(&plan::decommission::Record::of(app, env), &hooks))
    }

    /// The end of a pass that stopped before comparing (`failure`): see
    /// [`assess::unsourced`].
    async fn unsourced(
        &self,
        state: &mut AppState,
        p: &PassInput<'_>,
        st: AppStatus,
        history: Option<Vec<SyncRecord>>,
        failure: &PassFailure,
    ) -> Result<PassReport, Error> {
        tracing::warn!(app = p.name, stage = failure.stage(), "{failure}");
        let st = assess::unsourced(st, p.previous, failure);
        let mode = p.requested.mode;
        self.recorder().record(state, &st, p.previous, history, None, mode, p.clock.started).await?;
        Ok(PassReport { status: st, sync: None, plan: plan::Plan::default(), compared: vec![], candidates: vec![] })
    }

    /// Gives the render tools the cluster's capabilities, discovery run again first
    /// when those given are older than [`Context::with_capabilities_max_age`] (a CRD
    /// installed since is seen). A failure keeps the previous ones.
    /// `plumb diff` and `plumb sync --local` run their passes through here too.
    pub async fn refresh_capabilities(&self) {
        if self.sources.knows_cluster(self.capabilities_max_age) {
            return;
        }
        // the first time, discovery is the one run at start
        if self.sources.capabilities().kube_version.is_some()
            && let Err(e) = self.cluster.refresh().await
        {
            tracing::warn!("discovery for the render tools' capabilities: {e}");
        }
        match self.cluster.capabilities().await {
            Ok((version, api_versions)) => self.sources.set_cluster(version, api_versions),
            Err(e) => tracing::warn!("the render tools' capabilities: {e}"),
        }
    }

    /// Stage 1: fetches and renders application `app` at `revision` (else its
    /// configured revision) within the source time limit, reading the refs `refs_since`
    /// accepts, and observes the fetch's and render's times.
    ///
    /// # Errors
    /// [`PassFailure::Fetch`], [`PassFailure::Render`].
    async fn source_stage(
        &self,
        app: &Application,
        repo: &Repository,
        revision: Option<&str>,
        refs_since: source::Since,
    ) -> Result<Sourced, PassFailure> {
        self.refresh_capabilities().await;
        let name = app.name.value.as_str();
        let wanted = revision.unwrap_or(&app.revision.value);
        let limits = self.config.settings.limits;
        let fetch_started = Instant::now();
        let desired = self.sources.desired(name, repo, wanted, &app.path.value, refs_since);
        let desired = tokio::time::timeout(limits.source_timeout(), desired).await.unwrap_or_else(|_| {
            let e = crate::limits::Exceeded::Timeout { seconds: limits.source_timeout_seconds };
            Desired::FetchFailed(source::FetchError::Git(e.into()))
        });
        match desired {
            Desired::Rendered(snapshot, rendered, ran) => {
                // what the pass spent outside the render: the fetch
                let render = if ran { rendered.took } else { std::time::Duration::ZERO };
                let fetch = fetch_started.elapsed().saturating_sub(render);
                let labels = crate::metrics::RepositoryLabels { repository: repo.name.value.clone() };
                self.metrics.git_fetch_seconds.get_or_create(&labels).observe(fetch.as_secs_f64());
                if ran {
                    let labels = crate::metrics::RenderLabels { app: name.into(), tool: rendered.tool_name().into() };
                    self.metrics.render_seconds.get_or_create(&labels).observe(rendered.took.as_secs_f64());
                }
                Ok(Sourced { snapshot, rendered })
            }
            Desired::FetchFailed(error) => {
                Err(PassFailure::Fetch { url: crate::config::repo_url::redact(&repo.url.value), error })
            }
            Desired::RenderFailed(snapshot, error) => {
                Err(PassFailure::Render { revision: snapshot.revision, subject: snapshot.subject, error })
            }
        }
    }

    /// What comparing needs of application `app` in `env`, compiled once: its rules
    /// and options, the kinds its render's CRDs define, its boundary, the cluster its
    /// writes go through.
    ///
    /// # Errors
    /// [`PassFailure::Boundary`], [`PassFailure::Impersonation`].
    async fn prepare(
        &self,
        app: &Application,
        env: &Environment,
        rendered: &crate::render::Rendered,
    ) -> Result<Prepared, PassFailure> {
        let own_namespace = &self.config.settings.status_namespace;
        let boundary = plan::Boundary::new(&app.boundaries(env), &app.namespace.value, own_namespace)
            .map_err(|error| PassFailure::Boundary { app: app.name.value.clone(), error })?
            .with_lease_namespaces(self.config.settings.lease_namespaces());
        let mut options = SyncOptions::parse(env.sync_policy.sync_options.iter().map(String::as_str));
        options.adopt |= env.sync_policy.adopt;
        Ok(Prepared {
            rules: IgnoreRules::new(env.ignore_differences.iter().chain(&app.ignore_differences))
                .with_held(&rendered.held),
            sensitive: crate::compare::sensitive::SensitiveRules::new(&env.sensitive_fields),
            options,
            crds: crd_kinds(&rendered.manifests),
            boundary,
            writer: self.writer(app, env).await?,
        })
    }

    /// Stages 3 and 4 and the gate, over the comparisons of `stage`: what a sync would
    /// do (holding back what moved to another application), health, the status built
    /// from `base`, and whether to sync.
    async fn judge(
        &self,
        p: &PassInput<'_>,
        base: &AppStatus,
        stage: &mut CompareStage,
        (options, boundary): (&SyncOptions, &plan::Boundary),
        state: &mut AppState,
    ) -> Judged {
        let (mode, policy) = (p.requested.mode, &p.env.sync_policy);
        let found = &mut stage.found;
        let (prune, approved) = mode.prune(policy.prune);
        let mut candidates: Vec<PruneCandidate> = found.candidates.orphans.iter().map(|(o, _)| o.clone()).collect();
        if prune {
            found.candidates.extraneous.extend(self.io().hand_over(p.name, &mut candidates, p.clock.refs_since).await);
        }
        let guards = plan::Guards {
            app: p.name,
            prune,
            allow_empty: policy.allow_empty,
            manual: mode.manual(),
            approved,
            protect_data_loss: policy.protect_data_loss,
            max_prune_percent: policy.max_prune_percent,
            boundary: Some(boundary),
        };
        let the_plan = plan::plan(&stage.items, &candidates, guards);
        let found = &stage.found;
        let observed = self.io().observe((p.app, p.env), found, &stage.kinds, p.clock.now).await;
        let rewritten = self.rewritten(p.repo, p.env, base, &p.previous.synced_revision, mode).await;
        self.memo.defer(p.name, assess::others_own(p.name, &found.compared));
        let also_declared = self.memo.also_declared(p.name);
        let a = assess::Assessment {
            found,
            also_declared: &also_declared,
            plan: &the_plan,
            observed: &observed,
            stall_after: crate::health::HealthSettings::from_policy(&p.env.health).stall_after,
            now: p.clock.now,
        };
        let waiting_for = self.dependencies_waiting(p.app).await;
        let windows = windows_verdict(p.env, p.name, p.clock.now);
        let gate = assess::Gate {
            mode,
            policy,
            previous: p.previous,
            fail_on_shared: options.fail_on_shared,
            rewritten: rewritten.as_deref(),
            paused: p.requested.paused,
            waiting_for: waiting_for.as_deref(),
            windows: &windows,
            now: p.clock.started,
        };
        let (dependency, window) =
            (status::ConditionType::WaitingForDependency, status::ConditionType::SyncWindowClosed);
        let held = (
            (waiting_for.as_deref().map(|w| (dependency, format!("automated sync waits for its dependencies: {w}"))))
                .or_else(|| windows.closed.as_deref().map(|w| (window, format!("automated sync is held: {w}"))))
                .map(|(t, m)| status::Condition::new(t, m)),
            windows
                .manual_closed
                .as_deref()
                .map(|w| status::Condition::new(window, format!("a manual sync is held: {w}"))),
        );
        let (st, excluded, decision) = assess::judged(base, &a, &gate, state);
        Judged { st, plan: the_plan, excluded, decision, held }
    }

    /// Why application `app`'s dependencies (`dependsOn`) are not ready
    /// ([`plan::depends::waiting`]), from their latest published statuses (read from the
    /// store for one this process has not passed yet); `None` when all are ready.
    async fn dependencies_waiting(&self, app: &Application) -> Option<String> {
        let mut statuses = Vec::new();
        for d in &app.depends_on {
            let name = d.value.as_str();
            let st = match self.published.status(name) {
                Some(st) => Some(AppStatus::clone(&st)),
                None => match self.store.load(name).await {
                    Ok((st, _)) => Some(st),
                    Err(e) => {
                        tracing::warn!(app = %app.name.value, dependency = name, "reading its status: {e}");
                        None
                    }
                },
            };
            statuses.push((name, st));
        }
        plan::depends::waiting(statuses.iter().map(|(n, s)| (*n, s.as_ref())))
    }

    /// Stage 2: the comparisons of the application's last pass (`last`) when nothing
    /// they read changed since (see `reuse.rs`), else [`Context::compare_all`] and the
    /// plan's view of the objects.
    async fn compare_stage(
        &self,
        scope: &Scope<'_>,
        read: &reuse::Read<'_>,
        last: Option<Arc<reuse::Compares>>,
        kinds: &[(String, String)],
        options: &SyncOptions,
    ) -> CompareStage {
        let started = Instant::now();
        let changed = match (&last, &self.live) {
            (Some(last), Some(live)) => last.changed(read, |group, kind| live.epoch(group, kind)),
            _ => Some("nothing kept".into()),
        };
        let live = |kind: &Kind, key: &ObjectKey| {
            let cached = self.live.as_ref()?.get_arc(kind, key).flatten()?;
            Some(crate::compare::Live::cached(cached, kind))
        };
        let revived = last.as_ref().filter(|_| changed.is_none()).and_then(|l| l.revive(live));
        if let (Some(last), Some(compared)) = (&last, revived) {
            self.reused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let found = Found { compared, candidates: Candidates::default(), errors: vec![] };
            let (items, kinds) = (last.items.clone(), last.kinds_after.clone());
            return CompareStage { found, items, kinds, took: started.elapsed(), compared_from: None };
        }
        tracing::debug!(app = scope.app, "comparing: {}", changed.unwrap_or_default());
        // the event counts from before anything is read
        let before = self.live.as_ref().map(LiveCache::epochs).unwrap_or_default();
        let mut kinds = kinds.iter().cloned().collect();
        let mut found = self.compare_all(scope, read.render, &mut kinds).await;
        let items = Arc::new(self.desired_items(scope.app, &found.compared, options));
        if !scope.keep_sides {
            unsent_dropped(&mut found.compared, &items);
        }
        CompareStage { found, items, kinds, took: started.elapsed(), compared_from: Some(before) }
    }

    /// What a pass that compared found (`stage`), kept for the next pass when it may
    /// serve it. `before`: the watches' event counts from before it compared.
    fn kept_compares(
        &self,
        read: &reuse::Read<'_>,
        before: &HashMap<(String, String), u64>,
        stage: &CompareStage,
    ) -> Option<reuse::Compares> {
        let listed = |group: &str, kind: &str| self.live.as_ref().is_some_and(|l| l.epoch(group, kind).is_some());
        reuse::Compares::keep(read, before, listed, &stage.found.compared, stage.items.clone(), &stage.kinds)
    }

    /// How many passes took the comparisons of the pass before (see `reuse.rs`).
    pub fn comparisons_reused(&self) -> u64 {
        self.reused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Compares every manifest (16 at once), fails objects declared twice or going into
    /// a namespace that will not exist, then lists the prune candidates of every kind
    /// the application ever applied (`kinds`, extended with this render's).
    async fn compare_all(
        &self,
        scope: &Scope<'_>,
        rendered: &crate::render::Rendered,
        kinds: &mut BTreeSet<(String, String)>,
    ) -> Found {
        let manifests = &rendered.manifests;
        // the watches' first lists and the metadata LISTs of the objects they may lack, at once
        let ((), absent) = futures::join!(self.watches_ready(manifests), self.io().known_absent(scope, manifests));
        let scope = &Scope { absent: Some(&absent), ..*scope };
        // each future made when the pool takes it, not all of them first (by position: a
        // closure over borrowed items would not prove the pass Send)
        let jobs = (0..manifests.len()).map(|i| self.io().compare_one(scope, &manifests[i]).boxed());
        let mut compared: Vec<Arc<Compared>> = stream::iter(jobs).buffered(CONCURRENCY).collect().await;
        // before objects are failed below: a failed object keeps its kind, but one that
        // awaited its CRD no longer says so
        for (api_version, kind) in applied_kinds(&compared) {
            // one entry per group and kind (resolved to a served version at use)
            kinds.retain(|(a, k)| !(k == &kind && group_of(a) == group_of(&api_version)));
            kinds.insert((api_version, kind));
        }
        object::declared_twice(&mut compared);
        object::refuse_outside(&mut compared, scope.boundary, scope.crds);
        let create = scope.defaults.create_namespace;
        self.io().check_namespaces(&mut compared, scope.namespace, create).await;
        let mut errors: Vec<String> = compared
            .iter()
            .filter(|c| c.sync() == SyncStatus::Unknown)
            .map(|c| format!("{}: {}", c.key, c.reason))
            .collect();
        let desired: HashSet<ObjectKey> = compared.iter().map(|c| c.key.clone()).collect();
        let mut candidates = self.io().prune_candidates(scope.app, &desired, kinds, scope.defaults).await;
        errors.append(&mut candidates.errors);
        // the self application keeps what plumb needs to run, whatever Git says: a kept
        // object, not a difference
        for (c, _) in &mut candidates.orphans {
            if let Some(why) = scope.boundary.never_pruned(&c.key) {
                candidates.extraneous.insert(c.key.to_string());
                c.held = Some(why);
            }
        }
        // a kind this render declares (its CRD may be applied by this very sync) stays
        let gone = |a: &str, k: &str| {
            candidates.gone.iter().any(|(g, gk)| gk == k && g == group_of(a))
                && !compared.iter().any(|c| c.key.kind == k && c.key.group == group_of(a))
        };
        kinds.retain(|(a, k)| !gone(a, k));
        Found { compared, candidates, errors }
    }

    /// With watches: waits (at most [`WATCH_READY_TIMEOUT`] per kind) for the first list
    /// of every kind `manifests` use, so that the first pass of an application reads
    /// its live objects with one LIST per kind instead of one GET per object. The kinds'
    /// watches start together.
    async fn watches_ready(&self, manifests: &[crate::render::Manifest]) {
        let Some(live) = &self.live else { return };
        let mut kinds: BTreeSet<(&str, &str)> = BTreeSet::new();
        for m in manifests {
            kinds.insert((m.api_version(), m.kind()));
        }
        let mut served = Vec::new();
        for (api_version, kind) in kinds {
            served.extend(self.cluster.kind(api_version, kind).await.ok());
        }
        // the watches list at once: the wait is the slowest list, not their sum
        future::join_all(served.iter().map(|kind| live.ready(kind, WATCH_READY_TIMEOUT))).await;
    }

    /// The plan's view of each compared object.
    fn desired_items(&self, app: &str, compared: &[Arc<Compared>], defaults: &SyncOptions) -> Vec<DesiredItem> {
        let installation = self.config.settings.installation_id.as_deref();
        compared
            .iter()
            .map(|c| DesiredItem {
                key: c.key.clone(),
                out_of_sync: c.sync() != SyncStatus::Synced,
                tracked: c.live.as_ref().is_some_and(|l| l.is_owned_by(app, installation)),
                error: c.sync() == SyncStatus::Unknown,
                immutable: c.immutable(),
                wave: c.wave,
                options: defaults.with_object(&c.options),
                refused: match &c.reason {
                    ObjectReason::Refused(why) => Some(why.clone()),
                    _ => None,
                },
                owned_by: match &c.reason {
                    ObjectReason::OwnedBy(who) => Some(who.clone()),
                    _ => None,
                },
            })
            .collect()
    }
}

/// `(apiVersion, kind)` of every compared object of a served kind (or awaiting its CRD):
/// remembered so that the last object of a kind is still pruned.
fn applied_kinds(compared: &[Arc<Compared>]) -> impl Iterator<Item = (String, String)> + '_ {
    compared.iter().filter(|c| c.kind.is_some() || c.awaits_crd()).filter_map(|c| {
        let av = c.apply.get("apiVersion").and_then(Value::as_str)?;
        Some((av.to_string(), c.key.kind.clone()))
    })
}

/// Drops the body to send (`apply`) of each object a sync of this pass will not send:
/// in sync and not applied whole (`ApplyOutOfSyncOnly=false`), after everything that
/// reads it for every object (boundaries, the kinds applied). A policy pass holds
/// every object of its render while it runs; this is most of that. `items` are the
/// plan's view of `compared`, index for index.
fn unsent_dropped(compared: &mut [Arc<Compared>], items: &[DesiredItem]) {
    for (c, item) in compared.iter_mut().zip(items) {
        if !item.out_of_sync
            && !item.options.apply_all
            && let Some(c) = Arc::get_mut(c)
        {
            c.apply = Value::Null;
        }
    }
}

/// `d` in whole milliseconds.
fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "web"}, "data": {"k": "v"}})
    }

    fn compared(name: &str, reason: ObjectReason) -> Arc<Compared> {
        let obj = cm(name);
        Arc::new(Compared::early(ObjectKey::of(&obj).unwrap(), obj, None, reason, "cm.yaml#1"))
    }

    #[test]
    fn a_pass_failure_names_its_stage_and_says_what_failed_where() {
        let url = crate::config::repo_url::redact("https://bot:hunter2@git.example/fleet.git");
        let fetch = PassFailure::Fetch { url, error: source::FetchError::Task("connection refused".into()) };
        assert_eq!(fetch.stage(), "fetch");
        let text = fetch.to_string();
        assert!(text.starts_with("fetch https://") && text.contains("git.example/fleet.git"), "{text}");
        assert!(!text.contains("hunter2"), "credentials never shown: {text}");
        let render = PassFailure::Render {
            revision: "0123456789abcdef".into(),
            subject: "s".into(),
            error: crate::render::Error::Parse { file: "a.yaml".into(), line: 3, document: 1, message: "bad".into() },
        };
        assert_eq!(render.stage(), "render");
        assert!(render.to_string().starts_with("render 0123456: "), "{render}");
        let boundary = PassFailure::Boundary { app: "web".into(), error: "`[`: unclosed".into() };
        assert_eq!(
            (boundary.stage(), boundary.to_string().as_str()),
            ("boundary", "boundaries of application web: `[`: unclosed")
        );
        let user = "system:serviceaccount:web:deployer".to_string();
        let impersonation = PassFailure::Impersonation { user, error: anyhow::anyhow!("no such user") };
        assert_eq!(impersonation.stage(), "impersonation");
        assert_eq!(impersonation.to_string(), "impersonate system:serviceaccount:web:deployer: no such user");
    }

    #[test]
    fn a_pass_s_timings_start_at_its_clock() {
        let clock = Clock::start(source::Freshness::Now);
        assert_eq!(clock.started_at, status::rfc3339(clock.now));
        let t = clock.timings();
        assert_eq!((t.at.as_str(), t.compare_millis, t.sync_millis), (clock.started_at.as_str(), 0, 0));
    }

    #[test]
    fn a_pass_takes_one_permit_per_object_up_to_the_bound() {
        assert_eq!(objects_weight(0), 1, "an empty render still takes a permit");
        assert_eq!(objects_weight(10), 10);
        assert_eq!(objects_weight(5_000), PASS_OBJECTS_AT_ONCE, "a larger pass runs alone");
    }

    #[test]
    fn only_objects_of_served_kinds_or_awaiting_their_crd_are_remembered_kinds() {
        let served = {
            let mut c = Compared::clone(&compared("a", ObjectReason::Synced));
            let resource = kube::core::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
            c.kind = Some(Kind { resource: Arc::new(resource), namespaced: true });
            Arc::new(c)
        };
        let all = [served, compared("b", ObjectReason::AwaitsCrd), compared("c", ObjectReason::Error("x".into()))];
        let kinds: Vec<(String, String)> = applied_kinds(&all).collect();
        assert_eq!(kinds, [("v1".to_string(), "ConfigMap".to_string()), ("v1".to_string(), "ConfigMap".to_string())]);
    }

    #[test]
    fn a_policy_pass_drops_the_bodies_it_will_not_send() {
        let mut all = vec![compared("same", ObjectReason::Synced), compared("new", ObjectReason::Missing)];
        let items = vec![DesiredItem::new(all[0].key.clone(), false), DesiredItem::new(all[1].key.clone(), true)];
        unsent_dropped(&mut all, &items);
        assert_eq!(all[0].apply, Value::Null, "in sync: nothing to send");
        assert_eq!(all[1].apply, cm("new"), "out of sync: sent by the sync");
    }
}
