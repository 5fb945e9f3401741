//! The HTTP servers: webhook receiver, status API, metrics and probes (axum on hyper),
//! on three listeners.
//!
//! | listener | route | answer |
//! |---|---|---|
//! | public (`--listen`, [`router`]) | `POST /api/webhook` | 202 a pass was queued, 200 authenticated but nothing to do (or a duplicate delivery), 400 malformed, 401 bad or missing signature, 408 too slow, 413 body too large, 415 content type, 503 queue full or body memory budget reached |
//! | internal (`--internal-listen`, [`internal_router`]) | `GET /api/v1/applications` | JSON array of application statuses |
//! | internal | `GET /metrics` | Prometheus text format |
//! | internal | `GET /` | the status page: HTML list of applications ([`crate::page`]) |
//! | internal | `GET /applications/{app}` | the status page of one application (404 when it has no status) |
//! | internal | `GET /applications/{app}/syncs/{started}` | one sync of its history: the objects it applied and pruned, its hooks ([`crate::page::sync_record`]) |
//! | internal | `GET /previews/{repository}/{number}` | the last preview of a pull request ([`crate::preview::page`]; 404 when none is kept) |
//!
//! Every request to the internal listener needs a Kubernetes bearer token whose user
//! holds the route's right ([`crate::auth`]): 401 without a valid token, 403 without
//! the right, 503 when the API server cannot be asked, 429 when too many tokens it has
//! not seen lately are reviewed at once. Every free text of a served status is capped
//! ([`crate::status::fit::served`]). The webhook needs no token: its
//! deliveries are authenticated by their signature.
//!
//! The probes, `GET /healthz` and `GET /readyz` (`ok`), are served on their own
//! listener ([`serve_probes`], `--probe-listen`): kubelet's probes never wait for a
//! request slot, a connection slot or the time limits of webhook bodies, so slow
//! uploads to the webhook cannot get plumb restarted.
//!
//! The webhook body is read as raw bytes (the signature covers exactly those bytes)
//! and is only a trigger: the pass fetches the ref itself and never uses the payload's
//! SHA or content.
//!
//! # From a delivery to a pass
//!
//! ```text
//!  HTTP handler ──▶ Receiver::decide ──▶ Dedupe ──▶ bounded queue ──▶ dispatcher ──▶ Scheduler::trigger
//!  (limits,          (pure: verify,        (60 s,      (try_send;       (one task)      (per-app actor,
//!   timeouts)         parse, match)         bounded)    full → 503)                      coalescing)
//! ```
//!
//! The handler never waits on the scheduler: it enqueues with `try_send` and answers.
//!
//! # Limits ([`Limits`])
//!
//! A webhook endpoint is the one door plumb opens to the network, so every resource a
//! client can hold is bounded: the body size (counted while reading, so a chunked body
//! without `Content-Length` is cut at the limit and never buffered whole), the time to
//! send the request head (hyper's `header_read_timeout`, which also closes idle
//! keep-alive connections), the time for the whole request including the body (408),
//! the number of requests being handled at once, the number of open connections, the
//! bytes of bodies all requests hold together before they are verified (503 beyond) and
//! the queue to the scheduler. Each body is MACed frame by frame as it arrives (one
//! HMAC per configured secret, [`Streaming`]), and a body over 64 KiB is decided on a
//! blocking thread.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Body,
    extract::{DefaultBodyLimit, Request, State},
    http::{HeaderMap, StatusCode, header::CONTENT_LENGTH},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use futures::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    net::TcpListener,
    sync::{Semaphore, mpsc},
};
use tokio_util::sync::CancellationToken;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::{
    auth::{self, Reviewer, Right, Verdict},
    config::{Config, Settings, read_secret},
    metrics::{DeliveryLabels, Metrics, event_label},
    status::{Published, store::Store},
    webhook::{
        Action, Decision, Dedupe, DeliveryKeys, Digests, Receiver, RepoKey, Secret, Streaming, Watch, WatchedRepository,
    },
};

/// Resource limits of the HTTP server. Defaults in [`Limits::default`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body in bytes; counted while reading, larger → 413
    /// (`settings.webhookMaxBodyBytes`, default 25 MiB).
    pub max_body_bytes: usize,
    /// Time a client has to send a complete request head, and the longest a keep-alive
    /// connection may sit idle (default 10 s). A slow-loris client is disconnected.
    pub header_read_timeout: Duration,
    /// Time for one whole request once its head is read: waiting for a handler slot,
    /// reading the body, deciding (default 30 s); then 408 and the request is dropped.
    pub request_timeout: Duration,
    /// Requests handled at once; more wait for a slot within `request_timeout`
    /// (default 256).
    pub max_concurrent_requests: usize,
    /// Open connections; further ones wait in the kernel's accept backlog (default 1024).
    pub max_connections: usize,
    /// Deliveries queued between the HTTP handlers and the scheduler; a full queue
    /// answers 503 (default 1024).
    pub queue_capacity: usize,
    /// Bytes of request bodies held at once by all requests together, before they are
    /// verified (default 64 MiB, never less than `max_body_bytes`): a request that would
    /// go over it is answered 503 at once, so slow unverified uploads cannot hold
    /// `max_body_bytes` × `max_concurrent_requests` of memory.
    pub max_buffered_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: crate::webhook::DEFAULT_MAX_BODY_BYTES,
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_concurrent_requests: 256,
            max_connections: 1024,
            queue_capacity: 1024,
            max_buffered_bytes: 64 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// The defaults with the policy's body limit.
    pub fn from_settings(settings: &Settings) -> Self {
        Limits { max_body_bytes: settings.webhook_max_body_bytes, ..Limits::default() }
    }
}

/// Builds the webhook receiver of a policy: each repository's normalized URL and
/// secret, and one watch per application (its repository, revision and, with
/// `webhookPathFilter`, its path).
///
/// A repository whose URL names no host (`file://`, a local path: legitimate for
/// tests and demos, and accepted by every other command) cannot match a push
/// delivery: it is left out of the receiver, and its applications are polled only.
///
/// # Errors
/// A message naming the repository whose secret file cannot be read (never the secret
/// itself).
pub fn receiver(config: &Config) -> Result<Receiver, String> {
    let mut repositories = Vec::new();
    for r in &config.repositories {
        let Some(key) = RepoKey::from_url(&r.url.value) else {
            tracing::info!(
                repository = %r.name.value,
                url = %crate::config::repo_url::redact(&r.url.value),
                "no host in the repository url: webhooks cannot name it; polled only"
            );
            continue;
        };
        let secret = match &r.webhook_secret_file {
            Some(f) => Some(Secret::new(read_secret(&f.value).map_err(|e| {
                format!("repository `{}`: webhookSecretFile {}: {e}", r.name.value, f.value.display())
            })?)),
            None => None,
        };
        repositories.push(WatchedRepository { key, secret, allow_sha1: false, provider: r.webhook_provider() });
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
                path_filter: a.webhook_path_filter.then(|| a.path.value.clone()),
            })
        })
        .collect();
    Ok(Receiver { repositories, watches, max_body_bytes: config.settings.webhook_max_body_bytes })
}

/// One accepted delivery on its way to the scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Applications to trigger.
    pub apps: Vec<String>,
    /// When the server had read the delivery.
    pub received: Instant,
}

/// What the server did with one delivery: the receiver's decision and the answer.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The receiver's decision, unchanged.
    pub decision: Decision,
    /// `reconcile`, `preview`, `ignore`, `reject`, `duplicate` or `overloaded` (the metric's
    /// `action` label).
    pub outcome: &'static str,
    /// HTTP status answered: the decision's, or 200 for a duplicate, 503 for a full queue.
    pub http_status: u16,
    /// Reason sent back; never names a repository or a secret.
    pub reason: String,
}

impl Outcome {
    /// The JSON answer: `{"action", "reason", "queued"}` (`queued`: applications
    /// triggered).
    pub fn body(&self) -> serde_json::Value {
        let queued = if self.outcome == "reconcile" { self.decision.apps.len() } else { 0 };
        serde_json::json!({"action": self.outcome, "reason": self.reason, "queued": queued})
    }
}

/// The webhook intake: decide, drop duplicates, enqueue. Shared by the HTTP handler and
/// `plumb webhook replay`, so both run the same code.
pub struct Intake {
    /// The pure receiver.
    pub receiver: Arc<Receiver>,
    dedupe: Option<Mutex<Dedupe>>,
    queue: mpsc::Sender<Queued>,
    metrics: Arc<Metrics>,
    /// Body bytes held by requests being read (see [`Limits::max_buffered_bytes`]).
    buffered: Arc<Semaphore>,
    /// Where pull request previews go ([`crate::preview::queue`]); none: not served.
    previews: Option<Arc<crate::preview::queue::Queue>>,
}

impl Intake {
    /// An intake with a queue of `queue_capacity` (at least 1) deliveries; `dedupe`
    /// `None` turns duplicate detection off (replay). Returns the queue's receiving end
    /// for [`dispatch`].
    pub fn new(
        receiver: Receiver,
        dedupe: Option<Dedupe>,
        queue_capacity: usize,
        metrics: Arc<Metrics>,
    ) -> (Self, mpsc::Receiver<Queued>) {
        let (queue, rx) = mpsc::channel(queue_capacity.max(1));
        let buffered = Arc::new(Semaphore::new(Limits::default().max_buffered_bytes));
        let intake = Intake {
            receiver: Arc::new(receiver),
            dedupe: dedupe.map(Mutex::new),
            queue,
            metrics,
            buffered,
            previews: None,
        };
        (intake, rx)
    }

    /// This intake, queueing the previews of pull requests on `previews`.
    #[must_use]
    pub fn with_previews(mut self, previews: Arc<crate::preview::queue::Queue>) -> Self {
        self.previews = Some(previews);
        self
    }

    /// This intake, holding at most `bytes` of request bodies at once (at least the
    /// receiver's body limit); see [`Limits::max_buffered_bytes`].
    #[must_use]
    pub fn with_buffered_bytes(mut self, bytes: usize) -> Self {
        let bytes = bytes.max(self.receiver.max_body_bytes).min(Semaphore::MAX_PERMITS);
        self.buffered = Arc::new(Semaphore::new(bytes));
        self
    }

    /// Runs one delivery: [`Receiver::decide`], then for a push to reconcile the dedupe
    /// filter (a duplicate → 200 `duplicate delivery`) and the queue (full → 503). A
    /// delivery is remembered by the dedupe filter only once it is queued, so a retry
    /// after a 503 is not taken for a duplicate. Counts the delivery in
    /// `plumb_webhook_deliveries_total` and logs one line without secrets or payload.
    pub fn handle(&self, headers: &[(String, String)], body: &[u8], received: Instant) -> Outcome {
        self.finish(self.receiver.decide(headers, body), received)
    }

    /// [`Intake::handle`] for a body whose MACs were computed while it was read
    /// ([`Intake::streaming`]).
    pub fn handle_streamed(
        &self,
        headers: &[(String, String)],
        body: &[u8],
        digests: &Digests,
        received: Instant,
    ) -> Outcome {
        self.finish(self.receiver.decide_streamed(headers, body, Some(digests)), received)
    }

    /// The MACs to feed with a body as it is read.
    pub fn streaming(&self) -> Streaming {
        self.receiver.streaming()
    }

    /// The outcome for a body the server stopped reading at the limit.
    pub fn too_large(&self, headers: &[(String, String)], received: Instant) -> Outcome {
        self.finish(self.receiver.too_large(headers), received)
    }

    fn finish(&self, decision: Decision, received: Instant) -> Outcome {
        if let (Some(previews), Some(_)) = (&self.previews, &decision.pull_request) {
            previews.note_event();
        }
        let (outcome, http_status, reason) = match decision.action {
            Action::Reconcile => self.enqueue(&decision, received),
            Action::Preview => self.enqueue_preview(&decision, received),
            Action::Ignore => ("ignore", decision.http_status, decision.reason.clone()),
            Action::Reject => ("reject", decision.http_status, decision.reason.clone()),
        };
        let outcome = Outcome { decision, outcome, http_status, reason };
        self.record(&outcome);
        outcome
    }

    /// A pull request to preview: on the previews' queue, where a newer head of the same
    /// pull request replaces one still waiting (so a redelivery costs nothing either).
    fn enqueue_preview(&self, decision: &Decision, received: Instant) -> (&'static str, u16, String) {
        let (Some(queue), Some(pull), Some(provider)) = (&self.previews, &decision.pull_request, decision.provider)
        else {
            return ("ignore", 200, "pull request previews are not served here; acknowledged".into());
        };
        let req =
            crate::preview::queue::Request { provider, pull: pull.clone(), apps: decision.apps.clone(), received };
        match queue.offer(req) {
            Ok(()) => ("preview", decision.http_status, decision.reason.clone()),
            Err(e) => ("overloaded", 503, e.to_string()),
        }
    }

    fn enqueue(&self, decision: &Decision, received: Instant) -> (&'static str, u16, String) {
        let item = Queued { apps: decision.apps.clone(), received };
        let Some(dedupe) = &self.dedupe else {
            return match self.queue.try_send(item) {
                Ok(()) => ("reconcile", decision.http_status, decision.reason.clone()),
                Err(_) => overloaded(),
            };
        };
        let keys = DeliveryKeys::of(decision);
        // One lock around check, enqueue and record: two copies of one delivery racing
        // each other still queue one pass. try_send never waits.
        let mut dedupe = dedupe.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if dedupe.is_duplicate(&keys, received) {
            return ("duplicate", 200, DUPLICATE.to_string());
        }
        match self.queue.try_send(item) {
            Ok(()) => {
                dedupe.record(&keys, received);
                ("reconcile", decision.http_status, decision.reason.clone())
            }
            Err(_) => overloaded(),
        }
    }

    fn record(&self, o: &Outcome) {
        let d = &o.decision;
        let provider = d.provider.map_or("unknown", |p| p.as_str());
        self.metrics
            .deliveries
            .get_or_create(&DeliveryLabels {
                provider: provider.to_string(),
                event: event_label(d.event.as_deref()).to_string(),
                action: o.outcome.to_string(),
                code: o.http_status,
            })
            .inc();
        tracing::info!(
            status = o.http_status,
            outcome = o.outcome,
            provider,
            event = event_label(d.event.as_deref()),
            apps = ?d.apps,
            skipped = ?d.skipped,
            delivery = ?d.delivery_id,
            "webhook: {}",
            o.reason
        );
    }
}

const DUPLICATE: &str = "duplicate delivery; a pass was already queued for it";

fn overloaded() -> (&'static str, u16, String) {
    ("overloaded", 503, "webhook queue is full; retry later".to_string())
}

/// Shared state of the public listener's handlers (the webhook).
#[derive(Clone)]
pub struct AppState {
    /// Webhook intake.
    pub intake: Arc<Intake>,
    /// Body limit, checked while reading.
    pub max_body_bytes: usize,
}

/// The public router (the webhook only) with its limits: body size, whole-request
/// timeout (408) and the bound on concurrent requests.
pub fn router(state: AppState, limits: &Limits) -> Router {
    Router::new()
        .route("/api/webhook", post(webhook))
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(GlobalConcurrencyLimitLayer::new(limits.max_concurrent_requests.max(1)))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout))
        .with_state(state)
}

/// Shared state of the internal listener's handlers.
#[derive(Clone)]
pub struct InternalState {
    /// The statuses (and timings) the passes publish.
    pub published: Published,
    /// The status store, for the history the page shows.
    pub store: Store,
    /// Metrics to expose.
    pub metrics: Arc<Metrics>,
    /// Who may read ([`crate::auth`]).
    pub reviewer: Arc<Reviewer>,
    /// The last previews of pull requests, for their view.
    pub previews: Arc<crate::preview::page::Shown>,
}

/// The internal router: the status API ([`auth::STATUS_API`]) and the metrics
/// ([`auth::METRICS`]), each route behind its right. A path that matches no route is
/// 404 without asking the API server.
pub fn internal_router(state: InternalState) -> Router {
    let guard = |right: Right| Guard { reviewer: state.reviewer.clone(), right };
    Router::new()
        .route(
            "/api/v1/applications",
            get(applications).route_layer(middleware::from_fn_with_state(guard(auth::STATUS_API), authorize)),
        )
        .route("/metrics", get(metrics).route_layer(middleware::from_fn_with_state(guard(auth::METRICS), authorize)))
        .route("/", get(page_list).route_layer(middleware::from_fn_with_state(guard(auth::STATUS_API), authorize)))
        .route(
            "/applications/{app}",
            get(page_app).route_layer(middleware::from_fn_with_state(guard(auth::STATUS_API), authorize)),
        )
        .route(
            "/applications/{app}/syncs/{started}",
            get(page_sync).route_layer(middleware::from_fn_with_state(guard(auth::STATUS_API), authorize)),
        )
        .route(
            "/previews/{repository}/{number}",
            get(page_preview).route_layer(middleware::from_fn_with_state(guard(auth::STATUS_API), authorize)),
        )
        .with_state(state)
}

/// Serves [`internal_router`] on `listener` until `token` is cancelled, with limits of
/// its own (256 connections, 64 requests at once, 10 s to send a request head, 30 s
/// per request, empty bodies), shared with nothing the webhook uses.
pub async fn serve_internal(listener: TcpListener, state: InternalState, token: CancellationToken) {
    let limits = Limits {
        max_connections: 256,
        max_concurrent_requests: 64,
        header_read_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let app = internal_router(state)
        .layer(DefaultBodyLimit::max(0))
        .layer(GlobalConcurrencyLimitLayer::new(limits.max_concurrent_requests))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout));
    serve_http(listener, app, limits, token).await;
}

/// The right one route needs, and who to ask.
#[derive(Clone)]
struct Guard {
    reviewer: Arc<Reviewer>,
    right: Right,
}

async fn authorize(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let header = request.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let verdict = guard.reviewer.check(header, guard.right).await;
    let (code, why) = match &verdict {
        Verdict::Allowed { .. } => return next.run(request).await,
        Verdict::Unauthenticated(why) => (StatusCode::UNAUTHORIZED, why.clone()),
        Verdict::Forbidden { user, reason } => {
            let mut why = format!("user `{user}` may not {}", guard.right);
            if !reason.is_empty() {
                why.push_str(&format!(": {reason}"));
            }
            (StatusCode::FORBIDDEN, why)
        }
        Verdict::Unavailable(why) => {
            tracing::warn!("internal listener: {why}");
            (StatusCode::SERVICE_UNAVAILABLE, "the API server could not review the token; retry later".to_string())
        }
        Verdict::Throttled => {
            let mut response =
                (StatusCode::TOO_MANY_REQUESTS, "too many token reviews at once; retry in a second").into_response();
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
            return response;
        }
    };
    tracing::debug!(path = %request.uri().path(), status = code.as_u16(), "internal listener refused: {why}");
    let mut response = (code, why).into_response();
    if code == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
    }
    response
}

/// Serves `probes` (see [`crate::probes::router`]) on `listener` until `token` is
/// cancelled, with limits of its own (64 connections, 5 s to send a request head, 5 s
/// per request), shared with nothing the webhook uses.
pub async fn serve_probes(listener: TcpListener, probes: Router, token: CancellationToken) {
    let limits = Limits {
        max_connections: 64,
        max_concurrent_requests: 64,
        header_read_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let app = probes
        .layer(DefaultBodyLimit::max(0))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout));
    serve_http(listener, app, limits, token).await;
}

/// Serves `router` on `listener` (HTTP/1.1) until `token` is cancelled, then lets open
/// requests finish for up to 5 s. Applies [`Limits::header_read_timeout`] and
/// [`Limits::max_connections`].
pub async fn serve_http(listener: TcpListener, router: Router, limits: Limits, token: CancellationToken) {
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    loop {
        let permit = tokio::select! {
            () = token.cancelled() => break,
            permit = connections.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = token.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // EMFILE and friends: wait a little instead of spinning.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("http connection: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await.is_err() {
        tracing::warn!("http server: connections still open after 5 s; closing");
    }
}

async fn webhook(State(state): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = header_pairs(&parts.headers);
    let limit = state.max_body_bytes;
    let intake = &state.intake;
    let mut macs = intake.streaming();
    let mut held = Held { budget: intake.buffered.clone(), permits: None };
    let outcome = match read_body(body, declared_length(&parts.headers), limit, &mut macs, &mut held).await {
        Ok(bytes) if bytes.len() <= OFF_RUNTIME_BYTES => {
            intake.handle_streamed(&headers, &bytes, &macs.finish(), Instant::now())
        }
        Ok(bytes) => {
            // parsing a large body is CPU work: off the async threads
            let (intake, digests) = (intake.clone(), macs.finish());
            let decided =
                tokio::task::spawn_blocking(move || intake.handle_streamed(&headers, &bytes, &digests, Instant::now()));
            match decided.await {
                Ok(outcome) => outcome,
                Err(_) => return (StatusCode::INTERNAL_SERVER_ERROR, "delivery could not be decided").into_response(),
            }
        }
        Err(BodyError::TooLarge) => intake.too_large(&headers, Instant::now()),
        Err(BodyError::Busy) => {
            let why = "webhook bodies being received exceed the server's memory budget; retry later";
            return (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"action": "overloaded", "reason": why})))
                .into_response();
        }
        Err(BodyError::Read) => {
            // The client went away or sent a broken chunked body; nothing to decide.
            return (StatusCode::BAD_REQUEST, "request body could not be read").into_response();
        }
    };
    let code = StatusCode::from_u16(outcome.http_status).unwrap_or(StatusCode::BAD_REQUEST);
    (code, Json(outcome.body())).into_response()
}

fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

enum BodyError {
    TooLarge,
    /// The bytes all requests hold together would exceed their budget.
    Busy,
    Read,
}

/// A request's share of [`Limits::max_buffered_bytes`], given back when dropped.
struct Held {
    budget: Arc<Semaphore>,
    permits: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Held {
    /// Takes `bytes` more of the budget, at once or not at all.
    fn take(&mut self, bytes: usize) -> Result<(), BodyError> {
        let Ok(n) = u32::try_from(bytes) else { return Err(BodyError::Busy) };
        if n == 0 {
            return Ok(());
        }
        let more = self.budget.clone().try_acquire_many_owned(n).map_err(|_| BodyError::Busy)?;
        match &mut self.permits {
            Some(p) => p.merge(more),
            None => self.permits = Some(more),
        }
        Ok(())
    }
}

/// Bodies larger than this are verified-and-parsed on a blocking thread.
const OFF_RUNTIME_BYTES: usize = 64 * 1024;

/// Reads the body, stopping as soon as more than `limit` bytes arrived (or at once when
/// `Content-Length` says so), so memory per request never exceeds `limit` plus one
/// frame; every frame is fed to `macs` as it arrives (verification needs no second
/// pass).
async fn read_body(
    body: Body,
    declared: Option<u64>,
    limit: usize,
    macs: &mut Streaming,
    held: &mut Held,
) -> Result<Vec<u8>, BodyError> {
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let capacity = declared.map_or(0, |n| usize::try_from(n).unwrap_or(0));
    // a declared length is taken from the budget up front; more as frames arrive
    held.take(capacity.min(limit))?;
    let mut reserved = capacity.min(limit);
    let mut buf = Vec::with_capacity(capacity.min(limit));
    let mut frames = body.into_data_stream();
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|_| BodyError::Read)?;
        if buf.len() + frame.len() > limit {
            return Err(BodyError::TooLarge);
        }
        if buf.len() + frame.len() > reserved {
            held.take(buf.len() + frame.len() - reserved)?;
            reserved = buf.len() + frame.len();
        }
        macs.update(&frame);
        buf.extend_from_slice(&frame);
    }
    Ok(buf)
}

/// The published statuses as served: every free text capped ([`crate::status::fit::served`]).
fn served(state: &InternalState) -> Vec<crate::status::AppStatus> {
    state.published.statuses().iter().map(crate::status::fit::served).collect()
}

async fn applications(State(state): State<InternalState>) -> Response {
    Json(served(&state)).into_response()
}

/// An HTML page ([`crate::page`]) with headers that keep it inert: no scripts or other
/// loads (CSP), no MIME sniffing, not cached, not framed, no referrer.
fn html(code: StatusCode, body: String) -> Response {
    (
        code,
        [
            ("content-type", "text/html; charset=utf-8"),
            ("content-security-policy", crate::page::CONTENT_SECURITY_POLICY),
            ("x-content-type-options", "nosniff"),
            ("cache-control", "no-store"),
            ("referrer-policy", "no-referrer"),
            ("x-frame-options", "DENY"),
        ],
        body,
    )
        .into_response()
}

async fn page_list(State(state): State<InternalState>) -> Response {
    html(StatusCode::OK, crate::page::list(&served(&state)))
}

async fn page_app(
    State(state): State<InternalState>,
    axum::extract::Path(app): axum::extract::Path<String>,
) -> Response {
    let Some(st) = state.published.status(&app).map(|st| crate::status::fit::served(&st)) else {
        return html(StatusCode::NOT_FOUND, crate::page::not_found(&app));
    };
    let timings = state.published.timings(&app);
    match state.store.load(&app).await.map(|(_, history)| history) {
        Ok(history) => html(StatusCode::OK, crate::page::application(&st, &history, None, timings.as_ref())),
        Err(e) => html(StatusCode::OK, crate::page::application(&st, &[], Some(&e.to_string()), timings.as_ref())),
    }
}

async fn page_sync(
    State(state): State<InternalState>,
    axum::extract::Path((app, started)): axum::extract::Path<(String, String)>,
) -> Response {
    if state.published.status(&app).is_none() {
        return html(StatusCode::NOT_FOUND, crate::page::not_found(&app));
    }
    match state.store.load(&app).await.map(|(_, history)| crate::page::sync_record(&app, &history, &started)) {
        Ok(Some(page)) => html(StatusCode::OK, page),
        Ok(None) => html(StatusCode::NOT_FOUND, crate::page::not_found(&format!("{app}: sync {started}"))),
        Err(e) => html(
            StatusCode::BAD_GATEWAY,
            crate::page::page(
                "plumb: history",
                &format!("<p>The history could not be read: {}</p>\n", crate::page::escape(&e.to_string())),
            ),
        ),
    }
}

async fn page_preview(
    State(state): State<InternalState>,
    axum::extract::Path((repository, number)): axum::extract::Path<(String, u64)>,
) -> Response {
    match state.previews.get(&repository, number) {
        Some(p) => html(StatusCode::OK, crate::preview::page::html(&p)),
        None => html(StatusCode::NOT_FOUND, crate::preview::page::not_found(&repository, number)),
    }
}

async fn metrics(State(state): State<InternalState>) -> impl IntoResponse {
    ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.encode())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;

    use hmac::{Hmac, KeyInit, Mac};

    use super::*;

    const URL: &str = "https://gitlab.example.invalid/acme/fleet";
    const SECRET: &str = "gl-token-6f1d2e";

    fn receiver() -> Receiver {
        let key = RepoKey::from_url(URL).unwrap();
        Receiver {
            repositories: vec![WatchedRepository {
                key: key.clone(),
                secret: Some(Secret::from(SECRET)),
                allow_sha1: false,
                provider: Some(crate::webhook::Provider::GitLab),
            }],
            watches: vec![Watch { app: "web".into(), repo: key, revision: "main".into(), path_filter: None }],
            max_body_bytes: 1 << 20,
        }
    }

    /// A `file://` repository (tests, demos) is accepted as `plumb diff` accepts it:
    /// polled only, never matched by a delivery; the others are watched as before.
    #[test]
    fn a_file_url_is_polled_not_refused() {
        let text = format!(
            "repositories:\n  - {{name: local, url: \"file:///srv/git/fleet.git\"}}\n  - {{name: remote, url: \"{URL}\"}}\nenvironments:\n  - name: e\napplications:\n  - {{name: a, repository: local, revision: main, path: app, namespace: a, environment: e}}\n  - {{name: b, repository: remote, revision: main, path: app, namespace: b, environment: e}}\n"
        );
        let config = crate::config::load_str(&text, std::path::Path::new("p.yaml"), std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        let r = super::receiver(&config).unwrap();
        assert_eq!(r.repositories.len(), 1);
        assert_eq!(r.repositories[0].key, RepoKey::from_url(URL).unwrap());
        assert_eq!(r.watches.iter().map(|w| w.app.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    /// A repository's forge is `webhookProvider`, else its `commitStatus` provider, else
    /// the public forge its host names; a bad value is an error naming the line.
    #[test]
    fn a_repositorys_webhook_provider_is_configured_or_inferred() {
        use crate::webhook::Provider;
        let text = "repositories:\n  - {name: a, url: \"https://git.example/a/a\", webhookProvider: gitlab}\n  - {name: b, url: \"https://github.com/a/b\"}\n  - {name: c, url: \"https://git.example/a/c\", commitStatus: {provider: gitea, tokenFile: /t}}\n  - {name: d, url: \"https://git.example/a/d\"}\n  - {name: e, url: \"git@gitlab.com:a/e.git\", webhookProvider: forgejo}\nenvironments:\n  - name: e\napplications: []\n";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.yaml");
        std::fs::write(&file, text).unwrap();
        let config = crate::config::load_without_secrets(&file).unwrap_or_else(|e| panic!("{e}"));
        let r = super::receiver(&config).unwrap();
        let providers: Vec<Option<Provider>> = r.repositories.iter().map(|r| r.provider).collect();
        assert_eq!(
            providers,
            [Some(Provider::GitLab), Some(Provider::GitHub), Some(Provider::Gitea), None, Some(Provider::Forgejo)]
        );
        let bad = "repositories:\n  - {name: a, url: \"https://git.example/a/a\", webhookProvider: gitlub}\n";
        let e = crate::config::load_str(bad, std::path::Path::new("p.yaml"), std::path::Path::new(".")).unwrap_err();
        assert!(e.to_string().contains("p.yaml:2") && e.to_string().contains("gitlub"), "{e}");
    }

    fn push(after: &str) -> Vec<u8> {
        serde_json::json!({
            "object_kind": "push", "ref": "refs/heads/main", "before": "1".repeat(40), "after": after,
            "checkout_sha": after, "total_commits_count": 0, "commits": [],
            "project": {"git_http_url": format!("{URL}.git"), "web_url": URL}
        })
        .to_string()
        .into_bytes()
    }

    fn gitlab(token: &str, id: &str) -> Vec<(String, String)> {
        vec![
            ("content-type".into(), "application/json".into()),
            ("x-gitlab-event".into(), "Push Hook".into()),
            ("idempotency-key".into(), id.into()),
            ("x-gitlab-token".into(), token.into()),
        ]
    }

    /// A full queue answers 503 and does not remember the delivery, so the forge's retry
    /// is queued once there is room; a repeat of a queued delivery is a duplicate.
    #[test]
    fn full_queue_is_503_and_retry_is_not_a_duplicate() {
        let metrics = Arc::new(Metrics::default());
        let (intake, mut queue) = Intake::new(receiver(), Some(Dedupe::default()), 1, metrics.clone());
        let t = Instant::now();
        let first = intake.handle(&gitlab(SECRET, "a"), &push(&"2".repeat(40)), t);
        assert_eq!((first.outcome, first.http_status), ("reconcile", 202));
        let full = intake.handle(&gitlab(SECRET, "b"), &push(&"3".repeat(40)), t);
        assert_eq!((full.outcome, full.http_status), ("overloaded", 503));
        assert_eq!(full.body()["queued"], 0);

        assert_eq!(queue.try_recv().unwrap(), Queued { apps: vec!["web".into()], received: t });
        let retry = intake.handle(&gitlab(SECRET, "b"), &push(&"3".repeat(40)), t);
        assert_eq!((retry.outcome, retry.http_status), ("reconcile", 202));
        let again = intake.handle(&gitlab(SECRET, "b"), &push(&"3".repeat(40)), t);
        assert_eq!((again.outcome, again.http_status), ("duplicate", 200));

        // Without dedupe (replay) every delivery is queued.
        let (replay, _q) = Intake::new(receiver(), None, 4, metrics.clone());
        for _ in 0..3 {
            assert_eq!(replay.handle(&gitlab(SECRET, "a"), &push(&"2".repeat(40)), t).http_status, 202);
        }
        let text = metrics.encode();
        assert!(text.contains(
            "plumb_webhook_deliveries_total{provider=\"gitlab\",event=\"Push Hook\",action=\"overloaded\",code=\"503\"} 1"
        ));
    }

    /// Every authenticated pull request event is counted for the `pullRequests`
    /// applicationSets (a close previews nothing but changes the open list); a forged
    /// one, or a push, counts nothing.
    #[test]
    fn authenticated_pull_request_events_are_counted() {
        let (intake, _queue) = Intake::new(receiver(), Some(Dedupe::default()), 8, Arc::new(Metrics::default()));
        let previews = Arc::new(crate::preview::queue::Queue::default());
        let intake = intake.with_previews(previews.clone());
        let closed = serde_json::json!({
            "object_kind": "merge_request",
            "project": {"git_http_url": format!("{URL}.git"), "web_url": URL},
            "object_attributes": {"iid": 12, "action": "close", "state": "closed", "target_branch": "main",
                "source_branch": "bump", "source_project_id": 7, "target_project_id": 7,
                "last_commit": {"id": "6".repeat(40)}},
        })
        .to_string()
        .into_bytes();
        let headers = |token: &str, id: &str| {
            let mut h = gitlab(token, id);
            h[1].1 = "Merge Request Hook".into();
            h
        };
        let t = Instant::now();
        let forged = intake.handle(&headers("guess", "m-1"), &closed, t);
        assert_eq!((forged.http_status, previews.events()), (401, 0));
        let real = intake.handle(&headers(SECRET, "m-2"), &closed, t);
        assert_eq!((real.outcome, real.http_status, previews.events()), ("ignore", 200, 1));
        intake.handle(&gitlab(SECRET, "p-1"), &push(&"2".repeat(40)), t);
        assert_eq!(previews.events(), 1);
    }

    /// An unauthenticated sender cannot claim a delivery id or a push before the forge
    /// sends it: rejected deliveries are not remembered.
    #[test]
    fn rejected_deliveries_are_not_remembered() {
        let (intake, _queue) = Intake::new(receiver(), Some(Dedupe::default()), 8, Arc::new(Metrics::default()));
        let t = Instant::now();
        let forged = intake.handle(&gitlab("guess", "id-1"), &push(&"2".repeat(40)), t);
        assert_eq!(forged.http_status, 401);
        let real = intake.handle(&gitlab(SECRET, "id-1"), &push(&"2".repeat(40)), t);
        assert_eq!(real.http_status, 202);
    }

    /// Event labels are bounded whatever the sender writes.
    #[test]
    fn event_label_is_bounded() {
        let metrics = Arc::new(Metrics::default());
        let (intake, _queue) = Intake::new(receiver(), Some(Dedupe::default()), 8, metrics.clone());
        for i in 0..50 {
            let mut h = gitlab("guess", "x");
            h[1].1 = format!("Made Up Event {i}");
            intake.handle(&h, b"{}", Instant::now());
        }
        let text = metrics.encode();
        assert!(text.contains("event=\"other\",action=\"reject\",code=\"401\"} 50"), "{text}");
        assert!(!text.contains("Made Up"));
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Neither the secret, the presented token nor a presented signature appears in logs
    /// (at trace level), metrics or answers, for accepted and rejected deliveries alike.
    #[test]
    fn secrets_stay_out_of_logs_metrics_and_answers() {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let metrics = Arc::new(Metrics::default());
        let (intake, _queue) = Intake::new(receiver(), Some(Dedupe::default()), 8, metrics.clone());
        let body = push(&"5".repeat(40));
        let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(&body);
        let signature = hex::encode(mac.finalize().into_bytes());
        let github = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-github-event".to_string(), "push".to_string()),
            ("x-hub-signature-256".to_string(), format!("sha256={signature}")),
        ];
        let mut answers = Vec::new();
        // tracing caches each callsite's interest process-wide; while at most one
        // dispatcher exists it asks the registering thread's default (none, on other
        // tests' threads) and caches "never". A second, idle dispatcher alive for the
        // whole test makes it ask every live dispatcher instead.
        let _anchor = tracing::Dispatch::new(
            tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).with_writer(std::io::sink).finish(),
        );
        tracing::subscriber::with_default(subscriber, || {
            for (headers, body) in [
                (gitlab(SECRET, "ok"), body.clone()),
                (gitlab("wrong-token-9c2b", "bad"), body.clone()),
                (gitlab(SECRET, "malformed"), b"{\"ref\":".to_vec()),
                (github.clone(), body.clone()),
            ] {
                let o = intake.handle(&headers, &body, Instant::now());
                answers.push(format!("{} {:?}", o.body(), o.decision));
            }
        });
        let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        assert!(logs.contains("webhook:"), "the deliveries were logged: {logs}");
        let everything = format!("{logs}\n{}\n{}", metrics.encode(), answers.join("\n"));
        for needle in [SECRET, "wrong-token-9c2b", &signature] {
            assert!(!everything.contains(needle), "{needle} leaked:\n{everything}");
        }
    }
}
