//! Which replica of `plumb serve --shards N` runs which applications: pure rules, fed
//! with what the replica saw of the Leases (the IO is in [`crate::leader`]).
//!
//! - An application belongs to one shard, by rendezvous hashing of its name
//!   ([`shard_of`]): the shard whose SHA-256 of `name`, a NUL byte and the shard
//!   number is greatest. Adding a shard moves only the applications the new shard wins
//!   (about 1/N of them); adding or removing an application moves no other.
//! - A Lease is expired when the record has not changed for its own
//!   `leaseDurationSeconds`, measured on this replica's monotonic clock from when it
//!   *saw* the record change ([`Seen::expired`]), never by comparing the record's
//!   `renewTime` with the local clock: a replica whose clock is off neither steals a
//!   live Lease nor loses its own (client-go's `leaderelection` judges expiry the same
//!   way, by its observed time).
//! - Each live replica holds between ⌊N / replicas⌋ and ⌈N / replicas⌉ shards
//!   ([`moves`]): it takes free or expired shards up to the ceiling, and when a replica
//!   holds fewer than the floor while none is free, the replica holding the most
//!   releases one per round, so a replica that joins gets its share without two
//!   replicas ever holding one shard.
//! - For its first Lease duration a replica takes at most one shard a round
//!   ([`View::settling`]): replicas started together see each other's membership
//!   before any takes every shard (and then hands most back: each handover is a pass of
//!   every moved application, and the memory the first one grew stays with it).
//! - A holder writes only while its last successful renew was sent less than the renew
//!   deadline ago ([`crate::fence::may_write`]): duration minus the tolerated skew, so it has stopped
//!   before any other replica can see the Lease expire.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use crate::clock::Instant;

use sha2::{Digest as _, Sha256};

/// The shard (0-based, below `shards`) that application `app` belongs to among
/// `shards` shards (`0` counts as 1). Stable across processes, versions and
/// platforms: rendezvous hashing over SHA-256.
pub fn shard_of(app: &str, shards: u32) -> u32 {
    (0..shards.max(1)).max_by_key(|s| (score(app, *s), std::cmp::Reverse(*s))).unwrap_or(0)
}

/// The rendezvous score of `key` for `shard`: the first 8 bytes of
/// SHA-256(`key` ‖ 0x00 ‖ `shard` as 4 big-endian bytes).
fn score(key: &str, shard: u32) -> u64 {
    let mut h = Sha256::new();
    h.update(key.as_bytes());
    h.update([0]);
    h.update(shard.to_be_bytes());
    let d = h.finalize();
    u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// A Lease as this replica last read it, and when (on this replica's monotonic clock)
/// it saw the record change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `spec.holderIdentity`; `None` (or empty in the record) when released.
    pub holder: Option<String>,
    /// The record's `metadata.resourceVersion`: any write changes it.
    pub version: String,
    /// `spec.leaseDurationSeconds` of the record (the holder's, not this replica's).
    pub duration: Duration,
    /// When this replica first read the record at `version`.
    pub changed_at: Instant,
}

impl Seen {
    /// What this replica knows after reading the record again at `now`: `changed_at`
    /// moves only when the record changed (a new `version`).
    #[must_use]
    pub fn read_again(self, holder: Option<String>, version: String, duration: Duration, now: Instant) -> Self {
        if version == self.version {
            Self { holder, duration, ..self }
        } else {
            Self { holder, version, duration, changed_at: now }
        }
    }

    /// True when the record has not changed for its own duration by `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.changed_at) >= self.duration
    }

    /// The holder while the Lease is live at `now`; `None` when released or expired.
    pub fn live_holder(&self, now: Instant) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty() && !self.expired(now))
    }
}

/// How long a replica waits before it reads the Leases again: `round`, or less when a
/// Lease another replica holds (`seen`, as this replica last read them) would expire
/// before then, so that the replica sees it expire when it does rather than up to a
/// round later; at least [`MIN_LOOK`]. A holder that renews changes its record every
/// round, so this wakes early only for a Lease that stopped changing.
pub fn next_look<'a>(seen: impl IntoIterator<Item = &'a Seen>, me: &str, now: Instant, round: Duration) -> Duration {
    let expiring = seen.into_iter().filter(|s| s.live_holder(now).is_some_and(|h| h != me));
    let soonest =
        expiring.map(|s| (s.changed_at + s.duration).saturating_duration_since(now)).fold(round, Duration::min);
    soonest.max(MIN_LOOK)
}

/// The shortest wait between two reads of the Leases ([`next_look`]): 50 ms.
pub const MIN_LOOK: Duration = Duration::from_millis(50);

/// What one replica knows at one time, to decide its [`Moves`].
#[derive(Debug, Clone)]
pub struct View<'a> {
    /// This replica's identity.
    pub me: &'a str,
    /// How many shards there are (`--shards`).
    pub shards: u32,
    /// The live holder of each shard (index = shard), `None` when free or expired.
    pub holders: Vec<Option<String>>,
    /// The replicas whose membership Lease is live, this one included.
    pub members: BTreeSet<String>,
    /// The shards this replica is releasing (not to be taken again this round).
    pub releasing: BTreeSet<u32>,
    /// This replica started less than a Lease duration ago: it takes at most one
    /// shard this round.
    pub settling: bool,
}

/// The shards one replica should take and give up now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Moves {
    /// Free or expired shards to take, most wanted first.
    pub acquire: Vec<u32>,
    /// Held shards to release.
    pub release: Vec<u32>,
}

/// What this replica should do in `view` (see the module's rules): with `n` live
/// replicas (members and holders), hold at most ⌈shards / n⌉; release down to it;
/// when a replica holds fewer than ⌊shards / n⌋ and no shard is free, the replica
/// holding the most (ties: the smallest identity) releases one.
pub fn moves(view: &View) -> Moves {
    let mut live: BTreeSet<&str> = view.members.iter().map(String::as_str).collect();
    live.insert(view.me);
    live.extend(view.holders.iter().flatten().map(String::as_str));
    let n = u32::try_from(live.len()).unwrap_or(u32::MAX).max(1);
    let (floor, ceil) = (view.shards / n, view.shards.div_ceil(n));
    let mut held: BTreeMap<&str, Vec<u32>> = live.iter().map(|r| (*r, vec![])).collect();
    let mut free = vec![];
    for (s, h) in (0..view.shards).zip(&view.holders) {
        match h {
            Some(h) => held.entry(h.as_str()).or_default().push(s),
            None if !view.releasing.contains(&s) => free.push(s),
            None => {}
        }
    }
    let mine = held.get(view.me).cloned().unwrap_or_default();
    let count = |v: &Vec<u32>| u32::try_from(v.len()).unwrap_or(u32::MAX);
    let rank = |s: &u32| std::cmp::Reverse(score(view.me, *s));
    let mut moves = Moves::default();
    if count(&mine) < ceil {
        free.sort_by_key(rank);
        let room = if view.settling { 1 } else { (ceil - count(&mine)) as usize };
        moves.acquire = free.iter().copied().take(room).collect();
    }
    let least_wanted = |n: usize| {
        let mut m = mine.clone();
        m.sort_by_key(|s| score(view.me, *s));
        m.truncate(n);
        m
    };
    if count(&mine) > ceil {
        moves.release = least_wanted((count(&mine) - ceil) as usize);
    } else if free.is_empty() && count(&mine) > floor && held.values().any(|v| count(v) < floor) {
        let richest = held.iter().max_by_key(|(r, v)| (v.len(), std::cmp::Reverse(**r))).map(|(r, _)| *r);
        if richest == Some(view.me) {
            moves.release = least_wanted(1);
        }
    }
    moves
}

/// The renew deadline for a Lease of `duration` tolerating `skew` (both seconds):
/// `duration - skew`, at least one second. Another replica takes a Lease over only
/// `duration` after it saw the last renew land, which is after the renew was sent.
pub fn renew_deadline(duration: Duration, skew: Duration) -> Duration {
    duration.saturating_sub(skew).max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fence::may_write;

    #[test]
    fn a_replica_looks_again_when_another_replicas_lease_expires_not_a_round_later() {
        let now = Instant::now();
        let round = Duration::from_secs(2);
        let lease = |holder: &str, seen_ago: u64| Seen {
            holder: Some(holder.into()),
            version: "1".into(),
            duration: Duration::from_secs(10),
            changed_at: now - Duration::from_millis(seen_ago),
        };
        assert_eq!(next_look([&lease("b", 1_000)], "a", now, round), round, "renewed: a round");
        assert_eq!(next_look([&lease("b", 9_500)], "a", now, round), Duration::from_millis(500), "expires first");
        assert_eq!(next_look([&lease("a", 9_500)], "a", now, round), round, "its own Lease: renewed each round");
        assert_eq!(next_look([&lease("b", 10_500)], "a", now, round), round, "expired already: nothing to wait for");
        assert_eq!(next_look([&lease("b", 9_999)], "a", now, round), MIN_LOOK, "never a busy loop");
        let released = Seen { holder: None, ..lease("b", 9_500) };
        assert_eq!(next_look([&released], "a", now, round), round, "released: free now");
    }

    fn view<'a>(me: &'a str, shards: u32, holders: &[Option<&str>], members: &[&str]) -> View<'a> {
        View {
            me,
            shards,
            holders: holders.iter().map(|h| h.map(String::from)).collect(),
            members: members.iter().map(|m| (*m).to_string()).collect(),
            releasing: BTreeSet::new(),
            settling: false,
        }
    }

    /// Three replicas started together: in its first round each sees only itself
    /// (the others' membership Leases are not written yet); settling, each takes one
    /// shard, and in the next round (all members seen) its share, not every shard.
    #[test]
    fn a_replica_that_just_started_takes_one_shard_a_round() {
        let alone = View { settling: true, ..view("a", 6, &[None; 6], &[]) };
        assert_eq!(moves(&alone).acquire.len(), 1);
        let settled = View { settling: false, ..alone.clone() };
        assert_eq!(moves(&settled).acquire.len(), 6, "alone and settled: every shard");
        let holders = [Some("a"), Some("b"), Some("c"), None, None, None];
        let together = View { settling: true, ..view("a", 6, &holders, &["a", "b", "c"]) };
        assert_eq!(moves(&together).acquire.len(), 1, "up to its share of 2, one a round");
        let settled = View { settling: false, ..together };
        assert_eq!(moves(&settled).acquire.len(), 1, "its share of 2: one more");
    }

    #[test]
    fn an_application_keeps_its_shard_and_a_new_shard_takes_about_one_in_n() {
        let apps: Vec<String> = (0..6000).map(|i| format!("app-{i}")).collect();
        let before: Vec<u32> = apps.iter().map(|a| shard_of(a, 6)).collect();
        let mut per = [0usize; 6];
        for s in &before {
            per[*s as usize] += 1;
        }
        assert!(per.iter().all(|n| (800..1200).contains(n)), "spread over 6 shards: {per:?}");
        let after: Vec<u32> = apps.iter().map(|a| shard_of(a, 7)).collect();
        let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
        assert!(after.iter().zip(&before).all(|(a, b)| a == b || *a == 6), "moves go only to the new shard");
        assert!((600..1100).contains(&moved), "about 1/7 of 6000 move: {moved}");
        assert_eq!(shard_of("web", 1), 0);
        assert_eq!(shard_of("web", 0), 0);
        // fixed values: the hash must not change between versions (shards would move)
        // (SHA-256 of "web\0" and the shard, computed apart from this code: python3 hashlib)
        assert_eq!([shard_of("web", 6), shard_of("api", 6), shard_of("x", 6)], [3, 3, 5]);
    }

    #[test]
    fn expiry_is_measured_from_when_the_change_was_seen_with_the_records_duration() {
        let t0 = Instant::now();
        let ten = Duration::from_secs(10);
        let seen = Seen { holder: Some("a".into()), version: "1".into(), duration: ten, changed_at: t0 };
        // read again unchanged 9 s later: still live; 10 s: expired
        let again = seen.clone().read_again(Some("a".into()), "1".into(), ten, t0 + Duration::from_secs(9));
        assert_eq!(again.live_holder(t0 + Duration::from_secs(9)), Some("a"));
        assert_eq!(again.live_holder(t0 + ten), None);
        // renewed (a new resourceVersion) at 9 s: live until 19 s, whatever renewTime says
        let renewed = seen.clone().read_again(Some("a".into()), "2".into(), ten, t0 + Duration::from_secs(9));
        assert_eq!(renewed.live_holder(t0 + Duration::from_secs(18)), Some("a"));
        // the record's duration counts, not the reader's: a 60 s Lease is live at 30 s
        let long = Seen { duration: Duration::from_secs(60), ..seen.clone() };
        assert_eq!(long.live_holder(t0 + Duration::from_secs(30)), Some("a"));
        let released = seen.read_again(Some(String::new()), "3".into(), ten, t0);
        assert_eq!(released.live_holder(t0), None);
    }

    #[test]
    fn replicas_share_shards_between_floor_and_ceiling() {
        // alone: all six
        let m = moves(&view("a", 6, &[None; 6], &["a"]));
        assert_eq!(m.acquire.len(), 6);
        // three replicas, nothing held: two each, in each one's own order
        for me in ["a", "b", "c"] {
            let m = moves(&view(me, 6, &[None; 6], &["a", "b", "c"]));
            assert_eq!((m.acquire.len(), m.release.len()), (2, 0), "{me}");
        }
        // a holds all six, b joins: a releases down to three
        let all_a = [Some("a"); 6];
        let m = moves(&view("a", 6, &all_a, &["a", "b"]));
        assert_eq!(m.release.len(), 3);
        assert!(moves(&view("b", 6, &all_a, &["a", "b"])).acquire.is_empty(), "nothing free to take");
    }

    #[test]
    fn a_joining_replica_gets_a_shard_from_the_richest_one_at_a_time() {
        // 6 shards over a, b, c (two each); d joins: floor 1, ceil 2
        let holders = [Some("a"), Some("a"), Some("b"), Some("b"), Some("c"), Some("c")];
        let members = ["a", "b", "c", "d"];
        let released: Vec<&str> = ["a", "b", "c", "d"]
            .into_iter()
            .filter(|me| !moves(&view(me, 6, &holders, &members)).release.is_empty())
            .collect();
        assert_eq!(released, ["a"], "one replica releases one shard");
        assert_eq!(moves(&view("a", 6, &holders, &members)).release.len(), 1);
        // once it is free, d takes it (and up to its ceiling, only what is free)
        let holders = [Some("a"), None, Some("b"), Some("b"), Some("c"), Some("c")];
        assert_eq!(moves(&view("d", 6, &holders, &members)).acquire, [1]);
        assert!(moves(&view("a", 6, &holders, &members)).release.is_empty());
        // balanced: nobody moves
        let holders = [Some("a"), Some("d"), Some("b"), Some("b"), Some("c"), Some("c")];
        for me in members {
            assert_eq!(moves(&view(me, 6, &holders, &members)), Moves::default(), "{me}");
        }
    }

    #[test]
    fn a_shard_being_released_is_not_taken_back_by_its_releaser() {
        let mut v = view("a", 2, &[None, Some("b")], &["a", "b"]);
        v.releasing.insert(0);
        assert!(moves(&v).acquire.is_empty());
    }

    #[test]
    fn a_holder_stops_writing_before_any_replica_sees_its_lease_expire() {
        let (duration, skew) = (Duration::from_secs(10), Duration::from_secs(3));
        let deadline = renew_deadline(duration, skew);
        assert_eq!(deadline, Duration::from_secs(7));
        let sent = Instant::now();
        assert!(may_write(sent, sent + Duration::from_secs(6), deadline));
        assert!(!may_write(sent, sent + deadline, deadline));
        // another replica sees the renew land no earlier than it was sent, and takes over
        // `duration` later: the holder stopped `skew` before
        let landed_seen = sent + Duration::from_millis(1);
        let other = Seen { holder: Some("a".into()), version: "9".into(), duration, changed_at: landed_seen };
        assert!(!other.expired(sent + deadline) && !may_write(sent, sent + deadline, deadline));
        assert_eq!(renew_deadline(Duration::from_secs(2), Duration::from_secs(5)), Duration::from_secs(1));
    }
}
