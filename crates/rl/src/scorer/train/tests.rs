//! Tests of the training: the recipe's defaults, the makespan guard, the episodes' classes
//! and the unpadded batches.

use std::sync::Arc;

use candle_core::{Device, Tensor, D};
use dqngpu_model::{AppLibrary, ClusterSpec};
use dqngpu_sim::{SimConfig, SimResult};
use rand::Rng;

use super::episode::run;
use super::gradient::{gradients, log_probs};
use super::guard::{cost, guard_weight, guarded, rule_runs, Rules};
use super::*;

/// A recipe stored before the improvement rounds' near-tie was a setting (a checkpoint's
/// `train` metadata) reads as the 1% it trained with; the field round-trips.
#[test]
fn a_recipe_from_before_the_improvement_near_tie_reads_as_the_old_tie() {
    let strict = ScorerRecipe { improvement_near_tie: 0.0, ..ScorerRecipe::default() };
    let mut v = serde_json::to_value(&strict).unwrap();
    let back: ScorerRecipe = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(back.improvement_near_tie, 0.0);
    v.as_object_mut().unwrap().remove("improvement_near_tie");
    let old: ScorerRecipe = serde_json::from_value(v).unwrap();
    assert_eq!(old.improvement_near_tie, NEAR_TIE);
}

/// The guard charges nothing up to 1% over the best rule's makespan, then W x the best
/// rule's JCT per share of makespan beyond it; under the makespan objective it is moot.
#[test]
fn the_guard_charges_only_makespan_past_its_margin() {
    let g = Guard { jct: 200.0, makespan: 1000.0, weight: 2.0 };
    assert_eq!(g.penalty(900.0), 0.0);
    assert_eq!(g.penalty(1009.0), 0.0);
    assert!(g.penalty(1011.0) > 0.0);
    let over = g.penalty(1110.0);
    assert!((over - 2.0 * 200.0 * 0.10).abs() < 1e-9, "{over}");
    assert!(Guard { weight: 1.0, ..g }.penalty(1110.0) < over);
    // A degenerate reference charges nothing rather than dividing by zero.
    assert_eq!(Guard { makespan: 0.0, ..g }.penalty(1110.0), 0.0);
}

/// `guarded` puts on every episode the lowest mean JCT and the lowest makespan the rules
/// reach there (possibly from different rules); there is no guard at weight 0, under the
/// makespan objective or without rules.
#[test]
fn the_guard_holds_the_best_rules_jct_and_makespan_per_episode() {
    let lib = Arc::new(dqngpu_model::library::resolve("thesis").unwrap());
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let classes = dqngpu_model::WorkloadClass::ALL;
    let at_zero = dqngpu_sim::Arrivals::AllAtZero;
    let eps = episodes(&[lib], &cluster, &classes, 10, at_zero, 5, 42).unwrap();
    let task = ScorerTask {
        train: eps.clone(),
        validation: eps[..2].to_vec(),
        interference: Arc::from(dqngpu_interference::by_name("contention").unwrap()),
        config: SimConfig::default(),
    };
    let recipe = ScorerRecipe::default();
    let rules = Rules::new(&task, &recipe, 1).unwrap();
    let off = ScorerRecipe { makespan_guard: 0.0, ..recipe.clone() };
    assert!(guard_weight(Objective::Jct, &off, &rules).is_none());
    assert!(guard_weight(Objective::Makespan, &recipe, &rules).is_none());
    let none = Rules::new(&task, &ScorerRecipe { experts: Vec::new(), ..recipe.clone() }, 1).unwrap();
    assert!(guard_weight(Objective::Jct, &recipe, &none).is_none());
    let runs = rule_runs(&task, &task.train, &rules).unwrap();
    assert!(guarded(&task.train, &runs, None).iter().all(|e| e.guard.is_none()));
    let g = guarded(&task.train, &runs, guard_weight(Objective::Jct, &recipe, &rules));
    assert_eq!(g.len(), 5);
    for (ep, plain) in g.iter().zip(&task.train) {
        let guard = ep.guard.expect("every training episode is guarded");
        assert_eq!(guard.weight, recipe.makespan_guard);
        let runs: Vec<SimResult> =
            rules.for_episode(&task, plain).iter().map(|r| run(&task, plain, &mut |v| r.decide(v)).unwrap()).collect();
        assert!(runs.iter().all(|r| guard.jct <= r.mean_jct_s && guard.makespan <= r.makespan_s));
        assert!(runs.iter().any(|r| r.mean_jct_s == guard.jct));
        assert!(runs.iter().any(|r| r.makespan_s == guard.makespan));
        // The best rule on JCT is charged only for makespan past the margin.
        let best = runs.iter().find(|r| r.mean_jct_s == guard.jct).unwrap();
        let charged = cost(Objective::Jct, ep, best);
        assert!(charged >= best.mean_jct_s);
        assert_eq!(charged > best.mean_jct_s, best.makespan_s > guard.makespan * (1.0 + GUARD_MARGIN));
        assert_eq!(cost(Objective::Makespan, ep, best), best.makespan_s);
    }
}

/// Fifteen libraries with two sets each draw every class six times (each library goes on
/// where the last one's classes stopped), and a library's sets keep their seeds.
#[test]
fn few_sets_per_library_still_cover_every_class() {
    let classes = dqngpu_model::WorkloadClass::ALL;
    let libs: Vec<Arc<AppLibrary>> =
        (1..=15).map(|i| Arc::new(dqngpu_model::library::resolve(&format!("generated:{i}")).unwrap())).collect();
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let eps = episodes(&libs, &cluster, &classes, 6, dqngpu_sim::Arrivals::AllAtZero, 2, 7).unwrap();
    assert_eq!(eps.len(), 30);
    for c in classes {
        let n = eps.iter().filter(|e| e.set.class == Some(c)).count();
        assert_eq!(n, 6, "{c:?}");
    }
    for pair in eps.chunks(2) {
        assert_eq!(pair[0].set.seed, Some(7));
        assert_eq!(pair[1].set.seed, Some(8));
    }
}

/// Steps of very different widths, features drawn from `seed`; each step's first row is
/// its label.
fn steps(widths: &[usize], seed: u64) -> Vec<Step> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    widths
        .iter()
        .map(|&n| Step {
            rows: (0..n * FEATURES).map(|_| rng.gen_range(-1.0f32..1.0)).collect(),
            n,
            chosen: vec![0],
            weight: 1.0,
        })
        .collect()
}

/// Log-softmax over one step's rows, straight from the network (no batching).
fn alone(net: &PolicyNet, s: &Step) -> Tensor {
    let x = Tensor::from_vec(s.rows[..s.n * FEATURES].to_vec(), (s.n, FEATURES), &Device::Cpu).unwrap();
    let logits = net.logits(&x).unwrap().flatten_all().unwrap();
    candle_nn::ops::log_softmax(&logits, D::Minus1).unwrap()
}

/// The unpadded batch gives each step the log-softmax of its own rows, as the network
/// scores them alone, with nothing on the slots past its rows; and the gradients of a
/// batch loss are the sums of the steps' own.
#[test]
fn unpadded_batches_score_and_differentiate_each_step_as_alone() {
    let net = PolicyNet::new(FEATURES, &[32, 16], 1, Head::Joint, 7).unwrap();
    let mut data = steps(&[1, 3, 40, 7, 2], 11);
    data[2].chosen = vec![5];
    let all: Vec<&Step> = data.iter().collect();
    let (lp, width) = log_probs(&net, &all).unwrap();
    assert_eq!(width, 40);
    let logp = lp.to_vec2::<f32>().unwrap();
    for (k, s) in data.iter().enumerate() {
        let want = alone(&net, s).to_vec1::<f32>().unwrap();
        for j in 0..s.n {
            assert!((logp[k][j] - want[j]).abs() < 1e-5, "step {k} row {j}: {} vs {}", logp[k][j], want[j]);
        }
        assert!(logp[k][s.n..].iter().all(|&v| v < -1e8), "step {k}: a slot past its rows has mass");
    }
    let idx =
        Tensor::from_vec(data.iter().map(|s| s.chosen[0] as u32).collect::<Vec<_>>(), (data.len(), 1), &Device::Cpu)
            .unwrap();
    let together = gradients(&net, &lp.gather(&idx, 1).unwrap().sum_all().unwrap()).unwrap();
    let mut summed: Vec<Vec<f32>> = together.iter().map(|g| vec![0.0; g.elem_count()]).collect();
    for s in &data {
        let own = alone(&net, s).get(s.chosen[0]).unwrap();
        for (acc, g) in summed.iter_mut().zip(gradients(&net, &own).unwrap()) {
            for (a, v) in acc.iter_mut().zip(g.flatten_all().unwrap().to_vec1::<f32>().unwrap()) {
                *a += v;
            }
        }
    }
    for (g, want) in together.iter().zip(&summed) {
        for (a, b) in g.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().zip(want) {
            assert!((a - b).abs() < 1e-4 * b.abs().max(1.0), "gradient {a} vs {b}");
        }
    }
}

/// The rules that teach, guard and set the validation reference run each episode told its
/// budget, as the experiment tells them: on the default distribution's budget setting (the
/// task has none, its episodes do) no group of theirs is refused. Before, they ran untold
/// there: on one thesis set sjf-bestfit had 83 groups refused and twice its told mean JCT.
#[test]
fn the_rules_run_each_episode_told_its_budget() {
    let lib = Arc::new(dqngpu_model::library::resolve("thesis").unwrap());
    let cluster = ClusterSpec::parse_gpus("titanxp:1").unwrap();
    let classes = [dqngpu_model::WorkloadClass::GpuLight, dqngpu_model::WorkloadClass::MemLight];
    let at_zero = dqngpu_sim::Arrivals::AllAtZero;
    let mut eps = episodes(&[lib], &cluster, &classes, 20, at_zero, 4, 42).unwrap();
    for ep in &mut eps[2..] {
        ep.max_slowdown = Some(0.10);
    }
    let task = ScorerTask {
        train: eps.clone(),
        validation: eps[2..].to_vec(),
        interference: Arc::from(dqngpu_interference::by_name("contention").unwrap()),
        config: SimConfig::default(),
    };
    let rules = Rules::new(&task, &ScorerRecipe::default(), 1).unwrap();
    let runs = rule_runs(&task, &task.train, &rules).unwrap();
    let mut shared = 0;
    for (i, per_set) in runs.iter().enumerate() {
        for (ep, r) in task.train.iter().zip(per_set) {
            assert_eq!(
                (r.budget_refusals, r.liveness_starts),
                (0, 0),
                "{} on a set under {:?}",
                rules.name(i),
                ep.max_slowdown
            );
            shared += usize::from(r.jobs.iter().any(|j| j.exec_slowdown.unwrap_or(1.0) > 1.0 + 1e-9));
        }
    }
    assert!(shared > 0, "some rule shares a GPU (else the budget is never tested)");
}

/// A set's advantages are centred and in units of its rollouts' spread, whatever the costs'
/// scale (so the entropy bonus weighs the same against them on short and long sets); equal
/// costs give none.
#[test]
fn advantages_are_centred_in_units_of_the_sets_spread() {
    use super::gradient::set_advantages;
    for scale in [1.0, 1e3, 1e6] {
        let costs: Vec<f64> = [100.0, 104.0, 98.0, 102.0].iter().map(|c| c * scale).collect();
        let a = set_advantages(&costs);
        let mean = a.iter().map(|&x| f64::from(x)).sum::<f64>() / 4.0;
        let var = a.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / 4.0;
        assert!(mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-5, "{scale}: {a:?}");
        // The cheapest rollout is the most advantaged.
        assert!(a[2] > a[0] && a[0] > a[3] && a[3] > a[1], "{a:?}");
    }
    assert_eq!(set_advantages(&[5.0, 5.0, 5.0]), vec![0.0; 3]);
}

/// A teacher that records the running jobs of every view it is asked on.
struct Recording<'a> {
    inner: &'a dyn dqngpu_model::Policy,
    asked: std::sync::Mutex<Vec<(f64, Vec<dqngpu_model::JobId>)>>,
}

impl dqngpu_model::Policy for Recording<'_> {
    fn name(&self) -> &str {
        "recording"
    }
    fn decide(&self, view: &dqngpu_model::ClusterView<'_>) -> Vec<dqngpu_model::Placement> {
        let running = view.gpus.iter().flat_map(|g| g.running.iter().map(|r| r.id)).collect();
        self.asked.lock().unwrap().push((view.now_s, running));
        self.inner.decide(view)
    }
}

/// DAgger: where the learner leaves the teacher's plan within a decision, the teacher plans
/// again on the cluster with the learner's choices started (its old plan was made for a
/// cluster without them), so the next labels are the teacher's answer to where the learner went.
#[test]
fn dagger_asks_the_teacher_again_where_the_learner_left_its_plan() {
    let lib = Arc::new(dqngpu_model::library::resolve("thesis").unwrap());
    let cluster = ClusterSpec::parse_gpus("4xtitanxp:2").unwrap();
    let classes = dqngpu_model::WorkloadClass::ALL;
    let eps = episodes(&[lib], &cluster, &classes, 16, dqngpu_sim::Arrivals::AllAtZero, 2, 7).unwrap();
    let task = ScorerTask {
        train: eps.clone(),
        validation: Vec::new(),
        interference: Arc::from(dqngpu_interference::by_name("contention").unwrap()),
        config: SimConfig::default(),
    };
    let sjf_bestfit = dqngpu_policy::by_name("sjf-bestfit", 1).unwrap();
    let learner = ScorerPolicy::untrained(&[8], 3).unwrap();
    let greedy = dqngpu_policy::Greedy::default();
    let mut replans = 0;
    for ep in &task.train {
        let teacher = Recording { inner: sjf_bestfit.as_ref(), asked: Default::default() };
        let steps = labels::imitation_episode(&task, ep, &teacher, Some(learner.mlp()), &greedy).unwrap();
        assert!(!steps.is_empty());
        let asked = teacher.asked.into_inner().unwrap();
        // A second call at one moment is a plan made again: on that moment's cluster with more
        // jobs started than the first call saw, every one of those still running.
        for w in asked.windows(2) {
            let ((t0, before), (t1, after)) = (&w[0], &w[1]);
            if t1 == t0 {
                replans += 1;
                assert!(after.len() > before.len(), "asked again at {t1} s with no new job started");
                assert!(before.iter().all(|j| after.contains(j)));
            }
        }
    }
    assert!(
        replans > 0,
        "the teacher was never asked again within a decision: DAgger kept a stale plan, or the learner never left it"
    );
}
