//! The cluster being filled: node capacities, what is left on each node and GPU, and pods in
//! the simulator's units (milli-CPU, MiB, milli-GPU per GPU).

use crate::reader::{NodeRow, PodRow, MILLI};

/// Most pods one node accepts (the published node YAML's `pods: '1001'`).
pub const MAX_PODS_PER_NODE: u32 = 1001;

/// GPU model names, interned: a model is a bit in a `u64` mask.
#[derive(Debug, Clone, Default)]
pub struct Models {
    names: Vec<String>,
}

impl Models {
    /// The id of `name`, adding it when new; `None` when more than 64 models are named.
    pub fn intern(&mut self, name: &str) -> Option<u8> {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return Some(i as u8);
        }
        if self.names.len() >= 64 {
            return None;
        }
        self.names.push(name.to_string());
        Some((self.names.len() - 1) as u8)
    }

    /// Name of model `id`.
    pub fn name(&self, id: u8) -> &str {
        self.names.get(usize::from(id)).map(String::as_str).unwrap_or("?")
    }
}

/// What a pod asks for, in the units the policies compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    /// Index of the row it came from (copies share their original's).
    pub row: usize,
    /// CPU request (milli), as kube-scheduler's NodeResourcesFit checks it and the policies
    /// score it. An explicit 0 stays 0: kube-scheduler's `GetNonzeroRequests` substitutes
    /// 100 milli only for a request that is absent, and the trace's converter
    /// (`pod_csv_to_yaml.py`) always writes one.
    pub cpu: i64,
    /// Memory request (MiB).
    pub mem: i64,
    /// GPUs requested.
    pub num_gpu: u32,
    /// Milli-GPU per GPU.
    pub milli: i32,
    /// GPU models accepted, as bits over [`Models`]; `None`: any model.
    pub models: Option<u64>,
    /// Id of the `gpu_spec` text: ids follow the texts' order within one pod list (the
    /// typical-pod key distinguishes specs by their text).
    pub spec: u32,
}

impl Pod {
    /// GPU milli requested in all.
    pub fn total_milli(&self) -> i64 {
        i64::from(self.num_gpu) * i64::from(self.milli)
    }

    /// A GPU-sharing pod: one GPU, less than all of it.
    pub fn is_share(&self) -> bool {
        self.num_gpu == 1 && self.milli < MILLI as i32
    }

    /// The GPU-clustering affinity tag: 0 for sharing pods, else the number of whole GPUs.
    pub fn affinity(&self) -> Option<u32> {
        match self.num_gpu {
            0 => None,
            _ if self.is_share() => Some(0),
            n => Some(n),
        }
    }
}

/// Whether a pod accepting `pod_models` may use a node of model `node_model` (the simulator's
/// `IsNodeAccessibleToPodByType`).
pub fn accessible(pod_models: Option<u64>, node_model: Option<u8>) -> bool {
    match (pod_models, node_model) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(mask), Some(m)) => mask & (1u64 << m) != 0,
    }
}

/// A node's fixed capacity.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Name (`sn`).
    pub name: String,
    /// CPU (milli).
    pub cpu: i64,
    /// Memory (MiB).
    pub mem: i64,
    /// Number of GPUs.
    pub gpus: usize,
    /// GPU model, `None` for CPU-only nodes.
    pub model: Option<u8>,
}

/// What is left on a node.
#[derive(Debug, Clone)]
pub struct NodeState {
    /// CPU left (milli).
    pub cpu_left: i64,
    /// Memory left (MiB).
    pub mem_left: i64,
    /// Pods placed.
    pub pods: u32,
    /// Milli-GPU left on each GPU, by device index.
    pub gpu_left: Vec<i32>,
    /// Pods per GPU-clustering tag (`Pod::affinity`), for GPU pods only.
    pub affinity: Vec<(u32, u32)>,
    /// The node's fragmentation (milli-GPU) against the typical pods, kept current.
    pub frag: f64,
}

impl NodeState {
    /// Milli-GPU left on all GPUs.
    pub fn gpu_left_total(&self) -> i64 {
        self.gpu_left.iter().map(|&g| i64::from(g)).sum()
    }

    /// GPUs with nothing allocated.
    pub fn fully_free(&self) -> usize {
        self.gpu_left.iter().filter(|&&g| g == MILLI as i32).count()
    }
}

/// Which GPUs of the chosen node a pod takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuPick {
    /// A CPU-only pod.
    None,
    /// These GPUs (one for a sharing pod, `num_gpu` whole ones otherwise).
    Gpus(Vec<usize>),
}

/// The cluster: capacities, state and each node's tie-break rank.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Capacities.
    pub specs: Vec<NodeSpec>,
    /// What is left.
    pub state: Vec<NodeState>,
    /// Tie-break rank of each node: among equal scores the lowest rank wins (the simulator
    /// prefixes node names with a seeded random permutation and takes the smallest name).
    pub rank: Vec<u32>,
    /// GPU model names.
    pub models: Models,
}

impl Cluster {
    /// An empty cluster from a node list; `models` must already hold every node model.
    pub fn new(rows: &[NodeRow], models: &mut Models) -> Self {
        let specs: Vec<NodeSpec> = rows
            .iter()
            .map(|r| NodeSpec {
                name: r.name.clone(),
                cpu: i64::from(r.cpu_milli),
                mem: i64::from(r.memory_mib),
                gpus: r.gpus as usize,
                model: if r.gpus > 0 { models.intern(&r.model) } else { None },
            })
            .collect();
        let state = specs
            .iter()
            .map(|s| NodeState {
                cpu_left: s.cpu,
                mem_left: s.mem,
                pods: 0,
                gpu_left: vec![MILLI as i32; s.gpus],
                affinity: Vec::new(),
                frag: 0.0,
            })
            .collect();
        let rank = (0..specs.len() as u32).collect();
        Cluster { specs, state, rank, models: models.clone() }
    }

    /// Total GPUs.
    pub fn total_gpus(&self) -> u64 {
        self.specs.iter().map(|s| s.gpus as u64).sum()
    }

    /// GPU milli allocated now.
    pub fn used_milli(&self) -> i64 {
        self.specs.iter().zip(&self.state).map(|(s, n)| s.gpus as i64 * i64::from(MILLI) - n.gpu_left_total()).sum()
    }

    /// Whether `pod` fits node `i` now (NodeResourcesFit for CPU, memory and pod count, and the
    /// simulator's GPU-share filter for model and GPUs).
    pub fn fits(&self, i: usize, pod: &Pod) -> bool {
        let (spec, st) = (&self.specs[i], &self.state[i]);
        if st.pods + 1 > MAX_PODS_PER_NODE || st.cpu_left < pod.cpu || st.mem_left < pod.mem {
            return false;
        }
        if pod.num_gpu == 0 {
            return true;
        }
        if spec.gpus == 0 || !accessible(pod.models, spec.model) {
            return false;
        }
        st.gpu_left.iter().filter(|&&g| g >= pod.milli).count() >= pod.num_gpu as usize
    }

    /// Whether `pod` fits node `i` when the node is empty.
    pub fn could_ever_fit(&self, i: usize, pod: &Pod) -> bool {
        let spec = &self.specs[i];
        spec.cpu >= pod.cpu
            && spec.mem >= pod.mem
            && (pod.num_gpu == 0 || (accessible(pod.models, spec.model) && spec.gpus >= pod.num_gpu as usize))
    }

    /// Whether no node could hold `pod` even empty (a pod counted failed and named in a warning).
    pub fn never_fits(&self, pod: &Pod) -> bool {
        !(0..self.specs.len()).any(|i| self.could_ever_fit(i, pod))
    }

    /// The lowest-index whole free GPUs for a pod that takes whole GPUs (`AllocateExclusiveGpuId`).
    pub fn whole_gpus(&self, i: usize, pod: &Pod) -> Vec<usize> {
        self.state[i]
            .gpu_left
            .iter()
            .enumerate()
            .filter(|(_, &g)| g == MILLI as i32)
            .map(|(j, _)| j)
            .take(pod.num_gpu as usize)
            .collect()
    }

    /// Best fit inside a node for a sharing pod: the GPU with the least milli left that still
    /// fits, the lowest index on ties (`allocateGpuIdBasedOnBestFit`).
    pub fn best_fit_gpu(&self, i: usize, pod: &Pod) -> Option<usize> {
        let mut best: Option<(usize, i32)> = None;
        for (j, &g) in self.state[i].gpu_left.iter().enumerate() {
            if g >= pod.milli && best.is_none_or(|(_, b)| g < b) {
                best = Some((j, g));
            }
        }
        best.map(|(j, _)| j)
    }

    /// Places `pod` on node `i` taking `gpus`.
    pub fn apply(&mut self, i: usize, pod: &Pod, gpus: &GpuPick) {
        let st = &mut self.state[i];
        st.cpu_left -= pod.cpu;
        st.mem_left -= pod.mem;
        st.pods += 1;
        if let GpuPick::Gpus(ids) = gpus {
            for &j in ids {
                st.gpu_left[j] -= pod.milli;
            }
        }
        if let Some(tag) = pod.affinity() {
            match st.affinity.iter_mut().find(|(t, _)| *t == tag) {
                Some((_, c)) => *c += 1,
                None => st.affinity.push((tag, 1)),
            }
        }
    }

    /// Undoes [`Cluster::apply`]: `pod` leaves node `i`, giving back `gpus` (the timed replay).
    pub fn release(&mut self, i: usize, pod: &Pod, gpus: &GpuPick) {
        let st = &mut self.state[i];
        st.cpu_left += pod.cpu;
        st.mem_left += pod.mem;
        st.pods = st.pods.saturating_sub(1);
        if let GpuPick::Gpus(ids) = gpus {
            for &j in ids {
                st.gpu_left[j] += pod.milli;
            }
        }
        if let Some(tag) = pod.affinity() {
            if let Some(k) = st.affinity.iter().position(|(t, _)| *t == tag) {
                st.affinity[k].1 -= 1;
                // A tag with no pods left is no affinity at all (as on a fresh node).
                if st.affinity[k].1 == 0 {
                    st.affinity.swap_remove(k);
                }
            }
        }
    }
}

/// Converts pod rows to [`Pod`]s, interning the GPU models their specs name.
pub fn pods_from_rows(rows: &[PodRow], models: &mut Models) -> Result<Vec<Pod>, String> {
    // Spec ids in the order of the spec texts, so that comparing ids compares texts, as the
    // simulator's typical-pod sort does (`PodResource.Less`: `GpuType <`), whatever the row order.
    let keys: Vec<String> = rows.iter().map(PodRow::gpu_spec_key).collect();
    let mut spec_texts: Vec<&str> = keys.iter().map(String::as_str).collect();
    spec_texts.sort_unstable();
    spec_texts.dedup();
    let mut out = Vec::with_capacity(rows.len());
    for (k, (r, key)) in rows.iter().zip(&keys).enumerate() {
        let spec = spec_texts.binary_search(&key.as_str()).unwrap_or_default() as u32;
        let mask = if r.gpu_spec.is_empty() {
            None
        } else {
            let mut m = 0u64;
            for name in &r.gpu_spec {
                let id = models
                    .intern(name)
                    .ok_or_else(|| format!("pod `{}` names more than 64 GPU models in all", r.name))?;
                m |= 1u64 << id;
            }
            Some(m)
        };
        let cpu = i64::from(r.cpu_milli);
        out.push(Pod {
            row: k,
            cpu,
            mem: i64::from(r.memory_mib),
            num_gpu: r.num_gpu,
            milli: r.gpu_milli as i32,
            models: mask,
            spec,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{parse_nodes, parse_pods};

    #[test]
    fn release_undoes_apply() {
        let rows = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\na,16000,65536,4,T4\n", "n.csv").unwrap();
        let mut models = Models::default();
        models.intern("T4");
        let pod_rows =
            parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\ns,1000,1024,1,300\nw,2000,2048,2,1000\n", "p.csv")
                .unwrap();
        let pods = pods_from_rows(&pod_rows, &mut models).unwrap();
        let mut c = Cluster::new(&rows, &mut models);
        let fresh = c.state[0].clone();
        let share = GpuPick::Gpus(vec![c.best_fit_gpu(0, &pods[0]).unwrap()]);
        c.apply(0, &pods[0], &share);
        let whole = GpuPick::Gpus(c.whole_gpus(0, &pods[1]));
        c.apply(0, &pods[1], &whole);
        assert_eq!(c.used_milli(), 2300);
        c.release(0, &pods[0], &share);
        assert_eq!(c.state[0].affinity, vec![(2, 1)], "the sharing tag is gone with its last pod");
        c.release(0, &pods[1], &whole);
        let st = &c.state[0];
        assert_eq!((st.cpu_left, st.mem_left, st.pods), (fresh.cpu_left, fresh.mem_left, 0));
        assert_eq!(st.gpu_left, fresh.gpu_left);
        assert!(st.affinity.is_empty());
        assert_eq!(c.used_milli(), 0);
    }
}
