//! The executor: runs a job's argv as a child process (never through a shell) on one GPU.
//!
//! Each attempt has a directory `jobs/<id>/attempt-<n>/` with `stdout`, `stderr`, `owner`
//! and `exit.json`; the job's working directory `jobs/<id>/work/` is shared by its attempts.
//!
//! Crash safety: with a [`Supervisor::Shim`], the service starts a small supervisor process
//! (the `dqngpu` binary's hidden `serve job-shim`, see [`run_shim`]) in its own process
//! group. The shim claims the attempt by creating `owner` exclusively, runs the job, and
//! writes `exit.json` atomically when it ends. It outlives a killed service, so a restarted
//! service re-adopts it and reads the real exit status. [`Supervisor::Direct`] runs the job
//! itself as the child (no extra process; used by library tests); after a crash its orphans
//! are stopped and the job re-queued.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use dqngpu_model::JobId;

use crate::error::ServiceError;

/// How jobs are started.
#[derive(Debug, Clone)]
pub enum Supervisor {
    /// The service is the job's parent.
    Direct,
    /// A supervisor process started as `program args.. --dir ATTEMPT_DIR -- ARGV..`.
    Shim {
        /// The supervisor program (the `dqngpu` binary).
        program: PathBuf,
        /// Arguments before `--dir` (`serve job-shim`).
        args: Vec<OsString>,
    },
}

/// Everything needed to start one attempt.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Job.
    pub job: JobId,
    /// Attempt number.
    pub attempt: u32,
    /// `CUDA_VISIBLE_DEVICES` value (the GPU's index on this machine).
    pub cuda_index: u32,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, when MPS is on.
    pub mps_thread_pct: Option<u8>,
    /// The job's working directory.
    pub work_dir: PathBuf,
    /// The attempt's directory.
    pub attempt_dir: PathBuf,
}

/// How a process ended, as written to `exit.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Why it could not be started.
    pub spawn_error: Option<String>,
    /// The start failed for a lack of resources that passes (out of file descriptors, a full
    /// disk: [`is_transient`]), not for the job's own fault: it is queued again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transient: bool,
    /// The supervisor vanished without a status (set by the service, never written).
    #[serde(skip)]
    pub lost: bool,
    /// It was found lost while the service restarted (not the job's fault: no retry is used).
    #[serde(skip)]
    pub lost_in_restart: bool,
}

impl ExitInfo {
    /// Exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.lost
    }

    fn from_status(s: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        ExitInfo { exit_code: s.code(), signal: s.signal(), ..Default::default() }
    }

    fn lost() -> Self {
        ExitInfo { lost: true, ..Default::default() }
    }
}

/// The claim file's contents.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Owner {
    /// `shim`, `direct` or `abandoned`.
    mode: String,
    pid: u32,
    start: u64,
}

const OWNER: &str = "owner";
const EXIT: &str = "exit.json";

/// A started attempt.
#[derive(Debug)]
pub struct Started {
    /// Process id of the supervisor (or the job, in direct mode); also its process group.
    pub pid: u32,
    /// Its start time in clock ticks since boot.
    pub pid_start: u64,
    /// Waits for the end.
    pub wait: tokio::task::JoinHandle<ExitInfo>,
}

/// True for an OS error that passes with time and says nothing of the job: the process or
/// the system is out of file descriptors (`EMFILE`, `ENFILE`) or the disk is full (`ENOSPC`).
/// A launch that fails so is retried, not the job failed for good.
pub fn is_transient(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    Errno::from_io_error(e).is_some_and(|n| matches!(n, Errno::MFILE | Errno::NFILE | Errno::NOSPC))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ServiceError + '_ {
    move |e| ServiceError::io(path, e)
}

/// Field `n` (1-based, as proc(5) numbers them) of `/proc/PID/stat`, or `None` when the process
/// is gone (a zombie too: it holds no resources and ignores signals).
fn stat_field(pid: u32, n: usize) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')', with
    // the state (field 3).
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(n.checked_sub(3)?)?.parse().ok()
}

/// The start time of a process (field 22 of `/proc/PID/stat`), or `None` when it is gone.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    stat_field(pid, 22)
}

/// True when `pid` is alive and is the process that started at `start`.
pub fn same_process_alive(pid: u32, start: u64) -> bool {
    process_start_ticks(pid) == Some(start)
}

/// Ends process group `pid` (led by the process that started at `start`) in the background:
/// [`end_group`] with `grace` between `SIGTERM` and `SIGKILL`, sparing `except` (a cancel,
/// which spares the supervisor so that it outlives its job and records how it ended; an
/// orphan found at restart, 0).
pub fn stop_group(pid: u32, start: u64, except: u32, grace: Duration) {
    std::thread::spawn(move || end_group(pid, start, except, grace));
}

/// How long a cancelled job gets between `SIGTERM` and `SIGKILL` (docs/SERVICE.md).
pub const CANCEL_GRACE: Duration = Duration::from_secs(3);

/// The process group of `pid` (field 5 of `/proc/PID/stat`), or `None` when it is gone.
fn process_group_of(pid: u32) -> Option<u32> {
    stat_field(pid, 5).and_then(|g| u32::try_from(g).ok())
}

/// The live processes of process group `pgid`, but `except`.
fn group_members(pgid: u32, except: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != except && process_group_of(p) == Some(pgid))
        .collect()
}

/// Ends what is left of an attempt's process group `pgid` once the attempt is over: the job's
/// background children after it exited, or the whole job when its supervisor died (it would
/// otherwise run on beside the attempt that replaces it). `SIGTERM`, then `SIGKILL` to any
/// still there after `grace`. `leader_start` is the group leader's start time: while a process
/// other than the leader holds the id `pgid`, the id was reused and nothing is signalled (the
/// kernel keeps an id free while a group of it has members, so members found while the id is
/// free are the attempt's). `except` is spared (the supervisor cleaning up its own group).
pub fn end_group(pgid: u32, leader_start: u64, except: u32, grace: Duration) {
    use rustix::process::{kill_process, Pid, Signal};
    if pgid <= 1 || process_start_ticks(pgid).is_some_and(|s| s != leader_start) {
        return;
    }
    let signal_all = |sig: Signal| {
        let members = group_members(pgid, except);
        for p in &members {
            if let Some(pid) = i32::try_from(*p).ok().and_then(Pid::from_raw) {
                let _ = kill_process(pid, sig);
            }
        }
        !members.is_empty()
    };
    if !signal_all(Signal::TERM) {
        return;
    }
    let until = std::time::Instant::now() + grace;
    while std::time::Instant::now() < until && !group_members(pgid, except).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_all(Signal::KILL);
}

/// How long an ended attempt's leftovers get between `SIGTERM` and `SIGKILL`.
pub const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

fn write_owner(dir: &Path, owner: &Owner) -> Result<bool, ServiceError> {
    let path = dir.join(OWNER);
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(mut f) => {
            let text = serde_json::to_string(owner)?;
            f.write_all(text.as_bytes()).map_err(io(&path))?;
            f.sync_all().map_err(io(&path))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(ServiceError::io(path, e)),
    }
}

fn read_owner(dir: &Path) -> Option<Owner> {
    // The claimant writes right after creating: retry a little for a half-written file.
    for _ in 0..50 {
        match std::fs::read_to_string(dir.join(OWNER)) {
            Ok(t) => match serde_json::from_str(&t) {
                Ok(o) => return Some(o),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            },
            Err(_) => return None,
        }
    }
    None
}

/// Reads `exit.json`, when the supervisor wrote it.
pub fn read_exit(dir: &Path) -> Option<ExitInfo> {
    let t = std::fs::read_to_string(dir.join(EXIT)).ok()?;
    serde_json::from_str(&t).ok()
}

fn write_exit(dir: &Path, e: &ExitInfo) -> Result<(), ServiceError> {
    let text = serde_json::to_string(e)?;
    dqngpu_model::error::write_file_atomic(&dir.join(EXIT), text.as_bytes())?;
    Ok(())
}

fn job_command(program: &OsString, args: &[OsString], l: &Launch, stdout: File, stderr: File) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    c.args(args)
        .current_dir(&l.work_dir)
        .envs(&l.env)
        .env("CUDA_VISIBLE_DEVICES", l.cuda_index.to_string())
        // The index is NVML's, in PCI bus order; CUDA numbers devices fastest first unless
        // told otherwise, and on a mixed box the job would run on another card.
        .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        .env("DQNGPU_JOB_ID", l.job.to_string())
        .env("DQNGPU_ATTEMPT", l.attempt.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    if let Some(p) = l.mps_thread_pct {
        c.env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", p.to_string());
    }
    c
}

/// Moves aside what another database left where this attempt goes: job ids start at 1 again
/// when the database is reset or restored from a backup, and a new job 1 took the old one's
/// attempt directory, whose claim made its supervisor give up and whose `exit.json` became
/// the new job's result without its program ever running (and its work directory, the old
/// files). A first attempt moves the whole job directory aside, a later one its own attempt
/// directory; both kept, renamed `NAME.stale-UNIXNANOS`, nothing deleted.
fn set_aside_leftovers(l: &Launch) -> Result<(), ServiceError> {
    let job_dir = l.work_dir.parent().filter(|_| l.attempt == 1);
    let Some(old) = job_dir.or(Some(l.attempt_dir.as_path())).filter(|d| d.exists()) else { return Ok(()) };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut aside = old.as_os_str().to_owned();
    aside.push(format!(".stale-{nanos}"));
    let aside = PathBuf::from(aside);
    std::fs::rename(old, &aside).map_err(io(old))?;
    tracing::warn!(job = l.job, attempt = l.attempt, from = %old.display(), to = %aside.display(),
        "a directory another database left where this attempt goes was moved aside");
    Ok(())
}

/// Starts an attempt. The returned `wait` resolves when it ends.
pub fn launch(sup: &Supervisor, l: &Launch) -> Result<Started, ServiceError> {
    use std::os::unix::process::CommandExt;
    set_aside_leftovers(l)?;
    std::fs::create_dir_all(&l.work_dir).map_err(io(&l.work_dir))?;
    std::fs::create_dir_all(&l.attempt_dir).map_err(io(&l.attempt_dir))?;
    let out_path = l.attempt_dir.join("stdout");
    let err_path = l.attempt_dir.join("stderr");
    let stdout = File::create(&out_path).map_err(io(&out_path))?;
    let stderr = File::create(&err_path).map_err(io(&err_path))?;
    let (program, args): (OsString, Vec<OsString>) = match sup {
        Supervisor::Direct => {
            let own = Owner { mode: "direct".into(), pid: std::process::id(), start: 0 };
            if !write_owner(&l.attempt_dir, &own)? {
                return Err(ServiceError::Config(format!("attempt dir {} already claimed", l.attempt_dir.display())));
            }
            (l.argv[0].clone().into(), l.argv[1..].iter().map(OsString::from).collect())
        }
        Supervisor::Shim { program, args } => {
            let mut a = args.clone();
            a.push("--dir".into());
            a.push(l.attempt_dir.clone().into());
            a.push("--".into());
            a.extend(l.argv.iter().map(OsString::from));
            (program.clone().into_os_string(), a)
        }
    };
    let mut cmd = job_command(&program, &args, l, stdout, stderr);
    // Its own process group: a cancel stops the job and its children, and a signal sent to
    // the service's group (Ctrl-C) does not reach the jobs.
    cmd.process_group(0);
    let mut child = match tokio::process::Command::from(cmd).spawn() {
        Ok(c) => c,
        Err(e) => {
            // What failed to start: the job's program, or (under a shim) the supervisor.
            let what = match sup {
                Supervisor::Direct => format!("`{}`", l.argv[0]),
                Supervisor::Shim { .. } => format!("the job's supervisor `{}`", program.to_string_lossy()),
            };
            let transient = is_transient(&e);
            let info =
                ExitInfo { spawn_error: Some(format!("cannot start {what}: {e}")), transient, ..Default::default() };
            // A transient failure writes nothing more (there may be no descriptor to write
            // with): a restart finds the attempt unfinished and queues the job again.
            if matches!(sup, Supervisor::Direct) && !transient {
                write_exit(&l.attempt_dir, &info)?;
            }
            return Ok(Started { pid: 0, pid_start: 0, wait: tokio::spawn(async move { info }) });
        }
    };
    let pid = child.id().unwrap_or(0);
    let pid_start = process_start_ticks(pid).unwrap_or(0);
    let dir = l.attempt_dir.clone();
    let direct = matches!(sup, Supervisor::Direct);
    let wait = tokio::spawn(async move {
        let status = child.wait().await;
        let info = if direct {
            let info = match status {
                Ok(s) => ExitInfo::from_status(s),
                Err(_) => ExitInfo::lost(),
            };
            let _ = write_exit(&dir, &info);
            info
        } else {
            // The shim writes exit.json before it exits; without it, the shim itself died.
            read_exit(&dir).unwrap_or_else(ExitInfo::lost)
        };
        // Whatever is left of the group ends with the attempt, before its GPU is given to
        // another: a direct job's children, or a dead shim's job (a shim that wrote its exit
        // has ended its own group).
        if direct || info.lost {
            let _ = tokio::task::spawn_blocking(move || end_group(pid, pid_start, 0, LEFTOVER_GRACE)).await;
        }
        info
    });
    Ok(Started { pid, pid_start, wait })
}

/// What a restarted service finds for an attempt the store says runs.
#[derive(Debug)]
pub enum Recovered {
    /// It ended while the service was down.
    Ended(ExitInfo),
    /// Its supervisor still runs: watch it.
    Adopted {
        /// Supervisor pid.
        pid: u32,
        /// Its start time.
        start: u64,
    },
    /// It never started or its supervisor vanished without a status.
    Lost {
        /// The dead supervisor's (pid, start time), as it claimed the attempt: its group may
        /// still hold the job, to be ended before the job runs again (the store may lack the
        /// pid: the service can die between the spawn and recording it).
        group: Option<(u32, u64)>,
    },
}

/// Decides what became of an attempt across a restart (see the module docs).
pub fn recover(attempt_dir: &Path) -> Result<Recovered, ServiceError> {
    if let Some(e) = read_exit(attempt_dir) {
        return Ok(Recovered::Ended(e));
    }
    let lost = Recovered::Lost { group: None };
    if !attempt_dir.exists() {
        return Ok(lost);
    }
    // Claim the attempt as abandoned; if that succeeds, no shim will ever run it.
    let abandoned = Owner { mode: "abandoned".into(), pid: std::process::id(), start: 0 };
    if write_owner(attempt_dir, &abandoned)? {
        return Ok(lost);
    }
    let Some(owner) = read_owner(attempt_dir) else { return Ok(lost) };
    match owner.mode.as_str() {
        "shim" if same_process_alive(owner.pid, owner.start) => {
            Ok(Recovered::Adopted { pid: owner.pid, start: owner.start })
        }
        "shim" => Ok(read_exit(attempt_dir)
            .map(Recovered::Ended)
            .unwrap_or(Recovered::Lost { group: Some((owner.pid, owner.start)) })),
        _ => Ok(read_exit(attempt_dir).map(Recovered::Ended).unwrap_or(lost)),
    }
}

/// Watches an adopted supervisor until it ends.
pub fn watch_adopted(attempt_dir: PathBuf, pid: u32, start: u64, poll: Duration) -> tokio::task::JoinHandle<ExitInfo> {
    tokio::spawn(async move {
        loop {
            if let Some(e) = read_exit(&attempt_dir) {
                return e;
            }
            if !same_process_alive(pid, start) {
                let _ = tokio::task::spawn_blocking(move || end_group(pid, start, 0, LEFTOVER_GRACE)).await;
                return read_exit(&attempt_dir).unwrap_or_else(ExitInfo::lost);
            }
            tokio::time::sleep(poll).await;
        }
    })
}

/// The supervisor's body (`dqngpu serve job-shim --dir DIR -- ARGV..`): claims the attempt,
/// runs the job with the inherited stdio, environment and working directory, and writes
/// `exit.json`. Returns the shim's own exit code.
pub fn run_shim(attempt_dir: &Path, argv: &[OsString]) -> Result<i32, ServiceError> {
    let me = std::process::id();
    let owner = Owner { mode: "shim".into(), pid: me, start: process_start_ticks(me).unwrap_or(0) };
    if !write_owner(attempt_dir, &owner)? {
        // The service gave this attempt up while it was down: never run it.
        return Ok(3);
    }
    let Some((prog, args)) = argv.split_first() else {
        write_exit(attempt_dir, &ExitInfo { spawn_error: Some("empty command".into()), ..Default::default() })?;
        return Ok(2);
    };
    let info = match std::process::Command::new(prog).args(args).status() {
        Ok(s) => ExitInfo::from_status(s),
        Err(e) => ExitInfo {
            spawn_error: Some(format!("cannot start `{}`: {e}", prog.to_string_lossy())),
            transient: is_transient(&e),
            ..Default::default()
        },
    };
    // The job's leftover children end with it (before exit.json frees its GPU), but only
    // when this shim leads its own group, as the service starts it: never another's group.
    if rustix::process::getpgrp() == rustix::process::getpid() {
        end_group(me, owner.start, me, LEFTOVER_GRACE);
    }
    write_exit(attempt_dir, &info)?;
    Ok(0)
}

/// The last `max` bytes of a file (lossy UTF-8), or empty when it does not exist.
pub fn tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > max {
        let _ = f.seek(SeekFrom::Start(len - max));
    }
    let mut buf = Vec::new();
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// True when the text holds CUDA's out-of-memory message.
pub fn mentions_oom(stderr: &str) -> bool {
    stderr.to_ascii_lowercase().contains("out of memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recover_reads_an_exit_file_first() {
        let d = tempfile::tempdir().unwrap();
        write_exit(d.path(), &ExitInfo { exit_code: Some(4), ..Default::default() }).unwrap();
        match recover(d.path()).unwrap() {
            Recovered::Ended(e) => assert_eq!(e.exit_code, Some(4)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unclaimed_attempt_is_abandoned_and_a_late_shim_refuses_it() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(recover(d.path()).unwrap(), Recovered::Lost { group: None }));
        // The shim that arrives after the service gave up must not run the job.
        let code = run_shim(d.path(), &["sh".into(), "-c".into(), "exit 0".into()]).unwrap();
        assert_eq!(code, 3);
        assert!(read_exit(d.path()).is_none());
    }

    #[test]
    fn live_shim_is_adopted_and_dead_one_is_lost() {
        let d = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let start = process_start_ticks(me).unwrap();
        write_owner(d.path(), &Owner { mode: "shim".into(), pid: me, start }).unwrap();
        assert!(matches!(recover(d.path()).unwrap(), Recovered::Adopted { pid, .. } if pid == me));
        let d2 = tempfile::tempdir().unwrap();
        // Same pid, other start time: a reused pid is not the shim.
        write_owner(d2.path(), &Owner { mode: "shim".into(), pid: me, start: start + 1 }).unwrap();
        // The dead shim's group is named, so that what it left is ended before a re-run.
        assert!(
            matches!(recover(d2.path()).unwrap(), Recovered::Lost { group: Some((pid, s)) } if pid == me && s == start + 1)
        );
    }

    #[test]
    fn shim_records_exit_code_and_spawn_errors() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(run_shim(d.path(), &["sh".into(), "-c".into(), "exit 5".into()]).unwrap(), 0);
        assert_eq!(read_exit(d.path()).unwrap().exit_code, Some(5));
        let d = tempfile::tempdir().unwrap();
        run_shim(d.path(), &["/nonexistent/prog".into()]).unwrap();
        assert!(read_exit(d.path()).unwrap().spawn_error.unwrap().contains("/nonexistent/prog"));
    }

    /// A launch of `script` (through `sh -c`) in `d`, run directly.
    fn direct(d: &Path, script: &str) -> Launch {
        Launch {
            job: 1,
            attempt: 1,
            cuda_index: 0,
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: BTreeMap::new(),
            mps_thread_pct: None,
            work_dir: d.join("work"),
            attempt_dir: d.join("attempt-1"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_jobs_leftover_children_end_with_it() {
        let d = tempfile::tempdir().unwrap();
        let started = launch(&Supervisor::Direct, &direct(d.path(), "sleep 300 & echo $! > bg; exit 0")).unwrap();
        let exit = started.wait.await.unwrap();
        assert_eq!(exit.exit_code, Some(0));
        let bg: u32 = std::fs::read_to_string(d.path().join("work/bg")).unwrap().trim().parse().unwrap();
        // Ended with the attempt (SIGTERM ends `sleep` at once; the wait covers the grace).
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            process_group_of(bg).is_none()
        });
        assert!(gone, "the job's background child {bg} outlived the job");
    }

    #[test]
    fn a_reused_group_id_is_never_signalled() {
        use std::os::unix::process::CommandExt;
        let me = std::process::id();
        let start = process_start_ticks(me).unwrap();
        let child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pgid = child.id();
        // The leader runs with another start time than the one given: the id is "reused".
        end_group(pgid, process_start_ticks(pgid).unwrap() + 1, 0, Duration::from_millis(50));
        assert!(process_group_of(pgid).is_some(), "a process of a reused group id was signalled");
        // With its own start time, the group ends.
        end_group(pgid, process_start_ticks(pgid).unwrap(), 0, Duration::from_millis(50));
        let mut child = child;
        let status = child.wait().unwrap();
        assert!(!status.success(), "{status:?}");
        assert!(same_process_alive(me, start));
    }

    #[test]
    fn out_of_descriptors_or_disk_is_transient_and_a_missing_program_is_not() {
        use rustix::io::Errno;
        for e in [Errno::MFILE, Errno::NFILE, Errno::NOSPC] {
            assert!(is_transient(&std::io::Error::from(e)), "{e:?}");
        }
        assert!(!is_transient(&std::io::Error::from(Errno::NOENT)));
        let info = ExitInfo { spawn_error: Some("x".into()), transient: true, ..Default::default() };
        let back: ExitInfo = serde_json::from_str(&serde_json::to_string(&info).unwrap()).unwrap();
        assert_eq!(back, info, "the shim's exit.json keeps the flag");
        // An exit.json written before the flag existed still reads.
        let old: ExitInfo = serde_json::from_str(r#"{"exit_code":1,"signal":null,"spawn_error":null}"#).unwrap();
        assert!(!old.transient);
    }

    #[test]
    fn tail_and_oom_detection() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(tail(&p, 4), "6789");
        assert_eq!(tail(&d.path().join("missing"), 4), "");
        assert!(mentions_oom("RuntimeError: CUDA out of memory. Tried to allocate"));
        assert!(!mentions_oom("segmentation fault"));
    }
}
