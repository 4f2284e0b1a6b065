//! How well each interference model predicts groups of two, three and four real jobs sharing a
//! GPU (`data/gpu-groups-h100/`, measured with `bench/gpu-pairs/run.py --groups`). The models
//! were fitted on pairs only, so the triples and quads are held out.
//!
//! ```text
//! cargo run --release -p dqngpu-interference --example groups [GROUPS.csv SOLO.csv]
//! ```
//! Prints each group's measured and H100-fit speeds, then each predictor's MAPE by group size.

use std::path::Path;

use dqngpu_interference::by_name;
use dqngpu_interference::calibrate::{fair_share_rate, lucid_gpu};
use dqngpu_interference::groups::{demands, mape_by_size, predict_group, read_groups};
use dqngpu_model::library::lucid::load_solo;

fn speeds(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join("/")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/gpu-groups-h100");
    let groups_path = args.first().cloned().unwrap_or_else(|| format!("{root}/colocate_groups.csv"));
    let solo_path = args.get(1).cloned().unwrap_or_else(|| format!("{root}/solo_profiles.csv"));
    let groups = read_groups(Path::new(&groups_path))?;
    let (solo, _) = load_solo(Some(Path::new(&solo_path)))?;
    let gpu = lucid_gpu()?;
    let h100 = by_name("contention-h100")?;
    for g in &groups {
        let keys: Vec<&str> = g.jobs.iter().map(|j| j.key.split('-').next().unwrap_or("")).collect();
        let measured: Vec<f64> = g.jobs.iter().map(|j| j.speed).collect();
        let predicted = predict_group(h100.as_ref(), &gpu, g, &demands(g, &solo)?);
        println!(
            "group {:>2} {:40} measured {:20} h100 fit {}",
            g.id,
            keys.join(" + "),
            speeds(&measured),
            speeds(&predicted)
        );
    }
    println!("\nMAPE (%) by group size (jobs in brackets):");
    let mut rows = vec![
        ("no slowdown", mape_by_size(&groups, &solo, |_, d| vec![1.0; d.len()])?),
        ("fair share", mape_by_size(&groups, &solo, |_, d| vec![fair_share_rate(d); d.len()])?),
    ];
    for name in ["contention", "contention-h100"] {
        let m = by_name(name)?;
        rows.push((name, mape_by_size(&groups, &solo, |g, d| predict_group(m.as_ref(), &gpu, g, d))?));
    }
    for (name, by_size) in rows {
        let cells: Vec<String> = by_size.iter().map(|(s, (m, n))| format!("{s}: {m:.1} ({n})")).collect();
        println!("  {name:16} {}", cells.join("   "));
    }
    Ok(())
}
