//! From uneven, gappy log readings to the fixed-interval samples of an [`AppProfile`].
//!
//! Each reading holds from its own time until the next reading (the last one for one more
//! interval). Output sample `i` covers `[t0 + i*dt, t0 + (i+1)*dt)`: GPU util, SM and PCIe are
//! the time-weighted mean over that window, GPU memory the maximum (an OOM depends on the peak,
//! so downsampling must not hide it). Evenly spaced input at `dt` comes back unchanged.
//!
//! [`AppProfile`]: dqngpu_model::AppProfile

use dqngpu_model::{Resource, Resources};

/// The most samples one imported profile may have (guards against a tiny `--interval-s`).
pub const MAX_SAMPLES: usize = 1_000_000;

/// One reading of one GPU at one instant, parsed from a log; any value may be missing.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Time, seconds (any origin; only differences matter).
    pub t_s: f64,
    /// 1-based line of the log it came from (for error messages).
    pub line: u64,
    /// GPU index.
    pub gpu: u32,
    /// Values in [`Resource::ALL`] order: util %, memory MiB, SM %, PCIe TX+RX MB/s.
    pub values: [Option<f64>; 4],
}

impl Observation {
    /// The value of `r`, if the log had it.
    pub fn get(&self, r: Resource) -> Option<f64> {
        self.values[index_of(r)]
    }
}

/// Position of `r` in [`Resource::ALL`].
pub fn index_of(r: Resource) -> usize {
    Resource::ALL.iter().position(|x| *x == r).unwrap_or(0)
}

/// The median of the gaps between consecutive times (`None` for fewer than two times).
pub fn median_gap(times: &[f64]) -> Option<f64> {
    let mut gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).filter(|g| g.is_finite()).collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_by(f64::total_cmp);
    let m = gaps.len() / 2;
    Some(if gaps.len() % 2 == 1 { gaps[m] } else { (gaps[m - 1] + gaps[m]) / 2.0 })
}

/// Resamples readings at strictly increasing `times` to every `dt` seconds from `times[0]`.
/// Returns `None` when that would make more than [`MAX_SAMPLES`] samples.
pub fn resample(times: &[f64], values: &[[f64; 4]], dt: f64) -> Option<Vec<Resources>> {
    let len = times.len().min(values.len());
    if len == 0 || !(dt.is_finite() && dt > 0.0) {
        return None;
    }
    let t0 = times[0];
    let span = ((times[len - 1] - t0) / dt).round();
    if !span.is_finite() || span < 0.0 || span >= MAX_SAMPLES as f64 {
        return None;
    }
    let n = span as usize + 1;
    let end = t0 + n as f64 * dt;
    let mem = index_of(Resource::GpuMem);
    let mut out = Vec::with_capacity(n);
    let mut k = 0;
    for i in 0..n {
        let a = t0 + i as f64 * dt;
        let b = a + dt;
        while k + 1 < len && times[k + 1] <= a {
            k += 1;
        }
        let mut acc = [0.0; 4];
        let mut covered = 0.0;
        let mut mem_max: Option<f64> = None;
        let mut j = k;
        loop {
            let seg_end = if j + 1 < len { times[j + 1] } else { end.max(b) };
            let w = seg_end.min(b) - times[j].max(a);
            if w > 1e-9 * dt {
                for (c, v) in acc.iter_mut().zip(values[j]) {
                    *c += w * v;
                }
                covered += w;
                mem_max = Some(mem_max.map_or(values[j][mem], |m: f64| m.max(values[j][mem])));
            }
            if seg_end >= b || j + 1 >= len {
                break;
            }
            j += 1;
        }
        let mut v = if covered > 0.0 { acc.map(|x| x / covered) } else { values[k] };
        v[mem] = mem_max.unwrap_or(v[mem]);
        let mut r = Resources::from_array(v);
        r.gpu_util_pct = r.gpu_util_pct.clamp(0.0, 100.0);
        r.sm_pct = r.sm_pct.clamp(0.0, 100.0);
        out.push(r);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(u: f64, m: f64) -> [f64; 4] {
        [u, m, u, 1.0]
    }

    #[test]
    fn even_input_comes_back_unchanged() {
        let times = [10.0, 10.5, 11.0, 11.5];
        let vals = [v(10.0, 100.0), v(20.0, 300.0), v(30.0, 200.0), v(40.0, 50.0)];
        let out = resample(&times, &vals, 0.5).unwrap();
        assert_eq!(out.len(), 4);
        for (o, e) in out.iter().zip(vals) {
            assert_eq!(o.to_array(), e);
        }
    }

    #[test]
    fn downsampling_averages_util_and_keeps_peak_memory() {
        let times = [0.0, 1.0, 2.0, 3.0];
        let vals = [v(10.0, 100.0), v(30.0, 900.0), v(50.0, 200.0), v(70.0, 300.0)];
        let out = resample(&times, &vals, 2.0).unwrap();
        // span 3 s / 2 s rounds to 2 intervals -> 3 samples; the last holds the last reading.
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].gpu_util_pct, 20.0);
        assert_eq!(out[0].gpu_mem_mib, 900.0);
        assert_eq!(out[1].gpu_util_pct, 60.0);
        assert_eq!(out[1].gpu_mem_mib, 300.0);
    }

    #[test]
    fn uneven_input_is_time_weighted() {
        let times = [0.0, 0.25, 1.0];
        let vals = [v(100.0, 1.0), v(0.0, 1.0), v(50.0, 1.0)];
        let out = resample(&times, &vals, 1.0).unwrap();
        assert_eq!(out.len(), 2);
        assert!((out[0].gpu_util_pct - 25.0).abs() < 1e-9);
        assert_eq!(out[1].gpu_util_pct, 50.0);
    }

    #[test]
    fn median_gap_and_guards() {
        assert_eq!(median_gap(&[0.0, 1.0, 2.0, 10.0]), Some(1.0));
        assert_eq!(median_gap(&[0.0, 1.0, 3.0]), Some(1.5));
        assert_eq!(median_gap(&[5.0]), None);
        assert!(resample(&[0.0, 1e9], &[v(1.0, 1.0); 2], 1.0).is_none());
        assert!(resample(&[0.0], &[v(1.0, 1.0)], 0.0).is_none());
    }
}
