//! `plumb bootstrap`: plumb installed from the manifests of `deploy/` (embedded in the
//! binary), and managing its own installation from Git from then on.
//!
//! One run writes into the user's clone of the repository, under `PATH` (e.g.
//! `clusters/prod`): the base and one RBAC profile under `PATH/plumb/`, a
//! `kustomization.yaml` joining them and generating the policy ConfigMap from
//! `PATH/policy.yaml`, and that policy: an application `plumb` ([`SELF_APP`]) reading
//! `PATH` of the repository under `selfManagement: true` (see [`crate::plan::Boundary`]),
//! the example application commented out. It then renders the same files with kustomize
//! and applies them once (server-side apply as field manager `plumb`, the objects stamped
//! as the application's, the resource definition first), and creates the webhook Secret
//! with a random value when missing. Nothing is committed or pushed: the user does that,
//! and from the first pass of `plumb` on, the files in Git are the authority. Pure parts
//! ([`files`], [`policy`]) are values in, values out; [`run`] does the IO.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context as _;
use serde_json::Value;

use super::read::KubeArgs;
use crate::{cluster::Cluster, plan::kind_rank, tracking::ObjectKey};

/// The name of the application that manages plumb's installation.
pub const SELF_APP: &str = "plumb";

/// plumb's namespace in the manifests of `deploy/` (the status namespace of the policy).
pub const NAMESPACE: &str = "plumb-system";

/// The webhook Secret the Deployment mounts and the policy's repository reads
/// (`webhookSecretRef`): its key.
const WEBHOOK_SECRET: (&str, &str) = ("plumb-webhook", "webhook-secret");

/// The files of `deploy/base` written as they are (its kustomization is cut, see
/// [`base_kustomization`]; its example policy is replaced by the generated one).
const BASE: &[(&str, &str)] = &[
    ("crd.yaml", include_str!("../../deploy/base/crd.yaml")),
    ("namespace.yaml", include_str!("../../deploy/base/namespace.yaml")),
    ("serviceaccount.yaml", include_str!("../../deploy/base/serviceaccount.yaml")),
    ("role.yaml", include_str!("../../deploy/base/role.yaml")),
    ("deployment.yaml", include_str!("../../deploy/base/deployment.yaml")),
    ("services.yaml", include_str!("../../deploy/base/services.yaml")),
    ("networkpolicy.yaml", include_str!("../../deploy/base/networkpolicy.yaml")),
];

/// `deploy/base/kustomization.yaml`.
const BASE_KUSTOMIZATION: &str = include_str!("../../deploy/base/kustomization.yaml");

/// The files of `deploy/profiles/cluster-admin`.
const CLUSTER_ADMIN: &[(&str, &str)] = &[
    ("kustomization.yaml", include_str!("../../deploy/profiles/cluster-admin/kustomization.yaml")),
    ("clusterrolebinding.yaml", include_str!("../../deploy/profiles/cluster-admin/clusterrolebinding.yaml")),
];

/// The files of `deploy/profiles/least-privilege`.
const LEAST_PRIVILEGE: &[(&str, &str)] = &[
    ("kustomization.yaml", include_str!("../../deploy/profiles/least-privilege/kustomization.yaml")),
    ("rbac.yaml", include_str!("../../deploy/profiles/least-privilege/rbac.yaml")),
    ("destinations.yaml", include_str!("../../deploy/profiles/least-privilege/destinations.yaml")),
    ("impersonate.yaml", include_str!("../../deploy/profiles/least-privilege/impersonate.yaml")),
];

/// The RBAC profile of the installation (`deploy/profiles/*`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `deploy/profiles/cluster-admin`: plumb may write any kind anywhere.
    ClusterAdmin,
    /// `deploy/profiles/least-privilege`: plumb writes in its destination namespaces;
    /// bootstrap adds the rights it needs to manage its own installation
    /// (`self-management.yaml`).
    LeastPrivilege,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Self::ClusterAdmin => "cluster-admin",
            Self::LeastPrivilege => "least-privilege",
        }
    }

    fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::ClusterAdmin => CLUSTER_ADMIN,
            Self::LeastPrivilege => LEAST_PRIVILEGE,
        }
    }
}

/// The arguments of `plumb bootstrap`.
#[derive(clap::Args, Debug, Clone)]
pub struct BootstrapArgs {
    /// Clone URL of the repository plumb's installation lives in (the one checked out at
    /// `--checkout`), as plumb will fetch it: `https://…`, `ssh://…`, `git@host:…`.
    #[arg(long)]
    pub repository: String,
    /// Directory of the repository for this cluster's installation, e.g. `clusters/prod`
    /// (relative, inside the repository).
    #[arg(long)]
    pub path: String,
    /// Branch (or tag) plumb follows.
    #[arg(long, default_value = "main")]
    pub revision: String,
    /// The local clone of the repository (a Git work tree) the files are written into.
    #[arg(long, default_value = ".")]
    pub checkout: PathBuf,
    /// RBAC profile of the installation.
    #[arg(long, value_enum, default_value_t = Profile::ClusterAdmin)]
    pub profile: Profile,
    /// The image of plumb's Deployment (`registry.example.com/plumb/plumb:0.1.0`, or
    /// pinned `…@sha256:…`), written into the top `kustomization.yaml`. Without it the
    /// Deployment keeps the placeholder `plumb`, which no registry serves.
    #[arg(long)]
    pub image: Option<String>,
    /// Overwrite files that exist and differ (never `policy.yaml` and the top
    /// `kustomization.yaml`: yours once written, kept as they are).
    #[arg(long)]
    pub force: bool,
    /// Install an existing `policy.yaml` / top `kustomization.yaml` of the checkout
    /// (kept as they are) even on a first install, when the cluster has no
    /// `applications.plumb.dev/plumb` yet: without it such a run is refused, as anyone
    /// who can push to the repository could have written them. Review what bootstrap
    /// prints of them first.
    #[arg(long)]
    pub keep_existing: bool,
    /// Print what would be written and applied; write and apply nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// One file to write, relative to the checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// `PATH/…`, `/`-separated.
    pub path: String,
    /// Its content.
    pub text: String,
}

/// Why `path` cannot hold the installation: empty, absolute, leaving the repository
/// (`..`), or not a plain `a/b` path (`.`, empty segments, backslashes).
fn path_problem(path: &str) -> Option<String> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.split('/').any(|s| s.is_empty() || s == "." || s == "..");
    bad.then(|| format!("--path `{path}` must be a relative directory inside the repository, such as clusters/prod"))
}

/// `deploy/base/kustomization.yaml` without its `configMapGenerator` (and the comment
/// above it): the policy ConfigMap is generated by the installation's own kustomization
/// from its `policy.yaml`.
pub fn base_kustomization() -> String {
    let lines: Vec<&str> = BASE_KUSTOMIZATION.lines().collect();
    let mut end = lines.iter().position(|l| l.starts_with("configMapGenerator:")).unwrap_or(lines.len());
    while end > 0 && lines[end - 1].starts_with('#') {
        end -= 1;
    }
    let mut out = lines[..end].join("\n");
    out.push_str(
        "\n# The policy ConfigMap `plumb-policy` is generated by ../../kustomization.yaml from\n# ../../policy.yaml (plumb bootstrap).\n",
    );
    out
}

/// The namespaces the least-privilege profile's `destinations.yaml` binds.
fn profile_destinations(profile: Profile) -> Vec<String> {
    let Some((_, text)) = profile.files().iter().find(|(n, _)| *n == "destinations.yaml") else {
        return vec![];
    };
    documents(text)
        .iter()
        .filter(|d| d["kind"] == "Namespace")
        .filter_map(|d| d.pointer("/metadata/name").and_then(Value::as_str).map(String::from))
        .collect()
}

/// The YAML documents of `text` (none when it does not parse: the embedded files do).
fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).unwrap_or_default().into_iter().filter(|d| !d.is_null()).collect()
}

/// The policy `plumb bootstrap` writes to `PATH/policy.yaml`: plumb's namespace, the
/// repository `url` (its webhook secret from the Secret `plumb-webhook`), an environment
/// `plumb` that syncs, prunes and heals, and the application [`SELF_APP`] reading `path`
/// at `revision` under `selfManagement: true`; with the least-privilege profile its
/// destinations are plumb's namespace and the profile's. The example application of
/// `deploy/base/policy.yaml` follows, commented out.
pub fn policy(url: &str, path: &str, revision: &str, profile: Profile) -> String {
    let destinations = match profile_destinations(profile) {
        d if d.is_empty() => String::new(),
        d => format!(
            "\n    # the namespaces plumb/profiles/least-privilege/destinations.yaml creates and binds\n    destinations: {{namespaces: [{NAMESPACE}, {}]}}",
            d.join(", ")
        ),
    };
    format!(
        "# plumb's policy, mounted from the ConfigMap plumb-policy that kustomization.yaml
# generates from this file. Since `plumb bootstrap` this file in Git is the authority:
# commit a change and the application `{SELF_APP}` applies it to the ConfigMap; plumb reads
# the mounted file again and reloads the policy in place (no restart).
# Whoever can push to {path} controls plumb's installation, and with it every
# application: protect the branch like the cluster's admin credentials.
settings: {{statusNamespace: {NAMESPACE}}}
repositories:
  - name: {SELF_APP}
    url: {url}
    webhookSecretRef: {{name: {}, key: {}}}
    # a private repository: tokenSecretRef: {{name: plumb-git, key: token}} (a Secret in {NAMESPACE})
environments:
  - name: {SELF_APP}
    syncPolicy: {{automated: true, prune: true, selfHeal: true}}
  # - name: prod
  #   syncPolicy: {{automated: true, prune: false, selfHeal: true}}
applications:
  # plumb's own installation: the only application that may write plumb's namespace, its
  # Namespace, the Application resource definition and plumb's RBAC; it never prunes
  # what plumb needs to run (docs/reference.md, selfManagement).
  - name: {SELF_APP}
    repository: {SELF_APP}
    revision: {revision}
    path: {path}
    namespace: {NAMESPACE}
    environment: {SELF_APP}
    selfManagement: true{destinations}
  # - {{name: web, repository: fleet, revision: main, path: apps/web, namespace: web, environment: prod}}
",
        WEBHOOK_SECRET.0, WEBHOOK_SECRET.1
    )
}

/// The `images:` entry of kustomize for the image reference `image`
/// (`registry/plumb:0.1.0`, `registry/plumb@sha256:…`, `registry/plumb`) replacing the
/// Deployment's placeholder `plumb`, as `kustomize edit set image plumb=IMAGE` writes it.
///
/// # Errors
/// An empty reference, or one with spaces or quotes.
pub fn image_entry(image: &str) -> Result<String, String> {
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '{' | '}' | ',' | '#')) {
        return Err(format!(
            "--image `{image}` is not an image reference such as registry.example.com/plumb/plumb:0.1.0"
        ));
    }
    if let Some((name, digest)) = image.split_once('@') {
        return Ok(format!("{{name: plumb, newName: {name}, digest: \"{digest}\"}}"));
    }
    let last = image.rfind('/').map_or(0, |i| i + 1);
    Ok(match image[last..].rfind(':') {
        Some(i) => {
            let (name, tag) = (&image[..last + i], &image[last + i + 1..]);
            format!("{{name: plumb, newName: {name}, newTag: \"{tag}\"}}")
        }
        None => format!("{{name: plumb, newName: {image}}}"),
    })
}

/// The top kustomization of the installation: the base, the profile as a component
/// (with the least-privilege profile, `self-management.yaml` too), the image when given
/// ([`image_entry`]), and the policy ConfigMap generated from `policy.yaml` under one
/// name (a changed policy is reloaded in place, not rolled).
fn kustomization(profile: Profile, image: Option<&str>) -> Result<String, String> {
    let extra = if profile == Profile::LeastPrivilege { "\n  - self-management.yaml" } else { "" };
    let images = match image {
        Some(i) => format!("images:\n  - {}\n", image_entry(i)?),
        None => "# images: [{name: plumb, newName: registry.example.com/plumb/plumb, newTag: \"0.1.0\"}]\n".into(),
    };
    Ok(format!(
        "# plumb's installation, managed by the application `{SELF_APP}` of policy.yaml (plumb bootstrap).
# The image: `kustomize edit set image plumb=<registry>/plumb:<tag>` in this directory.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - plumb/base{extra}
components:
  - plumb/profiles/{}
{images}configMapGenerator:
  - name: {}
    namespace: {NAMESPACE}
    files: [policy.yaml]
    options:
      disableNameSuffixHash: true
      labels: {{app.kubernetes.io/name: plumb, app.kubernetes.io/part-of: plumb}}
",
        profile.name(),
        crate::plan::POLICY_CONFIG_MAP
    ))
}

/// What plumb needs, beyond the least-privilege profile, to manage its own
/// installation: `plumb-apply` in its namespace; the resource definition, its own
/// ClusterRoles and ClusterRoleBindings and its Namespaces by name, with `escalate` and
/// `bind` on its roles (writing RBAC it does not hold).
fn self_management_rbac(profile: Profile) -> String {
    let mut roles = vec!["plumb-self-management".to_string()];
    let mut bindings = vec!["plumb-self-management".to_string()];
    for (_, text) in BASE.iter().chain(profile.files()) {
        for d in documents(text) {
            let name = d.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            match d["kind"].as_str() {
                Some("ClusterRole") => roles.push(name),
                Some("ClusterRoleBinding") => bindings.push(name),
                _ => {}
            }
        }
    }
    let mut namespaces = vec![NAMESPACE.to_string()];
    namespaces.extend(profile_destinations(profile));
    format!(
        "# What plumb needs, beyond the least-privilege profile, to manage its own installation
# (plumb bootstrap): every right in its namespace, and by name its resource definition,
# its Namespaces, its ClusterRoles and ClusterRoleBindings. Writing RBAC it does not hold
# needs `escalate` and `bind` on its roles: whoever can push to this directory can
# therefore widen plumb's rights, as with any installation that manages itself. A new
# ClusterRole or binding named here must exist before plumb can write it (`create`
# cannot be limited to names): apply it once by hand, or re-run `plumb bootstrap`.
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: plumb-apply
  namespace: {NAMESPACE}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: plumb-apply}}
subjects:
  - {{kind: ServiceAccount, name: plumb, namespace: {NAMESPACE}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: plumb-self-management
rules:
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    verbs: [list, watch]
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    resourceNames: [{}]
    verbs: [get, patch, update]
  - apiGroups: [\"\"]
    resources: [namespaces]
    resourceNames: [{}]
    verbs: [get, patch, update]
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [clusterroles, clusterrolebindings]
    verbs: [get, list, watch]
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [clusterroles]
    resourceNames: [{}]
    verbs: [patch, update, escalate, bind]
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [clusterrolebindings]
    resourceNames: [{}]
    verbs: [patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: plumb-self-management
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: plumb-self-management}}
subjects:
  - {{kind: ServiceAccount, name: plumb, namespace: {NAMESPACE}}}
",
        crate::plan::DEFINITION,
        namespaces.join(", "),
        roles.join(", "),
        bindings.join(", ")
    )
}

/// The files of an installation under `path` (see the module docs), each relative to
/// the checkout.
///
/// # Errors
/// `path` is not a relative directory inside the repository; `image` is not an image
/// reference.
pub fn files(
    url: &str,
    path: &str,
    revision: &str,
    profile: Profile,
    image: Option<&str>,
) -> Result<Vec<File>, String> {
    if let Some(why) = path_problem(path) {
        return Err(why);
    }
    let at = |rel: &str, text: &str| File { path: format!("{path}/{rel}"), text: text.to_string() };
    let mut out = vec![
        at("kustomization.yaml", &kustomization(profile, image)?),
        at("policy.yaml", &policy(url, path, revision, profile)),
    ];
    if profile == Profile::LeastPrivilege {
        out.push(at("self-management.yaml", &self_management_rbac(profile)));
    }
    out.push(at("plumb/base/kustomization.yaml", &base_kustomization()));
    out.extend(BASE.iter().map(|(name, text)| at(&format!("plumb/base/{name}"), text)));
    out.extend(
        profile.files().iter().map(|(name, text)| at(&format!("plumb/profiles/{}/{name}", profile.name()), text)),
    );
    Ok(out)
}

/// The first symbolic link among the components of `rel` (`/`-separated) under
/// `checkout`, the file itself included: bootstrap writes (and reads) only inside the
/// checkout, never through a link that could send a file elsewhere.
fn symlink_in(checkout: &Path, rel: &str) -> Option<PathBuf> {
    let mut at = checkout.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Some(at),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Refuses `files` when a component of one is a symbolic link in `checkout`.
///
/// # Errors
/// The links found, named.
fn refuse_symlinks(checkout: &Path, files: &[File]) -> anyhow::Result<()> {
    let mut links: Vec<String> =
        files.iter().filter_map(|f| symlink_in(checkout, &f.path)).map(|p| p.display().to_string()).collect();
    links.sort();
    links.dedup();
    if !links.is_empty() {
        anyhow::bail!(
            "plumb bootstrap writes no file through a symbolic link, and these are links: {} (replace them with directories or files)",
            links.join(", ")
        );
    }
    Ok(())
}

/// What writing `files` into `checkout` would do to each: `(file, exists and equal,
/// exists and differs)`.
fn compare(checkout: &Path, files: &[File]) -> Vec<(PathBuf, bool, bool)> {
    files
        .iter()
        .map(|f| {
            let target = checkout.join(&f.path);
            let have = std::fs::read_to_string(&target).ok();
            let same = have.as_deref() == Some(f.text.as_str());
            (target, same, have.is_some() && !same)
        })
        .collect()
}

/// The objects of the installation: `files` built with kustomize (in a scratch copy),
/// each stamped as an object of [`SELF_APP`], in apply order (Namespaces, the
/// definition, RBAC, …).
///
/// # Errors
/// kustomize not found or failing, its output not objects.
async fn render(files: &[File], path: &str) -> anyhow::Result<Vec<(ObjectKey, Value)>> {
    let scratch = tempfile::tempdir().context("scratch directory")?;
    for f in files {
        let target = scratch.path().join(&f.path);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        }
        std::fs::write(&target, &f.text).with_context(|| target.display().to_string())?;
    }
    let limits = crate::render::sandbox::Limits::default();
    let kustomize = crate::render::kustomize::Kustomize::locate(None, limits).await.context(
        "plumb bootstrap renders the installation with kustomize ($PLUMB_KUSTOMIZE, else kustomize on PATH)",
    )?;
    let built = kustomize
        .build(scratch.path(), path, &crate::render::kustomize::Overrides::default(), limits)
        .await
        .with_context(|| format!("kustomize build {path}"))?;
    let rendered = crate::render::render_output(path, &built, kustomize.describe())?;
    let mut out = Vec::new();
    for m in &rendered.manifests {
        let mut obj = m.object();
        let key = ObjectKey::of(&obj).with_context(|| format!("{}: an object without a name", m.source))?;
        crate::tracking::stamp(&mut obj, SELF_APP, &key, None);
        out.push((key, obj));
    }
    out.sort_by_key(|(k, _)| kind_rank(&k.group, &k.kind));
    Ok(out)
}

/// Applies the installation's objects (the resource definition first, waited for until
/// Established), then creates the webhook Secret with 32 random bytes (hex) when
/// missing. Its value is never printed.
///
/// # Errors
/// The object that could not be applied, with the API server's reason.
async fn install(cluster: &Cluster, objects: &[(ObjectKey, Value)]) -> anyhow::Result<()> {
    let is_crd = |k: &ObjectKey| k.kind == "CustomResourceDefinition" && k.group == "apiextensions.k8s.io";
    for (key, obj) in objects.iter().filter(|(k, _)| is_crd(k)).chain(objects.iter().filter(|(k, _)| !is_crd(k))) {
        let av = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = cluster.kind(av, &key.kind).await.with_context(|| format!("{key}"))?;
        cluster.apply(&kind, key, obj, false).await.with_context(|| format!("applying {key}"))?;
        if is_crd(key) {
            cluster
                .wait_established(&key.name, std::time::Duration::from_secs(60))
                .await
                .map_err(anyhow::Error::msg)?;
            cluster.refresh().await?;
        }
        outln!("applied {key}");
    }
    let key = ObjectKey {
        group: String::new(),
        kind: "Secret".into(),
        namespace: NAMESPACE.into(),
        name: WEBHOOK_SECRET.0.into(),
    };
    let value = hex::encode(rand::random::<[u8; 32]>());
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": key.name, "namespace": key.namespace},
        "stringData": {WEBHOOK_SECRET.1: value},
    }))?;
    // a POST, not an apply: a Secret that exists (or was created meanwhile) is never
    // overwritten
    let secrets = kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(cluster.client().clone(), NAMESPACE);
    let pp = kube::api::PostParams { field_manager: Some(crate::FIELD_MANAGER.into()), ..Default::default() };
    match secrets.create(&pp, &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {
            outln!("kept {key} (it exists)");
            return Ok(());
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("creating {key}"))),
    }
    outln!(
        "created {key} with a random {} (not shown; `kubectl -n {NAMESPACE} get secret {} -o jsonpath='{{.data.{}}}' | base64 -d` reads it for the forge's webhook)",
        WEBHOOK_SECRET.1,
        key.name,
        WEBHOOK_SECRET.1
    );
    Ok(())
}

/// The files of the installation's top directory that are the user's once written
/// (`kustomize edit set image` changes the kustomization, the policy is edited): kept.
const YOURS: [&str; 2] = ["kustomization.yaml", "policy.yaml"];

/// The files of the installation as they will be, and those kept: those [`files`]
/// generates, but [`YOURS`] taken from the checkout where they exist. A policy is checked: one written
/// here validates; one kept validates (its secret files not looked for) and manages
/// this installation ([`self_application_problem`]).
///
/// # Errors
/// `--path` outside the repository; an invalid policy, named with file and line; a kept
/// policy that does not manage this path of this repository; a file that cannot be read.
fn prepare(args: &BootstrapArgs) -> anyhow::Result<(Vec<File>, Vec<PathBuf>)> {
    let mut files = files(&args.repository, &args.path, &args.revision, args.profile, args.image.as_deref())
        .map_err(anyhow::Error::msg)?;
    let yours: Vec<String> = YOURS.iter().map(|y| format!("{}/{y}", args.path)).collect();
    let mut kept = Vec::new();
    for f in files.iter_mut().filter(|f| yours.contains(&f.path)) {
        let target = args.checkout.join(&f.path);
        let policy = f.path.ends_with("/policy.yaml");
        if !target.is_file() {
            if policy {
                crate::config::load_str(&f.text, &target, &args.checkout)
                    .context("the policy plumb bootstrap would write")?;
            }
            continue;
        }
        if policy {
            let config = crate::config::load_without_secrets(&target)?;
            if let Some(why) = self_application_problem(&config, &args.repository, &args.path) {
                anyhow::bail!(
                    "{}: {why} (plumb bootstrap keeps an existing policy; move it away to have one written)",
                    target.display()
                );
            }
        }
        f.text = std::fs::read_to_string(&target).with_context(|| target.display().to_string())?;
        outln!("keeping {} (yours once written: never overwritten)", target.display());
        kept.push(target);
    }
    Ok((files, kept))
}

/// Why the existing policy `config` does not manage an installation at `path` of the
/// repository `url`: no application with `selfManagement: true`, or one reading another
/// path or another repository (URLs compared as written).
pub fn self_application_problem(config: &crate::config::Config, url: &str, path: &str) -> Option<String> {
    let Some(app) = config.applications.iter().find(|a| a.self_management) else {
        return Some("no application has selfManagement: true".into());
    };
    let name = &app.name.value;
    if app.path.value.trim_end_matches('/') != path {
        return Some(format!("application `{name}` (selfManagement) reads path `{}`, not `{path}`", app.path.value));
    }
    let repo = config.repositories.iter().find(|r| r.name.value == app.repository.value);
    match repo.map(|r| r.url.value.as_str()) {
        Some(u) if u == url => None,
        u => Some(format!(
            "application `{name}` (selfManagement) reads repository {}, not {}",
            crate::config::repo_url::redact(u.unwrap_or("(unknown)")),
            crate::config::repo_url::redact(url)
        )),
    }
}

/// What is wrong with the image of plumb's Deployment among `objects`: still the
/// placeholder `plumb` (no registry serves it: the pod would never start, and never take
/// over from Git), or not the `--image` given (the kept `kustomization.yaml` sets
/// another).
fn image_warning(objects: &[(ObjectKey, Value)], given: Option<&str>) -> Option<String> {
    let (_, deployment) = objects.iter().find(|(k, _)| k.kind == "Deployment" && k.name == "plumb")?;
    let image = deployment.pointer("/spec/template/spec/containers/0/image").and_then(Value::as_str)?;
    match given {
        Some(g) if g != image => Some(format!(
            "the Deployment's image is {image}, not --image {g}: the kustomization.yaml kept sets it (`kustomize edit set image plumb={g}` there)"
        )),
        None if image == "plumb" => Some(
            "the Deployment's image is the placeholder `plumb`, which no registry serves: give --image (or `kustomize edit set image plumb=…` in the kustomization.yaml and run again)".into(),
        ),
        _ => None,
    }
}

/// Whether the cluster has the self application's `Application` object
/// (`applications.plumb.dev/plumb` in plumb's namespace): plumb ran there, this is not a
/// first install. No resource definition: none.
///
/// # Errors
/// The API server cannot be asked.
async fn self_application_exists(cluster: &Cluster) -> anyhow::Result<bool> {
    let kind = match cluster.served("plumb.dev", "Application").await {
        Ok(kind) => kind,
        Err(crate::cluster::Error::UnknownKind { .. }) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let key = ObjectKey {
        group: "plumb.dev".into(),
        kind: "Application".into(),
        namespace: NAMESPACE.into(),
        name: SELF_APP.into(),
    };
    Ok(cluster.get(&kind, &key).await?.is_some())
}

/// What the render of the kept files (`kept`) installs that the generated installation
/// (`generated`) does not, in the objects that decide who controls plumb: the subjects
/// and role of every ClusterRoleBinding and RoleBinding, and the images of every
/// Deployment (one line each; none when they agree).
fn kept_differences(kept: &[(ObjectKey, Value)], generated: &[(ObjectKey, Value)]) -> Vec<String> {
    let watched = |k: &ObjectKey| {
        (k.group == "rbac.authorization.k8s.io" && matches!(k.kind.as_str(), "ClusterRoleBinding" | "RoleBinding"))
            || (k.group == "apps" && k.kind == "Deployment")
    };
    let summary = |k: &ObjectKey, o: &Value| {
        if k.kind == "Deployment" {
            let spec = o.pointer("/spec/template/spec");
            let images: Vec<&str> = ["initContainers", "containers"]
                .iter()
                .flat_map(|c| spec.and_then(|s| s[c].as_array()).into_iter().flatten())
                .filter_map(|c| c["image"].as_str())
                .collect();
            format!("image(s) {}", images.join(", "))
        } else {
            let subjects: Vec<String> = o["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    let ns = s["namespace"].as_str().map_or_else(String::new, |n| format!("{n}/"));
                    format!("{} {ns}{}", s["kind"].as_str().unwrap_or("?"), s["name"].as_str().unwrap_or("?"))
                })
                .collect();
            let role = format!(
                "{}/{}",
                o.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("?"),
                o.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("?")
            );
            format!("role {role} for subjects [{}]", subjects.join(", "))
        }
    };
    let side = |objects: &[(ObjectKey, Value)]| -> std::collections::BTreeMap<String, String> {
        objects.iter().filter(|(k, _)| watched(k)).map(|(k, o)| (k.to_string(), summary(k, o))).collect()
    };
    let (kept, generated) = (side(kept), side(generated));
    let mut out = Vec::new();
    for (key, mine) in &kept {
        match generated.get(key) {
            Some(ours) if ours == mine => {}
            Some(ours) => out.push(format!("{key} with {mine}, where the generated one has {ours}")),
            None => out.push(format!("{key} with {mine}, which the generated installation does not have")),
        }
    }
    for (key, ours) in &generated {
        if !kept.contains_key(key) {
            out.push(format!("no {key} (the generated installation has it, with {ours})"));
        }
    }
    out
}

/// Whether `dir` is inside a Git work tree (not a bare repository).
fn is_work_tree(dir: &Path) -> bool {
    git2::Repository::discover(dir).is_ok_and(|r| !r.is_bare())
}

/// `plumb bootstrap`: writes the installation into the checkout, installs it, and
/// prints the step that hands it to Git; with `--dry-run` only prints.
///
/// # Errors
/// The checkout is not a Git work tree; a path component is a symbolic link; a file
/// exists and differs (without `--force`); a file is kept on a first install (without
/// `--keep-existing`);
/// the generated policy is invalid (the URL, the revision); kustomize fails; an object
/// cannot be applied.
pub async fn run(kube: &KubeArgs, args: &BootstrapArgs) -> anyhow::Result<ExitCode> {
    if let Some(ns) = kube.namespace.as_deref().filter(|ns| *ns != NAMESPACE) {
        anyhow::bail!("plumb bootstrap installs into {NAMESPACE}, the namespace of deploy/, not {ns}");
    }
    let checkout = &args.checkout;
    if !is_work_tree(checkout) {
        anyhow::bail!(
            "--checkout {} is not a Git work tree: clone {} there first (plumb bootstrap writes into it, you commit and push)",
            checkout.display(),
            crate::config::repo_url::redact(&args.repository)
        );
    }
    let generated = files(&args.repository, &args.path, &args.revision, args.profile, args.image.as_deref())
        .map_err(anyhow::Error::msg)?;
    refuse_symlinks(checkout, &generated)?;
    let (files, kept) = prepare(args)?;
    let policy_file = checkout.join(&args.path).join("policy.yaml");
    let policy_text = files.iter().find(|f| f.path.ends_with("/policy.yaml")).map_or("", |f| f.text.as_str());
    let state = compare(checkout, &files);
    let differing: Vec<String> = state.iter().filter(|s| s.2).map(|s| s.0.display().to_string()).collect();
    if !differing.is_empty() && !args.force {
        anyhow::bail!("these files exist and differ (--force overwrites them): {}", differing.join(", "));
    }
    let objects = render(&files, &args.path).await?;
    if let Some(warning) = image_warning(&objects, args.image.as_deref()) {
        errln!("warning: {warning}");
    }
    if !kept.is_empty() {
        let ours = render(&generated, &args.path).await?;
        for d in kept_differences(&objects, &ours) {
            errln!("warning: the kept files install {d}");
        }
    }
    let refusal = (!kept.is_empty() && !args.keep_existing).then(|| {
        let names: Vec<String> = kept.iter().map(|k| k.display().to_string()).collect();
        format!(
            "{} exist in the checkout and would be installed as they are, with your credentials: this is a first install (no applications.plumb.dev/{SELF_APP} in {NAMESPACE}), and whoever can push to the repository may have written them. Review them (and the warnings above), then run again with --keep-existing, or move them away to have them generated",
            names.join(" and ")
        )
    });
    let cluster = if args.dry_run {
        None
    } else {
        Some(Cluster::connect_in(kube.kubeconfig.as_deref(), kube.context.as_deref()).await?)
    };
    if let Some(refusal) = refusal {
        match &cluster {
            Some(c) if !self_application_exists(c).await? => anyhow::bail!("{refusal}"),
            Some(_) => {}
            None => match Cluster::connect_in(kube.kubeconfig.as_deref(), kube.context.as_deref()).await {
                Ok(c) => match self_application_exists(&c).await {
                    Ok(false) => errln!("would refuse: {refusal}"),
                    Ok(true) => {}
                    Err(e) => {
                        errln!("note: could not tell whether plumb is installed ({e:#}); on a first install: {refusal}")
                    }
                },
                Err(e) => {
                    errln!("note: could not tell whether plumb is installed ({e:#}); on a first install: {refusal}")
                }
            },
        }
    }
    let Some(cluster) = cluster else {
        for (target, same, _) in &state {
            outln!("would write {}{}", target.display(), if *same { " (unchanged)" } else { "" });
        }
        for (key, _) in &objects {
            outln!("would apply {key}");
        }
        outln!("would create Secret/{NAMESPACE}/{} with a random value, if missing", WEBHOOK_SECRET.0);
        outln!("--- {}\n{policy_text}", policy_file.display());
        return Ok(ExitCode::SUCCESS);
    };
    for (f, (target, same, _)) in files.iter().zip(&state) {
        if *same {
            continue;
        }
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        }
        std::fs::write(target, &f.text).with_context(|| target.display().to_string())?;
        outln!("wrote {}", target.display());
    }
    install(&cluster, &objects).await?;
    outln!(
        "\nplumb is installed. Hand it to Git:\n  git -C {} add {} && git -C {} commit -m 'plumb bootstrap' && git -C {} push\nFrom its first pass on, application `{SELF_APP}` applies {}/ (and policy.yaml to the ConfigMap plumb reloads): change plumb there, in Git.",
        checkout.display(),
        args.path,
        checkout.display(),
        checkout.display(),
        args.path
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_installation_is_the_base_a_profile_and_a_self_managing_policy() {
        let files =
            files("https://git.example.com/ops/fleet.git", "clusters/prod", "main", Profile::ClusterAdmin, None)
                .expect("valid path");
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        for want in [
            "clusters/prod/kustomization.yaml",
            "clusters/prod/policy.yaml",
            "clusters/prod/plumb/base/kustomization.yaml",
            "clusters/prod/plumb/base/crd.yaml",
            "clusters/prod/plumb/base/deployment.yaml",
            "clusters/prod/plumb/profiles/cluster-admin/clusterrolebinding.yaml",
        ] {
            assert!(paths.contains(&want), "{want} in {paths:?}");
        }
        assert!(!paths.iter().any(|p| p.contains("least-privilege") || p.ends_with("self-management.yaml")));
        // every resource the base kustomization names is written
        let base: Value = serde_saphyr::from_str(&base_kustomization()).expect("yaml");
        for r in base["resources"].as_array().expect("resources") {
            let name = format!("clusters/prod/plumb/base/{}", r.as_str().expect("a file"));
            assert!(paths.contains(&name.as_str()), "{name}");
        }
        assert!(base.get("configMapGenerator").is_none(), "the policy is generated at the top");
        let top: Value = serde_saphyr::from_str(&files[0].text).expect("yaml");
        assert_eq!(top["components"][0], "plumb/profiles/cluster-admin");
        assert_eq!(top["configMapGenerator"][0]["files"][0], "policy.yaml");
        assert_eq!(top["configMapGenerator"][0]["options"]["disableNameSuffixHash"], true);
        // the policy loads, and its one application manages plumb
        let config = crate::config::load_str(&files[1].text, Path::new("policy.yaml"), Path::new(".")).expect("valid");
        let [app] = &config.applications[..] else { panic!("one application") };
        assert!(app.self_management);
        assert_eq!(
            (app.name.value.as_str(), app.path.value.as_str(), app.namespace.value.as_str()),
            ("plumb", "clusters/prod", "plumb-system")
        );
        assert_eq!(config.repositories[0].url.value, "https://git.example.com/ops/fleet.git");
        assert!(files[1].text.contains("\n  # - {name: web,"), "the example application, commented out");
    }

    #[test]
    fn least_privilege_adds_the_rights_to_manage_itself() {
        let files = files("https://git.example.com/ops/fleet.git", "clusters/a", "v1", Profile::LeastPrivilege, None)
            .expect("valid path");
        let text = |p: &str| files.iter().find(|f| f.path == format!("clusters/a/{p}")).map(|f| f.text.clone());
        let rbac = text("self-management.yaml").expect("written");
        let docs = documents(&rbac);
        assert_eq!(docs.len(), 3);
        let rules = docs[1]["rules"].as_array().expect("rules");
        let names = |i: usize| rules[i]["resourceNames"].as_array().expect("names").clone();
        assert!(names(4).contains(&Value::from("plumb-apply")) && names(4).contains(&Value::from("plumb-read")));
        assert!(
            names(5).contains(&Value::from("plumb-read")) && names(5).contains(&Value::from("plumb-auth-delegator"))
        );
        assert_eq!(names(2), [Value::from("plumb-system"), Value::from("web")]);
        let config =
            crate::config::load_str(&text("policy.yaml").expect("written"), Path::new("p.yaml"), Path::new("."))
                .expect("valid");
        let d = config.applications[0].destinations.as_ref().expect("destinations");
        assert_eq!(d.namespaces, ["plumb-system", "web"]);
        assert_eq!(config.applications[0].revision.value, "v1");
        assert!(text("kustomization.yaml").expect("written").contains("  - self-management.yaml\n"));
    }

    #[test]
    fn an_existing_policy_must_manage_this_installation() {
        let url = "https://git.example.com/ops/fleet.git";
        let load = |text: &str| crate::config::load_str(text, Path::new("p.yaml"), Path::new(".")).expect("valid");
        let ours = load(&policy(url, "clusters/a", "main", Profile::ClusterAdmin));
        assert_eq!(self_application_problem(&ours, url, "clusters/a"), None);
        assert_eq!(
            self_application_problem(&ours, url, "clusters/b").as_deref(),
            Some("application `plumb` (selfManagement) reads path `clusters/a`, not `clusters/b`")
        );
        assert_eq!(
            self_application_problem(&ours, "https://git.example.com/ops/other.git", "clusters/a").as_deref(),
            Some(
                "application `plumb` (selfManagement) reads repository https://git.example.com/ops/fleet.git, not https://git.example.com/ops/other.git"
            )
        );
        let plain = load(
            "repositories: [{name: r, url: https://x/y.git}]\nenvironments: [{name: e}]\napplications: [{name: web, repository: r, path: clusters/a, namespace: web, environment: e}]\n",
        );
        assert_eq!(
            self_application_problem(&plain, url, "clusters/a").as_deref(),
            Some("no application has selfManagement: true")
        );
    }

    /// The top kustomization and the policy are kept when they exist (a kept policy
    /// must manage this installation); the files of `plumb/` are generated.
    #[test]
    fn the_users_files_are_kept() {
        let dir = tempfile::tempdir().expect("tmp");
        let url = "https://git.example.com/ops/fleet.git";
        let args = BootstrapArgs {
            repository: url.into(),
            path: "clusters/a".into(),
            revision: "main".into(),
            checkout: dir.path().to_path_buf(),
            profile: Profile::ClusterAdmin,
            image: None,
            force: false,
            keep_existing: false,
            dry_run: false,
        };
        let top = dir.path().join("clusters/a");
        std::fs::create_dir_all(&top).expect("mkdir");
        let mine =
            policy(url, "clusters/a", "main", Profile::ClusterAdmin).replace("selfHeal: true", "selfHeal: false");
        std::fs::write(top.join("policy.yaml"), &mine).expect("write");
        std::fs::write(top.join("kustomization.yaml"), "# mine\n").expect("write");
        let (files, kept) = prepare(&args).expect("kept");
        assert_eq!(kept, [top.join("kustomization.yaml"), top.join("policy.yaml")]);
        let text = |p: &str| files.iter().find(|f| f.path == format!("clusters/a/{p}")).map(|f| f.text.as_str());
        assert_eq!(text("policy.yaml"), Some(mine.as_str()));
        assert_eq!(text("kustomization.yaml"), Some("# mine\n"));
        assert_eq!(text("plumb/base/crd.yaml"), Some(crate::status::store::CRD_YAML));
        std::fs::write(top.join("policy.yaml"), mine.replace("path: clusters/a", "path: clusters/b")).expect("write");
        let err = prepare(&args).expect_err("another installation's policy").to_string();
        assert!(
            err.contains("reads path `clusters/b`, not `clusters/a` (plumb bootstrap keeps an existing policy"),
            "{err}"
        );
    }

    /// A kept kustomization that adds a subject to plumb's binding or changes the image
    /// is shown against the generated installation.
    #[test]
    fn the_kept_files_binding_subjects_and_images_are_compared() {
        let key = |group: &str, kind: &str, ns: &str, name: &str| ObjectKey {
            group: group.into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
        };
        let rbac = "rbac.authorization.k8s.io";
        let binding = |subjects: Value| serde_json::json!({"roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}, "subjects": subjects});
        let sa = serde_json::json!({"kind": "ServiceAccount", "name": "plumb", "namespace": NAMESPACE});
        let deployment =
            |image: &str| serde_json::json!({"spec": {"template": {"spec": {"containers": [{"image": image}]}}}});
        let generated = vec![
            (key(rbac, "ClusterRoleBinding", "", "plumb-cluster-admin"), binding(serde_json::json!([sa]))),
            (key("apps", "Deployment", NAMESPACE, "plumb"), deployment("r/plumb:1")),
            (key("", "ConfigMap", NAMESPACE, "plumb-policy"), serde_json::json!({"data": {"a": "b"}})),
        ];
        assert_eq!(kept_differences(&generated, &generated), Vec::<String>::new());
        let mut kept = generated.clone();
        kept[2].1 = serde_json::json!({"data": {"a": "c"}});
        assert_eq!(kept_differences(&kept, &generated), Vec::<String>::new(), "other objects are not compared");
        kept[0].1 = binding(serde_json::json!([sa, {"kind": "User", "name": "eve"}]));
        kept[1].1 = deployment("evil.example/plumb:1");
        kept.push((
            key(rbac, "RoleBinding", "kube-system", "extra"),
            binding(serde_json::json!([{"kind": "Group", "name": "devs"}])),
        ));
        let diffs = kept_differences(&kept, &generated);
        assert_eq!(diffs.len(), 3, "{diffs:?}");
        assert_eq!(
            diffs[0],
            "ClusterRoleBinding.rbac.authorization.k8s.io/plumb-cluster-admin with role ClusterRole/cluster-admin for subjects [ServiceAccount plumb-system/plumb, User eve], where the generated one has role ClusterRole/cluster-admin for subjects [ServiceAccount plumb-system/plumb]"
        );
        assert!(
            diffs[1].contains("image(s) evil.example/plumb:1, where the generated one has image(s) r/plumb:1"),
            "{diffs:?}"
        );
        assert!(
            diffs[2].contains("RoleBinding") && diffs[2].contains("Group devs") && diffs[2].contains("does not have"),
            "{diffs:?}"
        );
        assert!(kept_differences(&generated[1..], &generated)[0].starts_with("no ClusterRoleBinding"));
    }

    #[test]
    fn an_image_reference_becomes_a_kustomize_images_entry() {
        let table = [
            (
                "registry.example.com/plumb/plumb:0.1.0",
                "{name: plumb, newName: registry.example.com/plumb/plumb, newTag: \"0.1.0\"}",
            ),
            ("localhost:5000/plumb", "{name: plumb, newName: localhost:5000/plumb}"),
            ("localhost:5000/plumb:v2", "{name: plumb, newName: localhost:5000/plumb, newTag: \"v2\"}"),
            ("r.example/plumb@sha256:abc", "{name: plumb, newName: r.example/plumb, digest: \"sha256:abc\"}"),
        ];
        for (image, want) in table {
            assert_eq!(image_entry(image).as_deref(), Ok(want), "{image}");
        }
        for bad in ["", "a b", "x\"y", "{x}"] {
            assert!(image_entry(bad).is_err(), "{bad}");
        }
        let files =
            files("https://x/y.git", "c/a", "main", Profile::ClusterAdmin, Some("r.example/plumb:1")).expect("valid");
        let top: Value = serde_saphyr::from_str(&files[0].text).expect("yaml");
        assert_eq!(top["images"][0]["newName"], "r.example/plumb");
        assert_eq!(top["images"][0]["newTag"], "1");
    }

    #[test]
    fn a_placeholder_or_ignored_image_is_a_warning() {
        let deployment = |image: &str| {
            let key = ObjectKey {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespace: NAMESPACE.into(),
                name: "plumb".into(),
            };
            vec![(key, serde_json::json!({"spec": {"template": {"spec": {"containers": [{"image": image}]}}}}))]
        };
        assert!(image_warning(&deployment("plumb"), None).is_some_and(|w| w.contains("placeholder")));
        assert_eq!(image_warning(&deployment("r/plumb:1"), None), None);
        assert_eq!(image_warning(&deployment("r/plumb:1"), Some("r/plumb:1")), None);
        assert!(
            image_warning(&deployment("r/plumb:1"), Some("r/plumb:2"))
                .is_some_and(|w| w.contains("not --image r/plumb:2"))
        );
    }

    #[test]
    fn a_path_outside_the_repository_is_refused() {
        for bad in ["", "/clusters/a", "../a", "clusters/../../a", "clusters//a", "clusters/./a", "a\\b"] {
            let err = files("https://x/y.git", bad, "main", Profile::ClusterAdmin, None).expect_err(bad);
            assert!(err.contains("must be a relative directory inside the repository"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_in_the_checkout_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let outside = tempfile::tempdir().expect("tmp");
        let files = files("https://x/y.git", "clusters/a", "main", Profile::ClusterAdmin, None).expect("valid");
        assert!(refuse_symlinks(dir.path(), &files).is_ok(), "nothing there yet");
        std::fs::create_dir_all(dir.path().join("clusters/a/plumb")).expect("mkdir");
        assert!(refuse_symlinks(dir.path(), &files).is_ok(), "plain directories");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("clusters/a/plumb/base")).expect("link");
        let err = refuse_symlinks(dir.path(), &files).expect_err("a linked directory").to_string();
        assert!(err.contains("clusters/a/plumb/base") && err.contains("symbolic link"), "{err}");
        assert_eq!(
            symlink_in(dir.path(), "clusters/a/plumb/base/crd.yaml"),
            Some(dir.path().join("clusters/a/plumb/base"))
        );
        assert_eq!(symlink_in(dir.path(), "clusters/a/policy.yaml"), None);
        // a linked file is refused too
        std::fs::write(outside.path().join("p"), "x").expect("write");
        std::os::unix::fs::symlink(outside.path().join("p"), dir.path().join("clusters/a/policy.yaml")).expect("link");
        assert_eq!(symlink_in(dir.path(), "clusters/a/policy.yaml"), Some(dir.path().join("clusters/a/policy.yaml")));
    }

    #[test]
    fn differing_files_are_told_apart_from_equal_ones() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("same"), "a").expect("write");
        std::fs::write(dir.path().join("other"), "b").expect("write");
        let f = |p: &str| File { path: p.into(), text: "a".into() };
        let state = compare(dir.path(), &[f("same"), f("other"), f("new")]);
        let flags: Vec<(bool, bool)> = state.iter().map(|s| (s.1, s.2)).collect();
        assert_eq!(flags, [(true, false), (false, true), (false, false)]);
    }
}
