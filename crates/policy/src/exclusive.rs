//! FIFO and SJF: one job per GPU at a time, the thesis's non-sharing baselines.

use dqngpu_model::{ClusterView, Placement, Policy, QueuedJob};

/// Which waiting job goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Arrival order (FIFO).
    Arrival,
    /// Shortest solo time first (SJF); ties by arrival, then id.
    ShortestFirst,
}

/// Places one job on each idle GPU, in the given order.
#[derive(Debug, Clone, Copy)]
pub struct Exclusive {
    order: Order,
}

impl Exclusive {
    /// A policy with this order.
    pub fn new(order: Order) -> Self {
        Exclusive { order }
    }
}

impl Policy for Exclusive {
    fn name(&self) -> &str {
        match self.order {
            Order::Arrival => "fifo",
            Order::ShortestFirst => "sjf",
        }
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        // Nothing to do (and nothing to sort) unless a GPU is idle.
        if view.queue.is_empty() || !view.gpus.iter().any(|g| g.is_idle()) {
            return Vec::new();
        }
        let mut waiting: Vec<&QueuedJob> = view.queue.iter().collect();
        if self.order == Order::ShortestFirst {
            waiting.sort_by(|a, b| crate::fit::shortest_first(a, b));
        }
        let mut out = Vec::new();
        let mut taken = vec![false; waiting.len()];
        for (g, gpu) in view.gpus.iter().enumerate() {
            if !gpu.is_idle() {
                continue;
            }
            // The first job not yet placed whose peak memory fits this GPU (clusters may mix models).
            let pick = (0..waiting.len())
                .find(|&i| !taken[i] && waiting[i].profile.peak_from(0).gpu_mem_mib <= gpu.spec.memory_mib);
            if let Some(i) = pick {
                taken[i] = true;
                out.push(Placement { gpu: g, jobs: vec![waiting[i].id] });
            }
        }
        out
    }
}
