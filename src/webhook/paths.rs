//! Changed-path filter: may a push skip an application because it touched none of its
//! files?
//!
//! Only a *complete* file list can say "nothing changed here"; anything less runs the
//! pass ("when in doubt, run"). Senders cut their commit lists differently
//! (`shared/reference/webhooks.md` §2.5: Gitea lists at most `FEED_MAX_COMMIT_NUM`,
//! default 5, and sends `total_commits`; GitLab lists 20 and sends
//! `total_commits_count`; GitHub lists up to 2048 and sends no total; Bitbucket sends no
//! file lists at all), and a commit list only describes the commits that are new on the
//! ref, which is the change from `before` to `after` only for a fast-forward. So the list
//! is trusted only when all of these hold:
//!
//! * the push updated an existing ref (not created, not deleted) and is not reported as
//!   forced (GitHub and Bitbucket Cloud report it; the Gitea family does not, see below);
//! * at least one commit is listed, every listed commit carries `added`, `removed` and
//!   `modified` arrays, and the sender did not flag the list as truncated;
//! * GitHub: fewer than its 2048-commit cap (already in `commits_truncated`); Gitea,
//!   Forgejo, Gogs and GitLab: the sender's total is present and equals the listed
//!   count; Bitbucket Cloud / Server: never (no file lists).
//!
//! What stays uncovered: a Gitea-family force push that drops commits which touched the
//! application (the sender does not say it was forced) is skipped when the new commits
//! do not touch it; the reconcile interval's poll then picks the change up, as it does
//! for any lost delivery.

use serde::Serialize;

use super::payload::Push;
use super::provider::Provider;

/// The filter's answer for one application and one push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathVerdict {
    /// A listed file lies under the application's path (or the path is the repository
    /// root): run the pass.
    Touched,
    /// The file lists are complete and no file lies under the path: the pass may be
    /// skipped.
    Untouched,
    /// The file lists may be incomplete (see the module docs): run the pass.
    Unknown,
}

impl PathVerdict {
    /// Whether the pass must run: everything but [`PathVerdict::Untouched`].
    pub fn must_run(self) -> bool {
        self != PathVerdict::Untouched
    }
}

/// Whether the push's listed files are the whole change from `before` to `after`.
pub fn file_lists_complete(provider: Provider, push: &Push) -> bool {
    let sender_total_agrees = match provider {
        Provider::GitHub => true,
        Provider::Gitea | Provider::Forgejo | Provider::Gogs | Provider::GitLab => {
            push.commits_total == Some(push.commits_listed)
        }
        Provider::BitbucketCloud | Provider::BitbucketServer => false,
    };
    sender_total_agrees
        && !push.commits_truncated
        && push.commits_listed > 0
        && push.file_lists
        && !push.created
        && !push.is_deletion()
        && push.forced != Some(true)
}

/// Does `push` touch the application directory `app_path` (repository-relative, as in
/// the policy's `path`; `""`, `.` or `/` is the root)?
///
/// A file touches the path when it is the path itself or lies below it
/// (`apps/web` covers `apps/web/deploy.yaml`, not `apps/web2/x`). Leading `./` or `/` and
/// trailing `/` of `app_path` are ignored.
pub fn path_verdict(provider: Provider, push: &Push, app_path: &str) -> PathVerdict {
    let dir = normalize_dir(app_path);
    if dir.is_empty() {
        return PathVerdict::Touched;
    }
    if !file_lists_complete(provider, push) {
        return PathVerdict::Unknown;
    }
    let under = |file: &String| {
        let file = file.trim_start_matches('/');
        file.strip_prefix(dir).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    if push.changed_paths.iter().any(under) { PathVerdict::Touched } else { PathVerdict::Untouched }
}

fn normalize_dir(path: &str) -> &str {
    let mut p = path.trim();
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    let p = p.trim_matches('/');
    if p == "." { "" } else { p }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::{RefKind, RepoKey};
    use super::*;

    fn push(paths: &[&str]) -> Push {
        let key = RepoKey::from_url("https://gitea.example.invalid/acme/fleet.git").unwrap();
        Push {
            repo_urls: vec![],
            repo_key: key.clone(),
            repo_keys: vec![key],
            r#ref: "refs/heads/main".into(),
            ref_kind: RefKind::Branch,
            ref_name: "main".into(),
            before: "1".repeat(40),
            after: "2".repeat(40),
            target_commit: Some("2".repeat(40)),
            created: false,
            deleted: false,
            forced: None,
            commits_listed: 2,
            commits_total: Some(2),
            commits_truncated: false,
            file_lists: true,
            changed_paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    #[test]
    fn prefix_is_a_directory_boundary() {
        let p = push(&["apps/web/deploy.yaml", "apps/web2/x.yaml", "README.md"]);
        let g = Provider::Gitea;
        assert_eq!(path_verdict(g, &p, "apps/web"), PathVerdict::Touched);
        assert_eq!(path_verdict(g, &p, "./apps/web/"), PathVerdict::Touched);
        assert_eq!(path_verdict(g, &p, "/apps/web"), PathVerdict::Touched);
        assert_eq!(path_verdict(g, &p, "apps/we"), PathVerdict::Untouched);
        assert_eq!(path_verdict(g, &p, "apps/api"), PathVerdict::Untouched);
        assert_eq!(path_verdict(g, &p, "README.md"), PathVerdict::Touched, "a file path covers itself");
        for root in ["", ".", "/", "./"] {
            assert_eq!(path_verdict(g, &push(&[]), root), PathVerdict::Touched, "{root:?}");
        }
    }

    #[test]
    fn doubt_runs_the_pass() {
        let g = Provider::Gitea;
        let base = push(&["docs/readme.md"]);
        assert_eq!(path_verdict(g, &base, "apps/web"), PathVerdict::Untouched);
        let cases: Vec<(&str, Provider, Push)> = vec![
            (
                "gitea list cut at 5",
                g,
                Push { commits_listed: 5, commits_total: Some(12), commits_truncated: true, ..base.clone() },
            ),
            ("gitea without total", g, Push { commits_total: None, ..base.clone() }),
            ("gitlab without total", Provider::GitLab, Push { commits_total: None, ..base.clone() }),
            ("no commits listed", g, Push { commits_listed: 0, commits_total: Some(0), ..base.clone() }),
            ("commit without file lists", g, Push { file_lists: false, ..base.clone() }),
            ("branch created", g, Push { created: true, ..base.clone() }),
            ("forced", Provider::GitHub, Push { forced: Some(true), commits_total: None, ..base.clone() }),
            ("github at its cap", Provider::GitHub, Push { commits_truncated: true, ..base.clone() }),
            ("bitbucket", Provider::BitbucketCloud, base.clone()),
            ("deleted", g, Push { after: "0".repeat(40), ..base.clone() }),
        ];
        for (what, provider, p) in cases {
            assert_eq!(path_verdict(provider, &p, "apps/web"), PathVerdict::Unknown, "{what}");
            assert!(path_verdict(provider, &p, "apps/web").must_run(), "{what}");
        }
        let github = Push { commits_total: None, forced: Some(false), ..base };
        assert_eq!(path_verdict(Provider::GitHub, &github, "apps/web"), PathVerdict::Untouched);
    }
}
