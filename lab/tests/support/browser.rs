//! A headless Chromium (Debian's, installed by `tools/browser/install.sh`) for the tests
//! that look at a page as a person does: its DOM and screenshots.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

/// Flags for a headless Chromium on a machine with no network but loopback (as root:
/// `--no-sandbox`); the profile directory is added per run.
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
];

/// The browser: `$PLUMB_CHROMIUM` or Debian's `/usr/bin/chromium`.
pub fn chromium() -> PathBuf {
    let path = std::env::var_os("PLUMB_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        path.is_file(),
        "no Chromium at {}: run tools/browser/install.sh (scripts/test does; as root it installs Debian's chromium package) or set PLUMB_CHROMIUM",
        path.display()
    );
    path
}

/// Runs Chromium once with `args` and a fresh profile; returns its standard output.
pub async fn browse(args: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(chromium())
        .args(CHROMIUM_FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .kill_on_drop(true)
        .output();
    // a bound against a hung browser, not a measurement
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .unwrap_or_else(|_| panic!("chromium {args:?} did not finish"))
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium {args:?} failed ({}): {stderr}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A screenshot of `url` in a window `width` × `height` into `file`; the PNG's size.
pub async fn screenshot(url: &str, file: &Path, (width, height): (u32, u32)) -> (u32, u32) {
    let _ = std::fs::remove_file(file);
    browse(&[format!("--screenshot={}", file.display()), format!("--window-size={width},{height}"), url.into()]).await;
    let png = std::fs::read(file).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", file.display()));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{} is not a PNG", file.display());
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
    (be(&png[16..20]), be(&png[20..24]))
}
