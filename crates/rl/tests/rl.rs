//! Tests of the RL crate: DeepRM's environment, the trainer on a trivially learnable task,
//! checkpoints, and the agents on the simulator.

use std::sync::Arc;

use dqngpu_model::{AppInfo, AppProfile, ClusterSpec, JobSet, JobSpec, Resources, WorkloadClass};
use dqngpu_rl::checkpoint::{self, CheckpointMeta, Encoding, FORMAT_VERSION};
use dqngpu_rl::deeprm::{self, Baseline, ClassicEnv, DeepRmParams, Scheduler};
use dqngpu_rl::env::{Env, Task, Transition};
use dqngpu_rl::gpu::{self, AgentKind, Candidate, GpuEncoding, GpuRound, RlPolicy};
use dqngpu_rl::net::{Head, OptimizerKind, PolicyNet};
use dqngpu_rl::reinforce::{self, TrainConfig};
use dqngpu_rl::RlError;

fn contention() -> Arc<dyn dqngpu_interference::Interference> {
    Arc::from(dqngpu_interference::by_name("contention").unwrap())
}

#[test]
fn deeprm_return_is_minus_the_sum_of_slowdowns() {
    let p = DeepRmParams::default();
    let sets = deeprm::job_sets(&p, 7, 3);
    for seq in &sets {
        let mut env = ClassicEnv::new(&p, seq);
        let mut total = 0.0;
        let mut rng = rand::thread_rng();
        while !env.is_done() {
            let a = Baseline::Sjf.act(&env, &p, &mut rng);
            total += env.step(a).reward;
        }
        let slowdowns: f64 = env.finished().map(|(e, f, l)| (f - e) as f64 / l as f64).sum();
        assert!(slowdowns > 0.0);
        assert!((total + slowdowns).abs() < 1e-6, "return {total} vs slowdowns {slowdowns}");
    }
}

#[test]
fn deeprm_baselines_rank_as_in_the_paper() {
    let p = DeepRmParams::default();
    let sets = deeprm::job_sets(&p, 11, 20);
    let eval = |b| deeprm::evaluate(&p, &sets, Scheduler::Baseline(b), 0).unwrap().avg_slowdown;
    let (sjf, packer) = (eval(Baseline::Sjf), eval(Baseline::Packer));
    assert!(sjf >= 1.0 && sjf < packer, "sjf {sjf} packer {packer}");
}

/// Two actions; action 1 earns 1, action 0 nothing; five steps.
struct Bandit {
    left: usize,
}

impl Env for Bandit {
    fn obs_len(&self) -> usize {
        2
    }
    fn n_actions(&self) -> usize {
        2
    }
    fn observe(&self, obs: &mut [f32], mask: &mut [bool]) {
        obs.copy_from_slice(&[1.0, self.left as f32 / 5.0]);
        mask.fill(true);
    }
    fn step(&mut self, a: usize) -> Transition {
        self.left -= 1;
        Transition { reward: a as f64, done: self.left == 0 }
    }
    fn score(&self) -> f64 {
        0.0
    }
}

struct BanditTask;

impl Task for BanditTask {
    type Env<'a> = Bandit;
    fn jobsets(&self) -> usize {
        1
    }
    fn make(&self, _: usize) -> Bandit {
        Bandit { left: 5 }
    }
    fn obs_len(&self) -> usize {
        2
    }
    fn n_actions(&self) -> usize {
        2
    }
}

/// An image side past the cap is refused by the encoding's check, before any image (or
/// network input of that size) is allocated; the largest allowed side passes.
#[test]
fn an_encoding_past_the_image_cap_is_refused() {
    let enc = GpuEncoding::new(AgentKind::Dqngpu);
    let side = gpu::MAX_IMAGE_SIDE;
    assert!(GpuEncoding { time_horizon: side, res_slots: side, ..enc.clone() }.validate().is_ok());
    for bad in [
        GpuEncoding { time_horizon: side + 1, ..enc.clone() },
        GpuEncoding { res_slots: side + 1, ..enc.clone() },
        GpuEncoding { time_horizon: 1_000_000_000, ..enc.clone() },
    ] {
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("at most 200"), "{e}");
    }
}

#[test]
fn reinforce_learns_a_trivial_bandit() {
    for optimizer in [OptimizerKind::Rmsprop, OptimizerKind::Adam] {
        let net = PolicyNet::new(2, &[8], 2, Head::Joint, 3).unwrap();
        let cfg =
            TrainConfig { iterations: 60, episodes: 16, lr: 0.02, optimizer, hidden: vec![8], ..Default::default() };
        let curve = reinforce::train(&BanditTask, &net, &cfg, &mut |_, _| true).unwrap();
        let first = curve[0].mean_return;
        let last = curve.last().unwrap().mean_return;
        assert!(first < 3.5 && last > 4.5, "{optimizer:?}: return {first} -> {last}");
    }
}

#[test]
fn training_stops_when_asked() {
    let net = PolicyNet::new(2, &[4], 2, Head::Joint, 3).unwrap();
    let cfg = TrainConfig { iterations: 50, episodes: 2, hidden: vec![4], ..Default::default() };
    let curve = reinforce::train(&BanditTask, &net, &cfg, &mut |s, _| s.iteration < 3).unwrap();
    assert_eq!(curve.len(), 3);
    let bad = TrainConfig { lr: -1.0, ..cfg };
    assert!(matches!(
        reinforce::train(&BanditTask, &net, &bad, &mut |_, _| true),
        Err(RlError::Config { field: "lr", .. })
    ));
}

fn meta(encoding: Encoding, agent: &str) -> CheckpointMeta {
    CheckpointMeta {
        format: FORMAT_VERSION,
        agent: agent.into(),
        encoding,
        hidden: vec![20],
        train: TrainConfig::default(),
        trained_on: "test".into(),
        iterations_done: 0,
        train_wall_s: 0.0,
        schedule: None,
        selection: None,
        weights_fnv1a64: None,
    }
}

#[test]
fn checkpoint_round_trip_and_mismatch_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let p = DeepRmParams { num_nw: 5, ..Default::default() };
    let enc = Encoding::DeepRmClassic(p.clone());
    let net = PolicyNet::new(enc.obs_len(), &[20], enc.n_actions(), Head::Joint, 9).unwrap();
    checkpoint::save(&path, &net, &meta(enc.clone(), deeprm::AGENT)).unwrap();
    let (back, m) = checkpoint::load(&path, deeprm::AGENT, Some(&enc)).unwrap();
    assert_eq!(m.encoding, enc);
    let sets = deeprm::job_sets(&p, 5, 1);
    let env = ClassicEnv::new(&p, &sets[0]);
    let (mut obs, mut mask) = (vec![0.0; env.obs_len()], vec![false; env.n_actions()]);
    env.observe(&mut obs, &mut mask);
    assert_eq!(net.probs(&obs, &mask, 1).unwrap(), back.probs(&obs, &mask, 1).unwrap());

    let other = Encoding::DeepRmClassic(DeepRmParams { num_nw: 10, ..p });
    let e = checkpoint::load(&path, deeprm::AGENT, Some(&other)).unwrap_err();
    assert!(matches!(e, RlError::EncodingMismatch { .. }) && e.to_string().contains("num_nw"), "{e}");
    let e = checkpoint::load(&path, "dqngpu", None).unwrap_err();
    assert!(e.to_string().contains("trained for agent `deeprm-classic`"), "{e}");
    let e = RlPolicy::load(&path, AgentKind::Dqngpu).unwrap_err();
    assert!(matches!(e, RlError::EncodingMismatch { .. }), "{e}");
    let e = checkpoint::load(&dir.path().join("missing.safetensors"), deeprm::AGENT, None).unwrap_err();
    assert!(e.to_string().contains("missing.safetensors") && e.to_string().contains("no model file"), "{e}");
    // Weights without their metadata: the metadata file is named.
    std::fs::write(dir.path().join("bare.safetensors"), b"x").unwrap();
    let e = checkpoint::load(&dir.path().join("bare.safetensors"), deeprm::AGENT, None).unwrap_err();
    assert!(e.to_string().contains("bare.json"), "{e}");
}

#[test]
fn a_model_is_never_saved_over_a_json_that_is_no_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.safetensors");
    let users = r#"{"jobs": [{"id": 0, "app": "alexnet", "submit_s": 0}]}"#;
    std::fs::write(dir.path().join("jobs.json"), users).unwrap();
    let enc = Encoding::DeepRmClassic(DeepRmParams { num_nw: 5, ..Default::default() });
    let net = PolicyNet::new(enc.obs_len(), &[4], enc.n_actions(), Head::Joint, 1).unwrap();
    for e in [
        checkpoint::check_path(&path).unwrap_err(),
        checkpoint::save(&path, &net, &meta(enc.clone(), deeprm::AGENT)).unwrap_err(),
    ] {
        assert!(e.to_string().contains("jobs.json") && e.to_string().contains("no checkpoint"), "{e}");
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("jobs.json")).unwrap(), users, "the user's file is kept");
    assert!(!path.exists(), "nothing half-saved");
    // An earlier checkpoint's metadata is replaced as before.
    let model = dir.path().join("m.safetensors");
    checkpoint::save(&model, &net, &meta(enc.clone(), deeprm::AGENT)).unwrap();
    checkpoint::check_path(&model).unwrap();
    checkpoint::save(&model, &net, &meta(enc, deeprm::AGENT)).unwrap();
}

fn profile(name: &str, mem: &[(usize, f64)]) -> AppProfile {
    let samples = mem.iter().flat_map(|&(n, m)| vec![Resources::new(30.0, m, 20.0, 100.0); n]).collect();
    AppProfile::new(AppInfo { name: name.into(), ..Default::default() }, 1.0, samples).unwrap()
}

#[test]
fn combination_mask_packs_jobs_whose_memory_peaks_do_not_coincide() {
    let a = profile("a", &[(105, 8000.0), (105, 1000.0)]);
    let b = profile("b", &[(105, 1000.0), (105, 8000.0)]);
    let titan = dqngpu_model::gpu::lookup("titanxp").unwrap();
    for (agent, pair_allowed) in [(AgentKind::Dqngpu, true), (AgentKind::DeeprmMax, false)] {
        let enc = GpuEncoding::new(agent);
        let round = GpuRound { spec: titan.clone(), capacity: titan.capacity(), residents: vec![] };
        let queued = |id, p: &AppProfile| dqngpu_model::QueuedJob {
            id,
            app: p.app.name.clone(),
            profile: Arc::new(p.clone()),
            submit_s: 0.0,
            restarts: 0,
            avoid_apps: vec![],
        };
        let slots = vec![Candidate::new(&enc, &queued(0, &a)), Candidate::new(&enc, &queued(1, &b))];
        let (mut obs, mut mask) = (vec![0.0; enc.obs_len()], vec![false; enc.n_actions()]);
        gpu::encode(&enc, &round, &slots, 0, &mut obs, &mut mask);
        let pair = (0..enc.n_actions()).find(|&x| enc.subset(x) == 0b11);
        assert_eq!(pair.is_some_and(|x| mask[x]), pair_allowed, "{agent:?}");
        assert!(mask[1], "a single job fits");
        assert!(!mask[0], "an idle GPU does not hold while a job fits");
        let a_and_b_slot4 = (0..enc.n_actions()).find(|&x| enc.subset(x) == 0b100);
        assert!(a_and_b_slot4.is_none_or(|x| !mask[x]), "an empty slot is never allowed");
    }
}

fn small_sets(n: usize, seed: u64) -> Vec<JobSet> {
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    (0..n)
        .map(|i| {
            dqngpu_sim::draw(&lib, WorkloadClass::Random, 8, seed + i as u64, dqngpu_sim::Arrivals::AllAtZero).unwrap()
        })
        .collect()
}

fn tiny_train(agent: AgentKind, seed: u64) -> (RlPolicy, Vec<reinforce::IterStats>) {
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let cfg = TrainConfig { iterations: 2, episodes: 2, jobsets_per_iter: 1, seed, ..Default::default() };
    gpu::train(&GpuEncoding::new(agent), &cluster, &lib, contention(), small_sets(1, 5), &cfg, &mut |_, _| true)
        .unwrap()
}

#[test]
fn same_seed_and_model_file_give_the_same_results() {
    let (p1, c1) = tiny_train(AgentKind::Dqngpu, 4);
    let (_, c2) = tiny_train(AgentKind::Dqngpu, 4);
    let strip = |c: &[reinforce::IterStats]| c.iter().map(|s| (s.mean_return, s.mean_score)).collect::<Vec<_>>();
    assert_eq!(strip(&c1), strip(&c2));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dqngpu.safetensors");
    let enc = Encoding::Gpu(p1.encoding().clone());
    checkpoint::save(&path, p1.net(), &meta(enc, "dqngpu")).unwrap();
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let set = &small_sets(1, 77)[0];
    let run = || {
        let p = dqngpu_rl::policy_by_name("dqngpu", Some(&path), 0).unwrap();
        let r = dqngpu_sim::run(p.as_ref(), &cluster, &lib, set, contention(), Default::default()).unwrap();
        (r.makespan_s, r.jobs.iter().map(|j| (j.gpu, j.start_s, j.finish_s)).collect::<Vec<_>>())
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    assert!(a.0 > 0.0);
}

#[test]
fn agents_place_on_a_cluster_of_4_nodes_by_2_gpus() {
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("4xtitanxp:2").unwrap();
    let jobs = (0..16)
        .map(|i| JobSpec {
            id: i,
            app: ["GROMACS", "vgg16", "alexnet", "LAMMPS"][i as usize % 4].into(),
            submit_s: 0.0,
        })
        .collect();
    let set = JobSet::new(jobs);
    for agent in [AgentKind::Dqngpu, AgentKind::DeeprmMean] {
        let enc = GpuEncoding::new(agent);
        let net = PolicyNet::new(enc.obs_len(), &[20], enc.n_actions(), Head::PerAction, 2).unwrap();
        let policy = RlPolicy::new(enc, net).unwrap();
        let r = dqngpu_sim::run(&policy, &cluster, &lib, &set, contention(), Default::default()).unwrap();
        assert!(r.completed, "{agent:?}");
        let used: std::collections::BTreeSet<_> = r.jobs.iter().filter_map(|j| j.gpu).collect();
        assert_eq!(used.len(), 8, "{agent:?} used GPUs {used:?}");
    }
}

#[test]
fn policy_by_name_resolves_heuristics_and_agents() {
    assert_eq!(dqngpu_rl::policy_by_name("tetris", None, 0).unwrap().name(), "tetris");
    let e = dqngpu_rl::policy_by_name("dqngpu", None, 0).err().unwrap();
    assert!(matches!(e, RlError::ModelRequired { .. }), "{e}");
    let e = dqngpu_rl::policy_by_name("magic", None, 0).err().unwrap().to_string();
    assert!(e.contains("magic") && e.contains("sjf") && e.contains("deeprm-mean"), "{e}");
}

/// Places every waiting job on GPU 0 at once.
struct AllOnGpu0;

impl dqngpu_model::Policy for AllOnGpu0 {
    fn name(&self) -> &str {
        "all-on-gpu0"
    }
    fn decide(&self, view: &dqngpu_model::ClusterView<'_>) -> Vec<dqngpu_model::Placement> {
        if view.queue.is_empty() {
            return vec![];
        }
        vec![dqngpu_model::Placement { gpu: 0, jobs: view.queue.iter().map(|q| q.id).collect() }]
    }
}

#[test]
fn slowdown_guard_predicts_what_the_simulator_measures() {
    // The guard's prediction against the simulator on the thesis apps
    // (rippling, phased profiles): groups of two and three started together on one Titan Xp.
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let titan = dqngpu_model::gpu::lookup("titanxp").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let guard = gpu::SlowdownGuard::default();
    let groups: [&[&str]; 5] = [
        &["GROMACS", "alexnet"],
        &["GROMACS", "GROMACS"],
        &["HOOMD", "GROMACS"],
        &["QMCPACK", "googlenet", "GROMACS"],
        &["LAMMPS", "HOOMD"],
    ];
    for apps in groups {
        let set = JobSet {
            library: None,
            class: None,
            seed: None,
            jobs: apps
                .iter()
                .enumerate()
                .map(|(i, a)| JobSpec { id: i as u64, app: a.to_string(), submit_s: 0.0 })
                .collect(),
        };
        let r = dqngpu_sim::run(&AllOnGpu0, &cluster, &lib, &set, contention(), Default::default()).unwrap();
        let measured = r.jobs.iter().filter_map(|j| j.exec_slowdown).fold(0.0f64, f64::max) - 1.0;
        let profiles: Vec<_> = apps.iter().map(|a| lib.get(a).unwrap().clone()).collect();
        let jobs: Vec<gpu::GuardJob> = profiles
            .iter()
            .map(|p| gpu::GuardJob { app: &p.app.name, profile: p, progress_s: 0.0, lost_s: 0.0 })
            .collect();
        let unbounded = gpu::SlowdownGuard { max_slowdown: 10.0, ..guard };
        let predicted = unbounded.predict(&titan, &jobs).worst_slowdown;
        assert!(measured > 0.0, "{apps:?} share the GPU, so they slow down");
        // Same stepping rule as the simulator: the same answer, up to rounding.
        let tolerance = 1e-9;
        assert!((predicted - measured).abs() < tolerance, "{apps:?}: predicted {predicted}, measured {measured}");
        assert_eq!(guard.predict(&titan, &jobs).admitted, measured <= 0.02, "{apps:?}: measured {measured}");
    }
}

/// Issue 10, liveness: every simulation of every policy finishes, whatever the job set, the
/// cluster and the arrivals: heuristics, a policy that never places anything, and untrained
/// agents (random weights: the thesis agent with and without the slowdown guard, DeepRM Max,
/// the scorer, and the scorer with search at decision time) included.
mod liveness {
    use super::*;
    use dqngpu_model::{ClusterView, Placement, Policy};
    use proptest::prelude::*;

    struct Holder;
    impl Policy for Holder {
        fn name(&self) -> &str {
            "test-holder"
        }
        fn decide(&self, _view: &ClusterView<'_>) -> Vec<Placement> {
            Vec::new()
        }
    }

    const CLUSTERS: [&str; 4] = ["titanxp:1", "titanxp:2", "2xtitanxp:2", "titanxp,rtx3090:1"];
    const AGENTS: usize = 6;

    fn policy(i: usize, seed: u64) -> Box<dyn Policy> {
        let untrained = |enc: GpuEncoding| {
            let net = PolicyNet::new(enc.obs_len(), &[20], enc.n_actions(), Head::PerAction, seed).unwrap();
            Box::new(RlPolicy::new(enc, net).unwrap()) as Box<dyn Policy>
        };
        match i {
            0 => Box::new(Holder),
            1 => untrained(GpuEncoding::new(AgentKind::Dqngpu)),
            2 => untrained(GpuEncoding { guard: None, ..GpuEncoding::new(AgentKind::Dqngpu) }),
            3 => untrained(GpuEncoding::new(AgentKind::DeeprmMax)),
            4 => Box::new(dqngpu_rl::scorer::ScorerPolicy::untrained(&[32, 16], seed).unwrap()),
            5 => Box::new(dqngpu_rl::scorer::plan::PlanPolicy::new(
                dqngpu_rl::scorer::ScorerPolicy::untrained(&[32, 16], seed).unwrap(),
                Default::default(),
            )),
            _ => dqngpu_policy::by_name(dqngpu_policy::NAMES[i - AGENTS], seed).unwrap(),
        }
    }

    /// A workload class, a number of jobs, a seed, a cluster (index into [`CLUSTERS`]) and
    /// arrivals (a Poisson rate, or all at t = 0).
    type Case = (usize, usize, u64, usize, Option<f64>);

    fn case() -> impl Strategy<Value = Case> {
        (0usize..5, 1usize..10, 0u64..1000, 0usize..CLUSTERS.len(), prop::option::of(0.001f64..0.5))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: dqngpu_model::testing::cases_or(32), failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn every_simulation_of_every_policy_finishes(c in case(), which in 0usize..AGENTS + dqngpu_policy::NAMES.len()) {
            finishes(c, which)?;
        }

        /// The same for the scorer with search at decision time alone (in the test above it
        /// is one policy of many, drawn in few cases).
        #[test]
        fn every_simulation_of_the_plan_finishes(c in case()) {
            finishes(c, 5)?;
        }
    }

    /// Simulates policy `which` on a drawn job set and checks that every job finished.
    fn finishes((class, n_jobs, seed, cluster, rate): Case, which: usize) -> Result<(), TestCaseError> {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let arrivals = match rate {
            Some(rate_per_s) => dqngpu_sim::Arrivals::Poisson { rate_per_s },
            None => dqngpu_sim::Arrivals::AllAtZero,
        };
        let set = dqngpu_sim::draw(&lib, WorkloadClass::ALL[class], n_jobs, seed, arrivals).unwrap();
        let cluster = ClusterSpec::parse_gpus(CLUSTERS[cluster]).unwrap();
        let p = policy(which, seed);
        let config = dqngpu_sim::SimConfig::default();
        let r = dqngpu_sim::run(p.as_ref(), &cluster, &lib, &set, contention(), config);
        let r = r.map_err(|e| TestCaseError::fail(format!("{}: {e}", p.name())))?;
        prop_assert!(r.completed);
        prop_assert!(r.jobs.iter().all(|j| j.finish_s.is_some()));
        if which == 0 {
            // The holder places nothing: the liveness rule started every job.
            prop_assert_eq!(r.liveness_starts, set.jobs.len() as u64 + r.restarts);
        }
        Ok(())
    }
}

/// Issue 10: the JCT objective's reward sums to minus the job-seconds spent in the system, the
/// makespan objective's to minus the makespan.
#[test]
fn jct_and_makespan_rewards_measure_what_they_say() {
    use dqngpu_rl::reinforce::Objective;
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let enc = GpuEncoding::new(AgentKind::Dqngpu);
    let episode = |n_jobs: usize, objective: Objective| {
        let set = dqngpu_sim::draw(&lib, WorkloadClass::Random, n_jobs, 3, dqngpu_sim::Arrivals::AllAtZero).unwrap();
        let config = dqngpu_sim::SimConfig { tick_trigger: dqngpu_sim::TickTrigger::Always, ..Default::default() };
        let task = gpu::GpuTask::new(enc.clone(), cluster.clone(), lib.clone(), contention(), vec![set], config)
            .unwrap()
            .with_objective(objective);
        let mut env = task.make(0);
        let (mut obs, mut mask) = (vec![0.0; task.obs_len()], vec![false; task.n_actions()]);
        let mut total = 0.0;
        loop {
            env.observe(&mut obs, &mut mask);
            // The last allowed action: the largest group, so jobs overlap.
            let a = mask.iter().rposition(|&m| m).unwrap();
            let t = env.step(a);
            total += t.reward;
            if t.done {
                return (total, env.score());
            }
        }
    };
    let (jct, makespan) = episode(5, Objective::Jct);
    let (span, _) = episode(5, Objective::Makespan);
    assert!((span + makespan / gpu::REWARD_SCALE_S).abs() < 1e-9, "{span} {makespan}");
    // Five jobs in the system at first, one at the end: between one and five times the makespan.
    assert!(jct < span && jct > 5.0 * span, "jct {jct} makespan {span}");
}

/// `simulate`, `serve`, `bench` and the k8s extender resolve heuristics for a caller: `greedy`
/// then predicts with the caller's model. Two 100 s compute-bound jobs on one GPU stepped with
/// the H100 fit, where a busy pair makes less progress together than one job alone: told that
/// model, greedy runs them one after the other (200 s); predicting with the default (Lucid)
/// fit, which says they gain by sharing, it packs them and both end later.
#[test]
fn a_heuristic_resolved_for_a_caller_predicts_with_its_model() {
    use dqngpu_rl::scorer::Caller;
    let heavy = Arc::new(
        AppProfile::new(
            AppInfo { name: "heavy".into(), ..Default::default() },
            1.0,
            vec![Resources::new(95.0, 2000.0, 95.0, 100.0); 100],
        )
        .unwrap(),
    );
    let lib = dqngpu_model::AppLibrary::with_derived_classes(
        "t".into(),
        [("heavy".to_string(), heavy)].into_iter().collect(),
        None,
    );
    let set = JobSet {
        library: None,
        class: None,
        seed: None,
        jobs: (0..2).map(|id| JobSpec { id, app: "heavy".into(), submit_s: 0.0 }).collect(),
    };
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let model: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name("contention-h100").unwrap());
    let name: dqngpu_rl::SchedulerName = "greedy".parse().unwrap();
    let told = name
        .resolve_within(None, 0, &Caller { max_slowdown: None, model: model.clone(), ..Caller::default() })
        .unwrap();
    let untold = name.resolve(None, 0).unwrap();
    let makespan = |p: &dyn dqngpu_model::Policy| {
        dqngpu_sim::run(p, &cluster, &lib, &set, model.clone(), Default::default()).unwrap().makespan_s
    };
    assert!((makespan(told.as_ref()) - 200.0).abs() < 2.0, "told: {}", makespan(told.as_ref()));
    assert!(makespan(untold.as_ref()) > 200.0 + 2.0, "untold: {}", makespan(untold.as_ref()));
}

/// Under a budget what it admits changes as the residents progress (a short overlap near a
/// resident's end), so the scorer and the plan are asked at every tick, as the rules told the
/// budget are; without one they follow events and remaining peaks.
#[test]
fn the_scorer_and_the_plan_are_asked_every_tick_under_a_budget_only() {
    use dqngpu_model::Policy;
    use dqngpu_rl::scorer::plan::{PlanConfig, PlanPolicy};
    use dqngpu_rl::scorer::{Caller, ScorerPolicy};
    let plain = ScorerPolicy::untrained(&[32, 16], 1).unwrap();
    let capped = plain.clone().with_caller(Caller::with_budget(Some(0.10)));
    assert!(!plain.wants_every_tick());
    assert!(capped.wants_every_tick());
    assert!(!PlanPolicy::new(plain, PlanConfig::default()).wants_every_tick());
    assert!(PlanPolicy::new(capped, PlanConfig::default()).wants_every_tick());
}

/// `train -o DIR` trained for minutes and then failed to save ("Is a directory"): the path is
/// checked before training, and a directory is refused, naming it.
#[test]
fn a_directory_is_no_checkpoint_path() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ro");
    std::fs::create_dir(&out).unwrap();
    let e = checkpoint::check_path(&out).unwrap_err().to_string();
    assert!(e.contains("ro") && e.contains("is a directory"), "{e}");
}
