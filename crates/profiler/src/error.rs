//! Errors of the profiler.

use dqngpu_model::ModelError;

/// One place NVML was looked for, and why it could not be loaded from there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    /// Library name or path given to the dynamic loader.
    pub path: String,
    /// The loader's or NVML's error.
    pub error: String,
}

/// Errors of the profiler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilerError {
    /// Bad input (a log line, a field) or an unknown name; see [`ModelError`].
    #[error(transparent)]
    Model(#[from] ModelError),
    /// No NVIDIA driver: NVML could not be loaded from any candidate.
    #[error(
        "no NVIDIA driver found: could not load NVML from {}; install the NVIDIA driver, or set DQNGPU_NVML_LIB to the full path of libnvidia-ml.so.1",
        tried.iter().map(|t| format!("`{}` ({})", t.path, t.error)).collect::<Vec<_>>().join(", ")
    )]
    NoDriver {
        /// Every name or path tried, in order, with its error.
        tried: Vec<LoadAttempt>,
    },
    /// An NVML call failed after the library loaded.
    #[error("NVML call `{call}` failed: {message}")]
    Nvml {
        /// The NVML call.
        call: &'static str,
        /// NVML's error.
        message: String,
    },
    /// The command to profile could not be started or waited for.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The command finished before the first sample could be taken.
    #[error("`{program}` finished after {wall_s:.3} s, before the first sample at {interval_s} s; use a shorter --interval-ms")]
    TooShort {
        /// The program.
        program: String,
        /// Its wall time, s.
        wall_s: f64,
        /// The sampling interval, s.
        interval_s: f64,
    },
    /// The profiler was told to stop (SIGTERM, SIGINT) before the first sample.
    #[error("stopped by a signal while running `{program}`; its process group was ended")]
    Stopped {
        /// The program.
        program: String,
    },
    /// Drawing a chart failed.
    #[error("{}: cannot draw the chart: {message}", path.display())]
    Plot {
        /// The output file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl ProfilerError {
    /// True for errors a user fixes by choosing a valid name (CLI exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, ProfilerError::Model(m) if m.is_usage())
    }
}
