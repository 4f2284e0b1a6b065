//! The data model of dqngpu: the four GPU resources, applications' usage profiles (thesis
//! Table 2), GPU/node/cluster specs, jobs and workload classes, app libraries, the cluster
//! view and the [`Policy`] trait that the simulator and the service share.
//!
//! No async runtime, database or network here: everything builds fast and runs anywhere.
//!
//! ```
//! use dqngpu_model::{ClusterSpec, Resources, AppInfo, AppProfile};
//! let cluster = ClusterSpec::parse_gpus("2xtitanxp:2").unwrap();
//! assert_eq!(cluster.gpus().len(), 4);
//! let app = AppInfo { name: "demo".into(), ..Default::default() };
//! let p = AppProfile::new(app, 1.0, vec![Resources::new(50.0, 1024.0, 40.0, 100.0); 60]).unwrap();
//! assert_eq!(p.solo_s(), 60.0);
//! ```

pub mod cluster;
pub mod error;
pub mod format;
pub mod gpu;
pub mod job;
pub mod library;
pub mod policy;
pub mod profile;
pub mod resources;
#[doc(hidden)]
pub mod testing;

pub use cluster::{ClusterSpec, GpuSlot, NodeSpec};
pub use error::{Location, ModelError, Result};
pub use gpu::GpuSpec;
pub use job::{JobId, JobSet, JobSpec, WorkloadClass};
pub use library::AppLibrary;
pub use policy::{
    fits_alone, liveness_start, validate_decision, Admission, ClusterView, DecisionError, GpuState, Placement, Policy,
    QueuedJob, RunningJob,
};
pub use profile::{AppInfo, AppKind, AppProfile, Derived, ProfileSummary, ProfileTotals, RecordedOn};
pub use resources::{Resource, Resources};
