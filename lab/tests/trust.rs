//! Trust boundaries on the real control plane: what one application's Git may make
//! plumb do. Each test proves the refusal *and* that nothing was written or deleted.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{
    compare::SyncStatus,
    reconcile::Mode,
    status::{ConditionType, SyncResult},
};
use support::*;

const AUTO: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true}";

fn cm(ns: &str, name: &str, extra: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n{extra}data: {{a: b}}\n")
}

fn exists(args: &[&str]) -> bool {
    control_plane().kubectl(args).is_ok()
}

/// Objects outside the application's boundaries — another namespace, plumb's own
/// namespace, a cluster-scoped kind not allowed, a binding to plumb's ClusterRole —
/// refuse the whole sync, naming file, object and rule; nothing is written, not even
/// the objects inside the boundaries. `plumb diff` and `sync --dry-run` show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_outside_the_boundaries_refuse_the_sync_and_nothing_is_written() {
    let ns = "tr-bounds";
    kubectl(&["create", "namespace", ns]);
    let inside = cm(ns, "inside", "");
    let app = App::new("plumb-tr-bounds", "tr-bounds", ns, AUTO, &[("inside.yaml", &inside)]).await;
    let writes = app.ctx.cluster.requests().1;
    let outside: &[(&str, String, &str)] = &[
        ("kube.yaml", cm("kube-system", "planted", ""), "namespace \"kube-system\" is not among the destinations"),
        ("own.yaml", cm("plumb-tr-bounds", "plumb-app-other", ""), "plumb's own namespace \"plumb-tr-bounds\""),
        (
            "crb.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: tr-escalate}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: tr-bounds}]\n".into(),
            "cluster-scoped ClusterRoleBinding.rbac.authorization.k8s.io is not allowed (clusterResources: none)",
        ),
        (
            "rb.yaml",
            format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: grab, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: plumb}}\nsubjects: [{{kind: ServiceAccount, name: default, namespace: {ns}}}]\n"),
            "RoleBinding grants plumb's own ClusterRole plumb",
        ),
    ];
    for (file, text, rule) in outside {
        app.commit(&[(file, text)], &[]);
        let r = app.pass(Mode::Policy).await;
        let rec = r.sync.as_ref().expect("a refused sync is recorded");
        assert_eq!(rec.result, SyncResult::Refused, "{file}: {rec:?}");
        assert!(rec.message.contains(&format!("app/{file}")) && rec.message.contains(rule), "{file}: {}", rec.message);
        let (code, out, err) = plumb_cli(&["diff", "tr-bounds", "-c", app.policy.to_str().unwrap()]);
        assert!(code == 2 && format!("{out}{err}").contains(rule), "{file}: diff {code}\n{out}\n{err}");
        let (code, out, _) = plumb_cli(&["sync", "tr-bounds", "-c", app.policy.to_str().unwrap(), "--dry-run"]);
        assert!(code == 1 && out.contains("refused") && out.contains(rule), "{file}: dry-run {code}\n{out}");
        // a person's sync is refused too
        let (code, out, _) = plumb_cli(&["sync", "tr-bounds", "--local", "-c", app.policy.to_str().unwrap()]);
        assert_eq!(code, 1, "{file}: {out}");
        app.commit(&[], &[file]);
    }
    assert!(!exists(&["-n", ns, "get", "cm", "inside"]), "nothing written, the objects inside included");
    assert!(!exists(&["-n", "kube-system", "get", "cm", "planted"]));
    assert!(!exists(&["get", "clusterrolebinding", "tr-escalate"]));
    assert!(!exists(&["-n", ns, "get", "rolebinding", "grab"]));
    assert_eq!(app.ctx.cluster.requests().1, writes, "no write at all");

    // the environment widens the boundaries: the same objects are then applied
    let widened = std::fs::read_to_string(&app.policy)
        .unwrap()
        .replace("    syncPolicy:", &format!("    destinations: {{namespaces: [{ns}, tr-bounds-*]}}\n    syncPolicy:"));
    std::fs::write(&app.policy, widened).unwrap();
    let ctx = context_for(&app.policy, &app.lab.tmp.path().join("cache2"), false).await;
    kubectl(&["create", "namespace", "tr-bounds-eu"]);
    app.commit(&[("eu.yaml", &cm("tr-bounds-eu", "eu", ""))], &[]);
    let r = ctx.run_pass("tr-bounds", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.map(|s| s.result), Some(SyncResult::Succeeded));
    assert!(exists(&["-n", "tr-bounds-eu", "get", "cm", "eu"]) && exists(&["-n", ns, "get", "cm", "inside"]));
}

/// Adoption is explicit: an existing object plumb did not create refuses the sync
/// ("exists and is not managed by plumb") and is left as it was; with `Adopt=true` it
/// is taken over, remembered as adopted, and its prune then waits for a person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_objects_are_adopted_only_when_asked_and_their_prune_needs_a_person() {
    let ns = "tr-adopt";
    kubectl(&["create", "namespace", ns]);
    kubectl(&["-n", ns, "create", "configmap", "precious", "--from-literal=owner=dba"]);
    let uid = kubectl(&["-n", ns, "get", "cm", "precious", "-o", "jsonpath={.metadata.uid}"]);
    let desired = cm(ns, "precious", "");
    let other = cm(ns, "other", "");
    let app = App::new("plumb-tr-adopt", "tr-adopt", ns, AUTO, &[("a.yaml", &desired), ("b.yaml", &other)]).await;
    let r = app.pass(Mode::Policy).await;
    let rec = r.sync.expect("refused");
    assert_eq!(rec.result, SyncResult::Refused, "{rec:?}");
    assert!(
        rec.message.contains("exists and is not managed by plumb") && rec.message.contains("Adopt=true"),
        "{}",
        rec.message
    );
    assert_eq!(kubectl(&["-n", ns, "get", "cm", "precious", "-o", "jsonpath={.data.owner}"]), "dba", "untouched");
    assert!(!exists(&["-n", ns, "get", "cm", "other"]), "nothing written");

    let adopted = cm(ns, "precious", "  annotations: {plumb.dev/sync-options: Adopt=true}\n");
    app.commit(&[("a.yaml", &adopted)], &[]);
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.map(|s| s.result), Some(SyncResult::Succeeded));
    let ann = kubectl(&["-n", ns, "get", "cm", "precious", "-o", "jsonpath={.metadata.annotations}"]);
    assert!(ann.contains("plumb.dev/adopted") && ann.contains("plumb.dev/tracking-id"), "{ann}");
    assert_eq!(kubectl(&["-n", ns, "get", "cm", "precious", "-o", "jsonpath={.metadata.uid}"]), uid);

    // leaving Git: an adopted object waits for a person's approval
    app.commit(&[], &["a.yaml"]);
    let r = app.pass(Mode::Policy).await;
    let res = r.status.resources.iter().find(|x| x.object == format!("ConfigMap/{ns}/precious")).unwrap();
    assert!(res.reason.contains("prune needs approval (adopted: plumb did not create it)"), "{res:?}");
    assert_eq!(kubectl(&["-n", ns, "get", "cm", "precious", "-o", "jsonpath={.metadata.uid}"]), uid, "not deleted");
}

/// Approvals come only from a person: `plumb.dev/prune-approved` that arrived through
/// Git does not approve; the same annotation set by hand does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_approval_from_git_does_not_count() {
    approval_from_git_does_not_count("tr-approve", false).await;
}

/// The same under `plumb serve`, whose live objects come from the watch cache: that
/// cache drops plumb's own managedFields field set, which is what tells a Git-written
/// approval from a person's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_approval_from_git_does_not_count_under_serve() {
    approval_from_git_does_not_count("tr-approve-serve", true).await;
}

async fn approval_from_git_does_not_count(ns: &str, watches: bool) {
    kubectl(&["create", "namespace", ns]);
    let now = jiff::Timestamp::now().to_string();
    let confirm = cm(
        ns,
        "keep",
        &format!("  annotations: {{plumb.dev/sync-options: Prune=confirm, plumb.dev/prune-approved: \"{now}\"}}\n"),
    );
    let other = cm(ns, "other", "");
    let status_ns = format!("plumb-{ns}");
    let mut app = App::new(&status_ns, ns, ns, AUTO, &[("a.yaml", &confirm), ("b.yaml", &other)]).await;
    if watches {
        app.ctx = context_for(&app.policy, &app.lab.tmp.path().join("cache-watched"), true).await;
    }
    assert_eq!(app.settle().await.status.sync, SyncStatus::Synced);
    app.commit(&[], &["a.yaml"]);
    let r = app.pass(Mode::Policy).await;
    let res = r.status.resources.iter().find(|x| x.object == format!("ConfigMap/{ns}/keep")).unwrap();
    assert!(res.reason.contains("prune needs approval") && res.reason.contains("came from Git"), "{res:?}");
    assert!(exists(&["-n", ns, "get", "cm", "keep"]), "not deleted by its own commit's approval");

    kubectl(&[
        "-n",
        ns,
        "annotate",
        "cm",
        "keep",
        "--overwrite",
        &format!("plumb.dev/prune-approved={}", jiff::Timestamp::now()),
    ]);
    app.pass(Mode::Policy).await;
    wait_for("the approved prune", Duration::from_secs(30), || async {
        (!exists(&["-n", ns, "get", "cm", "keep"])).then_some(())
    })
    .await;
}

/// One object declared by two applications has one owner, the first that synced it;
/// the other shows "owned by application …" and never writes it (no tug-of-war, no
/// NonConverging blaming an unknown writer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_declared_by_two_applications_has_one_owner() {
    let ns = "tr-shared";
    kubectl(&["create", "namespace", ns]);
    let first = App::new("plumb-tr-shared", "tr-first", ns, AUTO, &[("s.yaml", &cm(ns, "shared", ""))]).await;
    assert_eq!(first.settle().await.status.sync, SyncStatus::Synced);
    let second_text = cm(ns, "shared", "").replace("a: b", "a: c");
    let second = App::new("plumb-tr-shared", "tr-second", ns, AUTO, &[("s.yaml", &second_text)]).await;
    let rv = kubectl(&["-n", ns, "get", "cm", "shared", "-o", "jsonpath={.metadata.resourceVersion}"]);
    for _ in 0..3 {
        let r = second.pass(Mode::Policy).await;
        let res = r.status.resources.iter().find(|x| x.object == format!("ConfigMap/{ns}/shared")).unwrap();
        assert!(res.reason.contains("owned by application tr-first"), "{res:?}");
        assert!(
            !r.status.conditions.iter().any(|c| c.type_ == ConditionType::NonConverging),
            "{:?}",
            r.status.conditions
        );
        let f = first.pass(Mode::Policy).await;
        assert_eq!(f.status.sync, SyncStatus::Synced, "the owner sees no tug-of-war");
    }
    assert_eq!(
        kubectl(&["-n", ns, "get", "cm", "shared", "-o", "jsonpath={.metadata.resourceVersion}"]),
        rv,
        "never written"
    );
    assert_eq!(kubectl(&["-n", ns, "get", "cm", "shared", "-o", "jsonpath={.data.a}"]), "b");
}

/// Both applications that declare one object say so and settle: the one that does
/// not own it is Synced with a `SharedResourceWarning` naming the owner, the owner shows
/// the same warning naming the other, and neither writes it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_two_applications_declare_is_named_on_both_and_both_settle() {
    let ns = "tr-shared-both";
    kubectl(&["create", "namespace", ns]);
    let lab = Lab::new("tr-shared-both");
    lab.repo.write("first/s.yaml", &cm(ns, "shared", "")).unwrap();
    lab.repo.write("second/s.yaml", &cm(ns, "shared", "").replace("a: b", "a: c")).unwrap();
    lab.repo.commit("two declare one").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-tr-shared-both}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    {AUTO}\napplications:\n  - {{name: sh-first, repository: r, revision: main, path: first, namespace: {ns}, environment: e}}\n  - {{name: sh-second, repository: r, revision: main, path: second, namespace: {ns}, environment: e}}\n",
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let first = ctx.run_pass("sh-first", Mode::Policy, None).await.unwrap();
    assert_eq!(first.status.sync, SyncStatus::Synced);
    let rv = kubectl(&["-n", ns, "get", "cm", "shared", "-o", "jsonpath={.metadata.resourceVersion}"]);
    let shared = |r: &plumb::reconcile::PassReport| -> Vec<String> {
        let of = r.status.conditions.iter().filter(|c| c.type_ == ConditionType::SharedResourceWarning);
        of.map(|c| c.message.clone()).collect()
    };
    let owner = format!("ConfigMap/{ns}/shared is owned by application sh-first, which synced it first; ");
    for _ in 0..2 {
        let second = ctx.run_pass("sh-second", Mode::Policy, None).await.unwrap();
        assert_eq!(second.status.sync, SyncStatus::Synced, "{:?}", second.status.resources);
        assert!(second.sync.is_none(), "{:?}", second.sync);
        assert_eq!(shared(&second), [format!("{owner}sh-second also declares it and never writes it")]);
        let first = ctx.run_pass("sh-first", Mode::Policy, None).await.unwrap();
        assert_eq!(first.status.sync, SyncStatus::Synced);
        assert_eq!(shared(&first), [format!("{owner}sh-second also declares it and never writes it")]);
    }
    assert_eq!(kubectl(&["-n", ns, "get", "cm", "shared", "-o", "jsonpath={.metadata.resourceVersion}"]), rv);
}

/// Impersonation: an application's writes run as its ServiceAccount, so Kubernetes
/// RBAC is the last line. Lacking one right, the sync fails with a condition naming
/// the verb, the resource and the namespace, and nothing of that kind is written; with
/// the right, the same sync works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_run_as_the_applications_service_account() {
    let ns = "tr-imp";
    kubectl(&["create", "namespace", ns]);
    kubectl(&["-n", ns, "create", "serviceaccount", "deployer"]);
    kubectl(&[
        "-n",
        ns,
        "create",
        "role",
        "deployer",
        "--verb=get,list,watch,create,patch,update,delete",
        "--resource=configmaps",
    ]);
    kubectl(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "deployer",
        "--role=deployer",
        &format!("--serviceaccount={ns}:deployer"),
    ]);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: creds, namespace: {ns}}}\nstringData: {{user: app}}\n"
    );
    let env = format!("{AUTO}\nserviceAccountName: deployer");
    let app =
        App::new("plumb-tr-imp", "tr-imp", ns, &env, &[("cm.yaml", &cm(ns, "settings", "")), ("secret.yaml", &secret)])
            .await;
    let r = app.pass(Mode::Policy).await;
    let rec = r.sync.expect("a sync");
    assert_eq!(rec.result, SyncResult::Failed, "{rec:?}");
    let cond = r.status.conditions.iter().find(|c| c.type_ == ConditionType::SyncError).expect("SyncError");
    let parts = [
        format!("system:serviceaccount:{ns}:deployer"),
        "cannot".into(),
        "\"secrets\"".into(),
        format!("namespace \"{ns}\""),
    ];
    for part in &parts {
        assert!(cond.message.contains(part.as_str()), "{part}: {}", cond.message);
    }
    assert!(!exists(&["-n", ns, "get", "secret", "creds"]), "RBAC refused it");

    kubectl(&[
        "-n",
        ns,
        "create",
        "role",
        "deployer-secrets",
        "--verb=get,list,watch,create,patch,update,delete",
        "--resource=secrets",
    ]);
    kubectl(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "deployer-secrets",
        "--role=deployer-secrets",
        &format!("--serviceaccount={ns}:deployer"),
    ]);
    let r = app.settle().await;
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status.conditions);
    assert!(exists(&["-n", ns, "get", "secret", "creds"]));
    let managers =
        kubectl(&["-n", ns, "get", "secret", "creds", "-o", "jsonpath={.metadata.managedFields[*].manager}"]);
    assert!(managers.contains("plumb"), "{managers}");
}

/// Revisions resolve without ambiguity: `main` naming both a branch and a tag is an
/// error naming both ways to choose (nothing compared, nothing pruned); `refs/heads/main`
/// chooses the branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_naming_a_branch_and_a_tag_is_an_error() {
    let ns = "tr-ambiguous";
    kubectl(&["create", "namespace", ns]);
    let app = App::new("plumb-tr-ambiguous", "tr-ambiguous", ns, AUTO, &[("a.yaml", &cm(ns, "a", ""))]).await;
    assert_eq!(app.settle().await.status.sync, SyncStatus::Synced);
    // a tag `main` in the served repository, next to the branch `main`
    let out = std::process::Command::new("git")
        .args(["tag", "main", "refs/heads/main"])
        .current_dir(&app.lab.repo.bare)
        .output()
        .unwrap();
    assert!(out.status.success(), "git tag: {}", String::from_utf8_lossy(&out.stderr));
    app.commit(&[("b.yaml", &cm(ns, "b", ""))], &["a.yaml"]);
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.status.sync, SyncStatus::Unknown);
    let cond = r.status.conditions.iter().find(|c| c.type_ == ConditionType::ComparisonError).unwrap();
    assert!(cond.message.contains("both a branch and a tag") && cond.message.contains("refs/heads/main"), "{cond:?}");
    assert!(r.sync.is_none(), "nothing synced, nothing pruned");
    assert!(exists(&["-n", ns, "get", "cm", "a"]));

    let chosen = std::fs::read_to_string(&app.policy).unwrap().replace("revision: main", "revision: refs/heads/main");
    std::fs::write(&app.policy, chosen).unwrap();
    let ctx = context_for(&app.policy, &app.lab.tmp.path().join("cache2"), false).await;
    let r = ctx.run_pass("tr-ambiguous", Mode::Policy, None).await.unwrap();
    assert_eq!(r.status.sync, SyncStatus::OutOfSync, "{:?}", r.status.conditions);
    assert_ne!(r.status.sync, SyncStatus::Unknown);
}

/// Paths stay inside the application: a symlink in its path to another application's
/// files (here a Secret) fails the render naming the link — nothing of the other path
/// is applied, nothing pruned; the environment's `sharedPaths` allows a common path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_out_of_the_application_path_is_refused() {
    let ns = "tr-link";
    kubectl(&["create", "namespace", ns]);
    let app = App::new("plumb-tr-link", "tr-link", ns, AUTO, &[("a.yaml", &cm(ns, "a", ""))]).await;
    assert_eq!(app.settle().await.status.sync, SyncStatus::Synced);
    let secret =
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: theirs, namespace: {ns}}}\nstringData: {{k: v}}\n");
    app.lab.repo.write("other/secret.yaml", &secret).unwrap();
    std::os::unix::fs::symlink("../other/secret.yaml", app.lab.repo.work.join("app/secret.yaml")).unwrap();
    app.commit(&[], &[]);
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.status.sync, SyncStatus::Unknown);
    let cond = r.status.conditions.iter().find(|c| c.type_ == ConditionType::ComparisonError).unwrap();
    assert!(
        cond.message.contains("app/secret.yaml") && cond.message.contains("leaves the application's path"),
        "{cond:?}"
    );
    assert!(r.sync.is_none());
    assert!(!exists(&["-n", ns, "get", "secret", "theirs"]) && exists(&["-n", ns, "get", "cm", "a"]));

    let shared = std::fs::read_to_string(&app.policy)
        .unwrap()
        .replace("    syncPolicy:", "    sharedPaths: [other]\n    syncPolicy:");
    std::fs::write(&app.policy, shared).unwrap();
    let ctx = context_for(&app.policy, &app.lab.tmp.path().join("cache2"), false).await;
    let r = ctx.run_pass("tr-link", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status.conditions);
    assert!(exists(&["-n", ns, "get", "secret", "theirs"]));
}

/// A watch plumb's identity may not make (403 on list/watch) is a visible
/// `WatchError` condition naming the kind, not a debug line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_watch_is_a_condition() {
    let ns = "tr-watch";
    let status_ns = "plumb-tr-watch";
    kubectl(&["create", "namespace", ns]);
    kubectl(&["create", "namespace", status_ns]);
    kubectl(&["-n", ns, "create", "serviceaccount", "plumb-lite"]);
    let who = format!("system:serviceaccount:{ns}:plumb-lite");
    // may read and write ConfigMaps everywhere, and nothing about Secrets
    kubectl(&[
        "create",
        "clusterrole",
        "tr-watch-cm",
        "--verb=get,list,watch,create,patch,update,delete",
        "--resource=configmaps,events,namespaces",
    ]);
    // and its Application resources, as plumb's own Role grants
    kubectl_apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: tr-watch-apps}\nrules:\n  - {apiGroups: [plumb.dev], resources: [applications, applications/status], verbs: [get, list, watch, create, update, patch]}\n",
    );
    kubectl(&[
        "create",
        "clusterrolebinding",
        "tr-watch-apps",
        "--clusterrole=tr-watch-apps",
        &format!("--serviceaccount={ns}:plumb-lite"),
    ]);
    kubectl(&[
        "create",
        "clusterrolebinding",
        "tr-watch-cm",
        "--clusterrole=tr-watch-cm",
        &format!("--serviceaccount={ns}:plumb-lite"),
    ]);
    let secret =
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: {ns}}}\nstringData: {{k: v}}\n");
    let app = App::new(status_ns, "tr-watch", ns, AUTO, &[("a.yaml", &cm(ns, "a", "")), ("s.yaml", &secret)]).await;
    let config = plumb::config::load(&app.policy).unwrap();
    let admin = plumb::cluster::Cluster::connect(Some(&control_plane().kubeconfig)).await.unwrap();
    let lite = admin.impersonate(&who).await.unwrap();
    let ctx = std::sync::Arc::new(
        plumb::reconcile::Context::new(
            lite,
            std::sync::Arc::new(config),
            app.lab.tmp.path().join("cache-lite"),
            std::sync::Arc::new(plumb::metrics::Metrics::default()),
        )
        .with_watches(),
    );
    let cond = wait_for("a WatchError naming Secret", Duration::from_secs(60), || async {
        let r = ctx.run_pass("tr-watch", Mode::CompareOnly, None).await.unwrap();
        r.status.conditions.into_iter().find(|c| c.type_ == ConditionType::WatchError)
    })
    .await;
    assert!(cond.message.contains("Secret") && cond.message.contains("403"), "{cond:?}");
}

/// What an application came to own in a namespace that later became plumb's Leases'
/// (`settings.leaseNamespace` set after it synced there) is never pruned by it: removed
/// from Git, it stays, held with the reason (deleting a Lease there would end a
/// replica's hold of its shard); the application's other objects sync as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_application_owns_in_the_lease_namespace_is_never_pruned() {
    let (leases, web) = ("tr-leases", "tr-leases-web");
    kubectl(&["create", "namespace", leases]);
    kubectl(&["create", "namespace", web]);
    let env = format!("destinations: {{namespaces: [{leases}, {web}]}}\n{AUTO}");
    let files = [("old.yaml", cm(leases, "old", "")), ("web.yaml", cm(web, "web", ""))];
    let app =
        App::new("plumb-tr-leases", "tr-leases", web, &env, &files.each_ref().map(|(f, t)| (*f, t.as_str()))).await;
    assert_eq!(app.pass(Mode::Policy).await.sync.map(|s| s.result), Some(SyncResult::Succeeded));
    let uid = kubectl(&["-n", leases, "get", "cm", "old", "-o", "jsonpath={.metadata.uid}"]);
    // the operator moves the Leases there; Git drops the object and changes the other
    let text = std::fs::read_to_string(&app.policy).unwrap();
    let text = text.replacen(
        "settings: {statusNamespace: plumb-tr-leases}",
        &format!("settings: {{statusNamespace: plumb-tr-leases, leaseNamespace: {leases}}}"),
        1,
    );
    assert!(text.contains("leaseNamespace"), "{text}");
    std::fs::write(&app.policy, text).unwrap();
    let ctx = context_for(&app.policy, &app.lab.tmp.path().join("cache2"), false).await;
    app.commit(&[("web.yaml", &cm(web, "web", "  labels: {v: '2'}\n"))], &["old.yaml"]);
    let r = ctx.run_pass("tr-leases", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.map(|s| s.result), Some(SyncResult::Succeeded));
    let res = r.status.resources.iter().find(|x| x.object == format!("ConfigMap/{leases}/old")).expect("listed");
    assert!(res.reason.contains("in plumb's own namespaces, which Git never writes: never pruned"), "{res:?}");
    assert_eq!(kubectl(&["-n", leases, "get", "cm", "old", "-o", "jsonpath={.metadata.uid}"]), uid, "not deleted");
    assert_eq!(kubectl(&["-n", web, "get", "cm", "web", "-o", "jsonpath={.metadata.labels.v}"]), "2");
}
