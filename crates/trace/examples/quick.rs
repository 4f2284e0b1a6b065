//! Development aid: one replay per policy and seed, printing allocation at 100% and 130%.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = dqngpu_trace::reader::read_nodes(std::path::Path::new(&args[1])).unwrap();
    let pods = dqngpu_trace::reader::read_pods(std::path::Path::new(&args[2])).unwrap();
    let seeds: Vec<u64> = args[4].split(',').map(|s| s.parse().unwrap()).collect();
    for name in args[3].split(',') {
        let p = dqngpu_trace::policies::by_name(name).unwrap();
        let (mut a100, mut a130) = (0.0, 0.0);
        for &seed in &seeds {
            let r = dqngpu_trace::replay(&nodes, &pods, p.as_ref(), &dqngpu_trace::ReplayConfig { tune: 1.3, seed })
                .unwrap();
            let x = r.allocation_at(100).unwrap_or(f64::NAN);
            let y = r.allocation_at(130).unwrap_or(f64::NAN);
            a100 += x;
            a130 += y;
            println!(
                "{name} seed {seed}: 100%={x:.2} 130%={y:.2} placed {} failed {} tried {} frag130 {:?} {:.2}s",
                r.pods_placed, r.pods_failed, r.pods_tried, r.fragmentation_pct[130], r.wall_s
            );
        }
        let n = seeds.len() as f64;
        println!("== {name}: mean 100%={:.2} 130%={:.2}", a100 / n, a130 / n);
    }
}
