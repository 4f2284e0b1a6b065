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

use std::collections::HashMap;
use std::sync::Arc;

use dqngpu_interference::{Interference, JobLoad};
use dqngpu_model::{
    fits_alone, liveness_start, validate_decision, AppLibrary, AppProfile, ClusterSpec, ClusterView, GpuState, JobId,
    JobSet, Location, ModelError, Placement, QueuedJob, Resources, RunningJob,
};

use crate::budget::within_budget;
use crate::error::SimError;
use crate::event::{JobMemory, SimEvent};
use crate::metrics::{
    jct_lower_bound_s, lower_bound_s, mean_jct_s, slowed_over_10_pct, BoundJob, JctBoundJob, JobRecord, SimResult,
    SlowdownBuckets, UsageTrace,
};
use crate::step::{advance, gpu_rates, time_to_finish, Advance};

/// What makes a decision tick ask the policy while jobs wait (beside arrivals, finishes and
/// OOM kills, which always do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TickTrigger {
    /// A running job passed its remaining peak in some resource since the last decision: the
    /// rest of its profile needs less than what a peak-based policy reserved for it. Peak-based
    /// heuristics can only decide differently after such a drop (or an event).
    #[default]
    PeakDrop,
    /// A running job's current demand dropped in some resource since the last decision.
    DemandDrop,
    /// Every tick while jobs wait.
    Always,
}

/// [`Simulator::play_out_while`] asks whether to go on at every decision and at least once
/// per this many steps (a check costs about what a step does).
pub const KEEP_CHECK_STEPS: u32 = 16;

/// How the simulator steps and when it asks for decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Step length, s (1 s by default). A step ends early at a job's finish or an arrival.
    pub step_s: f64,
    /// While jobs wait and a running job's demand has dropped since the last decision
    /// (capacity freed), ask the policy again once this long after the last decision, s, even
    /// when nothing arrived, finished or was killed: demands change over a job's life, so a
    /// packing policy may find room. Default 10 s.
    pub decision_tick_s: f64,
    /// What counts as capacity freed for the decision tick.
    pub tick_trigger: TickTrigger,
    /// Record the event log into [`SimResult::events`].
    pub record_events: bool,
    /// Record the cluster's usage at every step into [`SimResult::usage`].
    pub record_usage: bool,
    /// A job killed out of memory more than this many times stops the simulation with
    /// [`SimError::TooManyRestarts`] (a policy that keeps placing it where it cannot fit).
    pub max_restarts: u32,
    /// Slowdown budget for every policy, a fraction (0.10: no job more than 10% slower than
    /// alone): a group predicted by the interference model to push any job on its GPU past it
    /// is not started ([`crate::budget`]). `None`: no budget.
    pub max_slowdown: Option<f64>,
}

impl SimConfig {
    /// This configuration as `policy` is run under: every tick for a policy that wants it.
    pub fn for_policy(self, policy: &dyn dqngpu_model::Policy) -> Self {
        if policy.wants_every_tick() {
            SimConfig { tick_trigger: TickTrigger::Always, ..self }
        } else {
            self
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            step_s: 1.0,
            decision_tick_s: 10.0,
            tick_trigger: TickTrigger::PeakDrop,
            record_events: false,
            record_usage: false,
            max_restarts: 100,
            max_slowdown: None,
        }
    }
}

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
    /// waiting or future one from now or its submission, for its whole profile) and nothing
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
        let (mut total, mut makespan) = (0.0, 0.0f64);
        for (i, j) in self.jobs.iter().enumerate() {
            let end = match j.finish_s {
                Some(f) => f,
                None => match j.gpu.and_then(|g| rest(i, g)) {
                    Some(rest) => self.now_s + rest,
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

    /// Validates and applies a decision: starts the placed jobs now. A job that does not fit
    /// in its GPU's memory is killed out of memory at once (newest placed first). A decision
    /// that places nothing while a GPU is idle and a waiting job fits it starts that job
    /// instead ([`dqngpu_model::liveness_start`]; counted in [`SimResult::liveness_starts`]).
    ///
    /// Errors: an invalid decision; [`SimError::NoProgress`] when the policy places nothing
    /// although nothing runs and no job will arrive; a fault recorded by an earlier step
    /// ([`SimError::TooManyRestarts`]).
    pub fn apply(&mut self, decision: &[Placement]) -> Result<(), SimError> {
        if let Some(Fault(f)) = self.fault.take() {
            return Err(f);
        }
        validate_decision(&self.policy_name, &self.view(), decision)?;
        self.decisions += 1;
        // A group with a job whose peak alone is more than its GPU's memory can only be killed
        // out of memory, for ever (DeepRM Mean sees mean memory: LAMMPS's 2.7 GB mean on an
        // 8 GB card, its 8.5 GB peak): dropped, counted and logged; the liveness rule below
        // then starts a waiting job where it fits.
        let fitting;
        let decision = if decision.iter().all(|p| fits_alone(&self.view(), p)) {
            decision
        } else {
            let (kept, unfit): (Vec<Placement>, Vec<Placement>) =
                decision.iter().cloned().partition(|p| fits_alone(&self.view(), p));
            self.unfit_drops += unfit.len() as u64;
            if self.config.record_events {
                for p in unfit {
                    self.events.push(SimEvent::Unfit { t_s: self.now_s, gpu: p.gpu, jobs: p.jobs });
                }
            }
            fitting = kept;
            &fitting[..]
        };
        self.decision_pending = false;
        self.capacity_freed = false;
        self.next_tick_s = self.now_s + self.config.decision_tick_s;
        // The slowdown budget, for every policy: groups predicted to slow a job past it wait.
        let budgeted;
        let decision = match self.config.max_slowdown {
            Some(b) => {
                let view = self.view();
                let (kept, refused) = within_budget(
                    view.now_s,
                    view.gpus,
                    view.queue,
                    decision,
                    &*self.interference,
                    b,
                    self.config.step_s,
                );
                self.budget_refusals += refused.len() as u64;
                if self.config.record_events {
                    for r in refused {
                        self.events.push(SimEvent::Refused { t_s: self.now_s, gpu: r.gpu, jobs: r.jobs });
                    }
                }
                budgeted = kept;
                &budgeted[..]
            }
            None => decision,
        };
        // Liveness: a policy that holds while a GPU is idle and a waiting job fits it gets one
        // job started for it (counted, and logged as a `liveness` event).
        let rescue = liveness_start(&self.view(), decision);
        let decision = match &rescue {
            Some(p) => {
                self.liveness_starts += 1;
                if self.config.record_events {
                    let app = self.queue.iter().find(|q| q.id == p.jobs[0]).map(|q| q.app.clone()).unwrap_or_default();
                    self.events.push(SimEvent::Liveness { t_s: self.now_s, job: p.jobs[0], app, gpu: p.gpu });
                }
                std::slice::from_ref(p)
            }
            None => decision,
        };
        let placed_any = decision.iter().any(|p| !p.jobs.is_empty());
        if !placed_any {
            let idle = self.gpus.iter().all(GpuState::is_idle);
            if idle && !self.queue.is_empty() && self.next_arrival == self.arrival_order.len() {
                return Err(SimError::NoProgress {
                    policy: self.policy_name.clone(),
                    now_s: self.now_s,
                    queued: self.queue.len(),
                });
            }
            return Ok(());
        }
        for p in decision {
            if p.jobs.is_empty() {
                continue;
            }
            let first_new = self.gpus[p.gpu].running.len();
            for &id in &p.jobs {
                self.start_job(p.gpu, id);
            }
            // Newly placed jobs are the ones whose demand just grew (from nothing).
            self.enforce_memory(p.gpu, Culprits::PlacedFrom(first_new));
            self.log_memory(p.gpu);
        }
        match self.fault.take() {
            Some(Fault(f)) => Err(f),
            None => Ok(()),
        }
    }

    /// Advances the clock by one step (`step_s`, cut short at the first finish or arrival
    /// within it): progress at the interference model's rates, finishes, arrivals, OOM kills.
    /// When nothing runs it jumps to the next arrival or decision tick (nothing changes in
    /// between).
    pub fn step(&mut self) {
        if self.done() {
            return;
        }
        let any_running = self.gpus.iter().any(|g| !g.running.is_empty());
        if !any_running {
            self.idle_jump();
            return;
        }
        let mut dt = self.config.step_s;
        if let Some(&j) = self.arrival_order.get(self.next_arrival) {
            let until = self.jobs[j].submit_s - self.now_s;
            if until > 0.0 {
                dt = dt.min(until);
            }
        }
        // Pass 1: rates per GPU and the step length (cut at the first finish).
        for g in 0..self.gpus.len() {
            if self.gpus[g].running.is_empty() {
                continue;
            }
            dt = dt.min(self.compute_rates(g));
        }
        // Pass 2: advance.
        let t0 = self.now_s;
        self.now_s += dt;
        self.steps += 1;
        let (mut util, mut mem) = (0.0, 0.0);
        for g in 0..self.gpus.len() {
            if !self.gpus[g].running.is_empty() {
                let (u, m) = self.advance_gpu(g, t0, dt);
                util += u;
                mem += m;
            }
        }
        let n = self.gpus.len() as f64;
        if let Some(trace) = self.usage.as_mut() {
            trace.push(t0, util / n, mem / n);
        }
        self.admit_arrivals();
    }

    /// The rates of GPU `g`'s jobs for this step, into its book; returns the time until the
    /// first of them finishes at those rates.
    fn compute_rates(&mut self, g: usize) -> f64 {
        const INLINE: usize = 8;
        let gpu = &self.gpus[g];
        let book = &mut self.books[g];
        let jobs = &self.jobs;
        let n = gpu.running.len();
        if book.rates_valid {
            return finish_times(&book.rates, &gpu.running, &mut book.t_finish);
        }
        book.rates_valid = true;
        book.rates.resize(n, 1.0);
        if n == 1 {
            // Alone: the model's answer, once known to be exactly 1.0 for the rest of the run.
            let j = &jobs[book.slots[0]];
            let key = (book.slots[0], j.restarts);
            if book.alone_at_full_speed != Some(key)
                && self.interference.alone_at_full_speed(&gpu.spec, &j.profile.peak_from(j.sample))
            {
                book.alone_at_full_speed = Some(key);
            }
            if book.alone_at_full_speed == Some(key) {
                book.rates[0] = 1.0;
                return finish_times(&book.rates, &gpu.running, &mut book.t_finish);
            }
        }
        let zero = Resources::ZERO;
        let dummy = JobLoad { app: "", demand: &zero };
        let load = |k: usize| {
            let j = &jobs[book.slots[k]];
            JobLoad { app: &j.app, demand: &j.profile.samples[j.sample] }
        };
        if n <= INLINE {
            let mut loads = [dummy; INLINE];
            for (k, l) in loads.iter_mut().enumerate().take(n) {
                *l = load(k);
            }
            gpu_rates(self.interference.as_ref(), &gpu.spec, &loads[..n], &mut book.rates);
        } else {
            let loads: Vec<JobLoad<'_>> = (0..n).map(load).collect();
            gpu_rates(self.interference.as_ref(), &gpu.spec, &loads, &mut book.rates);
        }
        finish_times(&book.rates, &gpu.running, &mut book.t_finish)
    }

    /// Advances GPU `g` by `dt` from `t0`: progress, metrics, finishes, memory growth.
    /// Returns the step's GPU utilisation and memory in use, % (see [`UsageTrace`]).
    fn advance_gpu(&mut self, g: usize, t0: f64, dt: f64) -> (f64, f64) {
        let cap_mem = self.gpus[g].spec.memory_mib;
        let book = &mut self.books[g];
        let gpu = &mut self.gpus[g];
        let n = gpu.running.len();
        self.job_steps += n as u64;
        let mut util = 0.0;
        let mut mem = 0.0;
        let mut any_finished = false;
        let mut any_grew = false;
        let mut mem_changed = false;
        for k in 0..n {
            let rate = book.rates[k];
            let rj = &mut gpu.running[k];
            let js = &mut self.jobs[book.slots[k]];
            let d = js.profile.samples[js.sample];
            util += d.gpu_util_pct * rate;
            mem += d.gpu_mem_mib;
            js.grew = false;
            let progress_s = match advance(rj.progress_s, rate, book.t_finish[k], dt) {
                Advance::Finished { after_s } => {
                    rj.progress_s = js.profile.solo_s();
                    js.finish_s = Some(t0 + after_s);
                    any_finished = true;
                    None
                }
                Advance::Running { progress_s } => Some(progress_s),
            };
            if let Some(progress_s) = progress_s {
                rj.progress_s = progress_s;
                let s = js.profile.sample_index(rj.progress_s);
                if s != js.sample {
                    let new = js.profile.samples[s];
                    if new != d {
                        book.rates_valid = false;
                        js.grew = new.gpu_mem_mib > d.gpu_mem_mib;
                        any_grew |= js.grew;
                        mem_changed |= new.gpu_mem_mib != d.gpu_mem_mib;
                    }
                    self.capacity_freed |= match self.config.tick_trigger {
                        TickTrigger::PeakDrop => any_lower(&js.profile.peak_from(s), &js.profile.peak_from(js.sample)),
                        TickTrigger::DemandDrop => any_lower(&new, &d),
                        TickTrigger::Always => true,
                    };
                    js.sample = s;
                }
            }
        }
        let (util_pct, mem_pct) = (util.min(100.0), 100.0 * mem / cap_mem);
        book.util_integral += util_pct * dt;
        book.mem_integral += mem_pct * dt;
        if any_finished {
            self.remove_finished(g);
        }
        if any_grew {
            self.enforce_memory(g, Culprits::Grew);
        }
        if self.config.record_events && (mem_changed || any_finished || self.books[g].mem_dirty) {
            self.log_memory(g);
        }
        (util_pct, mem_pct)
    }

    /// Removes GPU `g`'s finished jobs (finish_s set, still listed), logging their finish.
    fn remove_finished(&mut self, g: usize) {
        let mut k = 0;
        while k < self.gpus[g].running.len() {
            let j = self.books[g].slots[k];
            let js = &self.jobs[j];
            if js.finish_s.is_some() && self.gpus[g].running[k].remaining_s() <= 0.0 {
                let t = js.finish_s.unwrap_or(self.now_s);
                self.gpus[g].running.remove(k);
                self.books[g].slots.remove(k);
                self.books[g].rates.remove(k);
                self.books[g].mem_dirty = true;
                self.books[g].rates_valid = false;
                self.finished += 1;
                self.decision_pending = true;
                if self.config.record_events {
                    let js = &self.jobs[j];
                    self.events.push(SimEvent::Finish { t_s: t, job: js.id, app: js.app.clone(), gpu: g });
                }
            } else {
                k += 1;
            }
        }
    }

    /// Memory in use on GPU `g` by its running jobs' current samples, MiB.
    fn mem_in_use(&self, g: usize) -> f64 {
        // Start from +0.0 (an empty f64 sum is -0.0, which would print as "-0").
        self.books[g]
            .slots
            .iter()
            .fold(0.0, |acc, &j| acc + self.jobs[j].profile.samples[self.jobs[j].sample].gpu_mem_mib)
    }

    /// While GPU `g`'s jobs need more memory than it has, kills the newest of the `culprits`
    /// (else the newest job) as out of memory.
    fn enforce_memory(&mut self, g: usize, culprits: Culprits) {
        let cap = self.gpus[g].spec.memory_mib;
        loop {
            let used = self.mem_in_use(g);
            if used <= cap + 1e-9 {
                return;
            }
            let n = self.gpus[g].running.len();
            // `running` is in start order, so the last candidate is the newest.
            let is_culprit = |k: usize| match culprits {
                Culprits::PlacedFrom(first) => k >= first,
                Culprits::Grew => self.jobs[self.books[g].slots[k]].grew,
            };
            let victim = (0..n).rev().find(|&k| is_culprit(k)).unwrap_or(n - 1);
            self.kill_oom(g, victim, used);
        }
    }

    /// Kills running job `k` of GPU `g` out of memory: it loses its progress and rejoins the
    /// queue in arrival order, avoiding the apps it shared the GPU with.
    fn kill_oom(&mut self, g: usize, k: usize, demand_mib: f64) {
        let j = self.books[g].slots.remove(k);
        self.books[g].rates.remove(k);
        self.gpus[g].running.remove(k);
        self.books[g].mem_dirty = true;
        self.books[g].rates_valid = false;
        let neighbours: Vec<String> = self.books[g].slots.iter().map(|&o| self.jobs[o].app.clone()).collect();
        let js = &mut self.jobs[j];
        js.restarts += 1;
        js.gpu = None;
        js.sample = 0;
        for a in neighbours {
            if !js.avoid_apps.contains(&a) {
                js.avoid_apps.push(a);
            }
        }
        self.oom_kills += 1;
        self.decision_pending = true;
        if js.restarts > self.config.max_restarts && self.fault.is_none() {
            self.fault = Some(Fault(SimError::TooManyRestarts {
                policy: self.policy_name.clone(),
                job: js.id,
                restarts: js.restarts,
                limit: self.config.max_restarts,
            }));
        }
        if self.config.record_events {
            self.events.push(SimEvent::Oom {
                t_s: self.now_s,
                job: js.id,
                app: js.app.clone(),
                gpu: g,
                demand_mib,
                capacity_mib: self.gpus[g].spec.memory_mib,
            });
        }
        self.enqueue(j);
    }

    /// Puts job `j` in the queue, keeping arrival order (submit time, then job-set order).
    fn enqueue(&mut self, j: usize) {
        let js = &self.jobs[j];
        let key = (js.submit_s, j);
        let pos = self.queue.partition_point(|q| {
            let o = self.index_of[&q.id];
            (self.jobs[o].submit_s, o) < key
        });
        self.queue.insert(
            pos,
            QueuedJob {
                id: js.id,
                app: js.app.clone(),
                profile: js.profile.clone(),
                submit_s: js.submit_s,
                restarts: js.restarts,
                avoid_apps: js.avoid_apps.clone(),
            },
        );
    }

    /// Starts queued job `id` on GPU `g` now (the decision was validated).
    fn start_job(&mut self, g: usize, id: JobId) {
        let Some(&j) = self.index_of.get(&id) else { return };
        if let Some(pos) = self.queue.iter().position(|q| q.id == id) {
            self.queue.remove(pos);
        }
        let now = self.now_s;
        let js = &mut self.jobs[j];
        js.first_start_s.get_or_insert(now);
        js.last_start_s = Some(now);
        js.gpu = Some(g);
        js.sample = 0;
        self.gpus[g].running.push(RunningJob { id, profile: js.profile.clone(), progress_s: 0.0, started_s: now });
        self.books[g].slots.push(j);
        self.books[g].rates.push(1.0);
        self.books[g].mem_dirty = true;
        self.books[g].rates_valid = false;
        if self.config.record_events {
            self.events.push(SimEvent::Start { t_s: now, job: id, app: js.app.clone(), gpu: g });
        }
    }

    /// Writes a `Memory` event for GPU `g` if its memory in use or its job set changed.
    fn log_memory(&mut self, g: usize) {
        if !self.config.record_events {
            return;
        }
        let used = self.mem_in_use(g);
        let book = &self.books[g];
        if !book.mem_dirty && used == book.logged_mem {
            return;
        }
        let jobs = book
            .slots
            .iter()
            .zip(&self.gpus[g].running)
            .map(|(&j, rj)| JobMemory {
                job: rj.id,
                progress_s: rj.progress_s,
                mem_mib: self.jobs[j].profile.samples[self.jobs[j].sample].gpu_mem_mib,
            })
            .collect();
        self.events.push(SimEvent::Memory {
            t_s: self.now_s,
            gpu: g,
            used_mib: used,
            capacity_mib: self.gpus[g].spec.memory_mib,
            jobs,
        });
        self.books[g].logged_mem = used;
        self.books[g].mem_dirty = false;
    }

    /// Moves every job submitted by now into the queue.
    fn admit_arrivals(&mut self) {
        while let Some(&j) = self.arrival_order.get(self.next_arrival) {
            if self.jobs[j].submit_s > self.now_s + 1e-9 {
                break;
            }
            self.next_arrival += 1;
            self.decision_pending = true;
            if self.config.record_events {
                let js = &self.jobs[j];
                self.events.push(SimEvent::Arrival { t_s: js.submit_s, job: js.id, app: js.app.clone() });
            }
            self.enqueue(j);
        }
    }

    /// Nothing runs: jump to the next arrival, or to the next decision tick while jobs wait.
    fn idle_jump(&mut self) {
        let next_arrival = self.arrival_order.get(self.next_arrival).map(|&j| self.jobs[j].submit_s);
        // Never stand still: a tick already due (the driver did not decide) moves a step on.
        let tick = self.next_tick_s.max(self.now_s + self.config.step_s);
        let target = match (next_arrival, self.queue.is_empty()) {
            (Some(a), true) => a,
            (Some(a), false) => a.min(tick),
            (None, _) => tick,
        };
        if let Some(trace) = self.usage.as_mut() {
            trace.push(self.now_s, 0.0, 0.0);
        }
        self.now_s = target.max(self.now_s);
        self.steps += 1;
        self.admit_arrivals();
    }

    /// Ends the simulation and computes the metrics (formulas in docs/SIMULATOR.md). Jobs
    /// that did not finish have `None` times and are left out of the slowdown buckets.
    pub fn finish(mut self) -> SimResult {
        if let Some(trace) = self.usage.as_mut() {
            trace.push(self.now_s, 0.0, 0.0);
        }
        let makespan_s =
            if self.done() { self.jobs.iter().filter_map(|j| j.finish_s).fold(0.0, f64::max) } else { self.now_s };
        let (bound_jobs, jct_jobs): (Vec<BoundJob>, Vec<JctBoundJob>) = self
            .jobs
            .iter()
            .map(|j| {
                let (t, submit_s, solo_s) = (j.profile.totals(), j.submit_s, j.profile.solo_s());
                (
                    BoundJob { submit_s, solo_s, util_work: t.util_work },
                    JctBoundJob { submit_s, solo_s, min_mem_mib: t.min_mem_mib, mem_work: t.mem_work },
                )
            })
            .unzip();
        let lower = lower_bound_s(&bound_jobs, self.gpus.len());
        let gpu_mem: Vec<f64> = self.gpus.iter().map(|g| g.spec.memory_mib).collect();
        let n_gpus = self.gpus.len() as f64;
        let avg = |f: fn(&GpuBook) -> f64| {
            if makespan_s > 0.0 {
                self.books.iter().map(f).sum::<f64>() / (n_gpus * makespan_s)
            } else {
                0.0
            }
        };
        let avg_gpu_util_pct = avg(|b| b.util_integral);
        let avg_gpu_mem_util_pct = avg(|b| b.mem_integral);
        let records: Vec<JobRecord> = self
            .jobs
            .iter()
            .map(|j| {
                let solo = j.profile.solo_s();
                let exec = match (j.first_start_s, j.finish_s) {
                    (Some(s), Some(f)) => Some(f - s),
                    _ => None,
                };
                JobRecord {
                    id: j.id,
                    app: j.app.clone(),
                    gpu: j.gpu,
                    submit_s: j.submit_s,
                    start_s: j.first_start_s,
                    last_start_s: j.last_start_s,
                    finish_s: j.finish_s,
                    solo_s: solo,
                    wait_s: j.first_start_s.map(|s| s - j.submit_s),
                    exec_s: exec,
                    exec_slowdown: exec.map(|e| e / solo),
                    jct_slowdown: j.finish_s.map(|f| (f - j.submit_s) / solo),
                    restarts: j.restarts,
                }
            })
            .collect();
        SimResult {
            scheduler: self.policy_name,
            interference: self.interference.name().to_string(),
            makespan_s,
            lower_bound_s: lower,
            makespan_over_bound: if lower > 0.0 { makespan_s / lower } else { 0.0 },
            jct_lower_bound_s: jct_lower_bound_s(&jct_jobs, &gpu_mem),
            mean_jct_s: mean_jct_s(&records),
            slowed_over_10_pct: slowed_over_10_pct(&records),
            avg_gpu_util_pct,
            avg_gpu_mem_util_pct,
            oom_kills: self.oom_kills,
            restarts: records.iter().map(|r| u64::from(r.restarts)).sum(),
            slowdown_buckets: SlowdownBuckets::from_slowdowns(records.iter().filter_map(|r| r.exec_slowdown)),
            completed: self.finished == self.jobs.len(),
            steps: self.steps,
            job_steps: self.job_steps,
            decisions: self.decisions,
            liveness_starts: self.liveness_starts,
            budget_refusals: self.budget_refusals,
            unfit_drops: self.unfit_drops,
            jobs: records,
            events: self.events,
            usage: self.usage,
        }
    }
}

/// The shortest simulation step, s.
pub const MIN_STEP_S: f64 = 1e-3;

/// What is wrong with a step of `step_s` over profiles sampled every `intervals` s, if it is
/// longer than the shortest: each step runs the sample in force at its start, so the samples
/// in between are skipped (docs/SIMULATOR.md). Callers name the step and the profiles.
pub fn skipped_samples(step_s: f64, intervals: impl IntoIterator<Item = f64>) -> Option<String> {
    let shortest = intervals.into_iter().fold(f64::INFINITY, f64::min);
    (step_s > shortest * (1.0 + 1e-9)).then(|| {
        format!(
            "{step_s} s is longer than the shortest profile interval ({shortest} s): each step runs the sample in force at its start, so samples in between are skipped"
        )
    })
}

/// Refuses a step shorter than [`MIN_STEP_S`] or a decision tick that is not a positive
/// number of seconds.
fn check_config(config: &SimConfig) -> Result<(), SimError> {
    // Below a millisecond a run of hours takes billions of steps: it would seem to hang.
    if !(config.step_s.is_finite() && config.step_s >= MIN_STEP_S) {
        return Err(SimError::Config(format!(
            "step_s must be a number of seconds >= {MIN_STEP_S}, got {}",
            config.step_s
        )));
    }
    if !(config.decision_tick_s.is_finite() && config.decision_tick_s > 0.0) {
        return Err(SimError::Config(format!(
            "decision_tick_s must be a positive number of seconds, got {}",
            config.decision_tick_s
        )));
    }
    Ok(())
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

/// Writes each running job's time to finish at its rate into `out`; returns the smallest.
fn finish_times(rates: &[f64], running: &[RunningJob], out: &mut Vec<f64>) -> f64 {
    out.clear();
    let mut first = f64::INFINITY;
    for (r, rj) in rates.iter().zip(running) {
        let t = time_to_finish(rj.remaining_s(), *r);
        out.push(t);
        first = first.min(t);
    }
    first
}

/// True when `a` is below `b` in some resource.
fn any_lower(a: &Resources, b: &Resources) -> bool {
    a.gpu_util_pct < b.gpu_util_pct || a.gpu_mem_mib < b.gpu_mem_mib || a.sm_pct < b.sm_pct || a.pcie_mbps < b.pcie_mbps
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
