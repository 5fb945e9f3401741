//! How far a sync got: whether the next sync wave may start, whether `PruneLast` objects
//! may go, and the sync's result. Pure: the apply step reports what it did, these rules
//! say what that means.
//!
//! - The next wave (with something to apply) starts only when every object of the
//!   earlier waves is Healthy or Suspended (Argo CD's sync waves); meanwhile the sync is
//!   `Running` and the next pass goes on.
//! - Nothing is pruned unless every apply and every comparison succeeded and no wave
//!   waits; `PruneLast` objects only once every desired object is Healthy.
//! - Result: `Failed` naming every problem, else `Running` naming what it waits for,
//!   else `Succeeded`.

use super::{Plan, Wave, health_ready};
use crate::{health::HealthStatus, status::SyncResult};

/// Why the wave after `wave` may not start yet: the objects of `wave` that are not
/// Healthy (`None` when it may start, or when no later wave has anything to apply).
/// `health[i]` and `names[i]` belong to desired object `i`.
pub fn wave_gate(plan: &Plan, w: usize, health: &[HealthStatus], names: &[String]) -> Option<String> {
    let wave: &Wave = plan.waves.get(w)?;
    let next = plan.waves[w + 1..].iter().find(|n| !n.apply.is_empty())?;
    let not_ready: Vec<String> = wave
        .members
        .iter()
        .filter(|&&m| !health_ready(health[m]))
        .map(|&m| format!("{} {}", names[m], health[m]))
        .collect();
    (!not_ready.is_empty())
        .then(|| format!("wave {} waits until wave {} is Healthy: {}", next.wave, wave.wave, not_ready.join(", ")))
}

/// Why `PruneLast` objects may not be pruned yet: the desired objects that are not
/// Healthy (`None`: prune them now).
pub fn prune_last_gate(plan: &Plan, health: &[HealthStatus], names: &[String]) -> Option<String> {
    let not_ready: Vec<String> = health
        .iter()
        .enumerate()
        .filter(|(_, h)| !health_ready(**h))
        .map(|(m, h)| format!("{} {h}", names[m]))
        .collect();
    (!not_ready.is_empty()).then(|| {
        format!(
            "PruneLast: {} object(s) are pruned once everything is Healthy: {}",
            plan.prune_last.len(),
            not_ready.join(", ")
        )
    })
}

/// The message of prunes held back because the sync was not clean (`None` when nothing
/// was to be pruned).
pub fn held_prunes(plan: &Plan) -> Option<String> {
    let held: Vec<String> = plan.prune.iter().chain(&plan.prune_last).map(|c| c.key.to_string()).collect();
    (!held.is_empty())
        .then(|| format!("{} prune(s) held back because the sync was not clean: {}", held.len(), held.join(", ")))
}

/// A sync's result and message from its problems (apply and prune failures, then the
/// comparison errors) and what it waits for.
pub fn result(problems: &[String], waiting: Option<&str>) -> (SyncResult, String) {
    if !problems.is_empty() {
        (SyncResult::Failed, problems.join("; "))
    } else if let Some(w) = waiting {
        (SyncResult::Running, w.to_string())
    } else {
        (SyncResult::Succeeded, String::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{plan::PruneCandidate, tracking::ObjectKey};
    use HealthStatus::*;

    fn waves(spec: &[(i32, &[usize], &[usize])]) -> Plan {
        let waves =
            spec.iter().map(|(w, apply, members)| Wave { wave: *w, apply: apply.to_vec(), members: members.to_vec() });
        Plan { waves: waves.collect(), ..Plan::default() }
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("o{i}")).collect()
    }

    #[test]
    fn the_next_wave_waits_for_the_earlier_one() {
        // (plan, wave just applied, health of objects 0..3) → waiting message
        let two = waves(&[(-1, &[0], &[0]), (0, &[1, 2], &[1, 2])]);
        let nothing_later = waves(&[(-1, &[0], &[0]), (0, &[], &[1, 2])]);
        let cases: &[(&Plan, usize, [HealthStatus; 3], Option<&str>)] = &[
            (&two, 0, [Healthy, Missing, Missing], None),
            (&two, 0, [Suspended, Missing, Missing], None),
            (&two, 0, [Progressing, Missing, Missing], Some("wave 0 waits until wave -1 is Healthy: o0 Progressing")),
            (&two, 0, [Degraded, Missing, Missing], Some("wave 0 waits until wave -1 is Healthy: o0 Degraded")),
            (&two, 1, [Healthy, Progressing, Progressing], None), // the last wave: nothing waits
            (&nothing_later, 0, [Progressing, Healthy, Healthy], None), // a later wave with nothing to apply
        ];
        for (plan, w, health, want) in cases {
            assert_eq!(wave_gate(plan, *w, health, &names(3)).as_deref(), *want, "{w} {health:?}");
        }
    }

    #[test]
    fn prune_last_waits_until_everything_is_healthy() {
        let mut p = Plan::default();
        let key =
            ObjectKey { group: String::new(), kind: "ConfigMap".into(), namespace: "lab".into(), name: "old".into() };
        p.prune_last.push(PruneCandidate::new(key, "u"));
        assert_eq!(prune_last_gate(&p, &[Healthy, Suspended], &names(2)), None);
        assert_eq!(
            prune_last_gate(&p, &[Healthy, Progressing], &names(2)).as_deref(),
            Some("PruneLast: 1 object(s) are pruned once everything is Healthy: o1 Progressing")
        );
        assert_eq!(held_prunes(&Plan::default()), None);
        assert_eq!(
            held_prunes(&p).as_deref(),
            Some("1 prune(s) held back because the sync was not clean: ConfigMap/lab/old")
        );
    }

    #[test]
    fn a_failure_outweighs_waiting() {
        type Case<'a> = (&'a [&'a str], Option<&'a str>, (SyncResult, &'a str));
        let cases: &[Case<'_>] = &[
            (&[], None, (SyncResult::Succeeded, "")),
            (&[], Some("wave 1 waits"), (SyncResult::Running, "wave 1 waits")),
            (&["a: denied", "b: denied"], Some("wave 1 waits"), (SyncResult::Failed, "a: denied; b: denied")),
        ];
        for (problems, waiting, (want, message)) in cases {
            let problems: Vec<String> = problems.iter().map(|p| (*p).to_string()).collect();
            assert_eq!(result(&problems, *waiting), (*want, (*message).to_string()));
        }
    }
}
