//! Health against the real control plane (kube-controller-manager, kube-scheduler and
//! kwok running): the two axes stay independent.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{compare::SyncStatus, health::HealthStatus, reconcile::Mode};
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
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    assert!(r.sync.is_some());
    let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    assert_eq!(r.status.sync, SyncStatus::Synced);
    // `plumb sync --wait` returns once kwok has the pods running
    let (code, out, err) = plumb_cli(&[
        "sync",
        "health-app",
        "--local",
        "--config",
        policy.to_str().unwrap(),
        "--wait",
        "--timeout",
        "60s",
    ]);
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
    assert!(events.contains("→ Healthy"), "a transition Event on the application resource: {events}");
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
    let (code, out, _) = plumb_cli(&[
        "sync",
        "health-app",
        "--local",
        "--config",
        policy.to_str().unwrap(),
        "--wait",
        "--timeout",
        "3s",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("still Synced / Progressing") && out.contains("portal-lb"), "{out}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let r = ctx.run_pass("health-app", Mode::Policy, None).await.unwrap();
    let stalled = r.status.conditions.iter().find(|c| c.type_ == "HealthStalled").expect("stall warning");
    assert!(stalled.message.contains("portal-lb"), "{stalled:?}");
    assert_eq!(r.status.health, HealthStatus::Progressing, "a stall is a warning; health stays Progressing");
}

/// The two axes of MISSION.md. (a) Git declares a Deployment whose container cannot start
/// (its pod's status written as the kubelet would: CrashLoopBackOff): **Synced + Degraded**, naming
/// the pod and the reason. (b) A Deployment scaled by hand while its pods run fine (kwok),
/// selfHeal off: **OutOfSync + Healthy**.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_but_degraded_and_out_of_sync_but_healthy() {
    let ns = "health-axes";
    let lab = Lab::new("axes");
    // pods pinned to a node kwok does not manage, so only this test writes their status
    lab.repo.write("a/web.yaml", &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{nodeName: unmanaged-node, containers: [{{name: web, image: \"registry.example.test/web:broken\"}}]}}\n")).unwrap();
    lab.repo.write("b/deploy.yaml", &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: api, namespace: {ns}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: api}}}}\n  template:\n    metadata: {{labels: {{app: api}}}}\n    spec: {{containers: [{{name: api, image: \"nginx:1.27.3\"}}]}}\n")).unwrap();
    lab.repo.commit("two apps").unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-health}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: false, syncOptions: [CreateNamespace=true]}}\napplications:\n  - {{name: axes-a, repository: r, revision: main, path: a, namespace: {ns}, environment: e}}\n  - {{name: axes-b, repository: r, revision: main, path: b, namespace: {ns}, environment: e}}\n",
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), true).await;
    assert!(ctx.run_pass("axes-a", Mode::Policy, None).await.unwrap().sync.is_some());
    assert!(ctx.run_pass("axes-b", Mode::Policy, None).await.unwrap().sync.is_some());

    // (a) the kubelet reports the Deployment's pod crash-looping
    let pod_name = wait_for("the Deployment's pod", Duration::from_secs(30), || async {
        // `items[*]`: an empty list (the pod not created yet) prints nothing instead of failing
        let names = kubectl(&["-n", ns, "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"]);
        names.split_whitespace().next().map(str::to_string)
    })
    .await;
    kubectl(&[
        "-n",
        ns,
        "patch",
        "pod",
        &pod_name,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","containerStatuses":[{"name":"web","image":"registry.example.test/web:broken","imageID":"","ready":false,"restartCount":4,"started":false,"state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 40s restarting failed container"}},"lastState":{}}]}}"#,
    ]);
    let r = wait_for("Degraded (once the pod watch has it)", Duration::from_secs(20), || async {
        let r = ctx.run_pass("axes-a", Mode::Policy, None).await.unwrap();
        (r.status.health == HealthStatus::Degraded).then_some(r)
    })
    .await;
    assert_eq!(
        (r.status.sync, r.status.health),
        (SyncStatus::Synced, HealthStatus::Degraded),
        "{:?}",
        r.status.resources
    );
    let pod = &r.status.resources[0];
    assert!(pod.health_message.contains(&pod_name) && pod.health_message.contains("CrashLoopBackOff"), "{pod:?}");
    // its health read its ReplicaSets and Pods from watches of its own namespace only:
    // the cluster's other Pods are not cached
    let watches = ctx.watches();
    for child in ["Pod (v1)", "ReplicaSet (apps/v1)"] {
        assert!(watches.contains(&format!("{child} in {ns}")), "{watches:?}");
        assert!(
            watches.iter().filter(|w| w.starts_with(child)).all(|w| w.ends_with(&format!(" in {ns}"))),
            "{watches:?}"
        );
    }
    assert!(watches.contains(&format!("Deployment (apps/v1), labelled, in {ns}")), "{watches:?}");

    // (b) pods run (kwok); a hand scale to 5
    wait_for("api Healthy", Duration::from_secs(60), || async {
        let r = ctx.run_pass("axes-b", Mode::Policy, None).await.unwrap();
        (r.status.health == HealthStatus::Healthy).then_some(())
    })
    .await;
    kubectl(&["-n", ns, "scale", "deployment", "api", "--replicas=5"]);
    let st = wait_for("5 replicas running", Duration::from_secs(60), || async {
        let r = ctx.run_pass("axes-b", Mode::Policy, None).await.unwrap();
        let d = r.status.resources.iter().find(|x| x.object.starts_with("Deployment")).cloned()?;
        (d.health == HealthStatus::Healthy && d.health_message.contains("5/5")).then_some(r.status)
    })
    .await;
    assert_eq!((st.sync, st.health), (SyncStatus::OutOfSync, HealthStatus::Healthy), "{:?}", st.resources);
    assert!(st.resources[0].reason.contains("/spec/replicas 5→2"), "{:?}", st.resources);
}

/// A namespace's watch of children (the Pods and ReplicaSets workload health reads)
/// starts when health is first read there, is not one the readiness probe waits for,
/// and stops once the namespace holds no managed workload (P4: children are watched only
/// in namespaces that hold managed workloads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_s_children_watch_lasts_as_long_as_its_managed_workloads() {
    let (ns, app) = ("children-watch", "children-watch-app");
    kubectl(&["create", "namespace", ns]);
    let cluster = plumb::cluster::Cluster::connect(Some(&control_plane().kubeconfig)).await.unwrap();
    let (drift, _drifted) = tokio::sync::mpsc::unbounded_channel();
    let token = tokio_util::sync::CancellationToken::new();
    let cache = plumb::watch::LiveCache::new(cluster.client().clone(), drift, token.clone(), &[app]);
    let (pods, deployments) =
        (cluster.kind("v1", "Pod").await.unwrap(), cluster.kind("apps/v1", "Deployment").await.unwrap());
    kubectl_apply(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}, labels: {{plumb.dev/app: {app}}}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: \"nginx:1.27.3\"}}]}}\n"
    ));
    cache.ready(&deployments, Duration::from_secs(30)).await;
    wait_for("the managed Deployment in the cache", Duration::from_secs(30), || async {
        (cache.list_app(&deployments, app)?.len() == 1).then_some(())
    })
    .await;

    // the first health read starts the namespace's watch; readiness never waits for it
    let _ = cache.by_owner(&pods, ns);
    assert_eq!(cache.watches(), ["Deployment (apps/v1), labelled".to_string(), format!("Pod (v1) in {ns}")]);
    assert!(cache.unsynced().iter().all(|w| !w.starts_with("Pod")), "{:?}", cache.unsynced());
    wait_for("the namespace's Pods listed", Duration::from_secs(30), || async { cache.by_owner(&pods, ns) }).await;

    // kept while the namespace holds a managed workload, however long unread
    assert_eq!(cache.stop_unneeded_children(Duration::ZERO), Vec::<String>::new());
    // kept, without workloads, while read within the grace
    kubectl(&["-n", ns, "delete", "deployment", "web", "--wait=true"]);
    wait_for("the Deployment gone from the cache", Duration::from_secs(30), || async {
        cache.list_app(&deployments, app)?.is_empty().then_some(())
    })
    .await;
    assert_eq!(cache.stop_unneeded_children(Duration::from_secs(3600)), Vec::<String>::new());
    // stopped once unread past it
    assert_eq!(cache.stop_unneeded_children(Duration::ZERO), [format!("Pod (v1) in {ns}")]);
    assert_eq!(cache.watches(), ["Deployment (apps/v1), labelled"]);
    token.cancel();
}

/// `plumb sync --local --wait` judges health as the server does: a StatefulSet whose
/// pod crash-loops (its status written as the kubelet would) is **Degraded** for the
/// server (watches) and for the command line (no watches: its pods read by a LIST),
/// naming the pod — never "still Progressing" until the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_wait_calls_a_crash_looping_stateful_set_degraded_as_the_server_does() {
    let ns = "health-sts";
    let lab = Lab::new("sts");
    // the pod is pinned to a node kwok does not manage, so only this test writes its status
    lab.repo.write("app/db.yaml", &format!("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db, namespace: {ns}}}\nspec:\n  replicas: 1\n  serviceName: db\n  selector: {{matchLabels: {{app: db}}}}\n  template:\n    metadata: {{labels: {{app: db}}}}\n    spec: {{nodeName: unmanaged-node, containers: [{{name: db, image: \"registry.example.test/db:broken\"}}]}}\n")).unwrap();
    lab.repo.commit("a database that cannot start").unwrap();
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-health-sts}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\napplications:\n  - {{name: sts-app, repository: r, revision: main, path: app, namespace: {ns}, environment: e}}\n",
            lab.url
        ),
    );
    let server = context_for(&policy, &lab.tmp.path().join("cache"), true).await;
    assert!(server.run_pass("sts-app", Mode::Policy, None).await.unwrap().sync.is_some());
    wait_for("the StatefulSet's pod", Duration::from_secs(30), || async {
        let names = kubectl(&["-n", ns, "get", "pods", "-l", "app=db", "-o", "jsonpath={.items[*].metadata.name}"]);
        names.split_whitespace().any(|n| n == "db-0").then_some(())
    })
    .await;
    kubectl(&[
        "-n",
        ns,
        "patch",
        "pod",
        "db-0",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","containerStatuses":[{"name":"db","image":"registry.example.test/db:broken","imageID":"","ready":false,"restartCount":4,"started":false,"state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 40s restarting failed container"}},"lastState":{}}]}}"#,
    ]);
    let r = wait_for("Degraded for the server (once its pod watch has the pod)", Duration::from_secs(30), || async {
        let r = server.run_pass("sts-app", Mode::Policy, None).await.unwrap();
        (r.status.health == HealthStatus::Degraded).then_some(r)
    })
    .await;
    assert!(r.status.resources[0].health_message.contains("pod db-0 CrashLoopBackOff"), "{:?}", r.status.resources);

    let (code, out, err) =
        plumb_cli(&["sync", "sts-app", "--local", "--config", policy.to_str().unwrap(), "--wait", "--timeout", "20s"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("sts-app: Degraded"), "{out}\n{err}");
    assert!(out.contains("StatefulSet") && out.contains("pod db-0 CrashLoopBackOff"), "{out}");
}
