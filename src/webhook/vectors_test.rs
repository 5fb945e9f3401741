//! Runs every delivery in `shared/webhook-vectors` through [`Receiver::decide`] and checks
//! each field its `expected.json` names (the vectors' README: "Only fields present in
//! expected.json are checked").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::*;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/webhook-vectors");
/// plumb's own deliveries (pull request events), same layout: `tests/webhook-vectors`.
const OWN_VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webhook-vectors");

/// Receiver from `receiver_config.json` + `secret.txt`, with the vector's
/// `receiver_config_override` applied. Each watch entry gives one repository and one
/// [`Watch`] per ref, named `<repo_url>+<ref>`.
fn receiver(dir: &Path, overrides: Option<&Value>) -> Receiver {
    let mut config: Map<String, Value> =
        serde_json::from_slice(&fs::read(dir.join("receiver_config.json")).unwrap()).unwrap();
    if let Some(Value::Object(overrides)) = overrides {
        for (k, v) in overrides {
            config.insert(k.clone(), v.clone());
        }
    }
    let secret_file = config["secret_file"].as_str().unwrap();
    let secret = fs::read(dir.join(secret_file)).unwrap();
    let allow_sha1 = !config["require_sha256"].as_bool().unwrap_or(true);
    let mut repositories = Vec::new();
    let mut watches = Vec::new();
    for entry in config["watch"].as_array().unwrap() {
        let url = entry["repo_url"].as_str().unwrap();
        let key = RepoKey::from_url(url).unwrap_or_else(|| panic!("watch url {url} does not normalize"));
        repositories.push(WatchedRepository {
            key: key.clone(),
            secret: Some(Secret::new(secret.clone())),
            allow_sha1,
            provider: Some(forge_of(key.as_str())),
        });
        for r in entry["refs"].as_array().unwrap() {
            let r = r.as_str().unwrap();
            watches.push(Watch {
                app: format!("{url}+{r}"),
                repo: key.clone(),
                revision: r.to_owned(),
                path_filter: None,
            });
        }
    }
    Receiver {
        repositories,
        watches,
        max_body_bytes: usize::try_from(config["max_body_bytes"].as_u64().unwrap()).unwrap(),
    }
}

/// The forge of a vector repository, from its host's first label (`gitea.example.invalid`
/// → Gitea, …): each repository of `receiver_config.json` is served by the forge it is
/// named after, and its secret is bound to that forge's scheme.
fn forge_of(key: &str) -> Provider {
    match key.split(['.', '/']).next().unwrap() {
        "gitea" => Provider::Gitea,
        "forgejo" => Provider::Forgejo,
        "gogs" => Provider::Gogs,
        "github" => Provider::GitHub,
        "gitlab" => Provider::GitLab,
        "bitbucket" => Provider::BitbucketCloud,
        other => panic!("no forge is named {other}"),
    }
}

/// `headers.txt`: one `Name: value` per line, in send order.
fn read_headers(path: &Path) -> Vec<(String, String)> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap_or_else(|| panic!("bad header line {line:?}"));
            (name.to_owned(), value.trim_start().to_owned())
        })
        .collect()
}

/// The decision flattened into the vocabulary of `expected.json`.
fn observed(d: &Decision) -> Map<String, Value> {
    fn v<T: serde::Serialize>(x: &T) -> Value {
        serde_json::to_value(x).unwrap()
    }
    let mut m = Map::new();
    m.insert("provider".into(), v(&d.provider));
    m.insert("event".into(), v(&d.event));
    m.insert("event_type".into(), v(&d.event_type));
    m.insert("delivery_id".into(), v(&d.delivery_id));
    m.insert("action".into(), v(&d.action));
    m.insert("http_status".into(), v(&d.http_status));
    m.insert("apps".into(), v(&d.apps));
    if let Some(p) = &d.pull_request {
        m.insert("pull_number".into(), v(&p.number));
        m.insert("pull_action".into(), v(&p.action));
        m.insert("pull_head".into(), v(&p.head_sha));
        m.insert("pull_head_ref".into(), v(&p.head_ref));
        m.insert("pull_base".into(), v(&p.base));
        m.insert("pull_fork".into(), v(&p.fork));
    }
    if let Some(p) = &d.push {
        m.insert("ref".into(), v(&p.r#ref));
        m.insert("ref_kind".into(), v(&p.ref_kind));
        m.insert("ref_name".into(), v(&p.ref_name));
        m.insert("before".into(), v(&p.before));
        m.insert("after".into(), v(&p.after));
        m.insert("target_commit".into(), v(&p.target_commit));
        m.insert("created".into(), v(&p.created));
        m.insert("deleted".into(), v(&p.deleted));
        m.insert("forced".into(), v(&p.forced));
        m.insert("commits_listed".into(), v(&p.commits_listed));
        m.insert("commits_total".into(), v(&p.commits_total));
        m.insert("commits_truncated".into(), v(&p.commits_truncated));
        m.insert("changed_paths".into(), v(&p.changed_paths));
    } else if let Some(del) = &d.deletion {
        m.insert("ref".into(), v(&del.r#ref));
        m.insert("ref_kind".into(), v(&del.ref_kind));
        m.insert("ref_name".into(), v(&del.ref_name));
        for k in ["before", "after", "target_commit", "forced"] {
            m.insert(k.into(), Value::Null);
        }
        m.insert("created".into(), json!(false));
        m.insert("deleted".into(), json!(true));
    }
    m
}

const FIELDS: &[&str] = &[
    "provider",
    "event",
    "event_type",
    "delivery_id",
    "ref",
    "ref_kind",
    "ref_name",
    "before",
    "after",
    "target_commit",
    "created",
    "deleted",
    "forced",
    "commits_listed",
    "commits_total",
    "commits_truncated",
    "changed_paths",
    "action",
    "http_status",
    "apps",
    "pull_number",
    "pull_action",
    "pull_head",
    "pull_head_ref",
    "pull_base",
    "pull_fork",
];

/// Every mismatch between the decision and `expected.json` for one vector folder.
fn check_vector(root: &Path, dir: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    let expected: Value = serde_json::from_slice(&fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let body_file = expected["request"]["body_file"].as_str().unwrap();
    let body = fs::read(dir.join(body_file)).unwrap();
    assert_eq!(
        Some(body.len() as u64),
        expected["request"]["body_bytes"].as_u64(),
        "{}: body file changed",
        dir.display()
    );
    let headers = read_headers(&dir.join("headers.txt"));
    let receiver = receiver(root, expected.get("receiver_config_override"));
    let d = receiver.decide(&headers, &body);
    let got = observed(&d);

    for &field in FIELDS {
        if let Some(want) = expected.get(field) {
            let have = got.get(field).cloned().unwrap_or(Value::Null);
            if *want != have {
                errors.push(format!("{field}: got {have}, expected {want}"));
            }
        }
    }

    // auth.*: a 413 stops before hashing (the vector's own reason says so), so its
    // `auth.valid: true` describes the request, not something the receiver may compute.
    if let Some(auth) = expected.get("auth").and_then(Value::as_object)
        && d.http_status != 413
    {
        let verification = serde_json::to_value(&d.verification).unwrap();
        for (k, want) in auth {
            let have = verification.get(k).cloned().unwrap_or(Value::Null);
            if *want != have {
                errors.push(format!("auth.{k}: got {have}, expected {want}"));
            }
        }
    }

    if let Some(repo) = expected.get("repo") {
        let want_key = repo["normalized_key"].as_str().unwrap();
        let want_urls: Vec<&str> =
            repo["url_candidates"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for url in &want_urls {
            let key = RepoKey::from_url(url);
            if key.as_ref().map(RepoKey::as_str) != Some(want_key) {
                errors.push(format!("url candidate {url} normalizes to {key:?}, expected {want_key}"));
            }
        }
        match &d.repository {
            None => errors.push("no repository extracted".to_owned()),
            Some(identity) => {
                let mut have: Vec<&str> = identity.urls.iter().map(String::as_str).collect();
                let mut want = want_urls.clone();
                have.sort_unstable();
                want.sort_unstable();
                if have != want {
                    errors.push(format!("url candidates: got {have:?}, expected {want:?}"));
                }
                let keys: Vec<&str> = identity.keys.iter().map(RepoKey::as_str).collect();
                if keys != [want_key] {
                    errors.push(format!("repository keys: got {keys:?}, expected [{want_key}]"));
                }
            }
        }
        if let Some(push) = &d.push
            && push.repo_key.as_str() != want_key
        {
            errors.push(format!("push.repo_key {} != {want_key}", push.repo_key));
        }
    }

    if let Some(key) = expected.pointer("/dedupe/key").and_then(Value::as_str)
        && d.dedupe_key().as_deref() != Some(key)
    {
        errors.push(format!("dedupe key: got {:?}, expected {key}", d.dedupe_key()));
    }

    // Consistency of the verdict itself.
    let reconcile = matches!(d.action, Action::Reconcile | Action::Preview);
    if reconcile == d.apps.is_empty() {
        errors.push(format!("action {:?} with apps {:?}", d.action, d.apps));
    }
    if d.action == Action::Reject && (d.push.is_some() || d.repository.is_some()) {
        errors.push("rejected delivery carries parsed fields".to_owned());
    }
    if d.http_status == 401 && d.reason.to_lowercase().contains("repositor") {
        errors.push(format!("401 reason mentions repositories: {}", d.reason));
    }
    errors
}

#[test]
fn every_vector_matches_expected() {
    every_vector_of(VECTORS);
}

/// The pull request deliveries of GitHub, GitLab and Gitea (`tests/webhook-vectors`,
/// made by its `make_vectors.py`): previewed, ignored or refused as each says.
#[test]
fn every_pull_request_vector_matches_expected() {
    every_vector_of(OWN_VECTORS);
}

fn every_vector_of(root: &str) {
    let root = PathBuf::from(root);
    let entries = fs::read_dir(&root).unwrap_or_else(|e| panic!("vector folder {} unreadable: {e}", root.display()));
    let mut dirs: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no vector folders in {}", root.display());

    let mut processed = 0;
    let mut failures = Vec::new();
    for dir in &dirs {
        assert!(dir.join("expected.json").is_file(), "{} has no expected.json", dir.display());
        let errors = check_vector(&root, dir);
        processed += 1;
        if !errors.is_empty() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            failures.push(format!("{name}:\n  {}", errors.join("\n  ")));
        }
    }
    assert_eq!(processed, dirs.len());
    assert!(failures.is_empty(), "{} vector(s) disagree:\n{}", failures.len(), failures.join("\n"));
}

/// The GitHub `sha1=` headers in the vectors are real HMAC-SHA1 values: with `allow_sha1`
/// the SHA-1-only delivery is accepted and reconciled, which checks the SHA-1 code
/// against independent data.
#[test]
fn sha1_only_vector_passes_when_allowed() {
    let root = PathBuf::from(VECTORS);
    let dir = root.join("neg-sha1-only");
    let mut receiver = receiver(&root, None);
    for repo in &mut receiver.repositories {
        repo.allow_sha1 = true;
    }
    let d = receiver.decide(&read_headers(&dir.join("headers.txt")), &fs::read(dir.join("body.json")).unwrap());
    assert!(d.verification.valid);
    assert_eq!(d.verification.scheme, Some(Scheme::HmacSha1HexPrefixed));
    assert_eq!((d.action, d.http_status), (Action::Reconcile, 202));
}

/// Header names are case-insensitive and order does not matter.
#[test]
fn vectors_survive_header_case_and_order_changes() {
    let root = PathBuf::from(VECTORS);
    for name in ["gitea-push-main", "github-push-form", "gitlab-push"] {
        let dir = root.join(name);
        let body_file = if dir.join("body.form").exists() { "body.form" } else { "body.json" };
        let body = fs::read(dir.join(body_file)).unwrap();
        let mut headers: Vec<(String, String)> =
            read_headers(&dir.join("headers.txt")).into_iter().map(|(n, v)| (n.to_uppercase(), v)).collect();
        headers.reverse();
        let d = receiver(&root, None).decide(&headers, &body);
        assert_eq!((name, d.http_status), (name, 202));
    }
}

/// The vector's headers and body.
fn request(dir: &Path) -> (Vec<(String, String)>, Vec<u8>) {
    let body_file = if dir.join("body.form").exists() { "body.form" } else { "body.json" };
    (read_headers(&dir.join("headers.txt")), fs::read(dir.join(body_file)).unwrap())
}

/// The changed-path filter over every push vector that lists changed paths: a
/// directory holding one of the listed files runs the pass; a directory no file lies
/// under skips it, but only when the file lists are complete (Gitea and GitLab: the
/// total agrees; the annotated tag lists no commit, so it always runs).
#[test]
fn path_filter_over_the_vectors() {
    let root = PathBuf::from(VECTORS);
    let mut checked = 0;
    for name in [
        "gitea-push-main",
        "github-push",
        "github-push-form",
        "github-push-25-commits",
        "gitlab-push",
        "gitea-tag-push",
    ] {
        let dir = root.join(name);
        let expected: Value = serde_json::from_slice(&fs::read(dir.join("expected.json")).unwrap()).unwrap();
        let want_paths: Vec<&str> =
            expected["changed_paths"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let (headers, body) = request(&dir);
        let plain = receiver(&root, None);
        let d = plain.decide(&headers, &body);
        let push = d.push.clone().unwrap();
        assert_eq!(push.changed_paths, want_paths, "{name}");
        let complete = file_lists_complete(d.provider.unwrap(), &push);
        assert_eq!(complete, name != "gitea-tag-push", "{name}: completeness");

        for path in &want_paths {
            let parent = path.rsplit_once('/').map_or("", |(dir, _)| dir);
            assert!(path_verdict(d.provider.unwrap(), &push, parent).must_run(), "{name}: {parent}");
        }
        let untouched = path_verdict(d.provider.unwrap(), &push, "clusters/dev");
        assert_eq!(untouched, if complete { PathVerdict::Untouched } else { PathVerdict::Unknown }, "{name}");

        // Through the receiver: every watch filtered on a directory the push missed.
        let mut filtered = plain.clone();
        for w in &mut filtered.watches {
            w.path_filter = Some("clusters/dev".into());
        }
        let f = filtered.decide(&headers, &body);
        if complete {
            assert_eq!((f.action, f.http_status), (Action::Ignore, 200), "{name}");
            assert_eq!(f.skipped, d.apps, "{name}: the apps it would have run are reported as skipped");
            assert!(f.apps.is_empty());
        } else {
            assert_eq!((f.action, f.apps.clone()), (Action::Reconcile, d.apps.clone()), "{name}: doubt runs");
        }
        // ... and on a directory it touched: unchanged decision.
        let first_dir = want_paths.first().and_then(|p| p.rsplit_once('/')).map_or("", |(dir, _)| dir);
        for w in &mut filtered.watches {
            w.path_filter = Some(first_dir.into());
        }
        let t = filtered.decide(&headers, &body);
        assert_eq!((t.action, t.apps.clone(), t.skipped.is_empty()), (d.action, d.apps.clone(), true), "{name}");
        checked += 1;
    }
    assert_eq!(checked, 6);
}

/// Dedupe keys of real deliveries: the id the vector names, plus repository, ref and
/// `after`; a Gitea-style replay (same body, new id) has the same content key.
#[test]
fn dedupe_keys_of_the_vectors() {
    let root = PathBuf::from(VECTORS);
    let (headers, body) = request(&root.join("github-push"));
    let d = receiver(&root, None).decide(&headers, &body);
    let keys = DeliveryKeys::of(&d);
    assert_eq!(keys.delivery.as_deref(), Some("github:69966f09-69c2-4956-8f3a-df38df04fa60"));
    assert_eq!(
        keys.contents,
        ["github.example.invalid/acme/platform-config refs/heads/main ab8d2581deadeb772be25098e1450ea2e56052a4"]
    );

    let now = std::time::Instant::now();
    let mut dedupe = Dedupe::default();
    dedupe.record(&keys, now);
    let replay: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| {
            if n.eq_ignore_ascii_case("X-GitHub-Delivery") {
                (n.clone(), "new-id".into())
            } else {
                (n.clone(), v.clone())
            }
        })
        .collect();
    let again = DeliveryKeys::of(&receiver(&root, None).decide(&replay, &body));
    assert_ne!(again.delivery, keys.delivery);
    assert!(dedupe.is_duplicate(&again, now + std::time::Duration::from_secs(1)));

    // Deletions and test deliveries carry no content key.
    for name in ["github-push-branch-deleted", "gitea-test-delivery"] {
        let (headers, body) = request(&root.join(name));
        assert!(DeliveryKeys::of(&receiver(&root, None).decide(&headers, &body)).contents.is_empty(), "{name}");
    }
}
