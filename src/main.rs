#![forbid(unsafe_code)]
//! The `plumb` binary: parse the command line and hand over to the library.

/// mimalloc returns the pages a pass freed to the system soon after (glibc's malloc keeps
/// them): the process's resident memory falls back after a burst of passes. Not with the
/// feature `system-allocator` (for heap profilers).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    plumb::cli::main()
}
