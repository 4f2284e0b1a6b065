//! The policy network: a small MLP in candle mapping an observation to action logits, with
//! masked softmax, and the RMSProp / Adam optimisers the trainer uses.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var, D};
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::RlError;

/// Logit added to disallowed actions so their probability is exactly zero after softmax.
const MASKED_LOGIT: f32 = -1.0e9;

/// How the network maps an observation to action logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Head {
    /// DeepRM: the whole observation in, one logit per action out.
    #[default]
    Joint,
    /// The observation is `n_actions` equal blocks, one per action; the same MLP scores each
    /// block (one logit), so many actions share one set of weights (DqnGPU's 2^M actions).
    PerAction,
}

/// An MLP policy: `obs -> [Linear -> ReLU]* -> Linear -> logits`.
#[derive(Debug, Clone)]
pub struct PolicyNet {
    /// Weight (in x out) and bias (out) of each layer, in order.
    layers: Vec<(Var, Var)>,
    obs_len: usize,
    n_actions: usize,
    head: Head,
}

/// Layer sizes, input first.
fn layer_sizes(obs_len: usize, hidden: &[usize], n_actions: usize, head: Head) -> Vec<usize> {
    let (input, output) = match head {
        Head::Joint => (obs_len, n_actions),
        Head::PerAction => (obs_len / n_actions.max(1), 1),
    };
    let mut sizes = vec![input];
    sizes.extend_from_slice(hidden);
    sizes.push(output);
    sizes
}

impl PolicyNet {
    /// A fresh network, weights drawn from `seed` (Glorot-uniform, zero biases).
    pub fn new(obs_len: usize, hidden: &[usize], n_actions: usize, head: Head, seed: u64) -> Result<Self, RlError> {
        if obs_len == 0 || n_actions == 0 || hidden.contains(&0) {
            return Err(RlError::Config { field: "network", message: "layer sizes must be positive".into() });
        }
        if head == Head::PerAction && !obs_len.is_multiple_of(n_actions) {
            return Err(RlError::Config {
                field: "network",
                message: "observation is not one block per action".into(),
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let sizes = layer_sizes(obs_len, hidden, n_actions, head);
        let mut layers = Vec::new();
        for w in sizes.windows(2) {
            let (fan_in, fan_out) = (w[0], w[1]);
            let limit = (6.0 / (fan_in + fan_out) as f32).sqrt();
            let data: Vec<f32> = (0..fan_in * fan_out).map(|_| rng.gen_range(-limit..limit)).collect();
            let weight = Var::from_tensor(&Tensor::from_vec(data, (fan_in, fan_out), &Device::Cpu)?)?;
            let bias = Var::zeros(fan_out, DType::F32, &Device::Cpu)?;
            layers.push((weight, bias));
        }
        Ok(PolicyNet { layers, obs_len, n_actions, head })
    }

    /// How logits are produced.
    pub fn head(&self) -> Head {
        self.head
    }

    /// Observation length.
    pub fn obs_len(&self) -> usize {
        self.obs_len
    }

    /// Number of actions.
    pub fn n_actions(&self) -> usize {
        self.n_actions
    }

    /// Hidden layer sizes.
    pub fn hidden(&self) -> Vec<usize> {
        self.layers[..self.layers.len() - 1].iter().map(|(w, _)| w.dims()[1]).collect()
    }

    /// The trainable variables.
    pub fn vars(&self) -> Vec<Var> {
        self.layers.iter().flat_map(|(w, b)| [w.clone(), b.clone()]).collect()
    }

    /// Logits for a batch `(rows, obs_len)`.
    pub fn logits(&self, x: &Tensor) -> Result<Tensor, RlError> {
        let rows = x.dims()[0];
        let mut h = match self.head {
            Head::Joint => x.clone(),
            Head::PerAction => x.reshape((rows * self.n_actions, self.obs_len / self.n_actions))?,
        };
        let last = self.layers.len() - 1;
        for (i, (w, b)) in self.layers.iter().enumerate() {
            h = h.matmul(w.as_tensor())?.broadcast_add(b.as_tensor())?;
            if i < last {
                h = h.relu()?;
            }
        }
        Ok(match self.head {
            Head::Joint => h,
            Head::PerAction => h.reshape((rows, self.n_actions))?,
        })
    }

    /// Action probabilities for `rows` observations laid out row-major in `obs`, with
    /// disallowed actions (`mask` false) at exactly zero. Returns `rows * n_actions` values.
    pub fn probs(&self, obs: &[f32], mask: &[bool], rows: usize) -> Result<Vec<f32>, RlError> {
        let x = Tensor::from_slice(obs, (rows, self.obs_len), &Device::Cpu)?;
        let logits: Vec<f32> = self.logits(&x)?.flatten_all()?.to_vec1()?;
        Ok(masked_softmax(&logits, mask, self.n_actions))
    }

    /// Mean over rows of `-log pi(a|s) * advantage`, the REINFORCE loss, for a batch.
    pub fn pg_loss(&self, obs: Vec<f32>, mask: &[bool], actions: &[u32], adv: &[f32]) -> Result<Tensor, RlError> {
        let rows = actions.len();
        let x = Tensor::from_vec(obs, (rows, self.obs_len), &Device::Cpu)?;
        let bias: Vec<f32> = mask.iter().map(|&m| if m { 0.0 } else { MASKED_LOGIT }).collect();
        let bias = Tensor::from_vec(bias, (rows, self.n_actions), &Device::Cpu)?;
        let logp = candle_nn::ops::log_softmax(&(self.logits(&x)? + bias)?, D::Minus1)?;
        let a = Tensor::from_slice(actions, (rows, 1), &Device::Cpu)?;
        let chosen = logp.gather(&a, 1)?.squeeze(1)?;
        let adv = Tensor::from_slice(adv, rows, &Device::Cpu)?;
        Ok((chosen.mul(&adv)?.sum_all()? * (-1.0 / rows as f64))?)
    }

    /// The weights by name (`l0.weight`, `l0.bias`, ...), for safetensors.
    pub fn tensors(&self) -> HashMap<String, Tensor> {
        let mut m = HashMap::new();
        for (i, (w, b)) in self.layers.iter().enumerate() {
            m.insert(format!("l{i}.weight"), w.as_tensor().clone());
            m.insert(format!("l{i}.bias"), b.as_tensor().clone());
        }
        m
    }

    /// Writes the weights as safetensors.
    pub fn save(&self, path: &Path) -> Result<(), RlError> {
        candle_core::safetensors::save(&self.tensors(), path)?;
        Ok(())
    }

    /// Reads weights written by [`PolicyNet::save`], checking every layer's shape against the
    /// expected sizes.
    pub fn load(path: &Path, obs_len: usize, hidden: &[usize], n_actions: usize, head: Head) -> Result<Self, RlError> {
        let mut map = candle_core::safetensors::load(path, &Device::Cpu).map_err(|e| RlError::BadCheckpoint {
            path: path.to_path_buf(),
            message: format!("cannot read weights: {e}"),
        })?;
        let sizes = layer_sizes(obs_len, hidden, n_actions, head);
        let mut layers = Vec::new();
        for (i, w) in sizes.windows(2).enumerate() {
            let mut take = |name: String, shape: &[usize]| -> Result<Var, RlError> {
                let t = map.remove(&name).ok_or_else(|| RlError::EncodingMismatch {
                    path: path.to_path_buf(),
                    message: format!("tensor `{name}` is missing"),
                })?;
                if t.dims() != shape {
                    return Err(RlError::EncodingMismatch {
                        path: path.to_path_buf(),
                        message: format!("tensor `{name}` has shape {:?}, the encoding needs {shape:?}", t.dims()),
                    });
                }
                Ok(Var::from_tensor(&t.to_dtype(DType::F32)?)?)
            };
            let weight = take(format!("l{i}.weight"), &[w[0], w[1]])?;
            let bias = take(format!("l{i}.bias"), &[w[1]])?;
            layers.push((weight, bias));
        }
        if let Some(extra) = map.keys().next() {
            return Err(RlError::EncodingMismatch {
                path: path.to_path_buf(),
                message: format!("unexpected tensor `{extra}` (more layers than the metadata says)"),
            });
        }
        Ok(PolicyNet { layers, obs_len, n_actions, head })
    }
}

/// Softmax of each row of `logits` over the allowed actions; disallowed ones get 0.
pub fn masked_softmax(logits: &[f32], mask: &[bool], n_actions: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; logits.len()];
    for ((l, m), o) in logits.chunks(n_actions).zip(mask.chunks(n_actions)).zip(out.chunks_mut(n_actions)) {
        let max = l.iter().zip(m).filter(|(_, &ok)| ok).map(|(&v, _)| v).fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for i in 0..n_actions {
            if m[i] {
                o[i] = (l[i] - max).exp();
                sum += o[i];
            }
        }
        if sum > 0.0 {
            o.iter_mut().for_each(|v| *v /= sum);
        }
    }
    out
}

/// Index of the most probable allowed action (the first on ties).
pub fn argmax(probs: &[f32]) -> usize {
    let mut best = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p > probs[best] {
            best = i;
        }
    }
    best
}

/// Draws an action from `probs` (which sum to 1 over the allowed actions).
pub fn sample(probs: &[f32], rng: &mut impl Rng) -> usize {
    let u: f32 = rng.gen();
    let mut acc = 0.0;
    let mut last = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            acc += p;
            last = i;
            if u < acc {
                return i;
            }
        }
    }
    last
}

/// Which optimiser updates the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// RMSProp (DeepRM: rho 0.9, eps 1e-9).
    #[default]
    Rmsprop,
    /// Adam (no weight decay).
    Adam,
}

/// An optimiser over the network's variables: RMSProp or Adam, each keeping its running
/// moments per variable (candle-nn has no RMSProp, and its Adam takes a `GradStore` that
/// cannot be built from summed per-job-set gradients).
pub struct Opt {
    kind: OptimizerKind,
    vars: Vec<Var>,
    /// Running mean of gradients (Adam only).
    first: Vec<Tensor>,
    /// Running mean of squared gradients.
    second: Vec<Tensor>,
    lr: f64,
    t: i32,
}

impl Opt {
    /// An optimiser of `kind` for `vars`.
    pub fn new(kind: OptimizerKind, vars: Vec<Var>, lr: f64) -> Result<Self, RlError> {
        let zeros = vars.iter().map(|v| v.as_tensor().zeros_like()).collect::<Result<Vec<_>, _>>()?;
        Ok(Opt { kind, first: zeros.clone(), second: zeros, vars, lr, t: 0 })
    }

    /// Applies one update with `grads` (one per variable, in [`PolicyNet::vars`] order).
    pub fn step(&mut self, grads: &[Tensor]) -> Result<(), RlError> {
        self.t += 1;
        for (i, (v, g)) in self.vars.iter().zip(grads).enumerate() {
            let update = match self.kind {
                OptimizerKind::Rmsprop => {
                    // DeepRM's Lasagne RMSProp: rho 0.9, eps 1e-9.
                    self.second[i] = ((&self.second[i] * 0.9)? + (g.sqr()? * 0.1)?)?;
                    (g / (self.second[i].sqrt()? + 1e-9)?)?
                }
                OptimizerKind::Adam => {
                    let (b1, b2) = (0.9f64, 0.999f64);
                    self.first[i] = ((&self.first[i] * b1)? + (g * (1.0 - b1))?)?;
                    self.second[i] = ((&self.second[i] * b2)? + (g.sqr()? * (1.0 - b2))?)?;
                    let m_hat = (&self.first[i] * (1.0 / (1.0 - b1.powi(self.t))))?;
                    let v_hat = (&self.second[i] * (1.0 / (1.0 - b2.powi(self.t))))?;
                    (m_hat / (v_hat.sqrt()? + 1e-8)?)?
                }
            };
            v.set(&(v.as_tensor().detach() - (update * self.lr)?)?)?;
            self.first[i] = self.first[i].detach();
            self.second[i] = self.second[i].detach();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_softmax_zeroes_disallowed_actions() {
        let p = masked_softmax(&[1.0, 5.0, 1.0], &[true, false, true], 3);
        assert_eq!(p[1], 0.0);
        assert!((p[0] - 0.5).abs() < 1e-6 && (p[2] - 0.5).abs() < 1e-6);
        assert_eq!(argmax(&[0.1, 0.7, 0.2]), 1);
    }
}
