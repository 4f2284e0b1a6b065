//! Errors of the simulator.

use dqngpu_model::{DecisionError, JobId, ModelError};

/// Why a simulation could not be set up or could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// Bad input: an unknown app, a profile larger than every GPU, an empty cluster...
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The policy returned a decision the simulator must refuse.
    #[error(transparent)]
    Decision(#[from] DecisionError),
    /// Jobs wait, nothing runs, no job will arrive, and the policy holds: nothing can change.
    #[error(
        "policy `{policy}` made no progress at t = {now_s} s: {queued} job(s) wait, nothing runs, no job will \
         arrive, and it placed nothing"
    )]
    NoProgress {
        /// Policy name.
        policy: String,
        /// Cluster clock, s.
        now_s: f64,
        /// Jobs waiting.
        queued: usize,
    },
    /// A job was killed for lack of memory more often than the configured limit.
    #[error(
        "policy `{policy}`: job {job} was killed out of memory {restarts} times (limit {limit}); the policy keeps \
         placing it where it cannot fit"
    )]
    TooManyRestarts {
        /// Policy name.
        policy: String,
        /// The job.
        job: JobId,
        /// Its restarts.
        restarts: u32,
        /// The configured limit.
        limit: u32,
    },
    /// A configuration value is out of range.
    #[error("invalid simulator configuration: {0}")]
    Config(String),
}

impl SimError {
    /// True for errors a user fixes by choosing a valid name (CLI exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, SimError::Model(e) if e.is_usage())
    }
}
