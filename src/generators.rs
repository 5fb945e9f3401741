//! ApplicationSets with a `directories` or `pullRequests` generator, expanded from their
//! repositories (the pure expansion is [`crate::config::generators`]): the IO of reading
//! each set's directories from plumb's Git mirror or its open pull requests from the
//! forge ([`crate::forge::pulls`]), and, for `plumb serve`, noticing when a repository
//! moved or its pull requests changed.
//!
//! - **Expanding** ([`Expander::expand`]): each `directories` set is listed at the
//!   commit its revision names now ([`crate::source::Pool::directories`]) and expanded;
//!   its applications must validate with the rest of the policy. A set whose listing
//!   fails, or whose new applications do not validate (a directory named `Web_UI`), keeps
//!   the applications it generated before (at start: those its `Application` resources
//!   record, [`recorded`]; when there are none, the decommission loop leaves the
//!   resources naming the set alone, [`Config::unlisted_sets`]). A set that generated applications and now generates none
//!   is held at its previous ones ([`crate::config::generators::Held`]). Each of these is
//!   a log line and `plumb_application_set_held{set}` = 1.
//! - **Moving** ([`Expander::moved`]): on every reload tick, at most once per
//!   `ask_every` — or at once when the refs `plumb serve`'s passes read last (a
//!   webhook's pass) name a new commit — the remotes are asked for the sets' revisions
//!   (one `ls-remote` each; nothing downloaded or listed when the commit is the one
//!   expanded last); a changed
//!   commit is expanded, and a policy whose applications changed is returned, for
//!   `plumb serve` to restart its actors with as after a policy reload. A directory
//!   gone takes its application out of the policy: the decommission rules apply
//!   (orphaned by default; several at once held by the mass guard).
//! - **Pull requests**: a `pullRequests` set is listed again at every ask (at most once
//!   per `ask_every`: `plumb serve` asks at most every max(reload interval, 15 s)), and
//!   at the next tick after an authenticated pull request webhook (opened, closed,
//!   labelled: any action; [`crate::preview::queue::Queue::events`]), at most every
//!   [`EVENT_ASK_EVERY`]. A pull request closed or merged
//!   takes its application (a preview environment) out of the policy: its
//!   `deletionPolicy` (`delete` unless its template says otherwise) applies, behind the
//!   prune and mass guards (pull requests closed between two listings leave together
//!   and are held until confirmed; the listing soon after each pull request webhook
//!   keeps that window short). A listing that fails (the forge answers 500, the token is
//!   refused, more than [`crate::forge::pulls::MAX_OPEN_PULLS`]) keeps the set's previous
//!   applications — at start, when it has none, the resources naming the set are left
//!   alone ([`Config::unlisted_sets`]) — so an outage never deletes preview
//!   environments; an empty list in a successful answer removes the last one.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    config::{
        Application, Config,
        generators::{self, ApplicationSet, Generator, Listing},
    },
    forge::{HttpClient, Target, pulls},
    metrics::Metrics,
    source::Pool,
};

/// The shortest time between two listings a pull request webhook brings forward (5 s):
/// however many events arrive, the forges are asked at most this often.
pub const EVENT_ASK_EVERY: Duration = Duration::from_secs(5);

/// Expands the `directories` sets of a policy from their repositories and remembers
/// the commits it expanded.
pub struct Expander {
    pool: Pool,
    ask_every: Duration,
    asked: Option<Instant>,
    /// The commit each set was last listed at, by set name.
    commits: BTreeMap<String, String>,
    /// The last commit [`Expander::seen_moved`] acted on, by set name.
    peeked: BTreeMap<String, String>,
    /// The pull request events counted when the forges were last asked.
    pull_events: u64,
    /// The client asking forges for pull requests (built when a `pullRequests` set
    /// exists and the client can be).
    client: Option<HttpClient>,
}

/// What one application of a policy is, for telling whether an expansion changed
/// anything.
fn fingerprint(apps: &[Application]) -> Vec<[&str; 8]> {
    let mut out: Vec<[&str; 8]> = apps
        .iter()
        .map(|a| {
            [
                a.name.value.as_str(),
                a.repository.value.as_str(),
                a.revision.value.as_str(),
                a.path.value.as_str(),
                a.namespace.value.as_str(),
                a.environment.value.as_str(),
                a.application_set.as_deref().unwrap_or(""),
                if a.held.is_some() { "held" } else { "" },
            ]
        })
        .collect();
    out.sort_unstable();
    out
}

impl Expander {
    /// An expander keeping its own mirrors under `cache_dir` (the directory of
    /// `plumb serve`'s mirrors: the same repositories), asking the remotes at most
    /// every `ask_every` in [`Expander::moved`].
    pub fn new(cache_dir: &Path, config: &Config, ask_every: Duration) -> Self {
        // the sets list directories and resolve revisions, never render: the pool needs
        // the repositories, not a copy of every application
        let repositories = Config { applications: Vec::new(), ..config.clone() };
        let pool = Pool::new(cache_dir.to_path_buf(), Arc::new(repositories)).with_limits(config.settings.limits);
        let client = if Self::asks_forge(config) {
            HttpClient::new()
                .inspect_err(|e| tracing::error!("applicationSets: no HTTP client to list pull requests: {e}"))
                .ok()
        } else {
            None
        };
        Self { pool, ask_every, asked: None, commits: BTreeMap::new(), peeked: BTreeMap::new(), pull_events: 0, client }
    }

    /// Whether `config` has a `directories` or `pullRequests` set (else there is nothing
    /// to do).
    pub fn needed(config: &Config) -> bool {
        config.application_sets.iter().any(|s| !matches!(s.generator, Generator::List(_)))
    }

    /// Whether `config` has a `pullRequests` set (listed again at every ask).
    pub fn asks_forge(config: &Config) -> bool {
        config.application_sets.iter().any(|s| matches!(s.generator, Generator::PullRequests(_)))
    }

    /// What set `set` of `config` lists now: its directories (from the mirror) or its
    /// open pull requests (from the forge); `None` for a `list` set or when the listing
    /// fails (logged: its previous applications stay).
    async fn list(&self, config: &Config, set: &ApplicationSet) -> Option<Listing> {
        let name = &set.name.value;
        match &set.generator {
            Generator::List(_) => None,
            Generator::Directories(d) => {
                let repo = config.repositories.iter().find(|r| r.name.value == d.repository.value)?;
                match self.pool.directories(repo, &d.revision.value, d.depth()).await {
                    Ok(l) => Some(l),
                    Err(e) => {
                        tracing::error!(set = %name, "applicationSet `{name}`: listing the directories of repository `{}` at `{}` failed, its previous applications stay: {e}", d.repository.value, d.revision.value);
                        None
                    }
                }
            }
            Generator::PullRequests(p) => {
                let repo = config.repositories.iter().find(|r| r.name.value == p.repository.value)?;
                let listed = match (&repo.commit_status, &self.client) {
                    (Some(cfg), Some(client)) => match Target::new(cfg, &repo.url.value) {
                        Ok(target) => pulls::open_pulls(&target, client).await.map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    },
                    _ => Err("no commitStatus block or no HTTP client".to_string()),
                };
                match listed {
                    Ok(pulls) => Some(Listing { commit: String::new(), directories: Vec::new(), pulls }),
                    Err(e) => {
                        tracing::error!(set = %name, "applicationSet `{name}`: listing the open pull requests of repository `{}` failed, its previous applications stay: {e}", p.repository.value);
                        None
                    }
                }
            }
        }
    }

    /// Expands every `directories` and `pullRequests` set of `config` from its repository
    /// or forge, keeping what
    /// each generated in `previous` (by set name: [`generators::generated_by_set`] of the
    /// policy in force) where the new expansion cannot be used (see the module docs).
    /// `files`: whether validation checks that secret files exist (as the loader did).
    pub async fn expand(
        &mut self,
        config: &mut Config,
        previous: &BTreeMap<String, Vec<Application>>,
        files: bool,
        metrics: &Metrics,
    ) {
        let mut accepted: BTreeMap<String, Listing> = BTreeMap::new();
        let mut held: BTreeMap<String, bool> = BTreeMap::new();
        for set in &config.application_sets {
            if matches!(set.generator, Generator::List(_)) {
                continue;
            }
            let name = set.name.value.clone();
            held.insert(name.clone(), true);
            let Some(listing) = self.list(config, set).await else { continue };
            let commit = listing.commit.clone();
            let at = if commit.is_empty() { "the open pull requests".to_string() } else { format!("commit {commit}") };
            if !commit.is_empty() {
                self.commits.insert(name.clone(), commit.clone());
            }
            let mut trial = config.clone();
            let mut with = accepted.clone();
            with.insert(name.clone(), listing);
            let expansion = generators::expand_into(&mut trial, &with, previous);
            let mut problems: Vec<String> = expansion.problems.iter().map(ToString::to_string).collect();
            problems.extend(crate::config::validate_with(&trial, files).iter().map(ToString::to_string));
            if problems.is_empty() {
                accepted = with;
                held.insert(name, expansion.held.iter().any(|h| h.set == set.name.value));
            } else {
                tracing::error!(set = %name, "applicationSet `{name}`: its applications at {at} are rejected, its previous applications stay:\n{}", problems.join("\n"));
            }
        }
        let expansion = generators::expand_into(config, &accepted, previous);
        for h in &expansion.held {
            tracing::warn!(set = %h.set, "{}", h.reason);
        }
        config.unlisted_sets = expansion.unlisted.iter().filter(|s| !previous.contains_key(*s)).cloned().collect();
        for (set, is_held) in held {
            metrics.application_set_held.get_or_create(&vec![("set".to_string(), set.clone())]).set(i64::from(is_held));
            let n = expansion.generated.get(&set).copied().unwrap_or(0);
            metrics
                .application_set_applications
                .get_or_create(&vec![("set".to_string(), set)])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Resolves when a `directories` set's repository moved, or a `pullRequests` set's
    /// open pull requests changed, and the expansion changes the applications of
    /// `running` (the policy in force, expanded): checked every
    /// `tick`, the remotes asked at most every `ask_every`, or at once when the refs the
    /// passes read (`passes`) name a new commit or a pull request event was
    /// authenticated (`pulls` counts them). Never resolves when `running`
    /// has no `directories` or `pullRequests` set. The caller expands again ([`Expander::expand`]) and
    /// restarts with the result.
    pub async fn moved(
        &mut self,
        running: &Config,
        (passes, pulls): (&Pool, &crate::preview::queue::Queue),
        tick: Duration,
        metrics: &Metrics,
    ) {
        if !Self::needed(running) {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(tick).await;
            let events = pulls.events();
            let asked_within = |d: Duration| self.asked.is_some_and(|at| at.elapsed() < d);
            let pulled = events != self.pull_events && Self::asks_forge(running) && !asked_within(EVENT_ASK_EVERY);
            if asked_within(self.ask_every) && !self.seen_moved(running, passes) && !pulled {
                continue;
            }
            self.asked = Some(Instant::now());
            self.pull_events = events;
            if !self.any_moved(running).await && running.unlisted_sets.is_empty() && !Self::asks_forge(running) {
                continue;
            }
            let mut next = running.clone();
            self.expand(&mut next, &generators::generated_by_set(running), true, metrics).await;
            if fingerprint(&next.applications) != fingerprint(&running.applications)
                || next.unlisted_sets != running.unlisted_sets
            {
                tracing::info!(
                    "applicationSets: a repository moved and the generated applications changed: restarting with them"
                );
                return;
            }
        }
    }

    /// Whether the refs the passes read last (`passes`: the pool of `plumb serve`'s
    /// passes, whose webhook-triggered passes ask the remote at once) name another commit
    /// for a set's revision than it was listed at: no IO ([`Pool::peek`]), so a push
    /// announced by a webhook is expanded at the next tick rather than the next ask.
    /// Each commit seen so once: an advertisement older than the last listing does not
    /// ask again at every tick.
    fn seen_moved(&mut self, config: &Config, passes: &Pool) -> bool {
        let since = crate::source::Freshness::Within(self.ask_every).since(Instant::now());
        let mut seen = false;
        for set in &config.application_sets {
            let Generator::Directories(d) = &set.generator else { continue };
            let Some(repo) = config.repositories.iter().find(|r| r.name.value == d.repository.value) else { continue };
            let Some(commit) = passes.peek(repo, &d.revision.value, since) else { continue };
            let name = &set.name.value;
            if self.commits.get(name).is_some_and(|c| *c != commit) && self.peeked.get(name) != Some(&commit) {
                self.peeked.insert(name.clone(), commit);
                seen = true;
            }
        }
        seen
    }

    /// Whether a `directories` set's revision names another commit than it was listed
    /// at (one `ls-remote` per set; a failure counts as not moved).
    async fn any_moved(&self, config: &Config) -> bool {
        for set in &config.application_sets {
            let Generator::Directories(d) = &set.generator else { continue };
            let Some(repo) = config.repositories.iter().find(|r| r.name.value == d.repository.value) else { continue };
            match self.pool.resolve(repo, &d.revision.value).await {
                Ok(commit) if self.commits.get(&set.name.value) != Some(&commit) => return true,
                Ok(_) => {}
                Err(e) => tracing::warn!(set = %set.name.value, "applicationSet `{}`: {e}", set.name.value),
            }
        }
        false
    }
}

/// What the `directories` sets of `config` generated before this process started, read
/// from the `Application` resources in `store` (see
/// [`generators::recorded_by_set`]); empty when they cannot be read (logged).
pub async fn recorded(store: &crate::status::store::Store, config: &Config) -> BTreeMap<String, Vec<Application>> {
    if !Expander::needed(config) {
        return BTreeMap::new();
    }
    let resources = match store.list_resources().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(
                "applicationSets: the Application resources cannot be read, no earlier applications known: {e}"
            );
            return BTreeMap::new();
        }
    };
    let recorded: Vec<(String, String)> = resources
        .iter()
        .filter_map(|r| {
            let spec = &r.data["spec"];
            Some((spec["applicationSet"].as_str()?.to_string(), spec["path"].as_str()?.to_string()))
        })
        .collect();
    generators::recorded_by_set(config, &recorded)
}

/// For one-shot commands (`diff`, `sync`, `render`): expands the `directories` sets of
/// `config` from their repositories (mirrors under `cache_dir`, fetched now). A set
/// whose listing fails is left unexpanded, with a warning naming it: a command about
/// another application still runs.
///
/// # Errors
/// The applications the listed directories generate do not validate: every problem,
/// each naming its set (file:line).
pub async fn expand_once(config: &mut Config, cache_dir: &Path) -> anyhow::Result<()> {
    if !Expander::needed(config) {
        return Ok(());
    }
    let pool = Pool::new(cache_dir.to_path_buf(), Arc::new(config.clone())).with_limits(config.settings.limits);
    let mut listings = BTreeMap::new();
    for set in &config.application_sets {
        let Generator::Directories(d) = &set.generator else { continue };
        let Some(repo) = config.repositories.iter().find(|r| r.name.value == d.repository.value) else { continue };
        match pool.directories(repo, &d.revision.value, d.depth()).await {
            Ok(listing) => {
                listings.insert(set.name.value.clone(), listing);
            }
            Err(e) => tracing::warn!(
                "applicationSet `{}`: listing the directories of repository `{}` at `{}` failed, its applications are unknown here: {e}",
                set.name.value,
                d.repository.value,
                d.revision.value
            ),
        }
    }
    let expansion = generators::expand_into(config, &listings, &BTreeMap::new());
    let mut problems: Vec<String> = expansion.problems.iter().map(ToString::to_string).collect();
    problems.extend(crate::config::validate_with(config, false).iter().map(ToString::to_string));
    anyhow::ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}
