//! A search oracle for issue 10's two lines at once: can any placement reach mean JCT <= 1.01x
//! the best rule's *and* makespan <= 1.02x the best rule's on a (library, class)?
//!
//! ```text
//! MODEL=m.safetensors cargo run --release -p dqngpu-rl --example search_oracle -- \
//!     [LIBRARY] [CLASS] [WEIGHTS] [TOP_K]
//! ```
//! Defaults: `thesis`, `gpu_light`, weights `0,0.15,0.5`, top 8; one Titan Xp (`GPUS` sets
//! another cluster), 30 jobs at t = 0 (`JOBS` sets how many, `RATE` a Poisson arrival rate per
//! s; `ONLINE=1` plays futures out without the arrivals still to come, as an online scheduler
//! would have to), seeds 1000..=1009 (the experiment's main cell). At every choice the oracle plays
//! each of the scorer's best `TOP_K` rows (and hold) out to the end on a copy of the
//! simulator, the scorer `MODEL` deciding the rest, and takes the row with the lowest
//! mean JCT + w x makespan; one search per weight w. It is one step of policy improvement over
//! the scorer, far too slow to schedule with (seconds per decision); it only shows which
//! (JCT, makespan) pairs a placement can reach, beside every rule's.
//!
//! `DIFF=1` prints to standard error every choice where the search and the scorer differ: the
//! time, the rows offered, the search's relative gain over the scorer's row, and both rows'
//! features (in `scorer::features::NAMES` order), to see what the scorer gets wrong.

use std::path::Path;
use std::sync::Arc;

use dqngpu_model::{ClusterSpec, JobSet, Policy, WorkloadClass};
use dqngpu_policy::Greedy;
use dqngpu_rl::scorer::{self, train, ScorerPolicy};
use dqngpu_sim::{Arrivals, SimConfig, SimResult, Simulator};
use rayon::prelude::*;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One episode placed by the search with weight `w`.
/// How the search plays futures out and what it reports.
#[derive(Clone, Copy)]
struct Mode {
    /// Futures without the arrivals still to come (`ONLINE=1`).
    online: bool,
    /// Print the choices where the search and the scorer differ (`DIFF=1`).
    diff: bool,
}

fn search(mut sim: Simulator, base: &ScorerPolicy, w: f64, top_k: usize, mode: Mode) -> Result<SimResult, Error> {
    let greedy = Greedy::default();
    let mut scores = Vec::new();
    while !sim.done() {
        if sim.needs_decision() {
            let snapshot = sim.clone();
            let view = snapshot.view();
            // Online: the futures are played out without the arrivals to come.
            let online_copy = mode.online.then(|| snapshot.without_future_arrivals());
            let played = online_copy.as_ref().unwrap_or(&snapshot);
            let mut failure: Option<Error> = None;
            let placements = scorer::decide_within(&view, &greedy, &Default::default(), &mut |round, rows, n| {
                base.mlp().scores(rows, n, &mut scores);
                let mut best = (f64::INFINITY, 0);
                let own = scorer::best_row(&scores);
                let mut own_cost = f64::NAN;
                for r in train::lookahead_rows(round, &scores, top_k) {
                    match train::play_out(played, round, r, base) {
                        Ok(res) => {
                            let c = res.mean_jct_s + w * res.makespan_s;
                            if r == own {
                                own_cost = c;
                            }
                            if c < best.0 {
                                best = (c, r);
                            }
                        }
                        Err(e) => {
                            failure.get_or_insert(e.into());
                        }
                    }
                }
                if mode.diff && best.1 != own {
                    let f = |r: usize| {
                        rows[r * scorer::FEATURES..(r + 1) * scorer::FEATURES]
                            .iter()
                            .map(|v| format!("{v:.2}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    };
                    eprintln!(
                        "DIFF t={:.0} n={n} gain={:.4} own[{}] search[{}]",
                        view.now_s,
                        (own_cost - best.0) / own_cost,
                        f(own),
                        f(best.1)
                    );
                }
                best.1
            });
            if let Some(e) = failure {
                return Err(e);
            }
            sim.apply(&placements)?;
        }
        sim.step();
    }
    Ok(sim.finish())
}

fn main() -> Result<(), Error> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let library = Arc::new(dqngpu_model::library::resolve(a.first().map_or("thesis", String::as_str))?);
    let class: WorkloadClass = a.get(1).map_or("gpu_light", String::as_str).parse()?;
    let weights: Vec<f64> =
        a.get(2).map_or("0,0.15,0.5", String::as_str).split(',').map(|s| s.parse()).collect::<Result<_, _>>()?;
    let top_k: usize = a.get(3).map_or(Ok(8), |s| s.parse())?;
    let model = std::env::var("MODEL").map_err(|_| "set MODEL to a scorer checkpoint (dqngpu train -o M)")?;
    let base = ScorerPolicy::load(Path::new(&model))?;
    let gpus = std::env::var("GPUS").unwrap_or_else(|_| "titanxp:1".into());
    let cluster = ClusterSpec::parse_gpus(&gpus)?;
    let interference: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name("contention")?);
    let jobs: usize = std::env::var("JOBS").map_or(Ok(30), |v| v.parse())?;
    let flag = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    let mode = Mode { online: flag("ONLINE"), diff: flag("DIFF") };
    let arrivals = match std::env::var("RATE") {
        Ok(v) => Arrivals::Poisson { rate_per_s: v.parse()? },
        Err(_) => Arrivals::AllAtZero,
    };
    let sets: Vec<JobSet> =
        (1000..1010u64).map(|s| dqngpu_sim::draw(&library, class, jobs, s, arrivals)).collect::<Result<_, _>>()?;
    let mean = |rs: &[SimResult]| {
        let n = rs.len() as f64;
        (rs.iter().map(|r| r.mean_jct_s).sum::<f64>() / n, rs.iter().map(|r| r.makespan_s).sum::<f64>() / n)
    };
    // Mean JCT and makespan of `policy` over the sets.
    let evaluate = |policy: &dyn Policy| -> Result<(f64, f64), Error> {
        let rs: Vec<SimResult> = sets
            .iter()
            .map(|set| dqngpu_sim::run(policy, &cluster, &library, set, interference.clone(), SimConfig::default()))
            .collect::<Result<_, _>>()?;
        Ok(mean(&rs))
    };
    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    for name in dqngpu_policy::RIVALS {
        let (j, m) = evaluate(dqngpu_policy::by_name(name, 1)?.as_ref())?;
        rows.push((name.into(), j, m));
    }
    let rules = rows.len();
    let (j, m) = evaluate(&base)?;
    rows.push(("dqngpu".into(), j, m));
    for &w in &weights {
        let rs: Vec<SimResult> = sets
            .par_iter()
            .map(|set| {
                let sim = Simulator::new(&cluster, &library, set, interference.clone(), SimConfig::default())?;
                search(sim, &base, w, top_k, mode)
            })
            .collect::<Result<_, Error>>()?;
        let (j, m) = mean(&rs);
        rows.push((format!("search w={w}"), j, m));
    }
    let bj = rows[..rules].iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let bm = rows[..rules].iter().map(|r| r.2).fold(f64::INFINITY, f64::min);
    println!("{} {} (seeds 1000..1009, {gpus}, {jobs} jobs, {arrivals:?})", library.name, class.name());
    println!("{:14} {:>9} {:>9} {:>9} {:>9}", "policy", "jct", "makespan", "jct/best", "mk/best");
    for (n, j, m) in &rows {
        println!("{n:14} {j:9.1} {m:9.1} {:9.3} {:9.3}", j / bj, m / bm);
    }
    Ok(())
}
