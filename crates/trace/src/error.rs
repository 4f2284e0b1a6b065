//! Errors of the trace crate. Bad input, unknown names and I/O are the model crate's
//! [`ModelError`] (file, line and field; the valid names), so the CLI maps them the same way.

use std::path::PathBuf;

pub use dqngpu_model::error::{Location, ModelError};

/// Errors of the trace crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// Malformed input (file, line, field), an unknown name, or a failed read or write.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The input is consistent row by row but unusable as a whole (no GPUs, no pods...).
    #[error("{0}")]
    Unusable(String),
    /// Drawing a plot failed.
    #[error("plot {}: {message}", path.display())]
    Plot {
        /// The file being drawn.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl TraceError {
    /// True for errors that are the user's choice of name (CLI exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, TraceError::Model(m) if m.is_usage())
    }

    pub(crate) fn invalid(file: &str, line: u64, field: Option<&str>, message: impl Into<String>) -> Self {
        let at = Location { path: Some(PathBuf::from(file)), line: Some(line), field: field.map(str::to_string) };
        TraceError::Model(ModelError::invalid(at, message))
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        TraceError::Model(ModelError::Io { path: path.to_path_buf(), source })
    }

    pub(crate) fn unknown(what: &'static str, name: &str, valid: &[&str]) -> Self {
        TraceError::Model(ModelError::UnknownName {
            what,
            name: name.to_string(),
            valid: valid.iter().map(|s| s.to_string()).collect(),
        })
    }
}

/// Result alias of the trace crate.
pub type Result<T, E = TraceError> = std::result::Result<T, E>;
