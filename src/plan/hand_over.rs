//! Hand-over: before anything is pruned, objects another application declares (at its
//! own revision) have moved there — they are held for it to adopt, never deleted
//! (Flux's and Argo CD's answer to an object moved between applications in two commits
//! whose order is not known). Only applications whose boundaries would let them own a
//! candidate are asked (the caller reads them, each within a bound); when one cannot
//! be read, the candidates it could own (its boundary lets it write them) are held,
//! and only those: one slow or unreachable repository holds no other prune. Pure: the
//! caller gathers the claims.

use std::collections::HashMap;

use super::{Boundary, PruneCandidate};
use crate::tracking::ObjectKey;

/// What the other applications declare: the objects by key (namespaced objects without
/// a namespace already defaulted to that application's namespace) and the application,
/// plus the applications whose declared objects are not known.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    /// Object → the first application declaring it.
    pub objects: HashMap<ObjectKey, String>,
    /// Applications whose desired state could not be read.
    pub unknown: Vec<Unknown>,
}

/// An application whose desired state could not be read: it may own whatever its
/// boundary lets it write.
#[derive(Debug, Clone)]
pub struct Unknown {
    /// The application.
    pub app: String,
    /// Why (the fetch or render error, or the wait that ran out).
    pub why: String,
    /// What it may write ([`Boundary::check`]).
    pub boundary: Boundary,
}

impl Claims {
    /// Adds what application `app` declares.
    pub fn declare(&mut self, app: &str, keys: impl IntoIterator<Item = ObjectKey>) {
        for k in keys {
            self.objects.entry(k).or_insert_with(|| app.to_string());
        }
    }

    /// The application declaring `k`. A cluster-scoped candidate also matches a
    /// manifest given a namespace by the other application's default.
    fn claimant(&self, k: &ObjectKey) -> Option<&str> {
        self.objects.get(k).map(String::as_str).or_else(|| {
            k.namespace.is_empty().then_some(())?;
            self.objects
                .iter()
                .filter(|(c, _)| c.group == k.group && c.kind == k.kind && c.name == k.name)
                .map(|(_, a)| a.as_str())
                .min()
        })
    }

    /// The applications not known whose boundaries let them write `k`, as `app (why)`.
    fn could_own(&self, k: &ObjectKey) -> Vec<String> {
        let namespaced = !k.namespace.is_empty();
        self.unknown
            .iter()
            .filter(|u| u.boundary.check(k, namespaced, &serde_json::Value::Null).is_ok())
            .map(|u| format!("{} ({})", u.app, u.why))
            .collect()
    }
}

/// Marks `candidates` that moved (or may have moved) as held, with the reason. Returns
/// the objects handed over (`Kind/namespace/name`), which do not make the application
/// OutOfSync.
pub fn hand_over(claims: &Claims, candidates: &mut [PruneCandidate]) -> Vec<String> {
    let mut handed = Vec::new();
    for c in candidates.iter_mut() {
        if let Some(other) = claims.claimant(&c.key) {
            handed.push(c.key.to_string());
            c.held =
                Some(format!("moved to application {other}, which declares it: left for it to adopt, not deleted"));
            continue;
        }
        let could = claims.could_own(&c.key);
        if !could.is_empty() {
            c.held = Some(format!(
                "prune held back: the desired state of {} could not be read, so plumb cannot tell whether {} moved there",
                could.join(", "),
                c.key
            ));
        }
    }
    handed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey { group: String::new(), kind: kind.into(), namespace: namespace.into(), name: name.into() }
    }

    fn candidate(k: ObjectKey) -> PruneCandidate {
        PruneCandidate::new(k, "u")
    }

    #[test]
    fn moved_objects_are_held_and_unreadable_applications_hold_everything() {
        let mut claims = Claims::default();
        claims.declare("b", [key("ConfigMap", "lab", "moved"), key("Namespace", "lab", "team")]);
        let mut cands = [
            candidate(key("ConfigMap", "lab", "moved")),
            candidate(key("ConfigMap", "lab", "gone")),
            // cluster-scoped: b's manifest got b's namespace by default
            candidate(key("Namespace", "", "team")),
        ];
        let handed = hand_over(&claims, &mut cands);
        assert_eq!(handed, ["ConfigMap/lab/moved", "Namespace/team"]);
        let held: Vec<Option<&str>> = cands.iter().map(|c| c.held.as_deref()).collect();
        let moved = "moved to application b, which declares it: left for it to adopt, not deleted";
        assert_eq!(held, [Some(moved), None, Some(moved)]);
    }

    #[test]
    fn an_application_not_known_holds_only_what_it_could_own() {
        let only = |ns: &str| crate::config::Boundaries {
            destinations: Some(crate::config::Destinations { namespaces: vec![ns.into()] }),
            ..Default::default()
        };
        let mut claims = Claims::default();
        claims.unknown.push(Unknown {
            app: "c".into(),
            why: "no answer within 10s".into(),
            boundary: Boundary::new(&only("shop"), "shop", "plumb").expect("a valid glob"),
        });
        let mut cands = [
            candidate(key("ConfigMap", "lab", "gone")),
            candidate(key("ConfigMap", "shop", "gone")),
            candidate(key("ClusterRole", "", "reader")),
        ];
        assert!(hand_over(&claims, &mut cands).is_empty(), "nothing is handed over when it cannot be told");
        let held: Vec<Option<&str>> = cands.iter().map(|c| c.held.as_deref()).collect();
        assert_eq!(
            held,
            [
                None,
                Some(
                    "prune held back: the desired state of c (no answer within 10s) could not be read, so plumb cannot tell whether ConfigMap/shop/gone moved there"
                ),
                None,
            ]
        );
    }
}
