//! Clusters: nodes of GPUs, written `--gpus titanxp:2` / `--gpus 4xtitanxp:2,t4:1` or a TOML file.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{read_file, Location, ModelError, Result};
use crate::gpu::{self, GpuSpec};

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
        let mut nodes = Vec::new();
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
            if reps == 0 || count == 0 || reps * count > 4096 {
                return Err(bad(format!("`{item}`: node and GPU counts must be between 1 and 4096 in all")));
            }
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
        let mut nodes = Vec::new();
        for (i, n) in f.nodes.iter().enumerate() {
            let spec = match f.gpu_models.iter().find(|g| g.key == n.model) {
                Some(g) => g.clone(),
                None => gpu::lookup(&n.model)?,
            };
            if n.gpus == 0 || n.count == 0 || n.gpus * n.count > 4096 {
                return Err(ModelError::invalid(
                    at(Some(&format!("nodes[{i}]")), None),
                    "gpus and count must be 1..=4096",
                ));
            }
            for r in 0..n.count {
                let name = match (&n.name, n.count) {
                    (Some(nm), 1) => nm.clone(),
                    (Some(nm), _) => format!("{nm}-{r}"),
                    (None, _) => format!("node{}", nodes.len()),
                };
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
    }
}
