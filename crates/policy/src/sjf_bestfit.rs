//! SJF + GPU-memory best fit: the waiting jobs in shortest-solo-time order, each onto the GPU
//! whose free memory (capacity minus the residents' remaining peaks) is smallest among those
//! that still hold the job's peak memory over its whole profile. It packs as far as memory
//! allows, like `bestfit`, and starts short jobs first, like `sjf`: the two rules together
//! are what an operator who knows job lengths would write first.

use std::sync::Arc;

use dqngpu_model::{Admission, ClusterView, Placement, Policy, QueuedJob};

use crate::fit;

/// The SJF + memory best-fit heuristic.
#[derive(Debug, Clone, Default)]
pub struct SjfBestFit {
    /// The caller's slowdown budget, when it set one: groups it refuses are not chosen.
    admission: Option<Arc<dyn Admission>>,
}

impl SjfBestFit {
    /// The rule choosing only among the groups `admission` (the caller's budget) admits.
    pub fn within(admission: Option<Arc<dyn Admission>>) -> Self {
        SjfBestFit { admission }
    }
}

impl Policy for SjfBestFit {
    fn name(&self) -> &str {
        "sjf-bestfit"
    }

    /// Told a budget, at every tick ([`Policy::wants_every_tick`] says why).
    fn wants_every_tick(&self) -> bool {
        self.admission.is_some()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut waiting: Vec<&QueuedJob> = view.queue.iter().collect();
        waiting.sort_by(|a, b| fit::shortest_first(a, b));
        fit::best_fit_memory(view, waiting, self.admission.as_deref())
    }
}
