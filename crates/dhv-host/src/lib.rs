//! This host, touched safely: the one layer of `dhv-conform` that starts and
//! signals processes and that writes, removes, mounts and detaches.
//!
//! - [`exec`]: runs one process as a Nomad client runs a plugin (its own
//!   process group, a time limit, Nomad's kill, bounded output capture) and
//!   reports what it left behind; per-call cgroups, fault injection and the
//!   hold points the conformance engine uses to force interleavings.
//! - [`safe_fs`]: reading, writing and removing under directories a plugin may
//!   be racing on, without following a link out of them; mounts, loop devices
//!   and the files a check holds open.
//! - [`sync`]: the one way the workspace takes a lock.
//! - [`fence`]: keeps the clone that starts a plugin from copying a
//!   descriptor the harness holds inside a volume.
//!
//! It knows nothing of volumes or checks: the manager (`dhv-manager`) and the
//! engine (the `dhv-conform` package) build on it. It depends only on
//! `dhv-contract`, for the exit texts of a process.

pub mod exec;
pub mod fence;
pub mod safe_fs;
pub mod sync;
