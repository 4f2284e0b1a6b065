//! Procedurally generated libraries (`generated:SEED[:COUNT]`): apps whose time-varying GPU
//! util, memory, SM, PCIe and durations span those of the built-in `thesis` and `lucid`
//! libraries, so agents can be evaluated on apps they never trained on (a seed never used in
//! training gives an unseen library).
//!
//! The span, measured from the two built-in libraries in this repository (memory as a share of
//! each library's reference GPU; the test `span_matches_the_builtin_libraries` re-measures it):
//!
//! | per app | thesis (11, Titan Xp) | lucid (66, RTX 3090) | span |
//! | --- | --- | --- | --- |
//! | solo duration, s | 8 .. 148 | 300 .. 1,200 | 8 .. 1,200 |
//! | mean GPU util, % | 30.1 .. 81.3 | 5.55 .. 100 | 5.55 .. 100 |
//! | peak GPU util, % | 35.6 .. 100 | 5.55 .. 100 | 5.55 .. 100 |
//! | mean memory, % of card | 2.85 .. 53.2 | 8.34 .. 82.0 | 2.85 .. 82.0 |
//! | peak memory, % of card | 2.89 .. 69.2 | 8.34 .. 82.0 | 2.89 .. 82.0 |
//! | mean SM, % | 22.5 .. 73.0 | 5.55 .. 100 | 5.55 .. 100 |
//! | peak SM, % | 26.7 .. 85.4 | 5.55 .. 100 | 5.55 .. 100 |
//! | mean PCIe, MB/s | 352 .. 1,788 | 0 | 0 .. 1,788 |
//! | peak PCIe, MB/s | 450 .. 3,000 | 0 | 0 .. 3,000 |
//! | sampling interval, s | 1 | 1 | 1 |
//!
//! The shapes are assumed, after the thesis's descriptions (Section III.1): ML-like apps load
//! (low util, memory filling, PCIe busy), then train in iterations (util, SM and PCIe
//! oscillate) with periodic evaluation/checkpoint phases (low util, PCIe bursts, a memory
//! peak); HPC-like apps set up, then run in 1-3 util steps with growing memory and short
//! output steps. Every app aims at one of the four (GPU, memory) class combinations, cycled
//! over its index, and its mean util and memory are solved for exactly, so the classes hold.

use std::collections::BTreeMap;
use std::f64::consts::PI;
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::AppLibrary;
use crate::error::{Location, ModelError, Result};
use crate::gpu::GpuSpec;
use crate::profile::{AppInfo, AppKind, AppProfile, RecordedOn};
use crate::resources::Resources;

/// Apps in a library when the name gives no count: 3 per (GPU, memory) class combination, so
/// each of gpu_heavy, gpu_light, mem_heavy and mem_light has 6 members.
pub const GENERATED_DEFAULT_COUNT: usize = 12;

/// The most apps one generated library may have (1,000 apps of <= 1,200 samples: ~40 MB).
pub const GENERATED_MAX_COUNT: usize = 1000;

/// The name prefix `resolve` recognises.
pub const PREFIX: &str = "generated";

/// Solo duration span, s (thesis googlenet .. lucid label 2).
const DURATION_S: [f64; 2] = [8.0, 1200.0];
/// Target mean GPU util, %: light stays clear of the 40% threshold, heavy reachable after a
/// warm-up of at most 12.5% of the run.
const UTIL_LIGHT: [f64; 2] = [6.0, 35.0];
const UTIL_HEAVY: [f64; 2] = [45.0, 85.0];
/// Target mean memory, share of the card: clear of the 50% threshold on both sides.
const MEM_LIGHT: [f64; 2] = [0.03, 0.42];
const MEM_HEAVY: [f64; 2] = [0.52, 0.72];
/// No sample above this share of the card (the span's 82.04%; well inside the 95% asked for).
const MEM_CAP: f64 = 0.82;
/// No sample above the span's peak PCIe, MB/s.
const PCIE_MAX: f64 = 3000.0;

/// Parses `generated:SEED` or `generated:SEED:COUNT` (any case, trimmed). `Ok(None)` when the
/// name does not start with `generated:`; a bad seed or count names what is wrong.
pub fn parse_name(name: &str) -> Result<Option<(u64, usize)>> {
    let t = name.trim();
    let head = PREFIX.len() + 1;
    // `get` is None on a short name or a non-ASCII boundary: not ours either way.
    match t.get(..head) {
        Some(h) if h.eq_ignore_ascii_case("generated:") => {}
        _ => return Ok(None),
    }
    let rest = &t[head..];
    let bad = |problem: String| ModelError::BadName {
        what: "library",
        name: name.to_string(),
        problem: format!("{problem}; write generated:SEED or generated:SEED:COUNT"),
    };
    let parts: Vec<&str> = rest.split(':').map(str::trim).collect();
    if parts.len() > 2 {
        return Err(bad(format!("too many parts ({} after `generated:`)", parts.len())));
    }
    let seed = match parts[0] {
        "" => return Err(bad("the seed is missing".into())),
        s => s.parse::<u64>().map_err(|_| bad(format!("the seed `{s}` is not a whole number in 0..={}", u64::MAX)))?,
    };
    let count = match parts.get(1) {
        None => GENERATED_DEFAULT_COUNT,
        Some(&"") => return Err(bad("the count is missing".into())),
        Some(c) => {
            let n = c.parse::<usize>().map_err(|_| bad(format!("the count `{c}` is not a whole number")))?;
            check_count(n).map_err(bad)?
        }
    };
    Ok(Some((seed, count)))
}

/// The count, or why it is refused.
fn check_count(n: usize) -> Result<usize, String> {
    match n {
        0 => Err("the count must be at least 1".into()),
        n if n > GENERATED_MAX_COUNT => Err(format!("the count {n} is above the maximum of {GENERATED_MAX_COUNT}")),
        n => Ok(n),
    }
}

/// The library's name: `generated:SEED`, with `:COUNT` unless the count is the default.
pub fn library_name(seed: u64, count: usize) -> String {
    if count == GENERATED_DEFAULT_COUNT {
        format!("{PREFIX}:{seed}")
    } else {
        format!("{PREFIX}:{seed}:{count}")
    }
}

/// A library of `count` generated apps (`gen<seed>-<i>`), deterministic in its arguments, with
/// memory sized for `gpu` (the reference GPU for the classes; no sample above 82% of it).
/// Errors on a count outside 1..=[`GENERATED_MAX_COUNT`] or a GPU without positive memory.
pub fn generated(seed: u64, count: usize, gpu: &GpuSpec) -> Result<AppLibrary> {
    let at = |field: &str| Location { field: Some(field.into()), ..Default::default() };
    check_count(count).map_err(|m| ModelError::invalid(at("count"), m))?;
    if !(gpu.memory_mib.is_finite() && gpu.memory_mib > 0.0) {
        return Err(ModelError::invalid(
            at("gpu.memory_mib"),
            format!("GPU `{}` has {} MiB of memory; need a positive number", gpu.key, gpu.memory_mib),
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Stratified draws (one per equal slice, shuffled) so even 12 apps reach both ends of
    // each range rather than clustering by chance.
    let durations = strata(&mut rng, count);
    let heavy_gpu = (0..count).filter(|i| gpu_heavy(*i)).count();
    let heavy_mem = (0..count).filter(|i| mem_heavy(*i)).count();
    let mut util = [strata(&mut rng, count - heavy_gpu), strata(&mut rng, heavy_gpu)];
    let mut mem = [strata(&mut rng, count - heavy_mem), strata(&mut rng, heavy_mem)];
    let width = (count - 1).to_string().len().max(2);
    let mut apps = BTreeMap::new();
    for (i, d) in durations.into_iter().enumerate() {
        let (g, m) = (gpu_heavy(i), mem_heavy(i));
        let u = log_lerp(if g { UTIL_HEAVY } else { UTIL_LIGHT }, util[g as usize].pop().unwrap_or(0.5));
        let s = log_lerp(if m { MEM_HEAVY } else { MEM_LIGHT }, mem[m as usize].pop().unwrap_or(0.5));
        let n = log_lerp(DURATION_S, d).round() as usize;
        let name = format!("gen{seed}-{i:0width$}");
        let p = app(&mut rng, &name, n.max(1), u, s, gpu, (seed, g, m))?;
        apps.insert(name, Arc::new(p));
    }
    Ok(AppLibrary::with_derived_classes(library_name(seed, count), apps, Some(gpu.clone())))
}

/// Target classes cycle (heavy, heavy), (light, light), (heavy, light), (light, heavy), so
/// each class gets every other app.
fn gpu_heavy(i: usize) -> bool {
    matches!(i % 4, 0 | 2)
}
fn mem_heavy(i: usize) -> bool {
    matches!(i % 4, 0 | 3)
}

/// `k` points in [0, 1), one in each of `k` equal slices, in random order.
fn strata(rng: &mut ChaCha8Rng, k: usize) -> Vec<f64> {
    let mut v: Vec<f64> = (0..k).map(|j| (j as f64 + rng.gen::<f64>()) / k as f64).collect();
    v.shuffle(rng);
    v
}

/// Log-uniform in `[lo, hi]` for `f` uniform in [0, 1): small values are as common per ratio
/// as large ones (durations, light util and memory all span >= 5x).
fn log_lerp([lo, hi]: [f64; 2], f: f64) -> f64 {
    lo * (hi / lo).powf(f)
}

/// The `x` in `0..=hi` at which the non-decreasing `mean(x)` meets `target` (bisection).
fn solve(target: f64, hi: f64, mean: impl Fn(f64) -> f64) -> f64 {
    let (mut lo, mut hi) = (0.0, hi);
    for _ in 0..50 {
        let mid = 0.5 * (lo + hi);
        if mean(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// One app of `n` 1 s samples with mean GPU util `util_pct` and mean memory `mem_share` of
/// the card. Util is `clamp(b * f[t] + a[t])` and memory `min(s * r[t], cap)`: the shape
/// (`f`, `a`, `r`) is drawn first, then `b` and `s` are solved for the targets.
fn app(
    rng: &mut ChaCha8Rng,
    name: &str,
    n: usize,
    util_pct: f64,
    mem_share: f64,
    gpu: &GpuSpec,
    (seed, g, m): (u64, bool, bool),
) -> Result<AppProfile> {
    let hpc = rng.gen_bool(1.0 / 3.0);
    // Warm-up: at most 12.5% of the run (so a heavy target stays reachable), at least 1 sample.
    let warm_frac = if hpc { rng.gen_range(0.02..0.08) } else { rng.gen_range(0.05..0.12) };
    let warm = ((n as f64 * warm_frac) as usize).max(1).min(n.saturating_sub(1));
    let main = (n - warm).max(1) as f64;
    let period = if hpc { rng.gen_range(5.0..30.0) } else { rng.gen_range(2.0..12.0) };
    let (osc, phase) = (rng.gen_range(0.03..0.25), rng.gen_range(0.0..2.0 * PI));
    // HPC util in 1-3 steps over the main phase (QMCPACK-like); ML steady.
    let steps: Vec<f64> =
        if hpc { (0..rng.gen_range(1..=3)).map(|_| rng.gen_range(0.4..1.0)).collect() } else { vec![1.0] };
    // Evaluation/checkpoint (ML) or output (HPC) phases: every `every` samples, `len` long.
    let every = if hpc { rng.gen_range(10..=40) } else { rng.gen_range(25..=300) };
    let len = if hpc { rng.gen_range(1..=2) } else { rng.gen_range(1..=(every / 5).min(8)) };
    let eval_util = if hpc { rng.gen_range(0.2..0.5) } else { rng.gen_range(0.1..0.3) };
    let spike = if hpc || rng.gen_bool(0.5) { 0.0 } else { rng.gen_range(0.03..0.15) };
    // HPC memory grows over the run (LAMMPS-like); mem-heavy ones start high enough that the
    // target mean is met below the cap.
    let mem_start = match (hpc, m) {
        (false, _) => 1.0,
        (true, true) => rng.gen_range(0.75..0.95),
        (true, false) => rng.gen_range(0.3..0.8),
    };
    let growth = rng.gen_range(1.0..3.0);
    let warm_util = util_pct * rng.gen_range(0.1..0.6);
    let sm_ratio = rng.gen_range(0.7..1.0);
    // Steady PCIe up to 800 MB/s (thesis ML apps: 550..1,600 MB/s), so with bursts the mean
    // stays under the span's 1,788 MB/s; loads and bursts at least twice the steady level.
    let pcie_base: f64 = rng.gen_range(0.0..800.0);
    let pcie_load = rng.gen_range((2.0 * pcie_base).max(800.0)..PCIE_MAX);
    let burst_max = if hpc { 2000.0 } else { PCIE_MAX };
    let pcie_burst = rng.gen_range((2.0 * pcie_base).max(800.0)..burst_max);

    let (mut f, mut a, mut r, mut pcie, mut jitter) = (vec![], vec![], vec![], vec![], vec![]);
    for t in 0..n {
        let noise = rng.gen_range(-1.0..1.0);
        jitter.push(rng.gen_range(-1.5..1.5));
        let wave = (2.0 * PI * t as f64 / period + phase).sin();
        if t < warm {
            let ramp = t as f64 / warm as f64;
            f.push(0.0);
            a.push(warm_util);
            r.push(0.02 + (mem_start - 0.02) * ramp);
            pcie.push(pcie_load * (0.95 + 0.05 * noise));
            continue;
        }
        let k = t - warm;
        let progress = (k + 1) as f64 / main;
        let grown = mem_start + (1.0 - mem_start) * progress.powf(growth);
        if k % every >= every - len {
            f.push(eval_util);
            a.push(0.0);
            r.push(grown * (1.0 + spike));
            pcie.push(pcie_burst * (0.95 + 0.05 * noise));
        } else {
            let step = steps[((k as f64 / main * steps.len() as f64) as usize).min(steps.len() - 1)];
            f.push(step * (1.0 + osc * wave));
            a.push(2.0 * noise);
            r.push(grown * (1.0 + 0.005 * noise));
            // Input batches move between iterations: PCIe peaks when util dips.
            pcie.push(pcie_base * (1.0 - 0.3 * wave));
        }
    }
    let util_at = |b: f64, t: usize| (b * f[t] + a[t]).clamp(0.0, 100.0);
    let mean_of = |v: &dyn Fn(usize) -> f64| (0..n).map(v).sum::<f64>() / n as f64;
    let b = solve(util_pct, 2000.0, |b| mean_of(&|t| util_at(b, t)));
    let s = solve(mem_share, 50.0, |s| mean_of(&|t| (s * r[t]).min(MEM_CAP)));
    let samples = (0..n)
        .map(|t| {
            let u = util_at(b, t);
            let mem = (s * r[t]).clamp(0.0, MEM_CAP) * gpu.memory_mib;
            Resources::new(u, mem, (u * sm_ratio + jitter[t]).clamp(0.0, 100.0), pcie[t].clamp(0.0, PCIE_MAX))
        })
        .collect();
    let class = |heavy: bool, what: &str| format!("{what}_{}", if heavy { "heavy" } else { "light" });
    let info = AppInfo {
        name: name.to_string(),
        kind: if hpc { AppKind::Hpc } else { AppKind::Ml },
        input_size_mb: None,
        params: Some(format!("generated (seed {seed}), aimed at {} and {}", class(g, "gpu"), class(m, "mem"))),
    };
    let mut p = AppProfile::new(info, 1.0, samples)?;
    p.recorded_on = Some(RecordedOn {
        node: PREFIX.into(),
        gpu_name: gpu.name.clone(),
        architecture: gpu.architecture.clone(),
        memory_mib: gpu.memory_mib,
        cores: gpu.cores,
        pcie_gbps: gpu.pcie_gbps,
    });
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::WorkloadClass;
    use crate::library::{lucid, resolve, thesis};
    use proptest::prelude::*;

    fn titanxp() -> GpuSpec {
        crate::gpu::lookup("titanxp").unwrap()
    }

    /// Per-app (min, max) over `lib`'s apps of: duration, mean and peak util, mean and peak
    /// memory share of `card` MiB, mean and peak SM, mean and peak PCIe, interval; widening
    /// `span`.
    fn widen(span: &mut [[f64; 2]; 10], lib: &AppLibrary, card: f64) {
        for p in lib.apps.values() {
            let s = p.summary();
            let v = [
                s.solo_s,
                s.mean.gpu_util_pct,
                s.peak.gpu_util_pct,
                s.mean.gpu_mem_mib / card,
                s.peak.gpu_mem_mib / card,
                s.mean.sm_pct,
                s.peak.sm_pct,
                s.mean.pcie_mbps,
                s.peak.pcie_mbps,
                p.interval_s,
            ];
            for (r, x) in span.iter_mut().zip(v) {
                *r = [r[0].min(x), r[1].max(x)];
            }
        }
    }

    /// The span over both built-in libraries, memory as a share of each one's reference GPU.
    fn builtin_span() -> [[f64; 2]; 10] {
        let mut span = [[f64::MAX, f64::MIN]; 10];
        for lib in [thesis::library(), lucid::library(None).unwrap()] {
            let card = lib.reference_gpu.as_ref().unwrap().memory_mib;
            widen(&mut span, &lib, card);
        }
        span
    }

    /// The module doc's table and the constants the generator aims within.
    #[test]
    fn span_matches_the_builtin_libraries() {
        let span = builtin_span();
        let near = |got: f64, want: f64, tol: f64| (got - want).abs() <= tol;
        let doc = [
            [8.0, 1200.0, 0.5],
            [5.55, 100.0, 0.01],
            [5.55, 100.0, 0.01],
            [0.0285, 0.820, 0.0005],
            [0.0289, 0.820, 0.0005],
            [5.55, 100.0, 0.01],
            [5.55, 100.0, 0.01],
            [0.0, 1788.0, 0.5],
            [0.0, 3000.0, 0.5],
            [1.0, 1.0, 0.0],
        ];
        for (k, (got, [lo, hi, tol])) in span.iter().zip(doc).enumerate() {
            assert!(near(got[0], lo, tol) && near(got[1], hi, tol), "row {k}: measured {got:?}, doc {lo}..{hi}");
        }
        // The generator's targets sit inside the span.
        assert_eq!(DURATION_S, [span[0][0], span[0][1]]);
        assert!(UTIL_LIGHT[0] >= span[1][0] && UTIL_HEAVY[1] <= span[1][1]);
        assert!(MEM_LIGHT[0] >= span[3][0] && MEM_CAP <= span[4][1] && MEM_CAP <= 0.95);
        assert_eq!(PCIE_MAX, span[8][1]);
    }

    #[test]
    fn same_seed_same_library_other_seed_differs() {
        let gpu = titanxp();
        let a = generated(7, GENERATED_DEFAULT_COUNT, &gpu).unwrap();
        let b = generated(7, GENERATED_DEFAULT_COUNT, &gpu).unwrap();
        assert_eq!(a.apps, b.apps);
        assert_eq!(a.classes, b.classes);
        assert_eq!(a.name, "generated:7");
        let c = generated(8, GENERATED_DEFAULT_COUNT, &gpu).unwrap();
        assert_eq!(c.apps.len(), a.apps.len());
        assert!(a.apps.values().zip(c.apps.values()).all(|(x, y)| x.samples != y.samples));
        let keys: Vec<&String> = a.apps.keys().collect();
        assert_eq!((keys[0].as_str(), keys[11].as_str()), ("gen7-00", "gen7-11"));
        assert_eq!(generated(7, 5, &gpu).unwrap().name, "generated:7:5");
    }

    #[test]
    fn every_profile_validates_and_fits_the_gpu() {
        for key in ["titanxp", "m60", "rtx3090", "h100"] {
            let gpu = crate::gpu::lookup(key).unwrap();
            for seed in 0..5 {
                let lib = generated(seed, 40, &gpu).unwrap();
                assert_eq!(lib.reference_gpu.as_ref(), Some(&gpu));
                for p in lib.apps.values() {
                    p.validate().unwrap();
                    p.check_fits_memory(0.95 * gpu.memory_mib).unwrap();
                    assert_eq!(p.recorded_on.as_ref().unwrap().gpu_name, gpu.name);
                }
            }
        }
    }

    /// Each app lands in the class combination it aimed at, so every class has a quarter or
    /// a half of the apps: at the default count, 6 each.
    #[test]
    fn every_class_has_members_at_the_default_count() {
        let gpu = titanxp();
        for seed in 0..20 {
            let lib = generated(seed, GENERATED_DEFAULT_COUNT, &gpu).unwrap();
            for c in WorkloadClass::ALL {
                assert!(lib.class_members(c).unwrap().len() >= 2, "seed {seed}: {c}");
            }
            for (i, app) in lib.apps.keys().enumerate() {
                let has = |c| lib.classes[&c].contains(app);
                assert_eq!(has(WorkloadClass::GpuHeavy), gpu_heavy(i), "seed {seed}: {app}");
                assert_eq!(has(WorkloadClass::MemHeavy), mem_heavy(i), "seed {seed}: {app}");
            }
        }
    }

    /// Durations, util and memory lie within the built-in span, and each library reaches
    /// within 2x of both ends (the upper end within 2x below).
    #[test]
    fn profiles_stay_within_and_cover_the_span() {
        let span = builtin_span();
        let gpu = titanxp();
        for seed in 0..10 {
            let lib = generated(seed, GENERATED_DEFAULT_COUNT, &gpu).unwrap();
            let mut got = [[f64::MAX, f64::MIN]; 10];
            widen(&mut got, &lib, gpu.memory_mib);
            // Within: durations, util, memory and the interval fully; SM and PCIe at the top
            // (SM follows util at 70-100% of it, so its floor can sit a little lower).
            for k in [0, 1, 2, 3, 4, 9] {
                assert!(got[k][0] >= span[k][0] - 1e-9 && got[k][1] <= span[k][1] + 1e-9, "seed {seed} row {k}");
            }
            for k in [5, 6, 7, 8] {
                assert!(got[k][1] <= span[k][1] + 1e-9, "seed {seed} row {k}: {:?}", got[k]);
            }
            // Cover: duration, mean util and mean memory reach both ends within 2x; peak util
            // and peak memory the top (a low-memory app's peak may sit well above its mean).
            for k in [0, 1, 3] {
                let ([lo, hi], [glo, ghi]) = (span[k], got[k]);
                assert!(glo <= 2.0 * lo && ghi >= 0.5 * hi, "seed {seed} row {k}: {glo}..{ghi} vs {lo}..{hi}");
            }
            for k in [2, 4] {
                assert!(got[k][1] >= 0.5 * span[k][1], "seed {seed} row {k}: {:?}", got[k]);
            }
        }
    }

    /// The assumed shapes: a warm-up with low util and rising memory, oscillating steady
    /// phases, and PCIe bursts well above the steady level.
    #[test]
    fn profiles_have_phases() {
        let lib = generated(3, 100, &titanxp()).unwrap();
        for p in lib.apps.values() {
            let (first, s) = (&p.samples[0], p.summary());
            assert!(first.gpu_util_pct < s.mean.gpu_util_pct, "{}: warm-up util", p.app.name);
            assert!(first.gpu_mem_mib < 0.5 * s.peak.gpu_mem_mib, "{}: memory fills", p.app.name);
            let mut pcie: Vec<f64> = p.samples.iter().map(|r| r.pcie_mbps).collect();
            pcie.sort_by(f64::total_cmp);
            assert!(s.peak.pcie_mbps > 1.3 * pcie[pcie.len() / 2], "{}: PCIe bursts", p.app.name);
            let changes = p.samples.windows(2).filter(|w| w[0].gpu_util_pct != w[1].gpu_util_pct).count();
            assert!(changes >= 2, "{}: util varies", p.app.name);
        }
        let kinds: Vec<AppKind> = lib.apps.values().map(|p| p.app.kind).collect();
        assert!(kinds.contains(&AppKind::Ml) && kinds.contains(&AppKind::Hpc));
    }

    #[test]
    fn resolve_parses_generated_names() {
        let gpu = titanxp();
        let lib = resolve("generated:7").unwrap();
        assert_eq!(lib.name, "generated:7");
        assert_eq!(lib.apps, generated(7, GENERATED_DEFAULT_COUNT, &gpu).unwrap().apps);
        assert_eq!(lib.reference_gpu, Some(gpu));
        let lib = resolve("  GENERATED:7:20 ").unwrap();
        assert_eq!((lib.name.as_str(), lib.apps.len()), ("generated:7:20", 20));
        // The name round-trips (a job set records it and is resolved by it later).
        assert_eq!(resolve(&lib.name).unwrap().apps, lib.apps);
        assert_eq!(resolve("Generated:0:1").unwrap().apps.len(), 1);
        assert_eq!(resolve(&format!("generated:{}:{GENERATED_MAX_COUNT}", u64::MAX)).unwrap().apps.len(), 1000);
        assert_eq!(parse_name("thesis").unwrap(), None);
        assert_eq!(parse_name("générated:1").unwrap(), None);
    }

    #[test]
    fn resolve_refuses_bad_generated_names() {
        let cases = [
            ("generated", "seed is missing"),
            ("generated:", "seed is missing"),
            ("generated:x", "the seed `x` is not a whole number"),
            ("generated:-1", "the seed `-1` is not a whole number"),
            ("generated:1:", "the count is missing"),
            ("generated:1:y", "the count `y` is not a whole number"),
            ("generated:1:0", "the count must be at least 1"),
            ("generated:1:1001", "the count 1001 is above the maximum of 1000"),
            ("generated:1:2:3", "too many parts"),
        ];
        for (name, want) in cases {
            let e = resolve(name).unwrap_err();
            let msg = e.to_string();
            assert!(e.is_usage(), "{name}: {msg}");
            assert!(msg.contains(want) && msg.contains(name) && msg.contains("generated:SEED:COUNT"), "{name}: {msg}");
        }
        let msg = resolve("no-such-library").unwrap_err().to_string();
        assert!(msg.contains("thesis, lucid, generated:SEED, generated:SEED:COUNT"), "{msg}");
    }

    #[test]
    fn generated_refuses_bad_arguments() {
        let gpu = titanxp();
        for (count, want) in [(0, "at least 1"), (GENERATED_MAX_COUNT + 1, "above the maximum")] {
            let msg = generated(1, count, &gpu).unwrap_err().to_string();
            assert!(msg.contains("count") && msg.contains(want), "{msg}");
        }
        for mem in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let bad = GpuSpec { memory_mib: mem, ..gpu.clone() };
            assert!(generated(1, 4, &bad).unwrap_err().to_string().contains("memory_mib"));
        }
        // More memory than any catalogue GPU: the profiles would not validate; an error, no panic.
        let huge = GpuSpec { memory_mib: 1e12, ..gpu };
        assert!(generated(1, 4, &huge).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn generation_never_panics_and_always_validates(seed in any::<u64>(), count in 1usize..50) {
            let gpu = titanxp();
            let lib = generated(seed, count, &gpu).unwrap();
            prop_assert_eq!(lib.apps.len(), count);
            for (i, p) in lib.apps.values().enumerate() {
                prop_assert!(p.validate().is_ok());
                prop_assert!(p.summary().peak.gpu_mem_mib <= 0.95 * gpu.memory_mib);
                prop_assert_eq!(lib.classes[&WorkloadClass::GpuHeavy].contains(&p.app.name), gpu_heavy(i));
                prop_assert_eq!(lib.classes[&WorkloadClass::MemHeavy].contains(&p.app.name), mem_heavy(i));
            }
        }

        #[test]
        fn parse_name_never_panics(s in "\\PC{0,40}", tail in "[0-9:xX -]{0,12}") {
            let _ = parse_name(&s);
            let _ = parse_name(&format!("generated:{tail}"));
        }
    }
}
