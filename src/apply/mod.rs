//! The IO of a sync: apply wave by wave, wait for CustomResourceDefinitions, prune.
//!
//! A planned sync ([`crate::plan::Plan`]) runs wave by wave, and within a wave kind by
//! kind ([`crate::plan::kind_rank`]; objects of one kind concurrently). After a kind of
//! CustomResourceDefinitions is applied, plumb waits until they are Established (up to
//! [`CRD_TIMEOUT`]) and compares their custom resources again before applying them. A
//! failure stops the sync before the next kind (later objects may depend on it). A later
//! wave starts only when [`crate::plan::wave_gate`] allows it; prune follows the last
//! wave only when nothing failed, `PruneLast` objects when [`crate::plan::prune_last_gate`]
//! allows it. Every write is server-side apply with field manager `plumb` (or a replace
//! with `Replace=true`); every delete carries the object's UID as a precondition.

use std::{collections::HashSet, sync::Arc};

use futures::{FutureExt, StreamExt, future::BoxFuture, stream};
use serde_json::Value;

use crate::{
    cluster::{Cluster, Deleted, Kind},
    compare::{self, Compared},
    health::{self, HealthStatus},
    plan::{self, Plan, PruneCandidate, SyncOptions, SyncReason},
    status::EventReason,
    tracking::{self, ObjectKey},
};

/// How many objects are applied at once.
pub const CONCURRENCY: usize = 16;

/// Longest wait for a CustomResourceDefinition to be Established (and its kind
/// served), or for a `Force=true` delete to finish: 60 s (Flux's staged apply waits as
/// long).
pub const CRD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A failure of one step of a sync. Its `Display` is the line shown in the sync record
/// and the `SyncError` condition.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An object could not be written (or, created after its CRD, compared again).
    #[error("{object}: {message}")]
    Apply {
        /// The application.
        app: String,
        /// The object.
        object: ObjectKey,
        /// The server's answer or the reason.
        message: String,
    },
    /// A CustomResourceDefinition applied in this sync was not Established in time, or
    /// its names were not accepted; its custom resources are not attempted.
    #[error("{message}")]
    Crd {
        /// The application.
        app: String,
        /// The CRD's name.
        crd: String,
        /// What the CRD's conditions say.
        message: String,
    },
    /// A hook of the sync failed, timed out or could not be created
    /// ([`crate::plan::hooks`]); the message names it.
    #[error("{message}")]
    Hook {
        /// The application.
        app: String,
        /// What happened, naming the hook.
        message: String,
    },
    /// An object could not be deleted.
    #[error("prune {object}: {message}")]
    Prune {
        /// The application.
        app: String,
        /// The object.
        object: ObjectKey,
        /// The server's answer.
        message: String,
    },
}

/// One planned sync, as the apply step needs it.
pub struct Job<'a> {
    /// The application.
    pub app: &'a str,
    /// The revision synced and its subject (logs and Events name them).
    pub revision: &'a str,
    /// Subject of that commit.
    pub subject: &'a str,
    /// Why the sync runs (a selfHeal revert is a Warning Event).
    pub reason: SyncReason,
    /// The plan: its indexes point into `compared`.
    pub plan: &'a Plan,
    /// The desired objects, compared.
    pub compared: &'a [Arc<Compared>],
    /// The prune candidates and their kinds.
    pub orphans: &'a [(PruneCandidate, Kind)],
    /// Whether every comparison succeeded (otherwise nothing is pruned).
    pub compared_cleanly: bool,
    /// The application's sync options.
    pub app_options: &'a SyncOptions,
    /// Objects (`Kind/namespace/name`) whose health is not waited for.
    pub no_health_check: &'a HashSet<String>,
    /// Health of each desired object as assessed before the sync.
    pub health: Vec<HealthStatus>,
}

/// One object's write: its health as the server returned it and whether it was
/// re-created, or why it failed.
type Applied = Result<(health::Health, bool), WriteError>;

/// Compares an object created after its CRD again, once the CRD is served.
pub type Recompare<'a> = &'a (dyn Fn(Arc<Compared>) -> BoxFuture<'a, Result<Arc<Compared>, WriteError>> + Sync);

/// Why one object was not written. Its text (masked: [`Compared::scrub`]) is the
/// sync's message for the object.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// It could not be compared (its kind is not served, or not after its CRD was):
    /// the comparison's reason.
    #[error("{0}")]
    NotCompared(compare::ObjectReason),
    /// The API server refused or failed a request (the write, the wait for a CRD,
    /// taking over fields).
    #[error(transparent)]
    Api(#[from] crate::cluster::Error),
    /// `Force=true`: deleting the object to create it again failed.
    #[error("Force=true: {0}")]
    Recreate(String),
    /// `Force=true`: the object was deleted but creating it again failed.
    #[error("Force=true: re-create: {0}")]
    Recreated(crate::cluster::Error),
    /// Immutable fields changed, and the object is protected from deletion, so
    /// `Force=true` does not apply.
    #[error(
        "immutable field(s) {} changed in Git: the object must be deleted and re-created, but it is protected from deletion (Prune=false, Prune=confirm or a data-loss class), so Force=true does not apply; re-create it by hand",
        .0.join(", ")
    )]
    ImmutableProtected(Vec<String>),
    /// Immutable fields changed, and `Force=true` is not set.
    #[error(
        "immutable field(s) {} changed in Git: the object must be deleted and re-created; to let plumb do it, annotate it {}: Force=true",
        .0.join(", "),
        tracking::SYNC_OPTIONS_ANNOTATION
    )]
    Immutable(Vec<String>),
}

/// What a sync did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Desired objects written (index into the job's `compared`) and their health as the
    /// server returned them (the returned objects are not kept: a first sync writes
    /// every object of the application).
    pub applied: Vec<(usize, health::Health)>,
    /// Those of `applied` that were deleted and created again (`Force=true`, immutable
    /// fields changed), by index into the job's `compared`.
    pub recreated: Vec<usize>,
    /// Objects deleted.
    pub pruned: Vec<ObjectKey>,
    /// Objects whose DELETE was accepted but that stay, held by finalizers: not pruned
    /// yet (they stay listed as deletion pending until a read says they are gone).
    pub pending: Vec<(ObjectKey, plan::Deletion)>,
    /// Failures, in order.
    pub failures: Vec<Error>,
    /// Prunes were planned but held back because something failed.
    pub prunes_held: bool,
    /// What the sync waits for (a later wave, `PruneLast`): it goes on at the next pass.
    pub waiting: Option<String>,
}

/// Runs `job` against `cluster` (order and gates in the module docs). `recompare`
/// compares an object awaiting its CRD again; `written` is told the resourceVersion of
/// each write (the watch cache may lag behind it) and, for a server-side apply, the
/// body applied (`None` for a replace: `Replace=true`).
pub async fn run(
    cluster: &Cluster,
    job: &Job<'_>,
    recompare: Recompare<'_>,
    written: &(dyn Fn(&ObjectKey, &str, Option<&Value>) + Sync),
) -> Outcome {
    let p = job.plan;
    let names: Vec<String> = job.compared.iter().map(|c| c.key.to_string()).collect();
    let mut health = job.health.clone();
    let mut out = Outcome::default();
    'waves: for (w, wave) in p.waves.iter().enumerate() {
        for batch in wave.apply.chunk_by(|&a, &b| rank(&job.compared[a]) == rank(&job.compared[b])) {
            let mut targets = Vec::with_capacity(batch.len());
            for &idx in batch {
                let c = &job.compared[idx];
                let resolved = if c.awaits_crd() { recompare(c.clone()).await } else { Ok(c.clone()) };
                match resolved {
                    Ok(c) => targets.push((idx, c)),
                    Err(e) => out.failures.push(Error::Apply {
                        app: job.app.into(),
                        object: job.compared[idx].key.clone(),
                        message: e.to_string(),
                    }),
                }
            }
            // Each object's write and the read of its health run together, `CONCURRENCY`
            // objects at once: one object's round trips never wait for another's. Its
            // Event follows the batch's writes. The batch (one kind of one wave) is
            // finished before the next.
            // Each object's future is made when the pool takes it: made all at once, a
            // first sync's held 6.7 MB for 1,000 objects (heap profile). By position: a
            // closure over borrowed items would not prove the pass Send.
            let writes = (0..targets.len()).map(|t| {
                let (idx, c) = &targets[t];
                let options = job.app_options.with_object(&c.options);
                let (idx, may_recreate) = (*idx, p.recreate.contains(idx));
                async move {
                    let res = apply_one(cluster, c, &options, may_recreate).await;
                    let res = match res {
                        Ok(Written { obj, recreated }) => {
                            let h = health_after_apply(cluster, &obj).await;
                            if let Some(rv) = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                                written(&c.key, rv, (!options.replace).then_some(&c.apply));
                            }
                            Ok((h, recreated))
                        }
                        Err(e) => Err(e),
                    };
                    (idx, res)
                }
                .boxed()
            });
            let mut results: Vec<(usize, Applied)> = stream::iter(writes).buffer_unordered(CONCURRENCY).collect().await;
            // in plan order, whatever order the answers came in
            results.sort_by_cached_key(|(idx, _)| batch.iter().position(|b| b == idx));
            // the Events of the batch's writes, once every write of it is done: no write
            // waits for another object's Event
            let written_now: HashSet<usize> = results.iter().filter(|(_, r)| r.is_ok()).map(|(i, _)| *i).collect();
            let recreated_now: HashSet<usize> =
                results.iter().filter(|(_, r)| r.as_ref().is_ok_and(|(_, re)| *re)).map(|(i, _)| *i).collect();
            let announced: Vec<usize> = (0..targets.len()).filter(|&t| written_now.contains(&targets[t].0)).collect();
            let events = announced.into_iter().map(|t| {
                let (idx, c) = &targets[t];
                announce(cluster, job, c, recreated_now.contains(idx)).boxed()
            });
            let _: Vec<()> = stream::iter(events).buffer_unordered(CONCURRENCY).collect().await;
            for (idx, res) in results {
                let c = &job.compared[idx];
                match res {
                    Ok((h, recreated)) => {
                        health[idx] =
                            if job.no_health_check.contains(&names[idx]) { HealthStatus::Healthy } else { h.status };
                        out.applied.push((idx, h));
                        if recreated {
                            out.recreated.push(idx);
                        }
                    }
                    Err(e) => {
                        let message = c.scrub(&e.to_string());
                        out.failures.push(Error::Apply { app: job.app.into(), object: c.key.clone(), message });
                    }
                }
            }
            // Custom resources need their CRD served before they can be applied.
            for (_, c) in targets.iter().filter(|(_, c)| is_crd(&c.key)) {
                if let Err(message) = cluster.wait_established(&c.key.name, CRD_TIMEOUT).await {
                    out.failures.push(Error::Crd { app: job.app.into(), crd: c.key.name.clone(), message });
                }
            }
            if !out.failures.is_empty() {
                break 'waves; // later objects may depend on what failed
            }
        }
        if let Some(w) = plan::wave_gate(p, w, &health, &names) {
            out.waiting = Some(w);
            break;
        }
    }
    let clean = out.failures.is_empty() && job.compared_cleanly;
    if clean && out.waiting.is_none() {
        prune(cluster, job, &p.prune, &mut out).await;
        if !p.prune_last.is_empty() && out.failures.is_empty() {
            match plan::prune_last_gate(p, &health, &names) {
                None => prune(cluster, job, &p.prune_last, &mut out).await,
                Some(w) => out.waiting = Some(w),
            }
        }
    } else if !clean {
        out.prunes_held = !p.prune.is_empty() || !p.prune_last.is_empty();
    }
    out
}

/// Health of an object as a write returned it; a PersistentVolumeClaim's with its
/// StorageClass (a `WaitForFirstConsumer` claim waits for a pod of a later wave).
async fn health_after_apply(cluster: &Cluster, obj: &Value) -> health::Health {
    let claim = obj.get("kind").and_then(Value::as_str) == Some("PersistentVolumeClaim")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1");
    let class = if claim { cluster.storage_class_of(obj).await } else { None };
    let settings = health::HealthSettings::default();
    health::assess_with(
        &health::HealthInput::new(Some(obj), jiff::Timestamp::now(), &settings).storage_class(class.as_ref()),
    )
}

fn rank(c: &Compared) -> u8 {
    plan::kind_rank(&c.key.group, &c.key.kind)
}

fn is_crd(k: &ObjectKey) -> bool {
    k.group == "apiextensions.k8s.io" && k.kind == "CustomResourceDefinition"
}

/// Logs one successful apply and, for an update, publishes an Event on the object
/// (a selfHeal revert as a Warning naming the reverted fields; a re-creation as
/// `Recreated` naming the immutable fields that made it necessary).
async fn announce(cluster: &Cluster, job: &Job<'_>, c: &Compared, recreated: bool) {
    let git = format!("Git {} \"{}\"", crate::status::short(job.revision), job.subject);
    let fields = || c.differences.iter().map(compare::Difference::describe).collect::<Vec<_>>().join("; ");
    match (&c.live, job.reason) {
        (None, _) => tracing::info!(app = %job.app, object = %c.key, "created ({git})"),
        (Some(live), _) if recreated => {
            let why = match &c.reason {
                compare::ObjectReason::Immutable(f) => format!(": immutable field(s) {} changed", f.join(", ")),
                _ => String::new(),
            };
            let line = format!("recreated (deleted and created again, Force=true{why}) ({git})");
            tracing::warn!(app = %job.app, object = %c.key, "{line}");
            cluster.event(live, false, EventReason::Recreated, line).await;
        }
        (Some(live), SyncReason::SelfHeal) => {
            let line = format!("reverted {} ({git})", fields());
            tracing::info!(app = %job.app, object = %c.key, "{line}");
            cluster.event(live, true, EventReason::SelfHealed, line).await;
        }
        (Some(live), _) => {
            let line = format!("updated {} ({git})", fields());
            tracing::info!(app = %job.app, object = %c.key, "{line}");
            cluster.event(live, false, EventReason::Synced, line).await;
        }
    }
}

/// Deletes `candidates` in order (UID precondition, their propagation policy).
async fn prune(cluster: &Cluster, job: &Job<'_>, candidates: &[PruneCandidate], out: &mut Outcome) {
    for cand in candidates {
        let Some((_, kind)) = job.orphans.iter().find(|(o, _)| o.key == cand.key) else {
            continue;
        };
        let propagation = cand.options.propagation.unwrap_or_default();
        match cluster.delete(kind, &cand.key, &cand.uid, propagation).await {
            Ok(Deleted::Accepted) => {
                tracing::info!(app = %job.app, object = %cand.key, revision = %job.revision, ?propagation, "pruned: no longer in Git");
                out.pruned.push(cand.key.clone());
            }
            Ok(Deleted::Blocked(deletion)) => {
                tracing::warn!(app = %job.app, object = %cand.key, revision = %job.revision, ?propagation, "prune requested: {deletion}");
                out.pending.push((cand.key.clone(), deletion));
            }
            Err(e) => out.failures.push(Error::Prune {
                app: job.app.into(),
                object: cand.key.clone(),
                message: e.to_string(),
            }),
        }
    }
}

/// What one write left: the object as the server returned it, and whether it was
/// deleted and created again.
struct Written {
    obj: Value,
    recreated: bool,
}

/// Writes one object: server-side apply (or a replace with `Replace=true`), after
/// taking over client-side tools' fields. A change to an immutable field (in the API
/// server's words, or an admission policy's or webhook's: see
/// [`crate::cluster::Error::immutable_fields`]) is refused with the field named and
/// `Force=true` suggested; with `Force=true` (and `may_recreate`) the object is deleted
/// (UID precondition) and created again.
async fn apply_one(
    cluster: &Cluster,
    c: &Compared,
    options: &SyncOptions,
    may_recreate: bool,
) -> Result<Written, WriteError> {
    let Some(kind) = &c.kind else { return Err(WriteError::NotCompared(c.reason.clone())) };
    if let Some(fields) = &c.takeover {
        cluster.replace_managed_fields(kind, &c.key, fields).await?;
    }
    let write = || async {
        if options.replace {
            cluster.replace(kind, &c.key, &c.apply).await
        } else {
            cluster.apply_validated(kind, &c.key, &c.apply, false, !options.validate_disabled).await
        }
    };
    let err = match write().await {
        Ok(obj) => return Ok(Written { obj, recreated: false }),
        Err(e) => e,
    };
    let fields = err.immutable_fields();
    let uid = c.live.as_ref().and_then(|l| l.pointer("/metadata/uid")).and_then(Value::as_str);
    match (fields.is_empty(), options.force, may_recreate, uid) {
        (true, ..) => Err(err.into()),
        (false, true, true, Some(uid)) => {
            tracing::warn!(object = %c.key, fields = %fields.join(", "), "Force=true: deleting and re-creating (immutable fields changed)");
            cluster
                .delete(kind, &c.key, uid, plan::Propagation::Foreground)
                .await
                .map_err(|e| WriteError::Recreate(e.to_string()))?;
            // a finalizer holding it is reported by the wait below
            cluster.wait_gone(kind, &c.key, uid, CRD_TIMEOUT).await.map_err(WriteError::Recreate)?;
            let obj = write().await.map_err(WriteError::Recreated)?;
            Ok(Written { obj, recreated: true })
        }
        (false, true, ..) => Err(WriteError::ImmutableProtected(fields)),
        (false, false, ..) => Err(WriteError::Immutable(fields)),
    }
}
