//! What a plugin says its volumes are: the claims of its `dhv-conform.toml`
//! (capacity enforcement, block devices, ephemeral storage, which parameter
//! sets what), and the skips its authors chose, with their reasons.
//!
//! The `volume.*` checks verify the claims on real volumes; a check whose
//! claim is not made skips with "not claimed". The built-in `mkdir` plugin
//! makes Nomad 2.0.5's own claims (its `mode`, `uid` and `gid` parameters)
//! without a config, so `check mkdir` verifies them.

use std::collections::BTreeMap;

/// How a plugin's volumes are handed to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attachment {
    /// A directory (or a mounted filesystem) at `path`: the default.
    #[default]
    FileSystem,
    /// A block device at `path` (`capability { attachment_mode = "block-device" }`).
    BlockDevice,
}

/// What a parameter of the plugin does to the volume it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// The permission bits of the volume's root (an octal string: `0750`).
    Mode,
    /// The owner of the volume's root (a decimal uid).
    Uid,
    /// The group of the volume's root (a decimal gid).
    Gid,
    /// The filesystem type mounted at the volume's path (`ext4`, `xfs`).
    FsType,
}

impl Effect {
    /// The word a config uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Mode => "mode",
            Effect::Uid => "uid",
            Effect::Gid => "gid",
            Effect::FsType => "fs_type",
        }
    }

    /// Every effect, for the config's error messages.
    pub const ALL: [Effect; 4] = [Effect::Mode, Effect::Uid, Effect::Gid, Effect::FsType];
}

/// One claimed parameter: create with `key = value` for each value, and the
/// effect holds on the volume.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ParameterClaim {
    /// The key in the volume's `parameters` block.
    pub key: String,
    /// What it sets.
    pub effect: Effect,
    /// The values to try (each in a volume of its own).
    pub values: Vec<String>,
}

/// The claims a run verifies, and the checks its config skips.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Claims {
    /// `capacity = "enforced"`: writing past the reported size fails.
    pub capacity_enforced: bool,
    /// How volumes are attached.
    pub attachment: Attachment,
    /// `ephemeral = true`: the volume does not outlive a reboot by design.
    pub ephemeral: bool,
    /// `filesystem = "ext4"`: the filesystem type mounted at every volume's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<String>,
    /// What the plugin's parameters set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParameterClaim>,
    /// Checks the config skips, by id, with the config's reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub skips: BTreeMap<String, String>,
    /// Whether these claims are the built-in plugin's own (Nomad's), made
    /// without a config.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub implicit: bool,
}

impl Claims {
    /// Nomad 2.0.5's own claims for its built-in `mkdir` plugin: `mode` sets
    /// the permission bits, `uid` and `gid` the owner (values any user can
    /// give: its own ids; root also tries another owner).
    pub fn builtin_mkdir() -> Claims {
        let uid = nix::unistd::Uid::effective();
        let gid = nix::unistd::Gid::effective();
        let (uids, gids) = if uid.is_root() {
            (vec!["65534".to_owned()], vec!["65534".to_owned()])
        } else {
            (vec![uid.to_string()], vec![gid.to_string()])
        };
        Claims {
            parameters: vec![
                ParameterClaim {
                    key: "mode".into(),
                    effect: Effect::Mode,
                    values: vec!["0750".into(), "0755".into()],
                },
                ParameterClaim {
                    key: "uid".into(),
                    effect: Effect::Uid,
                    values: uids,
                },
                ParameterClaim {
                    key: "gid".into(),
                    effect: Effect::Gid,
                    values: gids,
                },
            ],
            implicit: true,
            ..Claims::default()
        }
    }

    /// Whether any claim about the storage is made (skips aside).
    pub fn any(&self) -> bool {
        self.capacity_enforced
            || self.attachment != Attachment::FileSystem
            || self.ephemeral
            || self.filesystem.is_some()
            || !self.parameters.is_empty()
    }

    /// The config's reason for skipping `id`, if it does.
    pub fn skip_reason(&self, id: &str) -> Option<&str> {
        self.skips.get(id).map(String::as_str)
    }
}
