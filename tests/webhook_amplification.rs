//! A valid but hostile delivery costs O(size) (issue 12): a signed 1 MiB Bitbucket
//! Server `repo:refs_changed` body listing thousands of distinct clone URLs and
//! thousands of ref changes. Before the fix, URL de-duplication was quadratic and every
//! ref change carried its own copy of every URL (a 775 KB body took 3 s and 1.4 GB).
//!
//! The budget is ≤ 50 MiB of peak RSS growth of this process (`VmHWM`, Linux), which
//! runs this one test only. The time of `Receiver::decide` is printed, not asserted: it
//! is a figure (200 ms target for 1 MiB in a release build), measured by
//! `cargo bench --bench webhook`.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use hmac::{Hmac, KeyInit, Mac};
use plumb::webhook::{Action, Receiver, RepoKey, Secret, Watch, WatchedRepository};

const SECRET: &[u8] = b"bitbucket-secret";
const URL: &str = "https://bitbucket.example.invalid/scm/acme/fleet.git";

/// `(name, kB)` of `VmHWM` / `VmRSS` in /proc/self/status.
fn status_kb(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A signed body of about `bytes`: half distinct clone URLs, half ref changes.
fn amplifying_body(bytes: usize) -> (Vec<(String, String)>, Vec<u8>) {
    let mut links = vec![serde_json::json!({"href": URL, "name": "http"})];
    let mut i = 0;
    while links.len() * 70 < bytes / 2 {
        links.push(serde_json::json!({"href": format!("https://bitbucket.example.invalid/scm/acme/f{i:08}.git")}));
        i += 1;
    }
    let mut changes = Vec::new();
    while changes.len() * 140 < bytes / 2 {
        changes.push(serde_json::json!({
            "refId": format!("refs/heads/b{:06}", changes.len()),
            "fromHash": "1".repeat(40), "toHash": "2".repeat(40), "type": "UPDATE"
        }));
    }
    let body = serde_json::json!({
        "eventKey": "repo:refs_changed",
        "repository": {"slug": "fleet", "project": {"key": "ACME"}, "links": {"clone": links}},
        "changes": changes
    })
    .to_string()
    .into_bytes();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(&body);
    let headers = vec![
        ("Content-Type".to_string(), "application/json".to_string()),
        ("X-Event-Key".to_string(), "repo:refs_changed".to_string()),
        ("X-Request-Id".to_string(), "amplify-1".to_string()),
        ("X-Hub-Signature".to_string(), format!("sha256={}", hex::encode(mac.finalize().into_bytes()))),
    ];
    (headers, body)
}

#[test]
fn a_signed_amplifying_delivery_costs_its_size() {
    let key = RepoKey::from_url(URL).unwrap();
    let receiver = Receiver {
        repositories: vec![WatchedRepository {
            key: key.clone(),
            secret: Some(Secret::new(SECRET)),
            allow_sha1: false,
            provider: None,
        }],
        watches: vec![Watch { app: "web".into(), repo: key, revision: "b000001".into(), path_filter: None }],
        max_body_bytes: plumb::webhook::DEFAULT_MAX_BODY_BYTES,
    };
    let (headers, body) = amplifying_body(1 << 20);
    let (rss, peak_before) = (status_kb("VmRSS:"), status_kb("VmHWM:"));
    let started = Instant::now();
    let decision = receiver.decide(&headers, &body);
    let took = started.elapsed();
    let grown_kb = status_kb("VmHWM:").saturating_sub(peak_before.max(rss));
    println!("amplifying delivery: {} bytes decided in {took:?} (this build), peak RSS +{} KiB", body.len(), grown_kb);
    assert_eq!(decision.action, Action::Reconcile, "{decision:?}");
    assert!(grown_kb <= 50 * 1024, "peak RSS grew by {grown_kb} KiB for a {} byte body", body.len());
}
