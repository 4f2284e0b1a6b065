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
    /// A simulation failed.
    #[error("{what}")]
    Sim {
        /// Which run (scheduler, class, seed).
        what: String,
        /// Why.
        #[source]
        source: dqngpu_sim::SimError,
    },
    /// The results could not be serialised.
    #[error("{what}")]
    Json {
        /// Which file.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// Something in a cell failed; the cause is kept (a run's simulator error, a bad library).
    #[error("cell `{cell}`")]
    Cell {
        /// The cell's name.
        cell: String,
        /// Why.
        #[source]
        source: Box<ExperimentError>,
    },
    /// A run or training failed for a reason of the experiment's own.
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
        match self {
            ExperimentError::Model(m) => m.is_usage(),
            ExperimentError::Sim { source, .. } => source.is_usage(),
            ExperimentError::Cell { source, .. } => source.is_usage(),
            _ => false,
        }
    }
}
