//! Events people find: `kubectl describe` of an application's resource lists plumb's
//! Events about it, and a desired state that cannot be read is told there once.
#![allow(clippy::unwrap_used)]

mod support;

use plumb::{compare::SyncStatus, reconcile::Mode};
use support::*;

const AUTO: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}";

/// The Events `kubectl describe` shows for application `app` (the lines after `Events:`).
fn described_events(status_ns: &str, app: &str) -> String {
    let out = kubectl(&["-n", status_ns, "describe", "applications.plumb.dev", app]);
    out.split_once("Events:").map(|(_, e)| e.to_string()).unwrap_or_default()
}

/// `kubectl describe applications.plumb.dev web` lists the sync's Events (they carry
/// the resource's uid); a commit whose YAML does not parse adds one Warning
/// `ComparisonError` naming the file, and passes over the same broken commit add no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_describe_shows_an_application_s_events_and_its_errors_once() {
    let (status_ns, ns) = ("plumb-ev-describe", "ev-describe");
    let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {ns}}}\ndata: {{a: b}}\n");
    let app = App::new(status_ns, "ev-web", ns, AUTO, &[("a.yaml", &cm)]).await;
    assert_eq!(app.settle().await.status.sync, SyncStatus::Synced);
    let events = described_events(status_ns, "ev-web");
    assert!(events.contains("SyncSucceeded"), "{events}");

    app.commit(&[("broken.yaml", "kind: ConfigMap\nmetadata: {name: [\n")], &[]);
    for _ in 0..3 {
        let r = app.pass(Mode::Policy).await;
        assert_eq!(r.status.sync, SyncStatus::Unknown, "{:?}", r.status.conditions);
    }
    let events = described_events(status_ns, "ev-web");
    let errors: Vec<&str> = events.lines().filter(|l| l.contains("ComparisonError")).collect();
    assert_eq!(errors.len(), 1, "{events}");
    assert!(errors[0].contains("Warning") && errors[0].contains("broken.yaml"), "{events}");
}
