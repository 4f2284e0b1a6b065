//! The environment interface the trainer drives: observe, then step with an action.
//!
//! Every environment is built from one job set (`Task::make`), so its randomness lives in the
//! job set; the policy's sampling randomness lives in the trainer, seeded per episode.

/// What one step returned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transition {
    /// Reward for the action just taken.
    pub reward: f64,
    /// True when the episode is over (terminated or truncated).
    pub done: bool,
}

/// A reinforcement-learning environment with a discrete, maskable action space.
pub trait Env {
    /// Length of the flat observation vector.
    fn obs_len(&self) -> usize;
    /// Number of actions (allowed or not).
    fn n_actions(&self) -> usize;
    /// Writes the observation into `obs` (length [`Env::obs_len`]) and which actions are
    /// allowed into `mask` (length [`Env::n_actions`]; at least one is true).
    fn observe(&self, obs: &mut [f32], mask: &mut [bool]);
    /// Takes an allowed action.
    fn step(&mut self, action: usize) -> Transition;
    /// The episode's score so far, lower is better (average slowdown, makespan).
    fn score(&self) -> f64;
}

/// A family of environments over fixed training job sets.
pub trait Task: Sync {
    /// The environment type (it may borrow the task's job sets).
    type Env<'a>: Env + Send
    where
        Self: 'a;
    /// Number of training job sets.
    fn jobsets(&self) -> usize;
    /// A fresh episode on job set `index`.
    fn make(&self, index: usize) -> Self::Env<'_>;
    /// Observation length (same for every episode).
    fn obs_len(&self) -> usize;
    /// Number of actions.
    fn n_actions(&self) -> usize;
}
