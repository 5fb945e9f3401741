//! Notifications: what happened to an application, told to people through the
//! providers and routes of the policy's `notifications:` ([`crate::config::notifications`])
//! and the `--notify-url` of `plumb serve` (a Slack-compatible provider for
//! `sync-failed`, `prune-waiting-approval` and `health-degraded`, [`with_notify_url`]).
//!
//! After each pass, [`decide::events`] (pure) finds the triggers the pass calls for,
//! each once per (application, revision, trigger); [`route`] (pure) picks the providers
//! and templates of each; [`body`] (pure) renders what each provider is sent, every
//! field from Git or the cluster escaped for its target; `send` (IO) queues it to the
//! provider's worker, which posts off the pass with a timeout and a backoff.
//!
//! Trust: addresses and keys come only from the policy and its secrets, never from Git;
//! a Git author can change only the text of a message, which is escaped and bounded
//! ([`body::MAX_TEXT_CHARS`]).

pub mod body;
pub mod decide;
mod send;

use std::sync::{Arc, Mutex};

use serde_saphyr::Location;

pub use decide::{Event, Memory};

use crate::{
    config::{NotificationProvider, Notifications, ProviderType, Route, Trigger},
    status::{AppStatus, SyncRecord},
};

/// The name of the provider `--notify-url` adds (not a DNS label: no policy provider can
/// take it).
pub const NOTIFY_URL_PROVIDER: &str = "--notify-url";

/// `n` with a Slack provider posting to `url` (`plumb serve --notify-url`) and a route
/// of `sync-failed` (failed and refused syncs), `prune-waiting-approval` and
/// `health-degraded` of every application to it: what `--notify-url` always told.
pub fn with_notify_url(n: &mut Notifications, url: &str) {
    let spanned = |s: &str| serde_saphyr::Spanned::new(s.to_string(), Location::UNKNOWN, Location::UNKNOWN);
    n.providers.push(NotificationProvider::at(spanned(NOTIFY_URL_PROVIDER), ProviderType::Slack, spanned(url)));
    n.routes.push(Route {
        triggers: vec![Trigger::SyncFailed, Trigger::PruneWaitingApproval, Trigger::HealthDegraded],
        environments: Vec::new(),
        applications: Vec::new(),
        providers: vec![spanned(NOTIFY_URL_PROVIDER)],
        template: None,
    });
}

/// The providers event `e` goes to, each once (the first route naming it gives the
/// template; `None`: the trigger's own, [`body::default_template`]). A route matches
/// when its triggers, environments and applications each list the event's (an empty
/// list matches all).
pub fn route<'a>(n: &'a Notifications, e: &Event) -> Vec<(&'a str, Option<&'a str>)> {
    let mut out: Vec<(&str, Option<&str>)> = Vec::new();
    for r in &n.routes {
        let listed = |list: &[String], v: &str| list.is_empty() || list.iter().any(|x| x == v);
        let matches = (r.triggers.is_empty() || r.triggers.contains(&e.trigger))
            && listed(&r.environments, &e.environment)
            && listed(&r.applications, &e.app);
        if !matches {
            continue;
        }
        for p in &r.providers {
            if !out.iter().any(|(name, _)| *name == p.value) {
                out.push((p.value.as_str(), r.template.as_ref().map(|t| t.value.as_str())));
            }
        }
    }
    out
}

/// The notifications of one running policy: its routes, a worker per provider, and
/// what was told (shared across policy reloads).
pub struct Notifier {
    notifications: Notifications,
    outlets: std::collections::HashMap<String, send::Outlet>,
    memory: Arc<Mutex<Memory>>,
}

impl Notifier {
    /// Opens the providers of `notifications` and starts their workers (on the current
    /// tokio runtime; counted in `metrics`, `plumb_notifications_total`); `None` when no
    /// route is configured. A provider that cannot be
    /// opened (its files unreadable, a bad address) is left out and logged.
    pub fn start(
        notifications: &Notifications,
        memory: Arc<Mutex<Memory>>,
        metrics: &Arc<crate::metrics::Metrics>,
    ) -> Option<Self> {
        if notifications.routes.is_empty() {
            return None;
        }
        let outlets = send::open_all(&notifications.providers, metrics, &memory);
        Some(Self { notifications: notifications.clone(), outlets, memory })
    }

    /// Queues what the pass that produced `st` (and made `sync`) calls for; returns at
    /// once (the workers send). Nothing when the replica's fence is closed
    /// ([`crate::fence::check`]: another replica runs the application now); a queued
    /// message carries the pass's fence, and its worker drops it if that closes first.
    pub fn after_pass(&self, st: &AppStatus, sync: Option<&SyncRecord>) {
        if let Err(e) = crate::fence::check(|| format!("notification about {}", st.app)) {
            return tracing::warn!("{e}");
        }
        let now = jiff::Timestamp::now();
        let seconds = u64::try_from(now.as_second()).unwrap_or(0);
        let events = match self.memory.lock() {
            Ok(mut memory) => decide::events(&mut memory, st, sync, seconds),
            Err(_) => return,
        };
        let fence = crate::fence::current();
        for e in &events {
            let routes: Vec<(&str, &send::Outlet, Option<&str>)> = route(&self.notifications, e)
                .into_iter()
                .filter_map(|(name, template)| Some((name, self.outlets.get(name)?, template)))
                .collect();
            // the copies of one message, one per provider: forgotten as told only when
            // none was sent and one was dropped for its fence
            let copies = Arc::new(send::Copies::new(routes.len()));
            for (name, outlet, template) in routes {
                let template = template.unwrap_or_else(|| body::default_template(e.trigger));
                let payload = payload(outlet, e, template, now);
                let (app, revision, copies, fence) = (e.app.clone(), e.revision.clone(), copies.clone(), fence.clone());
                outlet.offer(name, send::Delivery { app, revision, trigger: e.trigger, payload, fence, copies });
            }
        }
    }
}

/// What `outlet` is sent for `e`.
fn payload(outlet: &send::Outlet, e: &Event, template: &str, now: jiff::Timestamp) -> send::Payload {
    let text = body::fill(template, e, body::escaper(outlet.kind));
    let event = ("X-Plumb-Event", e.trigger.as_str().to_string());
    let (bytes, headers) = match outlet.kind {
        ProviderType::Smtp => return send::Payload::Mail(body::mail(e, template)),
        ProviderType::Slack => (body::slack(&text), vec![]),
        ProviderType::Teams => (body::teams(e, &text), vec![]),
        ProviderType::Webhook => {
            let b = body::webhook(e, &text, now);
            let sig = body::signature(outlet.key.as_deref().unwrap_or_default(), &b);
            (b, vec![(body::SIGNATURE_HEADER, sig), event])
        }
    };
    send::Payload::Http { body: bytes.into(), headers }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spanned(s: &str) -> serde_saphyr::Spanned<String> {
        serde_saphyr::Spanned::new(s.to_string(), Location::UNKNOWN, Location::UNKNOWN)
    }

    fn event(trigger: Trigger, app: &str, env: &str) -> Event {
        Event {
            trigger,
            app: app.into(),
            environment: env.into(),
            revision: "abc".into(),
            subject: String::new(),
            result: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn routes_match_by_trigger_environment_and_application() {
        let mut n = Notifications::default();
        n.routes.push(Route {
            triggers: vec![Trigger::SyncFailed],
            environments: vec!["prod".into()],
            applications: vec![],
            providers: vec![spanned("chat"), spanned("mail")],
            template: Some(spanned("{app}")),
        });
        n.routes.push(Route {
            triggers: vec![],
            environments: vec![],
            applications: vec!["web".into()],
            providers: vec![spanned("chat"), spanned("hook")],
            template: None,
        });
        let names =
            |e: &Event| route(&n, e).iter().map(|(p, t)| format!("{p}:{}", t.unwrap_or("-"))).collect::<Vec<_>>();
        assert_eq!(names(&event(Trigger::SyncFailed, "web", "prod")), ["chat:{app}", "mail:{app}", "hook:-"]);
        assert_eq!(names(&event(Trigger::SyncFailed, "api", "prod")), ["chat:{app}", "mail:{app}"]);
        assert_eq!(names(&event(Trigger::SyncFailed, "api", "dev")), Vec::<String>::new());
        assert_eq!(names(&event(Trigger::HealthRecovered, "web", "dev")), ["chat:-", "hook:-"]);
    }

    #[test]
    fn notify_url_routes_failures_and_degraded_health_to_slack() {
        let mut n = Notifications::default();
        with_notify_url(&mut n, "http://127.0.0.1:9/hook");
        assert_eq!(route(&n, &event(Trigger::SyncFailed, "a", "e")).len(), 1);
        assert_eq!(route(&n, &event(Trigger::HealthDegraded, "a", "e")).len(), 1);
        assert_eq!(route(&n, &event(Trigger::PruneWaitingApproval, "a", "e")).len(), 1);
        assert!(route(&n, &event(Trigger::SyncSucceeded, "a", "e")).is_empty());
        // valid but for its name, which no policy provider can take
        let problems = n.problems(false);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].1.contains("DNS-1123"), "{problems:?}");
    }
}
