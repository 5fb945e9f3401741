//! Pull request comments: plumb keeps one comment per pull request and edits it in
//! place on each new head, rather than adding a comment per push.
//!
//! Gitea (and Forgejo) and GitHub share the paths (Gitea's API reference
//! `issueGetComments`, `issueCreateComment`, `issueEditComment`; GitHub's REST API "Issue
//! comments": a pull request is an issue for comments):
//!
//! - list: `GET {apiUrl}/repos/{owner}/{repo}/issues/{number}/comments` (GitHub:
//!   `?per_page=100`, the first page);
//! - create: `POST …/issues/{number}/comments` with `{"body": …}` → 201 and the comment's
//!   `id`;
//! - edit: `PATCH {apiUrl}/repos/{owner}/{repo}/issues/comments/{id}` with `{"body": …}`.
//!
//! The comment is found by a marker line its body starts with. A comment another user
//! wrote with the marker cannot be edited with plumb's token (the forge answers 403):
//! plumb then creates its own. The pure part builds requests ([`Target::list_comments`],
//! [`Target::create_comment`], [`Target::edit_comment`]) and reads answers
//! ([`find_marked`]); [`Comments`] does the IO.

use bytes::Bytes;

use super::{Error, HttpClient, POST_TIMEOUT, Target};
use crate::config::{DestinationError, ForgeProvider, read_secret};

/// Most bytes of a comment list read (about 100 long comments).
pub const MAX_LIST_BYTES: usize = 8 * 1024 * 1024;

impl Target {
    /// The request listing the comments of pull request `number`.
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn list_comments(&self, number: u64, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let mut url = self.repo_url(&["issues", &number.to_string(), "comments"])?;
        if self.provider == ForgeProvider::GitHub {
            url.set_query(Some("per_page=100"));
        }
        self.finish(self.authorized(::http::Request::get(url.as_str()), token)?, Bytes::new())
    }

    /// The request adding comment `body` to pull request `number`.
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn create_comment(&self, number: u64, body: &str, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let url = self.repo_url(&["issues", &number.to_string(), "comments"])?;
        let json = serde_json::json!({ "body": body }).to_string();
        self.finish(self.authorized(::http::Request::post(url.as_str()), token)?, Bytes::from(json))
    }

    /// The request replacing comment `id`'s body with `body`.
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn edit_comment(&self, id: u64, body: &str, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let url = self.repo_url(&["issues", "comments", &id.to_string()])?;
        let json = serde_json::json!({ "body": body }).to_string();
        self.finish(self.authorized(::http::Request::patch(url.as_str()), token)?, Bytes::from(json))
    }

    fn finish(&self, b: ::http::request::Builder, body: Bytes) -> Result<::http::Request<Bytes>, Error> {
        b.body(body)
            .map_err(|e| Error::from(DestinationError::ApiUrl { url: self.api_url.clone(), why: e.to_string() }))
    }
}

/// The id of the first comment of a list answer (a JSON array of `{id, body}`) whose
/// body starts with `marker`; `None` when none does or the answer is no such list.
pub fn find_marked(answer: &[u8], marker: &str) -> Option<u64> {
    let list: Vec<serde_json::Value> = serde_json::from_slice(answer).ok()?;
    list.iter().find(|c| c["body"].as_str().is_some_and(|b| b.starts_with(marker)))?["id"].as_u64()
}

/// Posts and edits the comments of one forge repository.
#[derive(Debug)]
pub struct Comments {
    target: Target,
    client: HttpClient,
}

impl Comments {
    /// Comments on `target`'s pull requests.
    ///
    /// # Errors
    /// [`Error::Http`] when the HTTP client cannot be built.
    pub fn new(target: Target) -> Result<Comments, Error> {
        Ok(Comments { target, client: HttpClient::new()? })
    }

    /// Where the comments go.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Makes `body` (which starts with `marker`) the text of plumb's comment on pull
    /// request `number`: edits comment `known` (remembered from before) or the one the
    /// list shows with the marker, else creates one. Returns the comment's id.
    ///
    /// # Errors
    /// [`Error::Token`], [`Error::BadToken`], [`Error::Http`], [`Error::Rejected`].
    pub async fn upsert(&self, number: u64, known: Option<u64>, marker: &str, body: &str) -> Result<u64, Error> {
        let token = self.token()?;
        let id = match known {
            Some(id) => Some(id),
            None => {
                let (_, answer) = self.call(self.target.list_comments(number, &token)?, MAX_LIST_BYTES).await?;
                find_marked(&answer, marker)
            }
        };
        if let Some(id) = id {
            match self.call(self.target.edit_comment(id, body, &token)?, super::http::MAX_RESPONSE_BYTES).await {
                Ok(_) => return Ok(id),
                // deleted meanwhile, or not plumb's to edit: a comment of its own
                Err(Error::Rejected { status: 403 | 404, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let (_, answer) =
            self.call(self.target.create_comment(number, body, &token)?, super::http::MAX_RESPONSE_BYTES).await?;
        let created: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
        Ok(created["id"].as_u64().unwrap_or_default())
    }

    fn token(&self) -> Result<Vec<u8>, Error> {
        let file = &self.target.token_file;
        read_secret(file).map_err(|source| Error::Token { file: file.clone(), source })
    }

    async fn call(&self, req: ::http::Request<Bytes>, max: usize) -> Result<(u16, Bytes), Error> {
        let url = crate::config::repo_url::redact(&req.uri().to_string());
        let (code, _, body) = self.client.exchange(req, POST_TIMEOUT, max).await?;
        if code.is_success() {
            Ok((code.as_u16(), body))
        } else {
            let body = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            Err(Error::Rejected { url, status: code.as_u16(), body })
        }
    }
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
    fn gitea_and_github_requests() {
        let gitea = target(ForgeProvider::Gitea, "http://127.0.0.1:3000/api/v1");
        let r = gitea.list_comments(7, b"tok").unwrap();
        assert_eq!(
            (r.method().as_str(), r.uri().to_string().as_str()),
            ("GET", "http://127.0.0.1:3000/api/v1/repos/acme/config/issues/7/comments")
        );
        assert_eq!(r.headers()["authorization"], "token tok");
        assert!(r.headers()["authorization"].is_sensitive());
        let r = gitea.edit_comment(42, "<!-- m -->\nhi", b"tok").unwrap();
        assert_eq!((r.method().as_str(), r.uri().path()), ("PATCH", "/api/v1/repos/acme/config/issues/comments/42"));
        assert_eq!(r.body().as_ref(), br#"{"body":"<!-- m -->\nhi"}"#);
        let github = target(ForgeProvider::GitHub, "https://api.github.com");
        let r = github.create_comment(7, "x", b"tok").unwrap();
        assert_eq!(
            (r.method().as_str(), r.uri().to_string().as_str()),
            ("POST", "https://api.github.com/repos/acme/config/issues/7/comments")
        );
        assert_eq!(r.headers()["authorization"], "Bearer tok");
        assert_eq!(r.headers()["x-github-api-version"], "2022-11-28");
        assert_eq!(github.list_comments(7, b"tok").unwrap().uri().query(), Some("per_page=100"));
        assert!(matches!(gitea.list_comments(7, b""), Err(Error::BadToken { .. })));
    }

    /// A recorded GitHub answer (fields trimmed): plumb's comment is the one whose body
    /// starts with the marker, not one quoting it.
    #[test]
    fn finds_the_comment_starting_with_the_marker() {
        let answer = br#"[{"id": 1, "body": "see <!-- plumb-preview --> above", "user": {"login": "dev1"}},
            {"id": 2, "body": "<!-- plumb-preview -->\n### plumb preview", "user": {"login": "plumb-bot"}}]"#;
        assert_eq!(find_marked(answer, "<!-- plumb-preview -->"), Some(2));
        assert_eq!(find_marked(b"[]", "<!-- plumb-preview -->"), None);
        assert_eq!(find_marked(b"{\"message\": \"Not Found\"}", "<!-- plumb-preview -->"), None);
    }
}
