#![forbid(unsafe_code)]
//! The `plumb` binary: parse the command line and hand over to the library.

/// mimalloc returns the pages a pass freed to the system soon after (glibc's malloc keeps
/// them): the process's resident memory falls back after a burst of passes. Not with the
/// feature `system-allocator` (for heap profilers).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The allocator settings `plumb serve` runs with unless the environment sets its own:
/// freed pages go back to the system at once, and arena memory is committed as it is
/// used (mimalloc's options, read from the environment when the process starts). The
/// memory figures of `docs/performance.md` are measured with these.
const ALLOCATOR_DEFAULTS: [(&str, &str); 2] = [("MIMALLOC_PURGE_DELAY", "0"), ("MIMALLOC_ARENA_EAGER_COMMIT", "0")];

fn main() -> std::process::ExitCode {
    allocator_defaults();
    plumb::cli::main()
}

/// `plumb serve` with an allocator option unset in its environment: runs itself again
/// (`exec`, the same process id and arguments) with [`ALLOCATOR_DEFAULTS`] set, since
/// mimalloc reads them before `main`. Other commands are short-lived: left as they are.
/// An `exec` that fails is logged and the process goes on with mimalloc's defaults.
fn allocator_defaults() {
    use std::os::unix::process::CommandExt as _;
    if cfg!(feature = "system-allocator") || std::env::args_os().nth(1).is_none_or(|a| a != "serve") {
        return;
    }
    let unset: Vec<_> = ALLOCATOR_DEFAULTS.iter().filter(|(k, _)| std::env::var_os(k).is_none()).collect();
    if unset.is_empty() {
        return;
    }
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_default();
    let mut again = std::process::Command::new("/proc/self/exe");
    again.arg0(arg0).args(args);
    for (k, v) in unset {
        again.env(k, v);
    }
    let e = again.exec();
    eprintln!("plumb serve: running again with the allocator defaults: {e}");
}
