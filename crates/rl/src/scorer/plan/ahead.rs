//! The future the plan took, kept whole: each moment its decider was asked inside it, with what
//! it decided, so that at the next decision the promise's future is read, not played again,
//! where the cluster is at one of those moments. It is the same future (the same decider from
//! the same state), and known before the other candidates are played, it is the bar they are
//! abandoned against from their start.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

use dqngpu_model::{ClusterView, JobId, Placement, Policy};
use dqngpu_sim::SimResult;
use foldhash::fast::FixedState;

/// What a simulation from a view goes on from, as words: the clock, each GPU (which one, and
/// its running jobs: id, progress, start) and the queue (id, submission, restarts), the
/// numbers as their bits. Two views with the same moment are the same state to a decider and
/// to [`dqngpu_sim::Simulator::from_view`] (a job's id stands for its profile, as it does for
/// the plan's epoch; a GPU's measured usage is read by no policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Moment(Vec<u64>);

impl Moment {
    pub(super) fn of(view: &ClusterView<'_>) -> Self {
        let running: usize = view.gpus.iter().map(|g| g.running.len()).sum();
        let mut w = Vec::with_capacity(3 + 2 * view.gpus.len() + 3 * (running + view.queue.len()));
        w.extend([view.now_s.to_bits(), view.gpus.len() as u64]);
        for g in view.gpus {
            // Which GPU: a service's view leaves out the ones exclusive runs hold.
            let which = FixedState::default().hash_one((&g.node, g.index, &g.spec.key, g.spec.memory_mib.to_bits()));
            w.extend([which, g.running.len() as u64]);
            for r in &g.running {
                w.extend([r.id, r.progress_s.to_bits(), r.started_s.to_bits()]);
            }
        }
        w.push(view.queue.len() as u64);
        for q in view.queue {
            w.extend([q.id, q.submit_s.to_bits(), u64::from(q.restarts)]);
        }
        Moment(w)
    }
}

/// One time a future's decider was asked: where, and what it decided.
#[derive(Debug, Clone)]
pub(super) struct Ask {
    pub(super) moment: Moment,
    pub(super) decision: Vec<Placement>,
}

/// A decider that writes down each time it is asked (a future's, while it is played).
pub(super) struct Recording<'p> {
    inner: &'p dyn Policy,
    asks: Mutex<Vec<Ask>>,
}

impl<'p> Recording<'p> {
    pub(super) fn new(inner: &'p dyn Policy) -> Self {
        Recording { inner, asks: Mutex::new(Vec::new()) }
    }

    pub(super) fn into_asks(self) -> Vec<Ask> {
        self.asks.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl Policy for Recording<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn wants_every_tick(&self) -> bool {
        self.inner.wants_every_tick()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let decision = self.inner.decide(view);
        if let Ok(mut asks) = self.asks.lock() {
            asks.push(Ask { moment: Moment::of(view), decision: decision.clone() });
        }
        decision
    }
}

/// The end of a future read from `view`, a moment it passed through: the mean JCT and makespan
/// a simulation from `view` reckons (its jobs, running ones counted from their start as
/// [`dqngpu_sim::Simulator::from_view`] counts them, summed in its job-table order), from the
/// finish times `end` records. `None` if a job of `view` has none there.
pub(super) fn end_from(end: &SimResult, view: &ClusterView<'_>) -> Option<SimResult> {
    let finish: HashMap<JobId, f64> = end.jobs.iter().filter_map(|j| Some((j.id, j.finish_s?))).collect();
    let running = view.gpus.iter().flat_map(|g| g.running.iter().map(|r| (r.id, r.started_s)));
    let jobs = running.chain(view.queue.iter().map(|q| (q.id, q.submit_s)));
    let mut jcts = Vec::new();
    let mut makespan = 0.0f64;
    for (id, submit_s) in jobs {
        let f = *finish.get(&id)?;
        jcts.push(f - submit_s);
        makespan = makespan.max(f);
    }
    let mean_jct_s = if jcts.is_empty() { 0.0 } else { jcts.iter().sum::<f64>() / jcts.len() as f64 };
    Some(SimResult { mean_jct_s, makespan_s: makespan, ..end.clone() })
}
