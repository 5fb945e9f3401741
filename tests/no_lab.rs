//! The product contains none of the lab: the control plane, Git server, Gitea and the
//! demo live in the workspace member `lab/` (package `plumb-lab`), which depends on
//! plumb, never the other way round. `scripts/test` also checks `cargo tree`.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn src_has_no_lab_module() {
    let src = Path::new(ROOT).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let lab: Vec<_> = files.iter().filter(|f| f.starts_with(src.join("lab")) || f.ends_with("src/lab.rs")).collect();
    assert!(lab.is_empty(), "the lab is back in the product: {lab:?}");
    assert!(files.len() > 10, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for line in text.lines().map(str::trim) {
            assert!(!(line.starts_with("pub mod lab") || line.starts_with("mod lab")), "{}: {line}", f.display());
            assert!(!line.contains("plumb_lab"), "{} uses the lab crate: {line}", f.display());
        }
    }
}

#[test]
fn manifest_does_not_depend_on_the_lab() {
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap();
    // Every table but `[workspace]` (which lists the lab as a member); comments aside.
    let mut table = String::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            table = line.to_string();
        } else if table != "[workspace]" && !line.starts_with('#') {
            assert!(
                !(line.contains("plumb-lab") || line.contains("plumb_lab") || line.contains("\"lab\"")),
                "Cargo.toml {table}: {line}"
            );
        }
    }
    assert!(manifest.contains("[workspace]\nmembers = [\".\", \"lab\"]"), "the lab is no longer a workspace member");
}

#[test]
fn the_binary_has_no_demo_command() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_plumb")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && help.contains("serve"), "{help}");
    assert!(!help.lines().any(|l| l.trim_start().starts_with("demo")), "{help}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_plumb")).arg("demo").output().unwrap();
    assert!(!out.status.success(), "`plumb demo` still runs");
}
