//! One step of the clock: each GPU's rates from the interference model, progress, finishes,
//! arrivals; a jump when nothing runs.

use dqngpu_interference::JobLoad;
use dqngpu_model::{Resources, RunningJob};

use super::{Culprits, Simulator, TickTrigger};
use crate::event::SimEvent;
use crate::step::{advance, gpu_rates, time_to_finish, Advance};

impl Simulator {
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
    /// Returns the step's GPU utilisation and memory in use, % (see [`UsageTrace`](crate::UsageTrace)).
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

    /// Moves every job submitted by now into the queue.
    pub(super) fn admit_arrivals(&mut self) {
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
