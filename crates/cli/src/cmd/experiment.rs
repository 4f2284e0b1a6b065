//! `dqngpu experiment` (being written).

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`dqngpu experiment` is not implemented yet")
}
