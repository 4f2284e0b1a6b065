//! The future the plan took, kept whole: each moment its decider was asked inside it, with what
//! it decided, so that at the next decision the promise's future is read, not played again,
//! where the cluster is at one of those moments. It is the same future (the same decider from
//! the same state), and known before the other candidates are played, it is the bar they are
//! abandoned against from their start.

use std::collections::HashMap;
use std::sync::Mutex;

use dqngpu_model::{ClusterView, JobId, Placement, Policy};
use dqngpu_sim::SimResult;

/// What a simulation from a view goes on from, as words: the clock, each GPU (which one: its
/// node, model and memory, as they are; and its running jobs: id, progress, start) and the
/// queue (id, submission, restarts), the numbers as their bits. Two views with the same
/// moment are the same state to a decider and to [`dqngpu_sim::Simulator::from_view`] (a
/// job's id stands for its profile, as it does for the plan's epoch; a GPU's measured usage is
/// read by no policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Moment(Vec<u64>);

impl Moment {
    pub(super) fn of(view: &ClusterView<'_>) -> Self {
        let running: usize = view.gpus.iter().map(|g| g.running.len()).sum();
        let mut w = Vec::with_capacity(3 + 7 * view.gpus.len() + 3 * (running + view.queue.len()));
        w.extend([view.now_s.to_bits(), view.gpus.len() as u64]);
        for g in view.gpus {
            // Which GPU: a service's view leaves out the ones exclusive runs hold.
            words_of(&mut w, &g.node);
            words_of(&mut w, &g.spec.key);
            w.extend([g.index as u64, g.spec.memory_mib.to_bits(), g.running.len() as u64]);
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

/// `s` as words: its length, then its bytes eight to a word (so that two strings are equal
/// exactly when their words are: a hash of a GPU's names, even a good one, can be made to
/// collide, and two GPUs would then read as one).
fn words_of(w: &mut Vec<u64>, s: &str) {
    w.push(s.len() as u64);
    w.extend(s.as_bytes().chunks(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    }));
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

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, Hasher};

    use dqngpu_model::{ClusterView, GpuSpec, GpuState};
    use foldhash::fast::FixedState;

    use super::Moment;

    /// Two views that differ only in one GPU's model are two moments, even where the GPUs'
    /// names were chosen so that a hash of them collides (found by the session's review, for
    /// the foldhash the moment used for a while: with its fixed seed, a key of 9 to 16 bytes
    /// whose first 8 bytes XOR the hasher's state to zero hashes alike whatever its other
    /// bytes).
    #[test]
    fn two_gpus_of_other_models_are_two_moments_whatever_their_names() {
        let spec = dqngpu_model::gpu::lookup("titanxp").unwrap();
        // A node name and key length for which the zeroing prefix is printable ASCII.
        let (node, prefix, len) = (0..1_000_000u32)
            .find_map(|n| {
                let node = format!("node-{n}");
                let mut h = FixedState::default().build_hasher();
                h.write(node.as_bytes());
                let state = h.finish();
                (9..=16usize).find_map(|len| {
                    let b = state.rotate_right(len as u32).to_ne_bytes();
                    b.iter()
                        .all(u8::is_ascii_graphic)
                        .then(|| (node.clone(), String::from_utf8(b.to_vec()).unwrap(), len))
                })
            })
            .expect("a printable prefix");
        let (k1, k2) = (format!("{prefix}{}", "a".repeat(len - 8)), format!("{prefix}{}", "b".repeat(len - 8)));
        let gpu = |key: &str| GpuState {
            node: node.clone(),
            index: 0,
            spec: GpuSpec { key: key.to_string(), ..spec.clone() },
            running: Vec::new(),
            measured: None,
        };
        let (a, b) = ([gpu(&k1)], [gpu(&k2)]);
        let moment = |gpus| Moment::of(&ClusterView { now_s: 0.0, gpus, queue: &[] });
        assert_ne!(moment(&a), moment(&b), "GPUs {node}/0 of models {k1:?} and {k2:?} read as one moment");
        // And a moment is its view's: the same GPUs give the same words.
        assert_eq!(moment(&a), moment(&[gpu(&k1)]));
    }
}
