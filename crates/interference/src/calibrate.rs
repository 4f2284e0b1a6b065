//! Fits the [`Contention`] parameters to measured co-location pairs, minimising the mean
//! absolute percentage error (MAPE) of the predicted per-job speeds, and reports it beside two
//! reference predictors and a k-fold cross-validation.
//!
//! The demands are built by [`lucid::steady_demand`], the same function the `lucid` library
//! uses, so the fit measures exactly the model the simulator runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use dqngpu_model::library::lucid::{self, SoloConfig};
use dqngpu_model::{GpuSpec, Location, ModelError, Resources};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::pairs::{load_pairs, PairsFile};
use crate::{Contention, ContentionParams, Interference, JobLoad};

/// Folds in the random k-fold cross-validation.
pub const CV_FOLDS: usize = 5;

/// Seed of the fold shuffle.
pub const CV_SEED: u64 = 0;

/// One pair joined with both jobs' solo demands.
#[derive(Debug, Clone)]
pub struct Observation {
    /// Line of the pair in the pairs file.
    pub line: u64,
    /// App keys.
    pub keys: [String; 2],
    /// Model families (for leave-one-model-out validation).
    pub models: [String; 2],
    /// Solo demands.
    pub demands: [Resources; 2],
    /// Measured speeds relative to alone.
    pub speeds: [f64; 2],
}

/// Joins pairs with solo configurations by key; a pair naming an unknown configuration is an
/// error at its line.
pub fn join(pairs: &PairsFile, solo: &[SoloConfig]) -> Result<Vec<Observation>, ModelError> {
    let by_key: HashMap<String, &SoloConfig> = solo.iter().map(|c| (c.key(), c)).collect();
    pairs
        .pairs
        .iter()
        .map(|p| {
            let find = |key: &str, field: &str| {
                by_key.get(key).copied().ok_or_else(|| {
                    ModelError::invalid(
                        Location { path: pairs.path.clone(), line: Some(p.line), field: Some(field.into()) },
                        format!("configuration `{key}` is not in the solo profiles"),
                    )
                })
            };
            let (a, b) = (find(&p.key1, "model1")?, find(&p.key2, "model2")?);
            Ok(Observation {
                line: p.line,
                keys: [p.key1.clone(), p.key2.clone()],
                models: [p.model1.clone(), p.model2.clone()],
                demands: [lucid::steady_demand(a), lucid::steady_demand(b)],
                speeds: [p.speed1, p.speed2],
            })
        })
        .collect()
}

/// The GPU the Lucid pairs ran on.
pub fn lucid_gpu() -> Result<GpuSpec, ModelError> {
    dqngpu_model::gpu::lookup("rtx3090")
}

/// Predicted speeds of one pair under `model`.
pub fn predict(model: &dyn Interference, gpu: &GpuSpec, o: &Observation) -> [f64; 2] {
    let jobs = [JobLoad { app: &o.keys[0], demand: &o.demands[0] }, JobLoad { app: &o.keys[1], demand: &o.demands[1] }];
    let mut r = [1.0; 2];
    model.rates(gpu, &jobs, &mut r);
    r
}

/// MAPE (percent) of per-job speed predictions: mean over every job of |pred - measured| / measured.
pub fn mape(obs: &[Observation], mut pred: impl FnMut(&Observation) -> [f64; 2]) -> f64 {
    if obs.is_empty() {
        return 0.0;
    }
    let mut sum = 0.0;
    for o in obs {
        let p = pred(o);
        for (pred, measured) in p.iter().zip(o.speeds) {
            sum += (pred - measured).abs() / measured;
        }
    }
    100.0 * sum / (2 * obs.len()) as f64
}

/// Reference: no slowdown (every speed 1.0).
pub fn no_slowdown(_o: &Observation) -> [f64; 2] {
    [1.0, 1.0]
}

/// Reference: each job gets 100 / (sum of GPU util) when the pair's util is over 100%.
pub fn fair_share(o: &Observation) -> [f64; 2] {
    let s = fair_share_rate(&o.demands);
    [s, s]
}

/// Every job's rate under fair sharing of GPU util above 100%: 100 / the summed util, or 1.
pub fn fair_share_rate(demands: &[Resources]) -> f64 {
    let sum: f64 = demands.iter().map(|d| d.gpu_util_pct).sum();
    if sum > 100.0 {
        100.0 / sum
    } else {
        1.0
    }
}

fn contention_mape(obs: &[Observation], gpu: &GpuSpec, p: ContentionParams) -> f64 {
    let m = Contention::new(p);
    mape(obs, |o| predict(&m, gpu, o))
}

/// Nelder-Mead over the two parameters (kept non-negative by taking absolute values), started
/// from a small grid; returns the best parameters found. Deterministic.
pub fn fit(obs: &[Observation], gpu: &GpuSpec) -> ContentionParams {
    let params = |x: [f64; 2]| ContentionParams { overhead: x[0].abs(), oversubscription: x[1].abs() };
    let f = |x: [f64; 2]| contention_mape(obs, gpu, params(x));
    let mut best = ([0.0, 0.0], f64::INFINITY);
    for a0 in [0.05, 0.3, 1.0] {
        for b0 in [0.1, 0.5, 1.5] {
            let (x, v) = nelder_mead(&f, [a0, b0], 0.1, 300);
            if v < best.1 {
                best = (x, v);
            }
        }
    }
    params(best.0)
}

/// A plain 2-D Nelder-Mead: reflection, expansion, contraction, shrink.
fn nelder_mead(f: &impl Fn([f64; 2]) -> f64, x0: [f64; 2], step: f64, iters: usize) -> ([f64; 2], f64) {
    let mut s: Vec<([f64; 2], f64)> =
        [x0, [x0[0] + step, x0[1]], [x0[0], x0[1] + step]].into_iter().map(|x| (x, f(x))).collect();
    let lerp = |a: [f64; 2], b: [f64; 2], t: f64| [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])];
    for _ in 0..iters {
        s.sort_by(|a, b| a.1.total_cmp(&b.1));
        if (s[2].1 - s[0].1).abs() < 1e-9 {
            break;
        }
        let c = lerp(s[0].0, s[1].0, 0.5);
        let r = lerp(c, s[2].0, -1.0);
        let fr = f(r);
        if fr < s[0].1 {
            let e = lerp(c, s[2].0, -2.0);
            let fe = f(e);
            s[2] = if fe < fr { (e, fe) } else { (r, fr) };
        } else if fr < s[1].1 {
            s[2] = (r, fr);
        } else {
            let k = lerp(c, s[2].0, 0.5);
            let fk = f(k);
            if fk < s[2].1 {
                s[2] = (k, fk);
            } else {
                for i in 1..3 {
                    let x = lerp(s[0].0, s[i].0, 0.5);
                    s[i] = (x, f(x));
                }
            }
        }
    }
    s.sort_by(|a, b| a.1.total_cmp(&b.1));
    s[0]
}

/// Held-out results of one cross-validation scheme.
#[derive(Debug, Clone, Serialize)]
pub struct CrossValidation {
    /// How folds were made.
    pub scheme: String,
    /// Per fold: (held-out pairs, training MAPE, held-out MAPE of the fitted model, held-out
    /// MAPE of fair share).
    pub folds: Vec<FoldResult>,
    /// Mean held-out MAPE of the contention model over folds, weighted by pairs (`None`, JSON
    /// `null`, with no fold: too few pairs or families to hold any out).
    pub test_mape_pct: Option<f64>,
    /// The same for the fair-share reference on the same folds.
    pub test_fair_share_mape_pct: Option<f64>,
}

/// One fold.
#[derive(Debug, Clone, Serialize)]
pub struct FoldResult {
    /// Fold label.
    pub fold: String,
    /// Held-out pairs.
    pub test_pairs: usize,
    /// Training pairs.
    pub train_pairs: usize,
    /// MAPE on the training pairs, %.
    pub train_mape_pct: f64,
    /// MAPE on the held-out pairs, %.
    pub test_mape_pct: f64,
    /// Fair share's MAPE on the held-out pairs, %.
    pub test_fair_share_mape_pct: f64,
}

fn run_folds(
    obs: &[Observation],
    gpu: &GpuSpec,
    scheme: &str,
    folds: Vec<(String, Vec<usize>, Vec<usize>)>,
) -> CrossValidation {
    let mut out = Vec::new();
    let (mut n, mut sum, mut sum_fair) = (0usize, 0.0, 0.0);
    for (label, train_idx, test_idx) in folds {
        if train_idx.is_empty() || test_idx.is_empty() {
            continue;
        }
        let train: Vec<Observation> = train_idx.iter().map(|&i| obs[i].clone()).collect();
        let test: Vec<Observation> = test_idx.iter().map(|&i| obs[i].clone()).collect();
        let p = fit(&train, gpu);
        let r = FoldResult {
            fold: label,
            test_pairs: test.len(),
            train_pairs: train.len(),
            train_mape_pct: contention_mape(&train, gpu, p),
            test_mape_pct: contention_mape(&test, gpu, p),
            test_fair_share_mape_pct: mape(&test, fair_share),
        };
        n += r.test_pairs;
        sum += r.test_mape_pct * r.test_pairs as f64;
        sum_fair += r.test_fair_share_mape_pct * r.test_pairs as f64;
        out.push(r);
    }
    let mean = |total: f64| (n > 0).then(|| total / n as f64);
    CrossValidation {
        scheme: scheme.into(),
        folds: out,
        test_mape_pct: mean(sum),
        test_fair_share_mape_pct: mean(sum_fair),
    }
}

/// Random k-fold: pairs shuffled with `ChaCha8Rng(seed)` and dealt into `k` folds.
pub fn k_fold(obs: &[Observation], gpu: &GpuSpec, k: usize, seed: u64) -> CrossValidation {
    let mut idx: Vec<usize> = (0..obs.len()).collect();
    idx.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let k = k.max(2);
    let folds = (0..k)
        .map(|f| {
            let test: Vec<usize> = idx.iter().enumerate().filter(|(i, _)| i % k == f).map(|(_, &j)| j).collect();
            let train: Vec<usize> = idx.iter().enumerate().filter(|(i, _)| i % k != f).map(|(_, &j)| j).collect();
            (format!("{}/{k}", f + 1), train, test)
        })
        .collect();
    run_folds(obs, gpu, &format!("random {k}-fold, seed {seed}"), folds)
}

/// Leave one model family out: test on the pairs involving it, train on pairs without it, so
/// every prediction is for an app the fit never saw.
pub fn leave_one_model_out(obs: &[Observation], gpu: &GpuSpec) -> CrossValidation {
    let families: BTreeSet<&str> = obs.iter().flat_map(|o| [o.models[0].as_str(), o.models[1].as_str()]).collect();
    let folds = families
        .iter()
        .map(|fam| {
            let has = |o: &Observation| o.models.iter().any(|m| m == fam);
            let test = (0..obs.len()).filter(|&i| has(&obs[i])).collect();
            let train = (0..obs.len()).filter(|&i| !has(&obs[i])).collect();
            (fam.to_string(), train, test)
        })
        .collect();
    run_folds(obs, gpu, "leave one model family out", folds)
}

/// Everything `dqngpu calibrate` prints.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationReport {
    /// Pairs file used.
    pub pairs_file: String,
    /// Solo file used.
    pub solo_file: String,
    /// Pairs fitted.
    pub pairs: usize,
    /// The fitted parameters.
    pub params: ContentionParams,
    /// MAPE of the fitted contention model on all pairs, %.
    pub contention_mape_pct: f64,
    /// MAPE of the built-in default parameters on all pairs, %.
    pub default_params_mape_pct: f64,
    /// Reference: no slowdown, %.
    pub no_slowdown_mape_pct: f64,
    /// Reference: fair share of GPU util above 100%, %.
    pub fair_share_mape_pct: f64,
    /// Cross-validations.
    pub cross_validation: Vec<CrossValidation>,
    /// Measured speeds above 1.0 (noise a rate in (0, 1] cannot fit), count of jobs.
    pub speeds_above_one: usize,
}

/// Reads both files (the built-in Lucid copies where a path is `None`), fits, and validates.
pub fn calibrate(pairs_path: Option<&Path>, solo_path: Option<&Path>) -> Result<CalibrationReport, ModelError> {
    let (pairs, pairs_file) = load_pairs(pairs_path)?;
    let (solo, solo_file) = lucid::load_solo(solo_path)?;
    let obs = join(&pairs, &solo)?;
    let gpu = lucid_gpu()?;
    let params = fit(&obs, &gpu);
    Ok(CalibrationReport {
        pairs_file,
        solo_file,
        pairs: obs.len(),
        params,
        contention_mape_pct: contention_mape(&obs, &gpu, params),
        default_params_mape_pct: contention_mape(&obs, &gpu, ContentionParams::FITTED),
        no_slowdown_mape_pct: mape(&obs, no_slowdown),
        fair_share_mape_pct: mape(&obs, fair_share),
        cross_validation: vec![k_fold(&obs, &gpu, CV_FOLDS, CV_SEED), leave_one_model_out(&obs, &gpu)],
        speeds_above_one: obs.iter().flat_map(|o| o.speeds).filter(|s| *s > 1.0).count(),
    })
}

/// Per-pair predictions of `model` for every row of a pairs file (for `interference predict`).
pub fn predict_file(
    model: &dyn Interference,
    pairs: &PairsFile,
    solo: &[SoloConfig],
) -> Result<Vec<(f64, f64)>, ModelError> {
    let gpu = lucid_gpu()?;
    Ok(join(pairs, solo)?.iter().map(|o| predict(model, &gpu, o)).map(|p| (p[0], p[1])).collect())
}

/// Model families in a set of observations, with pair counts (for reports).
pub fn family_counts(obs: &[Observation]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for o in obs {
        for f in &o.models {
            *m.entry(f.clone()).or_insert(0) += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairs::parse_pairs_csv;

    fn solo() -> Vec<SoloConfig> {
        let text = "model,dataset,batchsize,amp,gpu_util,gmem\nA,X,32,0,90,1000\nB,X,32,0,80,1000\nC,X,32,0,10,1000\n";
        lucid::parse_solo_csv(text, None).unwrap()
    }

    /// Synthetic pairs generated from known parameters: the fit must recover them.
    #[test]
    fn fit_recovers_known_parameters() {
        let truth = ContentionParams { overhead: 0.3, oversubscription: 0.6 };
        let gpu = lucid_gpu().unwrap();
        let m = Contention::new(truth);
        let s = solo();
        let mut text = String::from("model1,dataset1,batchsize1,amp1,speed1,model2,dataset2,batchsize2,amp2,speed2\n");
        for a in &s {
            for b in &s {
                let d = [lucid::steady_demand(a), lucid::steady_demand(b)];
                let mut r = [0.0; 2];
                m.rates(&gpu, &[JobLoad { app: "a", demand: &d[0] }, JobLoad { app: "b", demand: &d[1] }], &mut r);
                text.push_str(&format!("{},X,32,0,{},{},X,32,0,{}\n", a.model, r[0], b.model, r[1]));
            }
        }
        let obs = join(&parse_pairs_csv(&text, None).unwrap(), &s).unwrap();
        let p = fit(&obs, &gpu);
        assert!(contention_mape(&obs, &gpu, p) < 0.01, "{p:?}");
        assert!((p.overhead - 0.3).abs() < 0.02 && (p.oversubscription - 0.6).abs() < 0.02, "{p:?}");
    }

    #[test]
    fn unknown_configuration_names_the_line() {
        let text =
            "model1,dataset1,batchsize1,amp1,speed1,model2,dataset2,batchsize2,amp2,speed2\nA,X,32,0,1,Z,X,32,0,1\n";
        let e = join(&parse_pairs_csv(text, Some(Path::new("p.csv"))).unwrap(), &solo()).unwrap_err().to_string();
        assert!(e.contains("p.csv, line 2, field `model2`") && e.contains("Z-X-bs32-amp0"), "{e}");
    }

    #[test]
    fn references_match_their_definitions() {
        let text = "model1,dataset1,batchsize1,amp1,speed1,model2,dataset2,batchsize2,amp2,speed2\nA,X,32,0,0.5,B,X,32,0,0.8\n";
        let obs = join(&parse_pairs_csv(text, None).unwrap(), &solo()).unwrap();
        // no slowdown: |1-0.5|/0.5 = 100%, |1-0.8|/0.8 = 25% -> 62.5%.
        assert!((mape(&obs, no_slowdown) - 62.5).abs() < 1e-9);
        assert_eq!(fair_share(&obs[0]), [100.0 / 170.0; 2]);
    }

    #[test]
    fn a_single_pair_has_no_held_out_figure_and_a_vanishing_speed_is_refused() {
        let text = "model1,dataset1,batchsize1,amp1,speed1,model2,dataset2,batchsize2,amp2,speed2\nA,X,32,0,0.5,B,X,32,0,0.8\n";
        let obs = join(&parse_pairs_csv(text, None).unwrap(), &solo()).unwrap();
        let gpu = lucid_gpu().unwrap();
        for cv in [k_fold(&obs, &gpu, CV_FOLDS, CV_SEED), leave_one_model_out(&obs, &gpu)] {
            assert!(cv.folds.is_empty(), "{cv:?}");
            let json = serde_json::to_value(&cv).unwrap();
            assert!(json["test_mape_pct"].is_null() && json["test_fair_share_mape_pct"].is_null(), "{json}");
        }
        // A speed of 1e-308 is "positive and finite" but no measurement: its relative error
        // would make every MAPE infinite.
        let e = parse_pairs_csv(&text.replace("0.5", "1e-308"), Some(Path::new("p.csv"))).unwrap_err().to_string();
        assert!(e.contains("p.csv, line 2, field `speed1`") && e.contains("1e-6"), "{e}");
    }

    /// On the built-in measured pairs, the fit beats both references, in and out of sample.
    #[test]
    fn beats_references_on_builtin_pairs() {
        let r = calibrate(None, None).unwrap();
        assert_eq!(r.pairs, 1091);
        assert!(
            r.contention_mape_pct < r.fair_share_mape_pct && r.fair_share_mape_pct < r.no_slowdown_mape_pct,
            "{r:?}"
        );
        for cv in &r.cross_validation {
            assert!(matches!((cv.test_mape_pct, cv.test_fair_share_mape_pct), (Some(c), Some(f)) if c < f), "{cv:?}");
        }
        // The built-in defaults are this fit (rounded).
        assert!((r.default_params_mape_pct - r.contention_mape_pct).abs() < 0.05, "{r:?}");
    }

    /// The H100 parameters are the fit to the pairs measured there (files in the repository),
    /// and on those pairs they beat both the Lucid-fitted defaults and fair share, held out too.
    #[test]
    fn h100_parameters_are_the_fit_to_the_h100_pairs() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/gpu-pairs-h100");
        let r = calibrate(Some(&dir.join("colocate_pairs.csv")), Some(&dir.join("solo_profiles.csv"))).unwrap();
        assert_eq!(r.pairs, 21);
        let h = ContentionParams::H100_TIMESLICED;
        assert!((r.params.overhead - h.overhead).abs() < 5e-4, "{r:?}");
        assert!((r.params.oversubscription - h.oversubscription).abs() < 5e-4, "{r:?}");
        assert!(r.contention_mape_pct < r.fair_share_mape_pct, "{r:?}");
        assert!(r.contention_mape_pct < r.default_params_mape_pct, "{r:?}");
        for cv in &r.cross_validation {
            assert!(matches!((cv.test_mape_pct, cv.test_fair_share_mape_pct), (Some(c), Some(f)) if c < f), "{cv:?}");
        }
    }
}
