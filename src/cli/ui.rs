//! `plumb ui`: the status page served on the user's own machine ([`crate::page::ui`]),
//! read through the user's kubeconfig and RBAC — no token to paste, nothing exposed
//! beyond loopback unless `--allow-remote` — with actions performed as that user.
//!
//! The handlers are thin: they read the Application resources, their Events and the
//! live children of their workloads with the user's client, and hand values to the
//! pure pages. An action is the same annotation the CLI command writes
//! ([`super::request`], [`super::day2`]); the API server authorizes the `patch` and
//! records the user (the `by` of a pause or a pin is the name its SelfSubjectReview
//! gives).
//!
//! Requests from other sites are refused (403): every request must name this listener
//! in `Host` (no DNS rebinding); a POST must carry the per-process token of the form
//! it came from, an `Origin` of this listener when the browser sends one, and no
//! cross-site `Sec-Fetch-Site`.

use std::{collections::HashMap, net::SocketAddr, process::ExitCode, sync::Arc};

use anyhow::Context as _;
use axum::{
    Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Path, Query, Request, State},
    http::{HeaderMap, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, ListParams},
    core::GroupVersionKind,
};
use sha2::Digest as _;

use super::read::KubeArgs;
use crate::{
    page::ui::{self as pages, Action, AppView, Node},
    status::{
        AppStatus, Pin, REFRESH_ANNOTATION, ROLLBACK_ANNOTATION, ROLLBACK_OVERRIDE_ANNOTATION, SUSPEND_ANNOTATION,
        SYNC_ANNOTATION, Suspension,
        store::{Error as StoreError, Store},
    },
};

/// The default of `--listen`: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8090";

/// Live children shown per node of the resource tree at most (the rest counted).
pub const MAX_CHILDREN: usize = 20;

/// Objects read per list of live children at most (one page of the API server's list).
const LIST_LIMIT: u32 = 500;

/// Bytes of an action's form at most.
const FORM_LIMIT: usize = 16 * 1024;

/// `plumb ui`'s options.
#[derive(clap::Args, Debug, Clone)]
pub struct UiArgs {
    /// Address to serve the page on (loopback by default).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Open the page in the default browser (`xdg-open`, `open` on macOS).
    #[arg(long)]
    pub open: bool,
    /// Allow a non-loopback `--listen` address: whoever reaches it reads and acts as
    /// your kubeconfig's user.
    #[arg(long)]
    pub allow_remote: bool,
}

/// What the handlers share: the user's client, the status namespace, the form token.
#[derive(Clone)]
pub struct Ui {
    client: kube::Client,
    namespace: String,
    /// The per-process token every action form carries (hex, 256 random bits).
    csrf: Arc<str>,
    /// Who the API server says the user is (shown on every page).
    who: Arc<str>,
    /// `Host` values naming this listener.
    hosts: Arc<[String]>,
}

impl Ui {
    /// The state of a page served at `listen`, reading `namespace` with `client`; asks
    /// the API server who the user is.
    pub async fn new(client: kube::Client, namespace: &str, listen: SocketAddr) -> Self {
        let who = super::day2::whoami(&client).await;
        let mut hosts = vec![listen.to_string()];
        if listen.ip().is_loopback() {
            hosts.push(format!("localhost:{}", listen.port()));
        }
        Self {
            client,
            namespace: namespace.to_string(),
            csrf: hex::encode(rand::random::<[u8; 32]>()).into(),
            who: who.into(),
            hosts: hosts.into(),
        }
    }

    fn store(&self) -> Store {
        Store::new(self.client.clone(), &self.namespace)
    }
}

/// The routes of [`crate::page::ui`] over `ui`, behind the `Host` check.
pub fn router(ui: Ui) -> Router {
    Router::new()
        .route("/", get(list))
        .route("/applications/{app}", get(application))
        .route("/applications/{app}/objects/{object}", get(object))
        .route("/applications/{app}/syncs/{started}", get(sync))
        .route_layer(middleware::from_fn(etag))
        .route("/applications/{app}/confirm", get(confirm))
        .route("/applications/{app}/actions", post(act))
        .layer(DefaultBodyLimit::max(FORM_LIMIT))
        .layer(middleware::from_fn_with_state(ui.clone(), same_host))
        .with_state(ui)
}

/// `plumb ui`: serves [`router`] on `--listen` until Ctrl-C.
///
/// # Errors
/// A non-loopback address without `--allow-remote`; the address cannot be bound; no
/// kubeconfig.
pub async fn run(kube: &KubeArgs, args: &UiArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.listen.ip().is_loopback() || args.allow_remote,
        "--listen {}: not a loopback address; whoever reaches it would read and act as your kubeconfig's user (give --allow-remote to mean it)",
        args.listen
    );
    let client = kube.client().await?;
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("--listen {}", args.listen))?;
    let open = args.open;
    serve(listener, client, &kube.namespace(None), open, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// Serves the page on `listener`, reading `namespace` with `client`, until `shutdown`;
/// says where on standard error (and opens a browser there when `open`).
///
/// # Errors
/// The listener fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    client: kube::Client,
    namespace: &str,
    open: bool,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    let ui = Ui::new(client, namespace, addr).await;
    let url = format!("http://{addr}/");
    errln!(
        "plumb ui: {url} (applications.plumb.dev in {} as {}; Ctrl-C stops)",
        ui.namespace,
        if ui.who.is_empty() { "an unnamed user" } else { &ui.who }
    );
    if open {
        let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
        if let Err(e) = std::process::Command::new(opener).arg(&url).spawn() {
            errln!("plumb ui: could not run {opener}: {e}; open {url} yourself");
        }
    }
    axum::serve(listener, router(ui)).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

/// A `plumb ui` page with headers that keep it inert (as the in-cluster page's, with
/// [`pages::CONTENT_SECURITY_POLICY`]; the referrer is sent to the same origin only, so
/// that the browser names the page's origin in a POST's `Origin`).
fn html(code: StatusCode, body: String) -> Response {
    (
        code,
        [
            ("content-type", "text/html; charset=utf-8"),
            ("content-security-policy", pages::CONTENT_SECURITY_POLICY),
            ("x-content-type-options", "nosniff"),
            ("cache-control", "no-store"),
            ("referrer-policy", "same-origin"),
            ("x-frame-options", "DENY"),
        ],
        body,
    )
        .into_response()
}

/// Refuses (403) a request whose `Host` does not name this listener.
async fn same_host(State(ui): State<Ui>, request: Request, next: Next) -> Response {
    let host = request.headers().get("host").and_then(|h| h.to_str().ok()).unwrap_or_default();
    if !ui.hosts.iter().any(|h| h == host) {
        return html(StatusCode::FORBIDDEN, pages::refused("the request's Host does not name this listener"));
    }
    next.run(request).await
}

/// Why a POST is refused as cross-site, if it is (see the module docs).
pub fn cross_site(headers: &HeaderMap, hosts: &[String], csrf: &str, token: Option<&str>) -> Option<&'static str> {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{0}"));
    if let Some(site) = header("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return Some("the browser says this request comes from another site");
    }
    if let Some(origin) = header("origin")
        && !hosts.iter().any(|h| origin == format!("http://{h}"))
    {
        return Some("the request's Origin is not this page");
    }
    let Some(token) = token else { return Some("the form's token is missing: reload the page") };
    let same = token.len() == csrf.len() && token.bytes().zip(csrf.bytes()).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0;
    if !same {
        return Some("the form's token is wrong (plumb ui was restarted?): reload the page");
    }
    None
}

/// The API server's answer in a store error, when it answered: (status code, message).
fn api_answer(e: &StoreError) -> Option<(u16, String)> {
    match e {
        StoreError::Kube { source, .. } => match source.as_ref() {
            kube::Error::Api(s) => Some((s.code, s.message.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// The page for a read that failed: 403 when the API server refused it.
fn read_failed(ui: &Ui, e: &StoreError) -> Response {
    match api_answer(e) {
        Some((403, message)) => html(StatusCode::FORBIDDEN, pages::read_failed(&ui.namespace, true, &message)),
        _ => html(StatusCode::BAD_GATEWAY, pages::read_failed(&ui.namespace, false, &e.to_string())),
    }
}

async fn list(State(ui): State<Ui>) -> Response {
    match ui.store().list().await {
        Ok(statuses) => html(StatusCode::OK, pages::list(&statuses, &ui.who, &ui.namespace)),
        Err(e) => read_failed(&ui, &e),
    }
}

async fn application(State(ui): State<Ui>, Path(app): Path<String>) -> Response {
    let store = ui.store();
    let (st, history) = match store.find(&app).await {
        Ok(Some(found)) => found,
        Ok(None) => return html(StatusCode::NOT_FOUND, pages::not_found(&app, &ui.namespace)),
        Err(e) => return read_failed(&ui, &e),
    };
    let events = store.events(&app).await.map_err(|e| e.to_string());
    let tree = tree(&ui.client, &st).await;
    let view = AppView {
        status: &st,
        history: &history,
        history_error: None,
        events: events.as_deref().map_err(String::as_str),
        tree: &tree,
    };
    html(StatusCode::OK, pages::application(&view, &ui.who, &ui.namespace))
}

async fn object(State(ui): State<Ui>, Path((app, object)): Path<(String, String)>) -> Response {
    let st = match ui.store().find(&app).await {
        Ok(Some((st, _))) => st,
        Ok(None) => return html(StatusCode::NOT_FOUND, pages::not_found(&app, &ui.namespace)),
        Err(e) => return read_failed(&ui, &e),
    };
    let Some(r) = st.resources.iter().find(|r| r.object == object) else {
        return html(StatusCode::NOT_FOUND, pages::not_found(&format!("{app}: {object}"), &ui.namespace));
    };
    let node = node_of(&ui.client, r, &mut Lists::default()).await;
    match pages::object(&st, &object, Some(&node)) {
        Some(page) => html(StatusCode::OK, page),
        None => html(StatusCode::NOT_FOUND, pages::not_found(&app, &ui.namespace)),
    }
}

async fn sync(State(ui): State<Ui>, Path((app, started)): Path<(String, String)>) -> Response {
    let history = match ui.store().find(&app).await {
        Ok(Some((_, history))) => history,
        Ok(None) => return html(StatusCode::NOT_FOUND, pages::not_found(&app, &ui.namespace)),
        Err(e) => return read_failed(&ui, &e),
    };
    match history.iter().find(|r| r.started_at == started) {
        Some(r) => html(StatusCode::OK, pages::sync(&app, r)),
        None => html(StatusCode::NOT_FOUND, pages::not_found(&format!("{app}: sync {started}"), &ui.namespace)),
    }
}

async fn confirm(
    State(ui): State<Ui>,
    Path(app): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(action) = query.get("action").and_then(|a| Action::parse(a)) else {
        return html(StatusCode::NOT_FOUND, pages::refused("no such action"));
    };
    let (st, history) = match ui.store().find(&app).await {
        Ok(Some(found)) => found,
        Ok(None) => return html(StatusCode::NOT_FOUND, pages::not_found(&app, &ui.namespace)),
        Err(e) => return read_failed(&ui, &e),
    };
    let target = match action {
        Action::Approve => held(&st, query.get("object").map_or("", String::as_str)).map(String::from),
        _ => super::day2::rollback_revision(&history, None),
    };
    html(StatusCode::OK, pages::confirm(&app, action, &ui.csrf, target.as_deref().map_err(String::as_str)))
}

/// `object` when `st` says its prune waits for an approval; else why it cannot be approved.
fn held<'a>(st: &AppStatus, object: &'a str) -> Result<&'a str, String> {
    if st.resources.iter().any(|r| r.object == object && crate::plan::awaits_approval(&r.reason)) {
        Ok(object)
    } else {
        Err(format!("{}'s status names no object `{object}` whose prune waits for an approval", st.app))
    }
}

async fn act(State(ui): State<Ui>, Path(app): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    if let Some(why) = cross_site(&headers, &ui.hosts, &ui.csrf, form.get("csrf").map(String::as_str)) {
        return html(StatusCode::FORBIDDEN, pages::refused(why));
    }
    let Some(action) = form.get("action").and_then(|a| Action::parse(a)) else {
        return html(StatusCode::NOT_FOUND, pages::refused("no such action"));
    };
    match perform(&ui, &app, action, &form).await {
        Ok(done) => html(StatusCode::OK, pages::outcome(&app, action, Ok(&done))),
        Err((code, why)) => html(code, pages::outcome(&app, action, Err(&why))),
    }
}

/// Writes `action`'s annotations on `app`'s resource as the user, as the CLI command
/// does; what was recorded, or the status code and why not.
async fn perform(
    ui: &Ui,
    app: &str,
    action: Action,
    form: &HashMap<String, String>,
) -> Result<String, (StatusCode, String)> {
    let bad = |why: String| (StatusCode::BAD_REQUEST, why);
    let now = crate::status::now();
    let value;
    let (pairs, done): (Vec<(&str, Option<&str>)>, String) = match action {
        Action::Approve => return approve(ui, app, form.get("object").map_or("", String::as_str)).await,
        Action::Sync | Action::Refresh => {
            let key = if action == Action::Sync { SYNC_ANNOTATION } else { REFRESH_ANNOTATION };
            (vec![(key, Some(now.as_str()))], format!("{key} = {now}: the serving plumb acts on it within seconds"))
        }
        Action::Suspend => {
            let asked = form.get("for").map_or("1h", String::as_str);
            let duration = crate::config::parse_duration(asked).map_err(|e| bad(format!("for {asked}: {e}")))?;
            let reason: String = form.get("reason").map_or("", |r| r.trim()).chars().take(200).collect();
            if reason.is_empty() {
                return Err(bad("a pause needs a reason".into()));
            }
            let span = jiff::SignedDuration::try_from(duration).map_err(|e| bad(e.to_string()))?;
            let until = jiff::Timestamp::now().checked_add(span).map_err(|e| bad(e.to_string()))?;
            let pause = Suspension {
                until: until.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                by: ui.who.to_string(),
                reason,
                ..Suspension::default()
            };
            value = serde_json::to_string(&pause).map_err(|e| bad(e.to_string()))?;
            let done = format!("paused until {} (at most the environment's maxPause), by {}", pause.until, pause.by);
            (vec![(SUSPEND_ANNOTATION, Some(value.as_str()))], done)
        }
        Action::Resume => (vec![(SUSPEND_ANNOTATION, None)], "automated sync resumed".into()),
        Action::Rollback => {
            let revision = form.get("revision").map_or("", String::as_str);
            if !(4..=64).contains(&revision.len()) || !revision.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad(format!("`{revision}` is not a commit SHA")));
            }
            let pin = Pin { revision: revision.into(), by: ui.who.to_string(), at: now.clone(), ..Pin::default() };
            value = serde_json::to_string(&pin).map_err(|e| bad(e.to_string()))?;
            let done = format!("pinned to {revision} by {} until the pin is released", pin.by);
            (vec![(ROLLBACK_ANNOTATION, Some(value.as_str())), (ROLLBACK_OVERRIDE_ANNOTATION, None)], done)
        }
        Action::Release => (
            vec![(ROLLBACK_ANNOTATION, None), (ROLLBACK_OVERRIDE_ANNOTATION, None)],
            "pin released; automated sync follows the tracked ref again".into(),
        ),
    };
    match ui.store().annotate_existing(app, &pairs).await {
        Ok(true) => Ok(done),
        Ok(false) => Err((StatusCode::NOT_FOUND, format!("no applications.plumb.dev/{app} in {}", ui.namespace))),
        Err(e) => Err(match api_answer(&e) {
            Some((403, message)) => (
                StatusCode::FORBIDDEN,
                format!(
                    "the API server refused: {message} (your kubeconfig's user needs patch on applications.plumb.dev in {}: the role plumb-operator)",
                    ui.namespace
                ),
            ),
            _ => (StatusCode::BAD_GATEWAY, e.to_string()),
        }),
    }
}

/// The field manager of the approvals `plumb ui` writes: not plumb's own
/// ([`crate::FIELD_MANAGER`]), so that the approval counts as a person's
/// ([`crate::plan::prune_approval`]).
pub const UI_FIELD_MANAGER: &str = "plumb-ui";

/// Approves the prune of `object` (`Kind[.group]/namespace/name`, or `Kind[.group]/name`
/// when cluster-scoped) of `app`: a merge patch of
/// [`crate::plan::PRUNE_APPROVED_ANNOTATION`] with the time now on the live object, as
/// the user. Refused (409) unless the application's status says that object's prune
/// waits for an approval; the API server decides whether the user may patch it.
async fn approve(ui: &Ui, app: &str, object: &str) -> Result<String, (StatusCode, String)> {
    let st = match ui.store().find(app).await {
        Ok(Some((st, _))) => st,
        Ok(None) => {
            return Err((StatusCode::NOT_FOUND, format!("no applications.plumb.dev/{app} in {}", ui.namespace)));
        }
        Err(e) => return Err((StatusCode::BAD_GATEWAY, e.to_string())),
    };
    held(&st, object).map_err(|why| (StatusCode::CONFLICT, why))?;
    let parts: Vec<&str> = object.split('/').collect();
    let (kind, namespace, name) = match parts[..] {
        [kind, name] => (kind, None, name),
        [kind, namespace, name] => (kind, Some(namespace), name),
        _ => return Err((StatusCode::BAD_REQUEST, format!("`{object}` is not Kind[.group]/namespace/name"))),
    };
    let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
    let gone = |e: kube::Error| (StatusCode::BAD_GATEWAY, format!("{object}: {e}"));
    let (resource, caps) = kube::discovery::group(&ui.client, group)
        .await
        .map_err(gone)?
        .recommended_kind(kind)
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("the API server serves no {kind} in group `{group}`")))?;
    // the scope the status recorded must still be the kind's: never another object of the name
    let api: Api<DynamicObject> = match (namespace, &caps.scope) {
        (Some(ns), kube::discovery::Scope::Namespaced) => Api::namespaced_with(ui.client.clone(), ns, &resource),
        (None, kube::discovery::Scope::Cluster) => Api::all_with(ui.client.clone(), &resource),
        _ => {
            let why = format!("{object}: the API server now serves {kind} with another scope; nothing approved");
            return Err((StatusCode::CONFLICT, why));
        }
    };
    let now = crate::status::now();
    let patch = serde_json::json!({"metadata": {"annotations": {crate::plan::PRUNE_APPROVED_ANNOTATION: now}}});
    let params = kube::api::PatchParams { field_manager: Some(UI_FIELD_MANAGER.into()), ..Default::default() };
    match api.patch(name, &params, &kube::api::Patch::Merge(&patch)).await {
        Ok(_) => Ok(format!(
            "{} = {now} on {object}, set by {}: plumb deletes it at {app}'s next sync (valid 24 h)",
            crate::plan::PRUNE_APPROVED_ANNOTATION,
            ui.who
        )),
        Err(kube::Error::Api(s)) if s.code == 403 => Err((
            StatusCode::FORBIDDEN,
            format!(
                "the API server refused: {} (your kubeconfig's user needs patch on {})",
                s.message, resource.plural
            ),
        )),
        Err(kube::Error::Api(s)) if s.code == 404 => Err((StatusCode::NOT_FOUND, format!("{object} is gone already"))),
        Err(e) => Err(gone(e)),
    }
}

/// Bytes of one page `etag` reads at most (the pages are bounded far below).
const PAGE_LIMIT: usize = 16 * 1024 * 1024;

/// Gives a page an `ETag` (the first 128 bits of its body's SHA-256) and lets the
/// browser keep it (`private, no-cache`: kept, asked again each time); a GET whose
/// `If-None-Match` names the current one gets `304 Not Modified` and no body (RFC 9110
/// §13.1.2), so a page that reloads itself every [`pages::REFRESH_SECONDS`] sends
/// nothing while nothing changed.
async fn etag(request: Request, next: Next) -> Response {
    let asked = request.headers().get(axum::http::header::IF_NONE_MATCH).cloned();
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, PAGE_LIMIT).await else {
        return html(StatusCode::INTERNAL_SERVER_ERROR, pages::refused("the page is too large"));
    };
    let tag = format!("\"{}\"", hex::encode(&sha2::Sha256::digest(&bytes)[..16]));
    let Ok(value) = axum::http::HeaderValue::from_str(&tag) else { return Response::from_parts(parts, bytes.into()) };
    parts.headers.insert(axum::http::header::ETAG, value);
    parts.headers.insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("private, no-cache"));
    let matches = asked.as_ref().and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(',').map(str::trim).any(|t| t == tag || t == "*" || t.strip_prefix("W/") == Some(&tag))
    });
    if matches {
        parts.status = StatusCode::NOT_MODIFIED;
        return Response::from_parts(parts, axum::body::Body::empty());
    }
    Response::from_parts(parts, bytes.into())
}

/// Lists of live objects read for one page, by `(namespace, kind)`: each read once.
#[derive(Default)]
struct Lists(HashMap<(String, &'static str), Result<Vec<serde_json::Value>, String>>);

/// `(group, version, kind)` of the kinds whose children the tree shows, and the kinds
/// of those children.
fn child_kinds(kind: &str) -> &'static [(&'static str, &'static str, &'static str)] {
    const RS: (&str, &str, &str) = ("apps", "v1", "ReplicaSet");
    const POD: (&str, &str, &str) = ("", "v1", "Pod");
    match kind {
        "Deployment.apps" => &[RS],
        "ReplicaSet.apps" | "StatefulSet.apps" | "DaemonSet.apps" | "Job.batch" => &[POD],
        _ => &[],
    }
}

/// `(group, version, kind)` of an object's `Kind[.group]` as the status writes it.
fn gvk_of(kind: &str) -> Option<(&'static str, &'static str, &'static str)> {
    Some(match kind {
        "Deployment.apps" => ("apps", "v1", "Deployment"),
        "ReplicaSet.apps" => ("apps", "v1", "ReplicaSet"),
        "StatefulSet.apps" => ("apps", "v1", "StatefulSet"),
        "DaemonSet.apps" => ("apps", "v1", "DaemonSet"),
        "Job.batch" => ("batch", "v1", "Job"),
        _ => return None,
    })
}

fn api(client: &kube::Client, ns: &str, (group, version, kind): (&str, &str, &str)) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind)))
}

/// The resource tree of `st`: its objects with the health the status holds, and the
/// live children of its workloads (bounded: [`MAX_CHILDREN`] a node, one list of at
/// most [`LIST_LIMIT`] objects per namespace and kind).
async fn tree(client: &kube::Client, st: &AppStatus) -> Vec<Node> {
    let mut lists = Lists::default();
    let mut out = Vec::with_capacity(st.resources.len());
    for r in &st.resources {
        out.push(node_of(client, r, &mut lists).await);
    }
    out
}

async fn node_of(client: &kube::Client, r: &crate::status::ResourceStatus, lists: &mut Lists) -> Node {
    let mut node =
        Node { object: r.object.clone(), health: r.health, message: r.health_message.clone(), ..Node::default() };
    let mut parts = r.object.splitn(3, '/');
    let (Some(kind), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else { return node };
    let Some(gvk) = gvk_of(kind) else { return node };
    match api(client, ns, gvk).get_opt(name).await {
        Ok(Some(live)) => {
            let uid = live.metadata.uid.clone().unwrap_or_default();
            children(client, ns, kind, &uid, &mut node, lists, 0).await;
        }
        Ok(None) => {}
        Err(e) => node.error = Some(e.to_string()),
    }
    node
}

/// Fills `node`'s children: the objects of `kind`'s child kinds in `ns` owned by `uid`,
/// and theirs (two levels at most: Deployment → ReplicaSet → Pod).
async fn children(
    client: &kube::Client,
    ns: &str,
    kind: &str,
    uid: &str,
    node: &mut Node,
    lists: &mut Lists,
    depth: usize,
) {
    for &(group, version, child) in child_kinds(kind) {
        let key = (ns.to_string(), child);
        if !lists.0.contains_key(&key) {
            let listed = api(client, ns, (group, version, child))
                .list(&ListParams::default().limit(LIST_LIMIT))
                .await
                .map(|l| l.items.iter().filter_map(|o| typed(o, group, version, child)).collect())
                .map_err(|e| e.to_string());
            lists.0.insert(key.clone(), listed);
        }
        let owned: Vec<serde_json::Value> = match lists.0.get(&key) {
            Some(Ok(items)) => items.iter().filter(|o| owned_by(o, uid) && !retired(o)).cloned().collect(),
            Some(Err(e)) => {
                node.error = Some(e.clone());
                continue;
            }
            None => continue,
        };
        let child_kind = if group.is_empty() { child.to_string() } else { format!("{child}.{group}") };
        node.omitted += owned.len().saturating_sub(MAX_CHILDREN);
        for o in owned.iter().take(MAX_CHILDREN) {
            let name = o.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default();
            let health = crate::health::assess(Some(o));
            let mut c = Node {
                object: format!("{child_kind}/{ns}/{name}"),
                health: health.status,
                message: health.message,
                ..Node::default()
            };
            let child_uid = o.pointer("/metadata/uid").and_then(|u| u.as_str()).unwrap_or_default();
            if depth == 0 && !child_kinds(&child_kind).is_empty() {
                Box::pin(children(client, ns, &child_kind, child_uid, &mut c, lists, depth + 1)).await;
            }
            node.children.push(c);
        }
    }
}

/// `o` as JSON with its `apiVersion` and `kind` (the items of a list carry neither; the
/// health rules need both).
fn typed(o: &DynamicObject, group: &str, version: &str, kind: &str) -> Option<serde_json::Value> {
    let mut v = serde_json::to_value(o).ok()?;
    let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    let map = v.as_object_mut()?;
    map.insert("apiVersion".into(), api_version.into());
    map.insert("kind".into(), kind.into());
    Some(v)
}

/// Whether `o` names `uid` among its ownerReferences.
fn owned_by(o: &serde_json::Value, uid: &str) -> bool {
    o.pointer("/metadata/ownerReferences")
        .and_then(|r| r.as_array())
        .is_some_and(|refs| refs.iter().any(|r| r.get("uid").and_then(|u| u.as_str()) == Some(uid)))
}

/// An old ReplicaSet a Deployment keeps at zero replicas (for its rollout history):
/// not shown.
fn retired(o: &serde_json::Value) -> bool {
    o.get("kind").and_then(|k| k.as_str()) == Some("ReplicaSet")
        && o.pointer("/spec/replicas").and_then(serde_json::Value::as_i64) == Some(0)
        && o.pointer("/status/replicas").and_then(serde_json::Value::as_i64).unwrap_or(0) == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, axum::http::HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn cross_site_posts_are_refused() {
        let hosts = ["127.0.0.1:8090".to_string(), "localhost:8090".to_string()];
        let token = "abc123";
        let same = headers(&[("origin", "http://127.0.0.1:8090"), ("sec-fetch-site", "same-origin")]);
        assert_eq!(cross_site(&same, &hosts, token, Some(token)), None);
        assert_eq!(
            cross_site(&headers(&[]), &hosts, token, Some(token)),
            None,
            "no browser headers: the token decides"
        );
        for (h, t) in [
            (same.clone(), None),
            (same.clone(), Some("abc124")),
            (same.clone(), Some("abc12")),
            (headers(&[("origin", "http://evil.example")]), Some(token)),
            (headers(&[("origin", "null")]), Some(token)),
            (headers(&[("sec-fetch-site", "cross-site")]), Some(token)),
            (headers(&[("sec-fetch-site", "same-site")]), Some(token)),
        ] {
            assert!(cross_site(&h, &hosts, token, t).is_some(), "{h:?} {t:?}");
        }
    }

    #[tokio::test]
    async fn only_loopback_without_allow_remote() {
        let args = UiArgs { listen: "0.0.0.0:8090".parse().unwrap(), open: false, allow_remote: false };
        let err = run(&KubeArgs::default(), &args).await.unwrap_err().to_string();
        assert!(err.contains("not a loopback address") && err.contains("--allow-remote"), "{err}");
    }

    #[tokio::test]
    async fn an_unchanged_page_is_not_sent_again() {
        use tower_service::Service as _;
        let page = std::sync::Arc::new(std::sync::Mutex::new("first".to_string()));
        let served = page.clone();
        let mut router: Router = Router::new()
            .route("/", get(move || async move { html(StatusCode::OK, served.lock().unwrap().clone()) }))
            .route_layer(middleware::from_fn(etag));
        let mut get = async |if_none_match: Option<&str>| {
            let mut request = axum::http::Request::get("/");
            if let Some(tag) = if_none_match {
                request = request.header("if-none-match", tag);
            }
            let response = router.call(request.body(axum::body::Body::empty()).unwrap()).await.unwrap();
            let tag = response.headers().get("etag").map(|v| v.to_str().unwrap().to_string());
            let cache = response.headers().get("cache-control").map(|v| v.to_str().unwrap().to_string());
            let code = response.status();
            let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
            (code, tag, cache, String::from_utf8(body.to_vec()).unwrap())
        };
        let (code, tag, cache, body) = get(None).await;
        assert_eq!((code, body.as_str(), cache.as_deref()), (StatusCode::OK, "first", Some("private, no-cache")));
        let tag = tag.unwrap();
        let (code, again, _, body) = get(Some(&tag)).await;
        assert_eq!((code, again.as_deref(), body.as_str()), (StatusCode::NOT_MODIFIED, Some(tag.as_str()), ""));
        let (code, _, _, _) = get(Some(&format!("\"other\", W/{tag}"))).await;
        assert_eq!(code, StatusCode::NOT_MODIFIED, "a list of tags, weak form");
        *page.lock().unwrap() = "second".into();
        let (code, changed, _, body) = get(Some(&tag)).await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, "second"), "changed: sent again");
        assert_ne!(changed.unwrap(), tag);
    }

    #[test]
    fn trees_follow_owner_references() {
        let rs = serde_json::json!({"kind": "ReplicaSet", "metadata": {"ownerReferences": [{"uid": "u1"}]}, "spec": {"replicas": 0}});
        assert!(owned_by(&rs, "u1") && !owned_by(&rs, "u2"));
        assert!(retired(&rs));
        assert_eq!(child_kinds("Deployment.apps"), &[("apps", "v1", "ReplicaSet")]);
        assert!(child_kinds("ConfigMap").is_empty());
    }
}
