//! `plumb bootstrap` and the `plumb serve` that takes over from it, for the tests of
//! plumb's self-management: the binary run against the shared control plane, plumb's
//! Application statuses and policy ConfigMap in `plumb-system`, and the kubelet's update
//! of the mounted policy file played by hand.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
};

use super::{Lab, control_plane, kubectl};

/// plumb's namespace in `deploy/`.
pub const NS: &str = "plumb-system";

/// The kustomize the lab built (`tools/testbins`).
pub fn kustomize() -> std::path::PathBuf {
    plumb_lab::testbins_dir().join("kustomize/current/bin/kustomize")
}

/// `plumb bootstrap --repository <lab> --path PATH --checkout <lab's work tree> EXTRA…`
/// as admin: (exit code, stdout, stderr).
pub fn bootstrap(lab: &Lab, path: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
        .args(["bootstrap", "--repository", &lab.url, "--path", path, "--checkout"])
        .arg(&lab.repo.work)
        .args(extra)
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .env("PLUMB_KUSTOMIZE", kustomize())
        .env("PLUMB_LOG", "warn")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// A `plumb serve` process, killed when dropped.
pub struct Serve(Child, std::path::PathBuf);

impl Serve {
    /// `plumb serve --config policy` with `kubeconfig`, checking the policy file every
    /// second, its log in the lab's directory.
    pub fn start(lab: &Lab, policy: &Path, kubeconfig: &Path) -> Serve {
        let log = lab.tmp.path().join("serve.log");
        let child = Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args(["serve", "--listen", "127.0.0.1:0", "--internal-listen", "127.0.0.1:0"])
            .args(["--probe-listen", "127.0.0.1:0", "--reload-every", "1", "--config"])
            .arg(policy)
            .arg("--cache-dir")
            .arg(lab.tmp.path().join("cache"))
            .env("KUBECONFIG", kubeconfig)
            .env("PLUMB_KUSTOMIZE", kustomize())
            .env("PLUMB_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Serve(child, log)
    }

    /// Its log so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The status of application `app` (JSON null when there is none).
pub fn status_of(app: &str) -> serde_json::Value {
    let text = control_plane()
        .kubectl(&["-n", NS, "get", "applications.plumb.dev", app, "-o", "jsonpath={.status}"])
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_default()
}

/// The policy in the ConfigMap plumb's pod mounts.
pub fn mounted_policy() -> String {
    kubectl(&["-n", NS, "get", "configmap", "plumb-policy", "-o", "jsonpath={.data.policy\\.yaml}"])
}

/// What the kubelet does with a changed ConfigMap volume: the file replaced in one step.
pub fn remount(file: &Path) {
    let tmp = file.with_extension("new");
    std::fs::write(&tmp, mounted_policy()).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// Whether `kubectl get ARGS…` finds the object.
pub fn exists(args: &[&str]) -> bool {
    control_plane().kubectl(&[&["get"], args].concat()).is_ok()
}

/// `text` of a bootstrap policy with its environment `plumb` checking every 2 s.
pub fn every_two_seconds(text: &str) -> String {
    let syncs = "    syncPolicy: {automated: true, prune: true, selfHeal: true}\n";
    assert!(text.contains(syncs), "{text}");
    text.replace(syncs, &format!("{syncs}    reconcileInterval: 2s\n"))
}
