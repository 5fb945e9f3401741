//! Command line. Read commands (`status`, `history`, `get`, `events`) read the status
//! objects with only a kubeconfig; write commands (`sync`, `refresh`) ask the server
//! through the application's status object and follow its progress; `--local`,
//! `prune`, `diff` and `render` work from the policy file on this machine. Output is
//! `-o table|json|yaml`; Git-controlled text is shown escaped ([`output::sanitize`]).

/// `print!` that returns [`output::StdoutClosed`] (with `?`) instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::output::write_out(format_args!($($arg)*))? };
}
/// `println!` that returns [`output::StdoutClosed`] (with `?`) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cli::output::write_out(format_args!("{}\n", format_args!($($arg)*)))? };
}
/// `eprint!` that never panics (see [`output::write_err`]).
macro_rules! err {
    ($($arg:tt)*) => { $crate::cli::output::write_err(format_args!($($arg)*)) };
}
/// `eprintln!` that never panics (see [`output::write_err`]).
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::output::write_err(format_args!("{}\n", format_args!($($arg)*))) };
}

pub mod bootstrap;
pub mod complete;
mod day2;
pub mod import;
mod local;
pub mod output;
pub mod read;
mod render;
pub mod request;
pub mod ui;

use std::{
    io::IsTerminal,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
    time::Instant,
};

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, Subcommand};
use clap_complete::engine::ArgValueCompleter;

pub use local::preview;
use output::Output;
use read::{KubeArgs, READ_EXIT_CODES};
use request::{Asked, REFRESH_EXIT_CODES, SYNC_EXIT_CODES};

use crate::serve::Listeners;
use crate::{
    cluster::Cluster,
    compare::diff::unified,
    config,
    metrics::Metrics,
    reconcile::{Context, Mode},
    server,
    status::ConditionType,
};

/// The Git commit plumb was built from (`build.rs`; `unknown` outside a repository).
pub const GIT_COMMIT: &str = env!("PLUMB_GIT_COMMIT");

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
    /// How to reach the cluster.
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(subcommand)]
    command: Command,
}

/// The policy file of commands that fetch and render Git on this machine.
#[derive(clap::Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Policy file.
    #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
    pub config: PathBuf,
    /// Directory of the Git mirrors (created when missing).
    #[arg(long, env = "PLUMB_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// The optional policy file of read commands: its `statusNamespace` and its list of
/// applications (those that never ran included); its secret files are not needed.
#[derive(clap::Args, Debug, Clone)]
pub struct ReadArgs {
    /// Policy file (optional).
    #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Leader election options of `plumb serve` (see [`crate::leader`]).
#[derive(clap::Args, Debug, Clone)]
pub struct LeaseArgs {
    /// Run as one replica among several: an application's passes run on the replica
    /// holding its shard's Lease (see `--shards`; one shard: one replica runs them all).
    #[arg(long, env = "PLUMB_LEADER_ELECT")]
    pub leader_elect: bool,
    /// Namespace of the Lease; default: the policy's `settings.leaseNamespace`, else its
    /// status namespace. Another namespace is, like the status namespace, never written
    /// from Git (whoever writes Leases there can hold shards): applications' objects
    /// there are refused. Prefer `settings.leaseNamespace`: `plumb sync --local` and
    /// `plumb prune` then protect it too; this flag may only repeat it.
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
    /// Seconds of clock-rate difference and request latency tolerated: a replica stops
    /// a shard's writes this long before its Lease can expire.
    #[arg(long, default_value_t = 3)]
    pub lease_grace: u64,
    /// How many shards the applications are spread over, one Lease each: every replica
    /// holds about shards / replicas of them (with `--leader-elect`; all replicas
    /// must agree). 1: one replica runs every application.
    #[arg(long, env = "PLUMB_SHARDS", default_value_t = 1)]
    pub shards: u32,
    /// Seconds added to this replica's clock in the Lease records it writes. A test
    /// seam for a replica whose clock is off; expiry never reads it.
    #[arg(long, hide = true, default_value_t = 0, allow_hyphen_values = true)]
    pub lease_clock_offset: i64,
}

impl LeaseArgs {
    /// The Lease options, or `None` without `--leader-elect` (and a single shard). The
    /// Leases' namespace: `--lease-namespace`, else the policy's `settings.leaseNamespace`,
    /// else its status namespace.
    ///
    /// # Errors
    /// `--lease-namespace` names another namespace than `settings.leaseNamespace`.
    pub fn options(&self, settings: &crate::config::Settings) -> Result<Option<crate::leader::LeaseOptions>, String> {
        if let (Some(flag), Some(set)) = (&self.lease_namespace, &settings.lease_namespace)
            && flag != set
        {
            return Err(format!(
                "--lease-namespace {flag} differs from the policy's settings.leaseNamespace {set}: give one, or the same"
            ));
        }
        let namespace = self.lease_namespace.clone().or_else(|| settings.lease_namespace.clone());
        Ok((self.leader_elect || self.shards > 1).then(|| crate::leader::LeaseOptions {
            namespace: namespace.unwrap_or_else(|| settings.status_namespace.clone()),
            name: self.lease_name.clone(),
            identity: self.identity.clone().unwrap_or_else(crate::leader::default_identity),
            duration_seconds: self.lease_duration,
            grace_seconds: self.lease_grace,
            shards: self.shards,
            clock_offset_seconds: self.lease_clock_offset,
        }))
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the reconciler: one actor per application, the webhook receiver and the API.
    /// The only command (with `sync --local`) that creates plumb's status namespace.
    #[command(
        after_help = "Exit codes: 0 shut down; 2 error. A replica that loses a shard goes on serving the others."
    )]
    Serve {
        #[command(flatten)]
        policy: PolicyArgs,
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
        /// refused syncs, prunes waiting for approval and applications becoming
        /// Degraded; besides the policy's `notifications:` (providers and routes).
        #[arg(long, env = "PLUMB_NOTIFY_URL")]
        notify_url: Option<String>,
    },
    /// Show how the live cluster differs from Git (fetched and rendered here; nothing is
    /// written, not even plumb's namespace).
    #[command(after_help = "Exit codes (as `kubectl diff`): 0 no differences; 1 differences; 2 error.")]
    Diff {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Compare this commit (or branch/tag) instead of the configured revision.
        #[arg(long)]
        revision: Option<String>,
        /// Output: `text` (unified diff) or `json`.
        #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json"])]
        output: String,
    },
    /// What a sync of one application at a revision (a pull request's head, a branch, a
    /// commit) would do to the live cluster: objects to create, to update (fields, old →
    /// new, sensitive values masked), to prune (data-loss class, held by a guard),
    /// refused, errors. Fetched and rendered here with the same render, boundaries and
    /// guards as a sync; nothing is written.
    #[command(
        after_help = "Exit codes: 0 nothing would change; 1 a sync would change something; 2 error (the revision cannot be fetched or rendered, the sync would be refused)."
    )]
    Preview {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        #[command(flatten)]
        policy: PolicyArgs,
        /// The commit, branch, tag or ref (`refs/pull/7/head`) to preview; default the
        /// application's revision.
        #[arg(long)]
        revision: Option<String>,
        /// Output: `text` (the words of `plumb sync --dry-run`), `json` or `yaml`.
        #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json", "yaml"])]
        output: String,
    },
    /// Print the rendered objects of one application (Secret values masked) as a YAML
    /// stream; the tool, its version and the render time on standard error. Needs no
    /// cluster and writes nothing.
    #[command(after_help = "Exit codes: 0 rendered; 2 the source cannot be fetched or rendered.")]
    Render {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Render this commit (or branch/tag) instead of the configured revision.
        #[arg(long)]
        revision: Option<String>,
        /// Render for the cluster of the kubeconfig as the server does: Helm gets its
        /// version and served kinds (`.Capabilities`), and `.Release.IsUpgrade` when the
        /// application has synced (its recorded status). Without it no cluster is read.
        #[arg(long)]
        cluster: bool,
        /// Also print (on standard error) how it was rendered: the tool and its version,
        /// the capabilities used, the files decrypted, the fields held, the sandbox, and
        /// whether the render was reused.
        #[arg(long)]
        explain: bool,
    },
    /// Ask the server to sync one application now and follow its progress, wave by wave
    /// (a spinner on a terminal). With `--local`, fetch and apply from this machine.
    #[command(after_help = SYNC_EXIT_CODES)]
    Sync {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        /// Policy file: needed by `--local` and `--dry-run`; otherwise optional (its
        /// `statusNamespace`).
        #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
        config: Option<PathBuf>,
        /// Directory of the Git mirrors (`--local`, `--dry-run`).
        #[arg(long, env = "PLUMB_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
        /// Fetch, render and apply from this machine with your identity, as a server
        /// would (for clusters without a server). While a server holds plumb's Lease in
        /// the namespace, a local sync writes no status: the server records its own.
        #[arg(long)]
        local: bool,
        /// Also delete objects Git no longer declares (default: the policy's `prune`;
        /// `--local` only).
        #[arg(long, requires = "local")]
        prune: Option<bool>,
        /// Print the plan, computed here; write nothing (needs `-c`).
        #[arg(long, conflicts_with = "local")]
        dry_run: bool,
        /// Approve deleting objects that need it: `Prune=confirm`, PersistentVolumeClaims,
        /// Namespaces, CustomResourceDefinitions (`--local`, `--dry-run`).
        #[arg(long)]
        approve: bool,
        /// `--local`: after syncing, wait until the application is Synced and Healthy
        /// (exit 0), Degraded (exit 1, printing the causes) or the timeout passes (exit
        /// 1); a fetch, render or comparison error stops the wait at once (exit 2). The
        /// wait only reads: it writes no status.
        #[arg(long, requires = "local")]
        wait: bool,
        /// Longest wait for the server's answer and its sync waves (`--local`: for
        /// `--wait` and later sync waves), e.g. 90s, 5m.
        #[arg(long, default_value = "5m", value_parser = config::parse_duration)]
        timeout: std::time::Duration,
        /// Output format of the result (through the server).
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Sync the commit the application's status names as failing `verifyCommits`
        /// (unsigned, unknown key, …), recorded in its history with your name. Needs the
        /// right `allow-unverified` on the application, which the API server checks
        /// through `deploy/admission/allow-unverified.yaml`; plumb honours it only while
        /// that policy is installed, and only for that commit.
        #[arg(long, conflicts_with_all = ["local", "dry_run"])]
        allow_unverified: bool,
    },
    /// Ask the server to compare one application now (a pass under its policy) and print
    /// the new status.
    #[command(after_help = REFRESH_EXIT_CODES)]
    Refresh {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        /// Policy file (optional: its `statusNamespace`).
        #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
        config: Option<PathBuf>,
        /// Longest wait for the server's answer, e.g. 30s, 5m.
        #[arg(long, default_value = "2m", value_parser = config::parse_duration)]
        timeout: std::time::Duration,
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Delete what Git no longer declares in one application now, from this machine
    /// (`plumb sync APP --local --prune true`); with `--approve` also the objects that
    /// wait for an approval.
    #[command(after_help = "Exit codes: 0 done or nothing to do; 1 the sync failed, was refused or still \
runs after --timeout; 2 error.")]
    Prune {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        #[command(flatten)]
        policy: PolicyArgs,
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
    /// Every application: environment, revision, sync, health, last sync, conditions.
    #[command(after_help = READ_EXIT_CODES)]
    Status {
        #[command(flatten)]
        read: ReadArgs,
        /// Print again each time something changes (read every 2 s) until Ctrl-C.
        #[arg(long, short = 'w')]
        watch: bool,
    },
    /// The last syncs of one application, newest first.
    #[command(after_help = READ_EXIT_CODES)]
    History {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        #[command(flatten)]
        read: ReadArgs,
    },
    /// One application: its objects with sync and health, and the drift lines with the
    /// field manager of each hand change.
    #[command(after_help = READ_EXIT_CODES)]
    Get {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        #[command(flatten)]
        read: ReadArgs,
        /// Print again each time something changes (read every 2 s) until Ctrl-C.
        #[arg(long, short = 'w')]
        watch: bool,
    },
    /// The status page on this machine (default http://127.0.0.1:8090/), read with your
    /// kubeconfig: applications, resource tree, drift, Events, history, and actions
    /// (sync, refresh, suspend, resume, rollback) performed as your kubeconfig's user,
    /// each after a confirmation. Loopback only unless --allow-remote.
    #[command(after_help = "Exit codes: 0 stopped (Ctrl-C); 2 error (address in use or not loopback, kubeconfig).")]
    Ui {
        #[command(flatten)]
        args: ui::UiArgs,
    },
    /// The Kubernetes Events about one application (syncs, prunes, health changes).
    #[command(after_help = READ_EXIT_CODES)]
    Events {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        #[command(flatten)]
        read: ReadArgs,
    },
    /// Pause automated sync and selfHeal of an application until a time (a manual
    /// `plumb sync` still runs); it resumes by itself. The server ends a pause at the
    /// environment's `maxPause` (default 7 days) after it first saw it, whatever it
    /// asks. Exit code 0 when recorded.
    Suspend {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
        /// How long (e.g. 30m, 2h); with `-c`, cut to the environment's `maxPause`.
        #[arg(long = "for", value_parser = config::parse_duration)]
        duration: std::time::Duration,
        /// Policy file (optional: its `statusNamespace` and the environment's `maxPause`).
        #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
        config: Option<PathBuf>,
        /// Why (shown in the status, the Event and the status page).
        #[arg(long)]
        reason: String,
    },
    /// Let the decommission of applications that left the policy go on: `--confirm`
    /// passes the mass guard (several applications removed at once, or the last of an
    /// environment), `--approve` lets it delete their PersistentVolumeClaims, Namespaces
    /// and CustomResourceDefinitions (`deletionPolicy: delete|wait`). Both are valid
    /// 24 h. Exit code 0 when recorded; 1 when an application has no resource.
    Decommission {
        /// Applications.
        #[arg(add = ArgValueCompleter::new(complete::app_names), required = true)]
        apps: Vec<String>,
        /// Confirm removing them although they left the policy together (or emptied an
        /// environment).
        #[arg(long)]
        confirm: bool,
        /// Approve deleting their data-loss classes (PVCs, Namespaces, CRDs).
        #[arg(long)]
        approve: bool,
        /// Policy file (optional: its `statusNamespace`).
        #[arg(long, short = 'c', env = "PLUMB_CONFIG")]
        config: Option<PathBuf>,
    },
    /// End a pause early.
    Resume {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
        app: String,
    },
    /// Sync a recorded revision and pin the application there: new commits of the
    /// tracked ref are not synced until `--release` (or the next commit with
    /// `--until-next-commit`). The server resolves the revision once and pins that
    /// commit (a branch name does not follow its pushes); it refuses a commit that is
    /// neither in the tracked ref's history nor synced before, unless `--force` and the
    /// user holds the right `override` on applications.plumb.dev/APP. Exit code 0 when
    /// recorded.
    Rollback {
        /// Application.
        #[arg(add = ArgValueCompleter::new(complete::app_names))]
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
        /// Allow a commit outside the tracked ref's history: needs the verb `override`
        /// on applications.plumb.dev/APP, which the API server checks through the
        /// admission policy of `deploy/admission/rollback-override.yaml` (without it
        /// installed, the server refuses such a pin).
        #[arg(long)]
        force: bool,
    },
    /// Check policy files; list every problem with file and line.
    #[command(after_help = "Exit codes: 0 every file is valid; 1 problems were found.")]
    Validate {
        /// Policy files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Do not check that the files a policy names (webhook secrets, tokens, keys)
        /// exist here: for a policy written for the cluster, whose secrets are mounted
        /// in plumb's pod (`deploy/base/policy.yaml`). Their shape is still checked.
        #[arg(long)]
        skip_files: bool,
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Turn Argo CD Applications and AppProjects, or Flux GitRepositories,
    /// Kustomizations and HelmReleases (YAML files, e.g. `kubectl get -o yaml` output or
    /// the manifests in Git) into a plumb policy file, printed on standard output; what
    /// could not be mapped is listed on standard error and as comments at its top. Exit
    /// codes: 0 a policy with at least one application; 1 nothing to import; 2 error.
    Import {
        /// Files holding the objects (multi-document YAML, `kind: List` too).
        #[arg(required_unless_present = "from_cluster", conflicts_with = "from_cluster")]
        files: Vec<PathBuf>,
        /// Read the objects from the cluster instead, through the kubeconfig: Argo CD's
        /// Applications and AppProjects, Flux's GitRepositories, HelmRepositories,
        /// Kustomizations and HelmReleases, in every namespace the user may list.
        #[arg(long)]
        from_cluster: bool,
    },
    /// Install plumb from the manifests of deploy/ (embedded) and let it manage itself
    /// from Git: writes them, a kustomization and a policy whose application `plumb`
    /// (selfManagement) reads PATH of the repository, into PATH of the local clone
    /// (--checkout); applies them once; then commit and push, and Git is the authority.
    #[command(after_help = "Exit codes: 0 installed (or, with --dry-run, printed); 2 error.")]
    Bootstrap {
        #[command(flatten)]
        args: bootstrap::BootstrapArgs,
    },
    /// plumb's version and the Git commit it was built from.
    #[command(after_help = "Exit codes: 0.")]
    Version {
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Print a shell completion script, e.g. `plumb completion bash > /etc/bash_completion.d/plumb`
    /// or `source <(plumb completion bash)`: subcommands, flags and application names
    /// (from `-c FILE`, else the Application resources in `-n NAMESPACE`).
    #[command(after_help = "Exit codes: 0.")]
    Completion {
        /// Shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
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
    /// pass, and print the decision as JSON.
    #[command(after_help = "Exit codes: 0 the server would answer 2xx; 1 otherwise; 2 error.")]
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
    // `COMPLETE=SHELL plumb -- WORDS…`: the completions, then exit (see `complete`)
    clap_complete::CompleteEnv::with_factory(Cli::command).complete();
    let cli = Cli::parse();
    init_tracing(cli.log.as_deref(), &cli.log_format);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(cli.kube, cli.command)) {
        Ok(code) => code,
        // the reader needs no more (`plumb diff | head`): a normal end
        Err(e) if output::closed_stdout(&e) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("error: {}", output::sanitize(&format!("{e:#}")));
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

/// Loads the policy (without checking its secret files: a fetch that needs one fails
/// naming it) and connects to the cluster. Only with `writes` is plumb's status
/// namespace created when missing (`sync --local`, `prune`): `diff` and previews write
/// nothing.
///
/// # Errors
/// Invalid policy, unreachable cluster.
pub async fn context(policy: &PolicyArgs, kube: &KubeArgs, writes: bool) -> anyhow::Result<Context> {
    let mut config = config::load_without_secrets(&policy.config)?;
    let cluster = Cluster::connect_in(kube.kubeconfig.as_deref(), kube.context.as_deref()).await?;
    let cache = cache_dir(policy.cache_dir.as_deref())?;
    if crate::secret_refs::any(&config) {
        crate::secret_refs::materialize(cluster.client(), &mut config, &cache.join(".secrets")).await?;
    }
    crate::generators::expand_once(&mut config, &cache).await?;
    let key = match crate::serve::mask_key(cluster.client(), &config.settings.status_namespace, false).await {
        Ok(key) => key,
        Err(e) => {
            tracing::warn!("sensitive values show no mark: {e:#}");
            crate::compare::sensitive::MaskKey::none()
        }
    };
    let ctx = Context::new(cluster, Arc::new(config), cache, Arc::new(Metrics::default())).with_mask_key(key);
    if writes {
        ctx.store.ensure_namespace().await?;
    }
    Ok(ctx)
}

fn cache_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let cache = given.map_or_else(|| std::env::temp_dir().join("plumb-repos"), Path::to_path_buf);
    std::fs::create_dir_all(&cache).with_context(|| format!("cache dir {}", cache.display()))?;
    Ok(cache)
}

async fn run(kube: KubeArgs, cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Serve { policy, listen, internal_listen, probe_listen, lease, reload_every, notify_url } => {
            // read once for its namespaces (serve loads it again, and reloads it): not
            // kept while serving
            let settings = config::load(&policy.config)?.settings;
            let process = crate::serve::Process {
                kubeconfig: kube.kubeconfig.clone(),
                context: kube.context.clone(),
                policy: policy.config.clone(),
                cache_dir: cache_dir(policy.cache_dir.as_deref())?,
                listen: Listeners { public: listen, internal: internal_listen, probes: probe_listen },
                lease: lease.options(&settings).map_err(anyhow::Error::msg)?,
                reload_every: std::time::Duration::from_secs(reload_every.max(1)),
                notify_url,
            };
            crate::serve::run(process, Arc::new(Metrics::default()), shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Render { app, policy, revision, cluster, explain } => {
            let cache = cache_dir(policy.cache_dir.as_deref())?;
            let target = if cluster { Some(render::target(&kube, &policy.config, &app).await?) } else { None };
            render::run(&policy.config, &cache, &app, revision.as_deref(), (target, explain)).await
        }
        Command::Diff { app, policy, revision, output } => {
            let ctx = context(&policy, &kube, false).await?;
            diff(&ctx, &app, revision.as_deref(), &output).await
        }
        Command::Preview { app, policy, revision, output } => {
            let ctx = context(&policy, &kube, false).await?;
            preview_command(&ctx, &app, revision.as_deref(), &output).await
        }
        Command::Sync {
            app,
            config,
            cache_dir,
            local,
            prune,
            dry_run,
            approve,
            wait,
            timeout,
            output,
            allow_unverified,
        } => {
            if !local && !dry_run {
                let policy = read::policy(config.as_deref())?;
                if allow_unverified && let Some(code) = request::allow_unverified(&kube, policy.as_ref(), &app).await? {
                    return Ok(code);
                }
                return request::run(&kube, policy.as_ref(), &app, Asked::Sync, (timeout, output)).await;
            }
            let config = config.context("--local and --dry-run need the policy file (-c)")?;
            let policy = PolicyArgs { config, cache_dir };
            sync_here(&policy, &kube, &app, (prune, approve, dry_run), wait.then_some(timeout), timeout).await
        }
        Command::Refresh { app, config, timeout, output } => {
            let policy = read::policy(config.as_deref())?;
            request::run(&kube, policy.as_ref(), &app, Asked::Refresh, (timeout, output)).await
        }
        Command::Prune { app, policy, approve, dry_run, timeout } => {
            sync_here(&policy, &kube, &app, (Some(true), approve, dry_run), None, timeout).await
        }
        Command::Suspend { app, duration, config, reason } => {
            let policy = read::policy(config.as_deref())?;
            day2::suspend(&app, duration, &reason, (&kube, policy.as_ref())).await
        }
        Command::Resume { app } => day2::resume(&app, &kube).await,
        Command::Decommission { apps, confirm, approve, config } => {
            let policy = read::policy(config.as_deref())?;
            day2::decommission(&apps, (confirm, approve), (&kube, policy.as_ref())).await
        }
        Command::Rollback { app, revision, release, until_next_commit, force } => {
            day2::rollback(&app, revision.as_deref(), (release, until_next_commit, force), &kube).await
        }
        Command::Status { read, watch } => {
            let policy = read::policy(read.config.as_deref())?;
            if watch {
                return read::watch(|| read::status_text(&kube, policy.as_ref(), read.output)).await;
            }
            read::status(&kube, policy.as_ref(), read.output).await
        }
        Command::History { app, read } => {
            let policy = read::policy(read.config.as_deref())?;
            read::history(&kube, policy.as_ref(), &app, read.output).await
        }
        Command::Get { app, read, watch } => {
            let policy = read::policy(read.config.as_deref())?;
            if watch {
                return read::watch(|| read::get_text(&kube, policy.as_ref(), &app, read.output)).await;
            }
            read::get(&kube, policy.as_ref(), &app, read.output).await
        }
        Command::Ui { args } => ui::run(&kube, &args).await,
        Command::Events { app, read } => {
            let policy = read::policy(read.config.as_deref())?;
            read::events(&kube, policy.as_ref(), &app, read.output).await
        }
        Command::Bootstrap { args } => bootstrap::run(&kube, &args).await,
        Command::Import { files, from_cluster } => import::run(&kube, &files, from_cluster).await,
        Command::Validate { files, output, skip_files } => validate(&files, skip_files, output),
        Command::Version { output } => {
            let v = serde_json::json!({"version": env!("CARGO_PKG_VERSION"), "commit": GIT_COMMIT});
            output::emit(output, &v, || format!("plumb {} (commit {GIT_COMMIT})\n", env!("CARGO_PKG_VERSION")))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completion { shell } => complete::print(shell),
        Command::Webhook { command: WebhookCommand::Replay { config, headers, body } } => {
            let report = replay(&config, &headers, &body)?;
            outln!("{}", serde_json::to_string_pretty(&report)?);
            let status = report.get("http_status").and_then(serde_json::Value::as_u64).unwrap_or(0);
            Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

/// `plumb diff`: a compare-only pass, printed as unified diffs (colored on a terminal)
/// or JSON.
async fn diff(ctx: &Context, app: &str, revision: Option<&str>, output: &str) -> anyhow::Result<ExitCode> {
    let fresh = crate::source::Freshness::Now;
    let report = ctx.pass(&mut crate::reconcile::AppState::default(), app, Mode::CompareOnly, revision, fresh).await?;
    let diffs = report.diffs();
    // anything listed, even what the roll-up leaves out (kept by
    // `helm.sh/resource-policy`, left to its controller), is a difference to read
    let differs = diffs.iter().any(|d| !d.reason.is_empty());
    for c in report.status.conditions.iter().filter(|c| c.type_ == ConditionType::RenderWarning) {
        errln!("warning: {}", output::sanitize(&c.message));
    }
    if let Some(v) = &report.status.verification {
        errln!("signature: {}", output::sanitize(&v.summary()));
    }
    for c in report.status.conditions.iter().filter(|c| c.type_ == ConditionType::UnverifiedRevision) {
        errln!("{}: {}", c.type_, output::sanitize(&c.message));
    }
    // a pin (`plumb rollback`) replaces the tracked ref: say which revision is compared
    if let Some(pin) = report.status.pinned.as_ref().filter(|_| revision.is_none()) {
        errln!(
            "comparing the pinned revision {}, not the tracked ref's head (`plumb rollback {app} --release` ends the pin)",
            crate::status::short(&pin.revision)
        );
    }
    if report.status.sync == crate::compare::SyncStatus::Unknown {
        for c in &report.status.conditions {
            errln!("{}: {}", c.type_, output::sanitize(&c.message));
        }
        return Ok(ExitCode::from(2));
    }
    if output == "json" {
        outln!("{}", serde_json::to_string_pretty(&diffs)?);
        return Ok(ExitCode::from(u8::from(differs)));
    }
    let color = std::io::stdout().is_terminal();
    for d in diffs.iter().filter(|d| !d.reason.is_empty()) {
        outln!("# {} ({})", d.object, output::sanitize(&d.reason));
        // both sides come masked (compare::sensitive)
        let text = if d.verdict.is_none() { String::new() } else { unified(&d.object, &d.desired, d.live.as_ref()) };
        for line in text.lines() {
            let line = output::sanitize(line);
            match (color, line.chars().next()) {
                (true, Some('+')) if !line.starts_with("+++") => outln!("\x1b[32m{line}\x1b[0m"),
                (true, Some('-')) if !line.starts_with("---") => outln!("\x1b[31m{line}\x1b[0m"),
                _ => outln!("{line}"),
            }
        }
    }
    Ok(ExitCode::from(u8::from(differs)))
}

/// `plumb preview`: the plan of a sync at `revision` ([`crate::preview::AppPlan`]),
/// planned with the environment's prune setting, approvals not given.
async fn preview_command(ctx: &Context, app: &str, revision: Option<&str>, output: &str) -> anyhow::Result<ExitCode> {
    let prune = policy_prune(&ctx.config, app);
    let mode = Mode::Preview { prune, approve: false };
    let fresh = crate::source::Freshness::Now;
    let report = ctx.pass(&mut crate::reconcile::AppState::default(), app, mode, revision, fresh).await?;
    let plan = crate::preview::AppPlan::of(app, &report);
    match output {
        "json" => outln!("{}", serde_json::to_string_pretty(&plan)?),
        "yaml" => out!("{}", serde_saphyr::to_string(&plan)?),
        _ => out!("{}", plan.text()),
    }
    Ok(ExitCode::from(if plan.failed() { 2 } else { u8::from(plan.changes()) }))
}

/// `plumb sync --local`, `--dry-run` and `plumb prune`: from this machine. A local
/// sync while a server holds plumb's Lease writes no status (the server records its
/// own); without one it records as the server would.
async fn sync_here(
    policy: &PolicyArgs,
    kube: &KubeArgs,
    app: &str,
    (prune, approve, dry_run): (Option<bool>, bool, bool),
    wait: Option<std::time::Duration>,
    timeout: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    let mut ctx = context(policy, kube, !dry_run).await?;
    if !dry_run {
        // a server's Leases are in the status namespace, or in settings.leaseNamespace
        let settings = &ctx.config.settings;
        let places: Vec<String> = std::iter::once(settings.status_namespace.as_str())
            .chain(settings.lease_namespaces())
            .map(str::to_string)
            .collect();
        let mut serving = None;
        for ns in &places {
            if let Some(server) = crate::leader::holders(ctx.cluster.client(), ns).await?.into_iter().next() {
                serving = Some((server, ns));
                break;
            }
        }
        match serving {
            Some((server, ns)) => {
                errln!(
                    "local: syncing {app} from this machine; plumb server {server} serves namespace {ns}: no status written here (the server records its own)"
                );
                ctx = ctx.without_records();
            }
            None => errln!(
                "local: syncing {app} from this machine with your identity (no plumb server holds a Lease in {})",
                places.join(" or ")
            ),
        }
    }
    let policy_prune = policy_prune(&ctx.config, app);
    local::sync_command(&ctx, app, prune.unwrap_or(policy_prune), approve, dry_run, wait, timeout).await
}

/// Whether application `app`'s environment prunes (`syncPolicy.prune`); false for an
/// unknown application (the pass then says it is unknown).
fn policy_prune(config: &config::Config, app: &str) -> bool {
    let a = config.applications.iter().find(|a| a.name.value == app);
    a.and_then(|a| config.environments.iter().find(|e| e.name.value == a.environment.value))
        .is_some_and(|e| e.sync_policy.prune)
}

/// One policy file as `plumb validate -o json` prints it.
/// `plumb import FILES…` (see [`crate::import`]).
#[derive(Debug, serde::Serialize)]
struct Validated {
    file: PathBuf,
    valid: bool,
    applications: usize,
    environments: usize,
    repositories: usize,
    problems: Vec<String>,
    /// What is valid but weakens a boundary ([`config::warnings`]).
    warnings: Vec<String>,
    /// What `validate` could not expand: applicationSets whose applications come from
    /// a repository's directories ([`config::generators::unlisted_notes`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

fn validate(files: &[PathBuf], skip_files: bool, output: Output) -> anyhow::Result<ExitCode> {
    let load = |f: &PathBuf| if skip_files { config::load_without_secrets(f) } else { config::load(f) };
    let results: Vec<Validated> = files
        .iter()
        .map(|f| match load(f) {
            Ok(c) => Validated {
                file: f.clone(),
                valid: true,
                applications: c.applications.len(),
                environments: c.environments.len(),
                repositories: c.repositories.len(),
                problems: vec![],
                warnings: config::warnings(&c),
                notes: config::generators::unlisted_notes(&c),
            },
            Err(e) => Validated {
                file: f.clone(),
                valid: false,
                applications: 0,
                environments: 0,
                repositories: 0,
                problems: e.to_string().lines().map(str::to_string).collect(),
                warnings: vec![],
                notes: vec![],
            },
        })
        .collect();
    for r in results.iter().filter(|_| output.is_table()) {
        for p in &r.problems {
            errln!("{p}");
        }
        for w in &r.warnings {
            errln!("{}: warning: {w}", r.file.display());
        }
        for n in &r.notes {
            errln!("{}: note: {n}", r.file.display());
        }
    }
    output::emit(output, &results, || {
        results
            .iter()
            .filter(|r| r.valid)
            .map(|r| {
                format!(
                    "{}: ok ({} applications, {} environments, {} repositories)\n",
                    r.file.display(),
                    r.applications,
                    r.environments,
                    r.repositories
                )
            })
            .collect()
    })?;
    Ok(if results.iter().all(|r| r.valid) { ExitCode::SUCCESS } else { ExitCode::from(1) })
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

    /// The Leases' namespace: the flag, else the policy's `settings.leaseNamespace`, else
    /// the status namespace; a flag that differs from the setting is an error.
    #[test]
    fn the_lease_namespace_comes_from_the_flag_or_the_policy_and_they_agree() {
        let lease = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["plumb", "serve", "-c", "p.yaml", "--leader-elect"][..], args].concat())
                .expect("parses");
            match cli.command {
                Command::Serve { lease, .. } => lease,
                _ => unreachable!("serve"),
            }
        };
        let mut settings = crate::config::Settings::default();
        let ns = |args: &[&str], settings: &crate::config::Settings| {
            lease(args).options(settings).map(|o| o.map(|o| o.namespace))
        };
        assert_eq!(ns(&[], &settings), Ok(Some("plumb-system".into())));
        assert_eq!(ns(&["--lease-namespace", "leases"], &settings), Ok(Some("leases".into())));
        settings.lease_namespace = Some("leases".into());
        assert_eq!(ns(&[], &settings), Ok(Some("leases".into())));
        assert_eq!(ns(&["--lease-namespace", "leases"], &settings), Ok(Some("leases".into())));
        let err = ns(&["--lease-namespace", "other"], &settings).expect_err("differs");
        assert!(
            err.contains("--lease-namespace other differs from the policy's settings.leaseNamespace leases"),
            "{err}"
        );
    }
}
