//! The pure parts of chart sources: Helm version constraints, a chart repository's
//! `index.yaml`, the choice of a version, digests, and what an OCI registry answers
//! (manifests, tag lists, token challenges). Values in, values out; the IO is
//! [`super`]'s.
//!
//! Constraints are [`crate::config::chart_version`]'s (policy validation reads them
//! too).

use std::collections::HashMap;

pub use crate::config::chart_version::{Constraint, lenient};
use serde::Deserialize;
use sha2::Digest as _;

/// A chart repository's `index.yaml`, only the fields plumb reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Index {
    /// Chart versions by chart name.
    #[serde(default)]
    pub entries: HashMap<String, Vec<IndexEntry>>,
}

/// One chart version of an index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IndexEntry {
    /// The chart's version (`Chart.yaml` `version`).
    pub version: String,
    /// The package's sha256, hex (`helm repo index` writes it).
    #[serde(default)]
    pub digest: Option<String>,
    /// Where the package is: absolute, or relative to the index's URL.
    #[serde(default)]
    pub urls: Vec<String>,
}

/// Most alias-replayed YAML events an index may cost (a few times the events of the
/// largest public indexes); an index is otherwise bounded by its size.
pub const INDEX_REPLAYED_EVENTS: usize = 1 << 20;

/// Reads an `index.yaml`.
///
/// # Errors
/// The parser's message (no YAML, no mapping, an alias bomb).
pub fn parse_index(bytes: &[u8]) -> Result<Index, String> {
    let aliases = serde_saphyr::alias_limits! { max_total_replayed_events: INDEX_REPLAYED_EVENTS };
    let options = serde_saphyr::options! { alias_limits: aliases, with_snippet: false };
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    serde_saphyr::from_str_with_options::<Index>(text, options)
        .map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string())
}

impl Index {
    /// The entry of chart `name` with the highest version in `constraint`.
    ///
    /// # Errors
    /// A message: no chart of that name, no version in range (listing a few).
    pub fn choose(&self, name: &str, constraint: &Constraint) -> Result<&IndexEntry, String> {
        let Some(entries) = self.entries.get(name) else {
            return Err(format!("the index has no chart `{name}`"));
        };
        let version = constraint.pick(entries.iter().map(|e| e.version.as_str())).ok_or_else(|| {
            let mut known: Vec<&str> = entries.iter().map(|e| e.version.as_str()).collect();
            known.truncate(8);
            format!("chart `{name}` has no version in `{}` (it has {})", constraint.text, known.join(", "))
        })?;
        entries.iter().find(|e| e.version == version).ok_or_else(|| "lost the chosen entry".to_string())
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Checks `bytes` against `expected` (`<hex>` as an index writes it, or
/// `sha256:<hex>` as a registry does); returns the digest as `sha256:<hex>`.
///
/// # Errors
/// A message giving both digests, or naming an algorithm other than sha256.
pub fn check_digest(bytes: &[u8], expected: &str) -> Result<String, String> {
    let want = expected.trim().to_ascii_lowercase();
    let want = match want.split_once(':') {
        Some(("sha256", hex)) => hex.to_string(),
        Some((alg, _)) => return Err(format!("digest algorithm `{alg}` is not supported (sha256 only)")),
        None => want,
    };
    let got = sha256(bytes);
    if got["sha256:".len()..] == want {
        Ok(got)
    } else {
        Err(format!("digest mismatch: expected sha256:{want}, got {got}"))
    }
}

/// The URL of `entry_url` of an index read from `index_url` (relative entries are
/// resolved against it, as Helm does).
///
/// # Errors
/// A message when either URL does not parse.
pub fn join_url(index_url: &str, entry_url: &str) -> Result<url::Url, String> {
    let base = url::Url::parse(index_url).map_err(|e| format!("{e}"))?;
    base.join(entry_url).map_err(|e| format!("`{entry_url}`: {e}"))
}

/// Helm's config media type: a manifest of another type is no chart.
pub const HELM_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// Helm's chart layer media type.
pub const HELM_CHART_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// The manifest media types plumb asks a registry for.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json";

/// The chart layer of an OCI manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// `sha256:<hex>`.
    pub digest: String,
    /// Its size, in bytes.
    pub size: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    #[serde(default)]
    size: u64,
}

/// The chart layer of an OCI image manifest (JSON), which must carry Helm's config
/// media type.
///
/// # Errors
/// A message: no JSON manifest, not a Helm chart, no chart layer.
pub fn chart_layer(manifest: &[u8]) -> Result<Layer, String> {
    let m: Manifest = serde_json::from_slice(manifest).map_err(|e| format!("manifest: {e}"))?;
    match &m.config {
        Some(c) if c.media_type == HELM_CONFIG_MEDIA_TYPE => {}
        Some(c) => return Err(format!("not a Helm chart (config media type `{}`)", c.media_type)),
        None => return Err("not a Helm chart (no config)".into()),
    }
    let layer = m.layers.iter().find(|l| l.media_type == HELM_CHART_MEDIA_TYPE);
    let l = layer.ok_or_else(|| format!("no layer of media type {HELM_CHART_MEDIA_TYPE}"))?;
    Ok(Layer { digest: l.digest.clone(), size: l.size })
}

/// The tags of a registry's tag list (`{"name": …, "tags": […]}`), as chart versions:
/// Helm writes `+` as `_` in tags.
///
/// # Errors
/// A message when it is no tag list.
pub fn tag_versions(list: &[u8]) -> Result<Vec<String>, String> {
    #[derive(Deserialize)]
    struct Tags {
        #[serde(default)]
        tags: Option<Vec<String>>,
    }
    let t: Tags = serde_json::from_slice(list).map_err(|e| format!("tag list: {e}"))?;
    Ok(t.tags.unwrap_or_default().into_iter().map(|t| t.replace('_', "+")).collect())
}

/// A registry's `WWW-Authenticate: Bearer realm="…",service="…",scope="…"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The token endpoint.
    pub realm: String,
    /// `service`, when given.
    pub service: Option<String>,
    /// `scope`, when given.
    pub scope: Option<String>,
}

impl Challenge {
    /// Reads a Bearer challenge; `None` for another scheme (Basic) or without a realm.
    pub fn parse(header: &str) -> Option<Self> {
        let (scheme, rest) = header.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let mut params: HashMap<String, String> = HashMap::new();
        let mut s = rest.trim();
        while !s.is_empty() {
            let (key, after) = s.split_once('=')?;
            let after = after.trim_start();
            let (value, tail) = if let Some(q) = after.strip_prefix('"') {
                let end = q.find('"')?;
                (&q[..end], &q[end + 1..])
            } else {
                after.split_once(',').map_or((after, ""), |(v, t)| (v, t))
            };
            params.insert(key.trim().to_ascii_lowercase(), value.to_string());
            s = tail.trim_start_matches([',', ' ']);
        }
        Some(Self { realm: params.remove("realm")?, service: params.remove("service"), scope: params.remove("scope") })
    }
}

/// The registry host and repository of chart `name` under `oci://host/path`:
/// (`host[:port]`, `path/name`).
///
/// # Errors
/// A message when the URL has no host.
pub fn oci_repository(repository: &str, name: &str) -> Result<(String, String), String> {
    let rest = repository.get(6..).unwrap_or_default().trim_end_matches('/');
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.is_empty() {
        return Err(format!("`{repository}` names no registry host"));
    }
    let repo = if path.is_empty() { name.to_string() } else { format!("{path}/{name}") };
    Ok((host.to_string(), repo))
}

#[cfg(test)]
mod tests {
    use semver::Version;

    use super::*;

    fn pick<'a>(c: &str, versions: &[&'a str]) -> Option<&'a str> {
        Constraint::parse(c).expect("parses").pick(versions.iter().copied())
    }

    /// Helm's constraint forms choose what `helm pull --version` would.
    #[test]
    fn constraints_choose_the_highest_version_in_range() {
        let v = ["1.1.9", "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.1", "2.0.0", "2.1.0-rc.1"];
        for (c, want) in [
            ("1.2.3", Some("1.2.3")),
            ("v1.2.3", Some("1.2.3")),
            ("=1.2.3", Some("1.2.3")),
            ("^1.2", Some("1.10.1")),
            ("~1.2.3", Some("1.2.9")),
            (">=1.0.0 <2.0.0", Some("1.10.1")),
            (">=1.0.0, <1.3.0", Some("1.2.9")),
            (">= 1.2.0 < 1.2.5", Some("1.2.3")),
            ("1.2.x", Some("1.2.9")),
            ("1.2.*", Some("1.2.9")),
            ("*", Some("2.0.0")),
            ("1.2 - 1.2.5", Some("1.2.3")),
            ("<1.2.0 || >=2.0.0", Some("2.0.0")),
            ("~1.1 || ~1.3", Some("1.3.0")),
            ("3.x", None),
            ("1.2.4", None),
            ("2.1.0-rc.1", Some("2.1.0-rc.1")),
        ] {
            assert_eq!(pick(c, &v), want, "{c}");
        }
        // a bare version is exact, not `^` as the semver crate reads it
        assert_eq!(pick("1.2.0", &v), Some("1.2.0"));
    }

    /// Index versions are read as Helm reads them.
    #[test]
    fn versions_are_read_leniently() {
        assert_eq!(lenient("v1.2"), Version::parse("1.2.0").ok());
        assert_eq!(lenient("3"), Version::parse("3.0.0").ok());
        assert_eq!(lenient("1.2-beta.1"), Version::parse("1.2.0-beta.1").ok());
        assert_eq!(lenient("latest"), None);
        assert_eq!(pick("^1", &["v1.4", "latest", "1.3.0"]), Some("v1.4"));
    }

    /// A constraint that is none is refused with what is wrong.
    #[test]
    fn bad_constraints_are_refused() {
        for c in ["", "  ", "latest", ">=", "1.0 -", "!=1.2.0", "1.0.0 ||", ">>1"] {
            assert!(Constraint::parse(c).is_err(), "{c:?}");
        }
        let e = Constraint::parse("latest").expect_err("no version");
        assert!(e.starts_with("`latest`: "), "{e}");
    }

    /// The index entry in range is chosen; a missing chart or version is named.
    #[test]
    fn an_index_gives_the_entry_in_range() {
        let index = parse_index(
            b"apiVersion: v1\nentries:\n  web:\n  - version: 1.0.0\n    digest: aa\n    urls: [web-1.0.0.tgz]\n    created: x\n  - version: 1.1.0\n    digest: bb\n    urls: [https://cdn.example/web-1.1.0.tgz]\ngenerated: now\n",
        )
        .expect("index");
        let e = index.choose("web", &Constraint::parse("^1").expect("c")).expect("entry");
        assert_eq!((e.version.as_str(), e.digest.as_deref()), ("1.1.0", Some("bb")));
        let e = index.choose("web", &Constraint::parse("1.0.0").expect("c")).expect("entry");
        assert_eq!(e.urls, ["web-1.0.0.tgz"]);
        assert_eq!(
            join_url("http://127.0.0.1:8080/charts/index.yaml", &e.urls[0]).expect("url").as_str(),
            "http://127.0.0.1:8080/charts/web-1.0.0.tgz"
        );
        assert_eq!(
            index.choose("api", &Constraint::parse("*").expect("c")).expect_err("none"),
            "the index has no chart `api`"
        );
        assert_eq!(
            index.choose("web", &Constraint::parse("^2").expect("c")).expect_err("none"),
            "chart `web` has no version in `^2` (it has 1.0.0, 1.1.0)"
        );
        assert!(parse_index(b"entries: [").is_err());
        // an alias bomb costs its bound, not its expansion
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        bomb.push_str("entries: {}\n");
        assert!(parse_index(bomb.as_bytes()).is_err());
    }

    /// A package is accepted only with the digest it was listed with.
    #[test]
    fn digests_are_checked() {
        let d = sha256(b"chart");
        assert_eq!(check_digest(b"chart", &d), Ok(d.clone()));
        assert_eq!(check_digest(b"chart", &d["sha256:".len()..].to_ascii_uppercase()), Ok(d.clone()));
        let e = check_digest(b"chart!", &d).expect_err("mismatch");
        assert!(e.starts_with(&format!("digest mismatch: expected {d}, got sha256:")), "{e}");
        assert!(check_digest(b"chart", "sha512:00").expect_err("alg").contains("sha256 only"));
    }

    /// What a registry answers is read: the chart layer, tags, token challenges.
    #[test]
    fn registry_answers_are_read() {
        let m = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{HELM_CONFIG_MEDIA_TYPE}","digest":"sha256:c","size":1}},"layers":[{{"mediaType":"{HELM_CHART_MEDIA_TYPE}","digest":"sha256:l","size":42}}]}}"#
        );
        assert_eq!(chart_layer(m.as_bytes()), Ok(Layer { digest: "sha256:l".into(), size: 42 }));
        let image =
            r#"{"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:c"},"layers":[]}"#;
        assert!(chart_layer(image.as_bytes()).expect_err("image").contains("not a Helm chart"));
        assert_eq!(
            tag_versions(br#"{"name":"c/web","tags":["1.0.0","1.1.0_build.1"]}"#).expect("tags"),
            ["1.0.0", "1.1.0+build.1"]
        );
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:c/web:pull""#
            ),
            Some(Challenge {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:c/web:pull".into()),
            })
        );
        assert_eq!(Challenge::parse(r#"Basic realm="registry""#), None);
        assert_eq!(
            oci_repository("oci://127.0.0.1:5000/charts", "web"),
            Ok(("127.0.0.1:5000".into(), "charts/web".into()))
        );
        assert_eq!(oci_repository("oci://ghcr.io/", "web"), Ok(("ghcr.io".into(), "web".into())));
        assert!(oci_repository("oci:///x", "web").is_err());
    }
}
