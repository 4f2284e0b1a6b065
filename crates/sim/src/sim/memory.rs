//! GPU memory: a GPU whose jobs need more than it has kills one out of memory, and the
//! memory log records what each GPU holds.

use super::{Culprits, Fault, Simulator};
use crate::error::SimError;
use crate::event::{JobMemory, SimEvent};

impl Simulator {
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
    pub(super) fn enforce_memory(&mut self, g: usize, culprits: Culprits) {
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
        // By the profiles' app names, as the view shows residents and the policies compare
        // them (a directory library may key two profiles of one app by their file stems).
        let neighbours: Vec<String> =
            self.books[g].slots.iter().map(|&o| self.jobs[o].profile.app.name.clone()).collect();
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

    /// Writes a `Memory` event for GPU `g` if its memory in use or its job set changed.
    pub(super) fn log_memory(&mut self, g: usize) {
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
}
