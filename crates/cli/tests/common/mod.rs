//! Helpers shared by the CLI's end-to-end tests (each test file includes this module).
#![allow(dead_code)] // each test file uses some of them

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_dqngpu");

/// A fresh directory `NAME-PID` under cargo's per-target temporary dir (the pid keeps runs of
/// the same test binary apart; the name keeps tests in one binary apart).
pub fn test_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An untrained scorer checkpoint written by `dqngpu train --iterations 0` into `dir`.
pub fn untrained_model(dir: &Path) -> PathBuf {
    let model = dir.join("m0.safetensors");
    let o = Command::new(BIN).args(["train", "--iterations", "0", "--quiet", "-o"]).arg(&model).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    model
}

/// A finished command's stdout and stderr, as one text.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// True while process `pid` runs (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// Builds the fake NVML into `dir`; `None` (and a note) where no C compiler is installed.
pub fn fake_nvml(dir: &Path) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake_nvml.c");
    let lib = dir.join("fakenvml/libnvidia-ml.so.1");
    std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
    match Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&lib).arg(&src).output() {
        Ok(o) if o.status.success() => Some(lib),
        Ok(o) => panic!("cc failed on {}: {}", src.display(), String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipped: no C compiler (`cc`: {e}) to build the fake NVML");
            None
        }
    }
}
