//! Job and CronJob.
//!
//! Sources: Argo CD `gitops-engine/pkg/health/health_job.go`, Flux's Job status reader
//! (fluxcd/pkg `runtime/statusreaders/job.go`), the Kubernetes Job / CronJob API
//! (conditions `Complete`, `Failed`, `FailureTarget`, `SuccessCriteriaMet`, `Suspended`;
//! `status.lastScheduleTime`, `status.lastSuccessfulTime`).
//!
//! | kind | rule |
//! |---|---|
//! | Job | `Failed` / `FailureTarget` True → Degraded; `Complete` / `SuccessCriteriaMet` True → Healthy; `spec.suspend` → Suspended; a pod that cannot start past the deadline (an image that never pulls never counts against `backoffLimit`) → Degraded; otherwise Progressing (`job running: 1 active`) |
//! | CronJob | `spec.suspend` → Suspended; the last scheduled run finished without success (no active job, `lastSuccessfulTime` older than `lastScheduleTime`) → Degraded; else Healthy |

use serde_json::Value;

use super::{
    Health, HealthInput,
    fields::{self, count},
    revision::{self, Revision},
};

/// Health of a Job (`batch/v1`).
pub fn job(obj: &Value, input: &HealthInput<'_>) -> Health {
    for type_ in ["Failed", "FailureTarget"] {
        if let Some(c) = fields::condition(obj, type_).filter(|c| c.is_true()) {
            let why = [c.reason, c.message].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join(": ");
            return Health::degraded(if why.is_empty() { "job failed".into() } else { format!("job failed: {why}") });
        }
    }
    for type_ in ["Complete", "SuccessCriteriaMet"] {
        if fields::condition(obj, type_).is_some_and(|c| c.is_true()) {
            return Health::healthy("job completed");
        }
    }
    if fields::bool_at(obj, "/spec/suspend") {
        return Health::suspended("job is suspended");
    }
    let pods = revision::update_revision_pods(input.pods, Revision::All);
    let failure = revision::worst_failure(&pods, input.clock, input.settings);
    if let Some(f) = failure.as_ref().filter(|f| f.past_deadline) {
        return Health::degraded(f.message());
    }
    let mut message = if fields::str_at(obj, "/status/startTime").is_none() {
        "job not started".to_string()
    } else {
        format!(
            "job running: {} active, {} succeeded, {} failed",
            count(obj, "/status/active"),
            count(obj, "/status/succeeded"),
            count(obj, "/status/failed")
        )
    };
    if let Some(f) = failure {
        message.push_str("; ");
        message.push_str(&f.message());
    }
    Health::progressing(message)
}

/// Health of a CronJob (`batch/v1`).
pub fn cron_job(obj: &Value) -> Health {
    if fields::bool_at(obj, "/spec/suspend") {
        return Health::suspended("cronjob is suspended");
    }
    let active = fields::at(obj, "/status/active").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let scheduled = fields::timestamp(obj, "/status/lastScheduleTime");
    let succeeded = fields::timestamp(obj, "/status/lastSuccessfulTime");
    match (scheduled, succeeded) {
        (Some(s), ok) if !active && ok.is_none_or(|ok| ok < s) => {
            Health::degraded(format!("last run, scheduled at {s}, did not succeed"))
        }
        _ => Health::healthy(""),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{
        HealthStatus::{self, *},
        test_support::{ago, assess_at},
    };

    #[test]
    fn jobs_and_cron_jobs() {
        let job = |spec: Value, status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"}, "spec": spec, "status": status});
        let cron = |spec: Value, status: Value| json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"}, "spec": spec, "status": status});
        let cases: Vec<(&str, Value, HealthStatus, &str)> = vec![
            (
                "complete",
                job(json!({}), json!({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1})),
                Healthy,
                "job completed",
            ),
            (
                "failed",
                job(
                    json!({}),
                    json!({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}),
                ),
                Degraded,
                "job failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
            ),
            (
                "about to fail",
                job(
                    json!({}),
                    json!({"conditions": [{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"}]}),
                ),
                Degraded,
                "job failed: DeadlineExceeded",
            ),
            (
                "suspended",
                job(json!({"suspend": true}), json!({"conditions": [{"type": "Suspended", "status": "True"}]})),
                Suspended,
                "job is suspended",
            ),
            (
                "running",
                job(json!({}), json!({"startTime": ago(30), "active": 1})),
                Progressing,
                "job running: 1 active, 0 succeeded, 0 failed",
            ),
            ("not started", job(json!({}), json!({})), Progressing, "job not started"),
            ("cron suspended", cron(json!({"suspend": true}), json!({})), Suspended, "cronjob is suspended"),
            ("cron never ran", cron(json!({}), json!({})), Healthy, ""),
            (
                "cron last run succeeded",
                cron(json!({}), json!({"lastScheduleTime": ago(600), "lastSuccessfulTime": ago(540)})),
                Healthy,
                "",
            ),
            (
                "cron running",
                cron(
                    json!({}),
                    json!({"lastScheduleTime": ago(60), "lastSuccessfulTime": ago(3600), "active": [{"name": "nightly-1"}]}),
                ),
                Healthy,
                "",
            ),
            (
                "cron last run failed",
                cron(
                    json!({}),
                    json!({"lastScheduleTime": "2025-02-01T11:00:00Z", "lastSuccessfulTime": "2025-01-31T11:00:30Z"}),
                ),
                Degraded,
                "last run, scheduled at 2025-02-01T11:00:00Z, did not succeed",
            ),
        ];
        for (what, obj, status, message) in &cases {
            let h = assess_at(obj, &[]);
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "{what}");
        }
        // a job pod whose image never pulls fails the job's health past the deadline
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "migrate-x1", "creationTimestamp": ago(900)},
            "status": {"phase": "Pending", "startTime": ago(900),
                "containerStatuses": [{"name": "m", "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}});
        let running = job(json!({}), json!({"startTime": ago(900), "active": 1}));
        let h = assess_at(&running, &[&pod]);
        assert_eq!((h.status, h.message.as_str()), (Degraded, "pod migrate-x1 ImagePullBackOff for 15m"));
    }
}
