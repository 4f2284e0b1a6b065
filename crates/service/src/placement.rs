//! The placement loop (thesis Algorithm 2): on every submission, completion and tick it
//! builds a [`ClusterView`] from the store and the monitor, asks the policy, validates the
//! decision and starts the chosen groups. It is the only writer of "what runs where".
//!
//! When the policy places nothing (or only jobs the guards below hold back) while a GPU is
//! idle and a waiting job fits it, the loop starts the oldest such job itself (the liveness
//! rule, `dqngpu_model::liveness_start`; counted in `dqngpu_liveness_starts_total` and written
//! to the event log as `liveness_start`), so no policy can leave a job waiting for ever.
//!
//! Two guards apply to every policy's decision, so no policy can break them: a job never
//! joins a GPU where the peak memories of its profile and of the jobs there would exceed
//! the card, and never joins an app it died of OOM beside (`avoid_apps`). A job whose app
//! has no profile runs alone first; its observed run becomes the app's profile.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio::sync::{mpsc, watch};

use dqngpu_model::{
    liveness_start, validate_decision, AppInfo, AppProfile, ClusterView, GpuState, JobId, Policy, QueuedJob, Resources,
    RunningJob,
};

use crate::error::ServiceError;
use crate::exec::{self, ExitInfo, Launch, Recovered};
use crate::gpus::NvmlMonitor;
use crate::jobs::{AttemptState, JobRecord, JobState};
use crate::profiles::ProfileSource;
use crate::store::AttemptEnd;
use crate::{unix_now, Core};

/// Messages to the loop.
#[derive(Debug)]
pub enum LoopMsg {
    /// Stop a running job (its cancel is already recorded in the store).
    Cancel(JobId),
    /// An attempt ended.
    Done {
        /// Job.
        job: JobId,
        /// Attempt number.
        attempt: u32,
        /// How it ended.
        exit: ExitInfo,
    },
}

/// One GPU as `GET /v1/cluster` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct GpuView {
    /// Index on this machine (`CUDA_VISIBLE_DEVICES`).
    pub index: u32,
    /// Model name.
    pub name: String,
    /// Memory, MiB.
    pub memory_mib: f64,
    /// Capacity vector.
    pub capacity: Resources,
    /// Jobs running there.
    pub jobs: Vec<RunningView>,
    /// Sum of the running jobs' current profile demands.
    pub profile_demand: Resources,
    /// Usage measured by NVML, when a driver is present.
    pub measured: Option<Resources>,
}

/// A running job in the cluster view.
#[derive(Debug, Clone, Serialize)]
pub struct RunningView {
    /// Job id.
    pub id: JobId,
    /// App.
    pub app: String,
    /// Attempt number.
    pub attempt: u32,
    /// Runs alone to be profiled.
    pub exclusive: bool,
    /// Seconds since it started.
    pub running_s: f64,
}

/// What the loop last saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterSnapshot {
    /// The policy deciding.
    pub policy: String,
    /// The GPUs.
    pub gpus: Vec<GpuView>,
    /// Jobs waiting: the loop counts up to its window (256 by default); `GET /v1/cluster`
    /// answers with the store's count of every queued job.
    pub queued: usize,
}

struct Run {
    attempt: u32,
    gpu: usize,
    app: String,
    profile: Option<Arc<AppProfile>>,
    exclusive: bool,
    co_apps: Vec<String>,
    avoid_apps: Vec<String>,
    started_unix: f64,
    pid: u32,
    pid_start: u64,
    samples: Vec<Resources>,
    /// True when `samples` began at the run's start (this server launched it); false for a run
    /// adopted after a restart, whose readings before the restart are lost.
    sampled_from_start: bool,
}

/// The loop's state. Build with [`Placer::new`], which also recovers attempts from a crash.
pub struct Placer {
    core: Arc<Core>,
    policy: Arc<dyn Policy>,
    rx: mpsc::UnboundedReceiver<LoopMsg>,
    running: BTreeMap<JobId, Run>,
    monitor: Option<NvmlMonitor>,
    measured: Vec<Option<Resources>>,
    /// Waiting jobs seen by the last pass (at most the window).
    last_queued: usize,
    /// Attempt ends the store failed to record, recorded again at the next pass.
    unrecorded: Vec<(JobId, u32, ExitInfo)>,
    /// After a launch failed for a passing lack of resources (out of file descriptors, a
    /// full disk): no job starts before this, so that the queue is not burnt through.
    launch_pause_until: Option<Instant>,
    /// Such failures in a row: the pause doubles with each, up to [`MAX_LAUNCH_PAUSE`].
    transient_streak: u32,
}

/// The longest pause of launches after failures for a passing lack of resources.
const MAX_LAUNCH_PAUSE: std::time::Duration = std::time::Duration::from_secs(60);

impl Placer {
    /// Builds the loop and re-adopts or re-queues the attempts the store says run.
    pub fn new(
        core: Arc<Core>,
        policy: Arc<dyn Policy>,
        rx: mpsc::UnboundedReceiver<LoopMsg>,
        monitor: Option<NvmlMonitor>,
    ) -> Result<Self, ServiceError> {
        let n = core.cfg.gpus.len();
        let mut p = Placer {
            core,
            policy,
            rx,
            running: BTreeMap::new(),
            monitor,
            measured: vec![None; n],
            last_queued: 0,
            unrecorded: Vec::new(),
            launch_pause_until: None,
            transient_streak: 0,
        };
        p.recover()?;
        // The API answers before the loop's first pass: it sees the GPUs, the policy and the
        // re-adopted runs from the start, not an empty cluster.
        p.publish();
        Ok(p)
    }

    fn recover(&mut self) -> Result<(), ServiceError> {
        // (job, attempt, supervisor pid, its start) of the attempts lost in the restart.
        let mut lost = Vec::new();
        for a in self.core.store.running_attempts()? {
            let Some(job) = self.core.store.job(a.job_id)? else { continue };
            let dir = self.core.attempt_dir(a.job_id, a.n);
            let found = exec::recover(&dir)?;
            tracing::info!(job = a.job_id, attempt = a.n, ?found, "recovering attempt");
            let gpus = self.core.cfg.gpus.len();
            if a.gpu as usize >= gpus {
                // Its process may still run on that GPU: booked on another, the next job there
                // would share a card the books call free.
                return Err(ServiceError::Config(format!(
                    "attempt {} of job {} runs on GPU slot {}, but this server has {gpus} GPU(s): start it with the \
                     GPUs it had, at least until the job ends",
                    a.n, a.job_id, a.gpu
                )));
            }
            let gpu = a.gpu as usize;
            // The supervisor's pid: the one it claimed the attempt with, where the store lacks
            // it (the service can die between the spawn and recording the pid).
            let (pid, pid_start) = match found {
                Recovered::Adopted { pid, start } | Recovered::Lost { group: Some((pid, start)) } => (pid, start),
                _ => (a.pid.unwrap_or(0), a.pid_start.unwrap_or(0)),
            };
            let run = Run {
                attempt: a.n,
                gpu,
                app: job.spec.app.clone(),
                profile: self.core.profiles.get(&job.spec.app),
                exclusive: a.exclusive,
                co_apps: a.co_apps.clone(),
                avoid_apps: job.avoid_apps.clone(),
                started_unix: a.started_at,
                pid,
                pid_start,
                samples: Vec::new(),
                sampled_from_start: false,
            };
            self.running.insert(a.job_id, run);
            let tx = self.core.tx.clone();
            let (job_id, n) = (a.job_id, a.n);
            match found {
                Recovered::Ended(exit) => {
                    let _ = tx.send(LoopMsg::Done { job: job_id, attempt: n, exit });
                }
                Recovered::Adopted { pid, start } => {
                    // A cancel accepted before the restart: its stop died with the old
                    // server, so it is sent again.
                    if job.cancel_requested {
                        self.stop_for_cancel(job_id);
                    }
                    let w = exec::watch_adopted(dir, pid, start, self.core.cfg.adopt_poll);
                    forward_exit(tx, job_id, n, w);
                }
                Recovered::Lost { .. } => lost.push((job_id, n, pid, pid_start)),
            }
        }
        // A direct-mode orphan (its status is unreadable), or the job of a shim that died:
        // ended, and waited for, before its job is queued again, so that it never runs beside
        // its re-run. Side by side: each may take the whole grace.
        std::thread::scope(|s| {
            for &(_, _, pid, start) in lost.iter().filter(|l| l.2 != 0) {
                s.spawn(move || exec::end_group(pid, start, 0, exec::LEFTOVER_GRACE));
            }
        });
        for (job, attempt, _, _) in lost {
            let exit = ExitInfo { lost: true, lost_in_restart: true, ..Default::default() };
            let _ = self.core.tx.send(LoopMsg::Done { job, attempt, exit });
        }
        Ok(())
    }

    /// Runs until `shutdown` turns true.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.core.cfg.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let core = self.core.clone();
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = core.wake.notified() => {}
                m = self.rx.recv() => match m {
                    Some(m) => self.handle(m),
                    None => break,
                },
                _ = tick.tick() => self.sample(),
            }
            // Let a burst of submissions and completions gather, then place them together.
            tokio::time::sleep(core.cfg.min_pass_interval).await;
            while let Ok(m) = self.rx.try_recv() {
                self.handle(m);
            }
            self.record_unrecorded();
            if let Err(e) = self.place() {
                tracing::error!(error = %e, "placement pass failed");
            }
            self.publish();
        }
    }

    fn sample(&mut self) {
        let Some(mon) = &self.monitor else { return };
        for (i, slot) in self.core.cfg.gpus.iter().enumerate() {
            self.measured[i] = mon.sample(slot.index);
        }
        for r in self.running.values_mut() {
            if let (true, Some(m)) = (r.exclusive, self.measured[r.gpu]) {
                r.samples.push(m);
            }
        }
    }

    fn handle(&mut self, m: LoopMsg) {
        let r = match m {
            LoopMsg::Cancel(job) => {
                self.stop_for_cancel(job);
                Ok(())
            }
            LoopMsg::Done { job, attempt, exit } => self.finish(job, attempt, exit),
        };
        if let Err(e) = r {
            tracing::error!(error = %e, "handling a loop message failed");
        }
    }

    /// Stops job `job`'s running attempt for a cancel (in the background).
    fn stop_for_cancel(&self, job: JobId) {
        if let Some(r) = self.running.get(&job) {
            // A shim leads the group: spared, it waits out the job's grace and records the
            // job's end (signalled, it would die at once and its death would end the group
            // again, after the shorter leftover grace).
            let shim = matches!(self.core.cfg.supervisor, exec::Supervisor::Shim { .. });
            exec::stop_group(r.pid, r.pid_start, if shim { r.pid } else { 0 }, exec::CANCEL_GRACE);
        }
    }

    /// Records how attempt `attempt` of `job` ended. Its run (and its GPU) stays booked until
    /// the record is written: when the store fails, the end is kept and recorded again at the
    /// next pass ([`Placer::record_unrecorded`]), not lost with the job left `running`.
    fn finish(&mut self, job: JobId, attempt: u32, exit: ExitInfo) -> Result<(), ServiceError> {
        let r = self.finish_once(job, attempt, &exit);
        if r.is_err() {
            self.unrecorded.push((job, attempt, exit));
        }
        r
    }

    /// Ends whose recording failed, recorded again (each kept until it is).
    fn record_unrecorded(&mut self) {
        for (job, attempt, exit) in std::mem::take(&mut self.unrecorded) {
            if let Err(e) = self.finish(job, attempt, exit) {
                tracing::error!(job, attempt, error = %e, "recording an attempt's end failed again; retried next pass");
            }
        }
    }

    fn finish_once(&mut self, job: JobId, attempt: u32, exit: &ExitInfo) -> Result<(), ServiceError> {
        let Some(run) = self.running.get(&job).filter(|r| r.attempt == attempt) else { return Ok(()) };
        let Some(rec) = self.core.store.job(job)? else {
            self.running.remove(&job);
            return Ok(());
        };
        let stderr = exec::tail(&self.core.attempt_dir(job, attempt).join("stderr"), 64 * 1024);
        // NVML saw the card (nearly) full when it died: an OOM even without CUDA's message.
        let cap = self.core.cfg.gpus[run.gpu].spec.memory_mib;
        let card_full = self.measured[run.gpu].is_some_and(|m| m.gpu_mem_mib >= 0.98 * cap);
        let oom = exec::mentions_oom(&stderr) || card_full;
        let end = classify(&rec, run, exit, oom, self.core.cfg.max_retries);
        if exit.transient {
            self.pause_launches(job, exit.spawn_error.as_deref().unwrap_or("a passing lack of resources"));
        }
        let now = unix_now();
        let recorded = self.core.store.finish_attempt(job, attempt, &end, now)?;
        let Some(run) = self.running.remove(&job) else { return Ok(()) };
        if recorded == Some(AttemptState::Oom) {
            self.core.metrics.oom_kills.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if recorded == Some(AttemptState::Succeeded) && run.exclusive && run.profile.is_none() {
            // Readings from part of a run, spread over its whole wall time, would profile a
            // heavy app as light: the app's next job runs alone again and is observed whole.
            // (Without a driver nothing is read either way, and the wall time is whole.)
            if run.sampled_from_start || self.monitor.is_none() {
                self.record_observed(&rec, &run, now)?;
            } else {
                let detail = format!(
                    "app `{}`: its exclusive run was adopted after a restart, so its readings before the restart \
                     are lost; no profile is observed from it, and its next job runs alone to be observed",
                    rec.spec.app
                );
                tracing::warn!("{detail}");
                self.core.store.event(Some(job), "profile_not_observed", &detail, now)?;
            }
        }
        Ok(())
    }

    /// The app's profile from its exclusive run: its wall time, and NVML's samples when a
    /// driver is present; without one nothing was measured and usage is recorded as zero.
    fn record_observed(&mut self, rec: &JobRecord, run: &Run, now: f64) -> Result<(), ServiceError> {
        if self.core.profiles.get(&rec.spec.app).is_some() {
            return Ok(());
        }
        let info = AppInfo {
            name: rec.spec.app.clone(),
            input_size_mb: rec.spec.input_size_mb,
            params: rec.spec.params.clone(),
            ..Default::default()
        };
        let p = observed_profile(info, (now - run.started_unix).max(0.001), &run.samples)?;
        // A profile posted since the check above wins: it is the operator's.
        if self.core.store.add_profile(&p, ProfileSource::Observed.as_str(), now)? {
            self.core.profiles.put(p, ProfileSource::Observed);
        }
        Ok(())
    }

    /// Holds launches back after job `job`'s failed for a passing lack of resources
    /// (`why`): a tick at first, doubling with each such failure in a row, up to a minute.
    fn pause_launches(&mut self, job: JobId, why: &str) {
        self.transient_streak = self.transient_streak.saturating_add(1);
        let factor = 1u32 << self.transient_streak.saturating_sub(1).min(16);
        let pause = self.core.cfg.tick.saturating_mul(factor).min(MAX_LAUNCH_PAUSE);
        self.launch_pause_until = Some(Instant::now() + pause);
        tracing::warn!(
            job,
            pause_s = pause.as_secs_f64(),
            "the job could not start for a passing lack of resources ({why}); it is queued again, and no job \
             starts for {:.1} s",
            pause.as_secs_f64()
        );
    }

    fn gpu_busy(&self, gpu: usize) -> bool {
        self.running.values().any(|r| r.gpu == gpu)
    }

    fn exclusive_gpu(&self, gpu: usize) -> bool {
        self.running.values().any(|r| r.gpu == gpu && (r.exclusive || r.profile.is_none()))
    }

    fn place(&mut self) -> Result<(), ServiceError> {
        // Apps without a profile: one exclusive run per app, on an idle GPU. The other jobs of
        // an app whose run is on wait for it, and are left out of the window: they would fill
        // it and hide the jobs behind them from the policy, idle GPUs or not.
        let mut profiling: BTreeSet<String> =
            self.running.values().filter(|r| r.profile.is_none()).map(|r| r.app.clone()).collect();
        let mut skip: Vec<String> = profiling.iter().cloned().collect();
        let window = self.core.cfg.queue_window;
        // Of an app without a profile only the oldest job can start (its exclusive run, on an
        // idle GPU): the rest would fill a full window and hide the profiled jobs behind them
        // from the policy however much room a GPU has, until a GPU went idle (256 such jobs
        // kept a small job waiting beside a half-empty card for as long as a job ran). So a
        // full window is read again past each such app, with its oldest job kept, as long as
        // such apps fill it (a second one further back filled it again). Most passes read once.
        let mut firsts: Vec<JobRecord> = Vec::new();
        let mut queued = self.core.store.queued_except(&skip, window)?;
        self.last_queued = queued.len();
        while queued.len() >= window {
            let before = skip.len();
            for j in &queued {
                if self.core.profiles.get(&j.spec.app).is_none() && !skip.contains(&j.spec.app) {
                    skip.push(j.spec.app.clone());
                    firsts.push(j.clone());
                }
            }
            if skip.len() == before {
                break;
            }
            queued = self.core.store.queued_except(&skip, window)?;
        }
        if !firsts.is_empty() {
            queued.append(&mut firsts);
            queued.sort_by_key(|j| j.id);
        }
        if queued.is_empty() || self.launch_pause_until.is_some_and(|t| Instant::now() < t) {
            return Ok(());
        }
        let now = unix_now();
        let mut with_profile = Vec::new();
        for j in &queued {
            match self.core.profiles.get(&j.spec.app) {
                Some(p) => with_profile.push((j, p)),
                None => {
                    if profiling.contains(&j.spec.app) {
                        continue;
                    }
                    if let Some(g) = (0..self.core.cfg.gpus.len()).find(|&g| !self.gpu_busy(g)) {
                        profiling.insert(j.spec.app.clone());
                        self.start(j, None, g, true, &[j.id], now)?;
                    }
                }
            }
        }
        // The policy sees the GPUs no exclusive run holds, and the profiled waiting jobs.
        let gpu_map: Vec<usize> = (0..self.core.cfg.gpus.len()).filter(|&g| !self.exclusive_gpu(g)).collect();
        if gpu_map.is_empty() || with_profile.is_empty() {
            return Ok(());
        }
        let origin = self.core.started_unix;
        let gpus = self.gpu_states(&gpu_map, now);
        let queue: Vec<QueuedJob> = with_profile
            .iter()
            .map(|(j, p)| QueuedJob {
                id: j.id,
                app: j.spec.app.clone(),
                profile: p.clone(),
                submit_s: j.submitted_at - origin,
                restarts: j.attempts,
                avoid_apps: j.avoid_apps.clone(),
            })
            .collect();
        let view = ClusterView { now_s: now - origin, gpus: &gpus, queue: &queue };
        let t0 = Instant::now();
        // A policy that panics fails its decision, not the loop: the loop's thread would die
        // with it (and release the data dir's lock) while the API kept taking jobs.
        let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.policy.decide(&view)));
        self.core.metrics.observe_decision(t0.elapsed().as_secs_f64());
        let decision = match decided {
            Ok(d) => d,
            Err(panic) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                self.core.metrics.invalid_decisions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let detail =
                    format!("policy `{}` panicked while deciding: {why}; it placed nothing", self.policy.name());
                tracing::error!("{detail}");
                self.core.store.event(None, "policy_panic", &detail, now)?;
                Vec::new()
            }
        };
        let decision = match validate_decision(self.policy.name(), &view, &decision) {
            Ok(()) => decision,
            Err(e) => {
                self.core.metrics.invalid_decisions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(error = %e, "refused the policy's decision");
                self.core.store.event(None, "invalid_decision", &e.to_string(), now)?;
                Vec::new()
            }
        };
        // A group with a job whose peak alone passes its GPU's memory would only be killed out
        // of memory, as the simulator drops it (a policy that reads mean memory places so).
        let (decision, unfit): (Vec<dqngpu_model::Placement>, Vec<dqngpu_model::Placement>) =
            decision.into_iter().partition(|p| dqngpu_model::fits_alone(&view, p));
        for p in &unfit {
            let detail = format!(
                "policy `{}` placed jobs {:?} on GPU {} where one's peak alone cannot fit; dropped",
                self.policy.name(),
                p.jobs,
                p.gpu
            );
            tracing::warn!("{detail}");
            self.core.store.event(None, "unfit_placement", &detail, now)?;
        }
        // The slowdown budget, for every policy, before the liveness rule, as the simulator
        // applies it: groups predicted to slow a job on their GPU past it wait.
        let decision = match self.core.cfg.max_slowdown {
            Some(b) => {
                let model = &*self.core.cfg.budget_model;
                let (kept, refused) =
                    dqngpu_sim::budget::within_budget(view.now_s, view.gpus, view.queue, &decision, model, b, 1.0);
                if !refused.is_empty() {
                    let n = refused.len();
                    self.core.metrics.budget_refusals.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                    let detail = format!(
                        "{n} group(s) of policy `{}` predicted to slow a job past the {:.0}% budget; they wait",
                        self.policy.name(),
                        b * 100.0
                    );
                    tracing::info!("{detail}");
                    self.core.store.event(None, "budget_refusal", &detail, now)?;
                }
                kept
            }
            None => decision,
        };
        // Liveness: a policy that holds while a GPU is idle and a waiting job fits it gets
        // the oldest such job started for it, as the simulator does.
        if let Some(p) = self.liveness(&view, &decision, &gpu_map, now)? {
            return self.start_decided(&[p], &gpu_map, &with_profile, now).map(drop);
        }
        if self.start_decided(&decision, &gpu_map, &with_profile, now)? == 0 {
            // The guards held back every job the policy placed: that places nothing too, and a
            // job that fits an idle GPU must not wait behind it (nothing started: `view` holds).
            if let Some(p) = self.liveness(&view, &[], &gpu_map, now)? {
                self.start_decided(&[p], &gpu_map, &with_profile, now)?;
            }
        }
        Ok(())
    }

    /// The liveness rule's start for `decision` (`dqngpu_model::liveness_start`), counted and
    /// logged, or `None` when the decision stands.
    fn liveness(
        &self,
        view: &ClusterView<'_>,
        decision: &[dqngpu_model::Placement],
        gpu_map: &[usize],
        now: f64,
    ) -> Result<Option<dqngpu_model::Placement>, ServiceError> {
        let Some(p) = liveness_start(view, decision) else { return Ok(None) };
        self.core.metrics.liveness_starts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let detail = format!(
            "policy `{}` placed nothing that could start while GPU {} was idle; started the oldest waiting job \
             that fits",
            self.policy.name(),
            self.core.cfg.gpus[gpu_map[p.gpu]].index
        );
        tracing::info!(job = p.jobs[0], "{detail}");
        self.core.store.event(Some(p.jobs[0]), "liveness_start", &detail, now)?;
        Ok(Some(p))
    }

    /// What the policy sees of the GPUs in `gpu_map` at `now` (Unix s): their specs, measured
    /// usage, and running jobs with their progress.
    fn gpu_states(&self, gpu_map: &[usize], now: f64) -> Vec<GpuState> {
        let origin = self.core.started_unix;
        gpu_map
            .iter()
            .map(|&g| {
                let slot = &self.core.cfg.gpus[g];
                let running = self
                    .running
                    .iter()
                    .filter(|(_, r)| r.gpu == g)
                    .filter_map(|(id, r)| {
                        let p = r.profile.clone()?;
                        let progress = p.progress_after(now - r.started_unix);
                        Some(RunningJob {
                            id: *id,
                            profile: p,
                            progress_s: progress,
                            started_s: r.started_unix - origin,
                        })
                    })
                    .collect();
                GpuState {
                    node: slot.node.clone(),
                    index: slot.index,
                    spec: slot.spec.clone(),
                    running,
                    measured: self.measured[g],
                }
            })
            .collect()
    }

    /// Starts the jobs of a validated `decision` (GPU indices into `gpu_map`) that pass the
    /// service's guards; returns how many started.
    fn start_decided(
        &mut self,
        decision: &[dqngpu_model::Placement],
        gpu_map: &[usize],
        with_profile: &[(&JobRecord, Arc<AppProfile>)],
        now: f64,
    ) -> Result<usize, ServiceError> {
        let mut started = 0;
        let by_id: BTreeMap<JobId, (&JobRecord, Arc<AppProfile>)> =
            with_profile.iter().map(|(j, p)| (j.id, (*j, p.clone()))).collect();
        for pl in decision {
            let g = gpu_map[pl.gpu];
            for id in &pl.jobs {
                let Some((j, p)) = by_id.get(id) else { continue };
                if self.guard_allows(g, j, p) {
                    started += usize::from(self.start(j, Some(p.clone()), g, false, &pl.jobs, now)?);
                } else {
                    self.core.metrics.guarded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        Ok(started)
    }

    /// The memory and avoid-list guards.
    fn guard_allows(&self, gpu: usize, job: &JobRecord, p: &AppProfile) -> bool {
        let here: Vec<&Run> = self.running.values().filter(|r| r.gpu == gpu).collect();
        if here.is_empty() {
            return true;
        }
        let mem: f64 = here.iter().filter_map(|r| r.profile.as_ref()).map(|q| q.peak_mem().0).sum();
        if mem + p.peak_mem().0 > self.core.cfg.gpus[gpu].spec.memory_mib + 1e-9 {
            return false;
        }
        !here.iter().any(|r| job.avoid_apps.contains(&r.app) || r.avoid_apps.contains(&job.spec.app))
    }

    fn start(
        &mut self,
        j: &JobRecord,
        profile: Option<Arc<AppProfile>>,
        gpu: usize,
        exclusive: bool,
        group: &[JobId],
        now: f64,
    ) -> Result<bool, ServiceError> {
        let co_apps: Vec<String> = self.running.values().filter(|r| r.gpu == gpu).map(|r| r.app.clone()).collect();
        let Some(att) =
            self.core.store.start_attempt(j.id, gpu as u32, &co_apps, exclusive, self.policy.name(), group, now)?
        else {
            return Ok(false);
        };
        self.core.metrics.attempts_started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let launch = Launch {
            job: j.id,
            attempt: att.n,
            cuda_index: self.core.cfg.gpus[gpu].index,
            argv: j.spec.command.clone(),
            env: j.spec.env.clone(),
            mps_thread_pct: self.core.cfg.mps_thread_pct,
            work_dir: self.core.work_dir(j.id),
            attempt_dir: self.core.attempt_dir(j.id, att.n),
        };
        let mut run = Run {
            attempt: att.n,
            gpu,
            app: j.spec.app.clone(),
            profile,
            exclusive,
            co_apps,
            avoid_apps: j.avoid_apps.clone(),
            started_unix: now,
            pid: 0,
            pid_start: 0,
            samples: Vec::new(),
            sampled_from_start: true,
        };
        let tx = self.core.tx.clone();
        match exec::launch(&self.core.cfg.supervisor, &launch) {
            Ok(s) => {
                if s.pid != 0 {
                    self.transient_streak = 0;
                }
                run.pid = s.pid;
                run.pid_start = s.pid_start;
                self.running.insert(j.id, run);
                forward_exit(tx, j.id, att.n, s.wait);
                // After the run is booked and its exit watched: a store that fails here must
                // not leave a running process off the books (a restart then finds the pid in
                // the attempt's owner file).
                if s.pid != 0 {
                    if let Err(e) = self.core.store.set_attempt_pid(j.id, att.n, s.pid, s.pid_start) {
                        tracing::error!(job = j.id, attempt = att.n, error = %e, "could not record the attempt's pid");
                    }
                }
            }
            Err(e) => {
                let transient = e.is_transient();
                if !transient {
                    tracing::error!(job = j.id, error = %e, "could not launch");
                }
                self.running.insert(j.id, run);
                let exit = ExitInfo {
                    spawn_error: Some(format!("the service could not prepare the job: {e}")),
                    transient,
                    ..Default::default()
                };
                let _ = tx.send(LoopMsg::Done { job: j.id, attempt: att.n, exit });
            }
        }
        Ok(true)
    }

    fn publish(&self) {
        let now = unix_now();
        let gpus = self
            .core
            .cfg
            .gpus
            .iter()
            .enumerate()
            .map(|(g, slot)| {
                let here: Vec<(&JobId, &Run)> = self.running.iter().filter(|(_, r)| r.gpu == g).collect();
                let demand = here.iter().filter_map(|(_, r)| {
                    let p = r.profile.as_ref()?;
                    Some(*p.demand_at((now - r.started_unix).max(0.0)))
                });
                GpuView {
                    index: slot.index,
                    name: slot.spec.name.clone(),
                    memory_mib: slot.spec.memory_mib,
                    capacity: slot.spec.capacity(),
                    jobs: here
                        .iter()
                        .map(|(id, r)| RunningView {
                            id: **id,
                            app: r.app.clone(),
                            attempt: r.attempt,
                            exclusive: r.exclusive || r.profile.is_none(),
                            running_s: (now - r.started_unix).max(0.0),
                        })
                        .collect(),
                    profile_demand: demand.fold(Resources::ZERO, |a, d| a.add(&d)),
                    measured: self.measured[g],
                }
            })
            .collect();
        let snap = ClusterSnapshot { policy: self.policy.name().to_string(), gpus, queued: self.last_queued };
        if let Ok(mut s) = self.core.snapshot.write() {
            *s = snap;
        }
    }
}

fn forward_exit(tx: mpsc::UnboundedSender<LoopMsg>, job: JobId, attempt: u32, w: tokio::task::JoinHandle<ExitInfo>) {
    tokio::spawn(async move {
        let exit = w.await.unwrap_or(ExitInfo { lost: true, ..Default::default() });
        let _ = tx.send(LoopMsg::Done { job, attempt, exit });
    });
}

/// How an attempt ended and what the job does next (but for a cancel: see the store).
fn classify(rec: &JobRecord, run: &Run, exit: &ExitInfo, oom: bool, max_retries: u32) -> AttemptEnd {
    let retry_or_fail = |failures: u32| if failures <= max_retries { JobState::Queued } else { JobState::Failed };
    let base = AttemptEnd {
        state: AttemptState::Failed,
        job_state: JobState::Failed,
        exit_code: exit.exit_code,
        signal: exit.signal,
        error: None,
        count_failure: false,
        avoid: Vec::new(),
    };
    // A cancel is not decided here: `Store::finish_attempt` reads it in the transaction that
    // records the end, so one that lands after `rec` was read wins too.
    if exit.success() {
        return AttemptEnd { state: AttemptState::Succeeded, job_state: JobState::Succeeded, ..base };
    }
    if exit.lost {
        if exit.lost_in_restart {
            let error = Some("lost while the service restarted; re-queued".to_string());
            return AttemptEnd { state: AttemptState::Lost, job_state: JobState::Queued, error, ..base };
        }
        let failures = rec.failures + 1;
        let error = Some("its supervisor vanished without an exit status".to_string());
        return AttemptEnd {
            state: AttemptState::Lost,
            job_state: retry_or_fail(failures),
            error,
            count_failure: true,
            ..base
        };
    }
    if let (Some(e), true) = (&exit.spawn_error, exit.transient) {
        // The machine ran short (out of file descriptors, a full disk), not the job: queued
        // again, with no failure counted.
        let error = Some(format!("{e}; queued again (a passing lack of resources, not the job's failure)"));
        return AttemptEnd { job_state: JobState::Queued, error, ..base };
    }
    if let Some(e) = &exit.spawn_error {
        // A program that cannot start will not start on a retry either: failed at once, and
        // counted as the failed attempt it is.
        return AttemptEnd { error: Some(e.clone()), count_failure: true, ..base };
    }
    let failures = rec.failures + 1;
    if oom {
        let error = Some(format!("GPU out of memory beside [{}]", run.co_apps.join(", ")));
        return AttemptEnd {
            state: AttemptState::Oom,
            job_state: retry_or_fail(failures),
            error,
            count_failure: true,
            avoid: run.co_apps.clone(),
            ..base
        };
    }
    let error = Some(match (exit.exit_code, exit.signal) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "ended without a status".to_string(),
    });
    AttemptEnd { state: AttemptState::Failed, job_state: retry_or_fail(failures), error, count_failure: true, ..base }
}

/// The profile of an exclusive run of `wall` seconds from its readings (`samples`, spread
/// evenly over it; none: one reading of zero usage). A profile's samples are at most an hour
/// apart (`MAX_INTERVAL_S`), so a run of over an hour with fewer readings than hours (none
/// without a driver, or NVML reading nothing) repeats each reading over the hours it spans:
/// refused, the app stayed unprofiled, and every later job of it ran alone, one at a time,
/// beside idle GPUs.
pub fn observed_profile(info: AppInfo, wall: f64, samples: &[Resources]) -> Result<AppProfile, ServiceError> {
    let samples = if samples.is_empty() { &[Resources::ZERO][..] } else { samples };
    let per = (wall / samples.len() as f64 / dqngpu_model::profile::MAX_INTERVAL_S).ceil().max(1.0) as usize;
    let samples: Vec<Resources> = samples.iter().flat_map(|s| std::iter::repeat_n(*s, per)).collect();
    let interval = wall / samples.len() as f64;
    Ok(AppProfile::new(info, interval, samples)?)
}

/// Where an attempt keeps its files.
pub fn attempt_dir(data_dir: &std::path::Path, job: JobId, n: u32) -> PathBuf {
    data_dir.join("jobs").join(job.to_string()).join(format!("attempt-{n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of 4,012 s with no reading (no driver, or NVML reading nothing) was one sample of
    /// 4,012 s, which a profile refuses (at most an hour apart): the app stayed unprofiled.
    /// It is two samples of 2,006 s now, and the run's length is kept.
    #[test]
    fn a_run_of_over_an_hour_with_few_readings_still_gives_a_profile() {
        let info = || AppInfo { name: "longapp".into(), ..Default::default() };
        let p = observed_profile(info(), 4012.13, &[]).unwrap();
        assert_eq!(p.samples.len(), 2);
        assert!((p.interval_s * 2.0 - 4012.13).abs() < 1e-6, "{}", p.interval_s);
        let busy = Resources::new(80.0, 5000.0, 80.0, 100.0);
        let p = observed_profile(info(), 3.0 * 3600.0 + 1.0, &[busy, Resources::ZERO]).unwrap();
        assert_eq!(p.samples.len(), 4);
        assert_eq!((p.samples[1].gpu_util_pct, p.samples[2].gpu_util_pct), (80.0, 0.0), "each reading over its share");
        let short = observed_profile(info(), 12.0, &[busy; 6]).unwrap();
        assert_eq!((short.samples.len(), short.interval_s), (6, 2.0));
    }
}
