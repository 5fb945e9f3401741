//! ApplicationSets: many applications from one template (Argo CD's ApplicationSet,
//! simpler). An entry of `applicationSets:` has a `name`, one `generator` and an
//! application `template`; the generator yields one set of values per application and
//! every `{{key}}` in the template's string fields is replaced by the value of `key`.
//!
//! ```yaml
//! applicationSets:
//!   - name: services
//!     generator:
//!       list:
//!         elements: [{name: web, team: a}, {name: api, team: b}]
//!     template: {name: "{{name}}", namespace: "team-{{team}}", repository: fleet,
//!                path: "apps/{{name}}", environment: dev}
//!   - name: apps
//!     generator:
//!       directories: {repository: fleet, revision: main, include: ["apps/*"], exclude: ["apps/legacy"]}
//!     template: {name: "{{path.basename}}", namespace: "{{path.basename}}", repository: fleet,
//!                path: "{{path}}", environment: dev}
//! ```
//!
//! - **list**: one application per element; the placeholders are the element's keys.
//! - **directories**: one application per directory of the repository's commit at
//!   `revision` whose path matches an `include` glob and no `exclude` glob (`*` and `?`
//!   stay inside one path segment); placeholders `{{path}}` (`apps/web`) and
//!   `{{path.basename}}` (`web`). The directories are read from plumb's Git mirror by
//!   the caller ([`Listing`]): this module is pure.
//!
//! - **pullRequests**: one application per open pull request of a repository — a
//!   *preview environment* (Argo CD's pull request generator, simpler). The open pull
//!   requests are read from the forge's API by the caller (with the repository's
//!   `commitStatus` token, [`crate::forge::pulls`]) and given as a [`Listing`]'s
//!   [`Listing::pulls`]; `labels` keeps only those carrying all of them; a pull request
//!   from a fork is generated only when the template's environment has
//!   `previews: {forks: true}`. Placeholders `{{number}}`, `{{branch}}` (the head
//!   branch as a DNS-1123 label, [`branch_label`]), `{{head_sha}}` and
//!   `{{head_short_sha}}` (7 hex). The template's `deletionPolicy` defaults to `delete`
//!   (a preview environment is meant to go away with its pull request; the decommission
//!   guards still apply); its revision is usually `refs/pull/{{number}}/head`.
//!
//! Placeholders are replaced in `name`, `repository`, `revision`, `path`, `namespace`,
//! `environment`, `deletionPolicy`, `serviceAccountName` and `dependsOn`; other fields
//! are copied from the template as they are.
//!
//! [`expand_into`] replaces the generated applications of a [`Config`] by those of its
//! sets: after it, a generated application is an ordinary [`Application`] of
//! `config.applications` (with [`Application::application_set`] naming its set), seen by
//! status, CLI, page, metrics and `dependsOn` as any other. Its problems (an unknown
//! placeholder, a name that is no DNS-1123 label, a name already taken, more than
//! [`MAX_GENERATED`] applications) name the set and the element or directory, at the
//! line of the template field; an application with a problem is not generated.
//!
//! **Safety.** A `directories` set that generated applications before and now generates
//! none (a bad commit moved `apps/`) is held as `allowEmpty: false` holds an empty render: its
//! previous applications are kept and the hold is reported ([`Held`]; on each kept
//! application as [`Application::held`]). A `pullRequests` set is not held: no open
//! pull request in a successful answer of the forge is the legitimate end of the last
//! preview environment; a listing that fails (the forge answers 500, the token is
//! refused) gives no [`Listing`], and a set without one keeps what it generated before
//! ([`Expansion::unlisted`]). A directory that
//! disappears takes its application out of the policy, which is then decommissioned by
//! the ordinary rules ([`crate::plan::decommission`]: orphaned by default, several at
//! once held by the mass guard).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Application, Config, Problem};

/// The most applications one set may generate: 1,000. A set generating more is an
/// error naming it, and generates none (a glob matching a whole monorepo should not
/// start thousands of actors).
pub const MAX_GENERATED: usize = 1000;

/// One entry of `applicationSets:`: a generator and the application template it fills.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApplicationSet {
    /// Name of the set (a DNS-1123 label), named in its applications' problems and in
    /// [`Application::application_set`].
    pub name: Spanned<String>,
    /// Where the values of each application come from.
    pub generator: Generator,
    /// The application each set of values fills: the fields of an entry of
    /// `applications:`, whose string fields may hold `{{key}}` placeholders.
    pub template: Application,
}

/// The generator of an [`ApplicationSet`]: exactly one of `list`, `directories` or
/// `pullRequests`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum Generator {
    /// One application per element.
    List(ListGenerator),
    /// One application per matching directory of a repository.
    Directories(DirectoriesGenerator),
    /// One application (a preview environment) per open pull request of a repository.
    PullRequests(PullRequestsGenerator),
}

/// `pullRequests: {repository, labels}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PullRequestsGenerator {
    /// Name of a [`super::Repository`] with a `commitStatus` block (its forge API and
    /// token list the open pull requests).
    pub repository: Spanned<String>,
    /// Labels a pull request must all carry to get an application (none: every open
    /// pull request).
    #[serde(default)]
    pub labels: Vec<Spanned<String>>,
}

/// One open pull request, as the forge lists it (see [`crate::forge::pulls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenPull {
    /// Its number (`refs/pull/{number}/head` is its head).
    pub number: u64,
    /// Its head branch, as the forge names it (`feature/Login`).
    pub branch: String,
    /// Its head commit (40 hex).
    pub head_sha: String,
    /// Its labels' names.
    pub labels: Vec<String>,
    /// Whether its head comes from another repository (a fork).
    pub fork: bool,
}

/// `list: {elements: [{key: value, …}, …]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListGenerator {
    /// The elements, each a map of placeholder names to values (strings, numbers or
    /// booleans, used as their text).
    pub elements: Vec<Spanned<BTreeMap<String, Scalar>>>,
}

/// A value of a list element.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    /// A string.
    Text(String),
    /// An integer.
    Integer(i64),
    /// A number with a fraction.
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
}

impl Scalar {
    /// The text a placeholder is replaced by.
    pub fn text(&self) -> String {
        match self {
            Scalar::Text(s) => s.clone(),
            Scalar::Integer(i) => i.to_string(),
            Scalar::Number(n) => n.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

/// `directories: {repository, revision, include, exclude}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DirectoriesGenerator {
    /// Name of a [`super::Repository`].
    pub repository: Spanned<String>,
    /// Branch, tag or commit SHA whose tree is listed (default `main`).
    #[serde(default = "default_revision")]
    pub revision: Spanned<String>,
    /// Globs of repository paths (`apps/*`, `clusters/*/apps/*`); a directory matching
    /// one of them (and no `exclude`) makes an application. At least one.
    pub include: Vec<Spanned<String>>,
    /// Globs of directories left out (`apps/legacy`).
    #[serde(default)]
    pub exclude: Vec<Spanned<String>>,
}

impl DirectoriesGenerator {
    /// How deep the directories the globs can match lie (path segments of the deepest
    /// `include`, at least 1; `**` is not supported): how far a listing walks.
    pub fn depth(&self) -> usize {
        self.include.iter().map(|g| g.value.trim_matches('/').split('/').count()).max().unwrap_or(1).max(1)
    }
}

fn default_revision() -> Spanned<String> {
    Spanned::new("main".to_string(), serde_saphyr::Location::UNKNOWN, serde_saphyr::Location::UNKNOWN)
}

/// What the caller read for one set: the directories of one `directories` generator's
/// repository at one commit (from the Git mirror), or the open pull requests of a
/// `pullRequests` generator's repository (from the forge).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The commit listed (40 hex).
    pub commit: String,
    /// Every directory path (no leading or trailing `/`) down to the generator's
    /// [`DirectoriesGenerator::depth`].
    pub directories: Vec<String>,
    /// The open pull requests (a `pullRequests` set; at most
    /// [`crate::forge::pulls::MAX_OPEN_PULLS`]).
    pub pulls: Vec<OpenPull>,
}

/// A set held at its previous applications because it now generates none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The set.
    pub set: String,
    /// How many applications it generated before (and still does, held).
    pub kept: usize,
    /// Why, for a log line or condition.
    pub reason: String,
}

/// What [`expand_into`] did besides changing `config.applications`.
#[derive(Debug, Clone, Default)]
pub struct Expansion {
    /// Problems of the sets and of their applications (those applications are not
    /// generated).
    pub problems: Vec<Problem>,
    /// Sets held at their previous applications ([`Held`]).
    pub held: Vec<Held>,
    /// `directories` sets not expanded because no [`Listing`] was given (a one-shot
    /// command without the repository, a listing that failed): their names.
    pub unlisted: Vec<String>,
    /// How many applications each set generated (held ones included), by set name.
    pub generated: BTreeMap<String, usize>,
}

/// Replaces the generated applications of `config` (those with
/// [`Application::application_set`]) by what its sets generate now: `list` sets from
/// their elements, `directories` sets from `listings` (by set name; a set without one
/// keeps what it generated in `previous` and is named in [`Expansion::unlisted`]; its
/// template is checked with `{{path}}` = `apps/example`). `previous` holds the
/// applications each set generated last (by set name): a `directories` set that
/// generated some and now generates none keeps them ([`Held`]). Pure.
pub fn expand_into(
    config: &mut Config,
    listings: &BTreeMap<String, Listing>,
    previous: &BTreeMap<String, Vec<Application>>,
) -> Expansion {
    config.applications.retain(|a| a.application_set.is_none());
    let mut out = Expansion::default();
    let file = config.file.clone();
    let problem = |line: u32, message: String| Problem { file: file.clone(), line, message };
    let mut taken: BTreeMap<String, String> =
        config.applications.iter().map(|a| (a.name.value.clone(), format!("line {}", line(&a.name)))).collect();
    let mut names = BTreeSet::new();
    let mut generated = Vec::new();
    for set in &config.application_sets {
        let set_name = &set.name.value;
        if !super::validate::is_dns_label(set_name) {
            out.problems
                .push(problem(line(&set.name), format!("applicationSet name `{set_name}` must be a DNS-1123 label")));
        }
        if !names.insert(set_name.clone()) {
            out.problems.push(problem(line(&set.name), format!("applicationSet `{set_name}` is declared twice")));
            continue;
        }
        let listed: Result<Vec<Input>, Input> = match &set.generator {
            Generator::List(l) => Ok(list_inputs(l)),
            Generator::Directories(d) => {
                let (problems, matcher) = directory_matcher(set, d);
                out.problems.extend(problems.into_iter().map(|(at, m)| problem(at, m)));
                if !config.repositories.iter().any(|r| r.name.value == d.repository.value) {
                    out.problems.push(problem(
                        line(&d.repository),
                        format!("applicationSet `{set_name}`: unknown repository `{}`", d.repository.value),
                    ));
                    continue;
                }
                let Some(matcher) = matcher else { continue };
                match listings.get(set_name) {
                    Some(listing) => Ok(directory_inputs(&listing.directories, &matcher)),
                    // the template is checked against a directory of the globs' shape
                    None => Err(directory_inputs(&["apps/example".to_string()], &Matcher::everything())
                        .into_iter()
                        .next()
                        .unwrap_or_else(|| Input { what: String::new(), values: BTreeMap::new() })),
                }
            }
            Generator::PullRequests(p) => {
                let problems = pulls_problems(config, set_name, p);
                if !problems.is_empty() {
                    out.problems.extend(problems.into_iter().map(|(at, m)| problem(at, m)));
                    continue;
                }
                match listings.get(set_name) {
                    Some(listing) => Ok(pull_inputs(config, set, p, &listing.pulls)),
                    None => Err(pull_input(&OpenPull {
                        number: 1,
                        branch: "example".into(),
                        head_sha: "0".repeat(40),
                        labels: Vec::new(),
                        fork: false,
                    })),
                }
            }
        };
        let inputs = match listed {
            Ok(inputs) => inputs,
            Err(sample) => {
                if let Err((at, m)) = fill_set(set, &sample) {
                    out.problems.push(problem(at, format!("applicationSet `{set_name}`: {m}")));
                }
                // its directories or pull requests are not known now: what it generated before stays
                out.unlisted.push(set_name.clone());
                let kept = previous.get(set_name).cloned().unwrap_or_default();
                for a in &kept {
                    taken.insert(a.name.value.clone(), format!("applicationSet `{set_name}`"));
                }
                out.generated.insert(set_name.clone(), kept.len());
                generated.extend(kept);
                continue;
            }
        };
        if inputs.len() > MAX_GENERATED {
            out.problems.push(problem(
                line(&set.name),
                format!(
                    "applicationSet `{set_name}` generates {} applications, more than {MAX_GENERATED}: none generated (narrow its generator)",
                    inputs.len()
                ),
            ));
            continue;
        }
        let (mut apps, problems) = generate(set, &inputs, &mut taken);
        out.problems.extend(problems.into_iter().map(|(at, m)| problem(at, m)));
        let before = previous.get(set_name).map_or(&[][..], Vec::as_slice);
        // a `pullRequests` set is never held: no open pull request in a successful answer
        // is legitimate (a failed listing gave no listing: kept above)
        let from_git = matches!(set.generator, Generator::Directories(_));
        if from_git && apps.is_empty() && inputs.is_empty() && !before.is_empty() {
            let reason = format!(
                "applicationSet `{set_name}` generates no application now (it generated {}): its previous applications are kept (as allowEmpty: false holds an empty render)",
                before.len()
            );
            for a in before {
                taken.insert(a.name.value.clone(), format!("applicationSet `{set_name}` (held)"));
            }
            apps = before.iter().map(|a| Application { held: Some(reason.clone()), ..a.clone() }).collect();
            out.held.push(Held { set: set_name.clone(), kept: before.len(), reason });
        }
        out.generated.insert(set_name.clone(), apps.len());
        generated.extend(apps);
    }
    config.applications.extend(generated);
    out
}

/// The applications each set of `config` generated, by set name: the `previous` of the
/// next [`expand_into`].
pub fn generated_by_set(config: &Config) -> BTreeMap<String, Vec<Application>> {
    let mut out: BTreeMap<String, Vec<Application>> = BTreeMap::new();
    for a in &config.applications {
        if let Some(set) = &a.application_set {
            out.entry(set.clone()).or_default().push(a.clone());
        }
    }
    out
}

/// What the `directories` sets of `config` generated before this process started,
/// rebuilt from `recorded` (set name, `spec.path` of each `Application` resource naming
/// a set, as `plumb serve` wrote them): each path the set's globs still match is filled
/// into its template again. The `previous` of the first [`expand_into`] of a process, so
/// that a set emptied or unlisted across a restart keeps its applications too. A
/// recorded path the globs do not match, or that does not fill, is left out (a
/// resource's `spec` is writable by whoever may patch it: it never adds a path the
/// generator could not have listed).
pub fn recorded_by_set(config: &Config, recorded: &[(String, String)]) -> BTreeMap<String, Vec<Application>> {
    let mut out: BTreeMap<String, Vec<Application>> = BTreeMap::new();
    for set in &config.application_sets {
        let Generator::Directories(d) = &set.generator else { continue };
        let (problems, Some(matcher)) = directory_matcher(set, d) else { continue };
        if !problems.is_empty() {
            continue;
        }
        let paths: Vec<String> =
            recorded.iter().filter(|(s, _)| *s == set.name.value).map(|(_, p)| p.clone()).collect();
        for input in directory_inputs(&paths, &matcher) {
            if let Ok(mut app) = fill(&set.template, &input)
                && super::validate::is_dns_label(&app.name.value)
            {
                app.application_set = Some(set.name.value.clone());
                out.entry(set.name.value.clone()).or_default().push(app);
            }
        }
    }
    out
}

/// One line per `directories` or `pullRequests` set of `config`: its applications come
/// from its repository or its forge, which a command that does not read them
/// (`plumb validate`) cannot list.
pub fn unlisted_notes(config: &Config) -> Vec<String> {
    config
        .application_sets
        .iter()
        .filter_map(|s| match &s.generator {
            Generator::Directories(d) => Some(format!(
                "applicationSet `{}`: its applications are the directories of repository `{}` at `{}` matching {}: `plumb serve`, `diff` and `sync` list them; only its template is checked here",
                s.name.value,
                d.repository.value,
                d.revision.value,
                d.include.iter().map(|g| format!("`{}`", g.value)).collect::<Vec<_>>().join(", ")
            )),
            Generator::PullRequests(p) => Some(format!(
                "applicationSet `{}`: its applications are the open pull requests of repository `{}`{}: `plumb serve` lists them from the forge; only its template is checked here",
                s.name.value,
                p.repository.value,
                if p.labels.is_empty() {
                    String::new()
                } else {
                    format!(
                        " labelled {}",
                        p.labels.iter().map(|l| format!("`{}`", l.value)).collect::<Vec<_>>().join(", ")
                    )
                }
            )),
            Generator::List(_) => None,
        })
        .collect()
}

/// The values of one application to generate, and how its problems name it.
struct Input {
    /// `element 2 (line 14)` or `directory `apps/web``.
    what: String,
    values: BTreeMap<String, String>,
}

fn list_inputs(l: &ListGenerator) -> Vec<Input> {
    l.elements
        .iter()
        .enumerate()
        .map(|(i, e)| Input {
            what: format!("element {} (line {})", i + 1, e.referenced.line()),
            values: e.value.iter().map(|(k, v)| (k.clone(), v.text())).collect(),
        })
        .collect()
}

/// Include and exclude globs compiled (`*` inside one segment).
struct Matcher {
    include: globset::GlobSet,
    exclude: globset::GlobSet,
}

/// The problems of a `directories` generator (line, message), and its globs when they
/// compile.
fn directory_matcher(set: &ApplicationSet, d: &DirectoriesGenerator) -> (Vec<(u32, String)>, Option<Matcher>) {
    let name = &set.name.value;
    let mut problems = Vec::new();
    if d.include.is_empty() {
        problems.push((line(&d.repository), format!("applicationSet `{name}`: directories.include names no glob")));
    }
    if d.revision.value.trim().is_empty() {
        problems.push((line(&d.revision), format!("applicationSet `{name}`: directories.revision is empty")));
    }
    let mut build = |globs: &[Spanned<String>], field: &str| {
        let mut b = globset::GlobSetBuilder::new();
        for g in globs {
            let text = g.value.trim_matches('/');
            if g.value.starts_with('/') || text.split('/').any(|s| s == ".." || s == "**") || text.is_empty() {
                problems.push((
                    line(g),
                    format!(
                        "applicationSet `{name}`: directories.{field} `{}` must be a relative path glob inside the repository, without `..` or `**`",
                        g.value
                    ),
                ));
                continue;
            }
            match globset::GlobBuilder::new(text).literal_separator(true).build() {
                Ok(glob) => {
                    b.add(glob);
                }
                Err(e) => problems.push((line(g), format!("applicationSet `{name}`: directories.{field}: {e}"))),
            }
        }
        b.build().ok()
    };
    let include = build(&d.include, "include");
    let exclude = build(&d.exclude, "exclude");
    let matcher = match (include, exclude) {
        (Some(include), Some(exclude)) if problems.is_empty() => Some(Matcher { include, exclude }),
        _ => None,
    };
    (problems, matcher)
}

impl Matcher {
    /// A matcher of every directory.
    fn everything() -> Self {
        let mut include = globset::GlobSetBuilder::new();
        include.add(globset::Glob::new("**").unwrap_or_else(|_| unreachable!("`**` is a glob")));
        Self {
            include: include.build().unwrap_or_else(|_| globset::GlobSet::empty()),
            exclude: globset::GlobSet::empty(),
        }
    }
}

fn directory_inputs(directories: &[String], m: &Matcher) -> Vec<Input> {
    let mut dirs: Vec<&str> = directories
        .iter()
        .map(|d| d.trim_matches('/'))
        .filter(|d| !d.is_empty() && m.include.is_match(d) && !m.exclude.is_match(d))
        .collect();
    dirs.sort_unstable();
    dirs.dedup();
    dirs.into_iter()
        .map(|d| Input {
            what: format!("directory `{d}`"),
            values: BTreeMap::from([
                ("path".to_string(), d.to_string()),
                ("path.basename".to_string(), d.rsplit('/').next().unwrap_or(d).to_string()),
            ]),
        })
        .collect()
}

/// The applications `set` generates from `inputs` and the problems (line, message) of
/// those it cannot: a template that does not fill, a generated name that is no DNS-1123
/// label or is `taken` already (each generated name is added to `taken`).
fn generate(
    set: &ApplicationSet,
    inputs: &[Input],
    taken: &mut BTreeMap<String, String>,
) -> (Vec<Application>, Vec<(u32, String)>) {
    let set_name = &set.name.value;
    let (mut apps, mut problems) = (Vec::new(), Vec::new());
    for input in inputs {
        match fill_set(set, input) {
            Err((at, m)) => problems.push((at, format!("applicationSet `{set_name}`, {}: {m}", input.what))),
            Ok(mut app) => {
                let name = app.name.value.clone();
                let here = format!("applicationSet `{set_name}`, {}", input.what);
                if !super::validate::is_dns_label(&name) {
                    problems
                        .push((line(&app.name), format!("{here}: generated name `{name}` must be a DNS-1123 label")));
                    continue;
                }
                if let Some(by) = taken.get(&name) {
                    problems
                        .push((line(&app.name), format!("{here}: generated name `{name}` is already declared ({by})")));
                    continue;
                }
                taken.insert(name, here);
                app.application_set = Some(set_name.clone());
                app.held = None;
                apps.push(app);
            }
        }
    }
    (apps, problems)
}

/// The problems of a `pullRequests` generator (line, message): an unknown repository,
/// one without `commitStatus` (no forge to ask), an empty label.
fn pulls_problems(config: &Config, set_name: &str, p: &PullRequestsGenerator) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    match config.repositories.iter().find(|r| r.name.value == p.repository.value) {
        None => out.push((
            line(&p.repository),
            format!("applicationSet `{set_name}`: unknown repository `{}`", p.repository.value),
        )),
        Some(r) if r.commit_status.is_none() => out.push((
            line(&p.repository),
            format!(
                "applicationSet `{set_name}`: pullRequests needs repository `{}` to have a `commitStatus` block (its forge API and token list the open pull requests)",
                p.repository.value
            ),
        )),
        Some(_) => {}
    }
    for l in &p.labels {
        if l.value.trim().is_empty() {
            out.push((line(l), format!("applicationSet `{set_name}`: pullRequests.labels has an empty label")));
        }
    }
    out
}

/// The inputs of a `pullRequests` set: the open pull requests carrying all its labels,
/// forks only when the template's environment has `previews.forks`, by number.
fn pull_inputs(config: &Config, set: &ApplicationSet, p: &PullRequestsGenerator, pulls: &[OpenPull]) -> Vec<Input> {
    let forks = config
        .environments
        .iter()
        .find(|e| e.name.value == set.template.environment.value)
        .is_some_and(|e| e.previews.forks);
    let mut chosen: Vec<&OpenPull> = pulls
        .iter()
        .filter(|pr| forks || !pr.fork)
        .filter(|pr| p.labels.iter().all(|l| pr.labels.contains(&l.value)))
        .collect();
    chosen.sort_by_key(|pr| pr.number);
    chosen.dedup_by_key(|pr| pr.number);
    chosen.into_iter().map(pull_input).collect()
}

fn pull_input(pr: &OpenPull) -> Input {
    Input {
        what: format!("pull request #{}", pr.number),
        values: BTreeMap::from([
            ("number".to_string(), pr.number.to_string()),
            ("branch".to_string(), branch_label(&pr.branch)),
            ("head_sha".to_string(), pr.head_sha.clone()),
            ("head_short_sha".to_string(), pr.head_sha.chars().take(7).collect()),
        ]),
    }
}

/// A head branch as a DNS-1123 label, for `{{branch}}`: lower case, each run of
/// characters other than `a-z`, `0-9` one `-`, no `-` at either end, at most 63
/// characters (RFC 1123, as Kubernetes names require); `branch` when nothing is left.
/// `feature/Login_Page` → `feature-login-page`.
pub fn branch_label(branch: &str) -> String {
    let mut out = String::new();
    for c in branch.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(63);
    let out = out.trim_end_matches('-');
    if out.is_empty() { "branch".to_string() } else { out.to_string() }
}

/// [`fill`] with the defaults of the set's generator: a `pullRequests` application is
/// deleted with its objects when its pull request closes (`deletionPolicy: delete`)
/// unless its template says otherwise, and marked [`Application::preview`].
fn fill_set(set: &ApplicationSet, input: &Input) -> Result<Application, (u32, String)> {
    let mut app = fill(&set.template, input)?;
    if matches!(set.generator, Generator::PullRequests(_)) {
        app.preview = true;
        if app.deletion_policy.is_none() {
            app.deletion_policy = Some(Spanned::new("delete".to_string(), set.name.referenced, set.name.defined));
        }
    }
    Ok(app)
}

/// `template` with every placeholder replaced from `input`; the first unknown one is
/// an error (line of its field, message).
fn fill(template: &Application, input: &Input) -> Result<Application, (u32, String)> {
    let mut app = template.clone();
    let known = || input.values.keys().map(|k| format!("{{{{{k}}}}}")).collect::<Vec<_>>().join(", ");
    let sub = |field: &str, s: &mut Spanned<String>| -> Result<(), (u32, String)> {
        s.value = substitute(&s.value, &input.values).map_err(|m| {
            (
                line(s),
                format!(
                    "template {field}: {m} (known here: {})",
                    if known().is_empty() { "none".into() } else { known() }
                ),
            )
        })?;
        Ok(())
    };
    sub("name", &mut app.name)?;
    sub("repository", &mut app.repository)?;
    sub("revision", &mut app.revision)?;
    sub("path", &mut app.path)?;
    sub("namespace", &mut app.namespace)?;
    sub("environment", &mut app.environment)?;
    if let Some(p) = &mut app.deletion_policy {
        sub("deletionPolicy", p)?;
    }
    for d in &mut app.depends_on {
        sub("dependsOn", d)?;
    }
    if let Some(sa) = &mut app.service_account_name {
        *sa = substitute(sa, &input.values)
            .map_err(|m| (line(&template.name), format!("template serviceAccountName: {m}")))?;
    }
    Ok(app)
}

/// `text` with each `{{key}}` (spaces inside the braces allowed) replaced by its value.
///
/// # Errors
/// A message naming an unknown placeholder or an unclosed `{{`.
pub fn substitute(text: &str, values: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(format!("unclosed placeholder in `{text}`"));
        };
        let key = after[..end].trim();
        match values.get(key) {
            Some(v) => out.push_str(v),
            None => return Err(format!("unknown placeholder `{{{{{key}}}}}`")),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn line(s: &Spanned<String>) -> u32 {
    s.referenced.line() as u32
}

#[cfg(test)]
mod tests;
