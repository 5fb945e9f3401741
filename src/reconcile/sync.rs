//! Stage 5 of a pass, once the gate said so: run the planned sync ([`crate::apply`])
//! and record its outcome (in the status through the assessor).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use futures::FutureExt;
use serde_json::Value;

use super::{Found, Io, assess, compare::Scope, hooks};
use crate::{
    apply,
    compare::{Compared, SyncStatus, object},
    plan::{self, SyncReason},
    source,
    status::{self, AppStatus, EventReason, Exclusions, SyncRecord, SyncResult, short},
    tracking::ObjectKey,
};

/// The objects a sync wrote, each with the resourceVersion its server-side apply
/// answered (`None`: written otherwise, by a replace): what the pass's seal covers for
/// them ([`super::Context::seal_of`]).
pub(super) type Writes = HashMap<ObjectKey, Option<String>>;

/// What a sync of one pass acts on.
pub(super) struct SyncInput<'a> {
    /// The commit synced.
    pub snapshot: &'a source::Snapshot,
    /// Why it runs.
    pub reason: SyncReason,
    /// What it does.
    pub plan: &'a plan::Plan,
    /// The comparisons it acts on.
    pub found: &'a Found,
    /// What the status's roll-up leaves out.
    pub excluded: &'a Exclusions,
    /// The application's last sync (a Running one goes on: no second `SyncStarted`).
    pub last_sync: Option<&'a SyncRecord>,
    /// When the pass started (RFC 3339): the sync's start.
    pub started_at: String,
    /// Create the destination namespace first (`CreateNamespace=true`).
    pub create_namespace: bool,
    /// The render's hooks ([`hooks::split`]).
    pub hooks: &'a hooks::Hooks,
    /// A new sync now would be the application's first (Helm's install).
    pub first_sync: bool,
}

impl Io<'_> {
    /// Runs a planned sync ([`crate::apply::run`]) and records its outcome in `st`
    /// ([`assess::refused`], [`assess::synced`]); returns its record, continuing the
    /// last one when this is the same sync's next wave ([`status::continue_sync`]), and
    /// named `Rollback` when a pin is synced; and the objects it wrote.
    pub(super) async fn sync(self, st: &mut AppStatus, scope: &Scope<'_>, s: &SyncInput<'_>) -> (SyncRecord, Writes) {
        if s.create_namespace {
            self.ensure_namespace(scope.writer, scope.app, scope.namespace).await;
        }
        // a commit that failed verifyCommits, synced because a person allowed it
        let allowed_by = st
            .verification
            .as_ref()
            .filter(|v| !v.verified && !v.allowed_by.is_empty() && v.revision == s.snapshot.revision)
            .map(|v| v.allowed_by.clone())
            .unwrap_or_default();
        if s.last_sync.is_none_or(|l| l.result != SyncResult::Running || l.revision != st.revision) {
            let unverified =
                if allowed_by.is_empty() { String::new() } else { format!("; unverified, allowed by {allowed_by}") };
            let note = format!("sync of {} ({}) started{unverified}", short(&st.revision), s.reason);
            self.event(scope.app, false, EventReason::SyncStarted, note).await;
        }
        // a sync waiting at another revision is over: this one replaces its wait
        if let Some(waiting) = s.last_sync.filter(|l| l.result == SyncResult::Running && l.revision != st.revision) {
            let note = format!(
                "sync of {} superseded by {}, which starts now; it waited: {}",
                short(&waiting.revision),
                short(&st.revision),
                waiting.message
            );
            tracing::info!(app = %st.app, "{note}");
            self.event(scope.app, false, EventReason::Sync(SyncResult::Superseded), note).await;
        }
        let mut rec = SyncRecord {
            subject: s.snapshot.subject.clone(),
            started_at: s.started_at.clone(),
            chart: st.chart.clone(),
            allowed_unverified_by: allowed_by,
            ..SyncRecord::new(s.snapshot.revision.clone(), s.reason)
        };
        let writes = Mutex::new(Writes::new());
        let outcome = match &s.plan.refused {
            Some(refusal) => Err(refusal.clone()),
            None if s.hooks.is_empty() => Ok(self.apply(st, scope, s, &writes).await),
            None => self.with_hooks(st, scope, s, &mut rec, &writes).await,
        };
        match outcome {
            Err(refusal) => {
                assess::refused(st, &mut rec, &refusal, status::now());
                tracing::warn!(app = %st.app, revision = %rec.revision, "{refusal}");
            }
            Ok(outcome) => self.synced(st, s, &mut rec, &outcome),
        }
        if st.pinned.is_some() && s.reason == SyncReason::NewRevision {
            rec.reason = SyncReason::Rollback;
        }
        (status::continue_sync(s.last_sync, rec), writes.into_inner().unwrap_or_default())
    }

    /// A sync's record and status from what it did ([`assess::synced`]).
    fn synced(self, st: &mut AppStatus, s: &SyncInput<'_>, rec: &mut SyncRecord, outcome: &apply::Outcome) {
        {
            let synced = assess::Synced {
                outcome,
                plan: s.plan,
                found: s.found,
                excluded: s.excluded,
                finished_at: status::now(),
            };
            assess::synced(st, rec, &synced);
            if rec.result == SyncResult::Running {
                tracing::info!(app = %st.app, revision = %rec.revision, "sync running: {}", rec.message);
            }
        }
    }

    /// A sync of a render with hooks ([`Io::hooked`]): the sync it goes on with (a
    /// `Running` one of the same revision and reason) gives its start, which marks its
    /// hook runs, and whether it is the application's first.
    ///
    /// # Errors
    /// The refusal when a hook is outside the application's boundary.
    async fn with_hooks(
        self,
        st: &AppStatus,
        scope: &Scope<'_>,
        s: &SyncInput<'_>,
        rec: &mut SyncRecord,
        writes: &Mutex<Writes>,
    ) -> Result<apply::Outcome, String> {
        let reason =
            if st.pinned.is_some() && s.reason == SyncReason::NewRevision { SyncReason::Rollback } else { s.reason };
        let going_on =
            s.last_sync.filter(|l| l.result == SyncResult::Running && l.revision == rec.revision && l.reason == reason);
        let h = hooks::HookSync {
            hooks: s.hooks,
            first: going_on.map_or(s.first_sync, |l| l.install),
            started: going_on.map_or_else(|| s.started_at.clone(), |l| l.started_at.clone()),
            revision: &s.snapshot.revision,
        };
        rec.install = h.first;
        let compared = &s.found.compared;
        let before = assess::sync_health(compared, st, s.excluded);
        let not_ready = |o: &apply::Outcome| {
            let mut health = before.clone();
            for (i, h) in &o.applied {
                if !s.excluded.no_health_check.contains(&compared[*i].key.to_string()) {
                    health[*i] = h.status;
                }
            }
            let names = health.iter().enumerate().filter(|(_, h)| !plan::health_ready(**h));
            names.map(|(i, h)| format!("{} {h}", compared[i].key)).collect::<Vec<_>>()
        };
        self.hooked(scope, &h, rec, self.apply(st, scope, s, writes), not_ready).await
    }

    /// The writes of a sync: [`apply::run`] over the pass's comparisons, each told to
    /// the memory and to `writes`.
    async fn apply(
        self,
        st: &AppStatus,
        scope: &Scope<'_>,
        s: &SyncInput<'_>,
        writes: &Mutex<Writes>,
    ) -> apply::Outcome {
        let compared = &s.found.compared;
        let job = apply::Job {
            app: &st.app,
            revision: &s.snapshot.revision,
            subject: &s.snapshot.subject,
            reason: s.reason,
            plan: s.plan,
            compared,
            orphans: &s.found.candidates.orphans,
            compared_cleanly: s.found.errors.is_empty(),
            app_options: scope.defaults,
            no_health_check: &s.excluded.no_health_check,
            health: assess::sync_health(compared, st, s.excluded),
        };
        let recompare = |c: Arc<Compared>| self.recompare(scope, c).boxed();
        let written = |k: &ObjectKey, rv: &str, applied: Option<&Value>| {
            self.memo.wrote(k, rv, applied);
            if let Ok(mut w) = writes.lock() {
                w.insert(k.clone(), applied.map(|_| rv.to_string()));
            }
        };
        apply::run(scope.writer, &job, &recompare, &written).await
    }

    /// An object whose kind a CRD of this sync defines: once that CRD is served,
    /// compared again (now with its kind, namespace and tracking-id).
    async fn recompare(self, scope: &Scope<'_>, c: Arc<Compared>) -> Result<Arc<Compared>, apply::WriteError> {
        let api_version = c.apply.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        self.cluster.wait_kind(api_version, &c.key.kind, apply::CRD_TIMEOUT).await?;
        let no_crds = object::CrdKinds::new();
        let scope = Scope { crds: &no_crds, validate_new: false, absent: None, ..*scope };
        let manifest = crate::render::Manifest::new(c.source.clone(), &c.apply);
        let fresh = self.compare_one(&scope, &manifest).await;
        match fresh.sync() {
            SyncStatus::Unknown => Err(apply::WriteError::NotCompared(fresh.reason.clone())),
            _ => Ok(fresh),
        }
    }
}

/// selfHeal's state after a pass whose gate left `heal` and ran a sync for `reason`
/// with `record`: a selfHeal sync that did not succeed is marked failed (the next
/// drift is not taken for the same one coming back).
pub(super) fn heal_after(
    heal: Option<plan::HealState>,
    reason: Option<SyncReason>,
    record: Option<&SyncRecord>,
) -> Option<plan::HealState> {
    heal.map(|mut h| {
        if let (Some(SyncReason::SelfHeal), Some(r)) = (reason, record) {
            h.failed = r.result != SyncResult::Succeeded;
        }
        h
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn heal() -> plan::HealState {
        plan::HealState {
            revision: "c2".into(),
            drift: 1,
            attempts: 1,
            next: std::time::Instant::now(),
            stuck: None,
            failed: false,
        }
    }

    #[test]
    fn a_self_heal_sync_that_did_not_succeed_is_marked_failed() {
        let rec = |result| SyncRecord { result, ..SyncRecord::new("c2", SyncReason::SelfHeal) };
        let failed = heal_after(Some(heal()), Some(SyncReason::SelfHeal), Some(&rec(SyncResult::Failed)));
        assert!(failed.unwrap().failed);
        let done = heal_after(Some(heal()), Some(SyncReason::SelfHeal), Some(&rec(SyncResult::Succeeded)));
        assert!(!done.unwrap().failed);
        // another reason's sync, or none, leaves the state as the gate left it
        let manual = heal_after(Some(heal()), Some(SyncReason::Manual), Some(&rec(SyncResult::Failed)));
        assert!(!manual.unwrap().failed);
        assert!(heal_after(None, Some(SyncReason::SelfHeal), Some(&rec(SyncResult::Failed))).is_none());
    }
}
