//! The policy model: plain data deserialized from a policy file.
//!
//! Names follow Argo CD's Application spec where one exists (`syncPolicy.automated`,
//! `prune`, `selfHeal`, `allowEmpty`, `syncOptions`, `ignoreDifferences` with
//! `jsonPointers`), so that a reader of Argo CD's documentation recognises them.

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Deserializer, Serialize};
use serde_saphyr::Spanned;

/// Default reconcile interval: 180 seconds, as Argo CD's `timeout.reconciliation`.
pub const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_secs(180);

/// The longest pause of automated sync (`plumb suspend`) an environment allows when its
/// policy does not say ([`Environment::max_pause`]): 7 days.
pub const DEFAULT_MAX_PAUSE: Duration = Duration::from_secs(7 * 24 * 3600);

/// A whole policy file after parsing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Git repositories that hold desired state.
    #[serde(default)]
    pub repositories: Vec<Repository>,
    /// Sync policies, one per environment name.
    #[serde(default)]
    pub environments: Vec<Environment>,
    /// Applications: one directory of one repository, reconciled into one namespace.
    #[serde(default)]
    pub applications: Vec<Application>,
    /// Generators of applications ([`super::generators`]); after loading, the
    /// applications they generate are in `applications` too.
    #[serde(default)]
    pub application_sets: Vec<super::ApplicationSet>,
    /// The `directories` sets whose applications are not known now (their repository
    /// could not be listed and they generated none before): the decommission loop
    /// leaves alone the `Application` resources naming one of them (set by
    /// [`crate::generators`], not read from YAML).
    #[serde(skip)]
    pub unlisted_sets: Vec<String>,
    /// Process-wide settings.
    #[serde(default)]
    pub settings: Settings,
    /// Where plumb tells people what happened ([`super::notifications`]); none when
    /// absent.
    #[serde(default)]
    pub notifications: super::Notifications,
    /// The file this configuration was read from (set by the loader, not read from YAML).
    #[serde(skip)]
    pub file: PathBuf,
    /// SHA-256 of the policy text this configuration was read from, in lower-case hex
    /// (set by the loader): what a pass's judgement depends on besides Git and the
    /// cluster, for the sealed comparisons of [`crate::compare::seal`].
    #[serde(skip)]
    pub digest: String,
}

/// Process-wide settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Settings {
    /// plumb's namespace: the `Application` resources (status and history), Events,
    /// Leases and plumb's Secrets. Default `plumb-system`; created when missing.
    #[serde(default = "default_status_namespace")]
    pub status_namespace: String,
    /// Largest webhook body accepted, in bytes (default 25 MiB, GitHub's own cap).
    #[serde(default = "default_max_body")]
    pub webhook_max_body_bytes: usize,
    /// Distinguishes plumb instances sharing a cluster: stamped on every applied object
    /// (`plumb.dev/installation-id`); objects carrying another id are never touched.
    #[serde(default)]
    pub installation_id: Option<String>,
    /// Render tools (kustomize, helm, sops): binaries, time, output, memory and CPU limits.
    #[serde(default)]
    pub render_tools: super::RenderTools,
    /// What one application's commit may cost: file sizes and count, rendered bytes,
    /// YAML expansion per file, fetch-and-render time (see [`crate::limits`]).
    #[serde(default)]
    pub limits: crate::limits::Limits,
    /// The namespace of the Leases of `plumb serve --leader-elect` when not
    /// `status_namespace` (default: none, the Leases are in `status_namespace`); the
    /// flag `--lease-namespace` may only repeat it. Like plumb's own namespace, never
    /// written from Git (whoever writes Leases there can hold shards), see
    /// [`crate::plan::Boundary`]; `plumb sync --local` and `plumb prune` read it too.
    #[serde(default)]
    pub lease_namespace: Option<String>,
    /// The namespace of the Leases of the running `plumb serve` (set by it from
    /// `--lease-namespace`, not read from the policy): protected as `lease_namespace` is.
    #[serde(skip)]
    pub serving_lease_namespace: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            status_namespace: default_status_namespace(),
            webhook_max_body_bytes: default_max_body(),
            installation_id: None,
            render_tools: super::RenderTools::default(),
            limits: crate::limits::Limits::default(),
            lease_namespace: None,
            serving_lease_namespace: None,
        }
    }
}

impl Settings {
    /// The namespaces of Leases other than `status_namespace` (`lease_namespace` and
    /// `serving_lease_namespace`, each once): never written from Git.
    pub fn lease_namespaces(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for ns in [&self.lease_namespace, &self.serving_lease_namespace].into_iter().flatten() {
            if *ns != self.status_namespace && !out.contains(&ns.as_str()) {
                out.push(ns);
            }
        }
        out
    }
}

fn default_status_namespace() -> String {
    "plumb-system".into()
}
fn default_max_body() -> usize {
    25 * 1024 * 1024
}

/// A Git repository and the credentials to read it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Repository {
    /// Name the applications refer to.
    pub name: Spanned<String>,
    /// Clone URL: `https://`, `http://`, `ssh://` or scp-style `git@host:owner/repo.git`.
    pub url: Spanned<String>,
    /// File holding the webhook secret (HMAC key of Gitea/GitHub signatures). One
    /// trailing newline (`\n` or `\r\n`) is stripped; every other byte is part of the key.
    #[serde(default)]
    pub webhook_secret_file: Option<Spanned<PathBuf>>,
    /// The forge that sends this repository's webhook deliveries: `gitea`, `forgejo`,
    /// `gogs`, `github`, `gitlab`, `bitbucket-cloud` or `bitbucket-server`. Its secret
    /// then authenticates only that forge's scheme (see
    /// [`crate::webhook::WatchedRepository::provider`]); when absent, it is inferred
    /// ([`Repository::webhook_provider`]).
    #[serde(default)]
    pub webhook_provider: Option<Spanned<crate::webhook::Provider>>,
    /// File holding an HTTPS token (sent as the basic-auth password).
    #[serde(default)]
    pub token_file: Option<Spanned<PathBuf>>,
    /// User name sent with `tokenFile` (default `git`).
    #[serde(default)]
    pub username: Option<String>,
    /// Allow `tokenFile` with a plain `http://` URL (the token then travels
    /// unencrypted; meant for a lab). Default `false`: refused by validation.
    #[serde(default)]
    pub insecure: bool,
    /// Private SSH key file for `ssh://` / scp-style URLs.
    #[serde(default)]
    pub ssh_key_file: Option<Spanned<PathBuf>>,
    /// OpenSSH `known_hosts` file; required with `sshKeyFile` (host keys are pinned).
    #[serde(default)]
    pub known_hosts_file: Option<Spanned<PathBuf>>,
    /// Report each sync of this repository's applications to the forge as a commit
    /// status (see [`crate::forge`]). Off when absent.
    #[serde(default)]
    pub commit_status: Option<CommitStatusConfig>,
    /// The webhook secret from a Kubernetes Secret in plumb's namespace instead of
    /// `webhookSecretFile` (see [`crate::secret_refs`]).
    #[serde(default)]
    pub webhook_secret_ref: Option<SecretRef>,
    /// The HTTPS token from a Secret instead of `tokenFile`.
    #[serde(default)]
    pub token_secret_ref: Option<SecretRef>,
    /// The SSH private key from a Secret instead of `sshKeyFile`.
    #[serde(default)]
    pub ssh_key_secret_ref: Option<SecretRef>,
}

impl Repository {
    /// The forge that sends this repository's webhook deliveries: `webhookProvider`;
    /// else the `commitStatus` provider (`gitea`: the Gitea family, `github`); else the
    /// public forge the URL's host names (`github.com`, `gitlab.com`, `bitbucket.org`);
    /// else `None`, which accepts every forge's HMAC signature and no plain token
    /// ([`crate::webhook::WatchedRepository::provider`]).
    pub fn webhook_provider(&self) -> Option<crate::webhook::Provider> {
        use crate::webhook::Provider;
        if let Some(p) = &self.webhook_provider {
            return Some(p.value);
        }
        if let Some(cs) = &self.commit_status {
            return Some(match cs.provider.value {
                ForgeProvider::Gitea => Provider::Gitea,
                ForgeProvider::GitHub => Provider::GitHub,
                ForgeProvider::GitLab => Provider::GitLab,
            });
        }
        let host = crate::webhook::RepoKey::from_url(&self.url.value)?;
        match host.as_str().split('/').next()? {
            "github.com" => Some(Provider::GitHub),
            "gitlab.com" => Some(Provider::GitLab),
            "bitbucket.org" => Some(Provider::BitbucketCloud),
            _ => None,
        }
    }
}

/// A key of a Kubernetes Secret in plumb's namespace (`settings.statusNamespace`),
/// read through the API: `{name: plumb-git, key: token}`. Its value is used as the
/// matching file's content would be (one trailing newline stripped).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    /// The Secret's name.
    pub name: String,
    /// The key under its `data`.
    pub key: String,
}

/// Where and how to post commit statuses (`commitStatus` of a repository).
///
/// ```yaml
/// commitStatus:
///   provider: gitea                     # or github, gitlab
///   tokenFile: /etc/plumb/forge-token   # API token; one trailing newline stripped
///   apiUrl: https://git.example.com/api/v1          # optional, see below
///   targetUrl: https://plumb.example.com/applications/{app}   # optional link; {app}: the application
///   previewUrl: https://plumb.example.com/previews/{repository}/{number}   # optional
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommitStatusConfig {
    /// Which forge API to call.
    pub provider: Spanned<ForgeProvider>,
    /// API base URL. Default for `github`: `https://api.github.com` (GitHub Enterprise
    /// Server: `https://HOST/api/v3`); for `gitea`: the repository URL's
    /// `scheme://host[:port]` followed by `/api/v1` (set it when Gitea is served under a
    /// sub-path).
    #[serde(default)]
    pub api_url: Option<Spanned<String>>,
    /// File holding the API token (needs write access to commit statuses: Gitea scope
    /// `write:repository`; GitHub fine-grained "Commit statuses: write" or classic
    /// `repo:status`; GitLab scope `api` with the Developer role). Read at every post, so
    /// it can be rotated in place.
    pub token_file: Spanned<PathBuf>,
    /// Link shown with each status; every `{app}` in it is replaced by the application's
    /// name (percent-encoded), so it can point at the application's status page, e.g.
    /// `https://plumb.example.com/applications/{app}` (see [`crate::page`]). Omitted when
    /// absent.
    #[serde(default)]
    pub target_url: Option<String>,
    /// Link to the whole plan of a pull request's preview, sent with its `plumb/preview`
    /// status and in a comment cut to the forge's size: every `{repository}` is replaced
    /// by the policy's name of the repository and every `{number}` by the pull request's
    /// number, e.g. `https://plumb.example.com/previews/{repository}/{number}` (the
    /// status page's preview view, see [`crate::preview::page`]). Omitted when absent.
    #[serde(default)]
    pub preview_url: Option<String>,
    /// The user name the token posts comments as (`login` on Gitea and GitHub,
    /// `username` on GitLab; a GitHub App's is `NAME[bot]`), for a token the forge does
    /// not tell its own user (`GET /user` answers 403 to GitHub App and Actions tokens).
    /// Unset: asked with `GET /user`. Only a comment with plumb's marker **and** this
    /// author is edited.
    #[serde(default)]
    pub comment_author: Option<String>,
}

/// A forge whose commit-status API plumb can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeProvider {
    /// Gitea (and Forgejo): `POST /repos/{owner}/{repo}/statuses/{sha}` under `/api/v1`.
    Gitea,
    /// GitHub and GitHub Enterprise Server: `POST /repos/{owner}/{repo}/statuses/{sha}`.
    #[serde(rename = "github")]
    GitHub,
    /// GitLab (gitlab.com or self-managed): `POST /projects/{id}/statuses/{sha}` under
    /// `/api/v4`, the project's path as its id.
    #[serde(rename = "gitlab")]
    GitLab,
}

/// The sync policy of one environment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Environment {
    /// Environment name, e.g. `dev` or `prod`.
    pub name: Spanned<String>,
    /// What plumb may do when an application is OutOfSync.
    #[serde(default)]
    pub sync_policy: SyncPolicy,
    /// Seconds between two passes of an application when nothing triggers one sooner:
    /// an integer (seconds) or a string with a unit (`90s`, `3m`, `1h`). Default 180 s.
    /// Each wait gets up to 10 % random jitter.
    #[serde(default, deserialize_with = "de_interval")]
    pub reconcile_interval: Option<Duration>,
    /// The longest pause of automated sync and selfHeal (`plumb suspend`) in this
    /// environment, counted from when plumb first saw it: a pause asking for longer
    /// ends then, and its status says so. Integer seconds or a string with a unit
    /// (`12h`, `168h`); default [`DEFAULT_MAX_PAUSE`] (7 days). A pause is a request any
    /// holder of `patch applications.plumb.dev` can write; this keeps a forgotten (or
    /// hostile) one from splitting Git and the cluster for good.
    #[serde(default, deserialize_with = "de_interval")]
    pub max_pause: Option<Duration>,
    /// Fields that differ on purpose (owned by another controller) and are not drift.
    #[serde(default)]
    pub ignore_differences: Vec<IgnoreDifference>,
    /// Fields whose values are as sensitive as a Secret's `data`: masked in every
    /// output by the same rule ([`crate::compare::sensitive`]).
    #[serde(default)]
    pub sensitive_fields: Vec<SensitiveFields>,
    /// How health is assessed in this environment: thresholds and per-kind overrides.
    #[serde(default)]
    pub health: HealthPolicy,
    /// Report untracked objects in the applications' namespaces.
    #[serde(default)]
    pub orphaned_resources: OrphanedResources,
    /// Namespaces the environment's applications may write into (see [`Boundaries`]).
    #[serde(default)]
    pub destinations: Option<Destinations>,
    /// Cluster-scoped kinds they may write (see [`Boundaries`]).
    #[serde(default)]
    pub cluster_resources: Option<Vec<GroupKind>>,
    /// Namespaced kinds they may not write (see [`Boundaries`]).
    #[serde(default)]
    pub namespace_resources: Option<NamespaceResources>,
    /// Repository paths (besides each application's own `path`) that symlinks in its
    /// files may point into, e.g. `[common/]`; a symlink to anywhere else — another
    /// application's path — fails the render naming it.
    #[serde(default)]
    pub shared_paths: Vec<String>,
    /// A ServiceAccount in each application's namespace that the application's
    /// dry-runs, applies and deletes run as (Kubernetes impersonation, like Flux's
    /// `serviceAccountName`): Kubernetes RBAC is then the last line of the boundaries.
    /// plumb's own identity needs `impersonate` on it. Unset: plumb's own identity.
    #[serde(default)]
    pub service_account_name: Option<String>,
    /// What happens to the environment's applications' objects when an application
    /// leaves the policy (`orphan`, `delete` or `wait`; see [`DeletionPolicy`]); an
    /// application's own `deletionPolicy` wins. Default `orphan`.
    #[serde(default)]
    pub deletion_policy: Option<Spanned<String>>,
    /// When automated sync and selfHeal may run (Argo CD's AppProject sync windows):
    /// see [`crate::plan::windows`]. Empty: always.
    #[serde(default)]
    pub sync_windows: Vec<super::SyncWindow>,
    /// Deploy only commits (or tags) signed by the keys it names (see
    /// [`super::VerifyCommits`]). Unset: signatures are not checked.
    #[serde(default)]
    pub verify_commits: Option<super::VerifyCommits>,
    /// Previews of pull requests into the branches the environment's applications
    /// follow (see [`crate::preview`]). Default: on, forks not previewed.
    #[serde(default)]
    pub previews: Previews,
}

/// `previews:` of an environment: whether a pull (merge) request whose base branch an
/// application follows gets a comment with the plan of its head, and a commit status
/// `plumb/preview` (posted with the repository's `commitStatus` token).
///
/// ```yaml
/// previews: {enabled: true, forks: false}
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Previews {
    /// Preview pull requests at all (default `true`; a forge sends pull request events
    /// only when its webhook asks for them).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Also preview pull requests whose head comes from a fork (default `false`: anyone
    /// who can fork can open one). Even then an application that decrypts SOPS files
    /// is never rendered for a fork.
    #[serde(default)]
    pub forks: bool,
}

impl Default for Previews {
    fn default() -> Self {
        Previews { enabled: true, forks: false }
    }
}

/// What plumb does with an application's objects once the application leaves the
/// policy file (or the generator that produced it stops producing it): the
/// decommission ([`crate::plan::decommission`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeletionPolicy {
    /// The objects stay in the cluster, with plumb's tracking marks left on them; only
    /// the `Application` resource goes (the default; Argo CD's non-cascading delete).
    #[default]
    Orphan,
    /// The objects are deleted (PreDelete hooks first, reverse wave order, PostDelete
    /// hooks after), data-loss classes only with `plumb decommission APP --approve`.
    Delete,
    /// As `Delete`, and the `Application` resource stays (reporting progress) until
    /// every object is gone, finalizers included.
    Wait,
}

impl DeletionPolicy {
    /// `orphan`, `delete` or `wait`, as written in the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Orphan => "orphan",
            Self::Delete => "delete",
            Self::Wait => "wait",
        }
    }

    /// The policy named `text`; `None` for anything but `orphan`, `delete`, `wait`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "orphan" => Some(Self::Orphan),
            "delete" => Some(Self::Delete),
            "wait" => Some(Self::Wait),
            _ => None,
        }
    }
}

/// What one application's Git may make plumb write (Argo CD's AppProject destinations
/// and resource allow/deny lists, simpler): set on an environment, and per application,
/// where each field given replaces the environment's. Checked for every object before
/// anything is written; a refused object refuses the whole sync, naming the file, the
/// object and the rule. Whatever they say, plumb's own namespace
/// (`settings.statusNamespace`) and plumb's own RBAC (ClusterRoles and ClusterRoleBindings
/// named `plumb` or `plumb-*`, and bindings to those roles) are never written from Git,
/// but by the one application with `selfManagement: true` (`plumb bootstrap`).
///
/// ```yaml
/// destinations:
///   namespaces: [shop, "shop-*"]     # globs; default: exactly the application's namespace
/// clusterResources:                  # cluster-scoped group/kinds allowed (globs); default:
///   - {group: "", kind: Namespace}   #   none, but a Namespace that is a destination
///   - {group: apiextensions.k8s.io, kind: CustomResourceDefinition}
/// namespaceResources:
///   deny:                            # namespaced group/kinds never written (globs)
///     - {group: "", kind: ResourceQuota}
///     - {group: rbac.authorization.k8s.io, kind: "*Binding"}
/// ```
#[derive(Debug, Clone, Default)]
pub struct Boundaries {
    /// Namespaces objects may be written into (`None`: the application's namespace).
    pub destinations: Option<Destinations>,
    /// Cluster-scoped kinds that may be written (`None`: only a destination Namespace).
    pub cluster_resources: Option<Vec<GroupKind>>,
    /// Namespaced kinds that may not be written.
    pub namespace_resources: Option<NamespaceResources>,
    /// The application is plumb's own installation ([`Application::self_management`]):
    /// plumb's namespace, Namespace, resource definition and RBAC may be written too.
    pub self_management: bool,
}

/// `destinations:` of [`Boundaries`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Destinations {
    /// Namespace globs (`shop`, `shop-*`, `*`).
    #[serde(default)]
    pub namespaces: Vec<String>,
}

/// `namespaceResources:` of [`Boundaries`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamespaceResources {
    /// Group/kinds never written.
    #[serde(default)]
    pub deny: Vec<GroupKind>,
}

/// A group and kind, each a glob (`group: ""` is the core group; `*` any).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupKind {
    /// API group glob (default `""`, the core group).
    #[serde(default)]
    pub group: String,
    /// Kind glob.
    pub kind: String,
}

impl Config {
    /// The reconcile interval of application `app`: its environment's, else
    /// [`DEFAULT_RECONCILE_INTERVAL`].
    pub fn interval_of(&self, app: &Application) -> Duration {
        self.environments
            .iter()
            .find(|e| e.name.value == app.environment.value)
            .map_or(DEFAULT_RECONCILE_INTERVAL, Environment::interval)
    }
}

impl Environment {
    /// The reconcile interval, defaulted to [`DEFAULT_RECONCILE_INTERVAL`].
    pub fn interval(&self) -> Duration {
        self.reconcile_interval.unwrap_or(DEFAULT_RECONCILE_INTERVAL)
    }

    /// `maxPause`, defaulted to [`DEFAULT_MAX_PAUSE`].
    pub fn max_pause(&self) -> Duration {
        self.max_pause.unwrap_or(DEFAULT_MAX_PAUSE)
    }
}

/// Switches of automated sync (Argo CD's `syncPolicy`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SyncPolicy {
    /// Sync by itself when a new revision appears. Off: only `plumb sync` applies.
    #[serde(default)]
    pub automated: bool,
    /// Delete tracked objects that Git no longer declares.
    #[serde(default)]
    pub prune: bool,
    /// Also sync when the live state drifted while the revision stayed the same.
    #[serde(default)]
    pub self_heal: bool,
    /// Allow a sync whose render produced zero objects (default false: refuse).
    #[serde(default)]
    pub allow_empty: bool,
    /// Sync options, `Name=value` (e.g. `CreateNamespace=true`, `PruneLast=true`); see
    /// [`crate::plan::SyncOptions`].
    #[serde(default)]
    pub sync_options: Vec<String>,
    /// PersistentVolumeClaims, Namespaces and CustomResourceDefinitions are pruned only
    /// with an approval, as if `Prune=confirm` (default true; see
    /// [`crate::plan::data_loss_class`]).
    #[serde(default = "yes")]
    pub protect_data_loss: bool,
    /// Refuse an automated sync that would prune more than this percentage of the
    /// application's tracked objects (1–100; unset: no limit). A mass deletion then
    /// needs `plumb prune APP`.
    #[serde(default)]
    pub max_prune_percent: Option<u8>,
    /// Field managers of other tools people change objects with by hand (a dashboard,
    /// an internal CLI), taken over like kubectl's before plumb applies: their fields
    /// show as drift and go when Git does not declare them. See
    /// [`crate::compare::managers::HAND_MANAGERS`] for the built-in list.
    #[serde(default)]
    pub take_over_managers: Vec<String>,
    /// Take over objects that exist without plumb's tracking-id (as `Adopt=true` on
    /// every object; default false: such an object refuses the sync).
    #[serde(default)]
    pub adopt: bool,
    /// Let automated sync follow a ref moved to a commit that does not descend from the
    /// last synced one (force-push, branch reset); default false: it holds with a
    /// `HistoryRewritten` condition until a person syncs.
    #[serde(default)]
    pub allow_history_rewrite: bool,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        Self {
            automated: false,
            prune: false,
            self_heal: false,
            allow_empty: false,
            sync_options: Vec::new(),
            protect_data_loss: true,
            max_prune_percent: None,
            take_over_managers: Vec::new(),
            adopt: false,
            allow_history_rewrite: false,
        }
    }
}

fn yes() -> bool {
    true
}

/// `orphanedResources`: report objects in an application's namespaces that no
/// application tracks (Argo CD's AppProject setting of the same name). Never deletes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OrphanedResources {
    /// Report them: an `OrphanedResourceWarning` condition and the list in the status.
    #[serde(default)]
    pub warn: bool,
    /// Objects never reported, by group/kind/name globs (omitted = any).
    #[serde(default)]
    pub ignore: Vec<OrphanIgnore>,
}

/// One `orphanedResources.ignore` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OrphanIgnore {
    /// API group glob (`""` is the core group).
    #[serde(default)]
    pub group: Option<String>,
    /// Kind glob.
    #[serde(default)]
    pub kind: Option<String>,
    /// Name glob.
    #[serde(default)]
    pub name: Option<String>,
}

/// One `sensitiveFields` rule: fields of the objects of a group and kind whose values
/// never leave plumb (printed `(sensitive, hmac:<first 8 hex>)` under the
/// installation's mask key, as a Secret's `data`), e.g. a token in a custom resource's
/// spec:
///
/// ```yaml
/// sensitiveFields:
///   - {group: db.example.com, kind: Database, jsonPointers: [/spec/password]}
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SensitiveFields {
    /// API group, a glob; omitted means any group, `""` is the core group.
    #[serde(default)]
    pub group: Option<String>,
    /// Kind, a glob (`Database`, `*`).
    pub kind: Spanned<String>,
    /// RFC 6901 JSON pointers of the sensitive fields (`/spec/password`; `~1` escapes
    /// `/`); everything under a field is sensitive too. At least one; `""` (the whole
    /// object) is not allowed.
    pub json_pointers: Vec<Spanned<String>>,
}

/// One `ignoreDifferences` rule (Argo CD's shape).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IgnoreDifference {
    /// API group, a glob (`apps`, `*.k8s.io`, `*`); omitted means any group, `""` is the
    /// core group.
    #[serde(default)]
    pub group: Option<String>,
    /// Kind, a glob (`Deployment`, `*`).
    pub kind: String,
    /// Only objects of this name.
    #[serde(default)]
    pub name: Option<String>,
    /// Only objects in this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// RFC 6901 JSON pointers of ignored fields (`/spec/replicas`; `~1` escapes `/`).
    #[serde(default)]
    pub json_pointers: Vec<Spanned<String>>,
    /// jq expressions selecting ignored fields
    /// (`.spec.template.spec.containers[] | select(.name == "istio-proxy")`).
    #[serde(default)]
    pub jq_path_expressions: Vec<Spanned<String>>,
    /// Field managers whose fields (per the live object's `managedFields`) are ignored,
    /// e.g. `kube-controller-manager` for replicas an HPA sets.
    #[serde(default)]
    pub managed_fields_managers: Vec<String>,
}

/// An application: `path` of `repository` at `revision`, reconciled into `namespace`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Application {
    /// Application name (a DNS-1123 label: it names the `Application` resource and appears
    /// in the tracking-id).
    pub name: Spanned<String>,
    /// Name of a [`Repository`].
    pub repository: Spanned<String>,
    /// Branch, tag or 40-hex commit SHA (default `main`).
    #[serde(default = "default_revision")]
    pub revision: Spanned<String>,
    /// Directory inside the repository (default: its root).
    #[serde(default = "default_path")]
    pub path: Spanned<String>,
    /// Namespace for objects that do not name one.
    pub namespace: Spanned<String>,
    /// Name of an [`Environment`].
    pub environment: Spanned<String>,
    /// Ignore rules of this application, added to its environment's.
    #[serde(default)]
    pub ignore_differences: Vec<IgnoreDifference>,
    /// Health overrides of this application; tried before the environment's
    /// `health.overrides`.
    #[serde(default)]
    pub health_overrides: Vec<HealthOverride>,
    /// Changed-path filter for webhooks (default `false`): a push whose commits touched no
    /// file under `path` does not start a pass of this application. Applied only when the
    /// delivery's file lists are complete (Gitea lists at most 5 commits, GitLab 20,
    /// Bitbucket none; force pushes and new refs are never filtered); when in doubt the
    /// pass runs. Polling is unaffected.
    #[serde(default)]
    pub webhook_path_filter: bool,
    /// How the path is rendered (plain YAML, kustomize, Helm, SOPS); detected when absent.
    #[serde(default)]
    pub source: super::Source,
    /// This application's destinations, replacing its environment's (see [`Boundaries`]).
    #[serde(default)]
    pub destinations: Option<Destinations>,
    /// This application's cluster-scoped kinds, replacing its environment's.
    #[serde(default)]
    pub cluster_resources: Option<Vec<GroupKind>>,
    /// This application's denied namespaced kinds, replacing its environment's.
    #[serde(default)]
    pub namespace_resources: Option<NamespaceResources>,
    /// The ServiceAccount (in the application's namespace) its writes run as,
    /// replacing its environment's `serviceAccountName`.
    #[serde(default)]
    pub service_account_name: Option<String>,
    /// What happens to this application's objects when it leaves the policy,
    /// replacing its environment's `deletionPolicy` (see [`DeletionPolicy`]).
    #[serde(default)]
    pub deletion_policy: Option<Spanned<String>>,
    /// Applications that must be Synced and Healthy at their current revision before
    /// this one's automated syncs and selfHeal run (see [`crate::plan::depends`]):
    /// names of applications of this policy; no cycles.
    #[serde(default)]
    pub depends_on: Vec<Spanned<String>>,
    /// This application's signature verification, replacing its environment's as a
    /// whole (see [`super::VerifyCommits`] and [`Application::verify_commits`]).
    #[serde(default)]
    pub verify_commits: Option<super::VerifyCommits>,
    /// This application is plumb's own installation (`plumb bootstrap` writes it): the
    /// one application whose Git may write plumb's namespace, its Namespace, the
    /// `Application` resource definition and plumb's own RBAC (see
    /// [`crate::plan::Boundary`]); those objects it never prunes. At most one per policy,
    /// declared under `applications:` (not generated), its `namespace` plumb's
    /// (`settings.statusNamespace`), its deletion policy `orphan`. Default `false`.
    #[serde(default)]
    pub self_management: bool,
    /// The applicationSet that generated this application ([`super::generators`]);
    /// `None` for an entry of `applications:` (set by the loader, not read from YAML).
    #[serde(skip)]
    pub application_set: Option<String>,
    /// Why this generated application is kept from an earlier expansion although its
    /// set generates nothing now ([`super::generators::Held`]): shown on it as a
    /// `PolicyWarning` condition. Set by the expansion, not read from YAML.
    #[serde(skip)]
    pub held: Option<String>,
    /// Whether a `pullRequests` set generated this application (a preview environment,
    /// [`super::generators`]): when it leaves, the environment it empties is no reason to
    /// hold its decommission ([`crate::plan::decommission::decide`]). Set by the
    /// expansion, not read from YAML.
    #[serde(skip)]
    pub preview: bool,
}

impl Application {
    /// This application's [`DeletionPolicy`] in `env`: its own, else the environment's,
    /// else `orphan` (an unknown word, which validation refuses, also reads `orphan`:
    /// the policy that deletes nothing).
    pub fn deletion_policy(&self, env: &Environment) -> DeletionPolicy {
        self.deletion_policy
            .as_ref()
            .or(env.deletion_policy.as_ref())
            .and_then(|p| DeletionPolicy::parse(&p.value))
            .unwrap_or_default()
    }

    /// The user this application's writes impersonate in `env`:
    /// `system:serviceaccount:<namespace>:<serviceAccountName>`, or `None` (plumb's own
    /// identity).
    pub fn impersonates(&self, env: &Environment) -> Option<String> {
        let sa = self.service_account_name.as_ref().or(env.service_account_name.as_ref())?;
        Some(format!("system:serviceaccount:{}:{sa}", self.namespace.value))
    }

    /// The signature verification of this application in `env`: its own
    /// `verifyCommits`, else the environment's, else `None` (nothing verified).
    pub fn verify_commits<'a>(&'a self, env: &'a Environment) -> Option<&'a super::VerifyCommits> {
        self.verify_commits.as_ref().or(env.verify_commits.as_ref())
    }

    /// The boundaries of this application in `env`: each field given on the
    /// application, else the environment's.
    pub fn boundaries(&self, env: &Environment) -> Boundaries {
        Boundaries {
            destinations: self.destinations.clone().or_else(|| env.destinations.clone()),
            cluster_resources: self.cluster_resources.clone().or_else(|| env.cluster_resources.clone()),
            namespace_resources: self.namespace_resources.clone().or_else(|| env.namespace_resources.clone()),
            self_management: self.self_management,
        }
    }
}

fn default_revision() -> Spanned<String> {
    Spanned::new("main".to_string(), serde_saphyr::Location::UNKNOWN, serde_saphyr::Location::UNKNOWN)
}

fn default_path() -> Spanned<String> {
    Spanned::new(String::new(), serde_saphyr::Location::UNKNOWN, serde_saphyr::Location::UNKNOWN)
}

fn de_interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Secs(s)) => Ok(Some(Duration::from_secs(s))),
        Some(Raw::Text(t)) => parse_duration(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

/// Parses `90`, `90s`, `3m`, `1h`, `1h30m`, `500ms` into a duration.
///
/// A bare integer is seconds. Otherwise the text is one or more `<integer><unit>`
/// parts with no spaces, unit `h`, `m`, `s` or `ms`, summed (`1h30m`, and also `30s1m`);
/// each part is read by jiff's friendly duration parser
/// ([`jiff::fmt::friendly::SpanParser`]), which also does the arithmetic. The friendly
/// format's other forms (spaces, `1.5m`, `2 hours`, signs, ISO 8601 `PT3M`) are not
/// accepted: the policy language stays the one documented above. Zero is rejected.
///
/// # Errors
/// A message naming the text when it is not a positive number followed by a unit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    static PARSER: jiff::fmt::friendly::SpanParser = jiff::fmt::friendly::SpanParser::new();
    let bad = || format!("`{text}` is not a duration (use e.g. 180, 90s, 3m, 1h)");
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return if secs == 0 { Err(bad()) } else { Ok(Duration::from_secs(secs)) };
    }
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'h' | b'm' | b's')) {
        return Err(bad());
    }
    // One part per `<digits><letters>`: a part ends where letters are followed by a digit.
    let bytes = t.as_bytes();
    let ends = (1..bytes.len()).filter(|&i| bytes[i].is_ascii_digit() && !bytes[i - 1].is_ascii_digit());
    let mut start = 0;
    let mut total = Duration::ZERO;
    for end in ends.chain(std::iter::once(bytes.len())) {
        let part = PARSER.parse_unsigned_duration(&t[start..end]).map_err(|_| bad())?;
        total = total.checked_add(part).ok_or_else(bad)?;
        start = end;
    }
    if total.is_zero() { Err(bad()) } else { Ok(total) }
}

/// `d` as messages show a duration: seconds with the unit, `300s`, `1.5s` (what
/// [`parse_duration`] reads back).
pub fn shown_duration(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// How health is assessed (the `health:` block of an environment). Every field is
/// optional; the defaults are those of [`crate::health::HealthSettings`].
///
/// ```yaml
/// health:
///   stallAfter: 10m            # Progressing (or deletion pending) this long -> warning
///   podRestartLimit: 3         # a pod of the update revision failing this often ...
///   podFailureAfter: 10m       # ... or this long makes its workload Degraded
///   unschedulableAfter: 5m     # a Pending pod unschedulable this long is Degraded
///   overrides:                 # per group/kind rules, first match wins
///     - group: networking.k8s.io
///       kind: Ingress
///       match: {ingressClassName: internal-nginx}
///       rule: healthy-when-present
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HealthPolicy {
    /// An object Progressing longer than this gets a *stalled* warning on its
    /// application, and an object deleted but still held by finalizers this long gets a
    /// `PruneStuck` condition (integer seconds or `10m`; default 10 min).
    #[serde(default, deserialize_with = "de_interval")]
    pub stall_after: Option<Duration>,
    /// Restarts after which a crash-looping pod of a workload's update revision makes the
    /// workload Degraded (default 3).
    #[serde(default)]
    pub pod_restart_limit: Option<u32>,
    /// How long a pod of a workload's update revision may fail (crash loop, image pull)
    /// before the workload is Degraded (default 10 min).
    #[serde(default, deserialize_with = "de_interval")]
    pub pod_failure_after: Option<Duration>,
    /// How long a Pending pod may be `Unschedulable` before it is Degraded (default 5 min).
    #[serde(default, deserialize_with = "de_interval")]
    pub unschedulable_after: Option<Duration>,
    /// Per group/kind health rules, tried in order after the application's own.
    #[serde(default)]
    pub overrides: Vec<HealthOverride>,
}

/// A declarative health rule for one group/kind, optionally narrowed by field values,
/// so that a custom resource (or a built-in kind whose controller behaves unusually) is
/// assessed without code — plumb's counterpart of Argo CD's Lua health checks.
///
/// Exactly one of `rule` or `conditions` is given. The override is consulted after the
/// generic checks (being deleted, `generation` not yet observed) and before the
/// built-in rules of the kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HealthOverride {
    /// API group; omitted means any group, `""` is the core group.
    #[serde(default)]
    pub group: Option<String>,
    /// Kind, e.g. `Ingress`; `*` matches every kind of the group.
    pub kind: Spanned<String>,
    /// Field values the object must have, all of them, for the override to apply.
    /// A key starting with `/` is an RFC 6901 JSON pointer from the object's root
    /// (`/metadata/labels/tier`); any other key is a pointer below `spec`
    /// (`ingressClassName` = `/spec/ingressClassName`). Values compare as JSON, and a
    /// string also equals a number or boolean of the same text.
    #[serde(default, rename = "match")]
    pub match_fields: std::collections::BTreeMap<String, serde_json::Value>,
    /// A named rule.
    #[serde(default)]
    pub rule: Option<HealthRule>,
    /// Condition rows, tried in order: the first row whose `type`, `status` and
    /// `reason` match a condition of `status.conditions` gives the health.
    #[serde(default)]
    pub conditions: Vec<ConditionHealth>,
    /// Health when no row of `conditions` matches; omitted: the built-in rules decide.
    #[serde(default)]
    pub otherwise: Option<super::HealthStatus>,
}

/// Named health rules of a [`HealthOverride`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum HealthRule {
    /// Healthy as soon as the object exists (and `match` holds): for controllers that
    /// admit an object without publishing anything in its status, e.g. an ingress
    /// controller that never fills `status.loadBalancer`. `healthy-when-admitted` is an
    /// alias that reads better when `match` names the admitting controller's class.
    #[serde(rename = "healthy-when-present", alias = "healthy-when-admitted")]
    HealthyWhenPresent,
}

/// One row of a condition-based [`HealthOverride`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConditionHealth {
    /// Condition type, e.g. `Ready` or `Synced`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `"True"`, `"False"` or `"Unknown"`; omitted: any status.
    #[serde(default)]
    pub status: Option<String>,
    /// Condition reason; omitted: any reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// The health this row means (`Healthy`, `Progressing`, `Degraded`, `Suspended`).
    pub health: super::HealthStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        for (text, secs) in [("180", 180.0), ("90s", 90.0), ("3m", 180.0), ("1h30m", 5400.0), ("500ms", 0.5)] {
            assert_eq!(parse_duration(text).map(|d| d.as_secs_f64()), Ok(secs), "{text}");
        }
        for bad in ["", "0", "m", "3x", "-3s", "1.5m"] {
            assert!(parse_duration(bad).is_err(), "{bad} must be rejected");
        }
    }

    /// What the hand-written parser before jiff accepted, with the same values, and what
    /// it rejected — including the friendly forms jiff alone would accept.
    #[test]
    fn durations_keep_their_grammar() {
        for (text, millis) in [
            (" 90s ", 90_000),
            ("+5", 5_000),
            ("007", 7_000),
            ("05s", 5_000),
            ("1h1m1s", 3_661_000),
            ("1h0m", 3_600_000),
            ("0m30s", 30_000),
            ("1s500ms", 1_500),
            ("30s1m", 90_000),
            ("1m1m", 120_000),
            ("2h", 7_200_000),
            ("1ms", 1),
        ] {
            assert_eq!(parse_duration(text).map(|d| d.as_millis()), Ok(millis), "{text}");
        }
        assert_eq!(parse_duration("18446744073709551615s"), Ok(Duration::from_secs(u64::MAX)));
        // Too large for a duration: an error (the hand-written parser overflowed here).
        assert!(parse_duration("18446744073709551615h").is_err());
        assert!(parse_duration("18446744073709551615s1s").is_err());
        for bad in [
            "0s", "0m0s", "1m30", "30 s", "1h 30m", "1H", "2 hours", "3min", "1hms", "+5s", "PT3M", "3m ago", "1d",
            "1us", "1.5", "s5", "5sm",
        ] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains(&format!("`{bad}` is not a duration")), "{err}");
        }
    }
}
