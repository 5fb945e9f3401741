//! The render tools of one process and the dispatch on an application's source type.
//!
//! [`Tools`] holds the binaries of `settings.renderTools`, each located (and its version
//! asked) once, on first use, and counts the child processes it starts. [`Tools::render`]
//! runs the renderer of a source type on what the source side gives it: the files under
//! the application's path (plain YAML, SOPS-encrypted files decrypted first), or a
//! working copy of the whole commit (kustomize, helm) — both through [`Tree`], so the
//! mirrors, working copies and the render cache stay with the sources.
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
use crate::config::{RenderTools, Source, SourceType};

/// The target cluster as a chart sees it (Helm's `.Capabilities`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The cluster's version (`v1.36.3`); `None` while unknown.
    pub kube_version: Option<String>,
    /// The `group/version`s it serves.
    pub api_versions: Vec<String>,
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
    /// The cluster it is rendered for.
    pub cluster: &'a Capabilities,
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
    /// A working copy of the whole commit in a new temporary directory (removed when
    /// dropped).
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
        };
        let shown = if t.path.is_empty() { "." } else { t.path };
        let mut rendered = match kind {
            SourceType::Plain => self.plain(t, tree, limits).await?,
            SourceType::Kustomize => {
                let k =
                    self.once(&self.kustomize, Kustomize::locate(self.settings.kustomize.as_deref(), limits)).await?;
                let dir = self.checkout(tree).await?;
                let s = t.source;
                let overrides = Overrides {
                    images: &s.images,
                    name_prefix: s.name_prefix.as_deref(),
                    name_suffix: s.name_suffix.as_deref(),
                };
                let out = k.build(dir.path(), t.path, &overrides, limits).await?;
                output(t, &format!("{shown} (kustomize build)"), &out, k.describe())?
            }
            SourceType::Helm => {
                let h = self.once(&self.helm, Helm::locate(self.settings.helm.as_deref(), limits)).await?;
                let dir = self.checkout(tree).await?;
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
                };
                let out = h.template(dir.path(), &template, limits).await?;
                match t.chart {
                    None => output(t, &format!("{shown} (helm template)"), &out, h.describe())?,
                    Some(c) => {
                        let r = &c.reference;
                        let name = format!("chart {} {} (helm template)", r.name, r.version);
                        let tool = format!(
                            "{}, chart {} {} {} from {}",
                            h.describe(),
                            r.name,
                            r.version,
                            r.digest,
                            r.repository
                        );
                        let mut rendered = output(t, &name, &out, tool)?;
                        rendered.chart = Some(r.clone());
                        rendered
                    }
                }
            }
        };
        t.limits.check_rendered(rendered.manifests.iter().map(|m| (m.source.as_str(), m.bytes())))?;
        rendered.took = started.elapsed();
        Ok(rendered)
    }

    /// The plain files of `tree`, SOPS-encrypted ones decrypted first (one sops run
    /// each, with `source.sops`'s keys); `tool` names the sops used, if any.
    async fn plain(&self, t: &Target<'_>, tree: &impl Tree, limits: Limits) -> Result<Rendered, Error> {
        let files = tree.files().await?;
        let mut out = Vec::with_capacity(files.len());
        let mut used = None;
        for (path, bytes) in files.iter() {
            if !super::is_manifest_file(path) || !sops::is_encrypted(path, bytes) {
                out.push((path.clone(), bytes.clone()));
                continue;
            }
            let Some(keys) = &t.source.sops else {
                return Err(Error::Decrypt {
                    file: path.clone(),
                    message: "no key configured (source.sops.ageKeyFile); plumb never applies it encrypted".into(),
                });
            };
            let sops = self.once(&self.sops, Sops::locate(self.settings.sops.as_deref(), limits)).await?;
            self.runs.fetch_add(1, Ordering::Relaxed);
            let plain = sops.decrypt(path, bytes, &keys.age_key_file, Limits { network: false, ..limits }).await?;
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
            cluster: &cluster,
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
}
