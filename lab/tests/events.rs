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

/// What a log line alone used to say is a warning condition on the application: an
/// ignoreDifferences rule that matches no kind (`app` for `apps`), and an object
/// labelled for the application by hand without a tracking-id (plumb neither compares
/// nor prunes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_that_matches_nothing_and_a_labelled_untracked_object_are_warnings() {
    let (status_ns, ns) = ("plumb-ev-silent", "ev-silent");
    let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {ns}}}\ndata: {{a: b}}\n");
    let env = format!(
        "{AUTO}\nignoreDifferences:\n  - {{group: app, kind: Deployment, jsonPointers: [/spec/replicas]}}\n  - {{group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}}"
    );
    let app = App::new(status_ns, "ev-silent", ns, &env, &[("a.yaml", &cm)]).await;
    app.settle().await;
    kubectl(&["-n", ns, "create", "configmap", "by-hand", "--from-literal=x=y"]);
    kubectl(&["-n", ns, "label", "configmap", "by-hand", "plumb.dev/app=ev-silent"]);
    let r = app.pass(Mode::Policy).await;
    let warning = |t: plumb::status::ConditionType| {
        r.status.conditions.iter().find(|c| c.type_ == t).map(|c| c.message.clone()).unwrap_or_default()
    };
    let rules = warning(plumb::status::ConditionType::IgnoreDifferencesWarning);
    assert!(rules.contains("app/Deployment") && !rules.contains("apps/Deployment"), "{:?}", r.status.conditions);
    let untracked = warning(plumb::status::ConditionType::UntrackedResourceWarning);
    assert!(untracked.contains(&format!("ConfigMap/{ns}/by-hand")), "{:?}", r.status.conditions);
    assert_eq!(r.status.sync, SyncStatus::Synced, "a warning, not drift");
    assert!(kubectl(&["-n", ns, "get", "cm", "by-hand", "-o", "name"]).contains("by-hand"), "not pruned");
}
