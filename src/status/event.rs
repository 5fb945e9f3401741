//! The reasons of the Events plumb publishes (`events.k8s.io/v1` `reason`, a
//! CamelCase word; see the Event API's docs): one list, so that `kubectl get events
//! --field-selector reason=…` and the history's words match. Adding an Event is a
//! variant here (its word and its `action`) and one call where it happens.

use super::SyncResult;

/// Why plumb published an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventReason {
    /// On the application's resource: a sync started (once per sync, not per pass).
    SyncStarted,
    /// On the application's resource: a sync ended, or is running, with this result
    /// (`SyncSucceeded`, `SyncFailed`, `SyncRefused`, `SyncRunning`).
    Sync(SyncResult),
    /// On an object: plumb applied it.
    Synced,
    /// On an object: selfHeal reverted a change made outside Git.
    SelfHealed,
    /// On an object: plumb deleted it and created it again (`Force=true`: Git changed
    /// a field that cannot change).
    Recreated,
    /// On the application's resource: a sync pruned an object.
    Pruned,
    /// On the application's resource: automated sync and selfHeal were paused.
    Paused,
    /// On the application's resource: the pause ended.
    Resumed,
    /// On the application's resource: a rollback pinned a revision.
    Pinned,
    /// On the application's resource: the pin was released.
    PinReleased,
    /// On the application's resource: its health changed.
    HealthChanged,
    /// On the application's resource: its desired state could not be fetched, rendered
    /// or compared (a new `ComparisonError` condition; Warning).
    ComparisonError,
    /// On the application's resource: a hook of a sync failed or timed out (Warning;
    /// [`crate::plan::hooks`]).
    HookFailed,
    /// On the application's resource: it left the policy and the deletion of its
    /// objects started.
    Decommissioning,
    /// On the application's resource: its decommission ended (objects left in place or
    /// deleted) and the resource is deleted.
    Decommissioned,
    /// On the application's resource: its decommission waits for a person (mass guard,
    /// data-loss classes; Warning).
    DecommissionHeld,
}

impl EventReason {
    /// The Event's `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::SyncStarted => "SyncStarted",
            EventReason::Sync(SyncResult::Succeeded) => "SyncSucceeded",
            EventReason::Sync(SyncResult::Failed) => "SyncFailed",
            EventReason::Sync(SyncResult::Refused) => "SyncRefused",
            EventReason::Sync(SyncResult::Running) => "SyncRunning",
            EventReason::Sync(SyncResult::Superseded) => "SyncSuperseded",
            EventReason::Synced => "Synced",
            EventReason::SelfHealed => "SelfHealed",
            EventReason::Recreated => "Recreated",
            EventReason::Pruned => "Pruned",
            EventReason::Paused => "Paused",
            EventReason::Resumed => "Resumed",
            EventReason::Pinned => "Pinned",
            EventReason::PinReleased => "PinReleased",
            EventReason::HealthChanged => "HealthChanged",
            EventReason::ComparisonError => "ComparisonError",
            EventReason::HookFailed => "HookFailed",
            EventReason::Decommissioning => "Decommissioning",
            EventReason::Decommissioned => "Decommissioned",
            EventReason::DecommissionHeld => "DecommissionHeld",
        }
    }

    /// The Event's `action`: what plumb did (`Apply`, `Revert`, `Recreate`, `Prune`, `Sync`,
    /// `Assess`, or `Reconcile` for what a pass noticed on the resource).
    pub fn action(self) -> &'static str {
        match self {
            EventReason::Synced => "Apply",
            EventReason::SelfHealed => "Revert",
            EventReason::Recreated => "Recreate",
            EventReason::Pruned => "Prune",
            EventReason::Sync(_) | EventReason::HookFailed => "Sync",
            EventReason::HealthChanged => "Assess",
            EventReason::ComparisonError => "Compare",
            EventReason::Decommissioning | EventReason::Decommissioned | EventReason::DecommissionHeld => {
                "Decommission"
            }
            EventReason::SyncStarted
            | EventReason::Paused
            | EventReason::Resumed
            | EventReason::Pinned
            | EventReason::PinReleased => "Reconcile",
        }
    }
}

impl std::fmt::Display for EventReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_s_event_reason_ends_with_its_result() {
        for r in [
            SyncResult::Succeeded,
            SyncResult::Failed,
            SyncResult::Refused,
            SyncResult::Running,
            SyncResult::Superseded,
        ] {
            assert_eq!(EventReason::Sync(r).as_str(), format!("Sync{r}"));
            assert_eq!(EventReason::Sync(r).action(), "Sync");
        }
        assert_eq!((EventReason::SelfHealed.as_str(), EventReason::SelfHealed.action()), ("SelfHealed", "Revert"));
        assert_eq!((EventReason::Pinned.as_str(), EventReason::Pinned.action()), ("Pinned", "Reconcile"));
    }
}
