//! Job and attempt records as stored and as the API shows them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use dqngpu_model::JobId;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for a GPU.
    Queued,
    /// An attempt runs.
    Running,
    /// An attempt exited 0.
    Succeeded,
    /// Out of retries, or a failure that no retry can fix.
    Failed,
    /// Cancelled by a client.
    Cancelled,
}

impl JobState {
    /// All states, in life order.
    pub const ALL: [JobState; 5] =
        [JobState::Queued, JobState::Running, JobState::Succeeded, JobState::Failed, JobState::Cancelled];

    /// The lowercase name used in the API and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Parses the lowercase name.
    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|j| j.as_str() == s)
    }

    /// True once the job will never run again.
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Cancelled)
    }
}

/// How one attempt ended (or that it still runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptState {
    /// Still running.
    Running,
    /// Exited 0.
    Succeeded,
    /// Exited non-zero or by a signal, or could not start.
    Failed,
    /// Died of GPU out-of-memory.
    Oom,
    /// Its supervisor vanished (e.g. the machine rebooted); the job was re-queued.
    Lost,
    /// Stopped by a cancel.
    Cancelled,
}

impl AttemptState {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptState::Running => "running",
            AttemptState::Succeeded => "succeeded",
            AttemptState::Failed => "failed",
            AttemptState::Oom => "oom",
            AttemptState::Lost => "lost",
            AttemptState::Cancelled => "cancelled",
        }
    }

    /// Parses the lowercase name.
    pub fn parse(s: &str) -> Option<AttemptState> {
        [
            AttemptState::Running,
            AttemptState::Succeeded,
            AttemptState::Failed,
            AttemptState::Oom,
            AttemptState::Lost,
            AttemptState::Cancelled,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }
}

/// A job as submitted (already validated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    /// App name: the key its profile is found under.
    pub app: String,
    /// Program and arguments, run without a shell.
    pub command: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Input size, MB (thesis Table 2 prior info).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_size_mb: Option<f64>,
    /// Input parameters, free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<String>,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Identifier.
    pub id: JobId,
    /// What was submitted.
    #[serde(flatten)]
    pub spec: NewJob,
    /// Current state.
    pub state: JobState,
    /// GPU index (within this machine) of the latest attempt.
    pub gpu: Option<u32>,
    /// Attempts started so far.
    pub attempts: u32,
    /// Attempts that failed or died of OOM (counted against the retry limit).
    pub failures: u32,
    /// Apps it died of OOM beside; it is not co-placed with them again.
    pub avoid_apps: Vec<String>,
    /// Submission time, Unix seconds.
    pub submitted_at: f64,
    /// Start of the latest attempt, Unix seconds.
    pub started_at: Option<f64>,
    /// When it reached a final state, Unix seconds.
    pub finished_at: Option<f64>,
    /// Exit code of the latest finished attempt.
    pub exit_code: Option<i32>,
    /// Signal that ended the latest finished attempt.
    pub signal: Option<i32>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// A cancel was asked for while it ran.
    pub cancel_requested: bool,
}

/// One attempt of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The job.
    pub job_id: JobId,
    /// 1-based attempt number.
    pub n: u32,
    /// GPU index.
    pub gpu: u32,
    /// State.
    pub state: AttemptState,
    /// Supervisor process id, once started.
    pub pid: Option<u32>,
    /// The supervisor's start time in clock ticks since boot (guards against pid reuse).
    pub pid_start: Option<u64>,
    /// Apps running beside it on its GPU when it started.
    pub co_apps: Vec<String>,
    /// It ran alone to be profiled.
    pub exclusive: bool,
    /// Start, Unix seconds.
    pub started_at: f64,
    /// End, Unix seconds.
    pub finished_at: Option<f64>,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// Terminating signal.
    pub signal: Option<i32>,
    /// Why it failed, when it did.
    pub error: Option<String>,
}
