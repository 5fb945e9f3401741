//! GitHub commit statuses, checked on the wire: a loopback HTTP server records what
//! plumb sends and the records are held against GitHub's REST API documentation
//! ("Create a commit status": `POST /repos/{owner}/{repo}/statuses/{sha}`, JSON body
//! `state`/`target_url`/`description`/`context`, `Accept: application/vnd.github+json`,
//! `X-GitHub-Api-Version: 2022-11-28`, `Authorization: Bearer`, a `User-Agent`; answer
//! 201). No real GitHub is contacted.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri},
};
use plumb::{
    compare::SyncStatus,
    config::CommitStatusConfig,
    forge::{CommitStatus, Error, Notifier, State as CsState, Target},
    health::HealthStatus,
    status::{AppStatus, SyncRecord, SyncResult},
};

const SHA: &str = "8f2c1d0e9b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e";
const TOKEN: &str = "ghp_RecordedTestToken0123456789";

#[derive(Debug, Clone)]
struct Recorded {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: serde_json::Value,
}

type Log = Arc<Mutex<Vec<Recorded>>>;

/// A stand-in for api.github.com on loopback: records every request and answers with
/// `answer` (status, body).
async fn recorder(answer: (StatusCode, &'static str)) -> (String, Log) {
    let log: Log = Arc::default();
    let app = Router::new()
        .fallback(move |State(log): State<Log>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes| async move {
            log.lock().unwrap().push(Recorded {
                method,
                path: uri.path().to_string(),
                headers,
                body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
            });
            (answer.0, answer.1)
        })
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/api/v3"), log)
}

fn notifier(api_url: &str, token_file: &Path) -> Notifier {
    let cfg: CommitStatusConfig = serde_saphyr::from_str(&format!(
        "provider: github\napiUrl: {api_url}\ntokenFile: {}\ntargetUrl: https://plumb.example.invalid/api/v1/applications\n",
        token_file.display()
    ))
    .unwrap();
    Notifier::new(Target::new(&cfg, "git@github.example.invalid:acme/fleet.git").unwrap()).unwrap()
}

fn token_file(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("github-token");
    std::fs::write(&f, format!("{TOKEN}\n")).unwrap();
    f
}

/// What a pass left: its status and the sync it made.
fn report(sync: Option<SyncResult>, health: HealthStatus) -> (AppStatus, Option<SyncRecord>) {
    (
        AppStatus {
            app: "web".into(),
            revision: SHA.into(),
            synced_revision: SHA.into(),
            sync: SyncStatus::Synced,
            health,
            ..AppStatus::default()
        },
        sync.map(|result| SyncRecord {
            subject: "web: bump".into(),
            result,
            applied: vec!["apps/Deployment/web/web".into(), "v1/ConfigMap/web/site".into()],
            ..SyncRecord::new(SHA, plumb::status::SyncReason::NewRevision)
        }),
    )
}

#[tokio::test]
async fn github_statuses_follow_a_rollout_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = recorder((StatusCode::CREATED, r#"{"id": 1, "state": "pending"}"#)).await;
    let n = notifier(&api, &token_file(dir.path()));

    // sync done, Deployment still rolling out → pending; then Healthy → success; then quiet.
    let (st, rec) = report(Some(SyncResult::Succeeded), HealthStatus::Progressing);
    n.after_pass("web", &st, rec.as_ref()).await;
    n.after_pass("web", &report(None, HealthStatus::Progressing).0, None).await;
    n.after_pass("web", &report(None, HealthStatus::Healthy).0, None).await;
    n.after_pass("web", &report(None, HealthStatus::Healthy).0, None).await;

    let reqs = log.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2, "pending then success, nothing repeated: {reqs:#?}");
    for r in &reqs {
        assert_eq!(r.method, Method::POST);
        assert_eq!(r.path, format!("/api/v3/repos/acme/fleet/statuses/{SHA}"));
        assert_eq!(r.headers["authorization"], format!("Bearer {TOKEN}"), "token file read, newline stripped");
        assert_eq!(r.headers["accept"], "application/vnd.github+json");
        assert_eq!(r.headers["x-github-api-version"], "2022-11-28");
        assert_eq!(r.headers["content-type"], "application/json");
        assert!(r.headers["user-agent"].to_str().unwrap().starts_with("plumb/"));
        let mut keys: Vec<&str> = r.body.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["context", "description", "state", "target_url"], "only documented fields");
        assert_eq!(r.body["context"], "plumb/web");
        assert_eq!(r.body["target_url"], "https://plumb.example.invalid/api/v1/applications");
        assert!(r.body["description"].as_str().unwrap().chars().count() <= 140);
    }
    assert_eq!(reqs[0].body["state"], "pending");
    assert_eq!(reqs[0].body["description"], "Synced, Progressing: applied 2, pruned 0");
    assert_eq!(reqs[1].body["state"], "success");
    assert_eq!(reqs[1].body["description"], "Synced, Healthy: rollout done");
}

#[tokio::test]
async fn a_rejected_status_is_reported_without_the_token_and_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = recorder((
        StatusCode::UNPROCESSABLE_ENTITY,
        r#"{"message":"Validation Failed","errors":[{"resource":"Status","code":"custom","field":"description"}]}"#,
    ))
    .await;
    let n = notifier(&api, &token_file(dir.path()));
    let status = CommitStatus {
        sha: SHA.into(),
        state: CsState::Failure,
        context: "plumb/web".into(),
        description: "OutOfSync, Degraded: sync failed".into(),
    };
    let err = n.post(&status).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 422, .. }), "{err}");
    let text = format!("{err} {err:?}");
    assert!(text.contains("Validation Failed"), "{text}");
    assert!(!text.contains(TOKEN), "the token never appears in errors: {text}");
    assert_eq!(log.lock().unwrap().len(), 1);

    // after_pass forgets a failed post, so the same status goes out again next time
    let (st, rec) = report(Some(SyncResult::Succeeded), HealthStatus::Healthy);
    n.after_pass("web", &st, rec.as_ref()).await;
    let (st, rec) = report(Some(SyncResult::Succeeded), HealthStatus::Healthy);
    n.after_pass("web", &st, rec.as_ref()).await;
    assert_eq!(log.lock().unwrap().len(), 3, "a rejected status is retried on the next pass");
}

#[tokio::test]
async fn an_unreadable_token_file_is_named_and_nothing_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = recorder((StatusCode::CREATED, "{}")).await;
    let n = notifier(&api, &dir.path().join("missing-token"));
    let err = n
        .post(&CommitStatus {
            sha: SHA.into(),
            state: CsState::Success,
            context: "plumb/web".into(),
            description: "x".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Token { .. }) && err.to_string().contains("missing-token"), "{err}");
    assert!(log.lock().unwrap().is_empty());
}
