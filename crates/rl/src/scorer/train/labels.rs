//! Recorded choices ([`Step`]) and the episodes that record them: a rule's labels
//! (imitation), look-ahead labels (expert iteration) and sampled choices (policy gradient).

use dqngpu_model::Policy;
use dqngpu_policy::Greedy;
use dqngpu_sim::Simulator;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::episode::{caller_of, config_of, simulate, Episode, ScorerTask};
use super::guard::{cost, secondary};
use super::rollout::{lookahead_rows, play_out};
use crate::error::RlError;
use crate::reinforce::Objective;
use crate::scorer::features::FEATURES;
use crate::scorer::{best_row, decide_within, Mlp};

/// A recorded choice: its rows, and the taken row (policy gradient) or the labelled rows
/// (imitation).
pub(super) struct Step {
    pub(super) rows: Vec<f32>,
    pub(super) n: usize,
    pub(super) chosen: Vec<usize>,
    /// Weight of this step in the imitation loss (1 for a rule's labels; for look-ahead labels,
    /// how much the choice matters).
    pub(super) weight: f32,
}

/// Imitation steps of one episode: `teacher` labels each decision; the teacher drives
/// (`learner` None) or the learner does (DAgger).
pub(super) fn imitation_episode(
    task: &ScorerTask,
    ep: &Episode,
    teacher: &dyn Policy,
    learner: Option<&Mlp>,
    greedy: &Greedy,
) -> Result<Vec<Step>, RlError> {
    let mut steps = Vec::new();
    let mut scores = Vec::new();
    let caller = caller_of(task, ep);
    simulate(task, ep, Objective::Jct, &mut |view| {
        let mut todo: Vec<(dqngpu_model::JobId, usize)> =
            teacher.decide(view).iter().flat_map(|p| p.jobs.iter().map(move |&j| (j, p.gpu))).collect();
        decide_within(view, greedy, &caller, &mut |round, rows, n| {
            let mut labels: Vec<usize> = todo.iter().filter_map(|&(j, g)| round.row_of(j, g)).collect();
            if labels.is_empty() && round.hold_offered() {
                labels.push(0);
            }
            let pick = match learner {
                Some(m) => {
                    m.scores(rows, n, &mut scores);
                    best_row(&scores)
                }
                None => labels.first().copied().unwrap_or(0),
            };
            let followed = labels.contains(&pick);
            if !labels.is_empty() {
                steps.push(Step { rows: rows[..n * FEATURES].to_vec(), n, chosen: labels, weight: 1.0 });
            }
            // The learner placed a job off the teacher's plan: the rest of that plan was made
            // for a cluster without the learner's choice, so the teacher plans again from here.
            // (Hold ends the round: nothing is left to label.)
            if learner.is_some() && !followed && round.pair(pick).is_some() {
                if let Some(fresh) = teacher_after(task, ep, view, &round.placements_with(pick).0, teacher) {
                    todo = fresh;
                    return pick;
                }
            }
            if let Some((i, g)) = round.pair(pick) {
                let id = view.queue[i].id;
                todo.retain(|&(j, gg)| !(j == id && gg == g));
                // The teacher's other placement of this job (on another GPU) is void now.
                todo.retain(|&(j, _)| j != id);
            }
            pick
        })
    })?;
    Ok(steps)
}

/// What `teacher` places, as (job, GPU) pairs, on `view` once `placed` have started (`None`
/// if the simulator cannot take them, which a legal row never is).
fn teacher_after(
    task: &ScorerTask,
    ep: &Episode,
    view: &dqngpu_model::ClusterView<'_>,
    placed: &[dqngpu_model::Placement],
    teacher: &dyn Policy,
) -> Option<Vec<(dqngpu_model::JobId, usize)>> {
    let mut sim = Simulator::from_view(view, task.interference.clone(), config_of(task, ep)).ok()?;
    sim.apply(placed).ok()?;
    let decision = teacher.decide(&sim.view());
    Some(decision.iter().flat_map(|p| p.jobs.iter().map(move |&j| (j, p.gpu))).collect())
}

/// Look-ahead imitation steps of one episode (expert iteration): at each choice, the rows the
/// `prior` scores highest (at most `top_k`, plus hold) are each played out to the end with
/// `base`; the rows with the lowest objective are the labels (within `near_tie` of it, the
/// better other metric decides). `learner` (DAgger) or the best row drives.
///
/// One piece on purpose (about 85 lines): the episode loop, the rollouts of one choice and
/// their labelling share the simulator snapshot and the round, and read best in one place.
#[allow(clippy::too_many_arguments)]
pub(super) fn lookahead_episode(
    task: &ScorerTask,
    ep: &Episode,
    objective: Objective,
    base: &dyn Policy,
    prior: &Mlp,
    learner: Option<&Mlp>,
    greedy: &Greedy,
    top_k: usize,
    near_tie: f64,
) -> Result<Vec<Step>, RlError> {
    let mut steps = Vec::new();
    let mut sim = Simulator::new(&ep.cluster, &ep.library, &ep.set, task.interference.clone(), config_of(task, ep))?;
    let mut failure: Option<RlError> = None;
    let caller = caller_of(task, ep);
    while !sim.done() {
        if sim.needs_decision() {
            let snapshot = sim.clone();
            let view = snapshot.view();
            let mut scores = Vec::new();
            let placements = decide_within(&view, greedy, &caller, &mut |round, rows, n| {
                prior.scores(rows, n, &mut scores);
                let tried = lookahead_rows(round, &scores, top_k);
                let mut costs = Vec::with_capacity(tried.len());
                let mut second = Vec::with_capacity(tried.len());
                for &r in &tried {
                    match play_out(&snapshot, round, r, base) {
                        Ok(res) => {
                            costs.push(cost(objective, ep, &res));
                            second.push(secondary(objective, &res));
                        }
                        Err(e) => {
                            failure.get_or_insert(e);
                            costs.push(f64::INFINITY);
                            second.push(f64::INFINITY);
                        }
                    }
                }
                let min = costs.iter().copied().fold(f64::INFINITY, f64::min);
                // Near-ties on the objective go to the better other metric.
                let near: Vec<usize> =
                    (0..tried.len()).filter(|&k| costs[k] <= min * (1.0 + near_tie) + 1e-9).collect();
                let min2 = near.iter().map(|&k| second[k]).fold(f64::INFINITY, f64::min);
                let labels: Vec<usize> = near
                    .iter()
                    .filter(|&&k| second[k] <= min2 + 1e-6 * min2.abs().max(1.0))
                    .map(|&k| tried[k])
                    .collect();
                // Cost-sensitive: a choice whose alternatives cost 1% more weighs 1; near-ties
                // little (they teach nothing), large gaps at most 5.
                let others = costs.iter().copied().filter(|&c| c > min + 1e-6 * min.abs().max(1.0));
                let mean_other = {
                    let v: Vec<f64> = others.filter(|c| c.is_finite()).collect();
                    if v.is_empty() {
                        min
                    } else {
                        v.iter().sum::<f64>() / v.len() as f64
                    }
                };
                let regret = if min > 0.0 { (mean_other - min) / min } else { 0.0 };
                let weight = (regret * 100.0).clamp(0.05, 5.0) as f32;
                steps.push(Step { rows: rows[..n * FEATURES].to_vec(), n, chosen: labels.clone(), weight });
                match learner {
                    Some(m) => {
                        m.scores(rows, n, &mut scores);
                        best_row(&scores)
                    }
                    None => labels[0],
                }
            });
            if let Some(e) = failure.take() {
                return Err(e);
            }
            sim.apply(&placements)?;
        }
        sim.step();
    }
    Ok(steps)
}

/// One sampled episode of the scorer: its steps (with the taken rows) and its objective.
pub(super) fn sampled_episode(
    task: &ScorerTask,
    ep: &Episode,
    objective: Objective,
    mlp: &Mlp,
    greedy: &Greedy,
    rng: &mut ChaCha8Rng,
) -> Result<(Vec<Step>, f64), RlError> {
    let mut steps = Vec::new();
    let mut scores = Vec::new();
    let caller = caller_of(task, ep);
    let c = simulate(task, ep, objective, &mut |view| {
        decide_within(view, greedy, &caller, &mut |_, rows, n| {
            mlp.scores(rows, n, &mut scores);
            let top = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let w: Vec<f64> = scores.iter().map(|s| ((s - top) as f64).exp()).collect();
            let total: f64 = w.iter().sum();
            let mut u = rng.gen::<f64>() * total;
            let mut pick = n - 1;
            for (i, wi) in w.iter().enumerate() {
                if u < *wi {
                    pick = i;
                    break;
                }
                u -= wi;
            }
            steps.push(Step { rows: rows[..n * FEATURES].to_vec(), n, chosen: vec![pick], weight: 1.0 });
            pick
        })
    })?;
    Ok((steps, c))
}
