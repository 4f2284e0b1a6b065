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

/// Futures whose costs are within this share of each other are a tie, which the row tried
/// first (the scorer's preference) wins: futures that end the same jobs at the same times
/// differ in the last bits of their mean JCT (its sum runs in job-table order), and the choice
/// must not hang on that.
const TIE: f64 = 1e-9;

/// The row whose future costs least (ties as [`TIE`] says); `None` with no futures.
fn cheapest(futures: &[(usize, SimResult)], guard: Option<&train::Guard>) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for (r, res) in futures {
        let c = cost(guard, res);
        if best.is_none_or(|(b, _)| c < b - TIE * b.abs()) {
            best = Some((c, *r));
        }
    }
    best.map(|b| b.1)
}

/// True when the guard cannot change which future [`cheapest`] takes, so the rules need not
/// be played for it. Its charge grows with makespan (against the same references for every
/// future), so it is moot where every future ends at the same time, or where one future has
/// a mean JCT clearly (a millionth) below every other's and ends no later than any: it is
/// charged no more than they are. (Unless a charge passes a thousand times the mean JCT,
/// beyond any makespan a run reaches under the guard's weights.)
fn guard_is_moot(futures: &[(usize, SimResult)]) -> bool {
    if futures.windows(2).all(|w| w[0].1.makespan_s == w[1].1.makespan_s) {
        return true;
    }
    futures.iter().any(|(r, f)| {
        futures.iter().all(|(o, g)| {
            o == r || (g.makespan_s >= f.makespan_s && f.mean_jct_s < g.mean_jct_s - 1e-6 * g.mean_jct_s.abs())
        })
    })
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
        // The rules side by side; min is exact in any order, so the guard is the same.
        let ends: Vec<SimResult> = dqngpu_policy::RIVALS
            .par_iter()
            .filter_map(|name| {
                let rule = dqngpu_policy::by_name_under(name, 1, Some(Arc::clone(&self.caller().model))).ok()?;
                sim.clone().play_out(rule.as_ref()).ok()
            })
            .collect();
        Some(train::Guard::best_of(&ends, weight))
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
            // that fails (a fault the simulator reports) is not taken. A row whose idle twin
            // is tried before it (the same score and future) would lose the tie, so it is not
            // played.
            let mut rows: Vec<usize> = Vec::new();
            for r in train::lookahead_rows(round, &scores, self.config.top_k) {
                if !rows.iter().any(|&e| round.idle_twins(e, r)) {
                    rows.push(r);
                }
            }
            let tried: Vec<(usize, (Vec<Placement>, bool))> =
                rows.into_iter().map(|r| (r, round.placements_with(r))).collect();
            let futures: Vec<(usize, SimResult)> = tried
                .par_iter()
                .filter_map(|(r, (now, hold))| {
                    train::play_out_placed(&sim, now, *hold, &self.base).ok().map(|res| (*r, res))
                })
                .collect();
            // The rules' futures (played once per decision) are needed only where the guard
            // could change the choice.
            let guard = if guard_is_moot(&futures) { None } else { *guard.get_or_insert_with(|| self.guard(&sim)) };
            cheapest(&futures, guard.as_ref()).unwrap_or(own)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dqngpu_model::{ClusterSpec, WorkloadClass};

    /// Futures with these (mean JCT, makespan), rows 0, 1, ... (a real result, reshaped).
    fn futures(ends: &[(f64, f64)]) -> Vec<(usize, SimResult)> {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let set = dqngpu_sim::draw(&lib, WorkloadClass::GpuLight, 2, 1, dqngpu_sim::Arrivals::AllAtZero).unwrap();
        let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
        let model = Arc::from(dqngpu_interference::by_name("contention").unwrap());
        let policy = dqngpu_policy::by_name("sjf", 1).unwrap();
        let r = dqngpu_sim::run(policy.as_ref(), &cluster, &lib, &set, model, SimConfig::default()).unwrap();
        ends.iter()
            .enumerate()
            .map(|(k, &(jct, mk))| (k, SimResult { mean_jct_s: jct, makespan_s: mk, ..r.clone() }))
            .collect()
    }

    #[test]
    fn costs_within_a_rounding_are_a_tie_that_the_first_row_wins() {
        let f = futures(&[(100.0, 500.0), (100.0 - 1e-12, 500.0), (99.0, 500.0)]);
        assert_eq!(cheapest(&f[..2], None), Some(0), "a last-bit difference is a tie");
        assert_eq!(cheapest(&f, None), Some(2));
        assert_eq!(cheapest(&[], None), None);
        // The guard charges the later makespan enough to undo a 1 s lead.
        let f = futures(&[(100.0, 500.0), (99.0, 600.0)]);
        let guard = train::Guard { jct: 100.0, makespan: 500.0, weight: 1.0 };
        assert_eq!(cheapest(&f, None), Some(1));
        assert_eq!(cheapest(&f, Some(&guard)), Some(0));
    }

    #[test]
    fn the_guard_is_moot_only_where_it_cannot_change_the_choice() {
        // Every future ends at once: each is charged the same.
        assert!(guard_is_moot(&futures(&[(100.0, 500.0), (90.0, 500.0)])));
        // The lowest JCT also ends first: it is charged least.
        assert!(guard_is_moot(&futures(&[(100.0, 600.0), (90.0, 500.0), (95.0, 550.0)])));
        // The lowest JCT ends last: the guard may undo its lead (as in the test above).
        assert!(!guard_is_moot(&futures(&[(100.0, 500.0), (99.0, 600.0)])));
        // A lead within rounding is no lead (the tie goes to the first row).
        assert!(!guard_is_moot(&futures(&[(100.0, 600.0), (100.0 - 1e-12, 500.0)])));
        assert!(guard_is_moot(&futures(&[])));
    }
}
