//! GpuClustering: put pods next to pods of the same kind (sharing, or the same number of whole
//! GPUs). Score bands, each topped up by how full the node's GPUs are
//! (`25 * (8000 - milli left) / 8000`, integer): 75-100 when the node holds only this kind,
//! 50-75 when it holds this kind among others, 25-50 when it holds no GPU pod, 0-25 otherwise;
//! 0 for CPU-only pods. GPUs by best fit.

use super::{choose_scored, Ctx, NodePolicy, MAX_NODE_SCORE};
use crate::cluster::{Cluster, GpuPick, Pod};

/// GPU clustering.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuClustering;

/// The GpuClustering score of node `n` for `pod`.
pub fn score(cluster: &Cluster, n: usize, pod: &Pod) -> i64 {
    let Some(tag) = pod.affinity() else { return 0 };
    let st = &cluster.state[n];
    let fill = MAX_NODE_SCORE / 4 * (8000 - st.gpu_left_total()) / 8000;
    let same = st.affinity.iter().any(|&(t, c)| t == tag && c > 0);
    let band = if same {
        if st.affinity.len() == 1 {
            3
        } else {
            2
        }
    } else if st.affinity.is_empty() {
        1
    } else {
        0
    };
    fill + MAX_NODE_SCORE * band / 4
}

impl NodePolicy for GpuClustering {
    fn name(&self) -> &'static str {
        "gpuclustering"
    }

    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick) {
        let c = cx.cluster;
        choose_scored(c, pod, feasible, |n| score(c, n, pod))
    }
}
