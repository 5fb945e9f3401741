//! What a configured revision names in an advertisement of a remote's refs (the list
//! `git ls-remote` prints), and which applications' revisions moved between two
//! advertisements. Pure: refs in, names out; the id type is the caller's (git2's `Oid`
//! in plumb, strings in tests).
//!
//! A short revision (`main`, `v1.2`) is looked up as `refs/heads/<name>`, then
//! `refs/tags/<name>`; one that names both is ambiguous. A revision starting with
//! `refs/` is looked up as written. An annotated tag names the commit of its peeled
//! entry (`refs/tags/v1^{}`). A commit SHA names no advertised ref: it never moves.

use std::collections::HashMap;

/// What a configured revision names in an advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named<T> {
    /// An advertised ref: its full name and the id of the commit it points at (an
    /// annotated tag peeled).
    Ref(String, T),
    /// A short name that is both a branch and a tag (`refs/heads/x` and `refs/tags/x`).
    Ambiguous,
    /// No advertised ref of that name (a commit SHA, or a branch or tag that does not
    /// exist).
    Unadvertised,
}

/// What `revision` (branch, tag or full ref) names in `refs` (name, id), as the remote
/// advertised them.
pub fn named<T: Copy>(refs: &[(String, T)], revision: &str) -> Named<T> {
    named_by(|n| refs.iter().find(|(a, _)| a == n).map(|(_, o)| *o), revision)
}

/// The full ref names `revision` (branch, tag or full ref) may name, in the order they
/// are looked up: `main` → `refs/heads/main`, `refs/tags/main`; `refs/x` → itself.
pub fn candidates(revision: &str) -> Vec<String> {
    if revision.starts_with("refs/") {
        vec![revision.to_string()]
    } else {
        vec![format!("refs/heads/{revision}"), format!("refs/tags/{revision}")]
    }
}

/// [`named`], looking names up with `find`.
fn named_by<T: Copy>(find: impl Fn(&str) -> Option<T>, revision: &str) -> Named<T> {
    let candidates = candidates(revision);
    if candidates.len() == 2 && candidates.iter().all(|c| find(c).is_some()) {
        return Named::Ambiguous;
    }
    candidates
        .into_iter()
        .find_map(|c| {
            let peeled = find(&format!("{c}^{{}}"));
            find(&c).map(|o| Named::Ref(c, peeled.unwrap_or(o)))
        })
        .unwrap_or(Named::Unadvertised)
}

/// The applications of `apps` (name, configured revision) whose revision names
/// something else in `after` than in `before`: a branch or tag that points at another
/// commit, appeared, disappeared or became ambiguous. A full commit SHA (40 hex) never
/// moves. In the order of `apps`.
pub fn moved<'a, T: Copy + PartialEq>(
    before: &[(String, T)],
    after: &[(String, T)],
    apps: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<&'a str> {
    let (before, after) = (index(before), index(after));
    apps.into_iter()
        .filter(|(_, revision)| !super::is_sha(revision))
        .filter(|(_, revision)| {
            named_by(|n| before.get(n).copied(), revision) != named_by(|n| after.get(n).copied(), revision)
        })
        .map(|(app, _)| app)
        .collect()
}

/// `refs` by name (the first of a name, as [`named`] finds it).
fn index<T: Copy>(refs: &[(String, T)]) -> HashMap<&str, T> {
    let mut m = HashMap::with_capacity(refs.len());
    for (name, id) in refs {
        m.entry(name.as_str()).or_insert(*id);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(list: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        list.iter().map(|(n, o)| ((*n).to_string(), *o)).collect()
    }

    #[test]
    fn a_revision_names_a_branch_a_tag_or_a_full_ref() {
        let r = refs(&[
            ("HEAD", "c1"),
            ("refs/heads/main", "c1"),
            ("refs/heads/both", "c2"),
            ("refs/tags/both", "c3"),
            ("refs/tags/v1", "tag-object"),
            ("refs/tags/v1^{}", "c4"),
            ("refs/tags/light", "c5"),
        ]);
        let cases = [
            ("main", Named::Ref("refs/heads/main".into(), "c1")),
            ("v1", Named::Ref("refs/tags/v1".into(), "c4")),
            ("light", Named::Ref("refs/tags/light".into(), "c5")),
            ("refs/heads/both", Named::Ref("refs/heads/both".into(), "c2")),
            ("refs/tags/both", Named::Ref("refs/tags/both".into(), "c3")),
            ("HEAD", Named::Unadvertised), // looked up as a branch or tag named HEAD
            ("both", Named::Ambiguous),
            ("nope", Named::Unadvertised),
            ("0123456789abcdef0123456789abcdef01234567", Named::Unadvertised),
        ];
        for (revision, want) in cases {
            assert_eq!(named(&r, revision), want, "{revision}");
        }
    }

    #[test]
    fn only_applications_whose_revision_names_another_commit_moved() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let before = refs(&[
            ("refs/heads/main", "c1"),
            ("refs/heads/dev", "d1"),
            ("refs/heads/gone", "g1"),
            ("refs/tags/v1", "t1"),
            ("refs/tags/v1^{}", "c0"),
            ("refs/heads/x", "x1"),
        ]);
        let after = refs(&[
            ("refs/heads/main", "c2"),
            ("refs/heads/dev", "d1"),
            ("refs/heads/new", "n1"),
            ("refs/tags/v1", "t1"),
            ("refs/tags/v1^{}", "c0"),
            ("refs/heads/x", "x1"),
            ("refs/tags/x", "x1"),
        ]);
        let apps = [
            ("web", "main"),
            ("web-2", "main"),
            ("api", "dev"),
            ("old", "gone"),
            ("fresh", "new"),
            ("pinned", sha),
            ("released", "v1"),
            ("full", "refs/heads/main"),
            ("ambiguous", "x"),
            ("missing", "nothing"),
        ];
        assert_eq!(
            moved(&before, &after, apps),
            ["web", "web-2", "old", "fresh", "full", "ambiguous"],
            "moved, appeared, disappeared, became ambiguous; not the unchanged, the SHA, the tag"
        );
        assert!(moved(&after, &after, apps).is_empty(), "the same advertisement: nothing moved");
        assert!(moved(&before, &after, [("pinned", sha)]).is_empty(), "a commit SHA never moves");
    }
}
