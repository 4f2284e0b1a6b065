use std::sync::Arc;

use dqngpu_model::{
    gpu, validate_decision, AppInfo, AppProfile, ClusterView, GpuState, Placement, Policy, QueuedJob, Resources,
    RunningJob,
};
use proptest::prelude::*;

use crate::{by_name, fit, NAMES};

fn profile(name: &str, secs: usize, util: f64, mem: f64) -> Arc<AppProfile> {
    let info = AppInfo { name: name.into(), ..Default::default() };
    Arc::new(AppProfile::new(info, 1.0, vec![Resources::new(util, mem, util, 100.0); secs]).unwrap())
}

fn queued(id: u64, p: &Arc<AppProfile>) -> QueuedJob {
    QueuedJob { id, app: p.app.name.clone(), profile: p.clone(), submit_s: id as f64, restarts: 0, avoid_apps: vec![] }
}

fn titanxp(running: Vec<RunningJob>) -> GpuState {
    GpuState { node: "n".into(), index: 0, spec: gpu::lookup("titanxp").unwrap(), running, measured: None }
}

fn run(id: u64, p: &Arc<AppProfile>) -> RunningJob {
    RunningJob { id, profile: p.clone(), progress_s: 0.0, started_s: 0.0 }
}

#[test]
fn sjf_starts_shortest_on_each_idle_gpu_only() {
    let long = profile("long", 100, 90.0, 1000.0);
    let short = profile("short", 10, 90.0, 1000.0);
    let mid = profile("mid", 50, 90.0, 1000.0);
    let queue = vec![queued(1, &long), queued(2, &short), queued(3, &mid)];
    let gpus = vec![titanxp(vec![]), titanxp(vec![run(9, &long)]), titanxp(vec![])];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    let d = by_name("sjf", 0).unwrap().decide(&view);
    assert_eq!(d, vec![Placement { gpu: 0, jobs: vec![2] }, Placement { gpu: 2, jobs: vec![3] }]);
    let d = by_name("fifo", 0).unwrap().decide(&view);
    assert_eq!(d, vec![Placement { gpu: 0, jobs: vec![1] }, Placement { gpu: 2, jobs: vec![2] }]);
}

#[test]
fn tetris_packs_light_jobs_and_respects_every_resource() {
    let light = profile("light", 10, 30.0, 3000.0);
    let heavy = profile("heavy", 10, 90.0, 3000.0);
    let queue = vec![queued(1, &light), queued(2, &heavy), queued(3, &light), queued(4, &light), queued(5, &light)];
    let gpus = vec![titanxp(vec![])];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    // With the remaining-work term weighed at half (m = 0.5), the heavy job's better alignment
    // with the empty GPU wins; 90% + 30% > 100% then rules out every light job beside it.
    let half: &dyn Policy = &crate::Tetris::with_knob(0.5);
    assert_eq!(half.decide(&view), vec![Placement { gpu: 0, jobs: vec![2] }]);
    // At the default m = 1 the two terms weigh alike: equal-length jobs tie, the earlier
    // arrival (light) goes first, and the heavy one no longer fits beside it.
    let tetris = by_name("tetris", 0).unwrap();
    assert_eq!(tetris.decide(&view), vec![Placement { gpu: 0, jobs: vec![1, 3, 4] }]);
    // Without it, three light jobs fit (90% GPU, 9000 MiB) and a fourth does not.
    let queue: Vec<_> = queue.into_iter().filter(|q| q.id != 2).collect();
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert_eq!(tetris.decide(&view), vec![Placement { gpu: 0, jobs: vec![1, 3, 4] }]);
}

#[test]
fn bestfit_prefers_the_fullest_gpu_that_fits() {
    let big = profile("big", 10, 50.0, 8000.0);
    let small = profile("small", 10, 50.0, 2000.0);
    let gpus = vec![titanxp(vec![]), titanxp(vec![run(9, &big)])];
    let queue = vec![queued(1, &small)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert_eq!(by_name("bestfit", 0).unwrap().decide(&view), vec![Placement { gpu: 1, jobs: vec![1] }]);
    let queue = vec![queued(2, &big)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert_eq!(by_name("bestfit", 0).unwrap().decide(&view), vec![Placement { gpu: 0, jobs: vec![2] }]);
}

#[test]
fn avoid_apps_is_honoured() {
    let a = profile("a", 10, 20.0, 1000.0);
    let b = profile("b", 10, 20.0, 1000.0);
    let mut qa = queued(1, &a);
    qa.avoid_apps = vec!["b".into()];
    let gpus = vec![titanxp(vec![run(9, &b)])];
    let queue = vec![qa];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    for name in ["tetris", "bestfit", "random", "sjf-bestfit", "lucid", "greedy"] {
        assert!(by_name(name, 3).unwrap().decide(&view).is_empty(), "{name}");
    }
}

#[test]
fn sjf_bestfit_places_the_shortest_job_first_on_the_fullest_gpu() {
    let big = profile("big", 100, 50.0, 8000.0);
    let long = profile("long", 100, 50.0, 4000.0);
    let short = profile("short", 10, 50.0, 4000.0);
    let gpus = vec![titanxp(vec![]), titanxp(vec![run(9, &big)])];
    // Only one 4000 MiB job still fits beside `big`: the short one gets it.
    let queue = vec![queued(1, &long), queued(2, &short)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    let d = by_name("sjf-bestfit", 0).unwrap().decide(&view);
    assert_eq!(d, vec![Placement { gpu: 0, jobs: vec![1] }, Placement { gpu: 1, jobs: vec![2] }]);
    // bestfit, in arrival order, gives that place to the long job.
    let d = by_name("bestfit", 0).unwrap().decide(&view);
    assert_eq!(d, vec![Placement { gpu: 0, jobs: vec![2] }, Placement { gpu: 1, jobs: vec![1] }]);
}

#[test]
fn lucid_pairs_by_score_and_duration_only_when_jobs_would_queue() {
    use crate::lucid::share_score;
    let tiny = profile("tiny", 100, 20.0, 1000.0);
    let jumbo = profile("jumbo", 100, 90.0, 1000.0);
    let medium = profile("medium", 100, 50.0, 1000.0);
    let long_tiny = profile("long-tiny", 300, 20.0, 1000.0);
    assert_eq!((share_score(&tiny), share_score(&medium), share_score(&jumbo)), (0, 1, 2));
    let lucid = by_name("lucid", 0).unwrap();
    // One GPU running a jumbo job alone, one idle; two waiting jobs > one idle GPU: sharing on.
    let gpus = vec![titanxp(vec![run(9, &jumbo)]), titanxp(vec![])];
    let queue = vec![queued(1, &tiny), queued(2, &medium)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    // tiny (0) + jumbo (2) <= 2: paired; medium (1) + jumbo (2) > 2: the idle GPU.
    assert_eq!(lucid.decide(&view), vec![Placement { gpu: 0, jobs: vec![1] }, Placement { gpu: 1, jobs: vec![2] }]);
    // One waiting job, one idle GPU: no sharing, it runs alone.
    let queue = vec![queued(1, &tiny)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert_eq!(lucid.decide(&view), vec![Placement { gpu: 1, jobs: vec![1] }]);
    // A job more than twice as long as the resident does not join it.
    let gpus = vec![titanxp(vec![run(9, &tiny)])];
    let queue = vec![queued(1, &long_tiny)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert!(lucid.decide(&view).is_empty());
    let queue = vec![queued(2, &tiny)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert_eq!(lucid.decide(&view), vec![Placement { gpu: 0, jobs: vec![2] }]);
}

#[test]
fn greedy_fills_idle_gpus_first_then_packs_where_rates_gain() {
    let heavy = profile("heavy", 100, 95.0, 2000.0);
    let light = profile("light", 50, 20.0, 2000.0);
    let greedy = by_name("greedy", 0).unwrap();
    // One idle GPU and one busy: the shortest job takes the idle GPU (gain 1); the heavy job
    // then gains more beside the light job than beside the heavy resident.
    let gpus = vec![titanxp(vec![run(9, &heavy)]), titanxp(vec![])];
    let queue = vec![queued(1, &heavy), queued(2, &light)];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert_eq!(greedy.decide(&view), vec![Placement { gpu: 1, jobs: vec![2, 1] }]);
    // Alone, the heavy job joins the heavy resident: two at rate ~0.67 beat one at 1.
    let queue = vec![queued(1, &heavy)];
    let gpus = vec![titanxp(vec![run(9, &heavy)])];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert_eq!(greedy.decide(&view), vec![Placement { gpu: 0, jobs: vec![1] }]);
    // Memory is a hard limit: a job that does not fit waits.
    let full = profile("full", 100, 10.0, 11000.0);
    let gpus = vec![titanxp(vec![run(9, &full)])];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert!(greedy.decide(&view).is_empty());
}

/// A model under which any two jobs together slow each other to 0.3.
struct Crippling;

impl dqngpu_interference::Interference for Crippling {
    fn name(&self) -> &str {
        "crippling"
    }
    fn rates(&self, _gpu: &dqngpu_model::GpuSpec, jobs: &[dqngpu_interference::JobLoad<'_>], rates: &mut [f64]) {
        rates.fill(if jobs.len() > 1 { 0.3 } else { 1.0 });
    }
}

#[test]
fn greedy_predicts_with_the_model_it_is_given() {
    let heavy = profile("heavy", 100, 95.0, 2000.0);
    let queue = vec![queued(1, &heavy)];
    let gpus = vec![titanxp(vec![run(9, &heavy)])];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    // Under the default fit two heavy jobs make more progress together (about 0.67 each).
    let default = crate::by_name_under("greedy", 0, None).unwrap();
    assert_eq!(default.decide(&view), vec![Placement { gpu: 0, jobs: vec![1] }]);
    // Told that sharing costs 70% of each job's speed (0.6 together against 1 alone), it waits.
    let model: Arc<dyn dqngpu_interference::Interference> = Arc::new(Crippling);
    let told = crate::by_name_under("greedy", 0, Some(model.clone())).unwrap();
    assert!(told.decide(&view).is_empty());
    // The other rules read no interference model: the same decisions either way.
    for name in NAMES {
        let a = by_name(name, 3).unwrap().decide(&view);
        let b = crate::by_name_under(name, 3, Some(model.clone())).unwrap().decide(&view);
        assert!(*name == "greedy" || a == b, "{name}: {a:?} against {b:?}");
    }
}

#[test]
fn tetris_packs_jobs_whose_compute_phases_do_not_overlap() {
    // Two 100 s jobs: heavy compute for their first 40 s, then light. Peaks (95% each) rule
    // out sharing; by the profile, a newcomer's heavy phase meets the resident's light one.
    let phased = {
        let mut s = vec![Resources::new(95.0, 2000.0, 95.0, 100.0); 40];
        s.extend(vec![Resources::new(5.0, 2000.0, 5.0, 100.0); 60]);
        Arc::new(AppProfile::new(AppInfo { name: "phased".into(), ..Default::default() }, 1.0, s).unwrap())
    };
    let resident = RunningJob { id: 9, profile: phased.clone(), progress_s: 50.0, started_s: 0.0 };
    let queue = vec![queued(1, &phased)];
    let gpus = vec![titanxp(vec![resident])];
    let view = ClusterView { now_s: 50.0, gpus: &gpus, queue: &queue };
    assert_eq!(by_name("tetris", 0).unwrap().decide(&view), vec![Placement { gpu: 0, jobs: vec![1] }]);
    // At the resident's start its heavy phase would meet the newcomer's: no.
    let resident = RunningJob { id: 9, profile: phased.clone(), progress_s: 0.0, started_s: 0.0 };
    let gpus = vec![titanxp(vec![resident])];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    assert!(by_name("tetris", 0).unwrap().decide(&view).is_empty());
}

#[test]
fn windows_take_the_peak_of_each_stretch() {
    let mut s = vec![Resources::new(10.0, 100.0, 10.0, 0.0); 25];
    s[12] = Resources::new(80.0, 500.0, 10.0, 0.0);
    let p = AppProfile::new(AppInfo { name: "w".into(), ..Default::default() }, 1.0, s).unwrap();
    let w = fit::windows(&p, 0.0, 10.0);
    assert_eq!(w.len(), 3);
    assert_eq!((w[0].gpu_util_pct, w[1].gpu_util_pct, w[2].gpu_util_pct), (10.0, 80.0, 10.0));
    let w = fit::windows(&p, 5.0, 10.0);
    assert_eq!((w.len(), w[0].gpu_util_pct, w[1].gpu_util_pct), (2, 80.0, 10.0));
    assert!(fit::windows(&p, 25.0, 10.0).is_empty());
}

#[test]
fn unknown_name_lists_valid_ones() {
    let e = by_name("lottery", 0).err().unwrap();
    assert!(e.is_usage());
    for n in NAMES {
        assert!(e.to_string().contains(n));
    }
}

fn arb_view() -> impl Strategy<Value = (Vec<GpuState>, Vec<QueuedJob>, f64)> {
    let job = (1usize..40, 0.0f64..100.0, 0.0f64..13000.0);
    (
        proptest::collection::vec(proptest::collection::vec(job.clone(), 0..3), 1..4),
        proptest::collection::vec(job, 0..8),
        0.0f64..1000.0,
    )
        .prop_map(|(gpus, queue, now)| {
            let mut id = 100;
            let gpus = gpus
                .into_iter()
                .map(|jobs| {
                    titanxp(
                        jobs.into_iter()
                            .map(|(s, u, m)| {
                                id += 1;
                                run(id, &profile(&format!("r{id}"), s, u, m.min(12288.0)))
                            })
                            .collect(),
                    )
                })
                .collect();
            let queue = queue
                .into_iter()
                .enumerate()
                .map(|(i, (s, u, m))| queued(i as u64, &profile(&format!("q{i}"), s, u, m.min(12288.0))))
                .collect();
            (gpus, queue, now)
        })
}

proptest! {
    #[test]
    fn every_policy_gives_valid_decisions((gpus, queue, now) in arb_view(), seed in 0u64..4) {
        let view = ClusterView { now_s: now, gpus: &gpus, queue: &queue };
        for name in NAMES {
            let p = by_name(name, seed).unwrap();
            let d = p.decide(&view);
            prop_assert!(validate_decision(name, &view, &d).is_ok(), "{name}: {d:?}");
            prop_assert_eq!(&d, &p.decide(&view), "{} is not deterministic", name);
            for pl in &d {
                let gpu = &gpus[pl.gpu];
                let cap = gpu.spec.capacity();
                let added = pl.jobs.iter().fold(Resources::ZERO, |acc, id| {
                    acc.add(&fit::job_peak(queue.iter().find(|q| q.id == *id).unwrap()))
                });
                match *name {
                    "fifo" | "sjf" => prop_assert!(gpu.is_idle() && pl.jobs.len() == 1),
                    "tetris" => prop_assert!(fit::committed(gpu).add(&added).fits_within(&cap)),
                    "lucid" => prop_assert!(gpu.running.len() + pl.jobs.len() <= 2),
                    _ => prop_assert!(fit::committed(gpu).gpu_mem_mib + added.gpu_mem_mib <= cap.gpu_mem_mib + 1e-6),
                }
            }
        }
    }
}

#[test]
fn rules_are_asked_every_tick_only_when_told_a_budget() {
    // Without a budget every rule is asked at events and peak drops (when resources free up).
    for name in NAMES {
        assert!(!by_name(name, 0).unwrap().wants_every_tick(), "{name}");
    }
    // Told a budget, every rule that shares a GPU is asked at every tick: what the budget
    // admits changes as the residents progress. The exclusive rules never share.
    #[derive(Debug)]
    struct AdmitAll;
    impl dqngpu_model::Admission for AdmitAll {
        fn admits(&self, _: &ClusterView<'_>, _: usize, _: &[dqngpu_model::JobId]) -> bool {
            true
        }
    }
    let budget: Arc<dyn dqngpu_model::Admission> = Arc::new(AdmitAll);
    for name in NAMES {
        let every = crate::by_name_within(name, 0, None, Some(budget.clone())).unwrap().wants_every_tick();
        assert_eq!(every, !matches!(*name, "fifo" | "sjf" | "random"), "{name} told a budget");
    }
}

/// Counts the questions it is asked; admits a group unless it holds a job of app "heavy".
#[derive(Debug, Default)]
struct CountingBudget(std::sync::atomic::AtomicUsize);

impl dqngpu_model::Admission for CountingBudget {
    fn admits(&self, view: &ClusterView<'_>, _gpu: usize, jobs: &[u64]) -> bool {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        !view.queue.iter().any(|q| jobs.contains(&q.id) && q.app == "heavy")
    }
}

#[test]
fn the_admitter_asks_once_per_gpu_app_and_chosen_jobs() {
    let heavy = profile("heavy", 100, 90.0, 1000.0);
    let light = profile("light", 100, 10.0, 1000.0);
    let queue = vec![queued(1, &heavy), queued(2, &heavy), queued(3, &light), queued(4, &light)];
    let gpus = vec![titanxp(vec![run(9, &light)]), titanxp(vec![])];
    let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
    let budget = CountingBudget::default();
    let asked = || budget.0.load(std::sync::atomic::Ordering::Relaxed);
    let mut admitter = fit::Admitter::new(Some(&budget));
    // Jobs 1 and 2 are alike (same app and profile): the second is answered from memory.
    assert!(!admitter.admits(&view, 0, &[], &queue[0]));
    assert!(!admitter.admits(&view, 0, &[], &queue[1]));
    assert_eq!(asked(), 1);
    // Another GPU, another app, or other jobs chosen beside it: asked again.
    assert!(!admitter.admits(&view, 1, &[], &queue[1]));
    assert!(admitter.admits(&view, 0, &[], &queue[2]));
    assert!(!admitter.admits(&view, 0, &[&queue[2]], &queue[0]));
    assert_eq!(asked(), 4);
    assert!(admitter.admits(&view, 0, &[], &queue[3]));
    assert_eq!(asked(), 4);
    // A job of the same app name but another profile is not alike.
    let other = profile("light", 50, 10.0, 1000.0);
    let q5 = queued(5, &other);
    assert!(admitter.admits(&view, 0, &[], &q5));
    assert_eq!(asked(), 5);
    // Without a budget nothing is asked, and everything is admitted.
    assert!(fit::Admitter::new(None).admits(&view, 0, &[], &queue[0]));
}

/// `Greedy::predict` is the mean, over `POINTS` points of the newcomer's solo time, of the
/// summed rates with it minus those without it (residents that would have finished left out),
/// for any number of residents: those it keeps on the stack and those past them.
#[test]
fn greedy_predicts_the_mean_gain_over_its_points_for_any_number_of_residents() {
    use crate::greedy::{Greedy, Member, POINTS};
    use dqngpu_interference::{Contention, Interference, JobLoad};
    let model = Contention::default();
    let greedy = Greedy::with_model(Arc::new(Contention::default()));
    let spec = gpu::lookup("titanxp").unwrap();
    // Residents with other loads and lengths, some ending within the newcomer's run.
    let apps: Vec<Arc<AppProfile>> =
        (0..12).map(|k| profile(&format!("a{k}"), 20 + 13 * k, 10.0 + 7.0 * k as f64, 500.0)).collect();
    let new = profile("new", 90, 35.0, 800.0);
    for n in 0..apps.len() {
        let members: Vec<Member<'_>> =
            apps[..n].iter().enumerate().map(|(k, p)| Member { profile: p, progress_s: 3.0 * k as f64 }).collect();
        let got = greedy.predict(&spec, &members, &new);
        let (mut total, mut own) = (0.0, 0.0);
        for k in 0..POINTS {
            let t = new.solo_s() * (k as f64 + 0.5) / POINTS as f64;
            let mut loads: Vec<JobLoad<'_>> = members
                .iter()
                .filter(|m| m.progress_s + t < m.profile.solo_s())
                .map(|m| JobLoad { app: &m.profile.app.name, demand: m.profile.demand_at(m.progress_s + t) })
                .collect();
            let mut rates = vec![0.0; loads.len() + 1];
            let len = loads.len();
            model.rates(&spec, &loads, &mut rates[..len]);
            let without: f64 = rates[..len].iter().sum();
            loads.push(JobLoad { app: &new.app.name, demand: new.demand_at(t) });
            model.rates(&spec, &loads, &mut rates);
            total += rates.iter().sum::<f64>() - without;
            own += rates[len];
        }
        let (total, own) = if n == 0 { (1.0, 1.0) } else { (total / POINTS as f64, own / POINTS as f64) };
        assert_eq!((got.total, got.own), (total, own), "{n} residents");
    }
}
