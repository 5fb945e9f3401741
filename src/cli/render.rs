//! `plumb render APP [--revision REV]`: the rendered objects of an application, as
//! `flux build` / `argocd app manifests` print them — no cluster needed. Objects go to
//! standard output as a YAML stream, each after a `# Source:` comment; Secret values
//! are masked. The tool, its version, the render time and the warnings go to standard
//! error.

use std::{fmt::Write as _, path::Path, process::ExitCode, sync::Arc};

use anyhow::Context as _;

use crate::{
    config::{self, Config},
    render::{Manifest, Rendered},
    source::{Desired, Pool, Since},
};

/// Renders `app` of the policy `config_file` at `revision` (default: the configured
/// one) with the mirrors under `cache`; prints it. Exit 0, or 2 when the source cannot
/// be fetched or rendered (the error on standard error).
///
/// # Errors
/// The policy cannot be read, or names no such application.
pub async fn run(config_file: &Path, cache: &Path, app: &str, revision: Option<&str>) -> anyhow::Result<ExitCode> {
    let config: Arc<Config> = Arc::new(config::load_without_secrets(config_file)?);
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
    let pool = Pool::new(cache.to_path_buf(), config.clone());
    match pool.desired(app, repo, &wanted, &a.path.value, Since::at(std::time::Instant::now())).await {
        Desired::Rendered(snapshot, rendered, _) => {
            out!("{}", stream(&rendered.manifests));
            err!("{}", summary(app, &snapshot.revision, &rendered));
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

/// The objects as one YAML stream, Secret values masked (`(sensitive)`: a render
/// reads no cluster, so no installation's key marks them), each after `# Source: …`.
pub fn stream(manifests: &[Manifest]) -> String {
    let mut out = String::new();
    let no_key = crate::compare::sensitive::MaskKey::none();
    for m in manifests {
        let masked = crate::compare::sensitive::mask_object(&m.object(), &no_key);
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
    for w in &rendered.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let text = stream(&manifests);
        assert!(!text.contains("aHVudGVyMg==") && !text.contains("hunter2"), "{text}");
        assert!(text.starts_with("---\n# Source: app/s.yaml#1\n"), "{text}");
        assert!(text.contains("# Source: app/c.yaml#2\n") && text.contains("k: v"), "{text}");
        let rendered = Rendered {
            manifests,
            warnings: vec!["app/c.yaml#2: x".into()],
            tool: Some("kustomize v5.8.1".into()),
            chart: None,
            took: std::time::Duration::from_millis(42),
        };
        assert_eq!(
            summary("web", "0123456789abcdef0123", &rendered),
            "web at 0123456789ab: 2 objects, kustomize v5.8.1, rendered in 42 ms\nwarning: app/c.yaml#2: x\n"
        );
    }
}
