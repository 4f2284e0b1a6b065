//! `dqngpu`: a learned scorer over candidate (node, GPU) pairs. One weight vector is shared by
//! every candidate; a candidate's features are the pod's request, the node's resources left
//! after placing it, and fragmentation terms against the typical pods. The highest score
//! wins, ties by the node's seeded rank. Weights come from [`crate::learn`] (evolution
//! strategies on pod sequences drawn with training seeds); the shipped ones are in
//! `crates/trace/models/dqngpu.json`.

use serde::{Deserialize, Serialize};

use super::{select, Ctx, NodePolicy, MAX_SPEC_CPU, MAX_SPEC_GPU};
use crate::cluster::{GpuPick, Pod};
use crate::reader::MILLI;

/// Number of features per candidate.
pub const FEATURES: usize = 8;

/// Feature names, in order.
pub const FEATURE_NAMES: [&str; FEATURES] = [
    "frag_delta",       // (frag before - frag after) / 1000, FGD's signal
    "sigmoid_frag",     // FGD's exact score / 100
    "cpu_left_after",   // CPU left after, / 128 cores
    "gpu_left_after",   // GPU milli left on the node after, / 8000
    "gpu_left_on_pick", // milli left on the GPU a sharing pod takes, after, / 1000
    "untouched_node",   // 1 when the node had nothing placed
    "free_gpus_after",  // fully free GPUs after, / 8
    "share_x_frag",     // frag_delta for sharing pods only
];

/// The weights of the scorer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// One weight per feature.
    pub w: Vec<f64>,
    /// How they were obtained (command, seeds, iterations).
    #[serde(default)]
    pub provenance: String,
}

impl Weights {
    /// Weights that decide exactly as FGD (its integer score; ties by the node rank). Small
    /// weights on the other features then only break FGD's ties.
    pub fn fgd_like() -> Self {
        let mut w = vec![0.0; FEATURES];
        w[1] = 1.0;
        Weights { w, provenance: "FGD-equivalent start".into() }
    }

    /// The shipped weights.
    pub fn shipped() -> Self {
        serde_json::from_str(include_str!("../../models/dqngpu.json")).unwrap_or_else(|_| Self::fgd_like())
    }
}

/// The learned scorer.
#[derive(Debug, Clone, PartialEq)]
pub struct Learned {
    /// Its weights.
    pub weights: Weights,
}

impl Learned {
    fn score(&self, f: &[f64; FEATURES]) -> f64 {
        self.weights.w.iter().zip(f).map(|(w, x)| w * x).sum()
    }

    /// The best candidate on node `n`: (score, GPU for a sharing pod).
    fn node_best(&self, cx: &mut Ctx<'_>, n: usize, pod: &Pod) -> (f64, Option<usize>) {
        let (spec, st) = (&cx.cluster.specs[n], &cx.cluster.state[n]);
        let before = st.frag;
        let cpu_after = st.cpu_left - pod.cpu_nonzero;
        let untouched = if st.pods == 0 { 1.0 } else { 0.0 };
        let total_after = (st.gpu_left_total() - pod.total_milli()) as f64 / MAX_SPEC_GPU;
        let mut left = st.gpu_left.clone();
        let feat = |left: &[i32], pick: Option<usize>, frag: &mut crate::frag::FragModel| {
            let after = frag.node_frag(spec.model, cpu_after, left);
            let d = (before - after) / 1000.0;
            let free = left.iter().filter(|&&g| g == MILLI as i32).count() as f64 / 8.0;
            [
                d,
                crate::frag::fgd_score(before, after) as f64 / 100.0,
                cpu_after as f64 / MAX_SPEC_CPU,
                total_after,
                pick.map(|j| f64::from(left[j]) / f64::from(MILLI)).unwrap_or(0.0),
                untouched,
                free,
                if pod.is_share() { d } else { 0.0 },
            ]
        };
        if pod.is_share() {
            let best = super::best_share_gpu(&mut left, pod.milli, |left, j| self.score(&feat(left, Some(j), cx.frag)));
            best.map(|(s, j)| (s, Some(j))).unwrap_or((f64::NEG_INFINITY, None))
        } else {
            let mut want = pod.num_gpu as usize;
            for g in left.iter_mut() {
                if want > 0 && *g >= pod.milli && pod.milli > 0 {
                    *g -= pod.milli;
                    want -= 1;
                }
            }
            let f = feat(&left, None, cx.frag);
            (self.score(&f), None)
        }
    }
}

impl NodePolicy for Learned {
    fn name(&self) -> &'static str {
        "dqngpu"
    }

    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick) {
        let mut scored = Vec::with_capacity(feasible.len());
        for &n in feasible {
            scored.push(self.node_best(cx, n, pod));
        }
        // Scores are real numbers; order them into integers for the shared tie-break.
        let mut order: Vec<usize> = (0..scored.len()).collect();
        order.sort_by(|&a, &b| scored[a].0.total_cmp(&scored[b].0));
        let mut ranks = vec![0i64; scored.len()];
        let mut r = 0i64;
        for (k, &i) in order.iter().enumerate() {
            if k > 0 && scored[i].0 > scored[order[k - 1]].0 {
                r += 1;
            }
            ranks[i] = r;
        }
        let node = select(cx.cluster, feasible, &ranks);
        let k = feasible.iter().position(|&n| n == node).unwrap_or(0);
        let pick = if pod.num_gpu == 0 {
            GpuPick::None
        } else if pod.is_share() {
            GpuPick::Gpus(scored[k].1.into_iter().collect())
        } else {
            GpuPick::Gpus(cx.cluster.whole_gpus(node, pod))
        };
        (node, pick)
    }
}
