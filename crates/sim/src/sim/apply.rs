//! Taking a policy's decision: validated, unfit groups dropped, the slowdown budget and the
//! liveness rule applied, then the placed jobs started.

use dqngpu_model::{fits_alone, liveness_start, validate_decision, GpuState, JobId, Placement, QueuedJob, RunningJob};

use super::{Culprits, Fault, Simulator};
use crate::budget::within_budget;
use crate::error::SimError;
use crate::event::SimEvent;

impl Simulator {
    /// Validates and applies a decision: starts the placed jobs now. A job that does not fit
    /// in its GPU's memory is killed out of memory at once (newest placed first). A decision
    /// that places nothing while a GPU is idle and a waiting job fits it starts that job
    /// instead ([`dqngpu_model::liveness_start`]; counted in
    /// [`SimResult::liveness_starts`](crate::SimResult::liveness_starts)).
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

    /// Puts job `j` in the queue, keeping arrival order (submit time, then job-set order).
    pub(super) fn enqueue(&mut self, j: usize) {
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
}
