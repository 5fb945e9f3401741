//! How an application's files are rendered (`source:` on an application), and where
//! the render tools are (`settings.renderTools`). The Helm fields are read only for a
//! Helm source.

use std::path::PathBuf;

use serde::Deserialize;

/// The renderer of an application's path. Detected when `source` is absent: a
/// `kustomization.yaml`, `kustomization.yml` or `Kustomization` file directly under the
/// path → kustomize; a `Chart.yaml` → Helm; else plain YAML.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceType {
    /// Plain YAML/JSON files.
    Plain,
    /// `kustomize build` of the path.
    Kustomize,
    /// `helm template` of the chart at the path.
    Helm,
}

impl SourceType {
    /// `Plain`, `Kustomize` or `Helm`, as messages name it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Plain => "Plain",
            SourceType::Kustomize => "Kustomize",
            SourceType::Helm => "Helm",
        }
    }
}

/// `source:` of an application.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Source {
    /// Helm: the release name (default: the application's name).
    #[serde(default)]
    pub release_name: Option<String>,
    /// Helm: value files, repository paths (from the repository's root), applied in
    /// order.
    #[serde(default)]
    pub value_files: Vec<String>,
    /// Helm: inline values (a mapping), applied after the value files.
    #[serde(default)]
    pub values: Option<serde_json::Value>,
    /// The renderer; detected from the path's files when absent.
    #[serde(default, rename = "type")]
    pub type_: Option<SourceType>,
    /// kustomize: image overrides applied on top of the path's kustomization (as its
    /// own `images:` would).
    #[serde(default)]
    pub images: Vec<ImageOverride>,
    /// kustomize: a prefix added to every object's name (as `namePrefix:`).
    #[serde(default)]
    pub name_prefix: Option<String>,
    /// kustomize: a suffix added to every object's name (as `nameSuffix:`).
    #[serde(default)]
    pub name_suffix: Option<String>,
    /// SOPS: decrypt encrypted files with these keys — the manifests of a plain source,
    /// the files a kustomization reads, Helm value files ([`crate::render::sops`]).
    #[serde(default)]
    pub sops: Option<SopsKeys>,
    /// kustomize: allow remote bases and resources (`https://…`, `github.com/…`) and
    /// give the tool network access (default `false`: a render reads only the commit).
    #[serde(default)]
    pub allow_remote_bases: bool,
    /// Helm: what becomes of the CustomResourceDefinitions of the chart's `crds/`
    /// directories (`Create`, `CreateReplace` or `Skip`; see [`CrdPolicy`]); default
    /// `Create`. Checked by [`Source::problems`].
    #[serde(default)]
    pub crds: Option<String>,
}

/// `source.crds` of a Helm source: how the CustomResourceDefinitions under a chart's
/// `crds/` (and its subcharts') are treated. `helm install` creates them before the
/// templates and `helm upgrade` never touches them again; Flux's helm-controller makes
/// the upgrade a policy (`install.crds` / `upgrade.crds`), as plumb does here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CrdPolicy {
    /// Created when missing (applied before the chart's custom resources); an existing
    /// one keeps its live `spec` (never rewritten from `crds/`), as `helm upgrade` does.
    #[default]
    Create,
    /// Created when missing and kept equal to the chart, as any rendered object.
    CreateReplace,
    /// Left out of the render (`helm template` without `--include-crds`).
    Skip,
}

impl CrdPolicy {
    /// The policy named `s` (`Create`, `CreateReplace`, `Skip`; exact case), or `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Create" => Some(Self::Create),
            "CreateReplace" => Some(Self::CreateReplace),
            "Skip" => Some(Self::Skip),
            _ => None,
        }
    }
}

impl Source {
    /// `source.crds` (default [`CrdPolicy::Create`]; a value [`Source::problems`]
    /// rejects reads as the default).
    pub fn crd_policy(&self) -> CrdPolicy {
        self.crds.as_deref().and_then(CrdPolicy::parse).unwrap_or_default()
    }

    /// What is wrong with these options: a value file that is no repository path, an
    /// option of one renderer set while `type` names another.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.value_files {
            if f.starts_with('/') || f.split('/').any(|seg| seg == "..") || f.is_empty() {
                out.push(format!("source.valueFiles: `{f}` must be a path inside the repository, from its root"));
            }
        }
        if let Some(c) = &self.crds
            && CrdPolicy::parse(c).is_none()
        {
            out.push(format!("source.crds: `{c}` is not one of Create, CreateReplace, Skip"));
        }
        let Some(t) = self.type_ else { return out };
        let set = |on: bool, name: &str, only: SourceType, out: &mut Vec<String>| {
            if on && t != only {
                out.push(format!(
                    "source.{name} applies to {} sources only; source.type is {}",
                    only.as_str(),
                    t.as_str()
                ));
            }
        };
        set(self.release_name.is_some(), "releaseName", SourceType::Helm, &mut out);
        set(!self.value_files.is_empty(), "valueFiles", SourceType::Helm, &mut out);
        set(self.values.is_some(), "values", SourceType::Helm, &mut out);
        set(self.crds.is_some(), "crds", SourceType::Helm, &mut out);
        set(self.allow_remote_bases, "allowRemoteBases", SourceType::Kustomize, &mut out);
        set(!self.images.is_empty(), "images", SourceType::Kustomize, &mut out);
        set(self.name_prefix.is_some(), "namePrefix", SourceType::Kustomize, &mut out);
        set(self.name_suffix.is_some(), "nameSuffix", SourceType::Kustomize, &mut out);
        out
    }
}

/// One `source.images` entry: kustomize's `images:` fields.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageOverride {
    /// The image name as written in the manifests.
    pub name: String,
    /// A new name (registry and repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_name: Option<String>,
    /// A new tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tag: Option<String>,
    /// A digest (`sha256:…`), replacing the tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// `source.sops`: where the decryption keys are.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SopsKeys {
    /// An age key file (`age-keygen` output: `AGE-SECRET-KEY-1…` lines, each under its
    /// `# public key: age1…` line), read by sops; a relative path is resolved against
    /// the policy file's directory, like every file of the policy. A SOPS file decrypts
    /// for this application only when one of its age recipients is a public key of
    /// this file.
    pub age_key_file: PathBuf,
}

/// `settings.renderTools`: where the render tools are and how long they may run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RenderTools {
    /// The `kustomize` binary (default: `$PLUMB_KUSTOMIZE`, else `kustomize` on `PATH`).
    #[serde(default)]
    pub kustomize: Option<PathBuf>,
    /// The `helm` binary (default: `$PLUMB_HELM`, else `helm` on `PATH`).
    #[serde(default)]
    pub helm: Option<PathBuf>,
    /// The `sops` binary (default: `$PLUMB_SOPS`, else `sops` on `PATH`).
    #[serde(default)]
    pub sops: Option<PathBuf>,
    /// Longest a tool may run for one render, in seconds (default 60).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Largest output a tool may write for one render, in bytes (default 64 MiB).
    #[serde(default = "default_max_output")]
    pub max_output_bytes: usize,
    /// Most memory a tool may allocate in one run, in bytes (`RLIMIT_DATA`; default
    /// 1 GiB: `helm template` of kube-prometheus-stack stays far below it, a template
    /// that builds an ever larger string dies there). 0: no ceiling.
    #[serde(default = "default_max_memory")]
    pub max_memory_bytes: u64,
    /// Most CPU time a tool may use in one run, in seconds (`RLIMIT_CPU`; default 30).
    /// 0: no budget.
    #[serde(default = "default_cpu_seconds")]
    pub cpu_seconds: u64,
    /// How long a render that failed is not tried again with the same inputs, in
    /// seconds (default 30); doubled after each failure of the same inputs up to
    /// `maxBackoffSeconds`. A commit that changes the inputs renders at once.
    #[serde(default = "default_backoff")]
    pub backoff_seconds: u64,
    /// The longest backoff after repeated failures, in seconds (default 600).
    #[serde(default = "default_max_backoff")]
    pub max_backoff_seconds: u64,
}

impl Default for RenderTools {
    fn default() -> Self {
        Self {
            kustomize: None,
            helm: None,
            sops: None,
            timeout_seconds: default_timeout(),
            max_output_bytes: default_max_output(),
            max_memory_bytes: default_max_memory(),
            cpu_seconds: default_cpu_seconds(),
            backoff_seconds: default_backoff(),
            max_backoff_seconds: default_max_backoff(),
        }
    }
}

fn default_timeout() -> u64 {
    60
}
fn default_max_output() -> usize {
    64 * 1024 * 1024
}
fn default_max_memory() -> u64 {
    1024 * 1024 * 1024
}
fn default_cpu_seconds() -> u64 {
    30
}
fn default_backoff() -> u64 {
    30
}
fn default_max_backoff() -> u64 {
    600
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_the_option() {
        let ok =
            Source { type_: Some(SourceType::Helm), value_files: vec!["envs/prod.yaml".into()], ..Source::default() };
        assert!(ok.problems().is_empty());
        let detected = Source { images: vec![], name_prefix: Some("p-".into()), ..Source::default() };
        assert!(detected.problems().is_empty(), "no type: nothing to contradict");
        let bad = Source {
            type_: Some(SourceType::Kustomize),
            value_files: vec!["../secrets.yaml".into()],
            sops: Some(SopsKeys { age_key_file: "/k".into() }),
            crds: Some("create".into()),
            ..Source::default()
        };
        assert_eq!(
            bad.problems(),
            [
                "source.valueFiles: `../secrets.yaml` must be a path inside the repository, from its root",
                "source.crds: `create` is not one of Create, CreateReplace, Skip",
                "source.valueFiles applies to Helm sources only; source.type is Kustomize",
                "source.crds applies to Helm sources only; source.type is Kustomize",
            ]
        );
    }
}
