//! DotProd (Tetris's alignment heuristic as the FGD simulator runs it, `dimExtMethod: merge`,
//! `normMethod: max`): node free (CPU, total GPU) and pod request, each divided by the largest
//! node spec (128 CPUs, 8 GPUs); score `int(100 * (1 - dot / 2))`, so the node whose free
//! resources align least with the request wins (the most-used node). GPUs by best fit.

use super::{choose_scored, Ctx, NodePolicy, MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU};
use crate::cluster::{Cluster, GpuPick, Pod};

/// Dot-product packing.
#[derive(Debug, Clone, Copy, Default)]
pub struct DotProd;

/// The DotProd score of node `n` for `pod`.
pub fn score(cluster: &Cluster, n: usize, pod: &Pod) -> i64 {
    let st = &cluster.state[n];
    if st.cpu_left < pod.cpu {
        return 0;
    }
    let node = [st.cpu_left as f64 / MAX_SPEC_CPU, st.gpu_left_total() as f64 / MAX_SPEC_GPU];
    let req = [pod.cpu as f64 / MAX_SPEC_CPU, pod.total_milli() as f64 / MAX_SPEC_GPU];
    let dot = node[0] * req[0] + node[1] * req[1];
    (MAX_NODE_SCORE as f64 * (1.0 - dot / 2.0)) as i64
}

impl NodePolicy for DotProd {
    fn name(&self) -> &'static str {
        "dotprod"
    }

    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick) {
        let c = cx.cluster;
        choose_scored(c, pod, feasible, |n| score(c, n, pod))
    }
}
