//! The assessor: the application's status, built from what the stages of a pass
//! returned, by functions of values (no cluster, no clock: `now` is an input). With the
//! record stage it is the only code that sets status fields; a new status field is set
//! here.
//!
//! A pass builds its status in steps, each a function below:
//! [`started`] (what carries over, the requests, the policy's warning) →
//! [`unsourced`] (a failed fetch or render) or [`sourced`] (the commit and its render)
//! → [`assessed`] (resources, health, roll-up, conditions) → [`decided`] (the gate's
//! conditions) → [`refused`] or [`synced`] (the sync's outcome).

use std::{sync::Arc, time::Duration};

use serde_json::Value;

use super::{AppState, Found, PassFailure, requests::Requested};
use crate::{
    apply,
    compare::{Compared, ObjectDiff, ObjectReason, SyncStatus, object},
    health::{self, Health, HealthStatus, ProgressingSince},
    plan,
    render::Rendered,
    source::Snapshot,
    status::{
        self, AppStatus, Condition, ConditionType, Exclusions, Finished, RenderTime, ResourceStatus, SyncRecord,
        SyncResult,
    },
    tracking,
};

/// The status a pass of `app` in `environment` starts from: what it carries over from
/// the last one (`previous`), the requests in force, and `policy_rejected` (why the
/// policy file on disk is not in force) as a `PolicyWarning`.
pub(super) fn started(
    (app, environment): (&str, &str),
    previous: &AppStatus,
    requested: &Requested,
    policy_rejected: Option<&str>,
) -> AppStatus {
    let mut conditions: Vec<Condition> =
        policy_rejected.map(|why| Condition::new(ConditionType::PolicyWarning, why)).into_iter().collect();
    conditions.extend(requested.conditions.iter().cloned());
    AppStatus {
        app: app.into(),
        environment: environment.into(),
        synced_revision: previous.synced_revision.clone(),
        kinds: previous.kinds.clone(),
        last_sync: previous.last_sync.clone(),
        finished: previous.finished.clone(),
        sync_request: requested.sync_request.clone(),
        suspended: requested.suspended.clone(),
        pinned: requested.pinned.clone(),
        decommission_digest: previous.decommission_digest.clone(),
        conditions,
        ..AppStatus::default()
    }
}

/// A pass that stopped before comparing (`failure`): Unknown with the failure as a
/// `ComparisonError`; the last objects' status and health stay as they were, and so
/// does the revision unless a commit was read (one that does not render is named).
pub(super) fn unsourced(mut st: AppStatus, previous: &AppStatus, failure: &PassFailure) -> AppStatus {
    (st.sync, st.health, st.resources) = (SyncStatus::Unknown, previous.health, previous.resources.clone());
    st.resources_omitted = previous.resources_omitted;
    st.conditions.push(Condition::new(ConditionType::ComparisonError, failure.to_string()));
    if let PassFailure::Render { revision, subject, .. } = failure {
        (st.revision, st.subject) = (revision.clone(), subject.clone());
    }
    if st.revision.is_empty() {
        (st.revision, st.subject) = (previous.revision.clone(), previous.subject.clone());
    }
    // what the cluster still runs: the chart of the last render
    st.chart.clone_from(&previous.chart);
    st
}

/// The commit read (`snapshot`) and its render: revision, subject, the render's tool
/// and time (a cached render carries the time of the run it reuses), its warnings.
pub(super) fn sourced(st: &mut AppStatus, snapshot: &Snapshot, rendered: &Rendered) {
    (st.revision, st.subject) = (snapshot.revision.clone(), snapshot.subject.clone());
    st.render = Some(RenderTime {
        tool: rendered.tool_name().into(),
        millis: u64::try_from(rendered.took.as_millis()).unwrap_or(u64::MAX),
        revision: snapshot.revision.clone(),
    });
    st.chart.clone_from(&rendered.chart);
    let warnings = rendered.warnings.iter();
    st.conditions.extend(warnings.map(|w| Condition::new(ConditionType::RenderWarning, w.as_str())));
    let unstable = rendered.held.iter().filter(|h| h.why == crate::render::HeldWhy::Unstable);
    st.conditions.extend(unstable.map(|h| {
        let message = format!(
            "{}: differs between two renders of the same inputs; the live value is kept (written only when the object is created)",
            h.describe()
        );
        Condition::new(ConditionType::NonDeterministicRender, message)
    }));
}

/// `source.crds: Create` leaves an existing CustomResourceDefinition of a chart's
/// `crds/` as it is (its `spec` is held, [`crate::render::HeldWhy::CreateOnly`]): a
/// RenderWarning names each whose live `spec` lacks what the chart declares, so that a
/// chart upgrade that needs a newer CRD is seen, not silently ignored.
pub(super) fn create_only(
    st: &mut AppStatus,
    rendered: &Rendered,
    compared: &[std::sync::Arc<crate::compare::Compared>],
) {
    for h in rendered.held.iter().filter(|h| h.why == crate::render::HeldWhy::CreateOnly) {
        let same =
            |k: &crate::tracking::ObjectKey| k.group == h.key.group && k.kind == h.key.kind && k.name == h.key.name;
        let Some(live) = compared.iter().find(|c| same(&c.key)).and_then(|c| c.live.as_ref()) else { continue };
        let chart = rendered
            .manifests
            .iter()
            .map(|m| m.object())
            .find(|o| crate::tracking::ObjectKey::of(o).is_some_and(|k| same(&k)));
        let Some(spec) = chart.as_ref().and_then(|o| o.get("spec")) else { continue };
        if !contains(live.get("spec").unwrap_or(&serde_json::Value::Null), spec) {
            let message = format!(
                "{}: the live spec differs from the chart's crds/; source.crds: Create leaves an existing CustomResourceDefinition as it is (CreateReplace keeps it equal to the chart)",
                h.key
            );
            st.conditions.push(Condition::new(ConditionType::RenderWarning, message));
        }
    }
}

/// Whether `sup` holds everything `sub` declares: each field of a mapping (recursively),
/// each element of a list of the same length, an equal scalar (the API server adds
/// defaults: what it adds is no difference).
pub(super) fn contains(sup: &serde_json::Value, sub: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (sup, sub) {
        (Value::Object(a), Value::Object(b)) => b.iter().all(|(k, v)| a.get(k).is_some_and(|u| contains(u, v))),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(u, v)| contains(u, v)),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => sup == sub,
    }
}

/// What the pass read besides the comparisons, for [`assessed`].
#[derive(Default)]
pub(super) struct Observed {
    /// The health of each compared object, index for index.
    pub health: Vec<Health>,
    /// `kind: error` of each failing watch of a kind the application uses.
    pub watch_errors: Vec<String>,
    /// `orphanedResources.warn`: the objects no application tracks (`Kind/ns/name`,
    /// sorted), or why they could not be listed; `None` when not asked.
    pub orphaned: Option<Result<Vec<String>, String>>,
}

/// What [`assessed`] reads.
pub(super) struct Assessment<'a> {
    /// The comparisons and prune candidates.
    pub found: &'a Found,
    /// What a sync would do.
    pub plan: &'a plan::Plan,
    /// Health and the rest read.
    pub observed: &'a Observed,
    /// `health.stallAfter`: how long an object may stay Progressing, or a deletion
    /// pending, before the status warns.
    pub stall_after: Duration,
    /// The pass's time.
    pub now: jiff::Timestamp,
    /// This application's objects that other applications also declare and leave to
    /// it, as (`Kind/namespace/name`, other application).
    pub also_declared: &'a [(String, String)],
}

/// Resources, health, roll-up and conditions (shared objects, stuck prunes, failing
/// watches, comparison errors, stalls, orphaned resources) from `a`; `progressing` is
/// replaced by this pass's. Returns what the roll-up leaves out, for the roll-up after
/// a sync.
pub(super) fn assessed(st: &mut AppStatus, a: &Assessment<'_>, progressing: &mut ProgressingSince) -> Exclusions {
    let found = a.found;
    let mut excluded = Exclusions { extraneous: found.candidates.extraneous.clone(), ..Exclusions::default() };
    // Jobs that finished: what this render still declares, with the same manifest
    let mut finished = Vec::new();
    for (c, h) in found.compared.iter().zip(&a.observed.health) {
        if c.live
            .as_ref()
            .is_some_and(|l| health::ignores_health_check_by(l.annotation(health::COMPARE_OPTIONS_ANNOTATION)))
        {
            excluded.no_health_check.insert(c.key.to_string());
        }
        let remembered = object::ran_before(&c.key, c.finished_digest.as_deref(), &st.finished);
        match &c.reason {
            ObjectReason::Finished(f) => finished.push(f.clone()),
            _ => finished.extend(object::finished(c, h).or_else(|| remembered.cloned())),
        }
        st.resources.push(ResourceStatus {
            object: c.key.to_string(),
            sync: c.sync(),
            reason: c.reason.to_string(),
            health: h.status,
            health_message: h.message.clone(),
        });
    }
    st.finished = finished;
    let reasons = plan::prune_reasons(a.plan);
    for (o, _) in &found.candidates.orphans {
        let object = o.key.to_string();
        st.resources.push(ResourceStatus {
            reason: reasons.get(&object).cloned().unwrap_or_else(|| "requires pruning".into()),
            sync: SyncStatus::OutOfSync,
            health: HealthStatus::Healthy,
            health_message: String::new(),
            object: object.clone(),
        });
        excluded.prune_candidates.insert(object);
    }
    for (key, _) in others_own(&st.app, &found.compared) {
        excluded.extraneous.insert(key);
    }
    st.conditions.extend(shared(&st.app, &found.compared, a.also_declared));
    let orphans = found.candidates.orphans.iter().map(|(o, _)| o);
    let stuck = plan::stuck_deletions(orphans, a.now, a.stall_after);
    if !stuck.is_empty() {
        let message = format!(
            "deleted but still present after {} s, held by finalizers that their controllers did not remove: {}",
            a.stall_after.as_secs(),
            stuck.join("; ")
        );
        st.conditions.push(Condition::new(ConditionType::PruneStuck, message));
    }
    if !a.observed.watch_errors.is_empty() {
        let message = format!(
            "watches failing (live objects are read with GET and LIST meanwhile): {}",
            a.observed.watch_errors.join("; ")
        );
        st.conditions.push(Condition::new(ConditionType::WatchError, message));
    }
    if !found.errors.is_empty() {
        st.conditions.push(Condition::new(ConditionType::ComparisonError, found.errors.join("; ")));
    }
    (st.sync, st.health) = status::roll_up(&st.resources, &excluded, !found.errors.is_empty());
    // Objects Progressing for too long: a warning, health stays Progressing.
    let statuses = found.compared.iter().zip(&st.resources).map(|(c, r)| (&c.key, r.health));
    *progressing = health::track_progressing(progressing, statuses, a.now);
    if let Some(stall) = health::stalled(progressing, a.now, a.stall_after) {
        st.conditions.push(Condition::new(ConditionType::HealthStalled, stall.message));
    }
    if st.sync == SyncStatus::Synced {
        st.synced_revision = st.revision.clone();
    }
    match &a.observed.orphaned {
        Some(Ok(found)) if !found.is_empty() => {
            let shown: Vec<&str> = found.iter().take(10).map(String::as_str).collect();
            let more = found.len().saturating_sub(shown.len());
            let message = format!(
                "{} object(s) in the application's namespaces are tracked by no application (never deleted): {}{}",
                found.len(),
                shown.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            );
            st.conditions.push(Condition::new(ConditionType::OrphanedResourceWarning, message));
            st.orphaned.clone_from(found);
        }
        Some(Err(e)) => st.conditions.push(Condition::new(
            ConditionType::OrphanedResourceWarning,
            format!("orphaned resources could not be listed: {e}"),
        )),
        Some(Ok(_)) | None => {}
    }
    excluded
}

/// The compared objects another application owns (its tracking-id is on the live
/// object: it synced them first, and still declares them), as (`Kind/namespace/name`,
/// owner). An object that moved here (its owner no longer declares it) is not among
/// them: this application takes it over.
pub(super) fn others_own(app: &str, compared: &[Arc<Compared>]) -> Vec<(String, String)> {
    compared
        .iter()
        .filter(|c| matches!(c.reason, ObjectReason::OwnedBy(_)))
        .filter_map(|c| {
            let live = c.live.as_ref()?;
            let other = tracking::tracked_app_by(live.annotation(tracking::TRACKING_ANNOTATION)?)?;
            (other != app).then(|| (c.key.to_string(), other.to_string()))
        })
        .collect()
}

/// A `SharedResourceWarning` for each object two applications declare, on both: on the
/// one that does not own it (from its comparisons) and on the owner (`also_declared`:
/// its objects that other applications declare and leave to it, as (object, other)).
fn shared(app: &str, compared: &[Arc<Compared>], also_declared: &[(String, String)]) -> Vec<Condition> {
    let theirs = others_own(app, compared).into_iter().map(|(key, owner)| {
        format!(
            "{key} is owned by application {owner}, which synced it first; {app} also declares it and never writes it"
        )
    });
    let ours = also_declared.iter().map(|(key, other)| {
        format!(
            "{key} is owned by application {app}, which synced it first; {other} also declares it and never writes it"
        )
    });
    theirs.chain(ours).map(|m| Condition::new(ConditionType::SharedResourceWarning, m)).collect()
}

/// Rules and objects that would otherwise go unnoticed: an `IgnoreDifferencesWarning`
/// naming the ignoreDifferences rules that match no kind (`unmatched`), an
/// `UntrackedResourceWarning` naming the labelled objects without a tracking-id
/// (`untracked`, at most 10 named).
pub(super) fn silent(st: &mut AppStatus, unmatched: &[String], untracked: &[String]) {
    if !unmatched.is_empty() {
        let message = format!(
            "ignoreDifferences rule(s) match no kind the cluster serves or Git declares, so they ignore nothing: {}",
            unmatched.join(", ")
        );
        st.conditions.push(Condition::new(ConditionType::IgnoreDifferencesWarning, message));
    }
    if !untracked.is_empty() {
        let more = untracked.len().saturating_sub(10);
        let message = format!(
            "{} object(s) carry the label plumb.dev/app={} but no tracking-id, so plumb neither compares nor prunes them (remove the label, or declare them in Git): {}{}",
            untracked.len(),
            st.app,
            untracked.iter().take(10).cloned().collect::<Vec<_>>().join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
        st.conditions.push(Condition::new(ConditionType::UntrackedResourceWarning, message));
    }
}

/// The end of a pass: the kinds the application applied (so that the last object of a
/// kind is still pruned) and its last sync.
pub(super) fn ended(
    st: &mut AppStatus,
    kinds: &std::collections::BTreeSet<(String, String)>,
    record: Option<&SyncRecord>,
) {
    st.kinds = kinds.iter().cloned().collect();
    if let Some(r) = record {
        st.last_sync = Some(r.clone());
    }
}

/// What the gate ([`plan::decide`]) reads besides the status.
pub(super) struct Gate<'a> {
    /// What the pass may do.
    pub mode: plan::Mode,
    /// The environment's sync policy.
    pub policy: &'a crate::config::SyncPolicy,
    /// The status the last pass saved.
    pub previous: &'a AppStatus,
    /// `FailOnSharedResource=true`.
    pub fail_on_shared: bool,
    /// Why the tracked ref's history was rewritten, when it was.
    pub rewritten: Option<&'a str>,
    /// A pause is in force.
    pub paused: bool,
    /// Why the application's dependencies are not ready ([`plan::depends::waiting`]).
    pub waiting_for: Option<&'a str>,
    /// What the environment's sync windows say now ([`plan::windows::verdict`]).
    pub windows: &'a plan::windows::Verdict,
    /// The time selfHeal's backoff counts by.
    pub now: std::time::Instant,
}

/// The status of a pass before any sync from `base` ([`assessed`], replacing
/// `state`'s progressing-since), whether to sync (the gate on that status, with
/// `state`'s selfHeal backoff), and the gate's conditions in the status ([`decided`]).
pub(super) fn judged(
    base: &AppStatus,
    a: &Assessment<'_>,
    gate: &Gate<'_>,
    state: &mut AppState,
) -> (AppStatus, Exclusions, plan::Decision) {
    let mut st = base.clone();
    let excluded = assessed(&mut st, a, &mut state.progressing);
    let mut decision = plan::decide(&plan::GateInput {
        app: &st.app,
        mode: gate.mode,
        policy: gate.policy,
        revision: &st.revision,
        synced_revision: &gate.previous.synced_revision,
        out_of_sync: st.sync != SyncStatus::Synced,
        plan: a.plan,
        compare_errors: &a.found.errors,
        last_sync: gate.previous.last_sync.as_ref(),
        shared: st.conditions.iter().any(|c| c.type_ == ConditionType::SharedResourceWarning),
        fail_on_shared: gate.fail_on_shared,
        drifted: &drifted(&a.found.compared),
        heal: state.heal.as_ref(),
        rewritten: gate.rewritten,
        paused: gate.paused,
        waiting_for: gate.waiting_for,
        windows: gate.windows,
        now: gate.now,
        wall: a.now,
    });
    st.sync_windows = gate.windows.any().then(|| gate.windows.clone());
    decided(&mut st, std::mem::take(&mut decision.conditions), decision.settled);
    (st, excluded, decision)
}

/// The OutOfSync objects and their differences, as the selfHeal gate sees them.
fn drifted(compared: &[Arc<Compared>]) -> Vec<plan::Drifted<'_>> {
    compared
        .iter()
        .filter(|c| c.sync() == SyncStatus::OutOfSync)
        .map(|c| plan::Drifted {
            key: &c.key,
            fields: c
                .differences
                .iter()
                .map(|d| {
                    let desired = d.desired.as_ref().map(ToString::to_string);
                    (d.path.as_str(), desired, d.manager.as_ref().map(|m| m.manager.as_str()))
                })
                .collect(),
        })
        .collect()
}

/// The gate's conditions; a `settled` revision (nothing left to sync) is the synced one.
pub(super) fn decided(st: &mut AppStatus, conditions: Vec<Condition>, settled: bool) {
    st.conditions.extend(conditions);
    if settled {
        st.synced_revision = st.revision.clone();
    }
}

/// A sync a guard refused (`refusal`): nothing was written.
pub(super) fn refused(st: &mut AppStatus, rec: &mut SyncRecord, refusal: &str, finished_at: String) {
    (rec.result, rec.message, rec.finished_at) = (SyncResult::Refused, refusal.to_string(), finished_at);
    st.conditions.push(Condition::new(ConditionType::SyncError, refusal.to_string()));
}

/// What [`synced`] reads of the pass.
pub(super) struct Synced<'a> {
    /// What the sync did.
    pub outcome: &'a apply::Outcome,
    /// What it was to do.
    pub plan: &'a plan::Plan,
    /// The comparisons it acted on.
    pub found: &'a Found,
    /// What the roll-up leaves out ([`assessed`]).
    pub excluded: &'a Exclusions,
    /// When it finished (RFC 3339).
    pub finished_at: String,
}

/// A sync's outcome in the status and its record: applied objects Synced (with the
/// health the server returned), pruned ones gone, pending deletions named, the result
/// ([`plan::result`]) with its condition, the roll-up again.
pub(super) fn synced(st: &mut AppStatus, rec: &mut SyncRecord, s: &Synced<'_>) {
    let (outcome, compared) = (s.outcome, &s.found.compared);
    for (idx, h) in &outcome.applied {
        let c = &compared[*idx];
        let key = c.key.to_string();
        if let Some(digest) = c.finished_digest.as_ref().filter(|_| c.live.is_none()) {
            // created: its later absence is the cluster's removal, not drift
            st.finished.retain(|f| f.object != key);
            st.finished.push(Finished {
                object: key.clone(),
                manifest: digest.clone(),
                health: HealthStatus::Missing,
                message: "created by plumb".into(),
            });
        }
        if let Some(rs) = st.resources.iter_mut().find(|r| r.object == key) {
            (rs.sync, rs.health, rs.health_message) = (SyncStatus::Synced, h.status, h.message.clone());
            rs.reason.clear();
        }
        rec.applied.push(key);
    }
    rec.applied.sort();
    rec.recreated = outcome.recreated.iter().map(|&idx| compared[idx].key.to_string()).collect();
    rec.recreated.sort();
    for key in outcome.pruned.iter().map(ToString::to_string) {
        st.resources.retain(|r| r.object != key);
        rec.pruned.push(key);
    }
    for (key, deletion) in &outcome.pending {
        let key = key.to_string();
        if let Some(rs) = st.resources.iter_mut().find(|r| r.object == key) {
            rs.reason = format!("requires pruning; {deletion}");
        }
    }
    let mut problems: Vec<String> = outcome.failures.iter().map(ToString::to_string).collect();
    problems.extend(plan::held_prunes(s.plan).filter(|_| outcome.prunes_held));
    problems.extend(s.found.errors.iter().cloned());
    (rec.result, rec.message) = plan::result(&problems, outcome.waiting.as_deref());
    if rec.result == SyncResult::Succeeded && !outcome.pending.is_empty() {
        let pending: Vec<String> = outcome.pending.iter().map(|(k, d)| format!("{k} ({d})")).collect();
        rec.message = format!("deletion requested, object still present: {}", pending.join(", "));
    }
    match rec.result {
        SyncResult::Failed => st.conditions.push(Condition::new(ConditionType::SyncError, rec.message.clone())),
        SyncResult::Running => st.conditions.push(Condition::new(ConditionType::SyncRunning, rec.message.clone())),
        SyncResult::Succeeded => st.synced_revision = rec.revision.clone(),
        SyncResult::Refused | SyncResult::Superseded => {}
    }
    (st.sync, st.health) = status::roll_up(&st.resources, s.excluded, !s.found.errors.is_empty());
    rec.finished_at.clone_from(&s.finished_at);
}

/// The health each object's sync waits on: its status's, Healthy for objects with
/// `IgnoreHealthCheck`.
pub(super) fn sync_health(compared: &[Arc<Compared>], st: &AppStatus, excluded: &Exclusions) -> Vec<HealthStatus> {
    compared
        .iter()
        .zip(&st.resources)
        .map(
            |(c, r)| {
                if excluded.no_health_check.contains(&c.key.to_string()) { HealthStatus::Healthy } else { r.health }
            },
        )
        .collect()
}

/// The prune candidates' rows of `plumb diff` ([`super::PassReport::diffs`]), with the
/// reason the status gives them.
pub(super) fn candidate_diffs(found: &Found, st: &AppStatus) -> Vec<ObjectDiff> {
    let n = found.compared.len();
    st.resources[n..]
        .iter()
        .map(|r| ObjectDiff {
            object: r.object.clone(),
            desired: Value::Null,
            live: None,
            differences: vec![],
            reason: r.reason.clone(),
            verdict: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::{
        compare::{Difference, Live},
        config::SyncPolicy,
        health::HealthStatus::{Degraded, Healthy, Progressing},
        plan::{Deletion, Mode, PruneCandidate},
        reconcile::inventory::Candidates,
        status::{Pin, SyncReason},
        tracking::ObjectKey,
    };

    const NOW: &str = "2026-12-01T12:00:00Z";
    const STALL: Duration = Duration::from_secs(300);

    fn now() -> jiff::Timestamp {
        NOW.parse().unwrap()
    }

    fn later(seconds: i64) -> jiff::Timestamp {
        now() + jiff::SignedDuration::from_secs(seconds)
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "web"}})
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::of(&cm(name)).unwrap()
    }

    /// A compared ConfigMap `name` with `reason`, its live object `live` when given.
    fn compared(name: &str, reason: ObjectReason, live: Option<Value>) -> Arc<Compared> {
        let mut c = Compared::early(key(name), cm(name), None, reason, "cm.yaml#1");
        c.live = live.map(Live::from);
        Arc::new(c)
    }

    fn in_sync(name: &str) -> Arc<Compared> {
        compared(name, ObjectReason::Synced, Some(cm(name)))
    }

    fn drifted(name: &str) -> Arc<Compared> {
        let mut c = Compared::clone(&compared(name, differs(), Some(cm(name))));
        let path = "/data/k".to_string();
        c.differences.push(Difference { path, desired: Some(json!("git")), live: Some(json!("hand")), manager: None });
        Arc::new(c)
    }

    fn differs() -> ObjectReason {
        ObjectReason::Differs { fields: vec!["/data/k".into()], client_side: false }
    }

    fn found(compared: Vec<Arc<Compared>>) -> Found {
        Found { compared, candidates: Candidates::default(), errors: vec![] }
    }

    fn orphan(name: &str, deletion: Option<Deletion>) -> (PruneCandidate, crate::cluster::Kind) {
        let resource = kube::core::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
        };
        let kind = crate::cluster::Kind { resource: Arc::new(resource), namespaced: true };
        (PruneCandidate { deletion, ..PruneCandidate::new(key(name), "u") }, kind)
    }

    fn health(statuses: &[HealthStatus]) -> Observed {
        let health = statuses.iter().map(|s| Health { status: *s, message: String::new() }).collect();
        Observed { health, ..Observed::default() }
    }

    fn in_sync_row(object: &str) -> ResourceStatus {
        let (sync, reason) = (SyncStatus::Synced, String::new());
        ResourceStatus { object: object.into(), sync, reason, health: Healthy, health_message: String::new() }
    }

    fn base() -> AppStatus {
        AppStatus { app: "web".into(), environment: "dev".into(), revision: "c2".into(), ..AppStatus::default() }
    }

    /// The status [`assessed`] builds from `found` and `observed` at `at`.
    fn assess_at(found: &Found, observed: &Observed, at: jiff::Timestamp, since: &mut ProgressingSince) -> AppStatus {
        let mut st = base();
        let plan = plan::Plan::default();
        let a = Assessment { found, plan: &plan, observed, stall_after: STALL, now: at, also_declared: &[] };
        assessed(&mut st, &a, since);
        st
    }

    fn assess(found: &Found, observed: &Observed) -> AppStatus {
        assess_at(found, observed, now(), &mut ProgressingSince::default())
    }

    fn kinds(st: &AppStatus) -> Vec<&str> {
        st.conditions.iter().map(|c| c.type_.as_str()).collect()
    }

    #[test]
    fn objects_roll_up_into_sync_and_health() {
        struct Case {
            name: &'static str,
            compared: Vec<Arc<Compared>>,
            health: Vec<HealthStatus>,
            want: (SyncStatus, HealthStatus),
        }
        let cases = [
            Case {
                name: "all in sync",
                compared: vec![in_sync("a"), in_sync("b")],
                health: vec![Healthy, Healthy],
                want: (SyncStatus::Synced, Healthy),
            },
            Case {
                name: "one differs",
                compared: vec![in_sync("a"), drifted("b")],
                health: vec![Healthy, Healthy],
                want: (SyncStatus::OutOfSync, Healthy),
            },
            Case {
                name: "one missing",
                compared: vec![compared("a", ObjectReason::Missing, None)],
                health: vec![HealthStatus::Missing],
                want: (SyncStatus::OutOfSync, HealthStatus::Missing),
            },
            Case {
                name: "degraded wins",
                compared: vec![in_sync("a"), in_sync("b")],
                health: vec![Progressing, Degraded],
                want: (SyncStatus::Synced, Degraded),
            },
        ];
        for c in cases {
            let st = assess(&found(c.compared), &health(&c.health));
            assert_eq!((st.sync, st.health), c.want, "{}", c.name);
            assert_eq!(st.synced_revision.is_empty(), c.want.0 != SyncStatus::Synced, "{}: synced revision", c.name);
        }
    }

    #[test]
    fn an_object_another_application_tracks_is_a_shared_resource_warning() {
        let mut theirs = cm("a");
        theirs["metadata"]["annotations"] = json!({tracking::TRACKING_ANNOTATION: "api:/ConfigMap:web/a"});
        let mut ours = cm("b");
        ours["metadata"]["annotations"] = json!({tracking::TRACKING_ANNOTATION: "web:/ConfigMap:web/b"});
        let f = found(vec![
            compared("a", ObjectReason::OwnedBy("application api".into()), Some(theirs.clone())),
            compared("b", ObjectReason::Synced, Some(ours)),
        ]);
        let st = assess(&f, &health(&[Healthy, Healthy]));
        assert_eq!(kinds(&st), ["SharedResourceWarning"]);
        // moved here (its owner no longer declares it): taken over, no warning
        let moved = found(vec![compared("a", ObjectReason::Missing, Some(theirs))]);
        assert!(kinds(&assess(&moved, &health(&[Healthy]))).is_empty());
        assert_eq!(
            st.conditions[0].message,
            "ConfigMap/web/a is owned by application api, which synced it first; web also declares it and never writes it"
        );
    }

    #[test]
    fn an_object_another_application_owns_does_not_make_this_one_out_of_sync() {
        let mut theirs = cm("a");
        theirs["metadata"]["annotations"] = json!({tracking::TRACKING_ANNOTATION: "api:/ConfigMap:web/a"});
        let owned_by = ObjectReason::OwnedBy("application api".into());
        let f = found(vec![compared("a", owned_by, Some(theirs)), compared("b", ObjectReason::Synced, Some(cm("b")))]);
        let st = assess(&f, &health(&[Healthy, Healthy]));
        assert_eq!(st.sync, SyncStatus::Synced, "{:?}", st.resources);
        assert_eq!(st.resources[0].sync, SyncStatus::OutOfSync, "the object itself is shown as it is");
    }

    #[test]
    fn a_deletion_held_past_the_stall_time_is_a_stuck_prune() {
        let stuck = Deletion { since: "2026-12-01T11:50:00Z".into(), finalizers: vec!["example.com/hold".into()] };
        let fresh = Deletion { since: "2026-12-01T11:59:00Z".into(), finalizers: vec!["example.com/hold".into()] };
        let mut f = found(vec![]);
        f.candidates.orphans = vec![orphan("old", Some(stuck)), orphan("new", Some(fresh))];
        let st = assess(&f, &health(&[]));
        assert_eq!(kinds(&st), ["PruneStuck"]);
        let message = &st.conditions[0].message;
        assert!(message.contains("ConfigMap/web/old") && !message.contains("ConfigMap/web/new"), "{message}");
        let rows: Vec<(&str, SyncStatus, &str)> =
            st.resources.iter().map(|r| (r.object.as_str(), r.sync, r.reason.as_str())).collect();
        assert_eq!(
            rows,
            [
                ("ConfigMap/web/old", SyncStatus::OutOfSync, "requires pruning"),
                ("ConfigMap/web/new", SyncStatus::OutOfSync, "requires pruning")
            ]
        );
        assert_eq!(
            (st.sync, st.health),
            (SyncStatus::OutOfSync, HealthStatus::Healthy),
            "candidates are not in health"
        );
    }

    #[test]
    fn failing_watches_and_comparison_errors_are_conditions_in_that_order() {
        let mut f = found(vec![compared("a", ObjectReason::Error("dry-run: forbidden".into()), None)]);
        f.errors = vec!["ConfigMap/web/a: dry-run: forbidden".into()];
        let observed = Observed { watch_errors: vec!["ConfigMap: 403".into()], ..health(&[HealthStatus::Unknown]) };
        let st = assess(&f, &observed);
        assert_eq!(kinds(&st), ["WatchError", "ComparisonError"]);
        assert!(st.conditions[0].message.ends_with("ConfigMap: 403"));
        assert_eq!(st.conditions[1].message, "ConfigMap/web/a: dry-run: forbidden");
        assert_eq!(st.sync, SyncStatus::Unknown, "a comparison error makes sync Unknown");
    }

    #[test]
    fn an_object_progressing_past_the_stall_time_is_a_stall_and_recovery_clears_it() {
        let f = found(vec![in_sync("a")]);
        let mut since = ProgressingSince::default();
        let first = assess_at(&f, &health(&[Progressing]), now(), &mut since);
        assert!(kinds(&first).is_empty() && since.contains_key(&key("a")));
        let still = assess_at(&f, &health(&[Progressing]), later(299), &mut since);
        assert!(kinds(&still).is_empty(), "not yet: {:?}", still.conditions);
        let stalled = assess_at(&f, &health(&[Progressing]), later(300), &mut since);
        assert_eq!(kinds(&stalled), ["HealthStalled"]);
        assert_eq!(stalled.health, Progressing, "a stall warns; health stays Progressing");
        let healthy = assess_at(&f, &health(&[Healthy]), later(301), &mut since);
        assert!(kinds(&healthy).is_empty() && since.is_empty());
    }

    #[test]
    fn orphaned_resources_are_listed_shortened_or_their_listing_error_shown() {
        let many: Vec<String> = (0..12).map(|i| format!("ConfigMap/web/x{i:02}")).collect();
        let observed = Observed { orphaned: Some(Ok(many.clone())), ..Observed::default() };
        let st = assess(&found(vec![]), &observed);
        assert_eq!(kinds(&st), ["OrphanedResourceWarning"]);
        assert!(
            st.conditions[0].message.starts_with("12 object(s)") && st.conditions[0].message.ends_with("and 2 more")
        );
        assert_eq!(st.orphaned, many);
        let failed = Observed { orphaned: Some(Err("list secrets: forbidden".into())), ..Observed::default() };
        let st = assess(&found(vec![]), &failed);
        assert_eq!(st.conditions[0].message, "orphaned resources could not be listed: list secrets: forbidden");
        assert!(st.orphaned.is_empty());
        let none = Observed { orphaned: Some(Ok(vec![])), ..Observed::default() };
        assert!(assess(&found(vec![]), &none).conditions.is_empty());
    }

    #[test]
    fn an_object_with_ignore_health_check_is_left_out_of_health() {
        let mut live = cm("a");
        live["metadata"]["annotations"] = json!({health::COMPARE_OPTIONS_ANNOTATION: "IgnoreHealthCheck"});
        let f = found(vec![compared("a", ObjectReason::Synced, Some(live)), in_sync("b")]);
        let mut st = base();
        let plan = plan::Plan::default();
        let observed = health(&[Degraded, Healthy]);
        let a = Assessment {
            found: &f,
            plan: &plan,
            observed: &observed,
            stall_after: STALL,
            now: now(),
            also_declared: &[],
        };
        let excluded = assessed(&mut st, &a, &mut ProgressingSince::default());
        assert!(excluded.no_health_check.contains("ConfigMap/web/a"));
        assert_eq!(st.health, Healthy);
        assert_eq!(sync_health(&f.compared, &st, &excluded), [Healthy, Healthy]);
    }

    #[test]
    fn a_failed_render_keeps_the_last_resources_and_names_the_commit() {
        let previous = AppStatus {
            revision: "c1".into(),
            subject: "first".into(),
            health: Healthy,
            resources: vec![in_sync_row("ConfigMap/web/a")],
            ..base()
        };
        let requested = Requested::none(Mode::Policy);
        let start = || started(("web", "dev"), &previous, &requested, None);
        let render = PassFailure::Render {
            revision: "c2".into(),
            subject: "broken".into(),
            error: crate::render::Error::Parse { file: "cm.yaml".into(), line: 1, document: 1, message: "bad".into() },
        };
        let st = unsourced(start(), &previous, &render);
        assert_eq!((st.sync, st.health, st.resources.len()), (SyncStatus::Unknown, Healthy, 1));
        assert_eq!((st.revision.as_str(), st.subject.as_str()), ("c2", "broken"));
        assert_eq!(kinds(&st), ["ComparisonError"]);
        assert!(st.conditions[0].message.starts_with("render c2: "), "{}", st.conditions[0].message);
        let boundary = PassFailure::Boundary { app: "web".into(), error: "`[`: bad glob".into() };
        let st = unsourced(start(), &previous, &boundary);
        assert_eq!((st.revision.as_str(), st.subject.as_str()), ("c1", "first"), "no commit read: the last one stays");
        assert_eq!(st.conditions[0].message, "boundaries of application web: `[`: bad glob");
    }

    #[test]
    fn a_pass_starts_from_what_carries_over_and_the_requests_in_force() {
        let previous = AppStatus {
            synced_revision: "c1".into(),
            kinds: vec![("v1".into(), "ConfigMap".into())],
            last_sync: Some(SyncRecord::new("c1", SyncReason::NewRevision)),
            resources: vec![in_sync_row("ConfigMap/web/a")],
            conditions: vec![Condition::new(ConditionType::SyncError, "old")],
            ..base()
        };
        let mut requested = Requested::none(Mode::Policy);
        requested.pinned = Some(Pin {
            revision: "c0".into(),
            by: "ops".into(),
            at: "t0".into(),
            until_next_commit: false,
            force: false,
            tracked: "c2".into(),
            ..Pin::default()
        });
        requested.sync_request = "t1".into();
        requested.conditions.push(Condition::new(ConditionType::Pinned, "pinned to c0"));
        let st = started(("web", "dev"), &previous, &requested, Some("policy.yaml: bad"));
        assert_eq!((st.synced_revision.as_str(), st.kinds.len(), st.last_sync.is_some()), ("c1", 1, true));
        assert!(st.resources.is_empty() && st.revision.is_empty(), "what the pass finds is not carried over");
        assert_eq!(kinds(&st), ["PolicyWarning", "Pinned"]);
        assert_eq!((st.sync_request.as_str(), st.pinned.as_ref().map(|p| p.revision.as_str())), ("t1", Some("c0")));
        // the pin released: the next pass's status holds none
        let st = started(("web", "dev"), &st, &Requested::none(Mode::Policy), None);
        assert!(st.pinned.is_none() && st.conditions.is_empty());
    }

    fn outcome() -> apply::Outcome {
        apply::Outcome::default()
    }

    #[test]
    fn a_sync_s_outcome_sets_resources_result_and_synced_revision() {
        let f = found(vec![drifted("a"), in_sync("b")]);
        let mut pruned = found(vec![]);
        pruned.candidates.orphans = vec![orphan("old", None)];
        struct Case {
            name: &'static str,
            outcome: apply::Outcome,
            want: (SyncResult, &'static str, SyncStatus),
        }
        let failed = apply::Error::Apply { app: "web".into(), object: key("a"), message: "forbidden".into() };
        let cases = [
            Case {
                name: "applied",
                outcome: apply::Outcome {
                    applied: vec![(0, Health { status: Healthy, message: String::new() })],
                    ..outcome()
                },
                want: (SyncResult::Succeeded, "c2", SyncStatus::Synced),
            },
            Case {
                name: "failed",
                outcome: apply::Outcome { failures: vec![failed], ..outcome() },
                want: (SyncResult::Failed, "", SyncStatus::OutOfSync),
            },
            Case {
                name: "waiting for a later wave",
                outcome: apply::Outcome { waiting: Some("wave 1 waits for ConfigMap/web/a".into()), ..outcome() },
                want: (SyncResult::Running, "", SyncStatus::OutOfSync),
            },
        ];
        for c in cases {
            let mut st = base();
            let plan = plan::Plan::default();
            let observed = health(&[Healthy, Healthy]);
            let a = Assessment {
                found: &f,
                plan: &plan,
                observed: &observed,
                stall_after: STALL,
                now: now(),
                also_declared: &[],
            };
            let excluded = assessed(&mut st, &a, &mut ProgressingSince::default());
            let mut rec = SyncRecord::new("c2", SyncReason::SelfHeal);
            let s =
                Synced { outcome: &c.outcome, plan: &plan, found: &f, excluded: &excluded, finished_at: "t1".into() };
            synced(&mut st, &mut rec, &s);
            assert_eq!((rec.result, st.synced_revision.as_str(), st.sync), c.want, "{}: {rec:?}", c.name);
            assert_eq!(rec.finished_at, "t1", "{}", c.name);
            let conditions = kinds(&st);
            match rec.result {
                SyncResult::Failed => assert_eq!(conditions, ["SyncError"], "{}", c.name),
                SyncResult::Running => assert_eq!(conditions, ["SyncRunning"], "{}", c.name),
                _ => assert!(conditions.is_empty(), "{}: {conditions:?}", c.name),
            }
        }
        // a prune: its row goes, the record names it
        let mut st = base();
        let plan = plan::Plan::default();
        let observed = health(&[]);
        let a = Assessment {
            found: &pruned,
            plan: &plan,
            observed: &observed,
            stall_after: STALL,
            now: now(),
            also_declared: &[],
        };
        let excluded = assessed(&mut st, &a, &mut ProgressingSince::default());
        assert_eq!(st.sync, SyncStatus::OutOfSync);
        let done = apply::Outcome { pruned: vec![key("old")], ..outcome() };
        let mut rec = SyncRecord::new("c2", SyncReason::NewRevision);
        let s = Synced { outcome: &done, plan: &plan, found: &pruned, excluded: &excluded, finished_at: "t1".into() };
        synced(&mut st, &mut rec, &s);
        assert_eq!(
            (rec.pruned.as_slice(), st.resources.len(), st.sync),
            (&["ConfigMap/web/old".to_string()][..], 0, SyncStatus::Synced)
        );
    }

    #[test]
    fn a_refused_sync_writes_nothing_and_says_why() {
        let mut st = base();
        let mut rec = SyncRecord::new("c2", SyncReason::NewRevision);
        refused(&mut st, &mut rec, "auto-sync skipped: allowEmpty", "t1".into());
        assert_eq!(
            (rec.result, rec.message.as_str(), rec.finished_at.as_str()),
            (SyncResult::Refused, "auto-sync skipped: allowEmpty", "t1")
        );
        assert_eq!(kinds(&st), ["SyncError"]);
        assert!(rec.applied.is_empty() && rec.pruned.is_empty());
    }

    #[test]
    fn the_render_s_tool_time_and_warnings_are_in_the_status() {
        let mut st = base();
        let snapshot = crate::source::Snapshot {
            revision: "c3".into(),
            subject: "bump".into(),
            files: vec![],
            files_digest: String::new(),
            root_tree: String::new(),
            top_level: vec![],
        };
        let rendered = Rendered {
            took: Duration::from_millis(42),
            warnings: vec!["chart deprecated".into()],
            ..Rendered::default()
        };
        sourced(&mut st, &snapshot, &rendered);
        assert_eq!((st.revision.as_str(), st.subject.as_str()), ("c3", "bump"));
        let render = st.render.as_ref().unwrap();
        assert_eq!((render.millis, render.revision.as_str()), (42, "c3"));
        assert_eq!(kinds(&st), ["RenderWarning"]);
    }

    /// What the gate of one policy pass sees.
    fn gate<'a>(policy: &'a SyncPolicy, previous: &'a AppStatus, at: Instant) -> Gate<'a> {
        static OPEN: plan::windows::Verdict =
            plan::windows::Verdict { closed: None, manual_closed: None, active: vec![], next_change: None };
        Gate {
            mode: Mode::Policy,
            policy,
            previous,
            fail_on_shared: false,
            rewritten: None,
            paused: false,
            waiting_for: None,
            windows: &OPEN,
            now: at,
        }
    }

    /// selfHeal over a sequence of passes on one state: a drift is reverted, a drift
    /// during the backoff waits (SelfHealBackoff), the same drift straight back after
    /// the revert stops selfHeal (NonConverging), and a pause holds it.
    #[test]
    fn self_heal_backs_off_and_stops_on_a_drift_that_keeps_coming_back() {
        let policy = SyncPolicy { automated: true, self_heal: true, ..SyncPolicy::default() };
        let previous = AppStatus { synced_revision: "c2".into(), ..base() };
        let f = found(vec![drifted("a")]);
        let plan =
            plan::Plan { waves: vec![plan::Wave { apply: vec![0], ..plan::Wave::default() }], ..plan::Plan::default() };
        let observed = health(&[Healthy]);
        let a = Assessment {
            found: &f,
            plan: &plan,
            observed: &observed,
            stall_after: STALL,
            now: now(),
            also_declared: &[],
        };
        let mut state = AppState::default();
        let t0 = Instant::now();
        let (_, _, first) = judged(&base(), &a, &gate(&policy, &previous, t0), &mut state);
        assert_eq!(first.reason, Some(SyncReason::SelfHeal));
        state.heal = first.heal;
        // the same drift at once: it came straight back
        let (st, _, again) = judged(&base(), &a, &gate(&policy, &previous, t0), &mut state);
        assert_eq!(again.reason, None);
        assert_eq!(kinds(&st), ["NonConverging"]);
        state.heal = again.heal;
        let (_, _, still) = judged(&base(), &a, &gate(&policy, &previous, t0 + Duration::from_secs(600)), &mut state);
        assert_eq!(still.reason, None, "stopped for good at this revision");
        // a new state: paused, no selfHeal
        let mut fresh = AppState::default();
        let paused = Gate { paused: true, ..gate(&policy, &previous, t0) };
        let (_, _, held) = judged(&base(), &a, &paused, &mut fresh);
        assert_eq!(held.reason, None);
    }

    #[test]
    fn a_settled_revision_is_the_synced_one() {
        let mut st = base();
        decided(&mut st, vec![Condition::new(ConditionType::OutOfSync, "waits")], false);
        assert!(st.synced_revision.is_empty());
        decided(&mut st, vec![], true);
        assert_eq!((st.synced_revision.as_str(), kinds(&st)), ("c2", vec!["OutOfSync"]));
    }

    #[test]
    fn prune_candidates_are_the_diff_rows_after_the_compared_objects() {
        let mut f = found(vec![in_sync("a")]);
        f.candidates.orphans = vec![orphan("old", None)];
        let st = assess(&f, &health(&[Healthy]));
        let rows = candidate_diffs(&f, &st);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].object.as_str(), rows[0].reason.as_str()), ("ConfigMap/web/old", "requires pruning"));
    }

    #[test]
    fn a_pass_ends_with_the_kinds_it_applied_and_its_sync() {
        let mut st = base();
        let kinds: std::collections::BTreeSet<(String, String)> =
            [("v1".to_string(), "ConfigMap".to_string())].into_iter().collect();
        ended(&mut st, &kinds, None);
        assert_eq!((st.kinds.len(), st.last_sync.is_none()), (1, true));
        let rec = SyncRecord::new("c2", SyncReason::NewRevision);
        ended(&mut st, &std::collections::BTreeSet::new(), Some(&rec));
        assert!(st.kinds.is_empty() && st.last_sync == Some(rec), "a kind no longer applied is forgotten");
    }

    /// The live side may add defaults; what the chart declares must be there.
    #[test]
    fn contains_ignores_what_the_server_adds() {
        let chart = serde_json::json!({"names": {"kind": "Gadget"}, "versions": [{"name": "v1", "served": true}]});
        let live = serde_json::json!({"names": {"kind": "Gadget", "listKind": "GadgetList"}, "conversion": {"strategy": "None"},
            "versions": [{"name": "v1", "served": true, "storage": true}]});
        assert!(contains(&live, &chart));
        let newer = serde_json::json!({"names": {"kind": "Gadget", "shortNames": ["gd"]}});
        assert!(!contains(&live, &newer));
        assert!(!contains(&live, &serde_json::json!({"versions": [{"name": "v1"}, {"name": "v2"}]})));
    }
}
