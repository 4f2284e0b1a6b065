//! The `dqngpu` binary: thin commands over the library crates.
//!
//! `main` calls [`run`]; only `main` maps errors to exit codes: 2 for usage errors (unknown
//! names, bad flags), 1 for everything else.

mod cmd;

use clap::{Parser, Subcommand};

/// dqngpu decides which jobs share a GPU, learning from their resource-usage histories.
#[derive(Parser, Debug)]
#[command(name = "dqngpu", version, about, long_about = None)]
struct Cli {
    /// Log filter (e.g. `info`, `dqngpu=debug`); also read from RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the apps of a library with duration, mean and peak usage (validates every profile).
    Apps(cmd::apps::Args),
    /// Draw a job set from a workload class.
    Workload(cmd::workload::Args),
    /// Simulate a job set on a cluster under one scheduler or all.
    Simulate(cmd::simulate::Args),
    /// Fit the contention interference model to measured co-location pairs.
    Calibrate(cmd::calibrate::Args),
    /// Interference model tools.
    Interference(cmd::interference::Args),
    /// Time the simulator (job-steps per second).
    Bench(cmd::bench::Args),
    /// Train an RL placement agent.
    Train(cmd::train::Args),
    /// DeepRM's own environment: train and evaluate against the paper.
    Deeprm(cmd::deeprm::Args),
    /// Reproduce the thesis's evaluation end to end: train, evaluate, tables, plots, report.
    Experiment(cmd::experiment::Args),
    /// Record, import and inspect usage profiles.
    Profile(cmd::profile::Args),
    /// Replay Alibaba's GPU-sharing trace as the FGD paper's experiment.
    Trace(cmd::trace::Args),
    /// Run the placement service.
    Serve(cmd::serve::Args),
    /// Submit a job to the service.
    Submit(cmd::client::SubmitArgs),
    /// Submit a job set to the service as one batch (placed together).
    SubmitBatch(cmd::client::BatchArgs),
    /// List the service's jobs.
    Jobs(cmd::client::JobsArgs),
    /// Show one job of the service.
    Job(cmd::client::JobArgs),
    /// Cancel a job of the service.
    Cancel(cmd::client::CancelArgs),
    /// Kubernetes: the scheduler extender for gpushare and HAMi pods.
    K8s(cmd::k8s::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Apps(a) => cmd::apps::run(a),
        Command::Workload(a) => cmd::workload::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Interference(a) => cmd::interference::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Train(a) => cmd::train::run(a),
        Command::Deeprm(a) => cmd::deeprm::run(a),
        Command::Experiment(a) => cmd::experiment::run(a),
        Command::Profile(a) => cmd::profile::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Submit(a) => cmd::client::submit(a),
        Command::SubmitBatch(a) => cmd::client::submit_batch(a),
        Command::Jobs(a) => cmd::client::jobs(a),
        Command::Job(a) => cmd::client::job(a),
        Command::Cancel(a) => cmd::client::cancel(a),
        Command::K8s(a) => cmd::k8s::run(a),
    }
}

/// Printing into a closed pipe (`dqngpu simulate ... | head -1`) makes `println!` panic, since
/// Rust ignores SIGPIPE (and this workspace forbids the unsafe call that would restore it): end
/// quietly instead, with the status a shell gives a process killed by SIGPIPE (128 + 13).
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// mimalloc, not glibc's malloc: the plan's decisions allocate small buffers on every rayon
/// thread; with the round's foldhash maps and buffers, a seventh less CPU for them
/// (docs/BENCHMARKS.md); the same results.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&cli.log));
    // Colour only on a terminal: a log file or `kubectl logs` would show raw escape codes.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    if let Err(e) = run(cli) {
        // Written without panicking: stderr may be gone (a hung-up terminal) and the exit code
        // must still say what happened.
        use std::io::Write as _;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "error: {e}");
        // A cause whose text its parent already quotes (an I/O error after its file) says nothing new.
        let mut said = e.to_string();
        for cause in e.chain().skip(1) {
            let text = cause.to_string();
            if !said.contains(&text) {
                let _ = writeln!(err, "  caused by: {text}");
            }
            said = text;
        }
        drop(err);
        std::process::exit(cmd::exit_code(&e));
    }
}
