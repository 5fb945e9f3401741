//! Who may read the internal listener (status API and metrics): a Kubernetes bearer
//! token, authenticated by the API server with a `TokenReview`, then authorized with a
//! `SubjectAccessReview` — the same delegation kube-rbac-proxy and controller-runtime's
//! metrics filter use. plumb decides nothing about identities itself.
//!
//! | route | the right a caller needs (RBAC rule) |
//! |---|---|
//! | `GET /api/v1/applications`, the status page (`GET /`, `GET /applications/{app}`) | `get` on `applications` in API group `plumb.dev` ([`STATUS_API`]; the Application resource, `deploy/base/crd.yaml`) |
//! | `GET /metrics` | `get` on the non-resource URL `/metrics` ([`METRICS`], what Prometheus' own ClusterRole usually holds) |
//!
//! Answers: no `Authorization: Bearer <token>` header or a token the API server does not
//! authenticate → 401; authenticated without the right → 403; the API server cannot be
//! asked → 503; too many reviews asked at once → 429 (`Retry-After: 1`).
//!
//! What an unauthenticated caller costs is bounded:
//! - every answer of the API server — allowed, not authenticated, forbidden — is
//!   remembered for [`CACHE_TTL`] (at most [`CACHE_ENTRIES`] of them, keyed by a SHA-256
//!   of token and right, never the token itself), so repeating a token asks nothing; a
//!   granted or revoked right takes effect within [`CACHE_TTL`]. "Could not ask" (503)
//!   is not remembered.
//! - reviews of tokens not remembered are rate-limited: at most [`REVIEW_BURST`] at
//!   once, refilled at [`REVIEWS_PER_SECOND`]; beyond that the request is answered 429
//!   without asking, so a flood of made-up tokens costs the API server at most that rate.
//!
//! plumb's ServiceAccount needs `create` on `tokenreviews.authentication.k8s.io` and
//! `subjectaccessreviews.authorization.k8s.io` (the built-in ClusterRole
//! `system:auth-delegator`).

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::{Api, Client, api::PostParams};
use sha2::{Digest, Sha256};

/// How long an answer (allowed, not authenticated, forbidden) is reused without asking
/// the API server again.
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Most answers remembered at once.
pub const CACHE_ENTRIES: usize = 1024;
/// Most reviews of tokens not remembered that may be asked at once (the bucket's size).
pub const REVIEW_BURST: u32 = 20;
/// Reviews of tokens not remembered asked per second in the long run (the bucket's refill).
pub const REVIEWS_PER_SECOND: u32 = 10;

/// A right a request needs: the attributes of the `SubjectAccessReview` asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// A verb on a resource of an API group, cluster-wide.
    Resource {
        /// API group (`plumb.dev`).
        group: &'static str,
        /// Resource, plural (`applications`).
        resource: &'static str,
        /// Verb (`get`).
        verb: &'static str,
    },
    /// A verb on a non-resource URL.
    NonResource {
        /// URL path (`/metrics`).
        path: &'static str,
        /// Verb (`get`).
        verb: &'static str,
    },
}

/// The right to read the status API: `get` on `applications.plumb.dev`.
pub const STATUS_API: Right = Right::Resource { group: "plumb.dev", resource: "applications", verb: "get" };
/// The right to read the metrics: `get` on the non-resource URL `/metrics`.
pub const METRICS: Right = Right::NonResource { path: "/metrics", verb: "get" };

impl std::fmt::Display for Right {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Right::Resource { group, resource, verb } => write!(f, "{verb} {resource}.{group}"),
            Right::NonResource { path, verb } => write!(f, "{verb} {path}"),
        }
    }
}

/// What the API server said about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The token's user holds the right.
    Allowed {
        /// The authenticated user name.
        user: String,
    },
    /// No bearer token, or one the API server does not authenticate (401).
    Unauthenticated(String),
    /// Authenticated, without the right (403).
    Forbidden {
        /// The authenticated user name.
        user: String,
        /// The authorizer's reason, when it gave one.
        reason: String,
    },
    /// The API server could not be asked (503); nothing is remembered.
    Unavailable(String),
    /// Too many tokens not remembered were reviewed lately ([`Bucket`]); not asked (429).
    Throttled,
}

impl Verdict {
    /// HTTP status for this verdict: 200, 401, 403 or 503.
    pub fn http_status(&self) -> u16 {
        match self {
            Verdict::Allowed { .. } => 200,
            Verdict::Unauthenticated(_) => 401,
            Verdict::Forbidden { .. } => 403,
            Verdict::Unavailable(_) => 503,
            Verdict::Throttled => 429,
        }
    }
}

/// The token of an `Authorization` header value: `Bearer <token>` (scheme in any case,
/// RFC 6750 §2.1). `None` when the header is missing, of another scheme or empty.
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The API server's answers, keyed by SHA-256 of (token, right), each valid until its
/// expiry. Only [`Verdict::Allowed`], [`Verdict::Unauthenticated`] and
/// [`Verdict::Forbidden`] are kept. Pure: `now` is passed in.
#[derive(Debug)]
pub struct Cache {
    entries: HashMap<[u8; 32], (Verdict, Instant)>,
    ttl: Duration,
    capacity: usize,
}

impl Cache {
    /// An empty cache of at most `capacity` entries, each kept for `ttl`.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Cache { entries: HashMap::new(), ttl, capacity: capacity.max(1) }
    }

    fn key(token: &str, right: Right) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(token.as_bytes());
        h.update([0]);
        h.update(right.to_string().as_bytes());
        h.finalize().into()
    }

    /// The still-valid answer remembered for `token` and `right`.
    pub fn get(&self, token: &str, right: Right, now: Instant) -> Option<&Verdict> {
        let (verdict, until) = self.entries.get(&Self::key(token, right))?;
        (now < *until).then_some(verdict)
    }

    /// Remembers `verdict` for `token` and `right` until `now + ttl` (not a
    /// [`Verdict::Unavailable`] or [`Verdict::Throttled`]: those say nothing about the
    /// token). A full cache first drops expired entries, then the one expiring soonest.
    pub fn insert(&mut self, token: &str, right: Right, verdict: &Verdict, now: Instant) {
        if matches!(verdict, Verdict::Unavailable(_) | Verdict::Throttled) {
            return;
        }
        if self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, until)| now < *until);
        }
        if self.entries.len() >= self.capacity
            && let Some(oldest) = self.entries.iter().min_by_key(|(_, (_, until))| *until).map(|(k, _)| *k)
        {
            self.entries.remove(&oldest);
        }
        self.entries.insert(Self::key(token, right), (verdict.clone(), now + self.ttl));
    }

    /// Number of entries held (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A token bucket for reviews: `burst` at once, refilled at `per_second`. Pure: `now`
/// is passed in.
#[derive(Debug)]
pub struct Bucket {
    /// Reviews that may be asked now (fractions accumulate between calls).
    available: f64,
    burst: f64,
    per_second: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket of `burst` reviews, refilled at `per_second`.
    pub fn new(burst: u32, per_second: u32, now: Instant) -> Self {
        Bucket { available: f64::from(burst), burst: f64::from(burst), per_second: f64::from(per_second), at: now }
    }

    /// Takes one review if there is one at `now`.
    pub fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.available = (self.available + elapsed * self.per_second).min(self.burst);
        if self.available >= 1.0 {
            self.available -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Asks the API server who a token is and whether it holds a right; remembers positive
/// answers ([`Cache`]).
pub struct Reviewer {
    client: Client,
    cache: Mutex<Cache>,
    bucket: Mutex<Bucket>,
}

impl Reviewer {
    /// A reviewer asking through `client` (plumb's own identity, never an impersonated
    /// one), with the default cache ([`CACHE_TTL`], [`CACHE_ENTRIES`]) and rate
    /// ([`REVIEW_BURST`], [`REVIEWS_PER_SECOND`]).
    pub fn new(client: Client) -> Self {
        Reviewer {
            client,
            cache: Mutex::new(Cache::new(CACHE_TTL, CACHE_ENTRIES)),
            bucket: Mutex::new(Bucket::new(REVIEW_BURST, REVIEWS_PER_SECOND, Instant::now())),
        }
    }

    /// The verdict for a request carrying the `Authorization` header value
    /// `authorization` that needs `right`.
    pub async fn check(&self, authorization: Option<&str>, right: Right) -> Verdict {
        let Some(token) = bearer(authorization) else {
            return Verdict::Unauthenticated("an `Authorization: Bearer <token>` header is required".into());
        };
        if let Some(verdict) = self.lock().get(token, right, Instant::now()) {
            return verdict.clone();
        }
        let granted = self.bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(Instant::now());
        if !granted {
            return Verdict::Throttled;
        }
        let verdict = self.ask(token, right).await;
        self.lock().insert(token, right, &verdict, Instant::now());
        verdict
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn ask(&self, token: &str, right: Right) -> Verdict {
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_string(), audiences: None },
            ..TokenReview::default()
        };
        let reviewed = match Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review).await
        {
            Ok(r) => r.status.unwrap_or_default(),
            Err(e) => return Verdict::Unavailable(format!("TokenReview failed: {e}")),
        };
        let user = reviewed.user.unwrap_or_default();
        if reviewed.authenticated != Some(true) {
            return Verdict::Unauthenticated("the token is not valid".into());
        }
        let name = user.username.clone().unwrap_or_default();
        let spec = SubjectAccessReviewSpec {
            user: user.username,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            resource_attributes: match right {
                Right::Resource { group, resource, verb } => Some(ResourceAttributes {
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    verb: Some(verb.into()),
                    ..ResourceAttributes::default()
                }),
                Right::NonResource { .. } => None,
            },
            non_resource_attributes: match right {
                Right::NonResource { path, verb } => {
                    Some(NonResourceAttributes { path: Some(path.into()), verb: Some(verb.into()) })
                }
                Right::Resource { .. } => None,
            },
        };
        let review = SubjectAccessReview { spec, ..SubjectAccessReview::default() };
        let status =
            match Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &review).await {
                Ok(r) => r.status.unwrap_or_default(),
                Err(e) => return Verdict::Unavailable(format!("SubjectAccessReview failed: {e}")),
            };
        if status.allowed {
            Verdict::Allowed { user: name }
        } else {
            let reason = status.reason.unwrap_or_default();
            Verdict::Forbidden { user: name, reason }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bearer_tokens() {
        for (header, want) in [
            (Some("Bearer abc.def"), Some("abc.def")),
            (Some("bearer  abc "), Some("abc")),
            (Some("BEARER abc"), Some("abc")),
            (Some("Basic dXNlcjpwYXNz"), None),
            (Some("Bearer "), None),
            (Some("Bearer"), None),
            (Some(""), None),
            (None, None),
        ] {
            assert_eq!(bearer(header), want, "{header:?}");
        }
    }

    #[test]
    fn verdicts_map_to_http() {
        assert_eq!(Verdict::Allowed { user: "u".into() }.http_status(), 200);
        assert_eq!(Verdict::Unauthenticated(String::new()).http_status(), 401);
        assert_eq!(Verdict::Forbidden { user: "u".into(), reason: String::new() }.http_status(), 403);
        assert_eq!(Verdict::Unavailable(String::new()).http_status(), 503);
        assert_eq!(Verdict::Throttled.http_status(), 429);
    }

    /// An answer is for one token and one right, and only until it expires.
    #[test]
    fn cache_is_per_token_and_right_and_expires() {
        let t0 = Instant::now();
        let mut c = Cache::new(Duration::from_secs(10), 8);
        let alice = Verdict::Allowed { user: "alice".into() };
        c.insert("tok-a", STATUS_API, &alice, t0);
        assert_eq!(c.get("tok-a", STATUS_API, t0 + Duration::from_secs(9)), Some(&alice));
        assert_eq!(c.get("tok-a", STATUS_API, t0 + Duration::from_secs(10)), None, "expired");
        assert_eq!(c.get("tok-a", METRICS, t0), None, "another right");
        assert_eq!(c.get("tok-b", STATUS_API, t0), None, "another token");
    }

    /// The cache never holds more than its capacity; the entry expiring soonest goes.
    #[test]
    fn cache_is_bounded() {
        let t0 = Instant::now();
        let mut c = Cache::new(Duration::from_secs(10), 3);
        for i in 0..10u64 {
            c.insert(
                &format!("tok-{i}"),
                METRICS,
                &Verdict::Allowed { user: "u".into() },
                t0 + Duration::from_millis(i),
            );
            assert!(c.len() <= 3);
        }
        let now = t0 + Duration::from_millis(10);
        let held: Vec<u64> = (0..10).filter(|i| c.get(&format!("tok-{i}"), METRICS, now).is_some()).collect();
        assert_eq!(held, vec![7, 8, 9]);
    }

    /// The token is never a key in the clear.
    #[test]
    fn cache_keys_are_hashes() {
        let mut c = Cache::new(CACHE_TTL, 4);
        c.insert("secret-token-value", METRICS, &Verdict::Allowed { user: "u".into() }, Instant::now());
        assert!(!format!("{c:?}").contains("secret-token-value"));
    }

    /// Refusals are remembered as answers are; "could not ask" is not.
    #[test]
    fn refusals_are_remembered_briefly_and_outages_not_at_all() {
        let t0 = Instant::now();
        let mut c = Cache::new(Duration::from_secs(10), 8);
        let refused = Verdict::Unauthenticated("the token is not valid".into());
        c.insert("made-up", STATUS_API, &refused, t0);
        assert_eq!(c.get("made-up", STATUS_API, t0 + Duration::from_secs(1)), Some(&refused));
        assert_eq!(c.get("made-up", STATUS_API, t0 + Duration::from_secs(10)), None);
        c.insert("other", STATUS_API, &Verdict::Unavailable("down".into()), t0);
        c.insert("other", METRICS, &Verdict::Throttled, t0);
        assert_eq!(c.len(), 1);
    }

    /// The bucket gives `burst` at once, then `per_second`, and never more than `burst`.
    #[test]
    fn reviews_of_unknown_tokens_are_rate_limited() {
        let t0 = Instant::now();
        let mut b = Bucket::new(3, 2, t0);
        let at_once = (0..10).filter(|_| b.take(t0)).count();
        assert_eq!(at_once, 3);
        assert!(b.take(t0 + Duration::from_millis(500)), "one refilled after half a second at 2/s");
        assert!(!b.take(t0 + Duration::from_millis(500)));
        let later = t0 + Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| b.take(later)).count(), 3, "an idle hour refills the burst only");
    }
}
