//! Command line: `plumb serve | diff | render | sync | status | history | validate | webhook replay`.

mod day2;
mod render;

use std::{
    io::IsTerminal,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
    time::Instant,
};

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::serve::Listeners;
use crate::{
    cluster::Cluster,
    compare::{ObjectReason, diff::unified},
    config::{self, Config},
    metrics::Metrics,
    reconcile::{Context, Mode},
    server,
    status::ConditionType,
};

/// plumb keeps a Kubernetes cluster equal to a Git repository.
#[derive(Parser, Debug)]
#[command(name = "plumb", version, about)]
pub struct Cli {
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info`, `plumb=debug`; when
    /// neither this nor `PLUMB_LOG` is given, `RUST_LOG`, else `info`.
    #[arg(long, env = "PLUMB_LOG", global = true)]
    pub log: Option<String>,
    /// Log lines as `text` (for people) or `json` (one object per line, for log
    /// collectors).
    #[arg(long, env = "PLUMB_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"], global = true)]
    pub log_format: String,
    #[command(subcommand)]
    command: Command,
}

/// Options shared by commands that talk to the cluster.
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Policy file.
    #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
    pub config: PathBuf,
    /// kubeconfig file; default: `KUBECONFIG`, `~/.kube/config`, or in-cluster.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Directory of the Git mirrors (created when missing).
    #[arg(long, env = "PLUMB_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// Leader election options of `plumb serve` (see [`crate::leader`]).
#[derive(clap::Args, Debug, Clone)]
pub struct LeaseArgs {
    /// Run as one replica among several: only the holder of the Lease runs passes.
    #[arg(long, env = "PLUMB_LEADER_ELECT")]
    pub leader_elect: bool,
    /// Namespace of the Lease; default: the policy's status namespace.
    #[arg(long, env = "PLUMB_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Name of the Lease.
    #[arg(long, env = "PLUMB_LEASE_NAME", default_value = "plumb")]
    pub lease_name: String,
    /// This replica's identity in the Lease; default: `POD_NAME`, else host name and
    /// process id.
    #[arg(long, env = "PLUMB_IDENTITY")]
    pub identity: Option<String>,
    /// Seconds the Lease stays valid without renewal: a killed leader is replaced
    /// after about this long.
    #[arg(long, default_value_t = 10)]
    pub lease_duration: u64,
    /// Seconds before expiry at which the leader renews (the clock skew tolerated).
    #[arg(long, default_value_t = 3)]
    pub lease_grace: u64,
}

impl LeaseArgs {
    /// The Lease options, or `None` without `--leader-elect`.
    pub fn options(&self, status_namespace: &str) -> Option<crate::leader::LeaseOptions> {
        self.leader_elect.then(|| crate::leader::LeaseOptions {
            namespace: self.lease_namespace.clone().unwrap_or_else(|| status_namespace.to_string()),
            name: self.lease_name.clone(),
            identity: self.identity.clone().unwrap_or_else(crate::leader::default_identity),
            duration_seconds: self.lease_duration,
            grace_seconds: self.lease_grace,
        })
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the reconciler: one actor per application, the webhook receiver and the API.
    Serve {
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Address of the public listener (the webhook; no token, deliveries are signed).
        #[arg(long, env = "PLUMB_LISTEN", default_value = "0.0.0.0:8080")]
        listen: SocketAddr,
        /// Address of the internal listener (status API and metrics): every request
        /// needs a Kubernetes bearer token whose user holds the route's right.
        #[arg(long, env = "PLUMB_INTERNAL_LISTEN", default_value = "0.0.0.0:8082")]
        internal_listen: SocketAddr,
        /// Address of the probes (`/healthz`, `/readyz`), apart from the webhook's limits.
        #[arg(long, env = "PLUMB_PROBE_LISTEN", default_value = "0.0.0.0:8081")]
        probe_listen: SocketAddr,
        #[command(flatten)]
        lease: LeaseArgs,
        /// Seconds between two reads of the policy file; a changed, valid policy is
        /// applied without a restart, an invalid one is rejected (logged, metric).
        #[arg(long, env = "PLUMB_RELOAD_EVERY", default_value_t = 5)]
        reload_every: u64,
        /// Outgoing webhook (Slack-compatible `{"text": …}` POST) told of failed and
        /// refused syncs and of applications becoming Degraded.
        #[arg(long, env = "PLUMB_NOTIFY_URL")]
        notify_url: Option<String>,
    },
    /// Show how the live cluster differs from Git. Exit code as `kubectl diff`:
    /// 0 no differences, 1 differences, >1 error.
    Diff {
        /// Application.
        app: String,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Compare this commit (or branch/tag) instead of the configured revision.
        #[arg(long)]
        revision: Option<String>,
        /// Output: `text` (unified diff) or `json`.
        #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json"])]
        output: String,
    },
    /// Print the rendered objects of one application (Secret values masked) as a YAML
    /// stream; the tool, its version and the render time on standard error. Needs no
    /// cluster. Exit 0, or 2 when the source cannot be fetched or rendered.
    Render {
        /// Application.
        app: String,
        /// Policy file.
        #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
        config: PathBuf,
        /// Directory of the Git mirrors (created when missing).
        #[arg(long, env = "PLUMB_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
        /// Render this commit (or branch/tag) instead of the configured revision.
        #[arg(long)]
        revision: Option<String>,
    },
    /// Sync one application now, whatever its policy, and print what was done.
    Sync {
        /// Application.
        app: String,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Also delete objects Git no longer declares (default: the policy's `prune`).
        #[arg(long)]
        prune: Option<bool>,
        /// Print the plan; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Approve deleting objects that need it: `Prune=confirm`, PersistentVolumeClaims,
        /// Namespaces, CustomResourceDefinitions.
        #[arg(long)]
        approve: bool,
        /// After syncing, wait until the application is Synced and Healthy (exit 0),
        /// Degraded (exit 1, printing the causes) or the timeout passes (exit 1, printing
        /// what is still Progressing); a fetch, render or comparison error stops the wait
        /// at once (exit 2, printing it). The status stored in the cluster says what
        /// the wait printed.
        #[arg(long)]
        wait: bool,
        /// Longest wait with `--wait`, and for later sync waves (e.g. 90s, 5m).
        #[arg(long, default_value = "5m", value_parser = config::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Delete what Git no longer declares in one application now (`plumb sync APP
    /// --prune true`); with `--approve` also the objects that wait for an approval.
    Prune {
        /// Application.
        app: String,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Approve deleting `Prune=confirm` objects, PersistentVolumeClaims, Namespaces
        /// and CustomResourceDefinitions.
        #[arg(long)]
        approve: bool,
        /// Print the plan; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Longest wait for later sync waves and PruneLast (e.g. 90s, 5m).
        #[arg(long, default_value = "5m", value_parser = config::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Table of every application: environment, revision, sync, health, last sync.
    Status {
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// The last syncs of one application, newest first.
    History {
        /// Application.
        app: String,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Pause automated sync and selfHeal of an application until a time (a manual
    /// `plumb sync` still runs); it resumes by itself. Exit code 0 when recorded.
    Suspend {
        /// Application.
        app: String,
        /// How long (e.g. 30m, 2h).
        #[arg(long = "for", value_parser = config::parse_duration)]
        duration: std::time::Duration,
        /// Why (shown in the status, the Event and the status page).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        target: day2::Target,
    },
    /// End a pause early.
    Resume {
        /// Application.
        app: String,
        #[command(flatten)]
        target: day2::Target,
    },
    /// Sync a recorded revision and pin the application there: new commits of the
    /// tracked ref are not synced until `--release` (or the next commit with
    /// `--until-next-commit`). The server refuses a revision that is not an ancestor of
    /// the tracked ref unless `--force`. Exit code 0 when recorded.
    Rollback {
        /// Application.
        app: String,
        /// A commit SHA (or prefix), or N for the Nth entry of `plumb history` (1 =
        /// newest); default: the previous successfully synced revision.
        revision: Option<String>,
        /// Release the pin.
        #[arg(long, conflicts_with_all = ["revision", "until_next_commit", "force"])]
        release: bool,
        /// Release the pin by itself when the tracked ref moves.
        #[arg(long)]
        until_next_commit: bool,
        /// Allow a revision that is not an ancestor of the tracked ref.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        target: day2::Target,
    },
    /// Check policy files; list every problem with file and line.
    Validate {
        /// Policy files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Webhook tools.
    Webhook {
        #[command(subcommand)]
        command: WebhookCommand,
    },
}

/// `plumb webhook …`
#[derive(Subcommand, Debug)]
enum WebhookCommand {
    /// Run one recorded delivery (e.g. copied from the forge's delivery history) through
    /// the server's webhook code, without duplicate detection and without starting a
    /// pass, and print the decision as JSON. Exit code 0 when the server would answer
    /// 2xx, 1 otherwise.
    Replay {
        /// Policy file (repositories, secrets, applications).
        #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
        config: PathBuf,
        /// Request headers, one `Name: value` per line (a leading request line such as
        /// `POST /api/webhook HTTP/1.1` and blank lines are skipped).
        #[arg(long)]
        headers: PathBuf,
        /// The raw request body, byte for byte.
        #[arg(long)]
        body: PathBuf,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log.as_deref(), &cli.log_format);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Logs to stderr: `filter` (`--log`/`PLUMB_LOG`), else `RUST_LOG`, else `info`; as
/// text or, with `format` `json`, one JSON object per line.
fn init_tracing(filter: Option<&str>, format: &str) {
    let filter = filter.map(str::to_string).or_else(|| std::env::var("RUST_LOG").ok()).unwrap_or_else(|| "info".into());
    let filter =
        tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.with_ansi(std::io::stderr().is_terminal()).try_init()
    };
}

/// Loads the policy and connects to the cluster.
///
/// # Errors
/// Invalid policy, unreachable cluster.
pub async fn context(args: &ClusterArgs, watches: bool) -> anyhow::Result<Arc<Context>> {
    let mut config = config::load(&args.config)?;
    let cluster = Cluster::connect(args.kubeconfig.as_deref()).await?;
    let cache = args.cache_dir.clone().unwrap_or_else(|| std::env::temp_dir().join("plumb-repos"));
    std::fs::create_dir_all(&cache).with_context(|| format!("cache dir {}", cache.display()))?;
    if crate::secret_refs::any(&config) {
        crate::secret_refs::materialize(cluster.client(), &mut config, &cache.join(".secrets")).await?;
    }
    let mut ctx = Context::new(cluster, Arc::new(config), cache, Arc::new(Metrics::default()));
    if watches {
        ctx = ctx.with_watches();
    }
    ctx.store.ensure_namespace().await?;
    Ok(Arc::new(ctx))
}

async fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Serve { cluster, listen, internal_listen, probe_listen, lease, reload_every, notify_url } => {
            let config = config::load(&cluster.config)?;
            let metrics = Arc::new(Metrics::default());
            let cache = cluster.cache_dir.clone().unwrap_or_else(|| std::env::temp_dir().join("plumb-repos"));
            std::fs::create_dir_all(&cache).with_context(|| format!("cache dir {}", cache.display()))?;
            let process = crate::serve::Process {
                kubeconfig: cluster.kubeconfig.clone(),
                policy: cluster.config.clone(),
                cache_dir: cache,
                listen: Listeners { public: listen, internal: internal_listen, probes: probe_listen },
                lease: lease.options(&config.settings.status_namespace),
                reload_every: std::time::Duration::from_secs(reload_every.max(1)),
                notify_url,
            };
            let ended = crate::serve::run(process, metrics, shutdown_signal()).await?;
            // A leader that lost its Lease exits non-zero: the pod restarts as a follower.
            Ok(if ended == crate::serve::Ended::LostLease { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Render { app, config, cache_dir, revision } => {
            let cache = cache_dir.unwrap_or_else(|| std::env::temp_dir().join("plumb-repos"));
            std::fs::create_dir_all(&cache).with_context(|| format!("cache dir {}", cache.display()))?;
            render::run(&config, &cache, &app, revision.as_deref()).await
        }
        Command::Diff { app, cluster, revision, output } => {
            let ctx = context(&cluster, false).await?;
            let report = ctx.run_pass(&app, Mode::CompareOnly, revision.as_deref()).await?;
            let differs = report.diffs.iter().any(|d| !d.reason.is_empty());
            for c in report.status.conditions.iter().filter(|c| c.type_ == ConditionType::RenderWarning) {
                eprintln!("warning: {}", c.message);
            }
            if report.status.sync == crate::compare::SyncStatus::Unknown {
                for c in &report.status.conditions {
                    eprintln!("{}: {}", c.type_, c.message);
                }
                return Ok(ExitCode::from(2));
            }
            if output == "json" {
                println!("{}", serde_json::to_string_pretty(&report.diffs)?);
            } else {
                let color = std::io::stdout().is_terminal();
                for d in &report.diffs {
                    if d.reason.is_empty() {
                        continue;
                    }
                    println!("# {} ({})", d.object, d.reason);
                    let text = if d.verdict.is_none() {
                        String::new()
                    } else {
                        // both sides come masked (compare::sensitive)
                        unified(&d.object, &d.desired, d.live.as_ref())
                    };
                    for line in text.lines() {
                        match (color, line.chars().next()) {
                            (true, Some('+')) if !line.starts_with("+++") => {
                                println!("\x1b[32m{line}\x1b[0m")
                            }
                            (true, Some('-')) if !line.starts_with("---") => {
                                println!("\x1b[31m{line}\x1b[0m")
                            }
                            _ => println!("{line}"),
                        }
                    }
                }
            }
            Ok(ExitCode::from(u8::from(differs)))
        }
        Command::Sync { app, cluster, prune, dry_run, approve, wait, timeout } => {
            let ctx = context(&cluster, false).await?;
            let policy_prune = ctx
                .config
                .applications
                .iter()
                .find(|a| a.name.value == app)
                .and_then(|a| ctx.config.environments.iter().find(|e| e.name.value == a.environment.value))
                .is_some_and(|e| e.sync_policy.prune);
            sync_command(&ctx, &app, prune.unwrap_or(policy_prune), approve, dry_run, wait.then_some(timeout), timeout)
                .await
        }
        Command::Prune { app, cluster, approve, dry_run, timeout } => {
            let ctx = context(&cluster, false).await?;
            sync_command(&ctx, &app, true, approve, dry_run, None, timeout).await
        }
        Command::Suspend { app, duration, reason, target } => day2::suspend(&app, duration, &reason, &target).await,
        Command::Resume { app, target } => day2::resume(&app, &target).await,
        Command::Rollback { app, revision, release, until_next_commit, force, target } => {
            day2::rollback(&app, revision.as_deref(), (release, until_next_commit, force), &target).await
        }
        Command::Status { cluster } => {
            let config = config::load(&cluster.config)?;
            let client = crate::cluster::client(cluster.kubeconfig.as_deref()).await?;
            let store = crate::status::Store::new(client, &config.settings.status_namespace);
            print!("{}", status_table(&config, &store.list().await?));
            Ok(ExitCode::SUCCESS)
        }
        Command::History { app, cluster } => {
            let config = config::load(&cluster.config)?;
            let client = crate::cluster::client(cluster.kubeconfig.as_deref()).await?;
            let store = crate::status::Store::new(client, &config.settings.status_namespace);
            if !config.applications.iter().any(|a| a.name.value == app) {
                anyhow::bail!("no application '{app}' in the policy");
            }
            let (_, history) = store.load(&app).await?;
            for r in history {
                println!(
                    "{}  {}  {:<9} {:<11} {}  (+{} -{}) {}",
                    r.finished_at,
                    short(&r.revision),
                    format!("{:?}", r.result),
                    r.reason,
                    r.subject,
                    // stored records name at most 100 objects; the counts cover all
                    r.applied.len() + r.applied_omitted,
                    r.pruned.len() + r.pruned_omitted,
                    r.message
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Validate { files } => {
            let mut ok = true;
            for f in &files {
                match config::load(f) {
                    Ok(c) => println!(
                        "{}: ok ({} applications, {} environments, {} repositories)",
                        f.display(),
                        c.applications.len(),
                        c.environments.len(),
                        c.repositories.len()
                    ),
                    Err(e) => {
                        ok = false;
                        eprintln!("{e}");
                    }
                }
            }
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Webhook { command: WebhookCommand::Replay { config, headers, body } } => {
            let report = replay(&config, &headers, &body)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            let status = report.get("http_status").and_then(serde_json::Value::as_u64).unwrap_or(0);
            Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

/// `plumb sync` / `plumb prune`: previews (`dry_run`) or syncs, going on while later
/// sync waves wait for earlier ones to become Healthy (at most `timeout`), then waits
/// for health when `wait` is given.
async fn sync_command(
    ctx: &Context,
    app: &str,
    prune: bool,
    approve: bool,
    dry_run: bool,
    wait: Option<std::time::Duration>,
    timeout: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    use crate::status::SyncResult;
    if dry_run {
        let report = ctx.run_pass(app, Mode::Preview { prune, approve }, None).await?;
        print!("{}", preview(&report));
        let bad = report.status.sync == crate::compare::SyncStatus::Unknown || report.plan.refused.is_some();
        return Ok(ExitCode::from(u8::from(bad)));
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut report = ctx.run_pass(app, Mode::Manual { prune, approve }, None).await?;
    let mut said = String::new();
    while let Some(r) = report.sync.as_ref().filter(|r| r.result == SyncResult::Running) {
        if r.message != said {
            let (a, p) = (r.applied.len(), r.pruned.len());
            println!("{app} {}: {} (so far applied {a}, pruned {p})", short(&r.revision), r.message);
            said.clone_from(&r.message);
        }
        if tokio::time::Instant::now() >= deadline {
            println!("{app}: sync still running after {timeout:?}");
            return Ok(ExitCode::from(1));
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        report = ctx.run_pass(app, Mode::Manual { prune, approve }, None).await?;
    }
    if let Some(timeout) = wait {
        return wait_for_health(ctx, app, report, timeout).await;
    }
    match &report.sync {
        Some(r) => {
            println!("{} {} \"{}\": {:?}", app, short(&r.revision), r.subject, r.result);
            for a in &r.applied {
                println!("  applied {a}");
            }
            for p in &r.pruned {
                println!("  pruned  {p}");
            }
            for (object, why) in &report.plan.skipped {
                println!("  skipped {object}: {why}");
            }
            if !r.message.is_empty() {
                println!("  {}", r.message);
            }
            Ok(if r.result == SyncResult::Succeeded { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        None => {
            println!("{app}: {} {}, nothing to sync", report.status.sync, short(&report.status.revision));
            for c in &report.status.conditions {
                println!("  {}: {}", c.type_, c.message);
            }
            Ok(if report.status.sync == crate::compare::SyncStatus::Unknown {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// The plan of a preview, in the order a sync runs it: per wave, what would be
/// created or updated (with the differing paths); then what would be pruned (with its
/// data-loss class) and what is skipped and why; errors; a refusal.
pub fn preview(report: &crate::reconcile::PassReport) -> String {
    use std::fmt::Write as _;
    let p = &report.plan;
    let mut out = String::new();
    if let Some(r) = &p.refused {
        let _ = writeln!(out, "refused  {r}");
    }
    let multi = p.waves.len() > 1;
    for w in &p.waves {
        let mut header = multi.then(|| format!("wave {}:", w.wave));
        for &i in &w.members {
            let d = &report.diffs[i];
            let unknown = report.status.resources.get(i).is_some_and(|r| r.sync == crate::compare::SyncStatus::Unknown);
            if !unknown && !w.apply.contains(&i) {
                continue; // Synced: nothing to do
            }
            let line = if unknown {
                format!("error    {}  {}", d.object, d.reason)
            } else if d.live.is_none() {
                let why =
                    if d.verdict == Some(ObjectReason::Missing) { String::new() } else { format!("  ({})", d.reason) };
                format!("create   {}{why}", d.object)
            } else if matches!(d.verdict, Some(ObjectReason::Immutable(_))) && p.recreate.contains(&i) {
                format!("recreate {}  delete and create (Force=true): {}", d.object, d.reason)
            } else if matches!(d.verdict, Some(ObjectReason::Immutable(_))) {
                format!("error    {}  {}", d.object, d.reason)
            } else if d.verdict == Some(ObjectReason::Synced) {
                format!("apply    {}  (ApplyOutOfSyncOnly=false)", d.object)
            } else {
                let paths: Vec<&str> = d.differences.iter().map(|x| x.path.as_str()).collect();
                format!("update   {}  {}", d.object, paths.join(", "))
            };
            if let Some(h) = header.take() {
                let _ = writeln!(out, "{h}");
            }
            let _ = writeln!(out, "{}{line}", if multi { "  " } else { "" });
        }
    }
    for c in &p.prune {
        let class =
            crate::plan::data_loss_class(&c.key.group, &c.key.kind).map_or(String::new(), |k| format!("  [{k}]"));
        let _ = writeln!(out, "prune    {}{class}", c.key);
    }
    for c in &p.prune_last {
        let _ = writeln!(out, "prune    {}  (PruneLast: once everything is Healthy)", c.key);
    }
    for (object, why) in &p.skipped {
        let _ = writeln!(out, "skip     {object}  {why}");
    }
    for c in report.status.conditions.iter().filter(|c| c.type_ == ConditionType::OrphanedResourceWarning) {
        let _ = writeln!(out, "warning  {}", c.message);
    }
    if out.is_empty() {
        out.push_str("nothing to do: Synced\n");
    }
    out
}

/// `plumb sync --wait`: prints the sync, then re-compares every 2 s until the app is
/// Synced and Healthy (exit 0), something is Degraded (exit 1) or `timeout` passes
/// (exit 1).
async fn wait_for_health(
    ctx: &Context,
    app: &str,
    first: crate::reconcile::PassReport,
    timeout: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    use crate::{compare::SyncStatus, health::HealthStatus};
    if let Some(r) = &first.sync {
        println!(
            "{app} {} \"{}\": {:?} (applied {}, pruned {})",
            short(&r.revision),
            r.subject,
            r.result,
            r.applied.len(),
            r.pruned.len()
        );
        if r.result != crate::status::SyncResult::Succeeded {
            println!("  {}", r.message);
            if first.status.sync != SyncStatus::Unknown {
                return Ok(ExitCode::from(1));
            }
        }
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut r = first;
    loop {
        let st = &r.status;
        match (st.sync, st.health) {
            // waiting does not mend a fetch, render or comparison error
            (SyncStatus::Unknown, _) => {
                println!("{app}: {} at {}", st.sync, short(&st.revision));
                for c in &st.conditions {
                    println!("  {}: {}", c.type_, c.message);
                }
                return Ok(ExitCode::from(2));
            }
            (SyncStatus::Synced, HealthStatus::Healthy) => {
                println!("{app}: Synced and Healthy at {}", short(&st.revision));
                return Ok(ExitCode::SUCCESS);
            }
            (_, HealthStatus::Degraded) => {
                println!("{app}: Degraded");
                for x in st.resources.iter().filter(|x| x.health == HealthStatus::Degraded) {
                    println!("  {}: {}", x.object, x.health_message);
                }
                return Ok(ExitCode::from(1));
            }
            _ if tokio::time::Instant::now() >= deadline => {
                println!("{app}: still {} / {} after {timeout:?}", st.sync, st.health);
                for x in
                    st.resources.iter().filter(|x| x.health != HealthStatus::Healthy || x.sync != SyncStatus::Synced)
                {
                    let why = [x.reason.as_str(), x.health_message.as_str()]
                        .into_iter()
                        .filter(|t| !t.is_empty())
                        .collect::<Vec<_>>()
                        .join("; ");
                    println!("  {}: {} {} {why}", x.object, x.sync, x.health);
                }
                return Ok(ExitCode::from(1));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
        r = ctx.run_pass(app, Mode::Observe, None).await?;
    }
}

/// `plumb webhook replay`: the decision of the server for one recorded delivery, as JSON:
///
/// ```json
/// {"provider": "gitea", "event": "push", "event_type": "push", "delivery_id": "…",
///  "verification": {"valid": true, "scheme": "hmac-sha256-hex", "header": "X-Gitea-Signature",
///                   "signed_bytes": "raw_body", "failure": null},
///  "reason": "push to a watched ref; reconcile requested",
///  "repository_key": "gitea.example.invalid/acme/fleet", "repository_urls": ["…"],
///  "ref": "refs/heads/main", "ref_kind": "branch", "before": "…", "after": "…",
///  "target_commit": "…", "changed_paths": ["…"], "file_lists_complete": true,
///  "applications": ["web"], "skipped_by_path_filter": [], "action": "reconcile",
///  "http_status": 202}
/// ```
///
/// Runs [`server::Intake::handle`] on the receiver of [`server::receiver`], exactly what
/// `POST /api/webhook` runs, with duplicate detection off and a queue nobody drains.
///
/// # Errors
/// Unreadable or invalid policy, secret, headers or body file.
pub fn replay(config: &Path, headers: &Path, body: &Path) -> anyhow::Result<serde_json::Value> {
    let config = config::load(config)?;
    let receiver = server::receiver(&config).map_err(anyhow::Error::msg)?;
    let text = std::fs::read_to_string(headers).with_context(|| format!("headers file {}", headers.display()))?;
    let headers = parse_headers(&text).map_err(|e| anyhow::anyhow!("headers file {}: {e}", headers.display()))?;
    let body = std::fs::read(body).with_context(|| format!("body file {}", body.display()))?;
    let (intake, _queue) = server::Intake::new(receiver, None, 1, Arc::new(Metrics::default()));
    let outcome = intake.handle(&headers, &body, Instant::now());
    Ok(replay_report(&outcome))
}

fn replay_report(outcome: &server::Outcome) -> serde_json::Value {
    let d = &outcome.decision;
    let push = d.push.as_ref();
    let (r#ref, ref_kind) = match (push, &d.deletion) {
        (Some(p), _) => (Some(p.r#ref.clone()), Some(p.ref_kind)),
        (None, Some(del)) => (Some(del.r#ref.clone()), Some(del.ref_kind)),
        (None, None) => (None, None),
    };
    serde_json::json!({
        "provider": d.provider,
        "event": d.event,
        "event_type": d.event_type,
        "delivery_id": d.delivery_id,
        "verification": d.verification,
        "reason": outcome.reason,
        "repository_key": push.map(|p| p.repo_key.as_str()).or_else(|| d.repository.as_ref()?.keys.first().map(|k| k.as_str())),
        "repository_urls": d.repository.as_ref().map(|r| r.urls.clone()).unwrap_or_default(),
        "ref": r#ref,
        "ref_kind": ref_kind,
        "before": push.map(|p| &p.before),
        "after": push.map(|p| &p.after),
        "target_commit": push.and_then(|p| p.target_commit.as_ref()),
        "changed_paths": push.map(|p| &p.changed_paths),
        "file_lists_complete": d.provider.zip(push).map(|(provider, p)| crate::webhook::file_lists_complete(provider, p)),
        "applications": d.apps,
        "skipped_by_path_filter": d.skipped,
        "action": outcome.outcome,
        "http_status": outcome.http_status,
    })
}

/// Parses recorded request headers: one `Name: value` per line, in any case; blank lines
/// and a leading HTTP request line are skipped; a trailing `\r` is dropped.
///
/// # Errors
/// The 1-based number of a line that is not `Name: value`.
pub fn parse_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || (i == 0 && is_request_line(line)) {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .filter(|(name, _)| !name.is_empty() && !name.contains(char::is_whitespace))
            .ok_or_else(|| format!("line {} is not `Name: value`", i + 1))?;
        headers.push((name.to_string(), value.trim_start().to_string()));
    }
    Ok(headers)
}

fn is_request_line(line: &str) -> bool {
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default();
    words.next().is_some()
        && words.next().is_some_and(|v| v.starts_with("HTTP/"))
        && !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_uppercase())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

/// The `plumb status` table.
pub fn status_table(config: &Config, statuses: &[crate::status::AppStatus]) -> String {
    let mut out = format!(
        "{:<16} {:<8} {:<9} {:<11} {:<12} {:<36} {}\n",
        "APP", "ENV", "REVISION", "SYNC", "HEALTH", "SUBJECT", "LAST SYNC"
    );
    for app in &config.applications {
        let name = &app.name.value;
        let st = statuses.iter().find(|s| &s.app == name);
        let (rev, sync, health, subject, last) = match st {
            Some(s) => (
                short(&s.revision).to_string(),
                s.sync.to_string(),
                s.health.to_string(),
                s.subject.chars().take(36).collect::<String>(),
                s.last_sync.as_ref().map_or_else(|| "-".to_string(), |r| format!("{:?} {}", r.result, r.finished_at)),
            ),
            None => ("-".into(), "Unknown".into(), "Unknown".into(), "(no pass yet)".into(), "-".into()),
        };
        out.push_str(&format!(
            "{name:<16} {:<8} {rev:<9} {sync:<11} {health:<12} {subject:<36} {last}\n",
            app.environment.value
        ));
        for c in st.map(|s| s.conditions.as_slice()).unwrap_or_default() {
            let text: String = c.message.chars().take(160).collect();
            let more = if c.message.chars().count() > 160 { "…" } else { "" };
            out.push_str(&format!("  {}: {text}{more}\n", c.type_));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_headers_parse() {
        let text = "POST /api/webhook HTTP/1.1\r\nHost: x\r\nX-Gitea-Event: push\r\n\r\nX-Empty:\nX-Spaced:   a: b \n";
        let got = parse_headers(text).expect("valid");
        let want = [("Host", "x"), ("X-Gitea-Event", "push"), ("X-Empty", ""), ("X-Spaced", "a: b ")];
        assert_eq!(got, want.map(|(n, v)| (n.to_string(), v.to_string())));
        assert_eq!(parse_headers("Host: x\nnot a header\n"), Err("line 2 is not `Name: value`".to_string()));
        assert_eq!(parse_headers("Host: x\nPOST / HTTP/1.1\n"), Err("line 2 is not `Name: value`".to_string()));
        assert_eq!(parse_headers(" Host: x\n"), Err("line 1 is not `Name: value`".to_string()));
    }
}
