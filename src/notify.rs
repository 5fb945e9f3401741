//! A generic outgoing webhook (`plumb serve --notify-url`, Slack-compatible JSON
//! `{"text": "…"}`) for what needs a person: a sync that failed, a sync refused (a
//! prune waiting for approval, a guard), an application whose health became Degraded.
//! [`messages`] decides (pure); [`Outgoing`] posts, best effort (a failure is logged).

use std::{collections::HashMap, sync::Mutex, time::Duration};

use bytes::Bytes;

use crate::{
    forge::HttpClient,
    health::HealthStatus,
    status::{AppStatus, SyncRecord, SyncResult},
};

/// The messages a pass calls for, given the health the previous pass saw (`None`
/// for the first pass of this process).
pub fn messages(last_health: Option<HealthStatus>, st: &AppStatus, sync: Option<&SyncRecord>) -> Vec<String> {
    let short: String = st.revision.chars().take(7).collect();
    let mut out = Vec::new();
    if let Some(s) = sync {
        match s.result {
            SyncResult::Failed => {
                out.push(format!("plumb: sync of {} ({}) at {short} failed: {}", st.app, st.environment, s.message));
            }
            SyncResult::Refused => {
                out.push(format!("plumb: sync of {} ({}) at {short} refused: {}", st.app, st.environment, s.message));
            }
            SyncResult::Succeeded | SyncResult::Running => {}
        }
    }
    if st.health == HealthStatus::Degraded && last_health != Some(HealthStatus::Degraded) {
        let why: Vec<String> = st
            .resources
            .iter()
            .filter(|r| r.health == HealthStatus::Degraded)
            .map(|r| format!("{}: {}", r.object, r.health_message))
            .collect();
        out.push(format!("plumb: {} ({}) at {short} is Degraded: {}", st.app, st.environment, why.join("; ")));
    }
    out
}

/// Posts [`messages`] to one URL.
pub struct Outgoing {
    url: String,
    client: HttpClient,
    last_health: Mutex<HashMap<String, HealthStatus>>,
}

impl Outgoing {
    /// A notifier posting to `url` (http or https).
    ///
    /// # Errors
    /// The HTTP client cannot be built (no TLS roots).
    pub fn new(url: &str) -> Result<Self, crate::forge::HttpError> {
        Ok(Self { url: url.into(), client: HttpClient::new()?, last_health: Mutex::default() })
    }

    /// Posts what the pass that produced `st` and `sync` calls for (5 s timeout each).
    pub async fn after_pass(&self, st: &AppStatus, sync: Option<&SyncRecord>) {
        let last = self.last_health.lock().ok().and_then(|mut m| m.insert(st.app.clone(), st.health));
        for text in messages(last, st, sync) {
            let body = serde_json::json!({ "text": text }).to_string();
            let req = http::Request::post(&self.url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Bytes::from(body));
            let Ok(req) = req else {
                tracing::warn!("notify URL is not a valid URI");
                return;
            };
            match self.client.send(req, Duration::from_secs(5)).await {
                Ok((code, _)) if code.is_success() => {}
                Ok((code, _)) => tracing::warn!(app = %st.app, "notify webhook answered {code}"),
                Err(e) => tracing::warn!(app = %st.app, "notify webhook: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(health: HealthStatus) -> AppStatus {
        AppStatus {
            app: "web".into(),
            environment: "prod".into(),
            revision: "abcdef123".into(),
            health,
            ..Default::default()
        }
    }

    fn record(result: SyncResult) -> SyncRecord {
        SyncRecord {
            subject: "s".into(),
            result,
            message: "why".into(),
            ..SyncRecord::new("abcdef123", crate::status::SyncReason::NewRevision)
        }
    }

    #[test]
    fn failures_refusals_and_new_degradation_are_told_once() {
        let st = status(HealthStatus::Healthy);
        assert_eq!(
            messages(None, &st, Some(&record(SyncResult::Failed))),
            ["plumb: sync of web (prod) at abcdef1 failed: why"]
        );
        assert_eq!(
            messages(None, &st, Some(&record(SyncResult::Refused))),
            ["plumb: sync of web (prod) at abcdef1 refused: why"]
        );
        assert!(messages(None, &st, Some(&record(SyncResult::Succeeded))).is_empty());
        let degraded = status(HealthStatus::Degraded);
        assert_eq!(messages(Some(HealthStatus::Healthy), &degraded, None).len(), 1);
        assert!(
            messages(Some(HealthStatus::Degraded), &degraded, None).is_empty(),
            "told when it became Degraded only"
        );
    }
}
