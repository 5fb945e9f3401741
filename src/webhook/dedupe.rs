//! Duplicate-delivery filter: one pass per push, however often it is delivered.
//!
//! Two keys identify a delivery (`shared/reference/webhooks.md` §3.5 and §10 step 9):
//!
//! * the **delivery id** (`<provider>:<id>`, [`Decision::dedupe_key`]): GitHub
//!   redeliveries and GitLab retries keep it;
//! * the **content**, `<repository key> <ref> <after>` of every pushed ref: Gitea's
//!   "Replay" sends the stored payload again under a new id, and so does any client
//!   replaying a captured delivery.
//!
//! A delivery is a duplicate when its id, or the content of every ref it pushes, was
//! recorded within the last `window`. Only deliveries that authenticated and queued a
//! pass should be recorded ([`Dedupe::record`]): recording rejected ones would let an
//! unauthenticated sender claim a delivery id before the forge uses it.
//!
//! Pure: the caller passes the time in. Memory is bounded by `capacity` entries; when
//! full the oldest entries are forgotten early, which at worst lets a duplicate through
//! (one more pass, which is harmless: passes are idempotent). Hand-written rather than a
//! cache crate because the clock must be the caller's (tests, replay).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::decision::Decision;

/// Default window: 60 seconds, longer than a forge's automatic retries of one delivery
/// and short enough that a deliberate redelivery minutes later runs again.
pub const DEFAULT_DEDUPE_WINDOW: Duration = Duration::from_secs(60);

/// Default capacity: 10 000 keys (about 1 MiB), far above the pushes a fleet makes in a
/// minute.
pub const DEFAULT_DEDUPE_CAPACITY: usize = 10_000;

/// The keys of one delivery, computed once from its [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryKeys {
    /// `<provider>:<delivery id>`, when the sender sent an id.
    pub delivery: Option<String>,
    /// `<repository key> <ref> <after>` for every live pushed ref (deletions and test
    /// deliveries excluded).
    pub contents: Vec<String>,
}

impl DeliveryKeys {
    /// Keys of `decision`.
    pub fn of(decision: &Decision) -> Self {
        let contents = decision
            .push
            .iter()
            .chain(&decision.extra_pushes)
            .filter(|p| !p.is_deletion() && !p.after.is_empty())
            .map(|p| format!("{} {} {}", p.repo_key, p.r#ref, p.after))
            .collect();
        DeliveryKeys { delivery: decision.dedupe_key(), contents }
    }

    fn all(&self) -> impl Iterator<Item = &String> {
        self.delivery.iter().chain(&self.contents)
    }
}

/// Recently recorded delivery keys, each remembered for `window`.
#[derive(Debug)]
pub struct Dedupe {
    window: Duration,
    capacity: usize,
    /// Key → when it was last recorded.
    seen: HashMap<String, Instant>,
    /// Recording order, oldest first; an entry is stale when `seen` holds a newer time.
    order: VecDeque<(Instant, String)>,
}

impl Default for Dedupe {
    fn default() -> Self {
        Self::new(DEFAULT_DEDUPE_WINDOW, DEFAULT_DEDUPE_CAPACITY)
    }
}

impl Dedupe {
    /// A filter remembering keys for `window`, at most `capacity` of them (at least 1).
    pub fn new(window: Duration, capacity: usize) -> Self {
        Dedupe { window, capacity: capacity.max(1), seen: HashMap::new(), order: VecDeque::new() }
    }

    /// Whether `keys` were recorded within the window before `now`: the delivery id, or
    /// every content key (a delivery with no content key is judged on its id alone).
    /// Forgets expired keys first. Records nothing.
    pub fn is_duplicate(&mut self, keys: &DeliveryKeys, now: Instant) -> bool {
        self.expire(now);
        let id_seen = keys.delivery.as_ref().is_some_and(|k| self.seen.contains_key(k));
        let content_seen = !keys.contents.is_empty() && keys.contents.iter().all(|k| self.seen.contains_key(k));
        id_seen || content_seen
    }

    /// Remembers `keys` from `now` on.
    pub fn record(&mut self, keys: &DeliveryKeys, now: Instant) {
        for key in keys.all() {
            self.seen.insert(key.clone(), now);
            self.order.push_back((now, key.clone()));
        }
        while self.order.len() > self.capacity {
            self.pop_oldest();
        }
    }

    /// Number of keys remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.window {
                break;
            }
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some((at, key)) = self.order.pop_front()
            && self.seen.get(&key) == Some(&at)
        {
            self.seen.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(id: Option<&str>, contents: &[&str]) -> DeliveryKeys {
        DeliveryKeys { delivery: id.map(str::to_owned), contents: contents.iter().map(|c| (*c).to_owned()).collect() }
    }

    const W: Duration = Duration::from_secs(60);

    #[test]
    fn same_id_or_same_content_within_the_window() {
        let t0 = Instant::now();
        let mut d = Dedupe::new(W, 100);
        let first = keys(Some("github:1"), &["h/o/r refs/heads/main aaa"]);
        assert!(!d.is_duplicate(&first, t0));
        d.record(&first, t0);
        // GitHub redelivery: same id (content equal too)
        assert!(d.is_duplicate(&first, t0 + Duration::from_secs(5)));
        // Gitea replay: new id, same content
        assert!(d.is_duplicate(&keys(Some("gitea:2"), &["h/o/r refs/heads/main aaa"]), t0 + Duration::from_secs(59)));
        // same id, other content (a client reusing ids) is still a duplicate by id
        assert!(d.is_duplicate(&keys(Some("github:1"), &["h/o/r refs/heads/main bbb"]), t0));
        // new push
        assert!(!d.is_duplicate(&keys(Some("github:3"), &["h/o/r refs/heads/main bbb"]), t0));
        // the same push to another ref or repository is not a duplicate
        assert!(!d.is_duplicate(&keys(None, &["h/o/r refs/heads/dev aaa"]), t0));
        assert!(!d.is_duplicate(&keys(None, &["h/o/other refs/heads/main aaa"]), t0));
        // a batch is a duplicate only if every ref was seen
        assert!(!d.is_duplicate(&keys(None, &["h/o/r refs/heads/main aaa", "h/o/r refs/heads/dev aaa"]), t0));
        // no keys at all: never a duplicate
        assert!(!d.is_duplicate(&keys(None, &[]), t0));
    }

    #[test]
    fn window_expires() {
        let t0 = Instant::now();
        let mut d = Dedupe::new(W, 100);
        let k = keys(Some("gitlab:x"), &["c"]);
        d.record(&k, t0);
        assert!(d.is_duplicate(&k, t0 + W - Duration::from_millis(1)));
        assert!(!d.is_duplicate(&k, t0 + W));
        assert!(d.is_empty(), "expired keys are forgotten");
        // recorded again later: the window restarts from the new time
        d.record(&k, t0 + W);
        d.record(&keys(None, &["c"]), t0 + W + Duration::from_secs(30));
        assert!(d.is_duplicate(&keys(None, &["c"]), t0 + 2 * W + Duration::from_secs(10)), "refreshed content key");
        assert!(!d.is_duplicate(&keys(Some("gitlab:x"), &[]), t0 + 2 * W + Duration::from_secs(10)));
    }

    #[test]
    fn memory_is_bounded() {
        let t0 = Instant::now();
        let mut d = Dedupe::new(W, 50);
        for i in 0..10_000 {
            d.record(&keys(Some(&format!("github:{i}")), &[&format!("r refs/heads/main {i}")]), t0);
            assert!(d.order.len() <= 50 && d.len() <= 50);
        }
        // the newest are remembered, the oldest forgotten early (fail open: one more pass)
        assert!(d.is_duplicate(&keys(Some("github:9999"), &[]), t0));
        assert!(!d.is_duplicate(&keys(Some("github:0"), &[]), t0));
        assert_eq!(Dedupe::new(W, 0).capacity, 1);
    }
}
