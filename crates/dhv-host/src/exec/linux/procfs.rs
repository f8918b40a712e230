//! Reading the process table from `/proc`: who is whose child, in which group,
//! with which environment and command line, holding which pipes.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::MetadataExt;

/// One row of the process table.
#[derive(Debug, Clone)]
pub(crate) struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    /// When it started, in clock ticks since boot.
    pub started: u64,
    pub zombie: bool,
}

/// The fields of a `stat` line from the 3rd (the state) on, see
/// proc_pid_stat(5): after the command name, which is in parentheses and
/// may itself hold spaces or ')'.
pub(crate) fn stat_fields(text: &[u8]) -> Option<std::str::SplitAsciiWhitespace<'_>> {
    let after = text.iter().rposition(|&b| b == b')')?;
    Some(
        std::str::from_utf8(&text[after + 1..])
            .ok()?
            .split_ascii_whitespace(),
    )
}

/// The fields of a `stat` line, by their number in proc_pid_stat(5).
struct StatFields<'a>(Vec<&'a str>);

impl<'a> StatFields<'a> {
    /// Field `n` (3, the state, and on).
    fn get(&self, n: usize) -> Option<&'a str> {
        self.0.get(n.checked_sub(3)?).copied()
    }
}

/// `f` given `pid`'s `stat` fields; `None` when it is gone (or unreadable).
fn with_stat<R>(pid: i32, f: impl FnOnce(&StatFields<'_>) -> Option<R>) -> Option<R> {
    let text = fs::read(format!("/proc/{pid}/stat")).ok()?;
    f(&StatFields(stat_fields(&text)?.collect()))
}

/// The row of `pid`, or `None` when it is gone (or unreadable).
pub(crate) fn read_stat(pid: i32) -> Option<Proc> {
    with_stat(pid, |field| {
        let state = field.get(3)?;
        Some(Proc {
            pid,
            ppid: field.get(4)?.parse().ok()?,
            pgid: field.get(5)?.parse().ok()?,
            started: field.get(22)?.parse().ok()?,
            zombie: state == "Z" || state == "X",
        })
    })
}

/// What a process is doing: whether it is waiting (asleep or stopped), in an
/// uninterruptible wait, or neither (runnable: running, or waiting for a
/// CPU), and the CPU it has used so far.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Activity {
    /// Asleep (`S`) or stopped (`T`, `t`): it waits for something, not for a CPU.
    pub waiting: bool,
    /// In an uninterruptible wait (`D`): neither runnable nor able to be woken.
    pub stuck: bool,
    /// User and system time since it started.
    pub cpu: std::time::Duration,
    /// A zombie (`Z`) or dead (`X`): it runs no more, and waits only to be reaped.
    pub ended: bool,
}

/// What `pid` is doing now, or `None` when it is gone (or unreadable).
pub(crate) fn activity(pid: i32) -> Option<Activity> {
    with_stat(pid, |field| {
        let ticks: u64 =
            field.get(14)?.parse::<u64>().ok()? + field.get(15)?.parse::<u64>().ok()?;
        Some(Activity {
            waiting: matches!(field.get(3)?, "S" | "T" | "t"),
            stuck: field.get(3)? == "D",
            ended: matches!(field.get(3)?, "Z" | "X"),
            cpu: std::time::Duration::from_nanos(
                ticks.saturating_mul(1_000_000_000 / ticks_per_second()),
            ),
        })
    })
}

/// The calling thread's id and the time it has spent runnable, waiting for a
/// CPU (`/proc/thread-self/schedstat`'s second field); `None` where the kernel
/// keeps no scheduler statistics.
pub(crate) fn thread_cpu_wait() -> Option<(i32, std::time::Duration)> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let text = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let waited: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some((tid, std::time::Duration::from_nanos(waited)))
}

/// Every process we can see.
pub(crate) fn process_table() -> Vec<Proc> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// The whole current content of an open procfs file, read again from offset 0
/// (which regenerates it, at a fraction of the cost of opening it anew).
pub(crate) fn reread(file: &fs::File) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    // The files read this way are a line of a few hundred bytes, unless many
    // orphans wait.
    let mut text = vec![0u8; 1024];
    let mut len = 0;
    loop {
        if len == text.len() {
            text.resize(2 * len, 0);
        }
        match file.read_at(&mut text[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    text.truncate(len);
    Ok(text)
}

/// `f` over the current content of an open procfs or cgroupfs file that the
/// kernel generates as one record (`stat`, `status`, `cgroup.events`,
/// `cpu.pressure`):
/// one `pread` into a stack buffer, no allocation. Such a file is produced
/// whole by the first read, so a read shorter than the buffer is all of it;
/// one that fills the buffer is read again the long way.
pub(crate) fn reread_small<R>(file: &fs::File, f: impl FnOnce(&[u8]) -> R) -> std::io::Result<R> {
    use std::os::unix::fs::FileExt;
    // `status` is the longest read this way: about 1.5 KiB.
    let mut buf = [0u8; 4096];
    loop {
        match file.read_at(&mut buf, 0) {
            Ok(n) if n < buf.len() => return Ok(f(&buf[..n])),
            Ok(_) => return reread(file).map(|text| f(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Whether `text` holds `needle`.
pub(crate) fn holds(text: &[u8], needle: &[u8]) -> bool {
    text.windows(needle.len()).any(|w| w == needle)
}

/// The pids listed, white space separated, in `text` (a `children` or
/// `cgroup.procs` file).
pub(crate) fn parse_pids(text: &[u8], pids: &mut Vec<i32>) {
    pids.extend(
        String::from_utf8_lossy(text)
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok()),
    );
}

/// The most bytes of a process's environment read from `/proc`: more than
/// the kernel lets an exec pass (three quarters of the largest stack limit
/// it honours for it, 6 MiB). A process may point its environment at any of
/// its memory (`PR_SET_MM_ENV_START`, as root), gigabytes; past this, what
/// was not read does not count.
pub(crate) const ENVIRON_CAP: u64 = 8 << 20;

/// A call's environment as handed to `execve`, `KEY=value` each, in order;
/// shared by the spawn, the live-call table and the sweeps without copying.
pub(crate) type EnvBlock = std::sync::Arc<[CString]>;

/// Whether `pid`'s environment still holds every variable of `env`, read up
/// to [`ENVIRON_CAP`] bytes.
pub(crate) fn environ_matches(pid: i32, env: &[CString]) -> bool {
    let Ok(file) = fs::File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    holds_every_var(file, env, ENVIRON_CAP)
}

/// Whether the NUL-separated variables read from `from` (up to `cap` bytes)
/// hold every one of `env`. Streamed through one small buffer: a variable
/// longer than the longest of `env` is passed over unkept, so the memory
/// used is the buffer and one such variable, whatever `from` holds.
pub(crate) fn holds_every_var(from: impl std::io::Read, env: &[CString], cap: u64) -> bool {
    use std::io::Read as _;
    if env.is_empty() {
        return false;
    }
    let longest = env.iter().map(|kv| kv.as_bytes().len()).max().unwrap_or(0);
    let mut seen = vec![false; env.len()];
    let mut left = env.len();
    let mut var: Vec<u8> = Vec::with_capacity(longest + 1);
    // Set once the variable under way is longer than any wanted.
    let mut too_long = false;
    let check = |var: &[u8], seen: &mut [bool], left: &mut usize| {
        for (i, kv) in env.iter().enumerate() {
            if !seen[i] && kv.as_bytes() == var {
                seen[i] = true;
                *left -= 1;
            }
        }
    };
    let mut from = from.take(cap);
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        for piece in buf[..n].split_inclusive(|&b| b == 0) {
            let (bytes, ends) = match piece.split_last() {
                Some((0, bytes)) => (bytes, true),
                _ => (piece, false),
            };
            if !too_long {
                if var.len() + bytes.len() > longest {
                    too_long = true;
                    var.clear();
                } else {
                    var.extend_from_slice(bytes);
                }
            }
            if ends {
                if !too_long {
                    check(&var, &mut seen, &mut left);
                }
                var.clear();
                too_long = false;
                if left == 0 {
                    return true;
                }
            }
        }
    }
    // The last variable may lack its NUL.
    if !too_long && !var.is_empty() {
        check(&var, &mut seen, &mut left);
    }
    left == 0
}

/// The first `cap` bytes of a file of `/proc` or `/sys` (all of it when it is
/// shorter); `None` when it cannot be read.
pub(crate) fn read_capped(path: impl AsRef<std::path::Path>, cap: usize) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut text = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(cap as u64).read_to_end(&mut text))
        .ok()?;
    Some(text)
}

/// The most bytes of a command line read from `/proc`: a leftover's
/// arguments may be megabytes (each up to `MAX_ARG_STRLEN`, as many as the
/// stack limit allows), and the harness reads them for every leftover of
/// every call; a few KiB name a process.
pub(crate) const CMDLINE_CAP: usize = 4096;

/// `pid`'s command line, arguments joined by spaces (`[comm]` when it has
/// none), read up to [`CMDLINE_CAP`] bytes (then ending in `...`).
pub(crate) fn cmdline(pid: i32) -> String {
    cmdline_capped(pid, CMDLINE_CAP)
}

/// `pid`'s command line as [`cmdline`] gives it, read up to `cap` bytes.
pub(crate) fn cmdline_capped(pid: i32, cap: usize) -> String {
    use std::io::Read as _;
    let mut raw = Vec::new();
    let read = fs::File::open(format!("/proc/{pid}/cmdline"))
        .and_then(|f| f.take(cap as u64 + 1).read_to_end(&mut raw));
    if read.is_err() {
        raw.clear();
    }
    let cut = raw.len() > cap;
    raw.truncate(cap);
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    if parts.is_empty() {
        fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| format!("[{}]", c.trim()))
            .unwrap_or_default()
    } else if cut {
        format!("{}...", parts.join(" "))
    } else {
        parts.join(" ")
    }
}

/// Whether `pid` holds open, by a descriptor, a file `is_one` picks.
pub(crate) fn holds_open(pid: i32, is_one: impl Fn(&fs::Metadata) -> bool) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| fs::metadata(fd.path()).is_ok_and(|m| is_one(&m)))
}

/// Whether `pid` holds open a pipe with one of these inodes.
pub(crate) fn holds_pipe(pid: i32, inodes: &[u64]) -> bool {
    holds_open(pid, |m| inodes.contains(&m.ino()))
}

/// The process tracing this one, if any (`TracerPid` in its `status`).
pub(crate) fn tracer() -> Option<i32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|p| p.trim().parse::<i32>().ok())
        .filter(|&p| p > 0)
}

/// The clock ticks per second that `/proc/<pid>/stat` counts times in.
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// Now, in the clock ticks since boot that `/proc/<pid>/stat` counts start
/// times in.
pub(crate) fn boot_ticks() -> u64 {
    let hz = u128::from(ticks_per_second());
    (clock(libc::CLOCK_BOOTTIME).as_nanos() * hz / 1_000_000_000) as u64
}

/// A clock's time now (zero if it cannot be read).
pub(crate) fn clock(id: libc::clockid_t) -> std::time::Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    if unsafe { libc::clock_gettime(id, &mut t) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The most of a `/proc/PID/cgroup` read: a line per hierarchy, each path
/// at most a path's length.
pub(crate) const CGROUP_CAP: usize = 64 << 10;

/// The path of the hierarchy that holds `controller` in a
/// `/proc/PID/cgroup` text (a v1 line is `N:ctrl1,ctrl2:/path`; the cgroup2
/// one is `0::/path`).
pub(crate) fn controller_path<'a>(text: &'a str, controller: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
        names.split(',').any(|n| n == controller).then_some(path)
    })
}

/// `pid`'s cgroup (v2) path, as `/proc/<pid>/cgroup` shows it.
pub(crate) fn cgroup_path(pid: i32) -> Option<String> {
    let text = read_capped(format!("/proc/{pid}/cgroup"), CGROUP_CAP)?;
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of `len` bytes of `fill` with `tail` after them, that counts
    /// what was read and never hands out more than 8 KiB at a time.
    struct Counted<'a> {
        len: u64,
        fill: u8,
        tail: &'a [u8],
        read: u64,
    }

    impl std::io::Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = if self.read < self.len {
                let n = (self.len - self.read).min(buf.len() as u64) as usize;
                buf[..n].fill(self.fill);
                n
            } else {
                let at = (self.read - self.len) as usize;
                let rest = &self.tail[at.min(self.tail.len())..];
                let n = rest.len().min(buf.len());
                buf[..n].copy_from_slice(&rest[..n]);
                n
            };
            self.read += n as u64;
            Ok(n)
        }
    }

    fn env(vars: &[&str]) -> Vec<CString> {
        vars.iter().map(|v| CString::new(*v).unwrap()).collect()
    }

    #[test]
    fn every_variable_is_found_wherever_the_reads_cut_it() {
        let wanted = env(&["DHV_OPERATION=create", "DHV_VOLUME_ID=id-1"]);
        let text = b"A=1\0DHV_VOLUME_ID=id-1\0DHV_OPERATION=create";
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert!(
                holds_every_var(std::io::Read::chain(a, b), &wanted, ENVIRON_CAP),
                "{cut}"
            );
        }
        // A prefix, a longer value, one missing: not held.
        let partial = b"DHV_OPERATION=create\0DHV_VOLUME_ID=id-10\0DHV_VOLUME_ID=id-\0";
        assert!(!holds_every_var(&partial[..], &wanted, ENVIRON_CAP));
        assert!(!holds_every_var(&b""[..], &wanted, ENVIRON_CAP));
        assert!(!holds_every_var(&b"A=1\0"[..], &[], ENVIRON_CAP));
    }

    /// A huge variable first (a process may point its environment at
    /// gigabytes of its memory) is read through, never kept; reading stops at
    /// the cap, and what lies past it does not count.
    #[test]
    fn a_huge_environment_is_streamed_up_to_its_cap() {
        let wanted = env(&["DHV_OPERATION=create"]);
        let tail = b"\0DHV_OPERATION=create\0";
        let mut huge = Counted {
            len: 6 << 20,
            fill: b'a',
            tail,
            read: 0,
        };
        assert!(holds_every_var(&mut huge, &wanted, ENVIRON_CAP));
        let mut past_cap = Counted {
            len: ENVIRON_CAP,
            fill: b'a',
            tail,
            read: 0,
        };
        assert!(!holds_every_var(&mut past_cap, &wanted, ENVIRON_CAP));
        assert_eq!(past_cap.read, ENVIRON_CAP);
    }

    #[test]
    fn a_capped_read_stops_at_its_cap() {
        let all = read_capped("/proc/self/status", 1 << 20).unwrap();
        assert!(all.len() > 64);
        assert_eq!(read_capped("/proc/self/status", 64).unwrap().len(), 64);
        assert_eq!(read_capped("/proc/self/no-such-file", 64), None);
    }
}
