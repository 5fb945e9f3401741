//! When passes run: one actor per application.
//!
//! Each actor runs a pass at start, then waits for a trigger (webhook, manual) or for
//! its reconcile interval (plus up to 10 % random jitter, so that applications spread
//! out) and runs the next. Triggers coalesce: at most one pass runs and one waits per
//! application, so a burst of webhooks during a pass leads to exactly one more pass.

use std::{collections::HashMap, sync::Arc, time::Duration};

use rand::Rng;
use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::reconcile::{Context, Mode};

/// Why a pass was requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A verified push webhook named this application.
    Webhook,
    /// Someone asked (API).
    Manual,
}

/// How soon a pass follows one that synced or found the application Progressing.
pub const SETTLE_INTERVAL: Duration = Duration::from_secs(5);

/// Handles to the per-application actors.
#[derive(Clone, Default)]
pub struct Scheduler {
    senders: Arc<HashMap<String, mpsc::Sender<Trigger>>>,
}

impl Scheduler {
    /// Starts one actor per application of `ctx.config`, on `tracker`, until `token` is
    /// cancelled.
    pub fn start(ctx: Arc<Context>, tracker: &TaskTracker, token: CancellationToken) -> Self {
        let mut senders = HashMap::new();
        for app in &ctx.config.applications {
            let interval = ctx
                .config
                .environments
                .iter()
                .find(|e| e.name.value == app.environment.value)
                .map_or(crate::config::DEFAULT_RECONCILE_INTERVAL, crate::config::Environment::interval);
            let (tx, rx) = mpsc::channel(1);
            senders.insert(app.name.value.clone(), tx);
            tracker.spawn(actor(ctx.clone(), app.name.value.clone(), interval, rx, token.clone()));
        }
        Self { senders: Arc::new(senders) }
    }

    /// Asks for a pass of `app`. Returns false when no such application exists. When a
    /// pass is already waiting, the request is merged into it.
    pub fn trigger(&self, app: &str, why: Trigger) -> bool {
        match self.senders.get(app) {
            Some(tx) => {
                // Full means a pass is already queued: that pass will see this change too.
                let _ = tx.try_send(why);
                true
            }
            None => false,
        }
    }
}

/// The wait before the next poll: `interval` plus up to 10 % jitter.
pub fn jittered(interval: Duration) -> Duration {
    let max = interval.as_millis() as u64 / 10;
    interval + Duration::from_millis(if max == 0 { 0 } else { rand::rng().random_range(0..=max) })
}

async fn actor(
    ctx: Arc<Context>,
    app: String,
    interval: Duration,
    mut rx: mpsc::Receiver<Trigger>,
    token: CancellationToken,
) {
    let mut why = "start".to_string();
    loop {
        // While something is on its way (just applied, or still Progressing), look again
        // soon so that sync and health are reported as they settle.
        let wait = match ctx.run_pass(&app, Mode::Policy, None).await {
            Ok(r) => {
                tracing::debug!(app = %app, trigger = %why, sync = %r.status.sync, health = %r.status.health, "pass done");
                if r.sync.is_some() || r.status.health == crate::health::HealthStatus::Progressing {
                    interval.min(SETTLE_INTERVAL)
                } else {
                    jittered(interval)
                }
            }
            Err(e) => {
                tracing::warn!(app = %app, "pass failed: {e}");
                jittered(interval)
            }
        };
        tokio::select! {
            () = token.cancelled() => return,
            t = rx.recv() => match t {
                Some(t) => why = format!("{t:?}"),
                None => return,
            },
            () = tokio::time::sleep(wait) => why = "poll".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_bounded() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(180));
            assert!(d >= Duration::from_secs(180) && d <= Duration::from_secs(198), "{d:?}");
        }
        assert_eq!(jittered(Duration::from_millis(5)), Duration::from_millis(5));
    }
}
