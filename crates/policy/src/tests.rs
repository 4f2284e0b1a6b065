use std::sync::Arc;

use dqngpu_model::{
    gpu, validate_decision, AppInfo, AppProfile, ClusterView, GpuState, Placement, QueuedJob, Resources, RunningJob,
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
    let tetris = by_name("tetris", 0).unwrap();
    // On an empty GPU the heavy job aligns best with the free capacity; 90% + 30% > 100%
    // then rules out every light job beside it.
    assert_eq!(tetris.decide(&view), vec![Placement { gpu: 0, jobs: vec![2] }]);
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
    for name in ["tetris", "bestfit", "random"] {
        assert!(by_name(name, 3).unwrap().decide(&view).is_empty(), "{name}");
    }
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
                    _ => prop_assert!(fit::committed(gpu).gpu_mem_mib + added.gpu_mem_mib <= cap.gpu_mem_mib + 1e-6),
                }
            }
        }
    }
}
