//! Behind a proxy: Git fetches over HTTPS (libgit2) and plumb's own HTTP requests (a
//! chart repository here; forges use the same client) go through the proxy
//! `HTTPS_PROXY` / `HTTP_PROXY` name, and straight to the hosts `NO_PROXY` lists.
//! The proxy is a small forward proxy in this test (HTTP `CONNECT` tunnels and
//! absolute-form requests) that records each connection it relays; plumb runs as a
//! child process with the environment a user would set.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use plumb_lab::{ChartRepo, helm_bin, package_chart, run_helm};
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A forward proxy on loopback; `seen` holds `METHOD host:port` of each relayed
/// connection.
struct Proxy {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, record.clone()));
            }
        });
        Proxy { url, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads the request head, connects to its target and relays both ways.
async fn relay(mut client: tokio::net::TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        if client.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut words = text.split_whitespace();
    let (method, target) = (words.next().unwrap_or_default().to_string(), words.next().unwrap_or_default());
    let host = if method == "CONNECT" {
        target.to_string()
    } else {
        let rest = target.strip_prefix("http://").unwrap_or(target);
        rest.split('/').next().unwrap_or_default().to_string()
    };
    seen.lock().unwrap().push(format!("{method} {host}"));
    let Ok(mut upstream) = tokio::net::TcpStream::connect(&host).await else { return };
    if method == "CONNECT" {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.unwrap();
    } else {
        upstream.write_all(&head).await.unwrap();
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// `plumb render app -c policy` with `env`, its exit code and output.
fn render(policy: &Path, cache: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"));
    cmd.args(["render", "proxied", "-c"]).arg(policy).arg("--cache-dir").arg(cache);
    for var in
        ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "all_proxy", "no_proxy"]
    {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).env("PLUMB_LOG", "warn");
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_and_chart_requests_go_through_the_proxy_the_environment_names() {
    assert!(helm_bin().is_file(), "{} is missing: run tools/testbins/build.sh helm", helm_bin().display());
    let lab = Lab::new("proxied");
    let served = lab.tmp.path().join("served");
    let work = lab.tmp.path().join("charts-work");
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}'}\ndata: {color: '{{ .Values.color }}'}\n";
    package_chart(&work, &served, "web", "1.0.0", &[("values.yaml", "color: grey\n"), ("templates/cm.yaml", cm)])
        .unwrap();
    run_helm(&work, &["repo", "index", &served.display().to_string()]).unwrap();
    let charts = ChartRepo::start(&served, None).unwrap();
    lab.repo.write("values/web.yaml", "color: blue\n").unwrap();
    lab.repo.commit("values").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-proxied, renderTools: {{helm: {}}}}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\napplications:\n  - {{name: proxied, repository: r, path: values, namespace: proxied, environment: e, source: {{chart: {{repository: {}, name: web, version: 1.0.0, insecure: true}}, valueFiles: [values/web.yaml]}}}}\n",
            helm_bin().display(),
            lab.url,
            charts.base
        ),
    );
    let proxy = Proxy::start().await;
    let git_host = lab.url.trim_start_matches("http://").split('/').next().unwrap().to_string();
    let chart_host = charts.base.trim_start_matches("http://").to_string();

    // through the proxy: the chart's index and package, in a CONNECT tunnel
    let via = [("HTTP_PROXY", proxy.url.as_str()), ("HTTPS_PROXY", proxy.url.as_str())];
    let (code, out) = render(&policy, &lab.tmp.path().join("cache-1"), &via);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("color: blue"), "{out}");
    let seen = proxy.seen();
    assert!(seen.contains(&format!("CONNECT {chart_host}")), "the chart did not go through the proxy: {seen:?}");

    // NO_PROXY lists loopback: nothing goes through it
    let before = proxy.seen().len();
    let direct = [("HTTP_PROXY", proxy.url.as_str()), ("HTTPS_PROXY", proxy.url.as_str()), ("NO_PROXY", "127.0.0.1")];
    let (code, out) = render(&policy, &lab.tmp.path().join("cache-2"), &direct);
    assert_eq!(code, 0, "{out}");
    assert_eq!(proxy.seen().len(), before, "{:?}", proxy.seen());

    // Git over HTTPS (libgit2 proxies https:// remotes, in a CONNECT tunnel): the
    // fetch asks the proxy for the Git server. (The lab's Git server speaks plain HTTP,
    // so the TLS handshake through the tunnel then fails: the route is what counts.)
    let https = lab.policy(
        "https.yaml",
        &format!(
            "repositories:\n  - {{name: r, url: 'https://{git_host}/proxied.git'}}\nenvironments:\n  - name: e\napplications:\n  - {{name: proxied, repository: r, path: values, namespace: proxied, environment: e}}\n"
        ),
    );
    let before = proxy.seen().len();
    let (code, out) = render(&https, &lab.tmp.path().join("cache-3"), &via);
    assert_ne!(code, 0, "{out}");
    let seen = proxy.seen();
    assert_eq!(seen[before..], [format!("CONNECT {git_host}")], "{out}");
    let (code, out) = render(&https, &lab.tmp.path().join("cache-4"), &direct);
    assert_ne!(code, 0, "{out}");
    assert_eq!(proxy.seen().len(), before + 1, "NO_PROXY: {:?}", proxy.seen());
}
