//! Node-level placement policies of the FGD experiment, one file each, as their authors define
//! them in hkust-adsl/kubernetes-scheduler-simulator (`pkg/simulator/plugin/*_score.go`).
//!
//! Every policy scores the feasible nodes with a whole number in 0..=100 (kube-scheduler's
//! score range; the integer truncation makes ties common), takes the highest score and breaks
//! ties by the node's seeded rank ([`Cluster::rank`]); then it picks the GPUs inside the node.
//! When only one node is feasible, kube-scheduler takes it without scoring.

mod bestfit;
mod dotprod;
mod fgd;
mod gpuclustering;
mod gpupacking;
pub mod learned;
mod random;

pub use bestfit::BestFit;
pub use dotprod::DotProd;
pub use fgd::Fgd;
pub use gpuclustering::GpuClustering;
pub use gpupacking::GpuPacking;
pub use learned::Learned;
pub use random::Random;

use rand_chacha::ChaCha8Rng;

use crate::cluster::{Cluster, GpuPick, Pod};
use crate::error::TraceError;
use crate::frag::FragModel;

/// kube-scheduler's largest node score.
pub const MAX_NODE_SCORE: i64 = 100;
/// The simulator's normalising CPU (milli) for dot-product and best-fit scores.
pub const MAX_SPEC_CPU: f64 = 128_000.0;
/// The simulator's normalising GPU (milli).
pub const MAX_SPEC_GPU: f64 = 8_000.0;

/// What a policy sees: the cluster (read-only), the fragmentation model (its memo may grow)
/// and the run's seeded random generator.
pub struct Ctx<'a> {
    /// The cluster now.
    pub cluster: &'a Cluster,
    /// Typical pods and the fragmentation memo.
    pub frag: &'a mut FragModel,
    /// The run's one random generator.
    pub rng: &'a mut ChaCha8Rng,
}

/// A node-level placement policy: for one pod and the nodes it fits, the node and the GPUs.
///
/// This is not `dqngpu_model::Policy`, which places whole jobs on GPUs of a small cluster
/// over time; here a decision is one pod on one of a thousand multi-GPU nodes, in the FGD
/// paper's units (milli-GPU, milli-CPU), and a policy may consult the fragmentation memo.
pub trait NodePolicy: Send + Sync {
    /// The name it resolves by.
    fn name(&self) -> &'static str;
    /// The node (an element of `feasible`, never empty) and GPUs for `pod`.
    fn choose(&self, cx: &mut Ctx<'_>, pod: &Pod, feasible: &[usize]) -> (usize, GpuPick);
}

/// The names [`by_name`] accepts, in the paper's order.
pub const POLICY_NAMES: [&str; 6] = ["random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd"];

/// Every name [`by_name`] accepts: the paper's six and the learned `dqngpu`.
pub const ALL_POLICY_NAMES: [&str; 7] =
    ["random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "dqngpu"];

/// The paper's label of a policy name.
pub fn paper_label(name: &str) -> &'static str {
    match name {
        "random" => "Random",
        "dotprod" => "DotProd",
        "gpuclustering" => "GpuClustering",
        "gpupacking" => "GpuPacking",
        "bestfit" => "BestFit",
        "fgd" => "FGD",
        "dqngpu" => "dqngpu",
        _ => "?",
    }
}

/// Resolves a policy by name (`dqngpu` with the default pod list's shipped weights).
pub fn by_name(name: &str) -> Result<Box<dyn NodePolicy>, TraceError> {
    for_list(name, "default")
}

/// Resolves a policy by name for the pod list `list` (its short name, `cpu250`): `dqngpu`
/// takes the weights trained on that list where they ship, else the default list's.
pub fn for_list(name: &str, list: &str) -> Result<Box<dyn NodePolicy>, TraceError> {
    Ok(match name {
        "random" => Box::new(Random),
        "dotprod" => Box::new(DotProd),
        "gpuclustering" => Box::new(GpuClustering),
        "gpupacking" => Box::new(GpuPacking),
        "bestfit" => Box::new(BestFit),
        "fgd" => Box::new(Fgd),
        "dqngpu" => Box::new(Learned { weights: learned::Weights::shipped_for(list) }),
        _ => return Err(TraceError::unknown("policy", name, &ALL_POLICY_NAMES)),
    })
}

/// The feasible node with the highest score, the lowest rank among equals (`selectHost`).
/// The GPU a sharing pod would take on a node whose GPUs have `left` milli free: each GPU with
/// room is scored with the pod on it (`score(left with the pod placed, gpu)`), GPUs with equal
/// milli left are scored once (they score alike), and the first best wins. `None`: no room.
pub(crate) fn best_share_gpu<S: Copy + PartialOrd>(
    left: &mut [i32],
    milli: i32,
    mut score: impl FnMut(&[i32], usize) -> S,
) -> Option<(S, usize)> {
    let mut best: Option<(S, usize)> = None;
    let mut seen: Vec<(i32, S)> = Vec::with_capacity(4);
    for j in 0..left.len() {
        let g = left[j];
        if g < milli {
            continue;
        }
        let s = match seen.iter().find(|(v, _)| *v == g) {
            Some(&(_, s)) => s,
            None => {
                left[j] = g - milli;
                let s = score(left, j);
                left[j] = g;
                seen.push((g, s));
                s
            }
        };
        if best.is_none_or(|(b, _)| s > b) {
            best = Some((s, j));
        }
    }
    best
}

pub(crate) fn select(cluster: &Cluster, feasible: &[usize], scores: &[i64]) -> usize {
    let mut best = feasible[0];
    let mut best_score = scores[0];
    for (&n, &s) in feasible.iter().zip(scores).skip(1) {
        if s > best_score || (s == best_score && cluster.rank[n] < cluster.rank[best]) {
            best = n;
            best_score = s;
        }
    }
    best
}

/// GPUs by best fit (the default `gpuSelMethod`), whole GPUs by lowest index.
pub(crate) fn best_fit_pick(cluster: &Cluster, node: usize, pod: &Pod) -> GpuPick {
    if pod.num_gpu == 0 {
        GpuPick::None
    } else if pod.is_share() {
        GpuPick::Gpus(cluster.best_fit_gpu(node, pod).into_iter().collect())
    } else {
        GpuPick::Gpus(cluster.whole_gpus(node, pod))
    }
}

/// Scores every feasible node with `score`, selects, and picks GPUs by best fit.
pub(crate) fn choose_scored(
    cluster: &Cluster,
    pod: &Pod,
    feasible: &[usize],
    score: impl Fn(usize) -> i64,
) -> (usize, GpuPick) {
    let node = if feasible.len() == 1 {
        feasible[0]
    } else {
        let scores: Vec<i64> = feasible.iter().map(|&n| score(n)).collect();
        select(cluster, feasible, &scores)
    };
    (node, best_fit_pick(cluster, node, pod))
}
