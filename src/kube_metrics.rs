//! `plumb_kube_requests_total{verb,code}`: every request the kube client of `plumb
//! serve` sends, counted by a tower layer around the client's HTTP service.

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

/// A client built from `config` whose requests are counted on `metrics`.
///
/// # Errors
/// `config` names no usable cluster (TLS or proxy settings invalid).
pub fn client(config: kube::Config, metrics: Arc<Metrics>) -> anyhow::Result<kube::Client> {
    let layer = tower::layer::layer_fn(move |inner| Counted { inner, metrics: metrics.clone() });
    Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
}

/// A [`crate::cluster::ClientFactory`] of [`client`]s counted on `metrics`.
pub fn factory(metrics: Arc<Metrics>) -> crate::cluster::ClientFactory {
    Arc::new(move |config| client(config, metrics.clone()))
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

#[cfg(test)]
mod tests {
    use super::*;

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
