//! The running process (`plumb serve`): one actor per application running reconcile
//! passes ([`crate::scheduler`]), the watches that trigger them on drift, the HTTP
//! server (webhooks, API, metrics, probes) and the commit statuses posted after passes.
//! Everything here is wiring: it decides nothing itself.

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context as _;
use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    config::{DEFAULT_RECONCILE_INTERVAL, Environment},
    forge::Notifier,
    health::HealthStatus,
    metrics::Metrics,
    reconcile::{Context, Mode},
    scheduler::{Scheduler, Trigger},
    server,
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

/// Starts the actors, the drift triggers and the three HTTP listeners ([`Listeners`]),
/// until `token` is cancelled.
///
/// # Errors
/// Secret files unreadable, address in use.
pub async fn serve_with(ctx: Arc<Context>, listen: Listeners, token: CancellationToken) -> anyhow::Result<ServeHandle> {
    let Listeners { public: listen, internal, probes } = listen;
    // A rule that matches no served kind is most likely a typo (`app` for `apps`).
    let rules = ctx
        .config
        .environments
        .iter()
        .flat_map(|e| &e.ignore_differences)
        .chain(ctx.config.applications.iter().flat_map(|a| &a.ignore_differences));
    for r in rules {
        if !ctx.cluster.serves_kind_like(r.group.as_deref(), &r.kind).await {
            tracing::warn!(group = ?r.group, kind = %r.kind, "ignoreDifferences rule matches no kind the cluster serves");
        }
    }
    let receiver = server::receiver(&ctx.config).map_err(anyhow::Error::msg)?;
    let limits = server::Limits::from_settings(&ctx.config.settings);
    let tracker = TaskTracker::new();
    let scheduler = start_actors(&ctx, &tracker, token.clone());
    if let Some(rx) = ctx.take_drift_receiver() {
        tracker.spawn(forward_drift(rx, scheduler.clone(), token.clone()));
    }
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let probe_listener =
        tokio::net::TcpListener::bind(probes).await.with_context(|| format!("listen on {probes} (probes)"))?;
    let probe_addr = probe_listener.local_addr()?;
    tracker.spawn(server::serve_probes(probe_listener, token.clone()));
    let internal_listener =
        tokio::net::TcpListener::bind(internal).await.with_context(|| format!("listen on {internal} (internal)"))?;
    let internal_addr = internal_listener.local_addr()?;
    let internal_state = server::InternalState {
        reviewer: Arc::new(crate::auth::Reviewer::new(ctx.cluster.client().clone())),
        metrics: ctx.metrics.clone(),
        ctx: ctx.clone(),
    };
    tracker.spawn(server::serve_internal(internal_listener, internal_state, token.clone()));
    let (intake, queue) =
        server::Intake::new(receiver, Some(Dedupe::default()), limits.queue_capacity, ctx.metrics.clone());
    let intake = intake.with_buffered_bytes(limits.max_buffered_bytes);
    tracker.spawn(server::dispatch(queue, scheduler.clone(), token.clone()));
    let state = server::AppState { intake: Arc::new(intake), max_body_bytes: limits.max_body_bytes };
    let app = server::router(state, &limits);
    tracker.spawn(server::serve_http(listener, app, limits, token));
    tracker.close();
    Ok(ServeHandle { addr, internal_addr, probe_addr, tracker, scheduler })
}

/// One actor per application: a [`Mode::Policy`] pass, then the commit status it
/// calls for (in order, before the next pass). A pass that synced or left something
/// Progressing asks for the next look soon.
fn start_actors(ctx: &Arc<Context>, tracker: &TaskTracker, token: CancellationToken) -> Scheduler {
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
    let apps = ctx.config.applications.iter().map(|app| {
        let interval = ctx
            .config
            .environments
            .iter()
            .find(|e| e.name.value == app.environment.value)
            .map_or(DEFAULT_RECONCILE_INTERVAL, Environment::interval);
        (app.name.value.clone(), interval)
    });
    let pass_ctx = ctx.clone();
    let pass = move |app: String| {
        let (ctx, notifiers) = (pass_ctx.clone(), notifiers.clone());
        async move {
            match ctx.run_pass(&app, Mode::Policy, None).await {
                Ok(r) => {
                    tracing::debug!(app = %app, sync = %r.status.sync, health = %r.status.health, "pass done");
                    if let Some(n) = notifiers.get(&app) {
                        n.after_pass(&app, &r.status, r.sync.as_ref()).await;
                    }
                    r.sync.is_some() || r.status.health == HealthStatus::Progressing
                }
                Err(e) => {
                    tracing::warn!(app = %app, "pass failed: {e}");
                    false
                }
            }
        }
    };
    Scheduler::start_with(apps, pass, trigger_metrics(ctx.metrics.clone()), tracker, token)
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

/// Turns the watches' drift notifications (application names) into triggers, until
/// `token` is cancelled.
async fn forward_drift(mut rx: mpsc::UnboundedReceiver<String>, scheduler: Scheduler, token: CancellationToken) {
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            m = rx.recv() => match m {
                Some(app) => { scheduler.trigger(&app, Trigger::Drift); }
                None => return,
            },
        }
    }
}
