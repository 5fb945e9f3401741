//! A real Gitea on loopback: the forge of the end-to-end tests.
//!
//! Built from its Go module by `tools/testbins/build.sh gitea` (SQLite compiled in,
//! templates and options copied beside the binary). Started headless
//! (`shared/reference/control-plane.md` §6.3–6.4): a fresh work directory, an `app.ini`
//! with `INSTALL_LOCK`, SQLite, HTTP on a free loopback port, no SSH, no mailer, and
//! `[webhook] ALLOWED_HOST_LIST = loopback` (Gitea's default `external` refuses to
//! deliver to 127.0.0.0/8). The schema, an admin user and its token are made with the
//! CLI before `gitea web` starts (CLI first avoids SQLite lock contention); then the
//! REST API does the rest. The REST helpers follow Gitea's API reference (swagger
//! `templates/swagger/v1_json.tmpl` of the built version).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use plumb::forge::HttpClient;

use crate::control_plane::{bin, free_port, spawn_watched, testbins_dir};

/// Name of the admin user made at start.
pub const ADMIN: &str = "plumb-admin";

/// A running Gitea. Dropping it stops the server (its watchdog also kills it when the
/// test process exits).
pub struct Gitea {
    dir: tempfile::TempDir,
    child: Child,
    client: HttpClient,
    /// `http://127.0.0.1:<port>` (also Gitea's `ROOT_URL`, without the slash).
    pub base: String,
    /// Password of [`ADMIN`].
    pub admin_password: String,
    /// Access token of [`ADMIN`], scope `all`.
    pub admin_token: String,
}

/// How a REST call authenticates.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// `Authorization: token …`.
    Token(&'a str),
    /// HTTP basic (user, password): what token creation requires.
    Basic(&'a str, &'a str),
}

/// A repository as Gitea reports it.
#[derive(Debug, Clone)]
pub struct GiteaRepo {
    /// Owner login.
    pub owner: String,
    /// Repository name.
    pub name: String,
    /// `http://127.0.0.1:<port>/<owner>/<name>.git`.
    pub clone_url: String,
}

impl Gitea {
    /// Writes the configuration, runs `migrate`, creates [`ADMIN`] and its token, starts
    /// `gitea web` and waits until `/api/healthz` answers and the admin token is accepted
    /// (usually 3–10 s).
    ///
    /// # Errors
    /// The binary is missing (build it with `tools/testbins/build.sh gitea`), a CLI step
    /// fails, or the server is not healthy within 60 s; messages carry Gitea's output.
    pub async fn start() -> anyhow::Result<Gitea> {
        let exe = bin("gitea", "gitea")?;
        // Git hooks written into repositories embed the binary's path: use the resolved
        // one, so a rebuild that moves `current` cannot break a running lab.
        let exe = exe.canonicalize().unwrap_or(exe);
        let static_root = testbins_dir().join("gitea/current/static");
        let static_root = static_root.canonicalize().unwrap_or(static_root);
        let dir = tempfile::Builder::new().prefix("plumb-gitea-").tempdir()?;
        let work = dir.path().to_path_buf();
        let conf = work.join("custom/conf/app.ini");
        std::fs::create_dir_all(conf.parent().context("app.ini has a parent")?)?;
        let port = free_port()?;
        let base = format!("http://127.0.0.1:{port}");
        let user = run_user()?;
        std::fs::write(&conf, app_ini(&work, &static_root, port, &user))?;

        let cli = |args: &[&str]| -> anyhow::Result<String> {
            let out = gitea_cmd(&exe, &work, &conf).args(args).output().context("run gitea")?;
            if !out.status.success() {
                bail!(
                    "gitea {}: {}{}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        cli(&["migrate"])?;
        let admin_password = format!("Pw-{}", hex::encode(rand::random::<[u8; 12]>()));
        cli(&[
            "admin",
            "user",
            "create",
            "--username",
            ADMIN,
            "--password",
            &admin_password,
            "--email",
            "admin@plumb.invalid",
            "--admin",
            "--must-change-password=false",
        ])?;
        let admin_token = cli(&[
            "admin",
            "user",
            "generate-access-token",
            "--username",
            ADMIN,
            "--token-name",
            "lab",
            "--scopes",
            "all",
            "--raw",
        ])?;
        let admin_token = admin_token.lines().last().unwrap_or_default().trim().to_string();

        let mut web = gitea_cmd(&exe, &work, &conf);
        web.arg("web");
        let child = spawn_watched("gitea", &web, &work.join("gitea.log"))?;
        let mut g = Gitea { dir, child, client: HttpClient::new()?, base, admin_password, admin_token };
        g.wait_healthy(Duration::from_secs(60)).await?;
        Ok(g)
    }

    /// The run directory (app.ini, SQLite database, repositories, `gitea.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Gitea's log (console output of `gitea web`).
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gitea.log")).unwrap_or_default()
    }

    async fn wait_healthy(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("gitea exited ({status}):\n{}", tail(&self.logs(), 30));
            }
            // Ready once the admin token is accepted, not only once HTTP answers.
            if let Ok((200, _)) = self.call("GET", "/api/healthz", None, None).await
                && let Ok((200, _)) = self.call("GET", "/api/v1/user", Some(Auth::Token(&self.admin_token)), None).await
            {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!("gitea not healthy after {timeout:?}:\n{}", tail(&self.logs(), 30));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One REST call to `path` (e.g. `/api/v1/user/repos`) with an optional JSON body;
    /// returns the HTTP status and the JSON answer (`null` when empty or not JSON).
    ///
    /// # Errors
    /// Transport failures only; any HTTP status is returned.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        auth: Option<Auth<'_>>,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut b = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("accept", "application/json");
        match auth {
            Some(Auth::Token(t)) => b = b.header("authorization", format!("token {t}")),
            Some(Auth::Basic(u, p)) => {
                let cred = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
                b = b.header("authorization", format!("Basic {cred}"));
            }
            None => {}
        }
        let body = match body {
            Some(v) => {
                b = b.header("content-type", "application/json");
                Bytes::from(v.to_string())
            }
            None => Bytes::new(),
        };
        let (status, answer) = self.client.send(b.body(body)?, Duration::from_secs(30)).await?;
        Ok((status.as_u16(), serde_json::from_slice(&answer).unwrap_or(Value::Null)))
    }

    async fn expect(
        &self,
        want: u16,
        method: &str,
        path: &str,
        auth: Auth<'_>,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (status, answer) = self.call(method, path, Some(auth), body).await?;
        if status != want {
            bail!("{method} {path}: expected {want}, got {status}: {answer}\ngitea log:\n{}", tail(&self.logs(), 30));
        }
        Ok(answer)
    }

    /// Creates a (non-admin) user as [`ADMIN`]: `POST /api/v1/admin/users`.
    ///
    /// # Errors
    /// When Gitea does not answer 201.
    pub async fn create_user(&self, username: &str, password: &str) -> anyhow::Result<()> {
        let body = json!({
            "username": username, "password": password,
            "email": format!("{username}@plumb.invalid"), "must_change_password": false,
        });
        self.expect(201, "POST", "/api/v1/admin/users", Auth::Token(&self.admin_token), Some(&body)).await?;
        Ok(())
    }

    /// Creates an access token for `username`, authenticating as that user with its
    /// password (`POST /api/v1/users/{username}/tokens`, basic auth); returns the token.
    /// Scopes as Gitea names them, e.g. `write:repository`.
    ///
    /// # Errors
    /// When Gitea does not answer 201 or the answer has no token.
    pub async fn create_token(
        &self,
        username: &str,
        password: &str,
        name: &str,
        scopes: &[&str],
    ) -> anyhow::Result<String> {
        let body = json!({"name": name, "scopes": scopes});
        let path = format!("/api/v1/users/{username}/tokens");
        let answer = self.expect(201, "POST", &path, Auth::Basic(username, password), Some(&body)).await?;
        answer["sha1"].as_str().map(str::to_string).context("token answer has no `sha1`")
    }

    /// Creates an empty repository owned by the token's user (`POST /api/v1/user/repos`)
    /// with default branch `main`.
    ///
    /// # Errors
    /// When Gitea does not answer 201.
    pub async fn create_repo(&self, token: &str, name: &str, private: bool) -> anyhow::Result<GiteaRepo> {
        let body = json!({"name": name, "private": private, "auto_init": false, "default_branch": "main"});
        let a = self.expect(201, "POST", "/api/v1/user/repos", Auth::Token(token), Some(&body)).await?;
        Ok(GiteaRepo {
            owner: a["owner"]["login"].as_str().unwrap_or_default().to_string(),
            name: a["name"].as_str().unwrap_or_default().to_string(),
            clone_url: a["clone_url"].as_str().context("repository answer has no clone_url")?.to_string(),
        })
    }

    /// Adds a Gitea-type webhook for push events with a JSON body signed with `secret`
    /// (`POST /api/v1/repos/{owner}/{repo}/hooks`); returns its id.
    ///
    /// # Errors
    /// When Gitea does not answer 201.
    pub async fn create_push_webhook(
        &self,
        token: &str,
        repo: &GiteaRepo,
        url: &str,
        secret: &str,
    ) -> anyhow::Result<i64> {
        let body = json!({
            "type": "gitea",
            "config": {"url": url, "content_type": "json", "secret": secret},
            "events": ["push"],
            "branch_filter": "*",
            "active": true,
        });
        let path = format!("/api/v1/repos/{}/{}/hooks", repo.owner, repo.name);
        let a = self.expect(201, "POST", &path, Auth::Token(token), Some(&body)).await?;
        a["id"].as_i64().context("hook answer has no id")
    }

    /// Adds a Gitea-type webhook for `events` (`push`, `pull_request`,
    /// `pull_request_sync`, …) with a JSON body signed with `secret`; returns its id.
    ///
    /// # Errors
    /// When Gitea does not answer 201.
    pub async fn create_webhook(
        &self,
        token: &str,
        repo: &GiteaRepo,
        url: &str,
        secret: &str,
        events: &[&str],
    ) -> anyhow::Result<i64> {
        let body = json!({
            "type": "gitea",
            "config": {"url": url, "content_type": "json", "secret": secret},
            "events": events,
            "branch_filter": "*",
            "active": true,
        });
        let path = format!("/api/v1/repos/{}/{}/hooks", repo.owner, repo.name);
        let a = self.expect(201, "POST", &path, Auth::Token(token), Some(&body)).await?;
        a["id"].as_i64().context("hook answer has no id")
    }

    /// Opens a pull request of `head` (`branch`, or `owner:branch` from a fork) into
    /// `base` of `repo` (`POST /api/v1/repos/{owner}/{repo}/pulls`); returns its number.
    ///
    /// # Errors
    /// When Gitea does not answer 201.
    pub async fn create_pull(
        &self,
        token: &str,
        repo: &GiteaRepo,
        head: &str,
        base: &str,
        title: &str,
    ) -> anyhow::Result<u64> {
        let body = json!({"head": head, "base": base, "title": title});
        let path = format!("/api/v1/repos/{}/{}/pulls", repo.owner, repo.name);
        let a = self.expect(201, "POST", &path, Auth::Token(token), Some(&body)).await?;
        a["number"].as_u64().context("pull answer has no number")
    }

    /// Closes pull request `number` of `repo` without merging it
    /// (`PATCH /api/v1/repos/{owner}/{repo}/pulls/{number}` with `{"state": "closed"}`,
    /// Gitea's `repoEditPullRequest`).
    ///
    /// # Errors
    /// When Gitea does not answer 201 (Gitea's answer to an edit).
    pub async fn close_pull(&self, token: &str, repo: &GiteaRepo, number: u64) -> anyhow::Result<()> {
        let path = format!("/api/v1/repos/{}/{}/pulls/{number}", repo.owner, repo.name);
        let (status, answer) =
            self.call("PATCH", &path, Some(Auth::Token(token)), Some(&json!({"state": "closed"}))).await?;
        if !(200..300).contains(&status) || answer["state"] != "closed" {
            bail!("PATCH {path}: expected the pull request closed, got {status}: {answer}");
        }
        Ok(())
    }

    /// The comments of issue or pull request `number`
    /// (`GET /api/v1/repos/{owner}/{repo}/issues/{number}/comments`): objects with `id`,
    /// `body`, `user.login`.
    ///
    /// # Errors
    /// When Gitea does not answer 200.
    pub async fn comments(&self, token: &str, repo: &GiteaRepo, number: u64) -> anyhow::Result<Vec<Value>> {
        let path = format!("/api/v1/repos/{}/{}/issues/{number}/comments", repo.owner, repo.name);
        let a = self.expect(200, "GET", &path, Auth::Token(token), None).await?;
        Ok(a.as_array().cloned().unwrap_or_default())
    }

    /// Forks `repo` into the token's user (`POST /api/v1/repos/{owner}/{repo}/forks`).
    ///
    /// # Errors
    /// When Gitea does not answer 202.
    pub async fn fork(&self, token: &str, repo: &GiteaRepo) -> anyhow::Result<GiteaRepo> {
        let path = format!("/api/v1/repos/{}/{}/forks", repo.owner, repo.name);
        let a = self.expect(202, "POST", &path, Auth::Token(token), Some(&json!({}))).await?;
        Ok(GiteaRepo {
            owner: a["owner"]["login"].as_str().unwrap_or_default().to_string(),
            name: a["name"].as_str().unwrap_or_default().to_string(),
            clone_url: a["clone_url"].as_str().context("fork answer has no clone_url")?.to_string(),
        })
    }

    /// Every commit status of `sha` (`GET /api/v1/repos/{owner}/{repo}/statuses/{sha}`):
    /// objects with `status` (the state), `context`, `description`, `target_url`.
    ///
    /// # Errors
    /// When Gitea does not answer 200.
    pub async fn commit_statuses(&self, token: &str, repo: &GiteaRepo, sha: &str) -> anyhow::Result<Vec<Value>> {
        let path = format!("/api/v1/repos/{}/{}/statuses/{sha}", repo.owner, repo.name);
        let a = self.expect(200, "GET", &path, Auth::Token(token), None).await?;
        Ok(a.as_array().cloned().unwrap_or_default())
    }
}

impl Drop for Gitea {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

fn gitea_cmd(exe: &Path, work: &Path, conf: &Path) -> Command {
    let mut c = Command::new(exe);
    c.arg("--config")
        .arg(conf)
        .arg("--work-path")
        .arg(work)
        .env("GITEA_WORK_DIR", work)
        .env("GITEA_CUSTOM", work.join("custom"))
        .env("HOME", work)
        .current_dir(work);
    c
}

/// The user this process runs as: Gitea refuses to start unless `RUN_USER` names it.
fn run_user() -> anyhow::Result<String> {
    let out = Command::new("id").arg("-un").output().context("id -un")?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if name.is_empty() {
        bail!("cannot tell the current user (id -un)");
    }
    Ok(name)
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().rev().take(n).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// The headless `app.ini`. Gitea reads it with inline comments disabled, so every
/// comment sits on its own line.
fn app_ini(work: &Path, static_root: &Path, port: u16, user: &str) -> String {
    let w = work.display();
    let secret = hex::encode(rand::random::<[u8; 32]>());
    let internal = hex::encode(rand::random::<[u8; 32]>());
    let static_root: PathBuf = static_root.into();
    let s = static_root.display();
    format!(
        r"APP_NAME = plumb-lab
RUN_MODE = prod
; must be the OS user running gitea
RUN_USER = {user}
WORK_PATH = {w}
; CI runs as root
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = {port}
DOMAIN = 127.0.0.1
ROOT_URL = http://127.0.0.1:{port}/
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false
OFFLINE_MODE = true
APP_DATA_PATH = {w}/data
STATIC_ROOT_PATH = {s}

[database]
DB_TYPE = sqlite3
PATH = {w}/data/gitea.db
SQLITE_JOURNAL_MODE = WAL
; milliseconds a statement waits on a lock (default 500): a token lookup that times out
; while `gitea web` runs its start-up tasks answers 401 (token is required)
SQLITE_TIMEOUT = 30000

[repository]
ROOT = {w}/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = {secret}
INTERNAL_TOKEN = {internal}

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true
DEFAULT_KEEP_EMAIL_PRIVATE = true

[webhook]
; the default (external) refuses 127.0.0.0/8, where plumb listens in tests
ALLOWED_HOST_LIST = loopback
; seconds
DELIVER_TIMEOUT = 10

[mailer]
ENABLED = false

[picture]
DISABLE_GRAVATAR = true
ENABLE_FEDERATED_AVATAR = false

[cron.update_checker]
ENABLED = false

[actions]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[log]
MODE = console
LEVEL = Warn
ROOT_PATH = {w}/log
"
    )
}
