//! GitLab, checked on the wire: a loopback stand-in answers as GitLab's REST API (v4)
//! documents it, with answers recorded from it (fields trimmed), and records what plumb
//! sends. Held against "Commit statuses" (`POST /projects/:id/statuses/:sha`, body
//! `state`/`name`/`description`/`target_url`, states `pending`/`success`/`failed`; 400
//! "Cannot transition status" for the state a commit already has), "Notes" (merge
//! request notes: list, create, `PUT` to edit), "Users" (`GET /user`) and "Merge
//! requests" (`GET /projects/:id/merge_requests?state=opened`), authenticated with
//! `PRIVATE-TOKEN`. No real GitLab is contacted.
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
    config::CommitStatusConfig,
    forge::{CommitStatus, Error, State as CsState, Target, comment::Comments, pulls::open_pulls},
};

const SHA: &str = "5d9a3c0e1f2b4a6c8d0e2f4a6b8c0d2e4f6a8b0c";
const TOKEN: &str = "glpat-RecordedTestToken01234";

#[derive(Debug, Clone)]
struct Recorded {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: serde_json::Value,
}

type Log = Arc<Mutex<Vec<Recorded>>>;

/// Recorded notes of merge request 4: a reviewer's note that starts with the marker,
/// a system note, and plumb's own.
const NOTES: &str = r#"[
  {"id": 501, "body": "<!-- plumb-preview -->\nLGTM, merge", "author": {"id": 31, "username": "reviewer"}, "system": false},
  {"id": 502, "body": "added 1 commit", "author": {"id": 9, "username": "plumb-bot"}, "system": true},
  {"id": 503, "body": "<!-- plumb-preview -->\n### plumb preview of 1a2b3c4 into `main`", "author": {"id": 9, "username": "plumb-bot"}, "system": false}
]"#;

/// What the stand-in answers to a request: GitLab's documented status and a recorded body.
fn answer(
    method: &Method,
    path: &str,
    query: &str,
    statuses: &Mutex<Vec<String>>,
    body: &serde_json::Value,
) -> (StatusCode, String) {
    match (method.as_str(), path) {
        ("GET", "/api/v4/user") => {
            (StatusCode::OK, r#"{"id": 9, "username": "plumb-bot", "name": "plumb", "state": "active"}"#.into())
        }
        ("GET", p) if p.ends_with("/notes") => (StatusCode::OK, NOTES.into()),
        ("GET", p) if p.ends_with("/merge_requests") && query.ends_with("&page=1") => (
            StatusCode::OK,
            format!(
                r#"[{{"id": 8101, "iid": 4, "project_id": 12, "state": "opened", "sha": "{SHA}", "source_branch": "bump-web", "target_branch": "main", "source_project_id": 12, "target_project_id": 12, "labels": ["preview"]}},
                    {{"id": 8102, "iid": 6, "project_id": 12, "state": "opened", "sha": "{SHA}", "source_branch": "main", "target_branch": "main", "source_project_id": 40, "target_project_id": 12, "labels": []}}]"#
            ),
        ),
        ("GET", _) => (StatusCode::OK, "[]".into()),
        ("PUT", _) => (StatusCode::OK, r#"{"id": 503, "body": "edited"}"#.into()),
        ("POST", p) if p.contains("/statuses/") => {
            if body["description"] == "x".repeat(300) {
                return (
                    StatusCode::BAD_REQUEST,
                    r#"{"message": {"description": ["is too long (maximum is 255 characters)"]}}"#.into(),
                );
            }
            let state = body["state"].as_str().unwrap_or_default().to_string();
            let mut seen = statuses.lock().unwrap();
            if seen.last() == Some(&state) {
                return (StatusCode::BAD_REQUEST, r#"{"message": "Cannot transition status via :enqueue from :pending (Reason(s): Status cannot transition via \"enqueue\")"}"#.into());
            }
            seen.push(state.clone());
            (
                StatusCode::CREATED,
                format!(r#"{{"id": 77, "sha": "{SHA}", "status": "{state}", "name": "plumb/preview"}}"#),
            )
        }
        ("POST", _) => {
            (StatusCode::CREATED, r#"{"id": 610, "body": "created", "author": {"username": "plumb-bot"}}"#.into())
        }
        _ => (StatusCode::NOT_FOUND, r#"{"message": "404 Not Found"}"#.into()),
    }
}

/// The stand-in for a GitLab at `http://127.0.0.1:PORT/api/v4`.
async fn gitlab() -> (String, Log) {
    let log: Log = Arc::default();
    let statuses: Arc<Mutex<Vec<String>>> = Arc::default();
    let app = Router::new()
        .fallback(
            move |State((log, statuses)): State<(Log, Arc<Mutex<Vec<String>>>)>,
                  method: Method,
                  uri: Uri,
                  headers: HeaderMap,
                  body: Bytes| async move {
                // the project id is the path, percent-encoded: read the path as sent
                let path = uri.path().to_string();
                let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                let reply = answer(&method, &path, uri.query().unwrap_or_default(), &statuses, &body);
                log.lock().unwrap().push(Recorded { method, path, headers, body });
                reply
            },
        )
        .with_state((log.clone(), statuses));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/api/v4"), log)
}

/// The target of `commitStatus: {provider: gitlab}` for a project in a subgroup.
fn target(api_url: &str, dir: &Path) -> Target {
    let token = dir.join("gitlab-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let cfg: CommitStatusConfig = serde_saphyr::from_str(&format!(
        "provider: gitlab\napiUrl: {api_url}\ntokenFile: {}\npreviewUrl: https://plumb.example.invalid/previews/{{repository}}/{{number}}\n",
        token.display()
    ))
    .unwrap();
    Target::new(&cfg, "https://gitlab.example.invalid/platform/deploy/fleet.git").unwrap()
}

const PROJECT: &str = "/api/v4/projects/platform%2Fdeploy%2Ffleet";

/// The preview comment: the token's user is asked once, the reviewer's marked note is
/// passed over, plumb's own note is edited with `PUT`; later heads edit it straight away.
#[tokio::test]
async fn the_preview_note_is_found_by_its_author_and_edited_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = gitlab().await;
    let c = Comments::new(target(&api, dir.path()), None).unwrap();
    let body = "<!-- plumb-preview -->\n### plumb preview of 5d9a3c0 into `main`";
    assert_eq!(c.upsert(4, None, "<!-- plumb-preview -->", body).await.unwrap(), 503);
    assert_eq!(c.upsert(4, Some(503), "<!-- plumb-preview -->", body).await.unwrap(), 503);
    // another merge request without plumb's note: the user is not asked again
    assert_eq!(c.upsert(5, None, "<!-- plumb-preview -->", body).await.unwrap(), 503);
    let log = log.lock().unwrap().clone();
    let calls: Vec<(String, String)> = log.iter().map(|r| (r.method.to_string(), r.path.clone())).collect();
    let p = |s: &str| format!("{PROJECT}{s}");
    assert_eq!(
        calls,
        [
            ("GET".into(), "/api/v4/user".into()),
            ("GET".into(), p("/merge_requests/4/notes")),
            ("PUT".into(), p("/merge_requests/4/notes/503")),
            ("PUT".into(), p("/merge_requests/4/notes/503")),
            ("GET".into(), p("/merge_requests/5/notes")),
            ("PUT".into(), p("/merge_requests/5/notes/503")),
        ]
    );
    assert_eq!(log[2].body, serde_json::json!({"body": body}));
    for r in &log {
        assert_eq!(r.headers["private-token"], TOKEN);
        assert!(!r.headers.contains_key("authorization"));
        assert!(r.headers["user-agent"].to_str().unwrap().starts_with("plumb/"));
    }
}

/// The `plumb/preview` status: `failure` is sent as GitLab's `failed`, the context as
/// `name`, the preview view as `target_url`; posting the state the commit already has
/// (GitLab's 400 "Cannot transition status") counts as posted. Another 400 is an error
/// that names the URL and never the token.
#[tokio::test]
async fn the_preview_status_speaks_gitlabs_states() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = gitlab().await;
    let c = Comments::new(target(&api, dir.path()), None).unwrap();
    let status = |state| CommitStatus {
        sha: SHA.into(),
        state,
        context: "plumb/preview".into(),
        description: "plan failed for web".into(),
    };
    let link = Some("https://plumb.example.invalid/previews/fleet/4".to_string());
    c.status(&status(CsState::Failure), link.clone()).await.unwrap();
    c.status(&status(CsState::Error), link.clone()).await.unwrap();
    c.status(&status(CsState::Success), None).await.unwrap();
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 3);
    assert_eq!((log[0].method.as_str(), log[0].path.as_str()), ("POST", format!("{PROJECT}/statuses/{SHA}").as_str()));
    assert_eq!(
        log[0].body,
        serde_json::json!({
            "state": "failed",
            "name": "plumb/preview",
            "description": "plan failed for web",
            "target_url": "https://plumb.example.invalid/previews/fleet/4",
        })
    );
    assert_eq!(log[1].body["state"], "failed");
    assert_eq!(log[2].body["state"], "success");
    assert!(log[2].body.get("target_url").is_none());

    // a 400 that is not GitLab's "already in that state" is an error
    let long = CommitStatus { description: "x".repeat(300), ..status(CsState::Pending) };
    let e = c.status(&long, None).await.unwrap_err();
    assert!(matches!(e, Error::Rejected { status: 400, .. }), "{e}");
    assert!(e.to_string().contains("statuses") && !e.to_string().contains(TOKEN), "{e}");
}

/// The `pullRequests` generator's listing: open merge requests of the project, with
/// `iid` as the number and a merge request from another project as a fork.
#[tokio::test]
async fn open_merge_requests_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = gitlab().await;
    let pulls = open_pulls(&target(&api, dir.path()), &plumb::forge::HttpClient::new().unwrap()).await.unwrap();
    let got: Vec<(u64, &str, bool, Vec<String>)> =
        pulls.iter().map(|p| (p.number, p.branch.as_str(), p.fork, p.labels.clone())).collect();
    assert_eq!(got, [(4, "bump-web", false, vec!["preview".to_string()]), (6, "main", true, vec![])]);
    let calls: Vec<String> = log.lock().unwrap().iter().map(|r| r.path.clone()).collect();
    assert_eq!(calls, [format!("{PROJECT}/merge_requests"), format!("{PROJECT}/merge_requests")]);
}
