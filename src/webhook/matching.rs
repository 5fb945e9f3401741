//! Which applications a push concerns: repository equality, then ref matching.

use globset::GlobBuilder;

use super::payload::Push;
use super::refs::{RefKind, is_commit_sha, split_ref};
use super::watched::{Watch, WatchedRepository};

/// Does a watch's `revision` select the pushed ref `kind`/`name`?
///
/// * Full ref (`refs/heads/main`, `refs/tags/v*`): only that kind, name compared after the
///   prefix (argoproj/argo-cd #6785: normalize both sides to full refs).
/// * Bare name or pattern (`main`, `release/*`, `v*`): a branch **or** a tag of that name.
/// * Patterns: glob syntax (`*`, `?`, `[…]`, `{a,b}`) via `globset`; `*` also matches `/`,
///   as in git refspecs and the reference procedure's `fnmatch`, so `release/*` selects
///   `release/1.2/hotfix` too. An exact name always matches itself, even if it contains
///   glob characters.
/// * A commit SHA (40 or 64 hex digits) never matches a push: a pinned commit does not
///   move.
/// * Other `refs/…` revisions, empty revisions and invalid patterns match nothing.
pub fn revision_matches(revision: &str, kind: RefKind, name: &str) -> bool {
    let revision = revision.trim();
    if revision.is_empty() || name.is_empty() || is_commit_sha(revision) {
        return false;
    }
    let pattern = match split_ref(revision) {
        Some((wanted, pattern)) if wanted == kind => pattern,
        Some(_) => return false,
        None if revision.starts_with("refs/") => return false,
        None => revision,
    };
    pattern == name || glob_matches(pattern, name)
}

fn glob_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains(['*', '?', '[', '{']) {
        return false;
    }
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher().is_match(name))
        .unwrap_or(false)
}

/// Watches selected by one push.
///
/// A repository takes part only if its key equals one of the payload's keys **and** its
/// own secret verified this delivery (`verified[i]` for `repos[i]`): a delivery signed with
/// repository A's secret can never trigger repository B. Then every watch of those
/// repositories whose revision matches the pushed ref is selected.
pub(crate) fn matching_watches<'w>(
    repos: &[WatchedRepository],
    verified: &[bool],
    watches: &'w [Watch],
    push: &Push,
) -> impl Iterator<Item = &'w Watch> {
    watches_of(repos, verified, watches, &push.repo_keys, push.ref_kind, push.ref_name.clone())
}

/// Watches of the repositories named by `keys` whose secret verified the delivery, whose
/// revision selects ref `kind`/`name` (a push's ref, a pull request's base branch).
pub(crate) fn watches_of<'w>(
    repos: &[WatchedRepository],
    verified: &[bool],
    watches: &'w [Watch],
    keys: &[super::repo_key::RepoKey],
    kind: RefKind,
    name: String,
) -> impl Iterator<Item = &'w Watch> {
    let repo_keys: Vec<_> = repos
        .iter()
        .zip(verified)
        .filter(|(repo, ok)| **ok && keys.contains(&repo.key))
        .map(|(repo, _)| repo.key.clone())
        .collect();
    watches
        .iter()
        .filter(move |w| repo_keys.contains(&w.repo))
        .filter(move |w| revision_matches(&w.revision, kind, &name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use RefKind::{Branch, Tag};

    #[test]
    fn split_ref_table() {
        assert_eq!(split_ref("refs/heads/main"), Some((Branch, "main")));
        assert_eq!(split_ref("refs/heads/environment/cluster"), Some((Branch, "environment/cluster")));
        assert_eq!(split_ref("refs/tags/v1.4.0"), Some((Tag, "v1.4.0")));
        assert_eq!(split_ref("refs/heads/"), None);
        assert_eq!(split_ref("refs/pull/1/head"), None);
        assert_eq!(split_ref("main"), None);
    }

    #[test]
    fn revision_matching_table() {
        let sha = "02bbd8c995752a69f89ab5f12167a36dd57f5ed0";
        let cases: &[(&str, RefKind, &str, bool)] = &[
            // bare names: branch or tag
            ("main", Branch, "main", true),
            ("main", Tag, "main", true),
            ("main", Branch, "main2", false),
            ("main", Branch, "feature/main", false),
            (" main ", Branch, "main", true),
            // full refs: only that kind
            ("refs/heads/main", Branch, "main", true),
            ("refs/heads/main", Tag, "main", false),
            ("refs/tags/v1", Tag, "v1", true),
            ("refs/tags/v1", Branch, "v1", false),
            // names with slashes
            ("release/1.2", Branch, "release/1.2", true),
            ("refs/heads/release/1.2", Branch, "release/1.2", true),
            // patterns
            ("release/*", Branch, "release/1.2", true),
            ("release/*", Branch, "release/1.2/hotfix", true),
            ("release/*", Branch, "release", false),
            ("release/*", Branch, "prerelease/1", false),
            ("refs/heads/release/*", Branch, "release/2.0", true),
            ("refs/heads/release/*", Tag, "release/2.0", false),
            ("v*", Tag, "v1.4.0", true),
            ("v*", Branch, "very-experimental", true),
            ("refs/tags/v*", Tag, "v1.4.0", true),
            ("refs/tags/v*", Branch, "v1.4.0", false),
            ("refs/tags/v*", Tag, "1.4.0", false),
            ("v1.?", Tag, "v1.4", true),
            ("v[0-9]*", Tag, "v2", true),
            ("v[0-9]*", Tag, "vx", false),
            ("{main,master}", Branch, "master", true),
            // literal names that look like patterns match themselves
            ("feat{x}", Branch, "feat{x}", true),
            ("[", Branch, "[", true),
            ("[", Branch, "x", false),
            // commit SHAs never match a push
            (sha, Branch, sha, false),
            (sha, Tag, "main", false),
            // other refs, empties
            ("refs/pull/1/head", Branch, "refs/pull/1/head", false),
            ("refs/heads/", Branch, "", false),
            ("", Branch, "main", false),
            ("*", Branch, "", false),
            ("*", Branch, "anything/at/all", true),
        ];
        for (revision, kind, name, want) in cases {
            assert_eq!(revision_matches(revision, *kind, name), *want, "{revision:?} vs {kind:?} {name:?}");
        }
    }

    #[test]
    fn commit_shas() {
        assert!(is_commit_sha("02bbd8c995752a69f89ab5f12167a36dd57f5ed0"));
        assert!(is_commit_sha(&"A".repeat(64)));
        assert!(!is_commit_sha("02bbd8c9"));
        assert!(!is_commit_sha(&"g".repeat(40)));
    }
}
