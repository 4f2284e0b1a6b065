//! One service per data dir: an exclusive advisory lock on `DATA_DIR/dqngpu.lock`.
//!
//! Two servers on one data dir would both place jobs on the same GPUs (overbooking them) and
//! each adopt the other's running jobs. The lock is `flock(2)`: it belongs to the open file
//! description, so two opens conflict even within one process, and the OS drops it when the
//! process dies, so a SIGKILLed server never blocks its restart. std opens files
//! close-on-exec, so the job supervisors (which outlive the server) never inherit it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

use crate::error::ServiceError;

/// The lock file's name in the data dir.
pub const LOCK_FILE: &str = "dqngpu.lock";

/// The held lock; dropping it (closing the file) releases it.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
    path: PathBuf,
}

impl DataDirLock {
    /// Takes the lock on `data_dir` without waiting, and writes this process's pid into the
    /// lock file. Fails with [`ServiceError::DataDirInUse`] when another holder has it.
    pub fn acquire(data_dir: &Path) -> Result<Self, ServiceError> {
        let path = data_dir.join(LOCK_FILE);
        let io_err = |e| ServiceError::io(&path, e);
        // Never truncate on open: the holder's pid is in there until we own the lock.
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io_err)?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                return Err(ServiceError::DataDirInUse { dir: data_dir.to_path_buf(), holder: read_pid(&mut file) });
            }
            Err(e) => return Err(io_err(e.into())),
        }
        write_pid(&mut file).map_err(io_err)?;
        Ok(DataDirLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The holder's pid, when it has written one (it may not have yet, or be an old version).
fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Replaces the file's content with our pid, so a refused server can say who holds it.
fn write_pid(file: &mut File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{}", std::process::id())?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_in_one_process_is_refused_naming_the_dir_and_pid() {
        let d = tempfile::tempdir().unwrap();
        let held = DataDirLock::acquire(d.path()).unwrap();
        let written = std::fs::read_to_string(held.path()).unwrap();
        assert_eq!(written.trim(), std::process::id().to_string());
        let err = DataDirLock::acquire(d.path()).unwrap_err();
        match &err {
            ServiceError::DataDirInUse { dir, holder } => {
                assert_eq!(dir, d.path());
                assert_eq!(*holder, Some(std::process::id()));
            }
            other => panic!("expected DataDirInUse, got {other}"),
        }
        let text = err.to_string();
        assert!(text.contains(&d.path().display().to_string()), "{text}");
        assert!(text.contains(&format!("pid {}", std::process::id())), "{text}");
        // The refused attempt must not have wiped the holder's pid.
        assert_eq!(std::fs::read_to_string(held.path()).unwrap(), written);
    }

    #[test]
    fn dropping_the_lock_frees_the_dir() {
        let d = tempfile::tempdir().unwrap();
        drop(DataDirLock::acquire(d.path()).unwrap());
        let again = DataDirLock::acquire(d.path());
        assert!(again.is_ok(), "{:?}", again.err());
    }

    #[test]
    fn a_holder_without_a_pid_is_still_refused() {
        let d = tempfile::tempdir().unwrap();
        let held = DataDirLock::acquire(d.path()).unwrap();
        std::fs::write(held.path(), "").unwrap();
        let err = DataDirLock::acquire(d.path()).unwrap_err();
        assert!(matches!(err, ServiceError::DataDirInUse { holder: None, .. }), "{err}");
        assert!(err.to_string().contains("another dqngpu serve holds"), "{err}");
    }
}
