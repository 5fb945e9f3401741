#![forbid(unsafe_code)]
//! The `plumb-lab` binary: `plumb-lab demo` (see [`plumb_lab::demo`]).

use std::{io::IsTerminal, process::ExitCode};

use clap::{Parser, Subcommand};

/// The lab around plumb: a local control plane, a Git server and plumb serving them.
#[derive(Parser, Debug)]
#[command(name = "plumb-lab", version, about)]
struct Cli {
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info`, `plumb=debug`.
    #[arg(long, env = "PLUMB_LOG", default_value = "info", global = true)]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The demo: a local control plane (unless --kubeconfig), a Git repository served
    /// over HTTP from `config/examples/`, and `plumb serve` against it.
    Demo(plumb_lab::demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter =
        tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Demo(args) => plumb_lab::demo::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
