use dqngpu_rl::deeprm::*;
#[test]
fn probe() {
    let p = DeepRmParams::default();
    let sets = job_sets(&p, 314159, 100);
    println!("load {}", offered_load(&p, &sets));
    for b in [Baseline::Sjf, Baseline::Packer, Baseline::TetrisStar{knob:0.3}, Baseline::TetrisStar{knob:0.5}, Baseline::TetrisStar{knob:0.05}, Baseline::TetrisStar{knob:0.01}, Baseline::Random] {
        let r = evaluate(&p, &sets, Scheduler::Baseline(b), 1).unwrap();
        println!("{b:?} {r:?}");
    }
}
