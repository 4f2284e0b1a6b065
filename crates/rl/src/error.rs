//! The errors of the RL crate.

use std::path::PathBuf;

/// Anything that can go wrong while training, saving, loading or running an agent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RlError {
    /// A tensor operation failed in candle.
    #[error("neural network: {0}")]
    Candle(#[from] candle_core::Error),
    /// A model file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The checkpoint's JSON file is malformed.
    #[error("{path}: invalid checkpoint metadata: {message}")]
    BadCheckpoint {
        /// The JSON file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The checkpoint was trained for another agent or state encoding than the one asked for.
    #[error("{path}: checkpoint does not match: {message}")]
    EncodingMismatch {
        /// The JSON file.
        path: PathBuf,
        /// Which field differs, with both values.
        message: String,
    },
    /// An RL agent was asked for without a model file.
    #[error(
        "agent `{agent}` needs a trained model: pass --model FILE (train one with `dqngpu train --agent {agent}`)"
    )]
    ModelRequired {
        /// The agent name.
        agent: String,
    },
    /// A model file was given for a heuristic, which has no weights.
    #[error("--model {} is for RL agents; `{scheduler}` is a heuristic and takes no model", model.display())]
    ModelForHeuristic {
        /// The heuristic's name.
        scheduler: String,
        /// The model file given.
        model: PathBuf,
    },
    /// A configuration value is out of range.
    #[error("invalid {field}: {message}")]
    Config {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The model crate refused something (unknown name, bad input).
    #[error(transparent)]
    Model(#[from] dqngpu_model::ModelError),
    /// The simulator refused something.
    #[error(transparent)]
    Sim(#[from] dqngpu_sim::SimError),
}

impl RlError {
    /// True for errors a user fixes by choosing a valid name (CLI exit code 2).
    pub fn is_usage(&self) -> bool {
        match self {
            RlError::Model(e) => e.is_usage(),
            RlError::Sim(e) => e.is_usage(),
            _ => false,
        }
    }
}
