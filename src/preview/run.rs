//! The preview worker of `plumb serve`: takes pull requests off the previews' queue
//! ([`super::queue`]), one at a time, and for each:
//!
//! 1. reads the head from the base repository (`refs/pull/N/head`,
//!    `refs/merge-requests/N/head`) and the base branch into the mirror;
//! 2. keeps the applications following that branch whose environment allows previews
//!    (`previews.enabled`; a fork's pull request only with `previews.forks`, and never
//!    an application that decrypts SOPS files) and whose render inputs the pull request
//!    changes ([`Context::inputs_changed`]);
//! 3. runs a pass of each in [`Mode::Preview`] at the head: the same render, boundaries
//!    and guards as a sync, against the live cluster, writing nothing (no object, no
//!    status, no metric of the application);
//! 4. keeps the plans for the status page's preview view ([`super::page`]) and posts
//!    them as one comment, edited in place on the next head ([`crate::forge::comment`]),
//!    and a commit status `plumb/preview` on the head: `success` when every plan was
//!    computed, `failure` when one could not be (a render error) or would be refused.
//!    Both go with the repository's `commitStatus` token, through one HTTP client per
//!    repository; the status and a comment cut to the forge's size link to the view when
//!    the repository has `commitStatus.previewUrl`. Without `commitStatus` the plans are
//!    only logged and shown.

use std::{collections::HashMap, sync::Arc, time::Instant};

use tokio_util::sync::CancellationToken;

use super::{
    AppPlan, COMMENT_MARKER, MAX_COMMENT_BYTES, PullHead,
    page::{Preview, Shown},
    queue::Queue,
    queue::Request,
};
use crate::{
    forge::{CommitStatus, State, Target, comment::Comments},
    reconcile::{AppState, Context, Mode},
};

/// What one preview found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The head previewed (as the base repository's pull ref names it now).
    pub head: String,
    /// The plan of each application the pull request touches, in name order.
    pub plans: Vec<AppPlan>,
    /// Whether any application may be previewed for this pull request (previews on;
    /// not a fork's, or forks allowed): when none may, nothing is posted.
    pub allowed: bool,
}

/// Runs previews off `queue` until `token` is cancelled, keeping each in `shown`.
pub async fn run(ctx: Arc<Context>, queue: Arc<Queue>, shown: Arc<Shown>, token: CancellationToken) {
    let mut forges = Forges::default();
    loop {
        let req = tokio::select! {
            () = token.cancelled() => return,
            req = queue.next() => req,
        };
        let started = Instant::now();
        let found = preview(&ctx, &req).await;
        let computed_ms = started.elapsed().as_millis();
        let result = if found.allowed { post(&ctx, &req, &found, &shown, &mut forges).await } else { "skipped" };
        ctx.metrics.previews.get_or_create(&vec![("result".to_string(), result.to_string())]).inc();
        if result == "posted" {
            ctx.metrics.preview_seconds.observe(req.received.elapsed().as_secs_f64());
        }
        tracing::info!(
            pull = req.pull.number,
            head = %crate::status::short(&found.head),
            apps = ?found.plans.iter().map(|p| p.app.as_str()).collect::<Vec<_>>(),
            computed_ms,
            result,
            since_delivery_ms = req.received.elapsed().as_millis(),
            "pull request previewed"
        );
    }
}

/// The worker's forge clients, one per repository of the policy (its name), and
/// plumb's comment on each pull request once posted: edited, never added again.
#[derive(Default)]
struct Forges {
    clients: HashMap<String, Arc<Comments>>,
    comments: HashMap<(String, u64), u64>,
}

impl Forges {
    /// The client for repository `name` posting to `target` as `author` (when the
    /// policy names it): the one made before, unless the policy changed either.
    fn client(
        &mut self,
        name: &str,
        target: &Target,
        author: Option<&str>,
    ) -> Result<Arc<Comments>, crate::forge::Error> {
        if let Some(c) = self.clients.get(name).filter(|c| c.target() == target && c.author() == author) {
            return Ok(c.clone());
        }
        let c = Arc::new(Comments::new(target.clone(), author.map(String::from))?);
        self.clients.insert(name.to_string(), c.clone());
        Ok(c)
    }
}

/// The plans of the applications `req`'s pull request touches (see the module docs).
pub async fn preview(ctx: &Context, req: &Request) -> Found {
    let pull = &req.pull;
    let mut found = Found { head: pull.head_sha.clone(), plans: vec![], allowed: false };
    let asked = crate::source::Since::at(Instant::now());
    let mut commits: HashMap<String, (Result<String, String>, Option<String>)> = HashMap::new();
    for name in &req.apps {
        let Some(app) = ctx.config.applications.iter().find(|a| a.name.value == *name) else { continue };
        let Some(env) = ctx.config.environments.iter().find(|e| e.name.value == app.environment.value) else {
            continue;
        };
        if !env.previews.enabled || (pull.fork && !env.previews.forks) {
            continue;
        }
        found.allowed = true;
        let failed = |why: String| AppPlan {
            app: name.clone(),
            revision: String::new(),
            sync: crate::compare::SyncStatus::Unknown,
            steps: vec![super::Step {
                action: super::Action::Error,
                object: String::new(),
                detail: why,
                wave: None,
                fields: vec![],
                data_loss: None,
            }],
        };
        if pull.fork && app.source.sops.is_some() {
            found.plans.push(failed(
                "not previewed: the application decrypts SOPS files and the pull request comes from a fork".into(),
            ));
            continue;
        }
        // the head and the base, once per repository (one advertisement of its refs)
        if !commits.contains_key(&app.repository.value) {
            let head = ctx.resolve_for(name, &pull.head_ref, asked).await;
            let base = ctx.resolve_for(name, &pull.base, asked).await.ok();
            commits.insert(app.repository.value.clone(), (head, base));
        }
        let (head, base) = match &commits[&app.repository.value] {
            (Ok(head), base) => (head.clone(), base.clone()),
            (Err(e), _) => {
                found.plans.push(failed(format!("fetch {}: {e}", pull.head_ref)));
                continue;
            }
        };
        found.head.clone_from(&head);
        if let Some(base) = base
            && ctx.inputs_changed(name, &base, &head).await == Some(false)
        {
            continue;
        }
        let mode = Mode::Preview { prune: env.sync_policy.prune, approve: false };
        let fresh = crate::source::Freshness::Now;
        match ctx.pass(&mut AppState::default(), name, mode, Some(&head), fresh).await {
            Ok(report) => found.plans.push(AppPlan::of(name, &report)),
            Err(e) => found.plans.push(failed(e.to_string())),
        }
    }
    found
}

/// Keeps `found` in `shown` and posts it on `req`'s pull request: the comment (edited
/// when `forges` knows it) and the commit status. Returns `posted`, `logged` (no token
/// to post with) or `failed`; failures are logged.
async fn post(ctx: &Context, req: &Request, found: &Found, shown: &Shown, forges: &mut Forges) -> &'static str {
    let pull = &req.pull;
    let Some(Destination { repository, target, preview_url, author }) = repository_of(ctx, &req.apps) else {
        return "skipped";
    };
    shown.put(Preview {
        repository: repository.clone(),
        number: pull.number,
        head: found.head.clone(),
        base: pull.base.clone(),
        at: crate::status::now(),
        plans: found.plans.clone(),
    });
    let Some(target) = target else {
        for p in &found.plans {
            tracing::info!(pull = pull.number, app = %p.app, "preview (no commitStatus to post it with):\n{}", p.text());
        }
        return "logged";
    };
    let link = preview_url.map(|t| super::page::link(&t, &repository, pull.number));
    let client = match forges.client(&repository, &target, author.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(pull = pull.number, "preview not posted: {e}");
            return "failed";
        }
    };
    // a pull request that touches nothing gets no comment, unless it had one to correct
    let key = (repository, pull.number);
    let known = forges.comments.get(&key).copied();
    let mut ok = true;
    if !found.plans.is_empty() || known.is_some() {
        let head = PullHead { number: pull.number, sha: found.head.clone(), base: pull.base.clone() };
        let body = super::comment(&head, &found.plans, link.as_deref(), MAX_COMMENT_BYTES);
        match client.upsert(pull.number, known, COMMENT_MARKER, &body).await {
            Ok(id) => {
                forges.comments.insert(key, id);
            }
            Err(e) => {
                ok = false;
                tracing::warn!(pull = pull.number, "preview comment not posted: {e}");
            }
        }
    }
    if let Err(e) = client.status(&commit_status(&found.head, &found.plans), link).await {
        ok = false;
        tracing::warn!(pull = pull.number, "preview status not posted: {e}");
    }
    if ok { "posted" } else { "failed" }
}

/// The status `plumb/preview` of `plans` on commit `head`: `failure` when a plan could
/// not be computed or would be refused, else `success`; the description counts what
/// would change (at most [`crate::forge::MAX_DESCRIPTION_CHARS`]).
pub fn commit_status(head: &str, plans: &[AppPlan]) -> CommitStatus {
    let failed: Vec<&str> = plans.iter().filter(|p| p.failed()).map(|p| p.app.as_str()).collect();
    let changing = plans.iter().filter(|p| p.changes()).count();
    let description = if !failed.is_empty() {
        format!("plan failed for {}", failed.join(", "))
    } else if plans.is_empty() {
        "no application changes".to_string()
    } else {
        format!("{changing} of {} applications would change", plans.len())
    };
    let description: String = description.chars().take(crate::forge::MAX_DESCRIPTION_CHARS).collect();
    CommitStatus {
        sha: head.to_string(),
        state: if failed.is_empty() { State::Success } else { State::Failure },
        context: "plumb/preview".into(),
        description,
    }
}

/// Where the previews of a pull request go: the policy's repository and, when it has
/// `commitStatus`, its forge target and `previewUrl`.
struct Destination {
    repository: String,
    target: Option<Target>,
    preview_url: Option<String>,
    /// `commitStatus.commentAuthor`.
    author: Option<String>,
}

/// The destination of `apps`'s previews: their repository (the first with a
/// `commitStatus`, else the first).
fn repository_of(ctx: &Context, apps: &[String]) -> Option<Destination> {
    let c = &ctx.config;
    let repos: Vec<_> = apps
        .iter()
        .filter_map(|name| c.applications.iter().find(|a| a.name.value == *name))
        .filter_map(|app| c.repositories.iter().find(|r| r.name.value == app.repository.value))
        .collect();
    let repo = repos.iter().find(|r| r.commit_status.is_some()).or(repos.first())?;
    let cs = repo.commit_status.as_ref();
    Some(Destination {
        repository: repo.name.value.clone(),
        target: cs.and_then(|cs| Target::new(cs, &repo.url.value).ok()).map(|t| Target { target_url: None, ..t }),
        preview_url: cs.and_then(|cs| cs.preview_url.clone()),
        author: cs.and_then(|cs| cs.comment_author.clone()),
    })
}
