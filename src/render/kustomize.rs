//! kustomize: `kustomize build` of the application path, run in a working copy of the
//! whole commit (bases may live outside the path), sandboxed ([`super::sandbox`]):
//! the load restrictor on (`LoadRestrictionsRootOnly`: a kustomization reads files only
//! under its own directory; bases are other kustomizations), and remote bases off
//! unless the application opts in (`source.allowRemoteBases`) — checked before the run,
//! naming the file and the reference, with no network for the tool as a backstop.
//! Its output is read like a plain YAML file ([`super::render_output`]): lists
//! expanded, server-set fields removed with a warning, duplicates refused.

use std::{
    collections::HashSet,
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
    /// [`Error::RemoteBase`] (remote bases off), [`Error::Tool`] (the run failed).
    pub async fn build(
        &self,
        root: &Path,
        app_path: &str,
        overrides: &Overrides<'_>,
        limits: Limits,
    ) -> Result<Vec<u8>, Error> {
        if !limits.network
            && let Some((file, reference)) = remote_references(root, app_path).into_iter().next()
        {
            return Err(Error::RemoteBase { file, reference });
        }
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

/// Whether a kustomization entry names a remote base or resource. kustomize reads an
/// entry as a local path first and as a URL when no such path exists (go-getter and
/// `host/org/repo//dir?ref=` forms); `exists` says whether the local path exists.
pub fn is_remote(reference: &str, exists: bool) -> bool {
    if reference.contains("://") || reference.starts_with("git@") || reference.starts_with("git::") {
        return true;
    }
    let first = reference.split('/').next().unwrap_or("");
    !exists && reference.contains('/') && first.contains('.') && !first.starts_with('.')
}

/// The remote entries (file, entry) of the kustomization at `app_path` of `root` and
/// of the local kustomizations it refers to (`resources`, `bases`, `components`).
pub fn remote_references(root: &Path, app_path: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    let mut todo = vec![PathBuf::from(app_path)];
    while let Some(dir) = todo.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Some((file, text)) = KUSTOMIZATION_FILES.iter().find_map(|name| {
            let rel = dir.join(name);
            std::fs::read_to_string(root.join(&rel)).ok().map(|t| (rel.to_string_lossy().to_string(), t))
        }) else {
            continue;
        };
        let Ok(doc) = serde_saphyr::from_str::<Value>(&text) else { continue };
        for key in ["resources", "bases", "components"] {
            for entry in doc.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                let local = normalize(&dir.join(entry));
                let exists = local.as_ref().is_some_and(|l| root.join(l).exists());
                if is_remote(entry, exists) {
                    found.push((file.clone(), entry.to_string()));
                } else if let Some(l) = local.filter(|l| root.join(l).is_dir()) {
                    todo.push(l);
                }
            }
        }
    }
    found
}

/// `p` with `.` and `..` resolved lexically; `None` when it leaves the root.
fn normalize(p: &Path) -> Option<PathBuf> {
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
    fn remote_references_follow_local_bases() {
        let tmp = tempfile::tempdir().expect("tmp");
        let w = |p: &str, t: &str| {
            let f = tmp.path().join(p);
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            std::fs::write(f, t).expect("write");
        };
        w("apps/web/prod/kustomization.yaml", "resources: [../base, extra.yaml]\n");
        w("apps/web/base/kustomization.yml", "resources:\n- cm.yaml\n- https://example.test/acme/x.yaml\n");
        w("apps/web/base/cm.yaml", "a: 1\n");
        assert_eq!(
            remote_references(tmp.path(), "apps/web/prod"),
            [("apps/web/base/kustomization.yml".to_string(), "https://example.test/acme/x.yaml".to_string())]
        );
        assert!(remote_references(tmp.path(), "apps/web/base/..").is_empty(), "no kustomization there");
    }
}
