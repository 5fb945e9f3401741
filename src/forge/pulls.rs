//! The open pull requests of a repository, for an applicationSet's `pullRequests`
//! generator ([`crate::config::generators`]): asked of the forge with the repository's
//! `commitStatus` token.
//!
//! Gitea (and Forgejo) and GitHub share the path (Gitea's API reference `repoListPullRequests`;
//! GitHub's REST API "List pull requests"): `GET {apiUrl}/repos/{owner}/{repo}/pulls` with
//! `state=open` and a page (`page=N`, 1-based; Gitea `limit=50`, the default most items
//! a Gitea answers per page; GitHub `per_page=100`, its maximum). Both answer a JSON array
//! of pull requests with `number`, `head: {ref, sha, repo: {full_name}}`,
//! `base: {repo: {full_name}}` and `labels: [{name}]`; a head repository other than the
//! base's (or none: a deleted fork) is a fork.
//!
//! GitLab (its REST API "Merge requests", "List project merge requests"):
//! `GET {apiUrl}/projects/{id}/merge_requests?state=opened&per_page=100&page=N`, an array
//! of merge requests with `iid` (the number; `refs/merge-requests/{iid}/head` is its
//! head), `sha`, `source_branch` and `labels` (names); a `source_project_id` other than
//! `target_project_id` is a fork.
//!
//! Pages are read until one is empty (a server whose page is smaller than asked is
//! still read to the end): at most [`MAX_OPEN_PULLS`] pull requests, each page at most
//! [`MAX_PULLS_BYTES`]. Any failure — transport, a status other than 2xx, an answer that
//! is not such an array, more than [`MAX_OPEN_PULLS`] — is an error and lists nothing:
//! the caller keeps the applications it generated before, so that a forge outage never
//! reads as "no pull request is open". The pure part builds the request
//! ([`Target::list_open_pulls`]) and reads an answer ([`parse_pulls`]); [`open_pulls`]
//! does the IO.

use bytes::Bytes;

use super::{Error, HttpClient, Target};
use crate::config::{DestinationError, ForgeProvider, generators::OpenPull, read_secret};

/// The most open pull requests one repository may have for its listing to succeed
/// (100): a repository with more is an error (its previous preview environments stay),
/// so that a listing never silently leaves some out.
pub const MAX_OPEN_PULLS: usize = 100;

/// Most bytes of one page of pull requests read (8 MiB: GitHub's pull request objects
/// are about 20 KiB each, 100 per page).
pub const MAX_PULLS_BYTES: usize = 8 * 1024 * 1024;

/// Why the pull requests of a repository could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum PullsError {
    /// The request could not be built or sent, or the forge refused it.
    #[error(transparent)]
    Forge(#[from] Error),
    /// The answer is not a JSON array of pull requests.
    #[error("{url}: the answer is not a list of pull requests: {why}")]
    BadAnswer {
        /// The request URL.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// More open pull requests than [`MAX_OPEN_PULLS`].
    #[error("more than {limit} open pull requests: none listed")]
    TooMany {
        /// The limit.
        limit: usize,
    },
}

impl Target {
    /// The request listing page `page` (1-based) of the open pull requests.
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn list_open_pulls(&self, page: u32, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let mut url =
            self.repo_url(&[if self.provider == ForgeProvider::GitLab { "merge_requests" } else { "pulls" }])?;
        url.set_query(Some(&match self.provider {
            ForgeProvider::Gitea => format!("state=open&limit=50&page={page}"),
            ForgeProvider::GitHub => format!("state=open&per_page=100&page={page}"),
            ForgeProvider::GitLab => format!("state=opened&per_page=100&page={page}"),
        }));
        self.authorized(::http::Request::get(url.as_str()), token)?
            .body(Bytes::new())
            .map_err(|e| Error::from(DestinationError::ApiUrl { url: self.api_url.clone(), why: e.to_string() }))
    }
}

/// The pull requests of one page of `provider`'s list answer (see the module docs).
///
/// # Errors
/// A message when the answer is not a JSON array, or an item lacks its number, head
/// branch or head SHA (`number`, `head.ref`, `head.sha`; GitLab `iid`, `source_branch`,
/// `sha`): the whole answer is refused, never read in part.
pub fn parse_pulls(provider: ForgeProvider, answer: &[u8]) -> Result<Vec<OpenPull>, String> {
    let list: Vec<serde_json::Value> = serde_json::from_slice(answer).map_err(|e| e.to_string())?;
    let gitlab = provider == ForgeProvider::GitLab;
    let (number, branch, sha) =
        if gitlab { ("/iid", "/source_branch", "/sha") } else { ("/number", "/head/ref", "/head/sha") };
    list.iter()
        .enumerate()
        .map(|(i, p)| {
            let missing = |field: &str| format!("item {i} has no {}", field[1..].replace('/', "."));
            let number = p.pointer(number).and_then(|v| v.as_u64()).ok_or_else(|| missing(number))?;
            let branch = p.pointer(branch).and_then(|v| v.as_str()).ok_or_else(|| missing(branch))?.to_string();
            let head_sha = p.pointer(sha).and_then(|v| v.as_str()).ok_or_else(|| missing(sha))?.to_string();
            if head_sha.len() != 40 || !head_sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("item {i}: {} is not a commit SHA", &sha[1..].replace('/', ".")));
            }
            // GitHub and Gitea: `[{name}]`; GitLab: `["name"]`
            let labels = p["labels"]
                .as_array()
                .map(|ls| ls.iter().filter_map(|l| l["name"].as_str().or(l.as_str()).map(str::to_string)).collect())
                .unwrap_or_default();
            let fork = if gitlab {
                p["source_project_id"].as_u64().is_none() || p["source_project_id"] != p["target_project_id"]
            } else {
                let head_repo = p["head"]["repo"]["full_name"].as_str();
                head_repo.is_none() || head_repo != p["base"]["repo"]["full_name"].as_str()
            };
            Ok(OpenPull { number, branch, head_sha, labels, fork })
        })
        .collect()
}

/// The open pull requests of `target`'s repository (every page; see the module docs),
/// with the token of `target.token_file` read now.
///
/// # Errors
/// [`PullsError`]: the token, transport, a refusing status, a bad answer, too many.
pub async fn open_pulls(target: &Target, client: &HttpClient) -> Result<Vec<OpenPull>, PullsError> {
    let file = &target.token_file;
    let token = read_secret(file).map_err(|source| Error::Token { file: file.clone(), source })?;
    let mut out: Vec<OpenPull> = Vec::new();
    // one page more than the limit needs at the smallest page (1 item): bounded either way
    for page in 1..=u32::try_from(MAX_OPEN_PULLS).unwrap_or(u32::MAX) + 1 {
        let req = target.list_open_pulls(page, &token)?;
        let url = crate::config::repo_url::redact(&req.uri().to_string());
        let body = super::send(client, req, MAX_PULLS_BYTES).await?;
        let pulls = parse_pulls(target.provider, &body).map_err(|why| PullsError::BadAnswer { url, why })?;
        if pulls.is_empty() {
            return Ok(out);
        }
        out.extend(pulls);
        if out.len() > MAX_OPEN_PULLS {
            return Err(PullsError::TooMany { limit: MAX_OPEN_PULLS });
        }
    }
    Err(PullsError::TooMany { limit: MAX_OPEN_PULLS })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn target(provider: ForgeProvider, api: &str) -> Target {
        Target {
            provider,
            api_url: api.into(),
            owner: "acme".into(),
            repo: "config".into(),
            target_url: None,
            token_file: "/t".into(),
        }
    }

    #[test]
    fn gitea_and_github_list_requests() {
        let r = target(ForgeProvider::Gitea, "http://127.0.0.1:3000/api/v1").list_open_pulls(2, b"tok").unwrap();
        assert_eq!(
            (r.method().as_str(), r.uri().to_string().as_str()),
            ("GET", "http://127.0.0.1:3000/api/v1/repos/acme/config/pulls?state=open&limit=50&page=2")
        );
        assert_eq!(r.headers()["authorization"], "token tok");
        assert!(r.headers()["authorization"].is_sensitive());
        let r = target(ForgeProvider::GitHub, "https://api.github.com").list_open_pulls(1, b"tok").unwrap();
        assert_eq!(
            r.uri().to_string(),
            "https://api.github.com/repos/acme/config/pulls?state=open&per_page=100&page=1"
        );
        assert_eq!(r.headers()["authorization"], "Bearer tok");
        assert!(target(ForgeProvider::Gitea, "http://x/api/v1").list_open_pulls(1, b"").is_err());
    }

    /// A recorded answer's shape (fields trimmed): one pull request from the repository,
    /// one from a fork, one from a deleted fork.
    #[test]
    fn reads_number_branch_sha_labels_and_fork() {
        let sha = "a".repeat(40);
        let answer = format!(
            r#"[{{"number": 7, "head": {{"ref": "feature/Login", "sha": "{sha}", "repo": {{"full_name": "acme/config"}}}},
                 "base": {{"ref": "main", "repo": {{"full_name": "acme/config"}}}}, "labels": [{{"name": "preview"}}]}},
                {{"number": 8, "head": {{"ref": "x", "sha": "{sha}", "repo": {{"full_name": "eve/config"}}}},
                 "base": {{"repo": {{"full_name": "acme/config"}}}}, "labels": []}},
                {{"number": 9, "head": {{"ref": "y", "sha": "{sha}", "repo": null}},
                 "base": {{"repo": {{"full_name": "acme/config"}}}}}}]"#
        );
        let pulls = parse_pulls(ForgeProvider::GitHub, answer.as_bytes()).unwrap();
        assert_eq!(
            pulls[0],
            OpenPull {
                number: 7,
                branch: "feature/Login".into(),
                head_sha: sha.clone(),
                labels: vec!["preview".into()],
                fork: false
            }
        );
        assert!(pulls[1].fork && pulls[2].fork);
        assert_eq!(parse_pulls(ForgeProvider::Gitea, b"[]").unwrap(), []);
    }

    /// An error body or a broken item lists nothing (the caller keeps what it had).
    #[test]
    fn refuses_what_is_not_a_list_of_pull_requests() {
        assert!(parse_pulls(ForgeProvider::GitHub, br#"{"message": "Not Found"}"#).is_err());
        assert!(parse_pulls(ForgeProvider::GitHub, b"<html>502</html>").is_err());
        assert!(parse_pulls(ForgeProvider::GitHub, br#"[{"number": 1, "head": {"ref": "a"}}]"#).is_err());
        assert!(
            parse_pulls(ForgeProvider::GitHub, br#"[{"number": 1, "head": {"ref": "a", "sha": "../x"}}]"#).is_err()
        );
        let e = parse_pulls(ForgeProvider::GitLab, br#"[{"iid": 1, "sha": "abc"}]"#).unwrap_err();
        assert_eq!(e, "item 0 has no source_branch");
    }

    /// GitLab's list (a recorded answer's shape, fields trimmed): `iid`, `sha`,
    /// `source_branch`, labels as names; a merge request from another project is a fork.
    #[test]
    fn gitlab_merge_requests() {
        let mut t = target(ForgeProvider::GitLab, "https://gitlab.com/api/v4");
        t.owner = "acme/platform".into();
        let r = t.list_open_pulls(1, b"glpat").unwrap();
        assert_eq!(
            r.uri().to_string(),
            "https://gitlab.com/api/v4/projects/acme%2Fplatform%2Fconfig/merge_requests?state=opened&per_page=100&page=1"
        );
        assert_eq!(r.headers()["private-token"], "glpat");
        let sha = "b".repeat(40);
        let answer = format!(
            r#"[{{"id": 91, "iid": 4, "sha": "{sha}", "source_branch": "feature/x", "target_branch": "main",
                 "source_project_id": 12, "target_project_id": 12, "labels": ["preview", "backend"]}},
                {{"id": 92, "iid": 5, "sha": "{sha}", "source_branch": "main", "target_branch": "main",
                 "source_project_id": 77, "target_project_id": 12, "labels": []}}]"#
        );
        let pulls = parse_pulls(ForgeProvider::GitLab, answer.as_bytes()).unwrap();
        assert_eq!(
            pulls[0],
            OpenPull {
                number: 4,
                branch: "feature/x".into(),
                head_sha: sha,
                labels: vec!["preview".into(), "backend".into()],
                fork: false
            }
        );
        assert!(pulls[1].fork);
    }
}
