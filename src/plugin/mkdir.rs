//! The built-in `mkdir` plugin (version `0.0.1`), which every Nomad client has.
//!
//! Its volume is a directory `<volumes_dir>/<volume_id>`, of unlimited size
//! (`bytes` 0). Parameters: `mode` (octal, default `0700`), `uid` and `gid`
//! (decimal, default unchanged); any other key is an error.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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

/// The parsed `mkdir` parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Options {
    mode: u32,
    uid: Option<u32>,
    gid: Option<u32>,
}

fn parse_options(params: Option<&Parameters>) -> Result<Options, PluginError> {
    let mut opts = Options {
        mode: 0o700,
        uid: None,
        gid: None,
    };
    let invalid = |key: &str, why: String| {
        PluginError::Builtin(format!("invalid value for {}: {why}", go_quote(key)))
    };
    for (key, value) in params.into_iter().flatten() {
        match key.as_str() {
            "mode" => {
                let mode = u32::from_str_radix(value, 8).map_err(|_| {
                    invalid(
                        key,
                        format!("{} is not an octal file mode", go_quote(value)),
                    )
                })?;
                if mode > 0o7777 {
                    return Err(invalid(
                        key,
                        format!("{} is not a file mode", go_quote(value)),
                    ));
                }
                opts.mode = mode;
            }
            "uid" | "gid" => {
                let id = value.parse::<u32>().map_err(|_| {
                    invalid(key, format!("{} is not a decimal id", go_quote(value)))
                })?;
                if key == "uid" {
                    opts.uid = Some(id);
                } else {
                    opts.gid = Some(id);
                }
            }
            other => {
                return Err(PluginError::Builtin(format!(
                    "unknown mkdir parameter: {}",
                    go_quote(other)
                )));
            }
        }
    }
    Ok(opts)
}

fn volume_path(volumes_dir: &str, volume_id: &str) -> PathBuf {
    Path::new(volumes_dir).join(volume_id)
}

impl MkdirPlugin {
    fn create_now(req: &CreateRequest) -> Result<CreateResponse, PluginError> {
        let opts = parse_options(req.parameters.as_ref())?;
        if !crate::contract::is_valid_volume_id(&req.volume_id) {
            return Err(PluginError::Builtin(format!(
                "invalid volume id {}",
                go_quote(&req.volume_id)
            )));
        }
        let path = volume_path(&req.volumes_dir, &req.volume_id);
        let response = CreateResponse {
            path: path.to_string_lossy().into_owned(),
            bytes: 0,
            error: String::new(),
        };
        match fs::symlink_metadata(&path) {
            Ok(_) => return Ok(response),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(PluginError::Builtin(format!(
                    "stat {}: {e}",
                    path.display()
                )));
            }
            Err(_) => {}
        }
        let fail = |what: &str, e: std::io::Error| {
            PluginError::Builtin(format!("{what} {}: {e}", path.display()))
        };
        fs::create_dir_all(&path).map_err(|e| fail("mkdir", e))?;
        // Explicit chmod: the umask must not decide a volume's mode.
        fs::set_permissions(&path, fs::Permissions::from_mode(opts.mode))
            .map_err(|e| fail("chmod", e))?;
        if opts.uid.is_some() || opts.gid.is_some() {
            if let Err(e) = std::os::unix::fs::chown(&path, opts.uid, opts.gid) {
                let _ = fs::remove_dir_all(&path);
                return Err(fail("chown", e));
            }
        }
        Ok(response)
    }

    fn delete_now(req: &DeleteRequest) -> Result<(), PluginError> {
        if !crate::contract::is_valid_volume_id(&req.volume_id) {
            return Err(PluginError::Builtin(format!(
                "invalid volume id {}",
                go_quote(&req.volume_id)
            )));
        }
        let path = volume_path(&req.volumes_dir, &req.volume_id);
        match fs::remove_dir_all(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PluginError::Builtin(format!(
                "remove {}: {e}",
                path.display()
            ))),
        }
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
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Parameters {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parameters_follow_nomads_rules() {
        assert_eq!(parse_options(None).unwrap().mode, 0o700);
        let o = parse_options(Some(&params(&[
            ("mode", "0755"),
            ("uid", "1000"),
            ("gid", "20"),
        ])))
        .unwrap();
        assert_eq!((o.mode, o.uid, o.gid), (0o755, Some(1000), Some(20)));
        let cases = [
            (
                params(&[("colour", "red")]),
                r#"unknown mkdir parameter: "colour""#,
            ),
            (
                params(&[("mode", "0999")]),
                r#"invalid value for "mode": "0999" is not an octal file mode"#,
            ),
            (
                params(&[("uid", "-1")]),
                r#"invalid value for "uid": "-1" is not a decimal id"#,
            ),
            (
                params(&[("gid", "x")]),
                r#"invalid value for "gid": "x" is not a decimal id"#,
            ),
        ];
        for (p, want) in cases {
            assert_eq!(parse_options(Some(&p)).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn create_is_idempotent_applies_mode_and_delete_removes() {
        let dir = tempfile::tempdir().unwrap();
        let req = CreateRequest {
            volumes_dir: dir.path().to_string_lossy().into_owned(),
            plugin_dir: String::new(),
            node_pool: "default".into(),
            namespace: "default".into(),
            volume_name: "v".into(),
            volume_id: "0b4d2f43-79b4-4d3c-9c42-5c1e8d3f5a10".into(),
            capacity_min_bytes: 0,
            capacity_max_bytes: 0,
            node_id: String::new(),
            parameters: Some(params(&[("mode", "0750")])),
        };
        let resp = MkdirPlugin::create_now(&req).unwrap();
        let path = dir.path().join(&req.volume_id);
        assert_eq!(resp.path, path.to_string_lossy());
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o750
        );
        fs::write(path.join("keep"), b"x").unwrap();
        assert_eq!(MkdirPlugin::create_now(&req).unwrap(), resp);
        assert!(path.join("keep").exists());
        let del = DeleteRequest::for_created(&req, &resp.path);
        MkdirPlugin::delete_now(&del).unwrap();
        assert!(!path.exists());
        MkdirPlugin::delete_now(&del).unwrap();
    }
}
