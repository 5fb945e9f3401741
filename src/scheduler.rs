//! When passes run: one actor per application.
//!
//! Each actor runs a pass at start, then waits for a trigger (webhook, manual) or for
//! its reconcile interval (plus up to 10 % random jitter, so that applications spread
//! out) and runs the next. Triggers coalesce: at most one pass runs and one waits per
//! application, so a burst of webhooks during a pass leads to exactly one more pass. A
//! trigger that finds the actor idle starts its pass at once; triggers that arrived
//! while a pass ran start the next one when they stop coming for [`QUIET`] (at most
//! [`MAX_HOLD`] after the pass ended): a storm of pushes, each naming a newer head of
//! the same ref, is one pass at its end, which fetches the newest head. Triggers merge
//! into the waiting pass ([`Trigger::merge`]): whatever came, it asks for what the most
//! demanding of them asked for (fresh refs for a push, not only the last advertisement
//! a live change is compared against). A pass only changes in the cluster asked for
//! (a drifted object, a workload's child) starts at most once per [`LIVE_GAP`].
//!
//! The scheduler knows no other part of plumb: it is given the pass to run (a closure
//! taking the application's name, what started the pass, a [`Cause`], and the state
//! the application's last pass left) and what to do when a trigger starts one. Each
//! actor owns its application's state (any `Default` type, moved into each pass and
//! back): one pass at a time reads and writes it, with no lock and no map by name.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use rand::Rng;
use tokio::sync::Notify;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// Why a pass was requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A verified push webhook named this application.
    Webhook {
        /// When the HTTP server had read the delivery: the actor records the time from
        /// here to the start of the pass (`plumb_webhook_to_pass_seconds`). When triggers
        /// coalesce, the pass reports the receipt of the one that was queued first.
        received: Instant,
    },
    /// Someone asked (API).
    Manual,
    /// The watch saw an application object change.
    Drift,
    /// The watch saw a child of one of the application's workloads change (a Pod, a
    /// ReplicaSet): a pass that reads health again and never syncs.
    Health,
    /// The repository's poller saw the application's revision name another commit.
    Moved,
    /// An application this one depends on (`dependsOn`) became ready at a new
    /// revision: its automated sync may go on now, not at the next poll.
    Dependency,
    /// This replica took the shard of the application (leader election) at `at`: its
    /// first pass here reads refs asked for after that instant (one advertisement
    /// answers every application of the take), so it sees whatever the replica before
    /// it could have seen, without asking the remote again for each pass.
    Take {
        /// When this replica's hold of the shard began (locally observed).
        at: Instant,
    },
}

impl Trigger {
    /// Whether its pass reads the remote's refs as they are now (a push, a request, a
    /// ref the poller saw move), not the repository poller's last advertisement: every
    /// trigger but [`Trigger::Drift`] and [`Trigger::Health`], changes in the cluster,
    /// which Git did not make, and [`Trigger::Dependency`] (another application moved).
    /// [`Trigger::Take`] wants refs asked for after its take, not after each pass's
    /// start (see `crate::poller::freshness`).
    pub fn wants_fresh_refs(self) -> bool {
        !self.live() && self != Trigger::Dependency
    }

    /// Whether a change in the cluster asked for it ([`Trigger::Drift`],
    /// [`Trigger::Health`]): such passes start at most once per [`LIVE_GAP`].
    pub fn live(self) -> bool {
        matches!(self, Trigger::Drift | Trigger::Health)
    }

    /// One pass asked for by `self` and then `later`: the one that wants fresh refs
    /// ([`Trigger::wants_fresh_refs`]), of two pushes the first (its receipt is what
    /// `plumb_webhook_to_pass_seconds` measures from), and any other over
    /// [`Trigger::Health`] (every pass reads health).
    #[must_use]
    pub fn merge(self, later: Trigger) -> Trigger {
        match (self, later) {
            (Trigger::Webhook { .. }, _) => self,
            (_, Trigger::Webhook { .. }) => later,
            // refs asked for after the pass starts answer the take too, not the reverse
            (Trigger::Take { .. }, _) if later.wants_fresh_refs() => later,
            _ if !self.wants_fresh_refs() && later.wants_fresh_refs() => later,
            (Trigger::Health, _) => later,
            _ => self,
        }
    }

    /// `webhook`, `manual`, `drift`, `health`, `moved`, `dependency` or `take`, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Webhook { .. } => "webhook",
            Trigger::Manual => "manual",
            Trigger::Drift => "drift",
            Trigger::Health => "health",
            Trigger::Moved => "moved",
            Trigger::Dependency => "dependency",
            Trigger::Take { .. } => "take",
        }
    }
}

/// What started a pass: the actor's own timer, or a trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The actor's first pass.
    Start,
    /// The reconcile interval passed with no trigger.
    Poll,
    /// The look soon after a pass that synced or found something Progressing
    /// ([`SETTLE_INTERVAL`]).
    Settle,
    /// A trigger (the first of those the pass answers).
    Triggered(Trigger),
    /// The time the last pass asked to be looked at again ([`Scheduler::wake_at`]),
    /// e.g. when a sync window opens.
    Wake,
}

impl Cause {
    /// `start`, `poll`, `settle`, `wake`, or the trigger's name, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Start => "start",
            Cause::Poll => "poll",
            Cause::Settle => "settle",
            Cause::Wake => "wake",
            Cause::Triggered(t) => t.as_str(),
        }
    }
}

/// How soon a pass follows one that synced or found the application Progressing.
pub const SETTLE_INTERVAL: Duration = Duration::from_secs(5);

/// How soon a pass follows the first of failed passes in a row (an error of the API
/// server or of the status store, not a source or render failure, which a pass
/// records and reports): 5 s, doubled for each further failure, at most the
/// application's reconcile interval ([`retry_after`]).
pub const RETRY_FIRST: Duration = Duration::from_secs(5);

/// When to look again after `failures` failed passes in a row (1 for the first) of an
/// application polled every `interval`: [`RETRY_FIRST`] × 2^(failures − 1), at most
/// `interval` (Flux's `retryInterval` idea with a backoff: a transient error, say a
/// resource definition just established, costs seconds, not a whole interval; a lasting
/// one costs one pass per interval).
pub fn retry_after(failures: u32, interval: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    RETRY_FIRST.saturating_mul(1 << doublings).min(interval.max(RETRY_FIRST))
}

/// How long triggers that arrived during a pass must stop coming before the next pass
/// starts: 50 ms.
pub const QUIET: Duration = Duration::from_millis(50);

/// The longest a pass asked for during a pass is held back while triggers keep coming:
/// 10 s (a storm longer than that gets one pass every 10 s).
pub const MAX_HOLD: Duration = Duration::from_secs(10);

/// The shortest time from the start of a pass to the start of a pass that a change in
/// the cluster asked for ([`Trigger::live`]): 2 s. Changes that come meanwhile fold into
/// that one pass, so a label flipped 30 times, or a rollout's Pods, cost one pass per
/// application every 2 s at most; a push or a request is not held back.
pub const LIVE_GAP: Duration = Duration::from_secs(2);

/// Handles to the per-application actors.
#[derive(Clone, Default)]
pub struct Scheduler {
    senders: Arc<HashMap<String, Arc<Waiting>>>,
    /// Starts the actor of an application ([`Scheduler::start_lazily_with`]: at its
    /// first trigger).
    spawner: Option<Arc<Spawner>>,
}

/// Starts one application's actor: its name, its [`Waiting`], and the trigger its first
/// pass answers (`None`: [`Cause::Start`]).
type Spawner = dyn Fn(String, Arc<Waiting>, Option<Trigger>) + Send + Sync;

/// The pass one actor has waiting, if any: every trigger merges into it.
#[derive(Default)]
struct Waiting {
    next: std::sync::Mutex<Option<Trigger>>,
    notify: Notify,
    /// The instant the pass that just ran asked for the next pass by, if any.
    wake: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// Whether its actor was started.
    started: std::sync::atomic::AtomicBool,
    /// Its reconcile interval.
    interval: Duration,
}

impl Waiting {
    /// Asks for a pass: `t` merged into the one waiting ([`Trigger::merge`]).
    fn push(&self, t: Trigger) {
        if let Ok(mut next) = self.next.lock() {
            *next = Some(next.map_or(t, |w| w.merge(t)));
        }
        self.notify.notify_one();
    }

    /// The pass waiting, taken.
    fn take(&self) -> Option<Trigger> {
        self.next.lock().ok()?.take()
    }

    /// The pass waiting, left waiting.
    fn peek(&self) -> Option<Trigger> {
        *self.next.lock().ok()?
    }

    fn is_waiting(&self) -> bool {
        self.next.lock().is_ok_and(|n| n.is_some())
    }

    /// The wake-up asked for, taken.
    fn take_wake(&self) -> Option<tokio::time::Instant> {
        self.wake.lock().ok()?.take()
    }
}

impl Scheduler {
    /// Starts one actor per `(application, reconcile interval)` on `tracker`, until
    /// `token` is cancelled. Each runs `pass(app, cause, state)` with the state its last
    /// pass returned (`St::default()` for the first), which returns it with true while
    /// things are settling (see [`SETTLE_INTERVAL`]); `started` sees each trigger just
    /// before the pass it starts (for metrics).
    pub fn start_with<F, Fut, S, St>(
        apps: impl IntoIterator<Item = (String, Duration)>,
        pass: F,
        started: S,
        tracker: &TaskTracker,
        token: CancellationToken,
    ) -> Self
    where
        F: Fn(String, Cause, St) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = (bool, St)> + Send + 'static,
        S: Fn(Trigger) + Clone + Send + Sync + 'static,
        St: Default + Send + 'static,
    {
        let scheduler = Self::start_lazily_with(apps, pass, started, tracker, token);
        for (app, waiting) in scheduler.senders.iter() {
            scheduler.start_actor(app, waiting, None);
        }
        scheduler
    }

    /// [`Scheduler::start_with`], but each application's actor starts at its first
    /// trigger ([`Scheduler::trigger`]), whose pass is its first: a replica among several
    /// runs actors only for the applications it was asked to pass (those of the shards it
    /// took, and the few a trigger named), not one per application of the policy (an idle
    /// actor holds about 1.4 KiB).
    pub fn start_lazily_with<F, Fut, S, St>(
        apps: impl IntoIterator<Item = (String, Duration)>,
        pass: F,
        started: S,
        tracker: &TaskTracker,
        token: CancellationToken,
    ) -> Self
    where
        F: Fn(String, Cause, St) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = (bool, St)> + Send + 'static,
        S: Fn(Trigger) + Clone + Send + Sync + 'static,
        St: Default + Send + 'static,
    {
        let senders = apps
            .into_iter()
            .map(|(app, interval)| (app, Arc::new(Waiting { interval, ..Waiting::default() })))
            .collect();
        let tracker = tracker.clone();
        let spawner = move |app: String, waiting: Arc<Waiting>, first: Option<Trigger>| {
            let pass = pass.clone();
            let interval = waiting.interval;
            let run = move |why: Cause, state: St| {
                tracing::debug!(app = %app, trigger = why.as_str(), "pass starts");
                pass(app.clone(), why, state)
            };
            let started = started.clone();
            let first = match first {
                Some(t) => {
                    started(t);
                    Cause::Triggered(t)
                }
                None => Cause::Start,
            };
            tracker.spawn(run_loop(run, (first, interval), waiting, token.clone(), started));
        };
        Self { senders: Arc::new(senders), spawner: Some(Arc::new(spawner)) }
    }

    /// Starts `app`'s actor unless it was, its first pass answering `first` (`None`:
    /// [`Cause::Start`]); false when it was started before.
    fn start_actor(&self, app: &str, waiting: &Arc<Waiting>, first: Option<Trigger>) -> bool {
        let Some(spawn) = &self.spawner else { return false };
        if waiting.started.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        spawn(app.to_string(), waiting.clone(), first);
        true
    }

    /// Asks that the next pass of `app` start no later than `at` ([`Cause::Wake`]),
    /// sooner than its poll: called by its pass (e.g. a sync window opens then). The
    /// earliest asked since the pass started counts; false for an unknown application.
    pub fn wake_at(&self, app: &str, at: Instant) -> bool {
        let Some(waiting) = self.senders.get(app) else { return false };
        if let Ok(mut wake) = waiting.wake.lock() {
            let at = tokio::time::Instant::from_std(at);
            *wake = Some(wake.map_or(at, |w| w.min(at)));
        }
        true
    }

    /// Asks for a pass of `app`. Returns false when no such application exists. When a
    /// pass is already waiting, the request is merged into it.
    pub fn trigger(&self, app: &str, why: Trigger) -> bool {
        match self.senders.get(app) {
            Some(waiting) => {
                if !self.start_actor(app, waiting, Some(why)) {
                    waiting.push(why);
                }
                true
            }
            None => false,
        }
    }
}

/// The wait before the next poll: `interval` plus up to 10 % jitter.
pub fn jittered(interval: Duration) -> Duration {
    let max = interval.as_millis() as u64 / 10;
    interval + Duration::from_millis(if max == 0 { 0 } else { rand::rng().random_range(0..=max) })
}

/// The actor's loop: run `pass` on the application's state, then wait for a trigger,
/// the interval (jittered), or cancellation. `pass` returns true when things are still settling (it synced, or
/// something is Progressing): the next look then comes after at most
/// [`SETTLE_INTERVAL`]. `started` sees each trigger just before the pass it starts.
async fn run_loop<F, Fut, St>(
    mut pass: F,
    (first, interval): (Cause, Duration),
    waiting: Arc<Waiting>,
    token: CancellationToken,
    mut started: impl FnMut(Trigger),
) where
    F: FnMut(Cause, St) -> Fut,
    Fut: std::future::Future<Output = (bool, St)>,
    St: Default,
{
    let mut why = first;
    let mut state = St::default();
    loop {
        let live_after = tokio::time::Instant::now() + LIVE_GAP;
        // boxed: a task keeps its future's largest state for as long as it lives, and a
        // pass's is ~18 KB; unboxed, 1,000 idle applications held 18 MB between passes
        let settling;
        (settling, state) = Box::pin(pass(why, state)).await;
        if waiting.is_waiting() {
            // asked for while the pass ran: wait for the burst to end
            if !quiet(&waiting, &token).await {
                return;
            }
            match due(&waiting, live_after, &token).await {
                None => return,
                Some(Some(t)) => {
                    started(t);
                    why = Cause::Triggered(t);
                    continue;
                }
                Some(None) => {}
            }
        }
        let (wait, timer) =
            if settling { (interval.min(SETTLE_INTERVAL), Cause::Settle) } else { (jittered(interval), Cause::Poll) };
        let (wait, timer) = match waiting.take_wake() {
            Some(at) if at.saturating_duration_since(tokio::time::Instant::now()) < wait => {
                (at.saturating_duration_since(tokio::time::Instant::now()), Cause::Wake)
            }
            _ => (wait, timer),
        };
        let timeout = tokio::time::sleep(wait);
        tokio::pin!(timeout);
        why = loop {
            tokio::select! {
                () = token.cancelled() => return,
                () = waiting.notify.notified() => {}
                () = &mut timeout => break timer,
            }
            // (a wake-up whose trigger a pass already took finds nothing waiting)
            match due(&waiting, live_after, &token).await {
                None => return,
                Some(Some(t)) => {
                    started(t);
                    break Cause::Triggered(t);
                }
                Some(None) => {}
            }
        };
    }
}

/// The waiting pass, taken once it is due: at once, unless only changes in the cluster
/// asked for it ([`Trigger::live`]) and `live_after` (the last pass's start plus
/// [`LIVE_GAP`]) has not come; then at `live_after`, or as soon as a push or a request
/// merges in. `Some(None)` when nothing is waiting, `None` when cancelled.
async fn due(
    waiting: &Waiting,
    live_after: tokio::time::Instant,
    token: &CancellationToken,
) -> Option<Option<Trigger>> {
    loop {
        match waiting.peek() {
            None => return Some(None),
            Some(t) if !t.live() || tokio::time::Instant::now() >= live_after => return Some(waiting.take()),
            Some(_) => {}
        }
        tokio::select! {
            () = token.cancelled() => return None,
            () = tokio::time::sleep_until(live_after) => {}
            () = waiting.notify.notified() => {}
        }
    }
}

/// Waits until no trigger has arrived for [`QUIET`], or [`MAX_HOLD`] has passed (they
/// merge into the waiting pass meanwhile). False when cancelled.
async fn quiet(waiting: &Waiting, token: &CancellationToken) -> bool {
    let deadline = tokio::time::Instant::now() + MAX_HOLD;
    loop {
        tokio::select! {
            () = token.cancelled() => return false,
            () = tokio::time::sleep_until(deadline) => return true,
            () = tokio::time::sleep(QUIET) => return true,
            () = waiting.notify.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An application's actor between passes holds no pass state: its future stays small
    /// however large the pass's future is (it is boxed only while the pass runs).
    #[test]
    fn an_idle_actor_does_not_hold_its_pass_s_state() {
        let pass = |_: Cause, (): ()| async {
            let big = [1u8; 16 * 1024];
            tokio::task::yield_now().await;
            (big.contains(&0), ())
        };
        assert!(std::mem::size_of_val(&pass(Cause::Start, ())) > 16 * 1024);
        let actor =
            run_loop(pass, (Cause::Start, Duration::from_secs(1)), Arc::default(), CancellationToken::new(), |_| {});
        let size = std::mem::size_of_val(&actor);
        assert!(size < 1024, "an actor's future is {size} bytes");
    }

    /// Actors started lazily: none passes before its application's first trigger, whose
    /// pass is its first (no Start pass before it); then it polls like any actor; an
    /// application never triggered never runs.
    #[tokio::test(start_paused = true)]
    async fn a_lazy_actor_starts_at_its_first_trigger() {
        let causes: Arc<std::sync::Mutex<Vec<(String, &'static str)>>> = Arc::default();
        let c = causes.clone();
        let pass = move |app: String, why: Cause, (): ()| {
            c.lock().unwrap().push((app, why.as_str()));
            async { (false, ()) }
        };
        let (tracker, token) = (TaskTracker::new(), CancellationToken::new());
        let apps = [("a".to_string(), Duration::from_secs(180)), ("b".to_string(), Duration::from_secs(180))];
        let sched = Scheduler::start_lazily_with(apps, pass, |_| {}, &tracker, token.clone());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(causes.lock().unwrap().is_empty(), "no actor runs before a trigger");
        assert!(sched.trigger("a", Trigger::Manual));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(*causes.lock().unwrap(), [("a".to_string(), "manual")]);
        assert!(sched.trigger("a", Trigger::Drift));
        tokio::time::sleep(Duration::from_secs(300)).await;
        let seen = causes.lock().unwrap().clone();
        assert_eq!(seen.iter().map(|(_, c)| *c).collect::<Vec<_>>(), ["manual", "drift", "poll"], "{seen:?}");
        assert!(seen.iter().all(|(a, _)| a == "a"), "b never triggered, never run: {seen:?}");
        token.cancel();
        tracker.close();
        tracker.wait().await;
    }

    /// A pass that asks to be woken (a sync window opens in 40 s) gets its next pass
    /// then, not at the 180 s poll; the wake-up is used once.
    #[tokio::test(start_paused = true)]
    async fn a_pass_asks_to_be_woken_before_its_poll() {
        let causes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waiting = Arc::new(Waiting::default());
        let sched =
            Scheduler { senders: Arc::new(HashMap::from([("web".to_string(), waiting.clone())])), spawner: None };
        let (c, s) = (causes.clone(), sched.clone());
        let t0 = tokio::time::Instant::now();
        let pass = move |why: Cause, (): ()| {
            c.lock().unwrap().push((why.as_str(), t0.elapsed().as_secs()));
            if why == Cause::Start {
                assert!(s.wake_at("web", (tokio::time::Instant::now() + Duration::from_secs(40)).into_std()));
            }
            async { (false, ()) }
        };
        let token = CancellationToken::new();
        let task =
            tokio::spawn(run_loop(pass, (Cause::Start, Duration::from_secs(180)), waiting, token.clone(), |_| {}));
        assert!(!sched.wake_at("nope", std::time::Instant::now()));
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(*causes.lock().unwrap(), [("start", 0), ("wake", 40)]);
        tokio::time::sleep(Duration::from_secs(200)).await;
        let seen = causes.lock().unwrap().clone();
        assert_eq!(seen.len(), 3, "then the poll: {seen:?}");
        assert_eq!(seen[2].0, "poll");
        token.cancel();
        task.await.unwrap();
    }

    /// Failed passes in a row are looked at again after 5, 10, 20… s, never later than
    /// the reconcile interval.
    #[test]
    fn failed_passes_back_off_up_to_the_interval() {
        let secs = Duration::from_secs;
        let seen: Vec<u64> = (1..=7).map(|n| retry_after(n, secs(180)).as_secs()).collect();
        assert_eq!(seen, [5, 10, 20, 40, 80, 160, 180]);
        assert_eq!(retry_after(u32::MAX, secs(3600)), secs(3600), "no overflow");
        assert_eq!(retry_after(1, secs(1)), RETRY_FIRST, "a shorter interval still waits the first retry");
    }

    /// A burst of triggers while a pass runs leads to exactly one more pass; polls
    /// follow the interval (paused tokio time: no real waiting). Each pass is told what
    /// started it.
    #[tokio::test(start_paused = true)]
    async fn triggers_coalesce_and_the_poller_keeps_time() {
        let passes = Arc::new(AtomicUsize::new(0));
        let causes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waiting = Arc::new(Waiting::default());
        let token = CancellationToken::new();
        let (p, c) = (passes.clone(), causes.clone());
        let pass = move |why: Cause, (): ()| {
            let p = p.clone();
            c.lock().unwrap().push(why.as_str());
            async move {
                p.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await; // a pass takes 1 s
                (false, ())
            }
        };
        let waits = Arc::new(std::sync::Mutex::new(Vec::new()));
        let w = waits.clone();
        let started = move |t: Trigger| {
            if let Trigger::Webhook { received } = t {
                w.lock().unwrap().push(received.elapsed());
            }
        };
        let task = tokio::spawn(run_loop(
            pass,
            (Cause::Start, Duration::from_secs(180)),
            waiting.clone(),
            token.clone(),
            started,
        ));
        let sched = Scheduler { senders: Arc::new(HashMap::from([("web".to_string(), waiting)])), spawner: None };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(passes.load(Ordering::SeqCst), 1, "the start pass");
        let received = tokio::time::Instant::now().into_std();
        for _ in 0..100_000 {
            assert!(sched.trigger("web", Trigger::Webhook { received }));
        }
        assert!(!sched.trigger("nope", Trigger::Manual));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(passes.load(Ordering::SeqCst), 2, "100,000 triggers during a pass: one more pass");
        assert_eq!(waits.lock().unwrap().len(), 1, "one receipt-to-start observation for the coalesced pass");
        tokio::time::sleep(Duration::from_secs(170)).await;
        assert_eq!(passes.load(Ordering::SeqCst), 2, "no poll before the interval");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(passes.load(Ordering::SeqCst), 3, "one poll after 180 s + jitter (≤ 18 s)");
        assert_eq!(*causes.lock().unwrap(), ["start", "webhook", "poll"]);
        token.cancel();
        task.await.expect("actor ends on cancel");
    }

    /// A storm of triggers that goes on for 3 s after a pass: one pass when it ends,
    /// not one per pass length; a lone trigger on an idle actor starts at once.
    #[tokio::test(start_paused = true)]
    async fn a_storm_is_one_pass_at_its_end() {
        let passes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waiting = Arc::new(Waiting::default());
        let token = CancellationToken::new();
        let p = passes.clone();
        let t0 = tokio::time::Instant::now();
        let pass = move |_why: Cause, (): ()| {
            let p = p.clone();
            async move {
                p.lock().unwrap().push(t0.elapsed());
                tokio::time::sleep(Duration::from_millis(100)).await;
                (false, ())
            }
        };
        let task = tokio::spawn(run_loop(
            pass,
            (Cause::Start, Duration::from_secs(180)),
            waiting.clone(),
            token.clone(),
            |_| {},
        ));
        let sched = Scheduler { senders: Arc::new(HashMap::from([("web".to_string(), waiting)])), spawner: None };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(passes.lock().unwrap().len(), 1, "the start pass");
        let received = tokio::time::Instant::now().into_std();
        sched.trigger("web", Trigger::Webhook { received });
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(passes.lock().unwrap()[1], Duration::from_secs(1), "a lone push starts its pass at once");
        // 3 s of triggers, one every millisecond
        for _ in 0..3000 {
            sched.trigger("web", Trigger::Webhook { received });
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = passes.lock().unwrap().clone();
        assert_eq!(seen.len(), 3, "start, the first push, one pass after the storm: {seen:?}");
        assert!(seen[2] >= Duration::from_secs(4), "after the storm ended: {seen:?}");
        token.cancel();
        task.await.expect("actor ends on cancel");
    }

    /// A pass that leaves things settling is followed by a settle pass after
    /// [`SETTLE_INTERVAL`], then by polls.
    #[tokio::test(start_paused = true)]
    async fn settling_is_looked_at_again_soon_then_polled() {
        let causes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waiting = Arc::new(Waiting::default());
        let token = CancellationToken::new();
        let c = causes.clone();
        let pass = move |why: Cause, (): ()| {
            let mut seen = c.lock().unwrap();
            seen.push(why);
            let settling = seen.len() == 1;
            async move { (settling, ()) }
        };
        let task = tokio::spawn(run_loop(
            pass,
            (Cause::Start, Duration::from_secs(180)),
            waiting.clone(),
            token.clone(),
            |_| {},
        ));
        tokio::time::sleep(SETTLE_INTERVAL + Duration::from_millis(1)).await;
        assert_eq!(*causes.lock().unwrap(), [Cause::Start, Cause::Settle]);
        tokio::time::sleep(Duration::from_secs(200)).await;
        assert_eq!(*causes.lock().unwrap(), [Cause::Start, Cause::Settle, Cause::Poll]);
        token.cancel();
        task.await.expect("actor ends on cancel");
    }

    /// A live change queued during a pass, then a push: the next pass is the push's
    /// (fresh refs, its receipt), whatever the order; two pushes keep the first receipt.
    #[tokio::test(start_paused = true)]
    async fn a_push_is_not_swallowed_by_a_live_change_waiting_before_it() {
        let causes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waiting = Arc::new(Waiting::default());
        let token = CancellationToken::new();
        let c = causes.clone();
        let pass = move |why: Cause, (): ()| {
            c.lock().unwrap().push(why);
            async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                (false, ())
            }
        };
        let task = tokio::spawn(run_loop(
            pass,
            (Cause::Start, Duration::from_secs(180)),
            waiting.clone(),
            token.clone(),
            |_| {},
        ));
        let sched = Scheduler { senders: Arc::new(HashMap::from([("web".to_string(), waiting)])), spawner: None };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (first, second) = (std::time::Instant::now(), std::time::Instant::now() + Duration::from_millis(5));
        sched.trigger("web", Trigger::Drift);
        sched.trigger("web", Trigger::Webhook { received: first });
        sched.trigger("web", Trigger::Drift);
        sched.trigger("web", Trigger::Webhook { received: second });
        tokio::time::sleep(Duration::from_secs(3)).await;
        let seen = causes.lock().unwrap().clone();
        assert_eq!(seen, [Cause::Start, Cause::Triggered(Trigger::Webhook { received: first })]);
        assert_eq!(Trigger::Drift.merge(Trigger::Moved), Trigger::Moved);
        assert_eq!(Trigger::Manual.merge(Trigger::Drift), Trigger::Manual);
        assert_eq!(Trigger::Drift.merge(Trigger::Drift), Trigger::Drift);
        // a take waiting keeps its refs' bound against changes in the cluster; a request
        // or a push, which want refs asked after they came, answer it too
        let take = Trigger::Take { at: first };
        assert_eq!(Trigger::Drift.merge(take), take);
        assert_eq!(take.merge(Trigger::Health), take);
        assert_eq!(take.merge(Trigger::Manual), Trigger::Manual);
        assert_eq!(Trigger::Moved.merge(take), Trigger::Moved);
        token.cancel();
        task.await.expect("actor ends on cancel");
    }

    /// Changes in the cluster keep coming (a label flipped every 100 ms for 10 s, a
    /// rollout's Pods): one pass per application every 2 s at most, each answering
    /// every change before it; a push meanwhile starts its pass at once.
    #[tokio::test(start_paused = true)]
    async fn live_changes_start_one_pass_every_two_seconds_at_most() {
        let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waiting = Arc::new(Waiting::default());
        let token = CancellationToken::new();
        let (s, t0) = (starts.clone(), tokio::time::Instant::now());
        let pass = move |why: Cause, (): ()| {
            s.lock().unwrap().push((t0.elapsed(), why));
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                (false, ())
            }
        };
        let task = tokio::spawn(run_loop(
            pass,
            (Cause::Start, Duration::from_secs(3600)),
            waiting.clone(),
            token.clone(),
            |_| {},
        ));
        let sched = Scheduler { senders: Arc::new(HashMap::from([("web".to_string(), waiting)])), spawner: None };
        for i in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            sched.trigger("web", if i % 2 == 0 { Trigger::Drift } else { Trigger::Health });
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let seen = starts.lock().unwrap().clone();
        for pair in seen.windows(2) {
            assert!(pair[1].0 - pair[0].0 >= Duration::from_secs(2), "passes 2 s apart at least: {seen:?}");
        }
        assert!(seen.len() >= 5, "the changes were answered: {seen:?}");
        assert!(seen.last().unwrap().0 >= Duration::from_secs(10), "the last change has its pass: {seen:?}");
        // long after the last pass a change starts one at once; a push is not held back
        let before = seen.len();
        sched.trigger("web", Trigger::Health);
        tokio::time::sleep(Duration::from_millis(20)).await;
        sched.trigger("web", Trigger::Drift);
        tokio::time::sleep(Duration::from_millis(20)).await;
        sched.trigger("web", Trigger::Webhook { received: std::time::Instant::now() });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let seen = starts.lock().unwrap().clone();
        assert_eq!(seen.len(), before + 2, "{seen:?}");
        assert_eq!(seen[before].1, Cause::Triggered(Trigger::Health), "{seen:?}");
        assert!(matches!(seen[before + 1].1, Cause::Triggered(Trigger::Webhook { .. })), "{seen:?}");
        assert!(seen[before + 1].0 - seen[before].0 < Duration::from_secs(1), "{seen:?}");
        token.cancel();
        task.await.expect("actor ends on cancel");
    }

    /// A child's change asks for a health look; anything else asking meanwhile is what
    /// the pass answers (every pass reads health).
    #[test]
    fn a_health_look_gives_way_to_any_other_trigger() {
        assert_eq!(Trigger::Health.merge(Trigger::Drift), Trigger::Drift);
        assert_eq!(Trigger::Drift.merge(Trigger::Health), Trigger::Drift);
        assert_eq!(Trigger::Health.merge(Trigger::Manual), Trigger::Manual);
        assert_eq!(Trigger::Moved.merge(Trigger::Health), Trigger::Moved);
        assert_eq!(Trigger::Health.merge(Trigger::Health), Trigger::Health);
        assert!(!Trigger::Health.wants_fresh_refs());
    }

    #[test]
    fn jitter_is_bounded() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(180));
            assert!(d >= Duration::from_secs(180) && d <= Duration::from_secs(198), "{d:?}");
        }
        assert_eq!(jittered(Duration::from_millis(5)), Duration::from_millis(5));
    }

    /// The actor owns its application's state: each pass gets what the pass before
    /// returned, starting from the default.
    #[tokio::test(start_paused = true)]
    async fn each_pass_gets_the_state_the_last_one_returned() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (waiting, token) = (Arc::new(Waiting::default()), CancellationToken::new());
        let s = seen.clone();
        let pass = move |_: Cause, passes: Vec<u32>| {
            s.lock().unwrap().push(passes.clone());
            let mut next = passes;
            next.push(next.len() as u32);
            async move { (false, next) }
        };
        let task = tokio::spawn(run_loop(
            pass,
            (Cause::Start, Duration::from_secs(10)),
            waiting.clone(),
            token.clone(),
            |_| {},
        ));
        tokio::time::sleep(Duration::from_secs(25)).await;
        token.cancel();
        task.await.unwrap();
        assert_eq!(*seen.lock().unwrap(), [vec![], vec![0], vec![0, 1]]);
    }
}
