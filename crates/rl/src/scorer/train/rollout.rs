//! Playing a choice out to the end on a copy of the simulator: the look-ahead's rollouts
//! (and the planner's).

use dqngpu_model::{Placement, Policy};
use dqngpu_sim::{SimResult, Simulator};

use crate::error::RlError;
use crate::scorer::features::Round;

/// The rows the look-ahead plays out at one choice: the `top_k` (at least one) that `scores`
/// rank highest (the first on ties), plus hold when `round` offers it.
pub fn lookahead_rows(round: &Round<'_>, scores: &[f32], top_k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut rows: Vec<usize> = order.into_iter().take(top_k.max(1)).collect();
    if round.hold_offered() && !rows.contains(&0) {
        rows.push(0);
    }
    rows
}

/// The finished simulation after taking row `row` of `round` at `sim`'s moment (then, unless
/// it is hold, letting `base` place more at the same moment) and following `base` to the end,
/// on a copy of `sim`: the look-ahead's rollout (and `examples/search_oracle.rs`'s).
pub fn play_out(sim: &Simulator, round: &Round<'_>, row: usize, base: &dyn Policy) -> Result<SimResult, RlError> {
    let (now, hold) = round.placements_with(row);
    play_out_placed(sim, &now, hold, base)
}

/// [`play_out`] of a row given as the placements it makes (`now`; `hold`: the row is hold,
/// and `base` places nothing more at this moment).
pub fn play_out_placed(
    sim: &Simulator,
    now: &[Placement],
    hold: bool,
    base: &dyn Policy,
) -> Result<SimResult, RlError> {
    Ok(placed(sim, now, hold, base)?.play_out(base)?)
}

/// [`play_out_placed`], abandoned (`Ok(None)`) as soon as `keep` says no
/// ([`Simulator::play_out_while`]).
pub fn play_out_placed_while(
    sim: &Simulator,
    now: &[Placement],
    hold: bool,
    base: &dyn Policy,
    keep: impl FnMut(&Simulator) -> bool,
) -> Result<Option<SimResult>, RlError> {
    Ok(placed(sim, now, hold, base)?.play_out_while(base, keep)?)
}

/// A copy of `sim` one step after taking `now` (and, unless `hold`, what `base` adds).
fn placed(sim: &Simulator, now: &[Placement], hold: bool, base: &dyn Policy) -> Result<Simulator, RlError> {
    let mut s = sim.clone();
    s.apply(now)?;
    if !hold {
        let more = base.decide(&s.view());
        if more.iter().any(|p| !p.jobs.is_empty()) {
            s.apply(&more)?;
        }
    }
    s.step();
    Ok(s)
}
