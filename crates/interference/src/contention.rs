//! `contention`: jobs slow down when together they ask for more GPU compute, SM or PCIe than
//! the card has, plus an overhead for sharing at all.
//!
//! For the jobs on one GPU, with `x_i` = job i's GPU util / 100 and `o_i` = the others' summed
//! GPU util / 100:
//!
//! ```text
//! excess  = max(0, sum util/100 - 1, sum SM/100 - 1, sum PCIe/link - 1)   (most over-subscribed)
//! rate_i  = clamp(1 / (1 + overhead * x_i * o_i + oversubscription * excess), MIN_RATE, 1)
//! ```
//!
//! A lone job within the card's capacity has `o_i = 0` and `excess = 0`, so it runs at 1.0.
//! `overhead` and `oversubscription` are fitted to the Lucid pairs (`dqngpu calibrate`); the
//! defaults below are that fit. Lucid has no SM or PCIe columns, so those terms enter only
//! through `excess` with the same slope (an assumption; docs/INTERFERENCE.md).

use dqngpu_model::{GpuSpec, Resources};
use serde::{Deserialize, Serialize};

use crate::{Interference, JobLoad};

/// The smallest rate a model returns, so rates stay in (0, 1].
pub const MIN_RATE: f64 = 0.01;

/// The two fitted parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ContentionParams {
    /// Co-location overhead: slowdown per unit of (own util x others' util).
    pub overhead: f64,
    /// Slowdown per unit of over-subscription of the most over-subscribed resource.
    pub oversubscription: f64,
}

impl ContentionParams {
    /// The fit to all 1,091 Lucid pairs (`dqngpu calibrate`, see docs/INTERFERENCE.md).
    pub const FITTED: ContentionParams = ContentionParams { overhead: 0.1841, oversubscription: 0.3595 };

    /// The fit to the 21 PyTorch pairs measured on one H100 80GB with the driver's default
    /// time-slicing (no MPS), `data/gpu-pairs-h100/` (`dqngpu calibrate --pairs
    /// data/gpu-pairs-h100/colocate_pairs.csv --solo data/gpu-pairs-h100/solo_profiles.csv`).
    /// Time-slicing costs far more than the Lucid card's sharing: 1.26 vs 0.18.
    pub const H100_TIMESLICED: ContentionParams = ContentionParams { overhead: 1.2621, oversubscription: 0.0 };
}

impl Default for ContentionParams {
    fn default() -> Self {
        Self::FITTED
    }
}

/// The contention model.
#[derive(Debug, Clone, Copy)]
pub struct Contention {
    /// Its parameters.
    pub params: ContentionParams,
    /// The name it reports (`contention`, or `contention-h100` for [`Contention::h100`]).
    name: &'static str,
}

impl Default for Contention {
    fn default() -> Self {
        Contention::new(ContentionParams::FITTED)
    }
}

impl Contention {
    /// A model with these parameters.
    pub fn new(params: ContentionParams) -> Self {
        Contention { params, name: "contention" }
    }

    /// The model with the parameters fitted on the H100 pairs ([`ContentionParams::H100_TIMESLICED`]).
    pub fn h100() -> Self {
        Contention { params: ContentionParams::H100_TIMESLICED, name: "contention-h100" }
    }
}

impl Interference for Contention {
    fn name(&self) -> &str {
        self.name
    }

    #[inline]
    fn rates(&self, gpu: &GpuSpec, jobs: &[JobLoad<'_>], rates: &mut [f64]) {
        let (mut util, mut sm, mut pcie) = (0.0, 0.0, 0.0);
        for j in jobs {
            util += j.demand.gpu_util_pct;
            sm += j.demand.sm_pct;
            pcie += j.demand.pcie_mbps;
        }
        let link_mbps = gpu.pcie_gbps * 1000.0;
        let pcie_over = if link_mbps > 0.0 { pcie / link_mbps - 1.0 } else { 0.0 };
        let excess = (util / 100.0 - 1.0).max(sm / 100.0 - 1.0).max(pcie_over).max(0.0);
        let total_x = util / 100.0;
        for (j, r) in jobs.iter().zip(rates.iter_mut()) {
            let x = j.demand.gpu_util_pct / 100.0;
            let others = (total_x - x).max(0.0);
            let slow = 1.0 + self.params.overhead * x * others + self.params.oversubscription * excess;
            let rate = 1.0 / slow;
            // NaN demands (never produced by validated profiles) fall back to the floor.
            *r = if rate.is_nan() { MIN_RATE } else { rate.clamp(MIN_RATE, 1.0) };
        }
    }

    /// Alone, `others` is 0; within the card's util, SM and link `excess` is 0 too, so `slow`
    /// is exactly 1 (the same expressions as [`Contention::rates`], so no rounding differs).
    fn alone_at_full_speed(&self, gpu: &GpuSpec, peak: &Resources) -> bool {
        let finite = [peak.gpu_util_pct, peak.sm_pct, peak.pcie_mbps].iter().all(|v| v.is_finite());
        let link_mbps = gpu.pcie_gbps * 1000.0;
        let pcie_over = if link_mbps > 0.0 { peak.pcie_mbps / link_mbps - 1.0 } else { 0.0 };
        finite && peak.gpu_util_pct / 100.0 - 1.0 <= 0.0 && peak.sm_pct / 100.0 - 1.0 <= 0.0 && pcie_over <= 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dqngpu_model::Resources;
    use proptest::prelude::*;

    fn gpu() -> GpuSpec {
        dqngpu_model::gpu::lookup("titanxp").unwrap_or_else(|e| panic!("{e}"))
    }

    fn run(demands: &[Resources]) -> Vec<f64> {
        let jobs: Vec<JobLoad> = demands.iter().map(|d| JobLoad { app: "x", demand: d }).collect();
        let mut r = vec![0.0; jobs.len()];
        Contention::default().rates(&gpu(), &jobs, &mut r);
        r
    }

    #[test]
    fn lone_job_within_capacity_runs_at_full_speed() {
        assert_eq!(run(&[Resources::new(100.0, 12000.0, 100.0, 30000.0)]), vec![1.0]);
        assert_eq!(run(&[Resources::new(0.0, 0.0, 0.0, 0.0)]), vec![1.0]);
    }

    #[test]
    fn oversubscription_slows_more_than_light_sharing() {
        let heavy = run(&[Resources::new(90.0, 1.0, 80.0, 100.0), Resources::new(90.0, 1.0, 80.0, 100.0)]);
        let light = run(&[Resources::new(20.0, 1.0, 20.0, 100.0), Resources::new(20.0, 1.0, 20.0, 100.0)]);
        assert!(heavy[0] < light[0] && light[0] < 1.0, "{heavy:?} {light:?}");
        // PCIe alone over the link also slows.
        let pcie = run(&[Resources::new(10.0, 1.0, 10.0, 20000.0), Resources::new(10.0, 1.0, 10.0, 20000.0)]);
        assert!(pcie[0] < light[0], "{pcie:?}");
    }

    #[test]
    fn idle_partner_costs_nothing() {
        let r = run(&[Resources::new(100.0, 1.0, 100.0, 0.0), Resources::new(0.0, 1.0, 0.0, 0.0)]);
        assert_eq!(r, vec![1.0, 1.0]);
    }

    proptest! {
        #[test]
        fn rates_are_in_unit_interval(d in proptest::collection::vec((0.0..100.0f64, 0.0..100.0f64, 0.0..40000.0f64), 1..6)) {
            let demands: Vec<Resources> = d.iter().map(|&(u, s, p)| Resources::new(u, 1.0, s, p)).collect();
            for r in run(&demands) {
                prop_assert!(r > 0.0 && r <= 1.0, "{r}");
            }
        }
    }
}
