//! The image state and combination actions of DqnGPU (thesis IV.2, Fig. 7), and DeepRM Max /
//! Mean's single-job version over constant demands.
//!
//! For the GPU being decided, each image has `time_horizon` rows of `row_s` seconds of
//! profile time and `res_slots` cells per resource (a cell is 1/`res_slots` of that GPU's
//! capacity). The network scores every action from the same inputs — the cluster image of
//! what already runs there (running jobs' future demands from their profiles at their
//! progress points), the combined image of the action's jobs, and a few scalars — with one
//! shared MLP, so the 2^M - 1 combination actions of the thesis need no more weights than one.

use std::sync::Arc;

use dqngpu_model::{AppProfile, ClusterView, GpuSpec, JobId, QueuedJob, Resources};
use serde::{Deserialize, Serialize};

use super::guard::{GuardJob, Prediction, SlowdownGuard};
use super::legal;

/// Which agent an encoding is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    /// The thesis's agent: time-varying profiles, combination actions.
    Dqngpu,
    /// DeepRM fed each job's peak usage as a constant demand, one job per action.
    DeeprmMax,
    /// DeepRM fed each job's mean usage as a constant demand, one job per action.
    DeeprmMean,
}

impl AgentKind {
    /// All three.
    pub const ALL: [AgentKind; 3] = [AgentKind::Dqngpu, AgentKind::DeeprmMax, AgentKind::DeeprmMean];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Dqngpu => "dqngpu",
            AgentKind::DeeprmMax => "deeprm-max",
            AgentKind::DeeprmMean => "deeprm-mean",
        }
    }

    /// Parses a CLI name (trimmed, any case; `_` for `-` too).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "dqngpu" => Some(AgentKind::Dqngpu),
            "deeprm-max" | "deeprm_max" => Some(AgentKind::DeeprmMax),
            "deeprm-mean" | "deeprm_mean" => Some(AgentKind::DeeprmMean),
            _ => None,
        }
    }

    /// Every agent's CLI name.
    pub fn names() -> Vec<String> {
        Self::ALL.iter().map(|a| a.name().to_string()).collect()
    }

    /// True for the thesis's combination actions.
    pub fn combinations(self) -> bool {
        self == AgentKind::Dqngpu
    }
}

impl std::str::FromStr for AgentKind {
    type Err = dqngpu_model::ModelError;

    /// [`AgentKind::from_name`]; an unknown name is a usage error listing the agents.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AgentKind::from_name(s).ok_or_else(|| dqngpu_model::ModelError::UnknownName {
            what: "agent",
            name: s.to_string(),
            valid: AgentKind::names(),
        })
    }
}

impl std::fmt::Display for AgentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
/// The most rows (time horizon T) or cells per resource an image may have: ten and twenty
/// times the thesis's 20 and 10, and small enough that an observation fits in memory (at
/// M = 8, 256 actions of 2 x 4 x 200 x 200 cells: 82 million numbers).
pub const MAX_IMAGE_SIDE: usize = 200;

/// The most job slots M (2^M actions are scored every decision).
pub const MAX_JOB_SLOTS: usize = 8;

/// The state/action encoding over the simulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuEncoding {
    /// Agent.
    pub agent: AgentKind,
    /// Image rows (T).
    pub time_horizon: usize,
    /// Seconds of profile time per image row.
    pub row_s: f64,
    /// Cells per resource.
    pub res_slots: usize,
    /// Waiting-job slots shown (M).
    pub job_slots: usize,
    /// The backlog (jobs beyond the M slots) is shown as min(count, this) / this.
    pub backlog_cap: usize,
    /// DqnGPU's slowdown guard (`None`: off, the thesis's agent as published).
    #[serde(default)]
    pub guard: Option<SlowdownGuard>,
}

/// Scalars appended to each action's images: hold flag, jobs in the action / M, backlog,
/// per resource the share of rows where the action would overcommit the GPU, and the
/// guard's predicted worst slowdown (0 without a guard).
const EXTRAS: usize = 8;

/// The predicted-slowdown input saturates at this slowdown.
const SLOWDOWN_INPUT_CAP: f64 = 0.1;

impl GpuEncoding {
    /// The defaults for `agent`: T = 20 rows of 15 s (a 300 s horizon, the longest thesis
    /// profiles), 10 cells per resource, M = 5; DqnGPU with the 2% slowdown guard, DeepRM
    /// Max / Mean as the thesis ran them (no guard).
    pub fn new(agent: AgentKind) -> Self {
        let guard = agent.combinations().then(SlowdownGuard::default);
        GpuEncoding { agent, time_horizon: 20, row_s: 15.0, res_slots: 10, job_slots: 5, backlog_cap: 30, guard }
    }

    /// Checks the values are usable (M is at most 8: 2^M actions are scored every decision;
    /// an image side is at most [`MAX_IMAGE_SIDE`]).
    pub fn validate(&self) -> Result<(), crate::RlError> {
        let bad = |field, message: String| Err(crate::RlError::Config { field, message });
        if self.time_horizon == 0 || self.res_slots == 0 || self.backlog_cap == 0 {
            return bad("encoding", "time horizon, resource slots and backlog cap must be positive".into());
        }
        if !(1..=MAX_JOB_SLOTS).contains(&self.job_slots) {
            return bad("job_slots", format!("M must be within 1..={MAX_JOB_SLOTS}, got {}", self.job_slots));
        }
        // Checked before any image is allocated: a typo (`--horizon 1000000000`) is refused
        // instead of aborting on an allocation of terabytes.
        if self.time_horizon > MAX_IMAGE_SIDE || self.res_slots > MAX_IMAGE_SIDE {
            return bad(
                "encoding",
                format!(
                    "time horizon ({}) and resource slots ({}) must each be at most {MAX_IMAGE_SIDE}",
                    self.time_horizon, self.res_slots
                ),
            );
        }
        if !(self.row_s.is_finite() && self.row_s > 0.0) {
            return bad("row_s", format!("must be a positive number of seconds, got {}", self.row_s));
        }
        if let Some(g) = &self.guard {
            g.validate()?;
        }
        Ok(())
    }

    /// Inputs per action: two images (cluster, action) of 4 resources, plus the scalars.
    pub fn action_len(&self) -> usize {
        2 * 4 * self.time_horizon * self.res_slots + EXTRAS
    }

    /// Observation length (all actions' inputs).
    pub fn obs_len(&self) -> usize {
        self.n_actions() * self.action_len()
    }

    /// Number of actions: hold plus every non-empty subset of the M slots (DqnGPU), or hold
    /// plus one per slot (DeepRM).
    pub fn n_actions(&self) -> usize {
        if self.agent.combinations() {
            1 << self.job_slots
        } else {
            self.job_slots + 1
        }
    }

    /// The slot subset (bit i = slot i) of action `a` (0 = hold).
    pub fn subset(&self, a: usize) -> u32 {
        if self.agent.combinations() || a == 0 {
            a as u32
        } else {
            1 << (a - 1)
        }
    }

    /// The demand rows (T x 4) this agent believes `profile` has from `progress_s` on, using
    /// rate 1: memory is the maximum within each row, the others the mean; the last row also
    /// covers the rest of the profile beyond the horizon (its memory peak), so a fit over the
    /// horizon is a fit for the whole run.
    pub fn rows(&self, profile: &AppProfile, progress_s: f64) -> Vec<Resources> {
        let t = self.time_horizon;
        let constant = match self.agent {
            AgentKind::Dqngpu => None,
            AgentKind::DeeprmMax => Some(profile.summary().peak),
            AgentKind::DeeprmMean => Some(profile.summary().mean),
        };
        let n = profile.samples.len();
        let first = profile.sample_index(progress_s.max(0.0));
        let remaining = profile.solo_s() - progress_s;
        let mut out = vec![Resources::ZERO; t];
        for (r, row) in out.iter_mut().enumerate() {
            let start = r as f64 * self.row_s;
            if start >= remaining {
                break;
            }
            if let Some(c) = constant {
                *row = c;
                continue;
            }
            let from = (first + (start / profile.interval_s) as usize).min(n - 1);
            let to = if r + 1 == t {
                n
            } else {
                (first + ((start + self.row_s) / profile.interval_s).ceil() as usize).clamp(from + 1, n)
            };
            let mut sum = Resources::ZERO;
            let mut mem: f64 = 0.0;
            for s in &profile.samples[from..to] {
                sum = sum.add(s);
                mem = mem.max(s.gpu_mem_mib);
            }
            let mut mean = sum.scale(1.0 / (to - from) as f64);
            mean.gpu_mem_mib = mem;
            *row = mean;
        }
        out
    }
}

/// A job on (or being placed on) the GPU being decided.
#[derive(Debug, Clone)]
pub struct Resident {
    /// App name.
    pub app: String,
    /// Its demand rows.
    pub rows: Vec<Resources>,
    /// Its profile.
    pub profile: Arc<AppProfile>,
    /// Progress, s of solo time.
    pub progress_s: f64,
    /// Wall time this run has lost to sharing so far, s.
    pub lost_s: f64,
}

/// What the encoder knows of one GPU during a decision round.
#[derive(Debug, Clone)]
pub struct GpuRound {
    /// The GPU.
    pub spec: GpuSpec,
    /// Capacity of the GPU.
    pub capacity: Resources,
    /// Jobs running there (with those placed earlier in this round).
    pub residents: Vec<Resident>,
}

impl GpuRound {
    /// The GPU `g` of `view` as the encoder sees it.
    pub fn from_view(enc: &GpuEncoding, view: &ClusterView<'_>, g: usize) -> Self {
        let gpu = &view.gpus[g];
        let residents = gpu
            .running
            .iter()
            .map(|j| Resident {
                app: j.profile.app.name.clone(),
                rows: enc.rows(&j.profile, j.progress_s),
                profile: j.profile.clone(),
                progress_s: j.progress_s,
                lost_s: (view.now_s - j.started_s - j.progress_s).max(0.0),
            })
            .collect();
        GpuRound { spec: gpu.spec.clone(), capacity: gpu.spec.capacity(), residents }
    }

    /// Sum of the residents' rows.
    fn load(&self, t: usize) -> Vec<Resources> {
        let mut sum = vec![Resources::ZERO; t];
        for r in &self.residents {
            for (s, v) in sum.iter_mut().zip(&r.rows) {
                *s = s.add(v);
            }
        }
        sum
    }
}

/// A waiting job shown in a slot.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Job id.
    pub id: JobId,
    /// App name.
    pub app: String,
    /// Apps it was killed out of memory beside.
    pub avoid: Vec<String>,
    /// Its demand rows from the start.
    pub rows: Vec<Resources>,
    /// Its profile.
    pub profile: Arc<AppProfile>,
}

impl Candidate {
    /// A candidate from a queued job.
    pub fn new(enc: &GpuEncoding, q: &QueuedJob) -> Self {
        Candidate {
            id: q.id,
            app: q.app.clone(),
            avoid: q.avoid_apps.clone(),
            rows: enc.rows(&q.profile, 0.0),
            profile: q.profile.clone(),
        }
    }
}

/// Writes every action's inputs into `obs` and which actions are allowed into `mask` (the
/// rules in `legal`). Hold is always allowed except on an idle GPU while some job
/// fits there.
pub fn encode(
    enc: &GpuEncoding,
    round: &GpuRound,
    slots: &[Candidate],
    backlog: usize,
    obs: &mut [f32],
    mask: &mut [bool],
) {
    let t = enc.time_horizon;
    let load = round.load(t);
    let grid = Grid { enc, cap: round.capacity.to_array() };
    let al = enc.action_len();
    obs.fill(0.0);
    let cluster = grid.cluster_image(&load);
    let backlog_v = backlog.min(enc.backlog_cap) as f32 / enc.backlog_cap as f32;
    let mut any_fits = false;
    let mut guard = GuardMemo::default();
    for a in 0..enc.n_actions() {
        let set = enc.subset(a);
        let members: Vec<&Candidate> =
            (0..enc.job_slots).filter(|i| set & (1 << i) != 0).filter_map(|i| slots.get(i)).collect();
        let exists = members.len() == set.count_ones() as usize;
        let x = &mut obs[a * al..(a + 1) * al];
        x[..cluster.len()].copy_from_slice(&cluster);
        let usage = grid.action_image(x, &load, &members);
        let e = 8 * grid.img();
        x[e] = if a == 0 { 1.0 } else { 0.0 };
        x[e + 1] = members.len() as f32 / enc.job_slots as f32;
        x[e + 2] = backlog_v;
        for k in 0..4 {
            x[e + 3 + k] = usage.over[k] as f32 / t as f32;
        }
        if a == 0 {
            continue;
        }
        let mut allowed = exists && !members.is_empty() && legal::allowed(enc, round, &members, &usage, &grid.cap);
        if let (Some(g), true) = (&enc.guard, allowed) {
            allowed = match guard.predict(g, round, set, &members) {
                Some(p) => {
                    x[e + 7] = (p.worst_slowdown / SLOWDOWN_INPUT_CAP).min(1.0) as f32;
                    p.admitted
                }
                None => false,
            };
        }
        mask[a] = allowed;
        any_fits |= mask[a];
    }
    mask[0] = !(round.residents.is_empty() && any_fits);
}

/// The images' cell grid: `res_slots` cells per resource, each 1/`res_slots` of the GPU.
struct Grid<'a> {
    enc: &'a GpuEncoding,
    cap: [f64; 4],
}

impl Grid<'_> {
    /// Cells of one resource's image (rows x cells).
    fn img(&self) -> usize {
        self.enc.time_horizon * self.enc.res_slots
    }

    /// Cells filled by `v` of resource `k`.
    fn cell(&self, v: f64, k: usize) -> usize {
        if self.cap[k] <= 0.0 {
            0
        } else {
            ((v / self.cap[k] * self.enc.res_slots as f64).ceil().max(0.0) as usize).min(self.enc.res_slots)
        }
    }

    /// The cluster image of what already runs, shared by every action.
    fn cluster_image(&self, load: &[Resources]) -> Vec<f32> {
        let (img, w) = (self.img(), self.enc.res_slots);
        let mut cluster = vec![0.0f32; 4 * img];
        for (r, row) in load.iter().enumerate() {
            for (k, v) in row.to_array().iter().enumerate() {
                let c = self.cell(*v, k);
                cluster[k * img + r * w..k * img + r * w + c].fill(1.0);
            }
        }
        cluster
    }

    /// Writes the combined image of `members` into `x` and returns how the GPU would be used.
    fn action_image(&self, x: &mut [f32], load: &[Resources], members: &[&Candidate]) -> legal::Usage {
        let (t, img, w) = (self.enc.time_horizon, self.img(), self.enc.res_slots);
        let mut add = vec![Resources::ZERO; t];
        for c in members {
            for (s, v) in add.iter_mut().zip(&c.rows) {
                *s = s.add(v);
            }
        }
        let mut usage = legal::Usage::default();
        for r in 0..t {
            let both = load[r].add(&add[r]).to_array();
            for (k, v) in add[r].to_array().iter().enumerate() {
                let c = self.cell(*v, k);
                let base = 4 * img + k * img + r * w;
                x[base..base + c].fill(1.0);
                if both[k] > self.cap[k] + 1e-9 {
                    usage.over[k] += 1;
                }
                usage.area[k] += both[k];
            }
        }
        usage
    }
}

/// The guard's verdicts within one round: a group holding a refused group is refused too
/// (more jobs only slow each other more); subsets come first in action order, so this skips
/// predictions.
#[derive(Default)]
struct GuardMemo {
    refused: Vec<u32>,
}

impl GuardMemo {
    /// The guard's prediction for `members` (action subset `set`), or None when a subset was
    /// already refused.
    fn predict(
        &mut self,
        guard: &SlowdownGuard,
        round: &GpuRound,
        set: u32,
        members: &[&Candidate],
    ) -> Option<Prediction> {
        if self.refused.iter().any(|&r| r & !set == 0) {
            return None;
        }
        let p = guard.predict(&round.spec, &guard_jobs(round, members));
        if !p.admitted {
            self.refused.push(set);
        }
        Some(p)
    }
}

/// The GPU's residents and `members` (from their start) as the guard sees them.
fn guard_jobs<'a>(round: &'a GpuRound, members: &[&'a Candidate]) -> Vec<GuardJob<'a>> {
    let residents = round.residents.iter().map(|r| GuardJob {
        app: &r.app,
        profile: &r.profile,
        progress_s: r.progress_s,
        lost_s: r.lost_s,
    });
    let new = members.iter().map(|c| GuardJob { app: &c.app, profile: &c.profile, progress_s: 0.0, lost_s: 0.0 });
    residents.chain(new).collect()
}
