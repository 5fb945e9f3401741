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

/// What is wrong with the credentials of repository `r`: a `…SecretRef` given with
/// its file, an SSH key without pinned host keys.
fn secret_ref_problems(r: &super::Repository) -> Vec<String> {
    let both = [
        ("webhookSecretFile", r.webhook_secret_file.is_some(), "webhookSecretRef", r.webhook_secret_ref.is_some()),
        ("tokenFile", r.token_file.is_some(), "tokenSecretRef", r.token_secret_ref.is_some()),
        ("sshKeyFile", r.ssh_key_file.is_some(), "sshKeySecretRef", r.ssh_key_secret_ref.is_some()),
    ];
    let mut out: Vec<String> = both
        .iter()
        .filter(|(_, file, _, reference)| *file && *reference)
        .map(|(file, _, reference, _)| format!("repository `{}`: {file} and {reference}: give one", r.name.value))
        .collect();
    for (has, name) in [(r.ssh_key_file.is_some(), "sshKeyFile"), (r.ssh_key_secret_ref.is_some(), "sshKeySecretRef")] {
        if has && r.known_hosts_file.is_none() {
            out.push(format!("repository `{}`: {name} needs knownHostsFile (host keys are pinned)", r.name.value));
        }
    }
    out
}

/// Returns every problem of `config` (empty when it is valid).
///
/// Checks: names are DNS-1123 labels (application names become ConfigMap names and
/// tracking-ids; rule from the Kubernetes object-names documentation) and unique;
/// applications refer to existing repositories and environments; paths stay inside
/// the repository; revisions and URLs are not empty, carry no credentials and send no
/// token over plain `http://` without `insecure: true`; `sshKeyFile` comes with
/// `knownHostsFile`; secret files exist; `commitStatus` names an owner/repository and
/// an API URL (see [`super::CommitStatusConfig::destination`]); JSON pointers are RFC 6901; sync options
/// are `Name=value` with known names; health overrides have `rule` or `conditions`.
pub fn validate(config: &Config) -> Vec<Problem> {
    validate_with(config, true)
}

/// [`validate`]; with `files` false, without checking that secret files exist (the
/// commands that read only the cluster or render on a laptop, where the in-cluster
/// paths such as `/etc/plumb/secrets/…` are not present).
pub fn validate_with(config: &Config, files: bool) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut problem = |line: u32, message: String| {
        out.push(Problem { file: config.file.clone(), line, message });
    };
    let repos = check_repositories(config, files, &mut problem);
    let envs = check_environments(config, &mut problem);
    check_applications(config, (&repos, &envs), &mut problem);
    check_verify_commits(config, files, &mut problem);
    for (at, m) in config.notifications.problems(files) {
        problem(at, m);
    }
    check_routes(config, &envs, &mut problem);
    if !is_dns_label(&config.settings.status_namespace) {
        problem(0, format!("settings.statusNamespace `{}` must be a DNS-1123 label", config.settings.status_namespace));
    }
    if let Some(ns) = config.settings.lease_namespace.as_deref().filter(|ns| !is_dns_label(ns)) {
        problem(0, format!("settings.leaseNamespace `{ns}` must be a DNS-1123 label"));
    }
    out
}

/// What is valid but weakens a boundary, one line each (`plumb validate` prints them
/// as warnings): applications of different namespaces sharing one SOPS key file
/// (`source.sops.ageKeyFile`), so that a SOPS file written for one decrypts for the
/// other — give each team its own key (see [`crate::render::sops`]); and another
/// application reading the `selfManagement` application's repository and revision
/// while no `verifyCommits` covers the latter ([`shared_self_repository`]).
pub fn warnings(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(shared_self_repository(config));
    out.extend(shared_sops_keys(config));
    out.extend(in_lease_namespace(config));
    out
}

/// Applications (but the self application) whose namespace is `settings.leaseNamespace`:
/// every object of theirs there is refused (rule 1 of [`crate::plan::Boundary`]).
fn in_lease_namespace(config: &Config) -> Vec<String> {
    let Some(leases) = config.settings.lease_namespace.as_ref().filter(|l| **l != config.settings.status_namespace)
    else {
        return Vec::new();
    };
    config
        .applications
        .iter()
        .filter(|a| !a.self_management && a.namespace.value == *leases)
        .map(|a| {
            format!(
                "application `{}`: namespace `{leases}` holds plumb's Leases (settings.leaseNamespace): Git never writes there, every object of it there is refused",
                a.name.value
            )
        })
        .collect()
}

/// The `selfManagement` application's repository and revision read by other
/// applications (or applicationSet templates), while neither it nor its environment
/// sets `verifyCommits`: forges grant push per repository and branch, not per path, so
/// the authors of those applications can push to plumb's installation too.
fn shared_self_repository(config: &Config) -> Option<String> {
    let own = config.applications.iter().find(|a| a.self_management)?;
    let env = config.environments.iter().find(|e| e.name.value == own.environment.value)?;
    if own.verify_commits(env).is_some() {
        return None;
    }
    let same =
        |a: &super::Application| a.repository.value == own.repository.value && a.revision.value == own.revision.value;
    let others: Vec<String> = config
        .applications
        .iter()
        .filter(|a| !a.self_management && same(a))
        .map(|a| format!("`{}`", a.name.value))
        .chain(
            config
                .application_sets
                .iter()
                .filter(|s| same(&s.template))
                .map(|s| format!("applicationSet `{}`", s.name.value)),
        )
        .collect();
    (!others.is_empty()).then(|| {
        format!(
            "application `{}` (selfManagement) reads repository `{}` at `{}`, like {}: whoever can push there for them controls plumb's installation (push rights are per repository and branch, not per path); keep plumb's installation in a repository of its own, or set verifyCommits on environment `{}`",
            own.name.value,
            own.repository.value,
            own.revision.value,
            others.join(", "),
            env.name.value
        )
    })
}

/// Applications of different namespaces sharing one SOPS key file.
fn shared_sops_keys(config: &Config) -> Vec<String> {
    let mut by_key: std::collections::BTreeMap<&std::path::Path, Vec<(&str, &str)>> = Default::default();
    for a in &config.applications {
        if let Some(k) = &a.source.sops {
            by_key.entry(k.age_key_file.as_path()).or_default().push((&a.name.value, &a.namespace.value));
        }
    }
    let mut out = Vec::new();
    for (key, apps) in by_key {
        let namespaces: HashSet<&str> = apps.iter().map(|(_, ns)| *ns).collect();
        if namespaces.len() > 1 {
            let list: Vec<String> = apps.iter().map(|(a, ns)| format!("{a} ({ns})")).collect();
            out.push(format!(
                "source.sops.ageKeyFile {} is shared by applications of different namespaces: {}; a SOPS file encrypted for it decrypts for each of them (give each its own key)",
                key.display(),
                list.join(", ")
            ));
        }
    }
    out
}

/// Routes of `notifications:` naming an environment that does not exist, or an
/// application that does not (only when no applicationSet may generate it later): a
/// typo would silence the route.
fn check_routes(config: &Config, envs: &HashSet<&str>, problem: &mut impl FnMut(u32, String)) {
    let apps: HashSet<&str> = config.applications.iter().map(|a| a.name.value.as_str()).collect();
    for (i, r) in config.notifications.routes.iter().enumerate() {
        let at = r.providers.first().map_or(0, |p| p.referenced.line() as u32);
        for e in r.environments.iter().filter(|e| !envs.contains(e.as_str())) {
            problem(at, format!("notifications: routes[{i}]: no environment named `{e}`"));
        }
        if config.application_sets.is_empty() {
            for a in r.applications.iter().filter(|a| !apps.contains(a.as_str())) {
                problem(at, format!("notifications: routes[{i}]: no application named `{a}`"));
            }
        }
    }
}

/// The line a value was read from.
fn line(s: &Spanned<String>) -> u32 {
    s.referenced.line() as u32
}

/// The repositories' problems (with `files`: their files must exist); returns their
/// names.
fn check_repositories<'a>(config: &'a Config, files: bool, problem: &mut impl FnMut(u32, String)) -> HashSet<&'a str> {
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
        for p in super::repo_url::problems(
            &r.name.value,
            &r.url.value,
            r.token_file.is_some() || r.token_secret_ref.is_some(),
            r.insecure,
        ) {
            problem(line(&r.url), p);
        }
        for m in secret_ref_problems(r) {
            problem(line(&r.name), m);
        }
        for f in [&r.webhook_secret_file, &r.token_file, &r.ssh_key_file, &r.known_hosts_file].into_iter().flatten() {
            if files && !f.value.is_file() {
                problem(
                    f.referenced.line() as u32,
                    format!(
                        "repository `{}`: file {} does not exist (a policy for the cluster, whose secrets are mounted in plumb's pod: `plumb validate --skip-files`)",
                        r.name.value,
                        f.value.display()
                    ),
                );
            }
        }
        if let Some(cs) = &r.commit_status {
            if files && !cs.token_file.value.is_file() {
                problem(
                    cs.token_file.referenced.line() as u32,
                    format!(
                        "repository `{}`: commitStatus.tokenFile {} does not exist",
                        r.name.value,
                        cs.token_file.value.display()
                    ),
                );
            }
            match cs.destination(&r.url.value) {
                Err(e) => problem(
                    cs.provider.referenced.line() as u32,
                    format!("repository `{}`: commitStatus: {e}", r.name.value),
                ),
                Ok(d) if d.api_url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) && !r.insecure => {
                    problem(
                        cs.provider.referenced.line() as u32,
                        format!(
                            "repository `{}`: commitStatus: API URL {} would send the token unencrypted: use https://, or set insecure: true",
                            r.name.value,
                            super::repo_url::redact(&d.api_url)
                        ),
                    )
                }
                Ok(_) => {}
            }
        }
    }
    repos
}

/// The environments' problems; returns their names.
fn check_environments<'a>(config: &'a Config, problem: &mut impl FnMut(u32, String)) -> HashSet<&'a str> {
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
            if let Err(m) = super::check_sync_option(opt) {
                problem(line(&e.name), format!("environment `{}`: {m}", e.name.value));
            }
        }
        check_ignore_rules(&e.ignore_differences, problem);
        check_sensitive_fields(&e.sensitive_fields, problem);
        for m in sync_policy_problems(e) {
            problem(line(&e.name), format!("environment `{}`: {m}", e.name.value));
        }
        for o in &e.health.overrides {
            if let Some(m) = health_override_problem(o) {
                problem(line(&o.kind), format!("environment `{}`: {m}", e.name.value));
            }
        }
        if let Some(m) = deletion_policy_problem(e.deletion_policy.as_ref()) {
            problem(e.deletion_policy.as_ref().map_or(0, line), format!("environment `{}`: {m}", e.name.value));
        }
        if let Err(problems) = super::compile_windows(&e.sync_windows) {
            for (at, m) in problems {
                problem(if at > 0 { at } else { line(&e.name) }, format!("environment `{}`: {m}", e.name.value));
            }
        }
    }
    envs
}

/// The applications' problems, given the names of the repositories and environments.
fn check_applications(
    config: &Config,
    (repos, envs): (&HashSet<&str>, &HashSet<&str>),
    problem: &mut impl FnMut(u32, String),
) {
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
        for m in a.source.problems() {
            problem(line(&a.name), format!("application `{}`: {m}", a.name.value));
        }
        check_ignore_rules(&a.ignore_differences, problem);
        for o in &a.health_overrides {
            if let Some(m) = health_override_problem(o) {
                problem(line(&o.kind), format!("application `{}`: {m}", a.name.value));
            }
        }
        if !is_dns_label(&a.namespace.value) {
            problem(
                line(&a.namespace),
                format!("application `{}`: namespace `{}` must be a DNS-1123 label", a.name.value, a.namespace.value),
            );
        }
        if let Some(m) = deletion_policy_problem(a.deletion_policy.as_ref()) {
            problem(a.deletion_policy.as_ref().map_or(0, line), format!("application `{}`: {m}", a.name.value));
        }
        for m in trust_problems(config, a) {
            problem(line(&a.name), format!("application `{}`: {m}", a.name.value));
        }
    }
    check_depends_on(config, problem);
    check_self_management(config, problem);
}

/// `selfManagement` ([`super::Application::self_management`]): at most one application,
/// declared under `applications:` (an applicationSet's template may not set it), in
/// plumb's own namespace (`settings.statusNamespace`), with deletion policy `orphan` (its
/// decommission must not delete plumb's installation).
fn check_self_management(config: &Config, problem: &mut impl FnMut(u32, String)) {
    let own = &config.settings.status_namespace;
    let mut first: Option<&str> = None;
    for a in config.applications.iter().filter(|a| a.self_management) {
        let name = a.name.value.as_str();
        if let Some(set) = &a.application_set {
            problem(
                line(&a.name),
                format!(
                    "application `{name}`: selfManagement is not for generated applications (applicationSet `{set}`)"
                ),
            );
            continue;
        }
        match first {
            Some(other) => problem(
                line(&a.name),
                format!(
                    "application `{name}`: selfManagement: `{other}` already manages plumb's installation; at most one application may"
                ),
            ),
            None => first = Some(name),
        }
        if a.namespace.value != *own {
            problem(
                line(&a.namespace),
                format!(
                    "application `{name}`: selfManagement needs namespace `{own}`, plumb's own (settings.statusNamespace), not `{}`",
                    a.namespace.value
                ),
            );
        }
        let env = config.environments.iter().find(|e| e.name.value == a.environment.value);
        if let Some(env) = env
            && a.deletion_policy(env) != super::DeletionPolicy::Orphan
        {
            let at = a.deletion_policy.as_ref().or(env.deletion_policy.as_ref()).map_or(line(&a.name), line);
            problem(
                at,
                format!(
                    "application `{name}`: selfManagement needs deletionPolicy `orphan` (leaving the policy must not delete plumb's installation), not `{}`",
                    a.deletion_policy(env).as_str()
                ),
            );
        }
    }
    for s in config.application_sets.iter().filter(|s| s.template.self_management) {
        problem(
            line(&s.template.name),
            format!("applicationSet `{}`: selfManagement is not for a template", s.name.value),
        );
    }
}

/// `verifyCommits` of environments and applications (see [`super::VerifyCommits`]): keys
/// named, and with `files` the key files parse; mode `tag` on a revision that is a
/// commit id cannot be met.
fn check_verify_commits(config: &Config, files: bool, problem: &mut impl FnMut(u32, String)) {
    for e in &config.environments {
        for (at, m) in e.verify_commits.iter().flat_map(|v| v.problems(files)) {
            problem(if at > 0 { at } else { line(&e.name) }, format!("environment `{}`: {m}", e.name.value));
        }
    }
    for a in &config.applications {
        for (at, m) in a.verify_commits.iter().flat_map(|v| v.problems(files)) {
            problem(if at > 0 { at } else { line(&a.name) }, format!("application `{}`: {m}", a.name.value));
        }
        let env = config.environments.iter().find(|e| e.name.value == a.environment.value);
        let tag_mode = env.and_then(|e| a.verify_commits(e)).is_some_and(|v| v.mode == super::VerifyMode::Tag);
        let rev = &a.revision.value;
        if tag_mode && rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
            problem(
                line(&a.revision),
                format!(
                    "application `{}`: verifyCommits mode tag needs a tag as revision, not the commit {rev}",
                    a.name.value
                ),
            );
        }
    }
}

/// `dependsOn`: every name is a declared application other than itself, and the graph
/// has no cycle (the cycle named, at the line of the entry that closes it).
fn check_depends_on(config: &Config, problem: &mut impl FnMut(u32, String)) {
    let names: HashSet<&str> = config.applications.iter().map(|a| a.name.value.as_str()).collect();
    let mut graph = std::collections::BTreeMap::new();
    for a in &config.applications {
        for d in &a.depends_on {
            if !names.contains(d.value.as_str()) {
                problem(
                    line(d),
                    format!("application `{}`: dependsOn names unknown application `{}`", a.name.value, d.value),
                );
            }
        }
        graph.insert(a.name.value.as_str(), a.depends_on.iter().map(|d| d.value.as_str()).collect::<Vec<_>>());
    }
    if let Some(cycle) = super::graph::cycle(&graph) {
        let (first, second) = (cycle[0].as_str(), cycle.get(1).map_or("", String::as_str));
        let at = config
            .applications
            .iter()
            .find(|a| a.name.value == first)
            .and_then(|a| a.depends_on.iter().find(|d| d.value == second))
            .map_or(0, line);
        problem(at, format!("application `{first}`: dependsOn makes a cycle: {}", cycle.join(" → ")));
    }
}

/// What is wrong with a `deletionPolicy` value: anything but `orphan`, `delete`,
/// `wait` (see [`super::DeletionPolicy`]).
fn deletion_policy_problem(p: Option<&Spanned<String>>) -> Option<String> {
    let p = p?;
    super::DeletionPolicy::parse(&p.value)
        .is_none()
        .then(|| format!("deletionPolicy `{}` must be one of orphan, delete, wait", p.value))
}

/// What is wrong with an environment's sync policy limits, takeover list and
/// orphaned-resources globs.
fn sync_policy_problems(e: &super::Environment) -> Vec<String> {
    let mut out = Vec::new();
    if e.sync_policy.max_prune_percent.is_some_and(|p| p == 0 || p > 100) {
        out.push("maxPrunePercent must be 1–100".to_string());
    }
    for m in &e.sync_policy.take_over_managers {
        if m.trim().is_empty() || m == crate::FIELD_MANAGER {
            out.push(format!("takeOverManagers: `{m}` is not another tool's field manager"));
        }
    }
    for i in &e.orphaned_resources.ignore {
        for g in [&i.group, &i.kind, &i.name].into_iter().flatten() {
            if let Err(err) = globset::Glob::new(g) {
                out.push(format!("orphanedResources.ignore: `{g}` is not a valid glob: {err}"));
            }
        }
    }
    out
}

/// What is wrong with what application `a` may write: its boundaries and the
/// ServiceAccount its writes impersonate.
fn trust_problems(config: &Config, a: &super::Application) -> Vec<String> {
    let mut out = Vec::new();
    let own = &config.settings.status_namespace;
    let env = config.environments.iter().find(|e| e.name.value == a.environment.value);
    if let Some(env) = env {
        out.extend(boundary_problems(&a.boundaries(env), &a.namespace.value, own));
    }
    for name in a.service_account_name.iter().chain(env.and_then(|e| e.service_account_name.as_ref())) {
        if !is_dns_subdomain(name) {
            out.push(format!("serviceAccountName `{name}` is not a ServiceAccount name"));
        }
    }
    out
}

/// Whether `s` is a DNS-1123 subdomain (a ServiceAccount's name): dot-separated
/// labels, at most 253 characters.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// What is wrong with an application's boundaries: a glob that does not compile, or
/// its own namespace outside its destinations.
fn boundary_problems(b: &super::Boundaries, app_namespace: &str, own: &str) -> Vec<String> {
    let mut out = Vec::new();
    let kinds = b.cluster_resources.iter().flatten().chain(b.namespace_resources.iter().flat_map(|n| &n.deny));
    let globs = b.destinations.iter().flat_map(|d| &d.namespaces).chain(kinds.flat_map(|gk| [&gk.group, &gk.kind]));
    for g in globs {
        if let Err(e) = globset::Glob::new(g) {
            out.push(format!("boundaries: `{g}` is not a valid glob: {e}"));
        }
    }
    if out.is_empty() && app_namespace == own && !b.self_management {
        out.push(format!(
            "namespace `{own}` is plumb's own (settings.statusNamespace): Git may never write there (but the application with selfManagement: true, plumb's own installation)"
        ));
    }
    out
}

fn check_sensitive_fields(rules: &[super::SensitiveFields], problem: &mut impl FnMut(u32, String)) {
    let line = |s: &Spanned<String>| s.referenced.line() as u32;
    for rule in rules {
        for g in rule.group.iter().chain(std::iter::once(&rule.kind.value)) {
            if let Err(e) = globset::Glob::new(g) {
                problem(line(&rule.kind), format!("sensitiveFields: `{g}` is not a valid glob: {e}"));
            }
        }
        if rule.kind.value.trim().is_empty() {
            problem(line(&rule.kind), "sensitiveFields: the kind is empty".into());
        }
        if rule.json_pointers.is_empty() {
            problem(line(&rule.kind), format!("sensitiveFields for {}: jsonPointers is empty", rule.kind.value));
        }
        for p in &rule.json_pointers {
            if !p.value.starts_with('/') {
                problem(
                    line(p),
                    format!(
                        "sensitiveFields: jsonPointer `{}` must start with `/` (RFC 6901) and name a field",
                        p.value
                    ),
                );
            }
        }
    }
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
            if let Err(e) = super::jq::JqPath::compile(&q.value) {
                problem(line(q), e);
            }
        }
    }
}

/// What is wrong with one health override: it needs exactly one of `rule` or
/// `conditions`, a kind, and a `Missing` health means nothing for a present object.
fn health_override_problem(o: &super::HealthOverride) -> Option<String> {
    let what = format!("health override for {}", o.kind.value);
    if o.kind.value.trim().is_empty() {
        return Some("health override with an empty kind".into());
    }
    match (o.rule.is_some(), o.conditions.is_empty()) {
        (true, false) => return Some(format!("{what}: give either `rule` or `conditions`, not both")),
        (false, true) => return Some(format!("{what}: needs `rule` or `conditions`")),
        _ => {}
    }
    if o.rule.is_some() && o.otherwise.is_some() {
        return Some(format!("{what}: `otherwise` goes with `conditions`"));
    }
    let missing = o.conditions.iter().map(|c| c.health).chain(o.otherwise).any(|h| h == super::HealthStatus::Missing);
    missing.then(|| format!("{what}: `Missing` is not a health of an existing object"))
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
    syncPolicy: {automated: true, syncOptions: [Bogus=true, Prune=maybe, ServerSideApply=false]}
    orphanedResources: {warn: true, ignore: [{kind: 'Secret[', name: ok}]}
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
            "dev.yaml:5: environment `dev`: sync option `Prune=maybe`: value must be one of true, false, confirm",
            "dev.yaml:5: environment `dev`: sync option `ServerSideApply` is not offered",
            "dev.yaml:5: environment `dev`: orphanedResources.ignore: `Secret[` is not a valid glob",
            "dev.yaml:9: application name `Web` must be a DNS-1123 label",
            "dev.yaml:10: application `Web`: unknown repository `nope`",
            "dev.yaml:11: application `Web`: path `../etc` must be relative",
            "dev.yaml:13: application `Web`: unknown environment `prod`",
        ] {
            assert!(msg.contains(want), "missing `{want}` in:\n{msg}");
        }
    }

    #[test]
    fn a_deletion_policy_is_one_of_three_words_with_its_line() {
        let text = "\
repositories:
  - {name: fleet, url: https://git.example/fleet.git}
environments:
  - name: dev
    deletionPolicy: remove
  - name: prod
    deletionPolicy: delete
applications:
  - {name: web, repository: fleet, namespace: web, environment: dev, deletionPolicy: wait}
  - {name: api, repository: fleet, namespace: api, environment: prod}
  - {name: db, repository: fleet, namespace: db, environment: prod,
     deletionPolicy: Delete}
";
        let msg = load_str(text, Path::new("p.yaml"), Path::new(".")).expect_err("invalid").to_string();
        assert!(
            msg.contains("p.yaml:5: environment `dev`: deletionPolicy `remove` must be one of orphan, delete, wait"),
            "{msg}"
        );
        assert!(msg.contains("p.yaml:12: application `db`: deletionPolicy `Delete` must be one of"), "{msg}");
        assert_eq!(msg.matches("deletionPolicy").count(), 2, "{msg}");
        let good = text.replace("remove", "orphan").replace("Delete}", "delete}");
        let config = load_str(&good, Path::new("p.yaml"), Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
        let policy = |app: &str| {
            let a = config.applications.iter().find(|a| a.name.value == app).unwrap_or_else(|| panic!("{app}"));
            let e = config
                .environments
                .iter()
                .find(|e| e.name.value == a.environment.value)
                .unwrap_or_else(|| panic!("env"));
            a.deletion_policy(e)
        };
        use crate::config::DeletionPolicy;
        assert_eq!(policy("web"), DeletionPolicy::Wait, "the application's own wins");
        assert_eq!(policy("api"), DeletionPolicy::Delete, "the environment's default");
        assert_eq!(policy("db"), DeletionPolicy::Delete);
    }

    /// `syncWindows`: each bad field with its line.
    #[test]
    fn sync_windows_are_validated_with_their_line() {
        let text = "\
environments:
  - name: prod
    syncWindows:
      - kind: deny
        schedule: '0 9 * * 8'
        duration: 1h
      - {kind: allow, schedule: '0 22 * * *', duration: 0s, timeZone: Europe/Berlin}
      - kind: allow
        schedule: '0 22 * * *'
        duration: 2h
        timeZone: Europe/Nowhere
      - {kind: deny, schedule: '0 0 30 2 *', duration: 1h}
      - {kind: deny, schedule: '0 0 29 2 *', duration: 1h}
";
        let msg = load_str(text, Path::new("w.yaml"), Path::new(".")).expect_err("invalid").to_string();
        for want in [
            "w.yaml:5: environment `prod`: syncWindows[1]: schedule `0 9 * * 8` is not a cron expression",
            "w.yaml:7: environment `prod`: syncWindows[2]: duration `0s` must be a positive duration",
            "w.yaml:11: environment `prod`: syncWindows[3]: timeZone `Europe/Nowhere` is not an IANA time zone",
            "w.yaml:12: environment `prod`: syncWindows[4]: schedule `0 0 30 2 *` does not start within 3000 days",
        ] {
            assert!(msg.contains(want), "missing `{want}` in:\n{msg}");
        }
        assert!(!msg.contains("syncWindows[5]"), "February 29 comes: {msg}");
    }

    /// `dependsOn`: unknown names and cycles, each with its line; the cycle named.
    #[test]
    fn depends_on_names_known_applications_without_a_cycle() {
        let text = "\
repositories: [{name: r, url: https://git.example/fleet.git}]
environments: [{name: dev}]
applications:
  - {name: a, repository: r, namespace: a, environment: dev, dependsOn: [b]}
  - {name: b, repository: r, namespace: b, environment: dev, dependsOn: [c]}
  - name: c
    repository: r
    namespace: c
    environment: dev
    dependsOn:
      - nope
      - a
  - {name: ok, repository: r, namespace: ok, environment: dev, dependsOn: [a]}
";
        let msg = load_str(text, Path::new("d.yaml"), Path::new(".")).expect_err("invalid").to_string();
        for want in [
            "d.yaml:11: application `c`: dependsOn names unknown application `nope`",
            "d.yaml:4: application `a`: dependsOn makes a cycle: a → b → c → a",
        ] {
            assert!(msg.contains(want), "missing `{want}` in:\n{msg}");
        }
        let fine = text
            .replace("      - nope\n      - a\n", "      - ok2\n")
            .replace("ok2", "b")
            .replace("dependsOn: [c]", "dependsOn: []");
        assert!(load_str(&fine, Path::new("d.yaml"), Path::new(".")).is_ok(), "{fine}");
    }

    /// Issue 12: `sensitiveFields` rules are checked with the line of the bad field.
    #[test]
    fn sensitive_fields_are_validated_with_their_line() {
        let text = "\
environments:
  - name: dev
    sensitiveFields:
      - {group: db.example.com, kind: Database, jsonPointers: [/spec/password]}
      - kind: Widget
        jsonPointers:
          - spec/token
          - ''
      - {kind: 'Gadget[', jsonPointers: [/a]}
      - {kind: Empty, jsonPointers: []}
";
        let msg = load_str(text, Path::new("s.yaml"), Path::new(".")).expect_err("invalid").to_string();
        for want in [
            "s.yaml:7: sensitiveFields: jsonPointer `spec/token` must start with `/`",
            "s.yaml:8: sensitiveFields: jsonPointer `` must start with `/`",
            "s.yaml:9: sensitiveFields: `Gadget[` is not a valid glob",
            "s.yaml:10: sensitiveFields for Empty: jsonPointers is empty",
        ] {
            assert!(msg.contains(want), "missing `{want}` in:\n{msg}");
        }
        assert!(!msg.contains("Database"), "the good rule is fine: {msg}");
        let ok =
            "environments:\n  - name: dev\n    sensitiveFields: [{kind: Database, jsonPointers: [/spec/password]}]\n";
        let config = load_str(ok, Path::new("s.yaml"), Path::new(".")).expect("valid");
        assert_eq!(config.environments[0].sensitive_fields[0].json_pointers[0].value, "/spec/password");
    }

    #[test]
    fn a_parse_error_names_its_position_once() {
        let text = "environments:\n  - name: dev\n    syncPolicy: {prun: true}\n";
        let msg = load_str(text, Path::new("bad.yaml"), Path::new(".")).expect_err("unknown key").to_string();
        assert!(msg.starts_with("bad.yaml:3:") && msg.contains("prun") && !msg.contains("line 3"), "{msg}");
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

    /// Issue 12: a token belongs in `tokenFile`, never in the URL, and never goes over
    /// plain http without `insecure: true`; the message quotes no credential.
    #[test]
    fn credentials_in_urls_and_clear_text_tokens_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("token"), "t\n").expect("write");
        let policy = |url: &str, extra: &str| format!("repositories:\n  - name: fleet\n    url: {url}\n{extra}");
        let err = |text: String| load_str(&text, Path::new("p.yaml"), dir.path()).expect_err("invalid").to_string();
        let msg = err(policy("https://oauth2:ghp_s3cret@github.com/acme/fleet.git", ""));
        assert!(
            msg.contains("p.yaml:3: repository `fleet`: url https://github.com/acme/fleet.git carries credentials"),
            "{msg}"
        );
        assert!(msg.contains("tokenFile") && !msg.contains("ghp_s3cret"), "{msg}");
        let msg = err(policy("http://git.lab/acme/fleet.git", "    tokenFile: token\n"));
        assert!(msg.contains("p.yaml:3: repository `fleet`: tokenFile with an http:// url"), "{msg}");
        let msg = err(policy(
            "http://git.lab/acme/fleet.git",
            "    commitStatus: {provider: gitea, tokenFile: token, targetUrl: https://x.example}\n",
        ));
        assert!(msg.contains("commitStatus: API URL http://git.lab/api/v1 would send the token unencrypted"), "{msg}");
        for ok in [
            policy("http://git.lab/acme/fleet.git", "    tokenFile: token\n    insecure: true\n"),
            policy("https://git.lab/acme/fleet.git", "    tokenFile: token\n"),
        ] {
            load_str(&ok, Path::new("p.yaml"), dir.path()).expect("valid");
        }
    }

    #[test]
    fn health_policy_is_read_and_overrides_checked() {
        let text = "\
repositories:
  - name: fleet
    url: https://git.example/fleet.git
environments:
  - name: dev
    health:
      stallAfter: 2m
      podRestartLimit: 5
      overrides:
        - group: networking.k8s.io
          kind: Ingress
          match: {ingressClassName: internal-nginx}
          rule: healthy-when-present
        - kind: Widget
        - kind: Gadget
          rule: healthy-when-present
          conditions: [{type: Ready, health: Healthy}]
applications:
  - name: web
    repository: fleet
    namespace: web
    environment: dev
    healthOverrides:
      - kind: Thing
        conditions: [{type: Ready, status: \"False\", health: Missing}]
";
        let err = load_str(text, Path::new("dev.yaml"), Path::new(".")).expect_err("invalid");
        let msg = err.to_string();
        for want in [
            "dev.yaml:14: environment `dev`: health override for Widget: needs `rule` or `conditions`",
            "dev.yaml:15: environment `dev`: health override for Gadget: give either `rule` or `conditions`, not both",
            "dev.yaml:24: application `web`: health override for Thing: `Missing` is not a health of an existing object",
        ] {
            assert!(msg.contains(want), "missing `{want}` in:\n{msg}");
        }
        let valid: String = text.lines().take(13).chain(["applications: []"]).map(|l| format!("{l}\n")).collect();
        let config = load_str(&valid, Path::new("dev.yaml"), Path::new(".")).expect("valid");
        let health = &config.environments[0].health;
        assert_eq!(health.stall_after, Some(std::time::Duration::from_secs(120)));
        assert_eq!(health.pod_restart_limit, Some(5));
        assert_eq!(health.overrides[0].match_fields["ingressClassName"], serde_json::json!("internal-nginx"));
        // The thresholds health builds from this block: `health::tests::settings_from_a_loaded_policy`.
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

    /// Keys per application: a key file shared by applications of different namespaces
    /// is a warning naming it and them; a relative key file is resolved against the
    /// policy file's directory, like every file of the policy.
    #[test]
    fn a_key_file_shared_across_namespaces_is_a_warning() {
        let text = "\
repositories: [{name: fleet, url: https://git.example/fleet.git}]
environments: [{name: dev}]
applications:
  - {name: a, repository: fleet, path: apps/a, namespace: team-a, environment: dev, source: {sops: {ageKeyFile: keys/shared.key}}}
  - {name: b, repository: fleet, path: apps/b, namespace: team-b, environment: dev, source: {sops: {ageKeyFile: keys/shared.key}}}
  - {name: b2, repository: fleet, path: apps/b2, namespace: team-b, environment: dev, source: {sops: {ageKeyFile: /etc/plumb/b.key}}}
  - {name: b3, repository: fleet, path: apps/b3, namespace: team-b, environment: dev, source: {sops: {ageKeyFile: /etc/plumb/b.key}}}
";
        let config = load_str(text, Path::new("/etc/plumb/policy.yaml"), Path::new("/etc/plumb")).expect("valid");
        let key = |i: usize| config.applications[i].source.sops.as_ref().map(|k| k.age_key_file.clone());
        assert_eq!(key(0), Some("/etc/plumb/keys/shared.key".into()), "relative to the policy file");
        assert_eq!(key(2), Some("/etc/plumb/b.key".into()));
        assert_eq!(
            super::warnings(&config),
            [
                "source.sops.ageKeyFile /etc/plumb/keys/shared.key is shared by applications of different namespaces: a (team-a), b (team-b); a SOPS file encrypted for it decrypts for each of them (give each its own key)"
            ]
        );
    }

    /// An application in `settings.leaseNamespace` is a warning (each of its objects will
    /// be refused); a leaseNamespace that is not a namespace's name is an error.
    #[test]
    fn an_application_in_the_lease_namespace_is_a_warning() {
        let policy = |leases: &str| {
            format!(
                "settings: {{statusNamespace: plumb-system, leaseNamespace: {leases}}}
repositories: [{{name: fleet, url: https://git.example/fleet.git}}]
environments: [{{name: prod}}]
applications:
  - {{name: web, repository: fleet, path: apps/web, namespace: web, environment: prod}}
  - {{name: grab, repository: fleet, path: apps/grab, namespace: plumb-leases, environment: prod}}
"
            )
        };
        let config = load_str(&policy("plumb-leases"), Path::new("p.yaml"), Path::new(".")).expect("valid");
        assert_eq!(
            super::warnings(&config),
            [
                "application `grab`: namespace `plumb-leases` holds plumb's Leases (settings.leaseNamespace): Git never writes there, every object of it there is refused"
            ]
        );
        let err = load_str(&policy("Not_A_Name"), Path::new("p.yaml"), Path::new(".")).expect_err("invalid");
        assert!(err.to_string().contains("settings.leaseNamespace `Not_A_Name` must be a DNS-1123 label"), "{err}");
    }

    /// Another application reading the self application's repository and revision is a
    /// warning, unless verifyCommits covers the self application.
    #[test]
    fn sharing_the_self_applications_repository_is_a_warning() {
        let policy = |env: &str, web_revision: &str| {
            format!(
                "settings: {{statusNamespace: plumb-system}}
repositories: [{{name: fleet, url: https://git.example/fleet.git}}]
environments: [{{name: plumb{env}}}, {{name: prod}}]
applications:
  - {{name: plumb, repository: fleet, revision: main, path: clusters/a, namespace: plumb-system, environment: plumb, selfManagement: true}}
  - {{name: web, repository: fleet, revision: {web_revision}, path: apps/web, namespace: web, environment: prod}}
"
            )
        };
        let load = |text: &str| load_str(text, Path::new("p.yaml"), Path::new(".")).expect("valid");
        assert_eq!(
            super::warnings(&load(&policy("", "main"))),
            [
                "application `plumb` (selfManagement) reads repository `fleet` at `main`, like `web`: whoever can push there for them controls plumb's installation (push rights are per repository and branch, not per path); keep plumb's installation in a repository of its own, or set verifyCommits on environment `plumb`"
            ]
        );
        assert!(super::warnings(&load(&policy("", "other"))).is_empty(), "another branch");
        let verified = ", verifyCommits: {allowedSignersRef: {name: plumb-signers, key: allowed_signers}}";
        assert!(super::warnings(&load(&policy(verified, "main"))).is_empty(), "verified commits");
    }

    /// `selfManagement`: one application, in plumb's namespace, deletion policy
    /// `orphan`, not from a template; any other application in plumb's namespace is
    /// still refused.
    #[test]
    fn self_management_is_one_application_in_plumbs_namespace() {
        let head = "\
settings: {statusNamespace: plumb-system}
repositories: [{name: fleet, url: https://git.example/fleet.git}]
environments: [{name: e}, {name: d, deletionPolicy: delete}]
applications:
  - {name: plumb, repository: fleet, path: clusters/a, namespace: plumb-system, environment: e, selfManagement: true}
";
        load_str(head, Path::new("p.yaml"), Path::new(".")).expect("one self application is valid");
        let more = "  - {name: second, repository: fleet, path: clusters/b, namespace: plumb-system, environment: e, selfManagement: true}
  - {name: elsewhere, repository: fleet, path: x, namespace: web, environment: e, selfManagement: true}
  - {name: deleting, repository: fleet, path: y, namespace: plumb-system, environment: d, selfManagement: true}
  - {name: intruder, repository: fleet, path: z, namespace: plumb-system, environment: e}
applicationSets:
  - name: sets
    generator: {list: {elements: [{n: a}]}}
    template: {name: 'x-{{n}}', repository: fleet, path: p, namespace: plumb-system, environment: e, selfManagement: true}
";
        let msg =
            load_str(&format!("{head}{more}"), Path::new("p.yaml"), Path::new(".")).expect_err("invalid").to_string();
        for want in [
            "p.yaml:6: application `second`: selfManagement: `plumb` already manages plumb's installation; at most one application may",
            "p.yaml:7: application `elsewhere`: selfManagement needs namespace `plumb-system`, plumb's own (settings.statusNamespace), not `web`",
            "p.yaml:3: application `deleting`: selfManagement needs deletionPolicy `orphan` (leaving the policy must not delete plumb's installation), not `delete`",
            "p.yaml:9: application `intruder`: namespace `plumb-system` is plumb's own (settings.statusNamespace): Git may never write there",
            "applicationSet `sets`: selfManagement is not for a template",
        ] {
            assert!(msg.contains(want), "missing `{want}` in:\n{msg}");
        }
    }
}
