//! `dqngpu profile`: record (`run`), import (`import`) and inspect (`ls`, `show`, `export`)
//! usage profiles. See docs/PROFILER.md.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use dqngpu_model::format::{
    probe_profile_write, probe_store, read_profile, store_profile, write_profile, ProfileFormat,
};
use dqngpu_model::{AppInfo, AppKind, AppProfile, ModelError, Resource};
use dqngpu_profiler::sampler::nvml::{node_name, NvmlSampler};
use dqngpu_profiler::sampler::{check_device, run_command_until, GpuSampler};
use dqngpu_profiler::{import_file, plot, ImportFormat, ImportOptions};
use serde_json::{json, Value};

use super::client::Conn;
use super::Format;

/// `eprintln!` that never panics: after a terminal hangs up (SIGHUP) stderr fails, and a
/// run's readings must still be written.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Run a command alone on one GPU and record its profile through NVML.
    Run(RunArgs),
    /// Import a profile from an nvidia-smi CSV log, an nvidia-smi dmon log or DCGM exporter scrapes.
    Import(ImportArgs),
    /// List the profiles of a library directory or of the service, by app.
    Ls(LsArgs),
    /// Show one profile: summary, sparklines of the four curves, optionally a PNG.
    Show(ShowArgs),
    /// Convert a profile between CSV (+ .meta.json sidecar) and JSON.
    Export(ExportArgs),
}

/// The app's prior info (thesis Table 2).
#[derive(clap::Args, Debug)]
struct PriorArgs {
    /// App name (the key job sets use).
    #[arg(long)]
    app: String,
    /// hpc, ml or unknown.
    #[arg(long, default_value = "unknown")]
    kind: String,
    /// Input file size, MB.
    #[arg(long, allow_negative_numbers = true)]
    input_size_mb: Option<f64>,
    /// Input parameters, free text.
    #[arg(long)]
    params: Option<String>,
}

impl PriorArgs {
    fn info(&self) -> anyhow::Result<AppInfo> {
        if self.app.trim().is_empty() {
            bail!("--app must not be empty");
        }
        if let Some(s) = self.input_size_mb {
            if !(s.is_finite() && s >= 0.0) {
                bail!("--input-size-mb must be a non-negative number, got {s}");
            }
        }
        Ok(AppInfo {
            name: self.app.clone(),
            kind: self.kind.parse::<AppKind>()?,
            input_size_mb: self.input_size_mb,
            params: self.params.clone(),
        })
    }
}

/// Where a new profile goes, and the token for the service.
#[derive(clap::Args, Debug)]
struct OutArgs {
    #[command(flatten)]
    dest: Dest,
    /// File holding the service's bearer token (else DQNGPU_TOKEN).
    #[arg(long, requires = "server")]
    token_file: Option<PathBuf>,
}

/// Exactly one of a file, a library directory, or the service (a group of its own, so the
/// usage line does not offer `--token-file` as a destination).
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
struct Dest {
    /// Profile file to write (.csv with a .meta.json sidecar, or .json); its directory is created.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Library directory: writes DIR/APP.json (APP-2.json, ... when taken).
    #[arg(long)]
    store: Option<PathBuf>,
    /// Service URL: POST the profile to URL/v1/profiles.
    #[arg(long)]
    server: Option<String>,
}

/// Refuses a profile output `output` (with a CSV's `.meta.json` sidecar) that is the input.
fn refuse_profile_over_input(output: &Path, input: (&str, &Path)) -> anyhow::Result<()> {
    super::refuse_output_over_input("-o", output, &[input])?;
    super::refuse_output_over_input("-o's sidecar", &dqngpu_model::format::sidecar_path(output), &[input])
}

/// Refuses an output `NAME.json` beside a profile `NAME.csv` (or the other way round): a
/// directory holding both is no library (`--library` refuses it), so writing one would break
/// the directory the other is in. (A log beside it, such as the one imported, is no profile.)
fn refuse_twin(output: &Path) -> anyhow::Result<()> {
    dqngpu_model::format::refuse_sidecar_name(output)?;
    let twin = match ProfileFormat::from_path(output)? {
        ProfileFormat::Csv => output.with_extension("json"),
        ProfileFormat::Json => output.with_extension("csv"),
    };
    if twin.is_file() && read_profile(&twin).is_ok() {
        bail!(
            "-o {} would sit beside {}: a library directory cannot hold both a .csv and a .json profile of one name; write it elsewhere or under another name",
            output.display(),
            twin.display()
        );
    }
    Ok(())
}

impl OutArgs {
    /// Fails before any work when no destination is given (a token file is no destination: it
    /// goes with `--server`), or when the output would replace the `input` (flag, path) or sit
    /// beside a profile of its name in the other format. Changes nothing on disk
    /// ([`OutArgs::prepare`] does, once the work can start, and checks the output can be written).
    fn check(&self, input: Option<(&str, &Path)>) -> anyhow::Result<()> {
        if self.dest.output.is_none() && self.dest.store.is_none() && self.dest.server.is_none() {
            bail!(
                "give where the profile goes: -o FILE, --store DIR or --server URL (--token-file goes with --server)"
            );
        }
        if let (Some(o), Some(input)) = (&self.dest.output, input) {
            refuse_profile_over_input(o, input)?;
        }
        if let Some(o) = &self.dest.output {
            refuse_twin(o)?;
        }
        Ok(())
    }

    /// Creates the output's directory, or the store, and makes sure the profile can go there
    /// before the work starts (`doing`: what would be lost, for the messages): the files the
    /// write will create are created and removed again (an unwritable directory, a file name
    /// too long, such as a `--store` name made from a long `--app`), and with `ask_server`,
    /// `--server` must answer its `/healthz` (`profile run`, whose work cannot be redone
    /// cheaply; an import just runs again).
    fn prepare(&self, app: &str, doing: &str, ask_server: bool) -> anyhow::Result<()> {
        if let Some(o) = &self.dest.output {
            if let Some(dir) = o.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).with_context(|| format!("-o: creating {}; {doing}", dir.display()))?;
            }
            probe_profile_write(o).with_context(|| format!("-o {} cannot be written; {doing}", o.display()))?;
        }
        if let Some(d) = &self.dest.store {
            std::fs::create_dir_all(d)
                .with_context(|| format!("creating the store directory {}; {doing}", d.display()))?;
            probe_store(app, d).with_context(|| {
                format!(
                    "--store {}: cannot create the profile file `{}.json` (its name made from --app, {} bytes) there; {doing}",
                    d.display(),
                    dqngpu_model::format::store_stem(app),
                    dqngpu_model::format::store_stem(app).len() + ".json".len()
                )
            })?;
        }
        if let Some(url) = self.dest.server.as_ref().filter(|_| ask_server) {
            Conn::new(Some(url.clone()), self.token_file.clone())
                .call("GET", "/healthz", None, None)
                .with_context(|| format!("--server {url} does not answer; {doing}"))?;
        }
        Ok(())
    }

    /// Writes (or posts) the profile; returns where it went.
    fn write(&self, p: &AppProfile) -> anyhow::Result<String> {
        let mut verb = "wrote";
        let to = if let Some(o) = &self.dest.output {
            // `-o` replaces a profile there (as asked), and says so.
            if o.exists() {
                verb = "replaced";
            }
            write_profile(p, o)?;
            o.display().to_string()
        } else if let Some(d) = &self.dest.store {
            store_profile(p, d)?.display().to_string()
        } else if let Some(url) = &self.dest.server {
            let conn = Conn::new(Some(url.clone()), self.token_file.clone());
            let reply = conn.call("POST", "/v1/profiles", Some(serde_json::to_value(p)?), None)?;
            if reply["replaced"] == true {
                say!("replaced `{}`'s profile on {url}", p.app.name);
            } else {
                say!("posted `{}` to {url}: {reply}", p.app.name);
            }
            return Ok(url.clone());
        } else {
            bail!("no destination for the profile");
        };
        say!("{verb} {to}");
        Ok(to)
    }
}

/// The longest sampling interval `profile run` accepts, ms.
const MAX_INTERVAL_MS: u64 = 3_600_000;

#[derive(clap::Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    prior: PriorArgs,
    /// Sampling interval, ms.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// GPU index (NVML numbering).
    #[arg(long, default_value_t = 0)]
    gpu: u32,
    /// Write the profile even when the command fails.
    #[arg(long)]
    keep_failed: bool,
    #[command(flatten)]
    out: OutArgs,
    /// The command and its arguments (run directly, no shell), after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

#[derive(clap::Args, Debug)]
struct ImportArgs {
    /// Log format: nvidia-smi, dmon or dcgm.
    #[arg(long)]
    format: String,
    /// The log file.
    file: PathBuf,
    #[command(flatten)]
    prior: PriorArgs,
    /// Keep only this GPU (required when the log has several).
    #[arg(long)]
    gpu: Option<u32>,
    /// DCGM: keep only series of this pod (`exported_pod` label, else `pod`).
    #[arg(long)]
    pod: Option<String>,
    /// DCGM: keep only series of this container (`exported_container` label, else `container`).
    #[arg(long)]
    container: Option<String>,
    /// Output interval, s (default: the median gap between readings; for dmon logs without a
    /// time column also the time between rows, unless --dmon-delay-s says).
    #[arg(long, allow_negative_numbers = true)]
    interval_s: Option<f64>,
    /// dmon logs without a time column: seconds between rows (dmon's -d; default
    /// --interval-s, else 1). With it, --interval-s only sets the output interval.
    #[arg(long, allow_negative_numbers = true)]
    dmon_delay_s: Option<f64>,
    /// Drop the idle readings before the job and after it (GPU util 0%, memory at the card's
    /// idle level), which would count in its solo time.
    #[arg(long)]
    trim_idle: bool,
    /// nvidia-smi `noheader` logs: the --query-gpu field list, e.g. timestamp,index,utilization.gpu,memory.used.
    #[arg(long)]
    columns: Option<String>,
    #[command(flatten)]
    out: OutArgs,
}

/// A library (built-in or a directory) or the service.
#[derive(clap::Args, Debug)]
struct SourceArgs {
    /// Library: thesis, lucid, generated:SEED, or a directory of profile files.
    #[arg(long, conflicts_with = "server")]
    library: Option<String>,
    /// Service URL (its GET /v1/profiles).
    #[arg(long)]
    server: Option<String>,
    /// File holding the service's bearer token (else DQNGPU_TOKEN).
    #[arg(long, requires = "server")]
    token_file: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct LsArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// A profile file, or a profile in the library (file stem) or app name.
    name: String,
    #[command(flatten)]
    source: SourceArgs,
    /// Also draw the four curves into this PNG.
    #[arg(long)]
    png: Option<PathBuf>,
    /// Sparkline width, characters.
    #[arg(long, default_value_t = 60)]
    width: usize,
}

#[derive(clap::Args, Debug)]
struct ExportArgs {
    /// A profile file, or a profile in --library (file stem or app name).
    input: String,
    /// Library to find INPUT in: thesis, lucid, generated:SEED, or a directory.
    #[arg(long)]
    library: Option<String>,
    /// Output file; .csv (with .meta.json sidecar) or .json decides the format.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Sub::Run(a) => run_profile(a),
        Sub::Import(a) => import(a),
        Sub::Ls(a) => ls(a),
        Sub::Show(a) => show(a),
        Sub::Export(a) => export(a),
    }
}

fn run_profile(a: RunArgs) -> anyhow::Result<()> {
    let app = a.prior.info()?;
    if !(1..=MAX_INTERVAL_MS).contains(&a.interval_ms) {
        bail!("--interval-ms must be between 1 and {MAX_INTERVAL_MS} (one hour), got {}", a.interval_ms);
    }
    a.out.check(None)?;
    // The driver and the GPU first: without them nothing is run and nothing is created.
    let mut sampler = NvmlSampler::open(a.gpu).context("`profile run` samples the GPU through NVML")?;
    let device = sampler.device().clone();
    check_device(&device)?;
    a.out.prepare(&app.name, "nothing was run", true)?;
    let stop = stop_on_signals()?;
    say!("sampling GPU {} ({}) every {} ms", device.index, device.name, a.interval_ms);
    let outcome = run_command_until(&mut sampler, &a.command, Duration::from_millis(a.interval_ms), stop)?;
    say!(
        "{} {} after {:.1} s; {} readings, {} samples",
        a.command[0].to_string_lossy(),
        outcome.status,
        outcome.wall_s,
        outcome.readings,
        outcome.samples.len()
    );
    say!("attribution: {}", serde_json::to_string(&outcome.attribution)?);
    for n in &outcome.notes {
        say!("note: {n}");
    }
    let failed = match &outcome.cut_short {
        Some(why) => Some(format!("the run was cut short: {why}")),
        None => (!outcome.status.success()).then(|| format!("the command {}", outcome.status)),
    };
    // The readings as a profile; the driver's readings are checked like any file's.
    let profile =
        || outcome.profile(app.clone(), &device, &node_name()).context("the readings are no profile; nothing written");
    let Some(failed) = failed else {
        write_or_keep(&a.out, &profile()?)?;
        return Ok(());
    };
    if !a.keep_failed {
        bail!("{failed}; no profile written (--keep-failed writes the readings so far)");
    }
    let to = write_or_keep(&a.out, &profile()?).with_context(|| format!("{failed} (--keep-failed)"))?;
    bail!("{failed}; its {} samples so far were written to {to} (--keep-failed)", outcome.samples.len())
}

/// Writes a recorded profile where asked; when that fails (checked before the run, but the
/// disk may fill, the directory go, the service stop), keeps the readings in the system's
/// temporary directory and names that file in the error.
fn write_or_keep(out: &OutArgs, p: &AppProfile) -> anyhow::Result<String> {
    let e = match out.write(p) {
        Ok(to) => return Ok(to),
        Err(e) => e,
    };
    let dir = std::env::temp_dir();
    let stem = format!("dqngpu-profile-{}-{}", dqngpu_model::format::store_stem(&p.app.name), std::process::id());
    let kept = (1..=1000u32)
        .map(|n| dir.join(if n == 1 { format!("{stem}.json") } else { format!("{stem}-{n}.json") }))
        .find_map(|path| {
            match dqngpu_model::error::write_file_new(&path, serde_json::to_string_pretty(p).ok()?.as_bytes()) {
                Ok(true) => Some(Ok(path)),
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            }
        });
    match kept {
        Some(Ok(path)) => Err(e.context(format!(
            "the profile could not be written where asked; it was saved to {} instead (`dqngpu profile export {0} -o FILE` moves it)",
            path.display()
        ))),
        Some(Err(e2)) => Err(e.context(format!("the profile could not be written where asked, nor kept in {}: {e2}; the readings are lost", dir.display()))),
        None => Err(e.context(format!("the profile could not be written where asked, nor kept in {} (no free name); the readings are lost", dir.display()))),
    }
}

/// A flag set when the profiler gets SIGTERM, SIGINT, SIGHUP or SIGQUIT, so that the run ends
/// the command's process group (which a signal to the profiler alone no longer reaches, nor a
/// terminal's hangup or quit key) and says so, keeping the readings with `--keep-failed`.
fn stop_on_signals() -> anyhow::Result<&'static AtomicBool> {
    use tokio::signal::unix::{signal, SignalKind};
    static STOP: AtomicBool = AtomicBool::new(false);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the signal watch")?;
    // Registered here, before the command starts; watched on a thread of their own.
    let watch = |name: &str, kind: SignalKind| {
        let _in = rt.enter();
        signal(kind).with_context(|| format!("watching for {name}"))
    };
    let mut term = watch("SIGTERM", SignalKind::terminate())?;
    let mut int = watch("SIGINT", SignalKind::interrupt())?;
    let mut hup = watch("SIGHUP", SignalKind::hangup())?;
    let mut quit = watch("SIGQUIT", SignalKind::quit())?;
    std::thread::spawn(move || {
        rt.block_on(async {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
                _ = hup.recv() => {}
                _ = quit.recv() => {}
            }
        });
        STOP.store(true, Ordering::Relaxed);
    });
    Ok(&STOP)
}

fn import(a: ImportArgs) -> anyhow::Result<()> {
    let format: ImportFormat = a.format.parse()?;
    a.out.check(Some(("FILE", &a.file)))?;
    a.out.prepare(&a.prior.app, "nothing was imported", false)?;
    let opts = ImportOptions {
        app: a.prior.info()?,
        gpu: a.gpu,
        pod: a.pod.clone(),
        container: a.container.clone(),
        interval_s: a.interval_s,
        dmon_delay_s: a.dmon_delay_s,
        trim_idle: a.trim_idle,
        columns: a.columns.as_ref().map(|c| c.split(',').map(|s| s.trim().to_string()).collect()),
    };
    let imported = import_file(&a.file, format, &opts)?;
    let s = imported.profile.summary();
    eprintln!(
        "GPU {}: {} readings -> {} samples every {} s ({:.1} s)",
        imported.gpu,
        imported.readings,
        imported.profile.samples.len(),
        imported.profile.interval_s,
        s.solo_s
    );
    for n in &imported.notes {
        eprintln!("note: {n}");
    }
    a.out.write(&imported.profile)?;
    Ok(())
}

/// One profile of a listing: its key (file stem, or the service's app name) and contents.
struct Entry {
    key: String,
    profile: Option<AppProfile>,
    /// The service's summary row when the profile itself is not available.
    row: Option<Value>,
}

fn entries(source: &SourceArgs) -> anyhow::Result<Vec<Entry>> {
    match (&source.library, &source.server) {
        (Some(name), _) => {
            let lib = dqngpu_model::library::resolve(name)?;
            Ok(lib
                .apps
                .iter()
                .map(|(k, p)| Entry { key: k.clone(), profile: Some((**p).clone()), row: None })
                .collect())
        }
        (None, Some(url)) => {
            let v = Conn::new(Some(url.clone()), source.token_file.clone()).call("GET", "/v1/profiles", None, None)?;
            let list = v.get("profiles").and_then(Value::as_array).cloned().unwrap_or_default();
            Ok(list
                .into_iter()
                .map(|row| {
                    // The key jobs use (a server before 2026-11-29 gave the app name alone).
                    let key = row["profile"]
                        .as_str()
                        .or(row["app"].as_str())
                        .or(row["app"]["name"].as_str())
                        .unwrap_or("?")
                        .to_string();
                    let profile =
                        serde_json::from_value::<AppProfile>(row.clone()).ok().filter(|p| p.validate().is_ok());
                    Entry { key, profile, row: Some(row) }
                })
                .collect())
        }
        (None, None) => bail!("give --library NAME|DIR or --server URL"),
    }
}

fn ls(a: LsArgs) -> anyhow::Result<()> {
    let mut es = entries(&a.source)?;
    es.sort_by(|x, y| (app_name(x), &x.key).cmp(&(app_name(y), &y.key)));
    let rows: Vec<Value> = es.iter().map(summary_row).collect();
    if a.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<20} {:<24} {:<7} {:>8} {:>10} {:>8} {:>10} {:>8} {:>10} {:>10}  GPU",
        "APP", "PROFILE", "KIND", "SAMPLES", "DURATION_S", "UTIL%", "MEM_MIB", "SM%", "PCIE_MBPS", "PEAK_MIB"
    );
    for r in &rows {
        let f = |k: &str, d: usize| r[k].as_f64().map_or("-".to_string(), |v| format!("{v:.d$}"));
        println!(
            "{:<20} {:<24} {:<7} {:>8} {:>10} {:>8} {:>10} {:>8} {:>10} {:>10}  {}",
            r["app"].as_str().unwrap_or("?"),
            r["profile"].as_str().unwrap_or("?"),
            r["kind"].as_str().unwrap_or("-"),
            r["samples"].as_u64().map_or("-".into(), |n| n.to_string()),
            f("duration_s", 1),
            f("mean_gpu_util_pct", 1),
            f("mean_gpu_mem_mib", 0),
            f("mean_sm_pct", 1),
            f("mean_pcie_mbps", 1),
            f("peak_gpu_mem_mib", 0),
            r["gpu"].as_str().unwrap_or("-"),
        );
    }
    Ok(())
}

fn app_name(e: &Entry) -> String {
    e.profile.as_ref().map(|p| p.app.name.clone()).unwrap_or_else(|| e.key.clone())
}

/// Mean, peak and duration, derived from the samples (or the service's own summary).
fn summary_row(e: &Entry) -> Value {
    if let Some(p) = &e.profile {
        let s = p.summary();
        return json!({
            "app": p.app.name, "profile": e.key, "kind": p.app.kind, "samples": p.samples.len(),
            "interval_s": p.interval_s, "duration_s": s.solo_s,
            "mean_gpu_util_pct": s.mean.gpu_util_pct, "mean_gpu_mem_mib": s.mean.gpu_mem_mib,
            "mean_sm_pct": s.mean.sm_pct, "mean_pcie_mbps": s.mean.pcie_mbps,
            "peak_gpu_util_pct": s.peak.gpu_util_pct, "peak_gpu_mem_mib": s.peak.gpu_mem_mib,
            "peak_sm_pct": s.peak.sm_pct, "peak_pcie_mbps": s.peak.pcie_mbps,
            "gpu": p.recorded_on.as_ref().map(|r| r.gpu_name.clone()),
        });
    }
    let r = e.row.clone().unwrap_or(Value::Null);
    json!({
        "app": r["app"].as_str().unwrap_or(&e.key), "profile": e.key, "kind": Value::Null, "samples": r["samples"],
        "interval_s": r["interval_s"],
        "duration_s": r["solo_s"],
        "mean_gpu_util_pct": r["mean"]["gpu_util_pct"], "mean_gpu_mem_mib": r["mean"]["gpu_mem_mib"],
        "mean_sm_pct": r["mean"]["sm_pct"], "mean_pcie_mbps": r["mean"]["pcie_mbps"],
        "peak_gpu_util_pct": r["peak"]["gpu_util_pct"], "peak_gpu_mem_mib": r["peak"]["gpu_mem_mib"],
        "peak_sm_pct": r["peak"]["sm_pct"], "peak_pcie_mbps": r["peak"]["pcie_mbps"],
        "gpu": r["source"],
    })
}

/// Finds one profile: a file path, a library key (file stem), or an app name with one profile.
fn find(name: &str, es: Vec<Entry>) -> anyhow::Result<Entry> {
    let keys: Vec<String> = es.iter().map(|e| e.key.clone()).collect();
    let (by_key, rest): (Vec<Entry>, Vec<Entry>) = es.into_iter().partition(|e| e.key == name);
    if let Some(e) = by_key.into_iter().next() {
        return Ok(e);
    }
    let mut by_app: Vec<Entry> = rest.into_iter().filter(|e| app_name(e) == name).collect();
    match by_app.len() {
        1 => Ok(by_app.remove(0)),
        0 => Err(ModelError::UnknownName { what: "profile", name: name.to_string(), valid: keys }.into()),
        _ => {
            let ks: Vec<String> = by_app.iter().map(|e| e.key.clone()).collect();
            bail!("app `{name}` has {} profiles ({}); name one", ks.len(), ks.join(", "))
        }
    }
}

fn load_one(name: &str, source: &SourceArgs) -> anyhow::Result<Entry> {
    let p = Path::new(name);
    if source.library.is_none() && source.server.is_none() {
        if !p.is_file() {
            bail!("`{name}` is not a profile file; give --library NAME|DIR or --server URL to look it up by name");
        }
        let key = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        return Ok(Entry { key, profile: Some(read_profile(p)?), row: None });
    }
    find(name, entries(source)?)
}

fn show(a: ShowArgs) -> anyhow::Result<()> {
    // Checked before anything is read or printed; `plot::draw_png` checks the extension too.
    if let Some(png) = &a.png {
        if a.source.library.is_none() && a.source.server.is_none() {
            let input = Path::new(&a.name);
            super::refuse_output_over_input("--png", png, &[("NAME", input)])?;
            let sidecar = dqngpu_model::format::sidecar_path(input);
            super::refuse_output_over_input("--png", png, &[("NAME's sidecar", &sidecar)])?;
        }
        if !png.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("png")) {
            bail!("--png {}: a chart is written as PNG; give a file name ending in .png", png.display());
        }
    }
    let e = load_one(&a.name, &a.source)?;
    let Some(p) = &e.profile else {
        // The service keeps summaries: shown, and not a failure unless a plot was asked for.
        if a.png.is_some() {
            bail!("--png: the service lists summaries only; no curves for `{}` (show a library file instead)", e.key);
        }
        println!("{}", serde_json::to_string_pretty(&summary_row(&e))?);
        eprintln!("note: the service lists summaries only; no curves for `{}` (show a library file instead)", e.key);
        return Ok(());
    };
    let s = p.summary();
    let kind = serde_json::to_value(p.app.kind)?;
    let params = p.app.params.as_ref().map(|x| format!(", params: {x}")).unwrap_or_default();
    println!("app       {} ({}){params}", p.app.name, kind.as_str().unwrap_or("unknown"));
    if let Some(mb) = p.app.input_size_mb {
        println!("input     {mb} MB");
    }
    if let Some(r) = &p.recorded_on {
        println!(
            "recorded  on {}{} {}, {} MiB, {} cores, PCIe {} GB/s",
            if r.node.is_empty() { String::new() } else { format!("{}: ", r.node) },
            r.gpu_name,
            r.architecture,
            r.memory_mib,
            r.cores,
            r.pcie_gbps
        );
    }
    println!("profile   {} ({} samples every {} s = {:.1} s solo)", e.key, p.samples.len(), p.interval_s, s.solo_s);
    println!("{:<18} {:>10} {:>10}  curve", "resource", "mean", "peak");
    for r in Resource::ALL {
        let ys: Vec<f64> = p.samples.iter().map(|x| x.get(r)).collect();
        let scale = matches!(r, Resource::GpuUtil | Resource::Sm).then_some(100.0);
        println!(
            "{:<18} {:>10.1} {:>10.1}  {}",
            plot::axis_label(r),
            s.mean.get(r),
            s.peak.get(r),
            plot::sparkline(&ys, a.width, scale)
        );
    }
    if let Some(png) = &a.png {
        plot::draw_png(p, png, 1000, 900)?;
        println!("wrote {}", png.display());
    }
    Ok(())
}

fn export(a: ExportArgs) -> anyhow::Result<()> {
    refuse_profile_over_input(&a.output, ("INPUT", Path::new(&a.input)))?;
    refuse_twin(&a.output)?;
    let source = SourceArgs { library: a.library.clone(), server: None, token_file: None };
    let e = load_one(&a.input, &source)?;
    let p = e.profile.context("no profile")?;
    // A profile already there is replaced, as `-o` does everywhere, and that is said.
    let verb = if a.output.exists() { "replaced" } else { "wrote" };
    write_profile(&p, &a.output)?;
    eprintln!("{verb} {}", a.output.display());
    Ok(())
}
