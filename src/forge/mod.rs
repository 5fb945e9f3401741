//! Commit statuses: after each sync, plumb tells the forge how that commit went.
//!
//! A repository with `commitStatus` in the policy (see
//! [`crate::config::CommitStatusConfig`]) gets, for every sync of one of its applications,
//! a status on the synced commit, under the context `plumb/<application>`:
//!
//! | after the pass                                   | state     |
//! |--------------------------------------------------|-----------|
//! | sync Succeeded, health Healthy or Suspended      | `success` |
//! | sync Succeeded, health Progressing               | `pending` (updated by the next passes until it settles) |
//! | sync Succeeded, health Degraded or Missing       | `failure` |
//! | sync Succeeded, health Unknown                   | `error`   |
//! | sync Failed                                      | `failure` |
//! | sync Refused by a guard (nothing written)        | `error`   |
//! | sync Running (a later wave waits for health)     | `pending` |
//!
//! The description carries the application's sync and health and a fixed, plumb-worded
//! detail (`OutOfSync, Healthy: sync failed after applying 2; see plumb history`, at most
//! 140 characters: GitHub rejects longer ones with 422; see [`sync_detail`]): never the
//! text of an API error, which may quote Git values or cluster internals. The four states are the
//! ones both APIs accept (Gitea also has `warning`, unused).
//!
//! Gitea and GitHub take the same JSON body `{state, target_url, description, context}`;
//! `target_url` is the policy's `targetUrl` with `{app}` replaced by the application's
//! name ([`Target::link`]), so a status can link to the application's status page.
//!
//! - **Gitea** (and Forgejo), `POST {apiUrl}/repos/{owner}/{repo}/statuses/{sha}` with
//!   `Authorization: token …` — Gitea's API reference (`CreateStatusOption`, answer 201).
//! - **GitHub**, `POST {apiUrl}/repos/{owner}/{repo}/statuses/{sha}` with
//!   `Authorization: Bearer …`, `Accept: application/vnd.github+json`,
//!   `X-GitHub-Api-Version: 2022-11-28` and a `User-Agent` (required by GitHub's REST API
//!   documentation, "Create a commit status", answer 201).
//! - **GitLab**, `POST {apiUrl}/projects/{namespace%2Fproject}/statuses/{sha}` with
//!   `PRIVATE-TOKEN: …` (GitLab's REST API "Commit statuses", "Set the pipeline status of
//!   a commit", answer 201): the body names the context `name` instead of `context`, and
//!   GitLab's states are `pending`, `success` and `failed` (both `failure` and `error`
//!   are sent as `failed`). GitLab refuses to set a status to the state it already has
//!   (400, "Cannot transition status"): plumb reads that answer as posted.
//!
//! The pure part — which status follows a pass ([`next_status`]) and the exact request
//! for a forge ([`Target::request`]) — takes values and returns values; [`Notifier`] does
//! the IO. A failed post is logged and never fails the pass. The token is read from its
//! file at every post, sent in a header marked sensitive, and never logged.

pub mod comment;
pub mod http;
pub mod pulls;

use std::{path::PathBuf, sync::Mutex, time::Duration};

use bytes::Bytes;

use crate::{
    compare::SyncStatus,
    config::{CommitStatusConfig, Config, DestinationError, ForgeProvider, read_secret},
    health::HealthStatus,
    status::{AppStatus, SyncRecord, SyncResult},
};
pub use http::{HttpClient, HttpError};

/// Longest description sent, in characters (GitHub answers 422 above 140).
pub const MAX_DESCRIPTION_CHARS: usize = 140;

/// How long one post may take, in seconds, before it is abandoned (the actor waits for
/// it, so this bounds the delay a slow forge adds to the next pass).
pub const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// `User-Agent` sent to forges (GitHub rejects requests without one).
pub const USER_AGENT: &str = concat!("plumb/", env!("CARGO_PKG_VERSION"));

/// State of a commit status; the four both Gitea and GitHub accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not finished yet (rollout in progress).
    Pending,
    /// Synced and healthy.
    Success,
    /// The sync failed or the result is unhealthy.
    Failure,
    /// plumb could not sync (a guard refused) or not assess health.
    Error,
}

impl State {
    /// The API's word: `pending`, `success`, `failure`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Error => "error",
        }
    }

    /// The word `provider`'s API takes: [`State::as_str`], except on GitLab, which has
    /// no `failure` or `error` and takes `failed` for both.
    pub fn word(self, provider: ForgeProvider) -> &'static str {
        match (provider, self) {
            (ForgeProvider::GitLab, Self::Failure | Self::Error) => "failed",
            _ => self.as_str(),
        }
    }
}

/// One status to post on one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// Full commit SHA.
    pub sha: String,
    /// The state.
    pub state: State,
    /// `plumb/<application>`: one status line per application on the forge.
    pub context: String,
    /// `<sync>, <health>` and a short detail; at most [`MAX_DESCRIPTION_CHARS`].
    pub description: String,
}

impl CommitStatus {
    /// The application this status is about: the context without its `plumb/` prefix.
    pub fn app(&self) -> &str {
        self.context.strip_prefix("plumb/").unwrap_or(&self.context)
    }
}

/// Why commit statuses cannot be posted.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No destination follows from the `commitStatus` block and the repository URL.
    #[error(transparent)]
    Destination(#[from] DestinationError),
    /// The token file could not be read.
    #[error("tokenFile {file}: {source}")]
    Token {
        /// The file.
        file: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The token is empty or not a valid header value (control characters).
    #[error("tokenFile {file}: the token is empty or contains characters not allowed in a header")]
    BadToken {
        /// The file.
        file: PathBuf,
    },
    /// The forge could not be reached.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The forge answered with a status other than 2xx.
    #[error("{url} answered {status}: {body}")]
    Rejected {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Start of the answer's body (at most 300 bytes).
        body: String,
    },
}

/// Where statuses for one repository go: a forge API and the repository on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Which API.
    pub provider: ForgeProvider,
    /// API base URL, without a trailing slash (`https://api.github.com`,
    /// `http://127.0.0.1:3000/api/v1`).
    pub api_url: String,
    /// Repository owner (user or organization).
    pub owner: String,
    /// Repository name, without `.git`.
    pub repo: String,
    /// Link sent with each status, if any.
    pub target_url: Option<String>,
    /// File holding the API token.
    pub token_file: PathBuf,
}

impl Target {
    /// The target for a repository's `commitStatus` and clone URL (see
    /// [`CommitStatusConfig::destination`]): owner and repository are the last two path
    /// segments of the URL, the API URL is the configured one or the provider's default.
    ///
    /// # Errors
    /// [`Error::Destination`].
    pub fn new(cfg: &CommitStatusConfig, repo_url: &str) -> Result<Target, Error> {
        let dest = cfg.destination(repo_url)?;
        Ok(Target {
            provider: cfg.provider.value,
            api_url: dest.api_url,
            owner: dest.owner,
            repo: dest.repo,
            target_url: cfg.target_url.clone(),
            token_file: cfg.token_file.value.clone(),
        })
    }

    /// The link sent with a status of application `app`: the configured `targetUrl` with
    /// every `{app}` replaced by the application's name as one percent-encoded path
    /// segment (`https://plumb.example.com/applications/{app}` → its status page);
    /// `None` when no `targetUrl` is configured.
    pub fn link(&self, app: &str) -> Option<String> {
        let t = self.target_url.as_ref()?;
        Some(t.replace("{app}", &crate::page::path_segment(app)))
    }

    /// `{api_url}/repos/{owner}/{repo}/statuses/{sha}`, each segment percent-encoded.
    ///
    /// # Errors
    /// [`Error::Destination`] when the API URL does not parse.
    pub fn url(&self, sha: &str) -> Result<url::Url, Error> {
        self.repo_url(&["statuses", sha])
    }

    /// The exact request that posts `status` with `token` (pure: nothing is sent).
    ///
    /// # Errors
    /// [`Error::Destination`]; [`Error::BadToken`] when the token cannot be a header value.
    pub fn request(&self, status: &CommitStatus, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let context = if self.provider == ForgeProvider::GitLab { "name" } else { "context" };
        let mut body = serde_json::json!({
            "state": status.state.word(self.provider),
            "description": status.description,
            context: status.context,
        });
        if let Some(t) = self.link(status.app()) {
            body["target_url"] = t.into();
        }
        let b = self.authorized(::http::Request::post(self.url(&status.sha)?.as_str()), token)?;
        b.body(Bytes::from(body.to_string()))
            .map_err(|e| Error::from(DestinationError::ApiUrl { url: self.api_url.clone(), why: e.to_string() }))
    }

    /// `b` with the forge's authorization (`Authorization: token …` for Gitea,
    /// `Authorization: Bearer …` for GitHub, `PRIVATE-TOKEN: …` for GitLab; marked
    /// sensitive), JSON content and accept headers, and plumb's `User-Agent`.
    ///
    /// # Errors
    /// [`Error::BadToken`] when the token is empty or cannot be a header value.
    fn authorized(&self, b: ::http::request::Builder, token: &[u8]) -> Result<::http::request::Builder, Error> {
        let (header, scheme): (&str, &[u8]) = match self.provider {
            ForgeProvider::Gitea => ("authorization", b"token "),
            ForgeProvider::GitHub => ("authorization", b"Bearer "),
            ForgeProvider::GitLab => ("private-token", b""),
        };
        let bad_token = || Error::BadToken { file: self.token_file.clone() };
        if token.is_empty() {
            return Err(bad_token());
        }
        let mut auth = ::http::HeaderValue::from_bytes(&[scheme, token].concat()).map_err(|_| bad_token())?;
        auth.set_sensitive(true);
        let b = b
            .header(::http::header::CONTENT_TYPE, "application/json")
            .header(::http::header::USER_AGENT, USER_AGENT)
            .header(header, auth);
        Ok(match self.provider {
            ForgeProvider::Gitea | ForgeProvider::GitLab => b.header(::http::header::ACCEPT, "application/json"),
            ForgeProvider::GitHub => b
                .header(::http::header::ACCEPT, "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28"),
        })
    }

    /// The repository's API URL followed by `segments`, each percent-encoded:
    /// `{api_url}/repos/{owner}/{repo}/…` on Gitea and GitHub,
    /// `{api_url}/projects/{owner%2Frepo}/…` on GitLab (the project's path as its id).
    ///
    /// # Errors
    /// [`Error::Destination`] when the API URL does not parse.
    pub fn repo_url(&self, segments: &[&str]) -> Result<url::Url, Error> {
        let bad = |why: &str| Error::from(DestinationError::ApiUrl { url: self.api_url.clone(), why: why.into() });
        let mut u = url::Url::parse(&self.api_url).map_err(|e| bad(&e.to_string()))?;
        let project = format!("{}/{}", self.owner, self.repo);
        let repo: [&str; 3] = match self.provider {
            ForgeProvider::GitLab => ["projects", &project, ""],
            ForgeProvider::Gitea | ForgeProvider::GitHub => ["repos", &self.owner, &self.repo],
        };
        u.path_segments_mut()
            .map_err(|()| bad("cannot be a base URL"))?
            .pop_if_empty()
            .extend(repo.into_iter().filter(|s| !s.is_empty()))
            .extend(segments);
        Ok(u)
    }

    /// The request asking who the token belongs to: `GET {api_url}/user` on every
    /// forge (Gitea `userGetCurrent`, GitHub "Get the authenticated user", GitLab "Get
    /// the current user"); read with [`user_name`].
    ///
    /// # Errors
    /// [`Error::Destination`], [`Error::BadToken`].
    pub fn current_user(&self, token: &[u8]) -> Result<::http::Request<Bytes>, Error> {
        let bad = |why: String| Error::from(DestinationError::ApiUrl { url: self.api_url.clone(), why });
        let mut u = url::Url::parse(&self.api_url).map_err(|e| bad(e.to_string()))?;
        u.path_segments_mut().map_err(|()| bad("cannot be a base URL".into()))?.pop_if_empty().push("user");
        self.authorized(::http::Request::get(u.as_str()), token)?.body(Bytes::new()).map_err(|e| bad(e.to_string()))
    }
}

/// The state for a sync result and the health that followed.
pub fn state_for(result: SyncResult, health: HealthStatus) -> State {
    match (result, health) {
        (SyncResult::Failed, _) => State::Failure,
        (SyncResult::Refused | SyncResult::Superseded, _) => State::Error,
        (SyncResult::Succeeded, HealthStatus::Healthy | HealthStatus::Suspended) => State::Success,
        (SyncResult::Succeeded, HealthStatus::Progressing) | (SyncResult::Running, _) => State::Pending,
        (SyncResult::Succeeded, HealthStatus::Degraded | HealthStatus::Missing) => State::Failure,
        (SyncResult::Succeeded, HealthStatus::Unknown) => State::Error,
    }
}

/// `<sync>, <health>: <detail>`, cut to [`MAX_DESCRIPTION_CHARS`] characters.
pub fn describe(sync: SyncStatus, health: HealthStatus, detail: &str) -> String {
    let mut s = format!("{sync}, {health}");
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(detail);
    }
    if s.chars().count() > MAX_DESCRIPTION_CHARS {
        s = s.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
        s.push('…');
    }
    s
}

/// The detail of a sync's description, in plumb's own words: counts and the outcome,
/// never the record's message (API error text that may quote Git values, object names or
/// cluster internals; the forge is read by more people than plumb's status). The message
/// stays in plumb's history (`plumb history APP`), which the description points to.
///
/// `applied` / `pruned` count the objects the record names plus those it omits.
pub fn sync_detail(rec: &SyncRecord) -> String {
    let applied = rec.applied.len() + rec.applied_omitted;
    let pruned = rec.pruned.len() + rec.pruned_omitted;
    match rec.result {
        SyncResult::Succeeded => format!("applied {applied}, pruned {pruned}"),
        SyncResult::Failed => format!("sync failed after applying {applied}; see plumb history"),
        SyncResult::Refused => "sync refused by a guard, nothing written; see plumb history".to_owned(),
        SyncResult::Running => format!("sync running: applied {applied}, a later wave waits for health"),
        SyncResult::Superseded => format!("sync superseded by a newer revision after applying {applied}"),
    }
}

/// The status to post after a pass of `app` that left status `st` and made sync
/// `sync` (if any), given the status posted last (if any).
///
/// - A pass that synced gives a status for the synced commit ([`state_for`]).
/// - A pass that held back a commit `verifyCommits` does not trust gives that commit an
///   `error` status saying it is not deployed (once).
/// - A pass that did not sync updates the last status only while it was `pending` and
///   is still about the commit that runs (`synced_revision`), and only once the rollout
///   settles into `success`, `failure` or `error`. Nothing is posted when nothing
///   changed.
pub fn next_status(
    app: &str,
    st: &AppStatus,
    sync: Option<&SyncRecord>,
    last: Option<&CommitStatus>,
) -> Option<CommitStatus> {
    let context = format!("plumb/{app}");
    // a commit `verifyCommits` does not trust is never deployed: the forge says so on it
    let untrusted =
        st.verification.as_ref().filter(|v| !v.verified && v.allowed_by.is_empty() && !v.revision.is_empty());
    if let (None, Some(v)) = (sync, untrusted) {
        let detail = "not deployed: not signed by a trusted key; see plumb get";
        let next = CommitStatus {
            sha: v.revision.clone(),
            state: State::Error,
            context,
            description: describe(st.sync, st.health, detail),
        };
        return if last == Some(&next) { None } else { Some(next) };
    }
    let next = if let Some(rec) = sync {
        CommitStatus {
            sha: rec.revision.clone(),
            state: state_for(rec.result, st.health),
            context,
            description: describe(st.sync, st.health, &sync_detail(rec)),
        }
    } else {
        let last = last?;
        if last.state != State::Pending || last.sha != st.synced_revision || last.context != context {
            return None;
        }
        let state = state_for(SyncResult::Succeeded, st.health);
        let detail = match state {
            // still rolling out: the pending status already says so
            State::Pending => return None,
            State::Success => "rollout done",
            _ => "rollout did not become healthy",
        };
        CommitStatus { sha: last.sha.clone(), state, context, description: describe(st.sync, st.health, detail) }
    };
    match last {
        Some(l) if *l == next => None,
        _ => Some(next),
    }
}

/// The login of a user object as the forge answers it: `login` on Gitea and GitHub,
/// `username` on GitLab; `None` when it has neither.
pub fn user_name(user: &serde_json::Value) -> Option<&str> {
    user["login"].as_str().or_else(|| user["username"].as_str())
}

/// Sends `req` with `client` and reads at most `max` bytes of the answer.
///
/// # Errors
/// [`Error::Http`] (transport, timeout, too large), [`Error::Rejected`] when the forge
/// answers other than 2xx (with the redacted URL and the first 300 bytes of the answer).
pub async fn send(client: &HttpClient, req: ::http::Request<Bytes>, max: usize) -> Result<Bytes, Error> {
    let url = crate::config::repo_url::redact(&req.uri().to_string());
    let (code, _, body) = client.exchange(req, POST_TIMEOUT, max).await?;
    if code.is_success() {
        Ok(body)
    } else {
        let body = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        Err(Error::Rejected { url, status: code.as_u16(), body })
    }
}

/// Posts commit statuses for one application; remembers the last one posted.
#[derive(Debug)]
pub struct Notifier {
    target: Target,
    client: HttpClient,
    last: Mutex<Option<CommitStatus>>,
}

impl Notifier {
    /// The notifier of application `app`, when its repository has `commitStatus`.
    ///
    /// # Errors
    /// [`Error`] when the configuration names no usable target (validation normally
    /// catches this first) or the HTTP client cannot be built.
    pub fn for_app(config: &Config, app: &str) -> Result<Option<Notifier>, Error> {
        let Some(repo) = config
            .applications
            .iter()
            .find(|a| a.name.value == app)
            .and_then(|a| config.repositories.iter().find(|r| r.name.value == a.repository.value))
        else {
            return Ok(None);
        };
        let Some(cfg) = &repo.commit_status else {
            return Ok(None);
        };
        Ok(Some(Notifier::new(Target::new(cfg, &repo.url.value)?)?))
    }

    /// A notifier posting to `target`.
    ///
    /// # Errors
    /// [`Error::Http`] when the HTTP client cannot be built.
    pub fn new(target: Target) -> Result<Notifier, Error> {
        Ok(Notifier { target, client: HttpClient::new()?, last: Mutex::new(None) })
    }

    /// Where this notifier posts.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Posts what [`next_status`] says after a pass that left `status` and made `sync`,
    /// if anything. Failures are logged (without the token) and forgotten, so the next
    /// pass tries again.
    pub async fn after_pass(&self, app: &str, status: &AppStatus, sync: Option<&SyncRecord>) {
        let last = self.last.lock().ok().and_then(|l| l.clone());
        let Some(next) = next_status(app, status, sync, last.as_ref()) else {
            return;
        };
        if let Err(e) = crate::fence::check(|| format!("commit status of {app} on {}", next.sha)) {
            return tracing::warn!("{e}");
        }
        match self.post(&next).await {
            Ok(()) => {
                tracing::info!(app, sha = %next.sha, state = next.state.as_str(), "commit status posted");
                if let Ok(mut l) = self.last.lock() {
                    *l = Some(next);
                }
            }
            Err(e) => tracing::warn!(app, sha = %next.sha, "commit status not posted: {e}"),
        }
    }

    /// Posts one status now.
    ///
    /// # Errors
    /// [`Error::Token`], [`Error::BadToken`], [`Error::Http`], or [`Error::Rejected`]
    /// when the forge answers other than 2xx.
    pub async fn post(&self, status: &CommitStatus) -> Result<(), Error> {
        post_status(&self.target, &self.client, status).await
    }
}

/// Posts `status` to `target` with `client`, the token read from its file now.
///
/// # Errors
/// [`Error::Token`], [`Error::BadToken`], [`Error::Http`], or [`Error::Rejected`] when
/// the forge answers other than 2xx — except GitLab's 400 "Cannot transition status",
/// which says the commit already has that state, and counts as posted.
pub async fn post_status(target: &Target, client: &HttpClient, status: &CommitStatus) -> Result<(), Error> {
    let file = &target.token_file;
    let token = read_secret(file).map_err(|source| Error::Token { file: file.clone(), source })?;
    match send(client, target.request(status, &token)?, http::MAX_RESPONSE_BYTES).await {
        Err(Error::Rejected { status: 400, body, .. })
            if target.provider == ForgeProvider::GitLab && body.contains("Cannot transition status") =>
        {
            Ok(())
        }
        r => r.map(drop),
    }
}

#[cfg(test)]
mod tests;
