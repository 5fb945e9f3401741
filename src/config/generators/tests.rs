use std::{collections::BTreeMap, path::Path};

use super::*;

const HEAD: &str = "repositories: [{name: fleet, url: 'https://git.example.com/fleet.git'}]
environments: [{name: dev}]
";

fn load(sets: &str) -> Result<Config, String> {
    let text = format!("{HEAD}{sets}");
    crate::config::load_str(&text, Path::new("p.yaml"), Path::new(".")).map_err(|e| e.to_string())
}

fn names(config: &Config) -> Vec<(&str, &str, Option<&str>)> {
    config
        .applications
        .iter()
        .map(|a| (a.name.value.as_str(), a.path.value.as_str(), a.application_set.as_deref()))
        .collect()
}

const LIST: &str = "applicationSets:
  - name: services
    generator:
      list:
        elements:
          - {name: web, team: a}
          - {name: api, team: b, replicas: 3}
    template:
      name: '{{name}}'
      namespace: 'team-{{ team }}'
      repository: fleet
      path: 'apps/{{name}}'
      environment: dev
";

#[test]
fn list_makes_one_application_per_element() {
    let config = load(LIST).expect("valid");
    assert_eq!(names(&config), [("web", "apps/web", Some("services")), ("api", "apps/api", Some("services"))]);
    assert_eq!(config.applications[1].namespace.value, "team-b");
    assert_eq!(config.applications[0].revision.value, "main", "the template's default revision");
    // the generated fields keep the template's lines: later problems point there
    assert_eq!(config.applications[0].path.referenced.line(), 14);
}

#[test]
fn hand_written_and_generated_applications_sit_side_by_side() {
    let text = format!(
        "applications: [{{name: db, repository: fleet, path: db, namespace: db, environment: dev, dependsOn: [web]}}]\n{LIST}"
    );
    let config = load(&text).expect("dependsOn may name a generated application");
    assert_eq!(names(&config)[0], ("db", "db", None));
    assert_eq!(config.applications.len(), 3);
}

#[test]
fn unknown_placeholder_names_the_set_and_element() {
    let bad = LIST.replace("'team-{{ team }}'", "'team-{{ tema }}'");
    let msg = load(&bad).expect_err("unknown placeholder");
    assert!(msg.contains("p.yaml:12: applicationSet `services`, element 1 (line 8): template namespace: unknown placeholder `{{tema}}`"), "{msg}");
    assert!(msg.contains("element 2 (line 9)"), "{msg}");
    let unclosed = LIST.replace("'apps/{{name}}'", "'apps/{{name'");
    let msg = load(&unclosed).expect_err("unclosed");
    assert!(msg.contains("p.yaml:14:") && msg.contains("unclosed placeholder in `apps/{{name`"), "{msg}");
}

#[test]
fn generated_names_must_be_labels_and_unique() {
    let bad = LIST.replace("{name: api, team: b, replicas: 3}", "{name: Api_1, team: b}");
    let msg = load(&bad).expect_err("bad name");
    assert!(
        msg.contains(
            "p.yaml:11: applicationSet `services`, element 2 (line 9): generated name `Api_1` must be a DNS-1123 label"
        ),
        "{msg}"
    );
    let twice = LIST.replace("{name: api, team: b, replicas: 3}", "{name: web, team: b}");
    let msg = load(&twice).expect_err("duplicate");
    assert!(msg.contains("element 2 (line 9): generated name `web` is already declared (applicationSet `services`, element 1 (line 8))"), "{msg}");
    let clash = format!("applications: [{{name: web, repository: fleet, namespace: w, environment: dev}}]\n{LIST}");
    let msg = load(&clash).expect_err("clash with a hand-written one");
    assert!(msg.contains("p.yaml:12:") && msg.contains("generated name `web` is already declared (line 3)"), "{msg}");
    // only one problem for the clash: the ordinary "declared twice" does not repeat it
    assert_eq!(msg.lines().count(), 1, "{msg}");
}

#[test]
fn ordinary_checks_apply_to_generated_applications() {
    let bad = LIST.replace("environment: dev", "environment: '{{team}}'");
    let msg = load(&bad).expect_err("unknown environment");
    assert!(msg.contains("p.yaml:15: application `web`: unknown environment `a`"), "{msg}");
}

#[test]
fn numbers_and_booleans_are_their_text() {
    let text = LIST.replace("path: 'apps/{{name}}'", "path: 'apps/{{name}}-{{replicas}}'");
    let msg = load(&text).expect_err("element 1 has no replicas");
    assert!(
        msg.contains(
            "element 1 (line 8): template path: unknown placeholder `{{replicas}}` (known here: {{name}}, {{team}})"
        ),
        "{msg}"
    );
    let mut values = BTreeMap::new();
    values.insert("n".to_string(), Scalar::Integer(3).text());
    values.insert("b".to_string(), Scalar::Bool(true).text());
    assert_eq!(substitute("x-{{n}}-{{b}}", &values).as_deref(), Ok("x-3-true"));
    assert_eq!(substitute("no placeholder", &values).as_deref(), Ok("no placeholder"));
}

const DIRS: &str = "applicationSets:
  - name: apps
    generator:
      directories: {repository: fleet, include: ['apps/*'], exclude: [apps/legacy]}
    template: {name: '{{path.basename}}', namespace: '{{path.basename}}', repository: fleet, path: '{{path}}', environment: dev}
";

fn listing(dirs: &[&str]) -> BTreeMap<String, Listing> {
    BTreeMap::from([(
        "apps".to_string(),
        Listing {
            commit: "c".repeat(40),
            directories: dirs.iter().map(ToString::to_string).collect(),
            pulls: Vec::new(),
        },
    )])
}

#[test]
fn directories_wait_for_their_listing() {
    let mut config = load(DIRS).expect("valid without a listing");
    assert!(config.applications.is_empty());
    let e = expand_into(&mut config, &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(e.unlisted, ["apps"]);
    assert!(e.problems.is_empty());
}

#[test]
fn directories_match_include_and_not_exclude() {
    let mut config = load(DIRS).expect("valid");
    let dirs = ["apps", "apps/web", "apps/api", "apps/legacy", "apps/web/base", "docs", "other/apps/x"];
    let e = expand_into(&mut config, &listing(&dirs), &BTreeMap::new());
    assert!(e.problems.is_empty(), "{:?}", e.problems);
    assert_eq!(names(&config), [("api", "apps/api", Some("apps")), ("web", "apps/web", Some("apps"))]);
    assert_eq!(e.generated.get("apps"), Some(&2));
    // expanding again replaces, never appends
    let previous = generated_by_set(&config);
    let e = expand_into(&mut config, &listing(&["apps/web"]), &previous);
    assert!(e.held.is_empty());
    assert_eq!(names(&config), [("web", "apps/web", Some("apps"))]);
}

#[test]
fn an_emptied_directories_set_keeps_its_previous_applications() {
    let mut config = load(DIRS).expect("valid");
    expand_into(&mut config, &listing(&["apps/web", "apps/api"]), &BTreeMap::new());
    let previous = generated_by_set(&config);
    // a bad commit moved apps/ away
    let e = expand_into(&mut config, &listing(&["services/web", "services/api"]), &previous);
    assert_eq!(e.held.len(), 1);
    assert_eq!(e.held[0].kept, 2);
    assert!(e.held[0].reason.contains("applicationSet `apps` generates no application now (it generated 2)"));
    assert_eq!(names(&config).len(), 2);
    assert!(config.applications.iter().all(|a| a.held.as_deref() == Some(e.held[0].reason.as_str())));
    // the directories back: generated afresh, no longer held
    let previous = generated_by_set(&config);
    let e = expand_into(&mut config, &listing(&["apps/web"]), &previous);
    assert!(e.held.is_empty() && config.applications.iter().all(|a| a.held.is_none()));
    // with nothing before, an empty set is just empty
    let e = expand_into(&mut config, &listing(&[]), &BTreeMap::new());
    assert!(e.held.is_empty() && config.applications.is_empty());
}

#[test]
fn a_list_emptied_in_the_policy_is_not_held() {
    let mut config = load(LIST).expect("valid");
    let previous = generated_by_set(&config);
    let Generator::List(l) = &mut config.application_sets[0].generator else { panic!("a list") };
    l.elements.clear();
    let e = expand_into(&mut config, &BTreeMap::new(), &previous);
    assert!(e.held.is_empty() && config.applications.is_empty());
}

#[test]
fn too_many_applications_is_an_error_generating_none() {
    let mut config = load(DIRS).expect("valid");
    let dirs: Vec<String> = (0..=MAX_GENERATED).map(|i| format!("apps/a{i}")).collect();
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    let e = expand_into(&mut config, &listing(&dirs), &BTreeMap::new());
    assert_eq!(e.problems.len(), 1);
    assert!(
        e.problems[0]
            .to_string()
            .contains("p.yaml:4: applicationSet `apps` generates 1001 applications, more than 1000")
    );
    assert!(config.applications.is_empty());
}

#[test]
fn directory_problems_name_the_directory() {
    let mut config = load(DIRS).expect("valid");
    let e = expand_into(&mut config, &listing(&["apps/Web_UI", "apps/ok"]), &BTreeMap::new());
    assert_eq!(e.problems.len(), 1, "{:?}", e.problems);
    assert_eq!(
        e.problems[0].to_string(),
        "p.yaml:7: applicationSet `apps`, directory `apps/Web_UI`: generated name `Web_UI` must be a DNS-1123 label"
    );
    assert_eq!(names(&config), [("ok", "apps/ok", Some("apps"))]);
}

#[test]
fn bad_generators_are_errors_with_lines() {
    let msg = load(&DIRS.replace("repository: fleet, include", "repository: flet, include")).expect_err("repo");
    assert!(msg.contains("p.yaml:6: applicationSet `apps`: unknown repository `flet`"), "{msg}");
    let msg = load(&DIRS.replace("['apps/*']", "['../*', 'apps/**']")).expect_err("globs");
    assert!(msg.contains("directories.include `../*` must be a relative path glob"), "{msg}");
    assert!(msg.contains("directories.include `apps/**`"), "{msg}");
    let msg = load(&DIRS.replace("name: apps\n", "name: Apps\n")).expect_err("set name");
    assert!(msg.contains("p.yaml:4: applicationSet name `Apps` must be a DNS-1123 label"), "{msg}");
    let msg = load(&format!("{DIRS}{}", DIRS.trim_start_matches("applicationSets:\n"))).expect_err("twice");
    assert!(msg.contains("p.yaml:8: applicationSet `apps` is declared twice"), "{msg}");
    let msg = load(&DIRS.replace("directories:", "direktories:")).expect_err("unknown generator");
    assert!(msg.starts_with("p.yaml:"), "{msg}");
}

#[test]
fn depth_follows_the_deepest_include() {
    let config = load(&DIRS.replace("['apps/*']", "['apps/*', 'clusters/*/apps/*']")).expect("valid");
    let Generator::Directories(d) = &config.application_sets[0].generator else { panic!("directories") };
    assert_eq!(d.depth(), 4);
}

/// A directory name that picks the namespace cannot pick plumb's own: the generated
/// application is refused by the ordinary validation, naming it (other namespaces
/// outside the environment's `destinations` are refused at the write, as for any
/// application).
#[test]
fn a_directory_cannot_choose_plumb_s_own_namespace() {
    let mut config = load(DIRS).expect("valid");
    let e = expand_into(&mut config, &listing(&["apps/web", "apps/plumb-system"]), &BTreeMap::new());
    assert!(e.problems.is_empty());
    let problems: Vec<String> = crate::config::validate(&config).iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("p.yaml:7: application `plumb-system`: namespace `plumb-system` is plumb's own"),
        "{problems:?}"
    );
}

/// After a restart, what a set generated is rebuilt from the resources' recorded paths,
/// only those its globs match: an emptied set is held across a restart too.
#[test]
fn previous_applications_are_rebuilt_from_recorded_paths() {
    let mut config = load(DIRS).expect("valid");
    let recorded: Vec<(String, String)> =
        [("apps", "apps/web"), ("apps", "apps/legacy"), ("apps", "infra/secrets"), ("other", "apps/x")]
            .iter()
            .map(|(s, p)| (s.to_string(), p.to_string()))
            .collect();
    let previous = recorded_by_set(&config, &recorded);
    assert_eq!(previous.len(), 1);
    assert_eq!(previous["apps"].iter().map(|a| a.path.value.as_str()).collect::<Vec<_>>(), ["apps/web"]);
    let e = expand_into(&mut config, &listing(&["services/web"]), &previous);
    assert_eq!(e.held.len(), 1);
    assert_eq!(names(&config), [("web", "apps/web", Some("apps"))]);
}

const PULLS: &str = "applicationSets:
  - name: previews
    generator:
      pullRequests: {repository: forge, labels: [preview]}
    template: {name: 'pr-{{number}}', namespace: 'pr-{{number}}', repository: forge,
               revision: 'refs/pull/{{number}}/head', path: app, environment: dev}
";

const FORGE: &str = "  - name: forge
    url: 'https://gitea.example.com/acme/config.git'
    commitStatus: {provider: gitea, apiUrl: 'https://gitea.example.com/api/v1', tokenFile: Cargo.toml}
";

fn load_pulls(sets: &str, forks: bool) -> Result<Config, String> {
    let head = HEAD.replace("]\nenvironments", &format!("]\n{FORGE}environments")).replace(
        "repositories: [{name: fleet, url: 'https://git.example.com/fleet.git'}]",
        "repositories:\n  - {name: fleet, url: 'https://git.example.com/fleet.git'}",
    );
    let head = if forks { head.replace("[{name: dev}]", "[{name: dev, previews: {forks: true}}]") } else { head };
    let text = format!("{head}{sets}");
    crate::config::load_str(&text, Path::new("p.yaml"), Path::new(".")).map_err(|e| e.to_string())
}

fn pull(number: u64, branch: &str, labels: &[&str], fork: bool) -> OpenPull {
    OpenPull {
        number,
        branch: branch.into(),
        head_sha: format!("{number:0>40}"),
        labels: labels.iter().map(ToString::to_string).collect(),
        fork,
    }
}

fn pulls(list: Vec<OpenPull>) -> BTreeMap<String, Listing> {
    BTreeMap::from([("previews".to_string(), Listing { pulls: list, ..Listing::default() })])
}

#[test]
fn pull_requests_make_labelled_non_fork_previews_deleted_by_default() {
    let mut config = load_pulls(PULLS, false).expect("valid without a listing");
    assert!(config.applications.is_empty());
    let open = vec![
        pull(7, "feature/Login", &["preview", "x"], false),
        pull(8, "no-label", &[], false),
        pull(9, "from-fork", &["preview"], true),
        pull(3, "fix", &["preview"], false),
    ];
    let e = expand_into(&mut config, &pulls(open.clone()), &BTreeMap::new());
    assert!(e.problems.is_empty(), "{:?}", e.problems);
    let got: Vec<(&str, &str, &str)> = config
        .applications
        .iter()
        .map(|a| (a.name.value.as_str(), a.namespace.value.as_str(), a.revision.value.as_str()))
        .collect();
    assert_eq!(got, [("pr-3", "pr-3", "refs/pull/3/head"), ("pr-7", "pr-7", "refs/pull/7/head")]);
    let env = &config.environments[0];
    assert_eq!(config.applications[0].deletion_policy(env), crate::config::DeletionPolicy::Delete);
    // the environment's previews.forks lets forks in
    let mut config = load_pulls(PULLS, true).expect("valid");
    expand_into(&mut config, &pulls(open), &BTreeMap::new());
    assert_eq!(config.applications.len(), 3);
}

#[test]
fn a_template_deletion_policy_and_branch_placeholders_win() {
    let text = PULLS.replace("path: app,", "path: app, deletionPolicy: orphan,").replace(
        "name: 'pr-{{number}}'",
        "name: '{{branch}}-{{head_short_sha}}', serviceAccountName: 'sa-{{head_sha}}'",
    );
    let mut config = load_pulls(&text, false).expect("valid");
    expand_into(&mut config, &pulls(vec![pull(12, "Feature/Login_Page", &["preview"], false)]), &BTreeMap::new());
    let a = &config.applications[0];
    assert_eq!(a.name.value, "feature-login-page-0000000");
    assert_eq!(a.service_account_name.as_deref(), Some(format!("sa-{:0>40}", 12).as_str()));
    assert_eq!(a.deletion_policy(&config.environments[0]), crate::config::DeletionPolicy::Orphan);
}

#[test]
fn branch_labels_are_dns_labels() {
    assert_eq!(branch_label("feature/Login_Page"), "feature-login-page");
    assert_eq!(branch_label("--a//b--"), "a-b");
    assert_eq!(branch_label("///"), "branch");
    assert_eq!(branch_label(&"x".repeat(80)).len(), 63);
    assert!(crate::config::validate::is_dns_label(&branch_label(&format!("{}-y", "x".repeat(62)))));
}

/// The safety of preview environments: a failed listing (no listing) keeps them all; an
/// empty list from a successful answer is the legitimate close of the last one (not
/// held as an emptied directories set is).
#[test]
fn a_failed_listing_keeps_previews_and_an_empty_answer_removes_them() {
    let mut config = load_pulls(PULLS, false).expect("valid");
    expand_into(
        &mut config,
        &pulls(vec![pull(1, "a", &["preview"], false), pull(2, "b", &["preview"], false)]),
        &BTreeMap::new(),
    );
    let previous = generated_by_set(&config);
    let e = expand_into(&mut config, &BTreeMap::new(), &previous);
    assert_eq!(e.unlisted, ["previews"]);
    assert_eq!(config.applications.len(), 2, "the forge failed: both stay");
    let e = expand_into(&mut config, &pulls(vec![pull(2, "b", &["preview"], false)]), &previous);
    assert!(e.held.is_empty());
    assert_eq!(config.applications.len(), 1, "#1 closed");
    let previous = generated_by_set(&config);
    let e = expand_into(&mut config, &pulls(Vec::new()), &previous);
    assert!(e.held.is_empty() && e.unlisted.is_empty());
    assert!(config.applications.is_empty(), "the last one closed: not held");
}

#[test]
fn pull_requests_need_a_forge_and_known_placeholders() {
    let msg = load(
        &PULLS
            .replace("repository: forge, labels", "repository: fleet, labels")
            .replace("repository: forge,", "repository: fleet,"),
    )
    .expect_err("fleet has no commitStatus");
    assert!(
        msg.contains("p.yaml:6") && msg.contains("needs repository `fleet` to have a `commitStatus` block"),
        "{msg}"
    );
    let msg = load_pulls(&PULLS.replace("path: app", "path: '{{path}}'"), false).expect_err("no {{path}} here");
    assert!(msg.contains("unknown placeholder `{{path}}`") && msg.contains("{{head_short_sha}}"), "{msg}");
}
