//! `dqngpu apps`: the apps of a library with duration, mean and peak usage of the four
//! resources, and workload classes. Every profile is validated as it is read.

use dqngpu_model::{AppLibrary, Resources, WorkloadClass};
use serde::Serialize;

use super::Format;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Library: `thesis`, `lucid` (built in, from data/lucid/), `generated:SEED[:COUNT]`, or a
    /// directory of profile files.
    #[arg(long, default_value = "thesis")]
    pub library: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// One row of the listing.
#[derive(Debug, Serialize)]
struct AppRow {
    app: String,
    kind: String,
    solo_s: f64,
    interval_s: f64,
    mean: Resources,
    peak: Resources,
    classes: Vec<&'static str>,
}

/// The listing.
#[derive(Debug, Serialize)]
struct Listing {
    library: String,
    reference_gpu: Option<String>,
    apps: Vec<AppRow>,
}

/// Validates every profile of `lib` (values, and peak memory within the reference GPU).
fn validate(lib: &AppLibrary) -> anyhow::Result<()> {
    for p in lib.apps.values() {
        p.validate()?;
        if let Some(g) = &lib.reference_gpu {
            p.check_fits_memory(g.memory_mib)?;
        }
    }
    Ok(())
}

fn listing(lib: &AppLibrary) -> Listing {
    let apps = lib
        .apps
        .iter()
        .map(|(name, p)| {
            let s = p.summary();
            let classes = WorkloadClass::ALL
                .into_iter()
                .filter(|c| *c != WorkloadClass::Random)
                .filter(|c| lib.classes.get(c).is_some_and(|m| m.contains(name)))
                .map(WorkloadClass::name)
                .collect();
            AppRow {
                app: name.clone(),
                kind: format!("{:?}", p.app.kind).to_lowercase(),
                solo_s: s.solo_s,
                interval_s: p.interval_s,
                mean: s.mean,
                peak: s.peak,
                classes,
            }
        })
        .collect();
    Listing { library: lib.name.clone(), reference_gpu: lib.reference_gpu.as_ref().map(|g| g.name.clone()), apps }
}

fn table(l: &Listing) -> String {
    let mut s = format!(
        "library {} ({} apps{})\n",
        l.library,
        l.apps.len(),
        l.reference_gpu.as_deref().map(|g| format!(", recorded on {g}")).unwrap_or_default()
    );
    let w = l.apps.iter().map(|a| a.app.len()).max().unwrap_or(3).max(3);
    s.push_str(&format!(
        "{:<w$}  kind     solo_s  gpu% mean/peak  mem MiB mean/peak  sm% mean/peak  pcie MB/s mean/peak  classes\n",
        "app"
    ));
    for a in &l.apps {
        s.push_str(&format!(
            "{:<w$}  {:<7} {:7.0}  {:6.1}/{:5.1}  {:8.0}/{:8.0}  {:6.1}/{:5.1}  {:9.0}/{:9.0}  {}\n",
            a.app,
            a.kind,
            a.solo_s,
            a.mean.gpu_util_pct,
            a.peak.gpu_util_pct,
            a.mean.gpu_mem_mib,
            a.peak.gpu_mem_mib,
            a.mean.sm_pct,
            a.peak.sm_pct,
            a.mean.pcie_mbps,
            a.peak.pcie_mbps,
            a.classes.join(",")
        ));
    }
    s
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let lib = dqngpu_model::library::resolve(&args.library)?;
    validate(&lib)?;
    let l = listing(&lib);
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&l)?),
        Format::Table => print!("{}", table(&l)),
    }
    Ok(())
}
