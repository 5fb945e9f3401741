//! Stage 6 of a pass: Events, the status and history saved in the cluster (only when
//! they changed), metrics.

use std::{sync::Arc, time::Instant};

use super::{AppState, Error, Mode, Recorder};
use crate::{
    compare::SyncStatus,
    health::HealthStatus,
    metrics::{PassLabels, StatusLabels},
    status::{self, AppStatus, EventReason, SyncRecord, SyncResult, short},
};

impl Recorder<'_> {
    /// Records a pass, the one place that tells of its end: in writing modes (when this
    /// process owns the status: [`super::Context::without_records`] records nothing) a
    /// `HealthChanged` Event when health changed, status and history saved when they
    /// changed, then [`Recorder::signals`]; in every mode the pass metrics. A sync made
    /// by the CLI (`plumb sync --local` with no server serving) is recorded and
    /// signalled as the server's are: the history and the Events tell one story.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record(
        &self,
        state: &mut AppState,
        st: &AppStatus,
        previous: &AppStatus,
        history: Option<Vec<SyncRecord>>,
        record: Option<SyncRecord>,
        mode: Mode,
        started: Instant,
    ) -> Result<(), Error> {
        let result = PassResult::of(record.as_ref(), st.sync).as_str();
        // the replica and shard of this pass (none outside `plumb serve`: the last kept)
        let reconciler = crate::fence::current().map(|f| status::Reconciler::of(&f));
        let reconciler = reconciler.or_else(|| previous.reconciler.clone());
        let mut st = std::borrow::Cow::Borrowed(st);
        if st.reconciler != reconciler {
            st.to_mut().reconciler = reconciler;
        }
        let st = st.as_ref();
        if mode.writes() && self.records {
            if previous.health != st.health && !previous.app.is_empty() {
                self.health_changed(st, previous).await;
            }
            let sync = record.clone();
            let saved = self.save(st, previous, history, record).await?;
            // a save that landed as the shard was let go: not published here (the
            // replica's statuses of that shard were just forgotten)
            if crate::fence::current().is_none_or(|f| f.is_open()) {
                self.published.publish(saved.clone());
            }
            state.previous = Some(saved);
            self.signals(st, sync.as_ref()).await;
            self.comparison_errors(st, previous).await;
        }
        // the resource primed when its shard was taken serves the first pass alone
        self.store.unprime(&st.app);
        // a preview (a pull request's head, `plumb sync --dry-run`) or a comparison says
        // nothing of what runs: the application's metrics stay as its passes left them
        if !mode.writes() {
            return Ok(());
        }
        self.metrics.passes.get_or_create(&PassLabels { app: st.app.clone(), result: result.into() }).inc();
        self.metrics
            .pass_seconds
            .get_or_create(&StatusLabels { app: st.app.clone(), status: result.into() })
            .observe(started.elapsed().as_secs_f64());
        self.metrics.set_status(&st.app, st.sync, st.health);
        let until = st.suspended.as_ref().and_then(|s| s.until.parse::<jiff::Timestamp>().ok());
        let until = until.map_or(0.0, |t| t.as_millisecond() as f64 / 1000.0);
        self.metrics.suspended_until.get_or_create(&crate::metrics::AppLabels { app: st.app.clone() }).set(until);
        Ok(())
    }

    /// After a recorded pass: `plumb_app_info`, and for a sync
    /// `plumb_app_last_sync_timestamp_seconds` and Events on the application's resource
    /// (`SyncRunning`, `SyncSucceeded`, `SyncFailed`, `SyncRefused`, and `Pruned` naming
    /// each object deleted, once, at the end of a sync that took several passes).
    async fn signals(&self, st: &AppStatus, sync: Option<&SyncRecord>) {
        let repository =
            self.config.applications.iter().find(|a| a.name.value == st.app).map(|a| a.repository.value.clone());
        self.metrics.set_app_info(crate::metrics::AppInfoLabels {
            app: st.app.clone(),
            environment: st.environment.clone(),
            repository: repository.unwrap_or_default(),
            revision: st.revision.clone(),
            sync_status: st.sync.to_string(),
            health_status: st.health.to_string(),
        });
        let Some(sync) = sync else { return };
        let result = sync.result.as_str();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let labels = PassLabels { app: st.app.clone(), result: result.into() };
        self.metrics.last_sync_timestamp.get_or_create(&labels).set(now);
        let object = self.store.event_object(&st.app);
        let short = short(&sync.revision);
        let mut note = format!("sync of {short} ({}, {}): {result}", sync.subject, sync.reason);
        if !sync.message.is_empty() {
            note = format!("{note}: {}", sync.message);
        }
        let warning = matches!(sync.result, SyncResult::Failed | SyncResult::Refused);
        self.cluster.event(&object, warning, EventReason::Sync(sync.result), note).await;
        // A sync over several passes carries its prunes along: name them once, at its end.
        if sync.result == SyncResult::Running {
            return;
        }
        for pruned in &sync.pruned {
            let note = format!("{pruned} pruned (sync of {short})");
            self.cluster.event(&object, false, EventReason::Pruned, note).await;
        }
    }

    /// A Warning `ComparisonError` Event on the application's resource for each such
    /// condition of `st` that `previous` did not have with the same message: a fetch,
    /// render or comparison that fails is told once, when it starts failing so.
    async fn comparison_errors(&self, st: &AppStatus, previous: &AppStatus) {
        let is_error = |c: &&status::Condition| c.type_ == status::ConditionType::ComparisonError;
        for c in st.conditions.iter().filter(is_error) {
            if !previous.conditions.iter().filter(is_error).any(|p| p.message == c.message) {
                let note = format!("at {}: {}", short(&st.revision), c.message);
                self.cluster.event(&self.store.event_object(&st.app), true, EventReason::ComparisonError, note).await;
            }
        }
    }

    /// A `HealthChanged` Event on the application's resource, naming Degraded objects.
    async fn health_changed(&self, st: &AppStatus, previous: &AppStatus) {
        let degraded = st
            .resources
            .iter()
            .filter(|r| r.health == HealthStatus::Degraded)
            .map(|r| format!("{}: {}", r.object, r.health_message));
        let note = std::iter::once(format!("health {} → {} at {}", previous.health, st.health, short(&st.revision)))
            .chain(degraded)
            .collect::<Vec<_>>()
            .join("; ");
        tracing::info!(app = %st.app, "{note}");
        let object = self.store.event_object(&st.app);
        self.cluster.event(&object, st.health == HealthStatus::Degraded, EventReason::HealthChanged, note).await;
    }

    async fn save(
        &self,
        st: &AppStatus,
        previous: &AppStatus,
        history: Option<Vec<SyncRecord>>,
        record: Option<SyncRecord>,
    ) -> Result<Arc<AppStatus>, Error> {
        if st != previous || record.is_some() {
            let h = match (history, record) {
                (Some(mut h), r) => {
                    if let Some(r) = r {
                        status::push_history(&mut h, r);
                    }
                    h
                }
                (None, Some(r)) => {
                    let mut h = self.store.load(&st.app).await?.1;
                    status::push_history(&mut h, r);
                    h
                }
                // nothing to add: the save keeps the stored history (merged with none)
                (None, None) => Vec::new(),
            };
            self.store.save(st, &h).await?;
        }
        Ok(Arc::new(st.clone()))
    }
}

/// What a pass came to: the `result` label of `plumb_passes_total` and
/// `plumb_pass_duration_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PassResult {
    /// It synced and the sync succeeded.
    Applied,
    /// A guard refused its sync.
    Refused,
    /// Its sync goes on at the next pass (a later wave waits).
    Running,
    /// Its sync failed.
    Failed,
    /// It did not sync, and could not compare (a fetch, render or comparison error).
    Error,
    /// It compared and did not sync.
    Compared,
}

impl PassResult {
    fn of(record: Option<&SyncRecord>, sync: SyncStatus) -> Self {
        match (record.map(|r| r.result), sync) {
            (Some(SyncResult::Succeeded), _) => Self::Applied,
            (Some(SyncResult::Refused), _) => Self::Refused,
            (Some(SyncResult::Running | SyncResult::Superseded), _) => Self::Running,
            (Some(SyncResult::Failed), _) => Self::Failed,
            (None, SyncStatus::Unknown) => Self::Error,
            (None, _) => Self::Compared,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Refused => "refused",
            Self::Running => "running",
            Self::Failed => "failed",
            Self::Error => "error",
            Self::Compared => "compared",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_s_metric_result_follows_its_sync_then_its_comparison() {
        let rec = |result| Some(SyncRecord { result, ..SyncRecord::new("c", status::SyncReason::NewRevision) });
        let cases = [
            (rec(SyncResult::Succeeded), SyncStatus::Synced, "applied"),
            (rec(SyncResult::Refused), SyncStatus::OutOfSync, "refused"),
            (rec(SyncResult::Running), SyncStatus::OutOfSync, "running"),
            (rec(SyncResult::Failed), SyncStatus::Unknown, "failed"),
            (None, SyncStatus::Unknown, "error"),
            (None, SyncStatus::OutOfSync, "compared"),
            (None, SyncStatus::Synced, "compared"),
        ];
        for (record, sync, want) in cases {
            assert_eq!(PassResult::of(record.as_ref(), sync).as_str(), want, "{record:?} {sync:?}");
        }
    }
}
