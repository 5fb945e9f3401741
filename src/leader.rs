//! Leader election for `plumb serve` with more than one replica.
//!
//! Every replica answers probes, metrics, the status API and webhooks; only the holder
//! of a `coordination.k8s.io/v1` Lease (default `plumb` in the status namespace) runs
//! reconcile passes. The Lease is kept by [`kube_lease_manager`] (server-side apply,
//! renewed `grace` seconds before it expires; another replica takes it over once it has
//! not been renewed for `duration` seconds, so a killed leader is replaced after at most
//! about `duration` + 1 s).
//!
//! A follower that receives a webhook forwards it through the application's resource
//! (`applications.plumb.dev`): it sets the annotation [`REFRESH_ANNOTATION`], and the
//! leader, which watches those resources ([`watch_requests`]), runs a pass when the
//! value changes. The webhook body never travels: the leader fetches the ref itself.
//! `plumb sync`, `refresh`, `suspend` and `rollback` reach the server the same way.
//!
//! A leader that loses the Lease stops: [`Leadership::lost`] resolves and `plumb serve`
//! exits with status 1, so that two replicas never write at the same time (the pod is
//! restarted and comes back as a follower).

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::StreamExt as _;
use kube::{Api, Client, api::DynamicObject, runtime::watcher};
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub use crate::status::REFRESH_ANNOTATION;
use crate::status::store::{Controls, SharedControls, Store};

/// Where and how to hold the Lease.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// Namespace of the Lease (plumb's own namespace).
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This replica's identity (the pod name in the cluster).
    pub identity: String,
    /// Seconds a Lease stays valid after its last renewal (> `grace`).
    pub duration_seconds: u64,
    /// Seconds before expiry at which the holder renews (> 0); also the clock skew
    /// tolerated between replicas.
    pub grace_seconds: u64,
}

/// Failure to start leader election.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `duration_seconds` must be greater than `grace_seconds`, which must be > 0.
    #[error("lease {namespace}/{name}: duration {duration}s must be greater than grace {grace}s > 0")]
    Timing {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Duration in seconds.
        duration: u64,
        /// Grace in seconds.
        grace: u64,
    },
    /// Reading or creating the Lease failed (missing `coordination.k8s.io` rights are
    /// named here).
    #[error("lease {namespace}/{name}: {source}")]
    Lease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The lease manager's error.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
}

/// Whether this replica may run passes now. Cheap to clone.
#[derive(Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    elected: bool,
    lost: Arc<AtomicBool>,
}

impl Leadership {
    /// A single replica without election: always the leader.
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        // The sender is dropped: the value stays `true` for good.
        drop(tx);
        Self { rx, elected: false, lost: Arc::new(AtomicBool::new(false)) }
    }

    /// True while this replica holds the Lease (always true without election).
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// True when this replica takes part in an election (more than one may run).
    pub fn elected(&self) -> bool {
        self.elected
    }

    /// True once this replica held the Lease and lost it.
    pub fn has_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Resolves each time this replica becomes the leader, with `true`; with `false`
    /// once the channel closed (shutdown, or an election without a leader task).
    pub async fn became_leader(&mut self) -> bool {
        loop {
            if self.rx.changed().await.is_err() {
                return false;
            }
            if *self.rx.borrow_and_update() {
                return true;
            }
        }
    }

    /// Resolves when this replica lost the Lease it held (never without election).
    pub async fn lost(&self) {
        let mut rx = self.rx.clone();
        loop {
            if self.has_lost() {
                return;
            }
            if rx.changed().await.is_err() {
                if self.has_lost() {
                    return;
                }
                std::future::pending::<()>().await;
            }
        }
    }

    /// Joins the election for `opts` on `tracker`, until `token` is cancelled; then the
    /// Lease is released (when held) so that another replica takes over at once.
    ///
    /// # Errors
    /// [`Error::Timing`] for bad durations, [`Error::Lease`] when the Lease cannot be
    /// read or created.
    pub async fn elect(
        client: Client,
        opts: &LeaseOptions,
        tracker: &TaskTracker,
        token: CancellationToken,
    ) -> Result<Self, Error> {
        if opts.grace_seconds == 0 || opts.duration_seconds <= opts.grace_seconds {
            return Err(Error::Timing {
                namespace: opts.namespace.clone(),
                name: opts.name.clone(),
                duration: opts.duration_seconds,
                grace: opts.grace_seconds,
            });
        }
        let lease_err = |source| Error::Lease { namespace: opts.namespace.clone(), name: opts.name.clone(), source };
        let params = LeaseParams::new(opts.identity.clone(), opts.duration_seconds, opts.grace_seconds)
            .with_field_manager(format!("plumb-lease-{}", opts.identity));
        let manager = LeaseManagerBuilder::new(client, opts.name.clone())
            .with_namespace(opts.namespace.clone())
            .with_parameters(params)
            .build()
            .await
            .map_err(lease_err)?;
        let (mut lease_rx, handle) = manager.watch().await;
        let (tx, rx) = watch::channel(*lease_rx.borrow());
        let lost = Arc::new(AtomicBool::new(false));
        let (lost2, identity, lease) =
            (lost.clone(), opts.identity.clone(), format!("{}/{}", opts.namespace, opts.name));
        tracker.spawn(async move {
            loop {
                tokio::select! {
                    () = token.cancelled() => break,
                    changed = lease_rx.changed() => {
                        if changed.is_err() {
                            tracing::error!(lease = %lease, "leader election stopped");
                            lost2.store(true, Ordering::Release);
                            break;
                        }
                        let leader = *lease_rx.borrow_and_update();
                        if leader {
                            tracing::info!(lease = %lease, identity = %identity, "holding the lease: this replica runs the passes");
                        } else if *tx.borrow() {
                            tracing::error!(lease = %lease, identity = %identity, "lost the lease: stopping so that no two replicas write");
                            lost2.store(true, Ordering::Release);
                        }
                        let _ = tx.send(leader);
                        if lost2.load(Ordering::Acquire) {
                            break;
                        }
                    }
                }
            }
            let _ = tx.send(false);
            drop(tx);
            // Dropping the receiver makes the manager release the Lease and return.
            drop(lease_rx);
            match tokio::time::timeout(Duration::from_secs(5), handle).await {
                Ok(Ok(Ok(_))) => tracing::info!(lease = %lease, "lease released"),
                Ok(Ok(Err(e))) => tracing::warn!(lease = %lease, "releasing the lease: {e}"),
                Ok(Err(e)) => tracing::warn!(lease = %lease, "lease task: {e}"),
                Err(_) => tracing::warn!(lease = %lease, "lease not released within 5 s"),
            }
        });
        Ok(Self { rx, elected: true, lost })
    }
}

/// Asks the leader for a pass of `app` by stamping [`REFRESH_ANNOTATION`] (the time of
/// the request) on its resource in `namespace`, creating the resource when missing.
///
/// # Errors
/// The API request failed.
pub async fn forward(client: &Client, namespace: &str, app: &str) -> Result<(), crate::status::store::Error> {
    request(client, namespace, app, REFRESH_ANNOTATION).await.map(|_| ())
}

/// Stamps the request annotation `key` ([`REFRESH_ANNOTATION`] or
/// [`crate::status::SYNC_ANNOTATION`]) with a new value (the time, RFC 3339) on `app`'s
/// resource in `namespace`, and returns that value: the server records a sync request's
/// value in the status (`syncRequest`) once it has acted on it.
///
/// # Errors
/// The API request failed.
pub async fn request(
    client: &Client,
    namespace: &str,
    app: &str,
    key: &str,
) -> Result<String, crate::status::store::Error> {
    let value = crate::status::now();
    Store::new(client.clone(), namespace).annotate(app, key, Some(&value)).await?;
    Ok(value)
}

/// Watches the application resources in `namespace`, keeps `shared` up to date with
/// their requests ([`Controls`]) and calls `trigger(app)` whenever a request changes
/// while this replica leads (a pass or sync request, a new or ended pause, a new or
/// released pin), and again when a pause ends, until `token` is cancelled. Values seen
/// at start are remembered, not acted on (every application gets a pass when a replica
/// starts leading anyway).
pub async fn watch_requests(
    client: Client,
    namespace: String,
    shared: SharedControls,
    leadership: Leadership,
    trigger: impl Fn(&str) + Clone + Send + 'static,
    token: CancellationToken,
) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client, &namespace, &crate::status::store::application_resource());
    let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
    let mut initial = true;
    let mut seen: HashMap<String, Controls> = HashMap::new();
    loop {
        let event = tokio::select! {
            () = token.cancelled() => return,
            e = stream.next() => match e {
                Some(e) => e,
                None => return,
            },
        };
        let obj = match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
            Ok(watcher::Event::InitDone) => {
                initial = false;
                // from now on passes read the requests from here
                if let Ok(mut m) = shared.write() {
                    *m = Some(std::mem::take(&mut seen));
                }
                continue;
            }
            Ok(watcher::Event::Init | watcher::Event::Delete(_)) => continue,
            Err(e) => {
                tracing::warn!(namespace = %namespace, "watching applications.plumb.dev for requests: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Some(app) = obj.metadata.name.clone() else { continue };
        let controls = Controls::from_annotations(&app, &obj.metadata.annotations.unwrap_or_default());
        let previous = if initial {
            seen.insert(app.clone(), controls.clone())
        } else {
            shared.write().ok().and_then(|mut m| m.get_or_insert_default().insert(app.clone(), controls.clone()))
        };
        if previous.as_ref().is_some_and(|p| !p.asks_differently(&controls)) {
            continue;
        }
        // the end of a pause is a change too: a pass then resumes automated sync
        if let Some(until) = controls.suspend.as_ref().and_then(|s| s.until.parse::<jiff::Timestamp>().ok()) {
            let left = until.duration_since(jiff::Timestamp::now());
            if left.is_positive() {
                let (t, app, token) = (trigger.clone(), app.clone(), token.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = token.cancelled() => {}
                        () = tokio::time::sleep(left.unsigned_abs() + Duration::from_millis(50)) => t(&app),
                    }
                });
            }
        }
        if initial || !leadership.is_leader() {
            continue;
        }
        tracing::info!(app = %app, "request on applications.plumb.dev/{app}: a pass");
        trigger(&app);
    }
}

/// This replica's identity: `POD_NAME` when set (the Deployment passes it), else the
/// host name and process id.
pub fn default_identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    format!("{}-{}", if host.is_empty() { "plumb" } else { &host }, std::process::id())
}

/// The identity holding Lease `namespace/name` when it is held and was renewed within
/// its duration (a serving `plumb serve --leader-elect`); `None` when there is no such
/// Lease, it has no holder, or it expired. A single replica without `--leader-elect`
/// holds no Lease and is not seen here.
///
/// # Errors
/// The API request failed (other than 404).
pub async fn holder(client: &Client, namespace: &str, name: &str) -> Result<Option<String>, kube::Error> {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), namespace);
    let Some(lease) = api.get_opt(name).await? else { return Ok(None) };
    let Some(spec) = lease.spec else { return Ok(None) };
    let (Some(who), Some(renewed), Some(duration)) =
        (spec.holder_identity, spec.renew_time, spec.lease_duration_seconds)
    else {
        return Ok(None);
    };
    let expires = renewed.0 + jiff::SignedDuration::from_secs(i64::from(duration));
    Ok((!who.is_empty() && expires > jiff::Timestamp::now()).then_some(who))
}
