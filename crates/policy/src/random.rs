//! Random placement: waiting jobs in a random order, each onto a random GPU where its peak
//! memory fits beside what is there. Deterministic for a given seed and view: the generator is
//! seeded from the policy's seed, the clock and the waiting jobs' ids.

use dqngpu_model::{ClusterView, Placement, Policy, QueuedJob};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::fit;

/// The random heuristic.
#[derive(Debug, Clone, Copy)]
pub struct RandomPolicy {
    seed: u64,
}

impl RandomPolicy {
    /// A random policy driven by `seed`.
    pub fn new(seed: u64) -> Self {
        RandomPolicy { seed }
    }

    fn rng_for(&self, view: &ClusterView<'_>) -> ChaCha8Rng {
        // FNV-1a over the clock and queue: same view, same choice.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ self.seed;
        let mut mix = |x: u64| {
            h ^= x;
            h = h.wrapping_mul(0x0100_0000_01b3);
        };
        mix(view.now_s.to_bits());
        for q in view.queue {
            mix(q.id);
        }
        ChaCha8Rng::seed_from_u64(h)
    }
}

impl Policy for RandomPolicy {
    fn name(&self) -> &str {
        "random"
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut rng = self.rng_for(view);
        let mut order: Vec<&QueuedJob> = view.queue.iter().collect();
        order.shuffle(&mut rng);
        let mut load: Vec<_> = view.gpus.iter().map(fit::committed).collect();
        let mut chosen: Vec<Vec<&QueuedJob>> = vec![Vec::new(); view.gpus.len()];
        for job in order {
            let peak = fit::job_peak(job);
            let options: Vec<usize> = (0..view.gpus.len())
                .filter(|&g| {
                    fit::fits_memory(&load[g], &peak, &view.gpus[g]) && fit::compatible(job, &view.gpus[g], &chosen[g])
                })
                .collect();
            // Holding is an option too, so a random policy does not always pack to the brim;
            // but never hold everything on an idle cluster, or nothing would ever run.
            let busy = view.gpus.iter().any(|g| !g.is_idle()) || chosen.iter().any(|c| !c.is_empty());
            let k = if busy { rng.gen_range(0..=options.len()) } else { rng.gen_range(0..options.len().max(1)) };
            if k < options.len() {
                let g = options[k];
                load[g] = load[g].add(&peak);
                chosen[g].push(job);
            }
        }
        fit::placements(chosen)
    }
}
