//! The FGD experiment's procedure (the simulator's `pkg/simulator/core.go` with
//! `shufflePod: true` and `workloadTuningConfig`):
//!
//! 1. Pods sorted by name, then shuffled by the seed.
//! 2. Inflated to `tune` x the cluster's GPU capacity with copies drawn uniformly from the
//!    original list, appended after the originals; drawing stops at the first copy whose
//!    milli-GPU *per GPU* would pass the target (the simulator's check, which lets a multi-GPU
//!    copy overshoot). A list already above the target loses pods drawn at random instead.
//! 3. Nodes get a tie-break rank from a seeded random permutation.
//! 4. Pods are placed one at a time and never deleted; a pod that fits nowhere fails and is
//!    dropped. After every pod the arrived, allocated and fragmented milli-GPU are recorded.
//!
//! One seed drives every random choice (shuffle, copies, ranks, and the random policy).

use std::time::Instant;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::cluster::{pods_from_rows, Cluster, GpuPick, Models, Pod};
use crate::curves::{discretize, Record};
use crate::error::{Result, TraceError};
use crate::frag::{typical_pods, FragModel};
use crate::policies::{Ctx, NodePolicy};
use crate::reader::{NodeRow, PodRow, MILLI};

/// Most copies the inflation may add before giving up (a list of almost only CPU pods).
const MAX_COPIES: usize = 10_000_000;

/// How to replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReplayConfig {
    /// Requested GPU milli as a multiple of capacity (1.3 in the paper); <= 0 keeps the list.
    pub tune: f64,
    /// The seed.
    pub seed: u64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig { tune: 1.3, seed: 42 }
    }
}

/// The outcome of one replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayResult {
    /// Policy name.
    pub policy: String,
    /// Seed.
    pub seed: u64,
    /// Tune ratio.
    pub tune: f64,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// GPUs in the cluster.
    pub gpus: u64,
    /// Pods in the original list.
    pub pods_original: usize,
    /// Pods tried (originals plus copies, or fewer when tuned down).
    pub pods_tried: usize,
    /// Pods placed.
    pub pods_placed: usize,
    /// Pods that fit nowhere when their turn came.
    pub pods_failed: usize,
    /// Allocated GPU milli as % of capacity at 0..=130% of capacity arrived (`None`: no pod
    /// arrived near that point).
    pub allocation_pct: Vec<Option<f64>>,
    /// Fragmented GPU milli (against the typical pods) as % of all GPU milli, same points.
    pub fragmentation_pct: Vec<Option<f64>>,
    /// Allocation after the last pod, % of capacity.
    pub final_allocation_pct: f64,
    /// Arrived GPU milli after the last pod, % of capacity.
    pub final_arrived_pct: f64,
    /// Pods no node could ever hold (named in a warning; counted in `pods_failed`).
    pub never_fit: Vec<String>,
    /// Wall time of the replay (seconds), reading excluded.
    pub wall_s: f64,
}

impl ReplayResult {
    /// Allocation at `pct` arrived, when recorded.
    pub fn allocation_at(&self, pct: usize) -> Option<f64> {
        self.allocation_pct.get(pct).copied().flatten()
    }
}

/// The pods in the order they arrive, after shuffling and tuning, plus the original pods.
pub fn arrival_order(
    originals: &[Pod],
    capacity_milli: i64,
    cfg: &ReplayConfig,
    rng: &mut ChaCha8Rng,
    names: &[&str],
) -> Result<Vec<Pod>> {
    // NaN compares false with everything, so it read as "keep the list" and the results said
    // tune NaN; an infinite one inflated up to MAX_COPIES before failing.
    if !cfg.tune.is_finite() {
        return Err(TraceError::Unusable(format!("tune {} is not a finite number", cfg.tune)));
    }
    let mut by_name: Vec<usize> = (0..originals.len()).collect();
    by_name.sort_by(|&a, &b| names[a].cmp(names[b]));
    let mut order: Vec<Pod> = by_name.iter().map(|&i| originals[i].clone()).collect();
    order.shuffle(rng);
    if cfg.tune <= 0.0 {
        return Ok(order);
    }
    let target = cfg.tune * capacity_milli as f64;
    let mut total: i64 = order.iter().map(Pod::total_milli).sum();
    if (total as f64) > target {
        while (total as f64) > target && !order.is_empty() {
            let k = rng.gen_range(0..order.len());
            total -= order.remove(k).total_milli();
        }
    } else if (total as f64) < target {
        if !originals.iter().any(|p| p.milli > 0) {
            return Err(TraceError::Unusable(
                "the pod list asks for no GPU, so it cannot be inflated to a GPU load".into(),
            ));
        }
        // A copy adds the mean pod's GPU milli on average: a tune that would need far more
        // than MAX_COPIES is refused before any is made (it built 10 million first).
        let mean = originals.iter().map(Pod::total_milli).sum::<i64>() as f64 / originals.len() as f64;
        let expected = (target - total as f64) / mean;
        if expected > MAX_COPIES as f64 {
            return Err(TraceError::Unusable(format!(
                "tune {} needs about {expected:.0} copies of the list's pods, over {MAX_COPIES}",
                cfg.tune
            )));
        }
        let mut copies = 0usize;
        loop {
            let pod = &originals[by_name[rng.gen_range(0..by_name.len())]];
            if (total + i64::from(pod.milli)) as f64 > target {
                break;
            }
            total += pod.total_milli();
            order.push(pod.clone());
            copies += 1;
            if copies > MAX_COPIES {
                return Err(TraceError::Unusable(format!("inflating needs over {MAX_COPIES} copies")));
            }
        }
    }
    Ok(order)
}

/// The names of the pods of `pods` that no node of `nodes` could hold even empty: never placed
/// by any policy (the replays warn about them; a trainer learns nothing from them).
pub fn never_fit(nodes: &[NodeRow], pods: &[PodRow]) -> Result<Vec<String>> {
    let (cluster, all) = build(nodes, pods)?;
    Ok(all.iter().zip(pods).filter(|(p, _)| cluster.never_fits(p)).map(|(_, row)| row.name.clone()).collect())
}

/// The empty cluster of `nodes` and the pods of `pods` in its units: the first steps of both
/// replays. Errors: more than 64 GPU models, no GPU, no pod.
pub(crate) fn build(nodes: &[NodeRow], pods: &[PodRow]) -> Result<(Cluster, Vec<Pod>)> {
    let mut models = Models::default();
    for n in nodes.iter().filter(|n| n.gpus > 0) {
        if models.intern(&n.model).is_none() {
            return Err(TraceError::Unusable("the node list names more than 64 GPU models".into()));
        }
    }
    let all = pods_from_rows(pods, &mut models).map_err(TraceError::Unusable)?;
    let cluster = Cluster::new(nodes, &mut models);
    if cluster.total_gpus() == 0 {
        return Err(TraceError::Unusable("the node list has no GPU".into()));
    }
    if all.is_empty() {
        return Err(TraceError::Unusable("the pod list is empty".into()));
    }
    Ok((cluster, all))
}

/// Gives the nodes their tie-break ranks: a permutation drawn from `rng`.
pub(crate) fn shuffle_ranks(cluster: &mut Cluster, rng: &mut ChaCha8Rng) {
    let mut perm: Vec<u32> = (0..cluster.specs.len() as u32).collect();
    perm.shuffle(rng);
    cluster.rank = perm;
}

/// The fragmentation model of the typical pods of `pods`, with every node's current
/// fragmentation written into the cluster.
pub(crate) fn init_frag(cluster: &mut Cluster, pods: &[Pod]) -> FragModel {
    let mut frag = FragModel::new(typical_pods(pods));
    for i in 0..cluster.specs.len() {
        refresh_frag(cluster, &mut frag, i);
    }
    frag
}

/// Recomputes node `i`'s fragmentation after a change; returns how much it moved.
pub(crate) fn refresh_frag(cluster: &mut Cluster, frag: &mut FragModel, i: usize) -> f64 {
    let st = &cluster.state[i];
    let v = frag.node_frag(cluster.specs[i].model, st.cpu_left, &st.gpu_left);
    let delta = v - st.frag;
    cluster.state[i].frag = v;
    delta
}

/// The policy's node and GPUs for `pod`, refused when it picks the wrong number of GPUs.
pub(crate) fn choose_checked(
    policy: &dyn NodePolicy,
    cx: &mut Ctx<'_>,
    pod: &Pod,
    feasible: &[usize],
) -> Result<(usize, GpuPick)> {
    let (node, pick) = policy.choose(cx, pod, feasible);
    if let GpuPick::Gpus(ids) = &pick {
        if ids.len() != pod.num_gpu as usize {
            return Err(TraceError::Unusable(format!(
                "policy {} picked {} GPUs for a pod asking {} (a bug)",
                policy.name(),
                ids.len(),
                pod.num_gpu
            )));
        }
    }
    Ok((node, pick))
}

/// Replays `pods` on `nodes` under `policy`.
/// One piece on purpose: the FGD procedure in its published order (models, inflation, shuffle,
/// one pod at a time, a curve point per pod); split, every step would take the cluster, the
/// curve and the counters as arguments.
pub fn replay(nodes: &[NodeRow], pods: &[PodRow], policy: &dyn NodePolicy, cfg: &ReplayConfig) -> Result<ReplayResult> {
    let start = Instant::now();
    let (mut cluster, originals) = build(nodes, pods)?;
    let gpus = cluster.total_gpus();
    let capacity = gpus as i64 * i64::from(MILLI);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    let order = arrival_order(&originals, capacity, cfg, &mut rng, &names)?;
    shuffle_ranks(&mut cluster, &mut rng);

    let never_fit: Vec<String> =
        originals.iter().filter(|p| cluster.never_fits(p)).map(|p| pods[p.row].name.clone()).collect();

    let mut frag = init_frag(&mut cluster, &originals);
    let mut frag_total: f64 = cluster.state.iter().map(|st| st.frag).sum();

    let mut records = Vec::with_capacity(order.len());
    let (mut arrived, mut used) = (0i64, 0i64);
    let (mut placed, mut failed) = (0usize, 0usize);
    let mut feasible = Vec::with_capacity(cluster.specs.len());
    for pod in &order {
        arrived += pod.total_milli();
        feasible.clear();
        feasible.extend((0..cluster.specs.len()).filter(|&i| cluster.fits(i, pod)));
        if feasible.is_empty() {
            failed += 1;
        } else {
            let (node, pick) = {
                let mut cx = Ctx { cluster: &cluster, frag: &mut frag, rng: &mut rng };
                choose_checked(policy, &mut cx, pod, &feasible)?
            };
            cluster.apply(node, pod, &pick);
            used += pod.total_milli();
            frag_total += refresh_frag(&mut cluster, &mut frag, node);
            placed += 1;
        }
        records.push(Record { arrived_milli: arrived, used_milli: used, frag_milli: frag_total });
    }
    debug_assert_eq!(used, cluster.used_milli());
    let (allocation_pct, fragmentation_pct) = discretize(&records, gpus);
    Ok(ReplayResult {
        policy: policy.name().to_string(),
        seed: cfg.seed,
        tune: cfg.tune,
        nodes: cluster.specs.len(),
        gpus,
        pods_original: originals.len(),
        pods_tried: order.len(),
        pods_placed: placed,
        pods_failed: failed,
        allocation_pct,
        fragmentation_pct,
        final_allocation_pct: 100.0 * used as f64 / capacity as f64,
        final_arrived_pct: 100.0 * arrived as f64 / capacity as f64,
        never_fit,
        wall_s: start.elapsed().as_secs_f64(),
    })
}
