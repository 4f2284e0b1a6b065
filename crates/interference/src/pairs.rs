//! The Lucid co-location pairs file (`colocate_pairs.csv`): each row two configurations that
//! shared one RTX 3090 and each one's progress rate relative to running alone.
//!
//! The raw rows are kept so `dqngpu interference predict` can write the file back unchanged
//! with prediction columns added.

use std::path::{Path, PathBuf};

use dqngpu_model::error::read_file;
use dqngpu_model::library::lucid::{config_key, PAIRS_CSV, PAIRS_FILE};
use dqngpu_model::{Location, ModelError};

/// Columns a pairs file must have.
pub const REQUIRED: [&str; 10] =
    ["model1", "dataset1", "batchsize1", "amp1", "speed1", "model2", "dataset2", "batchsize2", "amp2", "speed2"];

/// One measured pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// 1-based line in the file.
    pub line: u64,
    /// First job's configuration key (`ResNet18-CIFAR-10-bs64-amp0`).
    pub key1: String,
    /// Second job's configuration key.
    pub key2: String,
    /// First job's model family (`ResNet18`).
    pub model1: String,
    /// Second job's model family.
    pub model2: String,
    /// First job's rate relative to alone.
    pub speed1: f64,
    /// Second job's rate relative to alone.
    pub speed2: f64,
}

/// A parsed pairs file: the pairs plus the raw header and rows.
#[derive(Debug, Clone)]
pub struct PairsFile {
    /// Where it was read from, if a file.
    pub path: Option<PathBuf>,
    /// The header as read.
    pub headers: csv::StringRecord,
    /// The rows as read, in order (one per pair).
    pub rows: Vec<csv::StringRecord>,
    /// The parsed pairs, in the same order.
    pub pairs: Vec<Pair>,
}

fn at(path: Option<&Path>, line: Option<u64>, field: Option<&str>) -> Location {
    Location { path: path.map(Path::to_path_buf), line, field: field.map(str::to_string) }
}

/// Parses a pairs CSV. Errors name the file, line and field.
pub fn parse_pairs_csv(text: &str, path: Option<&Path>) -> Result<PairsFile, ModelError> {
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = rdr
        .headers()
        .map_err(|e| ModelError::invalid(at(path, Some(1), None), format!("cannot read header: {e}")))?
        .clone();
    let mut idx = [0usize; 10];
    for (k, name) in REQUIRED.iter().enumerate() {
        idx[k] = headers.iter().position(|h| h == *name).ok_or_else(|| {
            ModelError::invalid(
                at(path, Some(1), Some(name)),
                format!("missing column; required: {}", REQUIRED.join(",")),
            )
        })?;
    }
    let mut rows = Vec::new();
    let mut pairs = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            ModelError::invalid(
                at(path, e.position().map(|p| dqngpu_model::error::csv_line(text, p)), None),
                format!("malformed CSV: {e}"),
            )
        })?;
        let line = rec.position().map(|p| dqngpu_model::error::csv_line(text, p)).unwrap_or(0);
        let get = |k: usize| rec.get(idx[k]).unwrap_or("");
        let bad = |k: usize, msg: String| ModelError::invalid(at(path, Some(line), Some(REQUIRED[k])), msg);
        let name = |k: usize| -> Result<String, ModelError> {
            let v = get(k);
            if v.is_empty() {
                Err(bad(k, "empty value".into()))
            } else {
                Ok(v.to_string())
            }
        };
        let batch = |k: usize| -> Result<u32, ModelError> {
            let v = get(k);
            v.parse().ok().filter(|b| *b > 0).ok_or_else(|| bad(k, format!("`{v}` is not a positive integer")))
        };
        let amp = |k: usize| -> Result<u8, ModelError> {
            match get(k) {
                "0" => Ok(0),
                "1" => Ok(1),
                v => Err(bad(k, format!("`{v}` is not 0 or 1"))),
            }
        };
        let speed = |k: usize| -> Result<f64, ModelError> {
            let v = get(k);
            let s: f64 = v.parse().map_err(|_| bad(k, format!("`{v}` is not a number")))?;
            if s > MAX_SPEED && s.is_finite() {
                Err(bad(
                    k,
                    format!(
                        "`{v}` is a speed more than {MAX_SPEED} times running alone; sharing a GPU does not speed a job up so (the measured pairs in data/ reach 1.53: a unit or column error)"
                    ),
                ))
            } else if s.is_finite() && s >= MIN_SPEED {
                Ok(s)
            } else {
                Err(bad(
                    k,
                    format!(
                        "`{v}` is not a positive, finite speed of at least {MIN_SPEED:e} relative to running alone (a job a million times slower is a measurement error)"
                    ),
                ))
            }
        };
        let (model1, dataset1) = (name(0)?, name(1)?);
        let (model2, dataset2) = (name(5)?, name(6)?);
        let pair = Pair {
            line,
            key1: config_key(&model1, &dataset1, batch(2)?, amp(3)?),
            key2: config_key(&model2, &dataset2, batch(7)?, amp(8)?),
            speed1: speed(4)?,
            speed2: speed(9)?,
            model1,
            model2,
        };
        pairs.push(pair);
        rows.push(rec);
    }
    if pairs.is_empty() {
        return Err(ModelError::invalid(at(path, Some(2), None), "no data rows"));
    }
    Ok(PairsFile { path: path.map(Path::to_path_buf), headers, rows, pairs })
}

/// The least measured speed a pair may have, relative to the job alone: a speed near 0 is a
/// failed measurement, and its relative error would make every MAPE infinite.
pub const MIN_SPEED: f64 = 1e-6;

/// The greatest measured speed a pair may have, relative to the job alone: the measured pairs
/// in `data/` reach 1.53 (overlapping kernels), and a speed far above it (1e300 was accepted)
/// is a unit or column error that would skew the fit and its MAPE.
pub const MAX_SPEED: f64 = 2.0;

/// Reads and parses a pairs file.
pub fn read_pairs(path: &Path) -> Result<PairsFile, ModelError> {
    parse_pairs_csv(&read_file(path)?, Some(path))
}

/// Reads a pairs file, or the built-in Lucid pairs when `path` is `None`; also returns the name
/// to show for it.
pub fn load_pairs(path: Option<&Path>) -> Result<(PairsFile, String), ModelError> {
    match path {
        Some(p) => Ok((read_pairs(p)?, p.display().to_string())),
        None => Ok((parse_pairs_csv(PAIRS_CSV, Some(Path::new(PAIRS_FILE)))?, PAIRS_FILE.to_string())),
    }
}

/// The file as CSV with `pred_speed1,pred_speed2` set from `preds` (one per row): appended as
/// new columns, or overwritten where the file already has them.
pub fn with_predictions(file: &PairsFile, preds: &[(f64, f64)]) -> Result<String, ModelError> {
    let io =
        |e: csv::Error| ModelError::invalid(at(file.path.as_deref(), None, None), format!("cannot write CSV: {e}"));
    let find = |n: &str| file.headers.iter().position(|h| h == n);
    let (c1, c2) = (find("pred_speed1"), find("pred_speed2"));
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = file.headers.clone();
    if c1.is_none() {
        header.push_field("pred_speed1");
    }
    if c2.is_none() {
        header.push_field("pred_speed2");
    }
    w.write_record(&header).map_err(io)?;
    for (row, (p1, p2)) in file.rows.iter().zip(preds) {
        let (s1, s2) = (format!("{p1:.4}"), format!("{p2:.4}"));
        let mut fields: Vec<&str> = row.iter().collect();
        match c1 {
            Some(c) => fields[c] = &s1,
            None => fields.push(&s1),
        }
        match c2 {
            Some(c) => fields[c] = &s2,
            None => fields.push(&s2),
        }
        w.write_record(&fields).map_err(io)?;
    }
    let bytes = w.into_inner().map_err(|e| io(e.into_error().into()))?;
    String::from_utf8(bytes)
        .map_err(|e| ModelError::invalid(at(file.path.as_deref(), None, None), format!("output is not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HEADER: &str =
        "pair_id,model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2,gpu_util,gmem_util,gmem\n";

    #[test]
    fn parses_and_writes_back() {
        let text =
            format!("{HEADER}36,MobileNetV3,ImageNet,1,32,0,0.842,MobileNetV2,CIFAR-10,1,32,0,0.904,45.4,18.7,5246\n");
        let f = parse_pairs_csv(&text, None).unwrap();
        assert_eq!(f.pairs[0].key1, "MobileNetV3-ImageNet-bs32-amp0");
        assert_eq!(f.pairs[0].key2, "MobileNetV2-CIFAR-10-bs32-amp0");
        assert_eq!((f.pairs[0].speed1, f.pairs[0].line), (0.842, 2));
        let out = with_predictions(&f, &[(0.9, 0.8)]).unwrap();
        assert!(out.starts_with(&format!("{},pred_speed1,pred_speed2", HEADER.trim_end())), "{out}");
        assert!(out.contains(",5246,0.9000,0.8000"), "{out}");
        // Writing back a file that has the columns replaces them.
        let again = parse_pairs_csv(&out, None).unwrap();
        let out2 = with_predictions(&again, &[(0.5, 0.6)]).unwrap();
        assert!(out2.contains(",5246,0.5000,0.6000\n") && out2.matches("pred_speed1").count() == 1, "{out2}");
    }

    #[test]
    fn lines_are_counted_alike_in_windows_files() {
        let row = "36,MobileNetV3,ImageNet,1,32,0,0.842,MobileNetV2,CIFAR-10,1,32,0,0.904,45.4,18.7,5246\n";
        let bad = row.replace("0.842", "abc");
        let text = format!("{HEADER}{row}{bad}").replace('\n', "\r\n");
        let e = parse_pairs_csv(&text, Some(Path::new("p.csv"))).unwrap_err().to_string();
        assert!(e.contains("p.csv, line 3, field `speed1`"), "{e}");
        let f = parse_pairs_csv(&format!("{HEADER}{row}{row}").replace('\n', "\r\n"), None).unwrap();
        assert_eq!(f.pairs.iter().map(|p| p.line).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn errors_name_line_and_field() {
        let p = Some(Path::new("pairs.csv"));
        let row = |s1: &str, bs2: &str| format!("{HEADER}1,A,B,1,32,0,{s1},C,D,1,{bs2},0,0.9,1,1,1\n");
        let cases = [
            ("model1,dataset1\nA,B\n".to_string(), "line 1, field `batchsize1`", "missing column"),
            (row("abc", "32"), "line 2, field `speed1`", "not a number"),
            (row("NaN", "32"), "line 2, field `speed1`", "positive, finite"),
            (row("-1", "32"), "line 2, field `speed1`", "positive, finite"),
            (row("1e300", "32"), "line 2, field `speed1`", "more than 2 times"),
            (row("2.5", "32"), "line 2, field `speed1`", "more than 2 times"),
            (row("0.9", "x"), "line 2, field `batchsize2`", "positive integer"),
            (HEADER.to_string(), "line 2", "no data rows"),
            (format!("{HEADER}1,A,B\n"), "line 2", "malformed"),
        ];
        for (text, want_at, want_msg) in cases {
            let e = parse_pairs_csv(&text, p).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                e.contains("pairs.csv") && e.contains(want_at) && e.contains(want_msg),
                "{want_at}/{want_msg}: {e}"
            );
        }
    }

    proptest! {
        #[test]
        fn pairs_parser_never_panics(s in "\\PC{0,300}") {
            let _ = parse_pairs_csv(&s, None);
        }

        #[test]
        fn pairs_parser_never_panics_near_valid(rows in proptest::collection::vec(proptest::collection::vec("[-0-9.aNI]{0,5}", 0..17), 0..6)) {
            let mut text = String::from(HEADER);
            for r in rows { text.push_str(&r.join(",")); text.push('\n'); }
            if let Ok(f) = parse_pairs_csv(&text, None) {
                for p in &f.pairs { prop_assert!(p.speed1 > 0.0 && p.speed2.is_finite()); }
                let preds = vec![(1.0, 1.0); f.rows.len()];
                prop_assert!(with_predictions(&f, &preds).is_ok());
            }
        }
    }
}
