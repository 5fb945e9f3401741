//! The HTTP server: webhook receiver, status API, metrics and probes (axum on hyper).
//!
//! | route | answer |
//! |---|---|
//! | `POST /api/webhook` | 202 a pass was queued, 200 authenticated but nothing to do, 400 malformed, 401 bad or missing signature, 413 body too large, 415 content type |
//! | `GET /api/v1/applications` | JSON array of application statuses |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /healthz`, `GET /readyz` | `ok` |
//!
//! The webhook body is read as raw bytes (the signature covers exactly those bytes)
//! and is only a trigger: the pass fetches the ref itself and never uses the payload's
//! SHA or content.

use std::sync::Arc;

use axum::{
    Json, Router,
    body::Bytes,
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::{get, post},
};

use crate::{
    config::{Config, read_secret},
    metrics::DeliveryLabels,
    reconcile::Context,
    scheduler::{Scheduler, Trigger},
    webhook::{Receiver, RepoKey, Secret, Watch, WatchedRepository},
};

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct AppState {
    /// Reconcile context (statuses, metrics).
    pub ctx: Arc<Context>,
    /// Triggers passes.
    pub scheduler: Scheduler,
    /// Webhook decisions.
    pub receiver: Arc<Receiver>,
}

/// Builds the webhook receiver of a policy: each repository's normalized URL and
/// secret, and one watch per application (its repository and revision).
///
/// # Errors
/// A message naming the repository whose URL cannot be normalized or whose secret
/// file cannot be read.
pub fn receiver(config: &Config) -> Result<Receiver, String> {
    let mut repositories = Vec::new();
    for r in &config.repositories {
        let key = RepoKey::from_url(&r.url.value)
            .ok_or_else(|| format!("repository `{}`: cannot normalize url {}", r.name.value, r.url.value))?;
        let secret = match &r.webhook_secret_file {
            Some(f) => Some(Secret::new(read_secret(&f.value).map_err(|e| {
                format!("repository `{}`: webhookSecretFile {}: {e}", r.name.value, f.value.display())
            })?)),
            None => None,
        };
        repositories.push(WatchedRepository { key, secret, allow_sha1: false });
    }
    let watches = config
        .applications
        .iter()
        .filter_map(|a| {
            let repo = config.repositories.iter().find(|r| r.name.value == a.repository.value)?;
            Some(Watch {
                app: a.name.value.clone(),
                repo: RepoKey::from_url(&repo.url.value)?,
                revision: a.revision.value.clone(),
            })
        })
        .collect();
    Ok(Receiver { repositories, watches, max_body_bytes: config.settings.webhook_max_body_bytes })
}

/// The router.
pub fn router(state: AppState) -> Router {
    let limit = state.receiver.max_body_bytes;
    Router::new()
        .route("/api/webhook", post(webhook))
        .route("/api/v1/applications", get(applications))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn webhook(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let decision = state.receiver.decide(&pairs, &body);
    for app in &decision.apps {
        state.scheduler.trigger(app, Trigger::Webhook);
    }
    let provider = decision.provider.map_or_else(
        || "unknown".to_string(),
        |p| serde_json::to_value(p).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
    );
    let action =
        serde_json::to_value(decision.action).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    state
        .ctx
        .metrics
        .deliveries
        .get_or_create(&DeliveryLabels { provider, action: action.clone(), code: decision.http_status })
        .inc();
    tracing::info!(status = decision.http_status, action = %action, apps = ?decision.apps, delivery = ?decision.delivery_id, "webhook: {}", decision.reason);
    let code = StatusCode::from_u16(decision.http_status).unwrap_or(StatusCode::BAD_REQUEST);
    (code, Json(serde_json::json!({"action": action, "reason": decision.reason, "queued": decision.apps.len()})))
}

async fn applications(State(state): State<AppState>) -> impl IntoResponse {
    Json(state.ctx.statuses().await)
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.ctx.metrics.encode())
}
