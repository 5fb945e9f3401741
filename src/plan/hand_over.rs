//! Hand-over: before anything is pruned, objects another application declares (at its
//! own revision) have moved there — they are held for it to adopt, never deleted
//! (Flux's and Argo CD's answer to an object moved between applications in two commits
//! whose order is not known). When another application's desired state cannot be read,
//! nothing can be told, so every candidate is held. Pure: the caller renders the other
//! applications.

use std::collections::HashMap;

use super::PruneCandidate;
use crate::tracking::ObjectKey;

/// What the other applications declare: the objects by key (namespaced objects without
/// a namespace already defaulted to that application's namespace) and the application,
/// plus the applications whose desired state could not be read (`app: error` each).
#[derive(Debug, Clone, Default)]
pub struct Claims {
    /// Object → the first application declaring it.
    pub objects: HashMap<ObjectKey, String>,
    /// Applications that could not be read, `app: error` each.
    pub unreadable: Vec<String>,
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
}

/// Marks `candidates` that moved (or may have moved) as held, with the reason. Returns
/// the objects handed over (`Kind/namespace/name`), which do not make the application
/// OutOfSync.
pub fn hand_over(claims: &Claims, candidates: &mut [PruneCandidate]) -> Vec<String> {
    let mut handed = Vec::new();
    for c in candidates.iter_mut() {
        if !claims.unreadable.is_empty() {
            c.held = Some(format!(
                "prune held back: the desired state of other applications could not be read, so plumb cannot tell whether {} moved there ({})",
                c.key,
                claims.unreadable.join("; ")
            ));
        } else if let Some(other) = claims.claimant(&c.key) {
            handed.push(c.key.to_string());
            c.held =
                Some(format!("moved to application {other}, which declares it: left for it to adopt, not deleted"));
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

        claims.unreadable.push("c: fetch failed".into());
        let mut cands = [candidate(key("ConfigMap", "lab", "gone"))];
        assert!(hand_over(&claims, &mut cands).is_empty(), "nothing is handed over when it cannot be told");
        assert_eq!(
            cands[0].held.as_deref(),
            Some(
                "prune held back: the desired state of other applications could not be read, so plumb cannot tell whether ConfigMap/lab/gone moved there (c: fetch failed)"
            )
        );
    }
}
