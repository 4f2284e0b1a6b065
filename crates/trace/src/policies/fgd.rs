//! FGD, fragmentation gradient descent (Weng et al., ATC'23): the node and GPU whose placement
//! grows the node's fragmentation against the typical pods least,
//! `int(100 * sigmoid((frag_before - frag_after) / 1000))`. A sharing pod tries each GPU it
//! fits and keeps the best (the lowest index among equal scores); a whole-GPU pod takes the
//! lowest-index free GPUs.

use super::{select, Ctx, NodePolicy};
use crate::cluster::{GpuPick, Pod};
use crate::frag::fgd_score;

/// Fragmentation gradient descent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fgd;

/// FGD's score of node `n` for `pod` and, for a sharing pod, the GPU it would take.
pub fn score(cx: &mut Ctx<'_>, n: usize, pod: &Pod) -> (i64, Option<usize>) {
    let (spec, st) = (&cx.cluster.specs[n], &cx.cluster.state[n]);
    let before = st.frag;
    let cpu_after = st.cpu_left - pod.cpu;
    if pod.is_share() {
        let mut left = st.gpu_left.clone();
        let best = super::best_share_gpu(&mut left, pod.milli, |left, _| {
            fgd_score(before, cx.frag.node_frag(spec.model, cpu_after, left))
        });
        match best {
            Some((s, j)) => (s, Some(j)),
            None => (0, None),
        }
    } else {
        let mut left = st.gpu_left.clone();
        let mut want = pod.num_gpu as usize;
        for g in left.iter_mut() {
            if want == 0 {
                break;
            }
            if *g >= pod.milli {
                *g -= pod.milli;
                want -= 1;
            }
        }
        let after = cx.frag.node_frag(spec.model, cpu_after, &left);
        (fgd_score(before, after), None)
    }
}

impl NodePolicy for Fgd {
    fn name(&self) -> &'static str {
        "fgd"
    }

    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick) {
        let mut scored = Vec::with_capacity(feasible.len());
        for &n in feasible {
            scored.push(score(cx, n, pod));
        }
        let node = if feasible.len() == 1 {
            feasible[0]
        } else {
            let scores: Vec<i64> = scored.iter().map(|(s, _)| *s).collect();
            select(cx.cluster, feasible, &scores)
        };
        let pick = if pod.num_gpu == 0 {
            GpuPick::None
        } else if pod.is_share() {
            let k = feasible.iter().position(|&n| n == node).unwrap_or(0);
            GpuPick::Gpus(scored[k].1.into_iter().collect())
        } else {
            GpuPick::Gpus(cx.cluster.whole_gpus(node, pod))
        };
        (node, pick)
    }
}
