//! Tetris (Grandl et al., SIGCOMM'14): multi-resource packing by alignment.
//!
//! For each GPU, repeatedly pick the waiting job whose peak demand vector has the largest dot
//! product with the GPU's free capacity (both normalised by capacity), among jobs that fit in
//! all four resources; stop when none fits. Ties go to the earlier arrival.

use dqngpu_model::{ClusterView, Placement, Policy, QueuedJob};

use crate::fit;

/// The Tetris packing heuristic.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tetris;

impl Policy for Tetris {
    fn name(&self) -> &str {
        "tetris"
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let peaks: Vec<_> = view.queue.iter().map(fit::job_peak).collect();
        let mut taken = vec![false; view.queue.len()];
        let mut out = Vec::new();
        for (g, gpu) in view.gpus.iter().enumerate() {
            let cap = gpu.spec.capacity();
            let mut load = fit::committed(gpu);
            let mut chosen: Vec<&QueuedJob> = Vec::new();
            loop {
                let free = cap.sub(&load).normalised(&cap);
                let mut best: Option<(usize, f64)> = None;
                for (i, job) in view.queue.iter().enumerate() {
                    if taken[i] || !fit::fits_all(&load, &peaks[i], gpu) || !fit::compatible(job, gpu, &chosen) {
                        continue;
                    }
                    let d = peaks[i].normalised(&cap);
                    let score: f64 = free.iter().zip(d.iter()).map(|(f, d)| f * d).sum();
                    if best.is_none_or(|(_, s)| score > s + 1e-12) {
                        best = Some((i, score));
                    }
                }
                let Some((i, _)) = best else { break };
                taken[i] = true;
                load = load.add(&peaks[i]);
                chosen.push(&view.queue[i]);
            }
            if !chosen.is_empty() {
                out.push(Placement { gpu: g, jobs: chosen.iter().map(|j| j.id).collect() });
            }
        }
        out
    }
}
