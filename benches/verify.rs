//! Benchmark: what `verifyCommits` costs a pass.
//!
//! 1. **Verification per commit**, each format, over the objects recorded in
//!    `src/verify/testdata` (real `git` + `ssh-keygen` / `gpg`): split the object, decode
//!    the armor, check the signature and the key's standing — what the first pass over a
//!    new commit pays once. Also the parse of the trusted keys (once per application and
//!    policy).
//! 2. **The cached path**: what every later pass over the same commit adds — a `stat` of
//!    the key file, the commit the tracked ref names in the refs already read
//!    ([`plumb::source::Pool::peek`]: no IO, as a pass within its freshness) and the
//!    verdict looked up by commit id: a pass without `verifyCommits` does none of it, so
//!    this is what verification adds to a no-op pass. Also the slower path taken when
//!    the refs must be read again ([`plumb::source::Pool::signed_object`] on a local
//!    repository), and an empty trip to tokio's blocking pool, for scale. The side by
//!    side on a control plane is `cargo bench -p plumb-lab --bench verify_pass`.
//!
//! Run: `cargo bench --bench verify` (release build). Prints microseconds per operation
//! (the median of `ROUNDS` rounds of `N` operations).
#![allow(clippy::unwrap_used)]

use std::{collections::HashMap, path::Path, process::Command, sync::Arc, time::Instant};

use plumb::{
    config::{Config, load_str},
    source::{Pool, Since},
    verify::{AllowedSigners, Keyring, Limits, ObjectKind, TrustedKeys, verify_object},
};

const ROUNDS: usize = 7;

fn data(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/verify/testdata").join(name)).unwrap()
}

/// Median microseconds per call of `f` over `ROUNDS` rounds of `n` calls.
fn micros(n: usize, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn main() {
    let keys = TrustedKeys {
        ssh: Some(AllowedSigners::parse(&String::from_utf8(data("allowed_signers")).unwrap()).unwrap()),
        openpgp: Some(Keyring::parse(&data("keyring.asc")).unwrap()),
    };
    let carol = format!("carol@example.com {}", String::from_utf8(data("carol.pub")).unwrap());
    let rsa_keys = TrustedKeys { ssh: Some(AllowedSigners::parse(&carol).unwrap()), openpgp: None };
    let limits = Limits::default();
    println!("verification of one commit (µs, median of {ROUNDS} rounds):");
    for (what, file, kind, keys, n) in [
        ("ssh ed25519 commit", "ssh-ed25519.commit", ObjectKind::Commit, &keys, 2000),
        ("ssh ecdsa p256 commit", "ssh-ecdsa.commit", ObjectKind::Commit, &keys, 1000),
        ("ssh rsa 3072 commit", "ssh-rsa.commit", ObjectKind::Commit, &rsa_keys, 1000),
        ("ssh ed25519 tag", "ssh-ed25519.tag", ObjectKind::Tag, &keys, 2000),
        ("openpgp ed25519 commit", "pgp.commit", ObjectKind::Commit, &keys, 1000),
        ("unsigned commit", "unsigned.commit", ObjectKind::Commit, &keys, 20000),
    ] {
        let raw = data(file);
        let verdict = verify_object(kind, &raw, keys, &limits);
        assert!(verdict.is_ok() || file.starts_with("unsigned"), "{file}: {verdict:?}");
        let us = micros(n, || {
            std::hint::black_box(verify_object(kind, std::hint::black_box(&raw), keys, &limits)).ok();
        });
        println!("  {what:<26} {us:>9.1}");
    }
    let signers = String::from_utf8(data("allowed_signers")).unwrap();
    let ring = data("keyring.asc");
    println!("  {:<26} {:>9.1}", "parse allowed_signers (3)", micros(200, || drop(AllowedSigners::parse(&signers))));
    println!("  {:<26} {:>9.1}", "parse keyring (3 keys)", micros(50, || drop(Keyring::parse(&ring))));

    cached_path();
}

/// The cached path on a local repository with one commit.
fn cached_path() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(work.join("app")).unwrap();
    std::fs::write(work.join("app/a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "a"]);
    let url = format!("file://{}", work.display());
    let text = format!(
        "repositories:\n  - {{name: r, url: \"{url}\"}}\nenvironments:\n  - name: e\napplications:\n  - {{name: a, repository: r, path: app, namespace: a, environment: e}}\n"
    );
    let config: Config = load_str(&text, Path::new("p.yaml"), tmp.path()).unwrap();
    let repo = config.repositories[0].clone();
    let pool = Pool::new(tmp.path().join("cache"), Arc::new(config));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let since = Since::at(Instant::now());
    let (commit, raw) = rt.block_on(pool.signed_object(&repo, "main", since, false)).unwrap();
    assert!(raw.is_some());
    let verdicts: HashMap<(String, String), bool> = [(("a".to_string(), commit.clone()), true)].into();
    let n = 2000;
    let signers = tmp.path().join("allowed_signers");
    std::fs::write(&signers, data("allowed_signers")).unwrap();
    let added = micros(n, || {
        // the gate looks at the key files (a changed one is read again)
        let stamp = std::fs::metadata(&signers).unwrap();
        std::hint::black_box((stamp.modified().ok(), stamp.len()));
        let c = pool.peek(&repo, "main", since).unwrap();
        assert!(verdicts.get(&("a".to_string(), c)).copied().unwrap_or(false));
    });
    let read = micros(n, || {
        let (c, _) = rt.block_on(pool.signed_object(&repo, "main", since, false)).unwrap();
        assert!(verdicts.get(&("a".to_string(), c)).copied().unwrap_or(false));
    });
    // the same trip to the blocking pool and the mirror's lock, doing nothing: what any
    // stage reading the mirror pays, for scale
    let trip = micros(n, || rt.block_on(async { tokio::task::spawn_blocking(|| ()).await }).unwrap());
    println!("a pass over a commit already verified (µs, median of {ROUNDS} rounds of {n}):");
    println!("  {:<26} {added:>9.1}", "added by verification");
    println!("  {:<26} {read:>9.1}", "(refs read again: object)");
    println!("  {:<26} {trip:>9.1}", "(an empty blocking trip)");
}
