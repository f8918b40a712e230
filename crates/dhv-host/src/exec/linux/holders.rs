//! The processes that hold a file open, and their end: what a killed run
//! left holding its owner file (a plugin's helper that took the run's lock
//! when the harness died) is found by the file itself, wherever its process
//! went (another cgroup, session, parent), and killed, so that no lock held
//! by a leftover hides the run's leftovers.

use std::fs;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::time::{Duration, Instant};

/// How long a kill of the holders waits for each to be gone.
const GONE_WAIT: Duration = Duration::from_secs(2);

/// The most bytes of a holder's command line kept for the words.
pub(super) const COMMAND_CAP: usize = 256;

/// A process that held one of the files, killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: i32,
    /// Its command line, cut at a few hundred bytes.
    pub command: String,
    /// It was gone within the wait.
    pub gone: bool,
}

/// A file by its identity (device and inode), as `stat` gives them.
pub(crate) type FileId = (u64, u64);

/// The pids that hold one of `files` open by a descriptor, except this
/// process and its ancestors (the shell that started it), and processes
/// running this very program (another `dhv-conform` cleaning, or a live
/// run: neither is a leftover). A working dir is no hold: a user's shell
/// sitting in a leftover dir is no leftover.
pub fn holders(files: &[FileId]) -> Vec<i32> {
    holding(files, false)
}

/// Whether a process running this very program, other than this one (a clone
/// of the harness before its exec, say), holds one of `files`.
pub(crate) fn harness_holds(files: &[FileId]) -> bool {
    !holding(files, true).is_empty()
}

/// The pids other than this process and its ancestors that hold one of
/// `files`: those running this program when `ours`, else the others.
fn holding(files: &[FileId], ours: bool) -> Vec<i32> {
    let mut spared = vec![std::process::id() as i32];
    while let Some(parent) = super::procfs::read_stat(*spared.last().unwrap_or(&1))
        .map(|p| p.ppid)
        .filter(|&pp| pp > 1 && !spared.contains(&pp))
    {
        spared.push(parent);
    }
    let own_exe = exe_of("self");
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !spared.contains(pid))
        .filter(|&pid| {
            let exe = exe_of(&pid.to_string());
            let same = exe.is_some() && exe == own_exe;
            same == ours
        })
        .filter(|&pid| holds_any(pid, files))
        .collect();
    found.sort_unstable();
    found
}

/// The identity of the program process `pid` (a number, or `self`) runs,
/// `None` when it cannot be read (gone, or a kernel thread).
pub(super) fn exe_of(pid: &str) -> Option<FileId> {
    fs::metadata(format!("/proc/{pid}/exe"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Whether `pid` holds one of `files`.
fn holds_any(pid: i32, files: &[FileId]) -> bool {
    super::procfs::holds_open(pid, |m: &fs::Metadata| files.contains(&(m.dev(), m.ino())))
}

/// Kills every process that holds one of `files` (see [`holders`]) and
/// waits, bounded, for each to be gone. Each is pinned by a pidfd and seen
/// to hold a file again through it before the kill, so that a pid reused in
/// between is never signalled.
pub fn kill_holders(files: &[FileId]) -> Vec<Holder> {
    let mut killed = Vec::new();
    for pid in holders(files) {
        let Ok(pidfd) = super::pidfd(pid) else {
            continue;
        };
        if !holds_any(pid, files) {
            continue;
        }
        let command = super::procfs::cmdline_capped(pid, COMMAND_CAP);
        // SAFETY: pidfd_send_signal takes a pidfd we own, a signal number,
        // a null siginfo and no flags.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if sent != 0 {
            continue;
        }
        let gone = wait_readable(pidfd.as_raw_fd(), Instant::now() + GONE_WAIT);
        killed.push(Holder { pid, command, gone });
    }
    killed
}

/// Waits until `fd` (a pidfd) is readable, that is its process has ended,
/// or `deadline` passes.
pub(super) fn wait_readable(fd: i32, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: poll reads and writes the one pollfd it is given.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n > 0 {
            return true;
        }
        if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_holding_a_file_is_found_and_killed_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("owner");
        fs::write(&file, "x").unwrap();
        let meta = fs::metadata(&file).unwrap();
        let id = (meta.dev(), meta.ino());
        // A shell holding the file on its descriptor 3, as a helper that
        // took a run's lock would; `exec` keeps it one process.
        let mut holder = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "exec 3<'{}'; echo ready; exec sleep 300",
                file.display()
            ))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let bystander = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        let pid = holder.id() as i32;
        assert_eq!(holders(&[id]), vec![pid]);
        let killed = kill_holders(&[id]);
        // Reaped here: until then the killed holder is a zombie of ours.
        let status = holder.wait().unwrap();
        let mut bystander = bystander;
        let bystander_lives = bystander.try_wait().unwrap().is_none();
        let _ = bystander.kill();
        let _ = bystander.wait();
        assert_eq!(killed.len(), 1, "{killed:?}");
        assert_eq!(killed[0].pid, pid);
        assert!(
            killed[0].gone && killed[0].command.contains("sleep 300"),
            "{killed:?}"
        );
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(bystander_lives, "a process holding nothing was killed");
        assert!(holders(&[id]).is_empty());
    }

    #[test]
    fn a_pipe_held_by_a_clone_of_the_harness_is_the_harness_s_not_another_s() {
        use std::os::fd::AsRawFd as _;
        // Close-on-exec, as the harness's own: no program another test of
        // this binary starts meanwhile holds them.
        let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
        let (r, w) = nix::unistd::pipe2(cloexec).unwrap();
        let (ctl_r, ctl_w) = nix::unistd::pipe2(cloexec).unwrap();
        let st = nix::sys::stat::fstat(std::os::fd::AsFd::as_fd(&r)).unwrap();
        let id = [(st.st_dev, st.st_ino)];
        // This process holds both ends: never another's.
        assert!(holders(&id).is_empty());
        // A clone of this process that has not run another program, as a
        // plugin's clone before its exec: it holds a copy of every descriptor.
        // SAFETY: the child makes only async-signal-safe calls (close, read,
        // _exit) on descriptors it inherited, then exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let mut byte = 0u8;
            // SAFETY: closes its copy of the control pipe's write end (so that
            // the read ends when ours closes), and reads at most one byte into
            // a byte of its own.
            unsafe {
                libc::close(ctl_w.as_raw_fd());
                libc::read(ctl_r.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        assert!(child > 0, "fork failed");
        drop(ctl_r);
        let seen = harness_holds(&id);
        let outside = holders(&id);
        drop(ctl_w);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None);
        drop((r, w));
        assert!(
            seen,
            "the clone holding the pipe was not seen as the harness's"
        );
        assert!(
            outside.is_empty(),
            "counted as another program's: {outside:?}"
        );
    }
}
