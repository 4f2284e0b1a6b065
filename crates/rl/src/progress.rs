//! Training progress: an indicatif bar on stderr and the training-curve CSV.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::RlError;
use crate::reinforce::IterStats;

/// A progress bar showing iteration, mean return, mean score, elapsed and remaining time.
pub struct TrainProgress {
    bar: ProgressBar,
    score_name: &'static str,
}

impl TrainProgress {
    /// A bar for `iterations`, labelling the score `score_name` (`slowdown`, `makespan_s`).
    /// Hidden when `visible` is false (tests, `--quiet`, non-terminals).
    pub fn new(iterations: usize, score_name: &'static str, visible: bool) -> Self {
        let bar = if visible { ProgressBar::new(iterations as u64) } else { ProgressBar::hidden() };
        let style = ProgressStyle::with_template(
            "{bar:30} iter {pos}/{len} {msg} [{elapsed_precise} elapsed, {eta_precise} left]",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        TrainProgress { bar, score_name }
    }

    /// Records one iteration.
    pub fn update(&self, s: &IterStats) {
        self.bar.set_position(s.iteration as u64);
        self.bar.set_message(format!("return {:.2} {} {:.3}", s.mean_return, self.score_name, s.mean_score));
    }

    /// Prints a line above the bar.
    pub fn println(&self, line: String) {
        // A hidden bar drops println; the line still matters (evaluations during training).
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Writes the training curve as CSV (`iteration,mean_return,mean_score,mean_steps,elapsed_s,lr`).
pub fn write_curve(path: &Path, curve: &[IterStats]) -> Result<(), RlError> {
    let mut text = String::from(IterStats::CSV_HEADER);
    text.push('\n');
    for s in curve {
        text.push_str(&s.csv_row());
        text.push('\n');
    }
    dqngpu_model::error::write_file_atomic(path, text.as_bytes())?;
    Ok(())
}
