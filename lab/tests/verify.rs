//! `verifyCommits` against a real control plane, with commits and tags signed by real
//! `git` (SSH keys made by `ssh-keygen`, an OpenPGP key made by `gpg`): a commit signed
//! by a trusted key is synced; an unsigned one, or one signed by a key nobody trusts, is
//! not — the application keeps its last synced revision (selfHeal reverts drift to it)
//! with an `UnverifiedRevision` condition naming the commit, its author and why; in mode
//! `tag`, the revision is a tag whose annotated tag object must be signed.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
    time::Duration,
};

use plumb::{
    compare::SyncStatus,
    reconcile::{Context, Mode, PassReport},
    status::AppStatus,
};
use support::*;

/// Runs git in `dir` as the lab's author, failing the test on an error; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Ada Author")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada Author")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A key pair made by ssh-keygen: the private key file (its `.pub` next to it).
fn ssh_key(dir: &Path, name: &str) -> PathBuf {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
    key
}

/// One test's world: a repository, an application `app` reading `app/` into namespace
/// `ns` with automated sync and selfHeal and `verifyCommits` as given, a Context.
struct Signed {
    lab: Lab,
    policy: PathBuf,
    ns: String,
    ctx: Arc<Context>,
    app: String,
}

impl Signed {
    async fn new(name: &str, revision: &str, verify: &str, prepare: impl FnOnce(&Path)) -> Signed {
        let lab = Lab::new(name);
        prepare(lab.tmp.path());
        let ns = format!("verify-{name}");
        let policy = lab.policy(
            "policy.yaml",
            &format!(
                "settings: {{statusNamespace: plumb-{ns}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    verifyCommits: {verify}\napplications:\n  - {{name: {name}, repository: r, revision: {revision}, path: app, namespace: {ns}, environment: e}}\n",
                lab.url
            ),
        );
        let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
        Signed { lab, policy, ns, ctx, app: name.to_string() }
    }

    /// Writes the ConfigMap `a` with `value` and commits it, signed with `key` (SSH key
    /// file, or with `gpg:` an OpenPGP key id) or not (`None`); pushes main; the SHA.
    fn commit(&self, value: &str, key: Option<&str>) -> String {
        let sha = self.commit_here(value, key);
        git(&self.lab.repo.work, &["push", "-q", "origin", "main"]);
        sha
    }

    /// [`Signed::commit`] without the push.
    fn commit_here(&self, value: &str, key: Option<&str>) -> String {
        self.lab.repo.write("app/a.yaml", &self.cm(value)).unwrap();
        let work = &self.lab.repo.work;
        git(work, &["add", "-A"]);
        let message = format!("a = {value}");
        match key {
            None => git(work, &["commit", "-q", "-m", &message]),
            Some(k) => match k.strip_prefix("gpg:") {
                Some(id) => git(
                    work,
                    &[
                        "-c",
                        "gpg.format=openpgp",
                        "-c",
                        &format!("user.signingkey={id}"),
                        "commit",
                        "-q",
                        "-S",
                        "-m",
                        &message,
                    ],
                ),
                None => git(
                    work,
                    &[
                        "-c",
                        "gpg.format=ssh",
                        "-c",
                        &format!("user.signingkey={k}"),
                        "commit",
                        "-q",
                        "-S",
                        "-m",
                        &message,
                    ],
                ),
            },
        };
        git(work, &["rev-parse", "HEAD"])
    }

    /// The ConfigMap `a` with `value`.
    fn cm(&self, value: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {}}}\ndata: {{value: \"{value}\"}}\n",
            self.ns
        )
    }

    async fn pass(&self) -> PassReport {
        self.ctx.run_pass(&self.app, Mode::Policy, None).await.unwrap()
    }

    fn live(&self) -> String {
        kubectl(&["-n", &self.ns, "get", "configmap", "a", "-o", "jsonpath={.data.value}"])
    }

    fn key(&self, name: &str) -> String {
        self.lab.tmp.path().join(name).display().to_string()
    }
}

fn condition<'a>(st: &'a AppStatus, type_: &str) -> Option<&'a str> {
    st.conditions.iter().find(|c| c.type_ == type_).map(|c| c.message.as_str())
}

/// allowed_signers trusting `ada` (a key made in `dir`), and `mallory` made but not listed.
fn ada_trusted(dir: &Path) {
    let ada = ssh_key(dir, "ada");
    ssh_key(dir, "mallory");
    let public = std::fs::read_to_string(ada.with_extension("pub")).unwrap();
    std::fs::write(dir.join("allowed_signers"), format!("ada@example.com {public}")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_commits_signed_by_a_trusted_key_are_synced() {
    let s = Signed::new("head", "main", "{allowedSignersFile: allowed_signers}", ada_trusted).await;
    let c1 = s.commit("1", Some(&s.key("ada")));
    let r = s.pass().await;
    assert!(r.sync.is_some(), "{:#?}", r.status);
    assert_eq!((r.status.sync, r.status.synced_revision.as_str()), (SyncStatus::Synced, c1.as_str()));
    let v = r.status.verification.clone().unwrap();
    assert!(v.verified && v.signer == "ada@example.com" && v.revision == c1, "{v:?}");
    assert_eq!(s.live(), "1");

    // unsigned: not synced, the condition says so, the synced revision stays
    let c2 = s.commit("2", None);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(
        why.contains(&c2[..7]) && why.contains("Ada Author <ada@example.com>") && why.contains("unsigned"),
        "{why}"
    );
    assert!(why.contains(&format!("keeping {}", &c1[..7])), "{why}");
    assert_eq!((r.status.sync, r.status.synced_revision.as_str()), (SyncStatus::OutOfSync, c1.as_str()));
    assert_eq!(s.live(), "1");

    // a person's sync (`plumb sync`) does not deploy it either: it re-applies what runs
    let r = s.ctx.run_pass(&s.app, Mode::Manual { prune: false, approve: false }, None).await.unwrap();
    assert!(condition(&r.status, "UnverifiedRevision").is_some(), "{:#?}", r.status);
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c1.as_str(), "1"));
    if let Some(rec) = &r.sync {
        assert_eq!(rec.revision, c1, "{rec:?}");
    }

    // selfHeal still reverts drift, to the last synced revision
    kubectl(&["-n", &s.ns, "patch", "configmap", "a", "--type=merge", "-p", r#"{"data":{"value":"by hand"}}"#]);
    let r = s.pass().await;
    assert!(r.sync.is_some(), "selfHeal: {:#?}", r.status);
    assert_eq!(s.live(), "1");
    assert_eq!(r.status.synced_revision, c1);

    // signed by a key nobody listed: not synced, the key named
    let c3 = s.commit("3", Some(&s.key("mallory")));
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap();
    assert!(why.contains(&c3[..7]) && why.contains("unknown key SHA256:"), "{why}");
    assert_eq!(s.live(), "1");

    // signed by ada again: synced
    let c4 = s.commit("4", Some(&s.key("ada")));
    let r = s.pass().await;
    assert!(r.sync.is_some(), "{:#?}", r.status);
    assert_eq!((r.status.synced_revision.as_str(), condition(&r.status, "UnverifiedRevision")), (c4.as_str(), None));
    assert_eq!(s.live(), "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_commit_and_a_key_outside_its_window_are_refused() {
    let s = Signed::new("tamper", "main", "{allowedSignersFile: allowed_signers}", |dir| {
        ada_trusted(dir);
        // carol is listed, but her window ended long before any commit of this test
        let carol = std::fs::read_to_string(ssh_key(dir, "carol").with_extension("pub")).unwrap();
        let mut signers = std::fs::read_to_string(dir.join("allowed_signers")).unwrap();
        signers.push_str(&format!("carol@example.com valid-before=\"20200101\" {carol}"));
        std::fs::write(dir.join("allowed_signers"), signers).unwrap();
    })
    .await;
    let c1 = s.commit("1", Some(&s.key("ada")));
    assert!(s.pass().await.sync.is_some());

    let c2 = s.commit("2", Some(&s.key("carol")));
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(
        why.contains(&c2[..7]) && why.contains("carol@example.com") && why.contains("outside its validity"),
        "{why}"
    );
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c1.as_str(), "1"));

    // ada signs a commit; its tree is then swapped for another before it is pushed: the
    // signature covers content that is not what the commit holds
    let work = s.lab.repo.work.clone();
    let signed = s.commit_here("3", Some(&s.key("ada")));
    let raw = git(&work, &["cat-file", "commit", &signed]);
    s.lab.repo.write("app/a.yaml", &s.cm("tampered")).unwrap();
    git(&work, &["add", "-A"]);
    let tree = git(&work, &["write-tree"]);
    let old_tree = git(&work, &["rev-parse", &format!("{signed}^{{tree}}")]);
    let forged = raw.replacen(&format!("tree {old_tree}"), &format!("tree {tree}"), 1) + "\n";
    let path = s.lab.tmp.path().join("forged");
    std::fs::write(&path, forged).unwrap();
    let c3 = git(&work, &["hash-object", "-t", "commit", "-w", &path.display().to_string()]);
    git(&work, &["update-ref", "refs/heads/main", &c3]);
    git(&work, &["push", "-q", "origin", "main"]);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(why.contains(&c3[..7]) && why.contains("bad signature"), "{why}");
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c1.as_str(), "1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_first_commit_syncs_nothing() {
    let s = Signed::new("first", "main", "{allowedSignersFile: allowed_signers}", ada_trusted).await;
    let c1 = s.commit("1", None);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(why.contains(&c1[..7]) && why.contains("nothing is synced"), "{why}");
    assert!(r.status.synced_revision.is_empty());
    let missing = std::process::Command::new("kubectl")
        .args(["--kubeconfig"])
        .arg(&control_plane().kubeconfig)
        .args(["-n", &s.ns, "get", "configmap", "a"])
        .output()
        .unwrap();
    assert!(!missing.status.success(), "the unverified ConfigMap was applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_tag_mode_the_annotated_tag_must_be_signed() {
    let s = Signed::new("tagged", "v1", "{allowedSignersFile: allowed_signers, mode: tag}", ada_trusted).await;
    let work = s.lab.repo.work.clone();
    let ada = format!("user.signingkey={}", s.key("ada"));
    // the commit itself is unsigned: in tag mode only the tag counts
    let c1 = s.commit("1", None);
    git(&work, &["-c", "gpg.format=ssh", "-c", &ada, "tag", "-s", "-m", "v1 by ada", "v1"]);
    git(&work, &["push", "-q", "origin", "v1"]);
    let r = s.pass().await;
    assert!(r.sync.is_some(), "{:#?}", r.status);
    assert_eq!(r.status.synced_revision, c1);
    let v = r.status.verification.clone().unwrap();
    assert!(v.verified && v.mode == "tag", "{v:?}");
    assert_eq!(s.live(), "1");

    // v1 moved to an annotated tag nobody signed: held at c1
    let c2 = s.commit("2", Some(&s.key("ada")));
    git(&work, &["tag", "-f", "-a", "-m", "v1 moved, unsigned", "v1"]);
    git(&work, &["push", "-q", "-f", "origin", "v1"]);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(why.contains(&c2[..7]) && why.contains("unsigned"), "{why}");
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c1.as_str(), "1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openpgp_signed_commits_verify_against_the_keyring() {
    let s = Signed::new("pgp", "main", "{openpgpKeyringFile: keyring.asc}", |dir| {
        let home = dir.join("gnupg");
        std::fs::create_dir_all(&home).unwrap();
        let gpg = |args: &[&str]| {
            let out = Command::new("gpg").env("GNUPGHOME", &home).args(args).output().unwrap();
            assert!(out.status.success(), "gpg {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
            out.stdout
        };
        gpg(&[
            "--batch",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--quick-gen-key",
            "Ada Author <ada@example.com>",
            "ed25519",
            "sign",
            "never",
        ]);
        std::fs::write(dir.join("keyring.asc"), gpg(&["--armor", "--export", "ada@example.com"])).unwrap();
    })
    .await;
    // git signs through a gpg wrapper that reads this test's GNUPGHOME
    let home = s.lab.tmp.path().join("gnupg");
    git(&s.lab.repo.work, &["config", "gpg.program", &gpg_wrapper(s.lab.tmp.path(), &home)]);
    let c1 = s.commit("1", Some("gpg:ada@example.com"));
    let r = s.pass().await;
    assert!(r.sync.is_some(), "{:#?}", r.status);
    let v = r.status.verification.clone().unwrap();
    assert!(v.verified && v.signer == "Ada Author <ada@example.com>" && v.revision == c1, "{v:?}");
    assert_eq!(s.live(), "1");

    let gpg = |args: &[&str]| {
        let out = Command::new("gpg").env("GNUPGHOME", &home).args(args).output().unwrap();
        assert!(out.status.success(), "gpg {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let keyring = s.lab.tmp.path().join("keyring.asc");
    let export = || std::fs::write(&keyring, gpg(&["--armor", "--export"])).unwrap();
    let days_ago =
        |n: i64| (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * n)).as_second().to_string() + "!";
    let loopback = ["--batch", "--pinentry-mode", "loopback", "--passphrase", ""];

    // an expired key: bob's key, made three days ago, signs a commit now; then its
    // expiry is set to one day after it was made (gpg signs with no expired key, so the
    // order is: sign, then expire), and the keyring lists bob
    gpg(&[
        &loopback[..],
        &["--faked-system-time", &days_ago(3), "--quick-gen-key", "Bob <bob@example.com>", "ed25519", "sign", "never"],
    ]
    .concat());
    let c2 = s.commit_here("2", Some("gpg:bob@example.com"));
    let bob = String::from_utf8(gpg(&["--with-colons", "--list-keys", "bob@example.com"])).unwrap();
    let bob = bob.lines().find_map(|l| l.strip_prefix("fpr:")).unwrap().trim_matches(':').to_string();
    gpg(&[&loopback[..], &["--faked-system-time", &days_ago(2), "--quick-set-expire", &bob, "1d"]].concat());
    export();
    git(&s.lab.repo.work, &["push", "-q", "origin", "main"]);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(why.contains(&c2[..7]) && why.contains("expired") && why.contains(&bob), "{why}");
    assert!(why.contains(&format!("keeping {}", &c1[..7])), "{why}");
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c1.as_str(), "1"));
    // selfHeal still reverts drift to c1, which ada's valid key signed
    kubectl(&["-n", &s.ns, "patch", "configmap", "a", "--type=merge", "-p", r#"{"data":{"value":"by hand"}}"#]);
    assert!(s.pass().await.sync.is_some());
    assert_eq!(s.live(), "1");

    // a revoked key: ada signs a commit, then her key is revoked (the revocation
    // certificate gpg made with the key) and the keyring exported again
    let c3 = s.commit_here("3", Some("gpg:ada@example.com"));
    let revocs = std::fs::read_dir(home.join("openpgp-revocs.d")).unwrap();
    let ada_rev = revocs.map(|e| e.unwrap().path()).find(|p| !p.display().to_string().contains(&bob)).unwrap();
    let certificate = std::fs::read_to_string(&ada_rev).unwrap().replace(":-----BEGIN", "-----BEGIN");
    let rev_file = s.lab.tmp.path().join("ada.rev");
    std::fs::write(&rev_file, certificate).unwrap();
    gpg(&["--batch", "--import", rev_file.to_str().unwrap()]);
    export();
    git(&s.lab.repo.work, &["push", "-q", "origin", "main"]);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(why.contains(&c3[..7]) && why.contains("revoked") && why.contains("Ada Author"), "{why}");
    // the revocation also refuses c1, which the same key signed: nothing is trusted
    assert!(why.contains(&format!("last synced revision {} is not trusted either", &c1[..7])), "{why}");
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c1.as_str(), "1"));
}

/// A commit synced before `verifyCommits` was turned on is not kept in place of an
/// unverified one: nothing is trusted, the pass stops and selfHeal waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_synced_before_verification_is_not_kept() {
    let s = Signed::new("late", "main", "{allowedSignersFile: allowed_signers}", ada_trusted).await;
    let text = std::fs::read_to_string(&s.policy).unwrap();
    let plain = s
        .lab
        .policy("plain.yaml", &text.replace("verifyCommits: {allowedSignersFile: allowed_signers}", "maxPause: 1h"));
    let before = context_for(&plain, &s.lab.tmp.path().join("cache-before"), false).await;
    let c1 = s.commit("1", None);
    assert!(before.run_pass(&s.app, Mode::Policy, None).await.unwrap().sync.is_some());
    assert_eq!(s.live(), "1");

    let c2 = s.commit("2", None);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(
        why.contains(&c2[..7]) && why.contains(&format!("last synced revision {} is not trusted either", &c1[..7])),
        "{why}"
    );
    kubectl(&["-n", &s.ns, "patch", "configmap", "a", "--type=merge", "-p", r#"{"data":{"value":"by hand"}}"#]);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "selfHeal re-applied an untrusted revision: {:?}", r.sync);
    assert_eq!(s.live(), "by hand");

    // a signed commit ends it
    let c3 = s.commit("3", Some(&s.key("ada")));
    let r = s.pass().await;
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c3.as_str(), "3"));
}

/// `plumb sync --allow-unverified`: honoured only while the API server checks who may
/// write it (deploy/admission/allow-unverified.yaml), only with the right
/// `allow-unverified`, only in the name of the one who writes it, only for the commit it
/// names; the sync is recorded with who, and selfHeal keeps that commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_with_the_right_may_sync_an_unverified_commit_and_is_named() {
    let s = Signed::new("allow", "main", "{allowedSignersFile: allowed_signers}", ada_trusted).await;
    let status_ns = "plumb-verify-allow";
    let c1 = s.commit("1", Some(&s.key("ada")));
    assert!(s.pass().await.sync.is_some());
    let c2 = s.commit("2", None);
    assert!(s.pass().await.sync.is_none());
    let allow = |kubeconfig: Option<&Path>| {
        let mut args = vec!["sync", s.app.as_str(), "--allow-unverified", "-n", status_ns, "--timeout", "1s"];
        if let Some(k) = kubeconfig {
            args.extend(["--kubeconfig", k.to_str().unwrap()]);
        }
        plumb_cli(&args)
    };

    // without the admission policy the allowance is written (nothing checks it) and refused
    let (_, out, err) = allow(None);
    assert!(err.contains(&c2[..7]) && err.contains("unsigned"), "{out}{err}");
    let r = s.pass().await;
    // the sync the request asks re-applies what runs
    assert!(r.sync.as_ref().is_none_or(|rec| rec.revision == c1), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(why.contains("not honoured") && why.contains("deploy/admission/allow-unverified.yaml"), "{why}");
    assert_eq!(s.live(), "1");
    kubectl(&["-n", status_ns, "annotate", "applications.plumb.dev", &s.app, "plumb.dev/allow-unverified-"]);

    // installed: a user holding `patch` but not `allow-unverified` cannot write it
    kubectl_apply(plumb::status::ALLOW_UNVERIFIED_POLICY_YAML);
    let deployer = service_account_kubeconfig(status_ns, "signer", &s.lab.tmp.path().join("signer.kubeconfig"));
    let me = format!("system:serviceaccount:{status_ns}:signer");
    application_role(status_ns, "signer", "signer", "get, list, watch, patch");
    let annotate_as_deployer = |value: &str| {
        Command::new("kubectl")
            .args(["--kubeconfig", deployer.to_str().unwrap(), "-n", status_ns, "annotate", "--overwrite"])
            .args(["applications.plumb.dev", &s.app, &format!("plumb.dev/allow-unverified={value}")])
            .output()
            .unwrap()
    };
    // probe until the API server enforces the policy, taking each probe back
    wait_for("the API server enforces the policy", Duration::from_secs(90), || async {
        if annotate_as_deployer(&format!("{c2} {me}")).status.success() {
            kubectl(&["-n", status_ns, "annotate", "applications.plumb.dev", &s.app, "plumb.dev/allow-unverified-"]);
            return None;
        }
        Some(())
    })
    .await;
    let (code, out, err) = allow(Some(&deployer));
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("needs the right\n`allow-unverified`") || err.contains("`allow-unverified`"), "{err}");
    assert!(err.contains("does not hold") && err.contains(&me), "{err}");

    // with the right, still not in someone else's name
    application_role(status_ns, "signer-allow", "signer", "allow-unverified");
    let forged = wait_for("the right granted", Duration::from_secs(30), || async {
        let out = annotate_as_deployer(&format!("{c2} the-ceo"));
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        (!text.contains("does not hold")).then_some((out.status.success(), text))
    })
    .await;
    assert!(!forged.0 && forged.1.contains("COMMIT USER"), "{forged:?}");

    // in their own name: the commit is synced, recorded with who
    let (_, out, err) = allow(Some(&deployer));
    assert!(err.contains(&format!("recorded as {me}")), "{out}{err}");
    let r = s.pass().await;
    let rec = r.sync.clone().unwrap_or_else(|| panic!("{:#?}", r.status));
    assert_eq!((rec.revision.as_str(), rec.allowed_unverified_by.as_str()), (c2.as_str(), me.as_str()));
    assert_eq!((r.status.synced_revision.as_str(), s.live().as_str()), (c2.as_str(), "2"));
    let v = r.status.verification.clone().unwrap();
    assert!(!v.verified && v.allowed_by == me && v.summary().contains("--allow-unverified"), "{v:?}");
    assert!(condition(&r.status, "UnverifiedRevision").is_none(), "{:#?}", r.status.conditions);
    let history = kubectl(&["-n", status_ns, "get", "applications.plumb.dev", &s.app, "-o", "json"]);
    assert!(history.contains(&format!("\"allowedUnverifiedBy\": \"{me}\"")), "{history}");
    let (_, shown, _) = plumb_cli(&["history", &s.app, "-n", status_ns]);
    assert!(shown.contains(&format!("unverified, allowed by {me}")), "{shown}");

    // selfHeal keeps the allowed commit
    kubectl(&["-n", &s.ns, "patch", "configmap", "a", "--type=merge", "-p", r#"{"data":{"value":"by hand"}}"#]);
    assert!(s.pass().await.sync.is_some());
    assert_eq!(s.live(), "2");

    // the allowance names one commit: the next unsigned one is held at c2
    let c3 = s.commit("3", None);
    let r = s.pass().await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let why = condition(&r.status, "UnverifiedRevision").unwrap_or_else(|| panic!("{:#?}", r.status));
    assert!(why.contains(&c3[..7]) && why.contains(&format!("keeping {}", &c2[..7])), "{why}");
    assert_eq!(s.live(), "2");
}

/// A script running gpg with `home` as its GNUPGHOME (git runs `gpg.program`).
fn gpg_wrapper(dir: &Path, home: &Path) -> String {
    let script = dir.join("gpg-lab");
    std::fs::write(&script, format!("#!/bin/sh\nexec env GNUPGHOME='{}' gpg \"$@\"\n", home.display())).unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    script.display().to_string()
}
