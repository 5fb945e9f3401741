//! Which notification events a pass calls for (pure: the status of the pass, its sync
//! record and what was told before go in; the events come out).
//!
//! Each trigger is told **once per (application, revision, trigger)**: a pass that
//! finds the same thing again at the same revision says nothing. Telling one side of a
//! pair forgets the other at that revision (`sync-failed` / `sync-succeeded`,
//! `health-degraded` / `health-recovered`), so that a failure after a success, or a
//! Degraded after a recovery, is told again. `health-recovered` is told only after a
//! `health-degraded` that was told. What is remembered is bounded ([`MAX_REMEMBERED`]
//! keys, the oldest forgotten first).
//!
//! Health that flaps at one revision (Degraded, Healthy, Degraded, … as a probe comes
//! and goes) is told with a backoff: the second telling of the same (application,
//! trigger) at the same revision waits [`FLAP_BACKOFF`] after the first, each later one
//! twice as long as the one before, at most [`FLAP_BACKOFF_MAX`]. A telling held back
//! is not remembered, so a state that lasts is told once the wait is over (the next
//! pass finds it again); a new revision starts afresh.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::{
    config::Trigger,
    health::HealthStatus,
    status::{AppStatus, ConditionType, SyncRecord, SyncResult},
};

/// How many (application, revision, trigger) keys [`Memory`] keeps; past it the oldest
/// is forgotten (and could be told again).
pub const MAX_REMEMBERED: usize = 10_000;

/// The first wait, in seconds, before the same trigger of a flapping pair is told again
/// at the same revision (see the module docs).
pub const FLAP_BACKOFF: u64 = 60;

/// The longest such wait, in seconds (1 h).
pub const FLAP_BACKOFF_MAX: u64 = 3600;

/// The start of a `ComparisonError` condition that a commit which does not render
/// leaves (`render abc1234: …`, [`crate::reconcile::PassFailure::Render`]).
pub const RENDER_FAILED_PREFIX: &str = "render ";

/// One thing to tell about one application. Its fields come from Git and the cluster
/// (untrusted): each provider escapes them for its format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub trigger: Trigger,
    /// The application.
    pub app: String,
    /// Its environment.
    pub environment: String,
    /// The commit concerned (full SHA).
    pub revision: String,
    /// The commit's subject line (may be empty).
    pub subject: String,
    /// Of a sync: `failed`, `refused` or `succeeded`; else empty.
    pub result: String,
    /// What happened, in words: the sync's message, the objects concerned, the
    /// condition's text.
    pub message: String,
}

/// What was told so far, for every application: the keys told, oldest first, and the
/// revision at which each application's Degraded was told (until it recovers). One per
/// process, kept across policy reloads.
#[derive(Debug, Default)]
pub struct Memory {
    told: HashSet<(String, String, Trigger)>,
    order: VecDeque<(String, String, Trigger)>,
    degraded: HashMap<String, String>,
    /// Per (application, trigger) of a pair: the revision of its last telling, when
    /// (seconds), and how many times it was told at that revision.
    flips: HashMap<(String, Trigger), (String, u64, u32)>,
}

impl Memory {
    /// Whether `key` was told (and is still remembered).
    pub fn told(&self, app: &str, revision: &str, trigger: Trigger) -> bool {
        self.told.contains(&(app.to_string(), revision.to_string(), trigger))
    }

    /// Forgets that `trigger` of `app` at `revision` was told (its message was not
    /// sent after all, [`crate::fence`]): the next pass that finds it tells it again.
    pub fn untell(&mut self, app: &str, revision: &str, trigger: Trigger) {
        self.forget(&(app.to_string(), revision.to_string(), trigger));
        if trigger == Trigger::HealthDegraded && self.degraded.get(app).is_some_and(|r| r == revision) {
            self.degraded.remove(app);
        }
    }

    /// Remembers `key`; false when it was already told.
    fn remember(&mut self, key: (String, String, Trigger)) -> bool {
        if self.told.contains(&key) {
            return false;
        }
        if self.order.len() >= MAX_REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.told.remove(&old);
        }
        self.told.insert(key.clone());
        self.order.push_back(key);
        true
    }

    fn forget(&mut self, key: &(String, String, Trigger)) {
        if self.told.remove(key) {
            self.order.retain(|k| k != key);
        }
    }

    /// Whether telling `trigger` of `app` at `revision` at `now` (seconds) must wait
    /// for the flap backoff; records the telling when it need not.
    fn flap_allows(&mut self, app: &str, revision: &str, trigger: Trigger, now: u64) -> bool {
        if self.flips.len() >= MAX_REMEMBERED {
            self.flips.clear();
        }
        let entry = self.flips.entry((app.to_string(), trigger)).or_insert_with(|| (String::new(), 0, 0));
        if entry.0 != revision || entry.2 == 0 {
            *entry = (revision.to_string(), now, 1);
            return true;
        }
        let wait = FLAP_BACKOFF.saturating_mul(1 << entry.2.saturating_sub(1).min(12)).min(FLAP_BACKOFF_MAX);
        if now < entry.1.saturating_add(wait) {
            return false;
        }
        *entry = (revision.to_string(), now, entry.2 + 1);
        true
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// The other side of a pair of triggers (see the module docs).
fn opposite(t: Trigger) -> Option<Trigger> {
    match t {
        Trigger::SyncFailed => Some(Trigger::SyncSucceeded),
        Trigger::SyncSucceeded => Some(Trigger::SyncFailed),
        Trigger::HealthDegraded => Some(Trigger::HealthRecovered),
        Trigger::HealthRecovered => Some(Trigger::HealthDegraded),
        _ => None,
    }
}

/// What the pass that produced `st` (and `sync`, the sync it made, if any) calls for,
/// given `memory`, which it updates. See the module docs for the rules; the triggers:
///
/// - `render-failed`: a `ComparisonError` starting [`RENDER_FAILED_PREFIX`] (the
///   revision is the commit that does not render);
/// - `unverified-revision`: an `UnverifiedRevision` condition (the revision is the one
///   not trusted, [`crate::status::Verification`]);
/// - `sync-failed` / `sync-succeeded`: a sync record `Failed` or `Refused` /
///   `Succeeded` (`Running` and `Superseded` say nothing);
/// - `prune-waiting-approval`: objects whose reason says their prune waits
///   ([`crate::plan::awaits_approval`]);
/// - `health-degraded`: health Degraded; `health-recovered`: Healthy after a told
///   Degraded.
///
/// `now` is the time of the pass in seconds (any fixed origin), for the flap backoff.
pub fn events(memory: &mut Memory, st: &AppStatus, sync: Option<&SyncRecord>, now: u64) -> Vec<Event> {
    let mut found: Vec<(Trigger, String, String, String)> = Vec::new();
    for c in &st.conditions {
        if c.type_ == ConditionType::ComparisonError && c.message.starts_with(RENDER_FAILED_PREFIX) {
            found.push((Trigger::RenderFailed, st.revision.clone(), String::new(), c.message.clone()));
        }
        if c.type_ == ConditionType::UnverifiedRevision {
            let rev = st.verification.as_ref().filter(|v| !v.verified).map_or(&st.revision, |v| &v.revision);
            found.push((Trigger::UnverifiedRevision, rev.clone(), String::new(), c.message.clone()));
        }
    }
    if let Some(s) = sync {
        let summary = || {
            let (applied, pruned) = (s.applied.len() + s.applied_omitted, s.pruned.len() + s.pruned_omitted);
            format!("applied {applied} objects, pruned {pruned}")
        };
        match s.result {
            SyncResult::Failed | SyncResult::Refused => {
                let result = s.result.as_str().to_ascii_lowercase();
                found.push((Trigger::SyncFailed, s.revision.clone(), result, s.message.clone()));
            }
            SyncResult::Succeeded => {
                found.push((Trigger::SyncSucceeded, s.revision.clone(), "succeeded".into(), summary()));
            }
            SyncResult::Running | SyncResult::Superseded => {}
        }
    }
    let held: Vec<&str> =
        st.resources.iter().filter(|r| crate::plan::awaits_approval(&r.reason)).map(|r| r.object.as_str()).collect();
    if !held.is_empty() {
        let message = format!("held: {}", held.join(", "));
        found.push((Trigger::PruneWaitingApproval, st.revision.clone(), String::new(), message));
    }
    match st.health {
        HealthStatus::Degraded => {
            let why: Vec<String> = st
                .resources
                .iter()
                .filter(|r| r.health == HealthStatus::Degraded)
                .map(|r| format!("{}: {}", r.object, r.health_message))
                .collect();
            found.push((Trigger::HealthDegraded, st.revision.clone(), String::new(), why.join("; ")));
        }
        HealthStatus::Healthy if memory.degraded.contains_key(&st.app) => {
            found.push((Trigger::HealthRecovered, st.revision.clone(), String::new(), "Healthy".into()));
        }
        _ => {}
    }
    found.sort_by_key(|(t, ..)| Trigger::ALL.iter().position(|a| a == t));
    let mut out = Vec::new();
    for (trigger, revision, result, message) in found {
        let key = (st.app.clone(), revision.clone(), trigger);
        if memory.told.contains(&key) {
            continue;
        }
        // only health flaps by itself; a sync result comes once, from the pass that synced
        let flaps = matches!(trigger, Trigger::HealthDegraded | Trigger::HealthRecovered);
        if flaps && !memory.flap_allows(&st.app, &revision, trigger, now) {
            continue;
        }
        memory.remember(key);
        if let Some(other) = opposite(trigger) {
            memory.forget(&(st.app.clone(), revision.clone(), other));
        }
        match trigger {
            Trigger::HealthDegraded => {
                memory.degraded.insert(st.app.clone(), revision.clone());
            }
            Trigger::HealthRecovered => {
                if let Some(at) = memory.degraded.remove(&st.app) {
                    memory.forget(&(st.app.clone(), at, Trigger::HealthDegraded));
                }
            }
            _ => {}
        }
        let subject = if revision == st.revision { st.subject.clone() } else { String::new() };
        out.push(Event {
            trigger,
            app: st.app.clone(),
            environment: st.environment.clone(),
            revision,
            subject,
            result,
            message,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Condition, ResourceStatus, SyncReason};

    /// A message not sent after all (its shard's fence closed) is told again by the next
    /// pass that finds it; a Degraded untold is not followed by a recovery.
    #[test]
    fn what_was_not_sent_is_told_again() {
        let mut memory = Memory::default();
        let degraded = status(HealthStatus::Degraded);
        assert_eq!(events(&mut memory, &degraded, None, 1_000).len(), 1);
        assert!(events(&mut memory, &degraded, None, 9_000).is_empty(), "told once");
        memory.untell("web", "abcdef123", Trigger::HealthDegraded);
        let told: Vec<Trigger> = events(&mut memory, &degraded, None, 9_100).iter().map(|e| e.trigger).collect();
        assert_eq!(told, [Trigger::HealthDegraded], "told again");
        memory.untell("web", "abcdef123", Trigger::HealthDegraded);
        assert!(events(&mut memory, &status(HealthStatus::Healthy), None, 9_200).is_empty(), "never told: no recovery");
    }

    fn status(health: HealthStatus) -> AppStatus {
        AppStatus {
            app: "web".into(),
            environment: "prod".into(),
            revision: "abcdef123".into(),
            health,
            ..Default::default()
        }
    }

    fn record(result: SyncResult, rev: &str) -> SyncRecord {
        SyncRecord { result, message: "why".into(), ..SyncRecord::new(rev, SyncReason::NewRevision) }
    }

    fn resource(object: &str, health: HealthStatus, reason: &str) -> ResourceStatus {
        ResourceStatus {
            object: object.into(),
            sync: crate::compare::SyncStatus::Synced,
            reason: reason.into(),
            health,
            health_message: "crash loop".into(),
        }
    }

    /// The triggers of a sequence of passes `every` seconds apart, one list per pass.
    fn run_every(every: u64, seq: &[(AppStatus, Option<SyncRecord>)]) -> Vec<Vec<&'static str>> {
        let mut memory = Memory::default();
        let mut now = 1_000_000;
        seq.iter()
            .map(|(st, sync)| {
                now += every;
                events(&mut memory, st, sync.as_ref(), now).iter().map(|e| e.trigger.as_str()).collect()
            })
            .collect()
    }

    /// [`run_every`] with passes far enough apart that no flap backoff holds a telling.
    fn run(seq: &[(AppStatus, Option<SyncRecord>)]) -> Vec<Vec<&'static str>> {
        run_every(FLAP_BACKOFF_MAX, seq)
    }

    #[test]
    fn each_trigger_is_found_from_the_status_of_a_pass() {
        let healthy = status(HealthStatus::Healthy);
        let mut render = status(HealthStatus::Healthy);
        render.conditions.push(Condition::new(ConditionType::ComparisonError, "render abcdef1: a.yaml:3: bad"));
        let mut fetch = status(HealthStatus::Healthy);
        fetch.conditions.push(Condition::new(ConditionType::ComparisonError, "fetch https://x: refused"));
        let mut unverified = status(HealthStatus::Healthy);
        unverified.conditions.push(Condition::new(ConditionType::UnverifiedRevision, "abcdef1 unsigned"));
        unverified.verification =
            Some(crate::status::Verification { revision: "fedcba987".into(), verified: false, ..Default::default() });
        let mut held = status(HealthStatus::Healthy);
        let reason =
            format!("requires pruning; {} (Prune=confirm): plumb prune web --approve", crate::plan::NEEDS_APPROVAL);
        held.resources.push(resource("ConfigMap/a/keep", HealthStatus::Healthy, &reason));
        let mut degraded = status(HealthStatus::Degraded);
        degraded.resources.push(resource("Deployment/a/web", HealthStatus::Degraded, ""));
        let seen = run(&[
            (render, None),
            (fetch, None),
            (unverified.clone(), None),
            (healthy.clone(), Some(record(SyncResult::Failed, "abcdef123"))),
            (healthy.clone(), Some(record(SyncResult::Succeeded, "abcdef123"))),
            (healthy.clone(), Some(record(SyncResult::Running, "abcdef123"))),
            (held, None),
            (degraded, None),
            (healthy, None),
        ]);
        assert_eq!(
            seen,
            [
                vec!["render-failed"],
                vec![],
                vec!["unverified-revision"],
                vec!["sync-failed"],
                vec!["sync-succeeded"],
                vec![],
                vec!["prune-waiting-approval"],
                vec!["health-degraded"],
                vec!["health-recovered"],
            ]
        );
        let mut memory = Memory::default();
        let e = events(&mut memory, &unverified, None, 0);
        assert_eq!(e[0].revision, "fedcba987", "the revision not trusted, not the one kept");
    }

    /// The render error names the failing commit as `PassFailure::Render` displays it.
    #[test]
    fn a_render_failure_is_recognised_by_its_display() {
        let failure = crate::reconcile::PassFailure::Render {
            revision: "abcdef123".into(),
            subject: "s".into(),
            error: crate::render::Error::Parse { file: "a.yaml".into(), line: 1, document: 1, message: "bad".into() },
        };
        assert!(failure.to_string().starts_with(RENDER_FAILED_PREFIX), "{failure}");
    }

    #[test]
    fn once_per_application_revision_and_trigger() {
        let st = || status(HealthStatus::Healthy);
        let failed = |rev: &str| Some(record(SyncResult::Failed, rev));
        let counts: Vec<usize> = run(&[
            (st(), failed("abcdef123")),
            (st(), failed("abcdef123")),
            (st(), None),
            (st(), Some(record(SyncResult::Refused, "abcdef123"))),
            (st(), failed("1234567aa")),
            (st(), Some(record(SyncResult::Succeeded, "1234567aa"))),
            (st(), Some(record(SyncResult::Succeeded, "1234567aa"))),
            (st(), failed("1234567aa")),
        ])
        .iter()
        .map(Vec::len)
        .collect();
        assert_eq!(counts, [1, 0, 0, 0, 1, 1, 0, 1], "a failure after a success is told again");
    }

    #[test]
    fn recovered_is_told_only_after_a_told_degraded_and_degraded_again_after_it() {
        let (h, d) = (status(HealthStatus::Healthy), status(HealthStatus::Degraded));
        let p = status(HealthStatus::Progressing);
        let seen = run(&[
            (h.clone(), None),
            (d.clone(), None),
            (d.clone(), None),
            (p, None),
            (h.clone(), None),
            (h.clone(), None),
            (d.clone(), None),
        ]);
        let want: [Vec<&str>; 7] = [
            vec![],
            vec!["health-degraded"],
            vec![],
            vec![],
            vec!["health-recovered"],
            vec![],
            vec!["health-degraded"],
        ];
        assert_eq!(seen, want);
    }

    #[test]
    fn memory_is_bounded() {
        let mut memory = Memory::default();
        for i in 0..MAX_REMEMBERED + 5 {
            let st = AppStatus { revision: format!("{i:040}"), ..status(HealthStatus::Healthy) };
            events(&mut memory, &st, Some(&record(SyncResult::Failed, &st.revision)), 0);
        }
        assert_eq!(memory.len(), MAX_REMEMBERED);
        assert!(!memory.told("web", &format!("{:040}", 0), Trigger::SyncFailed), "the oldest is forgotten");
    }

    #[test]
    fn a_pair_flapping_at_one_revision_is_told_with_a_backoff() {
        let (h, d) = (status(HealthStatus::Healthy), status(HealthStatus::Degraded));
        // a pass every 20 s: Degraded and Healthy alternate for 10 minutes
        let flapping: Vec<(AppStatus, Option<SyncRecord>)> =
            (0..30).map(|i| (if i % 2 == 0 { d.clone() } else { h.clone() }, None)).collect();
        let seen = run_every(20, &flapping);
        let told: Vec<(usize, &str)> =
            seen.iter().enumerate().flat_map(|(i, t)| t.iter().map(move |t| (i, *t))).collect();
        // passes at 20 s steps: each side waits 60 s, then 120 s, then 240 s after its last telling
        assert_eq!(
            told,
            [
                (0, "health-degraded"),
                (1, "health-recovered"),
                (4, "health-degraded"),
                (5, "health-recovered"),
                (10, "health-degraded"),
                (11, "health-recovered"),
                (22, "health-degraded"),
                (23, "health-recovered"),
            ],
            "{seen:?}"
        );
        // a state that lasts is told once its wait is over: Degraded held at 20 s, told at 60 s
        let seen = run_every(
            20,
            &[(d.clone(), None), (h.clone(), None), (d.clone(), None), (d.clone(), None), (d.clone(), None)],
        );
        assert_eq!(seen, [vec!["health-degraded"], vec!["health-recovered"], vec![], vec!["health-degraded"], vec![]]);
        // a new revision starts afresh
        let d2 = AppStatus { revision: "fedcba987".into(), ..d.clone() };
        let seen = run_every(20, &[(d.clone(), None), (h.clone(), None), (d2, None)]);
        assert_eq!(seen, [vec!["health-degraded"], vec!["health-recovered"], vec!["health-degraded"]]);
        // no revision yet (an empty one): told, never a panic
        let (d0, h0) =
            (AppStatus { revision: String::new(), ..d.clone() }, AppStatus { revision: String::new(), ..h.clone() });
        let seen = run_every(20, &[(d0.clone(), None), (h0, None), (d0.clone(), None), (d0, None)]);
        assert_eq!(seen, [vec!["health-degraded"], vec!["health-recovered"], vec![], vec!["health-degraded"]]);
        // a sync result is told at once: it comes only from the pass that synced
        let ok = |_| (h.clone(), Some(record(SyncResult::Succeeded, "abcdef123")));
        let failed = |_| (h.clone(), Some(record(SyncResult::Failed, "abcdef123")));
        let seq: Vec<(AppStatus, Option<SyncRecord>)> =
            (0..4).map(|i| if i % 2 == 0 { failed(i) } else { ok(i) }).collect();
        let seen = run_every(20, &seq);
        assert_eq!(seen, [vec!["sync-failed"], vec!["sync-succeeded"], vec!["sync-failed"], vec!["sync-succeeded"]]);
    }
}
