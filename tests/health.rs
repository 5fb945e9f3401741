//! Health against the real control plane (kube-controller-manager, kube-scheduler and
//! kwok running): the two axes stay independent.
#![allow(clippy::unwrap_used)]

mod support;

use std::{sync::Arc, time::Duration};

use plumb::{
    cluster::Cluster,
    compare::SyncStatus,
    health::HealthStatus,
    metrics::Metrics,
    reconcile::{Context, Mode},
};
use support::*;

/// A Deployment goes Progressing then Healthy as kwok runs its pods; a LoadBalancer
/// Service that never gets an address stays Progressing and, past the (shortened)
/// stall threshold, the application carries a HealthStalled warning naming it — while
/// sync status stays Synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressing_to_healthy_and_a_stalled_load_balancer() {
    let ns = "health-lb";
    let lab = Lab::new("health");
    lab.repo.write("app/deploy.yaml", &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: \"nginx:1.27.3\"}}]}}\n")).unwrap();
    lab.repo.commit("web").unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-health}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    health: {{stallAfter: 3s}}\napplications:\n  - {{name: health-app, repository: r, revision: main, path: app, namespace: {ns}, environment: e}}\n",
            lab.url
        ),
    );
    let config = plumb::config::load(&policy).unwrap_or_else(|e| panic!("{e}"));
    let cluster = Cluster::new(control_plane().client().await.unwrap()).await.unwrap();
    let ctx =
        Arc::new(Context::new(cluster, Arc::new(config), lab.tmp.path().join("cache"), Arc::new(Metrics::default())));
    ctx.store.ensure_namespace().await.unwrap();
    let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    assert!(r.sync.is_some());
    let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    assert_eq!(r.status.sync, SyncStatus::Synced);
    // `plumb sync --wait` returns once kwok has the pods running
    let (code, out, err) =
        plumb_cli(&["sync", "health-app", "--config", policy.to_str().unwrap(), "--wait", "--timeout", "60s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Synced and Healthy"), "{out}");
    wait_for("Deployment Healthy (kwok runs the pods)", Duration::from_secs(60), || async {
        let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
        (r.status.health == HealthStatus::Healthy).then_some(())
    })
    .await;

    let events = kubectl(&[
        "-n",
        "plumb-health",
        "get",
        "events",
        "--field-selector",
        "reason=HealthChanged",
        "-o",
        "jsonpath={.items[*].note}{.items[*].message}",
    ]);
    assert!(events.contains("→ Healthy"), "a transition Event on the application's status ConfigMap: {events}");
    lab.repo.write("app/lb.yaml", &format!("apiVersion: v1\nkind: Service\nmetadata: {{name: portal-lb, namespace: {ns}}}\nspec: {{type: LoadBalancer, selector: {{app: web}}, ports: [{{port: 80}}]}}\n")).unwrap();
    lab.repo.commit("a load balancer nobody provisions").unwrap();
    ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    assert_eq!(
        (r.status.sync, r.status.health),
        (SyncStatus::Synced, HealthStatus::Progressing),
        "{:?}",
        r.status.resources
    );
    let lb = r.status.resources.iter().find(|x| x.object.contains("portal-lb")).unwrap();
    assert!(lb.health_message.contains("no address"), "{lb:?}");
    let (code, out, _) =
        plumb_cli(&["sync", "health-app", "--config", policy.to_str().unwrap(), "--wait", "--timeout", "3s"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("still Synced / Progressing") && out.contains("portal-lb"), "{out}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    let stalled = r.status.conditions.iter().find(|c| c.type_ == "HealthStalled").expect("stall warning");
    assert!(stalled.message.contains("portal-lb"), "{stalled:?}");
    assert_eq!(r.status.health, HealthStatus::Progressing, "a stall is a warning; health stays Progressing");
}
