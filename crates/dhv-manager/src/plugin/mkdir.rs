//! The built-in `mkdir` plugin (version `0.0.1`), which every Nomad client has,
//! step for step as Nomad 2.0.5's (`HostVolumePluginMkdir`).
//!
//! Its volume is the directory `<volumes_dir>/<volume_id>` (`filepath.Join`),
//! of unlimited size (`bytes` 0). Create returns an existing path at once,
//! before the parameters are read (a bad parameter on an existing volume
//! succeeds); the test follows symlinks, so a dangling one at the path fails in
//! `mkdir`. Parameters: `mode` (`strconv.ParseUint(v, 8, 32)`, default `0700`),
//! `uid` and `gid` (`strconv.Atoi`, default `-1`: unchanged); any other key is
//! `unknown mkdir parameter`; each error wrapped as `invalid value for "<key>"`.
//! Then `os.MkdirAll`, an explicit chmod (the umask must not decide a volume's
//! mode), and chown, after whose failure the directory is removed again.
//!
//! One deliberate difference: a volume id that is not a UUID is refused, as
//! the path is built from it (Nomad's servers only ever send UUIDs).

use std::fs;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

use super::go_os::{self, PathError};
use super::go_strconv;
use super::{BoxFuture, Fingerprint, HostVolumePlugin, PluginCall, PluginError, go_quote};
use crate::contract::{CreateRequest, CreateResponse, DeleteRequest, Operation, Parameters};
use crate::version::VersionInfo;

/// The built-in plugin's id.
pub const MKDIR_ID: &str = "mkdir";
/// The built-in plugin's version.
pub const MKDIR_VERSION: &str = "0.0.1";

/// The built-in `mkdir` plugin. It runs in-process.
#[derive(Debug, Clone, Default)]
pub struct MkdirPlugin;

/// The parsed `mkdir` parameters (Nomad's `HostVolumePluginMkdirParams`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Options {
    /// A Go `os.FileMode` (see [`go_os::syscall_mode`]).
    mode: u32,
    /// Go `int`s; `-1` leaves the owner (group) as it is.
    uid: i64,
    gid: i64,
}

/// Nomad's `decodeMkdirParams`. Go walks the map in random order, so with
/// several bad parameters Nomad names any one of them; this names the first
/// in key order.
fn parse_options(params: Option<&Parameters>) -> Result<Options, PluginError> {
    let mut opts = Options {
        mode: 0o700,
        uid: -1,
        gid: -1,
    };
    for (key, value) in params.into_iter().flatten() {
        let parsed = match key.as_str() {
            "mode" => go_strconv::parse_uint(value, 8, 32).map(|m| opts.mode = m as u32),
            "uid" => go_strconv::atoi(value).map(|id| opts.uid = id),
            "gid" => go_strconv::atoi(value).map(|id| opts.gid = id),
            other => {
                return Err(invalid(
                    key,
                    &format!("unknown mkdir parameter: {}", go_quote(other)),
                ));
            }
        };
        parsed.map_err(|e| invalid(key, &e.to_string()))?;
    }
    Ok(opts)
}

/// How many of `params` Nomad's `decodeMkdirParams` refuses, each on its
/// own: with more than one, Nomad names whichever its random map walk meets
/// first, and this plugin the first in key order.
pub fn refused_parameters(params: Option<&Parameters>) -> usize {
    params
        .into_iter()
        .flatten()
        .filter(|(key, value)| {
            let one = Parameters::from([((*key).clone(), (*value).clone())]);
            parse_options(Some(&one)).is_err()
        })
        .count()
}

fn invalid(key: &str, why: &str) -> PluginError {
    PluginError::Builtin(format!("invalid value for {}: {why}", go_quote(key)))
}

/// The id a Go `int` uid/gid reaches the kernel as: its low 32 bits
/// (`uintptr(uid)` into a `uid_t`), so `-1` is "unchanged".
fn kernel_id(id: i64) -> u32 {
    id as u32
}

impl MkdirPlugin {
    fn create_now(req: &CreateRequest) -> Result<CreateResponse, PluginError> {
        refuse_bad_id(&req.volume_id)?;
        let path = go_os::join(&req.volumes_dir, &req.volume_id);
        let response = CreateResponse {
            path: path.clone(),
            bytes: 0,
            error: String::new(),
        };
        // os.Stat: symlinks followed; only "does not exist" goes on to make it.
        match fs::metadata(&path) {
            Ok(_) => return Ok(response),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(builtin("", PathError::new("stat", &path, e))),
        }
        let opts = parse_options(req.parameters.as_ref())?;
        go_os::mkdir_all(&path, opts.mode).map_err(|e| builtin("error creating directory: ", e))?;
        let mode = fs::Permissions::from_mode(go_os::syscall_mode(opts.mode));
        fs::set_permissions(&path, mode).map_err(|e| {
            builtin(
                "error setting directory permission mode: ",
                PathError::new("chmod", &path, e),
            )
        })?;
        let (uid, gid) = (kernel_id(opts.uid), kernel_id(opts.gid));
        if let Err(e) = std::os::unix::fs::chown(&path, Some(uid), Some(gid)) {
            let _ = fs::remove_dir_all(&path);
            return Err(builtin(
                "error changing owner/group: ",
                PathError::new("chown", &path, e),
            ));
        }
        Ok(response)
    }

    /// Nomad's `os.RemoveAll(<volumes_dir>/<id>)`: whatever is at the path
    /// goes (a symlink itself, not what it points to); nothing there is fine.
    fn delete_now(req: &DeleteRequest) -> Result<(), PluginError> {
        refuse_bad_id(&req.volume_id)?;
        let path = go_os::join(&req.volumes_dir, &req.volume_id);
        // RemoveAll's first steps: os.Remove (unlink, then rmdir), where
        // "does not exist" is success; then the parent is opened, and a
        // parent that cannot be opened is the error, as `open <dir>`.
        let unlinked = fs::remove_file(&path);
        let Err(unlink) = unlinked else { return Ok(()) };
        let rmdir = match fs::remove_dir(&path) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let remove = if rmdir.raw_os_error() == Some(libc::ENOTDIR) {
            unlink
        } else {
            rmdir
        };
        if remove.raw_os_error() == Some(libc::ENOENT) {
            return Ok(());
        }
        let parent = match path.rfind('/') {
            Some(0) => "/".to_string(),
            Some(i) => path[..i].to_string(),
            None => ".".to_string(),
        };
        // O_NONBLOCK: a FIFO in the volumes dir's place is never waited on.
        let opened = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&parent);
        match opened {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => return Err(builtin("", PathError::new("open", &parent, e))),
            Ok(_) => {}
        }
        let removed = match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&path),
            Ok(_) => fs::remove_file(&path),
            Err(e) => Err(e),
        };
        match removed {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(builtin("", PathError::new("unlinkat", &path, e))),
        }
    }
}

fn builtin(context: &str, err: PathError) -> PluginError {
    PluginError::Builtin(format!("{context}{err}"))
}

/// The one deliberate difference from Nomad: the path is built from the id.
fn refuse_bad_id(volume_id: &str) -> Result<(), PluginError> {
    if crate::contract::is_valid_volume_id(volume_id) {
        Ok(())
    } else {
        Err(PluginError::Builtin(format!(
            "invalid volume id {}",
            go_quote(volume_id)
        )))
    }
}

impl HostVolumePlugin for MkdirPlugin {
    fn id(&self) -> &str {
        MKDIR_ID
    }

    fn is_builtin(&self) -> bool {
        true
    }

    fn fingerprint(&self) -> BoxFuture<'_, PluginCall<Fingerprint>> {
        Box::pin(PluginCall::timed(
            Operation::Fingerprint,
            crate::contract::fingerprint_env(),
            async {
                Ok(Fingerprint {
                    version: VersionInfo::from_raw(MKDIR_VERSION),
                })
            },
        ))
    }

    fn create<'a>(&'a self, req: &'a CreateRequest) -> BoxFuture<'a, PluginCall<CreateResponse>> {
        // File system calls block: keep them off the async workers.
        let owned = req.clone();
        Box::pin(PluginCall::timed(
            Operation::Create,
            req.env(),
            async move {
                tokio::task::spawn_blocking(move || Self::create_now(&owned))
                    .await
                    .unwrap_or_else(|e| {
                        Err(PluginError::Builtin(format!("mkdir plugin panicked: {e}")))
                    })
            },
        ))
    }

    fn delete<'a>(&'a self, req: &'a DeleteRequest) -> BoxFuture<'a, PluginCall<()>> {
        let owned = req.clone();
        Box::pin(PluginCall::timed(
            Operation::Delete,
            req.env(),
            async move {
                tokio::task::spawn_blocking(move || Self::delete_now(&owned))
                    .await
                    .unwrap_or_else(|e| {
                        Err(PluginError::Builtin(format!("mkdir plugin panicked: {e}")))
                    })
            },
        ))
    }
}

#[cfg(test)]
#[path = "mkdir_tests.rs"]
mod tests;
