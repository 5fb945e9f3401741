//! An application's sync and health status from its objects' — the one roll-up, used
//! after the comparison and again after a sync. Pure.
//!
//! - **Sync**: [`roll_up_sync`](super::roll_up_sync) of every object except the
//!   extraneous ones (owned objects Git no longer declares that carry
//!   `IgnoreExtraneous`, or that another application now declares, and declared
//!   objects another application owns: they are listed but never make the application
//!   OutOfSync); Unknown when any comparison failed.
//! - **Health**: [`health::roll_up`](crate::health::roll_up) of the desired objects
//!   only: objects waiting to be pruned are not part of what runs, and objects with
//!   `IgnoreHealthCheck` are shown but left out (Argo CD's `setApplicationHealth`).

use std::collections::HashSet;

use super::{ResourceStatus, SyncStatus};
use crate::health::HealthStatus;

/// Which objects (by [`ResourceStatus::object`]) each half of the roll-up leaves out.
#[derive(Debug, Clone, Default)]
pub struct Exclusions {
    /// Owned objects Git no longer declares (prune candidates): not in health.
    pub prune_candidates: HashSet<String>,
    /// Objects that do not make the application OutOfSync: prune candidates with
    /// `IgnoreExtraneous` or handed over to another application, and declared objects
    /// another application owns (it synced them first).
    pub extraneous: HashSet<String>,
    /// Objects with `IgnoreHealthCheck`: not in health.
    pub no_health_check: HashSet<String>,
}

/// The application's (sync, health) from `resources`; `compare_failed` (any comparison
/// error this pass) makes sync Unknown.
pub fn roll_up(resources: &[ResourceStatus], x: &Exclusions, compare_failed: bool) -> (SyncStatus, HealthStatus) {
    let sync = if compare_failed {
        SyncStatus::Unknown
    } else {
        super::roll_up_sync(resources.iter().filter(|r| !x.extraneous.contains(&r.object)).map(|r| r.sync))
    };
    let health = crate::health::roll_up(
        resources
            .iter()
            .filter(|r| !x.prune_candidates.contains(&r.object) && !x.no_health_check.contains(&r.object))
            .map(|r| &r.health),
    );
    (sync, health)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(object: &str, sync: SyncStatus, health: HealthStatus) -> ResourceStatus {
        ResourceStatus { object: object.into(), sync, reason: String::new(), health, health_message: String::new() }
    }

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|n| (*n).to_string()).collect()
    }

    use HealthStatus::{Degraded, Healthy, Missing, Progressing};
    use SyncStatus::{OutOfSync, Synced};

    #[test]
    fn one_roll_up_for_every_case() {
        // (resources, prune candidates, extraneous, no health check, compare failed) → (sync, health)
        type Case<'a> = (
            &'a [(&'a str, SyncStatus, HealthStatus)],
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
            bool,
            (SyncStatus, HealthStatus),
        );
        let cases: &[Case<'_>] = &[
            (&[], &[], &[], &[], false, (Synced, Healthy)),
            (&[("a", Synced, Healthy), ("b", Synced, Progressing)], &[], &[], &[], false, (Synced, Progressing)),
            // a prune candidate is OutOfSync but its health is not the application's
            (&[("a", Synced, Healthy), ("old", OutOfSync, Degraded)], &["old"], &[], &[], false, (OutOfSync, Healthy)),
            // IgnoreExtraneous / handed over: listed, yet the application is Synced — before
            // and after a sync alike (the sync's roll-up used to count it: OutOfSync)
            (&[("a", Synced, Healthy), ("old", OutOfSync, Healthy)], &["old"], &["old"], &[], false, (Synced, Healthy)),
            // IgnoreHealthCheck: shown Degraded, application Healthy
            (&[("a", Synced, Healthy), ("job", Synced, Degraded)], &[], &[], &["job"], false, (Synced, Healthy)),
            // one failed comparison: Unknown whatever the objects say
            (&[("a", Synced, Healthy)], &[], &[], &[], true, (SyncStatus::Unknown, Healthy)),
            // Missing only when nothing exists
            (&[("a", OutOfSync, Missing), ("b", Synced, Healthy)], &[], &[], &[], false, (OutOfSync, Healthy)),
            (&[("a", OutOfSync, Missing)], &[], &[], &[], false, (OutOfSync, Missing)),
        ];
        for (resources, prune, extraneous, no_health, failed, want) in cases {
            let rs: Vec<ResourceStatus> = resources.iter().map(|(o, s, h)| res(o, *s, *h)).collect();
            let x = Exclusions {
                prune_candidates: set(prune),
                extraneous: set(extraneous),
                no_health_check: set(no_health),
            };
            assert_eq!(roll_up(&rs, &x, *failed), *want, "{resources:?} {prune:?} {extraneous:?} {no_health:?}");
        }
    }
}
