//! Fenced writes: a pass of a sharded `plumb serve` writes only while its replica holds
//! the shard's Lease.
//!
//! The pass runs inside [`within`] with the [`Fence`] of its application's shard, taken
//! when the pass starts (the shard and the generation of this replica's hold). Every
//! write plumb makes for a pass (server-side apply, replace, delete, Events, the
//! Application's status and annotations, commit statuses) calls [`check`] right before
//! it is sent: once the hold ended (lost, released, or not renewed within the renew
//! deadline, [`may_write`]), or was taken again since (a new
//! generation), the write is dropped with [`Closed`]. A write queued before the loss
//! is thus never sent after it. Outside [`within`] (a single replica without
//! election, the command line) nothing is fenced.
//!
//! A fence is carried in a Tokio task-local value: only the task running the pass sees
//! it (a pass spawns no tasks that write).

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use crate::clock::Instant;

/// One replica's holds, by shard: the generation of the hold and the renew it was last
/// kept by. Shared by the election task (which writes it) and the fences (which read it).
#[derive(Debug, Default)]
pub struct Holds {
    holds: RwLock<HashMap<u32, Hold>>,
    /// How long a renew keeps a hold (the renew deadline); `None`: forever (a single
    /// replica without election).
    deadline: Option<Duration>,
}

/// This replica's hold of one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// Counts this replica's acquisitions: a shard lost and taken again has a new one.
    pub generation: u64,
    /// When the last successful renew (or the acquisition) was sent.
    pub renewed_at: Instant,
    /// The Lease's `leaseTransitions` when acquired (shown in the status).
    pub transitions: i32,
}

impl Holds {
    /// Holds that end `deadline` after their last renew.
    pub fn with_deadline(deadline: Duration) -> Self {
        Self { holds: RwLock::default(), deadline: Some(deadline) }
    }

    /// Holds that never end: every shard of `shards` held from now on (no election).
    pub fn forever(shards: u32) -> Self {
        let now = Instant::now();
        let holds = (0..shards.max(1)).map(|s| (s, Hold { generation: 1, renewed_at: now, transitions: 0 })).collect();
        Self { holds: RwLock::new(holds), deadline: None }
    }

    /// Records the hold of `shard` (acquired or renewed).
    pub fn set(&self, shard: u32, hold: Hold) {
        if let Ok(mut h) = self.holds.write() {
            h.insert(shard, hold);
        }
    }

    /// Ends the hold of `shard`: its fences close at once.
    pub fn end(&self, shard: u32) {
        if let Ok(mut h) = self.holds.write() {
            h.remove(&shard);
        }
    }

    /// The hold of `shard` while it lets writes through at `now`.
    pub fn open(&self, shard: u32, now: Instant) -> Option<Hold> {
        let h = *self.holds.read().ok()?.get(&shard)?;
        let fresh = self.deadline.is_none_or(|d| may_write(h.renewed_at, now, d));
        fresh.then_some(h)
    }

    /// The hold of `shard`, open or not (ended ones are gone).
    pub fn get(&self, shard: u32) -> Option<Hold> {
        self.holds.read().ok()?.get(&shard).copied()
    }

    /// The shards held now, open or not, each with the generation of its hold: a shard
    /// lost and taken again between two looks shows as a new generation.
    pub fn generations(&self) -> Vec<(u32, u64)> {
        let mut s: Vec<(u32, u64)> =
            self.holds.read().map(|h| h.iter().map(|(s, h)| (*s, h.generation)).collect()).unwrap_or_default();
        s.sort_unstable();
        s
    }

    /// The shards held now, open or not.
    pub fn shards(&self) -> Vec<u32> {
        self.generations().into_iter().map(|(s, _)| s).collect()
    }
}

/// Whether a holder whose last successful renew was sent at `renewed_at` may still
/// write at `now`: less than `renew_deadline` ago. `renew_deadline` must be shorter
/// than the Lease duration by the tolerated skew (see [`crate::plan::shards::renew_deadline`]).
pub fn may_write(renewed_at: Instant, now: Instant, renew_deadline: Duration) -> bool {
    now.saturating_duration_since(renewed_at) < renew_deadline
}

/// Who may write for one pass: a shard of one replica, at one generation of its hold.
#[derive(Debug, Clone)]
pub struct Fence {
    /// The replica's identity.
    pub replica: Arc<str>,
    /// The shard (0-based).
    pub shard: u32,
    /// How many shards there are.
    pub shards: u32,
    /// The hold the pass started under.
    pub hold: Hold,
    holds: Arc<Holds>,
}

impl Fence {
    /// The fence of `shard` while `holds` holds it open now; `None` otherwise.
    pub fn of(replica: Arc<str>, shard: u32, shards: u32, holds: Arc<Holds>) -> Option<Self> {
        let hold = holds.open(shard, Instant::now())?;
        Some(Self { replica, shard, shards, hold, holds })
    }

    /// Whether writes may go out now: the same hold is still held and was renewed
    /// within the renew deadline.
    pub fn is_open(&self) -> bool {
        self.holds.open(self.shard, Instant::now()).is_some_and(|h| h.generation == self.hold.generation)
    }

    /// Whether the hold this fence was taken under is over (lost, released, or taken
    /// again since): it never opens again. Not ended but not open: a renew late.
    pub fn ended(&self) -> bool {
        self.holds.get(self.shard).is_none_or(|h| h.generation != self.hold.generation)
    }
}

/// A write dropped because the pass's shard is no longer held by this replica.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{what}: dropped, this replica ({replica}) no longer holds shard {shard} (its Lease was lost, released or not renewed in time)"
)]
pub struct Closed {
    /// The write (e.g. `apply ConfigMap/ns/name`).
    pub what: String,
    /// The replica.
    pub replica: String,
    /// The shard.
    pub shard: u32,
}

tokio::task_local! {
    static FENCE: Fence;
}

/// Runs `f` with `fence` checked by every [`check`] inside it (none: unfenced).
pub async fn within<F: Future>(fence: Option<Fence>, f: F) -> F::Output {
    match fence {
        Some(fence) => FENCE.scope(fence, f).await,
        None => f.await,
    }
}

/// Before a write (`what` names it for the error): `Ok` outside [`within`] or while the
/// fence is open.
///
/// # Errors
/// [`Closed`] when the fence in scope closed.
pub fn check(what: impl FnOnce() -> String) -> Result<(), Closed> {
    FENCE
        .try_with(|f| {
            if f.is_open() {
                Ok(())
            } else {
                Err(Closed { what: what(), replica: f.replica.to_string(), shard: f.shard })
            }
        })
        .unwrap_or(Ok(()))
}

/// The fence in scope (the status names the replica and shard that reconciled).
pub fn current() -> Option<Fence> {
    FENCE.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_write_after_the_hold_ended_or_was_taken_again_is_dropped() {
        let holds = Arc::new(Holds::with_deadline(Duration::from_secs(7)));
        let first = Hold { generation: 1, renewed_at: Instant::now(), transitions: 3 };
        holds.set(2, first);
        let fence = Fence::of("r1".into(), 2, 6, holds.clone()).expect("held");
        assert!(Fence::of("r1".into(), 1, 6, holds.clone()).is_none(), "shard 1 is not held");
        let ok = within(Some(fence.clone()), async { check(|| "apply a".into()) }).await;
        assert!(ok.is_ok());
        assert!(check(|| "unfenced".into()).is_ok(), "outside a fence nothing is checked");
        holds.end(2);
        let dropped = within(Some(fence.clone()), async { check(|| "apply b".into()) }).await;
        let e = dropped.expect_err("ended");
        assert_eq!(
            e.to_string(),
            "apply b: dropped, this replica (r1) no longer holds shard 2 (its Lease was lost, released or not renewed in time)"
        );
        // taken again: a pass that started under the first hold still writes nothing
        holds.set(2, Hold { generation: 2, ..first });
        assert!(within(Some(fence), async { check(|| "apply c".into()) }).await.is_err());
    }

    #[test]
    fn a_hold_not_renewed_within_the_deadline_closes() {
        let holds = Holds::with_deadline(Duration::from_secs(7));
        let long_ago = Instant::now().checked_sub(Duration::from_secs(8)).expect("uptime");
        holds.set(0, Hold { generation: 1, renewed_at: long_ago, transitions: 0 });
        assert!(holds.open(0, Instant::now()).is_none());
        assert!(holds.get(0).is_some());
        let forever = Holds::forever(1);
        assert!(forever.open(0, Instant::now() + Duration::from_secs(86_400)).is_some());
    }
}
