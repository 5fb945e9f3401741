//! Prometheus metrics (text exposition at `GET /metrics`).
//!
//! Label values are bounded: application names from the policy, fixed result words.
//! Durations are in seconds.

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// Labels of a pass.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassLabels {
    /// Application.
    pub app: String,
    /// `compared` (no sync), `applied`, `running` (a later wave waits), `failed`, `refused`, `error`.
    pub result: String,
}

/// Labels of an application status gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    /// Application.
    pub app: String,
    /// The status word (`Synced`, `Healthy`, …).
    pub status: String,
}

/// Labels of a render.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RenderLabels {
    /// Application.
    pub app: String,
    /// `plain`, `kustomize` or `helm`.
    pub tool: String,
}

/// Labels of a webhook delivery. Every value comes from a fixed set, whatever the
/// sender writes in its headers, so a sender cannot grow the metric without bound.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeliveryLabels {
    /// Provider (`gitea`, `github`, … or `unknown`).
    pub provider: String,
    /// Event header value when it is one of [`KNOWN_EVENTS`], `other` for any other
    /// value, `none` when absent.
    pub event: String,
    /// Outcome: `reconcile` (queued), `preview` (a pull request queued for a preview), `ignore`, `reject`, `duplicate` (a delivery already
    /// queued within the dedupe window) or `overloaded` (queue full, 503).
    pub action: String,
    /// HTTP status answered.
    pub code: u16,
}

/// Event header values counted under their own name (push, ping, ref creation and
/// deletion of every supported forge); any other value is counted as `other`.
pub const KNOWN_EVENTS: &[&str] = &[
    "push",
    "ping",
    "create",
    "delete",
    "Push Hook",
    "Tag Push Hook",
    "System Hook",
    "repo:push",
    "repo:refs_changed",
    "diagnostics:ping",
    "pull_request",
    "Merge Request Hook",
];

/// The bounded `event` label of an event header value (see [`DeliveryLabels::event`]).
pub fn event_label(event: Option<&str>) -> &'static str {
    match event {
        None => "none",
        Some(e) => KNOWN_EVENTS.iter().find(|k| **k == e).copied().unwrap_or("other"),
    }
}

/// All metric families of one plumb process.
pub struct Metrics {
    registry: Registry,
    /// Passes by application and result.
    pub passes: Family<PassLabels, Counter>,
    /// Pass duration in seconds, by application.
    pub pass_seconds: Family<StatusLabels, Histogram>,
    /// 1 for the current sync status of each application, 0 for the others.
    pub sync_status: Family<StatusLabels, Gauge>,
    /// 1 for the current health status of each application, 0 for the others.
    pub health_status: Family<StatusLabels, Gauge>,
    /// Webhook deliveries by provider, event, outcome and HTTP status.
    pub deliveries: Family<DeliveryLabels, Counter>,
    /// Seconds a render took (tool runs included), by application and tool; observed
    /// only when a pass really rendered (a cached render costs nothing).
    pub render_seconds: Family<RenderLabels, Histogram>,
    /// Seconds from reading a webhook delivery that queued a pass to the start of that
    /// pass (queue, dispatcher and the wait for a running pass to finish).
    pub webhook_to_pass_seconds: Histogram,
    /// Policy reloads by `result`: `applied` or `rejected`.
    pub policy_reloads: Family<Vec<(String, String)>, Counter>,
    /// 1 while the policy file on disk was rejected (the previous one is in force).
    pub policy_rejected: Gauge,
    /// Applications each applicationSet generates, by `set` (see [`crate::generators`]).
    pub application_set_applications: Family<Vec<(String, String)>, Gauge>,
    /// 1 while an applicationSet with a `directories` generator runs other applications
    /// than its repository says now (emptied, listing failed, new ones rejected), by `set`.
    pub application_set_held: Family<Vec<(String, String)>, Gauge>,
    /// 1 per application, labelled with what it runs: see [`AppInfoLabels`].
    pub app_info: Family<AppInfoLabels, Gauge>,
    /// Unix time in seconds of the last sync of each application, by result
    /// (`Succeeded`, `Failed`, `Refused`, `Running`).
    pub last_sync_timestamp: Family<PassLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// Requests to the Kubernetes API by verb and HTTP status (`error` when none came).
    pub kube_requests: Family<KubeRequestLabels, Counter>,
    /// Seconds to bring a revision of a repository into its mirror (ls-remote, and the
    /// download when the commit is new), by repository name.
    pub git_fetch_seconds: Family<RepositoryLabels, Histogram>,
    /// Unix time in seconds until which each application's automated sync is paused
    /// (`plumb suspend`); 0 when not paused.
    pub suspended_until: Family<AppLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    app_info_current: std::sync::Mutex<std::collections::HashMap<String, AppInfoLabels>>,
    /// Signature checks of revisions (`verifyCommits`), each revision once, by
    /// application and result: `verified` or the reason it is not
    /// ([`crate::verify::Unverified::reason`]).
    pub verifications: Family<VerificationLabels, Counter>,
    /// Pull request previews by `result`: `posted` (comment and status on the forge),
    /// `logged` (no `commitStatus` token: only logged), `failed` (the forge refused or
    /// could not be reached), `skipped` (no application may be previewed: previews off,
    /// a fork's pull request).
    pub previews: Family<Vec<(String, String)>, Counter>,
    /// Seconds from reading a pull request delivery to its preview posted (queue,
    /// fetch, render, compare, forge calls).
    pub preview_seconds: Histogram,
    /// Notifications by `provider`, `trigger` and `result`: `sent`, `failed` (after its
    /// retries) or `dropped` (the provider's queue was full) (see [`crate::notify`]).
    pub notifications: Family<Vec<(String, String)>, Counter>,
}

/// Labels of `plumb_revision_verifications_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerificationLabels {
    /// Application.
    pub app: String,
    /// `verified`, `unsigned`, `unknown-key`, `bad-signature`, … .
    pub result: String,
}

/// Labels of a repository's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepositoryLabels {
    /// Repository name in the policy.
    pub repository: String,
}

/// Labels of an application's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppLabels {
    /// Application.
    pub app: String,
}

/// Labels of `plumb_kube_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeRequestLabels {
    /// `get` (lists included), `watch`, `create`, `update`, `patch`, `delete`.
    pub verb: String,
    /// HTTP status code, or `error` when the request got no answer.
    pub code: String,
}

/// Labels of `plumb_app_info`: one series per application, its value 1; the labels
/// change when the application's revision or statuses do.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppInfoLabels {
    /// Application.
    pub app: String,
    /// Environment.
    pub environment: String,
    /// Repository name in the policy.
    pub repository: String,
    /// Commit SHA last compared.
    pub revision: String,
    /// `Synced`, `OutOfSync`, `Unknown`.
    pub sync_status: String,
    /// `Healthy`, `Progressing`, `Degraded`, `Suspended`, `Missing`, `Unknown`.
    pub health_status: String,
}

/// A gauge per applicationSet (label `set`).
type SetGauges = Family<Vec<(String, String)>, Gauge>;

/// `plumb_application_set_applications{set}` and `plumb_application_set_held{set}`,
/// registered.
fn application_set_metrics(registry: &mut Registry) -> (SetGauges, SetGauges) {
    let applications = Family::<Vec<(String, String)>, Gauge>::default();
    registry.register(
        "application_set_applications",
        "Applications each applicationSet generates, by set",
        applications.clone(),
    );
    let held = Family::<Vec<(String, String)>, Gauge>::default();
    registry.register(
        "application_set_held",
        "1 while an applicationSet keeps previous applications instead of what its repository says now, by set",
        held.clone(),
    );
    (applications, held)
}

/// `plumb_previews_total{result}` and `plumb_preview_duration_seconds`, registered.
fn preview_metrics(registry: &mut Registry) -> (Family<Vec<(String, String)>, Counter>, Histogram) {
    let previews = Family::<Vec<(String, String)>, Counter>::default();
    registry.register("previews", "Pull request previews by result", previews.clone());
    let seconds = Histogram::new([0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0]);
    registry.register(
        "preview_duration_seconds",
        "Seconds from reading a pull request delivery to its preview posted",
        seconds.clone(),
    );
    (previews, seconds)
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("plumb");
        let passes = Family::<PassLabels, Counter>::default();
        let pass_seconds = Family::<StatusLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0])
        });
        let sync_status = Family::<StatusLabels, Gauge>::default();
        let health_status = Family::<StatusLabels, Gauge>::default();
        let deliveries = Family::<DeliveryLabels, Counter>::default();
        let render_seconds = Family::<RenderLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0])
        });
        let webhook_to_pass_seconds =
            Histogram::new([0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0]);
        registry.register("passes", "Reconcile passes by application and result", passes.clone());
        registry.register("pass_duration_seconds", "Duration of a reconcile pass in seconds", pass_seconds.clone());
        registry.register("sync_status", "Sync status per application (1 = current)", sync_status.clone());
        registry.register("health_status", "Health status per application (1 = current)", health_status.clone());
        registry.register(
            "webhook_deliveries",
            "Webhook deliveries by provider, event, outcome and HTTP status",
            deliveries.clone(),
        );
        registry.register(
            "render_duration_seconds",
            "Duration of a render (not a cached one) in seconds, by application and tool",
            render_seconds.clone(),
        );
        let git_fetch_seconds = Family::<RepositoryLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0])
        });
        registry.register(
            "git_fetch_duration_seconds",
            "Seconds to resolve a revision and bring its commit into the mirror, by repository",
            git_fetch_seconds.clone(),
        );
        let suspended_until = Family::<AppLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "app_suspended_until_timestamp_seconds",
            "Unix time in seconds until which automated sync of each application is paused (0: not paused)",
            suspended_until.clone(),
        );
        registry.register(
            "webhook_to_pass_seconds",
            "Seconds from receiving a webhook delivery to the start of the pass it queued",
            webhook_to_pass_seconds.clone(),
        );
        let policy_reloads = Family::<Vec<(String, String)>, Counter>::default();
        let policy_rejected = Gauge::default();
        let (application_set_applications, application_set_held) = application_set_metrics(&mut registry);
        let app_info = Family::<AppInfoLabels, Gauge>::default();
        let last_sync_timestamp = Family::<PassLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "policy_reloads",
            "Policy file reloads by result (applied, rejected)",
            policy_reloads.clone(),
        );
        registry.register(
            "policy_rejected",
            "1 while the policy file on disk is rejected and the previous one stays in force",
            policy_rejected.clone(),
        );
        registry.register(
            "app_info",
            "Each application: environment, repository, revision and statuses",
            app_info.clone(),
        );
        registry.register(
            "app_last_sync_timestamp_seconds",
            "Unix time in seconds of the last sync of each application, by result",
            last_sync_timestamp.clone(),
        );
        let kube_requests = Family::<KubeRequestLabels, Counter>::default();
        registry.register(
            "kube_requests",
            "Requests to the Kubernetes API by verb and HTTP status",
            kube_requests.clone(),
        );
        let build_info = Family::<Vec<(String, String)>, Gauge>::default();
        build_info.get_or_create(&vec![("version".to_string(), env!("CARGO_PKG_VERSION").to_string())]).set(1);
        registry.register("build_info", "The running plumb's version (value 1)", build_info);
        let verifications = Family::<VerificationLabels, Counter>::default();
        registry.register(
            "revision_verifications",
            "Signature checks of revisions (verifyCommits), each revision once, by application and result",
            verifications.clone(),
        );
        let (previews, preview_seconds) = preview_metrics(&mut registry);
        let notifications = Family::<Vec<(String, String)>, Counter>::default();
        registry.register("notifications", "Notifications by provider, trigger and result", notifications.clone());
        Self {
            notifications,
            previews,
            preview_seconds,
            verifications,
            registry,
            passes,
            pass_seconds,
            sync_status,
            health_status,
            deliveries,
            render_seconds,
            webhook_to_pass_seconds,
            policy_reloads,
            policy_rejected,
            application_set_applications,
            application_set_held,
            app_info,
            last_sync_timestamp,
            kube_requests,
            git_fetch_seconds,
            suspended_until,
            app_info_current: std::sync::Mutex::default(),
        }
    }
}

impl Metrics {
    /// Counts one notification to `provider` of `trigger` as `result` (`sent`,
    /// `failed`, `dropped`, `fenced`): `plumb_notifications_total`.
    pub fn count_notification(&self, provider: &str, trigger: &str, result: &str) {
        let labels = [("provider", provider), ("trigger", trigger), ("result", result)];
        self.notifications.get_or_create(&labels.map(|(k, v)| (k.to_string(), v.to_string())).to_vec()).inc();
    }

    /// Counts the signature check of a new revision of `app` with `result` (`verified`
    /// or the reason it is not).
    pub fn count_verification(&self, app: &str, result: &str) {
        self.verifications.get_or_create(&VerificationLabels { app: app.into(), result: result.into() }).inc();
    }

    /// Text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Sets `plumb_app_info` of `labels.app` to `labels` (the previous series of that
    /// application is removed).
    pub fn set_app_info(&self, labels: AppInfoLabels) {
        let Ok(mut current) = self.app_info_current.lock() else { return };
        if let Some(old) = current.get(&labels.app) {
            if *old == labels {
                return;
            }
            self.app_info.remove(old);
        }
        self.app_info.get_or_create(&labels).set(1);
        current.insert(labels.app.clone(), labels);
    }

    /// Sets the one-hot sync and health gauges of `app`.
    pub fn set_status(&self, app: &str, sync: crate::compare::SyncStatus, health: crate::health::HealthStatus) {
        use crate::{compare::SyncStatus as S, health::HealthStatus as H};
        for s in [S::Synced, S::OutOfSync, S::Unknown] {
            self.sync_status
                .get_or_create(&StatusLabels { app: app.into(), status: s.to_string() })
                .set(i64::from(s == sync));
        }
        for h in [H::Healthy, H::Suspended, H::Progressing, H::Missing, H::Degraded, H::Unknown] {
            self.health_status
                .get_or_create(&StatusLabels { app: app.into(), status: h.to_string() })
                .set(i64::from(h == health));
        }
    }
}
