//! The figures the thesis reports in its Section V text, to print beside ours.
//!
//! Only numbers its text states are here. Its Figs. 10-14 are bar charts whose other values
//! the text does not give; those cells stay empty. Its GPU memory_heavy paragraph repeats the
//! GPU_light figures (1,214 s, 89.31%, 88.42%) word for word, so none is cited for that class.

/// What the thesis states for one scheduler on one class (Section V.3.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportedRun {
    /// Workload class (CLI spelling).
    pub workload: &'static str,
    /// Scheduler (CLI spelling).
    pub scheduler: &'static str,
    /// Makespan, s.
    pub makespan_s: Option<f64>,
    /// Average GPU utilisation, %.
    pub gpu_util_pct: Option<f64>,
    /// Average GPU memory utilisation, %.
    pub gpu_mem_util_pct: Option<f64>,
}

const fn r(
    workload: &'static str,
    scheduler: &'static str,
    mk: Option<f64>,
    util: Option<f64>,
    mem: Option<f64>,
) -> ReportedRun {
    ReportedRun { workload, scheduler, makespan_s: mk, gpu_util_pct: util, gpu_mem_util_pct: mem }
}

/// Section V.3.1, Figs. 10-14 as the text states them.
pub const RUNS: &[ReportedRun] = &[
    r("gpu_heavy", "sjf", Some(4807.0), Some(70.50), Some(36.44)),
    r("gpu_heavy", "dqngpu", Some(4891.0), Some(82.09), Some(59.13)),
    r("gpu_heavy", "deeprm-mean", Some(5530.0), None, None),
    r("gpu_light", "sjf", Some(2295.0), None, None),
    r("gpu_light", "dqngpu", Some(1214.0), Some(89.31), Some(88.42)),
    r("mem_light", "dqngpu", Some(3928.0), None, None),
    r("random", "dqngpu", Some(2481.0), Some(62.16), Some(20.45)),
];

/// The thesis's entry for (class, scheduler), if any.
pub fn run(workload: &str, scheduler: &str) -> Option<&'static ReportedRun> {
    RUNS.iter().find(|r| r.workload == workload && r.scheduler == scheduler)
}

/// Section V.3.2, Fig. 15 (random workload, 30 jobs): jobs with no slowdown (within 2%).
pub const NO_SLOWDOWN_JOBS: &[(&str, f64)] = &[("dqngpu", 20.0), ("tetris", 14.0), ("deeprm-max", 14.0)];

/// Fig. 15: DeepRM Mean has 12 jobs slowed by 10% or more (the most).
pub const DEEPRM_MEAN_GE10_JOBS: f64 = 12.0;

/// (scheduler, total with training, training part, without training).
pub type OverheadEntry = (&'static str, Option<f64>, Option<f64>, Option<f64>);

/// Section V.3.3, Fig. 16 (random workload, normalised to SJF = 1):
/// (scheduler, total with training, training part, without training), where stated.
pub const OVERHEAD: &[OverheadEntry] = &[
    ("sjf", Some(1.0), Some(0.0), Some(1.0)),
    ("tetris", Some(1.294), Some(0.0), Some(1.294)),
    ("dqngpu", Some(1.081), Some(0.054), Some(1.027)),
    ("deeprm-max", Some(1.303), Some(0.048), Some(1.254)),
    ("deeprm-mean", Some(1.346), None, None),
];

/// Fig. 16: DqnGPU's training time, s.
pub const DQNGPU_TRAIN_S: f64 = 123.0;

/// Section V.3.4, Fig. 17: DqnGPU's saving against SJF on dedicated instances, % (Cost 1, Cost 2).
pub const COST_SAVING_PCT: &[(&str, f64)] = &[("Cost 1", 29.86), ("Cost 2", 49.98)];

/// The thesis's overhead entry for a scheduler.
pub fn overhead(scheduler: &str) -> Option<(Option<f64>, Option<f64>, Option<f64>)> {
    OVERHEAD.iter().find(|o| o.0 == scheduler).map(|o| (o.1, o.2, o.3))
}

/// The thesis's no-slowdown count for a scheduler on random.
pub fn no_slowdown(scheduler: &str) -> Option<f64> {
    NO_SLOWDOWN_JOBS.iter().find(|o| o.0 == scheduler).map(|o| o.1)
}

/// The thesis's saving for an assumption name.
pub fn cost_saving(assumption: &str) -> Option<f64> {
    COST_SAVING_PCT.iter().find(|o| o.0 == assumption).map(|o| o.1)
}

/// The thesis's figures as a run may show them: those of its Figs. 10-14 only where the run's
/// main setting is the thesis's, those of Figs. 15-17 only where its focus class is too
/// ([`crate::ExperimentConfig::is_thesis_setting`], `is_thesis_focus`); `None` elsewhere. The
/// report and the plots ask this, not the tables above, so neither can show a figure beside
/// a setting it is not of.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    setting: bool,
    focus: bool,
}

impl Figures {
    /// The figures a run of `cfg` may show.
    pub fn for_config(cfg: &crate::ExperimentConfig) -> Self {
        Figures { setting: cfg.is_thesis_setting(), focus: cfg.is_thesis_focus() }
    }

    /// True when the main setting is the thesis's.
    pub fn setting(&self) -> bool {
        self.setting
    }

    /// True when the focus class is the thesis's too.
    pub fn focus(&self) -> bool {
        self.focus
    }

    /// [`run`], in the thesis's setting.
    pub fn run(&self, workload: &str, scheduler: &str) -> Option<&'static ReportedRun> {
        run(workload, scheduler).filter(|_| self.setting)
    }

    /// [`overhead`], on the thesis's focus class.
    pub fn overhead(&self, scheduler: &str) -> Option<(Option<f64>, Option<f64>, Option<f64>)> {
        overhead(scheduler).filter(|_| self.focus)
    }

    /// [`no_slowdown`], on the thesis's focus class.
    pub fn no_slowdown(&self, scheduler: &str) -> Option<f64> {
        no_slowdown(scheduler).filter(|_| self.focus)
    }

    /// [`cost_saving`] of DqnGPU, on the thesis's focus class.
    pub fn cost_saving(&self, scheduler: &str, assumption: &str) -> Option<f64> {
        cost_saving(assumption).filter(|_| self.focus && scheduler == "dqngpu")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(run("gpu_heavy", "sjf").and_then(|r| r.makespan_s), Some(4807.0));
        assert!(run("mem_heavy", "dqngpu").is_none());
        assert_eq!(overhead("dqngpu"), Some((Some(1.081), Some(0.054), Some(1.027))));
        assert_eq!(no_slowdown("tetris"), Some(14.0));
        assert_eq!(cost_saving("Cost 2"), Some(49.98));
        // The thesis's Fig. 16 parts add up.
        for (_, total, train, exec) in OVERHEAD {
            if let (Some(t), Some(a), Some(b)) = (total, train, exec) {
                assert!((t - a - b).abs() < 1e-9 + 0.001, "{t} != {a} + {b}");
            }
        }
    }
}
