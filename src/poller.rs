//! When repositories are asked for their refs: one poller per repository.
//!
//! Every reconcile interval (the smallest of the repository's applications', plus up
//! to 10 % jitter: [`crate::scheduler::jittered`]) a poller asks the remote for its refs
//! once (`ls-remote`) and names the applications whose revision now names another
//! commit than at its previous ask ([`crate::source::refs::moved`]); `plumb serve`
//! triggers a pass of those only ([`crate::scheduler::Trigger::Moved`]). The passes of
//! the applications' own timers (start, poll, settle) read the refs asked for last
//! instead of asking again ([`freshness`]): a poll round costs one request per
//! repository, however many applications share it. A commit pushed without a webhook
//! is seen at the poller's next ask, within one interval plus jitter.
//!
//! Passes asked for (webhook, request, drift, a moved ref) read the refs as they are
//! when they start ([`Freshness::Now`]): a webhook's pass sees the commit it announced.

use std::time::Duration;

use crate::{
    config::{Config, Repository},
    scheduler::{Cause, Trigger},
    source::{FetchError, Freshness, Pool, Refs, refs},
};

/// How old the refs a pass of an application's own timer may read are, as a multiple
/// of its reconcile interval: 2. Its poller asks every interval plus jitter (≤ 10 %)
/// plus the time its ask waits for the mirror, so its refs are younger than this while
/// it runs; a pass that finds older ones (the poller's asks fail, or this replica just
/// started leading) asks itself.
pub const POLL_AGE_INTERVALS: u32 = 2;

/// How recent the refs a pass started by `cause` reads must be, for an application
/// polled every `interval`: asked for after this replica took its shard for the take's
/// pass ([`Trigger::Take`]), as the pass starts when a push, a request or the poller
/// asked for it ([`Trigger::wants_fresh_refs`]), else those of its repository's poller
/// (its timer's passes, and a live object's change, which Git did not make).
pub fn freshness(cause: Cause, interval: Duration) -> Freshness {
    match cause {
        Cause::Triggered(Trigger::Take { at }) => Freshness::AskedAfter(at),
        Cause::Triggered(t) if t.wants_fresh_refs() => Freshness::Now,
        Cause::Triggered(_) | Cause::Start | Cause::Poll | Cause::Settle | Cause::Wake => {
            Freshness::Within(interval * POLL_AGE_INTERVALS)
        }
    }
}

/// The poller of one repository: its applications and the refs it saw last.
pub struct Poller {
    repository: Repository,
    /// (application, configured revision)
    apps: Vec<(String, String)>,
    interval: Duration,
    last: Option<Refs>,
}

impl Poller {
    /// One poller per repository of `config` that applications read, polling at the
    /// smallest reconcile interval of its applications ([`Config::interval_of`]).
    pub fn for_config(config: &Config) -> Vec<Poller> {
        config
            .repositories
            .iter()
            .filter_map(|repo| {
                let apps: Vec<_> =
                    config.applications.iter().filter(|a| a.repository.value == repo.name.value).collect();
                let interval = apps.iter().map(|a| config.interval_of(a)).min()?;
                Some(Poller {
                    repository: repo.clone(),
                    apps: apps.iter().map(|a| (a.name.value.clone(), a.revision.value.clone())).collect(),
                    interval,
                    last: None,
                })
            })
            .collect()
    }

    /// The repository's name.
    pub fn repository(&self) -> &str {
        &self.repository.name.value
    }

    /// How often it asks (before jitter).
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// One round: asks the remote for its refs now (one `ls-remote`) and returns the
    /// applications whose revision names another commit than at the previous round —
    /// at the first, than in the refs a pass asked for before, if any.
    ///
    /// # Errors
    /// The ask failed (see [`Pool::ask_refs`]); the next round compares with the last
    /// refs seen.
    pub async fn round(&mut self, pool: &Pool) -> Result<Vec<String>, FetchError> {
        let (earlier, now) = pool.ask_refs(&self.repository).await?;
        Ok(self.observe(earlier, now))
    }

    /// The applications whose revision names another commit in `now` than in the
    /// refs this poller saw last (else `earlier`); `now` becomes the last.
    fn observe(&mut self, earlier: Option<Refs>, now: Refs) -> Vec<String> {
        let moved = match self.last.take().or(earlier) {
            Some(before) => {
                let apps = self.apps.iter().map(|(a, r)| (a.as_str(), r.as_str()));
                refs::moved(&before, &now, apps).into_iter().map(String::from).collect()
            }
            None => vec![],
        };
        self.last = Some(now);
        moved
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    fn policy(text: &str) -> Config {
        let (file, base) = (std::path::Path::new("p.yaml"), std::path::Path::new("."));
        crate::config::load_str(text, file, base).unwrap_or_else(|e| panic!("{e}"))
    }

    const POLICY: &str = "repositories:
  - {name: fleet, url: https://git.example.test/fleet.git}
  - {name: other, url: https://git.example.test/other.git}
  - {name: unused, url: https://git.example.test/unused.git}
environments:
  - {name: fast, reconcileInterval: 30s}
  - {name: slow, reconcileInterval: 1h}
  - {name: default}
applications:
  - {name: web, repository: fleet, revision: main, path: web, namespace: web, environment: slow}
  - {name: api, repository: fleet, revision: main, path: api, namespace: api, environment: fast}
  - {name: docs, repository: fleet, revision: v1, path: docs, namespace: docs, environment: slow}
  - {name: tools, repository: other, revision: main, path: tools, namespace: tools, environment: default}
";

    fn refs(list: &[(&str, u8)]) -> Refs {
        Arc::new(list.iter().map(|(n, b)| ((*n).to_string(), git2::Oid::from_bytes(&[*b; 20]).unwrap())).collect())
    }

    #[test]
    fn one_poller_per_repository_at_the_smallest_interval() {
        let pollers = Poller::for_config(&policy(POLICY));
        let seen: Vec<_> = pollers.iter().map(|p| (p.repository(), p.interval().as_secs(), p.apps.len())).collect();
        assert_eq!(seen, [("fleet", 30, 3), ("other", 180, 1)], "no poller for a repository no application reads");
    }

    /// Only applications whose revision moved are named; the first round compares with
    /// the refs a pass asked for before (none: nothing to compare, nothing named).
    #[test]
    fn a_round_names_the_applications_whose_revision_moved() {
        let mut pollers = Poller::for_config(&policy(POLICY));
        let fleet = &mut pollers[0];
        let c1 = refs(&[("refs/heads/main", 1), ("refs/tags/v1", 9)]);
        let c2 = refs(&[("refs/heads/main", 2), ("refs/tags/v1", 9)]);
        let c3 = refs(&[("refs/heads/main", 3), ("refs/tags/v1", 9)]);
        assert!(fleet.observe(None, c1.clone()).is_empty(), "a first round with nothing before");
        assert!(fleet.observe(Some(c2.clone()), c1.clone()).is_empty(), "compared with its own last round");
        assert_eq!(fleet.observe(Some(c1.clone()), c2.clone()), ["web", "api"], "main moved, v1 did not");
        assert!(fleet.observe(Some(c2.clone()), c2.clone()).is_empty(), "no change: nobody");
        let mut fresh = Poller::for_config(&policy(POLICY)).remove(0);
        assert_eq!(fresh.observe(Some(c2), c3), ["web", "api"], "the first round compares with what a pass read");
    }

    /// Passes asked for read the refs as they are when they start; the timer's passes
    /// read the poller's.
    #[test]
    fn asked_for_passes_read_fresh_refs_the_timers_and_drift_reuse() {
        let hour = Duration::from_secs(3600);
        for t in [Trigger::Manual, Trigger::Moved, Trigger::Webhook { received: std::time::Instant::now() }] {
            assert_eq!(freshness(Cause::Triggered(t), hour), Freshness::Now, "{t:?}");
        }
        for c in [Cause::Start, Cause::Poll, Cause::Settle, Cause::Triggered(Trigger::Drift)] {
            assert_eq!(freshness(c, hour), Freshness::Within(2 * hour), "{c:?}");
        }
    }

    /// The passes of a shard this replica took read refs asked for after the take,
    /// however late each one starts: one advertisement asked after the take answers
    /// them all; one asked before it (what the previous holder may have seen older
    /// than) answers none.
    #[test]
    fn a_takes_passes_share_refs_asked_after_the_take() {
        let at = std::time::Instant::now();
        let hour = Duration::from_secs(3600);
        let take = freshness(Cause::Triggered(Trigger::Take { at }), hour);
        assert_eq!(take, Freshness::AskedAfter(at));
        let (before, after) = (at.checked_sub(Duration::from_millis(1)).unwrap(), at + Duration::from_millis(1));
        for started in [at, at + Duration::from_secs(30)] {
            assert!(take.since(started).answers(after), "an advertisement asked after the take");
            assert!(!take.since(started).answers(before), "one asked before the take");
        }
        assert!(!Freshness::Now.since(at + Duration::from_secs(30)).answers(after), "a request asks again");
    }
}
