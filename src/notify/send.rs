//! The IO of notifications: one worker per provider, fed through a bounded queue
//! ([`QUEUE_LEN`]), so that a pass only decides and enqueues: a slow or dead sink
//! never holds a reconcile. Each delivery has [`TIMEOUT`] per attempt and is retried
//! with a growing delay (1 s, 2 s, 4 s; `backon`'s exponential backoff) on a transport
//! error, a timeout, HTTP 429 or 5xx; then it is dropped and logged. A full queue
//! drops the new message (logged). A delivery queued by a fenced pass (a sharded
//! replica, [`crate::fence`]) is sent, and each retry made, only while the fence of its
//! pass is open: while a renew is late it waits (at most [`FENCE_WAIT`]); once the hold
//! it was queued under ended (the shard lost, released, or taken again) it is dropped
//! (`fenced`). A message no provider's copy of which went out, one dropped so, is
//! forgotten as told ([`super::Memory::untell`], [`Copies`]): this replica's next pass
//! of the application, if it runs it again, tells what it still finds (a Degraded
//! health, a render failure, a held prune; a sync's result is told only by the pass
//! that synced). An attempt already under way when the fence closes still completes
//! (at most [`TIMEOUT`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use backon::{ExponentialBuilder, Retryable as _};
use bytes::Bytes;
use lettre::{
    AsyncSmtpTransport, AsyncTransport as _, Message, Tokio1Executor,
    message::{Mailbox, MultiPart},
    transport::smtp::authentication::Credentials,
};
use tokio::sync::mpsc;

use super::{Memory, body::Mail};
use crate::{
    config::{NotificationProvider, ProviderType, Trigger},
    fence::Fence,
    forge::HttpClient,
    metrics::Metrics,
};

/// Messages waiting for one provider; past it new ones are dropped.
pub const QUEUE_LEN: usize = 64;

/// The longest one attempt at a delivery may take (connect, send, answer).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Attempts after the first failed one.
pub const RETRIES: usize = 3;

/// The longest a delivery waits for its fence to open again (a renew late) before it
/// is dropped: a renew late either lands or ends the hold within a round and a request
/// timeout of the election (a few seconds), and meanwhile the provider's other messages
/// wait.
pub const FENCE_WAIT: Duration = Duration::from_secs(10);

/// What one provider is sent.
pub(super) enum Payload {
    /// An HTTP POST: body and extra headers.
    Http {
        /// The body (JSON).
        body: Bytes,
        /// Headers besides `Content-Type: application/json`.
        headers: Vec<(&'static str, String)>,
    },
    /// An e-mail.
    Mail(Mail),
}

/// One message for one provider.
pub(super) struct Delivery {
    pub(super) app: String,
    /// The revision the event is about (to forget it as told when dropped).
    pub(super) revision: String,
    pub(super) trigger: Trigger,
    pub(super) payload: Payload,
    /// The fence of the pass that queued it (`None`: unfenced).
    pub(super) fence: Option<Fence>,
    /// The copies of the same message to the other providers.
    pub(super) copies: Arc<Copies>,
}

/// The copies of one message, one per provider it is routed to: whether the message
/// was told at all once each copy is done.
#[derive(Debug)]
pub(super) struct Copies {
    left: std::sync::atomic::AtomicUsize,
    sent: std::sync::atomic::AtomicBool,
    fenced: std::sync::atomic::AtomicBool,
}

impl Copies {
    /// `n` copies under way.
    pub(super) fn new(n: usize) -> Self {
        Self { left: n.into(), sent: false.into(), fenced: false.into() }
    }

    /// One copy done (`sent`, or dropped for its fence: `fenced`); true when it was the
    /// last, none was sent and one was dropped for its fence: the message is then
    /// forgotten as told ([`Memory::untell`]).
    fn done(&self, sent: bool, fenced: bool) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        if sent {
            self.sent.store(true, SeqCst);
        }
        if fenced {
            self.fenced.store(true, SeqCst);
        }
        self.left.fetch_sub(1, SeqCst) == 1 && !self.sent.load(SeqCst) && self.fenced.load(SeqCst)
    }
}

/// Where a provider's messages go, opened once per policy.
enum Target {
    Http { url: String, client: Arc<HttpClient> },
    Smtp(Box<Smtp>),
}

/// An SMTP relay, the sender and the recipients.
struct Smtp {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
}

/// A provider ready to take messages: its type, its HMAC key (`webhook`), its queue.
pub(super) struct Outlet {
    pub(super) kind: ProviderType,
    pub(super) key: Option<Vec<u8>>,
    queue: mpsc::Sender<Delivery>,
    metrics: Arc<Metrics>,
}

impl Outlet {
    /// Queues `d`; false (and logged) when the queue is full or the worker gone.
    pub(super) fn offer(&self, provider: &str, d: Delivery) -> bool {
        match self.queue.try_send(d) {
            Ok(()) => true,
            Err(e) => {
                let d = match &e {
                    mpsc::error::TrySendError::Full(d) | mpsc::error::TrySendError::Closed(d) => d,
                };
                tracing::warn!(provider, app = %d.app, trigger = %d.trigger, "notification dropped: queue full");
                self.metrics.count_notification(provider, d.trigger.as_str(), "dropped");
                d.copies.done(false, false);
                false
            }
        }
    }
}

/// Opens every provider of `providers` and starts its worker (on the current tokio
/// runtime; it ends when its [`Outlet`] is dropped and its queue drained). A provider
/// whose address, key or password cannot be read is left out, logged.
pub(super) fn open_all(
    providers: &[NotificationProvider],
    metrics: &Arc<Metrics>,
    memory: &Arc<Mutex<Memory>>,
) -> HashMap<String, Outlet> {
    let client = match HttpClient::new() {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            tracing::warn!("notifications over HTTP off: {e}");
            None
        }
    };
    let mut out = HashMap::new();
    for p in providers {
        match open(p, client.as_ref()) {
            Ok((target, key)) => {
                let (queue, rx) = mpsc::channel(QUEUE_LEN);
                tokio::spawn(work(p.name.value.clone(), target, rx, (metrics.clone(), memory.clone())));
                out.insert(p.name.value.clone(), Outlet { kind: p.type_, key, queue, metrics: metrics.clone() });
            }
            Err(e) => tracing::warn!(provider = %p.name.value, "notification provider off: {e}"),
        }
    }
    out
}

/// A secret file's content as text (one trailing newline stripped).
fn read_text(path: &std::path::Path) -> Result<String, String> {
    let bytes = crate::config::read_secret(path).map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", path.display()))
}

/// The target and HMAC key of `p`.
fn open(p: &NotificationProvider, client: Option<&Arc<HttpClient>>) -> Result<(Target, Option<Vec<u8>>), String> {
    let url = match (&p.url, &p.url_file) {
        (Some(u), _) => u.value.clone(),
        (None, Some(f)) => read_text(&f.value)?.trim().to_string(),
        (None, None) => return Err("no address (urlSecretRef not read?)".into()),
    };
    crate::config::notifications::check_url(p.type_, &url)?;
    let key = match &p.secret_file {
        Some(f) => Some(crate::config::read_secret(&f.value).map_err(|e| format!("{}: {e}", f.value.display()))?),
        None => None,
    };
    let target = match p.type_ {
        ProviderType::Smtp => smtp(p, &url)?,
        _ => Target::Http { url, client: client.ok_or("no HTTP client")?.clone() },
    };
    Ok((target, key))
}

/// An SMTP transport to `url` (see [`NotificationProvider::url`]) with `p`'s sender,
/// recipients and credentials.
fn smtp(p: &NotificationProvider, url: &str) -> Result<Target, String> {
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    let host = parsed.host_str().unwrap_or_default();
    let builder = match parsed.scheme() {
        "smtp" => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host)
            .map_err(|e| e.to_string())?
            .port(parsed.port().unwrap_or(587)),
        "smtps" => AsyncSmtpTransport::<Tokio1Executor>::relay(host)
            .map_err(|e| e.to_string())?
            .port(parsed.port().unwrap_or(465)),
        _ => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host).port(parsed.port().unwrap_or(25)),
    };
    let mut builder = builder.timeout(Some(TIMEOUT));
    if let (Some(user), Some(f)) = (&p.username, &p.password_file) {
        // the address may come from a file or Secret, unseen by the policy's validation
        crate::config::notifications::plain_credentials(url)?;
        builder = builder.credentials(Credentials::new(user.clone(), read_text(&f.value)?));
    }
    let mailbox = |s: &str| s.parse::<Mailbox>().map_err(|e| format!("`{s}`: {e}"));
    let from = mailbox(p.from.as_deref().unwrap_or_default())?;
    let to = p.to.iter().map(|t| mailbox(t)).collect::<Result<Vec<_>, _>>()?;
    Ok(Target::Smtp(Box::new(Smtp { transport: builder.build(), from, to })))
}

/// What `e` says, naming only the scheme and host of `url`: the path and query of a
/// Slack, Teams or Workflows address are its secret, and logs are read by more people
/// than Secrets.
fn without_url(e: &crate::forge::HttpError, url: &str) -> String {
    use crate::forge::HttpError;
    let origin = url::Url::parse(url)
        .map_or_else(|_| "the provider's address".to_string(), |u| u.origin().ascii_serialization());
    match e {
        HttpError::Transport { message, .. } => {
            format!("request to {origin} failed: {}", message.replace(url, &origin))
        }
        HttpError::Timeout { seconds, .. } => format!("request to {origin} timed out after {seconds} s"),
        HttpError::TooLarge { limit, .. } => format!("answer from {origin} is larger than {limit} bytes"),
        HttpError::Tls { message } => format!("TLS setup: {message}"),
    }
}

/// Why an attempt failed, and whether another may succeed.
#[derive(Debug)]
struct Failed {
    message: String,
    retry: bool,
    /// Not sent at all: the fence of the pass that queued it closed.
    fenced: bool,
}

impl Failed {
    fn new(message: impl Into<String>, retry: bool) -> Self {
        Self { message: message.into(), retry, fenced: false }
    }
}

/// Sends `d` to `target` once its pass's fence is open (waiting while a renew is late,
/// at most [`FENCE_WAIT`]); not at all once the hold it was queued under ended.
async fn attempt(target: &Target, d: &Delivery) -> Result<(), Failed> {
    if let Some(f) = &d.fence {
        let until = tokio::time::Instant::now() + FENCE_WAIT;
        while !f.is_open() {
            let ended = f.ended();
            if ended || tokio::time::Instant::now() >= until {
                let message = if ended {
                    format!("this replica ({}) no longer holds shard {} of {}", f.replica, f.shard, d.app)
                } else {
                    let wait = FENCE_WAIT.as_secs();
                    format!(
                        "this replica's ({}) renew of shard {} of {} is late by more than {wait} s",
                        f.replica, f.shard, d.app
                    )
                };
                return Err(Failed { message, retry: false, fenced: true });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    target.send(&d.payload).await
}

impl Target {
    async fn send(&self, payload: &Payload) -> Result<(), Failed> {
        match (self, payload) {
            (Target::Http { url, client }, Payload::Http { body, headers }) => {
                let mut req = http::Request::post(url.as_str()).header(http::header::CONTENT_TYPE, "application/json");
                for (name, value) in headers {
                    req = req.header(*name, value.as_str());
                }
                let req = req.body(body.clone()).map_err(|e| Failed::new(e.to_string(), false))?;
                match client.send(req, TIMEOUT).await {
                    Ok((code, _)) if code.is_success() => Ok(()),
                    Ok((code, _)) => Err(Failed::new(
                        format!("answered {code}"),
                        code.is_server_error() || code == http::StatusCode::TOO_MANY_REQUESTS,
                    )),
                    Err(e) => Err(Failed::new(without_url(&e, url), true)),
                }
            }
            (Target::Smtp(smtp), Payload::Mail(m)) => {
                let mut b = Message::builder().from(smtp.from.clone()).subject(m.subject.clone());
                for t in &smtp.to {
                    b = b.to(t.clone());
                }
                let msg = b
                    .multipart(MultiPart::alternative_plain_html(m.plain.clone(), m.html.clone()))
                    .map_err(|e| Failed::new(e.to_string(), false))?;
                // lettre's timeout bounds each read or write, not the whole exchange
                match tokio::time::timeout(TIMEOUT, smtp.transport.send(msg)).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(Failed::new(e.to_string(), !e.is_permanent())),
                    Err(_) => Err(Failed::new(format!("timed out after {} s", TIMEOUT.as_secs()), true)),
                }
            }
            _ => Err(Failed::new("payload does not fit the provider", false)),
        }
    }
}

/// The worker of provider `name`: sends each delivery of `rx` in turn, retrying and
/// fencing as the module docs say.
async fn work(
    name: String,
    target: Target,
    mut rx: mpsc::Receiver<Delivery>,
    (metrics, memory): (Arc<Metrics>, Arc<Mutex<Memory>>),
) {
    while let Some(d) = rx.recv().await {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_secs(1))
            .with_max_delay(Duration::from_secs(30))
            .with_max_times(RETRIES);
        let sent = (|| attempt(&target, &d))
            .retry(backoff)
            .when(|f: &Failed| f.retry)
            .notify(|f: &Failed, after: Duration| {
                tracing::debug!(provider = %name, app = %d.app, "notification failed ({}), again in {after:?}", f.message);
            })
            .await;
        let untold = d.copies.done(sent.is_ok(), sent.as_ref().is_err_and(|f| f.fenced));
        if untold && let Ok(mut m) = memory.lock() {
            m.untell(&d.app, &d.revision, d.trigger);
        }
        let result = match &sent {
            Ok(()) => "sent",
            Err(f) if f.fenced => "fenced",
            Err(_) => "failed",
        };
        metrics.count_notification(&name, d.trigger.as_str(), result);
        match sent {
            Ok(()) => tracing::debug!(provider = %name, app = %d.app, trigger = %d.trigger, "notification sent"),
            Err(f) if f.fenced => {
                tracing::warn!(provider = %name, app = %d.app, trigger = %d.trigger, "notification dropped: {}", f.message)
            }
            Err(f) => {
                tracing::warn!(provider = %name, app = %d.app, trigger = %d.trigger, "notification not sent: {}", f.message)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_saphyr::{Location, Spanned};

    /// A failed post names the provider's host, never the secret path of its address.
    #[test]
    fn a_failure_never_prints_the_address() {
        use crate::forge::HttpError;
        let url = "https://hooks.slack.com/services/T000/B000/s3cr3tPath?sig=abc";
        for e in [
            HttpError::Transport { url: url.into(), message: format!("connect to {url}: refused") },
            HttpError::Timeout { url: url.into(), seconds: 10 },
            HttpError::TooLarge { url: url.into(), limit: 1 },
        ] {
            let m = super::without_url(&e, url);
            assert!(m.contains("https://hooks.slack.com") && !m.contains("s3cr3t") && !m.contains("sig="), "{m}");
        }
    }

    use super::*;

    fn spanned(s: &str) -> Spanned<String> {
        Spanned::new(s.to_string(), Location::UNKNOWN, Location::UNKNOWN)
    }

    fn provider(name: &str, type_: ProviderType, url: &str) -> NotificationProvider {
        NotificationProvider::at(spanned(name), type_, spanned(url))
    }

    /// The three SMTP schemes open a transport (TLS set up with the system roots);
    /// a sender or recipient that is not an address is named.
    #[test]
    fn smtp_providers_open_for_each_scheme() {
        for url in ["smtp://mail.example.com", "smtps://mail.example.com:465", "smtp+plain://127.0.0.1:25"] {
            let p = NotificationProvider {
                from: Some("plumb <plumb@example.com>".into()),
                to: vec!["oncall@example.com".into()],
                ..provider("mail", ProviderType::Smtp, url)
            };
            assert!(matches!(open(&p, None), Ok((Target::Smtp(_), None))), "{url}");
        }
        let bad = NotificationProvider {
            from: Some("plumb@example.com".into()),
            to: vec!["not an address".into()],
            ..provider("mail", ProviderType::Smtp, "smtp://mail.example.com")
        };
        assert!(open(&bad, None).err().unwrap_or_default().contains("`not an address`"));
    }

    /// A sink answering 503 to every request, counting them, until aborted.
    async fn failing_sink() -> (String, Arc<std::sync::atomic::AtomicUsize>, tokio::task::JoinHandle<()>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = vec![0; 4096];
                let _ = s.read(&mut buf).await;
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        (url, seen, task)
    }

    /// A message queued by a fenced pass goes out, and is retried, only while the pass's
    /// fence is open: while a renew is late it waits, and goes out once the renew lands;
    /// once the hold ends, no retry is made and it is forgotten as told; queued under a
    /// hold taken again since, it is never sent. Each drop counted `fenced`.
    #[tokio::test]
    async fn a_message_of_a_shard_let_go_is_not_sent() {
        use crate::{
            fence::{Hold, Holds},
            status::{AppStatus, SyncRecord, SyncResult},
        };
        use std::sync::atomic::Ordering;
        let (url, seen, sink) = failing_sink().await;
        let metrics = Arc::new(Metrics::default());
        let memory: Arc<Mutex<Memory>> = Arc::default();
        let failed =
            SyncRecord { result: SyncResult::Failed, ..SyncRecord::new("abc", crate::status::SyncReason::NewRevision) };
        let st = AppStatus { app: "web".into(), revision: "abc".into(), ..AppStatus::default() };
        let told = super::super::decide::events(&mut memory.lock().unwrap(), &st, Some(&failed), 0);
        assert_eq!(told.len(), 1);
        let outlets = open_all(&[provider("chat", ProviderType::Slack, &url)], &metrics, &memory);
        let holds = Arc::new(Holds::with_deadline(Duration::from_secs(60)));
        let hold = Hold { generation: 1, renewed_at: crate::clock::Instant::now(), transitions: 0 };
        holds.set(3, hold);
        let fence = Fence::of("r1".into(), 3, 6, holds.clone()).unwrap();
        let delivery = || Delivery {
            app: "web".into(),
            revision: "abc".into(),
            trigger: Trigger::SyncFailed,
            payload: Payload::Http { body: Bytes::from_static(b"{}"), headers: vec![] },
            fence: Some(fence.clone()),
            copies: Arc::new(Copies::new(1)),
        };
        let fenced = |n: usize| {
            metrics.encode().contains(&format!(
                r#"plumb_notifications_total{{provider="chat",trigger="sync-failed",result="fenced"}} {n}"#
            ))
        };
        // a renew late: the message waits for it
        let late = crate::clock::Instant::now().checked_sub(Duration::from_secs(61)).expect("uptime");
        holds.set(3, Hold { renewed_at: late, ..hold });
        assert!(outlets["chat"].offer("chat", delivery()));
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(seen.load(Ordering::SeqCst), 0, "held while the renew is late");
        // the renew lands: sent, answered 503, retried after 1 s; the shard is let go before that
        holds.set(3, Hold { renewed_at: crate::clock::Instant::now(), ..hold });
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while seen.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(seen.load(Ordering::SeqCst), 1, "the first attempt went out once the fence opened");
        holds.end(3);
        while !fenced(1) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(fenced(1), "{}", metrics.encode());
        assert_eq!(seen.load(Ordering::SeqCst), 1, "no retry after the shard was let go");
        assert!(!memory.lock().unwrap().told("web", "abc", Trigger::SyncFailed), "forgotten as told");
        // taken again (a new generation): a message of the old hold is never sent
        holds.set(3, Hold { generation: 2, ..hold });
        assert!(outlets["chat"].offer("chat", delivery()));
        while !fenced(2) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(fenced(2), "{}", metrics.encode());
        assert_eq!(seen.load(Ordering::SeqCst), 1, "nothing sent under the old generation's fence");
        sink.abort();
    }

    /// A message routed to two providers is forgotten as told only when neither copy
    /// was sent and one was dropped for its fence.
    #[test]
    fn a_message_is_untold_only_when_no_copy_went_out() {
        let one_sent = Copies::new(2);
        assert!(!one_sent.done(true, false) && !one_sent.done(false, true), "the other provider told it");
        let sent_last = Copies::new(2);
        assert!(!sent_last.done(false, true) && !sent_last.done(true, false));
        let none = Copies::new(2);
        assert!(!none.done(false, true) && none.done(false, false), "neither went out, one for its fence");
        let failed = Copies::new(1);
        assert!(!failed.done(false, false), "failed after its retries: told, as before");
    }

    /// A sink that accepts connections and never answers: queuing never waits, and past
    /// [`QUEUE_LEN`] waiting messages new ones are dropped.
    #[tokio::test]
    async fn a_dead_sink_never_holds_the_caller() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                open.push(s);
            }
        });
        let metrics = Arc::new(Metrics::default());
        let outlets = open_all(&[provider("dead", ProviderType::Slack, &url)], &metrics, &Arc::default());
        let outlet = &outlets["dead"];
        let started = std::time::Instant::now();
        let queued: Vec<bool> = (0..QUEUE_LEN + 10)
            .map(|i| {
                let payload = Payload::Http { body: Bytes::from(format!("{{\"text\":\"{i}\"}}")), headers: vec![] };
                let (app, revision, copies) = ("web".into(), "abc".into(), Arc::new(Copies::new(1)));
                outlet.offer(
                    "dead",
                    Delivery { app, revision, trigger: Trigger::SyncFailed, payload, fence: None, copies },
                )
            })
            .collect();
        assert!(started.elapsed() < Duration::from_secs(1), "queuing does not wait for the sink");
        assert!(queued[..QUEUE_LEN].iter().all(|q| *q), "the queue takes {QUEUE_LEN}");
        assert!(!queued[QUEUE_LEN + 1], "then drops");
        let text = metrics.encode();
        assert!(
            text.contains(r#"plumb_notifications_total{provider="dead",trigger="sync-failed",result="dropped"}"#),
            "{text}"
        );
        held.abort();
    }
}
