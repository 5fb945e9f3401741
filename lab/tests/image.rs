//! The container image built without a daemon (`tools/image/build.sh`, an OCI image
//! layout) is well-formed (every blob matches its digest, the layer its diff_id) and
//! self-contained: its root filesystem, unpacked from the layout alone, runs
//! `plumb --version` and `plumb validate` under chroot as the image's non-root user.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use sha2::{Digest, Sha256};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let hex = digest.strip_prefix("sha256:").unwrap();
    let path = layout.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(hex::encode(Sha256::digest(&bytes)), hex, "blob {digest} does not match its digest");
    path
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn sh(cmd: &str) -> std::process::Output {
    Command::new("bash").args(["-c", cmd]).output().unwrap()
}

/// Runs `args` inside `rootfs` as uid/gid 65532: chroot as root (CI), or in a user
/// namespace mapping the caller to root when not.
fn in_image(rootfs: &Path, args: &[&str]) -> std::process::Output {
    let root = sh("id -u").stdout == b"0\n";
    let mut cmd = if root { Command::new("chroot") } else { Command::new("unshare") };
    if !root {
        cmd.args(["--user", "--map-root-user", "chroot"]);
    }
    if root {
        cmd.arg("--userspec=65532:65532");
    }
    cmd.arg(rootfs).args(args).env_clear().env("PATH", "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").output().unwrap()
}

#[test]
fn the_image_rootfs_runs_plumb_on_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("oci");
    let build = Command::new(format!("{ROOT}/tools/image/build.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_plumb-under-test"), "--tag", "test", "--out"])
        .arg(&layout)
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));

    let index = json(&layout.join("index.json"));
    assert_eq!(json(&layout.join("oci-layout"))["imageLayoutVersion"], "1.0.0");
    let desc = &index["manifests"][0];
    assert_eq!(desc["annotations"]["org.opencontainers.image.ref.name"], "test");
    let manifest = json(&blob(&layout, desc["digest"].as_str().unwrap()));
    let config = json(&blob(&layout, manifest["config"]["digest"].as_str().unwrap()));
    assert_eq!(config["config"]["User"], "65532:65532", "non-root");
    assert_eq!(config["config"]["Entrypoint"][0], "/usr/local/bin/plumb");
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), config["rootfs"]["diff_ids"].as_array().unwrap().len());

    let rootfs = tmp.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    for (layer, diff_id) in layers.iter().zip(config["rootfs"]["diff_ids"].as_array().unwrap()) {
        let path = blob(&layout, layer["digest"].as_str().unwrap());
        let sum = sh(&format!("gzip -dc '{}' | sha256sum", path.display()));
        let sum = String::from_utf8_lossy(&sum.stdout);
        assert_eq!(format!("sha256:{}", sum.split_whitespace().next().unwrap()), diff_id.as_str().unwrap());
        let untar = Command::new("tar").arg("-xzf").arg(&path).arg("-C").arg(&rootfs).output().unwrap();
        assert!(untar.status.success(), "{}", String::from_utf8_lossy(&untar.stderr));
    }

    let out = in_image(&rootfs, &["/usr/local/bin/plumb", "--version"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("plumb {}", env!("CARGO_PKG_VERSION")));

    // The policy the deploy/ base ships, with its webhook secret file.
    std::fs::copy(format!("{ROOT}/deploy/base/policy.yaml"), rootfs.join("tmp/policy.yaml")).unwrap();
    std::fs::create_dir_all(rootfs.join("etc/plumb/secrets")).unwrap();
    std::fs::write(rootfs.join("etc/plumb/secrets/webhook-secret"), "s3cret\n").unwrap();
    let out = in_image(&rootfs, &["plumb", "validate", "/tmp/policy.yaml"]);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // And it does validate: a broken policy fails, naming the file and line.
    std::fs::write(rootfs.join("tmp/bad.yaml"), "applications:\n  - {name: x, repository: nowhere\n").unwrap();
    let out = in_image(&rootfs, &["plumb", "validate", "/tmp/bad.yaml"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("/tmp/bad.yaml"), "{text}");
}
