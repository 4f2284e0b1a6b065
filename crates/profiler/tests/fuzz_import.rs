//! Property tests: the importers never panic, on arbitrary text or on sample logs damaged the
//! ways real logs get damaged (cut short, lines lost or swapped, a field replaced by junk);
//! whatever they accept is a valid profile.

use std::path::Path;

use dqngpu_model::AppInfo;
use dqngpu_profiler::{import_str, ImportFormat, ImportOptions};
use proptest::prelude::*;

const FORMATS: [ImportFormat; 3] = [ImportFormat::NvidiaSmi, ImportFormat::Dmon, ImportFormat::Dcgm];

fn sample(format: ImportFormat) -> String {
    let name = match format {
        ImportFormat::NvidiaSmi => "nvidia_smi_units.csv",
        ImportFormat::Dmon => "dmon_umt.txt",
        ImportFormat::Dcgm => "dcgm_counters.prom",
    };
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)).unwrap()
}

fn opts(gpu: Option<u32>, interval_s: Option<f64>) -> ImportOptions {
    ImportOptions { app: AppInfo { name: "p".into(), ..Default::default() }, gpu, interval_s, ..Default::default() }
}

fn check(text: &str, format: ImportFormat, o: &ImportOptions) -> Result<(), TestCaseError> {
    if let Ok(i) = import_str(text, None, format, o) {
        prop_assert!(i.profile.validate().is_ok());
        prop_assert!(!i.profile.samples.is_empty());
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Damage {
    Cut(usize),
    DropLine(usize),
    SwapLines(usize, usize),
    Junk(usize, usize, String),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<usize>().prop_map(Damage::Cut),
        any::<usize>().prop_map(Damage::DropLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Damage::SwapLines(a, b)),
        (any::<usize>(), any::<usize>(), "[-0-9a-zA-Z€.\\[\\]{}\",=#%/: ]{0,8}")
            .prop_map(|(l, f, s)| Damage::Junk(l, f, s)),
    ]
}

fn apply(text: &str, d: &Damage) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len().max(1);
    match d {
        Damage::Cut(at) => {
            let mut at = at % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            return text[..at].to_string();
        }
        Damage::DropLine(i) if !lines.is_empty() => {
            lines.remove(i % n);
        }
        Damage::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
        Damage::Junk(l, f, s) if !lines.is_empty() => {
            let line = &mut lines[l % n];
            let sep = if line.contains(',') { ',' } else { ' ' };
            let mut fields: Vec<String> = line.split(sep).map(str::to_string).collect();
            let k = f % fields.len().max(1);
            if let Some(x) = fields.get_mut(k) {
                *x = s.clone();
            }
            *line = fields.join(&sep.to_string());
        }
        _ => {}
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: dqngpu_model::testing::cases_or(200), ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_text(s in "\\PC{0,400}", f in 0usize..3, gpu in proptest::option::of(0u32..3)) {
        check(&s, FORMATS[f], &opts(gpu, None))?;
    }

    #[test]
    fn never_panics_on_line_noise(lines in proptest::collection::vec("[-0-9a-zA-Z€_.\\[\\]{}\",=#%/: ]{0,40}", 0..12), f in 0usize..3) {
        check(&lines.join("\n"), FORMATS[f], &opts(Some(0), None))?;
    }

    #[test]
    fn never_panics_on_damaged_sample_logs(
        f in 0usize..3,
        ds in proptest::collection::vec(damage(), 1..4),
        interval in proptest::option::of(prop_oneof![Just(1e-7), Just(0.25), Just(-1.0), Just(f64::NAN), Just(1e12)]),
    ) {
        let mut text = sample(FORMATS[f]);
        for d in &ds {
            text = apply(&text, d);
        }
        check(&text, FORMATS[f], &opts(Some(0), interval))?;
    }
}
