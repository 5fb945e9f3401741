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

/// A Chromium a test drives as a person would — loads pages, clicks buttons, fills
/// fields — through Debian's chromedriver (`$PLUMB_CHROMEDRIVER` or
/// `/usr/bin/chromedriver`, installed beside the browser by `tools/browser/install.sh`)
/// over WebDriver ([`fantoccini`]). Both processes end when it is dropped.
pub struct Driven {
    /// The WebDriver session.
    pub client: fantoccini::Client,
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Driven {
    /// Starts chromedriver on a free loopback port and a headless Chromium session
    /// `width` × `height` pixels.
    pub async fn start((width, height): (u32, u32)) -> Self {
        let driver_path = std::env::var_os("PLUMB_CHROMEDRIVER")
            .map_or_else(|| PathBuf::from("/usr/bin/chromedriver"), PathBuf::from);
        assert!(
            driver_path.is_file(),
            "no chromedriver at {}: run tools/browser/install.sh (scripts/test does) or set PLUMB_CHROMEDRIVER",
            driver_path.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = tokio::process::Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| (*f).to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push(format!("--window-size={width},{height}"));
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), serde_json::json!({"binary": chromium(), "args": args}));
        let url = format!("http://127.0.0.1:{port}");
        let mut last = String::new();
        // chromedriver listens within a second or two; a bound, not a measurement
        for _ in 0..100 {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match fantoccini::ClientBuilder::new(connector).capabilities(caps.clone()).connect(&url).await {
                Ok(client) => return Self { client, _driver: driver, _profile: profile },
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("no WebDriver session at {url}: {last}");
    }

    /// Clicks the button whose text is `label` and waits for the page it leads to;
    /// that page's HTML.
    pub async fn click(&self, label: &str) -> String {
        let xpath = format!("//button[normalize-space(.)='{label}']");
        let before = self.client.current_url().await.unwrap();
        let button = self
            .client
            .find(fantoccini::Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no button {label:?} on {before}: {e}"));
        button.click().await.unwrap();
        // a form submits by a navigation: wait for the new document
        for _ in 0..100 {
            let now = self.client.current_url().await.unwrap();
            if now != before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.client.wait().for_element(fantoccini::Locator::Css("h1")).await.unwrap();
        self.client.source().await.unwrap()
    }
}
