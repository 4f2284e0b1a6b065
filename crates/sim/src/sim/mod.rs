//! The discrete-time co-location simulator and its stepping API.
//!
//! ```text
//! let mut sim = Simulator::new(&cluster, &library, &jobset, interference, SimConfig::default())?;
//! while !sim.done() {
//!     if sim.needs_decision() {
//!         let d = policy.decide(&sim.view());
//!         sim.apply(&d)?;
//!     }
//!     sim.step();
//! }
//! let result = sim.finish();
//! ```
//!
//! Hot-loop design: the per-GPU [`GpuState`]s the policy sees are the simulator's own state
//! (no copy per decision); per step, each running job costs one sample lookup, one
//! interference call per GPU and a few float operations, with no allocation.
//!
//! Here: the simulator's state, its constructors and its stepping API. Its parts, each an
//! `impl Simulator` of its own: `config` (the settings), `apply` (taking a decision),
//! `stepping` (one step of the clock), `memory` (OOM kills and the memory log), `finish` (the
//! metrics).

mod apply;
mod config;
mod finish;
mod memory;
mod stepping;

use std::collections::HashMap;
use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{
    AppLibrary, AppProfile, ClusterSpec, ClusterView, GpuState, JobId, JobSet, Location, ModelError, QueuedJob,
};

pub use config::{skipped_samples, SimConfig, TickTrigger, KEEP_CHECK_STEPS, MIN_STEP_S};

use crate::error::SimError;
use crate::event::SimEvent;
use crate::metrics::{SimResult, UsageTrace};
use config::check_config;

/// Everything the simulator tracks about one job, whatever its state.
#[derive(Debug, Clone)]
struct JobState {
    id: JobId,
    app: String,
    profile: Arc<AppProfile>,
    submit_s: f64,
    first_start_s: Option<f64>,
    last_start_s: Option<f64>,
    finish_s: Option<f64>,
    gpu: Option<usize>,
    restarts: u32,
    avoid_apps: Vec<String>,
    /// Sample in force at its current progress (valid while it runs).
    sample: usize,
    /// Its memory demand grew in the last step (an OOM kill candidate).
    grew: bool,
}

/// Which running jobs an OOM check may kill first.
#[derive(Debug, Clone, Copy)]
enum Culprits {
    /// Jobs at positions >= this one (just placed).
    PlacedFrom(usize),
    /// Jobs whose memory demand grew in this step.
    Grew,
}

/// Per-GPU bookkeeping beside the policy-visible [`GpuState`].
#[derive(Debug, Clone, Default)]
struct GpuBook {
    /// Job-table index of each running job, aligned with `GpuState::running`.
    slots: Vec<usize>,
    /// Progress rate of each running job in the current step, aligned likewise.
    rates: Vec<f64>,
    /// Time each running job needs to finish at its rate, computed in pass 1 of a step.
    t_finish: Vec<f64>,
    /// Integral of min(100, sum util x rate) over time, pct x s.
    util_integral: f64,
    /// Integral of 100 x memory in use / capacity over time, pct x s.
    mem_integral: f64,
    /// Memory in use at the last `Memory` event, MiB.
    logged_mem: f64,
    /// The set of jobs changed since the last `Memory` event.
    mem_dirty: bool,
    /// `rates` hold the model's answer for the current jobs and demands. The model is a pure
    /// function of them, so while they stay the same the rates are reused (same results).
    rates_valid: bool,
    /// (job-table index, restarts) of a job that, alone here, the model answers exactly 1.0
    /// for at every demand left in its profile ([`Interference::alone_at_full_speed`] over its
    /// suffix peak): while it runs alone its rate is 1.0 without asking the model again.
    alone_at_full_speed: Option<(usize, u32)>,
}

/// A fault a step recorded, returned by the next `apply`.
#[derive(Debug)]
struct Fault(SimError);

impl Clone for Fault {
    fn clone(&self) -> Self {
        Fault(match &self.0 {
            SimError::TooManyRestarts { policy, job, restarts, limit } => {
                SimError::TooManyRestarts { policy: policy.clone(), job: *job, restarts: *restarts, limit: *limit }
            }
            // Never stored; a clone keeps the message.
            other => SimError::Config(other.to_string()),
        })
    }
}

/// A discrete-time simulation of jobs sharing GPUs. See the module docs for the loop. A clone
/// is an independent copy from the same moment (the scorer's look-ahead teacher plays futures
/// out on clones).
#[derive(Clone)]
pub struct Simulator {
    config: SimConfig,
    interference: Arc<dyn Interference>,
    policy_name: String,
    now_s: f64,
    gpus: Vec<GpuState>,
    books: Vec<GpuBook>,
    queue: Vec<QueuedJob>,
    jobs: Vec<JobState>,
    index_of: HashMap<JobId, usize>,
    /// Job-table indices by submission time (stable on ties).
    arrival_order: Vec<usize>,
    next_arrival: usize,
    decision_pending: bool,
    /// A running job's demand dropped in some resource since the last decision.
    capacity_freed: bool,
    next_tick_s: f64,
    finished: usize,
    oom_kills: u64,
    steps: u64,
    job_steps: u64,
    decisions: u64,
    liveness_starts: u64,
    budget_refusals: u64,
    unfit_drops: u64,
    /// Only ever `SimError::TooManyRestarts` (so a clone can copy it field by field).
    fault: Option<Fault>,
    events: Vec<SimEvent>,
    usage: Option<UsageTrace>,
}

impl Simulator {
    /// Sets up a simulation of `jobset` on `cluster`, apps from `library`.
    ///
    /// Errors: an unknown app (usage error listing the library's apps), a profile whose
    /// peak memory exceeds every GPU (naming the profile's file, line and field), an empty
    /// cluster, or a bad configuration.
    pub fn new(
        cluster: &ClusterSpec,
        library: &AppLibrary,
        jobset: &JobSet,
        interference: Arc<dyn Interference>,
        config: SimConfig,
    ) -> Result<Self, SimError> {
        check_config(&config)?;
        let slots = cluster.gpus();
        if slots.is_empty() {
            return Err(ModelError::invalid(
                Location { field: Some("nodes".into()), ..Default::default() },
                "cluster has no GPUs",
            )
            .into());
        }
        jobset.validate(None)?;
        let (jobs, index_of) = job_table(jobset, library, cluster.max_gpu_memory_mib())?;
        let mut arrival_order: Vec<usize> = (0..jobs.len()).collect();
        arrival_order.sort_by(|&a, &b| jobs[a].submit_s.total_cmp(&jobs[b].submit_s));
        let gpus: Vec<GpuState> = slots
            .into_iter()
            .map(|s| GpuState { node: s.node, index: s.index, spec: s.spec, running: Vec::new(), measured: None })
            .collect();
        let mut sim = Simulator::blank(config, interference, gpus, jobs, index_of);
        sim.arrival_order = arrival_order;
        sim.admit_arrivals();
        Ok(sim)
    }

    /// A simulator at t = 0 over `gpus` and the job table `jobs`, nothing queued, arrived or
    /// counted yet; the constructors set the rest.
    fn blank(
        config: SimConfig,
        interference: Arc<dyn Interference>,
        gpus: Vec<GpuState>,
        jobs: Vec<JobState>,
        index_of: HashMap<JobId, usize>,
    ) -> Self {
        Simulator {
            next_tick_s: config.decision_tick_s,
            interference,
            policy_name: "policy".into(),
            now_s: 0.0,
            books: vec![GpuBook::default(); gpus.len()],
            gpus,
            queue: Vec::new(),
            jobs,
            index_of,
            arrival_order: Vec::new(),
            next_arrival: 0,
            decision_pending: false,
            capacity_freed: false,
            finished: 0,
            oom_kills: 0,
            steps: 0,
            job_steps: 0,
            decisions: 0,
            liveness_starts: 0,
            budget_refusals: 0,
            unfit_drops: 0,
            fault: None,
            events: Vec::new(),
            usage: config.record_usage.then(UsageTrace::default),
            config,
        }
    }

    /// A simulation from a live cluster's moment: `view`'s running jobs keep their GPUs,
    /// progress and start times, its waiting jobs are queued (in its order), and nothing else
    /// will arrive. A planning policy plays its candidate futures out on it (`dqngpu-plan`),
    /// knowing no more than the view shows. The view has no submit time for a running job, so
    /// the result counts its JCT from its start on its GPU (a constant per job, the same in
    /// every future played out from this view).
    ///
    /// Errors: a bad configuration, an empty cluster, a job listed twice.
    pub fn from_view(
        view: &ClusterView<'_>,
        interference: Arc<dyn Interference>,
        config: SimConfig,
    ) -> Result<Self, SimError> {
        check_config(&config)?;
        if view.gpus.is_empty() {
            return Err(SimError::Config("the view has no GPUs".into()));
        }
        let mut jobs = Vec::with_capacity(view.queue.len() + view.gpus.iter().map(|g| g.running.len()).sum::<usize>());
        let mut books = vec![GpuBook::default(); view.gpus.len()];
        for (g, gpu) in view.gpus.iter().enumerate() {
            for rj in &gpu.running {
                books[g].slots.push(jobs.len());
                books[g].rates.push(1.0);
                jobs.push(JobState {
                    id: rj.id,
                    app: rj.profile.app.name.clone(),
                    profile: rj.profile.clone(),
                    submit_s: rj.started_s,
                    first_start_s: Some(rj.started_s),
                    last_start_s: Some(rj.started_s),
                    finish_s: None,
                    gpu: Some(g),
                    restarts: 0,
                    avoid_apps: Vec::new(),
                    sample: rj.profile.sample_index(rj.progress_s),
                    grew: false,
                });
            }
        }
        let first_queued = jobs.len();
        for q in view.queue {
            jobs.push(JobState {
                id: q.id,
                app: q.app.clone(),
                profile: q.profile.clone(),
                submit_s: q.submit_s,
                first_start_s: None,
                last_start_s: None,
                finish_s: None,
                gpu: None,
                restarts: q.restarts,
                avoid_apps: q.avoid_apps.clone(),
                sample: 0,
                grew: false,
            });
        }
        let index_of: HashMap<JobId, usize> = jobs.iter().enumerate().map(|(k, j)| (j.id, k)).collect();
        if index_of.len() != jobs.len() {
            return Err(SimError::Config("the view lists a job twice".into()));
        }
        let mut sim = Simulator::blank(config, interference, view.gpus.to_vec(), jobs, index_of);
        sim.books = books;
        sim.now_s = view.now_s;
        sim.next_tick_s = view.now_s + sim.config.decision_tick_s;
        // Every waiting job has arrived; the queue keeps the view's order.
        sim.arrival_order = (first_queued..sim.jobs.len()).collect();
        sim.next_arrival = sim.arrival_order.len();
        sim.queue = view.queue.to_vec();
        sim.decision_pending = !sim.queue.is_empty();
        Ok(sim)
    }

    /// Plays this simulation out to the end with `policy` deciding, and finishes it. The
    /// policy is asked at this simulator's own trigger, not at the one it would want under
    /// [`run`]: a search's future is played at the cadence of whoever will carry it out (a
    /// plan that follows a rule's future is asked at its own ticks; 26th session, docs/RL.md).
    ///
    /// Errors: as [`Simulator::apply`].
    pub fn play_out(mut self, policy: &dyn dqngpu_model::Policy) -> Result<SimResult, SimError> {
        while !self.done() {
            if self.needs_decision() {
                let d = policy.decide(&self.view());
                self.apply(&d)?;
            }
            self.step();
        }
        Ok(self.finish())
    }

    /// [`Simulator::play_out`], abandoned as soon as `keep` says no: `keep` is asked at every
    /// decision of the run and every [`KEEP_CHECK_STEPS`] steps between. `Ok(None)`: abandoned.
    /// A search that needs only the cheapest of several futures abandons those whose
    /// [`Simulator::cost_floor`] already passes the cheapest seen.
    ///
    /// Errors: as [`Simulator::apply`].
    pub fn play_out_while(
        mut self,
        policy: &dyn dqngpu_model::Policy,
        mut keep: impl FnMut(&Simulator) -> bool,
    ) -> Result<Option<SimResult>, SimError> {
        let mut since_check = 0;
        while !self.done() {
            let deciding = self.needs_decision();
            if deciding || since_check >= KEEP_CHECK_STEPS {
                since_check = 0;
                if !keep(&self) {
                    return Ok(None);
                }
            }
            if deciding {
                let d = policy.decide(&self.view());
                self.apply(&d)?;
            }
            self.step();
            since_check += 1;
        }
        Ok(Some(self.finish()))
    }

    /// What no run on from this moment can beat: (mean JCT, makespan), s, where every
    /// unfinished job runs at full speed from now (a running job for the rest of its profile, a
    /// waiting one from now and a future one from its submission, for its whole profile) and nothing
    /// waits. Rates never exceed 1 and an OOM kill only adds work, so [`Simulator::finish`]'s
    /// `mean_jct_s` and `makespan_s` of any continuation are at least these, for every model
    /// whose rates are at most 1. (The mean-JCT bound's memory terms, tried for the jobs not
    /// running, abandoned no more futures on the thesis's apps and cost more per check.)
    pub fn cost_floor(&self) -> (f64, f64) {
        // A running job's progress is in its GPU's list, at its slot in the book.
        let rest = |i: usize, g: usize| {
            let slot = self.books[g].slots.iter().position(|&k| k == i)?;
            Some(self.gpus[g].running[slot].remaining_s())
        };
        // Once every job has arrived (always, from a view), a job not running waits in the
        // queue and may start now, whatever its submit time says (a view's clock can be behind
        // a submission: a live caller's wall clock stepped back).
        let arrived = self.next_arrival == self.arrival_order.len();
        let (mut total, mut makespan) = (0.0, 0.0f64);
        for (i, j) in self.jobs.iter().enumerate() {
            let end = match j.finish_s {
                Some(f) => f,
                None => match j.gpu.and_then(|g| rest(i, g)) {
                    Some(rest) => self.now_s + rest,
                    None if arrived => self.now_s + j.profile.solo_s(),
                    None => self.now_s.max(j.submit_s) + j.profile.solo_s(),
                },
            };
            total += end - j.submit_s;
            makespan = makespan.max(end);
        }
        let n = self.jobs.len();
        (if n == 0 { 0.0 } else { total / n as f64 }, makespan)
    }

    /// A copy from this moment that knows only the jobs submitted so far: the jobs still to
    /// arrive are dropped. A look-ahead that plays futures out on it sees what an online
    /// scheduler sees, not the arrivals to come (on a plain clone it would).
    pub fn without_future_arrivals(&self) -> Simulator {
        let mut sim = self.clone();
        if sim.next_arrival == sim.arrival_order.len() {
            return sim;
        }
        // Old job-table index -> new one; usize::MAX for the jobs still to arrive (dropped).
        let mut new_index = vec![0; sim.jobs.len()];
        sim.arrival_order[sim.next_arrival..].iter().for_each(|&j| new_index[j] = usize::MAX);
        let mut kept = Vec::with_capacity(sim.next_arrival);
        for (old, job) in std::mem::take(&mut sim.jobs).into_iter().enumerate() {
            if new_index[old] != usize::MAX {
                new_index[old] = kept.len();
                kept.push(job);
            }
        }
        sim.jobs = kept;
        // Nothing arrives any more (only the length is read from here on), but the table
        // stays a valid list of job indices.
        sim.arrival_order.truncate(sim.next_arrival);
        sim.arrival_order.iter_mut().for_each(|j| *j = new_index[*j]);
        sim.index_of = sim.jobs.iter().enumerate().map(|(k, j)| (j.id, k)).collect();
        for book in &mut sim.books {
            book.slots.iter_mut().for_each(|j| *j = new_index[*j]);
            book.alone_at_full_speed = None; // keyed by the old indices
        }
        sim
    }

    /// Names the policy in errors and in the result (the `run` wrapper sets it).
    pub fn set_policy_name(&mut self, name: &str) {
        self.policy_name = name.to_string();
    }

    /// Cluster clock, s.
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// True when every job has finished.
    pub fn done(&self) -> bool {
        self.finished == self.jobs.len()
    }

    /// True when jobs wait and, since the last decision, a job arrived, finished or was
    /// killed out of memory, or the decision tick has come round after capacity was freed
    /// (see [`TickTrigger`]; with [`TickTrigger::Always`], every tick).
    pub fn needs_decision(&self) -> bool {
        let tick = self.now_s >= self.next_tick_s - 1e-9
            && (self.capacity_freed || self.config.tick_trigger == TickTrigger::Always);
        !self.queue.is_empty() && (self.decision_pending || tick)
    }

    /// The snapshot a policy decides on. It borrows the simulator's own state (no copy).
    pub fn view(&self) -> ClusterView<'_> {
        ClusterView { now_s: self.now_s, gpus: &self.gpus, queue: &self.queue }
    }
}

/// The simulator's job table (job-set order) and each job's index in it. Errors: an unknown
/// app, a profile larger than every GPU (`max_mem` MiB).
fn job_table(
    jobset: &JobSet,
    library: &AppLibrary,
    max_mem: f64,
) -> Result<(Vec<JobState>, HashMap<JobId, usize>), SimError> {
    let mut jobs = Vec::with_capacity(jobset.jobs.len());
    let mut index_of = HashMap::with_capacity(jobset.jobs.len());
    for spec in &jobset.jobs {
        let profile = library.get(&spec.app)?.clone();
        profile.check_fits_memory(max_mem)?;
        index_of.insert(spec.id, jobs.len());
        jobs.push(JobState {
            id: spec.id,
            app: spec.app.clone(),
            profile,
            submit_s: spec.submit_s,
            first_start_s: None,
            last_start_s: None,
            finish_s: None,
            gpu: None,
            restarts: 0,
            avoid_apps: Vec::new(),
            sample: 0,
            grew: false,
        });
    }
    Ok((jobs, index_of))
}

/// Runs `policy` over `jobset` on `cluster` to the end: the stepping loop of the module docs.
pub fn run(
    policy: &dyn dqngpu_model::Policy,
    cluster: &ClusterSpec,
    library: &AppLibrary,
    jobset: &JobSet,
    interference: Arc<dyn Interference>,
    config: SimConfig,
) -> Result<SimResult, SimError> {
    let config = config.for_policy(policy);
    let mut sim = Simulator::new(cluster, library, jobset, interference, config)?;
    sim.set_policy_name(policy.name());
    sim.play_out(policy)
}
