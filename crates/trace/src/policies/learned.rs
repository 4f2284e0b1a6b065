//! `dqngpu`: a learned scorer over candidate (node, GPU) pairs. One weight vector is shared by
//! every candidate; FGD's integer score is the anchor (weight 1) and the learned weights act
//! on the node's CPU-per-GPU balance after placing against the workload's, CPU-only pods'
//! terms, and a sharing pod's fit on its GPU. The highest score wins, ties by the node's seeded
//! rank. Weights come from [`crate::learn`] (evolution strategies on pod sequences drawn with
//! training seeds); the shipped ones are in `crates/trace/models/` (the default pod list's,
//! and a few lists' own).

use serde::{Deserialize, Serialize};

use super::{select, Ctx, NodePolicy, MAX_SPEC_GPU};
use crate::cluster::{GpuPick, Pod};
use crate::reader::MILLI;

/// Number of features per candidate.
pub const FEATURES: usize = 7;

/// Feature names, in order.
pub const FEATURE_NAMES: [&str; FEATURES] = [
    "fgd_score",       // FGD's integer score / 100: the anchor, its weight stays 1
    "imbalance",       // GPU pods: (ratio - 1)^2 / 9, ratio = (CPU / GPU left after) / the workload's, <= 4
    "balance",         // GPU pods: ratio / 4; with `imbalance`, shifts the preferred ratio
    "gpus_full_after", // GPU pods: 1 when the node has no GPU milli left after
    "cpu_pod_idle",    // CPU-only pods: the node's idle GPU milli / 8000
    "cpu_pod_balance", // CPU-only pods: `balance` after
    "share_left",      // for a sharing pod, milli left on the GPU it takes, after, / 1000
];

/// Features from this index on are learned; the ones before it keep their weight (a score
/// is only ever compared, so one fixed weight sets the scale).
pub const FIRST_LEARNED: usize = 1;

/// The ratio above which `balance` saturates, in units of the workload's CPU per GPU.
const BALANCE_CAP: f64 = 4.0;

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
        w[0] = 1.0;
        Weights { w, provenance: "FGD-equivalent start".into() }
    }

    /// Whether `w` fits the scorer: one finite weight per feature; else what is wrong.
    pub fn check(w: &[f64]) -> Result<(), String> {
        if w.len() != FEATURES {
            return Err(format!("field `w` has {} weights, expected {FEATURES}", w.len()));
        }
        match w.iter().position(|x| !x.is_finite()) {
            Some(k) => Err(format!("field `w`, value {} is not a finite number", k + 1)),
            None => Ok(()),
        }
    }

    /// The shipped weights, trained on the default pod list.
    pub fn shipped() -> Self {
        Self::embedded(include_str!("../../models/dqngpu.json"))
    }

    /// Weights shipped in the binary. They are checked by test (`every_shipped_weights_file_
    /// loads_and_fits`); a broken one falling back to FGD's weights made results labelled
    /// dqngpu FGD's without a word, so one that fails here stops with its reason.
    fn embedded(text: &str) -> Self {
        let w: Self = serde_json::from_str(text).unwrap_or_else(|e| panic!("shipped trace weights: {e}"));
        if let Err(e) = Self::check(&w.w) {
            panic!("shipped trace weights: {e}");
        }
        w
    }

    /// The shipped weights for a pod list by its short name (`cpu250`): its own where one was
    /// trained on it, else the default list's.
    pub fn shipped_for(list: &str) -> Self {
        SHIPPED_FOR_LISTS
            .iter()
            .find(|(name, _)| *name == list)
            .map_or_else(Self::shipped, |(_, text)| Self::embedded(text))
    }
}

/// Weights trained on one pod list each (`dqngpu trace train --pods LIST`), for the lists where
/// the default list's weights allocate less than FGD (docs/TRACE.md).
pub const SHIPPED_FOR_LISTS: [(&str, &str); 5] = [
    ("cpu235", include_str!("../../models/lists/cpu235.json")),
    ("cpu250", include_str!("../../models/lists/cpu250.json")),
    ("cpu300", include_str!("../../models/lists/cpu300.json")),
    ("multigpu30", include_str!("../../models/lists/multigpu30.json")),
    ("multigpu40", include_str!("../../models/lists/multigpu40.json")),
];

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
    fn node_best(&self, cx: &mut Ctx<'_>, n: usize, pod: &Pod, demand: f64) -> (f64, Option<usize>) {
        let (spec, st) = (&cx.cluster.specs[n], &cx.cluster.state[n]);
        let before = st.frag;
        let cpu_after = st.cpu_left - pod.cpu;
        let idle = st.gpu_left_total();
        let idle_after = idle - pod.total_milli();
        // A node with no GPU left strands nothing: it counts as balanced.
        let (ratio, full) = if idle_after > 0 {
            ((cpu_after.max(0) as f64 / idle_after as f64 / demand).min(BALANCE_CAP), 0.0)
        } else {
            (1.0, 1.0)
        };
        let balance = ratio / BALANCE_CAP;
        // A CPU-only pod takes from the CPU side of the balance only, so it has its own two
        // features: it can learn to go where CPU is in excess or no GPU is left to strand.
        let [imbalance, balance, full, cpu_pod_idle, cpu_pod_balance] = if pod.num_gpu == 0 {
            [0.0, 0.0, 0.0, idle as f64 / MAX_SPEC_GPU, balance]
        } else {
            [(ratio - 1.0).powi(2) / (BALANCE_CAP - 1.0).powi(2), balance, full, 0.0, 0.0]
        };
        let mut left = st.gpu_left.clone();
        let feat = |left: &[i32], pick: Option<usize>, frag: &mut crate::frag::FragModel| {
            let after = frag.node_frag(spec.model, cpu_after, left);
            [
                crate::frag::fgd_score(before, after) as f64 / 100.0,
                imbalance,
                balance,
                full,
                cpu_pod_idle,
                cpu_pod_balance,
                pick.map(|j| f64::from(left[j]) / f64::from(MILLI)).unwrap_or(0.0),
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
        let demand = cx.frag.cpu_per_gpu();
        let mut scored = Vec::with_capacity(feasible.len());
        for &n in feasible {
            scored.push(self.node_best(cx, n, pod, demand));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every weights file built into the binary parses and fits the scorer: one that did not
    /// fell back to FGD's weights (or the default list's), and results labelled dqngpu were
    /// those without a word.
    #[test]
    fn every_shipped_weights_file_loads_and_fits() {
        let all =
            std::iter::once(include_str!("../../models/dqngpu.json")).chain(SHIPPED_FOR_LISTS.iter().map(|(_, t)| *t));
        for text in all {
            let w: Weights = serde_json::from_str(text).unwrap();
            assert_eq!(Weights::check(&w.w), Ok(()));
        }
        for (name, text) in SHIPPED_FOR_LISTS {
            let own: Weights = serde_json::from_str(text).unwrap();
            assert_eq!(Weights::shipped_for(name), own, "{name}");
        }
        assert_eq!(Weights::shipped_for("default"), Weights::shipped());
    }
}
