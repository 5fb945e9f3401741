//! What an outsider costs plumb's internal listener, and what a reader gets from it, on
//! the real control plane: made-up tokens cost a bounded number of TokenReviews (counted
//! by the API server's own `apiserver_request_total`), and a status value of any size
//! is served capped.
#![allow(clippy::unwrap_used)]

mod support;

use std::{sync::Arc, time::Instant};

use plumb::{
    auth::{REVIEW_BURST, REVIEWS_PER_SECOND},
    compare::SyncStatus,
    health::HealthStatus,
    status::{AppStatus, Condition, ConditionType, ResourceStatus, fit::MESSAGE_BYTES},
};
use support::*;

/// The tests of this binary count the API server's TokenReviews: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// TokenReviews the API server has answered so far (all codes).
fn token_reviews() -> u64 {
    kubectl(&["get", "--raw", "/metrics"])
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"tokenreviews\"")
                && l.contains("verb=\"POST\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

async fn start(name: &str, status_ns: &str, ns: &str) -> (Lab, Plumb) {
    let lab = Lab::new(name);
    lab.repo.write("app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n").unwrap();
    lab.repo.commit("c").unwrap();
    let policy = lab.app_policy(status_ns, "web", ns, "    syncPolicy: {automated: false}");
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;
    (lab, plumb)
}

/// 500 requests with one made-up token cost one TokenReview, not 500; 500 requests with
/// 500 made-up tokens cost at most the review rate's burst plus its refill while they
/// ran (the rest are answered 429 without asking); a reader's token still works.
#[tokio::test(flavor = "multi_thread")]
async fn made_up_tokens_cost_a_bounded_number_of_token_reviews() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_lab, plumb) = start("flood", "plumb-flood", "flood-web").await;
    let reader = reader_token();
    assert_eq!(plumb.get("/api/v1/applications").await.0, 200, "the reader, before the flood");

    let before = token_reviews();
    for _ in 0..500 {
        let (code, _) = http_request(plumb.internal, "GET", "/api/v1/applications", &[bearer("made-up")], b"").await;
        assert_eq!(code, 401);
    }
    let same = token_reviews() - before;
    assert_eq!(same, 1, "one made-up token, asked 500 times: {same} TokenReviews");

    let before = token_reviews();
    let started = Instant::now();
    let mut throttled = 0;
    for i in 0..500 {
        let token = format!("made-up-{i}");
        let (code, body) = http_request(plumb.internal, "GET", "/metrics", &[bearer(&token)], b"").await;
        assert!(code == 401 || code == 429, "{code} {body}");
        throttled += usize::from(code == 429);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let distinct = token_reviews() - before;
    let bound = f64::from(REVIEW_BURST) + f64::from(REVIEWS_PER_SECOND) * elapsed + 1.0;
    println!("500 made-up tokens in {elapsed:.1} s: {distinct} TokenReviews, {throttled} answered 429");
    assert!((distinct as f64) <= bound, "{distinct} TokenReviews for 500 made-up tokens (bound {bound:.0})");
    assert!(throttled > 0, "no request was throttled");

    // the reader's answer is remembered, or asked again once the rate allows
    let reader_ok = wait_for("the reader is served after the flood", std::time::Duration::from_secs(30), || async {
        let (code, _) = http_request(plumb.internal, "GET", "/api/v1/applications", &[bearer(reader)], b"").await;
        (code == 200).then_some(())
    });
    reader_ok.await;
    plumb.stop().await;
}

/// A reason, a health message and a condition of 1.4 MB each (text from the cluster or
/// Git) are served by the status API and the status page cut to the bound a stored
/// message has, saying how much was left out.
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_reason_is_served_capped() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_lab, plumb) = start("huge", "plumb-huge", "huge-web").await;
    let huge = "x".repeat(1_400_000);
    plumb.ctx.published().publish(Arc::new(AppStatus {
        app: "huge".into(),
        environment: "e".into(),
        subject: huge.clone(),
        sync: SyncStatus::OutOfSync,
        health: HealthStatus::Degraded,
        resources: vec![ResourceStatus {
            object: "ConfigMap/huge-web/c".into(),
            sync: SyncStatus::OutOfSync,
            reason: huge.clone(),
            health: HealthStatus::Degraded,
            health_message: huge.clone(),
        }],
        conditions: vec![Condition::new(ConditionType::ComparisonError, huge.clone())],
        ..AppStatus::default()
    }));

    let (code, body) = plumb.get("/api/v1/applications").await;
    assert_eq!(code, 200);
    let apps: Vec<AppStatus> = serde_json::from_str(&body).unwrap();
    let served = apps.iter().find(|a| a.app == "huge").unwrap();
    let texts = [
        &served.subject,
        &served.resources[0].reason,
        &served.resources[0].health_message,
        &served.conditions[0].message,
    ];
    for text in texts {
        assert!(text.len() <= MESSAGE_BYTES, "{} bytes served", text.len());
        assert!(text.starts_with("xxxx") && text.ends_with("more bytes left out)"), "{}", &text[text.len() - 60..]);
    }
    assert!(body.len() < 8 * MESSAGE_BYTES, "the status API answered {} bytes", body.len());

    let (code, page) = plumb.get("/applications/huge").await;
    assert_eq!(code, 200);
    assert!(page.contains("more bytes left out)"));
    assert!(page.len() < 16 * MESSAGE_BYTES, "the page is {} bytes", page.len());
    let (code, list) = plumb.get("/").await;
    assert_eq!(code, 200);
    assert!(list.len() < 16 * MESSAGE_BYTES, "the list is {} bytes", list.len());
    plumb.stop().await;
}
