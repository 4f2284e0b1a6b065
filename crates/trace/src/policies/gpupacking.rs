//! GpuPacking: prefer, in order, (1) sharing GPUs already in use (100 minus a tenth of the free
//! percentage of the GPUs used, at least 50), (2) whole free GPUs on a node already in use
//! (50 minus the free GPUs taken, at least 33), (3) an untouched node (33 minus its GPUs, at
//! least its GPU count); 0 for CPU-only pods. GPUs by best fit.

use super::{choose_scored, Ctx, NodePolicy, MAX_NODE_SCORE};
use crate::cluster::{Cluster, GpuPick, Pod};
use crate::reader::MILLI;

/// GPU packing.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuPacking;

/// The GpuPacking score of node `n` for `pod`.
pub fn score(cluster: &Cluster, n: usize, pod: &Pod) -> i64 {
    if pod.milli <= 0 {
        return 0;
    }
    let st = &cluster.state[n];
    let free = st.fully_free() as i64;
    if free == cluster.specs[n].gpus as i64 {
        return (MAX_NODE_SCORE / 3 - free).max(free);
    }
    // GPUs in ascending milli left (stable), the first that fit.
    let mut order: Vec<usize> = (0..st.gpu_left.len()).collect();
    order.sort_by_key(|&j| st.gpu_left[j]);
    let mut want = pod.num_gpu as usize;
    let mut whole_used = 0i64;
    let mut free_pct = 0i64;
    for j in order {
        if want == 0 {
            break;
        }
        let g = st.gpu_left[j];
        if pod.milli <= g {
            want -= 1;
            if g == MILLI as i32 {
                whole_used += 1;
            }
            free_pct += i64::from(g) * 100 / i64::from(MILLI);
        }
    }
    if want != 0 {
        return 0;
    }
    if whole_used > 0 {
        return (MAX_NODE_SCORE / 2 - whole_used).max(MAX_NODE_SCORE / 3);
    }
    (MAX_NODE_SCORE - free_pct / 10).max(MAX_NODE_SCORE / 2)
}

impl NodePolicy for GpuPacking {
    fn name(&self) -> &'static str {
        "gpupacking"
    }

    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick) {
        let c = cx.cluster;
        choose_scored(c, pod, feasible, |n| score(c, n, pod))
    }
}
