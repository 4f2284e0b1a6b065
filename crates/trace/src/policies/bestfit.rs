//! BestFit: the node whose CPU and GPU left after placing are smallest, weighted 0.5 each over
//! the largest node spec: `int(100 * (1 - sum))`, then min-max normalised to 0..=100 over the
//! feasible nodes with integer division (the plugin's NormalizeScore), which merges near
//! scores into ties. GPUs by best fit.

use super::{best_fit_pick, select, Ctx, NodePolicy, MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU};
use crate::cluster::{Cluster, GpuPick, Pod};

/// Best fit.
#[derive(Debug, Clone, Copy, Default)]
pub struct BestFit;

/// The raw (before normalisation) BestFit score of node `n` for `pod`.
pub fn raw_score(cluster: &Cluster, n: usize, pod: &Pod) -> i64 {
    let st = &cluster.state[n];
    let cpu = (st.cpu_left - pod.cpu) as f64 / MAX_SPEC_CPU * 0.5;
    let gpu = (st.gpu_left_total() - pod.total_milli()) as f64 / MAX_SPEC_GPU * 0.5;
    ((1.0 - (cpu + gpu)) * MAX_NODE_SCORE as f64) as i64
}

/// Min-max normalisation to 0..=100 with integer division; all 0 when every score is equal.
pub fn normalize(scores: &mut [i64]) {
    let (lo, hi) = scores.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    let range = hi - lo;
    for s in scores.iter_mut() {
        *s = if range == 0 { 0 } else { (*s - lo) * MAX_NODE_SCORE / range };
    }
}

impl NodePolicy for BestFit {
    fn name(&self) -> &'static str {
        "bestfit"
    }

    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick) {
        let c = cx.cluster;
        let node = if feasible.len() == 1 {
            feasible[0]
        } else {
            let mut scores: Vec<i64> = feasible.iter().map(|&n| raw_score(c, n, pod)).collect();
            normalize(&mut scores);
            select(c, feasible, &scores)
        };
        (node, best_fit_pick(c, node, pod))
    }
}
