//! Stage 6 of a pass: Events, the status and history saved in the cluster (only when
//! they changed), metrics.

use std::time::Instant;

use super::{Context, Error, Mode, PassReport, short};
use crate::{
    compare::SyncStatus,
    health::HealthStatus,
    metrics::{PassLabels, StatusLabels},
    plan,
    status::{self, AppStatus, Condition, ConditionType, SyncRecord, SyncResult},
};

impl Context {
    /// The end of a pass that could not read its source: Unknown with the error; the
    /// last objects' status and health stay as they were.
    pub(super) async fn finish_early(
        &self,
        mut st: AppStatus,
        previous: AppStatus,
        history: Option<Vec<SyncRecord>>,
        message: String,
        started: Instant,
        mode: Mode,
    ) -> Result<PassReport, Error> {
        tracing::warn!(app = %st.app, "{message}");
        (st.sync, st.health, st.resources) = (SyncStatus::Unknown, previous.health, previous.resources.clone());
        st.resources_omitted = previous.resources_omitted;
        st.conditions.push(Condition::new(ConditionType::ComparisonError, message));
        if st.revision.is_empty() {
            (st.revision, st.subject) = (previous.revision.clone(), previous.subject.clone());
        }
        self.record(&st, &previous, history, None, mode, started).await?;
        Ok(PassReport { status: st, sync: None, plan: plan::Plan::default(), compared: vec![], candidates: vec![] })
    }

    /// Records a pass: a `HealthChanged` Event when health changed, status and history
    /// saved when they changed (writing modes only), pass metrics.
    pub(super) async fn record(
        &self,
        st: &AppStatus,
        previous: &AppStatus,
        history: Option<Vec<SyncRecord>>,
        record: Option<SyncRecord>,
        mode: Mode,
        started: Instant,
    ) -> Result<(), Error> {
        let result = match (&record, st.sync) {
            (Some(r), _) if r.result == SyncResult::Succeeded => "applied",
            (Some(r), _) if r.result == SyncResult::Refused => "refused",
            (Some(r), _) if r.result == SyncResult::Running => "running",
            (Some(_), _) => "failed",
            (None, SyncStatus::Unknown) => "error",
            (None, _) => "compared",
        };
        if mode.writes() && self.records {
            if previous.health != st.health && !previous.app.is_empty() {
                self.health_changed(st, previous).await;
            }
            self.save(st, previous, history, record).await?;
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
        let object = status::event_object(&self.config.settings.status_namespace, &st.app);
        self.cluster.event(&object, st.health == HealthStatus::Degraded, "HealthChanged", "Assess", note).await;
    }

    async fn save(
        &self,
        st: &AppStatus,
        previous: &AppStatus,
        history: Option<Vec<SyncRecord>>,
        record: Option<SyncRecord>,
    ) -> Result<(), Error> {
        if st != previous || record.is_some() {
            let mut h = match history {
                Some(h) => h,
                None => self.store.load(&st.app).await?.1,
            };
            if let Some(r) = record {
                status::push_history(&mut h, r);
            }
            self.store.save(st, &h).await?;
        }
        self.statuses.write().await.insert(st.app.clone(), st.clone());
        Ok(())
    }
}
