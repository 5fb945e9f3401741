//! Issue 12: the status API and metrics are on the internal listener, behind a
//! Kubernetes bearer token checked with TokenReview + SubjectAccessReview; the webhook
//! stays unauthenticated (signed deliveries) on the public listener.
//!
//! Tokens are minted with the TokenRequest API (`kubectl create token`) for
//! ServiceAccounts with and without the rights of `deploy/base/role.yaml`'s
//! `plumb-status-reader` ClusterRole.

#![allow(clippy::unwrap_used)]

mod support;

use support::*;

const NS: &str = "auth-web";
const STATUS_NS: &str = "plumb-auth";

async fn get(addr: std::net::SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let headers: Vec<_> = token.map(bearer).into_iter().collect();
    http_request(addr, "GET", path, &headers, b"").await
}

#[tokio::test(flavor = "multi_thread")]
async fn internal_listener_requires_a_token_with_the_right() {
    let lab = Lab::new("fleet");
    lab.repo
        .write(
            "app/cm.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: site, namespace: {NS}}}\ndata: {{a: b}}\n"),
        )
        .unwrap();
    let c1 = lab.repo.commit("site").unwrap();
    kubectl(&["create", "namespace", NS]);
    let policy = lab.app_policy(STATUS_NS, "web", NS, "    syncPolicy: {automated: true}");
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;

    let reader = reader_token();
    let nobody = service_account_token("plumb-lab-readers", "nobody");
    let scraper = service_account_token("plumb-lab-readers", "scraper");
    kubectl_apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: plumb-lab-scraper}\nrules: [{nonResourceURLs: [/metrics], verbs: [get]}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: plumb-lab-scraper}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: plumb-lab-scraper}\nsubjects: [{kind: ServiceAccount, name: scraper, namespace: plumb-lab-readers}]\n",
    );
    support::wait_allowed("system:serviceaccount:plumb-lab-readers:scraper", &["get", "/metrics"]);

    for path in ["/api/v1/applications", "/metrics"] {
        // no token, a token of another scheme, a token the API server does not know
        let (code, body) = get(plumb.internal, path, None).await;
        assert_eq!(code, 401, "{path} without a token: {body}");
        let basic = [("authorization".to_string(), "Basic cmVhZGVyOnB3".to_string())];
        assert_eq!(http_request(plumb.internal, "GET", path, &basic, b"").await.0, 401, "{path} with Basic");
        let (code, body) = get(plumb.internal, path, Some("not-a-real-token")).await;
        assert_eq!(code, 401, "{path} with an invalid token: {body}");
        // a valid token without the right
        let (code, body) = get(plumb.internal, path, Some(&nobody)).await;
        assert_eq!(code, 403, "{path} without the right: {body}");
        assert!(body.contains("system:serviceaccount:plumb-lab-readers:nobody"), "{body}");
        // not on the public listener at all
        assert_eq!(get(plumb.addr, path, Some(reader)).await.0, 404, "{path} on the public listener");
    }
    // a right for the metrics is not one for the status API
    assert_eq!(get(plumb.internal, "/metrics", Some(&scraper)).await.0, 200);
    let (code, body) = get(plumb.internal, "/api/v1/applications", Some(&scraper)).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("get applications.plumb.dev"), "{body}");

    // the reader sees the application once a pass recorded it, and the metrics
    let apps = wait_for("the status API lists web as Synced", std::time::Duration::from_secs(60), || async {
        let (code, body) = get(plumb.internal, "/api/v1/applications", Some(reader)).await;
        let apps: serde_json::Value = serde_json::from_str(&body).ok()?;
        let synced = apps.as_array()?.iter().any(|a| a["app"] == "web" && a["sync"] == "Synced");
        (code == 200 && synced).then_some(body)
    })
    .await;
    assert!(apps.contains(&c1), "{apps}");
    let (code, metrics) = get(plumb.internal, "/metrics", Some(reader)).await;
    assert_eq!(code, 200);
    assert!(metrics.contains("plumb_passes_total"), "{metrics}");

    // the webhook needs no token: a signed delivery is accepted on the public listener
    let c2 = lab.repo.commit("an empty commit").unwrap();
    let (headers, body) = lab.gitea_push(&lab.url, &c1, &c2, &lab.secret);
    assert_eq!(plumb.post_webhook(&headers, &body).await, 202);
    plumb.stop().await;
}
