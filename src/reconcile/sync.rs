//! Stage 5 of a pass, once the gate said so: run the planned sync ([`crate::apply`])
//! and record its outcome in the status.

use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;

use super::{Context, Found, compare::Scope};
use crate::{
    apply,
    compare::{Compared, SyncStatus, object},
    health::HealthStatus,
    plan::{self, SyncReason},
    source,
    status::{self, AppStatus, Condition, ConditionType, Exclusions, SyncRecord, SyncResult},
};

impl Context {
    /// Runs a planned sync ([`crate::apply::run`]) and records its outcome in `st`:
    /// applied objects Synced, pruned ones gone, the result ([`plan::result`]) with its
    /// condition, the roll-up again.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn sync(
        &self,
        st: &mut AppStatus,
        snapshot: &source::Snapshot,
        reason: SyncReason,
        p: &plan::Plan,
        found: &Found,
        scope: &Scope<'_>,
        excluded: &Exclusions,
        started_at: String,
    ) -> SyncRecord {
        let mut rec = SyncRecord {
            subject: snapshot.subject.clone(),
            started_at,
            ..SyncRecord::new(snapshot.revision.clone(), reason)
        };
        if let Some(refusal) = &p.refused {
            (rec.result, rec.message, rec.finished_at) = (SyncResult::Refused, refusal.clone(), status::now());
            st.conditions.push(Condition::new(ConditionType::SyncError, refusal.clone()));
            tracing::warn!(app = %st.app, revision = %rec.revision, "{refusal}");
            return rec;
        }
        let compared = &found.compared;
        let app = st.app.clone();
        let health =
            compared
                .iter()
                .zip(&st.resources)
                .map(|(c, r)| {
                    if excluded.no_health_check.contains(&c.key.to_string()) { HealthStatus::Healthy } else { r.health }
                })
                .collect();
        let job = apply::Job {
            app: &app,
            revision: &snapshot.revision,
            subject: &snapshot.subject,
            reason,
            plan: p,
            compared,
            orphans: &found.candidates.orphans,
            compared_cleanly: found.errors.is_empty(),
            app_options: scope.defaults,
            no_health_check: &excluded.no_health_check,
            health,
        };
        let recompare = |c: Arc<Compared>| self.recompare(scope, c).boxed();
        let outcome =
            apply::run(scope.writer, &job, &recompare, &|k, rv, applied| self.memo.wrote(k, rv, applied)).await;
        for (idx, h) in &outcome.applied {
            let c = &compared[*idx];
            if let Some(digest) = c.finished_digest.as_ref().filter(|_| c.live.is_none()) {
                // created: its later absence is the cluster's removal, not drift
                st.finished.retain(|f| f.object != c.key.to_string());
                st.finished.push(status::Finished {
                    object: c.key.to_string(),
                    manifest: digest.clone(),
                    health: HealthStatus::Missing,
                    message: "created by plumb".into(),
                });
            }
            let key = compared[*idx].key.to_string();
            if let Some(rs) = st.resources.iter_mut().find(|r| r.object == key) {
                (rs.sync, rs.health, rs.health_message) = (SyncStatus::Synced, h.status, h.message.clone());
                rs.reason.clear();
            }
            rec.applied.push(key);
        }
        rec.applied.sort();
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
        problems.extend(plan::held_prunes(p).filter(|_| outcome.prunes_held));
        problems.extend(found.errors.iter().cloned());
        (rec.result, rec.message) = plan::result(&problems, outcome.waiting.as_deref());
        if rec.result == SyncResult::Succeeded && !outcome.pending.is_empty() {
            let pending: Vec<String> = outcome.pending.iter().map(|(k, d)| format!("{k} ({d})")).collect();
            rec.message = format!("deletion requested, object still present: {}", pending.join(", "));
        }
        match rec.result {
            SyncResult::Failed => st.conditions.push(Condition::new(ConditionType::SyncError, rec.message.clone())),
            SyncResult::Running => {
                tracing::info!(app = %st.app, revision = %rec.revision, "sync running: {}", rec.message);
                st.conditions.push(Condition::new(ConditionType::SyncRunning, rec.message.clone()));
            }
            SyncResult::Succeeded => st.synced_revision = rec.revision.clone(),
            SyncResult::Refused => {}
        }
        (st.sync, st.health) = status::roll_up(&st.resources, excluded, !found.errors.is_empty());
        rec.finished_at = status::now();
        rec
    }

    /// An object whose kind a CRD of this sync defines: once that CRD is served,
    /// compared again (now with its kind, namespace and tracking-id).
    async fn recompare(&self, scope: &Scope<'_>, c: Arc<Compared>) -> Result<Arc<Compared>, apply::WriteError> {
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

/// The OutOfSync objects and their differences, as the selfHeal gate sees them.
pub(super) fn drifted(compared: &[Arc<Compared>]) -> Vec<plan::Drifted<'_>> {
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
