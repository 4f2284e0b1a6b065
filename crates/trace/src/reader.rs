//! The openb CSVs as published (alibaba/clusterdata `cluster-trace-gpu-v2023`).
//!
//! Node list: `sn,cpu_milli,memory_mib,gpu,model`. Pod list: `name,cpu_milli,memory_mib,num_gpu,
//! gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`; the multi-GPU
//! variants carry only the first five columns. Columns are found by name, so their order does
//! not matter and extra columns are ignored. Every error names the file, the 1-based line and
//! the field; no input makes the reader panic.

use std::collections::HashSet;
use std::path::Path;

use crate::error::{Result, TraceError};

/// Most GPUs a node or a pod may name (the trace has at most 8).
pub const MAX_GPUS: u32 = 64;
/// One GPU in milli-GPU.
pub const MILLI: u32 = 1000;

/// One row of a node list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// `sn`.
    pub name: String,
    /// CPU in milli-cores.
    pub cpu_milli: u32,
    /// Memory in MiB.
    pub memory_mib: u32,
    /// Number of GPUs.
    pub gpus: u32,
    /// GPU model (empty for CPU-only nodes).
    pub model: String,
}

/// One row of a pod list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRow {
    /// `name`.
    pub name: String,
    /// CPU request in milli-cores.
    pub cpu_milli: u32,
    /// Memory request in MiB.
    pub memory_mib: u32,
    /// GPUs requested (0 for CPU-only pods).
    pub num_gpu: u32,
    /// Milli-GPU per GPU: below 1000 only for a GPU-sharing pod (`num_gpu` 1).
    pub gpu_milli: u32,
    /// GPU models the pod accepts, in the order given (empty: any); only for GPU pods.
    pub gpu_spec: Vec<String>,
    /// QoS class, when the list has it.
    pub qos: Option<String>,
    /// Phase in the production cluster, when the list has it.
    pub pod_phase: Option<String>,
    /// Creation time in seconds, when the list has it.
    pub creation_time: Option<u64>,
    /// Deletion time in seconds, when given.
    pub deletion_time: Option<u64>,
    /// Time it was scheduled in production, when given (pending pods have none).
    pub scheduled_time: Option<u64>,
}

impl PodRow {
    /// GPU milli requested in all: `num_gpu * gpu_milli`.
    pub fn total_gpu_milli(&self) -> u64 {
        u64::from(self.num_gpu) * u64::from(self.gpu_milli)
    }

    /// `gpu_spec` as the simulator keys it: the accepted models joined by `|`.
    pub fn gpu_spec_key(&self) -> String {
        self.gpu_spec.join("|")
    }
}

/// Reads a node list from a file.
pub fn read_nodes(path: &Path) -> Result<Vec<NodeRow>> {
    let text = dqngpu_model::error::read_file(path)?;
    parse_nodes(&text, &path.display().to_string())
}

/// Reads a pod list from a file.
pub fn read_pods(path: &Path) -> Result<Vec<PodRow>> {
    let text = dqngpu_model::error::read_file(path)?;
    parse_pods(&text, &path.display().to_string())
}

/// The header of a CSV: column name -> index.
struct Header<'a> {
    file: &'a str,
    names: Vec<String>,
}

impl<'a> Header<'a> {
    fn parse(file: &'a str, line: &str) -> Result<Self> {
        let names: Vec<String> = line.split(',').map(|s| s.trim().to_string()).collect();
        let mut seen = HashSet::new();
        for n in &names {
            if !n.is_empty() && !seen.insert(n.as_str()) {
                return Err(TraceError::invalid(file, 1, Some(n), "column appears twice in the header"));
            }
        }
        Ok(Header { file, names })
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Refuses a column that is none of `known` (the openb list's): a misspelt optional
    /// column (`gpu_specs`) was read as absent, and the replay changed without a word.
    fn only(&self, known: &[&str]) -> Result<()> {
        match self.names.iter().find(|n| !known.contains(&n.as_str())) {
            Some(n) => Err(TraceError::invalid(
                self.file,
                1,
                Some(n),
                format!("unknown column; the columns are {}", known.join(", ")),
            )),
            None => Ok(()),
        }
    }

    fn require(&self, name: &str) -> Result<usize> {
        self.index(name).ok_or_else(|| {
            TraceError::invalid(
                self.file,
                1,
                Some(name),
                format!("missing column (header has: {})", self.names.join(",")),
            )
        })
    }
}

/// One data row split into fields, with what is needed to report errors.
struct Row<'a> {
    file: &'a str,
    line: u64,
    fields: Vec<&'a str>,
}

impl<'a> Row<'a> {
    fn text(&self, idx: usize) -> &'a str {
        self.fields.get(idx).map(|s| s.trim()).unwrap_or("")
    }

    fn err(&self, field: &str, message: impl Into<String>) -> TraceError {
        TraceError::invalid(self.file, self.line, Some(field), message)
    }

    fn nonempty(&self, idx: usize, field: &str) -> Result<&'a str> {
        let t = self.text(idx);
        if t.is_empty() {
            Err(self.err(field, "empty"))
        } else {
            Ok(t)
        }
    }

    /// A whole number in `0..=max`; rejects signs, fractions and garbage with a clear message.
    fn uint(&self, idx: usize, field: &str, max: u64) -> Result<u64> {
        let t = self.nonempty(idx, field)?;
        parse_uint(t, max).map_err(|m| self.err(field, m))
    }

    fn opt_uint(&self, idx: Option<usize>, field: &str) -> Result<Option<u64>> {
        match idx {
            None => Ok(None),
            Some(i) if self.text(i).is_empty() => Ok(None),
            Some(i) => self.uint(i, field, u64::MAX).map(Some),
        }
    }

    fn opt_text(&self, idx: Option<usize>) -> Option<String> {
        idx.map(|i| self.text(i)).filter(|t| !t.is_empty()).map(str::to_string)
    }
}

/// Parses a non-negative integer no larger than `max`. Accepts a trailing `.0` (pandas writes
/// whole floats that way) but no other fraction.
fn parse_uint(t: &str, max: u64) -> std::result::Result<u64, String> {
    let body = t.strip_suffix(".0").unwrap_or(t);
    if body.starts_with('-') {
        return Err(format!("`{t}` is negative"));
    }
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{t}` is not a whole number"));
    }
    let v: u64 = body.parse().map_err(|_| format!("`{t}` is too large"))?;
    if v > max {
        return Err(format!("{v} is out of range (at most {max})"));
    }
    Ok(v)
}

/// Splits `text` into (1-based line number, line) for the non-empty data lines after the header.
fn data_lines(text: &str) -> impl Iterator<Item = (u64, &str)> {
    text.lines()
        .enumerate()
        .skip(1)
        .map(|(i, l)| (i as u64 + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
}

fn header_line<'a>(text: &'a str, file: &str) -> Result<&'a str> {
    let first = text.lines().next().map(|l| l.trim_start_matches('\u{feff}').trim_end_matches('\r'));
    match first {
        Some(l) if !l.trim().is_empty() => Ok(l),
        _ => Err(TraceError::invalid(file, 1, None, "empty file: expected a header line")),
    }
}

fn split_row<'a>(file: &'a str, line: u64, l: &'a str, width: usize) -> Result<Row<'a>> {
    if l.contains('"') {
        return Err(TraceError::invalid(file, line, None, "quoted fields are not supported by the openb format"));
    }
    let fields: Vec<&str> = l.split(',').collect();
    if fields.len() != width {
        return Err(TraceError::invalid(
            file,
            line,
            None,
            format!("{} fields, but the header has {width}", fields.len()),
        ));
    }
    Ok(Row { file, line, fields })
}

/// Parses a node list; `file` names it in errors.
pub fn parse_nodes(text: &str, file: &str) -> Result<Vec<NodeRow>> {
    let header = Header::parse(file, header_line(text, file)?)?;
    header.only(&["sn", "cpu_milli", "memory_mib", "gpu", "model"])?;
    let (sn, cpu, mem, gpu, model) = (
        header.require("sn")?,
        header.require("cpu_milli")?,
        header.require("memory_mib")?,
        header.require("gpu")?,
        header.require("model")?,
    );
    let width = header.names.len();
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (line, l) in data_lines(text) {
        let row = split_row(file, line, l, width)?;
        let name = row.nonempty(sn, "sn")?.to_string();
        if !names.insert(name.clone()) {
            return Err(row.err("sn", format!("node `{name}` appears twice")));
        }
        let cpu_milli = row.uint(cpu, "cpu_milli", u64::from(u32::MAX))? as u32;
        let memory_mib = row.uint(mem, "memory_mib", u64::from(u32::MAX))? as u32;
        let gpus = row.uint(gpu, "gpu", u64::from(MAX_GPUS))? as u32;
        let m = row.text(model).to_string();
        let m = if m == "nan" { String::new() } else { m };
        if gpus > 0 && m.is_empty() {
            return Err(row.err("model", format!("empty, but the node has {gpus} GPUs")));
        }
        if m.contains('|') {
            return Err(row.err("model", format!("`{m}` contains `|`, which separates models in gpu_spec")));
        }
        out.push(NodeRow { name, cpu_milli, memory_mib, gpus, model: m });
    }
    Ok(out)
}

/// Parses a pod list; `file` names it in errors.
pub fn parse_pods(text: &str, file: &str) -> Result<Vec<PodRow>> {
    let header = Header::parse(file, header_line(text, file)?)?;
    header.only(&[
        "name",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "gpu_spec",
        "qos",
        "pod_phase",
        "creation_time",
        "deletion_time",
        "scheduled_time",
    ])?;
    let (name_i, cpu, mem, ngpu, milli) = (
        header.require("name")?,
        header.require("cpu_milli")?,
        header.require("memory_mib")?,
        header.require("num_gpu")?,
        header.require("gpu_milli")?,
    );
    let spec = header.index("gpu_spec");
    let qos = header.index("qos");
    let phase = header.index("pod_phase");
    let created = header.index("creation_time");
    let deleted = header.index("deletion_time");
    let scheduled = header.index("scheduled_time");
    let width = header.names.len();
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (line, l) in data_lines(text) {
        let row = split_row(file, line, l, width)?;
        let name = row.nonempty(name_i, "name")?.to_string();
        if !names.insert(name.clone()) {
            return Err(row.err("name", format!("pod `{name}` appears twice")));
        }
        let cpu_milli = row.uint(cpu, "cpu_milli", u64::from(u32::MAX))? as u32;
        let memory_mib = row.uint(mem, "memory_mib", u64::from(u32::MAX))? as u32;
        let num_gpu = row.uint(ngpu, "num_gpu", u64::from(MAX_GPUS))? as u32;
        let gpu_milli = row.uint(milli, "gpu_milli", u64::from(MILLI))? as u32;
        if num_gpu == 0 && gpu_milli != 0 {
            return Err(row.err("gpu_milli", format!("{gpu_milli}, but num_gpu is 0 (a CPU-only pod asks for 0)")));
        }
        if num_gpu > 0 && gpu_milli == 0 {
            return Err(row.err("gpu_milli", format!("0, but num_gpu is {num_gpu}")));
        }
        if num_gpu > 1 && gpu_milli != MILLI {
            return Err(
                row.err("gpu_milli", format!("{gpu_milli}, but a pod with {num_gpu} GPUs must take whole GPUs (1000)"))
            );
        }
        let gpu_spec: Vec<String> = match spec {
            Some(i) if num_gpu > 0 => {
                let t = row.text(i);
                if t == "nan" {
                    Vec::new()
                } else {
                    t.split('|').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
                }
            }
            _ => Vec::new(),
        };
        let creation_time = row.opt_uint(created, "creation_time")?;
        let deletion_time = row.opt_uint(deleted, "deletion_time")?;
        let scheduled_time = row.opt_uint(scheduled, "scheduled_time")?;
        // A pod cannot end before it was made or placed (a timed replay would run it for 1 s).
        for (start, field) in [(creation_time, "creation_time"), (scheduled_time, "scheduled_time")] {
            if let (Some(s), Some(d)) = (start, deletion_time) {
                if d < s {
                    return Err(row.err("deletion_time", format!("{d} is before {field} {s}")));
                }
            }
        }
        out.push(PodRow {
            name,
            cpu_milli,
            memory_mib,
            num_gpu,
            gpu_milli,
            gpu_spec,
            qos: row.opt_text(qos),
            pod_phase: row.opt_text(phase),
            creation_time,
            deletion_time,
            scheduled_time,
        });
    }
    if out.is_empty() {
        return Err(TraceError::invalid(file, 2, None, "the pod list has no pods (only a header?)"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,1024,0,\n";
    const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
        p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n\
        p1,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,\n\
        p2,4000,100,0,0,,BE,Pending,5,,\n";

    #[test]
    fn reads_both_lists() {
        let n = parse_nodes(NODES, "n.csv").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].gpus, 2);
        assert_eq!(n[1].model, "");
        let p = parse_pods(PODS, "p.csv").unwrap();
        assert_eq!(p[1].gpu_spec, vec!["V100M16", "V100M32"]);
        assert_eq!(p[1].scheduled_time, None);
        assert_eq!(p[2].deletion_time, None);
        assert_eq!(p[0].total_gpu_milli(), 1000);
    }

    #[test]
    fn five_column_variant() {
        let p = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,8,1000\n", "m.csv").unwrap();
        assert_eq!(p[0].num_gpu, 8);
        assert_eq!(p[0].creation_time, None);
    }

    fn err_of(text: &str) -> String {
        parse_pods(text, "bad.csv").unwrap_err().to_string()
    }

    #[test]
    fn a_pod_may_not_end_before_it_was_made_or_placed() {
        let h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n";
        let e = err_of(&format!("{h}a,1,1,1,500,10,20,12\nb,1,1,1,500,30,20,\n"));
        assert!(e.contains("line 3") && e.contains("deletion_time") && e.contains("creation_time 30"), "{e}");
        let e = err_of(&format!("{h}a,1,1,1,500,10,20,25\n"));
        assert!(e.contains("line 2") && e.contains("scheduled_time 25"), "{e}");
        assert_eq!(parse_pods(&format!("{h}a,1,1,1,500,10,10,10\n"), "ok.csv").unwrap().len(), 1);
        // A header and no pod: named with the file, not left to a replay to find empty.
        let e = err_of(h);
        assert!(e.contains("bad.csv") && e.contains("no pods"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
        let e = err_of(&format!("{h}a,1,1,1,1001\n"));
        assert!(e.contains("bad.csv") && e.contains("line 2") && e.contains("gpu_milli"), "{e}");
        let e = err_of(&format!("{h}a,1,1,1,500\nb,-4,1,1,500\n"));
        assert!(e.contains("line 3") && e.contains("cpu_milli") && e.contains("negative"), "{e}");
        let e = err_of(&format!("{h}a,x,1,1,500\n"));
        assert!(e.contains("not a whole number"), "{e}");
        let e = err_of("name,cpu_milli,num_gpu,gpu_milli\na,1,1,500\n");
        assert!(e.contains("memory_mib") && e.contains("missing column"), "{e}");
        // A misspelt optional column is refused, not read as absent (no GPU-model rule).
        let e = err_of(&format!("{}gpu_specs\na,1,1,1,500,V100M16\n", h.trim_end().to_string() + ","));
        assert!(e.contains("line 1") && e.contains("gpu_specs") && e.contains("unknown column"), "{e}");
        let e = parse_nodes("sn,cpu_milli,memory_mib,gpu,model,gpus\nn,1,1,4,T4,4\n", "n.csv").unwrap_err().to_string();
        assert!(e.contains("unknown column") && e.contains("gpus"), "{e}");
        let e = err_of(&format!("{h}a,1,1,2,500\n"));
        assert!(e.contains("whole GPUs"), "{e}");
        let e = err_of(&format!("{h}a,1,1\n"));
        assert!(e.contains("3 fields"), "{e}");
        let e = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,4,\n", "n.csv").unwrap_err().to_string();
        assert!(e.contains("model") && e.contains("line 2"), "{e}");
    }
}
