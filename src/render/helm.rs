//! Helm: `helm template` of a chart in the repository (plumb applies the output; no
//! release is installed), run in a working copy of the whole commit and sandboxed
//! ([`super::sandbox`]): no network, so dependencies must be vendored under the
//! chart's `charts/` (helm names a missing one). Value files are repository paths;
//! inline values are written to a file of the working copy. Its output is read like a
//! plain YAML file ([`super::render_output`]).

use std::path::{Path, PathBuf};

use super::{
    Error,
    sandbox::{self, Limits},
};

/// A located helm binary and the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helm {
    /// The binary (absolute path).
    pub path: PathBuf,
    /// What `helm version --short` prints (e.g. `v3.22.0+g…`).
    pub version: String,
}

/// What to render: the chart at `chart` (repository path) as release `release` in
/// `namespace`, with `value_files` (repository paths, in order) then `values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template<'a> {
    /// The chart's directory, inside the repository, or a chart package (`.tgz`) in
    /// the working copy.
    pub chart: &'a str,
    /// A keyring (in the working copy): the package's provenance file is verified with
    /// it before rendering (`--verify --keyring`).
    pub keyring: Option<&'a str>,
    /// Release name (`.Release.Name`).
    pub release: &'a str,
    /// Namespace (`.Release.Namespace`).
    pub namespace: &'a str,
    /// Value files, repository paths.
    pub value_files: &'a [String],
    /// Inline values (a mapping), applied last.
    pub values: Option<&'a serde_json::Value>,
    /// The target cluster's version (`.Capabilities.KubeVersion`, e.g. `v1.36.3`),
    /// when known.
    pub kube_version: Option<&'a str>,
    /// The target cluster's served `group/version`s (`.Capabilities.APIVersions`).
    pub api_versions: &'a [String],
}

impl Helm {
    /// Finds the binary (`configured`, else `$PLUMB_HELM`, else `helm` on `PATH`) and
    /// asks its version (one child process).
    ///
    /// # Errors
    /// [`Error::Tool`] when it cannot be found or run.
    pub async fn locate(configured: Option<&Path>, limits: Limits) -> Result<Self, Error> {
        let (path, out) = sandbox::locate("helm", configured, &["version", "--short"], limits).await?;
        Ok(Self { path, version: out.trim().to_string() })
    }

    /// `tool version`, as reported with a render.
    pub fn describe(&self) -> String {
        format!("helm {}", self.version)
    }

    /// `helm template` of `t` in the working copy `root`; returns the output (a YAML
    /// stream, read with [`super::render_output`]).
    ///
    /// # Errors
    /// [`Error::Tool`] (a value file outside the repository, the run failed).
    pub async fn template(&self, root: &Path, t: &Template<'_>, limits: Limits) -> Result<Vec<u8>, Error> {
        let chart = if t.chart.is_empty() { "." } else { t.chart };
        let mut args: Vec<String> =
            vec!["template".into(), t.release.into(), chart.into(), "--namespace".into(), t.namespace.into()];
        for f in t.value_files {
            let inside = Path::new(f).components().all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside || !root.join(f).is_file() {
                return Err(Error::Tool {
                    message: format!(
                        "helm: value file `{f}` is not a file of the repository (paths are from its root)"
                    ),
                });
            }
            args.extend(["--values".into(), f.clone()]);
        }
        if let Some(k) = t.keyring {
            args.extend(["--verify".into(), "--keyring".into(), k.into()]);
        }
        if let Some(v) = t.kube_version {
            args.extend(["--kube-version".into(), v.into()]);
        }
        for v in t.api_versions {
            args.extend(["--api-versions".into(), v.clone()]);
        }
        if let Some(v) = t.values {
            let file = root.join(".plumb-inline-values.json");
            std::fs::write(&file, v.to_string()).map_err(|e| Error::Tool { message: format!("helm: values: {e}") })?;
            args.extend(["--values".into(), ".plumb-inline-values.json".into()]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        Ok(sandbox::run(&self.path, &refs, root, limits).await?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Value files are checked before helm runs (the binary here does not exist).
    #[tokio::test]
    async fn value_files_must_be_files_of_the_repository() {
        let root = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(root.path().join("envs")).expect("mkdir");
        let helm = Helm { path: root.path().join("no-helm"), version: "v0".into() };
        let limits = Limits { timeout: Duration::from_secs(5), max_output: 1024, network: false };
        for (file, why) in [("../etc/passwd", "outside"), ("/etc/passwd", "absolute"), ("envs/none.yaml", "missing")] {
            let files = [file.to_string()];
            let t = Template {
                chart: "c",
                keyring: None,
                release: "r",
                namespace: "n",
                value_files: &files,
                values: None,
                kube_version: None,
                api_versions: &[],
            };
            let err = helm.template(root.path(), &t, limits).await.expect_err(why).to_string();
            assert_eq!(
                err,
                format!("helm: value file `{file}` is not a file of the repository (paths are from its root)"),
                "{why}"
            );
        }
        let t = Template {
            chart: "c",
            keyring: None,
            release: "r",
            namespace: "n",
            value_files: &[],
            values: None,
            kube_version: None,
            api_versions: &[],
        };
        let err = helm.template(root.path(), &t, limits).await.expect_err("no binary").to_string();
        assert!(err.starts_with("no-helm template r c --namespace n: cannot start"), "{err}");
    }
}
