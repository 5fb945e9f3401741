//! Shards and their Leases for `plumb serve` with more than one replica.
//!
//! Every replica answers probes, metrics, the status API and webhooks. The
//! applications are spread over `--shards N` shards ([`crate::plan::shards::shard_of`]);
//! each shard has a `coordination.k8s.io/v1` Lease in plumb's namespace (`plumb` for a
//! single shard, `plumb-shard-<i>` for more), and only the replica holding a shard's
//! Lease runs the passes of its applications. Each replica also keeps a membership
//! Lease (`plumb-member-<identity>`), so that the others count it before it holds
//! anything. Kubernetes is the only coordination: no replica talks to another.
//!
//! Every round ([`LeaseOptions::round`], a fifth of the Lease duration; sooner when a
//! Lease another replica holds is due to expire: [`shards::next_look`]) a replica
//! renews its Leases (an update carrying the `resourceVersion` it last wrote: a
//! conflict means another replica wrote the record, and the shard is lost at once),
//! lists the Leases (one request), and takes or releases shards as
//! [`crate::plan::shards::moves`] says; a watch of the Leases meanwhile notes each
//! change when it is made (and runs a round at once when another replica takes or
//! leaves a Lease: a shard released, a replica joining). Expiry is judged by when this replica saw a
//! record change and by the record's own `leaseDurationSeconds`
//! ([`crate::plan::shards::Seen`]), never by comparing clocks. A holder stops writing
//! once its last successful renew was sent more than the renew deadline (duration minus
//! `--lease-grace`) ago ([`crate::fence`]): before any other replica can see the Lease
//! expire, and every write queued before is dropped. A replica that loses or releases
//! a shard goes on serving its others; one that takes a shard over starts its
//! applications' passes from their Application statuses.
//!
//! A replica that receives a webhook or a request for an application it does not run
//! forwards it through the application's resource (`applications.plumb.dev`): it sets
//! the annotation [`REFRESH_ANNOTATION`], and the owning replica, which watches those
//! resources ([`watch_requests`]), runs a pass when the value changes. The webhook body
//! never travels: the owner fetches the ref itself. `plumb sync`, `refresh`, `suspend`
//! and `rollback` reach the owner the same way.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use crate::clock::Instant;

use futures::StreamExt as _;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, PostParams},
    runtime::{WatchStreamExt as _, watcher},
};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub use crate::status::REFRESH_ANNOTATION;
use crate::{
    fence::{Fence, Hold, Holds},
    plan::shards::{self, Seen, View},
    status::store::{Controls, SharedControls, Store},
};

/// The label naming the election a Lease belongs to (`--lease-name`).
pub const LEASE_OF_LABEL: &str = "plumb.dev/lease-of";
/// The label telling a shard's Lease (`shard`) from a replica's membership (`member`).
pub const LEASE_ROLE_LABEL: &str = "plumb.dev/lease-role";
/// The annotation of a shard's Lease: its shard number.
pub const SHARD_ANNOTATION: &str = "plumb.dev/shard";
/// The annotation of every Lease: the replica's `--shards` (replicas that disagree
/// take nothing).
pub const SHARDS_ANNOTATION: &str = "plumb.dev/shards";

/// Where and how to hold the Leases.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// Namespace of the Leases (plumb's own namespace).
    pub namespace: String,
    /// The election's name: the single shard's Lease, the prefix of the others.
    pub name: String,
    /// This replica's identity (the pod name in the cluster).
    pub identity: String,
    /// Seconds a Lease stays valid after its last renewal (> `grace`).
    pub duration_seconds: u64,
    /// Seconds of clock-rate difference and request latency tolerated: a holder stops
    /// writing this long before its Lease can expire (> 0).
    pub grace_seconds: u64,
    /// How many shards the applications are spread over (≥ 1).
    pub shards: u32,
    /// Seconds added to this replica's wall clock in the records it writes
    /// (`renewTime`, `acquireTime`): a test seam for a replica whose clock is off.
    pub clock_offset_seconds: i64,
}

impl LeaseOptions {
    /// The name of shard `shard`'s Lease.
    pub fn shard_lease(&self, shard: u32) -> String {
        if self.shards <= 1 { self.name.clone() } else { format!("{}-shard-{shard}", self.name) }
    }

    /// The name of this replica's membership Lease ([`LeaseOptions::member_lease_of`]).
    pub fn member_lease(&self) -> String {
        self.member_lease_of(&self.identity)
    }

    /// The name of the membership Lease of the replica `identity`: the identity made a
    /// valid name (lower case, `[a-z0-9-]`), with a hash of it when it had to change. A
    /// membership Lease counts only under this name for its holder, so a Lease written
    /// by hand under another name adds no member.
    pub fn member_lease_of(&self, identity: &str) -> String {
        let clean: String = identity
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
            .take(200)
            .collect();
        let clean = clean.trim_matches('-').to_string();
        if clean == identity && !clean.is_empty() {
            format!("{}-member-{clean}", self.name)
        } else {
            let h = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(identity.as_bytes())[..4]);
            format!("{}-member-{clean}-{h}", self.name)
        }
    }

    /// How often a replica renews and looks at the Leases: a fifth of the duration,
    /// between 0.5 s and 5 s.
    pub fn round(&self) -> Duration {
        (Duration::from_secs(self.duration_seconds) / 5).clamp(Duration::from_millis(500), Duration::from_secs(5))
    }

    /// The renew deadline ([`shards::renew_deadline`]).
    pub fn renew_deadline(&self) -> Duration {
        shards::renew_deadline(Duration::from_secs(self.duration_seconds), Duration::from_secs(self.grace_seconds))
    }
}

/// Failure to start the election.
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
    /// `--shards` must be between 1 and [`MAX_SHARDS`]; the name must fit a label value.
    #[error("lease {namespace}/{name}: {problem}")]
    Options {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// Reading or creating this replica's membership Lease failed (missing
    /// `coordination.k8s.io` rights are named here).
    #[error("lease {namespace}/{name}: {source}")]
    Lease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The most shards `--shards` accepts.
pub const MAX_SHARDS: u32 = 1024;

/// Which applications this replica runs now. Cheap to clone.
#[derive(Clone)]
pub struct Leadership {
    identity: Arc<str>,
    shards: u32,
    holds: Arc<Holds>,
    elected: bool,
    /// The shards held with the generation of each hold, sent each time they change
    /// (taken, released, lost, or lost and taken again).
    taken: watch::Receiver<Vec<(u32, u64)>>,
    /// The hold generation under which each application's take was set up (its
    /// resource read and its spec set: [`Leadership::set_up`]).
    set_up: Arc<std::sync::Mutex<HashMap<Box<str>, u64>>>,
}

impl Leadership {
    /// A single replica without election: every application, for good.
    pub fn always() -> Self {
        let (tx, taken) = watch::channel(vec![(0, 1)]);
        // The sender is dropped: nothing is ever taken again.
        drop(tx);
        Self {
            identity: default_identity().into(),
            shards: 1,
            holds: Arc::new(Holds::forever(1)),
            elected: false,
            taken,
            set_up: Arc::default(),
        }
    }

    /// The shard of application `app`.
    pub fn shard_of(&self, app: &str) -> u32 {
        shards::shard_of(app, self.shards)
    }

    /// The fence for a pass of `app` now: `Some` while this replica holds its shard.
    pub fn fence(&self, app: &str) -> Option<Fence> {
        Fence::of(self.identity.clone(), self.shard_of(app), self.shards, self.holds.clone())
    }

    /// The fence for a pass of `app` now, once its take is set up in the hold of its
    /// shard ([`Leadership::set_up`]; always without election): the passes of a shard
    /// just taken wait for the set-up, which then starts each of them once.
    pub fn pass_fence(&self, app: &str) -> Option<Fence> {
        let fence = self.fence(app)?;
        if !self.elected {
            return Some(fence);
        }
        (self.set_up_in(app) == Some(fence.hold.generation)).then_some(fence)
    }

    /// The hold generation under which `app`'s take was last set up, if ever.
    fn set_up_in(&self, app: &str) -> Option<u64> {
        self.set_up.lock().ok()?.get(app).copied()
    }

    /// True while `app`'s shard is held, its take set up, but its fence closed for now
    /// (a renew later than the renew deadline, and not yet ended: the next renew either
    /// opens it again in the same hold or ends the hold).
    pub fn paused(&self, app: &str) -> bool {
        let shard = self.shard_of(app);
        let Some(hold) = self.holds.get(shard).filter(|_| self.elected) else { return false };
        self.set_up_in(app) == Some(hold.generation) && self.holds.open(shard, Instant::now()).is_none()
    }

    /// The generation of this replica's hold of `shard`, while held.
    pub fn generation(&self, shard: u32) -> Option<u64> {
        self.holds.get(shard).map(|h| h.generation)
    }

    /// Records that the take of `app` in hold `generation` of its shard is set up: from
    /// now on [`Leadership::pass_fence`] lets its passes run (one entry per application
    /// ever taken, at most the policy's).
    pub fn set_up(&self, app: &str, generation: u64) {
        // a set-up of an earlier hold that ends late never undoes a newer one
        // (generations only grow)
        if let Ok(mut m) = self.set_up.lock() {
            m.entry(app.into()).and_modify(|g| *g = (*g).max(generation)).or_insert(generation);
        }
    }

    /// The same election for a new serve of a policy (a reload): no application's take
    /// is set up for it yet, so [`Leadership::pass_fence`] holds every pass until that
    /// serve has read the application's resource and set its spec (an application set
    /// up under the policy before, even removed and named again since, waits too).
    #[must_use]
    pub fn for_serve(&self) -> Self {
        Self { set_up: Arc::default(), ..self.clone() }
    }

    /// True while this replica runs the passes of `app`.
    pub fn owns(&self, app: &str) -> bool {
        self.holds.open(self.shard_of(app), Instant::now()).is_some()
    }

    /// True while this replica holds any shard (it polls the repositories).
    pub fn holds_any(&self) -> bool {
        let now = Instant::now();
        self.holds.shards().into_iter().any(|s| self.holds.open(s, now).is_some())
    }

    /// The shards held now (open or not yet ended).
    pub fn held(&self) -> Vec<u32> {
        self.holds.shards()
    }

    /// True when this replica takes part in an election (more than one may run).
    pub fn elected(&self) -> bool {
        self.elected
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// How many shards there are.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// Resolves each time the holds of this replica change (a shard taken, released or
    /// lost, or lost and taken again in one round), with the shards it then holds and
    /// the generation of each hold; `None` once the election ended (shutdown, or no
    /// election).
    pub async fn taken(&mut self) -> Option<Vec<(u32, u64)>> {
        self.taken.changed().await.ok()?;
        Some(self.taken.borrow_and_update().clone())
    }

    /// Joins the election for `opts` on `tracker`, until `token` is cancelled; then
    /// every Lease held is released so that other replicas take over at once.
    ///
    /// # Errors
    /// [`Error::Timing`] or [`Error::Options`] for bad options, [`Error::Lease`] when
    /// this replica's membership Lease cannot be written.
    pub async fn elect(
        client: Client,
        opts: &LeaseOptions,
        tracker: &TaskTracker,
        token: CancellationToken,
    ) -> Result<Self, Error> {
        let (namespace, name) = (opts.namespace.clone(), opts.name.clone());
        if opts.grace_seconds == 0 || opts.duration_seconds <= opts.grace_seconds {
            let (duration, grace) = (opts.duration_seconds, opts.grace_seconds);
            return Err(Error::Timing { namespace, name, duration, grace });
        }
        let problem = if !(1..=MAX_SHARDS).contains(&opts.shards) {
            Some(format!("--shards {} is outside 1..={MAX_SHARDS}", opts.shards))
        } else if opts.name.len() > 40 || opts.name.is_empty() {
            Some("the name must have 1 to 40 characters (it is a label value and a prefix)".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(Error::Options { namespace, name, problem });
        }
        let mut election = Election::new(client, opts.clone());
        let member = opts.member_lease();
        election.renew_member(Instant::now()).await.map_err(|source| Error::Lease {
            namespace: opts.namespace.clone(),
            name: member,
            source,
        })?;
        let (tx, taken) = watch::channel(vec![]);
        let holds = election.holds.clone();
        let round = opts.round();
        // the Leases' changes as they happen: a change is seen when it is made, not at
        // the next LIST up to a round later, so that a Lease left by a replica that died
        // expires here that much sooner (never before its holder's renew deadline:
        // a change is never seen before it is made)
        let selector = format!("{LEASE_OF_LABEL}={}", opts.name);
        let changes = watcher(election.api.clone(), watcher::Config::default().labels(&selector)).default_backoff();
        tracker.spawn(async move {
            let mut changes = std::pin::pin!(changes);
            'run: loop {
                let started = tokio::time::Instant::now();
                election.round(&tx).await;
                let wake = tokio::time::sleep(election.next_look(round));
                let mut wake = std::pin::pin!(wake);
                loop {
                    tokio::select! {
                        () = token.cancelled() => break 'run,
                        () = &mut wake => break,
                        Some(change) = changes.next() => {
                            // a round at once, but at most one per FORCED_ROUND_GAP
                            // whatever the Leases do (a holder flapping costs no more)
                            if election.observe(change) {
                                let soonest = started + FORCED_ROUND_GAP;
                                if wake.deadline() > soonest {
                                    wake.as_mut().reset(soonest);
                                }
                            }
                        }
                    }
                }
            }
            election.release_all().await;
        });
        Ok(Self {
            identity: opts.identity.clone().into(),
            shards: opts.shards,
            holds,
            elected: true,
            taken,
            set_up: Arc::default(),
        })
    }
}

/// The election task's state.
struct Election {
    api: Api<Lease>,
    opts: LeaseOptions,
    holds: Arc<Holds>,
    /// Every Lease of the election as last read or written, by name.
    seen: HashMap<String, Seen>,
    /// What this replica wrote last, by Lease name (the record to update).
    records: HashMap<String, Lease>,
    /// Shards being released, with when their writes stopped.
    releasing: BTreeMap<u32, Instant>,
    generation: u64,
    /// When this election started: for a Lease duration it takes one shard a round
    /// ([`View::settling`]).
    started: Instant,
}

/// The shortest time between the starts of two rounds when Leases changed (another
/// replica took or left a shard, a member came or went): 500 ms.
const FORCED_ROUND_GAP: Duration = Duration::from_millis(500);

/// How long one Lease request may take before the round goes on without it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

impl Election {
    fn new(client: Client, opts: LeaseOptions) -> Self {
        let holds = Arc::new(Holds::with_deadline(opts.renew_deadline()));
        Self {
            api: Api::namespaced(client, &opts.namespace),
            opts,
            holds,
            seen: HashMap::new(),
            records: HashMap::new(),
            releasing: BTreeMap::new(),
            generation: 0,
            started: Instant::now(),
        }
    }

    /// How long to wait before the next round ([`shards::next_look`]).
    fn next_look(&self, round: Duration) -> Duration {
        shards::next_look(self.seen.values(), &self.opts.identity, Instant::now(), round)
    }

    /// The wall-clock time this replica writes in its records.
    fn wall_now(&self) -> MicroTime {
        MicroTime(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(self.opts.clock_offset_seconds))
    }

    /// A record of Lease `name` held by `holder` (empty: released), based on `base`.
    fn record(&self, name: &str, base: Option<&Lease>, holder: &str, role: &str, shard: Option<u32>) -> Lease {
        let mut lease = base.cloned().unwrap_or_default();
        let meta = &mut lease.metadata;
        meta.name = Some(name.to_string());
        meta.namespace = Some(self.opts.namespace.clone());
        let labels = meta.labels.get_or_insert_default();
        labels.insert(LEASE_OF_LABEL.into(), self.opts.name.clone());
        labels.insert(LEASE_ROLE_LABEL.into(), role.into());
        let notes = meta.annotations.get_or_insert_default();
        notes.insert(SHARDS_ANNOTATION.into(), self.opts.shards.to_string());
        if let Some(s) = shard {
            notes.insert(SHARD_ANNOTATION.into(), s.to_string());
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let was = spec.holder_identity.clone().unwrap_or_default();
        if was != holder && !holder.is_empty() {
            spec.acquire_time = Some(self.wall_now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + i32::from(!was.is_empty()));
        }
        spec.holder_identity = Some(holder.to_string());
        spec.lease_duration_seconds = Some(i32::try_from(self.opts.duration_seconds).unwrap_or(i32::MAX));
        spec.renew_time = Some(self.wall_now());
        lease
    }

    /// Writes `lease` (an update carrying its `resourceVersion`, or a create), within
    /// [`REQUEST_TIMEOUT`]; remembers what was written.
    async fn write(&mut self, lease: Lease, now: Instant) -> Result<Lease, kube::Error> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let pp = PostParams::default();
        let request = async {
            if lease.metadata.resource_version.is_some() {
                self.api.replace(&name, &pp, &lease).await
            } else {
                self.api.create(&pp, &lease).await
            }
        };
        let written = match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
            Ok(r) => r?,
            Err(_) => return Err(timeout_error(&name)),
        };
        self.remember(&written, now);
        self.records.insert(name, written.clone());
        Ok(written)
    }

    /// Records `lease` as seen at `now`.
    fn remember(&mut self, lease: &Lease, now: Instant) {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.filter(|h| !h.is_empty());
        let duration =
            Duration::from_secs(spec.lease_duration_seconds.and_then(|d| u64::try_from(d).ok()).unwrap_or(0));
        let seen = match self.seen.remove(&name) {
            Some(s) => s.read_again(holder, version, duration, now),
            None => Seen { holder, version, duration, changed_at: now },
        };
        self.seen.insert(name, seen);
    }

    /// Records a change of a Lease that the watch delivered, as seen now. Returns true
    /// when another replica took or left it (a shard taken or released, a member come
    /// or gone): a round then runs at once, so that a free shard is taken and a
    /// replica that joins gets its share without waiting for the next round.
    fn observe(&mut self, change: Result<watcher::Event<Lease>, watcher::Error>) -> bool {
        let (lease, deleted) = match change {
            Ok(watcher::Event::Apply(l) | watcher::Event::InitApply(l)) => (l, false),
            Ok(watcher::Event::Delete(l)) => (l, true),
            Ok(_) => return false,
            Err(e) => {
                tracing::debug!(namespace = %self.opts.namespace, "watching the Leases: {e}");
                return false;
            }
        };
        let name = lease.metadata.name.clone().unwrap_or_default();
        let before = self.seen.get(&name).and_then(|s| s.holder.clone());
        if deleted {
            self.seen.remove(&name);
        } else {
            self.remember(&lease, Instant::now());
        }
        let after = self.seen.get(&name).and_then(|s| s.holder.clone());
        let me = Some(&self.opts.identity);
        before != after && before.as_ref() != me && after.as_ref() != me
    }

    /// Renews (or creates) this replica's membership Lease.
    async fn renew_member(&mut self, now: Instant) -> Result<(), kube::Error> {
        let name = self.opts.member_lease();
        let base = self.records.get(&name).cloned();
        let base = match base {
            Some(b) => Some(b),
            None => match tokio::time::timeout(REQUEST_TIMEOUT, self.api.get_opt(&name)).await {
                Ok(read) => read?,
                Err(_) => return Err(timeout_error(&name)),
            },
        };
        let identity = self.opts.identity.clone();
        let lease = self.record(&name, base.as_ref(), &identity, "member", None);
        match self.write(lease, now).await {
            Ok(_) => Ok(()),
            Err(e) => {
                // read it again next time
                self.records.remove(&name);
                Err(e)
            }
        }
    }

    /// One round: renew, look, move; the holds then are sent on `taken` when they
    /// changed (taken, released, lost — or lost and taken again: the same shards under a
    /// new generation, whose applications must be set up again).
    async fn round(&mut self, taken: &watch::Sender<Vec<(u32, u64)>>) {
        let had = self.holds.generations();
        self.look().await;
        let held = self.holds.generations();
        if held != had {
            let _ = taken.send(held);
        }
    }

    /// Renews the Leases held, then takes and releases shards as [`shards::moves`] says.
    async fn look(&mut self) {
        let now = Instant::now();
        if let Err(e) = self.renew_member(now).await {
            tracing::warn!(lease = %self.opts.member_lease(), "renewing this replica's membership: {e}");
        }
        self.renew_shards().await;
        self.finish_releases().await;
        let listed = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let lp = ListParams::default().labels(&format!("{LEASE_OF_LABEL}={}", self.opts.name));
            self.api.list(&lp).await
        })
        .await;
        let leases = match listed {
            Ok(Ok(l)) => l.items,
            Ok(Err(e)) => return tracing::warn!(namespace = %self.opts.namespace, "listing the Leases: {e}"),
            Err(_) => return tracing::warn!(namespace = %self.opts.namespace, "listing the Leases: no answer"),
        };
        let now = Instant::now();
        // what the LIST returned is what exists: Leases deleted since are forgotten
        let listed: HashSet<&str> = leases.iter().filter_map(|l| l.metadata.name.as_deref()).collect();
        self.seen.retain(|name, _| listed.contains(name.as_str()));
        for l in &leases {
            self.remember(l, now);
        }
        let Some(view) = self.view(&leases, now) else { return };
        let moves = shards::moves(&view);
        for s in moves.acquire {
            self.acquire(s, &leases).await;
        }
        for s in moves.release {
            tracing::info!(shard = s, identity = %self.opts.identity, "releasing the shard to another replica");
            self.holds.end(s);
            self.releasing.insert(s, Instant::now());
        }
    }

    /// What this replica knows now, or `None` when a live replica runs with another
    /// `--shards` (nothing is taken then).
    fn view(&self, leases: &[Lease], now: Instant) -> Option<View<'_>> {
        let mut holders = vec![None; self.opts.shards as usize];
        let mut members = BTreeSet::new();
        // a shard's Lease by its name alone (an annotation can be written by hand)
        let shard_leases: HashMap<String, u32> = (0..self.opts.shards).map(|s| (self.opts.shard_lease(s), s)).collect();
        for l in leases {
            let name = l.metadata.name.clone().unwrap_or_default();
            let Some(seen) = self.seen.get(&name) else { continue };
            let Some(holder) = seen.live_holder(now) else { continue };
            let role = l.metadata.labels.as_ref().and_then(|m| m.get(LEASE_ROLE_LABEL)).map(String::as_str);
            // a member under its own name only (one Lease per replica), a shard's Lease
            // by its name alone (an annotation can be written by hand); other Leases
            // count for nothing, their `--shards` neither
            let shard = match (role, shard_leases.get(&name)) {
                (Some("member"), _) if name == self.opts.member_lease_of(holder) => None,
                (Some("shard"), Some(s)) => Some(*s),
                _ => continue,
            };
            let notes = l.metadata.annotations.clone().unwrap_or_default();
            let theirs = notes.get(SHARDS_ANNOTATION).and_then(|n| n.parse::<u32>().ok());
            if theirs.is_some_and(|n| n != self.opts.shards) {
                tracing::error!(
                    lease = %name, holder, shards = ?theirs,
                    "a live replica runs with another --shards than this one's {}: taking no shard until they agree",
                    self.opts.shards
                );
                return None;
            }
            match shard {
                None => {
                    members.insert(holder.to_string());
                }
                Some(s) => {
                    if let Some(slot) = holders.get_mut(s as usize) {
                        *slot = Some(holder.to_string());
                    }
                }
            }
        }
        // what this replica holds counts as held by it, whatever it read
        for s in self.holds.shards() {
            if let Some(slot) = holders.get_mut(s as usize) {
                *slot = Some(self.opts.identity.clone());
            }
        }
        for s in self.releasing.keys() {
            if let Some(slot) = holders.get_mut(*s as usize) {
                *slot = None;
            }
        }
        members.insert(self.opts.identity.clone());
        Some(View {
            me: &self.opts.identity,
            shards: self.opts.shards,
            holders,
            members,
            releasing: self.releasing.keys().copied().collect(),
            settling: now.saturating_duration_since(self.started) < Duration::from_secs(self.opts.duration_seconds),
        })
    }

    /// Takes shard `s` (free, or expired as this replica saw it): an update carrying
    /// the `resourceVersion` read, so that of two replicas taking it one wins.
    async fn acquire(&mut self, s: u32, leases: &[Lease]) -> bool {
        let name = self.opts.shard_lease(s);
        let base = leases.iter().find(|l| l.metadata.name.as_deref() == Some(&name));
        let identity = self.opts.identity.clone();
        let lease = self.record(&name, base, &identity, "shard", Some(s));
        let sent = Instant::now();
        match self.write(lease, sent).await {
            Ok(l) => {
                self.generation += 1;
                let transitions = l.spec.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0);
                self.holds.set(s, Hold { generation: self.generation, renewed_at: sent, transitions });
                tracing::info!(lease = %name, shard = s, identity = %identity, transitions, "holding the shard: this replica runs its applications");
                true
            }
            Err(e) => {
                tracing::debug!(lease = %name, "taking the shard: {e}");
                false
            }
        }
    }

    /// Renews every shard held. A conflict (another replica wrote the record) ends the
    /// hold at once; another failure leaves it to close at the renew deadline, and
    /// ends it then.
    async fn renew_shards(&mut self) {
        for s in self.holds.shards() {
            let name = self.opts.shard_lease(s);
            let Some(hold) = self.holds.get(s) else { continue };
            let base = self.records.get(&name).cloned();
            let identity = self.opts.identity.clone();
            let lease = self.record(&name, base.as_ref(), &identity, "shard", Some(s));
            let sent = Instant::now();
            match self.write(lease, sent).await {
                Ok(_) => self.holds.set(s, Hold { renewed_at: sent, ..hold }),
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {
                    tracing::error!(lease = %name, shard = s, "lost the shard (its Lease was written by another replica, or deleted): its writes stopped");
                    self.holds.end(s);
                    self.records.remove(&name);
                }
                Err(e) => {
                    if self.holds.open(s, Instant::now()).is_none() {
                        // when the deadline passed, on the wall clock (the fence closed then)
                        let late =
                            Instant::now().saturating_duration_since(hold.renewed_at + self.opts.renew_deadline());
                        let stopped_at =
                            jiff::Timestamp::now() - jiff::SignedDuration::try_from(late).unwrap_or_default();
                        tracing::error!(lease = %name, shard = s, %stopped_at, "not renewed within the renew deadline: its writes stopped ({e})");
                        self.holds.end(s);
                        self.records.remove(&name);
                    } else {
                        tracing::warn!(lease = %name, shard = s, "renewing the shard: {e}");
                    }
                }
            }
        }
    }

    /// Shards released more than `grace` ago (time for a write in flight to land):
    /// their Leases are written without a holder, for another replica to take.
    async fn finish_releases(&mut self) {
        let grace = Duration::from_secs(self.opts.grace_seconds);
        let due: Vec<u32> = self.releasing.iter().filter(|(_, at)| at.elapsed() >= grace).map(|(s, _)| *s).collect();
        for s in due {
            self.releasing.remove(&s);
            self.give_up(s).await;
        }
    }

    /// Writes shard `s`'s Lease without a holder (when this replica wrote it last).
    async fn give_up(&mut self, s: u32) {
        let name = self.opts.shard_lease(s);
        let Some(base) = self.records.remove(&name) else { return };
        let lease = self.record(&name, Some(&base), "", "shard", Some(s));
        if let Err(e) = self.write(lease, Instant::now()).await {
            tracing::debug!(lease = %name, "releasing the shard: {e}");
        }
    }

    /// At shutdown: stops every write, then releases every shard and the membership.
    async fn release_all(&mut self) {
        let held = self.holds.shards();
        for s in &held {
            self.holds.end(*s);
        }
        for s in held.into_iter().chain(std::mem::take(&mut self.releasing).into_keys()) {
            self.give_up(s).await;
        }
        // the membership is deleted, not left released: a replica's name (a pod's) is
        // seldom used again, and every replica lists every membership each round
        let member = self.opts.member_lease();
        if let Some(base) = self.records.remove(&member) {
            let dp = DeleteParams {
                preconditions: base
                    .metadata
                    .resource_version
                    .clone()
                    .map(|rv| kube::api::Preconditions { resource_version: Some(rv), uid: None }),
                ..DeleteParams::default()
            };
            let deleted = match tokio::time::timeout(REQUEST_TIMEOUT, self.api.delete(&member, &dp)).await {
                Ok(Ok(_)) => true,
                Ok(Err(e)) => {
                    tracing::warn!(lease = %member, "deleting this replica's membership (released instead): {e}");
                    false
                }
                Err(_) => false,
            };
            if !deleted {
                // without the right to delete (a Role of an earlier version): released,
                // so that the others rebalance at once rather than when it expires
                let lease = self.record(&member, Some(&base), "", "member", None);
                let _ = self.write(lease, Instant::now()).await;
            }
        }
        tracing::info!(identity = %self.opts.identity, "leases released");
    }
}

/// A request that got no answer within [`REQUEST_TIMEOUT`], as a client error.
fn timeout_error(name: &str) -> kube::Error {
    kube::Error::Service(format!("lease {name}: no answer within {}s", REQUEST_TIMEOUT.as_secs()).into())
}

/// Asks the replica running `app` for a pass by stamping [`REFRESH_ANNOTATION`] (the
/// time of the request) on its resource in `namespace`; false when there is no such
/// resource (never created here: see [`request`]).
///
/// # Errors
/// The API request failed.
pub async fn forward(client: &Client, namespace: &str, app: &str) -> Result<bool, crate::status::store::Error> {
    request(client, namespace, app, REFRESH_ANNOTATION).await.map(|v| v.is_some())
}

/// Stamps the request annotation `key` ([`REFRESH_ANNOTATION`] or
/// [`crate::status::SYNC_ANNOTATION`]) with a new value (the time, RFC 3339) on `app`'s
/// resource in `namespace`, and returns that value: the server records a sync request's
/// value in the status (`syncRequest`) once it has acted on it. `None` when there is
/// no such resource: a request never creates one (a mistyped name would otherwise
/// leave a phantom application that no server answers).
///
/// # Errors
/// The API request failed.
pub async fn request(
    client: &Client,
    namespace: &str,
    app: &str,
    key: &str,
) -> Result<Option<String>, crate::status::store::Error> {
    let value = crate::status::now();
    let found = Store::new(client.clone(), namespace).annotate_existing(app, &[(key, Some(&value))]).await?;
    Ok(found.then_some(value))
}

/// Watches the application resources in `namespace`, keeps `shared` up to date with
/// their requests ([`Controls`]) and calls `trigger(app)` whenever a request changes
/// while this replica runs it (a pass or sync request, a new or ended pause, a new or
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
    // the metadata alone (the annotations ask): every status write of every replica is
    // an event here
    let api: Api<kube::core::PartialObjectMeta<DynamicObject>> =
        Api::namespaced_with(client, &namespace, &crate::status::store::application_resource());
    let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
    let mut initial = true;
    let mut seen: HashMap<String, Controls> = HashMap::new();
    // one timer per application for the end of its pause: a new `until` replaces it
    let mut pause_ends: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
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
            Ok(watcher::Event::Delete(o)) => {
                // the decommission reads which resources exist from here
                let name = o.metadata.name.unwrap_or_default();
                if let Some(timer) = pause_ends.remove(&name) {
                    timer.abort();
                }
                if initial {
                    seen.remove(&name);
                } else if let Ok(mut m) = shared.write()
                    && let Some(m) = m.as_mut()
                {
                    m.remove(&name);
                }
                continue;
            }
            Ok(watcher::Event::Init) => continue,
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
        if !asks_anew(previous.as_ref(), &controls) {
            continue;
        }
        // the end of a pause is a change too: a pass then resumes automated sync (a
        // pause lifted or ended already needs no timer: this change asks the pass)
        let until = controls.suspend.as_ref().and_then(|s| s.until.parse::<jiff::Timestamp>().ok());
        let left = until.map(|u| u.duration_since(jiff::Timestamp::now())).filter(|l| l.is_positive());
        let timer = left.map(|left| {
            let (t, name, token) = (trigger.clone(), app.clone(), token.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = token.cancelled() => {}
                    () = tokio::time::sleep(left.unsigned_abs() + Duration::from_millis(50)) => t(&name),
                }
            })
            .abort_handle()
        });
        let before = match timer {
            Some(timer) => pause_ends.insert(app.clone(), timer),
            None => pause_ends.remove(&app),
        };
        if let Some(before) = before {
            before.abort();
        }
        // paused: a renew late, the pass asks again once it lands
        if initial || !(leadership.owns(&app) || leadership.paused(&app)) {
            continue;
        }
        tracing::info!(app = %app, "request on applications.plumb.dev/{app}: a pass");
        trigger(&app);
    }
}

/// Whether an application's resource, whose annotations asked `previous` before (`None`:
/// not seen), asks something new with `now`. An Application that appears asking nothing
/// (the first pass of its application created it) asks nothing new.
fn asks_anew(previous: Option<&Controls>, now: &Controls) -> bool {
    previous.map_or_else(|| Controls::default().asks_differently(now), |p| p.asks_differently(now))
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

/// The identities holding a live Lease of any plumb election in `namespace` (serving
/// `plumb serve --leader-elect` replicas, whatever their `--lease-name`), judged by each
/// record's `renewTime` and duration against this machine's clock plus
/// [`CLOCK_SLACK`] (the command line reads once; it cannot watch a record change, and
/// this machine's clock may be ahead of the replicas': a server is rather seen once too
/// often than missed). Empty when no replica serves; a single replica without
/// `--leader-elect` holds no Lease and is not seen here.
///
/// # Errors
/// The API request failed (other than 404).
pub async fn holders(client: &Client, namespace: &str) -> Result<Vec<String>, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(LEASE_OF_LABEL);
    let leases = match api.list(&lp).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(e)) if e.code == 404 => vec![],
        Err(e) => return Err(e),
    };
    let mut who: Vec<String> = leases
        .into_iter()
        .filter_map(|l| {
            let spec = l.spec?;
            let (who, renewed, duration) = (spec.holder_identity?, spec.renew_time?, spec.lease_duration_seconds?);
            let expires = renewed.0 + jiff::SignedDuration::from_secs(i64::from(duration)) + CLOCK_SLACK;
            (!who.is_empty() && expires > jiff::Timestamp::now()).then_some(who)
        })
        .collect();
    who.sort();
    who.dedup();
    Ok(who)
}

/// How far this machine's clock may be ahead of the replicas' for [`holders`]: 2 minutes.
const CLOCK_SLACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(120);

#[cfg(test)]
mod tests {
    use crate::clock::Instant;
    use std::sync::Arc;

    use super::{Controls, Leadership, asks_anew};
    use crate::fence::{Hold, Holds};

    /// An application's passes run once its take is set up, in the same hold of its
    /// shard: not before (the set-up then starts each once), not on a set-up of an
    /// earlier hold, not on another application's.
    #[test]
    fn a_shard_s_passes_wait_for_the_set_up_of_its_hold() {
        let holds = Arc::new(Holds::with_deadline(std::time::Duration::from_secs(7)));
        let (_tx, taken) = tokio::sync::watch::channel(vec![]);
        let l = Leadership {
            identity: "a".into(),
            shards: 1,
            holds: holds.clone(),
            elected: true,
            taken,
            set_up: Arc::default(),
        };
        assert!(l.pass_fence("web").is_none(), "no shard held");
        holds.set(0, Hold { generation: 2, renewed_at: Instant::now(), transitions: 0 });
        assert!(l.fence("web").is_some() && l.pass_fence("web").is_none(), "held, not set up");
        l.set_up("web", 1);
        assert!(l.pass_fence("web").is_none(), "set up in an earlier hold");
        l.set_up("web", l.generation(0).unwrap_or_default());
        assert!(l.pass_fence("web").is_some(), "set up");
        l.set_up("web", 1);
        assert!(l.pass_fence("web").is_some(), "a late set-up of an earlier hold undoes nothing");
        assert!(l.fence("api").is_some() && l.pass_fence("api").is_none(), "another application of the shard");
        holds.end(0);
        assert!(l.pass_fence("web").is_none(), "lost");
        assert!(Leadership::always().pass_fence("web").is_some(), "no election: always");
        // a renew late: paused, not lost, while the hold lasts
        holds.set(0, Hold { generation: 3, renewed_at: Instant::now(), transitions: 0 });
        l.set_up("web", 3);
        assert!(!l.paused("web"), "open");
        let late = Instant::now().checked_sub(std::time::Duration::from_secs(8)).unwrap_or_else(Instant::now);
        holds.set(0, Hold { generation: 3, renewed_at: late, transitions: 0 });
        assert!(l.pass_fence("web").is_none() && l.paused("web"), "closed for now");
        assert!(!l.paused("api"), "not set up");
        holds.end(0);
        assert!(!l.paused("web"), "ended");
        // a new serve of the policy (a reload): set up anew
        holds.set(0, Hold { generation: 4, renewed_at: Instant::now(), transitions: 0 });
        l.set_up("web", 4);
        let reloaded = l.for_serve();
        assert!(l.pass_fence("web").is_some() && reloaded.pass_fence("web").is_none(), "not set up for the new serve");
        reloaded.set_up("web", 4);
        assert!(reloaded.pass_fence("web").is_some(), "set up by the new serve");
    }

    /// A replica's view of the Leases counts a membership under its holder's own name
    /// alone, and a shard's holder by the Lease's name, not by an annotation anyone
    /// with Lease rights could write: forged Leases add no member and move no shard.
    #[tokio::test]
    async fn forged_leases_add_no_member_and_hold_no_shard() {
        use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};

        use super::{Election, LEASE_OF_LABEL, LEASE_ROLE_LABEL, LeaseOptions, SHARD_ANNOTATION};

        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
        let client = kube::Client::try_from(config).expect("client");
        let opts = LeaseOptions {
            namespace: "plumb".into(),
            name: "plumb".into(),
            identity: "a".into(),
            duration_seconds: 10,
            grace_seconds: 3,
            shards: 4,
            clock_offset_seconds: 0,
        };
        let mut election = Election::new(client, opts.clone());
        let lease = |name: &str, holder: &str, role: &str, shard: Option<&str>| {
            let mut l = Lease::default();
            l.metadata.name = Some(name.into());
            l.metadata.resource_version = Some("1".into());
            l.metadata.labels =
                Some([(LEASE_OF_LABEL, "plumb"), (LEASE_ROLE_LABEL, role)].map(|(k, v)| (k.into(), v.into())).into());
            l.metadata.annotations = shard.map(|s| [(SHARD_ANNOTATION.to_string(), s.to_string())].into());
            l.spec = Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(10),
                ..LeaseSpec::default()
            });
            l
        };
        let mut leases = [
            lease(&opts.member_lease_of("b"), "b", "member", None),
            lease("plumb-member-ghost", "c", "member", None),
            lease("plumb-shard-1", "b", "shard", Some("1")),
            lease("plumb-anything", "ghost", "shard", Some("2")),
            lease("plumb-shard-3", "b", "shard", Some("0")),
        ];
        // a forged Lease saying another `--shards` stops no take
        let forged = leases[3].metadata.annotations.get_or_insert_default();
        forged.insert(super::SHARDS_ANNOTATION.into(), "9".into());
        let now = Instant::now();
        for l in &leases {
            election.remember(l, now);
        }
        let view = election.view(&leases, now).expect("one --shards among the Leases that count");
        let members: Vec<&str> = view.members.iter().map(String::as_str).collect();
        assert_eq!(members, ["a", "b"], "c's Lease is not named for c");
        assert_eq!(view.holders, [None, Some("b".into()), None, Some("b".into())], "by the Leases' names");
    }

    /// The first pass of an application creates its resource: that is no request (it
    /// would pass every application twice as it starts); a resource that appears with a
    /// request, or a request added later, is; the acknowledgement of one is not.
    #[test]
    fn an_application_appearing_asks_nothing_unless_annotated() {
        let nothing = Controls::default();
        let refresh = Controls { refresh: Some("2026-12-04T00:00:00Z".into()), ..Controls::default() };
        let answered = Controls { observed: refresh.refresh.clone(), ..refresh.clone() };
        assert!(!asks_anew(None, &nothing), "created by a pass");
        assert!(asks_anew(None, &refresh), "created by `plumb refresh`");
        assert!(asks_anew(Some(&nothing), &refresh), "asked later");
        assert!(!asks_anew(Some(&refresh), &answered), "answered by the server");
        assert!(!asks_anew(Some(&nothing), &nothing), "a status write");
    }
}
