//! `plumb bootstrap` against the real control plane: it writes the installation into a
//! clone of a repository served over HTTP and installs it (resource definition,
//! namespace, RBAC, Deployment, policy ConfigMap, webhook Secret); once the files are
//! pushed, `plumb serve` running with the ConfigMap's policy syncs its own application,
//! `plumb`; a policy change in Git reaches the ConfigMap and, reloaded in place, starts
//! a new application; another application whose Git writes into plumb's namespace is
//! refused; and removing plumb's own Deployment, ServiceAccount, Namespace and
//! resource definition from Git deletes none of them, while the NetworkPolicy goes.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{
    Lab,
    bootstrap::{NS, Serve, bootstrap, every_two_seconds, exists, mounted_policy, remount, status_of},
    control_plane, kubectl, wait_for,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_installs_plumb_and_hands_it_to_git() {
    let cp = control_plane();
    let lab = Lab::new("fleet");
    lab.repo.write("README.md", "fleet\n").unwrap();
    lab.repo.commit("first").unwrap();
    let work = lab.repo.work.to_str().unwrap();
    let bootstrap = |extra: &[&str]| bootstrap(&lab, "clusters/lab", extra);

    // --dry-run writes and applies nothing
    let (code, out, err) = bootstrap(&["--dry-run"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("would apply Deployment.apps/plumb-system/plumb"), "{out}");
    assert!(!lab.repo.work.join("clusters").exists() && !exists(&["namespace", NS]));

    let image = "registry.example.com/plumb/plumb:0.1.0";
    let (code, out, err) = bootstrap(&["--image", image]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("git -C {work} add clusters/lab")), "{out}");
    let live =
        kubectl(&["-n", NS, "get", "deployment", "plumb", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]);
    assert_eq!(live, image);
    assert!(!err.contains("warning"), "{err}");
    for (kind, name) in [
        ("customresourcedefinition", "applications.plumb.dev"),
        ("namespace", NS),
        ("clusterrolebinding", "plumb-cluster-admin"),
        ("clusterrole", "plumb-viewer"),
    ] {
        assert!(exists(&[kind, name]), "{kind} {name}");
    }
    for (kind, name) in [
        ("deployment", "plumb"),
        ("serviceaccount", "plumb"),
        ("rolebinding", "plumb-self"),
        ("configmap", "plumb-policy"),
    ] {
        assert!(exists(&["-n", NS, kind, name]), "{kind} {name}");
    }
    assert!(mounted_policy().contains("selfManagement: true"));
    let secret = kubectl(&["-n", NS, "get", "secret", "plumb-webhook", "-o", "jsonpath={.data.webhook-secret}"]);
    assert_eq!(secret.len(), 88, "32 bytes as hex, base64: {secret}");
    let value =
        String::from_utf8(base64::Engine::decode(&base64::engine::general_purpose::STANDARD, secret.trim()).unwrap())
            .unwrap();
    assert!(!out.contains(&value) && !err.contains(&value), "the secret is never printed");
    // the policy is yours once written: an edit is kept, and installed by a second run
    let policy_path = lab.repo.work.join("clusters/lab/policy.yaml");
    let generated = std::fs::read_to_string(&policy_path).unwrap();
    let edited = every_two_seconds(&generated);
    std::fs::write(&policy_path, &edited).unwrap();
    // plumb has not run yet (no Application `plumb`): keeping a file is a first install,
    // refused without --keep-existing, the files named
    let (code, _, err) = bootstrap(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--keep-existing") && err.contains("clusters/lab/policy.yaml"), "{err}");
    let (code, out, err) = bootstrap(&["--keep-existing"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("keeping") && !out.contains("wrote "), "{out}");
    assert!(mounted_policy().contains("reconcileInterval: 2s"));
    // any other file edited in the checkout is not overwritten without --force
    let netpol = lab.repo.work.join("clusters/lab/plumb/base/networkpolicy.yaml");
    let shipped = std::fs::read_to_string(&netpol).unwrap();
    std::fs::write(&netpol, format!("{shipped}# mine\n")).unwrap();
    let (code, _, err) = bootstrap(&["--keep-existing"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("exist and differ (--force overwrites them)") && err.contains("networkpolicy.yaml"), "{err}");
    std::fs::write(&netpol, shipped).unwrap();

    // pushed: from now on Git is the authority
    let bootstrapped = lab.repo.commit("plumb bootstrap").unwrap();
    let policy = lab.tmp.path().join("policy.yaml");
    remount(&policy);
    let serve = Serve::start(&lab, &policy, &cp.kubeconfig);
    let logs = || serve.logs();
    wait_for(&format!("plumb Synced ({})", logs()), Duration::from_secs(60), || async {
        (status_of("plumb")["sync"] == "Synced").then_some(())
    })
    .await;

    // a policy change in Git: the ConfigMap follows, and the reloaded policy runs it
    kubectl(&["create", "namespace", "bootstrap-web"]);
    let cm = |name: &str, ns: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{k: from-git}}\n")
    };
    lab.repo.write("apps/web/cm.yaml", &cm("web", "bootstrap-web")).unwrap();
    // another application's Git aiming at plumb's policy
    lab.repo.write("apps/intruder/cm.yaml", &cm("plumb-policy", NS)).unwrap();
    let apps = "  - {name: web, repository: plumb, revision: main, path: apps/web, namespace: bootstrap-web, environment: plumb}\n  - {name: intruder, repository: plumb, revision: main, path: apps/intruder, namespace: bootstrap-web, environment: plumb}\n";
    lab.repo.write("clusters/lab/policy.yaml", &format!("{edited}{apps}")).unwrap();
    lab.repo.commit("two applications").unwrap();
    wait_for(&format!("the ConfigMap updated ({})", logs()), Duration::from_secs(60), || async {
        mounted_policy().contains("name: intruder").then_some(())
    })
    .await;
    remount(&policy);
    wait_for(&format!("web Synced ({})", logs()), Duration::from_secs(60), || async {
        (status_of("web")["sync"] == "Synced").then_some(())
    })
    .await;
    assert_eq!(kubectl(&["-n", "bootstrap-web", "get", "configmap", "web", "-o", "jsonpath={.data.k}"]), "from-git");
    let refusal = wait_for(&format!("intruder refused ({})", logs()), Duration::from_secs(60), || async {
        let s = status_of("intruder").to_string();
        s.contains("is never written from Git").then_some(s)
    })
    .await;
    assert!(refusal.contains("plumb's own namespace"), "{refusal}");
    assert!(mounted_policy().contains("selfManagement: true"), "plumb's policy is untouched");

    // plumb's own objects leave Git: none is deleted, the NetworkPolicy is pruned
    let base = "clusters/lab/plumb/base/kustomization.yaml";
    let text = std::fs::read_to_string(lab.repo.work.join(base)).unwrap();
    let mut kept = text.clone();
    for file in ["crd.yaml", "namespace.yaml", "serviceaccount.yaml", "deployment.yaml", "networkpolicy.yaml"] {
        kept = kept.replace(&format!("  - {file}\n"), "");
    }
    assert_ne!(kept, text);
    lab.repo.write(base, &kept).unwrap();
    lab.repo.commit("plumb's own objects leave Git").unwrap();
    wait_for(&format!("the NetworkPolicy pruned ({})", logs()), Duration::from_secs(60), || async {
        (!exists(&["-n", NS, "networkpolicy", "plumb"])).then_some(())
    })
    .await;
    for args in [
        &["customresourcedefinition", "applications.plumb.dev"][..],
        &["namespace", NS],
        &["-n", NS, "deployment", "plumb"],
        &["-n", NS, "serviceaccount", "plumb"],
        &["-n", NS, "applications.plumb.dev", "web"],
    ] {
        assert!(exists(args), "{args:?} is still there");
    }
    let s = status_of("plumb");
    assert_eq!(s["sync"], "Synced", "{s}");

    // a person with `patch applications.plumb.dev` (plumb-operator) cannot hold plumb's
    // own installation back: a pin to an earlier commit (an older policy) and a pause
    // are refused, and plumb keeps following Git
    let now = plumb::status::now();
    let pin = format!("{{\"revision\": \"{bootstrapped}\", \"by\": \"operator\", \"at\": \"{now}\"}}");
    kubectl(&["-n", NS, "annotate", "applications.plumb.dev", "plumb", &format!("plumb.dev/rollback={pin}")]);
    let refused = wait_for(&format!("the pin refused ({})", logs()), Duration::from_secs(60), || async {
        let s = status_of("plumb").to_string();
        s.contains("is plumb's own installation (selfManagement)").then_some(s)
    })
    .await;
    assert!(refused.contains("revert in Git"), "{refused}");
    let until = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_hours(1)).unwrap();
    let pause = format!("{{\"until\": \"{until:.0}\", \"by\": \"operator\", \"reason\": \"hold\"}}");
    kubectl(&["-n", NS, "annotate", "applications.plumb.dev", "plumb", &format!("plumb.dev/suspend={pause}")]);
    let refused = wait_for(&format!("the pause refused ({})", logs()), Duration::from_secs(60), || async {
        let s = status_of("plumb");
        s.to_string().contains(plumb::reconcile::SELF_PAUSE_REFUSED).then_some(s)
    })
    .await;
    assert!(refused.get("suspended").is_none_or(serde_json::Value::is_null), "not paused: {refused}");
    assert!(refused.get("pinned").is_none_or(serde_json::Value::is_null), "not pinned: {refused}");
}
