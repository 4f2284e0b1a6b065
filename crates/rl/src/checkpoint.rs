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
    /// FNV-1a (64-bit, hex) of the weights file's bytes, set by [`save`]; [`load`] refuses
    /// weights that do not match (another save's). Absent in checkpoints from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_fnv1a64: Option<String>,
}

/// FNV-1a, 64-bit, of `bytes`, as 16 hex digits.
pub fn fnv1a64_hex(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
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
    // A directory there is no file to save into: found only after training ("saving ro: Is
    // a directory", 108 s in).
    if path.is_dir() {
        return Err(RlError::Config {
            field: "model path",
            message: format!("{} is a directory; name the checkpoint file to write", path.display()),
        });
    }
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

/// Writes the weights to `path` and the metadata beside them, with the weights' checksum,
/// both atomically (temporary names, then renames), so an interrupted save leaves the old
/// files or a pair whose checksum tells them apart. (Callers that train first check the path
/// with [`check_path`] before training; a write error here still names the file.)
pub fn save(path: &Path, net: &PolicyNet, meta: &CheckpointMeta) -> Result<(), RlError> {
    check_extension(path)?;
    check_meta_is_a_checkpoints(path)?;
    let meta_file = meta_path(path);
    let weights = weights_bytes(path, net)?;
    let meta = CheckpointMeta { weights_fnv1a64: Some(fnv1a64_hex(&weights)), ..meta.clone() };
    let text = serde_json::to_string_pretty(&meta)
        .map_err(|e| RlError::BadCheckpoint { path: meta_file.clone(), message: e.to_string() })?;
    dqngpu_model::error::write_files_atomic(&[(path, weights.as_slice()), (meta_file.as_path(), text.as_bytes())])?;
    Ok(())
}

/// The safetensors bytes of `net` (candle writes only files: a hidden scratch file beside
/// `path`, removed again).
fn weights_bytes(path: &Path, net: &PolicyNet) -> Result<Vec<u8>, RlError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let scratch = path.with_file_name(format!(".{name}.weights{}", std::process::id()));
    let saved = net.save(&scratch);
    let bytes =
        saved.and_then(|()| std::fs::read(&scratch).map_err(|source| RlError::Io { path: scratch.clone(), source }));
    let _ = std::fs::remove_file(&scratch);
    bytes
}

/// Refuses the weights `bytes` (of `path`) when they do not match the checksum in the
/// metadata at `meta_file` (one of the two is another save's); metadata without one is not
/// checked.
fn check_weights_sum(bytes: &[u8], path: &Path, meta_file: &Path, meta: &CheckpointMeta) -> Result<(), RlError> {
    let Some(want) = &meta.weights_fnv1a64 else { return Ok(()) };
    let have = fnv1a64_hex(bytes);
    if &have == want {
        return Ok(());
    }
    Err(RlError::BadCheckpoint {
        path: meta_file.to_path_buf(),
        message: format!(
            "field `weights_fnv1a64` is {want} but the weights in {} hash to {have}: the two files come from \
             different saves (an interrupted one?); save or copy them together",
            path.display()
        ),
    })
}

/// Refuses metadata values no training writes: a guard's budget or step, an encoding's sizes.
fn check_values(meta_file: &Path, meta: &CheckpointMeta) -> Result<(), RlError> {
    let bad = |field: &str, value: String, want: &str| RlError::BadCheckpoint {
        path: meta_file.to_path_buf(),
        message: format!("field `{field}` is {value}; expected {want}"),
    };
    if let Some(h) = meta.hidden.iter().find(|&&h| h == 0) {
        return Err(bad("hidden", h.to_string(), "layer sizes of at least 1"));
    }
    let Encoding::Gpu(g) = &meta.encoding else { return Ok(()) };
    if !(g.row_s.is_finite() && g.row_s > 0.0) {
        return Err(bad("encoding.row_s", g.row_s.to_string(), "a positive number of seconds"));
    }
    for (field, n) in [
        ("time_horizon", g.time_horizon),
        ("res_slots", g.res_slots),
        ("job_slots", g.job_slots),
        ("backlog_cap", g.backlog_cap),
    ] {
        if n == 0 {
            return Err(bad(&format!("encoding.{field}"), "0".into(), "at least 1"));
        }
    }
    // The encoding's own limits, as training checks them: an edited sidecar with 24 job slots
    // aborted on a 100 GB allocation, and with 64 wrapped a shift and decided otherwise
    // without a word. (Within 1..=8 an edit is not caught: the first layer's shape does not
    // depend on the slots.)
    let most = crate::gpu::MAX_JOB_SLOTS;
    if g.job_slots > most {
        return Err(bad("encoding.job_slots", g.job_slots.to_string(), &format!("1 to {most}")));
    }
    let side = crate::gpu::MAX_IMAGE_SIDE;
    for (field, n) in [("time_horizon", g.time_horizon), ("res_slots", g.res_slots)] {
        if n > side {
            return Err(bad(&format!("encoding.{field}"), n.to_string(), &format!("at most {side}")));
        }
    }
    let Some(guard) = &g.guard else { return Ok(()) };
    if !(guard.max_slowdown.is_finite() && guard.max_slowdown >= 0.0) {
        return Err(bad("encoding.guard.max_slowdown", guard.max_slowdown.to_string(), "a fraction >= 0"));
    }
    if !(guard.step_s.is_finite() && guard.step_s > 0.0) {
        return Err(bad("encoding.guard.step_s", guard.step_s.to_string(), "a positive number of seconds"));
    }
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
    check_values(&meta_file, &meta)?;
    // Read once: the checksum and the weights are of the same bytes.
    let bytes = std::fs::read(path).map_err(|source| RlError::Io { path: path.to_path_buf(), source })?;
    check_weights_sum(&bytes, path, &meta_file, &meta)?;
    let enc = &meta.encoding;
    let net = PolicyNet::from_bytes(&bytes, path, enc.obs_len(), &meta.hidden, enc.n_actions(), enc.head())?;
    if let Some(name) = net.first_non_finite()? {
        return Err(RlError::BadCheckpoint {
            path: path.to_path_buf(),
            message: format!("tensor `{name}` holds a value that is not finite (NaN or infinite); retrain"),
        });
    }
    Ok((net, meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::AgentKind;

    fn meta(encoding: Encoding) -> CheckpointMeta {
        CheckpointMeta {
            format: FORMAT_VERSION,
            agent: "dqngpu".into(),
            encoding,
            hidden: vec![4],
            train: TrainConfig::default(),
            trained_on: "test".into(),
            iterations_done: 0,
            train_wall_s: 0.0,
            schedule: None,
            selection: None,
            weights_fnv1a64: None,
        }
    }

    /// A thesis image agent's checkpoint (with the slowdown guard) saved in `dir`.
    fn saved(dir: &Path) -> (PathBuf, Encoding) {
        let enc = Encoding::Gpu(GpuEncoding::new(AgentKind::Dqngpu));
        let net = PolicyNet::new(enc.obs_len(), &[4], enc.n_actions(), enc.head(), 3).unwrap();
        let path = dir.join("m.safetensors");
        save(&path, &net, &meta(enc.clone())).unwrap();
        (path, enc)
    }

    fn edit_meta(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let file = meta_path(path);
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    #[test]
    fn fnv1a64_is_the_published_function() {
        assert_eq!(fnv1a64_hex(b""), "cbf29ce484222325");
        assert_eq!(fnv1a64_hex(b"a"), "af63dc4c8601ec8c");
    }

    /// Weights from another save than their sidecar's (an interrupt between the two writes)
    /// are refused, naming both files; a sidecar from before the checksum still loads.
    #[test]
    fn weights_that_are_not_the_sidecars_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, enc) = saved(dir.path());
        let m = read_meta(&path).unwrap();
        assert_eq!(m.weights_fnv1a64, Some(fnv1a64_hex(&std::fs::read(&path).unwrap())));
        load(&path, "dqngpu", Some(&enc)).unwrap();
        let other = PolicyNet::new(enc.obs_len(), &[4], enc.n_actions(), enc.head(), 4).unwrap();
        other.save(&path).unwrap();
        let e = load(&path, "dqngpu", Some(&enc)).unwrap_err().to_string();
        assert!(e.contains("m.json") && e.contains("m.safetensors") && e.contains("weights_fnv1a64"), "{e}");
        edit_meta(&path, |v| {
            v.as_object_mut().unwrap().remove("weights_fnv1a64");
        });
        load(&path, "dqngpu", Some(&enc)).unwrap();
        assert!(std::fs::read_dir(dir.path()).unwrap().count() == 2, "no scratch or temporary file is left");
    }

    /// A sidecar with a value no training writes, or weights that are not finite, never load.
    #[test]
    fn out_of_range_sidecars_and_non_finite_weights_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (field, value) in [("max_slowdown", -1.0), ("step_s", 0.0)] {
            let (path, _) = saved(dir.path());
            edit_meta(&path, |v| v["encoding"]["guard"][field] = serde_json::json!(value));
            let e = load(&path, "dqngpu", None).unwrap_err().to_string();
            assert!(e.contains("m.json") && e.contains(&format!("encoding.guard.{field}")), "{e}");
        }
        // The encoding's own limits: 24 job slots aborted on a 100 GB allocation, 64 wrapped a
        // shift and decided otherwise.
        for (field, value) in [("job_slots", 24), ("job_slots", 64), ("time_horizon", 100_000)] {
            let (path, _) = saved(dir.path());
            edit_meta(&path, |v| v["encoding"][field] = serde_json::json!(value));
            let e = load(&path, "dqngpu", None).unwrap_err().to_string();
            assert!(e.contains(&format!("encoding.{field}")) || e.contains("job_slots"), "{field} {value}: {e}");
        }
        let (path, enc) = saved(dir.path());
        let net = PolicyNet::new(enc.obs_len(), &[4], enc.n_actions(), enc.head(), 3).unwrap();
        let nan: std::collections::HashMap<String, candle_core::Tensor> =
            net.tensors().into_iter().map(|(k, t)| (k, (t * f64::NAN).unwrap())).collect();
        candle_core::safetensors::save(&nan, &path).unwrap();
        edit_meta(&path, |v| {
            v.as_object_mut().unwrap().remove("weights_fnv1a64");
        });
        let e = load(&path, "dqngpu", Some(&enc)).unwrap_err().to_string();
        assert!(e.contains("m.safetensors") && e.contains("not finite"), "{e}");
    }
}
