//! GPU-memory best fit, as Alibaba's gpushare scheduler extender places shared-GPU pods:
//! each waiting job, in arrival order, goes to the GPU with the least free memory that still
//! holds its peak memory. Compute, SM and PCIe are not considered — that is the point of this
//! baseline: it shares as much as memory allows and pays in interference.

use dqngpu_model::{ClusterView, Placement, Policy, QueuedJob};

use crate::fit;

/// The memory best-fit heuristic.
#[derive(Debug, Clone, Copy, Default)]
pub struct BestFit;

impl Policy for BestFit {
    fn name(&self) -> &str {
        "bestfit"
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut load: Vec<_> = view.gpus.iter().map(fit::committed).collect();
        let mut chosen: Vec<Vec<&QueuedJob>> = vec![Vec::new(); view.gpus.len()];
        for job in view.queue {
            let peak = fit::job_peak(job);
            let best = view
                .gpus
                .iter()
                .enumerate()
                .filter(|(g, gpu)| fit::fits_memory(&load[*g], &peak, gpu) && fit::compatible(job, gpu, &chosen[*g]))
                .min_by(|(a, ga), (b, gb)| {
                    let fa = ga.spec.memory_mib - load[*a].gpu_mem_mib;
                    let fb = gb.spec.memory_mib - load[*b].gpu_mem_mib;
                    fa.total_cmp(&fb).then(a.cmp(b))
                })
                .map(|(g, _)| g);
            if let Some(g) = best {
                load[g] = load[g].add(&peak);
                chosen[g].push(job);
            }
        }
        chosen
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.is_empty())
            .map(|(g, c)| Placement { gpu: g, jobs: c.iter().map(|j| j.id).collect() })
            .collect()
    }
}
