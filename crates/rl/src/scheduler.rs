//! Scheduler names, parsed once: [`SchedulerName`] is a heuristic of [`dqngpu_policy`] or an RL
//! agent of [`crate::gpu`], read case-insensitively, and resolves to a [`Policy`].

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use dqngpu_model::{ModelError, Policy};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::gpu::{AgentKind, RlPolicy};
use crate::RlError;

/// The name of the scorer with search at decision time.
pub const PLAN: &str = "dqngpu-plan";

/// A scheduler as the CLI, the config files and the service name it: a heuristic (one of
/// [`dqngpu_policy::NAMES`]) or a trained RL agent ([`AgentKind`]). Parsing trims and ignores
/// case, and accepts the aliases the resolvers accept (`best-fit`, `deeprm_max`); it prints
/// the canonical name.
///
/// ```
/// use dqngpu_rl::SchedulerName;
/// let n: SchedulerName = " DQNGPU ".parse().unwrap();
/// assert!(n.is_agent());
/// assert_eq!(n.to_string(), "dqngpu");
/// assert_eq!("SJF".parse::<SchedulerName>().unwrap().to_string(), "sjf");
/// assert!("nope".parse::<SchedulerName>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchedulerName {
    /// A heuristic of [`dqngpu_policy`], by its canonical name.
    Heuristic(&'static str),
    /// An RL agent, loaded from a checkpoint.
    Agent(AgentKind),
    /// The DqnGPU scorer with search at decision time (`dqngpu-plan`,
    /// [`crate::scorer::plan`]), loaded from a scorer checkpoint.
    Plan,
}

impl SchedulerName {
    /// Every scheduler: the heuristics, then the RL agents.
    pub fn all() -> Vec<SchedulerName> {
        let heuristics = dqngpu_policy::NAMES.iter().map(|&n| SchedulerName::Heuristic(n));
        heuristics.chain(AgentKind::ALL.iter().map(|&a| SchedulerName::Agent(a))).chain([SchedulerName::Plan]).collect()
    }

    /// The heuristics only.
    pub fn heuristics() -> Vec<SchedulerName> {
        dqngpu_policy::NAMES.iter().map(|&n| SchedulerName::Heuristic(n)).collect()
    }

    /// Every valid name, canonical spelling, as error messages list them.
    pub fn valid_names() -> Vec<String> {
        Self::all().iter().map(ToString::to_string).collect()
    }

    /// The canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulerName::Heuristic(n) => n,
            SchedulerName::Agent(a) => a.name(),
            SchedulerName::Plan => PLAN,
        }
    }

    /// True for an RL agent (it needs a trained model).
    pub fn is_agent(self) -> bool {
        matches!(self, SchedulerName::Agent(_) | SchedulerName::Plan)
    }

    /// The agent whose model it loads, for an RL scheduler (`dqngpu-plan` loads `dqngpu`'s).
    pub fn agent(self) -> Option<AgentKind> {
        match self {
            SchedulerName::Agent(a) => Some(a),
            SchedulerName::Plan => Some(AgentKind::Dqngpu),
            SchedulerName::Heuristic(_) => None,
        }
    }

    /// The policy: an agent loaded from `model` (required), or the heuristic (`seed` drives
    /// `random`; a `model` given to a heuristic is an error, not ignored).
    pub fn resolve(self, model: Option<&Path>, seed: u64) -> Result<Box<dyn Policy>, RlError> {
        self.resolve_within(model, seed, &crate::scorer::Caller::default())
    }

    /// [`SchedulerName::resolve`] for a caller that applies a slowdown budget and steps GPUs
    /// with an interference model (`caller`): the DqnGPU scorer then chooses only among groups
    /// the budget admits and whose memory fits under that model, and so do the packing rules
    /// (each among its own candidates, [`dqngpu_policy::by_name_within`]); `greedy` predicts
    /// with the caller's model.
    pub fn resolve_within(
        self,
        model: Option<&Path>,
        seed: u64,
        caller: &crate::scorer::Caller,
    ) -> Result<Box<dyn Policy>, RlError> {
        self.resolve_planned(model, seed, caller, None)
    }

    /// [`SchedulerName::resolve_within`] with `dqngpu-plan`'s search settings (`plan`; `None`:
    /// its defaults). Settings given to any other scheduler are an error, not ignored.
    pub fn resolve_planned(
        self,
        model: Option<&Path>,
        seed: u64,
        caller: &crate::scorer::Caller,
        plan: Option<crate::scorer::plan::PlanConfig>,
    ) -> Result<Box<dyn Policy>, RlError> {
        if plan.is_some() && self != SchedulerName::Plan {
            return Err(RlError::Config {
                field: "--plan-rows / --plan-guard",
                message: format!("they set {PLAN}'s search; the scheduler is {self}"),
            });
        }
        match self {
            SchedulerName::Agent(agent) => {
                let path = model.ok_or_else(|| RlError::ModelRequired { agent: agent.name().into() })?;
                load_agent(path, agent, caller)
            }
            SchedulerName::Plan => {
                let path = model.ok_or_else(|| RlError::ModelRequired { agent: PLAN.into() })?;
                let base = crate::scorer::ScorerPolicy::load(path)?.with_caller(caller.clone());
                Ok(Box::new(crate::scorer::plan::PlanPolicy::new(base, plan.unwrap_or_default())))
            }
            SchedulerName::Heuristic(name) => {
                if let Some(m) = model {
                    return Err(RlError::ModelForHeuristic { scheduler: name.into(), model: m.to_path_buf() });
                }
                Ok(dqngpu_policy::by_name_within(name, seed, Some(caller.model.clone()), caller.admission())?)
            }
        }
    }
}

/// Loads a trained agent: a `dqngpu` checkpoint holds either the scorer (the default) or the
/// thesis's image agent (`train --algorithm thesis`); the file's metadata says which. A scorer
/// chooses within what `caller` admits (its budget, under its interference model).
pub fn load_agent(path: &Path, agent: AgentKind, caller: &crate::scorer::Caller) -> Result<Box<dyn Policy>, RlError> {
    if agent == AgentKind::Dqngpu {
        if let Ok(meta) = crate::checkpoint::read_meta(path) {
            if matches!(meta.encoding, crate::checkpoint::Encoding::Scorer(_)) {
                return Ok(Box::new(crate::scorer::ScorerPolicy::load(path)?.with_caller(caller.clone())));
            }
        }
    }
    Ok(Box::new(RlPolicy::load(path, agent)?))
}

impl FromStr for SchedulerName {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, ModelError> {
        let key = s.trim().to_ascii_lowercase();
        if let Some(&n) = dqngpu_policy::NAMES.iter().find(|&&n| n == key) {
            return Ok(SchedulerName::Heuristic(n));
        }
        if let Some(a) = AgentKind::from_name(&key) {
            return Ok(SchedulerName::Agent(a));
        }
        if key == PLAN || key == "dqngpu_plan" {
            return Ok(SchedulerName::Plan);
        }
        // An alias the heuristics' resolver knows (`best-fit`): its canonical name.
        if let Ok(p) = dqngpu_policy::by_name(&key, 0) {
            if let Some(&n) = dqngpu_policy::NAMES.iter().find(|&&n| n == p.name()) {
                return Ok(SchedulerName::Heuristic(n));
            }
        }
        Err(ModelError::UnknownName { what: "scheduler", name: s.to_string(), valid: Self::valid_names() })
    }
}

impl fmt::Display for SchedulerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SchedulerName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SchedulerName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_in_any_case() {
        for n in SchedulerName::all() {
            for spelling in [n.to_string(), n.to_string().to_uppercase(), format!("  {n} ")] {
                assert_eq!(spelling.parse::<SchedulerName>().ok(), Some(n), "{spelling}");
            }
        }
    }

    #[test]
    fn aliases_resolve_to_canonical_names() {
        assert_eq!("Best-Fit".parse::<SchedulerName>().ok().map(|n| n.to_string()).as_deref(), Some("bestfit"));
        assert_eq!("DEEPRM_MAX".parse::<SchedulerName>().ok().map(|n| n.to_string()).as_deref(), Some("deeprm-max"));
    }

    #[test]
    fn unknown_names_list_every_valid_one() {
        let e = "magic".parse::<SchedulerName>().err().map(|e| (e.is_usage(), e.to_string()));
        let (usage, msg) = e.unwrap_or_default();
        assert!(usage, "{msg}");
        for n in SchedulerName::all() {
            assert!(msg.contains(n.as_str()), "{msg}");
        }
    }

    #[test]
    fn a_model_for_a_heuristic_is_refused() {
        let e = SchedulerName::Heuristic("sjf").resolve(Some(Path::new("m.json")), 0).err().map(|e| e.to_string());
        assert!(e.unwrap_or_default().contains("heuristic"));
    }
}
