//! The dqngpu placement service: runs real jobs on shared GPUs, deciding with any
//! [`Policy`] (a heuristic or a trained agent, unchanged), keeping its state in SQLite.
//!
//! Main parts:
//! - [`store::Store`]: SQLite (WAL) with jobs, attempts, placements, profiles and events.
//! - [`exec`]: the executor; child processes from an argv (never a shell), one GPU each,
//!   supervised so a restarted service re-adopts them ([`exec::run_shim`]).
//! - [`placement::Placer`]: the placement loop (thesis Algorithm 2).
//! - [`api::app`]: the HTTP API as an axum `Router`, testable without a socket.
//! - [`serve`]: binds, serves ([`dqngpu_http::serve_router`], with a header read timeout), and
//!   shuts down gracefully on SIGTERM or Ctrl-C.
//! - [`lock`]: one service per data dir.
//!
//! ```no_run
//! # async fn demo(policy: std::sync::Arc<dyn dqngpu_model::Policy>) -> Result<(), dqngpu_service::ServiceError> {
//! use dqngpu_model::ClusterSpec;
//! use dqngpu_service::{ServiceConfig, HttpConfig, Supervisor};
//! let gpus = ClusterSpec::parse_gpus("titanxp:2")?.gpus();
//! let cfg = ServiceConfig::new("./dqngpu-data".into(), gpus, Supervisor::Direct);
//! dqngpu_service::serve(cfg, HttpConfig::default(), policy, None).await
//! # }
//! ```

pub mod api;
pub mod body;
pub mod error;
pub mod exec;
pub mod gpus;
pub mod jobs;
pub mod lock;
pub mod metrics;
pub mod placement;
pub mod profiles;
pub mod store;
pub mod validate;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};

use dqngpu_model::{AppLibrary, GpuSlot, JobId, Policy};

pub use api::{app, AppState};
pub use error::{ApiError, ServiceError};
pub use exec::Supervisor;
pub use gpus::{discover_nvml, NvmlMonitor};
pub use placement::{ClusterSnapshot, LoopMsg, Placer};

/// Where the service keeps its database and job files unless told otherwise.
pub const DEFAULT_DATA_DIR: &str = "dqngpu-data";

/// The placement policy the service runs unless told otherwise.
pub const DEFAULT_SCHEDULER: &str = "tetris";

/// What the service runs on and how it treats jobs.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Database and job files live here.
    pub data_dir: PathBuf,
    /// The GPUs of this machine, in `CUDA_VISIBLE_DEVICES` order.
    pub gpus: Vec<GpuSlot>,
    /// Libraries whose profiles are known by app name (later ones win).
    pub libraries: Vec<AppLibrary>,
    /// How jobs are started.
    pub supervisor: Supervisor,
    /// The loop also runs on this period (monitor samples, retries).
    pub tick: Duration,
    /// Failures (including OOM) a job may have before it is failed; 0 = no retry.
    pub max_retries: u32,
    /// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` for every job, when MPS is on.
    pub mps_thread_pct: Option<u8>,
    /// The oldest waiting jobs the policy sees at once.
    pub queue_window: usize,
    /// How often an adopted supervisor is checked.
    pub adopt_poll: Duration,
    /// Least time between two placement passes: a burst of submissions is placed together.
    pub min_pass_interval: Duration,
    /// Slowdown budget for every policy (a fraction, `serve --max-slowdown`): a group predicted
    /// by [`ServiceConfig::budget_model`] to slow a job on its GPU past it is not started, as
    /// in the simulator (`dqngpu_sim::budget`). `None`: no budget.
    pub max_slowdown: Option<f64>,
    /// The interference model the budget predicts with (`serve --interference`; default the
    /// contention model fitted on Lucid's pairs, as `simulate`'s default).
    pub budget_model: std::sync::Arc<dyn dqngpu_interference::Interference>,
}

impl ServiceConfig {
    /// Defaults: 1 s tick, 2 retries, no MPS, a 256-job window.
    pub fn new(data_dir: PathBuf, gpus: Vec<GpuSlot>, supervisor: Supervisor) -> Self {
        ServiceConfig {
            data_dir,
            gpus,
            libraries: Vec::new(),
            supervisor,
            tick: Duration::from_secs(1),
            max_retries: 2,
            mps_thread_pct: None,
            queue_window: 256,
            adopt_poll: Duration::from_millis(200),
            min_pass_interval: Duration::from_millis(5),
            max_slowdown: None,
            budget_model: std::sync::Arc::new(dqngpu_interference::Contention::default()),
        }
    }
}

/// How the HTTP side listens.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Address; anything but loopback needs a token.
    pub listen: SocketAddr,
    /// Bearer token.
    pub token: Option<String>,
    /// Per-request time limit; also the time a connection has to send its request headers.
    pub request_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            token: None,
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// State shared by the API and the placement loop.
pub struct Core {
    /// Configuration.
    pub cfg: ServiceConfig,
    /// The database.
    pub store: store::Store,
    /// Profiles by app name.
    pub profiles: profiles::ProfileBook,
    /// Counters.
    pub metrics: metrics::Metrics,
    /// What runs where, as the loop last published it.
    pub snapshot: RwLock<ClusterSnapshot>,
    /// Wakes the loop (submissions); wake-ups coalesce.
    pub wake: Notify,
    /// Messages to the loop (cancels, completions).
    pub tx: mpsc::UnboundedSender<LoopMsg>,
    /// When this process started, Unix seconds (the cluster clock's origin).
    pub started_unix: f64,
}

impl Core {
    /// The job's working directory (its attempts share it).
    pub fn work_dir(&self, job: JobId) -> PathBuf {
        self.cfg.data_dir.join("jobs").join(job.to_string()).join("work")
    }

    /// An attempt's directory (logs, claim and exit files).
    pub fn attempt_dir(&self, job: JobId, n: u32) -> PathBuf {
        placement::attempt_dir(&self.cfg.data_dir, job, n)
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A started service: the shared core and the placement loop task. Dropping it stops the
/// loop (as [`Service::stop`] does, without waiting); keep it alive while serving.
pub struct Service {
    core: Arc<Core>,
    stop: watch::Sender<bool>,
    /// Answered when the placement loop's thread has ended.
    placer: tokio::sync::oneshot::Receiver<()>,
}

impl Service {
    /// Locks the data dir ([`lock`]: one service per dir, else [`ServiceError::DataDirInUse`]),
    /// opens the store, recovers attempts left by a crash and starts the placement loop.
    /// The placement loop holds the lock: [`Service::stop`] releases it, and so does dropping
    /// the service, once the loop has seen it. Must run inside a tokio runtime.
    pub fn start(
        cfg: ServiceConfig,
        policy: Arc<dyn Policy>,
        monitor: Option<NvmlMonitor>,
    ) -> Result<Self, ServiceError> {
        if cfg.gpus.is_empty() {
            return Err(ServiceError::Config("no GPUs: declare virtual ones with --gpus, e.g. titanxp:2".into()));
        }
        let mut cfg = cfg;
        if cfg.data_dir.exists() && !cfg.data_dir.is_dir() {
            return Err(ServiceError::Config(format!(
                "--data-dir {} is a file; the service keeps its state in a directory",
                cfg.data_dir.display()
            )));
        }
        std::fs::create_dir_all(&cfg.data_dir).map_err(|e| ServiceError::io(&cfg.data_dir, e))?;
        // Jobs run in their own directories: every path handed to them must be absolute.
        cfg.data_dir = cfg.data_dir.canonicalize().map_err(|e| ServiceError::io(&cfg.data_dir, e))?;
        // Before the database: a second server must not touch it (or adopt the first's jobs).
        let lock = lock::DataDirLock::acquire(&cfg.data_dir)?;
        let store = store::Store::open(&cfg.data_dir.join("dqngpu.sqlite"))?;
        let profiles = profiles::ProfileBook::new(&cfg.libraries, store.profiles()?);
        let (tx, rx) = mpsc::unbounded_channel();
        let core = Arc::new(Core {
            cfg,
            store,
            profiles,
            metrics: metrics::Metrics::default(),
            snapshot: RwLock::new(ClusterSnapshot::default()),
            wake: Notify::new(),
            tx,
            started_unix: unix_now(),
        });
        let placer = Placer::new(core.clone(), policy, rx, monitor)?;
        let (stop, stop_rx) = watch::channel(false);
        // The loop owns the lock: the dir is free once no loop can place or adopt jobs in it.
        // It runs on a thread of its own (driven by the runtime's handle; the tasks it spawns
        // run on the runtime): its store calls and file reads block that thread only, never
        // a worker that serves the API (a blocked loop held up `/healthz` too).
        let handle = tokio::runtime::Handle::current();
        let (done, placer_done) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("dqngpu-placer".into())
            .spawn(move || {
                handle.block_on(placer.run(stop_rx));
                // Released before `stop` hears the loop ended: a server started after it finds
                // the dir free.
                drop(lock);
                let _ = done.send(());
            })
            .map_err(|e| ServiceError::Config(format!("cannot start the placement loop's thread: {e}")))?;
        core.wake.notify_one();
        Ok(Service { core, stop, placer: placer_done })
    }

    /// The shared core.
    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// The HTTP router for this service.
    pub fn router(&self, http: &HttpConfig) -> axum::Router {
        app(AppState {
            core: self.core.clone(),
            token: http.token.as_deref().map(Arc::from),
            request_timeout: http.request_timeout,
        })
    }

    /// Stops the placement loop. Running jobs keep running; a restart re-adopts them.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.placer.await;
    }
}

/// Refuses a non-loopback address without a token.
pub fn check_listen(http: &HttpConfig) -> Result<(), ServiceError> {
    if !http.listen.ip().is_loopback() && http.token.as_deref().is_none_or(str::is_empty) {
        return Err(ServiceError::Config(format!(
            "listening on {} (not loopback) needs a bearer token: pass --token-file",
            http.listen
        )));
    }
    Ok(())
}

/// Runs the service on `http.listen` until SIGTERM or Ctrl-C.
pub async fn serve(
    cfg: ServiceConfig,
    http: HttpConfig,
    policy: Arc<dyn Policy>,
    monitor: Option<NvmlMonitor>,
) -> Result<(), ServiceError> {
    check_listen(&http)?;
    raise_descriptor_limit();
    let listener =
        tokio::net::TcpListener::bind(http.listen).await.map_err(|e| ServiceError::io(http.listen.to_string(), e))?;
    let service = Service::start(cfg, policy, monitor)?;
    tracing::info!(addr = %http.listen, "dqngpu service listening");
    let router = service.router(&http);
    // Headers get the same limit as the whole request: a client stalled in its headers is
    // cut off like one stalled in its body.
    dqngpu_http::serve_router(listener, router, http.request_timeout, shutdown_signal()).await;
    service.stop().await;
    Ok(())
}

/// Raises the soft limit on open files (`RLIMIT_NOFILE`) to the hard limit, as far as the
/// kernel allows: connections and jobs' launches share it (the HTTP server serves up to half
/// of it at once, [`dqngpu_http::connection_cap`]). On failure the limit stays as it was.
pub fn raise_descriptor_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let old = getrlimit(Resource::Nofile);
    if old.current == old.maximum {
        return;
    }
    let new = Rlimit { current: old.maximum, maximum: old.maximum };
    match setrlimit(Resource::Nofile, new) {
        Ok(()) => tracing::info!(from = ?old.current, to = ?old.maximum, "raised the open-file limit (RLIMIT_NOFILE)"),
        Err(e) => {
            tracing::warn!(error = %e, limit = ?old.current, "could not raise the open-file limit (RLIMIT_NOFILE)")
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
