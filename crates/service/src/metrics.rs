//! Counters and the decision-latency histogram behind `GET /metrics` (Prometheus text).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the decision-latency buckets, seconds.
pub const DECISION_BUCKETS_S: [f64; 12] =
    [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];

/// The service's own counters (job counts by state come from the store).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Jobs accepted.
    pub submissions: AtomicU64,
    /// Policy decisions made.
    pub decisions: AtomicU64,
    /// Decisions refused by validation, or lost to a panic of the policy.
    pub invalid_decisions: AtomicU64,
    /// Placements the loop trimmed (memory or avoid-list guard).
    pub guarded: AtomicU64,
    /// Attempts started.
    pub attempts_started: AtomicU64,
    /// Attempts that died of OOM.
    pub oom_kills: AtomicU64,
    /// Jobs the loop started itself because the policy held while a GPU was idle (liveness).
    pub liveness_starts: AtomicU64,
    /// Groups the slowdown budget kept from starting.
    pub budget_refusals: AtomicU64,
    buckets: [AtomicU64; DECISION_BUCKETS_S.len()],
    latency_count: AtomicU64,
    latency_sum_ns: AtomicU64,
}

impl Metrics {
    /// Records one decision's latency.
    pub fn observe_decision(&self, secs: f64) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
        for (b, le) in self.buckets.iter().zip(DECISION_BUCKETS_S) {
            if secs <= le {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_ns.fetch_add((secs * 1e9) as u64, Ordering::Relaxed);
    }

    /// Writes the counters and histogram in Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut counter = |name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        counter("dqngpu_submissions_total", "Jobs accepted.", c(&self.submissions));
        counter("dqngpu_decisions_total", "Policy decisions made.", c(&self.decisions));
        counter(
            "dqngpu_invalid_decisions_total",
            "Decisions refused by validation or lost to a panic of the policy.",
            c(&self.invalid_decisions),
        );
        counter("dqngpu_guarded_placements_total", "Jobs held back by the memory or avoid guard.", c(&self.guarded));
        counter("dqngpu_attempts_started_total", "Attempts started.", c(&self.attempts_started));
        counter("dqngpu_oom_kills_total", "Attempts that died of GPU out-of-memory.", c(&self.oom_kills));
        counter(
            "dqngpu_liveness_starts_total",
            "Jobs started by the liveness rule (the policy held while a GPU was idle).",
            c(&self.liveness_starts),
        );
        counter(
            "dqngpu_budget_refusals_total",
            "Groups the slowdown budget kept from starting (predicted past it).",
            c(&self.budget_refusals),
        );
        let name = "dqngpu_decision_latency_seconds";
        let _ = writeln!(out, "# HELP {name} Time the policy took to decide.\n# TYPE {name} histogram");
        for (b, le) in self.buckets.iter().zip(DECISION_BUCKETS_S) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {}", c(b));
        }
        let n = c(&self.latency_count);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {n}");
        let _ = writeln!(out, "{name}_sum {}", c(&self.latency_sum_ns) as f64 / 1e9);
        let _ = writeln!(out, "{name}_count {n}");
    }
}
