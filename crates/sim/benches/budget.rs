//! Times the slowdown budget's prediction (`budget::predict`): every ordered pair of a
//! library's apps, one running from its start and one about to join it, under a 10% budget
//! (the question a rule asks of each waiting job at every tick under a budget). Median wall
//! time per prediction on this thread, per library: `thesis` and the held-out
//! `generated:1001` (time-varying profiles, Titan Xp) and `lucid` (steady profiles, RTX 3090).
//! Run: `cargo bench -p dqngpu-sim --bench budget`
//! (arg: `[runs]`).

use std::time::Instant;

use dqngpu_interference::Contention;
use dqngpu_model::{gpu, library};
use dqngpu_sim::budget::{predict, BudgetJob, BUDGET_MARGIN_STEPS};

fn main() {
    // `cargo bench` passes `--bench`; take the first numeric argument as the run count.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(21);
    let model = Contention::default();
    println!("budget::predict, every ordered pair of apps, 10% budget, 1 s steps; median of {runs} runs");
    for (name, gpu_key) in [("thesis", "titanxp"), ("lucid", "rtx3090"), ("generated:1001", "titanxp")] {
        let lib = library::resolve(name).expect("library");
        let spec = gpu::lookup(gpu_key).expect("gpu");
        let apps: Vec<_> = lib.apps.values().collect();
        let pairs: Vec<[BudgetJob; 2]> = apps
            .iter()
            .flat_map(|a| apps.iter().map(move |b| (*a, *b)))
            .map(|(a, b)| {
                [
                    BudgetJob { app: &a.app.name, profile: a, progress_s: 0.0, lost_s: 0.0 },
                    BudgetJob { app: &b.app.name, profile: b, progress_s: 0.0, lost_s: 0.0 },
                ]
            })
            .collect();
        let once =
            || pairs.iter().filter(|p| predict(&spec, &model, &p[..], 0.10, BUDGET_MARGIN_STEPS, 1.0).admitted).count();
        let admitted = once();
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                assert_eq!(once(), admitted);
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let per = times[times.len() / 2] / pairs.len() as f64;
        println!(
            "{name:<15} {:>5} pairs  {:>5} admitted  median {:>8.2} us per prediction  (min {:>8.2}, max {:>8.2})",
            pairs.len(),
            admitted,
            per * 1e6,
            times[0] / pairs.len() as f64 * 1e6,
            times[times.len() - 1] / pairs.len() as f64 * 1e6
        );
    }
}
