//! Render: turn the files of an application's directory into manifests.
//!
//! - plain YAML/JSON directories ([`plain`]: kubectl's reading of a directory —
//!   lists, UTF-16, server-set fields removed with a warning);
//! - kustomize ([`kustomize`]) and Helm charts ([`helm`]: `helm template`): the real
//!   binaries, sandboxed ([`sandbox`]), their output read like a plain file;
//! - SOPS-encrypted files (plain manifests, a kustomization's inputs, Helm value
//!   files), decrypted first with the application's keys ([`sops`]).
//!
//! Which one is the application's `source.type`, else [`detect`]ed from the files
//! directly under its path; [`tools`] holds the binaries, located once, and runs the
//! one of a source type (a new tool is added there, see its DESIGN note). A file or document that cannot be used is an error naming
//! the file, the document and the line — never silently skipped: a failed render stops
//! the pass before compare, so nothing is pruned.

pub mod compat;
pub mod helm;
pub mod kustomize;
mod plain;
pub mod sandbox;
pub mod server_set;
pub mod sops;
pub mod tools;

use std::time::Duration;

use serde_json::Value;

pub use plain::{is_manifest_file, render_files};

use crate::config::SourceType;

/// The renderer for a path whose direct entries are `top_level` (file names): a
/// kustomization file → kustomize, a `Chart.yaml` → Helm, else plain.
pub fn detect(top_level: &[String]) -> SourceType {
    let has = |n: &str| top_level.iter().any(|t| t == n);
    if kustomize::KUSTOMIZATION_FILES.iter().any(|n| has(n)) {
        SourceType::Kustomize
    } else if has("Chart.yaml") {
        SourceType::Helm
    } else {
        SourceType::Plain
    }
}

/// One rendered object and where it came from.
///
/// The object is kept as compact JSON text and parsed on each use ([`Manifest::object`]):
/// a render stays in the render cache, and the passes that follow it do not read its
/// objects while nothing changed (`reconcile/reuse.rs`). A JSON model holds every map
/// as a B-tree whose first node takes about 500 bytes: a ConfigMap of one key took
/// about 2.2 KB as a model, about 200 bytes as text (heap profile of `plumb serve` with
/// 10 applications × 1,000 ConfigMaps: the cached renders took 21.7 MB).
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// `path/in/repo.yaml#N` (N = 1-based document index).
    pub source: String,
    /// `apiVersion` (empty when missing or not a string).
    api_version: Box<str>,
    /// `kind` (empty when missing or not a string).
    kind: Box<str>,
    /// The object as written, server-set fields removed, as compact JSON.
    text: Box<str>,
    /// The RFC 6901 pointers of its fields holding a value decrypted from SOPS
    /// ([`sops::mark_decrypted`]): sensitive in every output, whatever the kind.
    decrypted: Box<[Box<str>]>,
}

impl Manifest {
    /// The manifest of `object` from `source`.
    pub fn new(source: String, object: &Value) -> Self {
        let field = |f: &str| object.get(f).and_then(Value::as_str).unwrap_or_default().into();
        // a JSON model (string keys) always serializes
        let text = serde_json::to_string(object).unwrap_or_default().into_boxed_str();
        Self { source, api_version: field("apiVersion"), kind: field("kind"), text, decrypted: Box::default() }
    }

    /// The pointers of the fields holding a value decrypted from SOPS (sorted; empty for
    /// most objects).
    pub fn decrypted(&self) -> Vec<&str> {
        self.decrypted.iter().map(AsRef::as_ref).collect()
    }

    /// Sets [`Manifest::decrypted`].
    pub fn set_decrypted(&mut self, mut pointers: Vec<String>) {
        pointers.sort();
        pointers.dedup();
        self.decrypted = pointers.into_iter().map(String::into_boxed_str).collect();
    }

    /// The object (a new JSON model, parsed from the kept text).
    pub fn object(&self) -> Value {
        // written by serde_json from a JSON model: it parses
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// Whether the manifest's JSON text contains `needle` (a cheap test before parsing).
    pub fn mentions(&self, needle: &str) -> bool {
        self.text.contains(needle)
    }

    /// `apiVersion` (empty when missing or not a string).
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// `kind`, read without parsing the object (empty when missing).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The object's size as compact JSON (bytes).
    pub fn bytes(&self) -> usize {
        self.text.len()
    }

    /// A hash of the object's content, for the caches of one process: equal objects
    /// hash equal (the text of a JSON model is canonical: keys sorted, no spaces). Not
    /// stable across builds: never stored.
    pub fn digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        self.text.hash(&mut h);
        h.finish()
    }
}

/// What a render produced: the manifests and what the user should fix in Git.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    /// The objects, in file and document order.
    pub manifests: Vec<Manifest>,
    /// One line per problem that did not stop the render, naming file and document
    /// (e.g. server-set fields removed); shown as the application's `RenderWarning`.
    pub warnings: Vec<String>,
    /// The tool and its version (`kustomize v5.8.1`); `None` for plain YAML.
    pub tool: Option<String>,
    /// How long the render took (the tool's runs included).
    pub took: Duration,
    /// The SOPS-encrypted files decrypted for it (repository paths).
    pub decrypted: Vec<String>,
    /// Fields of rendered objects that keep their live value when the object exists
    /// (never written by plumb): a Helm chart's create-only CRDs, and what differed
    /// between two renders of the same inputs. Empty for most renders.
    pub held: Vec<HeldFields>,
    /// The chart rendered, when it came from a chart repository or an OCI registry
    /// (`source.chart`).
    pub chart: Option<ChartRef>,
}

/// Why plumb keeps the live value of some fields of a rendered object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldWhy {
    /// A CustomResourceDefinition of a chart's `crds/` under `source.crds: Create`: its
    /// `spec` is written when it is created, never after (as `helm upgrade`).
    CreateOnly,
    /// The fields differed between two renders of the same inputs (`lookup`, `rand*`,
    /// `gen*`, `now` in the templates): the first render's value is written when the
    /// object is created, the live value is kept after. Reported as the application's
    /// `NonDeterministicRender` condition.
    Unstable,
}

/// Fields of one rendered object that plumb does not write once it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldFields {
    /// The object, as rendered (namespace empty when the manifest names none: the
    /// destination namespace's).
    pub key: crate::tracking::ObjectKey,
    /// RFC 6901 JSON pointers of the fields (`/spec`, `/data/password`), sorted.
    pub pointers: Vec<String>,
    /// Why.
    pub why: HeldWhy,
}

impl HeldFields {
    /// `Kind.group/namespace/name` ([`crate::tracking::ObjectKey`]'s display) and the
    /// fields: `Secret/web-token /data/password`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.key, self.pointers.join(", "))
    }
}

/// A chart of a chart repository or an OCI registry, as resolved for one render: what
/// status and the sync history show so a user sees which chart was applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChartRef {
    /// The repository URL, without credentials (`https://…`, `oci://…`).
    pub repository: String,
    /// The chart's name.
    pub name: String,
    /// The version chosen (exact, or the highest in the configured range).
    pub version: String,
    /// `sha256:<hex>`: of the package (chart repositories, as the index lists it) or
    /// of the manifest (OCI registries, as `helm push` prints it).
    pub digest: String,
}

impl std::fmt::Display for ChartRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {} ({})", self.repository, self.name, self.version, self.digest)
    }
}

impl Rendered {
    /// SHA-256, in lower-case hex, of what comparing its objects reads of a render:
    /// each manifest's source and text, in order, and the fields held (stable across
    /// processes and builds: [`crate::compare::seal`] stores it). Costs one pass over
    /// the manifests' text.
    pub fn digest(&self) -> String {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        for m in &self.manifests {
            for part in [m.source.as_bytes(), &[0], m.text.as_bytes(), &[0]] {
                h.update(part);
            }
        }
        for held in &self.held {
            h.update(format!("{}\0{:?}\0{}\0", held.key, held.why, held.pointers.join(",")).as_bytes());
        }
        hex::encode(h.finalize())
    }

    /// The renderer's name for metrics: `plain`, `kustomize` or `helm` (the first word
    /// of [`Rendered::tool`]: `plain YAML, sops 3.13.3` is `plain`).
    pub fn tool_name(&self) -> &str {
        self.tool.as_deref().and_then(|t| t.split_whitespace().next()).unwrap_or("plain")
    }
}

/// Why the directory could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A file is not valid YAML/JSON (or not UTF-8 / UTF-16 with a byte-order mark).
    #[error("{file}:{line}: document {document}: {message}")]
    Parse {
        /// File path inside the repository.
        file: String,
        /// 1-based line of the error (0 when unknown).
        line: u32,
        /// 1-based document index in the file.
        document: usize,
        /// The parser's message.
        message: String,
    },
    /// A document (or an item of a list document) parsed but is not a Kubernetes object.
    #[error("{file}: document {document}{}: {message}", item.map_or(String::new(), |i| format!(" items[{i}]")))]
    NotAnObject {
        /// File path inside the repository.
        file: String,
        /// 1-based document index in the file.
        document: usize,
        /// 0-based index in the list's `items`, for an item of a list document.
        item: Option<usize>,
        /// What is missing.
        message: String,
    },
    /// The file is a Git LFS pointer: its content lives on an LFS server plumb does not
    /// read.
    #[error("{file} is a Git LFS pointer (oid {oid}); plumb does not fetch LFS objects: commit the manifest itself")]
    LfsPointer {
        /// File path inside the repository.
        file: String,
        /// The pointer's `oid` line (`sha256:…`).
        oid: String,
    },
    /// The commit's tree cannot be read as the application's files (a submodule, a
    /// symlink leaving the repository); the message names the entry.
    #[error("{message}")]
    Tree {
        /// What is wrong, naming the entry.
        message: String,
    },
    /// A render tool could not be found, failed, ran too long or wrote too much; the
    /// message names the tool, and its first lines of standard error.
    #[error("{message}")]
    Tool {
        /// What happened.
        message: String,
    },
    /// A kustomization names a remote base while remote bases are off.
    #[error(
        "{file}: `{reference}` is remote; remote bases are off for this application (source.allowRemoteBases: true to allow)"
    )]
    RemoteBase {
        /// The kustomization file.
        file: String,
        /// The remote entry.
        reference: String,
    },
    /// A SOPS-encrypted file could not be decrypted (or no key is configured).
    #[error("{file}: SOPS-encrypted; {message}")]
    Decrypt {
        /// File path inside the repository.
        file: String,
        /// Why (sops's first lines of stderr, or the missing setting).
        message: String,
    },
    /// A limit of [`crate::limits`] was exceeded (YAML expansion of a file, rendered
    /// bytes).
    #[error(transparent)]
    Limit(#[from] crate::limits::Exceeded),
    /// A kustomization entry refused before the tool runs: it leaves the repository, or
    /// names a loopback or link-local host.
    #[error("{file}: `{reference}` {why}")]
    Entry {
        /// The kustomization file.
        file: String,
        /// The entry.
        reference: String,
        /// Why it is refused.
        why: String,
    },
    /// A chart of `source.chart` could not be resolved, downloaded or checked.
    #[error("chart `{chart}` from {repository}: {message}")]
    Chart {
        /// The chart's name.
        chart: String,
        /// The repository URL, without credentials.
        repository: String,
        /// What went wrong (unreachable, HTTP status, no version in range, digest
        /// mismatch).
        message: String,
    },
    /// An object's hook annotations cannot be read ([`crate::plan::hooks::classify`]).
    #[error("{file}: {object}: {message}")]
    Hook {
        /// Where it is declared (`path#document`).
        file: String,
        /// The object, `kind/namespace/name`.
        object: String,
        /// What is wrong, naming the annotation and the value.
        message: String,
    },
    /// Two documents declare the same object.
    #[error("{key} is declared twice: {first} and {second}")]
    Duplicate {
        /// The object.
        key: String,
        /// First declaration.
        first: String,
        /// Second declaration.
        second: String,
    },
}

/// Reads a render tool's output `bytes` (a YAML stream shown as `name`, e.g.
/// `apps/web (kustomize build)`) like a plain file: lists expanded, server-set fields
/// removed with a warning, duplicates refused; `tool` is the tool and its version.
///
/// # Errors
/// [`Error`] as for a plain file.
pub fn render_output(name: &str, bytes: &[u8], tool: String) -> Result<Rendered, Error> {
    let mut rendered = Rendered { tool: Some(tool), ..Rendered::default() };
    plain::render_stream(name, bytes, true, &mut rendered)?;
    plain::check_duplicates(&rendered.manifests)?;
    Ok(rendered)
}

impl From<sandbox::RunError> for Error {
    fn from(e: sandbox::RunError) -> Self {
        Error::Tool { message: e.to_string() }
    }
}

/// Reads plain `files` (path inside the repository, content) into objects kept as
/// written, server-set fields included ([`plain::read_objects`]): for exported live
/// objects. A desired state is read with [`render_files`].
///
/// # Errors
/// [`Error`], as [`render_files`].
pub fn render(files: &[(String, Vec<u8>)]) -> Result<Vec<Manifest>, Error> {
    plain::read_objects(files)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(path: &str, text: &str) -> (String, Vec<u8>) {
        (path.to_string(), text.as_bytes().to_vec())
    }

    #[test]
    fn multi_document_lists_and_octal() {
        let files = vec![
            f(
                "b.yaml",
                "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n",
            ),
            f(
                "a.yaml",
                "---\n# comment only\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      volumes: [{name: v, secret: {secretName: s, defaultMode: 0644}}]\n",
            ),
            f("README.md", "not yaml: ["),
        ];
        let out = render(&files).expect("renders");
        let names: Vec<_> = out.iter().map(|m| m.source.as_str()).collect();
        assert_eq!(names, ["a.yaml#2", "a.yaml#3", "b.yaml#1"]);
        assert_eq!(out[1].object().pointer("/spec/template/spec/volumes/0/secret/defaultMode"), Some(&json!(420)));
    }

    #[test]
    fn bad_yaml_names_file_document_and_line() {
        let files =
            vec![f("apps/web/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [unclosed\n")];
        let err = render(&files).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.starts_with("apps/web/cm.yaml:"), "{msg}");
        assert!(msg.contains("document 2"), "{msg}");
    }

    #[test]
    fn non_objects_and_duplicates_are_errors() {
        let missing_kind = vec![f("x.yaml", "apiVersion: v1\nmetadata: {name: a}\n")];
        assert!(render(&missing_kind).expect_err("no kind").to_string().contains("missing kind"));
        let dup = vec![
            f("x.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
            f("y.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#),
        ];
        assert!(matches!(render(&dup), Err(Error::Duplicate { .. })));
    }

    /// A shared case's `desired.yaml` (`shared/` beside the checkout).
    fn case_file(case: &str) -> String {
        let path = format!(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/cases/{}/desired.yaml"), case);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn sources(out: &[Manifest]) -> Vec<String> {
        out.iter().map(|m| format!("{} {}", m.source, ObjectKeyDisplay(&m.object()))).collect()
    }

    struct ObjectKeyDisplay<'a>(&'a Value);
    impl std::fmt::Display for ObjectKeyDisplay<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match crate::tracking::ObjectKey::of(self.0) {
                Some(k) => write!(f, "{k}"),
                None => f.write_str("?"),
            }
        }
    }

    /// flux-13: typed lists expand like `kind: List`.
    #[test]
    fn typed_lists_expand_like_list() {
        let case = &case_file("flux-13");
        let out = render(&[f("apps/web/rbac.yaml", case)]).expect("renders");
        assert_eq!(
            sources(&out),
            [
                "apps/web/rbac.yaml#1 Role.rbac.authorization.k8s.io/gitops-lab/web-reader",
                "apps/web/rbac.yaml#1 Role.rbac.authorization.k8s.io/gitops-lab/web-leases",
                "apps/web/rbac.yaml#2 ConfigMap/gitops-lab/web-settings",
                "apps/web/rbac.yaml#3 ServiceAccount/gitops-lab/web",
            ]
        );
    }

    /// flux-13's rules, one row each: (document, Ok(objects) or Err(message part)).
    #[test]
    fn list_rules() {
        let cm = "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}";
        let rows: Vec<(String, Result<usize, &str>)> = vec![
            (format!("apiVersion: v1\nkind: ConfigMapList\nitems: [{cm}]\n"), Ok(1)),
            (
                format!(
                    "apiVersion: v1\nkind: ConfigMapList\nmetadata: {{resourceVersion: '1'}}\nitems: [{cm}, {{apiVersion: v1, kind: Secret, metadata: {{name: s}}}}]\n"
                ),
                Ok(2),
            ),
            ("apiVersion: v1\nkind: List\nitems: []\n".into(), Ok(0)),
            ("apiVersion: v1\nkind: List\n".into(), Ok(0)),
            (
                "apiVersion: shop.example.test/v1\nkind: PriceList\nmetadata: {name: summer}\nspec: {currency: EUR}\n"
                    .into(),
                Ok(1),
            ),
            // a custom kind with its own `items` field and a name is an object
            (
                "apiVersion: shop.example.test/v1\nkind: PriceList\nmetadata: {name: summer}\nitems: [{sku: a}]\n"
                    .into(),
                Ok(1),
            ),
            (
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleList\n".into(),
                Err("document 1: kind RoleList has no `items`"),
            ),
            (
                format!(
                    "apiVersion: v1\nkind: ConfigMapList\nitems: [{cm}, {{apiVersion: v1, metadata: {{name: x}}}}]\n"
                ),
                Err("document 1 items[1]: missing kind"),
            ),
            (
                format!("apiVersion: v1\nkind: List\nitems: [{cm}, {{kind: ConfigMap, metadata: {{name: x}}}}]\n"),
                Err("document 1 items[1]: missing apiVersion"),
            ),
            ("apiVersion: v1\nkind: List\nitems: {a: 1}\n".into(), Err("`items` of a List must be a sequence")),
        ];
        for (doc, expected) in rows {
            let got = render(&[f("apps/web/l.yaml", &doc)]);
            match (expected, got) {
                (Ok(n), Ok(out)) => assert_eq!(out.len(), n, "{doc}"),
                (Err(part), Err(e)) => {
                    let msg = e.to_string();
                    assert!(msg.starts_with("apps/web/l.yaml: ") && msg.contains(part), "{doc}: {msg}");
                }
                (expected, got) => panic!("{doc}: expected {expected:?}, got {got:?}"),
            }
        }
    }

    /// Encodings kubectl accepts: UTF-8 with a byte-order mark, UTF-16 LE/BE with one.
    #[test]
    fn utf16_and_bom_files_are_transcoded() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\u{e9}}\ndata: {k: \"\u{1F600}\"}\n";
        let le: Vec<u8> = [0xFF, 0xFE].into_iter().chain(text.encode_utf16().flat_map(u16::to_le_bytes)).collect();
        let be: Vec<u8> = [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
        let bom8: Vec<u8> = [0xEF, 0xBB, 0xBF].into_iter().chain(text.bytes()).collect();
        for (name, bytes) in [("le.yaml", le), ("be.yaml", be), ("bom.yaml", bom8)] {
            let out = render(&[(name.to_string(), bytes)]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(out[0].object()["metadata"]["name"], "caf\u{e9}", "{name}");
            assert_eq!(out[0].object()["data"]["k"], "\u{1F600}", "{name}");
        }
        let odd = vec![0xFF, 0xFE, b'a'];
        assert!(render(&[("odd.yaml".into(), odd)]).expect_err("odd").to_string().contains("odd number of bytes"));
        let latin1 = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n".to_vec();
        let msg = render(&[("l1.yaml".into(), latin1)]).expect_err("latin-1").to_string();
        assert!(msg.starts_with("l1.yaml:0: document 1: not UTF-8"), "{msg}");
    }

    #[test]
    fn lfs_pointer_is_named() {
        let pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
        let err = render(&[f("apps/web/big.yaml", pointer)]).expect_err("pointer");
        assert_eq!(
            err.to_string(),
            "apps/web/big.yaml is a Git LFS pointer (oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393); plumb does not fetch LFS objects: commit the manifest itself"
        );
    }

    /// k8s-05: server-set metadata is removed, with one warning per document naming the
    /// file, document and fields.
    #[test]
    fn server_set_fields_are_removed_with_a_warning() {
        let case = &case_file("k8s-05");
        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, generation: 4}}\n";
        let clean = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, creationTimestamp: null}\nspec: {}\nstatus: {}\n";
        let out = render_files(&[
            f("apps/web/settings.yaml", case),
            f("apps/web/list.yaml", list),
            f("apps/web/d.yaml", clean),
        ])
        .expect("renders");
        assert_eq!(
            out.warnings,
            [
                "apps/web/list.yaml#1 items[1]: metadata.generation set by the API server; plumb ignores it (remove it from Git)",
                "apps/web/settings.yaml#1: metadata.resourceVersion, metadata.uid, metadata.creationTimestamp set by the API server; plumb ignores them (remove them from Git)",
            ]
        );
        let settings = &out.manifests[3].object();
        assert_eq!(settings["metadata"], json!({"name": "web-settings", "namespace": "gitops-lab"}));
        assert_eq!(
            out.manifests[0].object(),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}})
        );
    }

    /// Argo CD's and Flux's annotations are read with plumb's meaning, in every render
    /// (see `compat`); what has none is a warning naming file and document.
    #[test]
    fn foreign_annotations_are_translated_with_a_warning_for_the_rest() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    argocd.argoproj.io/sync-wave: \"5\"\n    kustomize.toolkit.fluxcd.io/reconcile: disabled\n";
        let out = render_files(&[f("apps/web/a.yaml", text)]).expect("renders");
        assert_eq!(out.manifests[0].object()["metadata"]["annotations"]["plumb.dev/sync-wave"], "5");
        assert_eq!(
            out.warnings,
            [
                "apps/web/a.yaml#1: annotation kustomize.toolkit.fluxcd.io/reconcile: disabled: plumb has no per-object opt-out of reconciliation (leave the object out of Git); ignored"
            ]
        );
    }

    #[test]
    fn empty_directory_renders_nothing() {
        assert_eq!(render(&[]), Ok(vec![]));
    }
}
