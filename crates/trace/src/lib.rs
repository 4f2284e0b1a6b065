//! Replays Alibaba's GPU-sharing trace (cluster-trace-gpu-v2023, the "openb" lists) the way the
//! FGD paper (Weng et al., "Beware of Fragmentation", USENIX ATC'23) evaluates placement, and
//! reproduces its policies: `random`, `dotprod`, `gpuclustering`, `gpupacking`, `bestfit`, `fgd`.
//!
//! - [`reader`]: the CSVs, with errors naming file, line and field.
//! - [`replay()`]: the experiment's procedure (shuffle, inflate to 130% of GPU capacity, place one
//!   pod at a time) and its 131-point allocation and fragmentation curves ([`curves`]).
//! - [`policies`]: the node-level [`NodePolicy`] trait and the six policies, one file each.
//! - [`frag`]: typical pods and node fragmentation.
//! - [`experiment`]: policies x seeds x pod lists in parallel, beside the published numbers (the FGD artifact's per-seed results).
//! - [`timed`]: the time-aware replay: arrivals and departures in time order, a queue,
//!   queueing delay and allocation over time.
//! - [`learn`]: trains the learned `dqngpu` scorer ([`policies::Learned`]).
//!
//! No async runtime, database or neural-network dependency.
//!
//! ```
//! use dqngpu_trace::{policies, reader, replay, ReplayConfig};
//! let nodes = reader::parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\n", "nodes.csv")?;
//! let pods = reader::parse_pods(
//!     "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,4000,8192,1,500\np1,4000,8192,1,1000\n",
//!     "pods.csv",
//! )?;
//! let fgd = policies::by_name("fgd")?;
//! let r = replay(&nodes, &pods, fgd.as_ref(), &ReplayConfig { tune: 1.3, seed: 42 })?;
//! assert_eq!(r.allocation_pct.len(), 131);
//! assert!(r.pods_placed > 0);
//! # Ok::<(), dqngpu_trace::TraceError>(())
//! ```

pub mod cluster;
pub mod curves;
pub mod error;
pub mod experiment;
pub mod frag;
pub mod learn;
pub mod plots;
pub mod policies;
pub mod reader;
pub mod replay;
pub mod timed;

pub use error::TraceError;
pub use policies::NodePolicy;
pub use replay::{replay, ReplayConfig, ReplayResult};
pub use timed::{replay_timed, TimedConfig, TimedResult};
