//! How far a search over *whole runs* gets below the best rule, where the plan's one-step search
//! stops (docs/RL.md, "Seventeenth session"). Per seed (1000..1009, 30 jobs at t = 0, the
//! `contention` model, no budget), a hill climb over one of two spaces, each candidate played to
//! the end and costed as the plan costs futures (mean JCT + the makespan guard of weight `W`,
//! default 2, over the seven rules' best on that seed):
//! - `list`: a list schedule, a priority order over the jobs and a flag per job (share, or run
//!   alone), each job in order onto the GPU where its peak memory fits tightest (shared jobs
//!   only where no lone job runs). Starts from SJF's order, all shared and all alone.
//! - `picks` (with `MODEL`): the scorer, taking at its k-th choice its `picks[k]`-th best row of
//!   the four the plan weighs (hold included). Starts from the scorer's own run (all zeros).
//!
//! Moves: for `list`, flip a flag, swap neighbours, or move a job; for `picks`, re-draw one or
//! two picks. A move is kept when it costs less. Prints the mean JCT and makespan over the
//! best rule's (means over the seeds, as the league does).
//!
//! ```text
//! cargo build --release -p dqngpu-rl --example whole_run_search
//! target/release/examples/whole_run_search list|picks LIBRARY GPUS CLASS [EVALS]
//! ```
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dqngpu_model::{ClusterSpec, ClusterView, JobId, JobSet, Placement, Policy, QueuedJob, WorkloadClass};
use dqngpu_policy::fit;
use dqngpu_rl::scorer::{self, train::Guard, ScorerPolicy};
use dqngpu_sim::{Arrivals, SimConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Error = Box<dyn std::error::Error>;

/// A list schedule: job -> (rank, runs alone).
struct Listed {
    rank: HashMap<JobId, (usize, bool)>,
}

impl Listed {
    fn alone(&self, id: JobId) -> bool {
        self.rank.get(&id).is_some_and(|r| r.1)
    }
}

impl Policy for Listed {
    fn name(&self) -> &str {
        "list"
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut waiting: Vec<&QueuedJob> = view.queue.iter().collect();
        waiting.sort_by_key(|j| self.rank.get(&j.id).map_or(usize::MAX, |r| r.0));
        let mut load: Vec<_> = view.gpus.iter().map(fit::committed).collect();
        let mut chosen: Vec<Vec<&QueuedJob>> = vec![Vec::new(); view.gpus.len()];
        // A GPU where a lone job runs takes nobody else.
        let mut closed: Vec<bool> = view.gpus.iter().map(|g| g.running.iter().any(|r| self.alone(r.id))).collect();
        for job in waiting {
            let alone = self.alone(job.id);
            let peak = fit::job_peak(job);
            let best = (0..view.gpus.len())
                .filter(|&g| !closed[g] && (!alone || (view.gpus[g].is_idle() && chosen[g].is_empty())))
                .filter(|&g| {
                    fit::fits_memory(&load[g], &peak, &view.gpus[g]) && fit::compatible(job, &view.gpus[g], &chosen[g])
                })
                .min_by(|&a, &b| {
                    let free = |g: usize| view.gpus[g].spec.memory_mib - load[g].gpu_mem_mib;
                    free(a).total_cmp(&free(b)).then(a.cmp(&b))
                });
            if let Some(g) = best {
                load[g] = load[g].add(&peak);
                chosen[g].push(job);
                closed[g] |= alone;
            }
        }
        fit::placements(chosen)
    }
}

/// The scorer, taking at its k-th choice the `picks[k]`-th of the rows the plan would weigh.
struct Picks {
    base: ScorerPolicy,
    picks: Vec<u8>,
    at: Mutex<usize>,
}

impl Policy for Picks {
    fn name(&self) -> &str {
        "picks"
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut scores = Vec::new();
        scorer::decide_within_until(view, self.base.greedy(), self.base.caller(), &mut |round, rows, n| {
            self.base.mlp().scores(rows, n, &mut scores);
            let tried = scorer::train::lookahead_rows(round, &scores, 4);
            let mut at = self.at.lock().ok()?;
            let k = self.picks.get(*at).copied().unwrap_or(0) as usize;
            *at += 1;
            Some(tried[k.min(tried.len() - 1)])
        })
    }
}

/// One seed's setting: how to run a policy, and the guard over the rules' runs.
struct Setting<'a> {
    library: &'a dqngpu_model::AppLibrary,
    cluster: &'a ClusterSpec,
    set: JobSet,
    model: Arc<dyn dqngpu_interference::Interference>,
    guard: Guard,
}

/// (cost, mean JCT, makespan) of one run.
type Cost = (f64, f64, f64);

impl Setting<'_> {
    fn run(&self, p: &dyn Policy) -> Result<Cost, Error> {
        let r = dqngpu_sim::run(p, self.cluster, self.library, &self.set, self.model.clone(), SimConfig::default())?;
        Ok((r.mean_jct_s + self.guard.penalty(r.makespan_s), r.mean_jct_s, r.makespan_s))
    }
}

/// Hill climb over list schedules from SJF's order (all shared, all alone).
fn climb_list(s: &Setting<'_>, evals: usize, rng: &mut ChaCha8Rng) -> Result<Cost, Error> {
    let mut order: Vec<(JobId, f64)> = s
        .set
        .jobs
        .iter()
        .map(|j| Ok((j.id, s.library.apps.get(&j.app).ok_or("app")?.solo_s())))
        .collect::<Result<_, Error>>()?;
    order.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let ids: Vec<JobId> = order.iter().map(|o| o.0).collect();
    let cost = |ids: &[JobId], flags: &[bool]| {
        s.run(&Listed { rank: ids.iter().zip(flags).enumerate().map(|(k, (&id, &f))| (id, (k, f))).collect() })
    };
    let n = ids.len();
    let (mut best_ids, mut best_flags) = (ids.clone(), vec![false; n]);
    let mut best = cost(&best_ids, &best_flags)?;
    let alone = cost(&ids, &vec![true; n])?;
    if alone.0 < best.0 {
        (best, best_flags) = (alone, vec![true; n]);
    }
    for _ in 0..evals {
        let (mut i2, mut f2) = (best_ids.clone(), best_flags.clone());
        match rng.gen_range(0..3) {
            0 => {
                let i = rng.gen_range(0..n);
                f2[i] = !f2[i];
            }
            1 if n > 1 => {
                let i = rng.gen_range(0..n - 1);
                i2.swap(i, i + 1);
                f2.swap(i, i + 1);
            }
            _ => {
                let (i, j) = (rng.gen_range(0..n), rng.gen_range(0..n));
                let (x, y) = (i2.remove(i), f2.remove(i));
                i2.insert(j, x);
                f2.insert(j, y);
            }
        }
        let c = cost(&i2, &f2)?;
        if c.0 < best.0 {
            (best, best_ids, best_flags) = (c, i2, f2);
        }
    }
    Ok(best)
}

/// Hill climb over the scorer's picks, from its own run.
fn climb_picks(s: &Setting<'_>, base: &ScorerPolicy, evals: usize, rng: &mut ChaCha8Rng) -> Result<Cost, Error> {
    let cost = |picks: &[u8]| -> Result<(Cost, usize), Error> {
        let p = Picks { base: base.clone(), picks: picks.to_vec(), at: Mutex::new(0) };
        let c = s.run(&p)?;
        let choices = *p.at.lock().map_err(|_| "poisoned")?;
        Ok((c, choices))
    };
    let mut best_p: Vec<u8> = Vec::new();
    let (mut best, mut choices) = cost(&best_p)?;
    for _ in 0..evals {
        let mut p2 = best_p.clone();
        p2.resize(choices.max(1), 0);
        for _ in 0..rng.gen_range(1..=2) {
            let i = rng.gen_range(0..p2.len());
            p2[i] = rng.gen_range(0..4);
        }
        let (c, k) = cost(&p2)?;
        if c.0 < best.0 {
            (best, choices, best_p) = (c, k, p2);
        }
    }
    Ok(best)
}

fn main() -> Result<(), Error> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let usage = "whole_run_search list|picks LIBRARY GPUS CLASS [EVALS]";
    let mode = a.first().ok_or(usage)?.as_str();
    let library = dqngpu_model::library::resolve(a.get(1).ok_or(usage)?)?;
    let cluster = ClusterSpec::parse_gpus(a.get(2).ok_or(usage)?)?;
    let class: WorkloadClass = a.get(3).ok_or(usage)?.parse()?;
    let evals: usize = a.get(4).map_or(Ok(300), |s| s.parse())?;
    let weight: f64 = std::env::var("W").map_or(Ok(2.0), |s| s.parse())?;
    let base = match mode {
        "list" => None,
        "picks" => {
            Some(ScorerPolicy::load(std::path::Path::new(&std::env::var("MODEL").map_err(|_| "picks needs MODEL")?))?)
        }
        _ => return Err(usage.into()),
    };
    let model: Arc<dyn dqngpu_interference::Interference> = Arc::from(dqngpu_interference::by_name("contention")?);
    let mut rules: HashMap<&str, (f64, f64)> = HashMap::new();
    let (mut jct, mut makespan, seeds) = (0.0, 0.0, 10.0);
    for seed in 1000..1010u64 {
        let set = dqngpu_sim::draw(&library, class, 30, seed, Arrivals::AllAtZero)?;
        let mut ends = Vec::new();
        for name in dqngpu_policy::RIVALS {
            let p = dqngpu_policy::by_name_under(name, 1, Some(model.clone()))?;
            let r = dqngpu_sim::run(p.as_ref(), &cluster, &library, &set, model.clone(), SimConfig::default())?;
            let e = rules.entry(name).or_default();
            (e.0, e.1) = (e.0 + r.mean_jct_s / seeds, e.1 + r.makespan_s / seeds);
            ends.push(r);
        }
        let guard = Guard::best_of(ends.iter(), weight);
        let s = Setting { library: &library, cluster: &cluster, set, model: model.clone(), guard };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let best = match &base {
            None => climb_list(&s, evals, &mut rng)?,
            Some(b) => climb_picks(&s, b, evals, &mut rng)?,
        };
        eprintln!(
            "seed {seed}: {:.1} / {:.1} s; the rules' best {:.1} / {:.1} s",
            best.1, best.2, guard.jct, guard.makespan
        );
        (jct, makespan) = (jct + best.1 / seeds, makespan + best.2 / seeds);
    }
    let best_jct = rules.values().map(|r| r.0).fold(f64::INFINITY, f64::min);
    let best_makespan = rules.values().map(|r| r.1).fold(f64::INFINITY, f64::min);
    println!(
        "{mode} {} {} {}: JCT / makespan over the best rule's {:.3} / {:.3} ({evals} runs per seed, W = {weight})",
        a[1],
        a[2],
        a[3],
        jct / best_jct,
        makespan / best_makespan
    );
    Ok(())
}
