//! Checkpoints: the weights as safetensors (`MODEL`) and a JSON file beside them
//! (`MODEL` with extension `.json`) that records the agent, its state encoding, the network
//! shape and the training hyper-parameters. Loading refuses a checkpoint whose agent or
//! encoding differs from what the caller needs, naming the field.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::deeprm::DeepRmParams;
use crate::error::RlError;
use crate::gpu::GpuEncoding;
use crate::net::{Head, PolicyNet};
use crate::reinforce::TrainConfig;

/// Version of the metadata layout.
pub const FORMAT_VERSION: u32 = 1;

/// The state/action encoding a network was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Encoding {
    /// DeepRM's own environment.
    DeepRmClassic(DeepRmParams),
    /// Our simulator: DqnGPU or DeepRM Max / Mean.
    Gpu(GpuEncoding),
    /// Our simulator: the generalising DqnGPU scorer (one score per candidate row).
    Scorer(crate::scorer::ScorerSpec),
}

impl Encoding {
    /// What a checkpoint of this encoding is, in a user's words (for mismatch errors).
    pub fn describe(&self) -> String {
        match self {
            Encoding::DeepRmClassic(_) => "a DeepRM agent of DeepRM's own environment (`dqngpu deeprm train`)".into(),
            Encoding::Gpu(g) => format!(
                "the thesis's image agent `{}` (`dqngpu train --algorithm thesis --agent {}`)",
                g.agent.name(),
                g.agent.name()
            ),
            Encoding::Scorer(s) => format!("a scorer with {} features (`dqngpu train`)", s.features),
        }
    }

    /// Observation length.
    pub fn obs_len(&self) -> usize {
        match self {
            Encoding::DeepRmClassic(p) => p.obs_len(),
            Encoding::Gpu(g) => g.obs_len(),
            Encoding::Scorer(s) => s.features,
        }
    }

    /// Number of actions.
    pub fn n_actions(&self) -> usize {
        match self {
            Encoding::DeepRmClassic(p) => p.num_nw + 1,
            Encoding::Gpu(g) => g.n_actions(),
            Encoding::Scorer(_) => 1,
        }
    }

    /// The network head this encoding is read with.
    pub fn head(&self) -> Head {
        match self {
            Encoding::DeepRmClassic(_) | Encoding::Scorer(_) => Head::Joint,
            Encoding::Gpu(_) => Head::PerAction,
        }
    }
}

/// What the JSON file beside the weights holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// [`FORMAT_VERSION`].
    pub format: u32,
    /// Agent name (`deeprm-classic`, `dqngpu`, `deeprm-max`, `deeprm-mean`).
    pub agent: String,
    /// The encoding.
    pub encoding: Encoding,
    /// Hidden layer sizes.
    pub hidden: Vec<usize>,
    /// Training hyper-parameters.
    pub train: TrainConfig,
    /// What it was trained on, free text (workload class, cluster, job sets, seeds).
    #[serde(default)]
    pub trained_on: String,
    /// Iterations done.
    #[serde(default)]
    pub iterations_done: usize,
    /// Training wall time, s.
    #[serde(default)]
    pub train_wall_s: f64,
    /// The learning-rate schedule, when training used one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::reinforce::Schedule>,
    /// How the saved weights were chosen, when not simply the final ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<crate::deeprm::Selection>,
}

/// The fields where encodings `have` and `want` differ, as `field: have (needed want)` (both
/// serialise as one flat object tagged by `kind`, so another kind shows as `kind: ...`).
fn encoding_differences(have: &Encoding, want: &Encoding) -> String {
    let (h, w) = (serde_json::to_value(have).unwrap_or_default(), serde_json::to_value(want).unwrap_or_default());
    let empty = serde_json::Map::new();
    let hf = h.as_object().unwrap_or(&empty);
    let diffs: Vec<String> = w
        .as_object()
        .unwrap_or(&empty)
        .iter()
        .filter(|(k, v)| hf.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}: {} (needed {v})", hf.get(k).map_or("absent".into(), |x| x.to_string())))
        .collect();
    diffs.join(", ")
}

/// Refuses a checkpoint (metadata at `meta_file`) whose encoding `have` is not `want`, naming
/// the fields that differ.
pub fn require_encoding(meta_file: &Path, have: &Encoding, want: &Encoding) -> Result<(), RlError> {
    if have == want {
        return Ok(());
    }
    Err(RlError::EncodingMismatch {
        path: meta_file.to_path_buf(),
        message: format!(
            "its state encoding differs from the one needed in {}; retrain or use matching options",
            encoding_differences(have, want)
        ),
    })
}

/// The metadata path of a weights file: same name, extension `.json`.
pub fn meta_path(weights: &Path) -> PathBuf {
    weights.with_extension("json")
}

/// Checks, before any training, that [`save`] will be able to write `path`: it does not end in
/// `.json` and its folder exists or can be made and takes a file. A half-hour run must not end
/// in "cannot save".
pub fn check_path(path: &Path) -> Result<(), RlError> {
    check_extension(path)?;
    check_meta_is_a_checkpoints(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|source| RlError::Io { path: dir.clone(), source })?;
    let probe = dir.join(format!(".dqngpu-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|source| RlError::Io { path: probe.clone(), source })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The metadata file beside `path`, if one is there, must be an earlier checkpoint's: saving
/// replaces it, and a job set or a config that happens to share the name is the user's.
fn check_meta_is_a_checkpoints(path: &Path) -> Result<(), RlError> {
    let meta = meta_path(path);
    let Ok(text) = std::fs::read(&meta) else { return Ok(()) };
    let ours = serde_json::from_slice::<serde_json::Value>(&text)
        .is_ok_and(|v| v.get("format").is_some() && v.get("agent").is_some() && v.get("encoding").is_some());
    if ours {
        return Ok(());
    }
    Err(RlError::Config {
        field: "model path",
        message: format!(
            "{} is there and is no checkpoint's metadata; saving the model as {} would replace it: choose another name",
            meta.display(),
            path.display()
        ),
    })
}

/// The weights file must not be its own metadata file.
fn check_extension(path: &Path) -> Result<(), RlError> {
    if meta_path(path) == path {
        return Err(RlError::Config {
            field: "model path",
            message: format!(
                "{}: the weights file must not end in .json (its metadata goes there); try {}",
                path.display(),
                path.with_extension("safetensors").display()
            ),
        });
    }
    Ok(())
}

/// Writes the weights to `path` and the metadata beside them. (Callers that train first check
/// the path with [`check_path`] before training; a write error here still names the file.)
pub fn save(path: &Path, net: &PolicyNet, meta: &CheckpointMeta) -> Result<(), RlError> {
    check_extension(path)?;
    check_meta_is_a_checkpoints(path)?;
    let meta_file = meta_path(path);
    net.save(path)?;
    let text = serde_json::to_string_pretty(meta)
        .map_err(|e| RlError::BadCheckpoint { path: meta_file.clone(), message: e.to_string() })?;
    dqngpu_model::error::write_file_atomic(&meta_file, text.as_bytes())?;
    Ok(())
}

/// Reads the metadata of a checkpoint.
pub fn read_meta(path: &Path) -> Result<CheckpointMeta, RlError> {
    // The file the user named is what is missing, not the metadata beside it.
    if !path.exists() {
        let source = std::io::Error::new(std::io::ErrorKind::NotFound, "no model file there");
        return Err(RlError::Io { path: path.to_path_buf(), source });
    }
    let meta_file = meta_path(path);
    let text = std::fs::read_to_string(&meta_file).map_err(|source| RlError::Io { path: meta_file.clone(), source })?;
    let meta: CheckpointMeta = serde_json::from_str(&text)
        .map_err(|e| RlError::BadCheckpoint { path: meta_file.clone(), message: e.to_string() })?;
    if meta.format != FORMAT_VERSION {
        return Err(RlError::BadCheckpoint {
            path: meta_file,
            message: format!("format {} is not supported (this build reads {FORMAT_VERSION})", meta.format),
        });
    }
    Ok(meta)
}

/// Loads a checkpoint for `agent`; with `expected`, refuses any other encoding.
pub fn load(path: &Path, agent: &str, expected: Option<&Encoding>) -> Result<(PolicyNet, CheckpointMeta), RlError> {
    let meta = read_meta(path)?;
    let meta_file = meta_path(path);
    if meta.agent != agent {
        return Err(RlError::EncodingMismatch {
            path: meta_file,
            message: format!("it was trained for agent `{}`, not `{agent}`", meta.agent),
        });
    }
    if let Some(want) = expected {
        require_encoding(&meta_file, &meta.encoding, want)?;
    }
    let net =
        PolicyNet::load(path, meta.encoding.obs_len(), &meta.hidden, meta.encoding.n_actions(), meta.encoding.head())?;
    Ok((net, meta))
}
