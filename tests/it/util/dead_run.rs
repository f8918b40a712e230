//! A killed run's cgroup dir, planted beside a live run's, for the tests that
//! hold the sweep of dead runs (`clean`, the next run) to removing the dead
//! run's dir, with the process still in it, and never the live run's.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::{processes_mentioning, wait_for};

/// Kills, when dropped, every process mentioning `tag` (what a failed test
/// would otherwise leave running).
pub struct KillTagged(pub &'static str);

impl Drop for KillTagged {
    fn drop(&mut self) {
        for line in processes_mentioning(self.0) {
            let pid = line.split(':').next().unwrap().parse().unwrap();
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Under a hierarchy's `base`: a live run's dir (named for a sleeping
/// process's pid and start time) and a dead run's (the same pid, another
/// start time: a run whose pid was reused), with a process (`sleep TAG`)
/// moved into a nested cgroup of the dead one.
pub struct DeadAndLiveRuns {
    owner: Child,
    daemon: Child,
    dead: PathBuf,
    live: PathBuf,
    inner: PathBuf,
    _guard: KillTagged,
}

/// What the sweep did: whether it killed the process in the dead run's dir
/// (within `bound`), the signal that ended it, and which dirs are left
/// (dead run's, live run's).
pub struct Swept {
    pub ended: bool,
    pub signal: Option<i32>,
    pub left: (bool, bool),
}

impl DeadAndLiveRuns {
    /// Plants both runs' dirs under `base`; the processes mention `tag`.
    pub fn plant(base: &Path, tag: &'static str) -> DeadAndLiveRuns {
        let guard = KillTagged(tag);
        // The live run's owner is a process of its own: this test process's
        // pid names the real run dirs of the tests beside this one, which
        // remove them when their run ends.
        let mut owner = Command::new("sleep").arg(tag).spawn().unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", owner.id())).unwrap();
        let start = stat.rsplit_once(')').unwrap().1.split(' ').nth(20).unwrap();
        let dead = base.join(format!("dhv-conform-run-{}-1{start}", owner.id()));
        let live = base.join(format!("dhv-conform-run-{}-{start}", owner.id()));
        let inner = dead.join("c0").join("nested");
        std::fs::create_dir_all(live.join("c0")).unwrap();
        let mut daemon = Command::new("sleep").arg(tag).spawn().unwrap();
        // The runs of the tests beside this one sweep dead runs' dirs too, and
        // one may remove the dead run's tree between its making and the move
        // of the process into it (cgroup2 cannot rename a cgroup into place):
        // make it again. Once the process is in, whichever run sweeps first
        // kills it.
        let mut placed = Err(std::io::Error::other("never tried"));
        for _ in 0..20 {
            placed = std::fs::create_dir_all(&inner)
                .and_then(|()| std::fs::write(inner.join("cgroup.procs"), daemon.id().to_string()));
            if placed.is_ok() {
                break;
            }
        }
        if let Err(e) = placed {
            let _ = (daemon.kill(), owner.kill());
            panic!("cannot move the process into the dead run's dir: {e}");
        }
        DeadAndLiveRuns {
            owner,
            daemon,
            dead,
            live,
            inner,
            _guard: guard,
        }
    }

    /// Once the sweep ran: waits up to `bound` for the process in the dead
    /// run's dir to be killed, then ends both processes and removes what is
    /// left of the dirs, saying what the sweep did.
    pub fn swept(mut self, bound: std::time::Duration) -> Swept {
        use std::os::unix::process::ExitStatusExt;
        let ended = wait_for(bound, || self.daemon.try_wait().unwrap().is_some());
        let _ = self.daemon.kill();
        let signal = self.daemon.wait().unwrap().signal();
        let left = (self.dead.exists(), self.live.exists());
        let _ = self.owner.kill();
        let _ = self.owner.wait();
        let (dead, live) = (&self.dead, &self.live);
        for dir in [&self.inner, &dead.join("c0"), dead, &live.join("c0"), live] {
            let _ = std::fs::remove_dir(dir);
        }
        Swept {
            ended,
            signal,
            left,
        }
    }
}
