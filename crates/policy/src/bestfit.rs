//! GPU-memory best fit, as Alibaba's gpushare scheduler extender places shared-GPU pods:
//! each waiting job, in arrival order, goes to the GPU with the least free memory that still
//! holds its peak memory. Compute, SM and PCIe are not considered — that is the point of this
//! baseline: it shares as much as memory allows and pays in interference.

use std::sync::Arc;

use dqngpu_model::{Admission, ClusterView, Placement, Policy};

use crate::fit;

/// The memory best-fit heuristic.
#[derive(Debug, Clone, Default)]
pub struct BestFit {
    /// The caller's slowdown budget, when it set one: groups it refuses are not chosen.
    admission: Option<Arc<dyn Admission>>,
}

impl BestFit {
    /// The rule choosing only among the groups `admission` (the caller's budget) admits.
    pub fn within(admission: Option<Arc<dyn Admission>>) -> Self {
        BestFit { admission }
    }
}

impl Policy for BestFit {
    fn name(&self) -> &str {
        "bestfit"
    }

    /// Told a budget, at every tick ([`Policy::wants_every_tick`] says why).
    fn wants_every_tick(&self) -> bool {
        self.admission.is_some()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        fit::best_fit_memory(view, view.queue.iter(), self.admission.as_deref())
    }
}
