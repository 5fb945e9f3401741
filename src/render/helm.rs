//! Helm: `helm template` of a chart in the repository (plumb applies the output; no
//! release is installed), run in a working copy of the chart, its value files and the
//! environment's `sharedPaths` (nothing else of the commit), sandboxed
//! ([`super::sandbox`]): no network, so dependencies must be vendored under the
//! chart's `charts/` (helm names a missing one). Value files are repository paths;
//! inline values are written to a file of the working copy. Its output is read like a
//! plain YAML file ([`super::render_output`]).
//!
//! As `helm install` / `helm upgrade` would render it:
//! - `--include-crds`: the CRDs of the chart's (and subcharts') `crds/` come first
//!   ([`split_output`]), then the templates; `source.crds` decides what becomes of
//!   them ([`crate::config::CrdPolicy`]).
//! - `--api-versions` with every `group/version` and `group/version/Kind` the cluster
//!   serves and `--kube-version` its version (`.Capabilities`).
//! - `--is-upgrade` once the application has synced (`.Release.IsUpgrade`).
//! - Hooks (`helm.sh/hook`) are kept in the output; the pass splits them from the
//!   objects and runs them around the sync as Helm would order them (`test` hooks are
//!   never applied): see `plan::hooks`.
//! - `lookup` sees nothing (as in `helm template`): a chart that looks up its Secret
//!   or else generates one generates it on every render. A chart whose templates call
//!   [`UNSTABLE_FUNCTIONS`] is rendered twice; the fields that differ
//!   ([`unstable_fields`]) are written only when the object is created, and keep their
//!   live value after (reported as `NonDeterministicRender`).

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
    /// The target cluster's served `group/version`s and `group/version/Kind`s
    /// (`.Capabilities.APIVersions`).
    pub api_versions: &'a [String],
    /// `--include-crds`: the chart's `crds/` directories are part of the output.
    pub include_crds: bool,
    /// `--is-upgrade`: `.Release.IsUpgrade` true, `.Release.IsInstall` false (the
    /// application has synced before).
    pub is_upgrade: bool,
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
        if t.include_crds {
            args.push("--include-crds".into());
        }
        if t.is_upgrade {
            args.push("--is-upgrade".into());
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

/// Helm's output split by where each document came from: a chart's (or subchart's)
/// `crds/` directory, or its templates. Each document of `helm template` follows a
/// `# Source: CHART/PATH` comment; a document without one (a multi-document file of
/// `crds/`) belongs with the one before it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// The documents of `crds/` directories, as a YAML stream.
    pub crds: Vec<u8>,
    /// The rendered templates, as a YAML stream.
    pub templates: Vec<u8>,
}

/// Splits `out` (the stdout of `helm template`) into [`Output`].
pub fn split_output(out: &[u8]) -> Output {
    let text = String::from_utf8_lossy(out);
    let mut o = Output::default();
    let mut crd = false;
    let mut doc = String::new();
    let flush = |doc: &mut String, crd: bool, o: &mut Output| {
        if !doc.trim().is_empty() {
            let into = if crd { &mut o.crds } else { &mut o.templates };
            into.extend_from_slice(b"---\n");
            into.extend_from_slice(doc.as_bytes());
            if !doc.ends_with('\n') {
                into.push(b'\n');
            }
        }
        doc.clear();
    };
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare.starts_with("--- ") {
            flush(&mut doc, crd, &mut o);
            continue;
        }
        if let Some(path) = bare.strip_prefix("# Source: ") {
            crd = from_crds_dir(path.trim());
        }
        doc.push_str(line);
    }
    flush(&mut doc, crd, &mut o);
    o
}

/// Whether `path` (`CHART/crds/x.yaml`, `CHART/charts/SUB/crds/x.yaml`) is a file of a
/// chart's `crds/` directory (not a template that happens to sit in `templates/crds/`).
fn from_crds_dir(path: &str) -> bool {
    let segs: Vec<&str> = path.split('/').collect();
    let mut i = 1;
    while segs.get(i) == Some(&"charts") {
        i += 2;
    }
    segs.get(i) == Some(&"crds") && segs.len() > i + 1
}

/// Template functions whose result is not a function of the render's inputs: live
/// state (`lookup`, which sees nothing under `helm template`), randomness, keys and
/// certificates, the clock.
pub const UNSTABLE_FUNCTIONS: &[&str] = &[
    "lookup",
    "randAlphaNum",
    "randAlpha",
    "randNumeric",
    "randAscii",
    "randBytes",
    "randInt",
    "uuidv4",
    "genCA",
    "genPrivateKey",
    "genSelfSignedCert",
    "genSignedCert",
    "derivePassword",
    "htpasswd",
    "bcrypt",
    "shuffle",
    "now",
    "dateInZone",
    "date ",
];

/// Whether a template text `text` calls one of [`UNSTABLE_FUNCTIONS`] (a plain
/// substring test: a false positive costs one more render, never a wrong one).
pub fn uses_unstable_functions(text: &str) -> bool {
    UNSTABLE_FUNCTIONS.iter().any(|f| text.contains(f))
}

/// Whether any template of the chart at `chart` under `root` (its `templates/` and its
/// subcharts' under `charts/`, `.tpl` helpers included) calls one of
/// [`UNSTABLE_FUNCTIONS`]. Reads at most `budget` bytes (then answers `true`: render
/// twice rather than miss one).
pub fn chart_is_unstable(root: &Path, chart: &str, mut budget: u64) -> bool {
    let mut stack = vec![root.join(chart)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() && path.components().any(|c| c.as_os_str() == "templates") {
                let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                if size > budget {
                    return true;
                }
                budget -= size;
                if std::fs::read(&path).is_ok_and(|b| uses_unstable_functions(&String::from_utf8_lossy(&b))) {
                    return true;
                }
            }
        }
    }
    false
}

/// The RFC 6901 pointers under which `a` and `b` (two renders of one object) differ:
/// the deepest differing field of each mapping; a list that differs in length, or a
/// scalar or type that differs, is one field. Empty when equal.
pub fn unstable_fields(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    fn walk(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort_unstable();
                keys.dedup();
                for k in keys {
                    let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    match (x.get(k), y.get(k)) {
                        (Some(u), Some(v)) => walk(u, v, &p, out),
                        _ => out.push(p),
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (u, v)) in x.iter().zip(y).enumerate() {
                    walk(u, v, &format!("{at}/{i}"), out);
                }
            }
            _ if a == b => {}
            _ => out.push(at.to_string()),
        }
    }
    let mut out = Vec::new();
    walk(a, b, "", &mut out);
    out
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
        let limits = Limits { timeout: Duration::from_secs(5), max_output: 1024, ..Limits::default() };
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
                include_crds: false,
                is_upgrade: false,
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
            include_crds: true,
            is_upgrade: true,
        };
        let err = helm.template(root.path(), &t, limits).await.expect_err("no binary").to_string();
        assert!(
            err.starts_with("no-helm template r c --namespace n --include-crds --is-upgrade: cannot start"),
            "{err}"
        );
    }

    /// `crds/` documents (a chart's, a subchart's, a multi-document file) go apart from
    /// templates, also one in `templates/crds/`.
    #[test]
    fn output_splits_crds_from_templates() {
        let out = "---\n# Source: web/crds/a.yaml\nkind: A\n---\nkind: A2\n---\n# Source: web/charts/db/crds/b.yaml\n\
                   kind: B\n---\n# Source: web/templates/crds/c.yaml\nkind: C\n---\n# Source: web/templates/d.yaml\n\
                   kind: D\n";
        let o = split_output(out.as_bytes());
        let crds = String::from_utf8(o.crds).expect("utf-8");
        let templates = String::from_utf8(o.templates).expect("utf-8");
        assert_eq!(
            crds,
            "---\n# Source: web/crds/a.yaml\nkind: A\n---\nkind: A2\n---\n# Source: web/charts/db/crds/b.yaml\nkind: B\n"
        );
        assert_eq!(
            templates,
            "---\n# Source: web/templates/crds/c.yaml\nkind: C\n---\n# Source: web/templates/d.yaml\nkind: D\n"
        );
        assert_eq!(split_output(b""), Output::default());
    }

    /// Two renders differ at the deepest differing fields; equal ones at none.
    #[test]
    fn unstable_fields_name_the_differing_leaves() {
        let a = serde_json::json!({"kind": "Secret", "data": {"password": "a", "user": "u", "a/b": 1}, "l": [1, 2]});
        let b = serde_json::json!({"kind": "Secret", "data": {"password": "b", "user": "u", "a/b": 2}, "l": [1]});
        assert_eq!(unstable_fields(&a, &b), ["/data/a~1b", "/data/password", "/l"]);
        assert!(unstable_fields(&a, &a).is_empty());
        assert!(uses_unstable_functions("{{ randAlphaNum 16 | b64enc }}"));
        assert!(!uses_unstable_functions("{{ .Values.password | b64enc }}"));
    }
}
