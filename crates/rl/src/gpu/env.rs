//! The training environment over the dqngpu simulator.

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{AppLibrary, ClusterSpec, JobSet};
use dqngpu_sim::{SimConfig, Simulator};

use super::encoding::GpuEncoding;
use super::round::Round;
use crate::env::{Env, Task, Transition};
use crate::error::RlError;
use crate::reinforce::Objective;

/// Reward per simulated second while jobs remain, divided by this (returns of order -10).
pub const REWARD_SCALE_S: f64 = 1000.0;

/// Training on the simulator: job sets, cluster, library, interference model.
pub struct GpuTask {
    /// The encoding.
    pub encoding: GpuEncoding,
    /// The cluster.
    pub cluster: ClusterSpec,
    /// The app library.
    pub library: AppLibrary,
    /// The interference model.
    pub interference: Arc<dyn Interference>,
    /// Training job sets.
    pub sets: Vec<JobSet>,
    /// Simulator settings.
    pub config: SimConfig,
    /// What the reward measures (default: mean JCT).
    pub objective: Objective,
}

impl GpuTask {
    /// A task; checks every job set builds a simulation (unknown apps, oversized profiles).
    pub fn new(
        encoding: GpuEncoding,
        cluster: ClusterSpec,
        library: AppLibrary,
        interference: Arc<dyn Interference>,
        sets: Vec<JobSet>,
        config: SimConfig,
    ) -> Result<Self, RlError> {
        encoding.validate()?;
        for s in &sets {
            Simulator::new(&cluster, &library, s, interference.clone(), config.clone())?;
        }
        Ok(GpuTask { encoding, cluster, library, interference, sets, config, objective: Objective::default() })
    }

    /// The same task with the reward measuring `objective`.
    pub fn with_objective(self, objective: Objective) -> Self {
        GpuTask { objective, ..self }
    }
}

/// One episode: a simulation driven by the agent's choices.
pub struct GpuEnv<'a> {
    enc: &'a GpuEncoding,
    objective: Objective,
    sim: Option<Simulator>,
    round: Option<Round>,
    /// Cost since the last agent step: simulated seconds passed (makespan), or job-seconds
    /// spent in the system by the jobs that had arrived (JCT).
    waited_s: f64,
    failed: bool,
}

impl<'a> GpuEnv<'a> {
    fn new(task: &'a GpuTask, index: usize) -> Self {
        let sim = Simulator::new(
            &task.cluster,
            &task.library,
            &task.sets[index],
            task.interference.clone(),
            task.config.clone(),
        );
        let mut env = GpuEnv {
            enc: &task.encoding,
            objective: task.objective,
            failed: sim.is_err(),
            sim: sim.ok(),
            round: None,
            waited_s: 0.0,
        };
        env.advance();
        env
    }

    /// Runs the simulation until the agent has a real choice or every job finished.
    fn advance(&mut self) {
        let Some(sim) = self.sim.as_mut() else { return };
        loop {
            if sim.done() {
                self.round = None;
                return;
            }
            if let Some(round) = self.round.as_mut() {
                if round.next_choice(self.enc, &sim.view()) {
                    return;
                }
                let placements = self.round.take().map(Round::into_placements).unwrap_or_default();
                if sim.apply(&placements).is_err() {
                    self.failed = true;
                    self.round = None;
                    return;
                }
            } else if sim.needs_decision() {
                self.round = Some(Round::new(self.enc));
                continue;
            }
            let before = sim.now_s();
            let in_system = match self.objective {
                Objective::Makespan => 1.0,
                Objective::Jct => {
                    let v = sim.view();
                    (v.queue.len() + v.gpus.iter().map(|g| g.running.len()).sum::<usize>()) as f64
                }
            };
            sim.step();
            self.waited_s += (sim.now_s() - before) * in_system;
        }
    }

    fn finished(&self) -> bool {
        self.failed || self.sim.as_ref().is_none_or(Simulator::done)
    }
}

impl Env for GpuEnv<'_> {
    fn obs_len(&self) -> usize {
        self.enc.obs_len()
    }

    fn n_actions(&self) -> usize {
        self.enc.n_actions()
    }

    fn observe(&self, obs: &mut [f32], mask: &mut [bool]) {
        match &self.round {
            Some(r) => {
                obs.copy_from_slice(&r.obs);
                mask.copy_from_slice(&r.mask);
            }
            None => {
                obs.fill(0.0);
                mask.fill(false);
                mask[0] = true;
            }
        }
    }

    fn step(&mut self, action: usize) -> Transition {
        if self.finished() {
            return Transition { reward: 0.0, done: true };
        }
        if let Some(r) = self.round.as_mut() {
            r.take(self.enc, action);
        }
        self.waited_s = 0.0;
        self.advance();
        // A failed simulation (a policy that cannot progress) costs a day of makespan.
        let penalty = if self.failed { 86_400.0 } else { 0.0 };
        Transition { reward: -(self.waited_s + penalty) / REWARD_SCALE_S, done: self.finished() }
    }

    fn score(&self) -> f64 {
        match (&self.sim, self.failed) {
            (Some(sim), false) => sim.now_s(),
            _ => f64::INFINITY,
        }
    }
}

impl Task for GpuTask {
    type Env<'a> = GpuEnv<'a>;

    fn jobsets(&self) -> usize {
        self.sets.len()
    }

    fn make(&self, index: usize) -> Self::Env<'_> {
        GpuEnv::new(self, index)
    }

    fn obs_len(&self) -> usize {
        self.encoding.obs_len()
    }

    fn n_actions(&self) -> usize {
        self.encoding.n_actions()
    }
}
