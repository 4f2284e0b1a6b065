//! From per-pod records to the paper's 131-point curves, as the simulator's analysis scripts
//! (`experiments/analysis/merge_alloc_discrete.py`, `merge_frag_discrete.py`) build them: each
//! record's arrived share of capacity is rounded to a whole percent (half to even, as Python's
//! `round`), its allocation to two decimals; the point at `a`% is the mean over the records at
//! `a`, else over those within one percent of it, else missing.

/// The cluster after one pod was tried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    /// GPU milli requested by every pod tried so far, failed ones included.
    pub arrived_milli: i64,
    /// GPU milli allocated.
    pub used_milli: i64,
    /// GPU milli fragmented against the typical pods.
    pub frag_milli: f64,
}

/// Points of a curve: 0..=130 percent arrived.
pub const POINTS: usize = 131;

fn round2(x: f64) -> f64 {
    (x * 100.0).round_ties_even() / 100.0
}

/// The allocation and fragmentation curves (each % of capacity) of `records` on `gpus` GPUs.
pub fn discretize(records: &[Record], gpus: u64) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let g = gpus as f64;
    // Per whole percent arrived: (count, sum of rounded allocation, sum of fragmentation).
    let mut buckets: Vec<(usize, f64, f64)> = vec![(0, 0.0, 0.0); POINTS + 1];
    for r in records {
        let a = (r.arrived_milli as f64 / g / 10.0).round_ties_even();
        if !(0.0..=(POINTS as f64)).contains(&a) {
            continue;
        }
        let b = &mut buckets[a as usize];
        b.0 += 1;
        b.1 += round2(r.used_milli as f64 / g / 10.0);
        b.2 += r.frag_milli;
    }
    let mut alloc = vec![None; POINTS];
    let mut frag = vec![None; POINTS];
    for a in 0..POINTS {
        let window: &[usize] = &[a];
        let pick = |idx: &[usize]| {
            let (n, s, f) = idx
                .iter()
                .filter_map(|&i| buckets.get(i))
                .fold((0, 0.0, 0.0), |acc, b| (acc.0 + b.0, acc.1 + b.1, acc.2 + b.2));
            (n > 0).then(|| (round2(s / n as f64), round2(100.0 * (f / n as f64) / 1000.0 / g)))
        };
        let got = pick(window).or_else(|| {
            let lo = a.saturating_sub(1);
            let idx: Vec<usize> = (lo..=a + 1).collect();
            pick(&idx)
        });
        if let Some((al, fr)) = got {
            alloc[a] = Some(al);
            frag[a] = Some(fr);
        }
    }
    (alloc, frag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_average_records_and_fill_gaps_from_neighbours() {
        // 100 GPUs = 100_000 milli; 1% = 1000 milli.
        let recs = [
            Record { arrived_milli: 400, used_milli: 400, frag_milli: 0.0 },
            Record { arrived_milli: 600, used_milli: 600, frag_milli: 0.0 },
            Record { arrived_milli: 3000, used_milli: 2000, frag_milli: 5000.0 },
        ];
        let (a, f) = discretize(&recs, 100);
        assert_eq!(a[0], Some(0.4)); // 0.4% rounds to 0
        assert_eq!(a[1], Some(0.6));
        assert_eq!(a[2], Some(1.3)); // no record at 2: mean of 1 and 3
        assert_eq!(a[3], Some(2.0));
        assert_eq!(f[3], Some(5.0));
        assert_eq!(a[5], None);
    }

    #[test]
    fn half_percent_rounds_to_even() {
        let recs = [Record { arrived_milli: 2500, used_milli: 0, frag_milli: 0.0 }];
        let (a, _) = discretize(&recs, 100);
        assert_eq!(a[2], Some(0.0));
        assert_eq!(a[3], Some(0.0)); // from the neighbour window
    }
}
