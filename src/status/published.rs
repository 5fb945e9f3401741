//! The statuses the passes of this process published: the one view of "the latest
//! status of each application" that the status API, the page and the demo read. The
//! record stage of a pass writes it ([`Published::publish`]), and the decommission of
//! an application that left the policy (its progress, then [`Published::forget`]);
//! readers get shared copies and never wait on a pass.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use super::{AppStatus, PassTimings};

/// The latest published status (and stage timings) of each application, by name.
/// Cheap to clone: clones share one view. Lock poisoning only hides what was published
/// (readers see nothing new), never a half-written status: an entry is replaced whole.
#[derive(Clone, Default)]
pub struct Published {
    apps: Arc<RwLock<BTreeMap<String, Entry>>>,
}

#[derive(Default)]
struct Entry {
    status: Option<Arc<AppStatus>>,
    timings: Option<PassTimings>,
}

impl Published {
    /// Publishes `status` as its application's latest (replacing the one before).
    pub fn publish(&self, status: Arc<AppStatus>) {
        if let Ok(mut apps) = self.apps.write() {
            let app = status.app.clone();
            apps.entry(app).or_default().status = Some(status);
        }
    }

    /// Forgets application `app` (its decommission ended: it has no status any more).
    pub fn forget(&self, app: &str) {
        if let Ok(mut apps) = self.apps.write() {
            apps.remove(app);
        }
    }

    /// Keeps the applications for which `keep` is true, forgets the others (a shard
    /// this replica no longer holds: another replica publishes its statuses, and a
    /// dependency's status is then read from its resource, not from a frozen copy).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut apps) = self.apps.write() {
            apps.retain(|app, _| keep(app));
        }
    }

    /// Publishes the stage timings of application `app`'s last pass.
    pub fn publish_timings(&self, app: &str, timings: PassTimings) {
        if let Ok(mut apps) = self.apps.write() {
            apps.entry(app.to_string()).or_default().timings = Some(timings);
        }
    }

    /// Every published status, by application name.
    pub fn statuses(&self) -> Vec<AppStatus> {
        let Ok(apps) = self.apps.read() else { return vec![] };
        apps.values().filter_map(|e| e.status.as_deref().cloned()).collect()
    }

    /// The published status of application `app`.
    pub fn status(&self, app: &str) -> Option<Arc<AppStatus>> {
        self.apps.read().ok()?.get(app)?.status.clone()
    }

    /// The stage timings of application `app`'s last published pass.
    pub fn timings(&self, app: &str) -> Option<PassTimings> {
        self.apps.read().ok()?.get(app)?.timings.clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn status(app: &str, revision: &str) -> Arc<AppStatus> {
        Arc::new(AppStatus { app: app.into(), revision: revision.into(), ..AppStatus::default() })
    }

    #[test]
    fn readers_see_the_latest_status_of_each_application_by_name() {
        let view = Published::default();
        let reader = view.clone();
        assert!(reader.statuses().is_empty() && reader.status("web").is_none());
        view.publish(status("web", "a"));
        view.publish(status("api", "b"));
        view.publish(status("web", "c"));
        view.publish_timings("web", PassTimings { total_millis: 7, ..PassTimings::default() });
        let seen: Vec<(String, String)> = reader.statuses().into_iter().map(|s| (s.app, s.revision)).collect();
        assert_eq!(seen, [("api".to_string(), "b".to_string()), ("web".to_string(), "c".to_string())]);
        assert_eq!(reader.timings("web").map(|t| t.total_millis), Some(7));
        assert_eq!(reader.timings("api"), None);
    }

    #[test]
    fn the_applications_of_a_shard_let_go_are_forgotten() {
        let view = Published::default();
        view.publish(status("web", "a"));
        view.publish(status("api", "b"));
        view.publish_timings("api", PassTimings::default());
        view.retain(|app| app == "web");
        assert!(view.status("api").is_none() && view.timings("api").is_none(), "another replica runs it now");
        assert_eq!(view.status("web").map(|s| s.revision.clone()), Some("a".into()));
    }

    #[test]
    fn timings_alone_publish_no_status() {
        let view = Published::default();
        view.publish_timings("web", PassTimings::default());
        assert!(view.statuses().is_empty() && view.status("web").is_none());
    }
}
