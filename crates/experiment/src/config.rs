//! The experiment's configuration (TOML). Its defaults reproduce the thesis's Section V:
//! one Titan Xp, the five workload classes of 30 jobs, SJF, Tetris, DeepRM Max, DeepRM Mean
//! and DqnGPU (plus FIFO and best-fit), Table 5's EC2 prices.

use std::path::Path;

use dqngpu_model::{Location, ModelError, WorkloadClass};
use dqngpu_rl::net::OptimizerKind;
use dqngpu_rl::reinforce::{MAX_EPISODES, MAX_TRAIN_JOBSETS as MAX_JOBSETS};
use dqngpu_rl::SchedulerName;
use serde::{Deserialize, Serialize};

/// The whole configuration. Every section has defaults, so an empty file is the thesis's setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExperimentConfig {
    /// App library: `thesis`, `lucid` or a directory of profiles.
    pub library: String,
    /// Interference model: `contention`, `measured` or `none`.
    pub interference: String,
    /// Simulator step, s.
    pub step_s: f64,
    /// Slowdown budget for every scheduler, percent (absent: none). A group of jobs predicted
    /// by the interference model to slow any job on its GPU by more than this is not started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_slowdown_pct: Option<f64>,
    /// The cluster.
    pub cluster: ClusterConfig,
    /// The job sets.
    pub workloads: WorkloadConfig,
    /// Which schedulers, and the baseline others are normalised to.
    pub schedulers: SchedulerConfig,
    /// Evaluation seeds.
    pub evaluation: EvaluationConfig,
    /// Training budget of the RL agents.
    pub training: TrainingConfig,
    /// Prices and the thesis's two cost assumptions.
    pub cost: CostConfig,
    /// The settings users have (issue 10): each cell evaluates every scheduler on every class
    /// and evaluation seed, beside the main setting above, into the league table.
    pub cells: Vec<CellConfig>,
}

/// One evaluated setting: library, cluster, arrivals, budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellConfig {
    /// Short unique name (`thesis-4x2-0.1`).
    pub name: String,
    /// App library: `thesis`, `lucid`, `generated:SEED` or a directory.
    pub library: String,
    /// Cluster, as `--gpus` takes it.
    pub gpus: String,
    /// Jobs per set.
    pub jobs: usize,
    /// Poisson arrivals at this rate (jobs/s); absent: all jobs at t = 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate: Option<f64>,
    /// Slowdown budget for every scheduler, percent; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_slowdown_pct: Option<f64>,
}

impl CellConfig {
    fn new(name: &str, library: &str, gpus: &str, jobs: usize, rate: Option<f64>, budget: Option<f64>) -> Self {
        CellConfig {
            name: name.into(),
            library: library.into(),
            gpus: gpus.into(),
            jobs,
            arrival_rate: rate,
            max_slowdown_pct: budget,
        }
    }

    /// How jobs arrive, in words (`t=0`, `poisson 0.1/s`).
    pub fn arrivals(&self) -> String {
        self.arrival_rate.map_or("t=0".into(), |r| format!("poisson {r}/s"))
    }

    /// The budget, in words (`off`, `10%`).
    pub fn budget(&self) -> String {
        self.max_slowdown_pct.map_or("off".into(), |b| format!("{b}%"))
    }

    /// The default cells: the thesis's setting with a budget; the thesis library on 4 nodes x
    /// 2 Titan Xp with 120 Poisson jobs at three loads; Lucid's apps on one RTX 3090; a
    /// generated library no training ever draws from (`generated:1001`); each without and
    /// with a 10% budget. (The main setting, thesis on one Titan Xp without budget, is the
    /// experiment itself.)
    pub fn defaults() -> Vec<CellConfig> {
        let mut cells = vec![CellConfig::new("thesis-1gpu-b10", "thesis", "titanxp:1", 30, None, Some(10.0))];
        for budget in [None, Some(10.0)] {
            let tag = if budget.is_some() { "-b10" } else { "" };
            for rate in [0.05, 0.1, 0.2] {
                cells.push(CellConfig::new(
                    &format!("thesis-4x2-{rate}{tag}"),
                    "thesis",
                    "4xtitanxp:2",
                    120,
                    Some(rate),
                    budget,
                ));
            }
            cells.push(CellConfig::new(&format!("lucid-3090{tag}"), "lucid", "rtx3090:1", 30, None, budget));
            cells.push(CellConfig::new(&format!("heldout-1gpu{tag}"), "generated:1001", "titanxp:1", 30, None, budget));
        }
        cells
    }
}

/// The cluster: a `--gpus` spec, or a cluster TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// `[Nx]MODEL[:GPUS],...` as `--gpus` takes it (thesis: one Titan Xp).
    pub gpus: String,
    /// A cluster TOML file; wins over `gpus` when set (relative to the config file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// The job sets drawn for each class and seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadConfig {
    /// Classes, as the CLI spells them.
    pub classes: Vec<String>,
    /// Jobs per set (thesis: 30).
    pub jobs: usize,
    /// Class whose job sets show the slowdown buckets, training overhead and cost (thesis: random).
    pub focus: String,
    /// Poisson arrivals at this rate (jobs/s); absent: all jobs at t = 0 (the thesis).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_rate: Option<f64>,
}

/// Schedulers to compare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// Names, as the CLI spells them (any case in the file; [`ExperimentConfig::from_toml`]
    /// rewrites them to the canonical spelling of [`SchedulerName`]).
    pub names: Vec<String>,
    /// The scheduler others are normalised to and the cost's dedicated side (thesis: SJF).
    pub baseline: String,
    /// `dqngpu-plan`: the scorer's best rows played out per choice (`--plan-rows`).
    pub plan_rows: usize,
    /// `dqngpu-plan`: the makespan guard's weight in a future's cost (`--plan-guard`; the
    /// training's units, 0: mean JCT alone).
    pub plan_guard: f64,
}

/// Evaluation seeds: `first_seed .. first_seed + seeds`, disjoint from the training seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluationConfig {
    /// How many job sets per class.
    pub seeds: u64,
    /// The first evaluation seed.
    pub first_seed: u64,
}

/// The RL agents' training budget and hyper-parameters (passed to `dqngpu-rl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainingConfig {
    /// Classes the training job sets cycle through.
    pub workloads: Vec<String>,
    /// Policy-gradient iterations per agent.
    pub iterations: u64,
    /// Iterations under `--quick`.
    pub quick_iterations: u64,
    /// Optional: stop an agent's training after this many seconds of wall time (never under
    /// `--quick`). Off by default, since a cap makes results depend on machine speed; the
    /// report says when it cut training short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<f64>,
    /// Training job sets: seeds `first_seed .. first_seed + jobsets`.
    pub jobsets: u64,
    /// The first training seed.
    pub first_seed: u64,
    /// Job sets per iteration.
    pub jobsets_per_iter: u64,
    /// Episodes per job set per iteration (the baseline's N).
    pub episodes: u64,
    /// Learning rate of the thesis's image agent and DeepRM Max / Mean (the scorer's is fixed
    /// at 1e-3 with Adam: docs/RL.md).
    pub lr: f64,
    /// Optimiser: `adam` or `rmsprop`.
    pub optimizer: OptimizerKind,
    /// What the agents' training minimises: `makespan` (the thesis's metric, the default here,
    /// since this experiment reproduces its Section V) or `jct`.
    pub objective: dqngpu_rl::reinforce::Objective,
    /// Hidden layer sizes of the thesis's image agent and DeepRM Max / Mean (the scorer's
    /// network is fixed: 19 -> 32 -> 16 -> 1).
    pub hidden: Vec<usize>,
    /// Seed of the initial weights and of the sampled actions.
    pub seed: u64,
    /// How `dqngpu` learns: `scorer` (the generalising candidate scorer, docs/RL.md) or
    /// `thesis` (the thesis's image agent, trained with the settings above).
    pub algorithm: String,
    /// Where the scorer trains (one model for every cell; no setting draws from a cell's
    /// held-out library): libraries, cluster, jobs, arrivals, job sets per library (seeds
    /// 100000 + 1000 x seed + i).
    pub scorer_settings: Vec<dqngpu_rl::scorer::train::Setting>,
    /// The scorer's policy-gradient iterations (after imitation and look-ahead).
    pub scorer_iterations: u64,
    /// What the scorer minimises: `jct` (ties on it go to the lower makespan) or `makespan`.
    pub scorer_objective: dqngpu_rl::reinforce::Objective,
    /// The scorer's improvement rounds after policy gradient (look-ahead over the trained
    /// scorer, then policy gradient again; docs/RL.md). 0: none.
    pub scorer_improvement_rounds: u64,
    /// Weight of the scorer's makespan guard under the JCT objective (docs/RL.md: a run is
    /// charged for makespan more than 1% over the best rule's). 0: off.
    pub scorer_makespan_guard: f64,
    /// The scorer's restarts: trainings from other initial weights on the same sets, the one
    /// best on validation kept (docs/RL.md). At least 1.
    pub scorer_restarts: u64,
    /// Near-tie of the scorer's improvement-round labels, percent (docs/RL.md). Default 1; 0:
    /// only the cheapest rows.
    pub scorer_improvement_near_tie_pct: f64,
}

/// One EC2 instance type of the thesis's Table 5.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    /// Instance name (`g3.xlarge`).
    pub name: String,
    /// GPU model.
    pub gpu: String,
    /// vCPUs.
    pub vcpu: u32,
    /// Host memory, GB.
    pub memory_gb: f64,
    /// GPU memory, GB.
    pub gpu_memory_gb: f64,
    /// GPU cores.
    pub gpu_cores: u32,
    /// On-demand price, US$ per hour.
    pub usd_per_hour: f64,
}

/// A cost assumption: one shared instance replaces `replaces` dedicated ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostAssumption {
    /// Label (`Cost 1`).
    pub name: String,
    /// The dedicated instance the baseline runs on.
    pub dedicated: String,
    /// How many dedicated instances the shared one replaces.
    pub replaces: u32,
    /// What the equivalence rests on (thesis: GPU memory; vCPU and memory).
    pub basis: String,
}

/// Prices and cost assumptions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// The shared instance co-locating schedulers run on.
    pub shared: String,
    /// Instance types and prices (thesis Table 5).
    pub instances: Vec<Instance>,
    /// The assumptions (thesis: Cost 1 and Cost 2).
    pub assumptions: Vec<CostAssumption>,
}

impl Default for ExperimentConfig {
    fn default() -> Self {
        ExperimentConfig {
            library: "thesis".into(),
            interference: "contention".into(),
            step_s: 1.0,
            max_slowdown_pct: None,
            cluster: ClusterConfig::default(),
            workloads: WorkloadConfig::default(),
            schedulers: SchedulerConfig::default(),
            evaluation: EvaluationConfig::default(),
            training: TrainingConfig::default(),
            cost: CostConfig::default(),
            cells: CellConfig::defaults(),
        }
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig { gpus: "titanxp:1".into(), file: None }
    }
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            classes: WorkloadClass::ALL.iter().map(|c| c.name().to_string()).collect(),
            jobs: 30,
            focus: "random".into(),
            arrival_rate: None,
        }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        let names = [
            "sjf",
            "tetris",
            "deeprm-max",
            "deeprm-mean",
            "dqngpu",
            "dqngpu-plan",
            "fifo",
            "bestfit",
            "sjf-bestfit",
            "lucid",
            "greedy",
        ];
        let plan = dqngpu_rl::scorer::plan::PlanConfig::default();
        SchedulerConfig {
            names: names.iter().map(|s| s.to_string()).collect(),
            baseline: "sjf".into(),
            plan_rows: plan.top_k,
            plan_guard: plan.makespan_guard,
        }
    }
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig { seeds: 10, first_seed: 1000 }
    }
}

impl Default for TrainingConfig {
    fn default() -> Self {
        TrainingConfig {
            workloads: WorkloadClass::ALL.iter().map(|c| c.name().to_string()).collect(),
            iterations: 60,
            quick_iterations: 2,
            // No wall-clock cap by default: a cap would make results depend on machine speed.
            time_limit_s: None,
            jobsets: 10,
            first_seed: 0,
            jobsets_per_iter: 2,
            episodes: 8,
            lr: 3e-3,
            optimizer: OptimizerKind::Adam,
            objective: dqngpu_rl::reinforce::Objective::Makespan,
            hidden: vec![20],
            seed: 1,
            algorithm: "scorer".into(),
            scorer_settings: dqngpu_rl::scorer::train::default_settings(),
            scorer_iterations: 60,
            scorer_objective: dqngpu_rl::reinforce::Objective::Jct,
            scorer_improvement_rounds: 1,
            scorer_makespan_guard: 1.0,
            scorer_restarts: 1,
            scorer_improvement_near_tie_pct: 1.0,
        }
    }
}

impl Default for CostConfig {
    fn default() -> Self {
        let inst = |name: &str, gpu: &str, vcpu, memory_gb, gpu_memory_gb, gpu_cores, usd_per_hour| Instance {
            name: name.into(),
            gpu: gpu.into(),
            vcpu,
            memory_gb,
            gpu_memory_gb,
            gpu_cores,
            usd_per_hour,
        };
        CostConfig {
            shared: "g4dn.4xlarge".into(),
            // Thesis Table 5 (Amazon EC2 on-demand, 2019).
            instances: vec![
                inst("g3.xlarge", "Tesla M60", 4, 30.5, 8.0, 2048, 0.75),
                inst("g4dn.xlarge", "T4", 4, 16.0, 16.0, 2560, 0.526),
                inst("g4dn.4xlarge", "T4", 16, 64.0, 16.0, 2560, 1.204),
            ],
            assumptions: vec![
                CostAssumption {
                    name: "Cost 1".into(),
                    dedicated: "g3.xlarge".into(),
                    replaces: 2,
                    basis: "GPU memory".into(),
                },
                CostAssumption {
                    name: "Cost 2".into(),
                    dedicated: "g4dn.xlarge".into(),
                    replaces: 4,
                    basis: "vCPU and host memory".into(),
                },
            ],
        }
    }
}

impl CostConfig {
    /// The instance called `name`.
    pub fn instance(&self, name: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.name == name)
    }
}

/// The dotted key whose value starts at byte `at` of `text` (`workloads.jobs`), read from
/// the line (`key = value`) and the last table header above it; `None` where the line has no
/// key before `at` (the error is then about a table or the syntax, and its line says where).
/// toml's errors carry the line and column but not the key.
fn key_at(text: &str, at: usize) -> Option<String> {
    let line_start = text.get(..at)?.rfind('\n').map_or(0, |i| i + 1);
    let key = text.get(line_start..at)?.split_once('=')?.0.trim();
    if key.is_empty() || key.starts_with('#') {
        return None;
    }
    let table = text[..line_start].lines().rev().map(str::trim).find(|l| l.starts_with('['));
    Some(match table.map(|t| t.trim_matches(|c| c == '[' || c == ']').trim()) {
        Some(t) if !t.is_empty() => format!("{t}.{key}"),
        _ => key.to_string(),
    })
}

impl ExperimentConfig {
    /// True when the main setting is the thesis's evaluation (its library on one Titan Xp, 30
    /// jobs a set, all at t = 0, no budget, the `contention` model): the thesis's figures are
    /// shown beside this run's only then (they were shown beside a Lucid run on an RTX 3090).
    pub fn is_thesis_setting(&self) -> bool {
        self.library == "thesis"
            && self.cluster.file.is_none()
            && self.cluster.gpus == "titanxp:1"
            && self.workloads.jobs == 30
            && self.workloads.arrival_rate.is_none()
            && self.max_slowdown_pct.is_none()
            && self.interference == "contention"
    }

    /// [`Self::is_thesis_setting`] with `random` as the focus class, the thesis's Figs. 15-17.
    pub fn is_thesis_focus(&self) -> bool {
        self.is_thesis_setting() && self.workloads.focus == "random"
    }

    /// Parses a TOML config; `path` names the file in errors.
    pub fn from_toml(text: &str, path: Option<&Path>) -> Result<Self, ModelError> {
        let cfg: ExperimentConfig = toml::from_str(text).map_err(|e| {
            let start = e.span().map(|s| s.start.min(text.len()));
            let line = start.map(|s| text.as_bytes()[..s].iter().filter(|&&b| b == b'\n').count() as u64 + 1);
            let at = Location { path: path.map(Path::to_path_buf), line, field: start.and_then(|s| key_at(text, s)) };
            // An unknown name of a closed set (`optimizer = "sgd"`) is a usage error (exit 2),
            // as an unknown scheduler or GPU is; it was a bad-input one (exit 1).
            match unknown_variant(e.message()) {
                Some((name, valid)) => ModelError::UnknownName { what: "value", name, valid }.at(at),
                None => ModelError::invalid(at, format!("invalid experiment config: {}", e.message())),
            }
        })?;
        let mut cfg = cfg;
        cfg.validate(path)?;
        cfg.schedulers.names = cfg.schedulers()?.iter().map(ToString::to_string).collect();
        cfg.schedulers.baseline = cfg.schedulers.baseline.parse::<SchedulerName>()?.to_string();
        Ok(cfg)
    }

    /// Reads and validates a config file.
    pub fn read(path: &Path) -> Result<Self, ModelError> {
        let mut cfg = Self::from_toml(&dqngpu_model::error::read_file(path)?, Some(path))?;
        // Relative paths are the config file's: its folder, made absolute, so that the
        // config.toml written into --out replays from anywhere.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        cfg.resolve_paths_in(&dir);
        Ok(cfg)
    }

    /// Takes the cluster file and every library directory named relative to `dir` (a cluster
    /// file always; a library when a directory of that name is there, `library::named_in`).
    fn resolve_paths_in(&mut self, dir: &Path) {
        if let Some(f) = self.cluster.file.as_mut().filter(|f| Path::new(f.as_str()).is_relative()) {
            *f = dir.join(&*f).to_string_lossy().into_owned();
        }
        let libraries = std::iter::once(&mut self.library)
            .chain(self.cells.iter_mut().map(|c| &mut c.library))
            .chain(self.training.scorer_settings.iter_mut().flat_map(|s| s.libraries.iter_mut()));
        for l in libraries {
            *l = dqngpu_model::library::named_in(dir, l);
        }
    }

    /// The TOML text of this config (what goes into the out dir).
    pub fn to_toml(&self) -> String {
        let body = toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot serialise config: {e}\n"));
        format!("{CONFIG_HEADER}\n{body}")
    }

    /// The small version `--quick` runs: 2 seeds, 10 jobs, `training.quick_iterations`.
    pub fn quick(mut self) -> Self {
        self.evaluation.seeds = self.evaluation.seeds.min(2);
        self.workloads.jobs = self.workloads.jobs.min(10);
        self.training.iterations = self.training.quick_iterations;
        self.training.jobsets = self.training.jobsets.min(4);
        self.training.jobsets_per_iter = self.training.jobsets_per_iter.min(2);
        self.training.episodes = self.training.episodes.min(4);
        self.training.time_limit_s = None;
        // One small setting: the first library of the first, two sets of at most 10 jobs.
        self.training.scorer_settings.truncate(1);
        for s in &mut self.training.scorer_settings {
            s.libraries.truncate(1);
            s.jobsets = s.jobsets.min(2);
            s.jobs = s.jobs.min(10);
        }
        self.training.scorer_iterations = self.training.quick_iterations;
        // Two cells, small: one with arrivals on several GPUs, the held-out library.
        self.cells.retain(|c| QUICK_CELLS.contains(&c.name.as_str()));
        for c in &mut self.cells {
            c.jobs = c.jobs.min(10);
        }
        self
    }

    /// `dqngpu-plan`'s search, from `schedulers.plan_rows` and `plan_guard`, checked (an error
    /// names the field).
    pub fn plan(&self) -> Result<dqngpu_rl::scorer::plan::PlanConfig, (&'static str, String)> {
        dqngpu_rl::scorer::plan::PlanConfig::named(
            self.schedulers.plan_rows,
            self.schedulers.plan_guard,
            ("schedulers.plan_rows", "schedulers.plan_guard"),
        )
    }

    /// The evaluation seeds (none when the range passes `u64::MAX`, which validation refuses).
    pub fn eval_seeds(&self) -> Vec<u64> {
        self.eval_range().map_or_else(Vec::new, Iterator::collect)
    }

    /// `first_seed .. first_seed + seeds`, unless that passes `u64::MAX`.
    fn eval_range(&self) -> Option<std::ops::Range<u64>> {
        let e = &self.evaluation;
        Some(e.first_seed..e.first_seed.checked_add(e.seeds)?)
    }

    /// Every range of job-set seeds training draws from, with what draws it: the thesis's
    /// agents' sets and, under the scorer, its training and validation sets
    /// (`dqngpu_rl::scorer::train::{train_seed_base, validation_seed_base}`).
    fn training_seed_ranges(&self) -> Vec<(&'static str, std::ops::Range<u64>)> {
        use dqngpu_rl::scorer::train::{train_seed_base, validation_seed_base};
        let t = &self.training;
        let span = |first: u64, n: u64| first..first.saturating_add(n);
        let mut ranges =
            vec![("training seeds (training.first_seed, training.jobsets)", span(t.first_seed, t.jobsets))];
        if t.algorithm == "scorer" {
            let sets = t.scorer_settings.iter().map(|s| s.jobsets as u64).max().unwrap_or(0);
            ranges.push(("scorer's training seeds (training.seed)", span(train_seed_base(t.seed), sets)));
            let classes = t.workloads.len() as u64;
            ranges.push(("scorer's validation seeds (training.seed)", span(validation_seed_base(t.seed), classes)));
        }
        ranges
    }

    /// The training seeds.
    pub fn training_seeds(&self) -> Vec<u64> {
        (self.training.first_seed..self.training.first_seed.saturating_add(self.training.jobsets)).collect()
    }

    /// The workload classes, parsed.
    pub fn classes(&self) -> Result<Vec<WorkloadClass>, ModelError> {
        self.workloads.classes.iter().map(|c| c.parse()).collect()
    }

    /// The schedulers, parsed (an unknown name is a usage error listing the valid ones).
    pub fn schedulers(&self) -> Result<Vec<SchedulerName>, ModelError> {
        self.schedulers.names.iter().map(|n| n.parse()).collect()
    }

    /// Resolves every library, cluster and interference model the config names (the main
    /// setting's, the cells', the scorer's training settings') and checks that each library has
    /// every class drawn from it and each of those apps fits its cluster's largest GPU, so that
    /// a bad one fails before any work, naming its field, rather than after training or not at
    /// all (`--quick` keeps only some cells). An unknown name stays a usage error.
    pub fn check_references(&self, path: Option<&Path>) -> Result<(), ModelError> {
        let at = |field: String| {
            let loc = Location { path: path.map(Path::to_path_buf), line: None, field: Some(field) };
            move |e: ModelError| e.at(loc)
        };
        dqngpu_interference::by_name(&self.interference).map_err(at("interference".into()))?;
        let classes = self.classes().map_err(at("workloads.classes".into()))?;
        let library = dqngpu_model::library::resolve(&self.library).map_err(at("library".into()))?;
        let cluster = match &self.cluster.file {
            Some(f) => dqngpu_model::ClusterSpec::read(Path::new(f)).map_err(at("cluster.file".into()))?,
            None => dqngpu_model::ClusterSpec::parse_gpus(&self.cluster.gpus).map_err(at("cluster.gpus".into()))?,
        };
        let cluster_field = if self.cluster.file.is_some() { "cluster.file" } else { "cluster.gpus" };
        check_fits(&library, &cluster, &classes)
            .map_err(|(f, e)| at(if f == "gpus" { cluster_field.into() } else { f.into() })(e))?;
        for (i, c) in self.cells.iter().enumerate() {
            let library = dqngpu_model::library::resolve(&c.library).map_err(at(format!("cells[{i}].library")))?;
            let cluster = dqngpu_model::ClusterSpec::parse_gpus(&c.gpus).map_err(at(format!("cells[{i}].gpus")))?;
            check_fits(&library, &cluster, &classes).map_err(|(f, e)| at(format!("cells[{i}].{f}"))(e))?;
        }
        if self.training.algorithm == "scorer" {
            let classes: Vec<WorkloadClass> = self.training.workloads.iter().filter_map(|c| c.parse().ok()).collect();
            for (i, st) in self.training.scorer_settings.iter().enumerate() {
                let field = |f: String| format!("training.scorer_settings[{i}].{f}");
                let cluster = dqngpu_model::ClusterSpec::parse_gpus(&st.gpus).map_err(at(field("gpus".into())))?;
                for (j, l) in st.libraries.iter().enumerate() {
                    let library = dqngpu_model::library::resolve(l).map_err(at(field(format!("libraries[{j}]"))))?;
                    let lib_field = format!("libraries[{j}]");
                    check_fits(&library, &cluster, &classes)
                        .map_err(|(f, e)| at(field(if f == "gpus" { f.into() } else { lib_field.clone() }))(e))?;
                }
            }
        }
        Ok(())
    }

    /// A warning for each library the evaluation draws from (the main setting's, the cells')
    /// whose shortest profile interval is shorter than `step_s`: each step runs the sample in
    /// force at its start, so samples in between are skipped (docs/SIMULATOR.md; `simulate`
    /// warns the same). Libraries that cannot be resolved are [`Self::check_references`]' to name.
    pub fn step_warnings(&self) -> Vec<String> {
        let libraries = std::iter::once(&self.library).chain(self.cells.iter().map(|c| &c.library));
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for name in libraries.filter(|l| seen.insert(*l)) {
            let Ok(library) = dqngpu_model::library::resolve(name) else { continue };
            if let Some(why) = dqngpu_sim::skipped_samples(self.step_s, library.apps.values().map(|p| p.interval_s)) {
                out.push(format!("warning: step_s {why} (library `{name}`)"));
            }
        }
        out
    }

    /// Checks ranges, names that can be checked here, and that evaluation never reuses a training seed.
    ///
    /// One piece on purpose (about 130 lines): a flat list of independent checks in the file's
    /// order, each naming its field; read top to bottom, it is the config's contract.
    pub fn validate(&self, path: Option<&Path>) -> Result<(), ModelError> {
        let loc = |field: &str| Location { path: path.map(Path::to_path_buf), line: None, field: Some(field.into()) };
        let bad = |field: &str, msg: String| ModelError::invalid(loc(field), msg);
        // An unknown name stays a usage error (exit 2), said to be at its field.
        let at = |field: &str| {
            let at = loc(field);
            move |e: ModelError| e.at(at)
        };
        if let Some(b) = self.max_slowdown_pct.filter(|b| !(b.is_finite() && *b >= 0.0)) {
            return Err(bad("max_slowdown_pct", format!("{b} is not a percentage >= 0")));
        }
        // The simulator's own floor, checked here: found only when the first run began, after
        // every agent had trained, and named neither the file nor the key.
        if !(self.step_s.is_finite() && self.step_s >= dqngpu_sim::MIN_STEP_S) {
            return Err(bad(
                "step_s",
                format!("{} is not a step of at least {} s", self.step_s, dqngpu_sim::MIN_STEP_S),
            ));
        }
        if self.workloads.classes.is_empty() {
            return Err(bad("workloads.classes", "no workload class".into()));
        }
        let classes = self.classes().map_err(at("workloads.classes"))?;
        if let Some(k) = (1..classes.len()).find(|&k| classes[..k].contains(&classes[k])) {
            return Err(bad("workloads.classes", format!("`{}` is listed twice", classes[k])));
        }
        let focus: WorkloadClass = self.workloads.focus.parse().map_err(at("workloads.focus"))?;
        if !classes.contains(&focus) {
            return Err(bad("workloads.focus", format!("`{}` is not one of workloads.classes", self.workloads.focus)));
        }
        if self.training.workloads.is_empty() {
            return Err(bad("training.workloads", "no workload class".into()));
        }
        for (i, c) in self.training.workloads.iter().enumerate() {
            c.parse::<WorkloadClass>().map_err(at(&format!("training.workloads[{i}]")))?;
        }
        let guard = self.training.scorer_makespan_guard;
        if !(guard.is_finite() && guard >= 0.0) {
            return Err(bad("training.scorer_makespan_guard", format!("{guard} is not a weight >= 0")));
        }
        let tie = self.training.scorer_improvement_near_tie_pct;
        if !(tie.is_finite() && (0.0..=100.0).contains(&tie)) {
            return Err(bad(
                "training.scorer_improvement_near_tie_pct",
                format!("{tie} is not a percentage from 0 to 100"),
            ));
        }
        if self.training.scorer_restarts == 0 {
            return Err(bad("training.scorer_restarts", "0: at least one training must run".into()));
        }
        if self.training.episodes == 0 || self.training.episodes > MAX_EPISODES as u64 {
            return Err(bad("training.episodes", format!("{}; expected 1..={MAX_EPISODES}", self.training.episodes)));
        }
        if self.training.jobsets_per_iter == 0 {
            return Err(bad("training.jobsets_per_iter", "0: at least one job set per iteration".into()));
        }
        if !(self.training.lr.is_finite() && self.training.lr > 0.0) {
            return Err(bad("training.lr", format!("{} is not a positive learning rate", self.training.lr)));
        }
        dqngpu_rl::reinforce::check_hidden(&self.training.hidden).map_err(|e| bad("training.hidden", e.to_string()))?;
        if let Some(t) = self.training.time_limit_s {
            if !(t.is_finite() && t > 0.0) {
                return Err(bad("training.time_limit_s", format!("{t} is not a positive number of seconds")));
            }
        }
        if self.workloads.jobs == 0 || self.workloads.jobs > 10_000 {
            return Err(bad("workloads.jobs", format!("{} jobs; expected 1..=10000", self.workloads.jobs)));
        }
        if self.schedulers.names.is_empty() {
            return Err(bad("schedulers.names", "no scheduler".into()));
        }
        let names = self.schedulers().map_err(at("schedulers.names"))?;
        let mut seen = std::collections::HashSet::new();
        for n in &names {
            if !seen.insert(*n) {
                return Err(bad("schedulers.names", format!("`{n}` is listed twice")));
            }
        }
        if !names.contains(&self.schedulers.baseline.parse().map_err(at("schedulers.baseline"))?) {
            return Err(bad(
                "schedulers.baseline",
                format!("`{}` is not in schedulers.names", self.schedulers.baseline),
            ));
        }
        self.plan().map_err(|(field, message)| bad(field, message))?;
        if self.evaluation.seeds == 0 || self.evaluation.seeds > 100_000 {
            return Err(bad("evaluation.seeds", format!("{}; expected 1..=100000", self.evaluation.seeds)));
        }
        let eval = self.eval_range().ok_or_else(|| {
            bad(
                "evaluation.first_seed",
                format!("{} + {} seeds passes the largest seed", self.evaluation.first_seed, self.evaluation.seeds),
            )
        })?;
        for (what, train) in self.training_seed_ranges() {
            if train.start < eval.end && eval.start < train.end {
                return Err(bad(
                    "evaluation.first_seed",
                    format!(
                        "evaluation seeds {eval:?} overlap the {what} {train:?}; evaluation must use unseen job sets"
                    ),
                ));
            }
        }
        if self.training.jobsets == 0 || self.training.jobsets > MAX_JOBSETS as u64 {
            return Err(bad("training.jobsets", format!("{}; expected 1..={MAX_JOBSETS}", self.training.jobsets)));
        }
        if self.training.first_seed.checked_add(self.training.jobsets).is_none() {
            return Err(bad(
                "training.first_seed",
                format!("{} + {} job sets passes the largest seed", self.training.first_seed, self.training.jobsets),
            ));
        }
        if !["scorer", "thesis"].contains(&self.training.algorithm.as_str()) {
            let valid = vec!["scorer".to_string(), "thesis".to_string()];
            let name = self.training.algorithm.clone();
            return Err(
                ModelError::UnknownName { what: "training algorithm", name, valid }.at(loc("training.algorithm"))
            );
        }
        if self.training.algorithm == "scorer" {
            if self.training.scorer_settings.is_empty() {
                return Err(bad("training.scorer_settings", "the scorer needs a setting to train in".into()));
            }
            for (i, st) in self.training.scorer_settings.iter().enumerate() {
                if st.libraries.is_empty()
                    || !(1..=10_000).contains(&st.jobs)
                    || !(1..=MAX_JOBSETS).contains(&st.jobsets)
                {
                    return Err(bad(
                        &format!("training.scorer_settings[{i}]"),
                        format!("needs a library, jobs 1..=10000 and jobsets 1..={MAX_JOBSETS}"),
                    ));
                }
                if let Some(r) = st.arrival_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
                    return Err(bad(
                        &format!("training.scorer_settings[{i}].arrival_rate"),
                        format!("{r} is not a positive rate (jobs/s)"),
                    ));
                }
                if let Some(b) = st.max_slowdown_pct.filter(|b| !(b.is_finite() && *b >= 0.0)) {
                    return Err(bad(
                        &format!("training.scorer_settings[{i}].max_slowdown_pct"),
                        format!("{b} is not a percentage >= 0"),
                    ));
                }
            }
        }
        if let Some(r) = self.workloads.arrival_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
            return Err(bad("workloads.arrival_rate", format!("{r} is not a positive rate (jobs/s)")));
        }
        if let Some(why) = self.workloads.arrival_rate.and_then(|r| arrivals_past_reach(self.workloads.jobs, r)) {
            return Err(bad("workloads.arrival_rate", why));
        }
        let mut names = std::collections::HashSet::new();
        for (i, c) in self.cells.iter().enumerate() {
            let field = |f: &str| format!("cells[{i}].{f}");
            check_cell_name(&c.name).map_err(|m| bad(&field("name"), m))?;
            if !names.insert(c.name.as_str()) {
                return Err(bad(&field("name"), format!("`{}` is used twice", c.name)));
            }
            if c.jobs == 0 || c.jobs > 10_000 {
                return Err(bad(&field("jobs"), format!("{} jobs; expected 1..=10000", c.jobs)));
            }
            if let Some(r) = c.arrival_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
                return Err(bad(&field("arrival_rate"), format!("{r} is not a positive rate (jobs/s)")));
            }
            if let Some(why) = c.arrival_rate.and_then(|r| arrivals_past_reach(c.jobs, r)) {
                return Err(bad(&field("arrival_rate"), why));
            }
            if let Some(b) = c.max_slowdown_pct.filter(|b| !(b.is_finite() && *b >= 0.0)) {
                return Err(bad(&field("max_slowdown_pct"), format!("{b} is not a percentage >= 0")));
            }
        }
        for (i, inst) in self.cost.instances.iter().enumerate() {
            if !(inst.usd_per_hour.is_finite() && inst.usd_per_hour >= 0.0) {
                return Err(bad(
                    &format!("cost.instances[{i}].usd_per_hour"),
                    format!("{} is not a price", inst.usd_per_hour),
                ));
            }
        }
        if self.cost.instance(&self.cost.shared).is_none() {
            return Err(bad("cost.shared", format!("no instance named `{}` in cost.instances", self.cost.shared)));
        }
        for (i, a) in self.cost.assumptions.iter().enumerate() {
            if self.cost.instance(&a.dedicated).is_none() {
                return Err(bad(
                    &format!("cost.assumptions[{i}].dedicated"),
                    format!("no instance named `{}` in cost.instances", a.dedicated),
                ));
            }
            if a.replaces == 0 {
                return Err(bad(&format!("cost.assumptions[{i}].replaces"), "must be at least 1".into()));
            }
        }
        Ok(())
    }
}

/// The name and the accepted names of serde's `unknown variant `x`, expected one of `a`, `b``
/// (or `expected `a` or `b``); `None` for any other message.
fn unknown_variant(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown variant `")?;
    let (name, rest) = rest.split_once('`')?;
    let valid: Vec<String> = rest.split('`').skip(1).step_by(2).map(str::to_string).collect();
    (!valid.is_empty()).then(|| (name.to_string(), valid))
}

/// Why `jobs` arriving at `rate` jobs/s would arrive, on average, past the latest submission a
/// job set keeps ([`dqngpu_model::job::MAX_SUBMIT_S`], the limit the draw holds each set to):
/// found only when that cell's sets were drawn, after training and the main evaluation, and
/// named a flag the experiment does not have (`--arrival-rate`). A rate within reach on average
/// whose draw still passes it (a few percent from the limit) fails there, as before.
fn arrivals_past_reach(jobs: usize, rate: f64) -> Option<String> {
    let span = jobs as f64 / rate;
    (span > dqngpu_model::job::MAX_SUBMIT_S).then(|| {
        format!(
            "{jobs} jobs at {rate} jobs/s arrive over about {span:.3e} s, past the {:.0e} s a job set keeps",
            dqngpu_model::job::MAX_SUBMIT_S
        )
    })
}

/// Checks that `library` has an app of every class in `classes` and that each such app fits
/// the largest GPU of `cluster`: a job set drawn from there could not run otherwise. An error
/// comes with the field at fault, `library` (a class it lacks) or `gpus` (an app too large).
fn check_fits(
    library: &dqngpu_model::AppLibrary,
    cluster: &dqngpu_model::ClusterSpec,
    classes: &[WorkloadClass],
) -> Result<(), (&'static str, ModelError)> {
    let largest = cluster.max_gpu_memory_mib();
    for &class in classes {
        let members = library.class_members(class).map_err(|e| ("library", e))?;
        for app in members {
            let profile = library.get(app).map_err(|e| ("library", e))?;
            profile.check_fits_memory(largest).map_err(|e| ("gpus", e))?;
        }
    }
    Ok(())
}

/// The cells `--quick` keeps (when the config has them): one with arrivals on several GPUs,
/// the held-out library.
pub const QUICK_CELLS: [&str; 2] = ["thesis-4x2-0.1", "heldout-1gpu"];

/// The first line of every `config.toml` the experiment writes (how `--out` tells an
/// interrupted experiment's directory from a user's).
pub const CONFIG_HEADER: &str = "# dqngpu experiment: the effective configuration of this run.";

/// The name the main setting's rows carry (`cell` column); no custom cell may take it.
pub const MAIN_CELL: &str = "main";

/// A cell's name goes unquoted into CSV columns and the report's headings, so it is 1-64 of
/// letters, digits, `.`, `_`, `-`, and not the main setting's.
fn check_cell_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(allowed) {
        return Err(format!("`{name}`: a cell name is 1-64 of letters, digits, `.`, `_`, `-`"));
    }
    if name == MAIN_CELL {
        return Err(format!("`{name}` is the main setting's name; its rows would merge with the main setting's"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_file_is_the_thesis_setup_and_round_trips() {
        let c = ExperimentConfig::from_toml("", None).unwrap();
        assert_eq!(c, ExperimentConfig::default());
        assert_eq!(c.workloads.jobs, 30);
        assert_eq!(c.cluster.gpus, "titanxp:1");
        assert_eq!(c.classes().unwrap().len(), 5);
        assert!(c.schedulers.names.iter().any(|n| n == "dqngpu"));
        let again = ExperimentConfig::from_toml(&c.to_toml(), None).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn shipped_thesis_config_is_the_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/thesis.toml");
        assert_eq!(ExperimentConfig::read(&path).unwrap(), ExperimentConfig::default());
    }

    #[test]
    fn shipped_validation_config_is_the_default_on_other_seeds_and_library() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let v = ExperimentConfig::read(&dir.join("validation.toml")).unwrap();
        let d = ExperimentConfig::default();
        // Its evaluation seeds are neither the default's (the test seeds) nor training's.
        let (test, val, train) = (d.eval_seeds(), v.eval_seeds(), v.training_seeds());
        assert_eq!(val.len(), test.len());
        assert!(val.iter().all(|s| !test.contains(s) && !train.contains(s)), "{val:?}");
        // Its held-out library is neither the default's nor one the scorer trains on.
        let held_out = |c: &ExperimentConfig| -> Vec<String> {
            c.cells.iter().filter(|c| c.name.starts_with("heldout")).map(|c| c.library.clone()).collect()
        };
        let (lib_test, lib_val) = (held_out(&d), held_out(&v));
        assert!(!lib_val.is_empty() && lib_val.iter().all(|l| !lib_test.contains(l)), "{lib_val:?}");
        let trained: Vec<&String> = v.training.scorer_settings.iter().flat_map(|s| &s.libraries).collect();
        assert!(lib_val.iter().all(|l| !trained.contains(&l)), "{lib_val:?}");
        // Everything else is the default.
        let mut back = v.clone();
        back.evaluation.first_seed = d.evaluation.first_seed;
        for (c, dc) in back.cells.iter_mut().zip(&d.cells) {
            c.library = dc.library.clone();
        }
        assert_eq!(back, d);
    }

    /// A step below the simulator's floor, and arrivals so slow that the draw's last job would
    /// come past the latest submission kept, failed only once runs began, after every agent
    /// had trained, naming neither the key nor the file (or a flag `experiment` lacks). They
    /// are refused when the config is read, at their keys.
    #[test]
    fn a_step_or_arrival_rate_the_simulator_refuses_is_refused_at_its_key() {
        let p = Some(Path::new("exp.toml"));
        let e = ExperimentConfig::from_toml(
            "step_s = 0.0005
",
            p,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("exp.toml") && e.contains("step_s") && e.contains("0.001"), "{e}");
        let cell =
            "[[cells]]\nname = \"slow\"\nlibrary = \"thesis\"\ngpus = \"titanxp:1\"\njobs = 30\narrival_rate = 1e-9\n";
        let e = ExperimentConfig::from_toml(cell, p).unwrap_err().to_string();
        assert!(e.contains("exp.toml") && e.contains("cells[0].arrival_rate") && !e.contains("--arrival-rate"), "{e}");
        let e = ExperimentConfig::from_toml("[workloads]\narrival_rate = 1e-9\n", p).unwrap_err().to_string();
        assert!(e.contains("workloads.arrival_rate"), "{e}");
    }

    /// An unknown name of a closed set is a usage error (exit 2), naming the file, line and key
    /// and what is accepted, as unknown schedulers and GPUs are; it exited 1.
    #[test]
    fn an_unknown_optimizer_objective_or_algorithm_is_a_usage_error() {
        let p = Some(Path::new("exp.toml"));
        for (text, key, want) in [
            ("[training]\noptimizer = \"sgd\"\n", "optimizer", "adam"),
            ("[training]\nobjective = \"latency\"\n", "objective", "makespan"),
            ("[training]\nalgorithm = \"dqn\"\n", "training.algorithm", "thesis"),
        ] {
            let e = ExperimentConfig::from_toml(text, p).unwrap_err();
            assert!(e.is_usage(), "{e}");
            let m = e.to_string();
            assert!(m.contains("exp.toml") && m.contains(key) && m.contains(want), "{m}");
        }
    }

    #[test]
    fn seeds_are_disjoint_and_quick_is_smaller() {
        let c = ExperimentConfig::default();
        let (e, t) = (c.eval_seeds(), c.training_seeds());
        assert_eq!(e.len(), 10);
        assert!(e.iter().all(|s| !t.contains(s)));
        let q = c.clone().quick();
        assert_eq!(q.eval_seeds().len(), 2);
        assert_eq!(q.training.iterations, c.training.quick_iterations);
    }

    #[test]
    fn episodes_are_capped_a_training_seed_overflow_is_refused_and_a_wrong_type_names_its_key() {
        let p = Some(Path::new("exp.toml"));
        let e = ExperimentConfig::from_toml("[training]\nepisodes = 1000000000\n", p).unwrap_err().to_string();
        assert!(e.contains("training.episodes") && e.contains("1..=1000"), "{e}");
        ExperimentConfig::from_toml("[training]\nepisodes = 1000\n", p).unwrap();
        let toml = format!("[training]\nfirst_seed = {}\njobsets = 10\n", u64::MAX - 5);
        let e = ExperimentConfig::from_toml(&toml, p).unwrap_err().to_string();
        assert!(e.contains("training.first_seed") && e.contains("passes the largest seed"), "{e}");
        let e = ExperimentConfig::from_toml("# c\n[workloads]\njobs = \"thirty\"\n", p).unwrap_err().to_string();
        assert!(e.contains("exp.toml") && e.contains("line 3") && e.contains("workloads.jobs"), "{e}");
        assert_eq!(key_at("a = 1\n[x]\nb = 'q'\n", 13).as_deref(), Some("x.b"));
        assert_eq!(key_at("seeds = 'q'\n", 8).as_deref(), Some("seeds"));
        assert_eq!(key_at("[[cells]]\nname = 3\n", 17).as_deref(), Some("cells.name"));
        assert_eq!(key_at("[x\n", 1), None);
    }

    #[test]
    fn training_sizes_have_the_clis_caps_and_classes_are_listed_once() {
        let p = Some(Path::new("exp.toml"));
        let e = ExperimentConfig::from_toml("[training]\nhidden = [200000, 200000]\n", p).unwrap_err().to_string();
        assert!(e.contains("exp.toml") && e.contains("training.hidden") && e.contains("4096"), "{e}");
        let e = ExperimentConfig::from_toml("[training]\njobsets = 10001\nfirst_seed = 100000\n", p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("training.jobsets"), "{e}");
        let e =
            ExperimentConfig::from_toml("[workloads]\nclasses = ['random', 'random']\n", p).unwrap_err().to_string();
        assert!(e.contains("workloads.classes") && e.contains("twice"), "{e}");
        let mut c = ExperimentConfig::default();
        c.training.scorer_settings[0].jobsets = MAX_JOBSETS + 1;
        assert!(c.validate(None).unwrap_err().to_string().contains("training.scorer_settings[0]"));
    }

    #[test]
    fn references_of_cells_and_training_settings_are_checked_before_any_work() {
        let p = Some(Path::new("exp.toml"));
        ExperimentConfig::default().check_references(p).unwrap();
        let mut c = ExperimentConfig::default();
        c.cells[1].gpus = "bogus:1".into();
        let e = c.check_references(p).unwrap_err().to_string();
        assert!(e.contains("exp.toml") && e.contains("cells[1].gpus") && e.contains("bogus"), "{e}");
        let mut c = ExperimentConfig::default();
        c.cells[0].library = "nolib".into();
        assert!(c.check_references(p).unwrap_err().to_string().contains("cells[0].library"));
        let mut c = ExperimentConfig::default();
        c.training.scorer_settings[1].libraries.push("nolib".into());
        let e = c.check_references(p).unwrap_err().to_string();
        assert!(e.contains("training.scorer_settings[1].libraries["), "{e}");
        let mut c = ExperimentConfig::default();
        c.training.scorer_settings[0].gpus = "bogus".into();
        assert!(c.check_references(p).unwrap_err().to_string().contains("training.scorer_settings[0].gpus"));
        // The thesis's agents train on the main setting: the scorer's settings are not read.
        c.training.algorithm = "thesis".into();
        c.check_references(p).unwrap();
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let p = Some(Path::new("exp.toml"));
        let e = ExperimentConfig::from_toml("[evaluation]\nfirst_seed = 5\n", p).unwrap_err().to_string();
        assert!(e.contains("exp.toml") && e.contains("evaluation.first_seed") && e.contains("overlap"), "{e}");
        let e = ExperimentConfig::from_toml("library = 'thesis'\n[workloads]\nbogus = 1\n", p).unwrap_err().to_string();
        assert!(e.contains("exp.toml, line 3") && e.contains("bogus"), "{e}");
        let e = ExperimentConfig::from_toml("[workloads]\nclasses = ['heavy']\n", p).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("gpu_heavy"), "{e}");
        let e = ExperimentConfig::from_toml("[schedulers]\nnames = ['tetris']\n", p).unwrap_err().to_string();
        assert!(e.contains("schedulers.baseline"), "{e}");
        let e = ExperimentConfig::from_toml("[schedulers]\nplan_rows = 0\n", p).unwrap_err().to_string();
        assert!(e.contains("schedulers.plan_rows"), "{e}");
        let e = ExperimentConfig::from_toml("[schedulers]\nplan_guard = -1.0\n", p).unwrap_err().to_string();
        assert!(e.contains("schedulers.plan_guard"), "{e}");
        let e = ExperimentConfig::from_toml("[cost]\nshared = 'p3.2xlarge'\n", p).unwrap_err().to_string();
        assert!(e.contains("cost.shared") && e.contains("p3.2xlarge"), "{e}");
        let e = ExperimentConfig::from_toml("step_s = -1.0\n", p).unwrap_err().to_string();
        assert!(e.contains("step_s"), "{e}");
        let e = ExperimentConfig::from_toml("[training]\nscorer_makespan_guard = -0.5\n", p).unwrap_err().to_string();
        assert!(e.contains("training.scorer_makespan_guard") && e.contains("-0.5"), "{e}");
        let e = ExperimentConfig::from_toml("[training]\nscorer_restarts = 0\n", p).unwrap_err().to_string();
        assert!(e.contains("training.scorer_restarts"), "{e}");
        let e = ExperimentConfig::from_toml("[training]\nscorer_improvement_near_tie_pct = -1\n", p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("training.scorer_improvement_near_tie_pct") && e.contains("-1"), "{e}");
    }

    /// A custom cell named `main` would merge with the main setting's rows; a name with a
    /// comma or a quote would break the CSVs' columns.
    #[test]
    fn a_cell_name_is_plain_and_not_the_main_settings() {
        let p = Some(Path::new("exp.toml"));
        let cell =
            |name: &str| format!("[[cells]]\nname = '{name}'\nlibrary = 'thesis'\ngpus = 'titanxp:1'\njobs = 10\n");
        let e = ExperimentConfig::from_toml(&cell(MAIN_CELL), p).unwrap_err().to_string();
        assert!(e.contains("exp.toml") && e.contains("cells[0].name") && e.contains("main setting"), "{e}");
        for bad in ["a,b \"q\"", "", "x y", "é", &"x".repeat(65)] {
            let e = ExperimentConfig::from_toml(&cell(bad), p).unwrap_err().to_string();
            assert!(e.contains("exp.toml") && e.contains("cells[0].name") && e.contains("1-64"), "{bad}: {e}");
        }
        for good in ["thesis-4x2-0.1", "A_b.9", &"x".repeat(64)] {
            ExperimentConfig::from_toml(&cell(good), p).unwrap();
        }
    }

    /// Evaluation seeds are checked against every seed training draws: the thesis agents',
    /// and the scorer's training and validation sets (`dqngpu_rl::scorer::train`).
    #[test]
    fn evaluation_seeds_never_meet_the_scorers_training_or_validation_seeds() {
        use dqngpu_rl::scorer::train::{train_seed_base, validation_seed_base};
        let p = Some(Path::new("exp.toml"));
        let c = ExperimentConfig::default();
        for (first, what) in
            [(train_seed_base(c.training.seed), "training"), (validation_seed_base(c.training.seed), "validation")]
        {
            let e = ExperimentConfig::from_toml(&format!("[evaluation]\nfirst_seed = {first}\n"), p)
                .unwrap_err()
                .to_string();
            assert!(e.contains("evaluation.first_seed") && e.contains(what) && e.contains("training.seed"), "{e}");
            // The thesis's agents alone do not draw from there.
            let thesis = format!("[evaluation]\nfirst_seed = {first}\n[training]\nalgorithm = 'thesis'\n");
            ExperimentConfig::from_toml(&thesis, p).unwrap();
        }
    }

    /// A seed range past `u64::MAX` is refused rather than cut short.
    #[test]
    fn an_evaluation_range_that_overflows_is_refused() {
        let p = Some(Path::new("exp.toml"));
        let e = ExperimentConfig::from_toml(&format!("[evaluation]\nfirst_seed = {}\n", u64::MAX - 3), p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("exp.toml") && e.contains("evaluation.first_seed"), "{e}");
        let c = ExperimentConfig::from_toml(&format!("[evaluation]\nfirst_seed = {}\n", u64::MAX - 10), p).unwrap();
        assert_eq!(c.eval_seeds().len(), 10);
    }

    /// Unknown names are usage errors that name the file and the field.
    #[test]
    fn unknown_names_name_file_and_field_and_stay_usage_errors() {
        let p = Some(Path::new("exp.toml"));
        for (text, field) in [
            ("[workloads]\nclasses = ['heavy']\n", "workloads.classes"),
            ("[workloads]\nfocus = 'heavy'\n", "workloads.focus"),
            ("[training]\nworkloads = ['random', 'heavy']\n", "training.workloads[1]"),
            ("[schedulers]\nnames = ['sjf', 'bogus']\n", "schedulers.names"),
            ("[schedulers]\nbaseline = 'bogus'\n", "schedulers.baseline"),
        ] {
            let e = ExperimentConfig::from_toml(text, p).unwrap_err();
            let m = e.to_string();
            assert!(e.is_usage() && m.contains("exp.toml") && m.contains(field), "{text}: {m}");
        }
        for (text, field) in [
            ("library = 'nolib'\n", "library"),
            ("interference = 'bogus'\n", "interference"),
            ("[cluster]\ngpus = 'bogus:1'\n", "cluster.gpus"),
        ] {
            let c = ExperimentConfig::from_toml(text, p).unwrap();
            let e = c.check_references(p).unwrap_err();
            let m = e.to_string();
            assert!(e.is_usage() && m.contains("exp.toml") && m.contains(field), "{text}: {m}");
        }
        let e = ExperimentConfig::from_toml("[training]\njobsets_per_iter = 0\n", p).unwrap_err().to_string();
        assert!(e.contains("training.jobsets_per_iter"), "{e}");
    }

    /// A cell or a training setting that no job set could run in fails before any training,
    /// saying why: an app larger than the GPU, a class the library lacks.
    #[test]
    fn a_library_that_cannot_run_in_its_setting_is_refused_up_front() {
        let p = Some(Path::new("exp.toml"));
        let mut c = ExperimentConfig {
            cells: vec![CellConfig::new("lucid-small", "lucid", "titanxp:1", 10, None, None)],
            ..Default::default()
        };
        let e = c.check_references(p).unwrap_err().to_string();
        assert!(
            e.contains("exp.toml") && e.contains("cells[0].gpus") && e.contains("MiB") && e.contains("largest GPU"),
            "{e}"
        );
        c.cells = vec![CellConfig::new("onegen", "generated:1:1", "titanxp:1", 10, None, None)];
        let e = c.check_references(p).unwrap_err().to_string();
        assert!(e.contains("cells[0].library") && e.contains("workload class"), "{e}");
        c.cells.clear();
        c.training.scorer_settings[0].libraries.push("generated:1:1".into());
        let e = c.check_references(p).unwrap_err().to_string();
        assert!(e.contains("training.scorer_settings[0].libraries[1]") && e.contains("workload class"), "{e}");
    }

    /// A step longer than a library's profile interval is warned of, as `simulate` does.
    #[test]
    fn a_step_longer_than_the_profile_interval_is_warned_of() {
        let c = ExperimentConfig { cells: Vec::new(), ..Default::default() };
        let shortest = dqngpu_model::library::resolve("thesis")
            .unwrap()
            .apps
            .values()
            .map(|p| p.interval_s)
            .fold(f64::INFINITY, f64::min);
        assert!(ExperimentConfig { step_s: shortest, ..c.clone() }.step_warnings().is_empty());
        let w = ExperimentConfig { step_s: shortest * 2.0, ..c }.step_warnings();
        assert!(
            w.len() == 1 && w[0].contains("step_s") && w[0].contains("`thesis`") && w[0].contains("skipped"),
            "{w:?}"
        );
    }

    /// A library directory named relative to the config is found beside it, and written
    /// back absolute, so the config replays from anywhere.
    #[test]
    fn library_directories_are_relative_to_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("mylib")).unwrap();
        let text = "library = 'mylib'\n[[cells]]\nname = 'c'\nlibrary = 'mylib'\ngpus = 'titanxp:1'\njobs = 10\n\
                    [[training.scorer_settings]]\nlibraries = ['mylib', 'thesis']\ngpus = 'titanxp:1'\njobs = 10\njobsets = 2\n";
        std::fs::write(dir.path().join("exp.toml"), text).unwrap();
        let c = ExperimentConfig::read(&dir.path().join("exp.toml")).unwrap();
        let want = dir.path().join("mylib").display().to_string();
        assert_eq!(c.library, want);
        assert_eq!(c.cells[0].library, want);
        assert_eq!(c.training.scorer_settings[0].libraries, vec![want, "thesis".to_string()]);
        assert!(ExperimentConfig::from_toml(&c.to_toml(), None).unwrap().library.starts_with('/'));
    }

    proptest! {
        #[test]
        fn config_parser_never_panics(s in "\\PC{0,200}") {
            let _ = ExperimentConfig::from_toml(&s, None);
        }
    }
}
