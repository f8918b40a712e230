//! The hold's seccomp program: which system calls notify (those that make,
//! rename, link or remove a name; `open` with `O_CREAT`; a mount; the loop
//! ioctls; with a crash point, `execve`) and how to read what each names.
//! Built once per process, installed by the clone's child (see `hold.rs`).

use std::sync::OnceLock;

use super::seccomp::{jump, stmt};

/// `AUDIT_ARCH_X86_64`.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;

const NR_OFFSET: u32 = 0;

const ARCH_OFFSET: u32 = 4;

/// The offset of the low word of argument `i` in `struct seccomp_data`.
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

/// The loop-device ioctls that change the node's devices: `LOOP_SET_FD`,
/// `LOOP_CLR_FD`, `LOOP_CONFIGURE`, `LOOP_CTL_ADD`, `LOOP_CTL_REMOVE`,
/// `LOOP_CTL_GET_FREE` (which may add one).
const LOOP_IOCTLS: [u32; 6] = [0x4C00, 0x4C01, 0x4C0A, 0x4C80, 0x4C81, 0x4C82];

/// What a held system call changes, and which argument names it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kind {
    pub(super) nr: libc::c_long,
    pub(super) name: &'static str,
    /// The argument holding the path, and the one holding its dir fd (for
    /// the `*at` calls); `None`: the call is in scope whatever it names.
    pub(super) path: Option<(usize, Option<usize>)>,
}

/// Elsewhere nothing is held (there is no clone to install the filter).
#[cfg(not(target_arch = "x86_64"))]
pub(super) const KINDS: &[Kind] = &[];

/// Every system call that notifies, and how to read what it names. `open`
/// and `openat` notify only with `O_CREAT`, `ioctl` only for the loop
/// ioctls (tested in the filter itself).
#[cfg(target_arch = "x86_64")]
pub(super) const KINDS: &[Kind] = &[
    Kind {
        nr: libc::SYS_mkdir,
        name: "mkdir",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_mkdirat,
        name: "mkdirat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_creat,
        name: "creat",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_rename,
        name: "rename",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_renameat,
        name: "renameat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_renameat2,
        name: "renameat2",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_unlink,
        name: "unlink",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_unlinkat,
        name: "unlinkat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_rmdir,
        name: "rmdir",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_symlink,
        name: "symlink",
        path: Some((1, None)),
    },
    Kind {
        nr: libc::SYS_symlinkat,
        name: "symlinkat",
        path: Some((2, Some(1))),
    },
    Kind {
        nr: libc::SYS_link,
        name: "link",
        path: Some((1, None)),
    },
    Kind {
        nr: libc::SYS_linkat,
        name: "linkat",
        path: Some((3, Some(2))),
    },
    Kind {
        nr: libc::SYS_mknod,
        name: "mknod",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_mknodat,
        name: "mknodat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_truncate,
        name: "truncate",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_mount,
        name: "mount",
        path: None,
    },
    Kind {
        nr: libc::SYS_umount2,
        name: "umount2",
        path: None,
    },
    Kind {
        nr: libc::SYS_open,
        name: "open",
        path: Some((0, None)),
    },
    Kind {
        nr: libc::SYS_openat,
        name: "openat",
        path: Some((1, Some(0))),
    },
    Kind {
        nr: libc::SYS_ioctl,
        name: "ioctl",
        path: None,
    },
    // Starting a program: a crash point (the state before a `mkfs` runs, say),
    // never a hold. The exec, not the fork: a fork waits for us in the
    // process that forks, where a signal the shell handles (its SIGCHLD)
    // arriving before we have received the notification would fail the fork
    // with EINTR; the child that executes has no children to signal it. The
    // clone's child starts the plugin itself with `execveat`, which is not
    // watched (it would wait for us while we wait for it).
    Kind {
        nr: libc::SYS_execve,
        name: STARTS_A_PROCESS,
        path: None,
    },
];

/// The name of the calls that start a program.
pub(super) const STARTS_A_PROCESS: &str = crate::exec::STARTS_A_PROCESS;

/// Where a jump of the program goes before it is laid out.
#[derive(Clone, Copy)]
enum To {
    Next,
    Allow,
    Notify,
}

/// Elsewhere: allow everything (never installed: [`can_hold`] is false).
#[cfg(not(target_arch = "x86_64"))]
fn program(_starts: bool) -> Vec<libc::sock_filter> {
    vec![stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW)]
}

/// The program, laid out: other architectures and other calls are allowed;
/// the calls of [`KINDS`] notify (open/openat with `O_CREAT`, ioctl with a
/// loop request), those that start a program (`execve`) only with `starts` (a crash
/// point, never a hold: a burst's calls start programs without a round trip to us).
#[cfg(target_arch = "x86_64")]
fn program(starts: bool) -> Vec<libc::sock_filter> {
    const LOAD_WORD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    // (instruction, jump-if-true, jump-if-false), targets symbolic.
    let mut ops: Vec<(libc::sock_filter, To, To)> = Vec::new();
    let load = |k| (stmt(LOAD_WORD, k), To::Next, To::Next);
    let eq = |k| (jump(libc::BPF_JEQ, k, 0, 0), To::Notify, To::Next);
    ops.push(load(ARCH_OFFSET));
    ops.push((jump(libc::BPF_JEQ, ARCH, 0, 0), To::Next, To::Allow));
    ops.push(load(NR_OFFSET));
    let plain = KINDS
        .iter()
        .filter(|k| ![libc::SYS_open, libc::SYS_openat, libc::SYS_ioctl].contains(&k.nr))
        .filter(|k| starts || k.name != STARTS_A_PROCESS);
    for k in plain {
        ops.push(eq(k.nr as u32));
    }
    // open and openat: only with O_CREAT (a flag of their 2nd / 3rd argument).
    for (nr, flags) in [(libc::SYS_open, 1), (libc::SYS_openat, 2)] {
        // Not this call: skip its two tests.
        ops.push((jump(libc::BPF_JEQ, nr as u32, 0, 2), To::Next, To::Next));
        ops.push(load(arg_low(flags)));
        ops.push((
            jump(libc::BPF_JSET, libc::O_CREAT as u32, 0, 0),
            To::Notify,
            To::Allow,
        ));
    }
    ops.push((
        jump(libc::BPF_JEQ, libc::SYS_ioctl as u32, 0, 0),
        To::Next,
        To::Allow,
    ));
    ops.push(load(arg_low(1)));
    for req in LOOP_IOCTLS {
        ops.push(eq(req));
    }
    let allow = ops.len();
    let notify = allow + 1;
    let mut p: Vec<libc::sock_filter> = ops
        .iter()
        .enumerate()
        .map(|(at, &(mut insn, t, f))| {
            let offset = |to: To, keep: u8| match to {
                To::Next => keep,
                To::Allow => (allow - at - 1) as u8,
                To::Notify => (notify - at - 1) as u8,
            };
            insn.jt = offset(t, insn.jt);
            insn.jf = offset(f, insn.jf);
            insn
        })
        .collect();
    p.push(stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW));
    p.push(stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_USER_NOTIF,
    ));
    p
}

/// The watch filter (with process starts, or not), in the form `seccomp(2)`
/// takes; built once, kept for the life of the process (the clone's child
/// reads it after the fork).
pub(crate) fn filter(starts: bool) -> &'static libc::sock_fprog {
    struct Prog(libc::sock_fprog);
    // SAFETY: the program it points to is never freed nor written again.
    unsafe impl Send for Prog {}
    // SAFETY: as for Send: shared readers see a program that no one writes
    // after it is built (the OnceLock publishes it once).
    unsafe impl Sync for Prog {}
    static BUILT: [OnceLock<(Vec<libc::sock_filter>, Prog)>; 2] = [const { OnceLock::new() }; 2];
    &BUILT[usize::from(starts)]
        .get_or_init(|| {
            let p = program(starts);
            let prog = libc::sock_fprog {
                len: p.len() as u16,
                filter: p.as_ptr().cast_mut(),
            };
            (p, Prog(prog))
        })
        .1
        .0
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Runs the program on a call as the kernel does: the answer it gives.
    fn answer(p: &[libc::sock_filter], nr: libc::c_long, args: [u32; 3]) -> u32 {
        super::super::seccomp::run(p, |offset| match offset {
            NR_OFFSET => nr as u32,
            ARCH_OFFSET => ARCH,
            o if o == arg_low(0) => args[0],
            o if o == arg_low(1) => args[1],
            o if o == arg_low(2) => args[2],
            other => panic!("load of offset {other}"),
        })
    }

    #[test]
    fn changes_of_state_notify_and_nothing_else_does() {
        const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
        const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
        let p = program(true);
        let creat = libc::O_CREAT as u32 | libc::O_WRONLY as u32;
        let cases: &[(libc::c_long, [u32; 3], u32)] = &[
            (libc::SYS_mkdir, [0, 0, 0], NOTIFY),
            (libc::SYS_mkdirat, [0, 0, 0], NOTIFY),
            (libc::SYS_renameat2, [0, 0, 0], NOTIFY),
            (libc::SYS_unlinkat, [0, 0, 0x200], NOTIFY),
            (libc::SYS_mount, [0, 0, 0], NOTIFY),
            (libc::SYS_openat, [0, 0, creat], NOTIFY),
            (libc::SYS_openat, [0, 0, libc::O_RDONLY as u32], ALLOW),
            (libc::SYS_open, [0, creat, 0], NOTIFY),
            (libc::SYS_open, [0, libc::O_RDWR as u32, 0], ALLOW),
            (libc::SYS_ioctl, [3, 0x4C82, 0], NOTIFY),
            (libc::SYS_ioctl, [3, 0x5401, 0], ALLOW),
            (libc::SYS_read, [0, 0, 0], ALLOW),
            (libc::SYS_stat, [0, 0, 0], ALLOW),
            (libc::SYS_execve, [0, 0, 0], NOTIFY),
            (libc::SYS_execveat, [0, 0, 0], ALLOW),
            (libc::SYS_clone3, [0, 0, 0], ALLOW),
            (libc::SYS_vfork, [0, 0, 0], ALLOW),
        ];
        for &(nr, args, want) in cases {
            assert_eq!(answer(&p, nr, args), want, "call {nr} {args:?}");
        }
    }
}
