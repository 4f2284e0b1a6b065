//! From uneven, gappy log readings to the fixed-interval samples of an [`AppProfile`].
//!
//! The profile lasts as long as the log: `round(span / dt)` samples (at least one), where the
//! span runs from the first reading to the last. Each reading holds from its own time until
//! the next one; the last reading marks the end of the log and holds only where the rounded
//! count reaches past it (less than half an interval). Output sample `i` covers
//! `[t0 + i*dt, t0 + (i+1)*dt)`, and the last sample also the log's rest where the count was
//! rounded down, so no reading is dropped. GPU util, SM and PCIe are the time-weighted mean
//! over a sample's window, GPU memory the maximum of the readings in force in it (an OOM
//! depends on the peak, so downsampling must not hide it), the last reading's counting toward
//! the last sample. Evenly spaced input at `dt` comes back as its readings but the last.
//! (The importers hand it each interval's values, not the raw readings:
//! `import::readings_over_intervals` says why.)
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

/// Why readings cannot be resampled at an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refused {
    /// More than [`MAX_SAMPLES`] samples (or no usable interval).
    TooManySamples,
    /// The log spans less than half an interval: one sample would stretch the job to a whole
    /// interval.
    ShorterThanInterval {
        /// First to last reading, s.
        span_s: f64,
    },
}

/// Resamples readings at strictly increasing `times` to every `dt` seconds from `times[0]`
/// (see the module's documentation for the rule).
pub fn resample(times: &[f64], values: &[[f64; 4]], dt: f64) -> Result<Vec<Resources>, Refused> {
    let len = times.len().min(values.len());
    if len == 0 || !(dt.is_finite() && dt > 0.0) {
        return Err(Refused::TooManySamples);
    }
    let (t0, t_last) = (times[0], times[len - 1]);
    let count = ((t_last - t0) / dt).round();
    if !count.is_finite() || count < 0.0 || count > MAX_SAMPLES as f64 {
        return Err(Refused::TooManySamples);
    }
    // A single reading is a one-sample profile; several spanning less than half an interval
    // would be stretched to a whole one.
    if count == 0.0 && len > 1 {
        return Err(Refused::ShorterThanInterval { span_s: t_last - t0 });
    }
    let n = (count as usize).max(1);
    let end = (t0 + n as f64 * dt).max(t_last);
    let mem = index_of(Resource::GpuMem);
    let mut out = Vec::with_capacity(n);
    let mut k = 0;
    for i in 0..n {
        let a = t0 + i as f64 * dt;
        let b = if i + 1 == n { end } else { a + dt };
        while k + 1 < len && times[k + 1] <= a {
            k += 1;
        }
        let mut acc = [0.0; 4];
        let mut covered = 0.0;
        let mut mem_max: Option<f64> = None;
        let mut j = k;
        loop {
            let seg_end = if j + 1 < len { times[j + 1] } else { f64::INFINITY };
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
        if i + 1 == n {
            v[mem] = v[mem].max(values[len - 1][mem]);
        }
        let mut r = Resources::from_array(v);
        r.gpu_util_pct = r.gpu_util_pct.clamp(0.0, 100.0);
        r.sm_pct = r.sm_pct.clamp(0.0, 100.0);
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(u: f64, m: f64) -> [f64; 4] {
        [u, m, u, 1.0]
    }

    #[test]
    fn even_input_comes_back_as_its_readings_but_the_last() {
        let times = [10.0, 10.5, 11.0, 11.5];
        let vals = [v(10.0, 100.0), v(20.0, 300.0), v(30.0, 200.0), v(40.0, 50.0)];
        let out = resample(&times, &vals, 0.5).unwrap();
        // 1.5 s of log is 3 samples, not 4 (the last reading marks the end).
        assert_eq!(out.len(), 3);
        for (o, e) in out.iter().zip(vals) {
            assert_eq!(o.to_array(), e);
        }
        // ...but its memory still counts toward the last sample's peak.
        let peak_last = [vals[0], vals[1], vals[2], v(40.0, 900.0)];
        assert_eq!(resample(&times, &peak_last, 0.5).unwrap()[2].gpu_mem_mib, 900.0);
    }

    #[test]
    fn downsampling_averages_util_and_keeps_peak_memory() {
        let times = [0.0, 1.0, 2.0, 3.0];
        let vals = [v(10.0, 100.0), v(30.0, 900.0), v(50.0, 200.0), v(70.0, 300.0)];
        let out = resample(&times, &vals, 2.0).unwrap();
        // span 3 s / 2 s rounds to 2 samples; the last reading holds from 3 s to 4 s.
        assert_eq!(out.len(), 2);
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
        assert_eq!(out.len(), 1);
        assert!((out[0].gpu_util_pct - 25.0).abs() < 1e-9);
    }

    #[test]
    fn a_longer_interval_never_stretches_the_job() {
        // 100 s of readings every second at 60 s: 2 samples (120 s), not 3 (180 s).
        let times: Vec<f64> = (0..=100).map(f64::from).collect();
        let vals: Vec<[f64; 4]> = (0..=100).map(|i| v(if i < 60 { 10.0 } else { 90.0 }, f64::from(i))).collect();
        let out = resample(&times, &vals, 60.0).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].gpu_util_pct, out[1].gpu_util_pct), (10.0, 90.0));
        // 80 s at 60 s rounds down to one sample, which also covers the last 20 s: nothing dropped.
        let out = resample(&times[..=80], &vals[..=80], 60.0).unwrap();
        assert_eq!(out.len(), 1);
        assert!((out[0].gpu_util_pct - (60.0 * 10.0 + 20.0 * 90.0) / 80.0).abs() < 1e-9, "{:?}", out[0]);
        assert_eq!(out[0].gpu_mem_mib, 80.0);
        // 5 s of log at an hour would be an hour-long job: refused.
        assert_eq!(resample(&times[..=5], &vals[..=5], 3600.0), Err(Refused::ShorterThanInterval { span_s: 5.0 }));
        // One reading is one sample of the interval asked for.
        assert_eq!(resample(&[3.0], &[v(5.0, 5.0)], 3600.0).unwrap().len(), 1);
    }

    #[test]
    fn median_gap_and_guards() {
        assert_eq!(median_gap(&[0.0, 1.0, 2.0, 10.0]), Some(1.0));
        assert_eq!(median_gap(&[0.0, 1.0, 3.0]), Some(1.5));
        assert_eq!(median_gap(&[5.0]), None);
        assert_eq!(resample(&[0.0, 1e9], &[v(1.0, 1.0); 2], 1.0), Err(Refused::TooManySamples));
        assert_eq!(resample(&[0.0], &[v(1.0, 1.0)], 0.0), Err(Refused::TooManySamples));
    }

    proptest::proptest! {
        /// The profile lasts the log's span to within half an interval (one sample at least), and
        /// keeps its memory peak.
        #[test]
        fn the_profile_lasts_as_long_as_the_log(
            gaps in proptest::collection::vec(0.01f64..10.0, 1..200),
            mems in proptest::collection::vec(0.0f64..1e5, 200),
            dt in 0.05f64..30.0,
        ) {
            let times: Vec<f64> = std::iter::once(0.0).chain(gaps.iter().scan(0.0, |t, g| { *t += g; Some(*t) })).collect();
            let vals: Vec<[f64; 4]> = times.iter().zip(&mems).map(|(_, &m)| v(50.0, m)).collect();
            let span = times[times.len() - 1];
            match resample(&times, &vals, dt) {
                Ok(out) => {
                    let solo = out.len() as f64 * dt;
                    proptest::prop_assert!((solo - span).abs() <= dt / 2.0 + 1e-9, "{} samples of {dt} for {span} s", out.len());
                    let peak = |it: &mut dyn Iterator<Item = f64>| it.fold(0.0, f64::max);
                    proptest::prop_assert_eq!(peak(&mut out.iter().map(|r| r.gpu_mem_mib)), peak(&mut vals.iter().map(|r| r[1])));
                }
                Err(e) => proptest::prop_assert_eq!(e, Refused::ShorterThanInterval { span_s: span }),
            }
        }
    }
}
