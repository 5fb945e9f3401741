//! Limits on what one commit may cost plumb, so that one application's repository
//! cannot take the process down for every application (issue 12).
//!
//! Each limit, when exceeded, fails **that application's** fetch or render with an error
//! naming the file (when there is one) and the limit: nothing of the commit is applied
//! and nothing is pruned, and other applications go on. Defaults ([`Limits::default`])
//! are generous for real manifests; `settings.limits` in the policy file changes them.
//!
//! | limit | default | checked |
//! |---|---|---|
//! | `maxFileBytes` | 8 MiB | per manifest file (and per file of a render tool's working copy), from the blob header, before it is read |
//! | `maxFiles` | 10,000 | manifest files under the application path; files of a render tool's working copy |
//! | `maxRenderedBytes` | 64 MiB | the JSON size of all rendered objects of the application |
//! | `yamlNodesPerFile` | 100,000 | YAML nodes of one file, aliases expanded, all documents together, plus one per 8 bytes of the file |
//! | `yamlScalarBytesPerFile` | 3 MiB | scalar bytes of one file, aliases expanded, plus the file's own size |
//! | `sourceTimeoutSeconds` | 120 s | fetching and rendering one application (connect, transfer, render) |
//!
//! The YAML budgets are per **file**, not per `---` document: a file of many small alias
//! bombs, each under a per-document budget, is refused as a whole. They are enforced by
//! serde-saphyr's [`serde_saphyr::Budget`] while the file is scanned once as a whole
//! stream, values discarded, before its documents are read.
//!
//! The YAML budgets are sized from what the API server accepts: one request body is at
//! most 3 MiB (kube-apiserver's `MaxRequestBodyBytes`, `k8s.io/apiserver`
//! `pkg/server/config.go`: 3 × 1024 × 1024) and etcd stores at most 1.5 MiB per request
//! (its `--max-request-bytes` default, 1,572,864 bytes), so aliases that expand one
//! file beyond a few MiB of scalars build nothing a cluster would take. A file without
//! aliases is never refused by them: it has at most one node per 2 bytes and its own
//! bytes of scalars, and real manifests (CRD bundles included) average far more than 8
//! bytes per node — the part that grows with the file. What aliases may add is the
//! floor: one 60 KB file costs at most ~100,000 nodes and ~3 MiB of scalars (tens of MB
//! parsed, where the former defaults of 1,000,000 nodes and 64 MiB let it reach 400 MB).

use std::time::Duration;

use serde::Deserialize;

/// The limits of one application's fetch and render (`settings.limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Limits {
    /// Largest manifest file read, in bytes.
    pub max_file_bytes: u64,
    /// Most manifest files read under one application path.
    pub max_files: usize,
    /// Largest rendered application: JSON bytes of all its objects.
    pub max_rendered_bytes: u64,
    /// Most YAML nodes (scalars, sequences, mappings) in one file, aliases expanded,
    /// beyond one per 8 bytes of the file (see [`Limits::yaml_budget`]).
    pub yaml_nodes_per_file: usize,
    /// Most scalar bytes in one file, aliases expanded, beyond the file's own size.
    pub yaml_scalar_bytes_per_file: usize,
    /// Longest fetch and render of one application, in seconds.
    pub source_timeout_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_bytes: 8 * 1024 * 1024,
            max_files: 10_000,
            max_rendered_bytes: 64 * 1024 * 1024,
            yaml_nodes_per_file: 100_000,
            yaml_scalar_bytes_per_file: 3 * 1024 * 1024,
            source_timeout_seconds: 120,
        }
    }
}

/// A limit an application's commit exceeded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    /// One file is larger than `maxFileBytes`.
    #[error("{file} is {bytes} bytes, over the limit of {limit} bytes per file (settings.limits.maxFileBytes)")]
    FileBytes {
        /// Path inside the repository.
        file: String,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// More manifest files than `maxFiles`.
    #[error("more than {limit} manifest files under the application path (settings.limits.maxFiles)")]
    Files {
        /// The limit.
        limit: usize,
    },
    /// A render tool's working copy would hold more than `maxFiles` files.
    #[error(
        "more than {limit} files in the render tool's working copy (the application's path, the kustomizations and value files it names, sharedPaths) (settings.limits.maxFiles)"
    )]
    WorkingCopyFiles {
        /// The limit.
        limit: usize,
    },
    /// The rendered objects are larger than `maxRenderedBytes`.
    #[error(
        "rendered objects reach {bytes} bytes at {file}, over the limit of {limit} bytes per application (settings.limits.maxRenderedBytes)"
    )]
    RenderedBytes {
        /// Bytes counted when the limit was crossed.
        bytes: u64,
        /// The file whose objects crossed it.
        file: String,
        /// The limit.
        limit: u64,
    },
    /// A YAML file expands beyond its budget (aliases, nodes, scalar bytes, documents).
    #[error(
        "{file}: YAML expansion budget per file exceeded ({what}; limits: {nodes} nodes, {bytes} scalar bytes, aliases expanded; settings.limits.yamlNodesPerFile / yamlScalarBytesPerFile)"
    )]
    YamlBudget {
        /// Path inside the repository.
        file: String,
        /// serde-saphyr's account of the breach.
        what: String,
        /// The node limit.
        nodes: usize,
        /// The scalar byte limit.
        bytes: usize,
    },
    /// Fetching and rendering took longer than `sourceTimeoutSeconds`.
    #[error(
        "fetch and render did not finish within {seconds} s (settings.limits.sourceTimeoutSeconds); is the Git server answering?"
    )]
    Timeout {
        /// The limit.
        seconds: u64,
    },
}

impl Limits {
    /// The fetch-and-render deadline.
    pub fn source_timeout(&self) -> Duration {
        Duration::from_secs(self.source_timeout_seconds)
    }

    /// Checks one manifest file of `bytes` bytes at `file`, the `count`-th (1-based)
    /// read under the application path, before its content is read.
    ///
    /// # Errors
    /// [`Exceeded::Files`] or [`Exceeded::FileBytes`].
    pub fn check_file(&self, file: &str, bytes: u64, count: usize) -> Result<(), Exceeded> {
        if count > self.max_files {
            return Err(Exceeded::Files { limit: self.max_files });
        }
        if bytes > self.max_file_bytes {
            return Err(Exceeded::FileBytes { file: file.into(), bytes, limit: self.max_file_bytes });
        }
        Ok(())
    }

    /// Scans YAML `text` of `file` once, as one stream (all its documents together),
    /// under the per-file budget; values are discarded. A syntax error is not this
    /// check's business (the render reports it with its line): only a budget breach is
    /// an error here.
    ///
    /// # Errors
    /// [`Exceeded::YamlBudget`].
    pub fn check_yaml(&self, file: &str, text: &str) -> Result<(), Exceeded> {
        let (nodes, bytes) = self.yaml_budget(text.len());
        let budget = serde_saphyr::budget! {
            max_nodes: nodes,
            max_total_scalar_bytes: bytes,
            max_documents: nodes,
            // events include the ends of collections: about two per node
            max_events: nodes.saturating_mul(2),
        };
        let aliases = serde_saphyr::alias_limits! { max_total_replayed_events: nodes };
        let options = serde_saphyr::options! {
            budget: budget,
            alias_limits: aliases,
            legacy_octal_numbers: true,
            with_snippet: false,
        };
        match serde_saphyr::from_str_multiple_with_options::<serde::de::IgnoredAny, Vec<_>>(text, options) {
            Ok(_) => Ok(()),
            Err(e) => {
                let message = e.to_string();
                let breach = ["budget breached", "alias replay", "replay"]
                    .iter()
                    .any(|w| message.to_ascii_lowercase().contains(w));
                if breach {
                    let what = message.lines().next().unwrap_or_default().to_string();
                    Err(Exceeded::YamlBudget { file: file.into(), what, nodes, bytes })
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The YAML budget of a file of `len` bytes: (nodes, scalar bytes), aliases
    /// expanded. `yamlNodesPerFile` plus one node per 8 bytes, `yamlScalarBytesPerFile`
    /// plus `len`: a file without aliases stays within its budget whatever its size
    /// (see the module docs), and aliases add at most the settings.
    pub fn yaml_budget(&self, len: usize) -> (usize, usize) {
        (self.yaml_nodes_per_file.saturating_add(len / 8), self.yaml_scalar_bytes_per_file.saturating_add(len))
    }

    /// Checks the rendered objects, `(source file, size of the object as compact JSON in
    /// bytes)` in render order ([`crate::render::Manifest::bytes`]), against
    /// `maxRenderedBytes`.
    ///
    /// # Errors
    /// [`Exceeded::RenderedBytes`], naming the file whose objects crossed the limit.
    pub fn check_rendered<'a>(&self, objects: impl IntoIterator<Item = (&'a str, usize)>) -> Result<(), Exceeded> {
        let mut total = 0u64;
        for (file, bytes) in objects {
            total += bytes as u64;
            if total > self.max_rendered_bytes {
                let file = file.split('#').next().unwrap_or(file).to_string();
                return Err(Exceeded::RenderedBytes { bytes: total, file, limit: self.max_rendered_bytes });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A file of `documents` small alias bombs (each a ConfigMap whose `data` expands
    /// `width`^`levels` times), for tests and benchmarks: small on disk, huge when expanded.
    fn alias_bomb(documents: usize, levels: usize, width: usize) -> String {
        let mut one = String::from(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb-NAME}\nl0: &l0 [\"aaaaaaaaaaaaaaaa\"]\n",
        );
        for l in 1..=levels {
            let items: Vec<String> = (0..width).map(|_| format!("*l{}", l - 1)).collect();
            one.push_str(&format!("l{l}: &l{l} [{}]\n", items.join(",")));
        }
        (0..documents).map(|i| format!("---\n{}", one.replace("NAME", &i.to_string()))).collect()
    }

    #[test]
    fn files_are_checked_before_they_are_read() {
        let l = Limits { max_file_bytes: 100, max_files: 2, ..Limits::default() };
        assert_eq!(l.check_file("app/a.yaml", 100, 1), Ok(()));
        let e = l.check_file("app/big.yaml", 101, 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "app/big.yaml is 101 bytes, over the limit of 100 bytes per file (settings.limits.maxFileBytes)"
        );
        assert_eq!(l.check_file("app/c.yaml", 1, 3), Err(Exceeded::Files { limit: 2 }));
    }

    /// One file of many small alias bombs: each document is under any per-document
    /// budget, the file as a whole is not.
    #[test]
    fn the_yaml_budget_is_per_file_not_per_document() {
        let l = Limits::default();
        let one = alias_bomb(1, 4, 10); // 10^4 nodes: fine alone
        assert_eq!(l.check_yaml("app/one.yaml", &one), Ok(()));
        let many = alias_bomb(200, 4, 10); // 200 × 10^4 = 2M nodes
        assert!(many.len() < 100_000, "small on disk: {} bytes", many.len());
        let e = l.check_yaml("app/bombs.yaml", &many).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("app/bombs.yaml: YAML expansion budget per file exceeded ("), "{text}");
        assert!(text.contains(&format!("{} nodes", 100_000 + many.len() / 8)), "{text}");
        // one big scalar repeated by aliases: scalar bytes
        let big = format!("s: &s \"{}\"\nl: [{}]\n", "a".repeat(1000), vec!["*s"; 50].join(","));
        let small = Limits { yaml_scalar_bytes_per_file: 10_000, ..Limits::default() };
        assert!(small.check_yaml("app/s.yaml", &big).is_err());
        // a syntax error is the render's to report
        assert_eq!(l.check_yaml("app/bad.yaml", "a: [\n"), Ok(()));
    }

    /// A 7 KB file of aliases expanding to 422,000 nodes: the former defaults
    /// (1,000,000 nodes, 64 MiB of scalars per file) let it through (a 60 KB file of
    /// the same kind reached 400 MB parsed), the defaults sized from the API server's
    /// limits refuse it. A 6 MB file without aliases (a CRD bundle's shape)
    /// stays within its budget.
    #[test]
    fn the_default_budgets_refuse_a_small_file_that_expands_beyond_an_api_request() {
        let bomb = alias_bomb(20, 4, 10);
        assert!(bomb.len() < 8_000, "{} bytes", bomb.len());
        let former =
            Limits { yaml_nodes_per_file: 1_000_000, yaml_scalar_bytes_per_file: 64 << 20, ..Limits::default() };
        assert_eq!(former.check_yaml("bomb.yaml", &bomb), Ok(()), "passed before");
        let e = Limits::default().check_yaml("bomb.yaml", &bomb).unwrap_err().to_string();
        assert!(e.starts_with("bomb.yaml: YAML expansion budget per file exceeded"), "{e}");
        let mut bundle = String::new();
        while bundle.len() < 6 << 20 {
            bundle.push_str(
                "- name: field\n  description: a field of a custom resource, as CRDs describe them\n  type: string\n",
            );
        }
        assert_eq!(Limits::default().check_yaml("crds.yaml", &bundle), Ok(()), "no aliases: within budget");
    }

    #[test]
    fn rendered_bytes_name_the_file_that_crossed_the_limit() {
        let l = Limits { max_rendered_bytes: 30, ..Limits::default() };
        assert_eq!(l.check_rendered([("app/a.yaml#1", 20)]), Ok(()));
        assert_eq!(
            l.check_rendered([("app/a.yaml#1", 20), ("app/b.yaml#2", 20)]),
            Err(Exceeded::RenderedBytes { bytes: 40, file: "app/b.yaml".into(), limit: 30 })
        );
    }

    #[test]
    fn limits_read_from_yaml_keep_defaults_for_what_is_not_set() {
        let l: Limits = serde_saphyr::from_str("maxFiles: 5\nsourceTimeoutSeconds: 3\n").unwrap_or_default();
        assert_eq!((l.max_files, l.source_timeout(), l.max_file_bytes), (5, Duration::from_secs(3), 8 * 1024 * 1024));
        assert!(serde_saphyr::from_str::<Limits>("maxFile: 5\n").is_err(), "unknown keys are refused");
    }
}
