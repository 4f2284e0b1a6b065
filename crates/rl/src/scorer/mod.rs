//! The generalising DqnGPU agent (issue 10): a candidate scorer with weights shared across
//! waiting jobs and GPUs (as Decima scores nodes), over usage features only
//! ([`features`]), so one model serves any number of waiting jobs, any cluster and apps it
//! never saw. Trained by imitation of the best rule on the training job sets, then policy
//! gradient with a per-job-set baseline over several rollouts, keeping the weights that do
//! best on validation job sets ([`train`]).
//!
//! The thesis's image agent stays in [`crate::gpu`] (`train --algorithm thesis`).

mod costliest_first;
pub mod features;
mod memo;
pub mod plan;
pub mod train;

use std::path::Path;
use std::sync::Arc;

use dqngpu_interference::{Contention, Interference};
use dqngpu_model::{ClusterView, Placement, Policy};
use dqngpu_policy::Greedy;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{self, Encoding};
use crate::error::RlError;
use crate::net::{Head, PolicyNet};

pub use features::{Round, FEATURES};
pub use memo::FitMemo;

/// What the scorer's caller (the simulator, the service) enforces, which the scorer's legal
/// rows follow: its slowdown budget, and the interference model it steps GPUs with. The
/// time-aligned memory fit and the budget's prediction step with that model, so a group the
/// scorer starts neither overflows the card nor is refused by the caller for a model it did
/// not know. The features keep the greedy rule's own model (the one the scorer trained on).
/// The caller's step and decision cadence matter too: the budget's safety margin is half a
/// step, and `dqngpu-plan` plays its futures at the cadence it is asked at.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Slowdown budget, a fraction; `None`: no budget.
    pub max_slowdown: Option<f64>,
    /// The caller's interference model.
    pub model: Arc<dyn Interference>,
    /// The caller's simulation step, s (the service, which does not step, keeps the
    /// simulator's default).
    pub step_s: f64,
    /// The caller's decision tick, s.
    pub decision_tick_s: f64,
    /// What makes the caller's tick ask.
    pub tick_trigger: dqngpu_sim::TickTrigger,
}

impl Caller {
    /// A caller with budget `max_slowdown` and the default contention model.
    pub fn with_budget(max_slowdown: Option<f64>) -> Self {
        Caller { max_slowdown, ..Caller::default() }
    }

    /// A caller that simulates with `config` (its budget, step and cadence) and `model`.
    pub fn for_config(config: &dqngpu_sim::SimConfig, model: Arc<dyn Interference>) -> Self {
        Caller {
            max_slowdown: config.max_slowdown,
            model,
            step_s: config.step_s,
            decision_tick_s: config.decision_tick_s,
            tick_trigger: config.tick_trigger,
        }
    }

    /// The simulator settings this caller steps with (its budget, step and cadence; no
    /// recording).
    pub fn sim_config(&self) -> dqngpu_sim::SimConfig {
        dqngpu_sim::SimConfig {
            max_slowdown: self.max_slowdown,
            step_s: self.step_s,
            decision_tick_s: self.decision_tick_s,
            tick_trigger: self.tick_trigger,
            ..dqngpu_sim::SimConfig::default()
        }
    }

    /// True under a budget: what the budget admits changes as the residents progress (a short
    /// overlap near a resident's end is admitted), so a policy told it is asked at every
    /// tick, as the rules told it are (docs/SIMULATOR.md). Without one, decisions follow
    /// events and remaining peaks.
    pub fn asks_every_tick(&self) -> bool {
        self.max_slowdown.is_some()
    }

    /// The budget as the rules see it (`dqngpu_policy::by_name_within`): what the simulator
    /// and the service would admit, predicted with this caller's model at its step. `None` without a budget.
    pub fn admission(&self) -> Option<Arc<dyn dqngpu_model::Admission>> {
        self.max_slowdown.map(|b| {
            Arc::new(dqngpu_sim::budget::Budget {
                model: Arc::clone(&self.model),
                max_slowdown: b,
                step_s: self.step_s,
            }) as Arc<dyn dqngpu_model::Admission>
        })
    }
}

impl Default for Caller {
    /// No budget, the default contention model (`simulate`'s default).
    fn default() -> Self {
        Caller::for_config(&dqngpu_sim::SimConfig::default(), Arc::new(Contention::default()))
    }
}

/// What a scorer checkpoint records of its inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScorerSpec {
    /// Inputs per candidate row ([`FEATURES`] for this build).
    pub features: usize,
}

impl Default for ScorerSpec {
    fn default() -> Self {
        ScorerSpec { features: FEATURES }
    }
}

/// The network read as plain arrays, for fast forward passes at decision time and in
/// rollouts (candle is used where gradients are needed).
#[derive(Debug, Clone)]
pub struct Mlp {
    /// (weight in x out row-major, bias, in, out) per layer.
    layers: Vec<(Vec<f32>, Vec<f32>, usize, usize)>,
}

impl Mlp {
    /// The weights of `net` (an MLP with one output).
    pub fn from_net(net: &PolicyNet) -> Result<Self, RlError> {
        let t = net.tensors();
        let mut layers = Vec::new();
        for i in 0.. {
            let (Some(w), Some(b)) = (t.get(&format!("l{i}.weight")), t.get(&format!("l{i}.bias"))) else { break };
            let (n_in, n_out) = w.dims2()?;
            layers.push((w.flatten_all()?.to_vec1::<f32>()?, b.to_vec1::<f32>()?, n_in, n_out));
        }
        Ok(Mlp { layers })
    }

    /// The score of each of the `n` rows of `x` (`FEATURES` values each).
    pub fn scores(&self, x: &[f32], n: usize, out: &mut Vec<f32>) {
        match Shipped::of(&self.layers) {
            // The shipped shape, with sizes the compiler knows: the same sums in the same order
            // as the general path, which skips zero inputs (their products, zeros, change no
            // sum but one that is zero, and then only in its sign, which both paths then drop;
            // tests `the_fixed_shape_path_scores_as_the_general_path`,
            // `the_fixed_shape_path_gives_a_zero_score_the_general_paths_sign`). The same `n`
            // rows as the general path: fewer in `x` panics there and here (test
            // `the_fixed_shape_path_scores_as_many_rows_as_the_general_path`).
            Some(net) => {
                out.clear();
                out.extend(x[..n * FEATURES].as_chunks::<FEATURES>().0.iter().map(|row| net.score(row)));
            }
            None => self.scores_any_shape(x, n, out),
        }
    }

    /// [`Mlp::scores`] for any layer sizes.
    pub fn scores_any_shape(&self, x: &[f32], n: usize, out: &mut Vec<f32>) {
        out.clear();
        let Some(width) = self.layers.first().map(|l| l.2) else {
            out.resize(n, 0.0);
            return;
        };
        let (mut h, mut next) = (Vec::new(), Vec::new());
        for r in 0..n {
            h.clear();
            h.extend_from_slice(&x[r * width..(r + 1) * width]);
            for (k, (w, b, n_in, n_out)) in self.layers.iter().enumerate() {
                next.clear();
                next.extend_from_slice(b);
                for (i, &v) in h.iter().enumerate().take(*n_in) {
                    // A zero input adds nothing but a zero's sign; over slices, skipping it is
                    // faster.
                    if v != 0.0 {
                        let row = &w[i * n_out..(i + 1) * n_out];
                        for (o, wv) in next.iter_mut().zip(row) {
                            *o += v * wv;
                        }
                    }
                }
                if k + 1 < self.layers.len() {
                    for o in next.iter_mut() {
                        *o = o.max(0.0);
                    }
                }
                std::mem::swap(&mut h, &mut next);
            }
            // A zero as +0 (see `Shipped::score`).
            out.push(h.first().copied().unwrap_or(0.0) + 0.0);
        }
    }
}

/// The shipped network (`FEATURES` -> 32 -> 16 -> 1) with its weights as arrays of the sizes
/// they have: with every size known and no branch inside, the compiler keeps the sums in
/// vector registers, at half the time per row of the same sums over slices with a branch per
/// zero input (`cargo bench -p dqngpu-rl --bench scorer_net`, docs/BENCHMARKS.md).
struct Shipped<'a> {
    w0: &'a [[f32; 32]; FEATURES],
    b0: &'a [f32; 32],
    w1: &'a [[f32; 16]; 32],
    b1: &'a [f32; 16],
    w2: &'a [[f32; 1]; 16],
    b2: &'a [f32; 1],
}

impl<'a> Shipped<'a> {
    /// `layers` read as the shipped shape; `None` for any other.
    fn of(layers: &'a [(Vec<f32>, Vec<f32>, usize, usize)]) -> Option<Self> {
        fn weights<const I: usize, const O: usize>(w: &[f32]) -> Option<&[[f32; O]; I]> {
            w.as_chunks::<O>().0.try_into().ok()
        }
        fn bias<const O: usize>(b: &[f32]) -> Option<&[f32; O]> {
            b.try_into().ok()
        }
        let [(w0, b0, FEATURES, 32), (w1, b1, 32, 16), (w2, b2, 16, 1)] = layers else { return None };
        Some(Shipped {
            w0: weights(w0)?,
            b0: bias(b0)?,
            w1: weights(w1)?,
            b1: bias(b1)?,
            w2: weights(w2)?,
            b2: bias(b2)?,
        })
    }

    fn score(&self, x: &[f32; FEATURES]) -> f32 {
        let h1 = dense(self.w0, self.b0, x, true);
        let h2 = dense(self.w1, self.b1, &h1, true);
        // A zero score as +0, whatever its sign (the general path's may differ in it alone):
        // rows are ordered by `total_cmp` (`train::lookahead_rows`), which tells -0 from +0.
        dense(self.w2, self.b2, &h2, false)[0] + 0.0
    }
}

/// One layer: the bias, plus each input times its weight row, in input order (as
/// [`Mlp::scores_any_shape`] sums), then ReLU if `relu`.
#[inline]
fn dense<const I: usize, const O: usize>(w: &[[f32; O]; I], b: &[f32; O], h: &[f32; I], relu: bool) -> [f32; O] {
    let mut o = *b;
    // Indexed over arrays (not zipped iterators), which the compiler vectorizes here.
    #[allow(clippy::needless_range_loop)]
    for i in 0..I {
        let v = h[i];
        for j in 0..O {
            o[j] += v * w[i][j];
        }
    }
    if relu {
        for acc in o.iter_mut() {
            *acc = acc.max(0.0);
        }
    }
    o
}

/// Runs one decision round over `view`: `choose(rows, n)` picks a row of the `n` offered
/// (row 0 is hold when [`Round::hold_offered`]); a single offered row is taken without
/// asking. Returns the placements.
pub fn decide_with(
    view: &ClusterView<'_>,
    greedy: &Greedy,
    choose: &mut dyn FnMut(&Round<'_>, &[f32], usize) -> usize,
) -> Vec<Placement> {
    decide_within(view, greedy, &Caller::default(), choose)
}

/// [`decide_with`] offering only rows `caller` admits (its budget, predicted with its model).
pub fn decide_within(
    view: &ClusterView<'_>,
    greedy: &Greedy,
    caller: &Caller,
    choose: &mut dyn FnMut(&Round<'_>, &[f32], usize) -> usize,
) -> Vec<Placement> {
    decide_within_until(view, greedy, caller, &mut |round, rows, n| Some(choose(round, rows, n)))
}

/// Picks a row of the `n` offered, or ends the round (`None`).
pub type ChooseOrEnd<'c> = dyn FnMut(&Round<'_>, &[f32], usize) -> Option<usize> + 'c;

/// [`decide_within`], where `choose` may also end the round early (`None`); the placements
/// chosen until then are returned.
pub fn decide_within_until(
    view: &ClusterView<'_>,
    greedy: &Greedy,
    caller: &Caller,
    choose: &mut ChooseOrEnd<'_>,
) -> Vec<Placement> {
    decide_within_until_with(view, greedy, caller, None, choose)
}

/// [`decide_within_until`], its time-aligned answers read from and kept in `memo` (one of
/// `caller`'s).
pub(crate) fn decide_within_until_with(
    view: &ClusterView<'_>,
    greedy: &Greedy,
    caller: &Caller,
    memo: Option<&FitMemo>,
    choose: &mut ChooseOrEnd<'_>,
) -> Vec<Placement> {
    run_round(Round::for_caller(view, greedy, caller).with_memo(memo), &mut |round, rows, n| choose(round, rows, n))
}

/// The placements `mlp` chooses over `view`: the highest-scoring legal row at each choice
/// (the first on ties), as [`decide_within`] with [`best_row`] chooses them, at less cost
/// ([`Round::for_argmax`]: idle twin GPUs scored once, time-aligned checks only for the rows
/// that would win).
pub fn decide_best(view: &ClusterView<'_>, greedy: &Greedy, caller: &Caller, mlp: &Mlp) -> Vec<Placement> {
    decide_best_with(view, greedy, caller, mlp, None)
}

/// [`decide_best`], its time-aligned answers read from and kept in `memo` (one of `caller`'s).
fn decide_best_with(
    view: &ClusterView<'_>,
    greedy: &Greedy,
    caller: &Caller,
    mlp: &Mlp,
    memo: Option<&FitMemo>,
) -> Vec<Placement> {
    let (mut scores, mut tried) = (Vec::new(), Vec::new());
    run_round(Round::for_caller(view, greedy, caller).for_argmax().with_memo(memo), &mut |round, rows, n| {
        mlp.scores(rows, n, &mut scores);
        tried.clear();
        tried.resize(n, false);
        // The best row not yet found illegal, until one is legal (or none is left).
        loop {
            let best = (0..n).filter(|&r| !tried[r]).reduce(|b, r| if scores[r] > scores[b] { r } else { b })?;
            if round.confirm(best) {
                return Some(best);
            }
            tried[best] = true;
        }
    })
}

/// Picks a row of the `n` offered (`None`: none is legal, the round ends).
type Chooser<'c> = dyn FnMut(&mut Round<'_>, &[f32], usize) -> Option<usize> + 'c;

/// Plays one decision round with `choose`; a single offered row that is legal is taken
/// without asking.
fn run_round(mut round: Round<'_>, choose: &mut Chooser<'_>) -> Vec<Placement> {
    let mut rows = Vec::new();
    loop {
        let n = round.rows(&mut rows);
        if n == 0 {
            break;
        }
        let row = if n == 1 && round.confirm(0) { Some(0) } else { choose(&mut round, &rows, n) };
        match row {
            Some(r) if round.take(r) => {}
            _ => break,
        }
    }
    round.placements()
}

/// The index of the highest score (the first on ties).
pub fn best_row(scores: &[f32]) -> usize {
    let mut best = 0;
    for (i, s) in scores.iter().enumerate() {
        if *s > scores[best] {
            best = i;
        }
    }
    best
}

/// A trained (or untrained) scorer as a [`Policy`]: at each choice, the highest-scoring row.
#[derive(Debug, Clone)]
pub struct ScorerPolicy {
    net: PolicyNet,
    mlp: Mlp,
    greedy: Greedy,
    caller: Caller,
    /// Time-aligned answers kept across decisions, for a search that asks at the same states
    /// again and again (`dqngpu-plan`; [`ScorerPolicy::with_memo`]).
    memo: Option<Arc<FitMemo>>,
}

impl ScorerPolicy {
    /// A policy from a network over [`FEATURES`] inputs with one output.
    pub fn new(net: PolicyNet) -> Result<Self, RlError> {
        if net.obs_len() != FEATURES || net.n_actions() != 1 || net.head() != Head::Joint {
            return Err(RlError::Config {
                field: "network",
                message: format!(
                    "a scorer takes {FEATURES} inputs and gives 1 score; this network takes {} and gives {}",
                    net.obs_len(),
                    net.n_actions()
                ),
            });
        }
        Ok(ScorerPolicy {
            mlp: Mlp::from_net(&net)?,
            net,
            greedy: Greedy::default(),
            caller: Caller::default(),
            memo: None,
        })
    }

    /// The same policy for `caller`: it chooses only among groups the caller's slowdown budget
    /// admits (`simulate --max-slowdown`), memory and budget predicted with the caller's
    /// interference model, instead of proposing groups the caller then refuses.
    pub fn with_caller(self, caller: Caller) -> Self {
        // A memo's answers are its caller's.
        ScorerPolicy { caller, memo: None, ..self }
    }

    /// The same policy keeping its time-aligned answers in a memo of its own, read again
    /// wherever a later decision asks the same question (the same decisions, at less cost
    /// where questions repeat, as in a search's futures).
    pub fn with_memo(self) -> Self {
        ScorerPolicy { memo: Some(Arc::default()), ..self }
    }

    /// A fresh network: `hidden` layers, weights from `seed`.
    pub fn untrained(hidden: &[usize], seed: u64) -> Result<Self, RlError> {
        ScorerPolicy::new(PolicyNet::new(FEATURES, hidden, 1, Head::Joint, seed)?)
    }

    /// Loads a `dqngpu` checkpoint with a scorer encoding.
    pub fn load(path: &Path) -> Result<Self, RlError> {
        let (net, meta) = checkpoint::load(path, "dqngpu", None)?;
        match meta.encoding {
            Encoding::Scorer(spec) if spec.features == FEATURES => ScorerPolicy::new(net),
            other => Err(RlError::EncodingMismatch {
                path: checkpoint::meta_path(path),
                message: format!(
                    "`dqngpu` and `dqngpu-plan` need a scorer with {FEATURES} features (from `dqngpu train -o MODEL`); this file holds {}",
                    other.describe()
                ),
            }),
        }
    }

    /// The network (for saving).
    pub fn net(&self) -> &PolicyNet {
        &self.net
    }

    /// Its memo of time-aligned answers, if it keeps one ([`ScorerPolicy::with_memo`]).
    pub fn memo(&self) -> Option<&FitMemo> {
        self.memo.as_deref()
    }

    /// The plain-array copy of the network.
    pub fn mlp(&self) -> &Mlp {
        &self.mlp
    }

    /// What its caller enforces (budget, interference model).
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The rule its features' predictions come from (`greedy`'s, under the default model).
    pub fn greedy(&self) -> &Greedy {
        &self.greedy
    }
}

impl Policy for ScorerPolicy {
    fn name(&self) -> &str {
        "dqngpu"
    }

    /// Under a budget, asked at every tick ([`Caller::asks_every_tick`]).
    fn wants_every_tick(&self) -> bool {
        self.caller.asks_every_tick()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        decide_best_with(view, &self.greedy, &self.caller, &self.mlp, self.memo.as_deref())
    }
}
