//! Dependencies between applications (`dependsOn: [app, …]`): the graph and the
//! readiness of each dependency. Pure: the graph is names, readiness is read from the
//! dependencies' statuses as values.
//!
//! Rules (Flux's `dependsOn` for Kustomizations, without readiness expressions):
//! - an application's automated syncs and selfHeal wait until every dependency is
//!   **ready**: its sync status Synced and its health Healthy, at its current revision
//!   (the revision it last compared is the one it last synced), and its last sync did
//!   not fail, get refused or still run a wave;
//! - a dependency that was never synced (no record and no synced revision) is not ready;
//! - a person's `plumb sync APP` is not held (as with a pause or a rewritten history,
//!   a person overrides automation; the condition still says what was not ready);
//! - the graph has no cycles and names only declared applications (checked when the
//!   policy loads, with the cycle named `a → b → a`).

use std::collections::BTreeMap;

use crate::{
    health::HealthStatus,
    status::{AppStatus, SyncResult, SyncStatus, short},
};

pub use crate::config::graph::{cycle, order};

/// The applications that depend on `app` directly (`dependsOn` names it), by name.
pub fn dependents<'a>(deps: &BTreeMap<&'a str, Vec<&'a str>>, app: &str) -> Vec<&'a str> {
    deps.iter().filter(|(_, ds)| ds.contains(&app)).map(|(n, _)| *n).collect()
}

/// Why dependency `name` is not ready, from its status (`None`: no status yet); `None`
/// when it is ready (rules in the module docs). The message names it and says why:
/// `cert-manager is Progressing at 1a2b3c4`, `cert-manager has never synced`.
pub fn not_ready(name: &str, status: Option<&AppStatus>) -> Option<String> {
    let Some(s) = status else { return Some(format!("{name} has never synced")) };
    let at = short(&s.revision);
    if s.synced_revision.is_empty() && s.last_sync.is_none() {
        return Some(format!("{name} has never synced"));
    }
    if let Some(l) = &s.last_sync {
        let why = match l.result {
            SyncResult::Failed => Some("failed"),
            SyncResult::Refused => Some("was refused"),
            SyncResult::Running => Some("is still running"),
            SyncResult::Succeeded | SyncResult::Superseded => None,
        };
        if let Some(why) = why {
            return Some(format!("{name}'s last sync (of {}) {why}", short(&l.revision)));
        }
    }
    if s.sync != SyncStatus::Synced {
        return Some(format!("{name} is {} at {at}", s.sync));
    }
    if s.synced_revision != s.revision {
        return Some(format!("{name} has not synced its revision {at} yet"));
    }
    if s.health != HealthStatus::Healthy {
        return Some(format!("{name} is {} at {at}", s.health));
    }
    None
}

/// What application `app` waits for: the dependencies (`deps`, with their statuses)
/// that are not ready, each as [`not_ready`] says, joined with `; `; `None` when all
/// are ready or it has none.
pub fn waiting<'a>(deps: impl IntoIterator<Item = (&'a str, Option<&'a AppStatus>)>) -> Option<String> {
    let why: Vec<String> = deps.into_iter().filter_map(|(n, s)| not_ready(n, s)).collect();
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::status::{SyncReason, SyncRecord};

    fn graph<'a>(edges: &[(&'a str, &[&'a str])]) -> BTreeMap<&'a str, Vec<&'a str>> {
        edges.iter().map(|(n, ds)| (*n, ds.to_vec())).collect()
    }

    #[test]
    fn order_puts_dependencies_first_and_names_a_cycle() {
        type Case<'a> = (&'a str, Vec<(&'a str, &'a [&'a str])>, Result<Vec<&'a str>, Vec<&'a str>>);
        let cases: [Case; 6] = [
            ("no edges: by name", vec![("web", &[]), ("api", &[])], Ok(vec!["api", "web"])),
            (
                "a chain",
                vec![("web", &["api"]), ("api", &["cert-manager"]), ("cert-manager", &[])],
                Ok(vec!["cert-manager", "api", "web"]),
            ),
            (
                "a diamond",
                vec![("app", &["db", "cache"]), ("db", &["ns"]), ("cache", &["ns"]), ("ns", &[])],
                Ok(vec!["ns", "cache", "db", "app"]),
            ),
            ("a self-loop", vec![("web", &["web"])], Err(vec!["web", "web"])),
            ("two", vec![("a", &["b"]), ("b", &["a"])], Err(vec!["a", "b", "a"])),
            (
                "three, behind a tail",
                vec![("tail", &["x"]), ("x", &["y"]), ("y", &["z"]), ("z", &["x"])],
                Err(vec!["x", "y", "z", "x"]),
            ),
        ];
        for (name, edges, want) in cases {
            let g = graph(&edges);
            let got = order(&g);
            let want = want.map_err(|c| c.iter().map(|s| (*s).to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{name}");
        }
        let g = graph(&[("web", &["api"]), ("worker", &["api"]), ("api", &[])]);
        assert_eq!(dependents(&g, "api"), ["web", "worker"]);
        assert!(dependents(&g, "web").is_empty());
    }

    fn status(sync: SyncStatus, health: HealthStatus, synced: &str, last: Option<SyncResult>) -> AppStatus {
        AppStatus {
            app: "cert-manager".into(),
            revision: "1a2b3c4d5e".into(),
            synced_revision: synced.into(),
            sync,
            health,
            last_sync: last
                .map(|result| SyncRecord { result, ..SyncRecord::new("1a2b3c4d5e", SyncReason::NewRevision) }),
            ..AppStatus::default()
        }
    }

    /// Each application of a graph, from the statuses of all: what it waits for.
    #[test]
    fn readiness_of_each_dependent_in_a_graph() {
        use HealthStatus::*;
        use SyncStatus::*;
        let at = "1a2b3c4d5e";
        let g = graph(&[
            ("cert-manager", &[]),
            ("ingress", &[]),
            ("api", &["cert-manager"]),
            ("web", &["api", "ingress"]),
            ("docs", &["ingress"]),
        ]);
        let statuses: BTreeMap<&str, AppStatus> = [
            ("cert-manager", status(Synced, Healthy, at, Some(SyncResult::Succeeded))),
            ("api", status(Synced, Progressing, at, Some(SyncResult::Succeeded))),
            ("ingress", status(Synced, Healthy, at, Some(SyncResult::Succeeded))),
        ]
        .into_iter()
        .collect();
        let waits: Vec<(&str, Option<String>)> =
            g.iter().map(|(app, ds)| (*app, waiting(ds.iter().map(|d| (*d, statuses.get(d)))))).collect();
        let want = [
            ("api", None),
            ("cert-manager", None),
            ("docs", None),
            ("ingress", None),
            ("web", Some("api is Progressing at 1a2b3c4".to_string())),
        ];
        assert_eq!(waits, want);
        // api Healthy: web is ready too, and api's dependents are the ones to wake
        assert_eq!(dependents(&g, "api"), ["web"]);
        assert_eq!(dependents(&g, "ingress"), ["docs", "web"]);
    }

    #[test]
    fn readiness_of_a_dependency() {
        use HealthStatus::*;
        use SyncResult::*;
        use SyncStatus::*;
        let at = "1a2b3c4d5e";
        let cases = [
            ("no status yet", None, Some("cert-manager has never synced")),
            ("never synced", Some(status(OutOfSync, Missing, "", None)), Some("cert-manager has never synced")),
            ("ready", Some(status(Synced, Healthy, at, Some(Succeeded))), None),
            ("settled without a sync", Some(status(Synced, Healthy, at, None)), None),
            (
                "progressing",
                Some(status(Synced, Progressing, at, Some(Succeeded))),
                Some("cert-manager is Progressing at 1a2b3c4"),
            ),
            (
                "degraded",
                Some(status(Synced, Degraded, at, Some(Succeeded))),
                Some("cert-manager is Degraded at 1a2b3c4"),
            ),
            (
                "drifted",
                Some(status(OutOfSync, Healthy, at, Some(Succeeded))),
                Some("cert-manager is OutOfSync at 1a2b3c4"),
            ),
            (
                "a new revision not synced yet",
                Some(status(Synced, Healthy, "0ld", Some(Succeeded))),
                Some("cert-manager has not synced its revision 1a2b3c4 yet"),
            ),
            (
                "its last sync failed",
                Some(status(Synced, Healthy, at, Some(Failed))),
                Some("cert-manager's last sync (of 1a2b3c4) failed"),
            ),
            (
                "a wave still waits",
                Some(status(OutOfSync, Progressing, "0ld", Some(Running))),
                Some("cert-manager's last sync (of 1a2b3c4) is still running"),
            ),
        ];
        for (name, st, want) in cases {
            assert_eq!(not_ready("cert-manager", st.as_ref()).as_deref(), want, "{name}");
        }
        let ready = status(Synced, Healthy, at, Some(Succeeded));
        let busy = status(Synced, Progressing, at, Some(Succeeded));
        assert_eq!(waiting([("a", Some(&ready)), ("b", Some(&ready))]), None, "every dependency ready");
        assert_eq!(
            waiting([("a", Some(&ready)), ("b", Some(&busy)), ("c", None)]).as_deref(),
            Some("b is Progressing at 1a2b3c4; c has never synced"),
            "each dependency that is not ready is named"
        );
    }
}
