//! Trains the scorer on one setting and compares it with every rule on unseen job sets.
//!
//! ```text
//! cargo run --release -p dqngpu-rl --example scorer -- [OBJECTIVE] [ITERS] [GPUS] [RATE] [JOBS] [LIBRARY]
//! ```
//! Defaults: jct, 30 iterations, `titanxp:1`, all jobs at t = 0 (RATE 0), 30 jobs, `thesis`.
//! Training sets: seeds 0..=9 cycling the five classes; validation: 500..=504; evaluation:
//! 1000..=1009 per class (the experiment's seeds).

use std::sync::Arc;
use std::time::Instant;

use dqngpu_model::{ClusterSpec, JobSet, Policy, WorkloadClass};
use dqngpu_rl::reinforce::{Objective, TrainConfig};
use dqngpu_rl::scorer::train::{self, Episode, ScorerRecipe, ScorerTask};
use dqngpu_sim::{Arrivals, SimConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let objective = Objective::from_name(a.first().map_or("jct", String::as_str)).ok_or("objective")?;
    let iterations: usize = a.get(1).map_or(Ok(30), |s| s.parse())?;
    let cluster = ClusterSpec::parse_gpus(a.get(2).map_or("titanxp:1", String::as_str))?;
    let rate: f64 = a.get(3).map_or(Ok(0.0), |s| s.parse())?;
    let jobs: usize = a.get(4).map_or(Ok(30), |s| s.parse())?;
    let library = Arc::new(dqngpu_model::library::resolve(a.get(5).map_or("thesis", String::as_str))?);
    let arrivals = if rate > 0.0 { Arrivals::Poisson { rate_per_s: rate } } else { Arrivals::AllAtZero };
    let interference: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name("contention")?);
    let draw = |class: WorkloadClass, seed: u64| -> Result<JobSet, Box<dyn std::error::Error>> {
        Ok(dqngpu_sim::draw(&library, class, jobs, seed, arrivals)?)
    };
    let ep = |set: JobSet| Episode::new(cluster.clone(), library.clone(), set);
    let classes = WorkloadClass::ALL;
    let mut train_eps = Vec::new();
    for s in 0..10u64 {
        train_eps.push(ep(draw(classes[s as usize % 5], s)?));
    }
    let mut val = Vec::new();
    for s in 500..510u64 {
        val.push(ep(draw(classes[s as usize % 5], s)?));
    }
    let task = ScorerTask {
        train: train_eps,
        validation: val,
        interference: interference.clone(),
        config: SimConfig::default(),
    };
    let cfg = TrainConfig {
        iterations,
        episodes: 8,
        jobsets_per_iter: 2,
        lr: 1e-3,
        optimizer: dqngpu_rl::net::OptimizerKind::Adam,
        gamma: 1.0,
        hidden: vec![32, 16],
        max_steps: 5000,
        seed: 1,
        objective,
    };
    let t = Instant::now();
    let mut recipe = ScorerRecipe::default();
    if let Ok(v) = std::env::var("LOOKAHEAD") {
        recipe.lookahead_rounds = v.parse()?;
    }
    if let Ok(v) = std::env::var("TOPK") {
        recipe.lookahead_top_k = v.parse()?;
    }
    // SCHEDULER=dqngpu-plan evaluates the scorer with search at decision time instead.
    let scheduler = std::env::var("SCHEDULER").unwrap_or_else(|_| "dqngpu".into());
    let policy: Box<dyn Policy> = match std::env::var("MODEL") {
        Ok(m) => dqngpu_rl::policy_by_name(&scheduler, Some(std::path::Path::new(&m)), 1)?,
        Err(_) => {
            let (policy, report, curve) = train::train(&task, &cfg, &recipe, &mut |s| {
                if s.iteration % 5 == 0 {
                    eprintln!("iter {} sampled {:.1} ({:.1} s)", s.iteration, s.mean_score, s.elapsed_s);
                }
                true
            })?;
            eprintln!("trained in {:.1} s, {} iterations; {report:?}", t.elapsed().as_secs_f64(), curve.len());
            Box::new(policy)
        }
    };
    let library = match std::env::var("EVAL_LIB") {
        Ok(name) => Arc::new(dqngpu_model::library::resolve(&name)?),
        Err(_) => library.clone(),
    };
    let draw = |class: WorkloadClass, seed: u64| -> Result<JobSet, Box<dyn std::error::Error>> {
        Ok(dqngpu_sim::draw(&library, class, jobs, seed, arrivals)?)
    };
    let rules = dqngpu_policy::RIVALS;
    println!("{:10} {:12} {:>9} {:>9} {:>7}", "class", "scheduler", "jct", "makespan", "slow10");
    for class in classes {
        let sets: Vec<JobSet> = (1000..1010u64).map(|s| draw(class, s)).collect::<Result<_, _>>()?;
        let mut rows: Vec<(String, f64, f64, f64)> = Vec::new();
        let mut run = |name: &str, p: &dyn Policy| -> Result<(), Box<dyn std::error::Error>> {
            let (mut j, mut m, mut s) = (0.0, 0.0, 0.0);
            for set in &sets {
                let r = dqngpu_sim::run(p, &cluster, &library, set, interference.clone(), SimConfig::default())?;
                j += r.mean_jct_s / 10.0;
                m += r.makespan_s / 10.0;
                s += r.slowed_over_10_pct / 10.0;
            }
            rows.push((name.to_string(), j, m, s));
            Ok(())
        };
        for r in rules {
            run(r, dqngpu_policy::by_name(r, 1)?.as_ref())?;
        }
        run(&scheduler, policy.as_ref())?;
        let bj = rows[..rules.len()].iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
        let bm = rows[..rules.len()].iter().map(|r| r.2).fold(f64::INFINITY, f64::min);
        for (n, j, m, s) in &rows {
            println!(
                "{:10} {:12} {:9.1} {:9.1} {:7.1}  jct/best {:.3} mk/best {:.3}",
                class.name(),
                n,
                j,
                m,
                s,
                j / bj,
                m / bm
            );
        }
    }
    Ok(())
}
