//! What `GET /readyz` and `GET /healthz` of `plumb serve` answer.
//!
//! - **Ready** once every application's first pass was attempted (run, or skipped by
//!   a replica that does not hold the Lease; with election an actor starts at its
//!   application's first trigger, [`Probes::lazy`], and counts from then on) and every
//!   watch started so far has its first full list: before that the process cannot say
//!   anything true about the applications. Discovery has run before the server starts.
//! - **Live** while every application actor made progress (started or finished a pass)
//!   within its deadline: [`deadline`] of its reconcile interval. An actor stuck in one
//!   pass beyond it is wedged, and `/healthz` answers 503 naming it, so that the kubelet
//!   restarts the pod.
//!
//! [`verdict`] and [`deadline`] are pure; [`Probes`] keeps the marks the actors leave.

use std::{
    collections::BTreeMap,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Progress of one application actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Reconcile interval of the application.
    pub interval: Duration,
    /// When the actor last started or finished a pass (its start time before any).
    pub last_mark: Instant,
    /// True once a first pass was attempted.
    pub attempted: bool,
    /// True once the actor runs (an actor started at its first trigger,
    /// [`crate::scheduler::Scheduler::start_lazily_with`], counts from then on).
    pub running: bool,
}

/// How long an actor may go without starting or finishing a pass: twice its interval
/// (the wait before the next poll is at most 1.1 × interval) plus 60 s for the pass.
pub fn deadline(interval: Duration) -> Duration {
    interval * 2 + Duration::from_secs(60)
}

/// The answer of both probes at `now`: `(ready, live)`, each `Ok` or the reasons, one
/// per application, in name order.
pub fn verdict(apps: &BTreeMap<String, Progress>, now: Instant) -> (Result<(), Vec<String>>, Result<(), Vec<String>>) {
    let apps = || apps.iter().filter(|(_, p)| p.running);
    let waiting: Vec<String> =
        apps().filter(|(_, p)| !p.attempted).map(|(a, _)| format!("{a}: first pass not attempted yet")).collect();
    let wedged: Vec<String> = apps()
        .filter_map(|(a, p)| {
            let idle = now.saturating_duration_since(p.last_mark);
            (idle > deadline(p.interval)).then(|| {
                format!(
                    "{a}: no pass started or finished for {}s (deadline {}s)",
                    idle.as_secs(),
                    deadline(p.interval).as_secs()
                )
            })
        })
        .collect();
    let ok = |v: Vec<String>| if v.is_empty() { Ok(()) } else { Err(v) };
    (ok(waiting), ok(wedged))
}

/// `GET /readyz` and `GET /healthz` answering from `probes`: `ok`, or 503 with one
/// reason per line. `unsynced_watches` names the watches still listing (not ready).
pub fn router(
    probes: std::sync::Arc<Probes>,
    unsynced_watches: impl Fn() -> Vec<String> + Clone + Send + Sync + 'static,
) -> axum::Router {
    use axum::{http::StatusCode, routing::get};
    fn answer(r: Result<(), Vec<String>>) -> (StatusCode, String) {
        match r {
            Ok(()) => (StatusCode::OK, "ok".into()),
            Err(reasons) => (StatusCode::SERVICE_UNAVAILABLE, reasons.join("\n")),
        }
    }
    let ready = probes.clone();
    axum::Router::new()
        .route(
            "/readyz",
            get(move || async move {
                let mut reasons = ready.check().0.err().unwrap_or_default();
                reasons.extend(unsynced_watches().into_iter().map(|k| format!("watch of {k} not synced yet")));
                answer(if reasons.is_empty() { Ok(()) } else { Err(reasons) })
            }),
        )
        .route("/healthz", get(move || async move { answer(probes.check().1) }))
}

/// The marks of one process's actors (shared by the actors and the HTTP server).
#[derive(Debug, Default)]
pub struct Probes {
    apps: Mutex<BTreeMap<String, Progress>>,
}

impl Probes {
    /// Probes for `(application, interval)` actors starting now.
    pub fn new(apps: impl IntoIterator<Item = (String, Duration)>) -> Self {
        Self::of(apps, true)
    }

    /// Probes for actors each started at its first trigger: one counts from its first
    /// mark.
    pub fn lazy(apps: impl IntoIterator<Item = (String, Duration)>) -> Self {
        Self::of(apps, false)
    }

    fn of(apps: impl IntoIterator<Item = (String, Duration)>, running: bool) -> Self {
        let now = Instant::now();
        let progress = |interval| Progress { interval, last_mark: now, attempted: false, running };
        Self { apps: Mutex::new(apps.into_iter().map(|(a, interval)| (a, progress(interval))).collect()) }
    }

    /// The actor of `app` started a pass.
    pub fn started(&self, app: &str) {
        self.mark(app, false);
    }

    /// The actor of `app` finished (or skipped) a pass.
    pub fn finished(&self, app: &str) {
        self.mark(app, true);
    }

    fn mark(&self, app: &str, attempted: bool) {
        if let Ok(mut apps) = self.apps.lock()
            && let Some(p) = apps.get_mut(app)
        {
            p.last_mark = Instant::now();
            p.attempted |= attempted;
            p.running = true;
        }
    }

    /// [`verdict`] now.
    pub fn check(&self) -> (Result<(), Vec<String>>, Result<(), Vec<String>>) {
        match self.apps.lock() {
            Ok(apps) => verdict(&apps, Instant::now()),
            Err(_) => (Err(vec!["probe state poisoned".into()]), Err(vec!["probe state poisoned".into()])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apps(entries: &[(&str, u64, u64, bool)], now: Instant) -> BTreeMap<String, Progress> {
        entries
            .iter()
            .map(|(a, interval, ago, attempted)| {
                let p = Progress {
                    interval: Duration::from_secs(*interval),
                    last_mark: now - Duration::from_secs(*ago),
                    attempted: *attempted,
                    running: true,
                };
                ((*a).to_string(), p)
            })
            .collect()
    }

    #[test]
    fn ready_once_every_first_pass_was_attempted() {
        let now = Instant::now() + Duration::from_secs(10_000);
        let (ready, live) = verdict(&apps(&[("a", 180, 1, true), ("b", 180, 1, false)], now), now);
        assert_eq!(ready, Err(vec!["b: first pass not attempted yet".to_string()]));
        assert_eq!(live, Ok(()));
        let (ready, _) = verdict(&apps(&[("a", 180, 1, true), ("b", 180, 1, true)], now), now);
        assert_eq!(ready, Ok(()));
        assert_eq!(verdict(&BTreeMap::new(), now), (Ok(()), Ok(())), "no application: nothing to wait for");
    }

    #[test]
    fn an_actor_silent_beyond_its_deadline_is_wedged() {
        let now = Instant::now() + Duration::from_secs(10_000);
        assert_eq!(deadline(Duration::from_secs(180)), Duration::from_secs(420));
        let (_, live) = verdict(&apps(&[("a", 180, 420, true), ("b", 30, 121, true)], now), now);
        assert_eq!(live, Err(vec!["b: no pass started or finished for 121s (deadline 120s)".to_string()]));
    }

    #[test]
    fn marks_move_progress() {
        let p = Probes::new([("a".to_string(), Duration::from_secs(1))]);
        assert!(p.check().0.is_err());
        p.started("a");
        assert!(p.check().0.is_err(), "a started pass is not yet an attempt");
        p.finished("a");
        assert_eq!(p.check(), (Ok(()), Ok(())));
        p.finished("unknown");
    }

    /// Actors started at their first trigger count from their first mark: the others
    /// (applications of shards another replica holds) hold neither probe back.
    #[test]
    fn lazy_actors_count_once_they_run() {
        let p = Probes::lazy([("a".to_string(), Duration::from_secs(1)), ("b".to_string(), Duration::from_secs(1))]);
        assert_eq!(p.check(), (Ok(()), Ok(())), "none runs yet");
        p.started("a");
        assert_eq!(p.check().0, Err(vec!["a: first pass not attempted yet".to_string()]));
        p.finished("a");
        assert_eq!(p.check(), (Ok(()), Ok(())), "b never started");
    }
}
