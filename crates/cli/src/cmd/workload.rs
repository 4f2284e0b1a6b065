//! `dqngpu workload` (being written).

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`dqngpu workload` is not implemented yet")
}
