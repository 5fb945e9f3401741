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

/// A stand-in for api.github.com answering the issue-comment endpoints as GitHub's REST
/// API documents them ("Get the authenticated user" 200 with its `login`, "List issue
/// comments" 200 with an array, "Update an issue
/// comment" 200 or 403 when the comment is not the token's, "Create an issue comment"
/// 201 with the new comment), recording every request.
async fn comment_api(list: &'static str, patch: StatusCode) -> (String, Log) {
    let log: Log = Arc::default();
    let app = Router::new()
        .fallback(move |State(log): State<Log>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes| async move {
            let answer = match method.as_str() {
                "GET" if uri.path().ends_with("/user") => {
                    (StatusCode::OK, r#"{"id": 3, "login": "plumb-bot"}"#.to_string())
                }
                "GET" => (StatusCode::OK, list.to_string()),
                "PATCH" => (patch, r#"{"message": "Must have admin rights to Repository."}"#.to_string()),
                _ => (StatusCode::CREATED, r#"{"id": 99, "body": "created"}"#.to_string()),
            };
            let path = format!("{}{}", uri.path(), uri.query().map_or(String::new(), |q| format!("?{q}")));
            log.lock().unwrap().push(Recorded {
                method,
                path,
                headers,
                body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
            });
            answer
        })
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/api/v3"), log)
}

fn comments(api_url: &str, token_file: &Path) -> plumb::forge::comment::Comments {
    let cfg: CommitStatusConfig =
        serde_saphyr::from_str(&format!("provider: github\napiUrl: {api_url}\ntokenFile: {}\n", token_file.display()))
            .unwrap();
    plumb::forge::comment::Comments::new(Target::new(&cfg, "git@github.example.invalid:acme/fleet.git").unwrap(), None)
        .unwrap()
}

/// A recorded first page of a pull request's comments (GitHub's fields, trimmed): a
/// person's comment quoting the marker, then plumb's own.
const LISTED: &str = r#"[
  {"id": 1001, "user": {"login": "dev1"}, "body": "why does <!-- plumb-preview --> say prune?"},
  {"id": 1002, "user": {"login": "plumb-bot"}, "body": "<!-- plumb-preview -->\n### plumb preview of 6c7b091 into `main`"}
]"#;

#[tokio::test]
async fn the_preview_comment_is_found_and_edited_in_place() {
    let (api, log) = comment_api(LISTED, StatusCode::OK).await;
    let dir = tempfile::tempdir().unwrap();
    let c = comments(&api, &token_file(dir.path()));
    let body = "<!-- plumb-preview -->\n### plumb preview of 89abcde into `main`";
    assert_eq!(c.upsert(42, None, "<!-- plumb-preview -->", body).await.unwrap(), 1002);
    // known from before: edited straight away, no list
    assert_eq!(c.upsert(42, Some(1002), "<!-- plumb-preview -->", body).await.unwrap(), 1002);
    let log = log.lock().unwrap().clone();
    let calls: Vec<(String, String)> = log.iter().map(|r| (r.method.to_string(), r.path.clone())).collect();
    assert_eq!(
        calls,
        [
            ("GET".into(), "/api/v3/user".into()),
            ("GET".into(), "/api/v3/repos/acme/fleet/issues/42/comments?per_page=100".into()),
            ("PATCH".into(), "/api/v3/repos/acme/fleet/issues/comments/1002".into()),
            ("PATCH".into(), "/api/v3/repos/acme/fleet/issues/comments/1002".into()),
        ]
    );
    assert_eq!(log[2].body, serde_json::json!({"body": body}));
    assert_eq!(log[2].headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(log[2].headers["accept"], "application/vnd.github+json");
}

/// No comment of plumb's yet: one is created. A marked comment the token may not edit
/// (403): plumb creates its own rather than failing.
#[tokio::test]
async fn a_comment_is_created_when_none_is_plumbs_to_edit() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = comment_api("[]", StatusCode::OK).await;
    assert_eq!(
        comments(&api, &token_file(dir.path())).upsert(7, None, "<!-- m -->", "<!-- m -->\nx").await.unwrap(),
        99
    );
    let methods: Vec<String> = log.lock().unwrap().iter().map(|r| r.method.to_string()).collect();
    assert_eq!(methods, ["GET", "GET", "POST"]);
    let (api, log) = comment_api(LISTED, StatusCode::FORBIDDEN).await;
    let c = comments(&api, &token_file(dir.path()));
    assert_eq!(c.upsert(7, None, "<!-- plumb-preview -->", "<!-- plumb-preview -->\nx").await.unwrap(), 99);
    let calls: Vec<(String, String)> =
        log.lock().unwrap().iter().map(|r| (r.method.to_string(), r.path.clone())).collect();
    assert_eq!(calls[2], ("PATCH".into(), "/api/v3/repos/acme/fleet/issues/comments/1002".into()));
    assert_eq!(calls[3], ("POST".into(), "/api/v3/repos/acme/fleet/issues/7/comments".into()));
}

/// A reader's comment that starts with the marker is not plumb's: the forge would let
/// the token edit it, but plumb creates its own instead and never sends an edit.
#[tokio::test]
async fn a_readers_marked_comment_is_never_overwritten() {
    const FORGED: &str =
        r#"[{"id": 2001, "user": {"login": "mallory"}, "body": "<!-- plumb-preview -->\nall green, merge"}]"#;
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = comment_api(FORGED, StatusCode::OK).await;
    let c = comments(&api, &token_file(dir.path()));
    assert_eq!(c.upsert(7, None, "<!-- plumb-preview -->", "<!-- plumb-preview -->\nplan").await.unwrap(), 99);
    let calls: Vec<(String, String)> =
        log.lock().unwrap().iter().map(|r| (r.method.to_string(), r.path.clone())).collect();
    assert!(!calls.iter().any(|(m, _)| m == "PATCH"), "{calls:?}");
    assert_eq!(calls.last().unwrap(), &("POST".into(), "/api/v3/repos/acme/fleet/issues/7/comments".into()));
}

/// A GitHub App's token is not told its user (`GET /user` is 403 for it): with
/// `commitStatus.commentAuthor` plumb knows its comments' author without asking, finds
/// its own marked comment and edits it; a reader's marked comment stays untouched.
#[tokio::test]
async fn a_named_comment_author_needs_no_user_lookup() {
    const LISTED_APP: &str = r#"[
  {"id": 3001, "user": {"login": "mallory"}, "body": "<!-- plumb-preview -->\nall green"},
  {"id": 3002, "user": {"login": "plumb-app[bot]"}, "body": "<!-- plumb-preview -->\nplan"}
]"#;
    let (api, log) = comment_api(LISTED_APP, StatusCode::OK).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg: CommitStatusConfig = serde_saphyr::from_str(&format!(
        "provider: github\napiUrl: {api}\ntokenFile: {}\ncommentAuthor: plumb-app[bot]\n",
        token_file(dir.path()).display()
    ))
    .unwrap();
    let author = cfg.comment_author.clone();
    let target = Target::new(&cfg, "git@github.example.invalid:acme/fleet.git").unwrap();
    let c = plumb::forge::comment::Comments::new(target, author).unwrap();
    assert_eq!(c.upsert(8, None, "<!-- plumb-preview -->", "<!-- plumb-preview -->\nnew plan").await.unwrap(), 3002);
    let calls: Vec<(String, String)> =
        log.lock().unwrap().iter().map(|r| (r.method.to_string(), r.path.clone())).collect();
    assert!(!calls.iter().any(|(_, p)| p.ends_with("/user")), "no user lookup: {calls:?}");
    assert_eq!(calls.last().unwrap(), &("PATCH".into(), "/api/v3/repos/acme/fleet/issues/comments/3002".into()));
}
