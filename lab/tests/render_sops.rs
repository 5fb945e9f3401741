//! SOPS/age-encrypted Secrets on the real control plane (issue 13): decrypted by the
//! real `sops` (built by `tools/testbins/build.sh sops`, with `age-keygen`) with the key
//! file the policy names; a file that does not decrypt fails the render naming it and
//! prunes nothing; the value never shows in `plumb render`.
#![allow(clippy::unwrap_used)]

mod support;

use std::{path::PathBuf, process::Command};

use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use support::*;

fn bin(name: &str) -> PathBuf {
    let bin = plumb_lab::testbins_dir().join("sops/current/bin").join(name);
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh sops", bin.display());
    bin
}

/// A new age key file in `dir`; returns (file, recipient).
fn age_key(dir: &std::path::Path, name: &str) -> (PathBuf, String) {
    let file = dir.join(name);
    let out = Command::new(bin("age-keygen")).arg("-o").arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&file).unwrap();
    let recipient = text.lines().find_map(|l| l.strip_prefix("# public key: ")).unwrap().to_string();
    (file, recipient)
}

/// `plain` encrypted for `recipient` (data and stringData only, as Flux's guide does).
fn encrypt(dir: &std::path::Path, recipient: &str, plain: &str) -> String {
    let f = dir.join("plain.yaml");
    std::fs::write(&f, plain).unwrap();
    let out = Command::new(bin("sops"))
        .args(["--encrypt", "--age", recipient, "--encrypted-regex", "^(data|stringData)$", "--disable-version-check"])
        .arg(&f)
        .env_remove("SOPS_AGE_KEY_FILE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sops_age_secret_is_decrypted_and_never_shown() {
    let ns = "rs-sops";
    let lab = Lab::new("rs-fleet");
    let (key, recipient) = age_key(lab.tmp.path(), "age.key");
    let (_, other) = age_key(lab.tmp.path(), "other.key");
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: {ns}}}\nstringData: {{password: hunter2-sops}}\n"
    );
    let encrypted = encrypt(lab.tmp.path(), &recipient, &secret);
    assert!(!encrypted.contains("hunter2-sops") && encrypted.contains("sops:"));
    lab.repo.write("app/db.sops.yaml", &encrypted).unwrap();
    lab.repo
        .write(
            "app/cm.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {ns}}}\ndata: {{a: b}}\n"),
        )
        .unwrap();
    lab.repo.commit("db password, encrypted").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-render, renderTools: {{sops: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
  - {{name: rs-web, repository: r, path: app, namespace: {ns}, environment: e, source: {{sops: {{ageKeyFile: {}}}}}}}
  - {{name: rs-nokey, repository: r, path: app, namespace: {ns}, environment: e}}
",
            bin("sops").display(),
            lab.url,
            key.display()
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("rs-web", Mode::Policy, None).await.unwrap();
    assert_eq!(
        r.sync.as_ref().map(|s| (s.result, s.applied.len())),
        Some((SyncResult::Succeeded, 2)),
        "{:?}",
        r.status
    );
    let stored = kubectl(&["-n", ns, "get", "secret", "db", "-o", "jsonpath={.data.password}"]);
    use base64::Engine;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(stored).unwrap(), b"hunter2-sops");
    let runs = ctx.render_tool_runs();
    assert_eq!(runs, 2, "`sops --version` and one decryption");
    let r = ctx.run_pass("rs-web", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, ctx.render_tool_runs()), (SyncStatus::Synced, runs), "no decryption at a known tree");
    assert!(!format!("{:?}", r.diffs()).contains("hunter2-sops"), "diffs never carry the value");

    // `plumb render` masks it
    let (code, out, err) = plumb_cli(&["render", "rs-web", "--config", policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("name: db") && !out.contains("hunter2-sops") && !out.contains("aHVudGVyMi1zb3Bz"), "{out}");
    assert!(err.contains(": 2 objects, plain YAML, sops 3.13.3"), "{err}");

    // no key configured: an error, never the encrypted file applied
    let r = ctx.run_pass("rs-nokey", Mode::Policy, None).await.unwrap();
    let msg = r.status.conditions.iter().find(|c| c.type_ == "ComparisonError").map(|c| c.message.clone()).unwrap();
    assert!(msg.contains("app/db.sops.yaml: SOPS-encrypted; no key configured"), "{msg}");
    assert!(r.sync.is_none());

    // a file encrypted for another key: the render fails naming it, nothing is pruned
    let uid = kubectl(&["-n", ns, "get", "secret", "db", "-o", "jsonpath={.metadata.uid}"]);
    lab.repo.write("app/db.sops.yaml", &encrypt(lab.tmp.path(), &other, &secret)).unwrap();
    lab.repo.commit("re-encrypted for another key").unwrap();
    let r = ctx.run_pass("rs-web", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true));
    let msg = r.status.conditions.iter().find(|c| c.type_ == "ComparisonError").map(|c| c.message.clone()).unwrap();
    assert!(
        msg.contains(&format!("app/db.sops.yaml: SOPS-encrypted; encrypted for {other}, none of which is a key of this application ({recipient})")),
        "{msg}"
    );
    assert_eq!(kubectl(&["-n", ns, "get", "secret", "db", "-o", "jsonpath={.metadata.uid}"]), uid, "nothing deleted");
}
