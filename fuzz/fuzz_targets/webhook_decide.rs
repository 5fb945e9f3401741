//! Fuzz target: headers + body → decision (provider detection, content type,
//! signature verification, form decoding, payload parsing, matching, the changed-path
//! filter and the dedupe keys).
//!
//! Input format (the seeds are the webhook vectors in this shape, see `seed.sh`):
//! `<headers.txt lines>` `\n\n` `<body>`. When the first byte of the input is odd the
//! target also signs the body with the test secret (every provider's header), so the
//! fuzzer gets past authentication and into the parsers; otherwise signatures are
//! whatever the input carries.
//!
//! Run from the repository root (not part of CI; plumb forbids `unsafe`, so no sanitizer
//! is needed):
//! `nice -n 15 cargo +nightly fuzz run -s none webhook_decide fuzz/corpus/webhook_decide fuzz/seeds/webhook_decide -- -max_total_time=1800`
//! New inputs go to `fuzz/corpus/` (ignored by git); `fuzz/seed.sh` rewrites the seeds
//! from the vectors. A crash lands in `fuzz/artifacts/`: add it as a unit test of
//! `Receiver::decide` before fixing it.
#![no_main]

use std::sync::OnceLock;

use hmac::{Hmac, KeyInit, Mac};
use libfuzzer_sys::fuzz_target;
use plumb::webhook::{
    Action, DeliveryKeys, Receiver, RepoKey, Secret, Watch, WatchedRepository, path_verdict,
};

/// The vectors' `secret.txt`.
const SECRET: &[u8] = b"s3cr3t-for-tests";

/// The vectors' `receiver_config.json` watch list, one application per watched ref,
/// each application with the changed-path filter on `clusters/prod`.
const WATCH: &[(&str, &[&str])] = &[
    ("https://gitea.example.invalid/acme/platform-config.git", &["refs/heads/main", "refs/tags/v*"]),
    ("https://forgejo.example.invalid/acme/Platform-Config", &["refs/heads/main"]),
    ("ssh://git@gogs.example.invalid:2222/acme/platform-config.git", &["refs/heads/main"]),
    ("git@github.example.invalid:acme/platform-config.git", &["refs/heads/main", "refs/heads/release/*"]),
    ("https://gitlab.example.invalid/acme/platform-config/", &["refs/heads/main"]),
    ("https://bitbucket.example.invalid/acme/platform-config.git", &["refs/heads/main"]),
];

fn receiver() -> &'static Receiver {
    static R: OnceLock<Receiver> = OnceLock::new();
    R.get_or_init(|| {
        let mut repositories = Vec::new();
        let mut watches = Vec::new();
        for (url, refs) in WATCH {
            let key = RepoKey::from_url(url).expect("watch urls normalize");
            repositories.push(WatchedRepository {
                key: key.clone(),
                secret: Some(Secret::new(SECRET.to_vec())),
                allow_sha1: false,
                provider: None,
            });
            for r in *refs {
                watches.push(Watch {
                    app: format!("{url}+{r}"),
                    repo: key.clone(),
                    revision: (*r).to_owned(),
                    path_filter: Some("clusters/prod".to_owned()),
                });
            }
        }
        // 64 KiB keeps executions fast; the 413 path is still reached.
        Receiver { repositories, watches, max_body_bytes: 64 * 1024 }
    })
}

fn split(data: &[u8]) -> (Vec<(String, String)>, &[u8]) {
    let cut = data.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match cut {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let headers = String::from_utf8_lossy(head)
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.to_owned(), v.trim_start().to_owned()))
        .collect();
    (headers, body)
}

fn sign(headers: &mut Vec<(String, String)>, body: &[u8]) {
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(SECRET).expect("any key length");
    mac.update(body);
    let hex = hex::encode(mac.finalize().into_bytes());
    let names = ["x-gitea-signature", "x-forgejo-signature", "x-gogs-signature", "x-hub-signature-256", "x-gitlab-token"];
    headers.retain(|(n, _)| !names.contains(&n.to_ascii_lowercase().as_str()));
    headers.push(("X-Gitea-Signature".into(), hex.clone()));
    headers.push(("X-Forgejo-Signature".into(), hex.clone()));
    headers.push(("X-Gogs-Signature".into(), hex.clone()));
    headers.push(("X-Hub-Signature-256".into(), format!("sha256={hex}")));
    headers.push(("X-Gitlab-Token".into(), String::from_utf8_lossy(SECRET).into_owned()));
}

fuzz_target!(|data: &[u8]| {
    let sign_it = data.first().is_some_and(|b| b & 1 == 1);
    let (mut headers, body) = split(data);
    if sign_it {
        sign(&mut headers, body);
    }
    let d = receiver().decide(&headers, body);

    // The verdict is one of the documented ones and consistent with itself.
    assert!(matches!(d.http_status, 200 | 202 | 400 | 401 | 413 | 415), "status {}", d.http_status);
    match d.action {
        Action::Reconcile => assert!(d.http_status == 202 && !d.apps.is_empty()),
        Action::Ignore => assert!(d.http_status == 200 && d.apps.is_empty()),
        Action::Reject => assert!(d.http_status >= 400 && d.apps.is_empty() && d.push.is_none()),
    }
    if d.http_status == 401 {
        assert!(!d.verification.valid);
    }
    assert!(d.skipped.iter().all(|s| !d.apps.contains(s)));
    // The secret never appears in the answer.
    assert!(!d.reason.contains("s3cr3t"));

    // What the server does next with it.
    let _ = DeliveryKeys::of(&d);
    if let (Some(provider), Some(push)) = (d.provider, &d.push) {
        for path in ["", "clusters/prod", "clusters/prod/apps/web/kustomization.yaml", "./x/"] {
            let _ = path_verdict(provider, push, path);
        }
    }
    let _ = serde_json::to_string(&d).expect("a decision serializes");
});
