//! The time-aligned memory rule's answers (and the budget's) kept across the decision rounds
//! of one search: the costliest part of a decision round. `dqngpu-plan` asks its scorer at
//! the same cluster states again and again: each row's whole decision asks it at the
//! decision's moment, and its futures pass through the same GPUs in the same states (a GPU no
//! row touched steps alike until a finish elsewhere cuts a step), so most questions repeat
//! one asked before (three in four at `decision_latency`'s defaults). An answer is a pure
//! function of the GPU, the jobs on it (app, profile, progress, time lost) and the model,
//! step and budget of the policy that asks; the memo is keyed by all but the policy's, which
//! it belongs to ([`super::ScorerPolicy`] drops it when given another caller).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use foldhash::fast::FixedState;

use dqngpu_model::{AppProfile, GpuSpec};
use dqngpu_sim::budget::BudgetJob;

/// One question of [`super::Round`]'s time-aligned rule: the GPU, whether the peaks alone fit
/// (the rule checks drift only where they do not), how many of the jobs run there already (the
/// drift moves those alone: a job started at this very moment, with no progress and nothing
/// lost, reads as one placed this round but is drifted where that one is not), and the jobs
/// that would run there, in order (profiles by address).
pub(super) struct FitQuestion<'q> {
    pub(super) spec: &'q GpuSpec,
    pub(super) peak_fits: bool,
    pub(super) residents: usize,
    pub(super) jobs: &'q [BudgetJob<'q>],
}

/// A job in the memo's words: its app (by its index among those the memo knows; `OWN`: the
/// profile's own app name), profile (by address), and progress and time lost (as bits).
type Job = (u32, usize, u64, u64);

/// The app of a job named as its profile names it (the common case, with no lookup).
const OWN: u32 = u32::MAX;

/// A question answered, in the memo's words (so that an answer is one small allocation).
#[derive(Debug)]
struct Answer {
    spec: u32,
    peak_fits: bool,
    residents: usize,
    jobs: Vec<Job>,
    fits: bool,
}

/// What the answers name: the GPUs, the apps, and the profiles, each held so that no other
/// profile can take its address while the memo lasts; and the answers, by the hash of their
/// question.
#[derive(Debug, Default)]
struct Known {
    specs: Vec<GpuSpec>,
    apps: Vec<String>,
    profiles: HashMap<usize, Arc<AppProfile>, FixedState>,
    answers: HashMap<u64, Vec<Answer>, FixedState>,
    count: usize,
}

/// Answers kept at most; past it the memo starts afresh (a bound on memory for a long-running
/// service, far above what one decision asks).
const CAPACITY: usize = 1 << 16;

/// GPU models and app names kept at most (each lookup scans them); past either the memo
/// starts afresh. A Kubernetes extender names a pod of an unknown app by the pod, so the apps
/// it asks about could grow with every pod, and a GPU whose memory is no number never equals
/// itself, so its spec would be kept again at every answer.
const NAMES: usize = 256;

impl Known {
    fn spec(&self, spec: &GpuSpec) -> Option<u32> {
        self.specs.iter().position(|s| s == spec).map(|i| i as u32)
    }

    fn app(&self, app: &str, profile: &AppProfile) -> Option<u32> {
        if app == profile.app.name {
            return Some(OWN);
        }
        self.apps.iter().position(|a| a == app).map(|i| i as u32)
    }

    /// A job of a question in the memo's words, if its app is known.
    fn word(&self, j: &BudgetJob<'_>) -> Option<Job> {
        let profile = j.profile as *const AppProfile as usize;
        Some((self.app(j.app, j.profile)?, profile, j.progress_s.to_bits(), j.lost_s.to_bits()))
    }

    /// The question's jobs in the memo's words, if every app is known.
    fn words(&self, q: &FitQuestion<'_>) -> Option<Vec<Job>> {
        q.jobs.iter().map(|j| self.word(j)).collect()
    }

    /// (Reads the question's words twice, to hash and to compare, rather than keep them: a
    /// lookup allocates nothing.)
    fn get(&self, q: &FitQuestion<'_>) -> Option<bool> {
        let spec = self.spec(q.spec)?;
        let mut unknown = false;
        let words = q.jobs.iter().map_while(|j| {
            let w = self.word(j);
            unknown |= w.is_none();
            w
        });
        let key = hash(spec, q.peak_fits, q.residents, words);
        if unknown {
            return None;
        }
        let same_jobs = |a: &Answer| {
            a.jobs.len() == q.jobs.len() && a.jobs.iter().zip(q.jobs).all(|(w, j)| self.word(j) == Some(*w))
        };
        let bucket = self.answers.get(&key)?;
        bucket
            .iter()
            .find(|a| a.spec == spec && a.peak_fits == q.peak_fits && a.residents == q.residents && same_jobs(a))
            .map(|a| a.fits)
    }

    /// Keeps `fits` for `q`; `profiles` are its jobs' (in order), checked to be.
    fn put(&mut self, q: &FitQuestion<'_>, profiles: &[&Arc<AppProfile>], fits: bool) {
        // The profiles must be the question's own (their addresses are its words).
        let own =
            profiles.len() == q.jobs.len() && profiles.iter().zip(q.jobs).all(|(p, j)| std::ptr::eq(&***p, j.profile));
        if !own {
            return;
        }
        if self.count >= CAPACITY || self.specs.len() >= NAMES || self.apps.len() >= NAMES {
            *self = Known::default();
        }
        if self.spec(q.spec).is_none() {
            self.specs.push(q.spec.clone());
        }
        for j in q.jobs {
            if self.app(j.app, j.profile).is_none() {
                self.apps.push(j.app.to_string());
            }
        }
        for p in profiles {
            self.profiles.entry(Arc::as_ptr(p) as usize).or_insert_with(|| Arc::clone(p));
        }
        let (Some(spec), Some(jobs)) = (self.spec(q.spec), self.words(q)) else { return };
        let key = hash(spec, q.peak_fits, q.residents, jobs.iter().copied());
        self.answers.entry(key).or_default().push(Answer {
            spec,
            peak_fits: q.peak_fits,
            residents: q.residents,
            jobs,
            fits,
        });
        self.count += 1;
    }
}

/// FxHash's multiplier.
const MIX: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// A hash of a question in the memo's words (to find its bucket; answers are told apart by
/// comparing the words), mixed as rustc's FxHash mixes words.
fn hash(spec: u32, peak_fits: bool, residents: usize, jobs: impl Iterator<Item = Job>) -> u64 {
    let mut h = 0u64;
    let mut mix = |w: u64| h = (h.rotate_left(5) ^ w).wrapping_mul(MIX);
    mix(u64::from(spec) << 1 | u64::from(peak_fits));
    mix(residents as u64);
    for (app, profile, progress, lost) in jobs {
        mix(u64::from(app));
        mix(profile as u64);
        mix(progress);
        mix(lost);
    }
    h
}

/// The memo.
#[derive(Debug, Default)]
pub struct FitMemo {
    known: RwLock<Known>,
    /// Questions answered from the memo.
    hits: AtomicU64,
}

impl FitMemo {
    /// The time-aligned answer kept for `q`, if any.
    pub(super) fn fits(&self, q: &FitQuestion<'_>) -> Option<bool> {
        let fits = self.known.read().ok()?.get(q)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(fits)
    }

    /// How many questions were answered from the memo.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Keeps `fits` for `q`, whose jobs' profiles are `profiles` (in order).
    pub(super) fn put(&self, q: &FitQuestion<'_>, fits: bool, profiles: &[&Arc<AppProfile>]) {
        if let Ok(mut known) = self.known.write() {
            known.put(q, profiles, fits);
        }
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.known.read().map_or(0, |k| k.count)
    }

    /// True when no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_a_memo_keeps_stay_bounded() {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let profile: Arc<AppProfile> = Arc::clone(lib.apps.values().next().unwrap());
        let titanxp = dqngpu_model::gpu::lookup("titanxp").unwrap();
        let no_number = GpuSpec { memory_mib: f64::NAN, ..titanxp.clone() };
        let memo = FitMemo::default();
        let ask = |spec: &GpuSpec, app: &str| {
            let jobs = [BudgetJob { app, profile: &profile, progress_s: 0.0, lost_s: 0.0 }];
            let q = FitQuestion { spec, peak_fits: false, residents: 0, jobs: &jobs };
            memo.put(&q, true, &[&profile]);
            memo.fits(&q)
        };
        // A pod named for itself at every ask, as an extender names a pod of an unknown app.
        for k in 0..3 * NAMES {
            assert_eq!(ask(&titanxp, &format!("pod-{k}")), Some(true));
        }
        // A GPU whose memory is no number, never equal to itself: never answered from the memo.
        for _ in 0..3 * NAMES {
            assert_eq!(ask(&no_number, &profile.app.name), None);
        }
        let known = memo.known.read().unwrap();
        assert!(
            known.apps.len() <= NAMES && known.specs.len() <= NAMES,
            "{} apps, {} specs",
            known.apps.len(),
            known.specs.len()
        );
    }

    /// Two questions with one hash (the second's last word, its last job's time lost as bits,
    /// chosen to collide by undoing the last mixing step) are told apart: the memo answers a
    /// question from its own words, never from its hash alone.
    #[test]
    fn a_memo_tells_apart_two_questions_with_one_hash() {
        let lib = dqngpu_model::library::resolve("thesis").unwrap();
        let profile: Arc<AppProfile> = Arc::clone(lib.apps.values().next().unwrap());
        let titanxp = dqngpu_model::gpu::lookup("titanxp").unwrap();
        let job =
            |progress_s: f64, lost_s: f64| BudgetJob { app: &profile.app.name, profile: &profile, progress_s, lost_s };
        let memo = FitMemo::default();
        let asked = [job(10.0, 0.0), job(0.0, 0.0)];
        let q = FitQuestion { spec: &titanxp, peak_fits: false, residents: 1, jobs: &asked };
        memo.put(&q, true, &[&profile, &profile]);
        assert_eq!(memo.fits(&q), Some(true));
        let key = |q: &FitQuestion<'_>| {
            let known = memo.known.read().unwrap();
            hash(known.spec(q.spec).unwrap(), q.peak_fits, q.residents, known.words(q).unwrap().into_iter())
        };
        // MIX is odd: its inverse modulo 2^64 by Newton's steps (each doubles the bits right).
        let inverse = (0..6).fold(1u64, |x: u64, _| x.wrapping_mul(2u64.wrapping_sub(MIX.wrapping_mul(x))));
        assert_eq!(inverse.wrapping_mul(MIX), 1);
        // The last step is h = (rotl(h', 5) ^ w) * MIX: with w = 0 it gives rotl(h', 5) * MIX,
        // so the w that lands on the first question's hash is (target ^ that) undone.
        let with_zero = [job(11.0, 0.0), job(0.0, 0.0)];
        let zero = key(&FitQuestion { jobs: &with_zero, ..q });
        let w = key(&q).wrapping_mul(inverse) ^ zero.wrapping_mul(inverse);
        let other = [job(11.0, 0.0), job(0.0, f64::from_bits(w))];
        let collides = FitQuestion { jobs: &other, ..q };
        assert_eq!(key(&collides), key(&q), "the question built to collide does not");
        assert_eq!(memo.fits(&collides), None, "answered from the hash alone");
    }
}
