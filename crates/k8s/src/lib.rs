//! A kube-scheduler extender that places GPU-sharing pods with dqngpu's policies, in the
//! conventions of Alibaba's gpushare and of HAMi, so their device plugins run unchanged.
//!
//! - [`wire`]: kube-scheduler's extender/v1 protocol (Go field names, case-insensitive keys).
//! - [`devices`]: gpushare's and HAMi's node, pod and annotation formats.
//! - [`state`]: nodes and GPU pods from the apiserver's list+watch, pods held as assumed.
//! - [`decide`]: filter, prioritize and the GPU choice, through any [`dqngpu_model::Policy`].
//! - [`apiserver`], [`reflector`], [`bind`]: the apiserver client, the watches, the bind.
//! - [`api`]: the HTTP routes (axum). [`standin`]: a stand-in apiserver for tests and benchmarks.
//!
//! ```
//! use std::sync::Arc;
//! use dqngpu_k8s::{decide::Engine, state::{Cluster, Profiles, StateConfig}};
//! let cluster = Arc::new(Cluster::new(StateConfig::default(), Arc::new(Profiles::default())));
//! let engine = Engine::new(cluster, Arc::from(dqngpu_policy::by_name("tetris", 0).unwrap()));
//! let pod = dqngpu_k8s::wire::PodInfo::default();
//! // A pod that asks for no shared GPU passes every node.
//! let out = engine.filter(&pod, &["n1".to_string()]).unwrap();
//! assert_eq!(out.keep, vec!["n1".to_string()]);
//! ```

pub mod api;
pub mod apiserver;
pub mod bind;
pub mod decide;
pub mod devices;
pub mod reflector;
pub mod standin;
pub mod state;
pub mod units;
pub mod wire;
