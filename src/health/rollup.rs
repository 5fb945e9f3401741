//! An application's health from its objects' health.
//!
//! Source: Argo CD `controller/health.go` (`setApplicationHealth`): the worst status in
//! the order Healthy < Suspended < Progressing < Missing < Degraded < Unknown; objects
//! whose health check is ignored are left out; a Missing object does not make the
//! application Missing while others exist (sync status already says OutOfSync) — only
//! when nothing exists at all.

use serde_json::Value;

use super::{HealthStatus, fields};

/// Per-object compare options annotation (comma list, e.g. `IgnoreHealthCheck`).
pub const COMPARE_OPTIONS_ANNOTATION: &str = "plumb.dev/compare-options";
/// Compare option that leaves an object out of the application's health roll-up.
pub const IGNORE_HEALTH_CHECK: &str = "IgnoreHealthCheck";

/// Whether `obj` (the desired manifest or the live object) carries
/// `plumb.dev/compare-options: IgnoreHealthCheck` (among other comma-separated options):
/// its health is still shown, but [`roll_up`] must not be given it.
pub fn ignores_health_check(obj: &Value) -> bool {
    ignores_health_check_by(fields::annotation(obj, COMPARE_OPTIONS_ANNOTATION))
}

/// [`ignores_health_check`] from the value of the [`COMPARE_OPTIONS_ANNOTATION`]
/// (comma-separated options), when there is one.
pub fn ignores_health_check_by(compare_options: Option<&str>) -> bool {
    compare_options.is_some_and(|v| v.split(',').any(|o| o.trim() == IGNORE_HEALTH_CHECK))
}

/// Application health: the worst of its objects' health (order in the module docs).
/// `Missing` objects are skipped while any other object is given; all Missing →
/// Missing; no objects → Healthy. Leave out objects that [`ignores_health_check`].
pub fn roll_up<'a>(healths: impl IntoIterator<Item = &'a HealthStatus>) -> HealthStatus {
    let mut worst: Option<HealthStatus> = None;
    let mut missing = false;
    for h in healths {
        if *h == HealthStatus::Missing {
            missing = true;
        } else {
            worst = worst.max(Some(*h));
        }
    }
    match (worst, missing) {
        (Some(w), _) => w,
        (None, true) => HealthStatus::Missing,
        (None, false) => HealthStatus::Healthy,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{super::HealthStatus::*, *};

    #[test]
    fn worst_wins_and_missing_only_when_nothing_exists() {
        let cases: &[(&[HealthStatus], HealthStatus)] = &[
            (&[], Healthy),
            (&[Healthy], Healthy),
            (&[Healthy, Suspended], Suspended),
            (&[Suspended, Progressing], Progressing),
            (&[Healthy, Degraded, Progressing], Degraded),
            (&[Degraded, Unknown], Unknown),
            (&[Healthy, Missing], Healthy),
            (&[Progressing, Missing], Progressing),
            (&[Missing, Degraded], Degraded),
            (&[Missing, Missing], Missing),
        ];
        for (input, want) in cases {
            assert_eq!(roll_up(*input), *want, "{input:?}");
        }
        // the order itself
        assert!(Healthy < Suspended && Suspended < Progressing && Progressing < Missing);
        assert!(Missing < Degraded && Degraded < Unknown);
    }

    #[test]
    fn ignore_health_check_annotation() {
        let with = |v: &str| json!({"metadata": {"annotations": {"plumb.dev/compare-options": v}}});
        assert!(ignores_health_check(&with("IgnoreHealthCheck")));
        assert!(ignores_health_check(&with("IgnoreExtraneous, IgnoreHealthCheck")));
        assert!(!ignores_health_check(&with("IgnoreExtraneous")));
        assert!(!ignores_health_check(&with("IgnoreHealthCheck=false")));
        assert!(!ignores_health_check(&json!({"metadata": {}})));
    }
}
