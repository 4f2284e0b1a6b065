//! Which actions are legal: the rules a group of waiting jobs must pass to start together on a
//! GPU, apart from the slowdown guard (see `guard.rs`).

use super::encoding::{AgentKind, Candidate, GpuEncoding, GpuRound};

/// How a group would use the GPU over the image's rows, beside what already runs.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Usage {
    /// Rows where each resource would be over capacity.
    pub over: [usize; 4],
    /// Each resource's demand summed over the rows.
    pub area: [f64; 4],
}

/// True when `members` may start together: none was killed out of memory beside an app in
/// the group or on the GPU, and the group fits the GPU. Fitting: memory at every row (an
/// overflow is an OOM kill; with the slowdown guard, second by second as the guard predicts
/// it instead); for the thesis's agent the compute resources over the horizon as a whole (the
/// thesis's capacity condition, sum_j r_jk T_j <= R_k T: overcommitting them only slows jobs
/// down, which the agent learns to weigh); DeepRM Max / Mean keep DeepRM's rule, every
/// resource at every row.
pub(super) fn allowed(
    enc: &GpuEncoding,
    round: &GpuRound,
    members: &[&Candidate],
    usage: &Usage,
    cap: &[f64; 4],
) -> bool {
    !conflict(round, members) && fits(enc, usage, cap)
}

/// A member was killed out of memory beside an app that is on the GPU or in the group.
fn conflict(round: &GpuRound, members: &[&Candidate]) -> bool {
    members.iter().any(|c| {
        c.avoid.iter().any(|app| round.residents.iter().any(|r| &r.app == app) || members.iter().any(|o| &o.app == app))
    })
}

/// The capacity rule of `enc`'s agent.
fn fits(enc: &GpuEncoding, usage: &Usage, cap: &[f64; 4]) -> bool {
    let t = enc.time_horizon as f64;
    match enc.agent {
        AgentKind::Dqngpu => {
            // With the guard, memory is checked second by second, drift included; the rows'
            // maxima would also forbid short overlaps the guard proves safe (a job's loading
            // phase beside another's last seconds).
            (enc.guard.is_some() || usage.over[1] == 0)
                && (0..4).filter(|&k| k != 1).all(|k| usage.area[k] <= cap[k] * t + 1e-9)
        }
        _ => usage.over.iter().all(|&o| o == 0),
    }
}
