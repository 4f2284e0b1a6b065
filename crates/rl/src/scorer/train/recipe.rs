//! The scorer's own training settings ([`ScorerRecipe`]) and what a training did
//! ([`ScorerReport`]).

use serde::{Deserialize, Serialize};

/// The scorer's own training settings (the rest is [`TrainConfig`](crate::reinforce::TrainConfig)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScorerRecipe {
    /// Rules tried as the teacher; the best on the training sets teaches.
    pub experts: Vec<String>,
    /// Passes over the imitation data (minibatches of 256 steps).
    pub imitation_epochs: usize,
    /// DAgger rounds after the first imitation.
    pub dagger_rounds: usize,
    /// Entropy bonus at the first policy-gradient iteration (decays linearly to 0).
    pub entropy: f64,
    /// Validate every this many policy-gradient iterations.
    pub validate_every: usize,
    /// Expert-iteration rounds after imitation: look-ahead labels from playing rows out with
    /// the best policy so far (the rule, or the scorer once it beats the rule on validation).
    pub lookahead_rounds: usize,
    /// Rows played out per choice (the prior's best, plus hold).
    pub lookahead_top_k: usize,
    /// Improvement rounds after policy gradient: look-ahead labels played out with the best
    /// scorer so far (one step of policy improvement over the trained scorer), then policy
    /// gradient again. One by default (docs/RL.md: it keeps a bad draw from ending at the
    /// imitation of the rules).
    #[serde(default)]
    pub improvement_rounds: usize,
    /// Weight of the makespan guard under the JCT objective ([`Guard`](super::Guard); 0: off, JCT alone).
    /// 1 by default; a recipe written before the guard existed reads as 0, which is how it
    /// trained.
    #[serde(default)]
    pub makespan_guard: f64,
    /// Trainings from different initial weights and draws (steps 2-6, on the same sets and
    /// rule runs); the one with the best validation score is kept. Restart 0 is the
    /// training with one restart, so more never end worse on validation.
    #[serde(default = "one")]
    pub restarts: usize,
    /// Near-tie of the improvement rounds' look-ahead labels, a fraction: rows within it of the
    /// cheapest count as tied and the lower other metric decides. `NEAR_TIE` (1%) by
    /// default, as the first look-ahead round; 0 labels only the cheapest rows under the
    /// guarded cost (docs/RL.md, "Ninth session": more pairs 5% better, fewer within both
    /// lines). A recipe written before the field existed reads as 1%, how it trained.
    #[serde(default = "near_tie")]
    pub improvement_near_tie: f64,
}

fn one() -> usize {
    1
}

fn near_tie() -> f64 {
    NEAR_TIE
}

impl Default for ScorerRecipe {
    fn default() -> Self {
        ScorerRecipe {
            experts: ["sjf-bestfit", "greedy", "bestfit", "sjf", "lucid", "tetris"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            imitation_epochs: 40,
            dagger_rounds: 1,
            entropy: 0.01,
            validate_every: 10,
            lookahead_rounds: 1,
            lookahead_top_k: 6,
            improvement_rounds: 1,
            makespan_guard: 1.0,
            restarts: 1,
            improvement_near_tie: NEAR_TIE,
        }
    }
}

/// What training did, for the checkpoint and the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScorerReport {
    /// The teacher.
    pub expert: String,
    /// Each candidate teacher's mean objective on the training sets.
    pub expert_scores: Vec<(String, f64)>,
    /// Validation scores below are the mean over validation sets of the objective divided by
    /// the best rule's on that set (1.0: as good as the best rule everywhere). The best single
    /// rule's score.
    pub expert_validation: f64,
    /// The untrained network's.
    pub untrained_validation: f64,
    /// After imitation.
    pub imitation_validation: f64,
    /// The kept weights'.
    pub final_validation: f64,
    /// Which stage the kept weights come from (`untrained`, `imitation`, `pg <iteration>`).
    pub kept: String,
    /// Imitation steps recorded (teacher plus DAgger).
    pub imitation_steps: usize,
    /// Look-ahead steps recorded, over all rounds.
    pub lookahead_steps: usize,
    /// Validation objective after each look-ahead round.
    pub lookahead_validation: Vec<f64>,
    /// Wall time of each stage, s (`rules`, `imitation`, `lookahead`, `policy gradient`),
    /// every restart's in turn.
    #[serde(default)]
    pub stage_s: Vec<(String, f64)>,
    /// Each restart's kept validation score, in order.
    #[serde(default)]
    pub restart_validation: Vec<f64>,
    /// The restart whose weights were kept (0: the first).
    #[serde(default)]
    pub kept_restart: usize,
}

/// Within this share of the best look-ahead objective, choices count as tied and the other
/// metric decides (mean JCT for makespan, makespan for mean JCT).
pub(super) const NEAR_TIE: f64 = 0.01;
