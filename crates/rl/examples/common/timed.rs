//! A policy wrapper that times each decision (shared by the examples).

use std::sync::Mutex;
use std::time::Instant;

use dqngpu_model::{ClusterView, Placement, Policy};

/// Records (waiting jobs, seconds) of each decision of `inner`.
pub struct Timed<'a> {
    pub inner: &'a dyn Policy,
    pub times: Mutex<Vec<(usize, f64)>>,
}

impl<'a> Timed<'a> {
    pub fn new(inner: &'a dyn Policy) -> Self {
        Timed { inner, times: Mutex::new(Vec::new()) }
    }

    /// The seconds of every decision so far.
    pub fn seconds(&self) -> Vec<f64> {
        self.times.lock().map(|v| v.iter().map(|t| t.1).collect()).unwrap_or_default()
    }
}

impl Policy for Timed<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn wants_every_tick(&self) -> bool {
        self.inner.wants_every_tick()
    }
    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let t = Instant::now();
        let d = self.inner.decide(view);
        if let Ok(mut v) = self.times.lock() {
            v.push((view.queue.len(), t.elapsed().as_secs_f64()));
        }
        d
    }
}
