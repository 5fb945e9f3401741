//! Stalls: an object that stays Progressing too long earns the application a warning
//! naming it — `health stalled: Ingress web/portal, Service web/portal-lb` — while its
//! health stays Progressing (it may still get there; nobody should wait silently).
//!
//! The caller keeps a [`ProgressingSince`] map across passes with
//! [`track_progressing`] and asks [`stalled`] each pass. Threshold:
//! [`super::HealthSettings::stall_after`] (default 10 min, policy `health.stallAfter`).
//! Classic cases: an Ingress or a LoadBalancer Service without an address (argocd-14).

use std::{collections::BTreeMap, time::Duration};

use jiff::{SignedDuration, Timestamp};

use super::HealthStatus;
use crate::tracking::ObjectKey;

/// When each object became Progressing (kept across passes by the caller).
pub type ProgressingSince = BTreeMap<ObjectKey, Timestamp>;

/// The map for this pass: objects still Progressing keep their time from `previous`,
/// newly Progressing ones get `now`, all others are dropped.
pub fn track_progressing<'a>(
    previous: &ProgressingSince,
    current: impl IntoIterator<Item = (&'a ObjectKey, HealthStatus)>,
    now: Timestamp,
) -> ProgressingSince {
    current
        .into_iter()
        .filter(|(_, h)| *h == HealthStatus::Progressing)
        .map(|(k, _)| (k.clone(), previous.get(k).copied().unwrap_or(now)))
        .collect()
}

/// A stall warning for an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// The stalled objects, sorted by [`label`].
    pub objects: Vec<ObjectKey>,
    /// `health stalled: Ingress web/portal, Service web/portal-lb`.
    pub message: String,
}

/// `Ingress web/portal`; `ClusterRole admin` when cluster-scoped.
pub fn label(key: &ObjectKey) -> String {
    if key.namespace.is_empty() {
        format!("{} {}", key.kind, key.name)
    } else {
        format!("{} {}/{}", key.kind, key.namespace, key.name)
    }
}

/// The objects Progressing for `after` or longer at `now`, or `None`.
pub fn stalled(since: &ProgressingSince, now: Timestamp, after: Duration) -> Option<Stall> {
    let after = SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX);
    let mut objects: Vec<(String, &ObjectKey)> =
        since.iter().filter(|(_, t)| now.duration_since(**t) >= after).map(|(k, _)| (label(k), k)).collect();
    if objects.is_empty() {
        return None;
    }
    objects.sort();
    let message = format!("health stalled: {}", objects.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>().join(", "));
    Some(Stall { objects: objects.into_iter().map(|(_, k)| k.clone()).collect(), message })
}

#[cfg(test)]
mod tests {
    use super::{super::HealthStatus::*, super::test_support::now, *};

    fn key(group: &str, kind: &str, name: &str) -> ObjectKey {
        ObjectKey { group: group.into(), kind: kind.into(), namespace: "web".into(), name: name.into() }
    }

    #[test]
    fn progressing_too_long_is_named_and_recovery_clears_it() {
        let (ing, svc, dep) = (
            key("networking.k8s.io", "Ingress", "portal"),
            key("", "Service", "portal-lb"),
            key("apps", "Deployment", "portal"),
        );
        let ten = Duration::from_secs(600);
        let t0 = now();
        let at = |mins: i64| t0 + SignedDuration::from_mins(mins);

        let s = track_progressing(
            &ProgressingSince::new(),
            [(&ing, Progressing), (&svc, Progressing), (&dep, Progressing)],
            t0,
        );
        assert_eq!(stalled(&s, at(9), ten), None, "not yet");
        // the Deployment becomes Healthy at minute 5; the others stay Progressing
        let s = track_progressing(&s, [(&ing, Progressing), (&svc, Progressing), (&dep, Healthy)], at(5));
        assert_eq!(s.get(&ing), Some(&t0), "time kept across passes");
        let warn = stalled(&s, at(10), ten).expect("stalled");
        assert_eq!(warn.message, "health stalled: Ingress web/portal, Service web/portal-lb");
        assert_eq!(warn.objects, [ing.clone(), svc.clone()]);
        // the Service gets an address: only the Ingress is named
        let s = track_progressing(&s, [(&ing, Progressing), (&svc, Healthy)], at(11));
        assert_eq!(stalled(&s, at(11), ten).map(|w| w.message).as_deref(), Some("health stalled: Ingress web/portal"));
        // Degraded is not a stall (it already says what is wrong); a new Progressing restarts the clock
        let s = track_progressing(&s, [(&ing, Degraded)], at(12));
        let s = track_progressing(&s, [(&ing, Progressing)], at(13));
        assert_eq!(stalled(&s, at(22), ten), None);
        assert!(stalled(&s, at(23), ten).is_some());
        // a shorter threshold
        assert!(stalled(&s, at(14), Duration::from_secs(60)).is_some());
        let cluster =
            ObjectKey { namespace: String::new(), ..key("rbac.authorization.k8s.io", "ClusterRole", "admin") };
        assert_eq!(label(&cluster), "ClusterRole admin");
    }
}
