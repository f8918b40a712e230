//! The manager tests' node: volume ids, a manager over a [`Node`]'s dirs, and
//! a plugin that logs what it is asked.

use std::fs;
use std::path::{Path, PathBuf};

use dhv_conform::contract::CreateRequest;
use dhv_conform::manager::HostVolumeManager;

use super::Node;

pub const ID1: &str = "11111111-1111-4111-8111-111111111111";
pub const ID2: &str = "22222222-2222-4222-8222-222222222222";
pub const ID3: &str = "33333333-3333-4333-8333-333333333333";
pub const ID4: &str = "44444444-4444-4444-8444-444444444444";
pub const ID5: &str = "55555555-5555-4555-8555-555555555555";

/// A runtime for the manager's async API.
pub fn rt() -> tokio::runtime::Runtime {
    super::runtime()
}

impl Node {
    /// Where [`logging_plugin`](Node::logging_plugin)s log their calls.
    pub fn log(&self) -> PathBuf {
        self.work.path().join("calls.log")
    }

    /// A manager of this node's state, plugin and volumes dirs.
    pub fn manager(&self) -> HostVolumeManager {
        HostVolumeManager::open(self.state())
            .unwrap()
            .with_plugin_dir(self.plugins.path())
            .with_volumes_dir(self.volumes())
    }

    /// A well-behaved plugin that logs every create and delete (with the
    /// delete's DHV_CREATED_PATH, name and namespace), and whose delete is the
    /// naive `rm -rf "$DHV_CREATED_PATH"`.
    pub fn logging_plugin(&self, id: &str) -> PathBuf {
        self.plugins.plugin(id, &logging_script(&self.log(), ""))
    }

    /// The calls logged so far, one a line.
    pub fn calls(&self) -> Vec<String> {
        fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

/// A plugin script that logs every create and delete to `log`;
/// `delete_body` replaces the delete branch when not empty.
pub fn logging_script(log: &Path, delete_body: &str) -> String {
    let delete = if delete_body.is_empty() {
        r#"rm -rf "$DHV_CREATED_PATH""#
    } else {
        delete_body
    };
    format!(
        r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
LOG='{log}'
case "$1" in
fingerprint) echo '{{"version": "1.0.0"}}' ;;
create)
  printf 'create %s %s %s\n' "$DHV_VOLUME_ID" "$DHV_VOLUME_NAME" "$DHV_CAPACITY_MAX_BYTES" >> "$LOG"
  mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" || exit 1
  printf '{{"path": "%s", "bytes": 7}}\n' "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" ;;
delete)
  printf 'delete %s|%s|%s|%s\n' "$DHV_VOLUME_ID" "$DHV_CREATED_PATH" "$DHV_VOLUME_NAME" "$DHV_NAMESPACE" >> "$LOG"
  {delete} ;;
esac
"#,
        log = log.display()
    )
}

/// The create request the manager stored for volume `id`.
pub fn stored_request(node: &Node, id: &str) -> CreateRequest {
    let m = node.manager();
    rt().block_on(m.get(id))
        .unwrap()
        .unwrap()
        .create_request
        .unwrap()
}
