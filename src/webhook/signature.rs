//! Authentication of a delivery, before its body is parsed.
//!
//! Rules per provider (sources in `shared/reference/webhooks.md` §2, §10.4):
//!
//! | provider | header | format | bytes signed |
//! |---|---|---|---|
//! | Gitea | `X-Gitea-Signature` | bare hex HMAC-SHA256 | raw body; form mode: decoded `payload` field |
//! | Forgejo | `X-Forgejo-Signature`, else `X-Gitea-Signature` | same | same |
//! | Gogs | `X-Gogs-Signature` | same | same |
//! | GitHub | `X-Hub-Signature-256` | `sha256=` + hex | raw body in both content types |
//! | GitLab | `X-Gitlab-Token` | the secret itself | — |
//! | Bitbucket Cloud / Server | `X-Hub-Signature` | `sha256=` + hex (not SHA-1!) | raw body |
//!
//! The Gitea family falls back to its GitHub-compatible `X-Hub-Signature-256` when its
//! native header is absent (same digest over the same bytes). GitHub's legacy
//! `X-Hub-Signature: sha1=` counts only when `X-Hub-Signature-256` is absent and the
//! repository has `allow_sha1`. An empty value or a bare `sha256=` is what a sender with
//! no secret sends (Gitea `addDefaultHeaders`) and counts as no signature.
//!
//! Every comparison is constant-time: HMAC tags through `Mac::verify_slice`, the GitLab
//! token by comparing HMACs of both strings, so neither content nor length short-circuits.

use std::borrow::Cow;

use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::body::{ContentType, form_field};
use super::provider::{Headers, Provider};
use super::sha1::hmac_sha1;
use super::watched::WatchedRepository;

type HmacSha256 = Hmac<Sha256>;

/// How the sender authenticated the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scheme {
    /// Bare lower-case hex HMAC-SHA256 (Gitea, Forgejo, Gogs native headers).
    #[serde(rename = "hmac-sha256-hex")]
    HmacSha256Hex,
    /// `sha256=` + hex HMAC-SHA256 (GitHub `X-Hub-Signature-256`, Bitbucket `X-Hub-Signature`).
    #[serde(rename = "hmac-sha256-hex-prefixed")]
    HmacSha256HexPrefixed,
    /// `sha1=` + hex HMAC-SHA1 (GitHub legacy `X-Hub-Signature`), only with `allow_sha1`.
    #[serde(rename = "hmac-sha1-hex-prefixed")]
    HmacSha1HexPrefixed,
    /// The secret sent verbatim (GitLab `X-Gitlab-Token`); proves the sender, not the body.
    #[serde(rename = "plain-token")]
    PlainToken,
}

/// Which bytes the signature covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SignedBytes {
    /// The request body exactly as received.
    #[serde(rename = "raw_body")]
    RawBody,
    /// The percent-decoded `payload` field of a form body (Gitea family in form mode:
    /// Gitea `services/webhook/deliver.go` signs `PayloadContent`, Gogs `prepareHookTasks`
    /// signs `JSONPayload()`).
    #[serde(rename = "form_field:payload")]
    FormFieldPayload,
}

/// Why a delivery did not authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failure {
    /// The required header is absent (a valid SHA-1 header without `allow_sha1` counts as
    /// absent, because SHA-256 is required).
    Missing,
    /// The header is present but empty, or only `sha256=`: the sender has no secret.
    Empty,
    /// A signature or token is present but no configured secret verifies it (includes
    /// malformed hex, wrong length, wrong prefix, and "no secret configured at all").
    Mismatch,
    /// Verification did not run (body too large, unknown sender, unsupported content type).
    NotAttempted,
}

/// Outcome of authentication. Serialized for logs; never includes the secret, the
/// presented signature, or which repository's secret matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Scheme of the header that decided; `None` when verification did not run.
    pub scheme: Option<Scheme>,
    /// Canonical name of that header, e.g. `X-Gitea-Signature`.
    pub header: Option<&'static str>,
    /// Bytes covered by the signature; `None` for tokens and when not attempted.
    pub signed_bytes: Option<SignedBytes>,
    /// True when at least one configured secret verified the delivery.
    pub valid: bool,
    /// Why not, when `valid` is false.
    pub failure: Option<Failure>,
}

impl Verification {
    pub(crate) fn not_attempted() -> Self {
        Verification {
            scheme: None,
            header: None,
            signed_bytes: None,
            valid: false,
            failure: Some(Failure::NotAttempted),
        }
    }
}

/// HMAC-SHA256 of a raw body under each configured secret, computed while the body
/// streams in ([`Streaming::update`] per chunk as it arrives), so verifying costs no
/// second pass over a buffered body. One MAC per distinct usable secret (repositories
/// sharing a secret share it); a repository without a secret gets none.
///
/// Only raw-body HMAC-SHA256 schemes use the result (every provider but GitLab's token
/// and the Gitea family's form mode, which signs the decoded `payload` field; those, and
/// GitHub's legacy SHA-1, are verified over the buffered body as before).
pub struct Streaming {
    /// Distinct secrets' MACs.
    macs: Vec<HmacSha256>,
    /// Per repository, the index of its MAC in `macs`.
    of_repo: Vec<Option<usize>>,
}

/// The tags [`Streaming`] computed: per repository, the HMAC-SHA256 of the whole body
/// under its secret (`None` without a usable secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    of_repo: Vec<Option<[u8; 32]>>,
}

impl Streaming {
    /// One MAC per distinct usable secret of `repos` (in this order).
    pub fn new(repos: &[WatchedRepository]) -> Self {
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut macs = Vec::new();
        let of_repo = repos
            .iter()
            .map(|repo| {
                let key = repo.secret.as_ref().filter(|s| !s.is_empty())?.expose();
                if let Some(i) = keys.iter().position(|k| constant_time_eq(k, key)) {
                    return Some(i);
                }
                let mac = <HmacSha256 as KeyInit>::new_from_slice(key).ok()?;
                keys.push(key);
                macs.push(mac);
                Some(macs.len() - 1)
            })
            .collect();
        Streaming { macs, of_repo }
    }

    /// Feeds the next `chunk` of the body.
    pub fn update(&mut self, chunk: &[u8]) {
        for mac in &mut self.macs {
            mac.update(chunk);
        }
    }

    /// The tags of the whole body fed so far.
    pub fn finish(self) -> Digests {
        let tags: Vec<[u8; 32]> = self.macs.into_iter().map(|m| m.finalize().into_bytes().into()).collect();
        Digests { of_repo: self.of_repo.iter().map(|i| i.and_then(|i| tags.get(i).copied())).collect() }
    }
}

/// What the sender presented, before any secret is consulted.
struct Selection<'h> {
    scheme: Scheme,
    header: &'static str,
    signed_bytes: Option<SignedBytes>,
    /// The digest or token without its prefix, or why there is none.
    value: Result<&'h str, Failure>,
}

/// Authenticates a delivery against every configured repository; `digests`, when
/// given, are the raw body's tags computed while it streamed in ([`Streaming`]) and
/// stand in for hashing `body` again.
///
/// Returns the verdict and, per entry of `repos`, whether that repository's secret
/// verified it (false for repositories without a usable secret, and for those whose
/// forge is not `provider`'s: [`WatchedRepository::accepts`]).
pub(crate) fn verify(
    provider: Provider,
    h: &Headers<'_>,
    content_type: ContentType,
    body: &[u8],
    repos: &[WatchedRepository],
    digests: Option<&Digests>,
) -> (Verification, Vec<bool>) {
    let selection = select(provider, h, content_type);
    let mut verification = Verification {
        scheme: Some(selection.scheme),
        header: Some(selection.header),
        signed_bytes: selection.signed_bytes,
        valid: false,
        failure: None,
    };
    let verified = match selection.value {
        Err(Failure::Missing) if provider == Provider::GitHub => {
            // X-Hub-Signature-256 absent: the legacy SHA-1 header may stand in, only for
            // repositories that allow it. Any other outcome stays "missing", whatever the
            // configuration, so the answer does not reveal whether some repository allows SHA-1.
            let verified = legacy_sha1(h, body, repos);
            if verified.contains(&true) {
                verification.scheme = Some(Scheme::HmacSha1HexPrefixed);
                verification.header = Some("X-Hub-Signature");
            }
            verified
        }
        Err(failure) => {
            verification.failure = Some(failure);
            return (verification, vec![false; repos.len()]);
        }
        Ok(value) => match selection.scheme {
            Scheme::PlainToken => check_each(repos, |_| true, |key| token_matches(key, value)),
            _ => {
                let data = match selection.signed_bytes {
                    Some(SignedBytes::FormFieldPayload) => form_field(body, "payload").map(Cow::Owned),
                    _ => Some(Cow::Borrowed(body)),
                };
                let streamed = digests
                    .filter(|d| selection.signed_bytes == Some(SignedBytes::RawBody) && d.of_repo.len() == repos.len());
                match (data, decode_tag(value, 32), streamed) {
                    (Some(_), Some(tag), Some(d)) => {
                        d.of_repo.iter().map(|t| t.as_ref().is_some_and(|t| constant_time_eq(t, &tag))).collect()
                    }
                    (Some(data), Some(tag), None) => {
                        check_each(repos, |_| true, |key| hmac_sha256_matches(key, &data, &tag))
                    }
                    _ => vec![false; repos.len()],
                }
            }
        },
    };
    // A secret authenticates only deliveries of its repository's forge (or family).
    let verified: Vec<bool> = verified.into_iter().zip(repos).map(|(ok, repo)| ok && repo.accepts(provider)).collect();
    verification.valid = verified.contains(&true);
    if !verification.valid && verification.failure.is_none() {
        verification.failure = Some(match selection.value {
            Err(failure) => failure,
            Ok(_) => Failure::Mismatch,
        });
    }
    (verification, verified)
}

fn select<'h>(provider: Provider, h: &Headers<'h>, content_type: ContentType) -> Selection<'h> {
    let body_kind = if provider.is_gitea_family() && content_type == ContentType::Form {
        SignedBytes::FormFieldPayload
    } else {
        SignedBytes::RawBody
    };
    let hmac = |scheme, header: &'static str, prefix: &str| {
        let value = match h.get(header) {
            None => Err(Failure::Missing),
            Some(v) => strip_prefix(v, prefix),
        };
        Selection { scheme, header, signed_bytes: Some(body_kind), value }
    };
    match provider {
        Provider::Gitea | Provider::Forgejo | Provider::Gogs => {
            let native: &[&'static str] = match provider {
                Provider::Forgejo => &["X-Forgejo-Signature", "X-Gitea-Signature"],
                Provider::Gitea => &["X-Gitea-Signature"],
                _ => &["X-Gogs-Signature"],
            };
            if let Some(&name) = native.iter().find(|n| h.contains(n)) {
                hmac(Scheme::HmacSha256Hex, name, "")
            } else if h.contains("X-Hub-Signature-256") {
                hmac(Scheme::HmacSha256HexPrefixed, "X-Hub-Signature-256", "sha256=")
            } else {
                let first = native.first().copied().unwrap_or("X-Gitea-Signature");
                hmac(Scheme::HmacSha256Hex, first, "")
            }
        }
        Provider::GitHub => hmac(Scheme::HmacSha256HexPrefixed, "X-Hub-Signature-256", "sha256="),
        Provider::BitbucketCloud | Provider::BitbucketServer => {
            hmac(Scheme::HmacSha256HexPrefixed, "X-Hub-Signature", "sha256=")
        }
        Provider::GitLab => Selection {
            scheme: Scheme::PlainToken,
            header: "X-Gitlab-Token",
            signed_bytes: None,
            value: match h.get("X-Gitlab-Token") {
                None => Err(Failure::Missing),
                Some("") => Err(Failure::Empty),
                Some(token) => Ok(token),
            },
        },
    }
}

/// `sha256=abcd` → `abcd`. Empty or prefix-only values are [`Failure::Empty`]; another
/// prefix is [`Failure::Mismatch`]. The prefix is matched case-insensitively.
fn strip_prefix<'v>(value: &'v str, prefix: &str) -> Result<&'v str, Failure> {
    if value.is_empty() || value.eq_ignore_ascii_case(prefix) {
        return Err(Failure::Empty);
    }
    match value.get(..prefix.len()) {
        Some(head) if head.eq_ignore_ascii_case(prefix) => Ok(&value[prefix.len()..]),
        _ => Err(Failure::Mismatch),
    }
}

/// Hex digest → bytes, only when it has exactly `len` bytes (upper or lower case).
fn decode_tag(hex_digest: &str, len: usize) -> Option<Vec<u8>> {
    hex::decode(hex_digest).ok().filter(|tag| tag.len() == len)
}

fn legacy_sha1(h: &Headers<'_>, body: &[u8], repos: &[WatchedRepository]) -> Vec<bool> {
    let tag =
        h.get("X-Hub-Signature").and_then(|v| strip_prefix(v, "sha1=").ok()).and_then(|digest| decode_tag(digest, 20));
    match tag {
        Some(tag) => check_each(repos, |repo| repo.allow_sha1, |key| constant_time_eq(&hmac_sha1(key, body), &tag)),
        None => vec![false; repos.len()],
    }
}

/// Runs `check` once per distinct usable secret among the eligible repositories and
/// reports, per repository, whether its secret passed.
fn check_each(
    repos: &[WatchedRepository],
    eligible: impl Fn(&WatchedRepository) -> bool,
    check: impl Fn(&[u8]) -> bool,
) -> Vec<bool> {
    let mut results: Vec<(&[u8], bool)> = Vec::new();
    repos
        .iter()
        .map(|repo| {
            let Some(secret) = repo.secret.as_ref().filter(|s| !s.is_empty()) else {
                return false;
            };
            if !eligible(repo) {
                return false;
            }
            let key = secret.expose();
            if let Some((_, ok)) = results.iter().find(|(k, _)| constant_time_eq(k, key)) {
                return *ok;
            }
            let ok = check(key);
            results.push((key, ok));
            ok
        })
        .collect()
}

fn hmac_sha256_matches(key: &[u8], data: &[u8], tag: &[u8]) -> bool {
    let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(key) else {
        return false;
    };
    mac.update(data);
    mac.verify_slice(tag).is_ok()
}

/// GitLab token check: HMAC(secret, token) against HMAC(secret, secret), compared by
/// `verify_slice`, so the time depends neither on where the strings differ nor on the
/// token's length relative to the secret.
fn token_matches(secret: &[u8], token: &str) -> bool {
    let Ok(mut expected) = <HmacSha256 as KeyInit>::new_from_slice(secret) else {
        return false;
    };
    expected.update(secret);
    let expected = expected.finalize().into_bytes();
    let Ok(mut presented) = <HmacSha256 as KeyInit>::new_from_slice(secret) else {
        return false;
    };
    presented.update(token.as_bytes());
    presented.verify_slice(&expected).is_ok()
}

/// Constant-time equality of the contents (`subtle`'s [`ConstantTimeEq`]); slices of
/// different lengths are unequal at once (the length itself is not secret here).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::{RepoKey, Secret};
    use super::*;

    fn repo(secret: &str, allow_sha1: bool) -> WatchedRepository {
        WatchedRepository {
            key: RepoKey::from_url("https://h.example/a/b").unwrap(),
            secret: Some(Secret::from(secret)),
            allow_sha1,
            provider: None,
        }
    }

    fn hmac_hex(key: &[u8], data: &[u8]) -> String {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).unwrap();
        mac.update(data);
        hex::encode(mac.finalize().into_bytes())
    }

    fn run(
        provider: Provider,
        headers: &[(&str, &str)],
        ct: ContentType,
        body: &[u8],
        repos: &[WatchedRepository],
    ) -> (Verification, Vec<bool>) {
        let pairs: Vec<(String, String)> = headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
        verify(provider, &Headers::new(&pairs), ct, body, repos, None)
    }

    #[test]
    fn github_published_example() {
        // docs.github.com "Validating webhook deliveries", testing section.
        let want = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(hmac_hex(b"It's a Secret to Everybody", b"Hello, World!"), want);
        let header = format!("sha256={want}");
        let (v, verified) = run(
            Provider::GitHub,
            &[("X-Hub-Signature-256", &header)],
            ContentType::Json,
            b"Hello, World!",
            &[repo("It's a Secret to Everybody", false)],
        );
        assert!(v.valid);
        assert_eq!(verified, vec![true]);
        assert_eq!(v.scheme, Some(Scheme::HmacSha256HexPrefixed));
    }

    #[test]
    fn hmac_header_edge_cases() {
        let body = b"{\"k\":1}";
        let good = hmac_hex(b"s3cr3t", body);
        let upper = good.to_uppercase();
        let truncated = &good[..62];
        let odd = &good[..63];
        let longer = format!("{good}00");
        let cases: &[(&str, Option<Failure>)] = &[
            (&good, None),
            (&upper, None),
            (truncated, Some(Failure::Mismatch)),
            (odd, Some(Failure::Mismatch)),
            (&longer, Some(Failure::Mismatch)),
            ("zz", Some(Failure::Mismatch)),
            ("", Some(Failure::Empty)),
        ];
        for (value, want) in cases {
            let (v, _) = run(
                Provider::Gitea,
                &[("X-Gitea-Signature", value)],
                ContentType::Json,
                body,
                &[repo("s3cr3t", false)],
            );
            assert_eq!(v.failure, *want, "{value:?}");
            assert_eq!(v.valid, want.is_none());
        }
    }

    #[test]
    fn prefixed_header_edge_cases() {
        let body = b"{}";
        let good = hmac_hex(b"s3cr3t", body);
        let cases: Vec<(String, Option<Failure>)> = vec![
            (format!("sha256={good}"), None),
            (format!("SHA256={good}"), None),
            (format!("sha256={}", good.to_uppercase()), None),
            ("sha256=".to_owned(), Some(Failure::Empty)),
            (String::new(), Some(Failure::Empty)),
            (good.clone(), Some(Failure::Mismatch)),
            (format!("sha1={good}"), Some(Failure::Mismatch)),
            (format!("sha256={}", &good[..40]), Some(Failure::Mismatch)),
        ];
        for (value, want) in cases {
            let (v, _) = run(
                Provider::GitHub,
                &[("x-hub-signature-256", &value)],
                ContentType::Json,
                body,
                &[repo("s3cr3t", false)],
            );
            assert_eq!(v.failure, want, "{value:?}");
        }
    }

    #[test]
    fn gitea_form_mode_signs_the_decoded_payload_github_the_raw_body() {
        let json = b"{\"a\":\"b c\"}";
        let form = b"payload=%7B%22a%22%3A%22b+c%22%7D";
        let json_sig = hmac_hex(b"k", json);
        let form_sig = hmac_hex(b"k", form);
        let repos = [repo("k", false)];
        let (v, _) = run(Provider::Gitea, &[("X-Gitea-Signature", &json_sig)], ContentType::Form, form, &repos);
        assert!(v.valid);
        assert_eq!(v.signed_bytes, Some(SignedBytes::FormFieldPayload));
        let (v, _) = run(Provider::Gitea, &[("X-Gitea-Signature", &form_sig)], ContentType::Form, form, &repos);
        assert_eq!(v.failure, Some(Failure::Mismatch));
        let gh = |sig: &str| format!("sha256={sig}");
        let (v, _) = run(Provider::GitHub, &[("X-Hub-Signature-256", &gh(&form_sig))], ContentType::Form, form, &repos);
        assert!(v.valid);
        assert_eq!(v.signed_bytes, Some(SignedBytes::RawBody));
        let (v, _) = run(Provider::GitHub, &[("X-Hub-Signature-256", &gh(&json_sig))], ContentType::Form, form, &repos);
        assert_eq!(v.failure, Some(Failure::Mismatch));
        // Form body without a payload field cannot be verified.
        let (v, _) = run(Provider::Gitea, &[("X-Gitea-Signature", &json_sig)], ContentType::Form, b"x=1", &repos);
        assert_eq!(v.failure, Some(Failure::Mismatch));
    }

    #[test]
    fn gitea_family_header_choice() {
        let body = b"{}";
        let sig = hmac_hex(b"k", body);
        let prefixed = format!("sha256={sig}");
        let repos = [repo("k", false)];
        // Forgejo prefers its own header, then Gitea's.
        let (v, _) = run(Provider::Forgejo, &[("X-Gitea-Signature", &sig)], ContentType::Json, body, &repos);
        assert_eq!((v.valid, v.header), (true, Some("X-Gitea-Signature")));
        let (v, _) = run(
            Provider::Forgejo,
            &[("X-Forgejo-Signature", &sig), ("X-Gitea-Signature", "bad")],
            ContentType::Json,
            body,
            &repos,
        );
        assert_eq!((v.valid, v.header), (true, Some("X-Forgejo-Signature")));
        // Native header absent: the GitHub-compatible sha256 header stands in.
        let (v, _) = run(Provider::Gitea, &[("X-Hub-Signature-256", &prefixed)], ContentType::Json, body, &repos);
        assert_eq!((v.valid, v.scheme), (true, Some(Scheme::HmacSha256HexPrefixed)));
        // Native header present but empty: not rescued by the compatible header.
        let (v, _) = run(
            Provider::Gitea,
            &[("X-Gitea-Signature", ""), ("X-Hub-Signature-256", &prefixed)],
            ContentType::Json,
            body,
            &repos,
        );
        assert_eq!(v.failure, Some(Failure::Empty));
        let (v, _) = run(Provider::Gogs, &[], ContentType::Json, body, &repos);
        assert_eq!((v.failure, v.header), (Some(Failure::Missing), Some("X-Gogs-Signature")));
    }

    #[test]
    fn bitbucket_x_hub_signature_is_sha256() {
        let body = b"{}";
        let sig = format!("sha256={}", hmac_hex(b"k", body));
        let (v, _) =
            run(Provider::BitbucketCloud, &[("X-Hub-Signature", &sig)], ContentType::Json, body, &[repo("k", false)]);
        assert!(v.valid);
        let sha1 = format!("sha1={}", hex::encode(hmac_sha1(b"k", body)));
        let (v, _) =
            run(Provider::BitbucketServer, &[("X-Hub-Signature", &sha1)], ContentType::Json, body, &[repo("k", true)]);
        assert_eq!(v.failure, Some(Failure::Mismatch));
    }

    #[test]
    fn sha1_only_with_allow_sha1() {
        let body = b"{}";
        let sha1 = format!("sha1={}", hex::encode(hmac_sha1(b"k", body)));
        let headers = [("X-Hub-Signature", sha1.as_str())];
        let (v, verified) = run(Provider::GitHub, &headers, ContentType::Json, body, &[repo("k", false)]);
        assert_eq!((v.valid, v.failure), (false, Some(Failure::Missing)));
        assert_eq!(verified, vec![false]);
        let (v, verified) =
            run(Provider::GitHub, &headers, ContentType::Json, body, &[repo("k", false), repo("k", true)]);
        assert!(v.valid);
        assert_eq!(v.scheme, Some(Scheme::HmacSha1HexPrefixed));
        assert_eq!(verified, vec![false, true], "only the opted-in repository verifies");
        // A wrong SHA-1 still reads as "missing", whatever the configuration.
        let wrong = [("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000")];
        let (v, _) = run(Provider::GitHub, &wrong, ContentType::Json, body, &[repo("k", true)]);
        assert_eq!(v.failure, Some(Failure::Missing));
        // A present sha256 header is never bypassed by a valid sha1 one.
        let both = [("X-Hub-Signature", sha1.as_str()), ("X-Hub-Signature-256", "sha256=00")];
        let (v, _) = run(Provider::GitHub, &both, ContentType::Json, body, &[repo("k", true)]);
        assert_eq!(v.failure, Some(Failure::Mismatch));
    }

    #[test]
    fn gitlab_token() {
        let repos = [WatchedRepository { provider: Some(Provider::GitLab), ..repo("s3cr3t-for-tests", false) }];
        type Headers<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Headers, Option<Failure>)] = &[
            (&[("X-Gitlab-Token", "s3cr3t-for-tests")], None),
            (&[("X-Gitlab-Token", "s3cr3t-for-test")], Some(Failure::Mismatch)),
            (&[("X-Gitlab-Token", "s3cr3t-for-tests-and-more")], Some(Failure::Mismatch)),
            (&[("X-Gitlab-Token", "S3CR3T-FOR-TESTS")], Some(Failure::Mismatch)),
            (&[("X-Gitlab-Token", "")], Some(Failure::Empty)),
            (&[], Some(Failure::Missing)),
        ];
        for (headers, want) in cases {
            let (v, _) = run(Provider::GitLab, headers, ContentType::Json, b"{}", &repos);
            assert_eq!(v.failure, *want, "{headers:?}");
            assert_eq!(v.signed_bytes, None);
        }
    }

    /// Tags computed while the body streams in, chunk by chunk, give the same verdict
    /// per repository as hashing the buffered body; form mode signs the decoded field
    /// and is verified over the buffer whatever the digests say.
    #[test]
    fn streamed_digests_decide_as_the_buffered_body_does() {
        let body: Vec<u8> = (0..70_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut no_secret = repo("x", false);
        no_secret.secret = None;
        let repos = [repo("one", false), repo("two", false), no_secret, repo("two", false)];
        for key in [&b"two"[..], b"one", b"neither"] {
            let sig = hmac_hex(key, &body);
            for (provider, header, value) in [
                (Provider::Gitea, "X-Gitea-Signature", sig.clone()),
                (Provider::GitHub, "X-Hub-Signature-256", format!("sha256={sig}")),
                (Provider::BitbucketServer, "X-Hub-Signature", format!("sha256={sig}")),
            ] {
                let mut streaming = Streaming::new(&repos);
                for chunk in body.chunks(8191) {
                    streaming.update(chunk);
                }
                let digests = streaming.finish();
                let pairs = vec![(header.to_owned(), value.clone())];
                let h = Headers::new(&pairs);
                let streamed = verify(provider, &h, ContentType::Json, &body, &repos, Some(&digests));
                let buffered = verify(provider, &h, ContentType::Json, &body, &repos, None);
                assert_eq!(streamed, buffered, "{provider:?} {key:?}");
                assert_eq!(streamed.0.valid, key != b"neither");
            }
        }
        // form mode: digests of the raw body are not what is signed
        let payload = br#"{"ref":"refs/heads/main"}"#;
        let form = format!("payload={}", String::from_utf8_lossy(payload).replace('"', "%22").replace(':', "%3A"));
        let sig = hmac_hex(b"one", payload);
        let mut streaming = Streaming::new(&repos);
        streaming.update(form.as_bytes());
        let pairs = vec![("X-Gitea-Signature".to_owned(), sig)];
        let digests = streaming.finish();
        let v =
            verify(Provider::Gitea, &Headers::new(&pairs), ContentType::Form, form.as_bytes(), &repos, Some(&digests));
        assert!(v.0.valid, "{v:?}");
    }

    #[test]
    fn every_distinct_secret_is_tried_and_remembered() {
        let body = b"{}";
        let sig = hmac_hex(b"two", body);
        let mut no_secret = repo("x", false);
        no_secret.secret = None;
        let repos = [repo("one", false), repo("two", false), no_secret, repo("two", false), repo("", false)];
        let (v, verified) = run(Provider::Gitea, &[("X-Gitea-Signature", &sig)], ContentType::Json, body, &repos);
        assert!(v.valid);
        assert_eq!(verified, vec![false, true, false, true, false]);
        // No usable secret at all: every delivery fails.
        let (v, _) =
            run(Provider::Gitea, &[("X-Gitea-Signature", &hmac_hex(b"", body))], ContentType::Json, body, &repos[2..3]);
        assert_eq!(v.failure, Some(Failure::Mismatch));
        let (v, _) =
            run(Provider::Gitea, &[("X-Gitea-Signature", &hmac_hex(b"", body))], ContentType::Json, body, &repos[4..]);
        assert_eq!(v.failure, Some(Failure::Mismatch));
    }

    #[test]
    fn constant_time_eq_basics() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abd", b"abc"));
        assert!(!constant_time_eq(b"abc", b"ab"), "a prefix is not equal");
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
        // A difference in the first or the last byte of a 20-byte SHA-1 tag.
        let tag = [0x5a_u8; 20];
        for i in [0, 19] {
            let mut other = tag;
            other[i] ^= 0x01;
            assert!(!constant_time_eq(&tag, &other), "byte {i}");
        }
        assert!(constant_time_eq(&tag, &[0x5a; 20]));
    }
}
