//! One decision round over a cluster view: GPU by GPU, the agent chooses an action (a group
//! of waiting jobs, or hold) again and again on the same GPU until it holds, then moves to
//! the next GPU. Steps with a single allowed action are taken without asking. The same code
//! serves the training environment and the inference [`Policy`](dqngpu_model::Policy).

use dqngpu_model::{ClusterView, JobId, Placement};

use super::encoding::{encode, Candidate, GpuEncoding, GpuRound, Resident};

/// The state of a decision round.
#[derive(Debug, Clone)]
pub struct Round {
    gpu: usize,
    current: Option<GpuRound>,
    taken: Vec<JobId>,
    slots: Vec<Candidate>,
    placements: Vec<Placement>,
    /// The observation of the pending choice.
    pub obs: Vec<f32>,
    /// The allowed actions of the pending choice.
    pub mask: Vec<bool>,
}

impl Round {
    /// A round starting at GPU 0.
    pub fn new(enc: &GpuEncoding) -> Self {
        Round {
            gpu: 0,
            current: None,
            taken: Vec::new(),
            slots: Vec::new(),
            placements: Vec::new(),
            obs: vec![0.0; enc.obs_len()],
            mask: vec![false; enc.n_actions()],
        }
    }

    /// Moves to the next choice that needs the agent; false when the round is over.
    pub fn next_choice(&mut self, enc: &GpuEncoding, view: &ClusterView<'_>) -> bool {
        loop {
            if self.gpu >= view.gpus.len() {
                return false;
            }
            let round = self.current.get_or_insert_with(|| GpuRound::from_view(enc, view, self.gpu));
            let waiting: Vec<_> = view.queue.iter().filter(|q| !self.taken.contains(&q.id)).collect();
            if waiting.is_empty() {
                return false;
            }
            self.slots = waiting.iter().take(enc.job_slots).map(|q| Candidate::new(enc, q)).collect();
            let backlog = waiting.len() - self.slots.len();
            encode(enc, round, &self.slots, backlog, &mut self.obs, &mut self.mask);
            let allowed: Vec<usize> = (0..self.mask.len()).filter(|&a| self.mask[a]).collect();
            if allowed.len() >= 2 {
                return true;
            }
            self.take(enc, allowed.first().copied().unwrap_or(0));
        }
    }

    /// Takes action `a` on the current GPU (0 = hold: move to the next GPU).
    pub fn take(&mut self, enc: &GpuEncoding, a: usize) {
        let set = enc.subset(a);
        let Some(round) = self.current.as_mut().filter(|_| set != 0 && self.mask.get(a) == Some(&true)) else {
            self.gpu += 1;
            self.current = None;
            return;
        };
        let mut jobs = Vec::new();
        for (i, c) in self.slots.iter().enumerate() {
            if set & (1 << i) != 0 {
                jobs.push(c.id);
                self.taken.push(c.id);
                round.residents.push(Resident {
                    app: c.app.clone(),
                    rows: c.rows.clone(),
                    profile: c.profile.clone(),
                    progress_s: 0.0,
                    lost_s: 0.0,
                });
            }
        }
        match self.placements.iter_mut().find(|p| p.gpu == self.gpu) {
            Some(p) => p.jobs.extend(jobs),
            None => self.placements.push(Placement { gpu: self.gpu, jobs }),
        }
    }

    /// The placements chosen so far.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// Consumes the round, returning its placements.
    pub fn into_placements(self) -> Vec<Placement> {
        self.placements
    }
}
