//! The history tells syncs, not passes: a failure that repeats is one entry with a
//! count, retried after a backoff.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{reconcile::Mode, status::SyncResult};
use support::*;

const AUTO: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}";

/// A prune the API server keeps refusing (a ValidatingAdmissionPolicy denies deleting
/// the object) fails once, is not tried again at every pass (a `SyncError` names the
/// backoff), and each retry after the backoff folds into the same history entry
/// (`plumb history` shows `Failed ×2`), instead of one Failed entry every 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_the_server_keeps_refusing_is_one_history_entry_retried_after_a_backoff() {
    let (status_ns, ns) = ("plumb-hist-refused", "hist-refused");
    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{a: b}}\n")
    };
    let app = App::new(status_ns, "hist-web", ns, AUTO, &[("a.yaml", &cm("undeletable")), ("b.yaml", &cm("b"))]).await;
    assert_eq!(app.settle().await.sync.map(|s| s.result), Some(SyncResult::Succeeded));
    kubectl_apply(&format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: hist-undeletable}}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules: [{{apiGroups: [\"\"], apiVersions: [v1], operations: [DELETE], resources: [configmaps]}}]\n  validations:\n    - expression: \"oldObject.metadata.name != 'undeletable'\"\n      message: \"this ConfigMap may not be deleted\"\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: hist-undeletable}}\nspec:\n  policyName: hist-undeletable\n  validationActions: [Deny]\n  matchResources:\n    namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}\n"
    ));
    wait_for("the policy to deny deletes", Duration::from_secs(30), || async {
        control_plane().kubectl(&["-n", ns, "delete", "cm", "undeletable", "--dry-run=server"]).is_err().then_some(())
    })
    .await;

    app.commit(&[], &["a.yaml"]);
    let first = app.pass(Mode::Policy).await;
    assert_eq!(first.sync.as_ref().map(|s| s.result), Some(SyncResult::Failed), "{:?}", first.sync);
    // the first retry runs at once (the cause may just have been fixed), and fails alike
    let again = app.pass(Mode::Policy).await;
    assert_eq!(again.sync.as_ref().map(|s| s.result), Some(SyncResult::Failed), "{:?}", again.sync);
    for _ in 0..3 {
        let r = app.pass(Mode::Policy).await;
        assert!(r.sync.is_none(), "tried again inside the backoff: {:?}", r.sync);
        let held = r.status.conditions.iter().find(|c| c.message.contains("failed 2 time(s) in a row"));
        assert!(held.is_some_and(|c| c.message.contains("next attempt may start in")), "{:?}", r.status.conditions);
    }
    tokio::time::sleep(Duration::from_secs(3)).await; // the second retry's backoff: 2 s
    let retried = app.pass(Mode::Policy).await;
    assert_eq!(retried.sync.as_ref().map(|s| s.result), Some(SyncResult::Failed), "{:?}", retried.sync);

    let (_, history) = app.ctx.store.load("hist-web").await.unwrap();
    let failed: Vec<_> = history.iter().filter(|r| r.result == SyncResult::Failed).collect();
    assert_eq!(failed.len(), 1, "{history:?}");
    assert_eq!(failed[0].retries, 2, "{history:?}");
    let (_, shown, _) = plumb_cli(&["history", "hist-web", "-n", status_ns]);
    assert!(shown.lines().next().is_some_and(|l| l.contains("Failed ×3")), "{shown}");
    kubectl(&["delete", "validatingadmissionpolicybinding", "hist-undeletable"]);
    kubectl(&["delete", "validatingadmissionpolicy", "hist-undeletable"]);
}
