//! The DeepRM environment: machine, job slots, backlog, image observation, step.

use super::{ClassicJob, DeepRmParams, JobSequence};
use crate::env::{Env, Task, Transition};

/// A job in the system.
#[derive(Debug, Clone)]
struct Job {
    len: usize,
    res: Vec<usize>,
    enter: usize,
    /// Start and finish times once allocated.
    span: Option<(usize, usize)>,
}

/// One episode of DeepRM's environment over one job sequence.
#[derive(Debug, Clone)]
pub struct ClassicEnv<'a> {
    p: &'a DeepRmParams,
    seq: &'a JobSequence,
    seq_idx: usize,
    now: usize,
    /// Free slots per future step (row) and resource.
    avbl: Vec<Vec<usize>>,
    /// Every job that entered, by id.
    jobs: Vec<Job>,
    running: Vec<usize>,
    slots: Vec<Option<usize>>,
    backlog: std::collections::VecDeque<usize>,
    since_new: usize,
    done: bool,
}

impl<'a> ClassicEnv<'a> {
    /// A fresh episode on `seq`.
    pub fn new(p: &'a DeepRmParams, seq: &'a JobSequence) -> Self {
        ClassicEnv {
            p,
            seq,
            seq_idx: 0,
            now: 0,
            avbl: vec![vec![p.res_slot; p.num_res]; p.time_horizon],
            jobs: Vec::new(),
            running: Vec::new(),
            slots: vec![None; p.num_nw],
            backlog: Default::default(),
            since_new: 0,
            done: false,
        }
    }

    /// The waiting job in slot `i`.
    pub fn slot(&self, i: usize) -> Option<ClassicJob> {
        self.slots
            .get(i)
            .copied()
            .flatten()
            .map(|j| ClassicJob { len: self.jobs[j].len, res: self.jobs[j].res.clone() })
    }

    /// Free slots of resource `r` at `t` steps from now.
    pub fn free(&self, t: usize, r: usize) -> usize {
        self.avbl[t][r]
    }

    /// True when the job in slot `i` fits on the machine from now for its whole length.
    pub fn fits_now(&self, i: usize) -> bool {
        self.slots[i].is_some_and(|j| self.fits_at(&self.jobs[j], 0))
    }

    fn fits_at(&self, job: &Job, t: usize) -> bool {
        (t..t + job.len).all(|row| (0..self.p.num_res).all(|r| self.avbl[row][r] >= job.res[r]))
    }

    /// The earliest start (steps from now) at which slot `i`'s job fits, as DeepRM searches.
    fn earliest_fit(&self, i: usize) -> Option<usize> {
        let job = &self.jobs[self.slots[i]?];
        (0..self.p.time_horizon.saturating_sub(job.len)).find(|&t| self.fits_at(job, t))
    }

    /// Per job that finished: (enter, finish, len).
    pub fn finished(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        // DeepRM records a job's finish time when it is allocated.
        self.jobs.iter().filter_map(|j| j.span.map(|(_, f)| (j.enter, f, j.len)))
    }

    /// Jobs that entered but were never started: (enter, len).
    pub fn unstarted(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.jobs.iter().filter(|j| j.span.is_none()).map(|j| (j.enter, j.len))
    }

    /// The current time step.
    pub fn now(&self) -> usize {
        self.now
    }

    /// True when the episode ended.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn reward(&self) -> f64 {
        let waiting = self.slots.iter().flatten().chain(self.backlog.iter());
        -self.running.iter().chain(waiting).map(|&j| 1.0 / self.jobs[j].len as f64).sum::<f64>()
    }

    fn allocate(&mut self, i: usize, t: usize) {
        let Some(j) = self.slots[i].take() else { return };
        let (len, res) = (self.jobs[j].len, self.jobs[j].res.clone());
        for row in t..t + len {
            for (r, need) in res.iter().enumerate() {
                self.avbl[row][r] -= need;
            }
        }
        self.jobs[j].span = Some((self.now + t, self.now + t + len));
        self.running.push(j);
        self.slots[i] = self.backlog.pop_front();
    }

    fn move_on(&mut self) {
        self.now += 1;
        self.avbl.remove(0);
        self.avbl.push(vec![self.p.res_slot; self.p.num_res]);
        let now = self.now;
        let jobs = &self.jobs;
        self.running.retain(|&j| jobs[j].span.is_some_and(|(_, f)| f > now));
        self.since_new = (self.since_new + 1).min(self.p.max_track_since_new);
        self.seq_idx += 1;
        let idle = self.running.is_empty() && self.slots.iter().all(Option::is_none) && self.backlog.is_empty();
        if (self.seq_idx >= self.p.simu_len && idle) || self.now > self.p.episode_max_length {
            self.done = true;
            return;
        }
        if let Some(Some(job)) = self.seq.get(self.seq_idx) {
            let id = self.jobs.len();
            let free = self.slots.iter().position(Option::is_none);
            let admitted = match free {
                Some(s) => {
                    self.slots[s] = Some(id);
                    true
                }
                None if self.backlog.len() < self.p.backlog_size => {
                    self.backlog.push_back(id);
                    true
                }
                None => false, // DeepRM drops the job when the backlog is full.
            };
            if admitted {
                self.jobs.push(Job { len: job.len, res: job.res.clone(), enter: self.now, span: None });
            }
            self.since_new = 0;
        }
    }

    /// Average slowdown of the finished jobs (0 when none finished).
    pub fn avg_slowdown(&self) -> f64 {
        let (n, sum) = self.finished().fold((0usize, 0.0), |(n, s), (e, f, l)| (n + 1, s + (f - e) as f64 / l as f64));
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    }
}

impl Env for ClassicEnv<'_> {
    fn obs_len(&self) -> usize {
        self.p.obs_len()
    }

    fn n_actions(&self) -> usize {
        self.p.num_nw + 1
    }

    fn observe(&self, obs: &mut [f32], mask: &mut [bool]) {
        let p = self.p;
        let w = p.image_width();
        obs.fill(0.0);
        for t in 0..p.time_horizon {
            let row = &mut obs[t * w..(t + 1) * w];
            let mut col = 0;
            for r in 0..p.num_res {
                let used = p.res_slot - self.avbl[t][r];
                row[col..col + used].fill(1.0);
                col += p.res_slot;
                for s in &self.slots {
                    if let Some(j) = s.map(|j| &self.jobs[j]) {
                        if t < j.len {
                            row[col..col + j.res[r]].fill(1.0);
                        }
                    }
                    col += p.max_job_size;
                }
            }
            let bw = p.backlog_width();
            let in_row = self.backlog.len().saturating_sub(t * bw).min(bw);
            row[col..col + in_row].fill(1.0);
            col += bw;
            row[col] = self.since_new as f32 / p.max_track_since_new as f32;
        }
        for (i, m) in mask[..p.num_nw].iter_mut().enumerate() {
            *m = self.earliest_fit(i).is_some();
        }
        mask[p.num_nw] = true;
    }

    fn step(&mut self, action: usize) -> Transition {
        if self.done {
            return Transition { reward: 0.0, done: true };
        }
        match (action < self.p.num_nw).then(|| self.earliest_fit(action)).flatten() {
            Some(t) => {
                self.allocate(action, t);
                Transition { reward: 0.0, done: false }
            }
            None => {
                self.move_on();
                Transition { reward: if self.done { 0.0 } else { self.reward() }, done: self.done }
            }
        }
    }

    fn score(&self) -> f64 {
        self.avg_slowdown()
    }
}

/// DeepRM training over fixed job sets.
#[derive(Debug, Clone)]
pub struct ClassicTask {
    /// Parameters.
    pub params: DeepRmParams,
    /// The job sets.
    pub sets: Vec<JobSequence>,
}

impl Task for ClassicTask {
    type Env<'a> = ClassicEnv<'a>;

    fn jobsets(&self) -> usize {
        self.sets.len()
    }

    fn make(&self, index: usize) -> Self::Env<'_> {
        ClassicEnv::new(&self.params, &self.sets[index])
    }

    fn obs_len(&self) -> usize {
        self.params.obs_len()
    }

    fn n_actions(&self) -> usize {
        self.params.num_nw + 1
    }
}
