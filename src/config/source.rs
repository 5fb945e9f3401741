//! How an application's files are rendered (`source:` on an application), and where
//! the render tools are (`settings.renderTools`). The Helm fields are read only for a
//! Helm source; `source.chart` takes the chart from a chart repository or an OCI
//! registry instead of the application's path ([`ChartSource`]).

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
    /// Helm: the chart from a chart repository or an OCI registry instead of the
    /// application's path (value files still come from the Git repository).
    #[serde(default)]
    pub chart: Option<ChartSource>,
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
        if let Some(c) = &self.chart {
            out.extend(c.problems());
            if self.type_.is_some_and(|t| t != SourceType::Helm) {
                out.push("source.chart applies to Helm sources only; source.type is not helm".into());
            }
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

/// `source.chart`: a chart of a Helm chart repository (`https://…`, whose `index.yaml`
/// lists the versions) or of an OCI registry (`oci://host/path`, the chart
/// `host/path/name`, its tags the versions), as Argo CD's `repoURL` + `chart` +
/// `targetRevision` or Flux's HelmRepository / OCIRepository + `chart.spec.version`.
///
/// ```yaml
/// source:
///   chart:
///     repository: https://charts.jetstack.io
///     name: cert-manager
///     version: ">=1.15.0 <1.16.0"       # exact, or a Helm semver constraint
///     username: reader                  # basic auth, with passwordFile / passwordSecretRef
///     passwordSecretRef: {name: charts, key: password}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChartSource {
    /// `https://…` (a chart repository: `index.yaml` under it), `http://…` or
    /// `oci://host[:port]/path` (a registry).
    pub repository: String,
    /// The chart's name (one path segment: `cert-manager`).
    pub name: String,
    /// The version: exact (`1.15.3`) or a Helm constraint (`^1.2`, `~1.2.3`,
    /// `>=1.0.0 <2.0.0`, `1.2.x`, alternatives with `||`); the highest version in range
    /// is used, read again every reconcile interval.
    pub version: String,
    /// Basic auth: the user name (with `passwordFile` or `passwordSecretRef`).
    #[serde(default)]
    pub username: Option<String>,
    /// Basic auth: a file holding the password (one trailing newline stripped).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Basic auth: the password from a Secret in plumb's namespace.
    #[serde(default)]
    pub password_secret_ref: Option<super::SecretRef>,
    /// Bearer auth: a file holding the token.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Bearer auth: the token from a Secret in plumb's namespace.
    #[serde(default)]
    pub token_secret_ref: Option<super::SecretRef>,
    /// Allow credentials over plain `http://` (and an `oci://` registry spoken to over
    /// plain HTTP), as `insecure: true` of a Git repository; meant for a lab.
    #[serde(default)]
    pub insecure: bool,
    /// Verify the chart's provenance file (`<chart>.tgz.prov`, OpenPGP) against this
    /// keyring (`helm verify --keyring`); chart repositories only.
    #[serde(default)]
    pub keyring_file: Option<PathBuf>,
}

impl ChartSource {
    /// Whether the chart comes from an OCI registry (`oci://`).
    pub fn is_oci(&self) -> bool {
        self.repository.get(..6).is_some_and(|s| s.eq_ignore_ascii_case("oci://"))
    }

    /// Whether credentials are configured.
    pub fn has_credentials(&self) -> bool {
        self.password_file.is_some()
            || self.password_secret_ref.is_some()
            || self.token_file.is_some()
            || self.token_secret_ref.is_some()
    }

    /// What is wrong with this chart source: a URL of another scheme, a name that is
    /// not one segment, a version that is no constraint, two kinds of credentials,
    /// credentials over plain HTTP without `insecure: true`.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let url = self.repository.as_str();
        let lower = url.to_ascii_lowercase();
        let plain = lower.starts_with("http://");
        if !(plain || lower.starts_with("https://") || self.is_oci()) || url::Url::parse(url).is_err() {
            out.push(format!("source.chart.repository: `{}` must be an https://, http:// or oci:// URL", redact(url)));
        } else if url::Url::parse(url).is_ok_and(|u| !u.username().is_empty() || u.password().is_some()) {
            out.push("source.chart.repository: credentials in the URL: use passwordFile or passwordSecretRef".into());
        }
        if self.name.is_empty() || self.name.contains(['/', '?', '#', '\\']) || self.name == ".." || self.name == "." {
            out.push(format!("source.chart.name: `{}` must be one chart name", self.name));
        }
        if let Err(e) = super::chart_version::Constraint::parse(&self.version) {
            out.push(format!("source.chart.version: {e}"));
        }
        let password = self.password_file.is_some() || self.password_secret_ref.is_some();
        let token = self.token_file.is_some() || self.token_secret_ref.is_some();
        if (self.password_file.is_some() && self.password_secret_ref.is_some())
            || (self.token_file.is_some() && self.token_secret_ref.is_some())
            || (password && token)
        {
            out.push(
                "source.chart: give one credential: a password (file or Secret) or a token (file or Secret)".into(),
            );
        }
        if password != self.username.is_some() {
            out.push("source.chart: username and a password (passwordFile or passwordSecretRef) go together".into());
        }
        if plain && self.has_credentials() && !self.insecure {
            out.push(format!(
                "source.chart: credentials with the http:// repository {} would travel unencrypted: use https://, or set insecure: true",
                redact(url)
            ));
        }
        if self.keyring_file.is_some() && self.is_oci() {
            out.push(
                "source.chart.keyringFile: provenance files are read from chart repositories only, not oci://".into(),
            );
        }
        out
    }
}

/// `url` without credentials, for messages.
fn redact(url: &str) -> String {
    super::repo_url::redact(url)
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

    fn chart(repository: &str, version: &str) -> ChartSource {
        ChartSource {
            repository: repository.into(),
            name: "web".into(),
            version: version.into(),
            username: None,
            password_file: None,
            password_secret_ref: None,
            token_file: None,
            token_secret_ref: None,
            insecure: false,
            keyring_file: None,
        }
    }

    /// A chart source is refused with the field named: scheme, name, version,
    /// credentials in the URL, two credentials, credentials over plain HTTP.
    #[test]
    fn chart_sources_are_checked() {
        assert!(chart("https://charts.example", "^1.2").problems().is_empty());
        assert!(chart("oci://ghcr.io/acme/charts", "1.2.3").problems().is_empty());
        assert!(chart("http://127.0.0.1:8080", ">=1.0.0 <2.0.0").problems().is_empty(), "no credential, no risk");
        assert_eq!(
            chart("ftp://x", "1.0.0").problems(),
            ["source.chart.repository: `ftp://x/` must be an https://, http:// or oci:// URL"]
        );
        assert_eq!(
            chart("https://u:pw@charts.example", "1").problems(),
            ["source.chart.repository: credentials in the URL: use passwordFile or passwordSecretRef"]
        );
        let p = chart("https://charts.example", "latest").problems();
        assert!(p.len() == 1 && p[0].starts_with("source.chart.version: `latest`"), "{p:?}");
        let bad_name = ChartSource { name: "../web".into(), ..chart("https://charts.example", "1") };
        assert_eq!(bad_name.problems(), ["source.chart.name: `../web` must be one chart name"]);
        let both = ChartSource {
            username: Some("u".into()),
            password_file: Some("/p".into()),
            token_file: Some("/t".into()),
            ..chart("https://charts.example", "1")
        };
        assert_eq!(
            both.problems(),
            ["source.chart: give one credential: a password (file or Secret) or a token (file or Secret)"]
        );
        let no_user = ChartSource { password_file: Some("/p".into()), ..chart("https://charts.example", "1") };
        assert_eq!(
            no_user.problems(),
            ["source.chart: username and a password (passwordFile or passwordSecretRef) go together"]
        );
        let plain = ChartSource { token_file: Some("/t".into()), ..chart("http://charts.lab:8080", "1") };
        let p = plain.problems();
        assert!(p.len() == 1 && p[0].contains("would travel unencrypted") && p[0].contains("insecure: true"), "{p:?}");
        assert!(ChartSource { insecure: true, ..plain }.problems().is_empty());
        let oci_prov = ChartSource { keyring_file: Some("/k".into()), ..chart("oci://r.example/c", "1") };
        assert!(oci_prov.problems()[0].starts_with("source.chart.keyringFile"), "{:?}", oci_prov.problems());
        let s = Source {
            type_: Some(SourceType::Kustomize),
            chart: Some(chart("https://c.example", "1")),
            ..Source::default()
        };
        assert_eq!(s.problems(), ["source.chart applies to Helm sources only; source.type is not helm"]);
    }

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
