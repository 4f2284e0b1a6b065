//! Times the scorer's network at decision time (`Mlp::scores`, the shipped shape: 19 inputs,
//! 32 and 16 hidden, one score) on the rows real decisions offer: every decision round of
//! `sjf` over 30 thesis jobs per class (seeds 1000-1004) on 4 x 2 Titan Xp, its rows as the
//! scorer would see them. Median wall time per row over the runs, for the fixed-shape path and
//! for the general path (`Mlp::scores_any_shape`, the same sums over any layer sizes), on an
//! untrained network of the shipped shape (the weights do not change the work).
//! Run: `cargo bench -p dqngpu-rl --bench scorer_net` (arg: `[runs]`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use dqngpu_model::{ClusterSpec, ClusterView, Placement, Policy, WorkloadClass};
use dqngpu_policy::Greedy;
use dqngpu_rl::net::{Head, PolicyNet};
use dqngpu_rl::scorer::{Mlp, Round, FEATURES};

/// Decides as `sjf` does and keeps the rows the scorer's round offers at each decision.
struct Collect {
    inner: Box<dyn Policy>,
    greedy: Greedy,
    rows: Mutex<Vec<Vec<f32>>>,
}

impl Policy for Collect {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut rows = Vec::new();
        if Round::new(view, &self.greedy).rows(&mut rows) > 0 {
            if let Ok(mut all) = self.rows.lock() {
                all.push(rows);
            }
        }
        self.inner.decide(view)
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; take the first numeric argument as the run count.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(21);
    let lib = dqngpu_model::library::resolve("thesis").expect("library");
    let cluster = ClusterSpec::parse_gpus("4xtitanxp:2").expect("cluster");
    let model: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name("contention").expect("model"));
    let collect = Collect {
        inner: dqngpu_policy::by_name("sjf", 1).expect("sjf"),
        greedy: Greedy::default(),
        rows: Mutex::default(),
    };
    for class in WorkloadClass::ALL {
        for seed in 1000..1005 {
            let set = dqngpu_sim::draw(&lib, class, 30, seed, dqngpu_sim::Arrivals::AllAtZero).expect("jobs");
            dqngpu_sim::run(&collect, &cluster, &lib, &set, model.clone(), Default::default()).expect("run");
        }
    }
    let sets = collect.rows.into_inner().expect("rows");
    let n_rows: usize = sets.iter().map(|r| r.len() / FEATURES).sum();
    let mlp = Mlp::from_net(&PolicyNet::new(FEATURES, &[32, 16], 1, Head::Joint, 1).expect("net")).expect("mlp");
    println!(
        "Mlp::scores on {n_rows} rows of {} decision rounds (sjf, 4 x 2 Titan Xp); median of {runs} runs",
        sets.len()
    );
    let mut out = Vec::new();
    let mut check = 0.0f64;
    for (name, general) in [("fixed shape", false), ("general", true)] {
        let mut per_row = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            for rows in &sets {
                let n = rows.len() / FEATURES;
                if general {
                    mlp.scores_any_shape(rows, n, &mut out);
                } else {
                    mlp.scores(rows, n, &mut out);
                }
                check += f64::from(out[0]);
            }
            per_row.push(t.elapsed().as_secs_f64() / n_rows as f64);
        }
        println!("  {name:<12} {:>7.1} ns per row", median(per_row) * 1e9);
    }
    // Keeps the sums from being optimised away.
    println!("  (checksum {check:.3})");
}
