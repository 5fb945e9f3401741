//! A renderer can neither read, fetch nor eat more than its application's share
//! (issue 30), with the real `kustomize` and `helm` (`tools/testbins/build.sh
//! kustomize helm`) and no cluster: a render pool over a lab repository.
//!
//! - a chart cannot read another application's files through a symlink;
//! - a template that builds an ever larger string dies at its memory ceiling, one that
//!   loops at its CPU budget, and the next passes start no child until the backoff ends;
//! - kustomize entries that leave the repository, name a loopback host or a URL in a
//!   patch or generator are refused before the run naming the file (case kustomize-02);
//! - the tool cannot open a network connection: a kustomize run that bypasses the
//!   check, against a listener on the host's loopback, reaches nothing.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    io::Read,
    net::TcpListener,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use plumb::{
    render::sandbox,
    source::{Desired, Pool, Since},
};
use support::*;

fn bin(tool: &str) -> PathBuf {
    let bin = plumb_lab::testbins_dir().join(format!("{tool}/current/bin/{tool}"));
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh {tool}", bin.display());
    bin
}

/// A pool over `lab`'s repository for `apps` (`name: …, path: …, …` flow mappings
/// without braces) with `settings.renderTools` extra `tools` (flow entries).
fn pool(lab: &Lab, tools: &str, apps: &[&str]) -> (Arc<plumb::config::Config>, Pool) {
    let mut policy = format!(
        "settings: {{statusNamespace: plumb-contain, renderTools: {{kustomize: {}, helm: {}{tools}}}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true}}\napplications:\n",
        bin("kustomize").display(),
        bin("helm").display(),
        lab.url
    );
    for app in apps {
        policy += &format!("  - {{repository: r, revision: main, namespace: n, environment: e, {app}}}\n");
    }
    let config = Arc::new(plumb::config::load(&lab.policy("p.yaml", &policy)).unwrap());
    (config.clone(), Pool::new(lab.tmp.path().join("cache"), config))
}

/// The render of `app` at `main`: `Ok((objects as YAML-ish JSON lines, ran))`, or the
/// render's error.
async fn render(pool: &Pool, config: &plumb::config::Config, app: &str) -> Result<(String, bool), String> {
    let a = config.applications.iter().find(|a| a.name.value == app).unwrap();
    let repo = &config.repositories[0];
    match pool.desired(app, repo, "main", &a.path.value, Since::at(Instant::now())).await {
        Desired::Rendered(_, r, ran) => {
            Ok((r.manifests.iter().map(|m| m.object().to_string()).collect::<Vec<_>>().join("\n"), ran))
        }
        Desired::RenderFailed(_, e) => Err(e.to_string()),
        Desired::FetchFailed(e) => panic!("fetch: {e}"),
    }
}

const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";

/// A chart cannot read another application's file through a symlink with a
/// non-manifest name: the working copy holds only the chart (and its value files,
/// sharedPaths), and a link out of them is not written. The same link into a
/// `sharedPaths` directory is read.
#[tokio::test]
async fn a_chart_cannot_read_another_application_s_files_through_symlinks() {
    let lab = Lab::new("contain-links");
    let w = |p: &str, t: &str| lab.repo.write(p, t).unwrap();
    w("apps/web/Chart.yaml", CHART);
    w(
        "apps/web/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata:\n  stolen: {{ .Files.Get \"files/stolen.txt\" | quote }}\n  shared: {{ .Files.Get \"files/shared.txt\" | quote }}\n",
    );
    w("apps/pay/secret.txt", "pay-team-secret\n");
    w("shared/ok.txt", "shared-ok\n");
    for (link, target) in
        [("apps/web/files/stolen.txt", "../../pay/secret.txt"), ("apps/web/files/shared.txt", "../../../shared/ok.txt")]
    {
        let p = lab.repo.work.join(link);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }
    lab.repo.commit("web reads through links").unwrap();
    let (config, pool) = pool(&lab, "", &["name: web, path: apps/web"]);
    // the environment's sharedPaths: none here; then `shared`
    let (out, ran) = render(&pool, &config, "web").await.unwrap();
    assert!(ran);
    assert!(!out.contains("pay-team-secret"), "another application's file was read: {out}");
    assert!(out.contains(r#""stolen":"""#), "{out}");
    assert!(!out.contains("shared-ok"), "shared/ is no sharedPath of this environment: {out}");
    let text = std::fs::read_to_string(lab.tmp.path().join("p.yaml")).unwrap();
    let shared = text.replace("  - name: e\n", "  - name: e\n    sharedPaths: [shared]\n");
    std::fs::write(lab.tmp.path().join("p2.yaml"), shared).unwrap();
    let config = Arc::new(plumb::config::load(&lab.tmp.path().join("p2.yaml")).unwrap());
    let pool = Pool::new(lab.tmp.path().join("cache2"), config.clone());
    let (out, _) = render(&pool, &config, "web").await.unwrap();
    assert!(out.contains("shared-ok") && !out.contains("pay-team-secret"), "{out}");
}

/// A 5-line template that doubles a string dies at the memory ceiling, a nested
/// range at the CPU budget; each failure is backed off: the next passes return the
/// same error and start no child until the backoff ends, then one run again. A real
/// chart renders under the same ceilings.
#[tokio::test]
async fn a_template_that_eats_memory_or_cpu_dies_at_its_ceiling_and_is_backed_off() {
    assert!(sandbox::isolation().prlimit.is_some(), "util-linux prlimit on the test machine");
    let lab = Lab::new("contain-bomb");
    let w = |p: &str, t: &str| lab.repo.write(p, t).unwrap();
    w("apps/bomb/Chart.yaml", CHART);
    w(
        "apps/bomb/templates/cm.yaml",
        "{{- $s := \"xxxxxxxxxxxxxxxx\" }}\n{{- range $i := until 40 }}{{ $s = printf \"%s%s\" $s $s }}{{ end }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata: {s: {{ $s | quote }}}\n",
    );
    w("apps/loop/Chart.yaml", CHART);
    w(
        "apps/loop/templates/cm.yaml",
        "{{- range $i := until 100000 }}{{ range $j := until 100000 }}{{ end }}{{ end }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: loop}\n",
    );
    w("apps/fine/Chart.yaml", CHART);
    let many: String = (0..300)
        .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata: {{v: {{{{ .Values.v | quote }}}}}}\n"))
        .collect();
    w("apps/fine/templates/cms.yaml", &many);
    w("apps/fine/values.yaml", "v: ok\n");
    lab.repo.commit("a bomb, a loop and a chart").unwrap();
    let (config, pool) = pool(
        &lab,
        ", maxMemoryBytes: 268435456, cpuSeconds: 3, timeoutSeconds: 60, backoffSeconds: 10, maxBackoffSeconds: 20",
        &["name: bomb, path: apps/bomb", "name: loop, path: apps/loop", "name: fine, path: apps/fine"],
    );
    let (out, _) = render(&pool, &config, "fine").await.unwrap();
    assert_eq!(out.matches("\"v\":\"ok\"").count(), 300, "a real chart renders under the ceilings");

    let started = Instant::now();
    let err = render(&pool, &config, "bomb").await.expect_err("bomb");
    let bomb_failed = Instant::now();
    println!("bomb: {err} after {:?}", started.elapsed());
    assert!(
        err.contains("died at its memory ceiling of 268435456 bytes (settings.renderTools.maxMemoryBytes)"),
        "{err}"
    );
    // backed off: the same error, no child, until the backoff (10 s) ends
    let runs = pool.tool_runs();
    assert_eq!(render(&pool, &config, "bomb").await.expect_err("bomb again"), err, "same inputs, same error");
    assert_eq!(pool.tool_runs(), runs, "a pass in the backoff starts no child");

    let started = Instant::now();
    let err = render(&pool, &config, "loop").await.expect_err("loop");
    println!("loop: {err} after {:?}", started.elapsed());
    assert!(err.ends_with("killed at its CPU budget of 3 s (settings.renderTools.cpuSeconds)"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "died at the budget, not the time limit");
    let runs = pool.tool_runs();
    lab.repo.write("apps/fine/values.yaml", "v: still ok\n").unwrap();
    lab.repo.commit("a commit elsewhere").unwrap();
    assert_eq!(render(&pool, &config, "loop").await.expect_err("loop"), err);
    assert_eq!(pool.tool_runs(), runs, "a commit that does not touch its inputs starts no child in the backoff");

    tokio::time::sleep((bomb_failed + Duration::from_secs(11)).saturating_duration_since(Instant::now())).await;
    render(&pool, &config, "bomb").await.expect_err("bomb after its backoff");
    assert!(pool.tool_runs() > runs, "tried again after the backoff");
    let runs = pool.tool_runs();
    render(&pool, &config, "bomb").await.expect_err("bomb");
    assert_eq!(pool.tool_runs(), runs, "backed off again (now 20 s)");
    // a new commit of its inputs renders at once
    lab.repo.write("apps/bomb/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\n").unwrap();
    lab.repo.commit("bomb defused").unwrap();
    let (out, ran) = render(&pool, &config, "bomb").await.unwrap();
    assert!(ran && out.contains("\"name\":\"bomb\""), "{out}");
}

/// Case kustomize-02: URLs in a patch and a generator's files, on the host's
/// loopback, are refused before kustomize runs, naming the kustomization and the
/// entry, and the local server sees no request; the same with an unroutable host.
#[tokio::test]
async fn kustomize_02_urls_in_patches_and_generators_are_refused_before_the_run() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/cases/kustomize-02");
    let lab = Lab::new("contain-k02");
    for f in ["apps/web/kustomization.yaml", "apps/web/deployment.yaml"] {
        lab.repo.write(f, &std::fs::read_to_string(case.join("repo").join(f)).unwrap()).unwrap();
    }
    lab.repo.commit("kustomize-02").unwrap();
    // "anything reachable from plumb's pod": a listener on the case's port
    let listener = TcpListener::bind("127.0.0.1:18080").expect("port 18080 of the case is free");
    listener.set_nonblocking(true).unwrap();
    let (config, pool) =
        pool(&lab, "", &["name: web, path: apps/web, source: {type: kustomize, allowRemoteBases: false}"]);
    let err = render(&pool, &config, "web").await.expect_err("refused");
    assert_eq!(
        err,
        "apps/web/kustomization.yaml: `http://127.0.0.1:18080/replicas-patch.yaml` is remote; remote bases are off for this application (source.allowRemoteBases: true to allow)"
    );
    assert_eq!(pool.tool_runs(), 0, "refused before kustomize ran (not even located)");
    assert!(listener.accept().is_err(), "the local server saw a request");
    // step 5: an unroutable host, the same refusal
    let text = std::fs::read_to_string(case.join("repo/apps/web/kustomization.yaml")).unwrap();
    lab.repo.write("apps/web/kustomization.yaml", &text.replace("127.0.0.1:18080", "192.0.2.10")).unwrap();
    lab.repo.commit("unroutable").unwrap();
    let err = render(&pool, &config, "web").await.expect_err("refused");
    assert_eq!(
        err,
        "apps/web/kustomization.yaml: `http://192.0.2.10/replicas-patch.yaml` is remote; remote bases are off for this application (source.allowRemoteBases: true to allow)"
    );
    // with remote bases on, a loopback host is still refused
    lab.repo.write("apps/web/kustomization.yaml", &text).unwrap();
    lab.repo.commit("loopback again").unwrap();
    let (config, pool) =
        pool_with(&lab, "name: web, path: apps/web, source: {type: kustomize, allowRemoteBases: true}");
    let err = render(&pool, &config, "web").await.expect_err("loopback");
    assert_eq!(
        err,
        "apps/web/kustomization.yaml: `http://127.0.0.1:18080/replicas-patch.yaml` (patches[].path) names a loopback or link-local host; plumb never lets a render fetch from plumb's own machine"
    );
    assert!(listener.accept().is_err(), "the local server saw a request");
}

fn pool_with(lab: &Lab, app: &str) -> (Arc<plumb::config::Config>, Pool) {
    pool(lab, "", &[app])
}

/// A base outside the repository (on the machine running plumb) and a URL in a
/// generator's env file are refused before the run, naming the file and the entry; a
/// base elsewhere in the repository is part of the working copy.
#[tokio::test]
async fn kustomize_entries_leaving_the_repository_are_refused() {
    let lab = Lab::new("contain-outside");
    let w = |p: &str, t: &str| lab.repo.write(p, t).unwrap();
    w("apps/web/kustomization.yaml", "resources: [../../lib/base]\n");
    w("lib/base/kustomization.yaml", "resources: [cm.yaml]\n");
    w("lib/base/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\n");
    w("apps/etc/kustomization.yaml", "resources: [../../../../../../../etc]\n");
    w("apps/gen/kustomization.yaml", "secretGenerator:\n- name: s\n  envs: [https://example.test/prod.env]\n");
    lab.repo.commit("three kustomizations").unwrap();
    let (config, pool) =
        pool(&lab, "", &["name: web, path: apps/web", "name: etc, path: apps/etc", "name: gen, path: apps/gen"]);
    let (out, _) = render(&pool, &config, "web").await.unwrap();
    assert!(out.contains("\"name\":\"base\""), "{out}");
    let err = render(&pool, &config, "etc").await.expect_err("outside");
    assert_eq!(
        err,
        "apps/etc/kustomization.yaml: `../../../../../../../etc` (resources) leaves the repository (an absolute path, or `..` beyond its root); a render reads only the commit"
    );
    let err = render(&pool, &config, "gen").await.expect_err("remote env file");
    assert_eq!(
        err,
        "apps/gen/kustomization.yaml: `https://example.test/prod.env` is remote; remote bases are off for this application (source.allowRemoteBases: true to allow)"
    );
}

/// The namespace is the backstop: kustomize run directly (the pre-check bypassed) on a
/// kustomization whose resource is a URL on the host's loopback reaches nothing; the
/// same run with network allowed does reach it (the test can fail).
#[tokio::test]
async fn the_tool_cannot_open_a_network_connection() {
    assert!(sandbox::isolation().no_network.is_some(), "the test machine can make network namespaces");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!("patches:\n- path: http://127.0.0.1:{port}/patch.yaml\nresources: [cm.yaml]\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").unwrap();
    let limits = sandbox::Limits { timeout: Duration::from_secs(30), ..sandbox::Limits::default() };
    let k = bin("kustomize");
    let err = sandbox::run(&k, &["build", "."], dir.path(), limits).await.expect_err("no network");
    println!("without network: {err}");
    assert!(listener.accept().is_err(), "the listener saw a connection from the tool");
    // with network: kustomize connects (and fails on what it reads)
    let seen = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok((mut s, _)) = listener.accept() {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = [0u8; 256];
                let n = s.read(&mut buf).unwrap_or(0);
                return String::from_utf8_lossy(&buf[..n]).to_string();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        String::from("no connection")
    });
    let _ = sandbox::run(&k, &["build", "."], dir.path(), sandbox::Limits { network: true, ..limits }).await;
    let request = seen.join().unwrap();
    assert!(request.starts_with("GET /patch.yaml"), "{request}");
}
