//! Benchmark: a no-op pass with `verifyCommits` on and off, side by side in one run on
//! the same control plane, repository and commit.
//!
//! Two applications render the same 100 ConfigMaps (into two namespaces) from one
//! repository whose head is a commit signed with an SSH key made by `ssh-keygen`:
//! `signed` verifies it against an allowed_signers file, `plain` verifies nothing. After
//! both synced and settled, passes alternate (plain, signed, plain, …) so that drift of
//! the machine falls on both alike. Prints each median and their difference; the first
//! pass over the commit paid the verification (see `cargo bench --bench verify` for
//! its cost per format), every pass here takes the cached path.
//!
//! Run: `cargo bench -p plumb-lab --bench verify_pass` (`PASSES=60` to change the count;
//! `CONTROL=1` turns verification off for both, to see the noise between two alike).
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::{path::Path, process::Command, time::Instant};

use plumb::{compare::SyncStatus, reconcile::Mode};
use support::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Ada Author", "-c", "user.email=ada@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let passes: usize = std::env::var("PASSES").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    // CONTROL=1: `signed` verifies nothing either, to see the noise between two alike
    let control = std::env::var("CONTROL").is_ok_and(|v| v == "1");
    let lab = Lab::new("bench-verify");
    let key = lab.tmp.path().join("ada");
    let made = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", "ada", "-f"]).arg(&key).output();
    assert!(made.unwrap().status.success(), "ssh-keygen");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    std::fs::write(lab.tmp.path().join("allowed_signers"), format!("ada@example.com {public}")).unwrap();
    let mut text = String::new();
    for i in 0..100 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i:03}}}\ndata: {{v: \"{i}\"}}\n"
        ));
    }
    lab.repo.write("app/all.yaml", &text).unwrap();
    let work = &lab.repo.work;
    git(work, &["add", "-A"]);
    let signing = format!("user.signingkey={}", key.display());
    git(work, &["-c", "gpg.format=ssh", "-c", &signing, "commit", "-q", "-S", "-m", "100 ConfigMaps"]);
    git(work, &["push", "-q", "origin", "HEAD:main"]);
    let policy = lab.policy(
        "p.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-bench-verify}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: plain\n    syncPolicy: {{automated: true, syncOptions: [CreateNamespace=true]}}\n  - name: signed\n    syncPolicy: {{automated: true, syncOptions: [CreateNamespace=true]}}\n    {}\napplications:\n  - {{name: plain, repository: r, revision: main, path: app, namespace: bench-verify-plain, environment: plain}}\n  - {{name: signed, repository: r, revision: main, path: app, namespace: bench-verify-signed, environment: signed}}\n",
            lab.url,
            if control { "maxPause: 1h" } else { "verifyCommits: {allowedSignersFile: allowed_signers}" }
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), true).await;
    for app in ["plain", "signed"] {
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        assert!(r.sync.is_some(), "{app}: {:?}", r.status.conditions);
    }
    // settle: the watches list the kinds, the dry-run cache fills
    for _ in 0..5 {
        for app in ["plain", "signed"] {
            ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        }
    }
    let (mut plain, mut signed) = (Vec::new(), Vec::new());
    for round in 0..passes {
        // which runs first alternates too: no application gains from its place
        let mut order = [("plain", &mut plain), ("signed", &mut signed)];
        if round % 2 == 1 {
            order.reverse();
        }
        for (app, times) in order {
            let t = Instant::now();
            let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(r.status.sync, SyncStatus::Synced, "{app}: {:?}", r.status.conditions);
            assert!(r.sync.is_none(), "{app}: a no-op pass synced");
            let verifies = app == "signed" && !control;
            assert_eq!(r.status.verification.as_ref().map(|v| v.verified), verifies.then_some(true));
        }
    }
    let (p, s) = (median(&mut plain), median(&mut signed));
    println!("no-op pass of 100 ConfigMaps, same control plane, {passes} passes each, alternating:");
    println!("verifyCommits off  median {p:>8.3} ms");
    println!("verifyCommits on   median {s:>8.3} ms (SSH-signed head, verdict cached)");
    println!("difference (on - off)     {:>+8.3} ms", s - p);
}
