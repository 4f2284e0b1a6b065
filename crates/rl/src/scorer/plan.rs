//! `dqngpu-plan`: the trained scorer with search at decision time. At each choice of a
//! decision round, the scorer's best `top_k` rows (and hold, where offered) are each played
//! out to the end on a simulation of the cluster as the view shows it
//! ([`Simulator::from_view`]: the running jobs and the queue, no arrivals to come), and the
//! row whose future costs least is taken. A row's future is its whole decision at this moment
//! (the row, then what the scorer adds), then the scorer deciding the rest, and once the
//! rules have been played, also the rule whose run ended first deciding the rest. The cost is
//! the one the scorer was trained on (`train::Guard`): mean JCT, plus the makespan guard
//! (`makespan_guard` x the best rule's mean JCT x the share of makespan past 1.01 x the best
//! rule's), makespans counted from the epoch's first choice (below).
//!
//! The plan keeps its promise (a fortified rollout): the future it took is weighed again at
//! the next decision, first, so it is left only for a cheaper one; at the first choice of an
//! epoch the seven rules' own runs are weighed too, and the guard's references (their best)
//! stay fixed for the epoch. Where nothing arrives and the simulation replays exactly (one
//! run of all jobs known at the start), a run therefore costs no more than the cheapest rule's.
//! An epoch ends when a job the plan did not know appears, or the clock goes back.
//! It costs milliseconds per decision where the scorer alone costs a tenth of one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dqngpu_model::{ClusterView, JobId, Placement, Policy, QueuedJob};
use dqngpu_sim::{SimResult, Simulator};
use rayon::prelude::*;

use super::{best_row, decide_within_until_with, train, Caller, ScorerPolicy};
use crate::error::RlError;

mod ahead;
use ahead::{Ask, Moment, Recording};

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
    /// Four rows and twice the training's default guard (docs/RL.md: "Search at decision
    /// time", and "The guard's weight on validation seeds", where weight 2 keeps every pair
    /// within issue 10's lines with the widest margin).
    fn default() -> Self {
        PlanConfig { top_k: 4, makespan_guard: 2.0 }
    }
}

/// The training's makespan guard over an epoch: a future's makespan is counted from the
/// epoch's first choice, as the references' is, so that the guard charges a share of the time
/// left the same whatever the clock reads (a service's uptime, or the Unix time of a
/// Kubernetes extender, where a makespan counted from 0 would never pass 1.01 x the rules').
#[derive(Debug, Clone, Copy)]
struct EpochGuard {
    guard: train::Guard,
    origin_s: f64,
}

impl EpochGuard {
    /// What a future ending at clock `makespan` is charged, in seconds of mean JCT.
    fn penalty(&self, makespan: f64) -> f64 {
        self.guard.penalty(makespan - self.origin_s)
    }
}

/// The cost of a future: mean JCT, plus the training's makespan guard where there is one.
fn cost(guard: Option<&EpochGuard>, r: &SimResult) -> f64 {
    r.mean_jct_s + guard.map_or(0.0, |g| g.penalty(r.makespan_s))
}

/// Futures whose costs are within this share of each other are a tie, which the row tried
/// first (the scorer's preference) wins: futures that end the same jobs at the same times
/// differ in the last bits of their mean JCT (its sum runs in job-table order), and the choice
/// must not hang on that.
const TIE: f64 = 1e-9;

/// The index of the future that costs least (ties as [`TIE`] says: the first wins); `None`
/// with no futures.
fn cheapest_index<'a>(ends: impl IntoIterator<Item = &'a SimResult>, guard: Option<&EpochGuard>) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for (k, res) in ends.into_iter().enumerate() {
        let c = cost(guard, res);
        if best.is_none_or(|(b, _)| c < b - TIE * b.abs()) {
            best = Some((c, k));
        }
    }
    best.map(|b| b.1)
}

/// A future is abandoned once its cost floor ([`Simulator::cost_floor`]) passes the cheapest
/// future played out so far by this share. Far wider than [`TIE`], so an abandoned future could
/// neither have been taken nor have changed which of the others is (the pick stays the same).
const PRUNE: f64 = 1e-6;

/// The lowest cost of the futures of one choice played out so far (shared by the futures
/// played side by side; costs are never negative, so their bits order as the numbers do).
#[derive(Debug)]
struct Incumbent(AtomicU64);

impl Incumbent {
    /// None played yet: nothing is abandoned.
    fn none() -> Self {
        Incumbent(AtomicU64::new(f64::INFINITY.to_bits()))
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    /// Takes `c` if it is lower (a NaN or negative cost is not taken).
    fn lower(&self, c: f64) {
        if c >= 0.0 {
            self.0.fetch_min(c.to_bits(), Ordering::Relaxed);
        }
    }
}

/// Who decides after a future's first decision: the scorer, or one of the rules
/// ([`dqngpu_policy::RIVALS`], by index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Scorer,
    Rule(usize),
}

/// A future weighed at a choice: the whole decision at this moment, what decides after it,
/// how it ends, and the row of the choice it starts with (`None`: it is no row of this choice;
/// it is what the plan took before, or a rule's); and each later moment its decider was asked
/// at, with what it decided (from `next_ask` on), where the plan may read it again.
#[derive(Debug, Clone)]
struct Future {
    decision: Vec<Placement>,
    then: Then,
    end: SimResult,
    row: Option<usize>,
    asks: Arc<Vec<Ask>>,
    next_ask: usize,
}

impl Future {
    fn new(decision: Vec<Placement>, then: Then, end: SimResult, row: Option<usize>, asks: Vec<Ask>) -> Self {
        Future { decision, then, end, row, asks: Arc::new(asks), next_ask: 0 }
    }

    /// This future read from `view`, where its decider was asked (the same state): its
    /// decision there, and its end as a simulation from `view` reckons it. `None` where it
    /// never was at `view`'s moment, and for a future with an OOM kill: a simulation from a
    /// view knows no running job's restarts, avoided apps or submission (it counts from the
    /// start), which a kill after the moment brings back into play, so the future played again
    /// from the view may go otherwise than the one recorded.
    fn read_at(&self, view: &ClusterView<'_>) -> Option<Future> {
        if self.end.oom_kills > 0 {
            return None;
        }
        let moment = Moment::of(view);
        let k = self.next_ask + self.asks.get(self.next_ask..)?.iter().position(|a| a.moment == moment)?;
        Some(Future {
            decision: self.asks[k].decision.clone(),
            then: self.then,
            end: ahead::end_from(&self.end, view)?,
            row: None,
            asks: Arc::clone(&self.asks),
            next_ask: k + 1,
        })
    }
}

/// The rules' lowest total JCT (mean x jobs) and makespan, played out from the first choice of
/// a [`Promise`]'s epoch: the guard's references, fixed for the epoch, so that each decision's
/// futures are charged as the epoch's first decision charged them.
#[derive(Debug, Clone, Copy)]
struct Refs {
    total_jct: f64,
    makespan: f64,
    /// The clock at the epoch's first choice, where makespans are counted from.
    origin_s: f64,
}

impl Refs {
    /// The guard of `weight` at a moment with `jobs` jobs left: in units of their mean JCT.
    fn guard(&self, weight: f64, jobs: usize) -> EpochGuard {
        let guard =
            train::Guard { jct: self.total_jct / jobs.max(1) as f64, makespan: self.makespan - self.origin_s, weight };
        EpochGuard { guard, origin_s: self.origin_s }
    }
}

/// What the plan carries from one decision to the next: the future it took, so that it keeps
/// to it unless a cheaper one turns up (a fortified rollout, Bertsekas, "Rollout algorithms
/// for discrete optimization", 2013). Its epoch lasts while the jobs are those it knew and the
/// clock runs forward; a job it did not know (an arrival) or an earlier clock (another run)
/// begins a new one.
#[derive(Debug, Clone, Default)]
struct Promise {
    /// The jobs (running or waiting) when the epoch began, with their apps.
    jobs: HashMap<JobId, String>,
    /// The clock at the last decision.
    now_s: f64,
    /// The guard's references, from the epoch's first choice.
    refs: Option<Refs>,
    /// What decides after the future taken last; `None` before the first choice.
    then: Option<Then>,
    /// The rule whose future ended first when the references were taken (by index).
    finisher: Option<usize>,
    /// The future taken last, whole; `None` before the first choice.
    taken: Option<Future>,
}

impl Promise {
    fn begin(view: &ClusterView<'_>) -> Self {
        let jobs = view_jobs(view).map(|(id, app)| (id, app.to_string())).collect();
        Promise { jobs, now_s: view.now_s, refs: None, then: None, finisher: None, taken: None }
    }

    /// True when `view` goes on from this epoch: no earlier clock, every job known.
    fn covers(&self, view: &ClusterView<'_>) -> bool {
        view.now_s >= self.now_s && view_jobs(view).all(|(id, app)| self.jobs.get(&id).is_some_and(|a| a == app))
    }
}

/// The jobs of `view`, running and waiting, with their apps.
fn view_jobs<'v>(view: &'v ClusterView<'_>) -> impl Iterator<Item = (JobId, &'v str)> + 'v {
    let running = view.gpus.iter().flat_map(|g| g.running.iter().map(|r| (r.id, r.profile.app.name.as_str())));
    running.chain(view.queue.iter().map(|q| (q.id, q.app.as_str())))
}

/// True when waiting job `q` alone fits some GPU of `view` at its peak
/// ([`dqngpu_model::fits_alone`]'s rule).
fn fits_a_gpu(view: &ClusterView<'_>, q: &QueuedJob) -> bool {
    let peak = q.profile.peak_from(0).gpu_mem_mib;
    view.gpus.iter().any(|g| peak <= g.spec.memory_mib)
}

/// The plan searches only while at most this many jobs wait; with more, the scorer alone
/// decides. Each future is a whole run of every job it holds, with a decision of the scorer at
/// each event, so a decision's cost grows about as the square of the queue (a review measured
/// 0.26 s at 50 waiting on two GPUs, 4.3 s at 200 on eight, 625 s at 1,000), while the
/// scorer's stays in milliseconds. (A window over the oldest jobs would bound it too, but
/// would hide a job that fits behind a window of jobs that do not.) In the experiment only
/// some 4 x 2 runs at 0.2 jobs/s pass 64 waiting (docs/RL.md); a service's queue (a window of
/// 256 by default) can pass it for long.
pub const PLAN_WINDOW: usize = 64;

/// The scorer with search at decision time, as a [`Policy`] (`dqngpu-plan`).
pub struct PlanPolicy {
    base: ScorerPolicy,
    config: PlanConfig,
    /// The rules ([`dqngpu_policy::RIVALS`], by index) under the caller's interference model
    /// and budget, built once: every rule future plays one of them.
    rules: Vec<Option<Box<dyn Policy>>>,
    promise: Mutex<Promise>,
}

impl std::fmt::Debug for PlanPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rules: Vec<&str> = self.rules.iter().flatten().map(|r| r.name()).collect();
        f.debug_struct("PlanPolicy")
            .field("base", &self.base)
            .field("config", &self.config)
            .field("rules", &rules)
            .finish()
    }
}

impl Clone for PlanPolicy {
    /// The same search, with no promise yet (as for a new run).
    fn clone(&self) -> Self {
        PlanPolicy::new(self.base.clone(), self.config)
    }
}

impl PlanPolicy {
    /// Searches over `base` (which carries the caller's budget and interference model: the
    /// futures are played out under them).
    pub fn new(base: ScorerPolicy, config: PlanConfig) -> Self {
        let caller = base.caller();
        let (model, admission) = (Some(Arc::clone(&caller.model)), caller.admission());
        let rules = dqngpu_policy::RIVALS
            .iter()
            .map(|name| dqngpu_policy::by_name_within(name, 1, model.clone(), admission.clone()).ok())
            .collect();
        // Its futures ask the scorer at the same states again and again.
        let base = base.with_memo();
        PlanPolicy { base, config, rules, promise: Mutex::new(Promise::default()) }
    }

    fn caller(&self) -> &Caller {
        self.base.caller()
    }

    /// The rule `RIVALS[i]`, under the caller's interference model and budget.
    fn rule(&self, i: usize) -> Option<&dyn Policy> {
        self.rules.get(i)?.as_deref()
    }

    /// The future of taking `decision` whole at `sim`'s moment, `then` deciding the rest.
    /// Played whole (the rules' runs, whose ends are the guard's references): no floor is
    /// checked on the way.
    fn play(&self, sim: &Simulator, decision: Vec<Placement>, then: Then, row: Option<usize>) -> Option<Future> {
        let decider = Recording::new(self.decider(then)?);
        let end = train::play_out_placed(sim, &decision, true, &decider).ok()?;
        Some(Future::new(decision, then, end, row, decider.into_asks()))
    }

    /// Who decides a future after its first decision.
    fn decider(&self, then: Then) -> Option<&dyn Policy> {
        match then {
            Then::Scorer => Some(&self.base),
            Then::Rule(i) => self.rule(i),
        }
    }

    /// [`PlanPolicy::play`], abandoned (`None`) once its cost under `guard` can no longer come
    /// within [`PRUNE`] of `incumbent`; a future played to the end lowers `incumbent` to its
    /// cost.
    fn play_below(
        &self,
        sim: &Simulator,
        decision: Vec<Placement>,
        then: Then,
        row: Option<usize>,
        guard: Option<&EpochGuard>,
        incumbent: &Incumbent,
    ) -> Option<Future> {
        let keep = |s: &Simulator| {
            let (jct, makespan) = s.cost_floor();
            let floor = jct + guard.map_or(0.0, |g| g.penalty(makespan));
            // A floor that is no number abandons nothing.
            floor.is_nan() || floor <= incumbent.get() * (1.0 + PRUNE)
        };
        let decider = Recording::new(self.decider(then)?);
        let end = train::play_out_placed_while(sim, &decision, true, &decider, keep).ok()??;
        incumbent.lower(cost(guard, &end));
        Some(Future::new(decision, then, end, row, decider.into_asks()))
    }

    /// The decision `then` takes at `sim`'s moment.
    fn decision_of(&self, sim: &Simulator, then: Then) -> Option<Vec<Placement>> {
        Some(self.decider(then)?.decide(&sim.view()))
    }

    /// The whole decision that row placements `now` (`hold`: the row is hold) make at `sim`'s
    /// moment: them, and then what the scorer adds at the same moment.
    fn row_decision(&self, sim: &Simulator, now: Vec<Placement>, hold: bool) -> Vec<Placement> {
        if hold {
            return now;
        }
        let mut s = sim.clone();
        if s.apply(&now).is_err() {
            return now;
        }
        let more = self.base.decide(&s.view());
        now.into_iter().chain(more.into_iter().filter(|p| !p.jobs.is_empty())).collect()
    }

    /// Each rule's future from `sim`'s moment (side by side).
    fn rules_futures(&self, sim: &Simulator) -> Vec<Future> {
        (0..dqngpu_policy::RIVALS.len())
            .into_par_iter()
            .filter_map(|i| self.play(sim, self.decision_of(sim, Then::Rule(i))?, Then::Rule(i), None))
            .collect()
    }
}

impl Policy for PlanPolicy {
    fn name(&self) -> &str {
        "dqngpu-plan"
    }

    /// Under a budget, asked at every tick, as the scorer is ([`Caller::asks_every_tick`]).
    fn wants_every_tick(&self) -> bool {
        self.caller().asks_every_tick()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        if view.queue.len() > PLAN_WINDOW {
            return self.base.decide(view);
        }
        let caller = self.caller();
        // Its futures are played at the cadence it is asked at, so that it can carry them out.
        let config = caller.sim_config().for_policy(self);
        // A waiting job that fits no GPU of the view alone starts in no future from it (every
        // caller drops such a group, and the liveness rule passes it by), so it would end each
        // future in a no-progress error and leave none to weigh: the futures are the other
        // jobs'. (The service's view leaves out the GPUs that exclusive runs hold.)
        let startable: Vec<QueuedJob>;
        let played = if view.queue.iter().all(|q| fits_a_gpu(view, q)) {
            *view
        } else {
            startable = view.queue.iter().filter(|q| fits_a_gpu(view, q)).cloned().collect();
            ClusterView { queue: &startable, ..*view }
        };
        // A view the simulator cannot hold (none in practice) falls back to the scorer alone.
        let Ok(sim) = Simulator::from_view(&played, Arc::clone(&caller.model), config) else {
            return self.base.decide(view);
        };
        // Taken out for the decision and put back after it (a concurrent caller meanwhile finds
        // none, and begins an epoch of its own).
        let mut promise = self.promise.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default();
        if !promise.covers(view) {
            promise = Promise::begin(view);
        }
        promise.now_s = view.now_s;
        let jobs = view_jobs(view).count();
        let weight = self.config.makespan_guard;
        // The future taken at an earlier choice of this decision (a whole decision, with its
        // end), if any.
        let mut taken: Option<Future> = None;
        let mut first = true;
        // Its own rounds read and keep the time-aligned answers its scorer keeps (the same
        // caller): the promise's future, played from an earlier decision, asked most of them.
        let memo = self.base.memo();
        let asked = decide_within_until_with(view, self.base.greedy(), caller, memo, &mut |round, rows, n| {
            let mut scores = Vec::new();
            self.base.mlp().scores(rows, n, &mut scores);
            // What the plan took before comes first, so that it wins ties and is left only for
            // a cheaper future: at the first choice, the promise's decider deciding now (its
            // future read where the cluster is at a moment it passed through, else played
            // again from here); after it, the future taken at the last choice.
            let read = if first { promise.taken.as_ref().and_then(|f| f.read_at(&sim.view())) } else { None };
            let prior = taken.take().map(|t| Future { row: None, ..t }).or(read);
            // The rows tried: the scorer's best, less a row whose idle twin is tried before it
            // (the same score and future: it would lose the tie), and less a row whose whole
            // decision is one already weighed (the same future).
            let mut tried: Vec<(usize, (Vec<Placement>, bool))> = Vec::new();
            for r in train::lookahead_rows(round, &scores, self.config.top_k) {
                if !tried.iter().any(|&(e, _)| round.idle_twins(e, r)) {
                    tried.push((r, round.placements_with(r)));
                }
            }
            // Their whole decisions, and at the first choice the promise's decider's, side by
            // side (each asks its decider on its own copy).
            let promised = if first && prior.is_none() { promise.then } else { None };
            let (promised, decisions) = rayon::join(
                || promised.and_then(|then| Some((self.decision_of(&sim, then)?, then, None))),
                || -> Vec<(usize, Vec<Placement>)> {
                    tried.into_par_iter().map(|(r, (now, hold))| (r, self.row_decision(&sim, now, hold))).collect()
                },
            );
            let mut candidates: Vec<(Vec<Placement>, Then, Option<usize>)> = promised.into_iter().collect();
            for (r, d) in decisions {
                let weighed = |candidates: &[(Vec<Placement>, Then, Option<usize>)], then: Then| {
                    candidates.iter().any(|c| c.0 == d && c.1 == then)
                        || prior.as_ref().is_some_and(|t| t.decision == d && t.then == then)
                };
                // A decision already weighed with the scorer deciding the rest is the future
                // the plan holds (or a row before it): not played again.
                if weighed(&candidates, Then::Scorer) {
                    continue;
                }
                // Played on by the rule that ended first too: the scorer's continuation
                // alone ends late on some apps (docs/RL.md), whichever row is taken.
                if let Some(k) = promise.finisher.filter(|&k| !weighed(&candidates, Then::Rule(k))) {
                    candidates.push((d.clone(), Then::Rule(k), Some(r)));
                }
                candidates.push((d, Then::Scorer, Some(r)));
            }
            // The rules are played once an epoch, at its first choice: their futures are
            // candidates there, so the plan's promise is never worse than the best rule's.
            // (Played before the rows, whose futures are charged by the guard they set.)
            let mut rule_futures = Vec::new();
            if weight > 0.0 && promise.refs.is_none() {
                let rules = self.rules_futures(&sim);
                let best = train::Guard::best_of(rules.iter().map(|f| &f.end), weight);
                promise.refs =
                    Some(Refs { total_jct: best.jct * jobs as f64, makespan: best.makespan, origin_s: view.now_s });
                promise.finisher =
                    rules.iter().min_by(|a, b| a.end.makespan_s.total_cmp(&b.end.makespan_s)).and_then(|f| {
                        match f.then {
                            Then::Rule(k) => Some(k),
                            Then::Scorer => None,
                        }
                    });
                if first {
                    rule_futures = rules;
                }
            }
            first = false;
            // The references are taken only with a weight.
            let guard = promise.refs.map(|r| r.guard(weight, jobs));
            // Side by side; a future that fails (a fault the simulator reports) is not taken,
            // and one that can no longer be the cheapest is abandoned on the way.
            let incumbent = Incumbent::none();
            prior.iter().chain(&rule_futures).for_each(|f| incumbent.lower(cost(guard.as_ref(), &f.end)));
            let mut futures: Vec<Future> = prior.into_iter().collect();
            let played: Vec<Future> = candidates
                .into_par_iter()
                .filter_map(|(d, then, row)| self.play_below(&sim, d, then, row, guard.as_ref(), &incumbent))
                .collect();
            futures.extend(played);
            futures.extend(rule_futures);
            let Some(best) = cheapest_index(futures.iter().map(|f| &f.end), guard.as_ref()) else {
                // No future to weigh: the scorer's own row (nothing was taken before).
                return Some(best_row(&scores));
            };
            let winner = futures.swap_remove(best);
            let row = winner.row;
            taken = Some(winner);
            // A row goes on to the next choice; anything else is a whole decision, taken.
            row
        });
        let decision = match taken {
            Some(mut f) => {
                promise.then = Some(f.then);
                let decision = std::mem::take(&mut f.decision);
                promise.taken = Some(f);
                decision
            }
            // Never asked (each choice had one legal row): the promise's decider decides.
            None => match promise.then.and_then(|then| self.decision_of(&sim, then)) {
                Some(d) => d,
                None => asked,
            },
        };
        if let Ok(mut p) = self.promise.lock() {
            *p = promise;
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dqngpu_model::{ClusterSpec, WorkloadClass};
    use dqngpu_sim::SimConfig;

    /// Futures with these (mean JCT, makespan), rows 0, 1, ... (a real result, reshaped).
    fn futures(ends: &[(f64, f64)]) -> Vec<Future> {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let set = dqngpu_sim::draw(&lib, WorkloadClass::GpuLight, 2, 1, dqngpu_sim::Arrivals::AllAtZero).unwrap();
        let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
        let model = Arc::from(dqngpu_interference::by_name("contention").unwrap());
        let policy = dqngpu_policy::by_name("sjf", 1).unwrap();
        let r = dqngpu_sim::run(policy.as_ref(), &cluster, &lib, &set, model, SimConfig::default()).unwrap();
        ends.iter()
            .enumerate()
            .map(|(k, &(jct, mk))| Future {
                decision: Vec::new(),
                then: Then::Scorer,
                end: SimResult { mean_jct_s: jct, makespan_s: mk, ..r.clone() },
                row: Some(k),
                asks: Arc::default(),
                next_ask: 0,
            })
            .collect()
    }

    /// [`cheapest_index`] over `futures`' ends.
    fn cheapest(futures: &[Future], guard: Option<&EpochGuard>) -> Option<usize> {
        cheapest_index(futures.iter().map(|f| &f.end), guard)
    }

    #[test]
    fn costs_within_a_rounding_are_a_tie_that_the_first_row_wins() {
        let f = futures(&[(100.0, 500.0), (100.0 - 1e-12, 500.0), (99.0, 500.0)]);
        assert_eq!(cheapest(&f[..2], None), Some(0), "a last-bit difference is a tie");
        assert_eq!(cheapest(&f, None), Some(2));
        assert_eq!(cheapest(&[], None), None);
        // The guard charges the later makespan enough to undo a 1 s lead.
        let f = futures(&[(100.0, 500.0), (99.0, 600.0)]);
        let guard = EpochGuard { guard: train::Guard { jct: 100.0, makespan: 500.0, weight: 1.0 }, origin_s: 0.0 };
        assert_eq!(cheapest(&f, None), Some(1));
        assert_eq!(cheapest(&f, Some(&guard)), Some(0));
    }

    #[test]
    fn a_future_is_abandoned_only_when_it_costs_more_than_the_cheapest_played() {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let cluster = ClusterSpec::parse_gpus("titanxp:2").unwrap();
        let model: Arc<dyn dqngpu_interference::Interference> =
            Arc::from(dqngpu_interference::by_name("contention").unwrap());
        let plan = PlanPolicy::new(ScorerPolicy::untrained(&[16], 7).unwrap(), PlanConfig::default());
        let mut abandoned = 0;
        for (k, class) in WorkloadClass::ALL.into_iter().enumerate() {
            let set = dqngpu_sim::draw(&lib, class, 8, 40 + k as u64, dqngpu_sim::Arrivals::AllAtZero).unwrap();
            let sim = Simulator::new(&cluster, &lib, &set, model.clone(), SimConfig::default()).unwrap();
            let guard = EpochGuard { guard: train::Guard { jct: 300.0, makespan: 900.0, weight: 2.0 }, origin_s: 0.0 };
            for guard in [None, Some(&guard)] {
                // Each rule's decision, then the scorer or the rule itself deciding the rest.
                let futures: Vec<(Vec<Placement>, Then)> = (0..dqngpu_policy::RIVALS.len())
                    .filter_map(|i| Some((plan.decision_of(&sim, Then::Rule(i))?, i)))
                    .flat_map(|(d, i)| [(d.clone(), Then::Scorer), (d, Then::Rule(i))])
                    .collect();
                let whole: Vec<Future> =
                    futures.iter().map(|(d, then)| plan.play(&sim, d.clone(), *then, None).unwrap()).collect();
                let least = whole.iter().map(|f| cost(guard, &f.end)).fold(f64::INFINITY, f64::min);
                let incumbent = Incumbent::none();
                incumbent.lower(least);
                for ((d, then), w) in futures.into_iter().zip(&whole) {
                    match plan.play_below(&sim, d, then, None, guard, &incumbent) {
                        Some(f) => assert_eq!(f.end, w.end, "a future played to the end is the future"),
                        None => {
                            abandoned += 1;
                            assert!(cost(guard, &w.end) > least * (1.0 + PRUNE), "{} vs {least}", cost(guard, &w.end));
                        }
                    }
                }
                assert_eq!(incumbent.get(), least, "the cheapest stays the incumbent");
            }
        }
        assert!(abandoned > 0, "no future was dear enough to abandon: the check proves nothing");
    }

    #[test]
    fn a_future_with_an_oom_kill_is_played_again_not_read() {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let cluster = ClusterSpec::parse_gpus("2xtitanxp:2").unwrap();
        let model: Arc<dyn dqngpu_interference::Interference> =
            Arc::from(dqngpu_interference::by_name("contention").unwrap());
        let plan = PlanPolicy::new(ScorerPolicy::untrained(&[16], 3).unwrap(), PlanConfig::default());
        let set = dqngpu_sim::draw(&lib, WorkloadClass::Random, 12, 71, dqngpu_sim::Arrivals::AllAtZero).unwrap();
        let mut real = Simulator::new(&cluster, &lib, &set, model.clone(), SimConfig::default()).unwrap();
        while !real.needs_decision() {
            real.step();
        }
        let at = Simulator::from_view(&real.view(), Arc::clone(&model), SimConfig::default()).unwrap();
        let first = plan.decision_of(&at, Then::Scorer).unwrap();
        let mut future = plan.play(&at, first.clone(), Then::Scorer, None).unwrap();
        // Carried out to its next decision, where it is read ...
        real.apply(&first).unwrap();
        real.step();
        while !real.needs_decision() {
            real.step();
        }
        assert!(future.read_at(&real.view()).is_some(), "the future passed through this moment");
        // ... unless it had an OOM kill (after which a view's simulation may go otherwise).
        future.end.oom_kills = 1;
        assert!(future.read_at(&real.view()).is_none());
    }

    /// Reads against replays, in one setting: from the first decision of each class's job set,
    /// the future of the scorer and of each rule, played on a simulation from the view as the
    /// plan plays it, is carried out on the simulator the view was taken from; at each of its
    /// decisions the future is read, and what it reads must be what playing it again from there
    /// gives, to the bit; a moment it never passed through must not be read. Returns how many
    /// reads were made and a line for each that went otherwise.
    fn reads_against_replays(
        lib_name: &str,
        gpus: &str,
        model_name: &str,
        budget: Option<f64>,
        jobs: usize,
        seed: u64,
    ) -> (usize, Vec<String>) {
        let lib = dqngpu_model::library::resolve(lib_name).unwrap();
        let cluster = ClusterSpec::parse_gpus(gpus).unwrap();
        let model: Arc<dyn dqngpu_interference::Interference> =
            Arc::from(dqngpu_interference::by_name(model_name).unwrap());
        let config = SimConfig { max_slowdown: budget, ..SimConfig::default() };
        let base = ScorerPolicy::untrained(&[16], 3).unwrap().with_caller(Caller::for_config(&config, model.clone()));
        let plan = PlanPolicy::new(base, PlanConfig::default());
        let config = config.for_policy(&plan);
        let from = |s: &Simulator| Simulator::from_view(&s.view(), Arc::clone(&model), config.clone()).unwrap();
        let (mut reads, mut differ) = (0, Vec::new());
        for (k, class) in WorkloadClass::ALL.into_iter().enumerate() {
            let set = dqngpu_sim::draw(&lib, class, jobs, seed + k as u64, dqngpu_sim::Arrivals::AllAtZero).unwrap();
            let mut start = Simulator::new(&cluster, &lib, &set, model.clone(), config.clone()).unwrap();
            while !start.needs_decision() {
                start.step();
            }
            let setting = format!("{lib_name} {gpus} {model_name} {budget:?} {class:?}");
            for then in std::iter::once(Then::Scorer).chain((0..dqngpu_policy::RIVALS.len()).map(Then::Rule)) {
                let at = from(&start);
                let Some(first) = plan.decision_of(&at, then) else { continue };
                let Some(future) = plan.play(&at, first.clone(), then, None) else { continue };
                let mut real = start.clone();
                real.apply(&first).unwrap();
                real.step();
                let mut read = future;
                while !real.done() {
                    if real.needs_decision() {
                        let again = from(&real);
                        let next = read.read_at(&again.view()).expect("the future passed through this moment");
                        let played = plan.play(&again, plan.decision_of(&again, then).unwrap(), then, None).unwrap();
                        let same = next.decision == played.decision
                            && next.end.mean_jct_s.to_bits() == played.end.mean_jct_s.to_bits()
                            && next.end.makespan_s.to_bits() == played.end.makespan_s.to_bits();
                        if !same {
                            differ.push(format!(
                                "{setting} {then:?} at {}: read {:?} {} {}, played {:?} {} {} (oom kills {})",
                                real.now_s(),
                                next.decision,
                                next.end.mean_jct_s,
                                next.end.makespan_s,
                                played.decision,
                                played.end.mean_jct_s,
                                played.end.makespan_s,
                                read.end.oom_kills,
                            ));
                        }
                        real.apply(&next.decision).unwrap();
                        read = next;
                        reads += 1;
                    }
                    real.step();
                }
                if read.read_at(&start.view()).is_some() {
                    differ.push(format!("{setting} {then:?}: read at a moment it never passed through"));
                }
            }
        }
        (reads, differ)
    }

    #[test]
    fn a_future_read_where_it_passed_is_the_future_played_again_from_there() {
        let (reads, differ) = reads_against_replays("thesis", "2xtitanxp:2", "contention", None, 12, 70);
        assert!(differ.is_empty(), "{} of {reads} reads differ:\n{}", differ.len(), differ.join("\n"));
        assert!(reads > 100, "only {reads} reads: the check proves little");
    }

    #[test]
    fn a_future_read_where_it_passed_is_played_again_alike_in_every_setting() {
        // The settings a plan runs in besides the default: other libraries, interference models
        // and a slowdown budget (where the futures may kill jobs out of memory and requeue them).
        let mut reads = 0;
        let mut differ = Vec::new();
        for (lib_name, gpus, model_name, budget) in [
            ("thesis", "titanxp:2", "none", None),
            ("thesis", "titanxp:2", "measured", Some(0.2)),
            ("lucid", "2xrtx3090:2", "contention", None),
            ("generated:7:12", "titanxp:2", "contention-h100", None),
            ("generated:7:12", "titanxp:2", "contention", Some(0.1)),
        ] {
            let (r, d) = reads_against_replays(lib_name, gpus, model_name, budget, 10, 90);
            reads += r;
            differ.extend(d);
        }
        assert!(differ.is_empty(), "{} of {reads} reads differ:\n{}", differ.len(), differ.join("\n"));
        assert!(reads > 100, "only {reads} reads: the check proves little");
    }

    #[test]
    fn a_promise_lasts_while_the_jobs_are_known_and_the_clock_goes_on() {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let profile = |name: &str| lib.apps.get(name).unwrap().clone();
        let queued = |id, app: &str| dqngpu_model::QueuedJob {
            id,
            app: app.into(),
            profile: profile(app),
            submit_s: 0.0,
            restarts: 0,
            avoid_apps: Vec::new(),
        };
        let gpu = |running: Vec<dqngpu_model::RunningJob>| dqngpu_model::GpuState {
            node: "n".into(),
            index: 0,
            spec: dqngpu_model::gpu::lookup("titanxp").unwrap(),
            running,
            measured: None,
        };
        let gpus = [gpu(Vec::new())];
        let queue = [queued(1, "alexnet"), queued(2, "vgg16")];
        let promise = Promise::begin(&ClusterView { now_s: 10.0, gpus: &gpus, queue: &queue });
        // Later, job 1 running and job 2 waiting: the same epoch.
        let started = dqngpu_model::RunningJob { id: 1, profile: profile("alexnet"), progress_s: 3.0, started_s: 10.0 };
        let later = [gpu(vec![started])];
        assert!(promise.covers(&ClusterView { now_s: 14.0, gpus: &later, queue: &queue[1..] }));
        // An arrival, an earlier clock (another run), or a known id with another app: a new one.
        let arrived = [queue[1].clone(), queued(3, "alexnet")];
        assert!(!promise.covers(&ClusterView { now_s: 14.0, gpus: &later, queue: &arrived }));
        assert!(!promise.covers(&ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue }));
        let renamed = [queued(1, "vgg16")];
        assert!(!promise.covers(&ClusterView { now_s: 14.0, gpus: &gpus, queue: &renamed }));
    }
}
