#![forbid(unsafe_code)]
//! The `plumb` binary: parse the command line and hand over to the library.

fn main() -> std::process::ExitCode {
    plumb::cli::main()
}
