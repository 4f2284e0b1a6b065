//! The trained agents as a [`Policy`]: greedy (most probable action) at every choice.

use std::path::Path;

use dqngpu_model::{ClusterView, Placement, Policy};

use super::encoding::{AgentKind, GpuEncoding};
use super::round::Round;
use crate::checkpoint::{self, Encoding};
use crate::error::RlError;
use crate::net::{argmax, PolicyNet};

/// DqnGPU reads the running jobs' time-varying demands and progress (it may start a job as
/// another nears its end), so it is asked at every tick; DeepRM Max / Mean see constant
/// demands, which change only with events.
pub fn wants_every_tick(agent: AgentKind) -> bool {
    agent == AgentKind::Dqngpu
}

/// A trained DqnGPU / DeepRM Max / DeepRM Mean agent.
#[derive(Debug, Clone)]
pub struct RlPolicy {
    enc: GpuEncoding,
    net: PolicyNet,
}

impl RlPolicy {
    /// An agent from an encoding and a network (shapes must agree).
    pub fn new(enc: GpuEncoding, net: PolicyNet) -> Result<Self, RlError> {
        if net.obs_len() != enc.obs_len() || net.n_actions() != enc.n_actions() {
            return Err(RlError::Config {
                field: "network",
                message: format!(
                    "network takes {} inputs / {} actions, the encoding {} / {}",
                    net.obs_len(),
                    net.n_actions(),
                    enc.obs_len(),
                    enc.n_actions()
                ),
            });
        }
        Ok(RlPolicy { enc, net })
    }

    /// Loads the checkpoint at `path` trained for `agent`.
    pub fn load(path: &Path, agent: AgentKind) -> Result<Self, RlError> {
        let (net, meta) = checkpoint::load(path, agent.name(), None)?;
        match meta.encoding {
            Encoding::Gpu(enc) if enc.agent == agent => RlPolicy::new(enc, net),
            other => Err(RlError::EncodingMismatch {
                path: checkpoint::meta_path(path),
                message: format!(
                    "agent `{}` needs its own checkpoint (`dqngpu train --algorithm thesis --agent {}`); this file holds {}",
                    agent.name(),
                    agent.name(),
                    other.describe()
                ),
            }),
        }
    }

    /// The network.
    pub fn net(&self) -> &PolicyNet {
        &self.net
    }

    /// The encoding.
    pub fn encoding(&self) -> &GpuEncoding {
        &self.enc
    }
}

impl Policy for RlPolicy {
    fn name(&self) -> &str {
        self.enc.agent.name()
    }

    fn wants_every_tick(&self) -> bool {
        wants_every_tick(self.enc.agent)
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut round = Round::new(&self.enc);
        while round.next_choice(&self.enc, view) {
            // A forward pass on well-formed inputs cannot fail; if it ever did, hold.
            let a = self.net.probs(&round.obs, &round.mask, 1).map(|p| argmax(&p)).unwrap_or(0);
            round.take(&self.enc, a);
        }
        round.into_placements()
    }
}
