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

    /// Logits from the first layer's pre-activation (`rows` observations).
    fn logits_from_z0(&self, z0: &Tensor, rows: usize) -> Result<Tensor, RlError> {
        let mut h = z0.broadcast_add(self.layers[0].1.as_tensor())?;
        // ReLU after every layer but the last, as in `logits`.
        for (w, b) in &self.layers[1..] {
            h = h.relu()?.matmul(w.as_tensor())?.broadcast_add(b.as_tensor())?;
        }
        Ok(match self.head {
            Head::Joint => h,
            Head::PerAction => h.reshape((rows, self.n_actions))?,
        })
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

    /// The gradient of [`PolicyNet::pg_loss`] over `rows = actions.len()` decisions, with
    /// the sum divided by `denom` (all the steps, also those left out because they had one
    /// allowed action and so contribute zero). One tensor per variable, in [`PolicyNet::vars`]
    /// order.
    ///
    /// The first layer's weight gradient `x^T dz` is computed here, not by autograd: candle's
    /// matmul backward would also build the gradient of the input `x` (rows x obs_len, tens
    /// of MB for DeepRM's images) although `x` is data, tripling the work and the allocations.
    pub fn pg_gradients(
        &self,
        obs: Vec<f32>,
        mask: &[bool],
        actions: &[u32],
        adv: &[f32],
        denom: usize,
    ) -> Result<Vec<Tensor>, RlError> {
        let rows = actions.len();
        if rows == 0 {
            return self.vars().iter().map(|v| Ok(v.as_tensor().zeros_like()?)).collect();
        }
        let x = Tensor::from_vec(obs, (rows, self.obs_len), &Device::Cpu)?;
        let x = match self.head {
            Head::Joint => x,
            Head::PerAction => x.reshape((rows * self.n_actions, self.obs_len / self.n_actions))?,
        };
        let (w0, b0) = &self.layers[0];
        // The first layer's pre-activation as a leaf: autograd stops here.
        let z0 = x.matmul(&w0.as_tensor().detach())?;
        let z0 = Var::from_tensor(&z0)?;
        let logits = self.logits_from_z0(z0.as_tensor(), rows)?;
        let bias: Vec<f32> = mask.iter().map(|&m| if m { 0.0 } else { MASKED_LOGIT }).collect();
        let bias = Tensor::from_vec(bias, (rows, self.n_actions), &Device::Cpu)?;
        let logp = candle_nn::ops::log_softmax(&(logits + bias)?, D::Minus1)?;
        let a = Tensor::from_slice(actions, (rows, 1), &Device::Cpu)?;
        let chosen = logp.gather(&a, 1)?.squeeze(1)?;
        let adv = Tensor::from_slice(adv, rows, &Device::Cpu)?;
        let loss = (chosen.mul(&adv)?.sum_all()? * (-1.0 / denom.max(rows) as f64))?;
        let store = loss.backward()?;
        let grad = |t: &Tensor| -> Result<Tensor, RlError> {
            Ok(match store.get(t) {
                Some(g) => g.detach(),
                None => t.zeros_like()?,
            })
        };
        let dz0 = grad(z0.as_tensor())?;
        let mut out = vec![x.t()?.matmul(&dz0)?, grad(b0.as_tensor())?];
        for (w, b) in &self.layers[1..] {
            out.push(grad(w.as_tensor())?);
            out.push(grad(b.as_tensor())?);
        }
        Ok(out)
    }

    /// A copy of the network with its own weights (the optimiser will not move them).
    pub fn snapshot(&self) -> Result<PolicyNet, RlError> {
        let copy = |v: &Var| -> Result<Var, RlError> { Ok(Var::from_tensor(&v.as_tensor().copy()?)?) };
        let layers = self.layers.iter().map(|(w, b)| Ok((copy(w)?, copy(b)?))).collect::<Result<_, RlError>>()?;
        Ok(PolicyNet { layers, obs_len: self.obs_len, n_actions: self.n_actions, head: self.head })
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

    /// The name of the first tensor holding a NaN or an infinity, if any (a checkpoint's
    /// weights are checked on load).
    pub fn first_non_finite(&self) -> Result<Option<String>, RlError> {
        let mut tensors: Vec<_> = self.tensors().into_iter().collect();
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, t) in tensors {
            let values = t.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            if values.iter().any(|v| !v.is_finite()) {
                return Ok(Some(name));
            }
        }
        Ok(None)
    }

    /// Writes the weights as safetensors.
    pub fn save(&self, path: &Path) -> Result<(), RlError> {
        candle_core::safetensors::save(&self.tensors(), path)?;
        Ok(())
    }

    /// Reads weights written by [`PolicyNet::save`] from the file's bytes (`path` names them in
    /// errors), checking every layer's shape against the expected sizes.
    pub fn from_bytes(
        bytes: &[u8],
        path: &Path,
        obs_len: usize,
        hidden: &[usize],
        n_actions: usize,
        head: Head,
    ) -> Result<Self, RlError> {
        let mut map = candle_core::safetensors::load_buffer(bytes, &Device::Cpu).map_err(|e| {
            RlError::BadCheckpoint { path: path.to_path_buf(), message: format!("cannot read weights: {e}") }
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
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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

    /// Changes the learning rate for the following steps (a schedule); the moments stay.
    pub fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
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

    fn autograd(net: &PolicyNet, obs: &[f32], mask: &[bool], actions: &[u32], adv: &[f32]) -> Vec<Vec<f32>> {
        let store = net.pg_loss(obs.to_vec(), mask, actions, adv).unwrap().backward().unwrap();
        net.vars().iter().map(|v| store.get(v.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap()).collect()
    }

    fn flat(ts: &[Tensor]) -> Vec<Vec<f32>> {
        ts.iter().map(|t| t.flatten_all().unwrap().to_vec1().unwrap()).collect()
    }

    fn close(a: &[Vec<f32>], b: &[Vec<f32>]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert_eq!(x.len(), y.len());
            for (u, v) in x.iter().zip(y) {
                assert!((u - v).abs() <= 1e-5 * (1.0 + u.abs()), "{u} vs {v}");
            }
        }
    }

    #[test]
    fn hand_made_first_layer_gradient_matches_autograd() {
        for (head, obs_len) in [(Head::Joint, 6), (Head::PerAction, 9)] {
            let net = PolicyNet::new(obs_len, &[4, 3], 3, head, 5).unwrap();
            let rows = 4;
            let obs: Vec<f32> = (0..rows * obs_len).map(|i| ((i * 7) % 5) as f32 / 4.0 - 0.3).collect();
            let mask = [true, true, false, true, false, true, true, true, true, false, true, true];
            let (actions, adv) = ([1u32, 2, 0, 2], [0.5f32, -1.0, 2.0, 0.25]);
            let mine = net.pg_gradients(obs.clone(), &mask, &actions, &adv, rows).unwrap();
            let want = autograd(&net, &obs, &mask, &actions, &adv);
            assert!(want[0].iter().any(|&g| g != 0.0), "a zero gradient would test nothing");
            close(&flat(&mine), &want);
        }
    }

    #[test]
    fn leaving_out_single_action_rows_keeps_the_gradient() {
        let net = PolicyNet::new(4, &[5], 3, Head::Joint, 9).unwrap();
        let obs: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        // Row 1 allows only action 2: log pi = 0 there.
        let mask = [true, true, true, false, false, true, true, false, true];
        let want = autograd(&net, &obs, &mask, &[0, 2, 2], &[1.0, 3.0, -0.5]);
        let kept_obs: Vec<f32> = obs[..4].iter().chain(&obs[8..]).copied().collect();
        let kept_mask = [true, true, true, true, false, true];
        let mine = net.pg_gradients(kept_obs, &kept_mask, &[0, 2], &[1.0, -0.5], 3).unwrap();
        close(&flat(&mine), &want);
    }

    #[test]
    fn snapshot_does_not_follow_the_optimiser() {
        let net = PolicyNet::new(2, &[2], 2, Head::Joint, 1).unwrap();
        let snap = net.snapshot().unwrap();
        let before = flat(&snap.vars().iter().map(|v| v.as_tensor().clone()).collect::<Vec<_>>());
        let mut opt = Opt::new(OptimizerKind::Adam, net.vars(), 0.1).unwrap();
        opt.set_lr(0.5);
        assert_eq!(opt.lr(), 0.5);
        let grads: Vec<Tensor> = net.vars().iter().map(|v| v.as_tensor().ones_like().unwrap()).collect();
        opt.step(&grads).unwrap();
        let after = flat(&snap.vars().iter().map(|v| v.as_tensor().clone()).collect::<Vec<_>>());
        let moved = flat(&net.vars().iter().map(|v| v.as_tensor().clone()).collect::<Vec<_>>());
        assert_eq!(before, after);
        assert_ne!(before, moved);
    }
}
