//! Git credentials go only to the configured host (issue 12): a repository URL that
//! redirects to another host must not hand that host the token. Real libgit2 against
//! two small HTTP servers on loopback: a redirector on 127.0.0.1 and a Git host on
//! 127.0.0.2 that asks for Basic credentials and records what it is sent.
#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader, Write},
    net::{SocketAddr, TcpListener},
    sync::{Arc, Mutex},
};

use plumb::source::{Credentials, Mirror};

const TOKEN: &[u8] = b"s3cr3t-token-of-fleet";

/// Serves HTTP/1.1 on `listener`, one request per connection, answering each with
/// `answer(path)`; returns the requests seen (request line and headers).
fn serve(listener: TcpListener, answer: impl Fn(&str) -> String + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            log.lock().unwrap().push(head);
            let _ = stream.write_all(answer(&path).as_bytes());
        }
    });
    seen
}

/// A Git host that wants Basic credentials for everything (never satisfied).
fn git_host() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.2:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = serve(l, |_| {
        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .into()
    });
    (addr, seen)
}

fn fetch(url: &str) -> String {
    let cache = tempfile::tempdir().unwrap();
    let creds = Credentials { token: Some(("git".into(), TOKEN.to_vec())), ..Credentials::default() };
    let mirror = Mirror::open(cache.path(), url, creds).unwrap();
    mirror.resolve("main").expect_err("the host never accepts").to_string()
}

fn authorizations(seen: &Mutex<Vec<String>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|h| h.lines().find(|l| l.to_ascii_lowercase().starts_with("authorization:")).map(String::from))
        .collect()
}

/// The configured host asks for credentials: it gets them (so the server can see a
/// token when one is sent).
#[test]
fn the_configured_host_gets_the_token() {
    let (host, seen) = git_host();
    let err = fetch(&format!("http://{host}/fleet.git"));
    let auth = authorizations(&seen);
    assert!(!auth.is_empty(), "libgit2 sent no credentials to the configured host: {err}\n{:?}", seen.lock().unwrap());
    assert!(!err.contains("s3cr3t"), "{err}");
}

/// The configured URL redirects to another host, which asks for credentials: it gets
/// none, and the error says why without quoting the token.
#[test]
fn a_redirect_to_another_host_gets_no_credentials() {
    let (host, host_seen) = git_host();
    let redirector = TcpListener::bind("127.0.0.1:0").unwrap();
    let from = redirector.local_addr().unwrap();
    let redirected = serve(redirector, move |path| {
        format!("HTTP/1.1 302 Found\r\nLocation: http://{host}{path}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    });
    let err = fetch(&format!("http://{from}/fleet.git"));
    assert!(!redirected.lock().unwrap().is_empty(), "the redirector was asked: {err}");
    assert!(!host_seen.lock().unwrap().is_empty(), "libgit2 followed the redirect: {err}");
    assert_eq!(authorizations(&host_seen), Vec::<String>::new(), "{err}");
    assert!(err.contains(&format!("credentials refused to http://{host}/")), "{err}");
    assert!(!err.contains("s3cr3t"), "{err}");
}
