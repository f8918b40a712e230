//! A refusal the harness can impose on one call: every way of mounting a
//! filesystem fails with `EPERM`, as on a host that does not give the agent
//! `CAP_SYS_ADMIN` (a Nomad client in an unprivileged container). It is a
//! seccomp filter that the clone's child installs just before it executes
//! the plugin, so the plugin and everything it starts inherit it, and
//! nothing else of ours does.
//!
//! A filter only takes away: it cannot make a plugin do anything it would
//! not do on such a host. Only x86-64 system calls are matched (the only
//! architecture where the clone's child exists, see `clone_spawn`); a call
//! made through another ABI passes, which is fine for fault injection: the
//! filter is a refusal to test the plugin's failure path, not a wall.

/// The system calls refused: `mount(2)` and the new mount API (which
/// util-linux's `mount` uses where the kernel has it).
#[cfg(target_arch = "x86_64")]
const REFUSED: [libc::c_long; 7] = [
    libc::SYS_mount,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
];

/// `AUDIT_ARCH_X86_64`: the architecture word of a native x86-64 call.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;

/// Offsets in the kernel's `struct seccomp_data`.
#[cfg(target_arch = "x86_64")]
const NR_OFFSET: u32 = 0;
#[cfg(target_arch = "x86_64")]
const ARCH_OFFSET: u32 = 4;

#[cfg(target_arch = "x86_64")]
const fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

#[cfg(target_arch = "x86_64")]
const fn jump_if(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// The filter's length: the arch test, the load of the number, one test per
/// refused call, and the two answers.
#[cfg(target_arch = "x86_64")]
const LEN: usize = 3 + REFUSED.len() + 2;

/// The program: other architectures pass; a refused number jumps to the
/// `EPERM` answer at the end; anything else is allowed.
#[cfg(target_arch = "x86_64")]
static PROGRAM: [libc::sock_filter; LEN] = {
    const LOAD_WORD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let mut p = [stmt(0, 0); LEN];
    p[0] = stmt(LOAD_WORD, ARCH_OFFSET);
    // Not x86-64: skip to "allow" (the instructions in between are the
    // number's load and its tests).
    p[1] = jump_if(ARCH, 0, (REFUSED.len() + 1) as u8);
    p[2] = stmt(LOAD_WORD, NR_OFFSET);
    let mut i = 0;
    while i < REFUSED.len() {
        // On a match, jump over the rest of the tests and the "allow".
        let to_deny = (REFUSED.len() - i) as u8;
        p[3 + i] = jump_if(REFUSED[i] as u32, to_deny, 0);
        i += 1;
    }
    p[LEN - 2] = stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW);
    p[LEN - 1] = stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
    );
    p
};

/// The filter that refuses mounts, in the form `seccomp(2)` takes, or `None`
/// where the clone's child does not exist to install it.
pub(crate) fn refuse_mounts() -> Option<libc::sock_fprog> {
    #[cfg(target_arch = "x86_64")]
    {
        Some(libc::sock_fprog {
            len: LEN as u16,
            filter: PROGRAM.as_ptr().cast_mut(),
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
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
