//! The time-aware replay: queueing, departures, load scaling, and that no pod that fits is lost.

use std::path::PathBuf;

use dqngpu_trace::policies::{by_name, ALL_POLICY_NAMES};
use dqngpu_trace::reader::{parse_nodes, parse_pods, read_nodes, read_pods, PodRow};
use dqngpu_trace::{replay_timed, TimedConfig};
use proptest::prelude::*;

const HEADER: &str =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time";

fn pods(rows: &[&str]) -> Vec<PodRow> {
    parse_pods(&format!("{HEADER}\n{}\n", rows.join("\n")), "timed.csv").unwrap()
}

fn one_gpu() -> Vec<dqngpu_trace::reader::NodeRow> {
    parse_nodes("sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,1,T4\n", "n.csv").unwrap()
}

fn at_trace_pace(seed: u64) -> TimedConfig {
    TimedConfig { load: None, seed, node_share: 1.0, ..TimedConfig::default() }
}

/// The shortcut (retry a waiting pod only on the nodes a departure freed) changes nothing:
/// the same placements and waits as retrying every node, on part of the default list under load.
#[test]
fn retrying_only_freed_nodes_is_exact() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/alibaba-gpu-v2023/csv");
    let nodes = read_nodes(&dir.join("openb_node_list_gpu_node.csv")).unwrap();
    // The first 2,000 pods: retrying every node is quadratic in the queue.
    let list = read_pods(&dir.join("openb_pod_list_default.csv")).unwrap()[..2000].to_vec();
    // Also with reservations: the reserved node is kept off, then offered again.
    for (name, reserve_after_s) in [("fgd", None), ("random", None), ("fgd", Some(600.0)), ("bestfit", Some(0.0))] {
        let p = by_name(name).unwrap();
        let cfg = TimedConfig { seed: 5, load: Some(1.5), node_share: 0.02, reserve_after_s, ..TimedConfig::default() };
        let mut fast = replay_timed(&nodes, &list, p.as_ref(), &cfg).unwrap();
        let mut slow = replay_timed(&nodes, &list, p.as_ref(), &TimedConfig { retry_all_nodes: true, ..cfg }).unwrap();
        assert!(fast.pods_waited > 100, "{name}: the test needs a queue");
        assert_eq!(fast.reservations > 0, reserve_after_s.is_some(), "{name}");
        fast.wall_s = 0.0;
        slow.wall_s = 0.0;
        assert_eq!(fast, slow, "{name}");
    }
}

#[test]
fn a_pod_waits_for_the_gpu_a_running_one_frees() {
    // p0 holds the GPU from 0 to 100 s; p1 arrives at 10 s asking the whole GPU: it starts at 100
    // and runs its 40 s (deletion - scheduled), leaving at 140.
    let list = pods(&["p0,1000,1024,1,1000,,LS,Running,0,100,0", "p1,1000,1024,1,1000,,LS,Running,10,50,10"]);
    for name in ALL_POLICY_NAMES {
        let r = replay_timed(&one_gpu(), &list, by_name(name).unwrap().as_ref(), &at_trace_pace(1)).unwrap();
        assert_eq!((r.pods_placed, r.pods_waited, r.pods_unplaced), (2, 1, 0), "{name}");
        assert_eq!(r.max_wait_s, 90.0, "{name}");
        assert_eq!(r.mean_wait_s, 45.0, "{name}");
        assert_eq!(r.end_s, 140.0, "{name}");
        assert_eq!(r.peak_queue, 1, "{name}");
        // The arrival span is 0..10 s, the GPU full all along.
        assert_eq!(r.arrival_span_s, 10.0);
        assert!((r.mean_allocation_pct - 100.0).abs() < 1e-9, "{}", r.mean_allocation_pct);
        assert!(r.curve.iter().all(|p| p.allocation_pct == 100.0), "{:?}", r.curve);
    }
}

/// A pod asking both GPUs of the one node, among one-GPU pods arriving every 50 s that each run
/// 100 s: one GPU is always busy, so without a reservation it waits until the stream ends.
#[test]
fn a_reservation_keeps_a_whole_node_pod_from_starving() {
    let nodes = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,2,T4\n", "n.csv").unwrap();
    let mut rows: Vec<String> =
        (0..20).map(|k| format!("s{k},1000,1024,1,1000,,LS,Running,{0},{1},{0}", 50 * k, 50 * k + 100)).collect();
    rows.push("big,2000,1024,2,1000,,LS,Running,5,105,5".into());
    let list = pods(&rows.iter().map(String::as_str).collect::<Vec<_>>());
    for name in ALL_POLICY_NAMES {
        let p = by_name(name).unwrap();
        let plain = replay_timed(&nodes, &list, p.as_ref(), &at_trace_pace(1)).unwrap();
        // s19 leaves at 1,050 s: only then are both GPUs free.
        assert_eq!(plain.max_wait_s, 1045.0, "{name}");
        assert_eq!(plain.reservations, 0);
        let cfg = TimedConfig { reserve_after_s: Some(60.0), ..at_trace_pace(1) };
        let kept = replay_timed(&nodes, &list, p.as_ref(), &cfg).unwrap();
        // Reserved at 100 s (waited 95 s); s2, arriving then, is kept off; s1 leaves at 150.
        assert!(kept.reservations >= 1, "{name}");
        assert_eq!((kept.pods_placed, kept.pods_unplaced), (21, 0), "{name}");
        assert!(kept.max_wait_s < 200.0, "{name}: {}", kept.max_wait_s);
        // The tail is what shrinks; the one-GPU pods now wait behind it, so the mean may grow.
        assert!(kept.pods_waited > plain.pods_waited, "{name}");
    }
    let bad = TimedConfig { reserve_after_s: Some(-1.0), ..at_trace_pace(1) };
    let e = replay_timed(&nodes, &list, by_name("fgd").unwrap().as_ref(), &bad).unwrap_err().to_string();
    assert!(e.contains("reservation delay") && e.contains("-1"), "{e}");
}

#[test]
fn sharing_pods_share_a_gpu_without_waiting() {
    let list = pods(&["a,1000,1024,1,500,,LS,Running,0,100,0", "b,1000,1024,1,500,,LS,Running,5,100,5"]);
    let r = replay_timed(&one_gpu(), &list, by_name("fgd").unwrap().as_ref(), &at_trace_pace(1)).unwrap();
    assert_eq!((r.pods_placed, r.pods_waited), (2, 0));
    assert_eq!(r.max_wait_s, 0.0);
    // Half the GPU for the first 5 s of the span, all of it at the end.
    assert!((r.mean_allocation_pct - 50.0).abs() < 1e-9, "{}", r.mean_allocation_pct);
}

#[test]
fn load_compresses_the_arrivals_to_the_offered_load() {
    // 10 pods of half a GPU for 10 s, created 100 s apart over a 900 s span: at the trace's
    // pace nine of them hold 500 milli for 10 s each inside the span (the last arrives at its
    // end): 9 x 500 x 10 / (900 x 1000) = 5% offered.
    let rows: Vec<String> =
        (0..10).map(|k| format!("p{k},1000,1024,1,500,,LS,Running,{0},{1},{0}", k * 100, k * 100 + 10)).collect();
    let list = pods(&rows.iter().map(String::as_str).collect::<Vec<_>>());
    let fgd = by_name("fgd").unwrap();
    let slow = replay_timed(&one_gpu(), &list, fgd.as_ref(), &at_trace_pace(1)).unwrap();
    assert!((slow.offered_load_pct - 5.0).abs() < 1e-9, "{}", slow.offered_load_pct);
    assert_eq!(slow.time_scale, 1.0);
    // At the trace's pace one pod runs at a time: a peak of half the GPU.
    assert!((slow.peak_demand_pct - 50.0).abs() < 1e-9, "{}", slow.peak_demand_pct);
    // A peak of two GPUs' worth: four pods at once, so half of them queue on the one GPU.
    let cfg = TimedConfig { load: Some(2.0), ..at_trace_pace(1) };
    let fast = replay_timed(&one_gpu(), &list, fgd.as_ref(), &cfg).unwrap();
    assert!((fast.peak_demand_pct - 200.0).abs() < 1e-6, "{}", fast.peak_demand_pct);
    assert!(fast.time_scale > 1.0 && fast.offered_load_pct > slow.offered_load_pct);
    assert!(fast.pods_waited > 0 && slow.pods_waited == 0);
    assert_eq!(fast.pods_placed, 10);
    // All ten at once ask for 5,000 milli: 500% is the most.
    let cfg = TimedConfig { load: Some(5.1), ..at_trace_pace(1) };
    let e = replay_timed(&one_gpu(), &list, fgd.as_ref(), &cfg).unwrap_err().to_string();
    assert!(e.contains("at most 500.0%"), "{e}");
}

#[test]
fn lists_without_times_and_bad_loads_are_refused() {
    let list =
        parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nm0,1000,1024,2,1000\n", "multigpu.csv").unwrap();
    let e = replay_timed(&one_gpu(), &list, by_name("fgd").unwrap().as_ref(), &TimedConfig::default()).unwrap_err();
    assert!(e.to_string().contains("`m0`") && e.to_string().contains("creation_time"), "{e}");
    let ok = pods(&["a,1000,1024,1,500,,LS,Running,0,100,0"]);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let cfg = TimedConfig { load: Some(bad), ..at_trace_pace(1) };
        assert!(replay_timed(&one_gpu(), &ok, by_name("fgd").unwrap().as_ref(), &cfg).is_err(), "{bad}");
    }
}

#[test]
fn the_default_list_under_load_places_every_pod_that_fits() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/alibaba-gpu-v2023/csv");
    let nodes = read_nodes(&dir.join("openb_node_list_gpu_node.csv")).unwrap();
    let list = read_pods(&dir.join("openb_pod_list_default.csv")).unwrap();
    let cfg = TimedConfig { seed: 42, ..TimedConfig::default() };
    let r = replay_timed(&nodes, &list, by_name("fgd").unwrap().as_ref(), &cfg).unwrap();
    assert_eq!(r.pods_placed + r.never_fit.len(), r.pods);
    assert_eq!(r.pods_unplaced, 0);
    // The peak is set to the load (a step function of the scale: within one pod's milli).
    assert!((r.peak_demand_pct - 100.0 * dqngpu_trace::timed::DEFAULT_LOAD).abs() < 1.0, "{}", r.peak_demand_pct);
    assert!(r.mean_allocation_pct <= r.offered_load_pct + 1e-9, "allocation cannot pass the offer");
    assert_eq!(r.curve.len(), 101);
    assert!(r.curve.iter().all(|p| (0.0..=100.0).contains(&p.allocation_pct)));
    assert!(r.mean_allocation_pct > 0.0 && r.mean_allocation_pct <= 100.0);
    assert!(r.p95_wait_s <= r.max_wait_s && r.p50_wait_s <= r.p95_wait_s);
    // A tenth of the nodes of every model (rounded up), and still every model.
    assert!(r.nodes >= 121 && r.nodes <= 128, "{}", r.nodes);
    assert!(r.pods_waited > 0, "at a peak of the capacity, fragmentation makes some pods queue");
    // The seed draws the nodes: another seed, another cluster.
    let other =
        replay_timed(&nodes, &list, by_name("fgd").unwrap().as_ref(), &TimedConfig { seed: 43, ..cfg }).unwrap();
    assert_ne!(other.mean_wait_s, r.mean_wait_s);
}

#[test]
fn node_share_keeps_every_model() {
    use rand::SeedableRng;
    let nodes = parse_nodes(
        "sn,cpu_milli,memory_mib,gpu,model\na,1,1,1,T4\nb,1,1,1,T4\nc,1,1,1,T4\nd,1,1,8,V100\ne,1,1,0,\n",
        "n.csv",
    )
    .unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let kept = dqngpu_trace::timed::sample_nodes(&nodes, 0.34, &mut rng).unwrap();
    let names: Vec<&str> = kept.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(kept.len(), 4, "{names:?}: ceil(0.34 x 3) = 2 T4, the V100, the CPU node");
    assert!(names.contains(&"d") && names.contains(&"e"), "{names:?}");
    for bad in [0.0, 1.5, f64::NAN] {
        assert!(dqngpu_trace::timed::sample_nodes(&nodes, bad, &mut rng).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(dqngpu_model::testing::cases_or(64)))]

    /// Any small pod list on a small cluster under any policy: every pod that fits the empty
    /// cluster is placed, waits are never negative, allocation stays within capacity.
    #[test]
    fn every_pod_that_fits_is_placed(
        raw in proptest::collection::vec((0u32..3, 1u32..1001, 0u64..500, 1u64..300, 0u32..3), 1..40),
        policy in 0usize..ALL_POLICY_NAMES.len(),
        load in proptest::option::of(0.1f64..5.0),
        reserve_after_s in proptest::option::of(0.0f64..200.0),
    ) {
        let nodes = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\na,16000,65536,2,T4\nb,8000,32768,1,V100\n", "n.csv").unwrap();
        let rows: Vec<String> = raw.iter().enumerate().map(|(k, &(g, milli, c, d, spec))| {
            let (num, milli) = if g == 2 { (2, 1000) } else { (g, if g == 0 { 0 } else { milli }) };
            let spec = ["", "T4", "V100"][spec as usize];
            let spec = if num == 0 { "" } else { spec };
            format!("p{k},2000,4096,{num},{milli},{spec},LS,Running,{c},{},{c}", c + d)
        }).collect();
        let list = pods(&rows.iter().map(String::as_str).collect::<Vec<_>>());
        let cfg = TimedConfig { load, reserve_after_s, ..at_trace_pace(7) };
        let name = ALL_POLICY_NAMES[policy];
        match replay_timed(&nodes, &list, by_name(name).unwrap().as_ref(), &cfg) {
            Ok(r) => {
                prop_assert_eq!(r.pods_placed + r.never_fit.len(), r.pods, "{}", name);
                prop_assert_eq!(r.pods_unplaced, 0);
                prop_assert!(r.max_wait_s >= 0.0 && r.mean_wait_s >= 0.0);
                prop_assert!(r.curve.iter().all(|p| (0.0..=100.0 + 1e-9).contains(&p.allocation_pct)));
            }
            // Only a peak the list cannot have is refused: above all its pods at once (a CPU-only
            // list asks 0), or below what pods created in the same second ask together.
            Err(e) => {
                let m = e.to_string();
                prop_assert!(load.is_some() && (m.contains("at most") || m.contains("same second")), "{}", m)
            }
        }
    }
}

/// `write_timed` wrote results.json first: a rerun into the same directory stopped part way
/// (here: the plot cannot be written) left its new results.json beside the earlier run's
/// summary.csv and curves. results.json now goes first and comes back last.
#[test]
fn a_timed_rerun_stopped_part_way_leaves_no_results_json() {
    use dqngpu_trace::timed::write_timed;
    let list = pods(&["p0,1000,1024,1,1000,,LS,Running,0,100,0", "p1,1000,1024,1,1000,,LS,Running,10,50,10"]);
    let run = |name: &str| replay_timed(&one_gpu(), &list, by_name(name).unwrap().as_ref(), &at_trace_pace(1)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_timed(&[run("fgd")], dir.path()).unwrap();
    assert!(dir.path().join("results.json").is_file());
    std::fs::remove_file(dir.path().join("allocation_over_time.png")).unwrap();
    std::fs::create_dir_all(dir.path().join("allocation_over_time.png").join("x")).unwrap();
    assert!(write_timed(&[run("bestfit")], dir.path()).is_err());
    assert!(!dir.path().join("results.json").exists(), "a results.json beside a partly written run");
}
