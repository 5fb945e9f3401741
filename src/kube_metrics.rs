//! The kube client of `plumb serve`: `plumb_kube_requests_total{verb,code}` counts every
//! request it sends (a tower layer around its HTTP service), and each of its HTTP/1
//! connections buffers at most [`READ_BUFFER_BYTES`] for reading.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http::{Method, Request, Response, Uri};
use kube::client::{Body, ClientBuilder};

use crate::metrics::{KubeRequestLabels, Metrics};

/// The Kubernetes verb of a request: `watch` (a GET with `watch=true`), `get` (any
/// other GET, lists included), `dryrun` (a write with `dryRun=All`, which the API
/// server answers without persisting: Kubernetes API concepts, "Dry-run"), `create`,
/// `update`, `patch`, `delete`, or the method in lower case. Pure.
pub fn verb(method: &Method, uri: &Uri) -> String {
    let param = |want: &[&str]| uri.query().is_some_and(|q| q.split('&').any(|p| want.contains(&p)));
    let watch = param(&["watch=true", "watch=1"]);
    match *method {
        Method::GET if watch => "watch".into(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE if param(&["dryRun=All"]) => "dryrun".into(),
        Method::GET => "get".into(),
        Method::POST => "create".into(),
        Method::PUT => "update".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE => "delete".into(),
        ref m => m.as_str().to_ascii_lowercase(),
    }
}

/// The most bytes an HTTP/1 connection of [`client`] buffers for reading (hyper's
/// `max_buf_size`): 64 KiB. hyper's default (about 408 KiB) is reached by any large
/// response (a LIST of a namespace's ConfigMaps), and a connection keeps the buffer it
/// grew for as long as it lives; a watch holds its connection for the process's life, so
/// each watch (one per kind and destination namespace, see [`crate::watch`]) kept up to
/// about 0.9 MiB. Responses are not limited by it: bodies are read in chunks of at most
/// this size, and response headers larger than it are refused (the API server's are far
/// smaller).
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

/// A client built from `config` whose requests are counted on `metrics`: kube's stack
/// (base URL, retries of 429/503/504, authentication, extra headers, connect and write
/// timeouts, rustls) over connections whose read buffer is [`READ_BUFFER_BYTES`] at
/// most; each attempt of a write (a retry too) is sent only while the fence in scope is
/// open ([`fenced`]). A configuration with a proxy (`proxy-url`) or an exec credential
/// plugin gets kube's own stack instead (its proxy connectors, its client certificates'
/// expiry), with hyper's default buffers, where the fence is checked before the first
/// attempt alone (by the writers themselves).
///
/// # Errors
/// `config` names no usable cluster (TLS or proxy settings invalid, a token file that
/// cannot be read).
pub fn client(config: kube::Config, metrics: Arc<Metrics>) -> anyhow::Result<kube::Client> {
    use kube::client::ConfigExt;
    use tower::ServiceBuilder;

    let layer = CountedLayer(metrics);
    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build());
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let mut connector = hyper_timeout::TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http = hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new())
        .http1_max_buf_size(READ_BUFFER_BYTES)
        .build(connector);
    let retry = kube::client::retry::RetryPolicy::server_retry();
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| tower::retry::RetryLayer::new(retry)))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(tower::filter::AsyncFilterLayer::new(fenced))
        .layer(layer)
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// A [`crate::cluster::ClientFactory`] of [`client`]s counted on `metrics`.
pub fn factory(metrics: Arc<Metrics>) -> crate::cluster::ClientFactory {
    Arc::new(move |config| client(config, metrics.clone()))
}

/// Wraps a service in [`Counted`].
#[derive(Clone)]
struct CountedLayer(Arc<Metrics>);

impl<S> tower::Layer<S> for CountedLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted { inner, metrics: self.0.clone() }
    }
}

/// The counting service.
#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, B> tower::Service<Request<Body>> for Counted<S>
where
    S: tower::Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let verb = verb(req.method(), req.uri());
        tracing::trace!(target: "plumb::kube_requests", verb = %verb, path = req.uri().path());
        let metrics = self.metrics.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let out = fut.await;
            let code = match &out {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            metrics.kube_requests.get_or_create(&KubeRequestLabels { verb, code }).inc();
            out
        })
    }
}

/// The fence of each attempt of a write (any method but GET and HEAD): `Ok` while the
/// fence of the pass that makes it is open ([`crate::fence::check`]); otherwise
/// [`crate::fence::Closed`], and nothing is sent. Run by tower's `AsyncFilter` below
/// kube's retries, so a write retried after a 429, 503 or 504 (kube waits out
/// `Retry-After` between attempts) is checked again: no attempt is started after this
/// replica stopped holding the shard. The check precedes the wait for a connection (a
/// new connection's connect and TLS handshake, at most the configuration's connect
/// timeout): an attempt started just before the fence closed may still go out that much
/// later. The filter's future runs in the task that awaits the request, the pass's
/// (whose fence is a task-local, [`crate::fence::within`]), and calls the service below
/// only once the check passed; a request outside any fence (the election, watches,
/// reads) passes unchecked.
async fn fenced(req: Request<Body>) -> Result<Request<Body>, crate::fence::Closed> {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        crate::fence::check(|| format!("{} {}", req.method(), req.uri().path()))?;
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write whose fence closed is not sent, a retry of it neither; reads and
    /// writes outside a fence go through.
    #[tokio::test]
    async fn a_write_is_sent_only_while_its_fence_is_open() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tower::{Service as _, ServiceExt as _};

        use crate::fence::{Fence, Hold, Holds, within};

        let sent = Arc::new(AtomicUsize::new(0));
        let counter = sent.clone();
        let inner = tower::service_fn(move |_req: Request<Body>| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, tower::BoxError>(Response::new(()))
            }
        });
        let mut svc = tower::Layer::layer(&tower::filter::AsyncFilterLayer::new(fenced), inner);
        let req = |m: Method| {
            Request::builder().method(m).uri("/api/v1/namespaces/a/configmaps/c").body(Body::empty()).expect("request")
        };
        let holds = Arc::new(Holds::with_deadline(std::time::Duration::from_secs(7)));
        holds.set(0, Hold { generation: 1, renewed_at: crate::clock::Instant::now(), transitions: 0 });
        let fence = Some(Fence::of("r".into(), 0, 1, holds.clone()).expect("held"));
        let open = within(fence.clone(), async { svc.ready().await?.call(req(Method::PATCH)).await }).await;
        assert!(open.is_ok(), "open");
        holds.end(0);
        let refused = within(fence.clone(), async { svc.ready().await?.call(req(Method::PATCH)).await }).await;
        let refused = refused.expect_err("closed");
        assert!(refused.to_string().contains("PATCH /api/v1/namespaces/a/configmaps/c: dropped"), "{refused}");
        let read = within(fence.clone(), async { svc.ready().await?.call(req(Method::GET)).await }).await;
        assert!(read.is_ok(), "a read");
        let unfenced = svc.ready().await.expect("ready").call(req(Method::PATCH)).await;
        assert!(unfenced.is_ok(), "outside a fence");
        assert_eq!(sent.load(Ordering::SeqCst), 3, "the refused write was never sent");
    }

    #[test]
    fn verbs() {
        let uri = |s: &str| s.parse::<Uri>().unwrap_or_default();
        assert_eq!(verb(&Method::GET, &uri("/api/v1/namespaces/a/configmaps?watch=true&labelSelector=x")), "watch");
        assert_eq!(verb(&Method::GET, &uri("/api/v1/namespaces/a/configmaps?watchy=true")), "get");
        assert_eq!(verb(&Method::PATCH, &uri("/apis/apps/v1/namespaces/a/deployments/w?fieldManager=plumb")), "patch");
        assert_eq!(verb(&Method::POST, &uri("/api/v1/namespaces")), "create");
        let dry = "/api/v1/namespaces/a/configmaps/c?fieldManager=plumb&dryRun=All&force=true";
        assert_eq!(verb(&Method::PATCH, &uri(dry)), "dryrun", "a dry-run writes nothing");
        assert_eq!(verb(&Method::PUT, &uri("/api/v1/namespaces/a/configmaps/c?dryRun=All")), "dryrun");
        assert_eq!(verb(&Method::HEAD, &uri("/")), "head");
    }
}
