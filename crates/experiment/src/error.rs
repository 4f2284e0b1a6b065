//! Errors of the experiment.

use std::path::PathBuf;

use dqngpu_model::ModelError;

/// What can go wrong running or writing an experiment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// Bad configuration, unknown names, or a file that cannot be read or written.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Drawing a plot failed.
    #[error("plot {}: {message}", path.display())]
    Plot {
        /// The plot file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// A simulation or training failed.
    #[error("{what}: {message}")]
    Run {
        /// Which run (scheduler, class, seed).
        what: String,
        /// What failed.
        message: String,
    },
}

impl ExperimentError {
    /// True for errors a user fixes by choosing a valid name (CLI exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, ExperimentError::Model(m) if m.is_usage())
    }
}
