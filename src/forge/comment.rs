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
//! GitLab keeps a merge request's comments as notes (GitLab's REST API "Notes", "Merge
//! request notes"):
//!
//! - list: `GET {apiUrl}/projects/{id}/merge_requests/{iid}/notes?per_page=100&sort=asc`;
//! - create: `POST …/merge_requests/{iid}/notes` with `{"body": …}` → 201 and its `id`;
//! - edit: `PUT …/merge_requests/{iid}/notes/{note_id}` with `{"body": …}`.
//!
//! The comment is plumb's when its body starts with a marker line **and** its author is
//! the token's own user (`GET {apiUrl}/user`: `login` on Gitea and GitHub, `username` on
//! GitLab; a comment's author is `user.login`, a note's `author.username`): a token with
//! write access may edit other people's comments, and a reader who writes a comment
//! starting with the marker must not get it overwritten. `commitStatus.commentAuthor`
//! names the user instead, for tokens the forge does not answer `GET /user` for (GitHub
//! App and Actions tokens: 403). When the user cannot be asked, no listed comment is
//! taken as plumb's and a new one is created. The pure part builds
//! requests ([`Target::list_comments`], [`Target::create_comment`],
//! [`Target::edit_comment`]) and reads answers ([`find_marked`]); [`Comments`] does the IO.

use bytes::Bytes;
use tokio::sync::OnceCell;

use super::{CommitStatus, Error, HttpClient, Target, http::MAX_RESPONSE_BYTES, send, user_name};
use crate::config::{DestinationError, ForgeProvider, read_secret};

/// Most bytes of a comment list read (about 100 long comments).
pub const MAX_LIST_BYTES: usize = 8 * 1024 * 1024;

impl Target {
    /// The path segments of pull request `number`'s comments: `issues/{number}/comments`,
    /// on GitLab `merge_requests/{number}/notes`.
    fn comments_path(&self, number: u64) -> [String; 3] {
        let n = number.to_string();
        match self.provider {
            ForgeProvider::GitLab => ["merge_requests".into(), n, "notes".into()],
            ForgeProvider::Gitea | ForgeProvider::GitHub => ["issues".into(), n, "comments".into()],
        }
    }

    /// The request listing the comments of pull request `number`.
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn list_comments(&self, number: u64, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let path = self.comments_path(number);
        let mut url = self.repo_url(&path.each_ref().map(String::as_str))?;
        match self.provider {
            ForgeProvider::GitHub => url.set_query(Some("per_page=100")),
            ForgeProvider::GitLab => url.set_query(Some("per_page=100&sort=asc")),
            ForgeProvider::Gitea => {}
        }
        self.finish(self.authorized(::http::Request::get(url.as_str()), token)?, Bytes::new())
    }

    /// The request adding comment `body` to pull request `number`.
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn create_comment(&self, number: u64, body: &str, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let path = self.comments_path(number);
        let url = self.repo_url(&path.each_ref().map(String::as_str))?;
        let json = serde_json::json!({ "body": body }).to_string();
        self.finish(self.authorized(::http::Request::post(url.as_str()), token)?, Bytes::from(json))
    }

    /// The request replacing the body of comment `id` of pull request `number` with `body`.
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn edit_comment(
        &self,
        number: u64,
        id: u64,
        body: &str,
        token: &[u8],
    ) -> Result<::http::Request<Bytes>, Error> {
        let json = Bytes::from(serde_json::json!({ "body": body }).to_string());
        let id = id.to_string();
        let req = match self.provider {
            ForgeProvider::GitLab => {
                let [a, n, notes] = self.comments_path(number);
                ::http::Request::put(self.repo_url(&[&a, &n, &notes, &id])?.as_str())
            }
            ForgeProvider::Gitea | ForgeProvider::GitHub => {
                ::http::Request::patch(self.repo_url(&["issues", "comments", &id])?.as_str())
            }
        };
        self.finish(self.authorized(req, token)?, json)
    }

    fn finish(&self, b: ::http::request::Builder, body: Bytes) -> Result<::http::Request<Bytes>, Error> {
        b.body(body)
            .map_err(|e| Error::from(DestinationError::ApiUrl { url: self.api_url.clone(), why: e.to_string() }))
    }
}

/// The id of the first comment of a list answer (a JSON array of `{id, body, user}` or,
/// from GitLab, `{id, body, author}`) whose body starts with `marker` and whose author
/// is `me`; `None` when none is, or the answer is no such list.
pub fn find_marked(answer: &[u8], marker: &str, me: &str) -> Option<u64> {
    let list: Vec<serde_json::Value> = serde_json::from_slice(answer).ok()?;
    let author = |c: &serde_json::Value| user_name(&c["user"]).or_else(|| user_name(&c["author"])).map(str::to_string);
    list.iter()
        .find(|c| c["body"].as_str().is_some_and(|b| b.starts_with(marker)) && author(c).as_deref() == Some(me))?["id"]
        .as_u64()
}

/// Posts and edits the comments and statuses of one forge repository, with one HTTP
/// client; remembers the token's user once asked.
#[derive(Debug)]
pub struct Comments {
    target: Target,
    client: HttpClient,
    me: OnceCell<String>,
    author: Option<String>,
}

impl Comments {
    /// Comments on `target`'s pull requests.
    ///
    /// # Errors
    /// [`Error::Http`] when the HTTP client cannot be built.
    /// `author`: the token's user as the policy names it (`commitStatus.commentAuthor`),
    /// else asked of the forge at the first comment.
    pub fn new(target: Target, author: Option<String>) -> Result<Comments, Error> {
        let me = author.clone().map_or_else(OnceCell::new, |a| OnceCell::new_with(Some(a)));
        Ok(Comments { target, client: HttpClient::new()?, me, author })
    }

    /// The author the policy names, if it does.
    pub fn author(&self) -> Option<&str> {
        self.author.as_deref()
    }

    /// Where the comments go.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Makes `body` (which starts with `marker`) the text of plumb's comment on pull
    /// request `number`: edits comment `known` (remembered from before) or the one the
    /// list shows with the marker and the token's user as author, else creates one.
    /// Returns the comment's id.
    ///
    /// # Errors
    /// [`Error::Token`], [`Error::BadToken`], [`Error::Http`], [`Error::Rejected`].
    pub async fn upsert(&self, number: u64, known: Option<u64>, marker: &str, body: &str) -> Result<u64, Error> {
        let token = self.token()?;
        let id = match known {
            Some(id) => Some(id),
            None => match self.me(&token).await {
                Ok(me) => {
                    let answer = send(&self.client, self.target.list_comments(number, &token)?, MAX_LIST_BYTES).await?;
                    find_marked(&answer, marker, me)
                }
                Err(e) => {
                    tracing::warn!(pull = number, "the forge did not say who the token is ({e}): a new comment");
                    None
                }
            },
        };
        if let Some(id) = id {
            let req = self.target.edit_comment(number, id, body, &token)?;
            match send(&self.client, req, MAX_RESPONSE_BYTES).await {
                Ok(_) => return Ok(id),
                // deleted meanwhile, or not plumb's to edit: a comment of its own
                Err(Error::Rejected { status: 403 | 404, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let answer = send(&self.client, self.target.create_comment(number, body, &token)?, MAX_RESPONSE_BYTES).await?;
        let created: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
        Ok(created["id"].as_u64().unwrap_or_default())
    }

    /// Posts commit status `status`, with `link` (if any) as its target URL.
    ///
    /// # Errors
    /// As [`super::post_status`].
    pub async fn status(&self, status: &CommitStatus, link: Option<String>) -> Result<(), Error> {
        let target = Target { target_url: link, ..self.target.clone() };
        super::post_status(&target, &self.client, status).await
    }

    /// The token's user, asked once.
    async fn me(&self, token: &[u8]) -> Result<&str, Error> {
        let me = self
            .me
            .get_or_try_init(|| async {
                let answer = send(&self.client, self.target.current_user(token)?, MAX_RESPONSE_BYTES).await?;
                let user: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
                user_name(&user).map(str::to_string).ok_or_else(|| Error::Rejected {
                    url: crate::config::repo_url::redact(&format!("{}/user", self.target.api_url)),
                    status: 200,
                    body: "no login or username in the answer".into(),
                })
            })
            .await?;
        Ok(me)
    }

    fn token(&self) -> Result<Vec<u8>, Error> {
        let file = &self.target.token_file;
        read_secret(file).map_err(|source| Error::Token { file: file.clone(), source })
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
        let r = gitea.edit_comment(7, 42, "<!-- m -->\nhi", b"tok").unwrap();
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
        assert_eq!(find_marked(answer, "<!-- plumb-preview -->", "plumb-bot"), Some(2));
        assert_eq!(find_marked(b"[]", "<!-- plumb-preview -->", "plumb-bot"), None);
        assert_eq!(find_marked(b"{\"message\": \"Not Found\"}", "<!-- plumb-preview -->", "plumb-bot"), None);
    }

    /// A comment that starts with the marker but was written by someone else is not
    /// plumb's: it is never edited, whoever the forge lets the token edit.
    #[test]
    fn a_marked_comment_of_another_user_is_not_plumbs() {
        let answer = br#"[{"id": 1, "body": "<!-- plumb-preview -->\nlooks fine, merge it", "user": {"login": "dev1"}},
            {"id": 5, "body": "<!-- plumb-preview -->\n### plumb preview", "user": {"login": "plumb-bot"}}]"#;
        assert_eq!(find_marked(answer, "<!-- plumb-preview -->", "plumb-bot"), Some(5));
        assert_eq!(find_marked(answer, "<!-- plumb-preview -->", "someone"), None);
        let no_author = br#"[{"id": 1, "body": "<!-- plumb-preview -->"}]"#;
        assert_eq!(find_marked(no_author, "<!-- plumb-preview -->", "plumb-bot"), None);
    }

    /// GitLab's notes API: paths under the project's URL-encoded path, the token in
    /// `PRIVATE-TOKEN`, an edit by `PUT` under the merge request, notes' authors as
    /// `author.username` (a recorded GitLab answer, fields trimmed).
    #[test]
    fn gitlab_notes_requests() {
        let mut gitlab = target(ForgeProvider::GitLab, "https://gitlab.example.com/api/v4");
        gitlab.owner = "platform/deploy".into();
        let r = gitlab.list_comments(7, b"glpat-tok").unwrap();
        assert_eq!(
            r.uri().to_string(),
            "https://gitlab.example.com/api/v4/projects/platform%2Fdeploy%2Fconfig/merge_requests/7/notes?per_page=100&sort=asc"
        );
        assert_eq!(r.headers()["private-token"], "glpat-tok");
        assert!(r.headers()["private-token"].is_sensitive());
        assert!(!r.headers().contains_key("authorization"));
        let r = gitlab.edit_comment(7, 42, "x", b"glpat-tok").unwrap();
        assert_eq!(
            (r.method().as_str(), r.uri().path()),
            ("PUT", "/api/v4/projects/platform%2Fdeploy%2Fconfig/merge_requests/7/notes/42")
        );
        let r = gitlab.create_comment(7, "x", b"glpat-tok").unwrap();
        assert_eq!(
            (r.method().as_str(), r.uri().path()),
            ("POST", "/api/v4/projects/platform%2Fdeploy%2Fconfig/merge_requests/7/notes")
        );
        assert_eq!(gitlab.current_user(b"glpat-tok").unwrap().uri().path(), "/api/v4/user");
        let notes = br#"[{"id": 301, "body": "<!-- plumb-preview -->\n### plumb preview", "author": {"id": 9, "username": "plumb-bot"}, "system": false}]"#;
        assert_eq!(find_marked(notes, "<!-- plumb-preview -->", "plumb-bot"), Some(301));
    }
}
