//! The running process (`plumb serve`): one actor per application running reconcile
//! passes ([`crate::scheduler`]), one poller per repository triggering those whose
//! revision moved ([`crate::poller`]), the watches that trigger them on drift, the HTTP
//! server (webhooks, API, metrics, probes) and the commit statuses posted after passes.
//! Everything here is wiring: it decides nothing itself.
//!
//! With leader election ([`serve_elected`] and a [`Leadership`] joined once per process,
//! for its [`LeaseOptions`]: a policy reload keeps the shards held) every replica runs
//! the same actors, but a replica runs the passes only of the applications whose shard
//! it holds, each inside that shard's fence ([`crate::fence`]), and forwards the
//! webhooks it receives for the others to their owners (see [`crate::leader`]).

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context as _;
use futures::StreamExt as _;
use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    config::DEFAULT_RECONCILE_INTERVAL,
    forge::Notifier,
    health::HealthStatus,
    leader::{self, Leadership, LeaseOptions},
    metrics::Metrics,
    poller::Poller,
    probes::Probes,
    reconcile::{AppState, Context, Mode},
    scheduler::{Cause, Scheduler, Trigger, jittered},
    server,
    watch::Changed,
    webhook::Dedupe,
};

/// A running server: its address and the tasks to wait for after cancelling.
pub struct ServeHandle {
    /// Bound address of the public listener (webhook).
    pub addr: SocketAddr,
    /// Bound address of the internal listener (status API, metrics; bearer token).
    pub internal_addr: SocketAddr,
    /// Bound address of the probes (`/healthz`, `/readyz`).
    pub probe_addr: SocketAddr,
    /// Actors and the HTTP server.
    pub tracker: TaskTracker,
    /// Scheduler (to trigger passes).
    pub scheduler: Scheduler,
    /// Which applications this replica runs (all, without leader election).
    pub leadership: Leadership,
    /// The previews' queue, which also counts pull request events.
    pub previews: Arc<crate::preview::queue::Queue>,
}

/// [`serve_with`], the internal listener and the probes on free ports of `listen`'s
/// address.
///
/// # Errors
/// As [`serve_with`].
pub async fn serve(ctx: Arc<Context>, listen: SocketAddr, token: CancellationToken) -> anyhow::Result<ServeHandle> {
    let free = SocketAddr::new(listen.ip(), 0);
    serve_with(ctx, Listeners { public: listen, internal: free, probes: free }, token).await
}

/// Where the three HTTP listeners bind (port 0 picks a free port).
#[derive(Debug, Clone, Copy)]
pub struct Listeners {
    /// The webhook (`--listen`).
    pub public: SocketAddr,
    /// The status API and metrics, bearer token required (`--internal-listen`).
    pub internal: SocketAddr,
    /// `/healthz`, `/readyz` (`--probe-listen`).
    pub probes: SocketAddr,
}

impl Listeners {
    /// All three on free ports (port 0) of `ip`.
    pub fn free(ip: std::net::IpAddr) -> Self {
        let free = SocketAddr::new(ip, 0);
        Self { public: free, internal: free, probes: free }
    }

    /// Binds the three sockets.
    ///
    /// # Errors
    /// An address in use or not local, naming which listener.
    pub fn bind(&self) -> anyhow::Result<Bound> {
        let bind = |at: SocketAddr, what: &str| -> anyhow::Result<std::net::TcpListener> {
            let l = std::net::TcpListener::bind(at).with_context(|| format!("listen on {at} ({what})"))?;
            l.set_nonblocking(true).with_context(|| format!("listen on {at} ({what})"))?;
            Ok(l)
        };
        Ok(Bound {
            public: bind(self.public, "webhook")?,
            internal: bind(self.internal, "internal")?,
            probes: bind(self.probes, "probes")?,
        })
    }
}

/// The three listeners of [`Listeners`], bound. [`run`] binds them once and serves each
/// policy it reloads on copies of the same sockets, so a connection made while the
/// server restarts waits in the socket's backlog instead of being refused.
#[derive(Debug)]
pub struct Bound {
    public: std::net::TcpListener,
    internal: std::net::TcpListener,
    probes: std::net::TcpListener,
}

impl Bound {
    /// Copies of the three sockets (the same sockets, new descriptors).
    ///
    /// # Errors
    /// The process is out of file descriptors.
    pub fn try_clone(&self) -> std::io::Result<Self> {
        Ok(Self {
            public: self.public.try_clone()?,
            internal: self.internal.try_clone()?,
            probes: self.probes.try_clone()?,
        })
    }
}

/// Starts the actors, the drift triggers and the three HTTP listeners ([`Listeners`]),
/// until `token` is cancelled.
///
/// # Errors
/// Secret files unreadable, address in use.
pub async fn serve_with(ctx: Arc<Context>, listen: Listeners, token: CancellationToken) -> anyhow::Result<ServeHandle> {
    serve_elected(ctx, listen.bind()?, token, None, None).await
}

/// [`serve_with`], and with `leadership` (an election joined by [`Leadership::elect`],
/// which outlives this serve: a policy reload keeps the shards held) one replica among
/// several: an application's passes run only while this replica holds its shard (see
/// [`crate::leader`]), and every shard held when this serve starts is set up for it as
/// if just taken; with `notify`, what each pass calls for is told to the routed
/// providers (see [`crate::notify`]).
///
/// # Errors
/// Secret files unreadable, the status namespace cannot be prepared.
pub async fn serve_elected(
    ctx: Arc<Context>,
    listen: Bound,
    token: CancellationToken,
    leadership: Option<Leadership>,
    notify: Option<Arc<crate::notify::Notifier>>,
) -> anyhow::Result<ServeHandle> {
    let Bound { public, internal, probes: probe_at } = listen;
    let listener = tokio::net::TcpListener::from_std(public)?;
    let probe_listener = tokio::net::TcpListener::from_std(probe_at)?;
    let internal_listener = tokio::net::TcpListener::from_std(internal)?;
    let receiver = server::receiver(&ctx.config).map_err(anyhow::Error::msg)?;
    let limits = server::Limits::from_settings(&ctx.config.settings);
    let tracker = TaskTracker::new();
    let leadership = leadership.map_or_else(Leadership::always, |l| l.for_serve());
    prepare_status(&ctx).await?;
    if leadership.elected() {
        ctx.keep_watching(Some(owned_apps(&ctx, &leadership)));
    } else {
        mirror_specs(&ctx, &leadership, &[0], &|_| {}).await;
    }
    // with election, an actor starts at its application's first trigger (the take of
    // its shard): a replica runs actors for its share, not for the whole policy
    let probes = Arc::new(if leadership.elected() {
        Probes::lazy(app_intervals(&ctx))
    } else {
        Probes::new(app_intervals(&ctx))
    });
    let scheduler = start_actors(&ctx, &tracker, (&leadership, notify), &probes, token.clone());
    start_pollers(&ctx, &tracker, &leadership, &scheduler, &token);
    if leadership.elected() {
        follow_leadership(&ctx, &tracker, (&leadership, &scheduler), &token);
    }
    let s = scheduler.clone();
    tracker.spawn(leader::watch_requests(
        ctx.cluster.client().clone(),
        ctx.config.settings.status_namespace.clone(),
        ctx.controls(),
        leadership.clone(),
        move |app| {
            s.trigger(app, Trigger::Manual);
        },
        token.clone(),
    ));
    tracker.spawn(crate::decommission::run(ctx.clone(), leadership.clone(), token.clone()));
    if let Some(rx) = ctx.take_drift_receiver() {
        tracker.spawn(forward_drift(rx, scheduler.clone(), token.clone()));
    }
    let addr = listener.local_addr()?;
    let probe_addr = probe_listener.local_addr()?;
    let watches = Arc::downgrade(&ctx);
    let unsynced = move || watches.upgrade().map_or_else(Vec::new, |c| c.watches_unsynced());
    tracker.spawn(server::serve_probes(probe_listener, crate::probes::router(probes, unsynced), token.clone()));
    let internal_addr = internal_listener.local_addr()?;
    let shown = Arc::new(crate::preview::page::Shown::default());
    let internal_state = server::InternalState {
        reviewer: Arc::new(crate::auth::Reviewer::new(ctx.cluster.client().clone())),
        metrics: ctx.metrics.clone(),
        published: ctx.published(),
        store: ctx.store.clone(),
        previews: shown.clone(),
    };
    tracker.spawn(server::serve_internal(internal_listener, internal_state, token.clone()));
    let (intake, queue) =
        server::Intake::new(receiver, Some(Dedupe::default()), limits.queue_capacity, ctx.metrics.clone());
    let previews = Arc::new(crate::preview::queue::Queue::default());
    tracker.spawn(crate::preview::run::run(ctx.clone(), previews.clone(), shown, token.clone()));
    let intake = intake.with_buffered_bytes(limits.max_buffered_bytes).with_previews(previews.clone());
    let forward =
        Forward { client: ctx.cluster.client().clone(), namespace: ctx.config.settings.status_namespace.clone() };
    tracker.spawn(dispatch(queue, scheduler.clone(), leadership.clone(), Some(forward), token.clone()));
    let state = server::AppState { intake: Arc::new(intake), max_body_bytes: limits.max_body_bytes };
    let app = server::router(state, &limits);
    tracker.spawn(server::serve_http(listener, app, limits, token));
    tracker.close();
    Ok(ServeHandle { addr, internal_addr, probe_addr, tracker, scheduler, leadership, previews })
}

/// The application resources (`applications.plumb.dev`): the definition installed when
/// missing or older, status ConfigMaps of earlier versions moved. Failures are logged:
/// passes still run (and say so when they cannot write their status).
///
/// # Errors
/// The cluster's definition is newer than this plumb's
/// ([`crate::status::store::Error::NewerDefinition`]): plumb does not start.
async fn prepare_status(ctx: &Context) -> anyhow::Result<()> {
    match ctx.store.ensure_definition().await {
        Ok(()) => {}
        Err(e @ crate::status::store::Error::NewerDefinition { .. }) => return Err(e.into()),
        Err(e) => {
            tracing::error!("{e}");
            return Ok(());
        }
    }
    match ctx.store.migrate().await {
        Ok(moved) if !moved.is_empty() => {
            tracing::info!("status of {} moved to applications.plumb.dev", moved.join(", "))
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("moving status ConfigMaps to applications.plumb.dev: {e}"),
    }
    Ok(())
}

/// How many `spec` mirrors ([`mirror_specs`]) are in flight at once: each is a
/// server-side apply when the declaration changed (read from the primed resources,
/// else by a GET).
const MIRRORS_IN_FLIGHT: usize = 8;

/// The resources of the applications of `shards` (just taken) read by one paged LIST
/// ([`crate::status::store::Store::prime`]: their first passes read no resource
/// again), then each one's `spec` set to the policy's declaration where it differs,
/// inside its shard's fence, [`MIRRORS_IN_FLIGHT`] at a time, and `done(app)` called
/// (its pass may start), also when its spec could not be set. Failures are logged (a
/// failed LIST leaves each read to a GET).
async fn mirror_specs<F: Fn(&str) + Sync>(ctx: &Context, leadership: &Leadership, shards: &[u32], done: &F) {
    let apps: Vec<&crate::config::Application> =
        (ctx.config.applications.iter()).filter(|app| shards.contains(&leadership.shard_of(&app.name.value))).collect();
    if let Err(e) = ctx.store.prime(apps.iter().map(|a| a.name.value.as_str())).await {
        tracing::warn!("reading the applications' resources at once: {e}");
    }
    futures::stream::iter(apps)
        .for_each_concurrent(MIRRORS_IN_FLIGHT, |app| async move {
            // a fence closed for now (a renew late) may open again in the same hold: the
            // pass then starts from the trigger `done` sends (its spec waits for a next take)
            let Some(fence) = leadership.fence(&app.name.value) else { return done(&app.name.value) };
            let repo = ctx.config.repositories.iter().find(|r| r.name.value == app.repository.value);
            let env = ctx.config.environments.iter().find(|e| e.name.value == app.environment.value);
            let record = env.map(|env| crate::plan::decommission::Record::of(app, env));
            let mut spec = serde_json::json!({
                "repository": app.repository.value,
                "repoURL": repo.map(|r| crate::config::repo_url::redact(&r.url.value)),
                "revision": app.revision.value,
                "path": app.path.value,
                "namespace": app.namespace.value,
                "environment": app.environment.value,
                crate::status::store::DECOMMISSION_FIELD: record,
            });
            if let (Some(set), Some(m)) = (&app.application_set, spec.as_object_mut()) {
                m.insert("applicationSet".into(), set.clone().into());
            }
            if let Err(e) = crate::fence::within(Some(fence), ctx.store.mirror(&app.name.value, &spec)).await {
                tracing::warn!(app = %app.name.value, "{e}");
            }
            done(&app.name.value);
        })
        .await;
}

/// Each application with its environment's reconcile interval.
fn app_intervals(ctx: &Context) -> Vec<(String, std::time::Duration)> {
    let c = &ctx.config;
    c.applications.iter().map(|app| (app.name.value.clone(), c.interval_of(app))).collect()
}

/// One [`Poller`] per repository: every interval (jittered) it asks the remote for its
/// refs, within the source time limit, and triggers the applications whose revision
/// moved (those this replica runs). A replica that holds no shard asks nothing (it
/// triggers a shard's applications when it takes the shard).
fn start_pollers(
    ctx: &Arc<Context>,
    tracker: &TaskTracker,
    leadership: &Leadership,
    scheduler: &Scheduler,
    token: &CancellationToken,
) {
    let limit = ctx.config.settings.limits.source_timeout();
    for mut poller in Poller::for_config(&ctx.config) {
        let (ctx, leadership, scheduler, token) = (ctx.clone(), leadership.clone(), scheduler.clone(), token.clone());
        tracker.spawn(async move {
            loop {
                if leadership.holds_any() {
                    match tokio::time::timeout(limit, poller.round(ctx.sources())).await {
                        Ok(Ok(moved)) => {
                            // paused: held, a renew late; the pass asks again once it lands
                            for app in moved.iter().filter(|a| leadership.owns(a) || leadership.paused(a)) {
                                tracing::debug!(app = %app, repository = poller.repository(), "revision moved");
                                scheduler.trigger(app, Trigger::Moved);
                            }
                        }
                        Ok(Err(e)) => tracing::warn!(repository = poller.repository(), "polling: {e}"),
                        Err(_) => tracing::warn!(
                            repository = poller.repository(),
                            "polling: no answer in {}",
                            crate::config::shown_duration(limit)
                        ),
                    }
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(jittered(poller.interval())) => {}
                }
            }
        });
    }
}

/// With leader election: each time this replica takes or releases shards, the watch
/// cache keeps their applications' objects alone ([`Context::keep_watching`]). Each take
/// is then set up on its own task (a shard taken meanwhile does not wait for it): the
/// `spec` of each application taken is set ([`mirror_specs`]), then it is marked set up
/// ([`Leadership::set_up`]; until then its passes do nothing) and gets one pass
/// ([`Trigger::Take`]: it reads refs asked for after the take, and starts from its
/// Application status: see [`crate::reconcile::AppState::held_under`]).
fn follow_leadership(
    ctx: &Arc<Context>,
    tracker: &TaskTracker,
    (leadership, scheduler): (&Leadership, &Scheduler),
    token: &CancellationToken,
) {
    let (ctx, mut l, s, t, tasks) =
        (ctx.clone(), leadership.clone(), scheduler.clone(), token.clone(), tracker.clone());
    tracker.spawn(async move {
        let mut before: Vec<(u32, u64)> = vec![];
        loop {
            tokio::select! {
                () = t.cancelled() => return,
                taken = l.taken() => {
                    let Some(held) = taken else { return };
                    // new holds: shards taken, and shards lost and taken again in one
                    // round (the same shard, a new generation: set up again)
                    let new: Vec<u32> = held.iter().filter(|h| !before.contains(h)).map(|(s, _)| *s).collect();
                    before = held;
                    // every application of a shard held stays (one being decommissioned
                    // too, which the policy no longer names)
                    let shards: Vec<u32> = before.iter().map(|(s, _)| *s).collect();
                    ctx.published().retain(|app| shards.contains(&l.shard_of(app)));
                    ctx.keep_watching(Some(owned_apps(&ctx, &l)));
                    if new.is_empty() {
                        continue;
                    }
                    let (ctx, l, s) = (ctx.clone(), l.clone(), s.clone());
                    // after the hold began: the refs the take's passes read are newer than
                    // any the shard's previous holder saw while its hold lasted
                    let at = std::time::Instant::now();
                    tasks.spawn(async move {
                        let generations: std::collections::HashMap<u32, u64> =
                            new.iter().filter_map(|shard| Some((*shard, l.generation(*shard)?))).collect();
                        // the spec before the pass: a pass saving a status of a missing
                        // resource creates it with an empty spec (the same field manager),
                        // which would clear a spec set meanwhile
                        let done = |app: &str| {
                            if let Some(generation) = generations.get(&l.shard_of(app)) {
                                l.set_up(app, *generation);
                                s.trigger(app, Trigger::Take { at });
                            }
                        };
                        mirror_specs(&ctx, &l, &new, &done).await;
                    });
                }
            }
        }
    });
}

/// The applications of the shards this replica holds now (open or not yet ended): the
/// objects its watch cache keeps.
fn owned_apps(ctx: &Context, leadership: &Leadership) -> std::collections::HashSet<String> {
    let held = leadership.held();
    let apps = ctx.config.applications.iter().map(|a| &a.name.value);
    apps.filter(|a| held.contains(&leadership.shard_of(a))).cloned().collect()
}

/// Where a replica sends the webhooks it received for applications it does not run:
/// their owners, through the applications' resources ([`leader::forward`]).
pub struct Forward {
    /// plumb's client.
    pub client: kube::Client,
    /// plumb's status namespace.
    pub namespace: String,
}

/// Drains the webhook queue until it closes or `token` is cancelled: the applications
/// this replica runs trigger its actors (triggers coalesce in the scheduler: one pass
/// running, one waiting per application, so this never blocks on a busy application);
/// the others are forwarded to their owners (with no `forward`, dropped, logged).
pub async fn dispatch(
    mut queue: mpsc::Receiver<server::Queued>,
    scheduler: Scheduler,
    leadership: Leadership,
    forward: Option<Forward>,
    token: CancellationToken,
) {
    loop {
        let item = tokio::select! {
            () = token.cancelled() => return,
            item = queue.recv() => match item {
                Some(item) => item,
                None => return,
            },
        };
        // paused: held, a renew late; the pass asks again once it lands
        let (mine, theirs): (Vec<&String>, Vec<&String>) =
            item.apps.iter().partition(|app| leadership.owns(app) || leadership.paused(app));
        for app in mine {
            scheduler.trigger(app, Trigger::Webhook { received: item.received });
        }
        let Some(f) = &forward else {
            for app in theirs {
                tracing::warn!(app = %app, "webhook dropped: not run here, and nowhere to forward it");
            }
            continue;
        };
        // a push to a repository many applications share names them all: forwarded
        // side by side, each within FORWARD_TIMEOUT
        let leadership = &leadership;
        futures::stream::iter(theirs)
            .for_each_concurrent(FORWARDS_IN_FLIGHT, |app| async move {
                let shard = leadership.shard_of(app);
                match tokio::time::timeout(FORWARD_TIMEOUT, leader::forward(&f.client, &f.namespace, app)).await {
                    Ok(Ok(true)) => tracing::info!(app = %app, shard, "webhook forwarded to the replica running it"),
                    Ok(Ok(false)) => {
                        tracing::warn!(app = %app, shard, "webhook not forwarded: the application has no resource yet")
                    }
                    Ok(Err(e)) => tracing::warn!(app = %app, "forwarding a webhook: {e}"),
                    Err(_) => tracing::warn!(
                        app = %app,
                        "forwarding a webhook: no answer within {} s",
                        FORWARD_TIMEOUT.as_secs()
                    ),
                }
            })
            .await;
    }
}

/// How many webhook forwards one delivery has in flight at most.
const FORWARDS_IN_FLIGHT: usize = 16;

/// How long one webhook forward may take (a PATCH of the application's resource).
const FORWARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How often `plumb serve` asks the repositories of `directories` applicationSets
/// whether they moved, at least (seconds: 15; the reload tick when longer).
const SETS_ASK: std::time::Duration = std::time::Duration::from_secs(15);

/// What `plumb serve` runs with, besides the cluster.
#[derive(Debug, Clone)]
pub struct Process {
    /// `--kubeconfig`, else the usual inference ([`crate::cluster::config`]).
    pub kubeconfig: Option<std::path::PathBuf>,
    /// `--context`, else the kubeconfig's current context.
    pub context: Option<String>,
    /// Policy file (watched: see [`crate::reload`]).
    pub policy: std::path::PathBuf,
    /// Directory of the Git mirrors.
    pub cache_dir: std::path::PathBuf,
    /// Addresses of the three listeners.
    pub listen: Listeners,
    /// Shards and their Leases, when more than one replica may run.
    pub lease: Option<LeaseOptions>,
    /// How often the policy file is read again.
    pub reload_every: std::time::Duration,
    /// Slack-compatible webhook told of failed and refused syncs and Degraded health,
    /// besides the policy's `notifications:` (see [`crate::notify::with_notify_url`]).
    pub notify_url: Option<String>,
}

/// Resolves when a Secret of `versions` changes (read every `every`); never when there
/// are none.
async fn secret_changed(
    client: &kube::Client,
    namespace: &str,
    versions: &crate::secret_refs::Versions,
    every: std::time::Duration,
) {
    if versions.is_empty() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(every).await;
        if crate::secret_refs::changed(client, namespace, versions).await {
            return;
        }
    }
}

/// Runs `plumb serve` with the policy of `process` until `shutdown` resolves (a replica
/// that loses a shard goes on with the others). When the policy file changes and the new one is valid, the actors,
/// watches and HTTP server stop (letting running passes finish) and start again with
/// it, on the same sockets (bound once: a connection made meanwhile waits to be
/// accepted); an invalid one is rejected and the running policy stays
/// (see [`crate::reload`]). Metrics are kept across reloads.
///
/// # Errors
/// The first policy is invalid, the cluster is unreachable, the address is in use.
pub async fn run(
    process: Process,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut config = crate::config::load(&process.policy)?;
    for w in crate::config::warnings(&config) {
        tracing::warn!(file = %process.policy.display(), "{w}");
    }
    // what each applicationSet generated in the policy in force (see crate::generators)
    let mut generated = std::collections::BTreeMap::new();
    let mut watch = crate::reload::PolicyWatch::new(&process.policy, process.reload_every);
    let bound = process.listen.bind()?;
    let mut shutdown = std::pin::pin!(shutdown);
    if let Some(url) = &process.notify_url {
        let slack = crate::config::ProviderType::Slack;
        crate::config::notifications::check_url(slack, url).map_err(|e| anyhow::anyhow!("--notify-url: {e}"))?;
    }
    // what was told, kept across policy reloads (see crate::notify::decide)
    let told = Arc::new(std::sync::Mutex::new(crate::notify::Memory::default()));
    // the election outlives policy reloads: a reload lets no shard go (another replica
    // would take it meanwhile, and hand it back after), so it moves no application
    // (joined once the first policy is ready to be served: a replica takes no shard it
    // cannot run yet)
    let (election, elected_until) = (TaskTracker::new(), CancellationToken::new());
    let mut leadership: Option<Leadership> = None;
    let served: anyhow::Result<()> = async {
        loop {
            let cluster = crate::cluster::Cluster::connect_with(
                process.kubeconfig.as_deref(),
                process.context.as_deref(),
                crate::kube_metrics::factory(metrics.clone()),
            )
            .await?;
            if let (Some(lease), Some(set)) = (&process.lease, &config.settings.lease_namespace)
                && lease.namespace != *set
            {
                tracing::error!(
                    "settings.leaseNamespace is now {set}: the Leases stay in {} until the replicas restart (both are protected)",
                    lease.namespace
                );
            }
            // Secrets referenced by the policy, read into files (see crate::secret_refs)
            let mut running = config.clone();
            let secrets = if crate::secret_refs::any(&running) {
                let dir = process.cache_dir.join(".secrets");
                crate::secret_refs::materialize(cluster.client(), &mut running, &dir).await?
            } else {
                crate::secret_refs::Versions::new()
            };
            if generated.is_empty() {
                // a process's first expansion: what the sets generated before, from their resources
                let store = crate::status::store::Store::new(cluster.client().clone(), &running.settings.status_namespace);
                generated = crate::generators::recorded(&store, &running).await;
            }
            let mut sets =
                crate::generators::Expander::new(&process.cache_dir, &running, process.reload_every.max(SETS_ASK));
            sets.expand(&mut running, &generated, true, &metrics).await;
            generated = crate::config::generators::generated_by_set(&running);
            // the Leases' namespace, if another: never written from Git either
            running.settings.serving_lease_namespace = process.lease.as_ref().map(|l| l.namespace.clone());
            let running = Arc::new(running);
            let mut notifications = running.notifications.clone();
            if let Some(url) = &process.notify_url {
                crate::notify::with_notify_url(&mut notifications, url);
            }
            let notify = crate::notify::Notifier::start(&notifications, told.clone(), &metrics).map(Arc::new);
            let client = cluster.client().clone();
            let ctx = Context::new(cluster, running.clone(), process.cache_dir.clone(), metrics.clone())
                .with_watches()
                .with_policy_rejection(watch.rejected());
            ctx.store.ensure_namespace().await?;
            let ctx = ctx.with_mask_key(mask_key(&client, &config.settings.status_namespace, true).await?);
            let token = CancellationToken::new();
            let ctx = Arc::new(ctx);
            if let (None, Some(opts)) = (&leadership, &process.lease) {
                let joined = Leadership::elect(ctx.cluster.client().clone(), opts, &election, elected_until.clone());
                leadership = Some(joined.await?);
            }
            let handle =
                serve_elected(ctx.clone(), bound.try_clone()?, token.clone(), leadership.clone(), notify.clone())
                    .await?;
            tracing::info!(
                "plumb serving: webhook on http://{}, status API and metrics on http://{} (bearer token), probes on http://{}",
                handle.addr,
                handle.internal_addr,
                handle.probe_addr
            );
            let contained = tokio::task::spawn_blocking(crate::render::sandbox::isolation).await.ok();
            match contained.and_then(crate::render::sandbox::Isolation::missing) {
                Some(gap) => tracing::warn!("render tools not fully contained: {gap}"),
                None => tracing::info!("render tools contained: own network namespace, memory ceiling and CPU budget"),
            }
            let next = tokio::select! {
                () = &mut shutdown => None,
                c = watch.next_valid(&metrics) => Some(c),
                () = sets.moved(&running, (ctx.sources(), &handle.previews), process.reload_every, &metrics) => {
                    Some(config.clone())
                }
                () = secret_changed(&client, &config.settings.status_namespace, &secrets, process.reload_every) => {
                    Some(config.clone())
                }
            };
            if next.is_none() {
                // stopping: every write stops and the shards go now, not after the passes
                // still running end (the others take over at once)
                elected_until.cancel();
            }
            token.cancel();
            handle.tracker.wait().await;
            match next {
                Some(c) => config = c,
                None => return Ok(()),
            }
        }
    }
    .await;
    // every shard and the membership released, so that the others take over at once
    elected_until.cancel();
    election.close();
    election.wait().await;
    served
}

/// One actor per application: a [`Mode::Policy`] pass, then the commit status it
/// calls for (in order, before the next pass). A pass that synced or left something
/// Progressing asks for the next look soon.
fn start_actors(
    ctx: &Arc<Context>,
    tracker: &TaskTracker,
    (leadership, outgoing): (&Leadership, Option<Arc<crate::notify::Notifier>>),
    probes: &Arc<Probes>,
    token: CancellationToken,
) -> Scheduler {
    let mut notifiers = std::collections::HashMap::new();
    for app in &ctx.config.applications {
        match Notifier::for_app(&ctx.config, &app.name.value) {
            Ok(Some(n)) => {
                notifiers.insert(app.name.value.clone(), Arc::new(n));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(app = %app.name.value, "commit statuses off: {e}"),
        }
    }
    let notifiers = Arc::new(notifiers);
    let apps = app_intervals(ctx);
    let intervals: Arc<std::collections::HashMap<String, std::time::Duration>> =
        Arc::new(apps.iter().cloned().collect());
    let first = FirstPasses::new(apps.iter().map(|(a, _)| a.clone()));
    let elected = leadership.elected();
    let (pass_ctx, leadership, probes) = (ctx.clone(), leadership.clone(), probes.clone());
    let handle: Arc<std::sync::OnceLock<Scheduler>> = Arc::default();
    let own = handle.clone();
    // the applications whose pass, skipped while their fence was closed for now, asks
    // again in a second, with the triggers of the passes skipped meanwhile, merged
    let asking: Arc<std::sync::Mutex<std::collections::HashMap<String, Trigger>>> = Arc::default();
    let pass = move |app: String, cause: Cause, mut state: AppState| {
        let (ctx, notifiers, leadership, probes, outgoing, first) =
            (pass_ctx.clone(), notifiers.clone(), leadership.clone(), probes.clone(), outgoing.clone(), first.clone());
        let asking = asking.clone();
        let scheduler = own.clone();
        let interval = intervals.get(&app).copied().unwrap_or(DEFAULT_RECONCILE_INTERVAL);
        let fresh = crate::poller::freshness(cause, interval);
        async move {
            // the passes of an application another replica runs, or of a shard whose
            // take is not set up yet, do nothing: they must not use up the first passes'
            // bound this one needs once it runs them
            let fence = leadership.pass_fence(&app);
            let _permit = if fence.is_some() { first.permit(&app).await } else { None };
            probes.started(&app);
            let settling = if let Some(fence) = fence {
                state.held_under(fence.hold.generation);
                let before = ctx.published().status(&app);
                let mode = mode_of(cause);
                let pass = policy_pass(&ctx, &mut state, &notifiers, outgoing.as_deref(), (&app, mode), fresh);
                let passed = crate::fence::within(Some(fence), pass).await;
                // a failed pass is looked at again soon, backing off (not at the next poll)
                let failures = state.failed(passed.is_none());
                if failures > 0
                    && let Some(s) = scheduler.get()
                {
                    let after = crate::scheduler::retry_after(failures, interval);
                    tracing::info!(app = %app, "the pass is tried again in {}", crate::config::shown_duration(after));
                    s.wake_at(&app, std::time::Instant::now() + after);
                }
                let settling = passed.unwrap_or(false);
                if let (Some(s), Some(after)) = (scheduler.get(), ctx.published().status(&app)) {
                    after_gates(&ctx.config, s, before.as_deref(), &after);
                }
                // its fence closed for now during the pass (its writes were dropped)
                if leadership.paused(&app)
                    && let Some(s) = scheduler.get()
                {
                    ask_again(&asking, s, &app, cause);
                }
                settling
            } else {
                // paused (or its renew just landed: the fence opened since the look above)
                if (leadership.paused(&app) || leadership.pass_fence(&app).is_some())
                    && let Some(s) = scheduler.get()
                {
                    ask_again(&asking, s, &app, cause);
                }
                false
            };
            probes.finished(&app);
            (settling, state)
        }
    };
    let metrics = trigger_metrics(ctx.metrics.clone());
    let scheduler = if elected {
        Scheduler::start_lazily_with(apps, pass, metrics, tracker, token)
    } else {
        Scheduler::start_with(apps, pass, metrics, tracker, token)
    };
    let _ = handle.set(scheduler.clone());
    scheduler
}

/// Asks for `app`'s pass again in a second, with `cause` (its trigger; another cause
/// asks as [`Trigger::Manual`]): its fence is closed for now (a renew late), so what
/// asked for the pass is not lost if the next renew opens the fence again; if the hold
/// ends instead, the next holder's take passes every application of the shard. One such
/// request per application at a time (`asking`), answering every cause met meanwhile,
/// merged (a push after a drift still fetches).
fn ask_again(
    asking: &Arc<std::sync::Mutex<std::collections::HashMap<String, Trigger>>>,
    s: &Scheduler,
    app: &str,
    cause: Cause,
) {
    let again = match cause {
        Cause::Triggered(t) => t,
        _ => Trigger::Manual,
    };
    let first = asking.lock().is_ok_and(|mut a| match a.entry(app.to_string()) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            let merged = e.get().merge(again);
            e.insert(merged);
            false
        }
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(again);
            true
        }
    });
    if !first {
        return;
    }
    tracing::info!(app = %app, "a renew of this application's shard is late: its pass is asked again in a second");
    let (app, asking, s) = (app.to_string(), asking.clone(), s.clone());
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        if let Some(t) = asking.lock().ok().and_then(|mut a| a.remove(&app)) {
            s.trigger(&app, t);
        }
    });
}

/// After a pass of application `after.app`: when it became ready for its dependents
/// ([`crate::plan::depends::not_ready`]: Synced and Healthy at a revision it was not
/// ready at before, `before`), a pass of each application that depends on it
/// ([`Trigger::Dependency`]); when its sync windows change at a known time, its next
/// pass then ([`Scheduler::wake_at`]).
fn after_gates(
    config: &crate::config::Config,
    scheduler: &Scheduler,
    before: Option<&crate::status::AppStatus>,
    after: &crate::status::AppStatus,
) {
    let app = after.app.as_str();
    let ready = |s: &crate::status::AppStatus| crate::plan::depends::not_ready(app, Some(s)).is_none();
    let newly = ready(after) && before.is_none_or(|b| !ready(b) || b.revision != after.revision);
    if newly {
        for d in config.applications.iter().filter(|a| a.depends_on.iter().any(|d| d.value == app)) {
            tracing::debug!(app = %d.name.value, dependency = app, "dependency ready: pass");
            scheduler.trigger(&d.name.value, Trigger::Dependency);
        }
    }
    let next = after.sync_windows.as_ref().and_then(|w| w.next_change.as_deref());
    if let Some(at) = next.and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
        let left = jiff::Timestamp::now().duration_until(at);
        let left = std::time::Duration::try_from(left).unwrap_or_default();
        // a second late: the window has changed by then
        scheduler.wake_at(app, std::time::Instant::now() + left + std::time::Duration::from_secs(1));
    }
}

/// How many applications' first passes run at once when `plumb serve` starts: every
/// application starts together, and a first pass holds its whole render and comparison
/// (with 1,000 applications, all of them at once set the process's peak memory).
/// Later passes are not bounded (they are spread by their triggers and poll jitter).
pub const FIRST_PASSES_AT_ONCE: usize = 8;

/// The first pass of each application waits for one of [`FIRST_PASSES_AT_ONCE`]
/// permits; later passes take none.
#[derive(Clone)]
struct FirstPasses {
    waiting: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    permits: Arc<tokio::sync::Semaphore>,
}

impl FirstPasses {
    fn new(apps: impl Iterator<Item = String>) -> Self {
        Self {
            waiting: Arc::new(std::sync::Mutex::new(apps.collect())),
            permits: Arc::new(tokio::sync::Semaphore::new(FIRST_PASSES_AT_ONCE)),
        }
    }

    /// A permit for `app`'s first pass (held while it runs); `None` for later passes.
    async fn permit(&self, app: &str) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let first = self.waiting.lock().is_ok_and(|mut w| w.remove(app));
        if first { self.permits.clone().acquire_owned().await.ok() } else { None }
    }
}

/// The mode of a pass started by `cause`: [`Mode::Observe`] (compare, read health,
/// record; never sync) when only a child of a workload changed ([`Trigger::Health`]),
/// else [`Mode::Policy`].
fn mode_of(cause: Cause) -> Mode {
    if cause == Cause::Triggered(Trigger::Health) { Mode::Observe } else { Mode::Policy }
}

/// One pass of `app` in `mode` ([`mode_of`]) from its actor's `state`, reading refs as
/// recent as `fresh` asks, and the commit status it calls for: whether things are
/// settling, `None` when the pass failed (logged).
async fn policy_pass(
    ctx: &Context,
    state: &mut AppState,
    notifiers: &std::collections::HashMap<String, Arc<Notifier>>,
    outgoing: Option<&crate::notify::Notifier>,
    (app, mode): (&str, Mode),
    fresh: crate::source::Freshness,
) -> Option<bool> {
    // A refresh request seen before the pass starts is answered once the pass has saved
    // its status: `plumb refresh` then reads the result. (A sync request is answered in
    // the status itself, `syncRequest`.)
    let asked = match ctx.controls_of(app).await {
        Ok(c) => c.unanswered_refresh(),
        Err(e) => {
            tracing::debug!(app = %app, "reading pass requests: {e}");
            None
        }
    };
    let passed = ctx.pass(state, app, mode, None, fresh).await;
    if let Some(value) = asked
        && let Err(e) = ctx.store.acknowledge(app, &value).await
    {
        tracing::warn!(app = %app, "acknowledging a pass request: {e}");
    }
    match passed {
        Ok(r) => {
            tracing::debug!(app = %app, sync = %r.status.sync, health = %r.status.health, "pass done");
            if let Some(o) = outgoing {
                o.after_pass(&r.status, r.sync.as_ref());
            }
            if let Some(n) = notifiers.get(app) {
                n.after_pass(app, &r.status, r.sync.as_ref()).await;
            }
            Some(r.sync.is_some() || r.status.health == HealthStatus::Progressing)
        }
        Err(e) => {
            tracing::warn!(app = %app, "pass failed: {e}");
            None
        }
    }
}

/// What the scheduler calls when a trigger starts a pass: records how long a webhook
/// waited (`plumb_webhook_to_pass_seconds`).
pub fn trigger_metrics(metrics: Arc<Metrics>) -> impl Fn(Trigger) + Clone + Send + Sync + 'static {
    move |trigger| {
        if let Trigger::Webhook { received } = trigger {
            metrics.webhook_to_pass_seconds.observe(received.elapsed().as_secs_f64());
        }
    }
}

/// Turns what the watches saw change into triggers, until `token` is cancelled: an
/// application's object, [`Trigger::Drift`]; a child of its workloads,
/// [`Trigger::Health`].
async fn forward_drift(mut rx: mpsc::UnboundedReceiver<Changed>, scheduler: Scheduler, token: CancellationToken) {
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            m = rx.recv() => match m {
                Some(changed) => {
                    let why = match changed { Changed::Object(_) => Trigger::Drift, Changed::Child(_) => Trigger::Health };
                    scheduler.trigger(changed.app(), why);
                }
                None => return,
            },
        }
    }
}

/// The installation's key sensitive values are marked with
/// ([`crate::compare::sensitive::MaskKey`]): `data.key` of the Secret
/// [`MASK_KEY_SECRET`](crate::compare::sensitive::MASK_KEY_SECRET) in plumb's namespace
/// `namespace`. With `create` (`plumb serve`) a missing Secret is created with 32 random
/// bytes (another replica creating it first is read back); without (the CLI's local
/// commands) a Secret that is missing or that the caller may not read gives no key,
/// and marks print as `(sensitive)`.
///
/// # Errors
/// The read or create failed (`plumb serve` lacks `get`/`create` on that Secret, see
/// deploy/base/role.yaml), or the Secret holds fewer than 32 bytes under `key`.
pub async fn mask_key(
    client: &kube::Client,
    namespace: &str,
    create: bool,
) -> anyhow::Result<crate::compare::sensitive::MaskKey> {
    use crate::compare::sensitive::{MASK_KEY_FIELD, MASK_KEY_SECRET, MaskKey};
    use k8s_openapi::{ByteString, api::core::v1::Secret};
    let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let what = format!("Secret {namespace}/{MASK_KEY_SECRET}");
    let found = match api.get_opt(MASK_KEY_SECRET).await {
        Ok(found) => found,
        Err(kube::Error::Api(s)) if !create && s.code == 403 => return Ok(MaskKey::none()),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("read {what}"))),
    };
    let secret = match found {
        Some(s) => s,
        None if !create => return Ok(MaskKey::none()),
        None => {
            let bytes: [u8; 32] = rand::random();
            let fresh = Secret {
                metadata: kube::core::ObjectMeta { name: Some(MASK_KEY_SECRET.into()), ..Default::default() },
                data: Some([(MASK_KEY_FIELD.to_string(), ByteString(bytes.to_vec()))].into()),
                type_: Some("Opaque".into()),
                ..Default::default()
            };
            match api.create(&kube::api::PostParams::default(), &fresh).await {
                Ok(s) => s,
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    api.get(MASK_KEY_SECRET).await.with_context(|| format!("read {what}"))?
                }
                Err(e) => return Err(anyhow::Error::new(e).context(format!("create {what}"))),
            }
        }
    };
    let key = secret.data.as_ref().and_then(|d| d.get(MASK_KEY_FIELD)).map(|b| b.0.as_slice()).unwrap_or_default();
    anyhow::ensure!(
        key.len() >= 32,
        "{what}: data.{MASK_KEY_FIELD} holds {} bytes; the mask key needs at least 32",
        key.len()
    );
    Ok(MaskKey::new(key))
}
