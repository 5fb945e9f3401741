//! A reader that stops early (`plumb … | head`) is a normal end of every command: the
//! built binary, its standard output a pipe whose reading end is already closed (so the
//! first write fails with `EPIPE`, whatever the pipe's buffer holds), exits 0 and says
//! nothing — no panic, no exit code 101.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};

const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/dev.yaml");

/// Runs `plumb args` with standard output a pipe nobody reads; its exit code and
/// standard error.
fn into_closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_plumb"))
        .args(args)
        .env("PLUMB_LOG", "warn")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_reader_that_stops_early_ends_every_command_quietly() {
    let commands: [&[&str]; 5] = [
        &["version"],
        &["version", "-o", "json"],
        &["completion", "bash"],
        &["validate", CONFIG],
        &["validate", CONFIG, "-o", "yaml"],
    ];
    for args in commands {
        let (code, stderr) = into_closed_pipe(args);
        assert_eq!(code, Some(0), "plumb {args:?}: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "plumb {args:?}: {stderr}");
    }
}

#[test]
fn a_closed_standard_error_does_not_end_a_command() {
    // `validate` prints the problems of a file on standard error, the valid files on
    // standard output
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_plumb"))
        .args(["validate", "/nonexistent/policy.yaml", CONFIG])
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "problems found: exit 1, not a panic's 101");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("dev.yaml: ok"), "the valid file is still reported: {stdout}");
}
