//! How the simulator steps and when it asks for decisions: [`SimConfig`], checked before a
//! run starts.

use crate::error::SimError;

/// What makes a decision tick ask the policy while jobs wait (beside arrivals, finishes and
/// OOM kills, which always do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TickTrigger {
    /// A running job passed its remaining peak in some resource since the last decision: the
    /// rest of its profile needs less than what a peak-based policy reserved for it. Peak-based
    /// heuristics can only decide differently after such a drop (or an event).
    #[default]
    PeakDrop,
    /// A running job's current demand dropped in some resource since the last decision.
    DemandDrop,
    /// Every tick while jobs wait.
    Always,
}

/// [`Simulator::play_out_while`](super::Simulator::play_out_while) asks whether to go on at
/// every decision and at least once per this many steps (a check costs about what a step
/// does).
pub const KEEP_CHECK_STEPS: u32 = 16;

/// How the simulator steps and when it asks for decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Step length, s (1 s by default). A step ends early at a job's finish or an arrival.
    pub step_s: f64,
    /// While jobs wait and a running job's demand has dropped since the last decision
    /// (capacity freed), ask the policy again once this long after the last decision, s, even
    /// when nothing arrived, finished or was killed: demands change over a job's life, so a
    /// packing policy may find room. Default 10 s.
    pub decision_tick_s: f64,
    /// What counts as capacity freed for the decision tick.
    pub tick_trigger: TickTrigger,
    /// Record the event log into [`SimResult::events`](crate::SimResult::events).
    pub record_events: bool,
    /// Record the cluster's usage at every step into [`SimResult::usage`](crate::SimResult::usage).
    pub record_usage: bool,
    /// A job killed out of memory more than this many times stops the simulation with
    /// [`SimError::TooManyRestarts`] (a policy that keeps placing it where it cannot fit).
    pub max_restarts: u32,
    /// Slowdown budget for every policy, a fraction (0.10: no job more than 10% slower than
    /// alone): a group predicted by the interference model to push any job on its GPU past it
    /// is not started ([`crate::budget`]). `None`: no budget.
    pub max_slowdown: Option<f64>,
}

impl SimConfig {
    /// This configuration as `policy` is run under: every tick for a policy that wants it.
    pub fn for_policy(self, policy: &dyn dqngpu_model::Policy) -> Self {
        if policy.wants_every_tick() {
            SimConfig { tick_trigger: TickTrigger::Always, ..self }
        } else {
            self
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            step_s: 1.0,
            decision_tick_s: 10.0,
            tick_trigger: TickTrigger::PeakDrop,
            record_events: false,
            record_usage: false,
            max_restarts: 100,
            max_slowdown: None,
        }
    }
}

/// The shortest simulation step, s.
pub const MIN_STEP_S: f64 = 1e-3;

/// What is wrong with a step of `step_s` over profiles sampled every `intervals` s, if it is
/// longer than the shortest: each step runs the sample in force at its start, so the samples
/// in between are skipped (docs/SIMULATOR.md). Callers name the step and the profiles.
pub fn skipped_samples(step_s: f64, intervals: impl IntoIterator<Item = f64>) -> Option<String> {
    let shortest = intervals.into_iter().fold(f64::INFINITY, f64::min);
    (step_s > shortest * (1.0 + 1e-9)).then(|| {
        format!(
            "{step_s} s is longer than the shortest profile interval ({shortest} s): each step runs the sample in force at its start, so samples in between are skipped"
        )
    })
}

/// Refuses a step shorter than [`MIN_STEP_S`], a decision tick that is not a positive number
/// of seconds, or a budget that is not a finite fraction >= 0.
pub(super) fn check_config(config: &SimConfig) -> Result<(), SimError> {
    // Below a millisecond a run of hours takes billions of steps: it would seem to hang.
    if !(config.step_s.is_finite() && config.step_s >= MIN_STEP_S) {
        return Err(SimError::Config(format!(
            "step_s must be a number of seconds >= {MIN_STEP_S}, got {}",
            config.step_s
        )));
    }
    if !(config.decision_tick_s.is_finite() && config.decision_tick_s > 0.0) {
        return Err(SimError::Config(format!(
            "decision_tick_s must be a positive number of seconds, got {}",
            config.decision_tick_s
        )));
    }
    // A NaN budget would admit everything, a negative one nothing shared: neither is a budget.
    if let Some(b) = config.max_slowdown {
        if !(b.is_finite() && b >= 0.0) {
            return Err(SimError::Config(format!(
                "max_slowdown must be a fraction >= 0 (0.10: 10% slower than alone at most), got {b}"
            )));
        }
    }
    Ok(())
}
