//! `dqngpu-plan`: the scorer with search at decision time.

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{AppLibrary, ClusterSpec, WorkloadClass};
use dqngpu_rl::checkpoint::{CheckpointMeta, Encoding, FORMAT_VERSION};
use dqngpu_rl::scorer::plan::{PlanConfig, PlanPolicy};
use dqngpu_rl::scorer::train::Guard;
use dqngpu_rl::scorer::{Caller, ScorerPolicy, ScorerSpec};
use dqngpu_rl::SchedulerName;
use dqngpu_sim::{Arrivals, SimConfig};

fn contention() -> Arc<dyn Interference> {
    Arc::from(dqngpu_interference::by_name("contention").unwrap())
}

/// Search over a scorer improves on it: an untrained scorer's own row is among those played
/// out, so the plan takes another only where that row's future is cheaper. Over these sets its
/// mean JCT is lower than the scorer's, and so is its makespan.
#[test]
fn the_plan_improves_on_the_scorer_it_searches_over() {
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let (mut base_jct, mut plan_jct, mut base_mk, mut plan_mk) = (0.0, 0.0, 0.0, 0.0);
    for (class, seed) in
        [(WorkloadClass::GpuHeavy, 1000), (WorkloadClass::Random, 1001), (WorkloadClass::MemLight, 1002)]
    {
        let set = dqngpu_sim::draw(&lib, class, 12, seed, Arrivals::AllAtZero).unwrap();
        let base = ScorerPolicy::untrained(&[32, 16], 3).unwrap();
        let plan = PlanPolicy::new(base.clone(), PlanConfig::default());
        let b = dqngpu_sim::run(&base, &cluster, &lib, &set, contention(), SimConfig::default()).unwrap();
        let p = dqngpu_sim::run(&plan, &cluster, &lib, &set, contention(), SimConfig::default()).unwrap();
        assert!(p.completed && p.liveness_starts == 0, "{class:?}: {p:?}");
        eprintln!(
            "{class:?}: scorer {:.1} / {:.1}, plan {:.1} / {:.1}",
            b.mean_jct_s, b.makespan_s, p.mean_jct_s, p.makespan_s
        );
        (base_jct, plan_jct) = (base_jct + b.mean_jct_s, plan_jct + p.mean_jct_s);
        (base_mk, plan_mk) = (base_mk + b.makespan_s, plan_mk + p.makespan_s);
    }
    assert!(plan_jct < base_jct, "mean JCT: plan {plan_jct}, the scorer {base_jct}");
    assert!(plan_mk <= base_mk, "makespan: plan {plan_mk}, the scorer {base_mk}");
}

/// The futures are played out under the caller's budget (at its step), so the plan proposes
/// only groups the budget admits: nothing is refused, no job is slowed past it, every run
/// finishes.
#[test]
fn a_plan_under_a_budget_keeps_it_and_every_run_finishes() {
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    for (gpus, arrivals, step_s) in [
        ("titanxp:1", Arrivals::AllAtZero, 1.0),
        ("titanxp:1", Arrivals::AllAtZero, 2.0),
        ("titanxp:2", Arrivals::Poisson { rate_per_s: 0.05 }, 1.0),
    ] {
        let config = SimConfig { max_slowdown: Some(0.10), step_s, ..SimConfig::default() };
        let cluster = ClusterSpec::parse_gpus(gpus).unwrap();
        for class in [WorkloadClass::GpuLight, WorkloadClass::Random] {
            let set = dqngpu_sim::draw(&lib, class, 10, 1000, arrivals).unwrap();
            let caller = Caller::for_config(&config, contention());
            let base = ScorerPolicy::untrained(&[32, 16], 1).unwrap().with_caller(caller);
            let plan = PlanPolicy::new(base, PlanConfig::default());
            let r = dqngpu_sim::run(&plan, &cluster, &lib, &set, contention(), config.clone()).unwrap();
            assert!(r.completed, "{gpus} {class:?} step {step_s}");
            assert_eq!(
                r.budget_refusals, 0,
                "{gpus} {class:?} step {step_s}: the plan proposed a group the budget refuses"
            );
            for j in &r.jobs {
                assert!(j.exec_slowdown.unwrap() <= 1.10 + 1e-9, "{gpus} {class:?} step {step_s}: {j:?}");
            }
        }
    }
}

#[test]
fn the_plan_is_a_scheduler_name_that_needs_a_scorer_checkpoint() {
    let n: SchedulerName = " DQNGPU-plan ".parse().unwrap();
    assert_eq!(n.to_string(), "dqngpu-plan");
    assert!(n.is_agent());
    assert!(SchedulerName::valid_names().contains(&"dqngpu-plan".to_string()));
    let e = n.resolve(None, 0).err().unwrap();
    assert!(e.to_string().contains("dqngpu-plan"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let scorer = ScorerPolicy::untrained(&[32, 16], 1).unwrap();
    let meta = CheckpointMeta {
        format: FORMAT_VERSION,
        agent: "dqngpu".into(),
        encoding: Encoding::Scorer(ScorerSpec::default()),
        hidden: vec![32, 16],
        train: Default::default(),
        trained_on: "untrained, for a test".into(),
        iterations_done: 0,
        train_wall_s: 0.0,
        schedule: None,
        selection: None,
        weights_fnv1a64: None,
    };
    dqngpu_rl::checkpoint::save(&path, scorer.net(), &meta).unwrap();
    let p = n.resolve(Some(&path), 0).unwrap();
    assert_eq!(p.name(), "dqngpu-plan");
}

/// The cost the plan weighs, over a whole run (`train::Guard`: mean JCT, plus `weight` x the
/// best rule's mean JCT x the share of makespan past 1.01 x the best rule's), of `plan`'s run
/// of `set` and of the cheapest rule's, with the plan's run.
fn plan_and_cheapest_rule(
    lib: &AppLibrary,
    cluster: &ClusterSpec,
    set: &dqngpu_model::JobSet,
    plan: &PlanPolicy,
    weight: f64,
) -> (f64, f64, dqngpu_sim::SimResult) {
    let run = |p: &dyn dqngpu_model::Policy| {
        dqngpu_sim::run(p, cluster, lib, set, contention(), SimConfig::default()).unwrap()
    };
    let rules: Vec<dqngpu_sim::SimResult> = dqngpu_policy::RIVALS
        .iter()
        .map(|name| run(dqngpu_policy::by_name_under(name, 1, Some(contention())).unwrap().as_ref()))
        .collect();
    let guard = Guard::best_of(&rules, weight);
    let cost = |r: &dqngpu_sim::SimResult| r.mean_jct_s + guard.penalty(r.makespan_s);
    let p = run(plan);
    (cost(&p), rules.iter().map(cost).fold(f64::INFINITY, f64::min), p)
}

/// The plan keeps its promise: where every job is known at the start and nothing arrives, the
/// rules' whole runs are among the futures it weighs at its first choice, and it leaves the
/// future it took only for a cheaper one. So its run costs no more than the cheapest rule's,
/// measured on the real runs (which its futures must replay exactly for this to hold).
#[test]
fn the_plan_costs_no_more_than_the_cheapest_rule_where_nothing_arrives() {
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    for (class, seed) in
        [(WorkloadClass::GpuLight, 1000), (WorkloadClass::MemLight, 1001), (WorkloadClass::Random, 1002)]
    {
        let set = dqngpu_sim::draw(&lib, class, 14, seed, Arrivals::AllAtZero).unwrap();
        for weight in [1.0, 100.0] {
            let plan =
                PlanPolicy::new(ScorerPolicy::untrained(&[32, 16], 3).unwrap(), PlanConfig::new(2, weight).unwrap());
            let (own, cheapest, p) = plan_and_cheapest_rule(&lib, &cluster, &set, &plan, weight);
            eprintln!(
                "{class:?} weight {weight}: plan {own:.2} ({:.1} / {:.1}), cheapest rule {cheapest:.2}",
                p.mean_jct_s, p.makespan_s
            );
            assert!(own <= cheapest * (1.0 + 1e-9), "{class:?} weight {weight}: plan {own}, cheapest rule {cheapest}");
        }
    }
}

/// The makespan guard charges a share of the time left from the epoch's first choice, so the
/// same view decides the same whatever the clock reads: a service counts from its start, a
/// Kubernetes extender from 1970 (review: with makespans counted from 0, 10 of these 36 views
/// decided otherwise a day later, and at Unix time the guard charged nothing).
#[test]
fn the_guard_charges_the_same_whatever_the_clock() {
    use dqngpu_model::{ClusterView, Policy};
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    for shift in [86_400.0, 1.7e9] {
        let mut differ = Vec::new();
        for seed in 0..12u64 {
            for class in [WorkloadClass::GpuHeavy, WorkloadClass::Random, WorkloadClass::GpuLight] {
                let set = dqngpu_sim::draw(&lib, class, 8, 2000 + seed, Arrivals::AllAtZero).unwrap();
                let sim = dqngpu_sim::Simulator::new(&cluster, &lib, &set, contention(), SimConfig::default()).unwrap();
                let view = sim.view();
                let mut queue = view.queue.to_vec();
                queue.iter_mut().for_each(|q| q.submit_s += shift);
                let later = ClusterView { now_s: view.now_s + shift, gpus: view.gpus, queue: &queue };
                let base = ScorerPolicy::untrained(&[32, 16], seed % 4).unwrap();
                let plan = || PlanPolicy::new(base.clone(), PlanConfig::default());
                if plan().decide(&view) != plan().decide(&later) {
                    differ.push((seed, class));
                }
            }
        }
        assert!(differ.is_empty(), "{} of 36 views decided otherwise {shift} s later: {differ:?}", differ.len());
    }
}

/// With more than [`PLAN_WINDOW`] jobs waiting the scorer alone decides (each future is a run
/// of every job it holds, so the search's cost grows about as the queue's square). At
/// `PLAN_WINDOW` waiting the plan still searches, and departs from the scorer on some of these
/// sets, so the equality past it is the rule's doing.
#[test]
fn past_its_window_the_plan_leaves_the_decision_to_the_scorer() {
    use dqngpu_model::{ClusterView, Policy};
    use dqngpu_rl::scorer::plan::PLAN_WINDOW;
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:2").unwrap();
    let mut departs = 0;
    for seed in 0..4u64 {
        let set =
            dqngpu_sim::draw(&lib, WorkloadClass::Random, PLAN_WINDOW + 1, 60 + seed, Arrivals::AllAtZero).unwrap();
        let sim = dqngpu_sim::Simulator::new(&cluster, &lib, &set, contention(), SimConfig::default()).unwrap();
        let view = sim.view();
        let base = ScorerPolicy::untrained(&[16], seed).unwrap();
        let plan = || PlanPolicy::new(base.clone(), PlanConfig::new(2, 2.0).unwrap());
        assert_eq!(plan().decide(&view), base.decide(&view), "seed {seed}: the plan searched past its window");
        let window = ClusterView { queue: &view.queue[..PLAN_WINDOW], ..view };
        departs += usize::from(plan().decide(&window) != base.decide(&window));
    }
    assert!(departs > 0, "the plan never departs from the scorer at {PLAN_WINDOW} waiting: the check proves nothing");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(dqngpu_model::testing::cases_or(32)))]
    /// The same, over random job sets of three libraries (the thesis's, Lucid's on an RTX
    /// 3090, a generated one), clusters of one or two GPUs (every job known at t = 0), rows
    /// per choice and guard weights: the promise holds wherever nothing arrives.
    #[test]
    fn the_promise_holds_on_random_job_sets(
        class in 0usize..5,
        seed in 0u64..10_000,
        jobs in 4usize..14,
        gpus in 1usize..3,
        rows in 1usize..5,
        weight in proptest::sample::select(vec![0.5, 2.0, 100.0]),
        scorer_seed in 0u64..4,
        (library, model) in proptest::sample::select(vec![("thesis", "titanxp"), ("lucid", "rtx3090"), ("generated:1001", "titanxp")]),
    ) {
        let lib = dqngpu_model::library::resolve(library).unwrap();
        let cluster = ClusterSpec::parse_gpus(&format!("{model}:{gpus}")).unwrap();
        let set = dqngpu_sim::draw(&lib, WorkloadClass::ALL[class], jobs, seed, Arrivals::AllAtZero).unwrap();
        let plan = PlanPolicy::new(ScorerPolicy::untrained(&[32, 16], scorer_seed).unwrap(), PlanConfig::new(rows, weight).unwrap());
        let (own, cheapest, p) = plan_and_cheapest_rule(&lib, &cluster, &set, &plan, weight);
        proptest::prop_assert!(p.completed);
        proptest::prop_assert!(own <= cheapest * (1.0 + 1e-9), "plan {own}, cheapest rule {cheapest}");
    }
}

/// A plan asked again from an earlier clock (another run) starts afresh: its second run of a
/// job set is its first run's, and a clone's.
#[test]
fn a_plan_used_for_a_second_run_starts_afresh() {
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let base = ScorerPolicy::untrained(&[32, 16], 2).unwrap();
    let plan = PlanPolicy::new(base, PlanConfig::default());
    let a = dqngpu_sim::draw(&lib, WorkloadClass::Random, 10, 1003, Arrivals::AllAtZero).unwrap();
    let b = dqngpu_sim::draw(&lib, WorkloadClass::GpuLight, 10, 1004, Arrivals::AllAtZero).unwrap();
    let run =
        |p: &PlanPolicy, set| dqngpu_sim::run(p, &cluster, &lib, set, contention(), SimConfig::default()).unwrap();
    let fresh = plan.clone();
    let first = run(&plan, &a);
    run(&plan, &b);
    let again = run(&plan, &a);
    let cloned = run(&fresh, &a);
    assert_eq!((again.mean_jct_s, again.makespan_s), (first.mean_jct_s, first.makespan_s));
    assert_eq!((cloned.mean_jct_s, cloned.makespan_s), (first.mean_jct_s, first.makespan_s));
}

/// A waiting job that fits no GPU of the view (the service's view leaves out GPUs held by
/// exclusive runs) starts in no future from it. The plan weighs the other jobs' futures and
/// decides as it would without it; it ended every future in a no-progress error, and the
/// scorer alone decided.
#[test]
fn a_waiting_job_that_fits_no_gpu_of_the_view_leaves_the_plan_as_it_is() {
    use dqngpu_model::{AppInfo, AppProfile, ClusterView, GpuState, Policy, QueuedJob, Resources, RunningJob};
    let lib = dqngpu_model::library::resolve("thesis").unwrap();
    let apps: Vec<String> = lib.apps.keys().cloned().collect();
    let samples = vec![Resources::new(50.0, 20_000.0, 50.0, 100.0); 100];
    let huge = Arc::new(AppProfile::new(AppInfo { name: "huge".into(), ..Default::default() }, 1.0, samples).unwrap());
    let waiting = |id, app: &str, profile| QueuedJob {
        id,
        app: app.into(),
        profile,
        submit_s: 0.0,
        restarts: 0,
        avoid_apps: Vec::new(),
    };
    let titanxp = |index, running| GpuState {
        node: "n".into(),
        index,
        spec: dqngpu_model::gpu::lookup("titanxp").unwrap(),
        running: vec![running],
        measured: None,
    };
    let mut departs = 0;
    for seed in 0..16u64 {
        let app = |k: u64| apps[k as usize % apps.len()].as_str();
        let mut queue: Vec<QueuedJob> =
            (0..4).map(|i| waiting(i, app(seed * 7 + i * 3), lib.apps[app(seed * 7 + i * 3)].clone())).collect();
        let resident = RunningJob { id: 100, profile: lib.apps[app(seed)].clone(), progress_s: 5.0, started_s: 0.0 };
        let gpus = [titanxp(0, resident.clone()), titanxp(1, RunningJob { id: 101, ..resident })];
        let base = ScorerPolicy::untrained(&[32, 16], seed % 4).unwrap();
        let plan = |queue: &[QueuedJob]| {
            let view = ClusterView { now_s: 10.0, gpus: &gpus, queue };
            PlanPolicy::new(base.clone(), PlanConfig::default()).decide(&view)
        };
        let without = plan(&queue);
        departs += usize::from(without != base.decide(&ClusterView { now_s: 10.0, gpus: &gpus, queue: &queue }));
        queue.push(waiting(9, "huge", huge.clone()));
        assert_eq!(plan(&queue), without, "seed {seed}: a job that can start nowhere changed the plan's decision");
    }
    // The views leave the plan room to depart from the scorer, or the check proves nothing.
    assert!(departs > 8, "the plan departs from the scorer in {departs} of 16 views");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(dqngpu_model::testing::cases_or(12)))]
    /// Which futures are abandoned depends on the order the threads finish them in (the bar
    /// is the cheapest played so far); which one is taken must not. A run on one thread and
    /// the same run on four are the same run, over random job sets with and without arrivals.
    #[test]
    fn the_plan_decides_the_same_on_one_thread_as_on_four(
        class in 0usize..5,
        seed in 0u64..10_000,
        jobs in 4usize..12,
        gpus in 1usize..3,
        rows in 1usize..5,
        poisson in proptest::bool::ANY,
        weight in proptest::sample::select(vec![0.0, 2.0, 100.0]),
        scorer_seed in 0u64..4,
        (library, model) in proptest::sample::select(vec![("thesis", "titanxp"), ("lucid", "rtx3090")]),
    ) {
        let lib = dqngpu_model::library::resolve(library).unwrap();
        let cluster = ClusterSpec::parse_gpus(&format!("{model}:{gpus}")).unwrap();
        let arrivals = if poisson { Arrivals::Poisson { rate_per_s: 0.02 } } else { Arrivals::AllAtZero };
        let set = dqngpu_sim::draw(&lib, WorkloadClass::ALL[class], jobs, seed, arrivals).unwrap();
        let base = ScorerPolicy::untrained(&[32, 16], scorer_seed).unwrap();
        let run = |threads: usize| {
            let plan = PlanPolicy::new(base.clone(), PlanConfig::new(rows, weight).unwrap());
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| dqngpu_sim::run(&plan, &cluster, &lib, &set, contention(), SimConfig::default()).unwrap())
        };
        let one = run(1);
        proptest::prop_assert!(one.completed);
        proptest::prop_assert_eq!(run(4), one);
    }
}

/// On a cluster of two GPU models under a budget, the scorer offered a job on an idle card its
/// peak passes (such a row skipped every check and took hold away), and the simulator dropped
/// the placement: 1,080 dropped groups in this run (Lucid's mem_heavy, a Titan Xp
/// beside an RTX 3090). No row puts a job on a card it cannot fit alone now.
#[test]
fn under_a_budget_no_job_is_offered_an_idle_card_it_cannot_fit() {
    let lib = dqngpu_model::library::resolve("lucid").unwrap();
    let cluster = ClusterSpec::parse_gpus("titanxp,rtx3090").unwrap();
    let config = SimConfig { max_slowdown: Some(0.10), ..SimConfig::default() };
    let set = dqngpu_sim::draw(&lib, WorkloadClass::MemHeavy, 10, 1, Arrivals::AllAtZero).unwrap();
    let caller = Caller::for_config(&config, contention());
    let scorer = ScorerPolicy::untrained(&[32, 16], 1).unwrap().with_caller(caller);
    let r = dqngpu_sim::run(&scorer, &cluster, &lib, &set, contention(), config).unwrap();
    assert!(r.completed);
    assert_eq!(r.unfit_drops, 0, "{} placements dropped as too big for their card", r.unfit_drops);
}
