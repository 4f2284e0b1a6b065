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
//! let engine = Engine::new(cluster, Arc::from(dqngpu_policy::by_name("greedy", 0).unwrap()));
//! let pod = dqngpu_k8s::wire::PodInfo::default();
//! // A pod that asks for no shared GPU passes every node.
//! let out = engine.filter(&pod, &["n1".to_string()]);
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

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves the extender on `listen` until `shutdown` completes (graceful: requests in flight
/// finish).
pub async fn serve(
    state: api::AppState,
    http: &api::HttpConfig,
    listen: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(addr = %listener.local_addr()?, prefix = %api::normalise_prefix(&http.prefix), "extender listening");
    // Request headers time out as the whole request does: a client that stalls in them
    // would otherwise hold its connection for ever.
    dqngpu_http::serve_router(listener, api::app(state, http), http.request_timeout, shutdown).await;
    Ok(())
}

/// Builds the engine and binder for `client`, starts the reflectors and returns the state
/// the HTTP layer serves.
pub fn start(
    client: apiserver::ApiClient,
    cfg: state::StateConfig,
    profiles: state::Profiles,
    policy: Arc<dyn dqngpu_model::Policy>,
) -> api::AppState {
    let cluster = Arc::new(state::Cluster::new(cfg, Arc::new(profiles)));
    let engine = Arc::new(decide::Engine::new(cluster, policy));
    let client = Arc::new(client);
    reflector::spawn(client.clone(), engine.clone());
    api::AppState { binder: Some(Arc::new(bind::Binder::new(engine.clone(), client))), engine }
}
