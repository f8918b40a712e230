//! The user's terminal is kept as the harness found it. Plugins have no
//! controlling terminal (`/dev/tty` cannot be opened); one that reaches the
//! terminal by name anyway and changes its modes (`stty -F /dev/pts/N
//! tostop -echo -icanon`) neither stops a harness running in the background
//! of its shell (SIGTTOU) nor leaves the terminal changed: the harness
//! restores the modes at its end and says so.

use crate::util;

use std::ffi::CStr;
use std::fs;
use std::io::Read as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A new pseudo-terminal: its master, its slave (open) and the slave's path.
fn pty() -> (fs::File, OwnedFd, String) {
    // SAFETY: plain calls on a descriptor we own; ptsname_r writes at most
    // the buffer's length.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let path = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
        let master = fs::File::from_raw_fd(master);
        let slave = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&path)
            .unwrap();
        (master, OwnedFd::from(slave), path)
    }
}

fn modes(fd: &OwnedFd) -> libc::termios {
    // SAFETY: termios is plain data that tcgetattr fills.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(fd.as_raw_fd(), &mut t), 0);
        t
    }
}

#[test]
fn a_plugin_changing_the_terminal_neither_stops_the_harness_nor_leaves_it_changed() {
    let scratch = util::Scratch::new();
    let (mut master, slave, tty) = pty();
    let before = modes(&slave);
    assert_ne!(before.c_lflag & libc::ECHO, 0, "a new terminal echoes");
    assert_eq!(
        before.c_lflag & libc::TOSTOP,
        0,
        "and lets the background write"
    );

    // The plugin: the reference, after it tried /dev/tty and then changed
    // the terminal by name (its environment is cleared: full paths).
    let mark = scratch.path().join("dev-tty");
    let plugin = scratch.path().join("plugin");
    let stty = ["/usr/bin/stty", "/bin/stty"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("stty");
    fs::write(
        &plugin,
        format!(
            "#!/bin/sh\n\
             if (exec 3</dev/tty) 2>/dev/null; then echo reached > '{mark}'; \
             else echo none > '{mark}'; fi\n\
             {stty} -F '{tty}' tostop -echo -icanon 2>/dev/null\n\
             exec '{reference}' \"$@\"\n",
            mark = mark.display(),
            reference = util::sample("reference"),
        ),
    )
    .unwrap();
    fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    // A shell with job control on the terminal runs the harness in the
    // background, as `dhv-conform check ... &` does.
    let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg("set -m; \"$0\" check \"$1\" create.succeeds --exact & wait $!; echo \"exit=$?\"")
        .arg(util::bin())
        .arg(&plugin)
        .env("TMPDIR", scratch.path())
        .stdin(stdio(&slave))
        .stdout(stdio(&slave))
        .stderr(stdio(&slave));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        shell.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = shell.spawn().unwrap();
    // The command holds copies of the slave: the reader's EIO needs them gone.
    drop(shell);
    let sid = child.id() as i32;
    // The terminal's output, read until every writer is gone (EIO).
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let ended = std::panic::catch_unwind(|| util::wait_bounded(child, Duration::from_secs(120)));
    if ended.is_err() {
        // A harness stopped by SIGTTOU: end the whole session before failing.
        kill_session(sid);
    }
    let after = modes(&slave);
    drop(slave);
    let out = reader.join().unwrap();
    assert!(ended.is_ok(), "the harness never ended (stopped?): {out}");
    assert!(out.contains("exit=0"), "{out}");
    assert_eq!(
        fs::read_to_string(&mark).unwrap(),
        "none\n",
        "a plugin opened /dev/tty"
    );
    assert!(
        out.contains("the terminal's modes changed during the run (a plugin reached it): restored"),
        "{out}"
    );
    assert_eq!(
        after.c_lflag, before.c_lflag,
        "local modes left changed: {out}"
    );
    assert_eq!(after.c_iflag, before.c_iflag);
    assert_eq!(after.c_oflag, before.c_oflag);
}

/// Kills every process of session `sid` (the test's own shell's).
fn kill_session(sid: i32) {
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: getsid takes a pid.
        if unsafe { libc::getsid(pid) } == sid {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
