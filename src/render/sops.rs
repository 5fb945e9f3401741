//! SOPS-encrypted files: recognised by their parsed metadata, checked against the
//! application's keys, decrypted with the real `sops` binary, and their plaintext
//! values remembered so that every output masks them.
//!
//! The model (what Flux's kustomize-controller decrypts, with plumb's key rule added):
//! - **Which files**: the manifests of a plain source, the files a kustomization reads
//!   (`resources`, `bases`, `components`, `patchesStrategicMerge`, `patches[].path`,
//!   the `envs`/`env`/`files` of `secretGenerator`/`configMapGenerator`, followed
//!   through local bases; [`kustomize_inputs`]) and the Helm `valueFiles`. Each is
//!   decrypted before the tool runs, in the working copy, and only when it lies inside
//!   the application's path or its environment's `sharedPaths`: a SOPS file elsewhere
//!   is refused, naming it.
//! - **Detection** ([`detect`]) reads the parsed file, whatever its layout: a top-level
//!   `sops` mapping with a `mac` and a key group (YAML, JSON, sops's binary format), or
//!   a `sops_mac=` line (dotenv), or a `[sops]` section with `mac` (INI). A file with `ENC[…]` values and no valid metadata is an
//!   error, never applied; a rendered object still carrying a top-level `sops` field or
//!   an `ENC[…]` value is refused too ([`check_no_ciphertext`]).
//! - **Keys per application**: a file decrypts only for an application whose key file
//!   holds a public key among the file's age recipients ([`check_recipients`]); the
//!   public keys are the `# public key: age1…` lines `age-keygen` writes into the key
//!   file (plumb links no X25519 code to derive them; the lines come from the same
//!   operator-owned file as the identities, and `sops` still needs the identity itself,
//!   so a wrong line can only refuse more). Metadata naming a key service (KMS, Vault,
//!   PGP) is refused: it would need the network; plumb decrypts with age keys only, and
//!   `sops` runs without network ([`super::sandbox`]).
//! - **Secrecy**: sops's standard error is never copied into an error (it may quote a
//!   plaintext value, kustomize-controller#1371): [`Sops::decrypt`] names the file and a
//!   generic reason (with the key path of a value that is not encrypted). Every value
//!   that came out of an `ENC[…]` leaf is kept ([`Decrypted`]) and the rendered fields
//!   holding it are marked sensitive, whatever the kind ([`mark_decrypted`]).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

use super::{
    Error, Manifest,
    sandbox::{self, Limits, RunError},
};

/// What every SOPS-encrypted value starts with (getsops/sops `aes/cipher.go`).
const CIPHERTEXT: &str = "ENC[AES256_GCM,";

/// The key services whose master keys sops would fetch over the network.
const SERVICES: [&str; 5] = ["kms", "gcp_kms", "azure_kv", "hc_vault", "pgp"];

/// How sops stores a file (`--input-type` / `--output-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML (one or more documents).
    Yaml,
    /// JSON.
    Json,
    /// dotenv (`KEY=value` lines, metadata in `sops_*` keys).
    Dotenv,
    /// INI (metadata in a `[sops]` section).
    Ini,
    /// A whole file encrypted as one value (`{"data": "ENC[…]", "sops": {…}}`).
    Binary,
}

impl Format {
    /// sops's name of the format.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Yaml => "yaml",
            Format::Json => "json",
            Format::Dotenv => "dotenv",
            Format::Ini => "ini",
            Format::Binary => "binary",
        }
    }
}

/// The parsed metadata of a SOPS file: what plumb checks before running sops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// How the file is stored.
    pub format: Format,
    /// Its age recipients (`sops.age[].recipient`, key groups included).
    pub recipients: Vec<String>,
    /// The key services it names besides age (`kms`, `hc_vault`, `pgp`, …).
    pub services: Vec<String>,
}

/// What [`detect`] found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// Not SOPS-encrypted.
    Plain,
    /// SOPS-encrypted, with this metadata.
    Encrypted(Metadata),
}

/// Whether the file `path` (repository path) of content `bytes` is SOPS-encrypted, by
/// its parsed metadata: a top-level `sops` mapping holding a `mac` and a key group
/// (`age`, `pgp`, `kms`, … or `key_groups`) in any YAML/JSON document, whatever the
/// indentation or flow style, a `sops_mac=` line (dotenv) or a `[sops]` section with a
/// `mac` (INI). The YAML is scanned under
/// the per-file budget of `limits` first.
///
/// # Errors
/// [`Error::Decrypt`] for `ENC[…]` values without valid metadata (named by their key
/// path), [`Error::Limit`] for a YAML bomb.
pub fn detect(path: &str, bytes: &[u8], limits: &crate::limits::Limits) -> Result<Detected, Error> {
    let Ok(text) = std::str::from_utf8(bytes) else { return Ok(Detected::Plain) };
    let text = text.trim_start_matches('\u{feff}');
    if !text.contains("sops") && !text.contains(CIPHERTEXT) {
        return Ok(Detected::Plain);
    }
    let broken = |at: &str| Error::Decrypt {
        file: path.to_string(),
        message: format!(
            "a value `ENC[…]` ({at}) without valid SOPS metadata (a top-level `sops` mapping with `mac` and a key group); plumb never applies ciphertext"
        ),
    };
    if let Some(meta) = dotenv_metadata(text) {
        return Ok(Detected::Encrypted(meta));
    }
    limits.check_yaml(path, text)?;
    // a dotenv or INI line `KEY=ENC[…]` (YAML reads such a file as one string)
    let assigned = text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        let k = k.trim();
        let key = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        (key && v.trim_start().starts_with(CIPHERTEXT)).then_some(k)
    });
    if let Some(k) = assigned {
        return Err(broken(&format!("key `{k}`")));
    }
    let docs: Vec<Value> = match serde_saphyr::from_multiple::<Value>(text) {
        Ok(d) => d,
        Err(_) => match serde_json::from_str::<Value>(text) {
            Ok(v) => vec![v],
            // neither YAML nor JSON: the render reports it if it reads it
            Err(_) => return Ok(Detected::Plain),
        },
    };
    let mut meta = None;
    for doc in &docs {
        if let Some(m) = doc.get("sops").and_then(|s| yaml_metadata(s, path, doc)) {
            meta = Some(m);
        }
    }
    if let Some(m) = meta {
        return Ok(Detected::Encrypted(m));
    }
    for (i, doc) in docs.iter().enumerate() {
        let mut at = Vec::new();
        ciphertext_leaves(doc, String::new(), &mut at);
        if let Some(p) = at.first() {
            return Err(broken(&format!("document {}, at `{}`", i + 1, dotted(p))));
        }
    }
    Ok(Detected::Plain)
}

/// The metadata of a `sops` mapping `s` of document `doc`, when valid (a `mac` string
/// and at least one key group).
fn yaml_metadata(s: &Value, path: &str, doc: &Value) -> Option<Metadata> {
    let s = s.as_object()?;
    s.get("mac").and_then(Value::as_str).filter(|m| !m.is_empty())?;
    let nonempty = |v: Option<&Value>| v.and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let groups: Vec<&serde_json::Map<String, Value>> = std::iter::once(s)
        .chain(s.get("key_groups").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object))
        .collect();
    let mut recipients = Vec::new();
    let mut services = Vec::new();
    let mut any = false;
    for g in &groups {
        if nonempty(g.get("age")) {
            any = true;
            for a in g.get("age").and_then(Value::as_array).into_iter().flatten() {
                recipients.extend(a.get("recipient").and_then(Value::as_str).map(str::to_string));
            }
        }
        for service in SERVICES {
            if nonempty(g.get(service)) {
                any = true;
                if !services.iter().any(|s| s == service) {
                    services.push(service.to_string());
                }
            }
        }
    }
    if !any {
        return None;
    }
    let ext = |e: &str| path.ends_with(e);
    let format = if ext(".json") {
        Format::Json
    } else if ext(".yaml") || ext(".yml") {
        Format::Yaml
    } else if doc.as_object().is_some_and(|o| o.len() == 2 && o.get("data").is_some_and(Value::is_string)) {
        Format::Binary
    } else {
        Format::Yaml
    };
    Some(Metadata { format, recipients, services })
}

/// The metadata of a dotenv file (its `sops_*` lines, when one is `sops_mac=`) or of
/// an INI file (its `[sops]` section, when it holds `mac`).
fn dotenv_metadata(text: &str) -> Option<Metadata> {
    let dotenv: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter_map(|(k, v)| Some((k.strip_prefix("sops_")?, v)))
        .collect();
    let mut section = "";
    let mut ini = Vec::new();
    for l in text.lines().map(str::trim) {
        if l.starts_with('[') && l.ends_with(']') {
            section = l;
        } else if section == "[sops]"
            && let Some((k, v)) = l.split_once('=')
        {
            ini.push((k.trim(), v.trim()));
        }
    }
    let mac = |pairs: &[(&str, &str)]| pairs.iter().any(|(k, v)| *k == "mac" && !v.is_empty());
    let (format, pairs) = if mac(&dotenv) {
        (Format::Dotenv, dotenv)
    } else if mac(&ini) {
        (Format::Ini, ini)
    } else {
        return None;
    };
    let mut recipients = Vec::new();
    let mut services = Vec::new();
    for (k, v) in &pairs {
        if k.contains("age__list_") && k.ends_with("__map_recipient") {
            recipients.push(v.to_string());
        }
        for service in SERVICES {
            let named = k.starts_with(&format!("{service}__list_")) || k.contains(&format!("__map_{service}__list_"));
            if named && !services.iter().any(|s| s == service) {
                services.push(service.to_string());
            }
        }
    }
    Some(Metadata { format, recipients, services })
}

/// The RFC 6901 pointers (under `at`) of the string leaves of `v` that are ciphertext.
fn ciphertext_leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.starts_with(CIPHERTEXT) => out.push(at),
        Value::Object(m) => {
            for (k, child) in m {
                if at.is_empty() && k == "sops" {
                    continue;
                }
                ciphertext_leaves(child, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                ciphertext_leaves(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// A pointer as the dotted key path users write (`/stringData/password` →
/// `stringData.password`).
fn dotted(pointer: &str) -> String {
    pointer
        .trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// The age public keys of a key file's text: its `# public key: age1…` lines (what
/// `age-keygen` writes above each identity).
///
/// # Errors
/// A message when the file holds no identity, or more identities than such lines.
pub fn public_keys(text: &str) -> Result<Vec<String>, String> {
    let keys: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("# public key:"))
        .map(|k| k.trim().to_string())
        .filter(|k| k.starts_with("age1"))
        .collect();
    let identities = text.lines().filter(|l| l.trim().starts_with("AGE-SECRET-KEY-")).count();
    if identities == 0 {
        return Err("holds no age identity (AGE-SECRET-KEY-1… line)".into());
    }
    if keys.len() < identities {
        return Err(format!(
            "holds {identities} identities but {} `# public key: age1…` lines; plumb checks a file's recipients against those lines (age-keygen writes one above each key; `age-keygen -y` prints it)",
            keys.len()
        ));
    }
    Ok(keys)
}

/// Whether the SOPS file `file` of metadata `meta` may be decrypted with the keys whose
/// public keys are `ours`: it names no key service, and one of its age recipients is
/// ours.
///
/// # Errors
/// [`Error::Decrypt`] naming the file and its recipients.
pub fn check_recipients(file: &str, meta: &Metadata, ours: &[String]) -> Result<(), Error> {
    let fail = |message: String| Err(Error::Decrypt { file: file.to_string(), message });
    if !meta.services.is_empty() {
        return fail(format!(
            "its metadata names key services ({}) that would need the network; plumb decrypts with age keys only (encrypt it for age recipients alone)",
            meta.services.join(", ")
        ));
    }
    if meta.recipients.iter().any(|r| ours.contains(r)) {
        return Ok(());
    }
    let theirs = if meta.recipients.is_empty() { "no age recipient".to_string() } else { meta.recipients.join(", ") };
    fail(format!(
        "encrypted for {theirs}, none of which is a key of this application ({}); a SOPS file decrypts only for the application it was written for",
        ours.join(", ")
    ))
}

/// Whether repository path `file` lies inside `app_path` or one of `shared` (repository
/// paths; an empty one is the whole repository).
pub fn inside(file: &str, app_path: &str, shared: &[String]) -> bool {
    std::iter::once(app_path)
        .chain(shared.iter().map(String::as_str))
        .map(|p| p.trim_matches('/'))
        .any(|p| p.is_empty() || file == p || file.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// The plaintext values that came out of `ENC[…]` leaves of the files decrypted for one
/// render; the rendered fields holding one are sensitive ([`mark_decrypted`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decrypted {
    /// The files decrypted (repository paths), in order.
    pub files: Vec<String>,
    /// The values (strings; numbers and booleans as their JSON text).
    values: Vec<String>,
}

impl Decrypted {
    /// Remembers the values of `plain`, the decryption of `encrypted` (both in `format`):
    /// those at the encrypted file's `ENC[…]` leaves.
    pub fn add(&mut self, file: &str, format: Format, encrypted: &[u8], plain: &[u8]) {
        self.files.push(file.to_string());
        let (enc, dec) = (String::from_utf8_lossy(encrypted), String::from_utf8_lossy(plain));
        match format {
            Format::Binary => self.values.push(dec.into_owned()),
            Format::Dotenv | Format::Ini => {
                let pairs = |t: &str| -> Vec<(String, String)> {
                    t.lines()
                        .filter_map(|l| l.trim().split_once('='))
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                        .collect()
                };
                let keys: Vec<String> = pairs(&enc)
                    .into_iter()
                    .filter(|(k, v)| !k.starts_with("sops_") && v.starts_with(CIPHERTEXT))
                    .map(|(k, _)| k)
                    .collect();
                self.values.extend(pairs(&dec).into_iter().filter(|(k, _)| keys.contains(k)).map(|(_, v)| v));
            }
            Format::Yaml | Format::Json => {
                let parse = |t: &str| {
                    serde_saphyr::from_multiple::<Value>(t)
                        .or_else(|_| serde_json::from_str::<Value>(t).map(|v| vec![v]))
                        .unwrap_or_default()
                };
                let (enc, dec) = (parse(&enc), parse(&dec));
                for (e, d) in enc.iter().zip(&dec) {
                    let mut at = Vec::new();
                    ciphertext_leaves(e, String::new(), &mut at);
                    for p in at {
                        match d.pointer(&p) {
                            Some(Value::String(s)) => self.values.push(s.clone()),
                            Some(v @ (Value::Number(_) | Value::Bool(_))) => self.values.push(v.to_string()),
                            _ => {}
                        }
                    }
                }
            }
        }
        self.values.retain(|v| !v.is_empty());
        self.values.sort();
        self.values.dedup();
    }

    /// Whether nothing was decrypted.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Whether the rendered leaf `leaf` holds a decrypted value: equal to one (a string,
    /// or the text of a number or boolean of at least 4 characters), containing one of
    /// at least 6 bytes (a template that embeds it), or its base64 (`binaryData`).
    fn holds(&self, leaf: &Value) -> bool {
        let b64 = base64::engine::general_purpose::STANDARD;
        let (text, string) = match leaf {
            Value::String(s) => (s.clone(), true),
            Value::Number(_) | Value::Bool(_) => (leaf.to_string(), false),
            _ => return false,
        };
        self.values.iter().any(|v| {
            (text == *v && (string || v.len() >= 4))
                || (string && v.len() >= 6 && text.contains(v.as_str()))
                || (string && text.len() >= 8 && text == b64.encode(v))
        })
    }
}

/// Marks, in each of `manifests`, the fields holding a value of `decrypted` as
/// sensitive ([`Manifest::decrypted`]).
pub fn mark_decrypted(manifests: &mut [Manifest], decrypted: &Decrypted) {
    if decrypted.values.is_empty() {
        return;
    }
    for m in manifests {
        let mut at = Vec::new();
        holding(&m.object(), String::new(), decrypted, &mut at);
        if !at.is_empty() {
            m.set_decrypted(at);
        }
    }
}

/// The pointers (under `at`) of the leaves of `v` that hold a decrypted value.
fn holding(v: &Value, at: String, decrypted: &Decrypted, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                holding(child, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), decrypted, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                holding(child, format!("{at}/{i}"), decrypted, out);
            }
        }
        leaf if decrypted.holds(leaf) => out.push(at),
        _ => {}
    }
}

/// Refuses rendered objects that still carry SOPS ciphertext: a top-level `sops` field,
/// a value `ENC[…]` (in a Secret's `data` after base64-decoding too) or a `sops_mac` key
/// (a generator over an encrypted dotenv that was not decrypted).
///
/// # Errors
/// [`Error::Decrypt`] naming the object's source and the field.
pub fn check_no_ciphertext(manifests: &[Manifest]) -> Result<(), Error> {
    let b64 = base64::engine::general_purpose::STANDARD;
    for m in manifests {
        // the text of most objects shows at once that none of this is there
        let t = &m.text;
        if !t.contains("sops") && !t.contains(CIPHERTEXT) && !t.contains("RU5DW0FFUzI1Nl9HQ00s") {
            continue;
        }
        let obj = m.object();
        let fail = |what: String| Error::Decrypt {
            file: m.source.clone(),
            message: format!("{what}: a SOPS-encrypted input was not decrypted; plumb never applies ciphertext"),
        };
        if obj.get("sops").is_some() {
            return Err(fail("the object carries SOPS metadata (a top-level `sops` field)".into()));
        }
        let mut at = Vec::new();
        ciphertext_leaves(&obj, String::new(), &mut at);
        if let Some(p) = at.first() {
            return Err(fail(format!("`{}` is `ENC[…]`", dotted(p))));
        }
        for field in ["data", "stringData", "binaryData"] {
            let Some(map) = obj.get(field).and_then(Value::as_object) else { continue };
            for (k, v) in map {
                let decoded = v.as_str().and_then(|s| b64.decode(s).ok()).unwrap_or_default();
                if k.starts_with("sops_") || decoded.starts_with(CIPHERTEXT.as_bytes()) {
                    return Err(fail(format!("`{field}.{k}` is SOPS ciphertext or metadata")));
                }
            }
        }
    }
    Ok(())
}

/// The repository paths of the files the kustomization at `app_path` of the working
/// copy `root` reads, following local bases and components: `resources`, `bases`,
/// `components`, `patchesStrategicMerge`, `patches[].path`, and the `envs`, `env` and
/// `files` of `secretGenerator` and `configMapGenerator`. Entries leaving `root` and
/// remote ones are skipped (the kustomize checks refuse those). Each kustomization is
/// scanned under the YAML budget of `limits` first.
///
/// # Errors
/// [`Error::Limit`]: a kustomization beyond the budget.
pub fn kustomize_inputs(root: &Path, app_path: &str, limits: &crate::limits::Limits) -> Result<Vec<String>, Error> {
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![PathBuf::from(app_path)];
    while let Some(dir) = todo.pop() {
        if !seen.insert(dir.clone()) || seen.len() > 10_000 {
            continue;
        }
        let Some((file, text)) = super::kustomize::KUSTOMIZATION_FILES.iter().find_map(|name| {
            let rel = dir.join(name);
            std::fs::read_to_string(root.join(&rel)).ok().map(|t| (rel.to_string_lossy().into_owned(), t))
        }) else {
            continue;
        };
        limits.check_yaml(&file, &text)?;
        let Ok(doc) = serde_saphyr::from_str::<Value>(&text) else { continue };
        let strings = |v: Option<&Value>| -> Vec<String> {
            match v {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
                _ => vec![],
            }
        };
        let mut entries: Vec<String> = Vec::new();
        for key in ["resources", "bases", "components", "patchesStrategicMerge"] {
            entries.extend(strings(doc.get(key)));
        }
        for p in doc.get("patches").and_then(Value::as_array).into_iter().flatten() {
            entries.extend(strings(p.get("path")));
        }
        for key in ["secretGenerator", "configMapGenerator"] {
            for g in doc.get(key).and_then(Value::as_array).into_iter().flatten() {
                entries.extend(strings(g.get("envs")));
                entries.extend(strings(g.get("env")));
                // `files`: `path` or `key=path`
                entries.extend(
                    strings(g.get("files")).into_iter().map(|f| f.split_once('=').map_or(f.clone(), |(_, p)| p.into())),
                );
            }
        }
        for entry in entries {
            if entry.contains("://") {
                continue;
            }
            let Some(local) = super::kustomize::normalize(&dir.join(&entry)) else { continue };
            let full = root.join(&local);
            if full.is_dir() {
                todo.push(local);
            } else if full.is_file() {
                found.push(local.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// A located sops binary and the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sops {
    /// The binary (absolute path).
    pub path: PathBuf,
    /// What `sops --version` prints first (e.g. `sops 3.13.3`).
    pub version: String,
}

impl Sops {
    /// Finds the binary (`configured`, else `$PLUMB_SOPS`, else `sops` on `PATH`) and
    /// asks its version (one child process).
    ///
    /// # Errors
    /// [`Error::Tool`] when it cannot be found or run.
    pub async fn locate(configured: Option<&Path>, limits: Limits) -> Result<Self, Error> {
        let args = ["--version", "--disable-version-check"];
        let (path, out) = sandbox::locate("sops", configured, &args, limits).await?;
        Ok(Self { path, version: out.lines().next().unwrap_or_default().trim().to_string() })
    }

    /// Decrypts the file `path` (repository path, for messages) of content `bytes`,
    /// stored as `format`, with the age keys in `age_key_file` (an absolute path), with
    /// no network.
    ///
    /// # Errors
    /// [`Error::Decrypt`] naming the file and a reason of plumb's words: sops's
    /// standard error is not copied (it can quote a plaintext value).
    pub async fn decrypt(
        &self,
        path: &str,
        bytes: &[u8],
        format: Format,
        age_key_file: &Path,
        limits: Limits,
    ) -> Result<Vec<u8>, Error> {
        let fail = |message: String| Error::Decrypt { file: path.to_string(), message };
        let dir = tempfile::tempdir().map_err(|e| fail(format!("temp dir: {e}")))?;
        std::fs::write(dir.path().join("input"), bytes).map_err(|e| fail(e.to_string()))?;
        let key = age_key_file.to_string_lossy();
        let env = [("SOPS_AGE_KEY_FILE", key.as_ref())];
        let f = format.as_str();
        let args = ["--decrypt", "--disable-version-check", "--input-type", f, "--output-type", f, "--", "input"];
        let limits = Limits { network: false, ..limits };
        sandbox::run_with_env(&self.path, &args, dir.path(), &env, limits).await.map_err(|e| match e {
            RunError::Failed { status, stderr, .. } => fail(reason(&stderr, &status, bytes, format)),
            other => fail(other.to_string()),
        })
    }
}

/// plumb's words for why sops failed (`stderr`, exit `status`) on `bytes`: never the
/// standard error itself, which can quote a value.
fn reason(stderr: &str, status: &str, bytes: &[u8], format: Format) -> String {
    if let Some(rest) = stderr.split("Input string ").nth(1)
        && let Some((value, _)) = rest.split_once(" does not match sops' data format")
    {
        let at = key_of(value, bytes, format).map(|k| format!(" at `{k}`")).unwrap_or_default();
        return format!(
            "a value{at} is not SOPS-encrypted (edited in clear?); sops refuses the file: encrypt it again"
        );
    }
    if stderr.contains("MAC mismatch") {
        return "its MAC does not match its content (changed after encryption); sops refuses the file".into();
    }
    if stderr.contains("Failed to get the data key") || stderr.contains("failed to decrypt sops data key") {
        return "none of this application's age keys decrypts it (source.sops.ageKeyFile)".into();
    }
    format!("sops --decrypt failed ({status}); its message is not shown, as it may quote a value")
}

/// The key path of the leaf holding `value` in the file `bytes`.
fn key_of(value: &str, bytes: &[u8], format: Format) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    if matches!(format, Format::Dotenv | Format::Ini) {
        return text
            .lines()
            .filter_map(|l| l.split_once('='))
            .find(|(_, v)| v.trim() == value)
            .map(|(k, _)| k.trim().to_string());
    }
    let docs = serde_saphyr::from_multiple::<Value>(&text).ok()?;
    fn find(v: &Value, value: &str, at: String) -> Option<String> {
        match v {
            Value::String(s) if s == value => Some(at),
            Value::Object(m) => {
                m.iter().find_map(|(k, c)| find(c, value, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"))))
            }
            Value::Array(a) => a.iter().enumerate().find_map(|(i, c)| find(c, value, format!("{at}/{i}"))),
            _ => None,
        }
    }
    docs.iter().find_map(|d| find(d, value, String::new())).map(|p| dotted(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> crate::limits::Limits {
        crate::limits::Limits::default()
    }

    fn detected(path: &str, text: &str) -> Result<Detected, Error> {
        detect(path, text.as_bytes(), &limits())
    }

    const RECIPIENT: &str = "age1lv28tvfnm2nxkgkm6pceuync2h24mzxhwd2glxyaae6ypmmluvcqn2n6am";

    /// The shared case sops-01's encrypted Secret, re-indented and in flow style: the
    /// same metadata, read whatever the layout.
    #[test]
    fn detection_reads_the_parsed_metadata_whatever_the_layout() {
        let enc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/cases/sops-01/repo/apps/web/db-secret.sops.yaml"
        ))
        .expect("case file");
        let expect = Detected::Encrypted(Metadata {
            format: Format::Yaml,
            recipients: vec![RECIPIENT.into()],
            services: vec![],
        });
        assert_eq!(detected("apps/web/db.yaml", &enc).expect("detects"), expect);
        // two-space indentation
        let two: String = enc
            .lines()
            .map(|l| {
                let n = l.len() - l.trim_start().len();
                format!("{}{}\n", " ".repeat(n / 2 + n % 4 / 2), l.trim_start())
            })
            .collect();
        assert!(!two.contains("    mac: "));
        assert_eq!(detected("apps/web/db.yaml", &two).expect("detects"), expect);
        // flow style / JSON
        let v: Value = serde_saphyr::from_str(&enc).expect("yaml");
        let json = serde_json::to_string(&v).expect("json");
        assert_eq!(
            detected("apps/web/db.json", &json).expect("detects"),
            Detected::Encrypted(Metadata {
                format: Format::Json,
                ..match expect.clone() {
                    Detected::Encrypted(m) => m,
                    Detected::Plain => unreachable!(),
                }
            })
        );
        assert_eq!(detected("apps/web/db.yaml", &json).expect("detects"), expect, "flow style YAML");
        // the dotenv of the case
        let env = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/cases/sops-01/repo/apps/web/web.env"
        ))
        .expect("case file");
        assert_eq!(
            detected("apps/web/web.env", &env).expect("detects"),
            Detected::Encrypted(Metadata {
                format: Format::Dotenv,
                recipients: vec![RECIPIENT.into()],
                services: vec![]
            })
        );
    }

    #[test]
    fn plain_files_and_ciphertext_without_metadata() {
        for plain in [
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  sops: \"no\"\n",
            "sops:\n  note: a key of that name without a mac\n",
            "A=1\nB=sops\n",
        ] {
            assert_eq!(detected("app/cm.yaml", plain).expect("plain"), Detected::Plain, "{plain}");
        }
        // a file named *.sops.yaml is read by its content
        assert_eq!(detected("app/db.sops.yaml", "a: 1\n").expect("plain"), Detected::Plain);
        let stripped = "kind: Secret\nstringData:\n  password: ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]\n";
        let e = detected("app/db.yaml", stripped).expect_err("ciphertext").to_string();
        assert!(
            e.starts_with("app/db.yaml: SOPS-encrypted; a value `ENC[…]` (document 1, at `stringData.password`)"),
            "{e}"
        );
        let no_mac = format!("{stripped}sops:\n  age: [{{recipient: {RECIPIENT}}}]\n");
        assert!(detected("app/db.yaml", &no_mac).is_err(), "metadata without a mac");
        let env = "DB_PASSWORD=ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]\n";
        let e = detected("app/web.env", env).expect_err("dotenv ciphertext").to_string();
        assert!(e.contains("key `DB_PASSWORD`"), "{e}");
    }

    #[test]
    fn key_services_and_foreign_recipients_are_refused() {
        let meta = |recipients: &[&str], services: &[&str]| Metadata {
            format: Format::Yaml,
            recipients: recipients.iter().map(|s| s.to_string()).collect(),
            services: services.iter().map(|s| s.to_string()).collect(),
        };
        let ours = vec!["age1ours".to_string()];
        assert!(check_recipients("a/s.yaml", &meta(&["age1theirs", "age1ours"], &[]), &ours).is_ok());
        let e = check_recipients("a/s.yaml", &meta(&["age1theirs"], &[]), &ours).expect_err("theirs").to_string();
        assert_eq!(
            e,
            "a/s.yaml: SOPS-encrypted; encrypted for age1theirs, none of which is a key of this application (age1ours); a SOPS file decrypts only for the application it was written for"
        );
        let e =
            check_recipients("a/s.yaml", &meta(&["age1ours"], &["hc_vault"]), &ours).expect_err("vault").to_string();
        assert!(e.contains("key services (hc_vault)"), "{e}");
        let vault = format!(
            "a: ENC[AES256_GCM,data:x,type:str]\nsops:\n  mac: ENC[x]\n  key_groups:\n  - age: [{{recipient: {RECIPIENT}}}]\n    hc_vault: [{{vault_address: 'http://10.0.0.1:8200'}}]\n"
        );
        match detected("a/v.yaml", &vault).expect("detects") {
            Detected::Encrypted(m) => {
                assert_eq!((m.recipients, m.services), (vec![RECIPIENT.to_string()], vec!["hc_vault".to_string()]))
            }
            Detected::Plain => panic!("not detected"),
        }
        let ini = format!(
            "[db]\npassword = ENC[AES256_GCM,data:x,type:str]\n[sops]\nage__list_0__map_recipient = {RECIPIENT}\nmac = ENC[x]\n"
        );
        assert_eq!(
            detected("a/db.ini", &ini).expect("detects"),
            Detected::Encrypted(Metadata { format: Format::Ini, recipients: vec![RECIPIENT.into()], services: vec![] })
        );
        let kms_env = "A=ENC[AES256_GCM,data:x,type:str]\nsops_kms__list_0__map_arn=arn:aws:kms:x\nsops_mac=ENC[x]\n";
        match detected("a/v.env", kms_env).expect("detects") {
            Detected::Encrypted(m) => assert_eq!(m.services, ["kms"]),
            Detected::Plain => panic!("not detected"),
        }
    }

    #[test]
    fn public_keys_of_a_key_file() {
        let case = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/cases/sops-01/age.key"))
            .expect("key");
        assert_eq!(public_keys(&case), Ok(vec![RECIPIENT.to_string()]));
        assert!(public_keys("AGE-SECRET-KEY-1XYZ\n").expect_err("no line").contains("`# public key: age1…` lines"));
        assert!(public_keys("# nothing\n").is_err());
    }

    #[test]
    fn paths_inside_the_application_or_shared() {
        let shared = vec!["shared/".to_string()];
        assert!(inside("apps/web/s.yaml", "apps/web", &shared));
        assert!(inside("shared/x.env", "apps/web", &shared));
        assert!(!inside("apps/web2/s.yaml", "apps/web", &shared));
        assert!(!inside("apps/api/s.yaml", "apps/web", &shared));
        assert!(inside("anything", "", &[]));
    }

    /// The reason of a failed decryption never quotes the value sops quoted.
    #[test]
    fn sops_messages_are_not_copied() {
        let file = b"stringData:\n  password: hunter2-plain-7Qx\nsops: {mac: x}\n";
        let stderr = "Error decrypting tree: Error walking tree: Could not decrypt value: Input string hunter2-plain-7Qx does not match sops' data format";
        let r = reason(stderr, "exit status: 1", file, Format::Yaml);
        assert_eq!(
            r,
            "a value at `stringData.password` is not SOPS-encrypted (edited in clear?); sops refuses the file: encrypt it again"
        );
        let r = reason("something else: hunter2-plain-7Qx", "exit status: 128", file, Format::Yaml);
        assert!(!r.contains("hunter2") && r.contains("exit status: 128"), "{r}");
    }

    #[test]
    fn decrypted_values_mark_the_fields_holding_them() {
        let enc = b"a: ENC[AES256_GCM,data:x,type:str]\nb: plain\nn: ENC[AES256_GCM,data:y,type:int]\nsops: {mac: z}\n";
        let dec = b"a: s3cret-value\nb: plain\nn: 5432\n";
        let mut d = Decrypted::default();
        d.add("app/x.yaml", Format::Yaml, enc, dec);
        d.add(
            "app/w.env",
            Format::Dotenv,
            b"TOKEN=ENC[AES256_GCM,data:x,type:str]\nsops_mac=x\n",
            b"TOKEN=tok-9f3b2c\n",
        );
        let b64 = base64::engine::general_purpose::STANDARD.encode("tok-9f3b2c");
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "s3cret-value", "b": "plain", "url": "postgres://u:s3cret-value@db", "port": "5432", "replicas": 1},
            "binaryData": {"t": b64}});
        let mut ms = vec![Manifest::new("app/x.yaml#1".into(), &cm)];
        mark_decrypted(&mut ms, &d);
        assert_eq!(ms[0].decrypted(), ["/binaryData/t", "/data/a", "/data/port", "/data/url"]);
    }

    #[test]
    fn ciphertext_in_rendered_objects_is_refused() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("ENC[AES256_GCM,data:x,type:str]");
        for (obj, part) in [
            (
                serde_json::json!({"kind": "Secret", "stringData": {"a": "ENC[AES256_GCM,data:x]"}}),
                "`stringData.a` is `ENC[…]`",
            ),
            (serde_json::json!({"kind": "Secret", "data": {"DB": b64}}), "`data.DB` is SOPS ciphertext"),
            (serde_json::json!({"kind": "Secret", "sops": {"mac": "x"}}), "top-level `sops` field"),
            (serde_json::json!({"kind": "Secret", "data": {"sops_version": "My4x"}}), "`data.sops_version`"),
        ] {
            let e = check_no_ciphertext(&[Manifest::new("k (kustomize build)#1".into(), &obj)]).expect_err("refused");
            assert!(e.to_string().contains(part), "{e}");
        }
        assert!(
            check_no_ciphertext(&[Manifest::new(
                "x#1".into(),
                &serde_json::json!({"kind": "ConfigMap", "data": {"a": "b"}})
            )])
            .is_ok()
        );
    }

    #[test]
    fn kustomize_inputs_follow_bases_and_generators() {
        let tmp = tempfile::tempdir().expect("tmp");
        let w = |p: &str, t: &str| {
            let f = tmp.path().join(p);
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            std::fs::write(f, t).expect("write");
        };
        w(
            "apps/web/kustomization.yaml",
            "resources: [d.yaml, ../../base, https://example.test/x.yaml]\nsecretGenerator:\n- {name: e, envs: [web.env], files: [key=cert.pem]}\npatches:\n- {path: p.yaml}\n",
        );
        for f in ["apps/web/d.yaml", "apps/web/web.env", "apps/web/cert.pem", "apps/web/p.yaml", "apps/web/unused.yaml"]
        {
            w(f, "a: 1\n");
        }
        w("base/kustomization.yaml", "resources: [s.yaml]\nconfigMapGenerator:\n- {name: c, env: c.env}\n");
        w("base/s.yaml", "a: 1\n");
        w("base/c.env", "A=1\n");
        assert_eq!(
            kustomize_inputs(tmp.path(), "apps/web", &limits()).expect("reads"),
            [
                "apps/web/cert.pem",
                "apps/web/d.yaml",
                "apps/web/p.yaml",
                "apps/web/web.env",
                "base/c.env",
                "base/s.yaml"
            ]
        );
    }
}
