//! kustomize: `kustomize build` of the application path, run in a working copy that
//! holds only what the build may read — the application's path, the directories of the
//! kustomizations it names, transitively ([`inputs`]), and its environment's
//! `sharedPaths` — sandboxed ([`super::sandbox`]): the load restrictor on
//! (`LoadRestrictionsRootOnly`: a kustomization reads files only under its own
//! directory; bases are other kustomizations), and every entry kustomize would fetch
//! (a URL in any loader field: resources, bases, components, patches, generators'
//! files and env files, openapi, crds, configurations, transformers, generators,
//! validators, replacements, helmCharts) refused unless the application opts in
//! (`source.allowRemoteBases`) — checked before the run, naming the file and the entry;
//! loopback and link-local hosts are refused always, and a local entry that leaves the
//! repository (an absolute path, `..` beyond the root) too. The tool's own network
//! namespace is the backstop for a field missed here.
//! Its output is read like a plain YAML file ([`super::render_output`]): lists
//! expanded, server-set fields removed with a warning, duplicates refused.

use std::{
    collections::HashSet,
    net::IpAddr,
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::{
    Error,
    sandbox::{self, Limits},
};

/// The kustomization file names kustomize reads, in its order of preference.
pub const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// A located kustomize binary and the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kustomize {
    /// The binary (absolute path).
    pub path: PathBuf,
    /// What `kustomize version` prints (e.g. `v5.8.1`).
    pub version: String,
}

impl Kustomize {
    /// Finds the binary (`configured`, else `$PLUMB_KUSTOMIZE`, else `kustomize` on
    /// `PATH`) and asks its version (one child process).
    ///
    /// # Errors
    /// [`Error::Tool`] when it cannot be found or run.
    pub async fn locate(configured: Option<&Path>, limits: Limits) -> Result<Self, Error> {
        let (path, out) = sandbox::locate("kustomize", configured, &["version"], limits).await?;
        Ok(Self { path, version: out.trim().to_string() })
    }

    /// `tool version`, as reported with a render.
    pub fn describe(&self) -> String {
        format!("kustomize {}", self.version)
    }

    /// Builds `app_path` of the working copy `root` (through a kustomization of
    /// `overrides` when it has any); returns the output (a YAML stream, read with
    /// [`super::render_output`]).
    ///
    /// # Errors
    /// As [`inputs`] (checked again on the working copy), [`Error::Tool`] (the run
    /// failed).
    pub async fn build(
        &self,
        root: &Path,
        app_path: &str,
        overrides: &Overrides<'_>,
        limits: Limits,
    ) -> Result<Vec<u8>, Error> {
        let read = |p: &str| -> Result<Option<Vec<u8>>, Error> { Ok(std::fs::read(root.join(p)).ok()) };
        inputs(app_path, limits.network, &crate::limits::Limits::default(), &|p| fs_node(&root.join(p)), &read)?;
        let target = if app_path.is_empty() { "." } else { app_path };
        let built = match overrides.kustomization(target) {
            Some(text) => {
                let dir = root.join(OVERRIDES_DIR);
                std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(dir.join("kustomization.yaml"), text))
                    .map_err(|e| Error::Tool { message: format!("kustomize: overrides: {e}") })?;
                OVERRIDES_DIR
            }
            None => target,
        };
        Ok(sandbox::run(&self.path, &["build", built, "--load-restrictor", "LoadRestrictionsRootOnly"], root, limits)
            .await?)
    }
}

/// The directory of the working copy holding the overrides' kustomization.
const OVERRIDES_DIR: &str = ".plumb-overrides";

/// Per-application overrides (`source.images`, `namePrefix`, `nameSuffix`), applied
/// by a kustomization of their own whose only resource is the application's path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides<'a> {
    /// `images:` entries.
    pub images: &'a [crate::config::ImageOverride],
    /// `namePrefix:`.
    pub name_prefix: Option<&'a str>,
    /// `nameSuffix:`.
    pub name_suffix: Option<&'a str>,
}

impl Overrides<'_> {
    /// The overriding kustomization (JSON, which kustomize reads as YAML) for the
    /// application path `target`, or `None` when there is nothing to override.
    pub fn kustomization(&self, target: &str) -> Option<String> {
        if self.images.is_empty() && self.name_prefix.is_none() && self.name_suffix.is_none() {
            return None;
        }
        let mut k = serde_json::json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [format!("../{target}")],
        });
        if !self.images.is_empty() {
            k["images"] = serde_json::to_value(self.images).unwrap_or_default();
        }
        if let Some(p) = self.name_prefix {
            k["namePrefix"] = p.into();
        }
        if let Some(s) = self.name_suffix {
            k["nameSuffix"] = s.into();
        }
        Some(k.to_string())
    }
}

/// What a repository path is, as [`inputs`] asks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Dir,
    /// A file (or a symlink).
    File,
    /// Nothing.
    Missing,
}

/// `path` on the local file system as a [`Node`] (symlinks not followed).
fn fs_node(path: &Path) -> Node {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Node::Dir,
        Ok(_) => Node::File,
        Err(_) => Node::Missing,
    }
}

/// Whether a kustomization entry names a remote base or resource. kustomize reads an
/// entry as a local path first and as a URL when no such path exists (go-getter and
/// `host/org/repo//dir?ref=` forms); `exists` says whether the local path exists.
pub fn is_remote(reference: &str, exists: bool) -> bool {
    if is_url(reference) {
        return true;
    }
    let first = reference.split('/').next().unwrap_or("");
    !exists && reference.contains('/') && first.contains('.') && !first.starts_with('.')
}

/// Whether `entry` is a URL whatever exists locally: `scheme://…`, scp-style
/// `git@host:…`, go-getter's `git::…`.
fn is_url(entry: &str) -> bool {
    entry.contains("://") || entry.starts_with("git@") || entry.starts_with("git::")
}

/// The host a remote entry names (`https://h:1/x`, `git::https://h/x`, `git@h:o/r`,
/// `h/org/repo`), lower-case, IPv6 without brackets; `None` when none can be told.
fn remote_host(entry: &str) -> Option<String> {
    let entry = entry.strip_prefix("git::").unwrap_or(entry);
    if entry.contains("://") {
        let url = url::Url::parse(entry).ok()?;
        return url.host().map(|h| match h {
            url::Host::Domain(d) => d.to_ascii_lowercase(),
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => ip.to_string(),
        });
    }
    let rest = entry.split_once('@').map_or(entry, |(_, r)| r);
    let host = rest.split(['/', ':']).next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Whether `host` is a loopback, link-local, unspecified or `localhost` name: never
/// fetched, whatever `allowRemoteBases` says (a render tool must not read plumb's own
/// machine, its sidecars or a cloud metadata service).
pub fn is_local_host(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    let ip = match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        Ok(ip) => ip,
        Err(_) => return false,
    };
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// Fields whose entries are kustomizations (directories) or files: a directory is
/// followed as a kustomization of its own.
const KUSTOMIZATION_FIELDS: [&str; 6] =
    ["resources", "bases", "components", "transformers", "generators", "validators"];

/// The loader entries of kustomization `doc`: (field as written, entry), for every
/// field whose entries kustomize reads through its loader (which fetches URLs).
fn loader_entries(doc: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    let text = |v: &Value| v.as_str().map(str::to_string);
    let list = |key: &str| doc.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    // (field, entry, followed as a kustomization when a directory)
    for key in KUSTOMIZATION_FIELDS {
        out.extend(list(key).iter().filter_map(text).map(|e| (key.to_string(), e, true)));
    }
    for key in ["patchesStrategicMerge", "crds", "configurations"] {
        out.extend(list(key).iter().filter_map(text).map(|e| (key.to_string(), e, false)));
    }
    for key in ["patches", "patchesJson6902", "replacements"] {
        for item in list(key) {
            out.extend(item.get("path").and_then(text).map(|e| (format!("{key}[].path"), e, false)));
            // `patches: [file.yaml]` (a string) is read as a path too
            out.extend(text(&item).map(|e| (key.to_string(), e, false)));
        }
    }
    out.extend(doc.pointer("/openapi/path").and_then(text).map(|e| ("openapi.path".to_string(), e, false)));
    for key in ["configMapGenerator", "secretGenerator"] {
        for item in list(key) {
            for sub in ["files", "envs"] {
                for e in item.get(sub).and_then(Value::as_array).into_iter().flatten().filter_map(text) {
                    // `key=path` names the file after the `=` (a key has no `/` or `:`)
                    let path = match e.split_once('=') {
                        Some((k, p)) if !k.contains(['/', ':']) => p.to_string(),
                        _ => e.clone(),
                    };
                    out.push((format!("{key}[].{sub}"), path, false));
                }
            }
            out.extend(item.get("env").and_then(text).map(|e| (format!("{key}[].env"), e, false)));
        }
    }
    for item in list("helmCharts") {
        for sub in ["repo", "valuesFile"] {
            out.extend(item.get(sub).and_then(text).map(|e| (format!("helmCharts[].{sub}"), e, false)));
        }
        for e in item.get("additionalValuesFiles").and_then(Value::as_array).into_iter().flatten().filter_map(text) {
            out.push(("helmCharts[].additionalValuesFiles".to_string(), e, false));
        }
    }
    for sub in ["chartHome", "configHome"] {
        out.extend(
            doc.pointer(&format!("/helmGlobals/{sub}"))
                .and_then(text)
                .map(|e| (format!("helmGlobals.{sub}"), e, false)),
        );
    }
    out
}

/// Reads the file at a repository path: its content, `None` when there is no file.
pub type ReadFile<'a> = dyn Fn(&str) -> Result<Option<Vec<u8>>, Error> + 'a;

/// Checks the kustomization at `app_path` and every local kustomization it names,
/// transitively, before kustomize runs; returns the directories of those
/// kustomizations (`app_path` first), then the resource files they name outside their
/// own directory (which kustomize's load restrictor refuses, naming them): what a
/// working copy must hold.
///
/// `node` tells what a repository path is and `read` reads a file (within
/// `settings.limits.maxFileBytes`); kustomization files are read within `limits`' YAML
/// budgets. Refused, naming the kustomization file and the entry:
/// - a URL in any loader field ([`loader_entries`]) when `allow_remote` is off
///   ([`Error::RemoteBase`]), and a URL naming a loopback or link-local host always
///   ([`Error::Entry`]);
/// - a local entry that leaves the repository: an absolute path, or `..` beyond its
///   root ([`Error::Entry`]);
/// - a kustomization that does not parse ([`Error::Entry`]: its checks could not be
///   made).
///
/// Inline entries (a patch written in the kustomization) are not paths and are skipped.
///
/// # Errors
/// As above; [`Error::Limit`] (a kustomization over its YAML budget), and what `read`
/// returns.
pub fn inputs(
    app_path: &str,
    allow_remote: bool,
    limits: &crate::limits::Limits,
    node: &dyn Fn(&str) -> Node,
    read: &ReadFile<'_>,
) -> Result<Vec<String>, Error> {
    let show = |p: &Path| p.to_string_lossy().to_string();
    let (mut dirs, mut files): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let mut seen = HashSet::new();
    let mut todo = vec![PathBuf::from(app_path)];
    while let Some(dir) = todo.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        dirs.push(show(&dir));
        let Some(file) = KUSTOMIZATION_FILES.iter().map(|n| dir.join(n)).find(|f| node(&show(f)) == Node::File) else {
            continue;
        };
        let file = show(&file);
        let Some(bytes) = read(&file)? else { continue };
        let text = String::from_utf8_lossy(&bytes);
        limits.check_yaml(&file, &text)?;
        let doc = serde_saphyr::from_str::<Value>(&text).map_err(|e| Error::Entry {
            file: file.clone(),
            reference: "(the file)".into(),
            why: format!(
                "does not parse, so its entries cannot be checked: {}",
                e.to_string().lines().next().unwrap_or_default()
            ),
        })?;
        let refuse = |reference: &str, why: &str| Error::Entry {
            file: file.clone(),
            reference: reference.into(),
            why: why.into(),
        };
        for (field, entry, kustomization) in loader_entries(&doc) {
            let entry = entry.trim();
            if entry.is_empty() || entry.contains(char::is_whitespace) {
                continue; // inline content, not a path
            }
            let local = normalize(&dir.join(entry)).filter(|_| !entry.starts_with('/'));
            let exists = local.as_ref().is_some_and(|l| node(&show(l)) != Node::Missing);
            let remote = if kustomization { is_remote(entry, exists) } else { is_url(entry) };
            if remote {
                if !allow_remote {
                    return Err(Error::RemoteBase { file: file.clone(), reference: entry.to_string() });
                }
                if remote_host(entry).is_some_and(|h| is_local_host(&h)) {
                    return Err(refuse(
                        entry,
                        &format!(
                            "({field}) names a loopback or link-local host; plumb never lets a render fetch from plumb's own machine"
                        ),
                    ));
                }
                continue;
            }
            let Some(local) = local else {
                return Err(refuse(
                    entry,
                    &format!(
                        "({field}) leaves the repository (an absolute path, or `..` beyond its root); a render reads only the commit"
                    ),
                ));
            };
            match node(&show(&local)) {
                Node::Dir if kustomization => todo.push(local),
                // a file outside the kustomization's directory: in the copy, so that
                // kustomize's load restrictor refuses it with its own words
                Node::File if kustomization && !local.starts_with(&dir) => files.push(show(&local)),
                _ => {}
            }
        }
    }
    dirs.extend(files);
    Ok(dirs)
}

/// `p` with `.` and `..` resolved lexically; `None` when it leaves the root.
pub(crate) fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::Normal(s) => out.push(s),
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_kustomization() {
        assert_eq!(Overrides::default().kustomization("apps/web"), None);
        let images = [crate::config::ImageOverride {
            name: "registry.example.test/web".into(),
            new_name: None,
            new_tag: Some("2.0.0".into()),
            digest: None,
        }];
        let o = Overrides { images: &images, name_prefix: Some("prod-"), name_suffix: None };
        let k: Value = serde_json::from_str(&o.kustomization("apps/web").expect("some")).expect("json");
        assert_eq!(
            k,
            serde_json::json!({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                "resources": ["../apps/web"], "images": [{"name": "registry.example.test/web", "newTag": "2.0.0"}],
                "namePrefix": "prod-"})
        );
    }

    #[test]
    fn remote_entries() {
        let rows = [
            ("https://github.com/acme/base//deploy?ref=v1", false, true),
            ("git@github.com:acme/base.git", false, true),
            ("git::https://example.test/x", false, true),
            ("github.com/acme/base/deploy?ref=v1", false, true),
            ("github.com/acme/base/deploy", true, false), // a local directory of that name
            ("../base", false, false),
            ("deployment.yaml", false, false),
            ("./v1.2/app", false, false),
        ];
        for (entry, exists, remote) in rows {
            assert_eq!(is_remote(entry, exists), remote, "{entry}");
        }
    }

    #[test]
    fn remote_entries_are_found_through_local_bases() {
        let tmp = tempfile::tempdir().expect("tmp");
        let w = |p: &str, t: &str| {
            let f = tmp.path().join(p);
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            std::fs::write(f, t).expect("write");
        };
        w("apps/web/prod/kustomization.yaml", "resources: [../base, extra.yaml]\n");
        w("apps/web/base/kustomization.yml", "resources:\n- cm.yaml\n- https://example.test/acme/x.yaml\n");
        w("apps/web/base/cm.yaml", "a: 1\n");
        let read = |p: &str| -> Result<Option<Vec<u8>>, Error> { Ok(std::fs::read(tmp.path().join(p)).ok()) };
        let limits = crate::limits::Limits::default();
        let walk = |path: &str| inputs(path, false, &limits, &|p| fs_node(&tmp.path().join(p)), &read);
        match walk("apps/web/prod") {
            Err(Error::RemoteBase { file, reference }) => assert_eq!(
                (file.as_str(), reference.as_str()),
                ("apps/web/base/kustomization.yml", "https://example.test/acme/x.yaml")
            ),
            other => panic!("{other:?}"),
        }
        assert!(walk("apps/web/base/..").is_ok(), "no kustomization there");
    }

    /// A kustomization tree written under a new temporary directory.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().expect("tmp");
        for (p, t) in files {
            let f = tmp.path().join(p);
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            std::fs::write(f, t).expect("write");
        }
        tmp
    }

    fn check(root: &Path, app: &str, allow_remote: bool) -> Result<Vec<String>, Error> {
        let read = |p: &str| -> Result<Option<Vec<u8>>, Error> { Ok(std::fs::read(root.join(p)).ok()) };
        inputs(app, allow_remote, &crate::limits::Limits::default(), &|p| fs_node(&root.join(p)), &read)
    }

    /// A URL in any loader field is refused before the run, naming the file and the
    /// entry; the same with remote bases on passes, except a loopback or link-local host.
    #[test]
    fn every_loader_field_with_a_url_is_refused() {
        let url = "https://example.test/x.yaml";
        let fields = [
            format!("resources: [{url}]"),
            format!("bases: [{url}]"),
            format!("components: [{url}]"),
            format!("patches: [{{path: {url}}}]"),
            format!("patchesStrategicMerge: [{url}]"),
            format!("patchesJson6902: [{{path: {url}, target: {{kind: Deployment, name: web}}}}]"),
            format!("configMapGenerator: [{{name: c, files: [k={url}]}}]"),
            format!("configMapGenerator: [{{name: c, files: [{url}]}}]"),
            format!("secretGenerator: [{{name: s, envs: [{url}]}}]"),
            format!("secretGenerator: [{{name: s, env: {url}}}]"),
            format!("openapi: {{path: {url}}}"),
            format!("crds: [{url}]"),
            format!("configurations: [{url}]"),
            format!("transformers: [{url}]"),
            format!("generators: [{url}]"),
            format!("validators: [{url}]"),
            format!("replacements: [{{path: {url}}}]"),
            format!("helmCharts: [{{name: c, repo: {url}}}]"),
            format!("helmCharts: [{{name: c, valuesFile: {url}}}]"),
            format!("helmGlobals: {{chartHome: {url}}}"),
        ];
        for field in &fields {
            let t = tree(&[("apps/web/kustomization.yaml", &format!("{field}\n"))]);
            let err = check(t.path(), "apps/web", false).expect_err(field).to_string();
            assert_eq!(
                err,
                format!(
                    "apps/web/kustomization.yaml: `{url}` is remote; remote bases are off for this application (source.allowRemoteBases: true to allow)"
                ),
                "{field}"
            );
            assert!(check(t.path(), "apps/web", true).is_ok(), "{field}: allowed when remote bases are on");
            let local = field.replace("https://example.test", "http://127.0.0.1:18080");
            let t = tree(&[("apps/web/kustomization.yaml", &format!("{local}\n"))]);
            let err = check(t.path(), "apps/web", true).expect_err(&local).to_string();
            assert!(
                err.starts_with("apps/web/kustomization.yaml: `http://127.0.0.1:18080/x.yaml` (")
                    && err.ends_with(
                        "names a loopback or link-local host; plumb never lets a render fetch from plumb's own machine"
                    ),
                "{err}"
            );
        }
        // an inline patch mentioning a URL is not an entry
        let inline = "patches:\n- patch: |-\n    - op: add\n      path: /metadata/annotations/docs\n      value: https://example.test/docs\n";
        let t = tree(&[("apps/web/kustomization.yaml", inline)]);
        assert_eq!(check(t.path(), "apps/web", false).expect("inline"), ["apps/web"]);
    }

    #[test]
    fn loopback_and_link_local_hosts() {
        for (host, local) in [
            ("127.0.0.1", true),
            ("127.9.9.9", true),
            ("localhost", true),
            ("api.localhost", true),
            ("169.254.169.254", true),
            ("::1", true),
            ("fe80::1", true),
            ("::ffff:127.0.0.1", true),
            ("0.0.0.0", true),
            ("example.test", false),
            ("10.0.0.1", false),
        ] {
            assert_eq!(is_local_host(host), local, "{host}");
        }
        for (entry, host) in [
            ("http://2130706433/x", "127.0.0.1"),
            ("git::http://LOCALHOST:8080/r", "localhost"),
            ("git@127.0.0.1:o/r", "127.0.0.1"),
            ("https://[::1]:9/x", "::1"),
            ("localhost/acme/base", "localhost"),
        ] {
            assert_eq!(remote_host(entry).as_deref(), Some(host), "{entry}");
        }
    }

    /// The closure follows local kustomizations (bases, components, a directory of
    /// generators); an entry that leaves the repository is refused naming the file.
    #[test]
    fn inputs_are_the_closure_and_nothing_leaves_the_repository() {
        let t = tree(&[
            ("apps/web/prod/kustomization.yaml", "resources: [../base, extra.yaml]\ncomponents: [../../../lib/c]\n"),
            ("apps/web/prod/extra.yaml", "a: 1\n"),
            ("apps/web/base/kustomization.yml", "resources: [cm.yaml]\ngenerators: [gen]\n"),
            ("apps/web/base/gen/kustomization.yaml", "resources: []\n"),
            ("lib/c/kustomization.yaml", "kind: Component\n"),
            ("other/kustomization.yaml", "resources: []\n"),
        ]);
        let mut dirs = check(t.path(), "apps/web/prod", false).expect("closure");
        dirs.sort();
        assert_eq!(dirs, ["apps/web/base", "apps/web/base/gen", "apps/web/prod", "lib/c"]);
        for (entry, field) in [
            ("../../../../etc", "resources"),
            ("/etc/passwd", "patchesStrategicMerge"),
            ("../../../x.env", "configMapGenerator[].envs"),
        ] {
            let text = match field {
                "configMapGenerator[].envs" => format!("configMapGenerator: [{{name: c, envs: [\"{entry}\"]}}]\n"),
                f => format!("{f}: [\"{entry}\"]\n"),
            };
            let t = tree(&[("apps/web/kustomization.yaml", &text)]);
            let err = check(t.path(), "apps/web", true).expect_err(entry).to_string();
            assert_eq!(
                err,
                format!(
                    "apps/web/kustomization.yaml: `{entry}` ({field}) leaves the repository (an absolute path, or `..` beyond its root); a render reads only the commit"
                )
            );
        }
        let t = tree(&[("apps/web/kustomization.yaml", "resources: [a\n")]);
        let err = check(t.path(), "apps/web", false).expect_err("parse").to_string();
        assert!(err.starts_with("apps/web/kustomization.yaml: `(the file)` does not parse"), "{err}");
    }
}
