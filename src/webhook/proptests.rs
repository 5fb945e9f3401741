//! Property tests: `decide` never panics, authenticated deliveries are never 401, and URL
//! normalization ignores decoration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use hmac::{Hmac, KeyInit, Mac};
use proptest::prelude::*;
use serde_json::{Map, Value};
use sha2::Sha256;

use super::*;

const SECRET: &str = "s3cr3t-for-tests";

fn receiver() -> Receiver {
    let key = RepoKey::from_url("https://gitea.example.invalid/acme/platform-config").unwrap();
    Receiver {
        repositories: vec![WatchedRepository {
            key: key.clone(),
            secret: Some(Secret::from(SECRET)),
            allow_sha1: true,
            provider: None,
        }],
        watches: vec![Watch { app: "app".into(), repo: key, revision: "*".into(), path_filter: None }],
        max_body_bytes: 4096,
    }
}

/// [`receiver`] with its repository bound to the forge [`signed`] numbers `provider`.
fn receiver_for(provider: usize) -> Receiver {
    let forges = [
        Provider::Gitea,
        Provider::Forgejo,
        Provider::Gogs,
        Provider::GitHub,
        Provider::GitLab,
        Provider::BitbucketCloud,
        Provider::BitbucketServer,
    ];
    let mut r = receiver();
    r.repositories[0].provider = forges.get(provider).copied();
    r
}

const HEADER_NAMES: &[&str] = &[
    "Content-Type",
    "X-Gitea-Event",
    "X-Forgejo-Event",
    "X-Gogs-Event",
    "X-GitHub-Event",
    "X-Gitlab-Event",
    "X-Event-Key",
    "X-Hook-UUID",
    "X-Gitea-Signature",
    "X-Forgejo-Signature",
    "X-Gogs-Signature",
    "X-Hub-Signature",
    "X-Hub-Signature-256",
    "X-Gitlab-Token",
    "X-GitHub-Delivery",
    "Idempotency-Key",
];

fn header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(HEADER_NAMES).prop_map(str::to_owned),
        proptest::sample::select(HEADER_NAMES).prop_map(str::to_uppercase),
        "[ -~]{0,20}",
    ]
}

fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("application/json".to_owned()),
        Just("application/x-www-form-urlencoded".to_owned()),
        Just("push".to_owned()),
        Just("sha256=".to_owned()),
        "sha(1|256)=[0-9a-fA-F]{0,70}",
        "[0-9a-f]{0,70}",
        any::<String>(),
    ]
}

const KEYS: &[&str] = &[
    "ref",
    "before",
    "after",
    "commits",
    "head_commit",
    "id",
    "repository",
    "clone_url",
    "ssh_url",
    "html_url",
    "project",
    "git_http_url",
    "object_kind",
    "total_commits",
    "total_commits_count",
    "checkout_sha",
    "added",
    "removed",
    "modified",
    "ref_type",
    "push",
    "changes",
    "new",
    "old",
    "type",
    "name",
    "target",
    "hash",
    "links",
    "html",
    "href",
    "clone",
    "refId",
    "toHash",
    "created",
    "deleted",
    "closed",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("refs/heads/main".to_owned()),
            Just("refs/tags/v1".to_owned()),
            Just("0000000000000000000000000000000000000000".to_owned()),
            Just("https://gitea.example.invalid/acme/platform-config.git".to_owned()),
            Just("git@gitea.example.invalid:acme/platform-config.git".to_owned()),
            Just("branch".to_owned()),
            Just("push".to_owned()),
            any::<String>(),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((proptest::sample::select(KEYS), inner), 0..8).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<_, _>>())
            }),
        ]
    })
}

fn hmac_hex(body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

fn form_encode(bytes: &[u8]) -> String {
    let mut out = String::from("payload=");
    for &b in bytes {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(b)),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Headers and body of a correctly authenticated delivery from `provider`.
fn signed(provider: usize, event: &str, json: &[u8], form: bool) -> (Vec<(String, String)>, Vec<u8>) {
    let body = if form { form_encode(json).into_bytes() } else { json.to_vec() };
    let ct = if form { "application/x-www-form-urlencoded" } else { "application/json" };
    let mut h = vec![("Content-Type".to_owned(), ct.to_owned())];
    let mut add = |n: &str, v: String| h.push((n.to_owned(), v));
    match provider {
        0 => {
            add("X-Gitea-Event", event.to_owned());
            add("X-Gitea-Signature", hmac_hex(json));
        }
        1 => {
            add("X-Forgejo-Event", event.to_owned());
            add("X-Forgejo-Signature", hmac_hex(json));
        }
        2 => {
            add("X-Gogs-Event", event.to_owned());
            add("X-Gogs-Signature", hmac_hex(json));
        }
        3 => {
            add("X-GitHub-Event", event.to_owned());
            add("X-Hub-Signature-256", format!("sha256={}", hmac_hex(&body)));
        }
        4 => {
            add("X-Gitlab-Event", event.to_owned());
            add("X-Gitlab-Token", SECRET.to_owned());
        }
        5 => {
            add("X-Event-Key", event.to_owned());
            add("X-Hook-UUID", "u".to_owned());
            add("X-Hub-Signature", format!("sha256={}", hmac_hex(&body)));
        }
        _ => {
            add("X-Event-Key", event.to_owned());
            add("X-Hub-Signature", format!("sha256={}", hmac_hex(&body)));
        }
    }
    (h, body)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decide_never_panics_on_arbitrary_input(
        headers in prop::collection::vec((header_name(), header_value()), 0..12),
        body in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let d = receiver().decide(&headers, &body);
        prop_assert!([200, 202, 400, 401, 413, 415].contains(&d.http_status));
        prop_assert_eq!(d.action == Action::Reconcile, d.http_status == 202);
    }

    #[test]
    fn authenticated_arbitrary_json_is_never_401_and_never_panics(
        provider in 0usize..7,
        event in prop_oneof![
            Just("push"), Just("delete"), Just("ping"), Just("Push Hook"), Just("Tag Push Hook"),
            Just("System Hook"), Just("repo:push"), Just("repo:refs_changed"), Just("other"),
        ],
        json in json_value(),
        form in any::<bool>(),
    ) {
        let text = json.to_string();
        let (headers, body) = signed(provider, event, text.as_bytes(), form);
        prop_assume!(body.len() <= 4096);
        let d = receiver_for(provider).decide(&headers, &body);
        prop_assert!(d.verification.valid, "{:?}", d.verification);
        prop_assert!([200, 202, 400].contains(&d.http_status), "{}", d.http_status);
    }

    #[test]
    fn signed_raw_bytes_never_panic(
        provider in 0usize..7,
        json in prop::collection::vec(any::<u8>(), 0..300),
        form in any::<bool>(),
    ) {
        let (headers, body) = signed(provider, "push", &json, form);
        let d = receiver_for(provider).decide(&headers, &body);
        prop_assert!(d.verification.valid);
        prop_assert!([200, 202, 400].contains(&d.http_status));
    }

    #[test]
    fn repo_key_ignores_decoration(
        host in "[a-z][a-z0-9-]{0,7}(\\.[a-z][a-z0-9]{0,7}){0,2}",
        segments in prop::collection::vec("[a-z0-9_][a-z0-9._-]{0,8}", 2..4),
        user in prop::option::of("[a-z]{1,6}"),
        port in prop::option::of(1u16..65535),
        dot_git in any::<bool>(),
        slash in any::<bool>(),
        upper in any::<bool>(),
        shape in 0usize..4,
    ) {
        prop_assume!(segments.last().is_some_and(|s| !s.ends_with(".git") && s != "." && s != ".."));
        prop_assume!(segments.iter().all(|s| s != "." && s != ".."));
        // `xn--` starts a punycode label, which must decode: no such host exists
        prop_assume!(!host.split('.').any(|l| l.starts_with("xn--")));
        let path = segments.join("/");
        let canonical = RepoKey::from_url(&format!("https://{host}/{path}"));
        let want = format!("{host}/{path}");
        prop_assert_eq!(canonical.as_ref().map(RepoKey::as_str), Some(want.as_str()));
        let user = user.map(|u| format!("{u}@")).unwrap_or_default();
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let tail = format!("{}{}", if dot_git { ".git" } else { "" }, if slash { "/" } else { "" });
        let url = match shape {
            0 => format!("https://{user}{host}{port}/{path}{tail}"),
            1 => format!("ssh://{user}{host}{port}/{path}{tail}"),
            2 => format!("{user}{host}:{path}{tail}"),
            _ => format!("git://{host}{port}/{path}{tail}"),
        };
        let url = if upper { url.to_uppercase() } else { url };
        prop_assert_eq!(RepoKey::from_url(&url), canonical, "{}", url);
    }

    #[test]
    fn commit_shas_never_match_and_full_refs_keep_their_kind(
        sha in "[0-9a-f]{40}",
        name in "[a-z0-9][a-z0-9/._-]{0,20}",
    ) {
        prop_assert!(!revision_matches(&sha, RefKind::Branch, &sha));
        prop_assert!(!revision_matches(&sha, RefKind::Tag, &name));
        let branch = format!("refs/heads/{name}");
        let tag = format!("refs/tags/{name}");
        prop_assert!(revision_matches(&branch, RefKind::Branch, &name));
        prop_assert!(!revision_matches(&branch, RefKind::Tag, &name));
        prop_assert!(revision_matches(&tag, RefKind::Tag, &name));
        prop_assert!(!revision_matches(&tag, RefKind::Branch, &name));
    }
}
