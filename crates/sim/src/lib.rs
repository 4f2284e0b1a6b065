//! dqngpu-sim: a discrete-time simulator of jobs sharing GPUs.
//!
//! A job's demand at each step is its profile's sample at its own progress point; the
//! [`Interference`](dqngpu_interference::Interference) model turns the demands on a GPU into
//! progress rates; GPU memory is never overcommitted (the job whose demand just grew, else the
//! newest, is killed out of memory and requeued). The [`Simulator`] exposes a stepping API
//! (`new` / `done` / `needs_decision` / `view` / `apply` / `step` / `finish`) that [`run`] wraps
//! and the RL training environment drives. Metrics, formulas and assumptions:
//! `docs/SIMULATOR.md`. The simulator never reads the wall clock and never does I/O.
//!
//! How jobs on one GPU progress in a step is one rule, in [`step`]: the simulator uses it, and
//! so does anything that predicts the simulator (DqnGPU's slowdown guard).
//!
//! Job sets are drawn from workload classes by [`workload::draw`].

pub mod budget;
pub mod error;
pub mod event;
pub mod metrics;
mod sim;
pub mod step;
pub mod workload;

pub use error::SimError;
pub use event::{JobMemory, SimEvent};
pub use metrics::{
    jct_lower_bound_s, lower_bound_s, mean_jct_s, slowed_over_10_pct, BoundJob, JctBoundJob, JobRecord, SimResult,
    SlowdownBuckets, UsageTrace, NO_SLOWDOWN_MAX,
};
pub use sim::{run, skipped_samples, SimConfig, Simulator, TickTrigger, KEEP_CHECK_STEPS, MIN_STEP_S};
pub use step::RATE_FLOOR;
pub use workload::{draw, Arrivals, DEFAULT_JOBS, MAX_DRAWN_JOBS};
