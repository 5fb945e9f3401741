//! Records the Git commit plumb is built from as `PLUMB_GIT_COMMIT` (`plumb version`);
//! `unknown` when not built from a Git checkout (or without `git`).

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=PLUMB_GIT_COMMIT={commit}");
    // A new commit (or checkout) changes HEAD or the ref it points at.
    // (a worktree has its own HEAD; its branches live in the common directory)
    if let Ok(out) = std::process::Command::new("git").args(["rev-parse", "--git-dir", "--git-common-dir"]).output()
        && out.status.success()
    {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut dirs = text.lines();
        let dir = dirs.next().unwrap_or_default();
        let common = dirs.next().unwrap_or_default();
        for path in [format!("{dir}/HEAD"), format!("{common}/refs/heads"), format!("{common}/packed-refs")] {
            // a missing path would make cargo run this script on every build
            if !dir.is_empty() && std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
