//! Random: a feasible node drawn uniformly (the `RandomScore` plugin's PreScore draw), and for a
//! sharing pod a GPU drawn uniformly among those it fits (`gpuSelMethod: random`).

use rand::Rng;

use super::{Ctx, NodePolicy};
use crate::cluster::{GpuPick, Pod};

/// Uniformly random placement.
#[derive(Debug, Clone, Copy, Default)]
pub struct Random;

impl NodePolicy for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick) {
        let node = if feasible.len() == 1 { feasible[0] } else { feasible[cx.rng.gen_range(0..feasible.len())] };
        let pick = if pod.num_gpu == 0 {
            GpuPick::None
        } else if pod.is_share() {
            // Reservoir sampling over the GPUs that fit, as the simulator does.
            let mut chosen = None;
            let mut seen = 0u32;
            for (j, &g) in cx.cluster.state[node].gpu_left.iter().enumerate() {
                if g >= pod.milli {
                    seen += 1;
                    if cx.rng.gen_range(0..seen) == 0 {
                        chosen = Some(j);
                    }
                }
            }
            GpuPick::Gpus(chosen.into_iter().collect())
        } else {
            GpuPick::Gpus(cx.cluster.whole_gpus(node, pod))
        };
        (node, pick)
    }
}
