//! A small HTTP/1.1 client for forge APIs, on the hyper / hyper-util / hyper-rustls stack
//! that kube already brings (no second HTTP stack).
//!
//! HTTPS trusts the machine's CA certificates (`rustls-native-certs`, ring provider).
//! When the machine has none, HTTPS requests fail their handshake while plain HTTP still
//! works (tests on loopback).
//!
//! Behind a proxy: `HTTPS_PROXY` / `HTTP_PROXY` (or `ALL_PROXY`, lower case too) name
//! it, `NO_PROXY` lists the hosts, domains and networks reached directly, as curl reads
//! them (hyper-util's matcher). Requests through a proxy go through an HTTP `CONNECT`
//! tunnel (TLS stays end to end; a plain `http://` destination is tunnelled too), with
//! the proxy URL's user and password as `Proxy-Authorization: Basic`.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::{
    client::{
        legacy::{
            Client,
            connect::{HttpConnector, proxy::Tunnel},
        },
        proxy::matcher::Matcher,
    },
    rt::{TokioExecutor, TokioIo},
};

/// Largest response body read, in bytes (forge answers are a few KiB).
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Connecting, sending or receiving failed (DNS, refused, TLS, reset).
    #[error("request to {url} failed: {message}")]
    Transport {
        /// The URL requested (never carries credentials: they travel in headers).
        url: String,
        /// The transport error, with its causes.
        message: String,
    },
    /// No complete answer within the timeout.
    #[error("request to {url} timed out after {seconds} s")]
    Timeout {
        /// The URL requested.
        url: String,
        /// The timeout, in seconds.
        seconds: u64,
    },
    /// No TLS client configuration could be built.
    #[error("TLS setup: {message}")]
    Tls {
        /// rustls's message.
        message: String,
    },
    /// The answer's body exceeded its limit ([`MAX_RESPONSE_BYTES`] for forges).
    #[error("answer from {url} is larger than {limit} bytes")]
    TooLarge {
        /// The URL requested.
        url: String,
        /// The limit, in bytes.
        limit: usize,
    },
}

/// An HTTP client with connection reuse; cheap to clone.
#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpsConnector<ProxyConnector>, Full<Bytes>>,
}

/// Opens the TCP connection of a request: straight to the destination, or a `CONNECT`
/// tunnel through the proxy the environment names for it (see the module docs).
#[derive(Clone)]
pub struct ProxyConnector {
    direct: HttpConnector,
    proxies: Arc<Matcher>,
}

impl ProxyConnector {
    /// Proxies as the process environment names them.
    fn from_env() -> Self {
        let mut direct = HttpConnector::new();
        direct.enforce_http(false);
        Self { direct, proxies: Arc::new(Matcher::from_env()) }
    }
}

type Connecting = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<TokioIo<tokio::net::TcpStream>, Box<dyn std::error::Error + Send + Sync>>,
            > + Send,
    >,
>;

impl tower_service::Service<http::Uri> for ProxyConnector {
    type Response = TokioIo<tokio::net::TcpStream>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Connecting;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: http::Uri) -> Self::Future {
        let mut direct = self.direct.clone();
        match self.proxies.intercept(&dst) {
            None => Box::pin(async move { direct.call(dst).await.map_err(Into::into) }),
            Some(proxy) => {
                let mut tunnel = Tunnel::new(proxy.uri().clone(), direct);
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                Box::pin(async move { tunnel.call(dst).await.map_err(Into::into) })
            }
        }
    }
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpClient")
    }
}

impl HttpClient {
    /// A client for `http://` and `https://` URLs.
    ///
    /// # Errors
    /// [`HttpError::Tls`] when no TLS configuration can be built.
    pub fn new() -> Result<Self, HttpError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = match HttpsConnectorBuilder::new().with_provider_and_native_roots(provider.clone()) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("no CA certificates found ({e}); HTTPS requests to forges will fail");
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| HttpError::Tls { message: e.to_string() })?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                HttpsConnectorBuilder::new().with_tls_config(config)
            }
        };
        let connector = builder.https_or_http().enable_http1().wrap_connector(ProxyConnector::from_env());
        Ok(Self { inner: Client::builder(TokioExecutor::new()).build(connector) })
    }

    /// Sends `req` and reads the whole answer, within `timeout`.
    ///
    /// # Errors
    /// [`HttpError`]: transport failure, timeout, or an answer over
    /// [`MAX_RESPONSE_BYTES`]. Any HTTP status is a success here; callers judge it.
    pub async fn send(&self, req: Request<Bytes>, timeout: Duration) -> Result<(StatusCode, Bytes), HttpError> {
        let (status, _, body) = self.exchange(req, timeout, MAX_RESPONSE_BYTES).await?;
        Ok((status, body))
    }

    /// Sends `req` and reads the answer's status, headers and body (at most `max_bytes`),
    /// within `timeout`. Redirects are not followed.
    ///
    /// # Errors
    /// [`HttpError`]: transport failure, timeout, or a body over `max_bytes`.
    pub async fn exchange(
        &self,
        req: Request<Bytes>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<(StatusCode, http::HeaderMap, Bytes), HttpError> {
        let url = crate::config::repo_url::redact(&req.uri().to_string());
        let (parts, body) = req.into_parts();
        let req = Request::from_parts(parts, Full::new(body));
        let exchange = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| HttpError::Transport { url: url.clone(), message: chain(&e) })?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let body = Limited::new(resp.into_body(), max_bytes).collect().await.map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    HttpError::TooLarge { url: url.clone(), limit: max_bytes }
                } else {
                    HttpError::Transport { url: url.clone(), message: e.to_string() }
                }
            })?;
            Ok((status, headers, body.to_bytes()))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(HttpError::Timeout { url: url.clone(), seconds: timeout.as_secs() }))
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
