//! The command's process group. `profile run` starts the command as the leader of a group of
//! its own so that everything it starts (a shell's children, data-loader workers, launched
//! ranks) can be ended together, whichever way the run ends: the command exits and leaves
//! processes behind, a reading fails, or the profiler is told to stop.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};

/// How long the group gets between `SIGTERM` and `SIGKILL`.
pub const GRACE: Duration = Duration::from_secs(2);

/// Ends the group `child` leads (`SIGTERM`, then `SIGKILL` to whatever is left after
/// `grace`) and reaps `child`. Returns its exit status and whether any process of the group
/// was still there to be signalled.
pub fn end(child: &mut Child, grace: Duration) -> std::io::Result<(ExitStatus, bool)> {
    let Some(pgid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
        let _ = child.kill();
        return child.wait().map(|st| (st, true));
    };
    // Reaping the leader as it goes keeps it from counting as a member while a zombie.
    let alive = |child: &mut Child| {
        let _ = child.try_wait();
        test_kill_process_group(pgid).is_ok()
    };
    let signalled = alive(child);
    if signalled {
        let _ = kill_process_group(pgid, Signal::TERM);
        let until = Instant::now() + grace;
        while Instant::now() < until && alive(child) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(child) {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
    child.wait().map(|st| (st, signalled))
}
