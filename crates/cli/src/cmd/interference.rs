//! `dqngpu interference`: interference model tools.

use std::path::PathBuf;

use anyhow::Context;
use dqngpu_interference::calibrate::predict_file;
use dqngpu_interference::pairs::{load_pairs, with_predictions};
use dqngpu_interference::{by_name, Contention, Interference, Measured, PairTable};
use dqngpu_model::error::write_file_atomic;
use dqngpu_model::library::lucid::load_solo;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Predict each pair's speeds and write the pairs CSV back with pred_speed1,pred_speed2.
    Predict(PredictArgs),
}

/// Arguments of `interference predict`.
#[derive(clap::Args, Debug)]
pub struct PredictArgs {
    /// Pairs CSV. Default: the built-in Lucid pairs (data/lucid/).
    #[arg(long)]
    pub pairs: Option<PathBuf>,
    /// Solo profiles CSV. Default: the built-in Lucid solo profiles (data/lucid/).
    #[arg(long)]
    pub solo: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Interference model: contention, contention-h100, measured (from the same pairs file) or none.
    #[arg(long, default_value = dqngpu_interference::DEFAULT_MODEL)]
    pub model: String,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Predict(a) => predict(a),
    }
}

fn predict(a: PredictArgs) -> anyhow::Result<()> {
    let (pairs, _) = load_pairs(a.pairs.as_deref())?;
    let (solo, _) = load_solo(a.solo.as_deref())?;
    let model: Box<dyn Interference> = match a.model.as_str() {
        // `measured` reads the table from the pairs file being predicted.
        "measured" => Box::new(Measured::new(PairTable::from_pairs(&pairs), Contention::default())),
        other => by_name(other)?,
    };
    let preds = predict_file(model.as_ref(), &pairs, &solo)?;
    let csv = with_predictions(&pairs, &preds)?;
    match &a.output {
        Some(out) => {
            write_file_atomic(out, csv.as_bytes()).with_context(|| format!("writing {}", out.display()))?;
            eprintln!(
                "wrote {} pairs with pred_speed1,pred_speed2 ({}) to {}",
                preds.len(),
                model.name(),
                out.display()
            );
        }
        None => print!("{csv}"),
    }
    Ok(())
}
