//! Clusters: nodes of GPUs, written `--gpus titanxp:2` / `--gpus 4xtitanxp:2,t4:1` or a TOML file.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{read_file, Location, ModelError, Result};
use crate::gpu::{self, GpuSpec};

/// The most GPUs a cluster may have, in all: a simulated cluster past it is a typo, and its
/// per-GPU state would be allocated before any job runs.
pub const MAX_GPUS: usize = 4096;

/// The most memory a custom GPU model may declare, MiB (about 10 TiB; the largest catalogue GPU
/// has 143,771).
pub const MAX_CUSTOM_MEMORY_MIB: f64 = 1e7;

/// The most host-link bandwidth a custom GPU model may declare, GB/s.
pub const MAX_CUSTOM_PCIE_GBPS: f64 = 1e4;

/// The most CUDA cores a custom GPU model may declare.
pub const MAX_CUSTOM_CORES: u32 = 1_000_000;

/// `per` GPUs on each of `nodes` nodes, added to `so_far` GPUs: the new total, or `None` when
/// either count is 0 or the total passes [`MAX_GPUS`] (checked, so no product wraps round).
fn add_gpus(so_far: usize, nodes: usize, per: usize) -> Option<usize> {
    let total = so_far.checked_add(nodes.checked_mul(per)?)?;
    (nodes > 0 && per > 0 && total <= MAX_GPUS).then_some(total)
}

/// Checks a custom model of a cluster file: a key, a name, numbers a GPU could have.
fn check_model(g: &GpuSpec) -> std::result::Result<(), String> {
    if g.key.trim().is_empty() || g.name.trim().is_empty() {
        return Err("`key` and `name` must not be empty".into());
    }
    if !(g.memory_mib.is_finite() && g.memory_mib > 0.0 && g.memory_mib <= MAX_CUSTOM_MEMORY_MIB) {
        return Err(format!(
            "memory_mib must be a number above 0 and at most {MAX_CUSTOM_MEMORY_MIB:e}, got {}",
            g.memory_mib
        ));
    }
    if !(g.pcie_gbps.is_finite() && g.pcie_gbps > 0.0 && g.pcie_gbps <= MAX_CUSTOM_PCIE_GBPS) {
        return Err(format!(
            "pcie_gbps must be a number above 0 and at most {MAX_CUSTOM_PCIE_GBPS}, got {}",
            g.pcie_gbps
        ));
    }
    if !(1..=MAX_CUSTOM_CORES).contains(&g.cores) {
        return Err(format!("cores must be 1 to {MAX_CUSTOM_CORES}, got {}", g.cores));
    }
    Ok(())
}

/// One node and its GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Its GPUs, in index order.
    pub gpus: Vec<GpuSpec>,
}

/// A cluster of nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// The nodes.
    pub nodes: Vec<NodeSpec>,
}

/// One GPU of a cluster, flattened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSlot {
    /// Node name.
    pub node: String,
    /// Index of the GPU within its node (what `CUDA_VISIBLE_DEVICES` names).
    pub index: u32,
    /// The model.
    pub spec: GpuSpec,
}

impl ClusterSpec {
    /// One node with `n` GPUs of one model.
    pub fn single_node(spec: GpuSpec, n: usize) -> Self {
        ClusterSpec { nodes: vec![NodeSpec { name: "node0".into(), gpus: vec![spec; n] }] }
    }

    /// Parses `[Nx]MODEL[:GPUS][,...]`: each item is N nodes (default 1) of GPUS GPUs (default 1).
    pub fn parse_gpus(spec: &str) -> Result<Self> {
        let bad =
            |msg: String| ModelError::invalid(Location { field: Some("--gpus".into()), ..Default::default() }, msg);
        let (mut nodes, mut total) = (Vec::new(), 0);
        for item in spec.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(bad(format!("empty item in `{spec}`; expected e.g. titanxp:2 or 4xtitanxp:2")));
            }
            let (reps, rest) = match item.split_once('x') {
                Some((n, rest)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
                    (n.parse::<usize>().map_err(|_| bad(format!("bad node count in `{item}`")))?, rest)
                }
                _ => (1, item),
            };
            let (model, count) = match rest.split_once(':') {
                Some((m, c)) => {
                    (m, c.parse::<usize>().map_err(|_| bad(format!("`{c}` is not a GPU count in `{item}`")))?)
                }
                None => (rest, 1),
            };
            total = add_gpus(total, reps, count).ok_or_else(|| {
                bad(format!("`{item}`: node and GPU counts must be at least 1, and {MAX_GPUS} GPUs at most in all"))
            })?;
            let g = gpu::lookup(model)?;
            for _ in 0..reps {
                nodes.push(NodeSpec { name: format!("node{}", nodes.len()), gpus: vec![g.clone(); count] });
            }
        }
        Ok(ClusterSpec { nodes })
    }

    /// Reads a cluster TOML file:
    /// ```toml
    /// [[gpu_models]]            # optional custom models
    /// key = "mygpu"
    /// name = "My GPU"
    /// architecture = "Ampere"
    /// memory_mib = 20000
    /// cores = 5000
    /// pcie_gbps = 32
    ///
    /// [[nodes]]
    /// name = "a"                # optional
    /// model = "titanxp"
    /// gpus = 2                  # default 1
    /// count = 4                 # nodes like this one, default 1
    /// ```
    pub fn from_toml(text: &str, path: Option<&Path>) -> Result<Self> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            gpu_models: Vec<GpuSpec>,
            nodes: Vec<NodeEntry>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct NodeEntry {
            name: Option<String>,
            model: String,
            #[serde(default = "one")]
            gpus: usize,
            #[serde(default = "one")]
            count: usize,
        }
        fn one() -> usize {
            1
        }
        let at = |field: Option<&str>, line: Option<u64>| Location {
            path: path.map(Path::to_path_buf),
            line,
            field: field.map(str::to_string),
        };
        let f: File = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1) as u64);
            ModelError::invalid(at(None, line), format!("invalid cluster file: {}", e.message()))
        })?;
        for (i, g) in f.gpu_models.iter().enumerate() {
            check_model(g).map_err(|m| ModelError::invalid(at(Some(&format!("gpu_models[{i}]")), None), m))?;
            // A custom key that a catalogue model or an earlier entry has would be ambiguous.
            if gpu::lookup(&g.key).is_ok() || f.gpu_models[..i].iter().any(|e| e.key == g.key) {
                return Err(ModelError::invalid(
                    at(Some(&format!("gpu_models[{i}].key")), None),
                    format!("`{}` is already a GPU model (built in, or defined above); choose another key", g.key),
                ));
            }
        }
        let (mut nodes, mut total, mut names) = (Vec::new(), 0, std::collections::HashSet::new());
        for (i, n) in f.nodes.iter().enumerate() {
            let spec = match f.gpu_models.iter().find(|g| g.key == n.model) {
                Some(g) => g.clone(),
                None => gpu::lookup(&n.model).map_err(|e| e.at(at(Some(&format!("nodes[{i}].model")), None)))?,
            };
            total = add_gpus(total, n.count, n.gpus).ok_or_else(|| {
                ModelError::invalid(
                    at(Some(&format!("nodes[{i}]")), None),
                    format!("gpus and count must be at least 1, and the cluster {MAX_GPUS} GPUs at most in all"),
                )
            })?;
            for r in 0..n.count {
                let name = match (&n.name, n.count) {
                    (Some(nm), 1) => nm.clone(),
                    (Some(nm), _) => format!("{nm}-{r}"),
                    (None, _) => format!("node{}", nodes.len()),
                };
                if !names.insert(name.clone()) {
                    return Err(ModelError::invalid(
                        at(Some(&format!("nodes[{i}].name")), None),
                        format!("two nodes are named `{name}`; node names must differ"),
                    ));
                }
                nodes.push(NodeSpec { name, gpus: vec![spec.clone(); n.gpus] });
            }
        }
        if nodes.is_empty() {
            return Err(ModelError::invalid(at(Some("nodes"), None), "cluster has no nodes"));
        }
        Ok(ClusterSpec { nodes })
    }

    /// Reads a cluster TOML file from disk.
    pub fn read(path: &Path) -> Result<Self> {
        Self::from_toml(&read_file(path)?, Some(path))
    }

    /// All GPUs, node by node.
    pub fn gpus(&self) -> Vec<GpuSlot> {
        self.nodes
            .iter()
            .flat_map(|n| {
                n.gpus.iter().enumerate().map(|(i, g)| GpuSlot {
                    node: n.name.clone(),
                    index: i as u32,
                    spec: g.clone(),
                })
            })
            .collect()
    }

    /// Memory of the largest GPU, MiB.
    pub fn max_gpu_memory_mib(&self) -> f64 {
        self.nodes.iter().flat_map(|n| n.gpus.iter()).map(|g| g.memory_mib).fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_gpu_specs() {
        let c = ClusterSpec::parse_gpus("4xtitanxp:2").unwrap();
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.gpus().len(), 8);
        let c = ClusterSpec::parse_gpus("titanxp,t4:3").unwrap();
        assert_eq!(c.gpus().len(), 4);
        assert_eq!(c.gpus()[3].spec.key, "t4");
        assert!(ClusterSpec::parse_gpus("nosuch:1").unwrap_err().is_usage());
        assert!(ClusterSpec::parse_gpus("titanxp:0").is_err());
        assert!(ClusterSpec::parse_gpus("titanxp:abc").is_err());
    }

    #[test]
    fn parse_toml_cluster() {
        let text = "[[gpu_models]]\nkey='g'\nname='G'\narchitecture='X'\nmemory_mib=1000\ncores=10\npcie_gbps=1\n\n[[nodes]]\nmodel='g'\ngpus=2\ncount=3\n[[nodes]]\nname='big'\nmodel='h100'\n";
        let c = ClusterSpec::from_toml(text, None).unwrap();
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.gpus().len(), 7);
        assert_eq!(c.max_gpu_memory_mib(), 81920.0);
        let e = ClusterSpec::from_toml("[[nodes]]\nmodel='titanxp'\nbogus=1\n", Some(Path::new("c.toml"))).unwrap_err();
        assert!(e.to_string().contains("c.toml"), "{e}");
        // An unknown model is named with its file and field, and stays a usage error.
        let e = ClusterSpec::from_toml("[[nodes]]\nmodel='titanxpp'\n", Some(Path::new("c.toml"))).unwrap_err();
        assert!(e.is_usage(), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("c.toml, field `nodes[0].model`") && e.contains("titanxpp") && e.contains("titanxp,"),
            "{e}"
        );
    }

    #[test]
    fn counts_past_the_cap_are_refused_without_wrapping() {
        // 2^32 x 2^32 wraps to 0 in a usize product: it must be refused, not allocated.
        let wraps = "[[nodes]]\nmodel='titanxp'\ngpus=4294967296\ncount=4294967296\n";
        let e = ClusterSpec::from_toml(wraps, Some(Path::new("c.toml"))).unwrap_err().to_string();
        assert!(e.contains("c.toml") && e.contains("nodes[0]") && e.contains("4096"), "{e}");
        assert!(ClusterSpec::parse_gpus("4294967296xtitanxp:4294967296").is_err());
        // The cap is on the whole cluster, not each entry.
        let two = "[[nodes]]\nmodel='titanxp'\ngpus=4096\n[[nodes]]\nmodel='titanxp'\n";
        let e = ClusterSpec::from_toml(two, None).unwrap_err().to_string();
        assert!(e.contains("nodes[1]"), "{e}");
        assert!(ClusterSpec::parse_gpus("4096xtitanxp:1,titanxp").is_err());
        assert_eq!(ClusterSpec::parse_gpus("4095xtitanxp:1,titanxp").unwrap().gpus().len(), MAX_GPUS);
    }

    #[test]
    fn custom_models_must_be_possible_and_new() {
        let model = |fields: &str| {
            format!("[[gpu_models]]\nkey='g'\nname='G'\narchitecture='X'\n{fields}\n[[nodes]]\nmodel='g'\n")
        };
        let ok = "memory_mib=1000\ncores=10\npcie_gbps=1";
        assert!(ClusterSpec::from_toml(&model(ok), None).is_ok());
        for (bad, says) in [
            ("memory_mib=nan\ncores=10\npcie_gbps=1", "memory_mib"),
            ("memory_mib=-5000\ncores=10\npcie_gbps=1", "memory_mib"),
            ("memory_mib=0\ncores=10\npcie_gbps=1", "memory_mib"),
            ("memory_mib=inf\ncores=10\npcie_gbps=1", "memory_mib"),
            ("memory_mib=1000\ncores=10\npcie_gbps=inf", "pcie_gbps"),
            ("memory_mib=1000\ncores=10\npcie_gbps=nan", "pcie_gbps"),
            ("memory_mib=1000\ncores=0\npcie_gbps=1", "cores"),
        ] {
            let e = ClusterSpec::from_toml(&model(bad), Some(Path::new("c.toml"))).unwrap_err().to_string();
            assert!(e.contains("c.toml") && e.contains("gpu_models[0]") && e.contains(says), "{bad}: {e}");
        }
        // A key that a built-in model has, or one defined twice, is ambiguous.
        let shadow = model(ok).replace("key='g'", "key='titanxp'").replace("model='g'", "model='titanxp'");
        assert!(ClusterSpec::from_toml(&shadow, None).unwrap_err().to_string().contains("gpu_models[0].key"));
        let twice = format!("[[gpu_models]]\nkey='g'\nname='G2'\narchitecture='X'\n{ok}\n{}", model(ok));
        assert!(ClusterSpec::from_toml(&twice, None).unwrap_err().to_string().contains("gpu_models[1].key"));
    }

    #[test]
    fn two_nodes_may_not_share_a_name() {
        let text = "[[nodes]]\nname='a'\nmodel='titanxp'\n[[nodes]]\nname='a'\nmodel='t4'\n";
        let e = ClusterSpec::from_toml(text, None).unwrap_err().to_string();
        assert!(e.contains("nodes[1].name") && e.contains("`a`"), "{e}");
        // Names made from a name and a count do not clash with each other.
        let counted = "[[nodes]]\nname='a'\nmodel='titanxp'\ncount=2\n";
        let c = ClusterSpec::from_toml(counted, None).unwrap();
        assert_eq!(c.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["a-0", "a-1"]);
    }
}
