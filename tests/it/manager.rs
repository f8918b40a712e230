//! The manager's rules, each proven through the library API with the built-in
//! plugin or a throwaway sh plugin: the name lock, updates, register, delete and
//! the compensating delete. Restore, discovery and the state file have files of
//! their own (manager_restore.rs, manager_discovery.rs, manager_state.rs).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::util::manager::{ID1, ID2, ID3, logging_script, rt, stored_request};
use crate::util::{Node, Scratch};
use dhv_conform::manager::{
    Cleanup, DeleteOutcome, HostVolumeManager, ManagerError, RegisterSpec, VolumeSpec,
};

mod unsaved;

// ---------------------------------------------------------------- create

#[test]
fn same_name_with_another_id_fails_with_nomads_text() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID1)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap_err();
    assert_eq!(err.to_string(), "volume name already exists on this node");
    assert!(matches!(&err, ManagerError::NameConflict { existing_id, .. } if existing_id == ID1));
    assert!(
        !node.volumes().join(ID2).exists(),
        "no plugin ran for the loser"
    );
    // The name is held whatever the namespace, as in Nomad.
    let err = rt
        .block_on(
            m.create(
                VolumeSpec::new("mkdir", "data")
                    .with_id(ID2)
                    .with_namespace("other"),
            ),
        )
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }));
    // A register is held to the same lock.
    let err = rt
        .block_on(m.register(RegisterSpec::new("data", node.volumes()).with_id(ID2)))
        .unwrap_err();
    assert_eq!(err.to_string(), "volume name already exists on this node");
    let names: Vec<_> = rt
        .block_on(m.list())
        .unwrap()
        .into_iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(names, [ID1]);
}

#[test]
fn the_name_is_free_again_after_delete_and_after_a_failed_first_create() {
    let node = Node::new();
    node.plugins.plugin(
        "fails",
        "#!/bin/sh\necho '{\"error\": \"no space\"}'\nexit 1\n",
    );
    let m = node.manager();
    let rt = rt();
    let err = rt
        .block_on(m.create(VolumeSpec::new("fails", "data").with_id(ID1)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("error creating volume \"{ID1}\" with plugin \"fails\": exit status 1: no space")
    );
    rt.block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap();
    rt.block_on(m.delete(ID2)).unwrap();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID3)))
        .unwrap();
}

#[test]
fn the_same_id_again_is_an_update_that_stores_the_new_request() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    let first = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "data")
                    .with_id(ID1)
                    .with_capacity(0, 100),
            ),
        )
        .unwrap();
    fs::write(Path::new(&first.host_path).join("keep"), "x").unwrap();
    let second = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "data")
                    .with_id(ID1)
                    .with_capacity(0, 200),
            ),
        )
        .unwrap();
    assert_eq!(second.host_path, first.host_path);
    assert_eq!(second.bytes, 7);
    assert!(Path::new(&first.host_path).join("keep").exists());
    assert_eq!(
        node.calls(),
        [
            format!("create {ID1} data 100"),
            format!("create {ID1} data 200")
        ]
    );
    assert_eq!(stored_request(&node, ID1).capacity_max_bytes, 200);
    assert_eq!(rt.block_on(m.list()).unwrap().len(), 1);
}

#[test]
fn an_update_may_rename_a_volume_and_frees_the_old_name() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "old").with_id(ID1)))
        .unwrap();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "taken").with_id(ID2)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "taken").with_id(ID1)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }), "{err}");
    rt.block_on(m.create(VolumeSpec::new("mkdir", "new").with_id(ID1)))
        .unwrap();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "old").with_id(ID3)))
        .unwrap();
    let names: Vec<_> = rt
        .block_on(m.list())
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["new", "old", "taken"]);
}

#[test]
fn a_failed_update_keeps_the_volume_and_its_name() {
    let node = Node::new();
    node.plugins.plugin(
        "flaky",
        r#"#!/bin/sh
PATH=/usr/bin:/bin
case "$1" in
fingerprint) echo '{"version": "1"}' ;;
create)
  [ "$DHV_CAPACITY_MAX_BYTES" = 0 ] || exit 3
  mkdir -p "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID"
  echo "{\"path\": \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"}" ;;
esac
"#,
    );
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("flaky", "data").with_id(ID1)))
        .unwrap();
    let err = rt
        .block_on(
            m.create(
                VolumeSpec::new("flaky", "data")
                    .with_id(ID1)
                    .with_capacity(0, 5),
            ),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("error creating volume \"{ID1}\" with plugin \"flaky\": exit status 3")
    );
    // Nomad releases the name here; we keep it, since the volume still exists.
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }));
    assert_eq!(stored_request(&node, ID1).capacity_max_bytes, 0);
}

#[test]
fn an_update_cannot_switch_plugins_or_turn_a_registration_into_a_creation() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "a").with_id(ID1)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("logger", "a").with_id(ID1)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("volume \"{ID1}\" was created by plugin \"mkdir\", not \"logger\"")
    );
    rt.block_on(m.register(RegisterSpec::new("b", node.volumes()).with_id(ID2)))
        .unwrap();
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "b").with_id(ID2)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NotCreated { .. }), "{err}");
    let err = rt
        .block_on(m.register(RegisterSpec::new("a", node.volumes()).with_id(ID1)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NotRegistered { .. }), "{err}");
    assert!(node.calls().is_empty());
}

#[test]
fn bad_ids_and_a_missing_volumes_dir_are_input_errors() {
    let node = Node::new();
    let rt = rt();
    let m = node.manager();
    for id in [
        "",
        "not-a-uuid",
        "11111111-1111-4111-8111-11111111111G",
        "AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA",
    ] {
        let err = rt
            .block_on(m.create(VolumeSpec::new("mkdir", "x").with_id(id)))
            .unwrap_err();
        assert!(
            matches!(err, ManagerError::InvalidVolumeId { .. }) && err.is_input_error(),
            "{id}"
        );
        assert!(rt.block_on(m.delete(id)).unwrap_err().is_input_error());
    }
    let bare = HostVolumeManager::open(node.state()).unwrap();
    let err = rt
        .block_on(bare.create(VolumeSpec::new("mkdir", "x")))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NoVolumesDir { .. }) && err.is_input_error());
}

#[test]
fn lookup_is_confined_to_the_plugin_dir() {
    let node = Node::new();
    let outside = Scratch::new();
    let target = outside.plugin("outside", &logging_script(&node.log(), ""));
    std::os::unix::fs::symlink(&target, node.plugins.path().join("escape")).unwrap();
    node.plugins.plugin("plain", "#!/bin/sh\nexit 0\n");
    fs::set_permissions(
        node.plugins.path().join("plain"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let m = node.manager();
    let rt = rt();
    let relative = format!(
        "../{}/outside",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let absolute = target.to_string_lossy().into_owned();
    for id in [
        relative.as_str(),
        absolute.as_str(),
        "escape",
        "missing",
        "..",
    ] {
        let err = rt.block_on(m.create(VolumeSpec::new(id, "v"))).unwrap_err();
        assert_eq!(err.to_string(), format!("no such plugin: {id:?}"));
    }
    // `.` is the plugin dir itself, which `os.Root.Stat` finds: a directory.
    let err = rt
        .block_on(m.create(VolumeSpec::new(".", "v")))
        .unwrap_err();
    assert_eq!(err.to_string(), "plugin not executable: \".\"");
    let err = rt
        .block_on(m.create(VolumeSpec::new("plain", "v")))
        .unwrap_err();
    assert_eq!(err.to_string(), "plugin not executable: \"plain\"");
    assert!(node.calls().is_empty(), "nothing outside the dir ran");
    // Without a plugin dir only the built-in exists.
    let bare = HostVolumeManager::open(node.state())
        .unwrap()
        .with_volumes_dir(node.volumes());
    let err = rt
        .block_on(bare.create(VolumeSpec::new("plain", "v")))
        .unwrap_err();
    assert_eq!(err.to_string(), "no such plugin: \"plain\"");
}

#[test]
fn the_plugin_is_looked_up_on_every_call() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    let err = rt
        .block_on(m.create(VolumeSpec::new("late", "v")))
        .unwrap_err();
    assert_eq!(err.to_string(), "no such plugin: \"late\"");
    node.logging_plugin("late");
    rt.block_on(m.create(VolumeSpec::new("late", "v"))).unwrap();
}

// ---------------------------------------------------------------- compensating delete

// ---------------------------------------------------------------- register and delete

#[test]
fn register_needs_an_existing_path_and_delete_leaves_it_alone() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    let missing = node.work.path().join("nope");
    let err = rt
        .block_on(m.register(RegisterSpec::new("reg", &missing).with_id(ID1)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "could not verify host path for \"reg\": stat {}: no such file or directory",
            missing.display()
        )
    );
    let path = node.work.path().join("existing");
    fs::create_dir(&path).unwrap();
    fs::write(path.join("data"), "keep me").unwrap();
    let v = rt
        .block_on(m.register(RegisterSpec::new("reg", &path).with_id(ID1)))
        .unwrap();
    assert!(v.is_registered() && v.plugin_id.is_none() && v.create_request.is_none());
    let outcome = rt.block_on(m.delete(ID1)).unwrap();
    assert!(matches!(outcome, DeleteOutcome::Unregistered(_)));
    assert_eq!(fs::read_to_string(path.join("data")).unwrap(), "keep me");
    assert!(rt.block_on(m.list()).unwrap().is_empty());
}

#[test]
fn delete_sends_the_stored_request_and_path_and_forgets_the_volume() {
    let node = Node::new();
    node.logging_plugin("logger");
    let m = node.manager();
    let rt = rt();
    let v = rt
        .block_on(
            m.create(
                VolumeSpec::new("logger", "data")
                    .with_id(ID1)
                    .with_namespace("prod"),
            ),
        )
        .unwrap();
    let outcome = rt.block_on(m.delete(ID1)).unwrap();
    assert!(matches!(outcome, DeleteOutcome::Deleted(_)));
    assert_eq!(
        node.calls()[1],
        format!("delete {ID1}|{}|data|prod", v.host_path)
    );
    assert!(!Path::new(&v.host_path).exists());
    assert!(rt.block_on(m.list()).unwrap().is_empty());
    // Unknown ids are reported, not sent to any plugin.
    assert!(
        matches!(rt.block_on(m.delete(ID1)).unwrap(), DeleteOutcome::NotFound { id } if id == ID1)
    );
    assert_eq!(node.calls().len(), 2);
}

#[test]
fn a_failed_plugin_delete_keeps_the_volume_and_its_name() {
    let node = Node::new();
    node.plugins.plugin(
        "stuck",
        &logging_script(&node.log(), "echo '{\"error\": \"device busy\"}'; exit 1"),
    );
    let m = node.manager();
    let rt = rt();
    let v = rt
        .block_on(m.create(VolumeSpec::new("stuck", "data").with_id(ID1)))
        .unwrap();
    let err = rt.block_on(m.delete(ID1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "error deleting volume \"{ID1}\" with plugin \"stuck\": exit status 1: device busy"
        )
    );
    assert_eq!(rt.block_on(m.list()).unwrap().len(), 1);
    assert!(Path::new(&v.host_path).is_dir());
    let err = rt
        .block_on(m.create(VolumeSpec::new("mkdir", "data").with_id(ID2)))
        .unwrap_err();
    assert!(matches!(err, ManagerError::NameConflict { .. }));
}

/// A plugin whose output Nomad cannot read (it fails its fingerprint the same way):
/// Nomad's text is Go's bare JSON error, so the manager names the operation, the
/// volume and the plugin before it.
#[test]
fn an_unreadable_create_output_names_the_plugin_and_the_operation() {
    let node = Node::new();
    node.plugins.plugin("junk", "#!/bin/sh\necho garbage\n");
    let m = node.manager();
    let rt = rt();
    let err = rt
        .block_on(m.create(VolumeSpec::new("junk", "v").with_id(ID1)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "create of volume \"{ID1}\" with plugin \"junk\": invalid character 'g' looking for beginning of value; \
             the plugin deleted it again"
        )
    );
    assert!(
        matches!(
            err,
            ManagerError::Response {
                operation: "create",
                ..
            }
        ),
        "{err:?}"
    );
}
