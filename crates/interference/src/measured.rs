//! `measured`: the measured speeds of a pair from the Lucid pairs table when exactly two jobs
//! whose apps (library keys) form a measured pair share a GPU; [`Contention`] otherwise.

use std::collections::HashMap;

use foldhash::fast::FixedState;
use std::path::Path;

use dqngpu_model::library::lucid::{PAIRS_CSV, PAIRS_FILE};
use dqngpu_model::{GpuSpec, ModelError};

use crate::pairs::{parse_pairs_csv, read_pairs, PairsFile};
use crate::{Contention, Interference, JobLoad, MIN_RATE};

/// Measured pair speeds by app key, both orders; repeated pairs are averaged. Speeds above 1
/// (measurement noise: sharing never really speeds a job up) are capped at 1.
#[derive(Debug, Clone, Default)]
pub struct PairTable {
    // foldhash: the simulator looks pairs up every step; SipHash made a 2-job call ~160 ns.
    ids: HashMap<String, u32, FixedState>,
    speeds: HashMap<(u32, u32), (f64, f64), FixedState>,
}

impl PairTable {
    /// Builds the table from a parsed pairs file.
    pub fn from_pairs(file: &PairsFile) -> Self {
        let mut t = PairTable::default();
        let mut sums: HashMap<(u32, u32), (f64, f64, u32)> = HashMap::new();
        for p in &file.pairs {
            let (a, b) = (t.id_of(&p.key1), t.id_of(&p.key2));
            for (k, s1, s2) in [((a, b), p.speed1, p.speed2), ((b, a), p.speed2, p.speed1)] {
                let e = sums.entry(k).or_insert((0.0, 0.0, 0));
                *e = (e.0 + s1, e.1 + s2, e.2 + 1);
            }
        }
        let cap = |s: f64| s.clamp(MIN_RATE, 1.0);
        t.speeds = sums.into_iter().map(|(k, (s1, s2, n))| (k, (cap(s1 / n as f64), cap(s2 / n as f64)))).collect();
        t
    }

    fn id_of(&mut self, key: &str) -> u32 {
        let next = self.ids.len() as u32;
        *self.ids.entry(key.to_string()).or_insert(next)
    }

    /// True when some measured pair holds `app` (the other apps always fall back).
    pub fn knows(&self, app: &str) -> bool {
        self.ids.contains_key(app)
    }

    /// The measured rates of `a` and `b` running together, if measured.
    #[inline]
    pub fn get(&self, a: &str, b: &str) -> Option<(f64, f64)> {
        let (ia, ib) = (self.ids.get(a)?, self.ids.get(b)?);
        self.speeds.get(&(*ia, *ib)).copied()
    }

    /// Number of distinct unordered pairs measured.
    pub fn len(&self) -> usize {
        self.speeds.keys().filter(|(a, b)| a <= b).count()
    }

    /// True when nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.speeds.is_empty()
    }
}

/// The measured model.
#[derive(Debug, Clone)]
pub struct Measured {
    table: PairTable,
    fallback: Contention,
}

impl Measured {
    /// A measured model over `table`, falling back to `fallback`.
    pub fn new(table: PairTable, fallback: Contention) -> Self {
        Measured { table, fallback }
    }

    /// Reads the table from a pairs file; falls back to the default contention model.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        Ok(Self::new(PairTable::from_pairs(&read_pairs(path)?), Contention::default()))
    }

    /// The table from the built-in Lucid pairs (`data/lucid/colocate_pairs.csv`).
    pub fn builtin() -> Result<Self, ModelError> {
        let pairs = parse_pairs_csv(PAIRS_CSV, Some(Path::new(PAIRS_FILE)))?;
        Ok(Self::new(PairTable::from_pairs(&pairs), Contention::default()))
    }

    /// The table.
    pub fn table(&self) -> &PairTable {
        &self.table
    }
}

impl Interference for Measured {
    fn name(&self) -> &str {
        "measured"
    }

    #[inline]
    fn rates(&self, gpu: &GpuSpec, jobs: &[JobLoad<'_>], rates: &mut [f64]) {
        if let ([a, b], [ra, rb]) = (jobs, &mut *rates) {
            if let Some((sa, sb)) = self.table.get(a.app, b.app) {
                *ra = sa;
                *rb = sb;
                return;
            }
        }
        self.fallback.rates(gpu, jobs, rates);
    }

    fn alone_at_full_speed(&self, gpu: &GpuSpec, peak: &dqngpu_model::Resources) -> bool {
        // One job never hits the pair table.
        self.fallback.alone_at_full_speed(gpu, peak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairs::parse_pairs_csv;
    use dqngpu_model::Resources;

    #[test]
    fn table_hit_both_orders_else_contention() {
        let text = "model1,dataset1,batchsize1,amp1,speed1,model2,dataset2,batchsize2,amp2,speed2\n\
                    A,X,32,0,0.8,B,Y,64,1,0.6\nA,X,32,0,0.7,B,Y,64,1,1.2\n";
        let m = Measured::new(PairTable::from_pairs(&parse_pairs_csv(text, None).unwrap()), Contention::default());
        assert_eq!(m.table().len(), 1);
        let gpu = dqngpu_model::gpu::lookup("rtx3090").unwrap();
        let d = Resources::new(100.0, 1.0, 100.0, 0.0);
        let (a, b) = ("A-X-bs32-amp0", "B-Y-bs64-amp1");
        let mut r = [0.0; 2];
        m.rates(&gpu, &[JobLoad { app: b, demand: &d }, JobLoad { app: a, demand: &d }], &mut r);
        // Averaged (0.75, 0.9) and reversed to follow the job order.
        assert!((r[0] - 0.9).abs() < 1e-12 && (r[1] - 0.75).abs() < 1e-12, "{r:?}");
        let mut c = [0.0; 2];
        m.rates(&gpu, &[JobLoad { app: a, demand: &d }, JobLoad { app: "other", demand: &d }], &mut r);
        Contention::default().rates(&gpu, &[JobLoad { app: a, demand: &d }, JobLoad { app: "o", demand: &d }], &mut c);
        assert_eq!(r, c);
    }
}
