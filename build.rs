//! Records the Git commit plumb is built from as `PLUMB_GIT_COMMIT` (`plumb version`):
//! the environment's `PLUMB_GIT_COMMIT` when the builder gives it (the image build has
//! no `.git`), else `git rev-parse HEAD`; `unknown` when neither says.

fn main() {
    // given by the builder (the image build has no .git): `PLUMB_GIT_COMMIT=<sha> cargo build`
    println!("cargo:rerun-if-env-changed=PLUMB_GIT_COMMIT");
    if let Ok(given) = std::env::var("PLUMB_GIT_COMMIT")
        && !given.trim().is_empty()
        && given != "unknown"
    {
        println!("cargo:rustc-env=PLUMB_GIT_COMMIT={}", given.trim());
        println!("cargo:rerun-if-changed=build.rs");
        return;
    }
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
    // A new commit (or checkout) changes HEAD or the ref it points at; a commit on another
    // branch (another worktree's) changes neither and builds nothing again.
    // (a worktree has its own HEAD; its branches live in the common directory)
    let args = ["rev-parse", "--git-dir", "--git-common-dir", "--symbolic-full-name", "HEAD"];
    if let Ok(out) = std::process::Command::new("git").args(args).output()
        && out.status.success()
    {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut lines = text.lines();
        let dir = lines.next().unwrap_or_default();
        let common = lines.next().unwrap_or_default();
        // `refs/heads/main`; `HEAD` when detached (then HEAD itself holds the commit)
        let head_ref = lines.next().filter(|r| r.starts_with("refs/")).unwrap_or("HEAD");
        // a ref only in packed-refs gets its own file on the next commit: watch where it appears
        let mut loose = std::path::PathBuf::from(format!("{common}/{head_ref}"));
        if !loose.exists() {
            loose.pop();
        }
        let paths = [format!("{dir}/HEAD"), loose.display().to_string(), format!("{common}/packed-refs")];
        for path in paths {
            // a missing path would make cargo run this script on every build
            if !dir.is_empty() && std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
