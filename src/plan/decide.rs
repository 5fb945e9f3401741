//! The sync gate: whether this pass syncs, and why — with selfHeal's backoff and its
//! non-convergence stop. Pure: the clock (`now`) and the selfHeal state of the previous
//! pass are passed in, the next state is returned.
//!
//! Rules, in order (each names its source):
//! - a person's sync (`plumb sync`) always runs; compare-only passes and previews never;
//! - automated sync runs when the application is OutOfSync **and** a sync could change
//!   something: objects to apply or prune, a refusal to record, or comparison errors not
//!   yet recorded as a Failed sync at this revision. What only a guard keeps
//!   (`Prune=false`, prune off, awaiting approval) starts no sync, and the revision
//!   counts as synced;
//! - a new revision (or a prune approved by annotation since) syncs at once; drift at the
//!   same revision only with selfHeal (Argo CD's rule: without selfHeal a hand change
//!   stays until the next commit);
//! - selfHeal retries with a backoff of 2 s ×3, capped at 300 s (Argo CD's defaults), and
//!   stops for good when the very drift it reverted comes straight back at the same
//!   revision (a mutating webhook or another controller owns the field);
//! - `FailOnSharedResource=true` holds back a sync while another application tracks one
//!   of the objects;
//! - a guard's refusal is recorded once per revision, not at every pass;
//! - `dependsOn`: automated sync and selfHeal wait while a dependency is not ready
//!   (condition `WaitingForDependency`, see [`super::depends`]); a person's sync runs;
//! - sync windows: automated sync and selfHeal wait while no window allows them
//!   (condition `SyncWindowClosed`, see [`super::windows`]); a person's sync waits too
//!   unless the window that holds it says `manualSync: true`.

use std::{
    hash::{DefaultHasher, Hash, Hasher},
    time::{Duration, Instant},
};

use super::{Plan, SyncReason};
use crate::{
    config::SyncPolicy,
    status::{Condition, ConditionType, SyncRecord, SyncResult},
    tracking::ObjectKey,
};

/// What a pass may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Follow the environment's sync policy (the server's passes).
    Policy,
    /// Sync now whatever the policy (`plumb sync`); `prune` as given.
    Manual {
        /// Prune objects Git no longer declares.
        prune: bool,
        /// Also prune objects that need approval (`Prune=confirm`, data-loss classes).
        approve: bool,
    },
    /// Compare only; write nothing (`plumb diff`).
    CompareOnly,
    /// Compare and record the status, never sync (the health waits of `plumb sync
    /// --wait`): what the command prints is what the stored status says.
    Observe,
    /// Compare and plan as [`Mode::Manual`] would, write nothing (`plumb sync --dry-run`):
    /// the report's plan says what would be created, updated, pruned and skipped.
    Preview {
        /// Plan the prune of objects Git no longer declares.
        prune: bool,
        /// Plan the prune of objects that need approval.
        approve: bool,
    },
}

impl Mode {
    /// Whether passes in this mode write to the cluster (objects, status, history).
    pub fn writes(self) -> bool {
        matches!(self, Mode::Policy | Mode::Manual { .. } | Mode::Observe)
    }

    /// Whether a person asked (`plumb sync`, its preview): the allowEmpty guard does not
    /// apply.
    pub fn manual(self) -> bool {
        matches!(self, Mode::Manual { .. } | Mode::Preview { .. })
    }

    /// (prune, approve) of this mode; `policy_prune` for passes that follow the policy.
    pub fn prune(self, policy_prune: bool) -> (bool, bool) {
        match self {
            Mode::Manual { prune, approve } | Mode::Preview { prune, approve } => (prune, approve),
            Mode::Policy | Mode::CompareOnly | Mode::Observe => (policy_prune, false),
        }
    }
}

/// Wait before selfHeal attempt `attempt` (1-based): none, then 2 s ×3 each time,
/// capped at 300 s (Argo CD's defaults: 2, 6, 18, 54, 162, 300 s).
pub fn heal_backoff(attempt: u32) -> Duration {
    if attempt <= 1 {
        return Duration::ZERO;
    }
    let secs = 2u64.saturating_mul(3u64.saturating_pow(attempt - 2));
    Duration::from_secs(secs.min(300))
}

/// selfHeal bookkeeping of one application at one revision, kept between passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealState {
    /// The revision the attempts were made at (a new revision starts afresh).
    pub revision: String,
    /// Hash of the drift the last attempt reverted.
    pub drift: u64,
    /// Attempts made at this revision.
    pub attempts: u32,
    /// No attempt before this instant.
    pub next: Instant,
    /// Set when the same drift came back right after a successful revert: the message.
    pub stuck: Option<String>,
    /// Whether the last attempt's sync failed (then the same drift is retried with
    /// backoff instead of being called non-converging).
    pub failed: bool,
}

/// One OutOfSync object, as the selfHeal gate sees it.
#[derive(Debug, Clone)]
pub struct Drifted<'a> {
    /// The object.
    pub key: &'a ObjectKey,
    /// Its differing fields: (JSON pointer, Git's value as JSON text, the field manager
    /// that set the live value when known).
    pub fields: Vec<(&'a str, Option<String>, Option<&'a str>)>,
}

/// Everything the gate looks at.
#[derive(Debug, Clone)]
pub struct GateInput<'a> {
    /// The application (for messages).
    pub app: &'a str,
    /// What the pass may do.
    pub mode: Mode,
    /// The environment's sync policy.
    pub policy: &'a SyncPolicy,
    /// The revision compared.
    pub revision: &'a str,
    /// The revision of the last successful sync before this pass.
    pub synced_revision: &'a str,
    /// The roll-up is not Synced.
    pub out_of_sync: bool,
    /// The plan of this pass.
    pub plan: &'a Plan,
    /// Objects whose comparison failed, `object: error` each.
    pub compare_errors: &'a [String],
    /// The newest sync record before this pass.
    pub last_sync: Option<&'a SyncRecord>,
    /// Another application tracks one of the objects (a `SharedResourceWarning`).
    pub shared: bool,
    /// `FailOnSharedResource=true`.
    pub fail_on_shared: bool,
    /// The OutOfSync objects and their differences (selfHeal's drift).
    pub drifted: &'a [Drifted<'a>],
    /// selfHeal state after the previous pass.
    pub heal: Option<&'a HealState>,
    /// The tracked ref moved to a commit that does not descend from the last synced
    /// one (force-push, branch reset): what to say. Automated sync holds.
    pub rewritten: Option<&'a str>,
    /// Automated sync and selfHeal are paused (`plumb suspend`): a policy pass only
    /// compares; a manual sync still runs.
    pub paused: bool,
    /// Why the application's dependencies are not ready ([`super::depends::waiting`]);
    /// `None` when they are, or it has none. Automated sync and selfHeal hold.
    pub waiting_for: Option<&'a str>,
    /// What the sync windows say now ([`super::windows::Verdict`]).
    pub windows: &'a super::windows::Verdict,
    /// Now.
    pub now: Instant,
    /// Now, on the wall clock (a failed sync's backoff counts from its recorded end).
    pub wall: jiff::Timestamp,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Sync now, for this reason; `None`: no sync this pass.
    pub reason: Option<SyncReason>,
    /// Conditions to add to the status, in order.
    pub conditions: Vec<Condition>,
    /// selfHeal state to keep for the next pass (`None`: forget it).
    pub heal: Option<HealState>,
    /// Nothing a sync could change is left: the revision counts as synced.
    pub settled: bool,
    /// A sync could change something (objects to apply or prune, a refusal, new
    /// comparison errors).
    pub actionable: bool,
}

/// Decides whether this pass syncs (rules in the module docs).
pub fn decide(input: &GateInput<'_>) -> Decision {
    let p = input.plan;
    let mut conditions = Vec::new();
    let planned = p.refused.is_some()
        || p.waves.iter().any(|w| !w.apply.is_empty())
        || !p.prune.is_empty()
        || !p.prune_last.is_empty();
    let settled = !planned && input.compare_errors.is_empty();
    // Objects that fail their comparison are never applied; a sync due with only those
    // is recorded as Failed naming them — once per revision and errors.
    let errors = input.compare_errors.join("; ");
    let failed_before = input
        .last_sync
        .is_some_and(|l| l.result == SyncResult::Failed && l.revision == input.revision && l.message == errors);
    if !planned && !input.compare_errors.is_empty() && failed_before {
        conditions.push(Condition::new(ConditionType::SyncError, errors));
    }
    let actionable = planned || (!input.compare_errors.is_empty() && !failed_before);
    let out_of_sync = input.out_of_sync && actionable;
    // a prune approved by annotation since the last sync is a reason to sync
    let approval = p.prune.iter().chain(&p.prune_last).any(|c| c.approved);
    let revision_changed = input.revision != input.synced_revision || approval;
    let wanted = match input.mode {
        Mode::CompareOnly | Mode::Observe | Mode::Preview { .. } => None,
        Mode::Manual { .. } => super::sync_reason(input.policy, out_of_sync, revision_changed, true),
        Mode::Policy if input.paused => None,
        Mode::Policy => super::sync_reason(input.policy, out_of_sync, revision_changed, false),
    };
    let wanted = held_by_gates(input, wanted, &mut conditions);
    let (reason, heal) = match wanted {
        Some(SyncReason::SelfHeal) => self_heal_gate(input),
        Some(r) => (Some(r), None),
        None if !input.out_of_sync => (None, None),
        None => (None, input.heal.cloned()),
    };
    if let Some(c) = heal.as_ref().and_then(|h| heal_condition(h, input.now)) {
        conditions.push(c);
    }
    // history rewritten (force-push, reset): a decision for a person, not for automation
    let reason = match (reason, input.rewritten) {
        (Some(r), Some(what)) if r != SyncReason::Manual => {
            conditions.push(Condition::new(
                ConditionType::HistoryRewritten,
                format!(
                    "{what}: automated sync holds until a person runs `plumb sync {}`, or syncPolicy.allowHistoryRewrite is true",
                    input.app
                ),
            ));
            None
        }
        (r, _) => r,
    };
    // another application's object is never written; FailOnSharedResource=true holds
    // the whole sync back, and says so whether or not something else would sync
    let reason = if input.shared && input.fail_on_shared {
        conditions.push(Condition::new(
            ConditionType::SyncError,
            "FailOnSharedResource=true: not syncing objects another application tracks",
        ));
        None
    } else {
        reason
    };
    let refused_again = p.refused.as_ref().is_some_and(|why| {
        input
            .last_sync
            .is_some_and(|l| l.result == SyncResult::Refused && l.revision == input.revision && &l.message == why)
    });
    let reason = match (reason, &p.refused) {
        (Some(SyncReason::Manual), _) | (_, None) => reason,
        (Some(_), Some(why)) if refused_again => {
            conditions.push(Condition::new(ConditionType::SyncError, why.clone()));
            None
        }
        (r, _) => r,
    };
    let reason = match (reason, failed_retry_wait(input)) {
        (Some(SyncReason::NewRevision | SyncReason::Rollback), Some((last, wait))) => {
            conditions.push(Condition::new(
                ConditionType::SyncError,
                format!(
                    "the sync of {} failed {} time(s) in a row ({}); the next attempt may start in {}s (backoff 2 s ×3, capped at 300 s)",
                    crate::status::short(input.revision),
                    last.retries + 1,
                    last.message,
                    wait.as_secs().max(1)
                ),
            ));
            None
        }
        (r, _) => r,
    };
    if reason.is_none()
        && out_of_sync
        && input.policy.automated
        && !input.policy.self_heal
        && !revision_changed
        && input.mode == Mode::Policy
    {
        conditions.push(Condition::new(
            ConditionType::OutOfSync,
            "live state drifted from Git; selfHeal is off, so plumb waits for the next commit or `plumb sync`",
        ));
    }
    Decision { reason, conditions, heal, settled, actionable }
}

/// `wanted` unless a dependency that is not ready or a closed sync window holds it (a
/// condition each, naming what and why); checked before selfHeal's backoff counts an
/// attempt. A person's sync passes dependencies, and a window only with `manualSync`.
fn held_by_gates(
    input: &GateInput<'_>,
    wanted: Option<SyncReason>,
    conditions: &mut Vec<Condition>,
) -> Option<SyncReason> {
    let reason = wanted?;
    let manual = reason == SyncReason::Manual;
    if let (Some(why), true) = (input.waiting_for, manual) {
        tracing::warn!(app = input.app, "a manual sync runs although its dependencies are not ready: {why}");
    }
    if let (Some(why), false) = (input.waiting_for, manual) {
        conditions.push(Condition::new(
            ConditionType::WaitingForDependency,
            format!("automated sync waits for its dependencies: {why}"),
        ));
        return None;
    }
    let closed = if manual { input.windows.manual_closed.as_deref() } else { input.windows.closed.as_deref() };
    if let Some(why) = closed {
        let what = if manual { "a manual sync" } else { "automated sync" };
        conditions.push(Condition::new(ConditionType::SyncWindowClosed, format!("{what} is held: {why}")));
        return None;
    }
    Some(reason)
}

/// How long an automated sync must still wait when the last sync failed at this
/// revision: a failure that repeats (folded into one history entry, its `retries`
/// counted) is tried again after [`heal_backoff`] of its attempts, measured from its
/// end — not at every pass. `None` when it may run now.
fn failed_retry_wait<'a>(input: &GateInput<'a>) -> Option<(&'a SyncRecord, Duration)> {
    let last = input.last_sync.filter(|l| l.result == SyncResult::Failed && l.revision == input.revision)?;
    // the first retry runs at once (a person may just have fixed the cause), then 2 s, 6 s…
    let attempts = u32::try_from(last.retries).unwrap_or(u32::MAX).saturating_add(1);
    let ended = last.finished_at.parse::<jiff::Timestamp>().ok()?;
    let due = ended.checked_add(jiff::SignedDuration::try_from(heal_backoff(attempts)).ok()?).ok()?;
    let left = input.wall.duration_until(due);
    (left.is_positive()).then(|| (last, Duration::try_from(left).unwrap_or_default()))
}

/// Whether a selfHeal sync may run now, and the state after this pass. Holds it back
/// during the backoff, and for good when the very drift the last attempt reverted came
/// straight back at the same revision: re-applying would fight forever, so the
/// application gets a NonConverging condition naming the fields, their manager, and the
/// ignore rule that would end it.
fn self_heal_gate(input: &GateInput<'_>) -> (Option<SyncReason>, Option<HealState>) {
    let mut hasher = DefaultHasher::new();
    for d in input.drifted {
        d.key.hash(&mut hasher);
        for (path, desired, _) in &d.fields {
            path.hash(&mut hasher);
            desired.hash(&mut hasher);
        }
    }
    let drift = hasher.finish();
    let now = input.now;
    let fresh = || HealState {
        revision: input.revision.to_string(),
        drift: 0,
        attempts: 0,
        next: now,
        stuck: None,
        failed: false,
    };
    let mut state = input.heal.filter(|h| h.revision == input.revision).cloned().unwrap_or_else(fresh);
    if state.stuck.is_some() && state.drift == drift {
        return (None, Some(state));
    }
    if state.attempts > 0 && state.drift == drift && !state.failed {
        let mut what = Vec::new();
        for d in input.drifted {
            let k = d.key;
            for (path, _, manager) in &d.fields {
                let by = manager.unwrap_or("an unknown writer (the server or a mutating webhook)");
                what.push(format!(
                    "{k} {path} keeps changing (by {by}); to leave it to its owner add ignoreDifferences {{group: \"{}\", kind: {}, name: {}, jsonPointers: [\"{path}\"]}}",
                    k.group, k.kind, k.name
                ));
            }
        }
        let message = format!(
            "selfHeal stopped: the same drift came back right after it was reverted at {}: {}",
            crate::status::short(input.revision),
            what.join("; ")
        );
        tracing::warn!(app = input.app, "{message}");
        state.stuck = Some(message);
        return (None, Some(state));
    }
    if now < state.next {
        return (None, Some(state));
    }
    state.attempts += 1;
    state.drift = drift;
    state.stuck = None;
    state.next = now + heal_backoff(state.attempts + 1);
    (Some(SyncReason::SelfHeal), Some(state))
}

/// The condition selfHeal's state shows: NonConverging once stopped, SelfHealBackoff
/// while waiting.
fn heal_condition(state: &HealState, now: Instant) -> Option<Condition> {
    if let Some(stuck) = &state.stuck {
        return Some(Condition::new(ConditionType::NonConverging, stuck.clone()));
    }
    (state.next > now).then(|| {
        Condition::new(
            ConditionType::SelfHealBackoff,
            format!(
                "the next selfHeal sync may start in {}s if drift remains (attempt {}; backoff 2 s ×3, capped at 300 s)",
                (state.next - now).as_secs(),
                state.attempts + 1
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::plan::{PruneCandidate, Wave};

    fn key(name: &str) -> ObjectKey {
        ObjectKey { group: "apps".into(), kind: "Deployment".into(), namespace: "lab".into(), name: name.into() }
    }

    /// A plan with one object to apply (`apply`), or nothing to do.
    fn plan(apply: bool) -> Plan {
        let mut p = Plan::default();
        p.waves.push(Wave { wave: 0, apply: if apply { vec![0] } else { vec![] }, members: vec![0] });
        p
    }

    fn policy(automated: bool, self_heal: bool) -> SyncPolicy {
        SyncPolicy { automated, self_heal, ..SyncPolicy::default() }
    }

    fn last(result: SyncResult, revision: &str, message: &str) -> SyncRecord {
        SyncRecord { result, message: message.into(), ..SyncRecord::new(revision, SyncReason::NewRevision) }
    }

    struct Case {
        name: &'static str,
        mode: Mode,
        policy: SyncPolicy,
        synced_revision: &'static str,
        out_of_sync: bool,
        plan: Plan,
        errors: Vec<String>,
        last: Option<SyncRecord>,
        shared: bool,
        rewritten: Option<&'static str>,
        paused: bool,
        want: Option<SyncReason>,
        conditions: Vec<ConditionType>,
        settled: bool,
        waiting_for: Option<&'static str>,
        windows: crate::plan::windows::Verdict,
    }

    fn case(name: &'static str) -> Case {
        Case {
            name,
            mode: Mode::Policy,
            policy: policy(true, true),
            synced_revision: "new",
            out_of_sync: true,
            plan: plan(true),
            errors: vec![],
            paused: false,
            last: None,
            shared: false,
            rewritten: None,
            want: None,
            conditions: vec![],
            settled: false,
            waiting_for: None,
            windows: crate::plan::windows::Verdict::default(),
        }
    }

    fn run(c: &Case, heal: Option<&HealState>, now: Instant) -> Decision {
        let k = key("web");
        let drifted = [Drifted { key: &k, fields: vec![("/spec/replicas", Some("3".into()), Some("kubectl"))] }];
        decide(&GateInput {
            app: "web",
            mode: c.mode,
            policy: &c.policy,
            revision: "new",
            synced_revision: c.synced_revision,
            out_of_sync: c.out_of_sync,
            plan: &c.plan,
            compare_errors: &c.errors,
            last_sync: c.last.as_ref(),
            shared: c.shared,
            fail_on_shared: true,
            drifted: &drifted,
            heal,
            rewritten: c.rewritten,
            paused: c.paused,
            waiting_for: c.waiting_for,
            windows: &c.windows,
            now,
            wall: WALL.parse().unwrap(),
        })
    }

    const WALL: &str = "2026-12-01T12:00:00Z";

    #[test]
    fn a_failure_that_repeats_is_retried_after_a_backoff_not_at_every_pass() {
        let failed = |finished: &str, retries: usize| SyncRecord {
            finished_at: finished.into(),
            retries,
            ..last(SyncResult::Failed, "new", "delete ConfigMap/lab/x: forbidden")
        };
        let at = |finished: &str, retries: usize| Case {
            synced_revision: "old",
            last: Some(failed(finished, retries)),
            ..case("a failed sync at this revision")
        };
        let now = Instant::now();
        // the first failure is retried at once
        assert_eq!(run(&at("2026-12-01T11:59:59Z", 0), None, now).reason, Some(SyncReason::NewRevision));
        // the third failure in a row (two retries folded) waits 6 s from its end
        let d = run(&at("2026-12-01T11:59:57Z", 2), None, now);
        assert_eq!(d.reason, None, "inside the backoff");
        let messages: Vec<&str> = d.conditions.iter().map(|c| c.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "the sync of new failed 3 time(s) in a row (delete ConfigMap/lab/x: forbidden); the next attempt may start in 3s (backoff 2 s ×3, capped at 300 s)"
            ]
        );
        assert_eq!(run(&at("2026-12-01T11:59:50Z", 2), None, now).reason, Some(SyncReason::NewRevision), "after it");
        // a person's sync is never held back
        let manual = Case { mode: Mode::Manual { prune: true, approve: false }, ..at("2026-12-01T11:59:59Z", 5) };
        assert_eq!(run(&manual, None, now).reason, Some(SyncReason::Manual));
    }

    #[test]
    fn the_sync_gate() {
        use ConditionType::*;
        use SyncReason::*;
        let refused = Plan { refused: Some("auto-sync skipped: allowEmpty".into()), ..Plan::default() };
        let approved = Plan {
            prune: vec![PruneCandidate { approved: true, ..PruneCandidate::new(key("old"), "u") }],
            ..Plan::default()
        };
        let cases = [
            Case { synced_revision: "old", want: Some(NewRevision), ..case("a new revision syncs") },
            Case { want: Some(SelfHeal), conditions: vec![SelfHealBackoff], ..case("drift with selfHeal reverts") },
            Case {
                policy: policy(true, false),
                conditions: vec![OutOfSync],
                ..case("drift without selfHeal waits for a commit, saying so")
            },
            Case { policy: policy(false, true), synced_revision: "old", ..case("no automated sync: nothing") },
            Case {
                mode: Mode::Manual { prune: false, approve: false },
                policy: policy(false, false),
                out_of_sync: false,
                plan: plan(false),
                want: Some(Manual),
                settled: true,
                ..case("a person's sync always runs")
            },
            Case { mode: Mode::CompareOnly, synced_revision: "old", ..case("compare-only never syncs") },
            Case { paused: true, synced_revision: "old", ..case("a paused application does not sync a new revision") },
            Case { paused: true, ..case("a paused application does not revert drift") },
            Case {
                mode: Mode::Manual { prune: false, approve: false },
                paused: true,
                synced_revision: "old",
                want: Some(Manual),
                ..case("a person's sync runs while paused")
            },
            Case { mode: Mode::Observe, synced_revision: "old", ..case("observing never syncs") },
            Case {
                synced_revision: "old",
                rewritten: Some("new does not descend from old"),
                conditions: vec![HistoryRewritten],
                ..case("a rewritten history holds automated sync")
            },
            Case {
                mode: Mode::Manual { prune: false, approve: false },
                synced_revision: "old",
                rewritten: Some("new does not descend from old"),
                want: Some(Manual),
                ..case("a person's sync follows a rewritten history")
            },
            Case {
                mode: Mode::Preview { prune: true, approve: false },
                synced_revision: "old",
                ..case("a preview never syncs")
            },
            Case { out_of_sync: false, plan: plan(false), settled: true, ..case("Synced: nothing to do") },
            Case {
                plan: plan(false),
                synced_revision: "old",
                settled: true,
                ..case("only guard-kept objects differ: no sync, the revision counts as synced")
            },
            Case {
                plan: plan(false),
                errors: vec!["cm: bad".into()],
                synced_revision: "old",
                want: Some(NewRevision),
                ..case("comparison errors not yet recorded: a sync records them as Failed")
            },
            Case {
                plan: plan(false),
                errors: vec!["cm: bad".into()],
                last: Some(last(SyncResult::Failed, "new", "cm: bad")),
                conditions: vec![SyncError],
                ..case("the same errors at the same revision: recorded once")
            },
            Case {
                plan: refused.clone(),
                synced_revision: "old",
                want: Some(NewRevision),
                ..case("a refusal is recorded once…")
            },
            Case {
                plan: refused.clone(),
                synced_revision: "old",
                last: Some(last(SyncResult::Refused, "new", "auto-sync skipped: allowEmpty")),
                conditions: vec![SyncError],
                ..case("…not at every pass")
            },
            Case {
                mode: Mode::Manual { prune: true, approve: false },
                plan: refused,
                last: Some(last(SyncResult::Refused, "new", "auto-sync skipped: allowEmpty")),
                want: Some(Manual),
                ..case("a person's sync records the refusal again")
            },
            Case {
                synced_revision: "old",
                shared: true,
                conditions: vec![SyncError],
                ..case("FailOnSharedResource holds back a sync")
            },
            Case {
                plan: approved,
                want: Some(NewRevision),
                ..case("a prune approved by annotation is a reason to sync")
            },
        ];
        let now = Instant::now();
        let cases = cases.into_iter().chain(gated_cases());
        for c in &cases.collect::<Vec<_>>() {
            let d = run(c, None, now);
            let types: Vec<ConditionType> = d.conditions.iter().map(|c| c.type_).collect();
            assert_eq!((d.reason, &types, d.settled), (c.want, &c.conditions, c.settled), "{}", c.name);
        }
    }

    /// The gate's cases for dependencies and sync windows.
    fn gated_cases() -> Vec<Case> {
        use ConditionType::*;
        use SyncReason::*;
        let closed = || crate::plan::windows::Verdict {
            closed: Some("deny window 1 (0 9 * * *) is active until 10:00 UTC".into()),
            manual_closed: Some("deny window 1 (0 9 * * *) is active until 10:00 UTC".into()),
            ..Default::default()
        };
        let manual_allowed = crate::plan::windows::Verdict { manual_closed: None, ..closed() };
        let manual = Mode::Manual { prune: false, approve: false };
        vec![
            Case {
                synced_revision: "old",
                waiting_for: Some("cert-manager is Progressing at 1a2b3c4"),
                conditions: vec![WaitingForDependency],
                ..case("a dependency not ready holds a new revision")
            },
            Case {
                waiting_for: Some("cert-manager has never synced"),
                conditions: vec![WaitingForDependency],
                ..case("…and selfHeal, before its backoff counts an attempt")
            },
            Case {
                mode: manual,
                waiting_for: Some("cert-manager has never synced"),
                want: Some(Manual),
                ..case("a person's sync does not wait for dependencies")
            },
            Case {
                out_of_sync: false,
                plan: plan(false),
                settled: true,
                waiting_for: Some("cert-manager has never synced"),
                ..case("Synced: nothing waits, no condition")
            },
            Case {
                synced_revision: "old",
                windows: closed(),
                conditions: vec![SyncWindowClosed],
                ..case("a closed window holds a new revision")
            },
            Case { windows: closed(), conditions: vec![SyncWindowClosed], ..case("…and selfHeal") },
            Case {
                mode: manual,
                windows: closed(),
                conditions: vec![SyncWindowClosed],
                ..case("a manual sync is held without manualSync")
            },
            Case {
                mode: manual,
                windows: manual_allowed,
                want: Some(Manual),
                ..case("a manual sync passes with manualSync: true")
            },
        ]
    }

    #[test]
    fn a_held_self_heal_keeps_its_backoff_state() {
        let c = Case { waiting_for: Some("db is Degraded at 1a2b3c4"), ..case("held") };
        let d = run(&c, None, Instant::now());
        assert_eq!(d.reason, None);
        assert_eq!(d.heal, None, "no attempt counted while held");
        assert_eq!(d.conditions[0].message, "automated sync waits for its dependencies: db is Degraded at 1a2b3c4");
    }

    #[test]
    fn self_heal_backs_off_and_stops_when_the_drift_comes_back() {
        let t0 = Instant::now();
        let c = case("drift");
        let first = run(&c, None, t0);
        assert_eq!(first.reason, Some(SyncReason::SelfHeal));
        let mut h = first.heal.unwrap();
        assert_eq!((h.attempts, h.next - t0), (1, Duration::from_secs(2)));
        // the revert failed: retried after the backoff, not called non-converging
        h.failed = true;
        let d = run(&c, Some(&h), t0 + Duration::from_secs(1));
        assert_eq!(d.reason, None, "inside the backoff");
        assert_eq!(
            d.conditions[0].message,
            "the next selfHeal sync may start in 1s if drift remains (attempt 2; backoff 2 s ×3, capped at 300 s)"
        );
        let d = run(&c, Some(&h), t0 + Duration::from_secs(2));
        assert_eq!(d.reason, Some(SyncReason::SelfHeal));
        let mut h = d.heal.unwrap();
        assert_eq!((h.attempts, h.next - (t0 + Duration::from_secs(2))), (2, Duration::from_secs(6)));
        // the revert succeeded and the same drift came straight back: stop for good
        h.failed = false;
        let d = run(&c, Some(&h), t0 + Duration::from_secs(60));
        assert_eq!(d.reason, None);
        assert_eq!(d.conditions[0].type_, ConditionType::NonConverging);
        assert!(
            d.conditions[0].message.starts_with("selfHeal stopped: the same drift came back right after it was reverted at new: Deployment.apps/lab/web /spec/replicas keeps changing (by kubectl)"),
            "{}",
            d.conditions[0].message
        );
        let stuck = d.heal.unwrap();
        let d = run(&c, Some(&stuck), t0 + Duration::from_secs(600));
        assert_eq!((d.reason, d.conditions[0].type_), (None, ConditionType::NonConverging), "stays stopped");
        // a new revision starts afresh
        let mut moved = stuck.clone();
        moved.revision = "older".into();
        assert_eq!(run(&c, Some(&moved), t0).reason, Some(SyncReason::SelfHeal));
        // Synced again: the state is forgotten
        let synced = Case { out_of_sync: false, plan: plan(false), ..case("synced") };
        assert_eq!(run(&synced, Some(&stuck), t0).heal, None);
    }

    #[test]
    fn backoff_is_2s_times_3_capped_at_300s() {
        let secs: Vec<u64> = (1..=8).map(|n| heal_backoff(n).as_secs()).collect();
        assert_eq!(secs, [0, 2, 6, 18, 54, 162, 300, 300]);
    }
}
