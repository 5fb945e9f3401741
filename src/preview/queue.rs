//! The previews' own queue, apart from the passes': a pull request pushed to five times
//! while its preview waits is previewed once, at its latest head; previews of one pull
//! request start at least [`PER_PULL_INTERVAL`] apart and those of one repository
//! [`PER_REPOSITORY_INTERVAL`] apart; at most [`MAX_PENDING`] pull requests wait
//! ([`MAX_PENDING_PER_REPOSITORY`] of one repository) — a delivery beyond that is
//! answered 503 and the forge retries it. One preview runs at a time, so previews never
//! take more than one pass's share of the process from the syncs.
//!
//! [`Pending`] is the pure part (values and instants in, the request due out);
//! [`Queue`] wraps it for the intake and the worker.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::webhook::{Provider, PullRequest};

/// Shortest time between the starts of two previews of one pull request.
pub const PER_PULL_INTERVAL: Duration = Duration::from_secs(10);
/// Shortest time between the starts of two previews of one repository.
pub const PER_REPOSITORY_INTERVAL: Duration = Duration::from_secs(1);
/// Most pull requests waiting at once.
pub const MAX_PENDING: usize = 64;
/// Most pull requests of one repository waiting at once.
pub const MAX_PENDING_PER_REPOSITORY: usize = 16;

/// One preview to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The forge that sent it.
    pub provider: Provider,
    /// The pull request (its base repository's keys, head, base branch, fork).
    pub pull: PullRequest,
    /// The applications following its base branch.
    pub apps: Vec<String>,
    /// When its delivery was read.
    pub received: Instant,
}

impl Request {
    /// `(repository key, number)`: what one pull request's requests coalesce on.
    fn key(&self) -> (String, u64) {
        let repo = self.pull.repo_keys.first().map(|k| k.as_str().to_string()).unwrap_or_default();
        (repo, self.pull.number)
    }
}

/// Why a request was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    /// [`MAX_PENDING`] or [`MAX_PENDING_PER_REPOSITORY`] pull requests already wait.
    #[error("too many pull requests wait for a preview; retry later")]
    Full,
}

/// Waiting requests and when each pull request and repository last started one.
#[derive(Debug, Default)]
pub struct Pending {
    waiting: BTreeMap<(String, u64), Request>,
    pull_started: HashMap<(String, u64), Instant>,
    repo_started: HashMap<String, Instant>,
}

impl Pending {
    /// Queues `req`, replacing the request of the same pull request still waiting (the
    /// newer head wins; the first request's arrival is kept, so a pull request pushed
    /// to without end is still previewed).
    ///
    /// # Errors
    /// [`Full::Full`].
    pub fn offer(&mut self, mut req: Request) -> Result<(), Full> {
        let key = req.key();
        if let Some(old) = self.waiting.get(&key) {
            req.received = req.received.min(old.received);
            self.waiting.insert(key, req);
            return Ok(());
        }
        let of_repo = self.waiting.keys().filter(|(r, _)| *r == key.0).count();
        if self.waiting.len() >= MAX_PENDING || of_repo >= MAX_PENDING_PER_REPOSITORY {
            return Err(Full::Full);
        }
        self.waiting.insert(key, req);
        Ok(())
    }

    /// The request to start at `now`: the one waiting longest among those whose pull
    /// request and repository may start; else when the next may (`Err(Some)`), or
    /// `Err(None)` when none waits. Records the start.
    ///
    /// # Errors
    /// As above: nothing is due yet.
    pub fn take(&mut self, now: Instant) -> Result<Request, Option<Instant>> {
        let due = |key: &(String, u64)| {
            let pull = self.pull_started.get(key).map_or(now, |t| *t + PER_PULL_INTERVAL);
            let repo = self.repo_started.get(&key.0).map_or(now, |t| *t + PER_REPOSITORY_INTERVAL);
            pull.max(repo)
        };
        let ready = self.waiting.iter().filter(|(k, _)| due(k) <= now).min_by_key(|(_, r)| r.received);
        let key = match ready {
            Some((k, _)) => k.clone(),
            None => return Err(self.waiting.keys().map(due).min()),
        };
        let req = self.waiting.remove(&key).ok_or(None)?;
        self.pull_started.insert(key.clone(), now);
        self.repo_started.insert(key.0, now);
        // what is older than both intervals no longer limits anything
        let horizon = PER_PULL_INTERVAL.max(PER_REPOSITORY_INTERVAL);
        self.pull_started.retain(|_, t| now.duration_since(*t) < horizon);
        self.repo_started.retain(|_, t| now.duration_since(*t) < horizon);
        Ok(req)
    }

    /// How many pull requests wait.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// [`Pending`] shared by the webhook intake (which offers) and the preview worker
/// (which takes).
#[derive(Debug, Default)]
pub struct Queue {
    pending: Mutex<Pending>,
    wake: tokio::sync::Notify,
    /// Authenticated pull request events seen, of any action (opened, closed, labelled):
    /// a `pullRequests` applicationSet lists again at its next tick rather than its
    /// next ask ([`crate::generators::Expander::moved`]).
    events: std::sync::atomic::AtomicU64,
}

impl Queue {
    /// Counts one authenticated pull request event.
    pub fn note_event(&self) {
        self.events.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many authenticated pull request events were seen so far.
    pub fn events(&self) -> u64 {
        self.events.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Queues `req` ([`Pending::offer`]) and wakes the worker.
    ///
    /// # Errors
    /// [`Full::Full`].
    pub fn offer(&self, req: Request) -> Result<(), Full> {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).offer(req)?;
        self.wake.notify_one();
        Ok(())
    }

    /// The next request due, waiting for one.
    pub async fn next(&self) -> Request {
        loop {
            let taken = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(Instant::now());
            match taken {
                Ok(req) => return req,
                Err(Some(at)) => {
                    let _ = tokio::time::timeout_at(at.into(), self.wake.notified()).await;
                }
                Err(None) => self.wake.notified().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::webhook::{PullAction, RepoKey};

    fn req(repo: &str, number: u64, sha: char, received: Instant) -> Request {
        Request {
            provider: Provider::Gitea,
            pull: PullRequest {
                number,
                action: PullAction::Synchronized,
                base: "main".into(),
                head_sha: sha.to_string().repeat(40),
                head_ref: format!("refs/pull/{number}/head"),
                fork: false,
                merged: false,
                labels: vec![],
                repo_urls: vec![],
                repo_keys: vec![RepoKey::from_url(&format!("https://git.example/acme/{repo}")).unwrap()],
            },
            apps: vec!["web".into()],
            received,
        }
    }

    #[test]
    fn pushes_to_one_pull_request_coalesce_on_the_newest_head() {
        let t = Instant::now();
        let mut p = Pending::default();
        p.offer(req("a", 1, 'a', t)).unwrap();
        p.offer(req("a", 1, 'b', t + Duration::from_secs(1))).unwrap();
        assert_eq!(p.len(), 1);
        let got = p.take(t + Duration::from_secs(2)).unwrap();
        assert_eq!((got.pull.head_sha.as_str(), got.received), ("b".repeat(40).as_str(), t));
        assert_eq!(p.take(t), Err(None));
    }

    #[test]
    fn one_pull_request_waits_its_interval_others_go_first() {
        let t = Instant::now();
        let mut p = Pending::default();
        p.offer(req("a", 1, 'a', t)).unwrap();
        assert!(p.take(t).is_ok());
        p.offer(req("a", 1, 'b', t)).unwrap();
        p.offer(req("b", 2, 'c', t)).unwrap();
        // pull request 1 started at t: pull request 2 (another repository) goes now
        assert_eq!(p.take(t).unwrap().pull.number, 2);
        assert_eq!(p.take(t), Err(Some(t + PER_PULL_INTERVAL)));
        assert_eq!(p.take(t + PER_PULL_INTERVAL).unwrap().pull.head_sha, "b".repeat(40));
    }

    #[test]
    fn one_repository_is_spaced_and_bounded() {
        let t = Instant::now();
        let mut p = Pending::default();
        for n in 0..MAX_PENDING_PER_REPOSITORY as u64 {
            p.offer(req("a", n, 'a', t)).unwrap();
        }
        assert_eq!(p.offer(req("a", 999, 'a', t)), Err(Full::Full));
        p.offer(req("a", 0, 'b', t)).expect("a newer head of a waiting pull request always coalesces");
        p.offer(req("b", 1, 'a', t)).expect("another repository has room");
        assert!(p.take(t).is_ok());
        let second = p.take(t).unwrap();
        assert_eq!(second.pull.repo_keys[0].as_str(), "git.example/acme/b", "repository a waits its interval");
        assert_eq!(p.take(t), Err(Some(t + PER_REPOSITORY_INTERVAL)));
    }

    #[test]
    fn the_whole_queue_is_bounded() {
        let t = Instant::now();
        let mut p = Pending::default();
        for n in 0..MAX_PENDING as u64 {
            p.offer(req(&format!("r{}", n % 8), n, 'a', t)).unwrap();
        }
        assert_eq!(p.offer(req("other", 1, 'a', t)), Err(Full::Full));
    }
}
