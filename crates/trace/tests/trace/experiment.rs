//! The experiment grid and its files, on a small fixture written to a temporary directory.

use std::path::{Path, PathBuf};

use dqngpu_trace::experiment::{run_experiment, write_experiment, ExperimentConfig};
use dqngpu_trace::reader::{parse_nodes, parse_pods};
use dqngpu_trace::{replay, ReplayConfig};

const NODES: &str =
    "sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,4,T4\nb,64000,262144,4,T4\nc,32000,131072,2,A10\n";
const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n\
    p0,4000,1024,1,500,\np1,8000,2048,1,1000,\np2,2000,1024,1,250,\np3,16000,4096,2,1000,\n\
    p4,1000,512,0,0,\np5,6000,1024,1,700,T4\n";

/// The fixture's node list and two pod lists (`one`, `two`) in `dir`.
fn fixture(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let nodes = dir.join("nodes.csv");
    std::fs::write(&nodes, NODES).unwrap();
    let one = dir.join("openb_pod_list_one.csv");
    std::fs::write(&one, PODS).unwrap();
    let two = dir.join("openb_pod_list_two.csv");
    std::fs::write(&two, PODS.replace("p5,6000", "p5,12000")).unwrap();
    (nodes, one, two)
}

fn config(nodes: &Path, lists: &[&Path], policies: &[&str], seeds: &[u64]) -> ExperimentConfig {
    ExperimentConfig {
        nodes: nodes.to_path_buf(),
        pod_lists: lists.iter().map(|p| p.to_path_buf()).collect(),
        policies: policies.iter().map(|s| s.to_string()).collect(),
        seeds: seeds.to_vec(),
        tune: 1.3,
    }
}

/// A policy, pod list or seed named twice was run twice and its runs pooled: the summary's
/// row came twice, each over twice the runs (`seeds` 2 for one seed), with a standard
/// deviation over copies of the same numbers. Refused, naming what is repeated.
#[test]
fn a_repeated_policy_list_or_seed_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, one, _) = fixture(dir.path());
    let cases = [
        (config(&nodes, &[&one], &["fgd", "fgd"], &[1, 2]), "policy `fgd`"),
        (config(&nodes, &[&one, &one], &["fgd"], &[1, 2]), "pod list `one`"),
        (config(&nodes, &[&one], &["fgd"], &[1, 1]), "seed `1`"),
    ];
    for (cfg, what) in cases {
        let e = run_experiment(&cfg, &|| {}).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(what) && e.contains("twice"), "{what}: {e:?}");
    }
    // Nothing to run is refused too, rather than a report with no table.
    for cfg in [
        config(&nodes, &[], &["fgd"], &[1]),
        config(&nodes, &[&one], &[], &[1]),
        config(&nodes, &[&one], &["fgd"], &[]),
    ] {
        assert!(run_experiment(&cfg, &|| {}).is_err(), "{cfg:?}");
    }
    let ok = run_experiment(&config(&nodes, &[&one], &["fgd"], &[1, 2]), &|| {}).unwrap();
    assert_eq!(ok.summary.len(), 1);
    assert_eq!(ok.summary[0].seeds, 2);
}

/// A tune that is not a number was taken as "no tuning" (every comparison with NaN is false),
/// and the results said tune NaN; a finite one past reach was refused only after 10 million copies.
#[test]
fn a_tune_that_is_no_finite_number_or_past_reach_is_refused() {
    let nodes = parse_nodes(NODES, "n.csv").unwrap();
    let pods = parse_pods(PODS, "p.csv").unwrap();
    let fgd = dqngpu_trace::policies::by_name("fgd").unwrap();
    // A finite tune past reach is refused up front, naming it (before, 10 million copies
    // were made first, then "inflating needs over 10000000 copies"), also one needing between
    // one and two times the copies allowed (1.1e6 here: about 15 million; the check let up to
    // twice through).
    for tune in [f64::NAN, f64::INFINITY, 1e12, 1.1e6] {
        let e = replay(&nodes, &pods, fgd.as_ref(), &ReplayConfig { tune, seed: 1 }).err();
        assert!(e.as_ref().is_some_and(|e| e.to_string().contains(&format!("tune {tune}"))), "{tune}: {e:?}");
    }
}

/// The files of one run only: a rerun into the same directory with fewer pod lists left the
/// earlier run's `curves_<list>.csv` and plots beside the new report, and the run wrote
/// `results.json` first, so one stopped part way left the new results.json and summary.csv
/// beside the earlier report and curves.
#[test]
fn a_rerun_leaves_no_file_of_the_earlier_run() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, one, two) = fixture(dir.path());
    let out = dir.path().join("out");
    let both = run_experiment(&config(&nodes, &[&one, &two], &["fgd", "bestfit"], &[1, 2]), &|| {}).unwrap();
    write_experiment(&both, &out).unwrap();
    for f in ["curves_two.csv", "allocation_two.png", "allocation_two_zoom.svg"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let only_one = run_experiment(&config(&nodes, &[&one], &["fgd"], &[1]), &|| {}).unwrap();
    write_experiment(&only_one, &out).unwrap();
    for f in ["curves_two.csv", "allocation_two.png", "allocation_two.svg", "allocation_two_zoom.png"] {
        assert!(!out.join(f).exists(), "{f} of the earlier run is left");
    }
    assert!(out.join("curves_one.csv").is_file() && out.join("results.json").is_file());
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "mine");

    // Stopped part way (here: a plot that cannot be written): no results.json, the marker of
    // a finished run, is left beside the files it did write.
    std::fs::remove_file(out.join("allocation_one.png")).unwrap();
    std::fs::create_dir_all(out.join("allocation_one.png").join("x")).unwrap();
    assert!(write_experiment(&both, &out).is_err());
    assert!(!out.join("results.json").exists(), "a results.json beside a partly written run");
}

/// The paper's figures stand beside a run only in its setting: the GPU node list, tune 1.3,
/// seeds among 42..51. They stood beside a one-node list, tune 1.0 and seed 100.
#[test]
fn the_papers_figures_stand_only_beside_its_setting() {
    use dqngpu_trace::experiment::comparable_to_paper;
    let gpu_nodes = Path::new("data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv");
    assert!(comparable_to_paper(gpu_nodes, 1.3, &[42, 51]));
    assert!(!comparable_to_paper(Path::new("bad/n_64.csv"), 1.3, &[42]));
    assert!(!comparable_to_paper(gpu_nodes, 1.0, &[42]));
    assert!(!comparable_to_paper(gpu_nodes, 1.3, &[42, 100]));
    assert!(!comparable_to_paper(gpu_nodes, 1.3, &[]));
    // A list named as the paper's default list, on the fixture's nodes: no published figure.
    let dir = tempfile::tempdir().unwrap();
    let (nodes, _, _) = fixture(dir.path());
    let default = dir.path().join("openb_pod_list_default.csv");
    std::fs::write(&default, PODS).unwrap();
    let res = run_experiment(&config(&nodes, &[&default], &["fgd"], &[42]), &|| {}).unwrap();
    assert_eq!(res.summary[0].list, "default");
    assert!(res.summary.iter().all(|s| s.paper == (None, None)), "the fixture's nodes are not the paper's");
}
