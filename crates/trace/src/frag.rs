//! Fragmentation as the FGD paper measures it (the simulator's `pkg/utils/frag.go`).
//!
//! The target workload is the *typical pods*: the most frequent pod shapes (milli-CPU, milli-GPU,
//! GPU count, `gpu_spec`) of the original pod list, taken in decreasing frequency until they
//! cover 95% of the pods, their frequencies renormalised to sum to 1. A node's fragmentation is
//! the expected idle milli-GPU a typical pod could not use there: for each typical pod, with
//! its frequency as weight, all the node's idle GPU milli counts when the pod could not run on
//! the node (it asks for no GPU, lacks GPU or CPU there, or may not use the node's model), and
//! only the idle milli of the GPUs too small for it when it could.

use std::collections::HashMap;

use crate::cluster::{accessible, Pod};

/// Share of pods the typical pods cover (the experiment's `podPopularityThreshold`).
pub const TYPICAL_COVERAGE_PCT: f64 = 95.0;

/// One typical pod shape and its frequency.
#[derive(Debug, Clone, PartialEq)]
pub struct TypicalPod {
    /// Milli-CPU (non-zero).
    pub cpu: i64,
    /// Milli-GPU per GPU (0 for CPU-only pods).
    pub milli: i32,
    /// GPUs.
    pub num_gpu: u32,
    /// Models accepted (`None`: any).
    pub models: Option<u64>,
    /// Spec id (part of the shape's identity).
    pub spec: u32,
    /// Frequency in 0..=1.
    pub freq: f64,
}

/// A pod shape: milli-CPU, milli-GPU, GPU count, spec id.
type Shape = (i64, i32, u32, u32);

/// The typical pods of a pod list.
pub fn typical_pods(pods: &[Pod]) -> Vec<TypicalPod> {
    let mut counts: HashMap<Shape, (f64, Option<u64>)> = HashMap::new();
    for p in pods {
        let e = counts.entry((p.cpu, p.milli, p.num_gpu, p.spec)).or_insert((0.0, p.models));
        e.0 += 1.0;
    }
    let total = pods.len() as f64;
    let mut list: Vec<TypicalPod> = counts
        .into_iter()
        .map(|((cpu, milli, num_gpu, spec), (n, models))| TypicalPod { cpu, milli, num_gpu, models, spec, freq: n })
        .collect();
    // Decreasing count; equal counts in decreasing (cpu, milli, num_gpu, spec) order, as
    // sort.Reverse over the simulator's Less does.
    list.sort_by(|a, b| {
        b.freq
            .total_cmp(&a.freq)
            .then(b.cpu.cmp(&a.cpu))
            .then(b.milli.cmp(&a.milli))
            .then(b.num_gpu.cmp(&a.num_gpu))
            .then(b.spec.cmp(&a.spec))
    });
    let expected = TYPICAL_COVERAGE_PCT * total / 100.0;
    let (mut i, mut cum) = (0usize, 0.0);
    while cum < expected && i < list.len() {
        cum += list[i].freq;
        i += 1;
    }
    list.truncate(i);
    for t in &mut list {
        t.freq /= cum;
    }
    list
}

/// Key of a node state for the fragmentation memo: model, how many typical CPU sizes fit in the
/// CPU left, and the GPU milli left sorted (fragmentation depends on nothing else).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    model: u8,
    cpu_bucket: u32,
    n: u8,
    left: [i16; MEMO_GPUS],
}

const MEMO_GPUS: usize = 8;

/// Typical pods plus a memo of node fragmentation by node state.
#[derive(Debug, Clone)]
pub struct FragModel {
    typical: Vec<TypicalPod>,
    /// Distinct typical CPU sizes, ascending.
    cpu_sizes: Vec<i64>,
    memo: HashMap<Key, f64, foldhash::fast::FixedState>,
    /// The workload's CPU per GPU, [`FragModel::cpu_per_gpu`].
    cpu_per_gpu: f64,
}

impl FragModel {
    /// A model over these typical pods.
    pub fn new(typical: Vec<TypicalPod>) -> Self {
        let mut cpu_sizes: Vec<i64> = typical.iter().map(|t| t.cpu).collect();
        cpu_sizes.sort_unstable();
        cpu_sizes.dedup();
        let (mut cpu, mut gpu) = (0.0, 0.0);
        for t in &typical {
            cpu += t.freq * t.cpu as f64;
            gpu += t.freq * f64::from(t.milli) * f64::from(t.num_gpu);
        }
        let cpu_per_gpu = if gpu > 0.0 { cpu / gpu } else { 1.0 };
        FragModel {
            typical,
            cpu_sizes,
            memo: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(7)),
            cpu_per_gpu,
        }
    }

    /// The workload's CPU per GPU (cores per whole GPU, 1 when no typical pod asks for a GPU):
    /// CPU over GPU milli of the typical pods, CPU-only pods included, weighted by frequency.
    /// What a node should keep per idle GPU so that the pods still to come can use both.
    pub fn cpu_per_gpu(&self) -> f64 {
        self.cpu_per_gpu
    }

    /// The typical pods.
    pub fn typical(&self) -> &[TypicalPod] {
        &self.typical
    }

    /// Fragmentation (milli-GPU) of a node of `model` with `cpu_left` and GPUs `gpu_left`.
    pub fn node_frag(&mut self, model: Option<u8>, cpu_left: i64, gpu_left: &[i32]) -> f64 {
        if gpu_left.is_empty() || gpu_left.len() > MEMO_GPUS {
            return self.compute(model, cpu_left, gpu_left);
        }
        let mut left = [0i16; MEMO_GPUS];
        for (d, &g) in left.iter_mut().zip(gpu_left) {
            *d = g as i16;
        }
        left[..gpu_left.len()].sort_unstable_by(|a, b| b.cmp(a));
        let key = Key {
            model: model.unwrap_or(u8::MAX),
            cpu_bucket: self.cpu_sizes.partition_point(|&c| c <= cpu_left) as u32,
            n: gpu_left.len() as u8,
            left,
        };
        if let Some(&v) = self.memo.get(&key) {
            return v;
        }
        let v = self.compute(model, cpu_left, gpu_left);
        self.memo.insert(key, v);
        v
    }

    fn compute(&self, model: Option<u8>, cpu_left: i64, gpu_left: &[i32]) -> f64 {
        let total: i64 = gpu_left.iter().map(|&g| i64::from(g)).sum();
        if total == 0 {
            return 0.0;
        }
        let total = total as f64;
        let mut frag = 0.0;
        for t in &self.typical {
            let usable = t.milli > 0
                && accessible(t.models, model)
                && gpu_left.iter().filter(|&&g| g >= t.milli).count() >= t.num_gpu as usize
                && t.num_gpu > 0;
            if usable && cpu_left >= t.cpu {
                // Q3: only the GPUs too small for this pod are fragments.
                let small: i64 = gpu_left.iter().filter(|&&g| g < t.milli).map(|&g| i64::from(g)).sum();
                frag += t.freq * small as f64;
            } else {
                frag += t.freq * total;
            }
        }
        frag
    }
}

/// The FGD score of moving a node's fragmentation from `before` to `after` (0..=100, higher
/// better): `int(sigmoid((before - after) / 1000) * 100)`.
pub fn fgd_score(before: f64, after: f64) -> i64 {
    let x = (before - after) / 1000.0;
    ((1.0 / (1.0 + (-x).exp())) * 100.0) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu: i64, milli: i32, n: u32) -> Pod {
        Pod { row: 0, cpu, mem: 0, num_gpu: n, milli, models: None, spec: 0 }
    }

    #[test]
    fn typical_pods_cover_95_percent_and_sum_to_one() {
        let mut pods = vec![pod(1000, 500, 1); 90];
        pods.extend(vec![pod(2000, 1000, 1); 6]);
        pods.extend(vec![pod(3000, 0, 0); 4]);
        let t = typical_pods(&pods);
        assert_eq!(t.len(), 2, "90 + 6 = 96 >= 95");
        assert!((t.iter().map(|t| t.freq).sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((t[0].freq - 90.0 / 96.0).abs() < 1e-12);
    }

    #[test]
    fn cpu_per_gpu_weighs_the_typical_pods_by_frequency() {
        let t = |cpu, milli, num_gpu, freq| TypicalPod { cpu, milli, num_gpu, models: None, spec: 0, freq };
        // Half the pods: 8 cores on two whole GPUs; half: 2 cores and no GPU. 5 cores / 1 GPU.
        let m = FragModel::new(vec![t(8000, 1000, 2, 0.5), t(2000, 0, 0, 0.5)]);
        assert!((m.cpu_per_gpu() - 5.0).abs() < 1e-12, "{}", m.cpu_per_gpu());
        assert_eq!(FragModel::new(vec![t(2000, 0, 0, 1.0)]).cpu_per_gpu(), 1.0, "no GPU asked");
    }

    #[test]
    fn node_fragmentation_follows_the_quadrants() {
        // One typical pod: half a GPU, 1 CPU.
        let mut m =
            FragModel::new(vec![TypicalPod { cpu: 1000, milli: 500, num_gpu: 1, models: None, spec: 0, freq: 1.0 }]);
        // Q3 with one GPU too small (300 left): only it is a fragment.
        assert_eq!(m.node_frag(Some(0), 4000, &[1000, 300]), 300.0);
        // Lacking CPU: every idle milli is a fragment.
        assert_eq!(m.node_frag(Some(0), 500, &[1000, 300]), 1300.0);
        // No GPU left: nothing to fragment.
        assert_eq!(m.node_frag(Some(0), 4000, &[0, 0]), 0.0);
        // Memo returns the same for the same multiset.
        assert_eq!(m.node_frag(Some(0), 4000, &[300, 1000]), 300.0);
        assert_eq!(fgd_score(1000.0, 1000.0), 50);
        assert!(fgd_score(2000.0, 0.0) > fgd_score(0.0, 0.0));
    }
}
