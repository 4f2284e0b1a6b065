//! One module per command. Each has an `Args` (clap) and a `run`.

pub mod apps;
pub mod bench;
pub mod calibrate;
pub mod client;
pub mod deeprm;
pub mod experiment;
pub mod interference;
pub mod profile;
pub mod serve;
pub mod simulate;
pub mod trace;
pub mod train;
pub mod workload;

use dqngpu_model::ModelError;

/// 2 when any error in the chain is a usage error (an unknown name), else 1.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    let usage = e.chain().any(|c| {
        c.downcast_ref::<ModelError>().is_some_and(ModelError::is_usage)
            || c.downcast_ref::<dqngpu_trace::TraceError>().is_some_and(dqngpu_trace::TraceError::is_usage)
    });
    if usage {
        2
    } else {
        1
    }
}

/// Output format shared by the commands that print results.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table.
    #[default]
    Table,
    /// JSON for scripts.
    Json,
}
