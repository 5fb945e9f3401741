//! Where a repository's commit statuses go, as its policy says: the forge API base URL
//! and the repository's owner and name on it. Derived from `commitStatus` and the clone
//! URL when the policy is validated (so a bad one is reported with its line) and when
//! [`crate::forge::Target`] is built.

use super::{CommitStatusConfig, ForgeProvider};
use crate::webhook::RepoKey;

/// The forge repository a `commitStatus` block points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusDestination {
    /// API base URL, without a trailing slash (`https://api.github.com`,
    /// `http://127.0.0.1:3000/api/v1`).
    pub api_url: String,
    /// Repository owner (user or organization; on GitLab the namespace, which may hold
    /// subgroups: `group/subgroup`).
    pub owner: String,
    /// Repository name, without `.git`.
    pub repo: String,
}

/// Why no [`StatusDestination`] follows from a `commitStatus` block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// The repository URL has no `owner/repo` at the end of its path.
    #[error("repository URL `{}` does not end in <owner>/<repo>", super::repo_url::redact(url))]
    NoOwnerRepo {
        /// The repository URL.
        url: String,
    },
    /// The API URL is not an absolute `http(s)://` URL, or none can be derived (Gitea
    /// with an SSH repository URL and no `apiUrl`).
    #[error("API URL `{}`: {why}", super::repo_url::redact(url))]
    ApiUrl {
        /// The configured or derived URL.
        url: String,
        /// What is wrong.
        why: String,
    },
}

impl CommitStatusConfig {
    /// The destination for this `commitStatus` of the repository cloned from
    /// `repo_url`: owner and repository are the last two path segments of the URL (any
    /// shape [`RepoKey`] accepts: https, ssh, scp-style; on GitLab the owner is every
    /// segment before the last, the project's namespace); the API URL is the configured
    /// one or the provider's default.
    ///
    /// # Errors
    /// [`DestinationError::NoOwnerRepo`], [`DestinationError::ApiUrl`].
    pub fn destination(&self, repo_url: &str) -> Result<StatusDestination, DestinationError> {
        let no_owner = || DestinationError::NoOwnerRepo { url: repo_url.to_string() };
        let key = RepoKey::from_url(repo_url).ok_or_else(no_owner)?;
        let mut segs = key.as_str().split('/').skip(1).collect::<Vec<_>>();
        let (Some(repo), Some(last)) = (segs.pop(), segs.pop()) else {
            return Err(no_owner());
        };
        // a GitLab project lives in a namespace of groups and subgroups
        let owner = match self.provider.value {
            ForgeProvider::GitLab => [segs.as_slice(), &[last]].concat().join("/"),
            ForgeProvider::Gitea | ForgeProvider::GitHub => last.to_string(),
        };
        let api_url = match (&self.api_url, self.provider.value) {
            (Some(u), _) => u.value.trim().trim_end_matches('/').to_string(),
            (None, ForgeProvider::GitHub) => "https://api.github.com".to_string(),
            (None, p @ (ForgeProvider::Gitea | ForgeProvider::GitLab)) => match url::Url::parse(repo_url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {
                    let path = if p == ForgeProvider::GitLab { "/api/v4" } else { "/api/v1" };
                    format!("{}{path}", u.origin().ascii_serialization())
                }
                _ => {
                    return Err(DestinationError::ApiUrl {
                        url: repo_url.to_string(),
                        why: "not an http(s) repository URL: set commitStatus.apiUrl".into(),
                    });
                }
            },
        };
        match url::Url::parse(&api_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
            _ => return Err(DestinationError::ApiUrl { url: api_url, why: "must be an absolute http(s) URL".into() }),
        }
        Ok(StatusDestination { api_url, owner, repo: repo.to_string() })
    }
}
