//! Who keeps a device busy: the processes holding a loop device (or any
//! mounted file system) so that its unmount or its detach cannot finish.
//!
//! A plugin's `umount` or `losetup -d` fails, or its detach only takes
//! effect on the last close, while anyone holds the device: a descriptor on
//! its node, a file on the file system mounted from it (or a working dir
//! there), its backing file, a mount of it in another mount namespace, or a
//! kernel holder (`/sys/block/<dev>/holders`: a device-mapper target on it).
//! On a crowded host that someone is often not the plugin at all (another
//! `dhv-conform` run's `losetup --find` probing devices, a backup agent), and
//! a verdict that blames the plugin for it is wrong: the harness names the
//! holder and tells whose it is ([`HolderKind`]), and its engine waits for one
//! that is not the plugin's ([`wait_let_go`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::holders::{COMMAND_CAP, FileId, exe_of, wait_readable};

/// How long one wait on the holders' exits lasts before they are looked at
/// again: a holder that closes its descriptor and lives on tells no one.
const LOOK_AGAIN: Duration = Duration::from_millis(50);

/// Whose a process holding a device is, as the harness tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HolderKind {
    /// This process, or a clone of it that has not run another program yet.
    Harness,
    /// A process this process started (a plugin call of this run, or what
    /// the call started and left to it).
    ThisRun,
    /// Another `dhv-conform` process, or a process it started: the pid of
    /// that `dhv-conform`.
    AnotherRun(i32),
    /// Any other process of the host.
    Other,
}

impl std::fmt::Display for HolderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HolderKind::Harness => f.write_str("the harness itself"),
            HolderKind::ThisRun => f.write_str("a plugin call of this run"),
            HolderKind::AnotherRun(pid) if pid.is_positive() => {
                write!(f, "another dhv-conform run, pid {pid}")
            }
            HolderKind::AnotherRun(_) => f.write_str("another dhv-conform run"),
            HolderKind::Other => f.write_str("another program"),
        }
    }
}

/// A process that keeps a device busy, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHolder {
    /// Its pid.
    pub pid: i32,
    /// Its command line, cut at a few hundred bytes.
    pub command: String,
    /// Whose it is.
    pub kind: HolderKind,
    /// How it holds the device, in words ("has /dev/loop3 open").
    pub how: String,
}

impl DeviceHolder {
    /// Whether it is a process of the plugin this run checks: only those
    /// can be the plugin's doing.
    pub fn is_this_runs(&self) -> bool {
        self.kind == HolderKind::ThisRun
    }
}

impl std::fmt::Display for DeviceHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PID {} ({}; {}) {}",
            self.pid, self.command, self.kind, self.how
        )
    }
}

/// What a device is, to look for its holders: its number, and its node and
/// backing file when it is a loop device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldDevice {
    /// `(major, minor)`: the node's `st_rdev`, and the `st_dev` of every file
    /// of the file system mounted from it.
    pub number: (u32, u32),
    /// The node (`/dev/loop3`), for the words and for `/sys/block`.
    pub node: Option<PathBuf>,
    /// The loop device's backing file, when it is one and still there.
    pub backing: Option<PathBuf>,
}

impl HeldDevice {
    /// The device at `node` (a block device node), with its loop device's
    /// `backing` file when known.
    pub fn at(node: &Path, backing: Option<&Path>) -> std::io::Result<HeldDevice> {
        let meta = fs::metadata(node)?;
        if !meta.file_type().is_block_device() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} is not a block device", node.display()),
            ));
        }
        let rdev = meta.rdev();
        Ok(HeldDevice {
            number: (libc::major(rdev), libc::minor(rdev)),
            node: Some(node.to_path_buf()),
            backing: backing.map(Path::to_path_buf),
        })
    }

    fn name(&self) -> String {
        match &self.node {
            Some(n) => n.display().to_string(),
            None => format!("device {}:{}", self.number.0, self.number.1),
        }
    }
}

/// Everything that holds one of `devices`: the processes (this process and
/// its ancestors included: a test or a script that started the run can hold
/// one too), each named with whose it is, and
/// the kernel's holders (`/sys/block/<dev>/holders`: "loop3 is held by
/// dm-0"), in words.
pub fn device_holders(devices: &[HeldDevice]) -> (Vec<DeviceHolder>, Vec<String>) {
    let kernel = devices.iter().flat_map(kernel_holders).collect();
    if devices.is_empty() {
        return (Vec::new(), kernel);
    }
    let table = ProcTable::read();
    let backing: Vec<(FileId, &HeldDevice)> = devices
        .iter()
        .filter_map(|d| {
            let m = fs::metadata(d.backing.as_ref()?).ok()?;
            Some(((m.dev(), m.ino()), d))
        })
        .collect();
    let own_ns = fs::metadata("/proc/self/ns/mnt").ok().map(|m| m.ino());
    let mut namespaces_seen = BTreeSet::new();
    let mut found = Vec::new();
    for &pid in table.parents.keys() {
        let mut how: Vec<String> = Vec::new();
        if let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) {
            for fd in fds.flatten() {
                let Ok(m) = fs::metadata(fd.path()) else {
                    continue;
                };
                if let Some(words) = holds(&m, devices, &backing) {
                    how.push(words);
                }
            }
        }
        for (link, words) in [("cwd", "its working dir"), ("root", "its root dir")] {
            let Ok(m) = fs::metadata(format!("/proc/{pid}/{link}")) else {
                continue;
            };
            if let Some(d) = devices.iter().find(|d| same_number(m.dev(), d.number)) {
                how.push(format!("{words} is on {}", d.name()));
            }
        }
        let ns = fs::metadata(format!("/proc/{pid}/ns/mnt"))
            .ok()
            .map(|m| m.ino());
        if ns.is_some() && ns != own_ns && namespaces_seen.insert(ns) {
            how.extend(mounted_in_namespace_of(pid, devices));
        }
        if how.is_empty() {
            continue;
        }
        how.dedup();
        found.push(DeviceHolder {
            pid,
            command: super::procfs::cmdline_capped(pid, COMMAND_CAP),
            kind: table.kind(pid),
            how: how.join(", "),
        });
    }
    (found, kernel)
}

/// Waits, until `bound` has passed, for every holder of `devices` that
/// `counts` picks to let go of them: on the exit of each (its pidfd), looked
/// at again every 50 ms, as one that closes its descriptor and goes
/// on tells no one. The holders still there at the end (empty when all let
/// go).
pub fn wait_let_go(
    devices: &[HeldDevice],
    counts: impl Fn(&DeviceHolder) -> bool,
    bound: Duration,
) -> Vec<DeviceHolder> {
    let deadline = Instant::now() + bound;
    loop {
        let held: Vec<DeviceHolder> = device_holders(devices)
            .0
            .into_iter()
            .filter(|h| counts(h))
            .collect();
        let now = Instant::now();
        if held.is_empty() || now >= deadline {
            return held;
        }
        let step = (now + LOOK_AGAIN).min(deadline);
        // One of them exiting ends the wait at once; any pidfd will do, the
        // others are looked at again after it.
        match held.iter().find_map(|h| super::pidfd(h.pid).ok()) {
            Some(fd) => {
                wait_readable(fd.as_raw_fd(), step);
            }
            // Gone between the look and the pidfd: look again at once.
            None => continue,
        }
    }
}

/// How the open file `m` holds one of `devices`, in words.
fn holds(
    m: &fs::Metadata,
    devices: &[HeldDevice],
    backing: &[(FileId, &HeldDevice)],
) -> Option<String> {
    if m.file_type().is_block_device() {
        if let Some(d) = devices.iter().find(|d| same_number(m.rdev(), d.number)) {
            return Some(format!("has {} open", d.name()));
        }
    }
    if let Some(d) = devices.iter().find(|d| same_number(m.dev(), d.number)) {
        return Some(format!("has a file on {} open", d.name()));
    }
    backing
        .iter()
        .find(|(id, _)| *id == (m.dev(), m.ino()))
        .map(|(_, d)| format!("has the backing file of {} open", d.name()))
}

fn same_number(dev: u64, (major, minor): (u32, u32)) -> bool {
    libc::major(dev) == major && libc::minor(dev) == minor
}

/// The mounts of `devices` in `pid`'s mount namespace, in words.
fn mounted_in_namespace_of(pid: i32, devices: &[HeldDevice]) -> Vec<String> {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let number = fields.nth(2)?;
            let point = fields.nth(1)?;
            let (major, minor) = number.split_once(':')?;
            let number = (major.parse().ok()?, minor.parse().ok()?);
            let d = devices.iter().find(|d| d.number == number)?;
            Some(format!(
                "has {} mounted at {point} in its own mount namespace",
                d.name()
            ))
        })
        .collect()
}

/// The kernel's holders of `device` (`/sys/block/<dev>/holders`), in words.
fn kernel_holders(device: &HeldDevice) -> Vec<String> {
    let Some(name) = device.node.as_ref().and_then(|n| n.file_name()) else {
        return Vec::new();
    };
    let dir = Path::new("/sys/block").join(name).join("holders");
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| {
            format!(
                "{} is held by the kernel's {}",
                device.name(),
                e.file_name().to_string_lossy()
            )
        })
        .collect();
    names.sort();
    names
}

/// Every process's parent and program, read once, to tell whose a holder is.
struct ProcTable {
    /// pid -> ppid.
    parents: BTreeMap<i32, i32>,
    /// This process's ancestors (not itself).
    ancestors_of_self: BTreeSet<i32>,
    /// The processes running a `dhv-conform` (this program, or one named so).
    harnesses: BTreeSet<i32>,
    own_pid: i32,
}

impl ProcTable {
    fn read() -> ProcTable {
        let own_pid = std::process::id() as i32;
        let own_exe = exe_of("self");
        let mut parents = BTreeMap::new();
        let mut harnesses = BTreeSet::new();
        for pid in fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        {
            let Some(stat) = super::procfs::read_stat(pid) else {
                continue;
            };
            parents.insert(pid, stat.ppid);
            let exe = exe_of(&pid.to_string());
            let named = fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("dhv-conform"))
            });
            if named || (exe.is_some() && exe == own_exe) {
                harnesses.insert(pid);
            }
        }
        let mut ancestors_of_self = BTreeSet::new();
        let mut at = parents.get(&own_pid).copied();
        while let Some(p) = at.filter(|&p| p > 0 && ancestors_of_self.insert(p)) {
            at = parents.get(&p).copied();
        }
        ProcTable {
            parents,
            ancestors_of_self,
            harnesses,
            own_pid,
        }
    }

    /// Whose `pid` is: this process or its clone before its exec, a
    /// descendant of it, of another `dhv-conform`, or none of those.
    fn kind(&self, pid: i32) -> HolderKind {
        let parent = self.parents.get(&pid).copied();
        if pid == self.own_pid || (parent == Some(self.own_pid) && self.harnesses.contains(&pid)) {
            return HolderKind::Harness;
        }
        let mut seen = BTreeSet::new();
        let mut at = Some(pid);
        while let Some(p) = at.filter(|&p| p > 0 && seen.insert(p)) {
            if p == self.own_pid {
                return HolderKind::ThisRun;
            }
            if self.harnesses.contains(&p) && !self.ancestors_of_self.contains(&p) {
                return HolderKind::AnotherRun(p);
            }
            at = self.parents.get(&p).copied();
        }
        HolderKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead as _;

    /// A shell that opened `path` on its descriptor 3 and sleeps, once it
    /// said so.
    fn holding(path: &Path) -> std::process::Child {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "exec 3<'{}'; echo ready; exec sleep 300",
                path.display()
            ))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        child
    }

    #[test]
    fn a_holder_of_a_file_on_a_device_is_named_with_whose_it_is() {
        // Any file's file system is a device: the dir a test file lies on
        // stands for a mounted volume (no root needed).
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        fs::write(&file, "x").unwrap();
        let dev = fs::metadata(&file).unwrap().dev();
        let device = HeldDevice {
            number: (libc::major(dev), libc::minor(dev)),
            node: None,
            backing: None,
        };
        let mut child = holding(&file);
        let pid = child.id() as i32;
        let (found, _) = device_holders(std::slice::from_ref(&device));
        let _ = child.kill();
        let _ = child.wait();
        let held = found.iter().find(|h| h.pid == pid).expect("holder named");
        // Started by this process: a call of this run, as the plugin's are.
        assert_eq!(held.kind, HolderKind::ThisRun, "{held}");
        assert!(held.command.contains("sleep 300"), "{held}");
        assert!(held.how.contains("has a file on device"), "{held}");
        assert!(held.is_this_runs());
    }

    #[test]
    fn processes_are_told_apart_by_their_ancestry() {
        let own = std::process::id() as i32;
        let table = ProcTable {
            parents: BTreeMap::from([
                (own, 10),
                (10, 1),
                (20, own),
                (21, 20),
                (30, 1),
                (31, 30),
                (40, 1),
                (50, own),
            ]),
            ancestors_of_self: BTreeSet::from([10]),
            harnesses: BTreeSet::from([own, 30, 50, 10]),
            own_pid: own,
        };
        assert_eq!(table.kind(own), HolderKind::Harness);
        // A clone of this process before its exec.
        assert_eq!(table.kind(50), HolderKind::Harness);
        assert_eq!(table.kind(20), HolderKind::ThisRun);
        assert_eq!(table.kind(21), HolderKind::ThisRun);
        assert_eq!(table.kind(30), HolderKind::AnotherRun(30));
        assert_eq!(table.kind(31), HolderKind::AnotherRun(30));
        assert_eq!(table.kind(40), HolderKind::Other);
        // An ancestor running the program (a `dhv-conform` that started this
        // one) is no other run.
        assert_eq!(table.kind(10), HolderKind::Other);
    }

    #[test]
    fn a_wait_ends_when_the_holder_lets_go_and_names_one_that_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        fs::write(&file, "x").unwrap();
        let dev = fs::metadata(&file).unwrap().dev();
        let device = [HeldDevice {
            number: (libc::major(dev), libc::minor(dev)),
            node: None,
            backing: None,
        }];
        let mut child = holding(&file);
        let pid = child.id() as i32;
        let ours = |h: &DeviceHolder| h.pid == pid;
        let still = wait_let_go(&device, ours, Duration::from_millis(200));
        assert_eq!(still.iter().map(|h| h.pid).collect::<Vec<_>>(), vec![pid]);
        let killer = std::thread::spawn(move || {
            let _ = child.kill();
            let _ = child.wait();
        });
        let started = Instant::now();
        let still = wait_let_go(&device, ours, Duration::from_secs(30));
        killer.join().unwrap();
        assert!(still.is_empty(), "{still:?}");
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}
