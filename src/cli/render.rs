//! `plumb render APP [--revision REV]`: the rendered objects of an application, as
//! `flux build` / `argocd app manifests` print them — no cluster needed. Objects go to
//! standard output as a YAML stream, each after a `# Source:` comment; Secret values,
//! the fields the environment's `sensitiveFields` name and every value decrypted from
//! SOPS are masked (`(sensitive)`). The tool, its version, the render time, the files
//! decrypted and the warnings go to standard error.

use std::{fmt::Write as _, path::Path, process::ExitCode, sync::Arc};

use anyhow::Context as _;

use crate::{
    config::{self, Config},
    render::{Manifest, Rendered},
    source::{Desired, Pool, Since},
};

/// What `plumb render --cluster` read of the target cluster: its version and served
/// `group/version`s and `group/version/Kind`s, and whether the application has synced.
#[derive(Debug, Clone)]
pub struct Target {
    /// `gitVersion` (`v1.36.3`).
    pub version: String,
    /// As [`crate::cluster::Cluster::capabilities`].
    pub api_versions: Vec<String>,
    /// The application's recorded status names a synced revision.
    pub installed: bool,
}

/// Reads [`Target`] for `app` from the cluster of `kube` (its status from the policy
/// `config_file`'s status namespace).
///
/// # Errors
/// The policy cannot be read, the cluster cannot be reached or read.
pub async fn target(kube: &super::read::KubeArgs, config_file: &Path, app: &str) -> anyhow::Result<Target> {
    let config = config::load_without_secrets(config_file)?;
    let cluster = crate::cluster::Cluster::connect_in(kube.kubeconfig.as_deref(), kube.context.as_deref()).await?;
    let (version, api_versions) = cluster.capabilities().await?;
    let store = crate::status::store::Store::new(cluster.client().clone(), &config.settings.status_namespace);
    let installed = store.load(app).await.is_ok_and(|(s, _)| !s.synced_revision.is_empty() || s.last_sync.is_some());
    Ok(Target { version, api_versions, installed })
}

/// Renders `app` of the policy `config_file` at `revision` (default: the configured
/// one) with the mirrors under `cache`, for the cluster `target` when given (else
/// none: `.Capabilities` are Helm's defaults, the release an install); prints it. Exit 0, or 2 when the source cannot
/// be fetched or rendered (the error on standard error).
///
/// # Errors
/// The policy cannot be read, or names no such application.
pub async fn run(
    config_file: &Path,
    cache: &Path,
    app: &str,
    revision: Option<&str>,
    (target, explain): (Option<Target>, bool),
) -> anyhow::Result<ExitCode> {
    let mut config = config::load_without_secrets(config_file)?;
    crate::generators::expand_once(&mut config, cache).await?;
    let config: Arc<Config> = Arc::new(config);
    let a = config
        .applications
        .iter()
        .find(|a| a.name.value == app)
        .with_context(|| format!("no application `{app}` in the policy"))?;
    let repo = config
        .repositories
        .iter()
        .find(|r| r.name.value == a.repository.value)
        .with_context(|| format!("application `{app}`: no repository `{}`", a.repository.value))?;
    let wanted = revision.unwrap_or(&a.revision.value).to_string();
    let env = config.environments.iter().find(|e| e.name.value == a.environment.value);
    let rules = crate::compare::sensitive::SensitiveRules::new(env.into_iter().flat_map(|e| &e.sensitive_fields));
    let pool = Pool::new(cache.to_path_buf(), config.clone());
    let capabilities =
        target.as_ref().map(|t| format!("kube {}, {} API versions and kinds", t.version, t.api_versions.len()));
    if let Some(t) = target {
        pool.set_cluster(t.version, t.api_versions);
        pool.set_installed(app, t.installed);
    }
    match pool.desired(app, repo, &wanted, &a.path.value, Since::at(std::time::Instant::now())).await {
        Desired::Rendered(snapshot, rendered, ran) => {
            out!("{}", stream(&rendered.manifests, &rules));
            err!("{}", summary(app, &snapshot.revision, &rendered));
            if explain {
                let how = How { capabilities: capabilities.as_deref(), reused: !ran, runs: pool.tool_runs() };
                err!("{}", explanation(&rendered, &how, crate::render::sandbox::isolation()));
            }
            Ok(ExitCode::SUCCESS)
        }
        Desired::FetchFailed(e) => {
            errln!("error: fetch {}: {e}", repo.url.value);
            Ok(ExitCode::from(2))
        }
        Desired::RenderFailed(snapshot, e) => {
            errln!("error: render {}: {e}", crate::status::short(&snapshot.revision));
            Ok(ExitCode::from(2))
        }
    }
}

/// The objects as one YAML stream, each after `# Source: …`, with Secret values, the
/// fields `rules` mark and those holding a value decrypted from SOPS masked
/// (`(sensitive)`: a render reads no cluster, so no installation's key marks them).
pub fn stream(manifests: &[Manifest], rules: &crate::compare::sensitive::SensitiveRules) -> String {
    let mut out = String::new();
    let no_key = crate::compare::sensitive::MaskKey::none();
    for m in manifests {
        let object = m.object();
        let marked = rules.marked_manifest(m, &object);
        let masked = crate::compare::sensitive::mask_object_with(&object, &marked, &no_key);
        let yaml = serde_saphyr::to_string(&masked).unwrap_or_else(|e| format!("# (cannot print: {e})\n"));
        let _ = write!(out, "---\n# Source: {}\n{yaml}", m.source);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// `APP at SHA: N objects, TOOL, rendered in X ms` and one `warning:` line per warning.
pub fn summary(app: &str, revision: &str, rendered: &Rendered) -> String {
    let tool = rendered.tool.as_deref().unwrap_or("plain YAML");
    let mut out = format!(
        "{app} at {}: {} objects, {tool}, rendered in {} ms\n",
        &revision[..revision.len().min(12)],
        rendered.manifests.len(),
        rendered.took.as_millis()
    );
    if !rendered.decrypted.is_empty() {
        let _ = writeln!(out, "decrypted (SOPS): {}", rendered.decrypted.join(", "));
    }
    for w in &rendered.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// How one render was made, besides what [`Rendered`] says.
#[derive(Debug, Clone, Copy)]
pub struct How<'a> {
    /// The capabilities given to the tools (`kube v1.36.3, 212 API versions and kinds`),
    /// `None` when no cluster was read.
    pub capabilities: Option<&'a str>,
    /// The render came from the render cache (same inputs): no tool ran for it.
    pub reused: bool,
    /// Child processes the tools started (version queries, renders, decryptions).
    pub runs: u64,
}

/// `plumb render --explain`: one `explain:` line each for the tool and its version, the
/// capabilities (a Helm render), the files decrypted, the fields held, the sandbox of
/// the tools (`isolation`) and whether the render was reused.
pub fn explanation(rendered: &Rendered, how: &How<'_>, isolation: &crate::render::sandbox::Isolation) -> String {
    let mut out = String::new();
    let tool = rendered.tool.as_deref().unwrap_or("plain YAML (no tool)");
    let _ = writeln!(out, "explain: tool: {tool}");
    if rendered.tool_name() == "helm" {
        let caps = how.capabilities.map_or_else(
            || "Helm's defaults (no cluster read; --cluster gives the target's version and kinds)".to_string(),
            |c| format!("{c} (from the cluster)"),
        );
        let _ = writeln!(out, "explain: capabilities: {caps}");
    }
    let decrypted = if rendered.decrypted.is_empty() { "none".to_string() } else { rendered.decrypted.join(", ") };
    let _ = writeln!(out, "explain: decrypted (SOPS): {decrypted}");
    for h in &rendered.held {
        let why = match h.why {
            crate::render::HeldWhy::CreateOnly => "created only (source.crds: Create)",
            crate::render::HeldWhy::Unstable => "differs between two renders: the live value is kept",
        };
        let _ = writeln!(out, "explain: held: {} — {why}", h.describe());
    }
    if rendered.tool.is_some() && rendered.tool_name() != "plain" {
        let sandbox = isolation.missing().unwrap_or_else(|| {
            "own network namespace, memory ceiling and CPU budget, fresh HOME, no plugins".to_string()
        });
        let _ = writeln!(out, "explain: sandbox: {sandbox}");
    }
    let reused = if how.reused {
        "yes: the render cache held the same inputs".to_string()
    } else {
        format!("no: rendered now ({} child process(es))", how.runs)
    };
    let _ = writeln!(out, "explain: reused: {reused}");
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_explanation_names_tool_capabilities_decryption_and_reuse() {
        let rendered = Rendered {
            tool: Some("helm v3.22.0, sops 3.13.3".into()),
            decrypted: vec!["apps/web/secrets.yaml".into()],
            ..Rendered::default()
        };
        let contained = crate::render::sandbox::Isolation {
            no_network: Some(vec!["unshare".into()]),
            prlimit: Some("prlimit".into()),
        };
        let how = How { capabilities: Some("kube v1.36.3, 9 API versions and kinds"), reused: false, runs: 3 };
        assert_eq!(
            explanation(&rendered, &how, &contained),
            "explain: tool: helm v3.22.0, sops 3.13.3\nexplain: capabilities: kube v1.36.3, 9 API versions and kinds (from the cluster)\nexplain: decrypted (SOPS): apps/web/secrets.yaml\nexplain: sandbox: own network namespace, memory ceiling and CPU budget, fresh HOME, no plugins\nexplain: reused: no: rendered now (3 child process(es))\n"
        );
        let bare = crate::render::sandbox::Isolation { no_network: None, prlimit: Some("prlimit".into()) };
        let text = explanation(&rendered, &How { capabilities: None, reused: true, runs: 0 }, &bare);
        assert!(
            text.contains("capabilities: Helm's defaults (no cluster read") && text.contains("reused: yes"),
            "{text}"
        );
        assert!(text.contains("sandbox: no network namespace can be made here"), "{text}");
        let plain = explanation(&Rendered::default(), &How { capabilities: None, reused: false, runs: 0 }, &bare);
        assert!(!plain.contains("capabilities") && !plain.contains("sandbox"), "{plain}");
    }

    #[test]
    fn secrets_are_masked_and_sources_named() {
        let manifests = vec![
            Manifest::new(
                "app/s.yaml#1".into(),
                &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "hunter2"}}),
            ),
            Manifest::new(
                "app/c.yaml#2".into(),
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}),
            ),
        ];
        let text = stream(&manifests, &crate::compare::sensitive::SensitiveRules::default());
        assert!(!text.contains("aHVudGVyMg==") && !text.contains("hunter2"), "{text}");
        assert!(text.starts_with("---\n# Source: app/s.yaml#1\n"), "{text}");
        assert!(text.contains("# Source: app/c.yaml#2\n") && text.contains("k: v"), "{text}");
        let rendered = Rendered {
            manifests,
            warnings: vec!["app/c.yaml#2: x".into()],
            tool: Some("kustomize v5.8.1".into()),
            chart: None,
            took: std::time::Duration::from_millis(42),
            ..Rendered::default()
        };
        assert_eq!(
            summary("web", "0123456789abcdef0123", &rendered),
            "web at 0123456789ab: 2 objects, kustomize v5.8.1, rendered in 42 ms\nwarning: app/c.yaml#2: x\n"
        );
    }

    /// `plumb render` masks the environment's `sensitiveFields` and the decrypted
    /// values too, whatever the kind.
    #[test]
    fn sensitive_fields_and_decrypted_values_are_masked() {
        let text = "environments:\n  - name: dev\n    sensitiveFields: [{group: db.example.com, kind: Database, jsonPointers: [/spec/password]}]\n";
        let config = crate::config::load_str(text, Path::new("p.yaml"), Path::new(".")).expect("policy");
        let rules = crate::compare::sensitive::SensitiveRules::new(&config.environments[0].sensitive_fields);
        let db = json!({"apiVersion": "db.example.com/v1", "kind": "Database", "metadata": {"name": "d"}, "spec": {"password": "hunter-two", "size": 3}});
        let mut cm = Manifest::new(
            "app/c.yaml#1".into(),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"token": "tok-9f3b2c", "k": "v"}}),
        );
        cm.set_decrypted(vec!["/data/token".into()]);
        let text = stream(&[Manifest::new("app/d.yaml#1".into(), &db), cm], &rules);
        assert!(!text.contains("hunter-two") && !text.contains("tok-9f3b2c"), "{text}");
        assert!(
            text.contains("password: (sensitive)") && text.contains("token: (sensitive)") && text.contains("k: v"),
            "{text}"
        );
    }
}
