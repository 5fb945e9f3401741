//! The render tools of one process and the dispatch on an application's source type.
//!
//! [`Tools`] holds the binaries of `settings.renderTools`, each located (and its version
//! asked) once, on first use, and counts the child processes it starts. [`Tools::render`]
//! runs the renderer of a source type on what the source side gives it: the files under
//! the application's path (plain YAML), or a working copy holding only the render's
//! inputs (kustomize, helm: the path, the kustomizations or value files it names,
//! sharedPaths) — both through [`Tree`], so the mirrors, working copies and the render
//! cache stay with the sources. SOPS-encrypted files among what the renderer reads (the
//! plain files, a kustomization's inputs, Helm value files) are decrypted first, with
//! the application's keys ([`super::sops`]), and the rendered fields holding their
//! values are marked sensitive.
//!
//! DESIGN: a new render tool (say jsonnet) is added here, in `src/render/`: one file
//! `src/render/jsonnet.rs` (its binary, found with [`super::sandbox::locate`], and its
//! run), one variant of [`SourceType`] (and a rule of [`super::detect`] if its files
//! tell it), one arm in [`Tools::render`] with the field of [`Tools`] that holds it
//! located, and its settings (`settings.renderTools.jsonnet`; the `source` options it
//! reads, checked in `Source::problems`). The pool and the driver do not change.

use std::{
    borrow::Cow,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use tokio::sync::OnceCell;

use super::{
    Error, Rendered,
    helm::{Helm, Template},
    kustomize::{Kustomize, Overrides},
    sandbox::Limits,
    sops::{self, Sops},
};
use crate::config::{CrdPolicy, RenderTools, Source, SourceType};

/// The target cluster as a chart sees it (Helm's `.Capabilities`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The cluster's version (`v1.36.3`); `None` while unknown.
    pub kube_version: Option<String>,
    /// The `group/version`s it serves and each `group/version/Kind` (`v1`,
    /// `v1/ConfigMap`, `monitoring.coreos.com/v1/ServiceMonitor`), sorted.
    pub api_versions: Vec<String>,
}

impl Capabilities {
    /// A digest of the version and the served kinds (16 hex digits), part of a render
    /// cache key: a CRD installed or removed changes it.
    pub fn digest(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.kube_version, &self.api_versions).hash(&mut h);
        format!("{:016x}", h.finish())
    }
}

/// A chart package from a chart repository or an OCI registry, on disk (see
/// [`crate::source::chart`]): rendered instead of the chart at the application's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    /// What it is (repository, name, version, digest), reported with the render.
    pub reference: super::ChartRef,
    /// The package (`.tgz`, digest checked), in the chart cache.
    pub package: std::path::PathBuf,
    /// Its provenance file (`.tgz.prov`), when verification is configured.
    pub provenance: Option<std::path::PathBuf>,
    /// The OpenPGP keyring to verify it with (`source.chart.keyringFile`).
    pub keyring: Option<std::path::PathBuf>,
}

/// What one application renders, and what for.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The application (Helm's release name unless `source.releaseName`).
    pub app: &'a str,
    /// Its namespace (Helm's release namespace).
    pub namespace: &'a str,
    /// The path inside the repository, without leading or trailing `/` (empty: the root).
    pub path: &'a str,
    /// Its source options.
    pub source: &'a Source,
    /// Its environment's `sharedPaths` (repository paths): besides `path`, where its
    /// SOPS files may lie.
    pub shared_paths: &'a [String],
    /// The cluster it is rendered for.
    pub cluster: &'a Capabilities,
    /// Whether the application has synced before (Helm's `.Release.IsUpgrade`;
    /// otherwise `.Release.IsInstall`).
    pub is_upgrade: bool,
    /// The limits of one render (YAML budgets of a file, rendered bytes).
    pub limits: &'a crate::limits::Limits,
    /// The chart package to render instead of the path's chart (`source.chart`).
    pub chart: Option<&'a Chart>,
}

/// Files of a commit: (path inside the repository, content), read or borrowed.
pub type Files<'a> = Cow<'a, [(String, Vec<u8>)]>;

/// The commit a render reads, given by the source side; read only on a render.
pub trait Tree {
    /// The files under the application's path.
    fn files(&self) -> impl Future<Output = Result<Files<'_>, Error>> + Send;
    /// A working copy of the render's inputs (the application's path, what its
    /// kustomization or chart names in the repository, its environment's
    /// `sharedPaths`; see [`crate::source::Mirror::export`]) in a new temporary
    /// directory (removed when dropped).
    fn checkout(&self) -> impl Future<Output = Result<tempfile::TempDir, Error>> + Send;
}

/// The render tools of one pool: located once, their runs counted.
pub struct Tools {
    settings: RenderTools,
    kustomize: OnceCell<Kustomize>,
    helm: OnceCell<Helm>,
    sops: OnceCell<Sops>,
    runs: AtomicU64,
}

impl Tools {
    /// The tools of `settings` (their paths, time and output limits), none located yet.
    pub fn new(settings: RenderTools) -> Self {
        Self {
            settings,
            kustomize: OnceCell::new(),
            helm: OnceCell::new(),
            sops: OnceCell::new(),
            runs: AtomicU64::new(0),
        }
    }

    /// How many child processes the tools have started (builds, templates, decryptions
    /// and version queries).
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// The tool in `cell`, located by `locate` (one run) on first use; a failed location
    /// is tried again next time.
    async fn once<'a, T>(
        &self,
        cell: &'a OnceCell<T>,
        locate: impl Future<Output = Result<T, Error>>,
    ) -> Result<&'a T, Error> {
        cell.get_or_try_init(|| {
            self.runs.fetch_add(1, Ordering::Relaxed);
            locate
        })
        .await
    }

    /// A working copy of `tree` for a tool about to run (counted as its run).
    async fn checkout(&self, tree: &impl Tree) -> Result<tempfile::TempDir, Error> {
        let dir = tree.checkout().await?;
        self.runs.fetch_add(1, Ordering::Relaxed);
        Ok(dir)
    }

    /// Renders `t` with the renderer of `kind` from `tree`, within `t.limits`: the
    /// manifests, their warnings, the tool and its version, and how long it took.
    ///
    /// # Errors
    /// [`Error`]: the tool is not found or fails, a file or the output does not read, a
    /// limit is exceeded.
    pub async fn render(&self, kind: SourceType, t: &Target<'_>, tree: &impl Tree) -> Result<Rendered, Error> {
        let started = Instant::now();
        let limits = Limits {
            timeout: Duration::from_secs(self.settings.timeout_seconds),
            max_output: self.settings.max_output_bytes,
            network: t.source.allow_remote_bases,
            max_memory: self.settings.max_memory_bytes,
            cpu_seconds: self.settings.cpu_seconds,
        };
        let shown = if t.path.is_empty() { "." } else { t.path };
        let mut decrypted = sops::Decrypted::default();
        let mut rendered = match kind {
            SourceType::Plain => self.plain(t, tree, limits, &mut decrypted).await?,
            SourceType::Kustomize => {
                let k =
                    self.once(&self.kustomize, Kustomize::locate(self.settings.kustomize.as_deref(), limits)).await?;
                let dir = self.checkout(tree).await?;
                let inputs = sops::kustomize_inputs(dir.path(), t.path, t.limits)?;
                let used = self.decrypt_in(dir.path(), &inputs, t, limits, &mut decrypted).await?;
                let s = t.source;
                let overrides = Overrides {
                    images: &s.images,
                    name_prefix: s.name_prefix.as_deref(),
                    name_suffix: s.name_suffix.as_deref(),
                };
                let out = k.build(dir.path(), t.path, &overrides, limits).await?;
                output(t, &format!("{shown} (kustomize build)"), &out, with_sops(k.describe(), used))?
            }
            SourceType::Helm => self.helm(t, tree, limits, &mut decrypted).await?,
        };
        t.limits.check_rendered(rendered.manifests.iter().map(|m| (m.source.as_str(), m.bytes())))?;
        sops::check_no_ciphertext(&rendered.manifests)?;
        sops::mark_decrypted(&mut rendered.manifests, &decrypted);
        rendered.decrypted = decrypted.files;
        if kind != SourceType::Plain
            && let Some(gap) = super::sandbox::isolation().missing()
        {
            rendered.warnings.push(format!("render tool not fully contained: {gap}"));
        }
        rendered.took = started.elapsed();
        Ok(rendered)
    }

    /// `helm template` of `t` in a working copy of `tree` (see [`helm_output`]); twice
    /// when the chart's templates call [`super::helm::UNSTABLE_FUNCTIONS`], the fields
    /// that differ held ([`super::HeldWhy::Unstable`]).
    async fn helm(
        &self,
        t: &Target<'_>,
        tree: &impl Tree,
        limits: Limits,
        decrypted: &mut sops::Decrypted,
    ) -> Result<Rendered, Error> {
        let h = self.once(&self.helm, Helm::locate(self.settings.helm.as_deref(), limits)).await?;
        let dir = self.checkout(tree).await?;
        let files: Vec<String> =
            t.source.value_files.iter().filter(|f| dir.path().join(f).is_file()).cloned().collect();
        let used = self.decrypt_in(dir.path(), &files, t, limits, decrypted).await?;
        let policy = t.source.crd_policy();
        // a chart of a chart repository or an OCI registry: its package in the copy
        let (chart, keyring) = match t.chart {
            None => (t.path.to_string(), None),
            Some(c) => place_chart(dir.path(), c)?,
        };
        let template = Template {
            kube_version: t.cluster.kube_version.as_deref(),
            api_versions: &t.cluster.api_versions,
            chart: &chart,
            keyring: keyring.as_deref(),
            release: t.source.release_name.as_deref().unwrap_or(t.app),
            namespace: t.namespace,
            value_files: &t.source.value_files,
            values: t.source.values.as_ref(),
            include_crds: policy != CrdPolicy::Skip,
            is_upgrade: t.is_upgrade,
        };
        let out = h.template(dir.path(), &template, limits).await?;
        let mut rendered = helm_output(t, &out, with_sops(h.describe(), used), policy)?;
        if let Some(c) = t.chart {
            let r = &c.reference;
            let tool = rendered.tool.take().unwrap_or_default();
            rendered.tool = Some(format!("{tool}, chart {} {} {} from {}", r.name, r.version, r.digest, r.repository));
            rendered.chart = Some(r.clone());
        }
        // the templates read at most what the tool may print, times four; a packaged
        // chart's templates are not scanned: it is rendered twice
        let budget = u64::try_from(self.settings.max_output_bytes).unwrap_or(u64::MAX).saturating_mul(4);
        let (root, scanned) = (dir.path().to_path_buf(), t.path.to_string());
        let unstable_chart =
            tokio::task::spawn_blocking(move || super::helm::chart_is_unstable(&root, &scanned, budget));
        if t.chart.is_some() || unstable_chart.await.unwrap_or(true) {
            self.runs.fetch_add(1, Ordering::Relaxed);
            let again = h.template(dir.path(), &template, limits).await?;
            let second = helm_output(t, &again, h.describe(), policy)?;
            rendered.held.extend(unstable(&rendered.manifests, &second.manifests));
        }
        Ok(rendered)
    }

    /// The plain files of `tree`, SOPS-encrypted ones decrypted first (one sops run
    /// each, with `source.sops`'s keys; their values added to `decrypted`).
    async fn plain(
        &self,
        t: &Target<'_>,
        tree: &impl Tree,
        limits: Limits,
        decrypted: &mut sops::Decrypted,
    ) -> Result<Rendered, Error> {
        let files = tree.files().await?;
        let mut out = Vec::with_capacity(files.len());
        let mut used = None;
        for (path, bytes) in files.iter() {
            let meta = if super::is_manifest_file(path) {
                sops::detect(path, bytes, t.limits)?
            } else {
                sops::Detected::Plain
            };
            let sops::Detected::Encrypted(meta) = meta else {
                out.push((path.clone(), bytes.clone()));
                continue;
            };
            let (sops, plain) = self.decrypt_one(t, path, bytes, &meta, limits).await?;
            decrypted.add(path, meta.format, bytes, &plain);
            out.push((path.clone(), plain));
            used = Some(sops);
        }
        for (path, bytes) in &out {
            if super::is_manifest_file(path)
                && !path.ends_with(".json")
                && let Ok(text) = std::str::from_utf8(bytes)
            {
                t.limits.check_yaml(path, text)?;
            }
        }
        let mut r = super::render_files(&out)?;
        r.tool = used.map(|s| format!("plain YAML, {}", s.version));
        Ok(r)
    }

    /// Decrypts `file` (repository path) of content `bytes` and metadata `meta` for
    /// `t`: with its key file (`source.sops.ageKeyFile`), once one of the file's
    /// recipients is a public key of it ([`sops::check_recipients`]).
    ///
    /// # Errors
    /// [`Error::Decrypt`] naming the file: no key configured, the key file unreadable,
    /// the file written for other keys, sops failing.
    async fn decrypt_one(
        &self,
        t: &Target<'_>,
        file: &str,
        bytes: &[u8],
        meta: &sops::Metadata,
        limits: Limits,
    ) -> Result<(&Sops, Vec<u8>), Error> {
        let fail = |message: String| Error::Decrypt { file: file.to_string(), message };
        let Some(keys) = &t.source.sops else {
            return Err(fail(NO_KEY.into()));
        };
        let key_file = &keys.age_key_file;
        let text = std::fs::read_to_string(key_file)
            .map_err(|e| fail(format!("source.sops.ageKeyFile {}: {e}", key_file.display())))?;
        let ours =
            sops::public_keys(&text).map_err(|e| fail(format!("source.sops.ageKeyFile {} {e}", key_file.display())))?;
        sops::check_recipients(file, meta, &ours)?;
        let sops = self.once(&self.sops, Sops::locate(self.settings.sops.as_deref(), limits)).await?;
        self.runs.fetch_add(1, Ordering::Relaxed);
        let plain = sops.decrypt(file, bytes, meta.format, key_file, Limits { network: false, ..limits }).await?;
        Ok((sops, plain))
    }

    /// Decrypts, in the working copy `root`, those of `files` (repository paths a tool
    /// will read) that are SOPS-encrypted, each replaced by its plaintext; their values
    /// are added to `decrypted`. Returns the sops used, if any.
    ///
    /// # Errors
    /// [`Error::Decrypt`]: an encrypted file outside the application's path and
    /// `sharedPaths`, encrypted files without a key configured (all named), a file that
    /// does not decrypt for this application.
    async fn decrypt_in(
        &self,
        root: &std::path::Path,
        files: &[String],
        t: &Target<'_>,
        limits: Limits,
        decrypted: &mut sops::Decrypted,
    ) -> Result<Option<&Sops>, Error> {
        let tree_err = |message: String| Error::Tree { message };
        let real_root = root.canonicalize().map_err(|e| tree_err(format!("working copy: {e}")))?;
        let mut encrypted = Vec::new();
        for f in files {
            // a symlink is judged by where it points
            let Ok(real) = root.join(f).canonicalize() else { continue };
            let Ok(rel) = real.strip_prefix(&real_root) else {
                return Err(tree_err(format!("{f}: leaves the working copy")));
            };
            let rel = rel.to_string_lossy().into_owned();
            let bytes = std::fs::read(&real).map_err(|e| tree_err(format!("{f}: {e}")))?;
            let sops::Detected::Encrypted(meta) = sops::detect(&rel, &bytes, t.limits)? else { continue };
            if !sops::inside(&rel, t.path, t.shared_paths) {
                return Err(Error::Decrypt {
                    file: rel,
                    message: format!(
                        "outside the application's path `{}` and its environment's sharedPaths: plumb decrypts only the application's own files",
                        if t.path.is_empty() { "." } else { t.path }
                    ),
                });
            }
            encrypted.push((rel, real, bytes, meta));
        }
        if encrypted.len() > 1 && t.source.sops.is_none() {
            let names: Vec<&str> = encrypted.iter().map(|(rel, ..)| rel.as_str()).collect();
            return Err(Error::Decrypt { file: names.join(", "), message: NO_KEY.into() });
        }
        let mut used = None;
        for (rel, real, bytes, meta) in encrypted {
            let (sops, plain) = self.decrypt_one(t, &rel, &bytes, &meta, limits).await?;
            std::fs::write(&real, &plain).map_err(|e| tree_err(format!("{rel}: {e}")))?;
            decrypted.add(&rel, meta.format, &bytes, &plain);
            used = Some(sops);
        }
        Ok(used)
    }
}

/// Why an encrypted file is not decrypted when the application names no key.
const NO_KEY: &str = "no key configured (source.sops.ageKeyFile); plumb never applies it encrypted";

/// A tool's `describe()` with the sops `used`, if any (`kustomize v5.8.1, sops 3.13.3`).
fn with_sops(tool: String, used: Option<&Sops>) -> String {
    match used {
        Some(s) => format!("{tool}, {}", s.version),
        None => tool,
    }
}

/// The output `out` of `helm template` for `t`: the `crds/` documents first (left out
/// under [`CrdPolicy::Skip`]; their `spec` held under [`CrdPolicy::Create`]), then the
/// templates, Helm hooks included (the pass splits them out and runs them around the
/// sync: [`crate::plan::hooks`]).
fn helm_output(t: &Target<'_>, out: &[u8], tool: String, policy: CrdPolicy) -> Result<Rendered, Error> {
    let shown = if t.path.is_empty() { "." } else { t.path };
    let split = super::helm::split_output(out);
    let mut rendered = output(t, &format!("{shown} (helm template)"), &split.templates, tool.clone())?;
    if policy == CrdPolicy::Skip || split.crds.is_empty() {
        return Ok(rendered);
    }
    let crds = output(t, &format!("{shown} (helm template, crds/)"), &split.crds, tool)?;
    if policy == CrdPolicy::Create {
        for m in &crds.manifests {
            if let Some(key) = crate::tracking::ObjectKey::of(&m.object()) {
                rendered.held.push(super::HeldFields {
                    key,
                    pointers: vec!["/spec".into()],
                    why: super::HeldWhy::CreateOnly,
                });
            }
        }
    }
    let mut manifests = crds.manifests;
    manifests.append(&mut rendered.manifests);
    rendered.manifests = manifests;
    rendered.warnings.extend(crds.warnings);
    super::plain::check_duplicates(&rendered.manifests)?;
    Ok(rendered)
}

/// The fields that differ between two renders `a` and `b` of the same inputs, per
/// object (matched by identity; an object of one render only is not compared).
fn unstable(a: &[super::Manifest], b: &[super::Manifest]) -> Vec<super::HeldFields> {
    let theirs: std::collections::HashMap<_, _> = b
        .iter()
        .filter_map(|m| {
            let o = m.object();
            crate::tracking::ObjectKey::of(&o).map(|k| (k, o))
        })
        .collect();
    a.iter()
        .filter_map(|m| {
            let o = m.object();
            let key = crate::tracking::ObjectKey::of(&o)?;
            let pointers = super::helm::unstable_fields(&o, theirs.get(&key)?);
            (!pointers.is_empty()).then_some(super::HeldFields { key, pointers, why: super::HeldWhy::Unstable })
        })
        .collect()
}

/// Copies chart package `c` (and its provenance file and keyring) into the working copy
/// `root` under `.plumb-chart/`: the chart path and keyring path helm is given, relative
/// to `root`.
fn place_chart(root: &std::path::Path, c: &Chart) -> Result<(String, Option<String>), Error> {
    let err = |e: std::io::Error| Error::Tool { message: format!("chart {}: working copy: {e}", c.reference.name) };
    let dir = root.join(".plumb-chart");
    std::fs::create_dir_all(&dir).map_err(err)?;
    let file = format!("{}-{}.tgz", c.reference.name, c.reference.version);
    std::fs::copy(&c.package, dir.join(&file)).map_err(err)?;
    if let Some(p) = &c.provenance {
        std::fs::copy(p, dir.join(format!("{file}.prov"))).map_err(err)?;
    }
    let keyring = match &c.keyring {
        None => None,
        Some(k) => {
            std::fs::copy(k, dir.join("keyring.gpg")).map_err(|e| Error::Tool {
                message: format!("chart {}: keyringFile {}: {e}", c.reference.name, k.display()),
            })?;
            Some(".plumb-chart/keyring.gpg".to_string())
        }
    };
    Ok((format!(".plumb-chart/{file}"), keyring))
}

/// A tool's output `out`, shown as `name`, read like a plain file within `t.limits`;
/// `tool` is the tool and its version.
fn output(t: &Target<'_>, name: &str, out: &[u8], tool: String) -> Result<Rendered, Error> {
    t.limits.check_yaml(name, &String::from_utf8_lossy(out))?;
    super::render_output(name, out, tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A commit of plain files; no working copy.
    struct Plain(Vec<(String, Vec<u8>)>);

    impl Tree for Plain {
        async fn files(&self) -> Result<Files<'_>, Error> {
            Ok(Cow::Borrowed(&self.0))
        }

        async fn checkout(&self) -> Result<tempfile::TempDir, Error> {
            Err(Error::Tool { message: "working copy: none here".into() })
        }
    }

    /// Plain YAML starts no tool; a tool that cannot be located is looked for (one run)
    /// each time, and fails the render before any working copy is made.
    #[tokio::test]
    async fn plain_runs_nothing_and_a_missing_tool_is_looked_for_again() {
        let missing = tempfile::tempdir().expect("tmp");
        let tools =
            Tools::new(RenderTools { kustomize: Some(missing.path().join("no-kustomize")), ..RenderTools::default() });
        let (source, cluster, limits) = (Source::default(), Capabilities::default(), crate::limits::Limits::default());
        let t = Target {
            app: "web",
            namespace: "shop",
            path: "apps/web",
            source: &source,
            shared_paths: &[],
            cluster: &cluster,
            is_upgrade: false,
            limits: &limits,
            chart: None,
        };
        let tree = Plain(vec![(
            "apps/web/cm.yaml".into(),
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".to_vec(),
        )]);
        let plain = tools.render(SourceType::Plain, &t, &tree).await.expect("renders");
        assert_eq!(
            (plain.manifests.len(), plain.tool.as_deref(), plain.tool_name(), tools.runs()),
            (1, None, "plain", 0)
        );
        for runs in 1..=2 {
            let err = tools.render(SourceType::Kustomize, &t, &tree).await.expect_err("no binary").to_string();
            assert!(err.contains("no-kustomize version: cannot start"), "{err}");
            assert_eq!(tools.runs(), runs);
        }
    }

    const HELM_OUT: &str = "---
# Source: web/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
# Source: web/templates/tests/t.yaml
apiVersion: v1
kind: Pod
metadata: {name: web-test, annotations: {helm.sh/hook: test}}
---
# Source: web/crds/w.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.acme.example}
spec: {group: acme.example}
";

    /// `crds/` first (their `spec` held under `Create`, left out under `Skip`), hooks
    /// kept (the pass runs them around the sync, a test is never applied).
    #[test]
    fn helm_output_orders_crds_first_and_keeps_hooks() {
        let (cluster, limits) = (Capabilities::default(), crate::limits::Limits::default());
        for (policy, kinds, held) in [
            (CrdPolicy::Create, &["CustomResourceDefinition", "ConfigMap", "Pod"][..], 1),
            (CrdPolicy::CreateReplace, &["CustomResourceDefinition", "ConfigMap", "Pod"][..], 0),
            (CrdPolicy::Skip, &["ConfigMap", "Pod"][..], 0),
        ] {
            let source = Source::default();
            let t = Target {
                app: "web",
                namespace: "shop",
                path: "web",
                source: &source,
                shared_paths: &[],
                cluster: &cluster,
                is_upgrade: false,
                limits: &limits,
                chart: None,
            };
            let r = helm_output(&t, HELM_OUT.as_bytes(), "helm v3".into(), policy).expect("reads");
            assert_eq!(r.manifests.iter().map(|m| m.kind()).collect::<Vec<_>>(), kinds, "{policy:?}");
            assert_eq!(r.held.len(), held, "{policy:?}");
            assert!(r.warnings.is_empty(), "{policy:?}: {:?}", r.warnings);
        }
        let c = Capabilities { kube_version: Some("v1.36.0".into()), api_versions: vec!["v1".into()] };
        let more = Capabilities { api_versions: vec!["v1".into(), "v1/ConfigMap".into()], ..c.clone() };
        assert_ne!(c.digest(), more.digest(), "a served kind changes the cache key");
        assert_eq!(c.digest(), c.clone().digest());
    }
}
