//! `dqngpu calibrate`: fit the contention interference model to measured co-location pairs and
//! print the fitted parameters and MAPEs beside the reference predictors.

use std::path::PathBuf;

use dqngpu_interference::calibrate::{calibrate, CalibrationReport};

use super::Format;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pairs CSV (Lucid `colocate_pairs.csv` columns). Default: the built-in Lucid copy (data/lucid/).
    #[arg(long)]
    pub pairs: Option<PathBuf>,
    /// Solo profiles CSV (Lucid `solo_profiles.csv` columns). Default: the built-in Lucid copy (data/lucid/).
    #[arg(long)]
    pub solo: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let report = calibrate(args.pairs.as_deref(), args.solo.as_deref())?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Table => print!("{}", table(&report)),
    }
    Ok(())
}

fn table(r: &CalibrationReport) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "contention model fitted to {} pairs\n  pairs: {}\n  solo:  {}\n\n",
        r.pairs, r.pairs_file, r.solo_file
    ));
    s.push_str("parameter          fitted   built-in\n");
    let d = dqngpu_interference::ContentionParams::FITTED;
    s.push_str(&format!("overhead           {:.4}   {:.4}\n", r.params.overhead, d.overhead));
    s.push_str(&format!("oversubscription   {:.4}   {:.4}\n\n", r.params.oversubscription, d.oversubscription));
    s.push_str("predictor (MAPE of per-job speeds)       all pairs\n");
    s.push_str(&format!("contention, fitted                       {:6.2}%\n", r.contention_mape_pct));
    s.push_str(&format!("contention, built-in defaults            {:6.2}%\n", r.default_params_mape_pct));
    s.push_str(&format!("no slowdown (1.0)                        {:6.2}%\n", r.no_slowdown_mape_pct));
    s.push_str(&format!("fair share of GPU util above 100%        {:6.2}%\n\n", r.fair_share_mape_pct));
    s.push_str("cross-validation (held-out MAPE)         contention   fair share\n");
    for cv in &r.cross_validation {
        // No fold (too few pairs or families to hold any out): no held-out figure, not 0%.
        let (Some(c), Some(f)) = (cv.test_mape_pct, cv.test_fair_share_mape_pct) else {
            s.push_str(&format!(
                "{:<40} {:>7}      {:>7}   (0 folds: too few pairs to hold any out)\n",
                cv.scheme, "-", "-"
            ));
            continue;
        };
        s.push_str(&format!("{:<40} {c:6.2}%      {f:6.2}%   ({} folds)\n", cv.scheme, cv.folds.len()));
    }
    s.push_str(&format!(
        "\n{} of {} measured speeds are above 1.0 (noise no rate in (0, 1] can fit)\n",
        r.speeds_above_one,
        2 * r.pairs
    ));
    s
}
