//! `plumb bootstrap --profile least-privilege` against the real control plane, with
//! `plumb serve` holding exactly the token of plumb's ServiceAccount: the rights of
//! `self-management.yaml` are enough for plumb to manage its own installation — a
//! changed ClusterRole of its own is applied (`escalate`), a file removed from Git is
//! pruned, its Deployment is kept — and no ClusterRoleBinding to `cluster-admin` exists.
//! Apart from `bootstrap.rs`: both install into `plumb-system`, and each test binary has
//! its own control plane.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{
    Lab,
    bootstrap::{NS, Serve, bootstrap, every_two_seconds, exists, mounted_policy, remount, status_of},
    kubectl, service_account_kubeconfig, wait_for,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_plumb_manages_its_own_installation() {
    let lab = Lab::new("fleet");
    lab.repo.write("README.md", "fleet\n").unwrap();
    lab.repo.commit("first").unwrap();
    let (code, out, err) = bootstrap(&lab, "clusters/lp", &["--profile", "least-privilege"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        exists(&["clusterrolebinding", "plumb-self-management"]) && exists(&["-n", NS, "rolebinding", "plumb-apply"])
    );
    assert!(!exists(&["clusterrolebinding", "plumb-cluster-admin"]), "no cluster-admin under least-privilege");
    assert!(mounted_policy().contains("destinations: {namespaces: [plumb-system, web]}"));

    let policy_path = lab.repo.work.join("clusters/lp/policy.yaml");
    let edited = every_two_seconds(&std::fs::read_to_string(&policy_path).unwrap());
    std::fs::write(&policy_path, &edited).unwrap();
    lab.repo.commit("plumb bootstrap").unwrap();
    let policy = lab.tmp.path().join("policy.yaml");
    remount(&policy);
    let kubeconfig = service_account_kubeconfig(NS, "plumb", &lab.tmp.path().join("plumb-sa.kubeconfig"));
    let who = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&who.stdout), "system:serviceaccount:plumb-system:plumb");
    let can = |args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([&["auth", "can-i"], args].concat())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(can(&["escalate", "clusterroles/plumb-viewer"]), "yes");
    assert_eq!(can(&["escalate", "clusterroles/admin"]), "no");
    assert_eq!(can(&["create", "deployments", "-n", "kube-system"]), "no");
    let serve = Serve::start(&lab, &policy, &kubeconfig);
    wait_for(&format!("plumb Synced ({})", serve.logs()), Duration::from_secs(60), || async {
        (status_of("plumb")["sync"] == "Synced" && mounted_policy().contains("reconcileInterval: 2s")).then_some(())
    })
    .await;
    remount(&policy);

    // a ClusterRole of plumb's changes in Git (rules plumb does not hold cluster-wide:
    // `escalate`), the NetworkPolicy and the Deployment leave it
    let role = "clusters/lp/plumb/base/role.yaml";
    let text = std::fs::read_to_string(lab.repo.work.join(role)).unwrap();
    let changed = text.replacen("  name: plumb-viewer\n", "  name: plumb-viewer\n  labels: {lab: changed}\n", 1);
    assert_ne!(changed, text);
    lab.repo.write(role, &changed).unwrap();
    let base = "clusters/lp/plumb/base/kustomization.yaml";
    let text = std::fs::read_to_string(lab.repo.work.join(base)).unwrap();
    let fewer = text.replace("  - networkpolicy.yaml\n", "").replace("  - deployment.yaml\n", "");
    assert_ne!(fewer, text);
    lab.repo.write(base, &fewer).unwrap();
    lab.repo.commit("a label, two files fewer").unwrap();
    wait_for(&format!("the change applied ({})", serve.logs()), Duration::from_secs(60), || async {
        let label = kubectl(&["get", "clusterrole", "plumb-viewer", "-o", "jsonpath={.metadata.labels.lab}"]);
        (label == "changed" && !exists(&["-n", NS, "networkpolicy", "plumb"])).then_some(())
    })
    .await;
    assert!(exists(&["-n", NS, "deployment", "plumb"]), "plumb's Deployment is never pruned");
    let s = status_of("plumb");
    assert_eq!(s["sync"], "Synced", "{s}");
}
