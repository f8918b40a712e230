//! The refusals the harness can impose on one call ([`Refusal`]): a family
//! of system calls fails with `EPERM`, as on a host or filesystem that does
//! not allow it. Each is a seccomp filter that the clone's child installs
//! just before it executes the plugin, so the plugin and everything it
//! starts inherit it, and nothing else of ours does.
//!
//! A filter only takes away: it cannot make a plugin do anything it would
//! not do on such a host. Only x86-64 system calls are matched (the only
//! architecture where the clone's child exists, see `clone_spawn`); a call
//! made through another ABI passes, which is fine for fault injection: the
//! filter is a refusal to test the plugin's failure path, not a wall.

use std::sync::OnceLock;

use crate::exec::Refusal;

/// `AUDIT_ARCH_X86_64`: the architecture word of a native x86-64 call.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;

/// Offsets in the kernel's `struct seccomp_data`: the call's number, its
/// architecture, and the low word of its third argument (little-endian).
#[cfg(target_arch = "x86_64")]
const NR_OFFSET: u32 = 0;
#[cfg(target_arch = "x86_64")]
const ARCH_OFFSET: u32 = 4;
#[cfg(target_arch = "x86_64")]
const ARG2_LOW_OFFSET: u32 = 16 + 2 * 8;

/// What one refusal matches: whole system calls, and `unlinkat(2)` by
/// whether its flags remove a directory (`AT_REMOVEDIR`), the one call
/// `rm` and Python's `rmtree` use for files and directories alike.
#[cfg(target_arch = "x86_64")]
struct Matches {
    calls: &'static [libc::c_long],
    /// `Some(true)`: `unlinkat` removing a directory; `Some(false)`: one
    /// removing anything else.
    unlinkat_dir: Option<bool>,
}

#[cfg(target_arch = "x86_64")]
fn matches(refusal: Refusal) -> Matches {
    match refusal {
        // `mount(2)` and the new mount API (which util-linux's `mount` uses
        // where the kernel has it).
        Refusal::Mounts => Matches {
            calls: &[
                libc::SYS_mount,
                libc::SYS_open_tree,
                libc::SYS_move_mount,
                libc::SYS_fsopen,
                libc::SYS_fsmount,
                libc::SYS_fspick,
                libc::SYS_mount_setattr,
            ],
            unlinkat_dir: None,
        },
        Refusal::ModeChanges => Matches {
            calls: &[
                libc::SYS_chmod,
                libc::SYS_fchmod,
                libc::SYS_fchmodat,
                libc::SYS_fchmodat2,
            ],
            unlinkat_dir: None,
        },
        Refusal::FileRemovals => Matches {
            calls: &[libc::SYS_unlink],
            unlinkat_dir: Some(false),
        },
        Refusal::DirRemovals => Matches {
            calls: &[libc::SYS_rmdir],
            unlinkat_dir: Some(true),
        },
    }
}

pub(super) const fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

pub(super) const fn jump(op: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// The program: other architectures pass; a matched call jumps to the
/// `EPERM` answer at the end; anything else is allowed. Jumps are relative
/// to the next instruction, so each is counted to the two answers.
#[cfg(target_arch = "x86_64")]
fn program(m: &Matches) -> Vec<libc::sock_filter> {
    const LOAD_WORD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    // Instructions after the number's load: one test per call, then (for
    // unlinkat) its test, the flags' load and their test; then the answers.
    let tests = m.calls.len() + if m.unlinkat_dir.is_some() { 3 } else { 0 };
    let len = 3 + tests + 2;
    let (allow, deny) = (len - 2, len - 1);
    let to = |from: usize, target: usize| (target - from - 1) as u8;
    let mut p = Vec::with_capacity(len);
    p.push(stmt(LOAD_WORD, ARCH_OFFSET));
    p.push(jump(libc::BPF_JEQ, ARCH, 0, to(1, allow)));
    p.push(stmt(LOAD_WORD, NR_OFFSET));
    for &nr in m.calls {
        let at = p.len();
        p.push(jump(libc::BPF_JEQ, nr as u32, to(at, deny), 0));
    }
    if let Some(dir) = m.unlinkat_dir {
        let at = p.len();
        p.push(jump(
            libc::BPF_JEQ,
            libc::SYS_unlinkat as u32,
            0,
            to(at, allow),
        ));
        p.push(stmt(LOAD_WORD, ARG2_LOW_OFFSET));
        let at = p.len();
        let (set, clear) = match dir {
            true => (to(at, deny), to(at, allow)),
            false => (to(at, allow), to(at, deny)),
        };
        p.push(jump(libc::BPF_JSET, libc::AT_REMOVEDIR as u32, set, clear));
    }
    p.push(stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW));
    p.push(stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
    ));
    debug_assert_eq!(p.len(), len);
    p
}

/// The filter of `refusal`, in the form `seccomp(2)` takes, or `None` where
/// the clone's child does not exist to install it.
pub(crate) fn filter(refusal: Refusal) -> Option<libc::sock_fprog> {
    #[cfg(target_arch = "x86_64")]
    {
        // Built once and kept for the life of the process: the clone's child
        // reads a program after the fork, so it must outlive every call.
        static BUILT: [OnceLock<Vec<libc::sock_filter>>; Refusal::ALL.len()] =
            [const { OnceLock::new() }; Refusal::ALL.len()];
        let index = Refusal::ALL.iter().position(|r| *r == refusal)?;
        let built = BUILT[index].get_or_init(|| program(&matches(refusal)));
        Some(libc::sock_fprog {
            len: built.len() as u16,
            filter: built.as_ptr().cast_mut(),
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = refusal;
        None
    }
}

/// Installs `prog` on the calling thread: 0, or the errno. Without
/// `CAP_SYS_ADMIN` the kernel wants `no_new_privs` first, which is then set
/// (it only stops set-user-ID programs from gaining privileges, which a
/// process without that capability could not use to mount anyway).
///
/// # Safety
/// Only in the clone's child, before it executes: async-signal-safe system
/// calls on a program that outlives the call.
pub(crate) unsafe fn install(prog: *const libc::sock_fprog) -> libc::c_int {
    // SAFETY: raw system calls; `prog` points to a valid program.
    unsafe {
        let set = || {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0 as libc::c_uint,
                prog,
            )
        };
        if set() == 0 {
            return 0;
        }
        let errno = *libc::__errno_location();
        if errno != libc::EACCES {
            return errno;
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || set() != 0 {
            return *libc::__errno_location();
        }
        0
    }
}

/// Runs a program the way the kernel does, the words of `struct
/// seccomp_data` read through `word` (by offset): the answer it gives. For the
/// tests of every filter built here (the loads, jumps and returns they use).
#[cfg(test)]
pub(super) fn run(p: &[libc::sock_filter], word: impl Fn(u32) -> u32) -> u32 {
    let (mut pc, mut a) = (0usize, 0u32);
    loop {
        let i = p[pc];
        let code = i.code as u32;
        match code & 0x07 {
            libc::BPF_LD => a = word(i.k),
            libc::BPF_RET => return i.k,
            libc::BPF_JMP => {
                let taken = match code & 0xf0 {
                    libc::BPF_JEQ => a == i.k,
                    libc::BPF_JSET => a & i.k != 0,
                    other => panic!("jump {other:#x}"),
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            other => panic!("class {other:#x}"),
        }
        pc += 1;
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Runs `p` on a call the way the kernel does: the answer it gives.
    fn answer(p: &[libc::sock_filter], nr: libc::c_long, arch: u32, arg2: u32) -> u32 {
        run(p, |offset| match offset {
            NR_OFFSET => nr as u32,
            ARCH_OFFSET => arch,
            ARG2_LOW_OFFSET => arg2,
            other => panic!("load of offset {other}"),
        })
    }

    const DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

    /// Calls by number and the low word of their third argument.
    type Calls = &'static [(libc::c_long, u32)];

    #[test]
    fn each_refusal_denies_its_calls_and_only_them() {
        const DIR: u32 = libc::AT_REMOVEDIR as u32;
        let cases: [(Refusal, Calls, Calls); 4] = [
            (
                Refusal::Mounts,
                &[(libc::SYS_mount, 0), (libc::SYS_fsmount, 0)],
                &[(libc::SYS_umount2, 0), (libc::SYS_unlinkat, DIR)],
            ),
            (
                Refusal::ModeChanges,
                &[(libc::SYS_chmod, 0), (libc::SYS_fchmodat, 0)],
                &[(libc::SYS_chown, 0), (libc::SYS_mkdir, 0)],
            ),
            (
                Refusal::FileRemovals,
                &[(libc::SYS_unlink, 0), (libc::SYS_unlinkat, 0)],
                &[(libc::SYS_unlinkat, DIR), (libc::SYS_rmdir, 0)],
            ),
            (
                Refusal::DirRemovals,
                &[(libc::SYS_rmdir, 0), (libc::SYS_unlinkat, DIR | 0x100)],
                &[(libc::SYS_unlinkat, 0), (libc::SYS_unlink, 0)],
            ),
        ];
        for (refusal, denied, allowed) in cases {
            let p = program(&matches(refusal));
            for &(nr, arg2) in denied {
                assert_eq!(answer(&p, nr, ARCH, arg2), DENY, "{refusal:?} {nr}");
                // Another ABI is not matched.
                assert_eq!(answer(&p, nr, 0x4000_0003, arg2), ALLOW, "{refusal:?}");
            }
            for &(nr, arg2) in allowed {
                assert_eq!(answer(&p, nr, ARCH, arg2), ALLOW, "{refusal:?} {nr}");
            }
            assert_eq!(answer(&p, libc::SYS_write, ARCH, 0), ALLOW);
        }
    }

    #[test]
    fn every_refusal_has_a_filter() {
        for r in Refusal::ALL {
            let f = filter(r).expect("x86-64");
            assert!(f.len >= 5);
        }
    }
}
