//! A real control plane on loopback.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

/// Which optional components to start besides etcd and kube-apiserver.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// kube-controller-manager (Deployments → Pods, namespace deletion, garbage collection).
    pub controller_manager: bool,
    /// kube-scheduler (binds Pods to nodes).
    pub scheduler: bool,
    /// kwok with one fake node (Pods become Running/Ready).
    pub kwok: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { controller_manager: true, scheduler: true, kwok: true }
    }
}

/// A running control plane. Dropping it kills every component.
pub struct ControlPlane {
    dir: tempfile::TempDir,
    children: Vec<(String, Child)>,
    /// kube-apiserver's arguments, to start it again after [`ControlPlane::stop_apiserver`].
    apiserver_args: Vec<String>,
    /// Path of an admin kubeconfig (static bearer token, `system:masters`).
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
}

/// Where `tools/testbins/build.sh` puts binaries: `$PLUMB_TESTBINS` or
/// `~/.cache/plumb-testbins`.
pub fn testbins_dir() -> PathBuf {
    std::env::var_os("PLUMB_TESTBINS").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/plumb-testbins"),
        PathBuf::from,
    )
}

pub(crate) fn bin(component: &str, name: &str) -> anyhow::Result<PathBuf> {
    let p = testbins_dir().join(component).join("current/bin").join(name);
    if !p.is_file() {
        bail!("{} not found: build the control plane first with tools/testbins/build.sh", p.display());
    }
    Ok(p)
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

impl ControlPlane {
    /// Starts the components and waits until the API server is ready (and, with kwok,
    /// until the fake node is Ready). Blocking; takes ~10–20 s.
    ///
    /// # Errors
    /// A binary is missing, a component exits early, or readiness times out (60 s);
    /// the message includes the tail of the component's log.
    pub fn start(opts: Options) -> anyhow::Result<Self> {
        // Ports are picked free and bound later by the components: another process may
        // take one in between. Such a start is tried again with new ports.
        let mut tries = 0;
        loop {
            match Self::start_once(opts) {
                Err(e) if tries < 3 && format!("{e:#}").contains("address already in use") => {
                    tries += 1;
                    eprintln!("control plane: a port was taken meanwhile, starting again ({e:#})");
                }
                other => return other,
            }
        }
    }

    fn start_once(opts: Options) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("plumb-cp-").tempdir()?;
        let run_dir = dir.path().to_path_buf();
        remove_when_gone(&run_dir)?;
        let pki = run_dir.join("pki");
        std::fs::create_dir_all(&pki)?;
        write_pki(&pki)?;
        let token = hex::encode(rand::random::<[u8; 24]>());
        std::fs::write(pki.join("tokens.csv"), format!("{token},plumb-admin,plumb-admin,\"system:masters\"\n"))?;

        let etcd_port = free_port()?;
        let etcd_peer = free_port()?;
        let api_port = free_port()?;
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = run_dir.join("admin.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: plumb-lab\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: plumb-admin\n  user:\n    token: {token}\ncontexts:\n- name: plumb-lab\n  context: {{cluster: plumb-lab, user: plumb-admin, namespace: default}}\ncurrent-context: plumb-lab\n",
                ca = pki.join("ca.crt").display()
            ),
        )?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let p = |f: &str| pki.join(f).display().to_string();
        let apiserver_args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            "--advertise-address=127.0.0.1".into(),
            "--endpoint-reconciler-type=none".into(),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            format!("--token-auth-file={}", p("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            format!("--cert-dir={}", run_dir.join("apiserver-certs").display()),
            "--profiling=true".into(),
            "--v=1".into(),
        ];
        let mut cp = ControlPlane {
            dir,
            children: Vec::new(),
            apiserver_args,
            kubeconfig: kubeconfig.clone(),
            server: server.clone(),
        };

        let etcd_dir = run_dir.join("etcd");
        std::fs::create_dir_all(&etcd_dir)?;
        std::fs::set_permissions(&etcd_dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        cp.spawn(
            "etcd",
            &bin("etcd", "etcd")?,
            &[
                "--name=plumb".into(),
                format!("--data-dir={}", etcd_dir.display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=plumb={peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--quota-backend-bytes=2147483648".into(),
                "--log-level=warn".into(),
            ],
        )?;
        cp.start_apiserver()?;
        let kc = kubeconfig.display().to_string();
        if opts.controller_manager {
            let port = free_port()?;
            cp.spawn(
                "kube-controller-manager",
                &bin("k8s", "kube-controller-manager")?,
                &[
                    format!("--kubeconfig={kc}"),
                    format!("--authentication-kubeconfig={kc}"),
                    format!("--authorization-kubeconfig={kc}"),
                    "--leader-elect=false".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={port}"),
                    format!("--service-account-private-key-file={}", p("sa.key")),
                    format!("--root-ca-file={}", p("ca.crt")),
                    "--controllers=*".into(),
                    "--v=1".into(),
                ],
            )?;
        }
        if opts.scheduler {
            let port = free_port()?;
            cp.spawn(
                "kube-scheduler",
                &bin("k8s", "kube-scheduler")?,
                &[
                    format!("--kubeconfig={kc}"),
                    format!("--authentication-kubeconfig={kc}"),
                    format!("--authorization-kubeconfig={kc}"),
                    "--leader-elect=false".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={port}"),
                    "--v=1".into(),
                ],
            )?;
        }
        if opts.kwok {
            let stages = testbins_dir().join("kwok/current/stages.yaml");
            cp.spawn(
                "kwok",
                &bin("kwok", "kwok")?,
                &[
                    format!("--kubeconfig={kc}"),
                    format!("--config={}", stages.display()),
                    "--manage-all-nodes=true".into(),
                    "--node-lease-duration-seconds=40".into(),
                    "--cidr=10.244.0.0/24".into(),
                ],
            )?;
            let node = run_dir.join("node.yaml");
            std::fs::write(&node, NODE)?;
            cp.kubectl(&["apply", "-f", &node.display().to_string()])?;
            cp.wait_node_ready(Duration::from_secs(60))?;
        }
        Ok(cp)
    }

    /// Starts kube-apiserver (on the same port, with the same PKI and etcd as before)
    /// and waits until it is ready (90 s): at start, and again after
    /// [`ControlPlane::stop_apiserver`].
    ///
    /// # Errors
    /// As [`ControlPlane::start`].
    pub fn start_apiserver(&mut self) -> anyhow::Result<()> {
        let args = self.apiserver_args.clone();
        self.spawn("kube-apiserver", &bin("k8s", "kube-apiserver")?, &args)?;
        self.wait_ready(Duration::from_secs(90))
    }

    /// Kills kube-apiserver with SIGKILL, as a crash would, and returns once it is gone;
    /// etcd and the other components keep running (clients see connection refused until
    /// [`ControlPlane::start_apiserver`]).
    ///
    /// # Errors
    /// When the API server is not running.
    pub fn stop_apiserver(&mut self) -> anyhow::Result<()> {
        let i = self
            .children
            .iter()
            .position(|(name, _)| name == "kube-apiserver")
            .context("kube-apiserver is not running")?;
        let (_, mut watchdog) = self.children.remove(i);
        // Kill the server itself (the watchdog would only notice within half a second);
        // the watchdog then reaps it and exits.
        let out = Command::new("pgrep").args(["-x", "kube-apiserver", "-P"]).arg(watchdog.id().to_string()).output()?;
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            run(Command::new("kill").args(["-KILL", pid]))?;
        }
        watchdog.wait()?;
        Ok(())
    }

    /// Runs the machine's `kubectl` against this control plane.
    ///
    /// # Errors
    /// kubectl's stderr when it fails.
    pub fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        let out =
            Command::new("kubectl").arg("--kubeconfig").arg(&self.kubeconfig).args(args).output().context("kubectl")?;
        if !out.status.success() {
            bail!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A new kube client for this control plane (one per tokio runtime).
    ///
    /// # Errors
    /// When the kubeconfig cannot be read.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        plumb::cluster::client(Some(&self.kubeconfig)).await
    }

    /// The process id of each running component (`etcd`, `kube-apiserver`, …), by name:
    /// each runs under a watchdog shell (see `spawn_watched`), whose child it is.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.children
            .iter()
            .filter_map(|(name, watchdog)| {
                let out = Command::new("pgrep").arg("-P").arg(watchdog.id().to_string()).output().ok()?;
                let pids = String::from_utf8_lossy(&out.stdout).into_owned();
                // the component, not the watchdog's `sleep`
                pids.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                    .find(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() != "sleep"))
                    .map(|pid| (name.clone(), pid))
            })
            .collect()
    }

    /// The admin kubeconfig of this control plane.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The run directory (PKI, data, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The log of one component (`etcd`, `kube-apiserver`, …).
    pub fn logs(&self, component: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{component}.log"))).unwrap_or_default()
    }

    fn spawn(&mut self, name: &str, bin: &Path, args: &[String]) -> anyhow::Result<()> {
        let log = self.dir.path().join(format!("{name}.log"));
        let child = spawn_watched(name, Command::new(bin).args(args), &log)?;
        self.children.push((name.to_string(), child));
        Ok(())
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                bail!("{name} exited ({status}):\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            }
        }
        Ok(())
    }

    fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            self.check_alive()?;
            let ok = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(["get", "--raw", "/readyz"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!(
                    "kube-apiserver not ready after {timeout:?}:\n{}",
                    self.logs("kube-apiserver").lines().rev().take(20).collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn wait_node_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            self.check_alive()?;
            let out = self
                .kubectl(&[
                    "get",
                    "node",
                    "kwok-node-0",
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.spec.taints}",
                ])
                .unwrap_or_default();
            if out.starts_with("True") && !out.contains("not-ready") {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!("fake node not Ready after {timeout:?} ({out})");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for (_, child) in self.children.iter_mut().rev() {
            let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        }
        for (_, child) in &mut self.children {
            let _ = child.wait();
        }
    }
}

/// Removes `dir` (about 130 MB of etcd data and logs) once the current process is gone,
/// even when the control plane is never dropped (a test binary's shared control plane
/// lives in a static) or the process is killed: a detached shell waits for this process
/// to exit, gives the components' watchdogs time to stop them, and deletes the directory.
fn remove_when_gone(dir: &Path) -> anyhow::Result<()> {
    let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; sleep 3; rm -rf "$2""#;
    Command::new("sh")
        .args(["-c", script, "sh", &std::process::id().to_string()])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(())
}

/// Starts `cmd` (program, arguments, environment and working directory as set on it)
/// under a watchdog shell, with stdout and stderr appended to `log`. The watchdog kills
/// the program when the current process goes away (even after a panic or SIGKILL of the
/// test binary) and when the watchdog itself gets SIGTERM/SIGINT; so killing the
/// returned child with SIGTERM stops the program.
///
/// # Errors
/// When the log cannot be created or the shell not started.
pub(crate) fn spawn_watched(name: &str, cmd: &Command, log: &Path) -> anyhow::Result<Child> {
    let log = std::fs::File::create(log)?;
    let script = r#"p=$1; shift; "$@" & c=$!; trap 'kill -9 $c 2>/dev/null; exit 0' TERM INT; while kill -0 "$p" 2>/dev/null && kill -0 $c 2>/dev/null; do sleep 0.5; done; kill -9 $c 2>/dev/null; wait $c"#;
    let mut w = Command::new("bash");
    w.arg("-c").arg(script).arg("plumb-lab").arg(std::process::id().to_string()).arg(cmd.get_program());
    w.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => w.env(k, v),
            None => w.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        w.current_dir(d);
    }
    w.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log).spawn().with_context(|| format!("start {name}"))
}

fn write_pki(dir: &Path) -> anyhow::Result<()> {
    let o = |args: &[&str]| run(Command::new("openssl").args(args).current_dir(dir));
    o(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-sha256",
        "-days",
        "3650",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=plumb-lab-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ])?;
    o(&[
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "apiserver.key",
        "-out",
        "apiserver.csr",
        "-subj",
        "/CN=kube-apiserver",
    ])?;
    std::fs::write(
        dir.join("apiserver.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )?;
    o(&[
        "x509",
        "-req",
        "-sha256",
        "-days",
        "3650",
        "-in",
        "apiserver.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "apiserver.crt",
        "-extfile",
        "apiserver.ext",
    ])?;
    o(&["genrsa", "-out", "sa.key", "2048"])?;
    o(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;
    Ok(())
}

const NODE: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations: {node.alpha.kubernetes.io/ttl: "0", kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: kwok-node-0, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
spec: {}
status:
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: fake, kubeProxyVersion: fake, bootID: "", containerRuntimeVersion: "", kernelVersion: "", machineID: "", osImage: "", systemUUID: ""}
  phase: Running
"#;
