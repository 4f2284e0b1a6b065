//! `dqngpu-plan`: the trained scorer with search at decision time. At each choice of a
//! decision round, the scorer's best `top_k` rows (and hold, where offered) are each played
//! out to the end on a simulation of the cluster as the view shows it
//! ([`Simulator::from_view`]: the running jobs and the queue, no arrivals to come), the scorer
//! deciding the rest, and the row whose future costs least is taken. The cost is the one the
//! scorer was trained on (`train::Guard`): mean JCT, plus the makespan guard (`makespan_guard`
//! x the best rule's mean JCT x the share of makespan past 1.01 x the best rule's), the rules'
//! references played out from the same moment. It is one step of policy improvement over the scorer, the
//! step the training's look-ahead distils (docs/RL.md), taken online instead of learned; it
//! costs milliseconds per decision where the scorer alone costs a tenth of one.

use std::sync::Arc;

use dqngpu_model::{ClusterView, Placement, Policy};
use dqngpu_sim::{SimConfig, SimResult, Simulator};
use rayon::prelude::*;

use super::{best_row, decide_within, train, Caller, ScorerPolicy};
use crate::error::RlError;

/// How a plan searches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanConfig {
    /// Rows played out per choice (the scorer's best), beside hold.
    pub top_k: usize,
    /// The makespan guard's weight (training's `--makespan-guard`); 0: mean JCT alone.
    pub makespan_guard: f64,
}

impl PlanConfig {
    /// `top_k` rows and guard weight `makespan_guard`, checked ([`PlanConfig::named`]); errors
    /// name the flags, `--plan-rows` and `--plan-guard`.
    pub fn new(top_k: usize, makespan_guard: f64) -> Result<Self, RlError> {
        Self::named(top_k, makespan_guard, ("--plan-rows", "--plan-guard"))
            .map_err(|(field, message)| RlError::Config { field, message })
    }

    /// `top_k` rows and guard weight `makespan_guard`, checked: at least one row, a weight
    /// that is a number >= 0. An error is the name (of `names`: rows, guard) of the setting
    /// that is wrong, as the caller reads it (a flag, a config field), and what is wrong.
    pub fn named(
        top_k: usize,
        makespan_guard: f64,
        names: (&'static str, &'static str),
    ) -> Result<Self, (&'static str, String)> {
        if top_k == 0 {
            return Err((names.0, "at least 1 row must be played out".into()));
        }
        if !(makespan_guard.is_finite() && makespan_guard >= 0.0) {
            return Err((
                names.1,
                format!("the guard's weight must be a number >= 0 (0: mean JCT alone), got {makespan_guard}"),
            ));
        }
        Ok(PlanConfig { top_k, makespan_guard })
    }
}

impl Default for PlanConfig {
    /// Four rows and the training's default guard (docs/RL.md, "Search at decision time").
    fn default() -> Self {
        PlanConfig { top_k: 4, makespan_guard: 1.0 }
    }
}

/// The cost of a future: mean JCT, plus the training's makespan guard where there is one.
fn cost(guard: Option<&train::Guard>, r: &SimResult) -> f64 {
    r.mean_jct_s + guard.map_or(0.0, |g| g.penalty(r.makespan_s))
}

/// The scorer with search at decision time, as a [`Policy`] (`dqngpu-plan`).
#[derive(Debug, Clone)]
pub struct PlanPolicy {
    base: ScorerPolicy,
    config: PlanConfig,
}

impl PlanPolicy {
    /// Searches over `base` (which carries the caller's budget and interference model: the
    /// futures are played out under them).
    pub fn new(base: ScorerPolicy, config: PlanConfig) -> Self {
        PlanPolicy { base, config }
    }

    /// The search's settings.
    pub fn config(&self) -> PlanConfig {
        self.config
    }

    fn caller(&self) -> &Caller {
        self.base.caller()
    }

    /// The training's guard over the lowest mean JCT and makespan the rules reach from `sim`'s
    /// moment; `None` with no guard weight.
    fn guard(&self, sim: &Simulator) -> Option<train::Guard> {
        let weight = self.config.makespan_guard;
        if weight <= 0.0 {
            return None;
        }
        let mut g = train::Guard { jct: f64::INFINITY, makespan: f64::INFINITY, weight };
        for name in dqngpu_policy::RIVALS {
            let Ok(rule) = dqngpu_policy::by_name_under(name, 1, Some(Arc::clone(&self.caller().model))) else {
                continue;
            };
            if let Ok(r) = sim.clone().play_out(rule.as_ref()) {
                g.jct = g.jct.min(r.mean_jct_s);
                g.makespan = g.makespan.min(r.makespan_s);
            }
        }
        Some(g)
    }
}

impl Policy for PlanPolicy {
    fn name(&self) -> &str {
        "dqngpu-plan"
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let caller = self.caller();
        let config = SimConfig { max_slowdown: caller.max_slowdown, ..SimConfig::default() };
        // A view the simulator cannot hold (none in practice) falls back to the scorer alone.
        let Ok(sim) = Simulator::from_view(view, Arc::clone(&caller.model), config) else {
            return self.base.decide(view);
        };
        let mut scores = Vec::new();
        let mut guard: Option<Option<train::Guard>> = None;
        decide_within(view, self.base.greedy(), caller, &mut |round, rows, n| {
            self.base.mlp().scores(rows, n, &mut scores);
            let own = best_row(&scores);
            // The futures of the rows tried, side by side (each on its own copy). A future
            // that fails (a fault the simulator reports) is not taken.
            let tried: Vec<(usize, (Vec<Placement>, bool))> = train::lookahead_rows(round, &scores, self.config.top_k)
                .into_iter()
                .map(|r| (r, round.placements_with(r)))
                .collect();
            let futures: Vec<(usize, SimResult)> = tried
                .par_iter()
                .filter_map(|(r, (now, hold))| {
                    train::play_out_placed(&sim, now, *hold, &self.base).ok().map(|res| (*r, res))
                })
                .collect();
            // The guard charges makespan only against the rules' references; where every
            // future ends at the same time it charges each the same, so the rules' futures are
            // played (once per decision) only where makespans differ.
            let tie = futures.windows(2).all(|w| w[0].1.makespan_s == w[1].1.makespan_s);
            let guard = if tie { None } else { *guard.get_or_insert_with(|| self.guard(&sim)) };
            let mut best = (f64::INFINITY, own);
            for (r, res) in &futures {
                let cost = cost(guard.as_ref(), res);
                if cost < best.0 {
                    best = (cost, *r);
                }
            }
            best.1
        })
    }
}
