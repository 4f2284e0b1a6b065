//! `dqngpu profile run` end to end with the real binary against a fake NVML
//! (`tests/data/fake_nvml.c`, built here with the system's C compiler): signals to the
//! profiler, and outputs that cannot be written.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{alive, fake_nvml, test_dir, text, BIN};
use dqngpu_model::format::read_profile;

/// `dqngpu profile run ARGS` under the fake NVML `lib`, in `dir`.
fn profile_run(lib: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir).arg("profile").arg("run").args(args).env("DQNGPU_NVML_LIB", lib).env_remove("DQNGPU_TOKEN");
    c
}

/// Waits up to 20 s for `path` to exist.
fn wait_for(path: &Path) {
    let until = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(Instant::now() < until, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to 20 s for `child` to exit.
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the profiler did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sighup_and_sigquit_end_the_commands_group_and_keep_the_readings() {
    let d = test_dir("run-signals");
    let Some(lib) = fake_nvml(&d) else { return };
    for (sig, close_stderr) in [("HUP", true), ("QUIT", false), ("TERM", false)] {
        let started = d.join(format!("started-{sig}"));
        let out = d.join(format!("out-{sig}.json"));
        // The command writes its pid (which `exec` keeps for the sleep) and then waits.
        let script = format!("echo $$ > {}.tmp && mv {0}.tmp {0} && exec sleep 30", started.display());
        let mut child = profile_run(
            &lib,
            &d,
            &["--app", "x", "--interval-ms", "50", "--keep-failed", "-o", out.to_str().unwrap(), "--", "sh", "-c"],
        )
        .arg(&script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        wait_for(&started);
        let pid: u32 = std::fs::read_to_string(&started).unwrap().trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        // A hung-up terminal: what the profiler writes to stderr from now on goes nowhere.
        let stderr = child.stderr.take().unwrap();
        let stderr = if close_stderr {
            drop(stderr);
            None
        } else {
            Some(stderr)
        };
        let k = Command::new("kill").arg(format!("-{sig}")).arg(child.id().to_string()).status().unwrap();
        assert!(k.success());
        let st = wait_exit(&mut child);
        assert_eq!(st.code(), Some(1), "SIG{sig}: the profiler ended with {st}");
        let p = read_profile(&out).unwrap_or_else(|e| panic!("SIG{sig}: no readings kept: {e}"));
        assert!(!p.samples.is_empty());
        if let Some(mut e) = stderr {
            let mut t = String::new();
            std::io::Read::read_to_string(&mut e, &mut t).unwrap();
            assert!(t.contains("stopped by a signal") && t.contains(out.to_str().unwrap()), "SIG{sig}: {t}");
        }
        let until = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            assert!(Instant::now() < until, "SIG{sig}: the command (pid {pid}) was left running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn an_output_that_cannot_be_written_is_refused_before_the_command_runs() {
    let d = test_dir("run-unwritable");
    let Some(lib) = fake_nvml(&d) else { return };
    let marker = d.join("ran");
    // `profile run --interval-ms 50 DEST -- sh -c 'touch ran; ...'`: refused (exit 1) saying
    // nothing was run, and nothing was; its message.
    let refused = |dest: &[&str], what: &str| {
        let touch = ["--", "sh", "-c", "touch ran; sleep 0.3"];
        let o = profile_run(&lib, &d, &[&["--interval-ms", "50"][..], dest, &touch].concat()).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{what}: {t}");
        assert!(t.contains("nothing was run"), "{what}: {t}");
        assert!(!marker.exists(), "the command ran although {what}");
        t
    };
    // A --store name made from a long --app: `APP.json` fits in 255 bytes, its temporary
    // file's name does not.
    let long_app = "a".repeat(240);
    let store = d.join("store");
    let t = refused(&["--app", &long_app, "--store", "store"], "its profile could not be stored");
    assert!(t.contains("--store") && t.contains("245 bytes"), "{t}");
    assert_eq!(std::fs::read_dir(&store).map(|r| r.count()).unwrap_or(0), 0);
    // -o likewise.
    let long_o = format!("{}.json", "o".repeat(245));
    assert!(refused(&["--app", "x", "-o", &long_o], "-o could not be written").contains(&long_o));
    // A service that does not answer.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    assert!(refused(&["--app", "x", "--server", &url], "the service does not answer").contains(&url));
}

#[test]
fn a_profile_that_cannot_be_written_after_the_run_is_kept_in_the_temporary_directory() {
    let d = test_dir("run-late");
    let Some(lib) = fake_nvml(&d) else { return };
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // The command takes the output's directory away: the write after the run fails.
    let o = profile_run(
        &lib,
        &d,
        &[
            "--app",
            "late",
            "--interval-ms",
            "50",
            "-o",
            "out/p.json",
            "--",
            "sh",
            "-c",
            "sleep 0.3; rm -r out; echo > out",
        ],
    )
    .env("TMPDIR", &tmp)
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let kept: Vec<PathBuf> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(kept.len(), 1, "{kept:?}: {}", text(&o));
    let t = text(&o);
    assert!(t.contains(&kept[0].display().to_string()) && t.contains("out/p.json"), "{t}");
    let p = read_profile(&kept[0]).unwrap();
    assert_eq!(p.app.name, "late");
    assert!(!p.samples.is_empty());
}
