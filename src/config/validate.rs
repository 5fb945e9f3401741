//! Semantic checks of a parsed policy: references resolve, names are unique and valid,
//! values are in range. Every problem is reported, each with its file and line.

use std::{collections::HashSet, fmt, path::PathBuf};

use serde_saphyr::Spanned;

use super::Config;

/// One problem in a policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The policy file.
    pub file: PathBuf,
    /// 1-based line; 0 when the place is not known.
    pub line: u32,
    /// What is wrong, naming the offending value.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        } else {
            write!(f, "{}: {}", self.file.display(), self.message)
        }
    }
}

/// Returns every problem of `config` (empty when it is valid).
///
/// Checks: names are DNS-1123 labels (application names become ConfigMap names and
/// tracking-ids; rule from the Kubernetes object-names documentation) and unique;
/// applications refer to existing repositories and environments; paths stay inside
/// the repository; revisions and URLs are not empty; `sshKeyFile` comes with
/// `knownHostsFile`; secret files exist; `commitStatus` names an owner/repository and
/// an API URL (see [`crate::forge::Target::new`]); JSON pointers are RFC 6901; sync options
/// are `Name=value` with known names.
pub fn validate(config: &Config) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut problem = |line: u32, message: String| {
        out.push(Problem { file: config.file.clone(), line, message });
    };
    let line = |s: &Spanned<String>| s.referenced.line() as u32;

    let mut repos = HashSet::new();
    for r in &config.repositories {
        if !is_dns_label(&r.name.value) {
            problem(line(&r.name), format!("repository name `{}` must be a DNS-1123 label", r.name.value));
        }
        if !repos.insert(r.name.value.as_str()) {
            problem(line(&r.name), format!("repository `{}` is declared twice", r.name.value));
        }
        if r.url.value.trim().is_empty() {
            problem(line(&r.url), format!("repository `{}` has an empty url", r.name.value));
        }
        if r.ssh_key_file.is_some() && r.known_hosts_file.is_none() {
            problem(
                line(&r.name),
                format!("repository `{}`: sshKeyFile needs knownHostsFile (host keys are pinned)", r.name.value),
            );
        }
        for f in [&r.webhook_secret_file, &r.token_file, &r.ssh_key_file, &r.known_hosts_file].into_iter().flatten() {
            if !f.value.is_file() {
                problem(
                    f.referenced.line() as u32,
                    format!("repository `{}`: file {} does not exist", r.name.value, f.value.display()),
                );
            }
        }
        if let Some(cs) = &r.commit_status {
            if !cs.token_file.value.is_file() {
                problem(
                    cs.token_file.referenced.line() as u32,
                    format!(
                        "repository `{}`: commitStatus.tokenFile {} does not exist",
                        r.name.value,
                        cs.token_file.value.display()
                    ),
                );
            }
            if let Err(e) = crate::forge::Target::new(cs, &r.url.value) {
                problem(
                    cs.provider.referenced.line() as u32,
                    format!("repository `{}`: commitStatus: {e}", r.name.value),
                );
            }
        }
    }

    let mut envs = HashSet::new();
    for e in &config.environments {
        if !is_dns_label(&e.name.value) {
            problem(line(&e.name), format!("environment name `{}` must be a DNS-1123 label", e.name.value));
        }
        if !envs.insert(e.name.value.as_str()) {
            problem(line(&e.name), format!("environment `{}` is declared twice", e.name.value));
        }
        if e.reconcile_interval.is_some_and(|d| d.is_zero()) {
            problem(line(&e.name), format!("environment `{}`: reconcileInterval must be positive", e.name.value));
        }
        for opt in &e.sync_policy.sync_options {
            if let Err(m) = crate::plan::SyncOptions::parse_one(opt) {
                problem(line(&e.name), format!("environment `{}`: {m}", e.name.value));
            }
        }
        check_ignore_rules(&e.ignore_differences, &mut problem);
    }

    let mut apps = HashSet::new();
    for a in &config.applications {
        if !is_dns_label(&a.name.value) {
            problem(line(&a.name), format!("application name `{}` must be a DNS-1123 label", a.name.value));
        }
        if !apps.insert(a.name.value.as_str()) {
            problem(line(&a.name), format!("application `{}` is declared twice", a.name.value));
        }
        if !repos.contains(a.repository.value.as_str()) {
            problem(
                line(&a.repository),
                format!("application `{}`: unknown repository `{}`", a.name.value, a.repository.value),
            );
        }
        if !envs.contains(a.environment.value.as_str()) {
            problem(
                line(&a.environment),
                format!("application `{}`: unknown environment `{}`", a.name.value, a.environment.value),
            );
        }
        if a.revision.value.trim().is_empty() {
            problem(line(&a.revision), format!("application `{}`: empty revision", a.name.value));
        }
        if a.path.value.split('/').any(|seg| seg == "..") || a.path.value.starts_with('/') {
            problem(
                line(&a.path),
                format!(
                    "application `{}`: path `{}` must be relative and stay inside the repository",
                    a.name.value, a.path.value
                ),
            );
        }
        check_ignore_rules(&a.ignore_differences, &mut problem);
        if !is_dns_label(&a.namespace.value) {
            problem(
                line(&a.namespace),
                format!("application `{}`: namespace `{}` must be a DNS-1123 label", a.name.value, a.namespace.value),
            );
        }
    }
    if !is_dns_label(&config.settings.status_namespace) {
        problem(0, format!("settings.statusNamespace `{}` must be a DNS-1123 label", config.settings.status_namespace));
    }
    out
}

fn check_ignore_rules(rules: &[super::IgnoreDifference], problem: &mut impl FnMut(u32, String)) {
    let line = |s: &Spanned<String>| s.referenced.line() as u32;
    for rule in rules {
        for g in rule.group.iter().chain(std::iter::once(&rule.kind)) {
            if let Err(e) = globset::Glob::new(g) {
                problem(0, format!("ignoreDifferences: `{g}` is not a valid glob: {e}"));
            }
        }
        for p in &rule.json_pointers {
            if !(p.value.is_empty() || p.value.starts_with('/')) {
                problem(line(p), format!("jsonPointer `{}` must start with `/` (RFC 6901)", p.value));
            }
        }
        for q in &rule.jq_path_expressions {
            if let Err(e) = crate::compare::jq::JqPath::compile(&q.value) {
                problem(line(q), e);
            }
        }
    }
}

/// RFC 1123 label: 1–63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::load_str;

    #[test]
    fn every_problem_is_listed_with_its_line() {
        let text = "\
repositories:
  - name: fleet
    url: https://git.example/fleet.git
environments:
  - name: dev
    syncPolicy: {automated: true, syncOptions: [Bogus=true]}
applications:
  - name: Web
    repository: nope
    path: ../etc
    namespace: web
    environment: prod
";
        let err = load_str(text, Path::new("dev.yaml"), Path::new(".")).expect_err("invalid");
        let msg = err.to_string();
        for want in [
            "dev.yaml:5: environment `dev`: unknown sync option `Bogus`",
            "dev.yaml:8: application name `Web` must be a DNS-1123 label",
            "dev.yaml:9: application `Web`: unknown repository `nope`",
            "dev.yaml:10: application `Web`: path `../etc` must be relative",
            "dev.yaml:12: application `Web`: unknown environment `prod`",
        ] {
            assert!(msg.contains(want), "missing `{want}` in:\n{msg}");
        }
    }

    #[test]
    fn commit_status_needs_a_token_file_and_a_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("forge-token"), "t\n").expect("write");
        let policy = |url: &str, token: &str| {
            format!(
                "repositories:\n  - name: fleet\n    url: {url}\n    commitStatus:\n      provider: gitea\n      tokenFile: {token}\n"
            )
        };
        // relative tokenFile resolved against the policy's directory; apiUrl derived
        let ok =
            load_str(&policy("https://git.example/acme/fleet.git", "forge-token"), Path::new("p.yaml"), dir.path())
                .expect("valid");
        let cs = ok.repositories[0].commit_status.as_ref().expect("commitStatus");
        assert_eq!(cs.token_file.value, dir.path().join("forge-token"));
        let msg = load_str(&policy("git@git.example:acme/fleet.git", "missing"), Path::new("p.yaml"), dir.path())
            .expect_err("invalid")
            .to_string();
        assert!(msg.contains("p.yaml:6: repository `fleet`: commitStatus.tokenFile"), "{msg}");
        assert!(msg.contains("p.yaml:5: repository `fleet`: commitStatus: API URL"), "{msg}");
        assert!(msg.contains("set commitStatus.apiUrl"), "{msg}");
    }

    #[test]
    fn the_shipped_examples_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let mut n = 0;
        for f in ["dev.yaml", "prod.yaml", "manual.yaml"] {
            let path = dir.join(f);
            let text = std::fs::read_to_string(&path).expect("example exists");
            // secret files of the examples are resolved against config/
            super::super::load_str(&text, &path, &dir).unwrap_or_else(|e| panic!("{f}: {e}"));
            n += 1;
        }
        assert_eq!(n, 3);
    }
}
