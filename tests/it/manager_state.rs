//! The state file through the library API: corruption is an error that names
//! it and leaves it alone, interrupted writes are ignored, the content is
//! readable JSON, and concurrent creates lose nothing.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use crate::util::Node;
use crate::util::manager::{ID1, ID2, rt};
use dhv_conform::manager::{HostVolumeManager, ManagerError, VolumeSpec};

// ---------------------------------------------------------------- state

#[test]
fn a_corrupt_state_file_is_an_error_naming_it_and_is_left_untouched() {
    let node = Node::new();
    fs::create_dir(node.state()).unwrap();
    let file = node.state().join("state.json");
    fs::write(
        &file,
        "{\"schema\": \"dhv-conform/state/v1\", \"volumes\": {",
    )
    .unwrap();
    let err = HostVolumeManager::open(node.state()).unwrap_err();
    assert!(err.is_input_error());
    assert!(
        err.to_string()
            .starts_with(&format!("state file {} is corrupt: ", file.display())),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "{\"schema\": \"dhv-conform/state/v1\", \"volumes\": {"
    );
}

#[test]
fn a_corruption_after_open_fails_every_call_without_reset() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "a").with_id(ID1)))
        .unwrap();
    let file = node.state().join("state.json");
    fs::write(&file, "garbage").unwrap();
    for err in [
        rt.block_on(m.list()).unwrap_err(),
        rt.block_on(m.create(VolumeSpec::new("mkdir", "b").with_id(ID2)))
            .unwrap_err(),
        rt.block_on(m.delete(ID1)).unwrap_err(),
        rt.block_on(m.restore()).unwrap_err(),
    ] {
        assert!(
            err.to_string().contains(&file.display().to_string()),
            "{err}"
        );
    }
    assert_eq!(fs::read_to_string(&file).unwrap(), "garbage");
    assert!(!node.volumes().join(ID2).exists());
}

#[test]
fn a_temp_file_left_by_an_interrupted_write_is_ignored_then_cleaned() {
    let node = Node::new();
    let m = node.manager();
    let rt = rt();
    rt.block_on(m.create(VolumeSpec::new("mkdir", "a").with_id(ID1)))
        .unwrap();
    // What a crash between "write temp" and "rename" leaves behind.
    let leftover = node.state().join(".state.json.crash1.tmp");
    fs::write(&leftover, "{\"schema\": \"dhv-conform/state/v1\", \"volu").unwrap();
    let listed = rt.block_on(node.manager().list()).unwrap();
    assert_eq!(
        listed.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        [ID1]
    );
    rt.block_on(m.create(VolumeSpec::new("mkdir", "b").with_id(ID2)))
        .unwrap();
    assert!(!leftover.exists());
    let names: Vec<_> = fs::read_dir(node.state())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["state.json", "state.lock"]);
}

#[test]
fn the_state_file_is_readable_json_with_the_full_request() {
    let node = Node::new();
    let m = node.manager().with_node_id("node-7").with_node_pool("gpu");
    let rt = rt();
    let params: BTreeMap<String, String> = [("mode".to_string(), "0750".to_string())].into();
    rt.block_on(
        m.create(
            VolumeSpec::new("mkdir", "a")
                .with_id(ID1)
                .with_parameters(params),
        ),
    )
    .unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(node.state().join("state.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "dhv-conform/state/v1");
    let v = &doc["volumes"][ID1];
    assert_eq!(v["name"], "a");
    assert_eq!(v["plugin_id"], "mkdir");
    assert_eq!(
        v["host_path"],
        node.volumes().join(ID1).to_string_lossy().as_ref()
    );
    assert_eq!(v["create_request"]["node_id"], "node-7");
    assert_eq!(v["create_request"]["node_pool"], "gpu");
    assert_eq!(v["create_request"]["parameters"]["mode"], "0750");
    let mode = fs::metadata(node.volumes().join(ID1))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
}

#[test]
fn the_node_id_is_generated_once_per_state_dir() {
    let node = Node::new();
    let first = HostVolumeManager::open(node.state())
        .unwrap()
        .node_id()
        .to_string();
    let again = HostVolumeManager::open(node.state())
        .unwrap()
        .node_id()
        .to_string();
    assert_eq!(first, again);
    assert!(dhv_conform::contract::is_valid_volume_id(&first), "{first}");
    let other = Node::new();
    assert_ne!(
        HostVolumeManager::open(other.state()).unwrap().node_id(),
        first
    );
}

#[test]
fn concurrent_creates_in_one_process_lose_nothing_and_share_no_name() {
    let node = Node::new();
    let m = Arc::new(node.manager());
    let rt = rt();
    let names = rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..16 {
            let m = Arc::clone(&m);
            // Half of them fight over one name.
            let name = if i % 2 == 0 {
                "shared".to_string()
            } else {
                format!("v{i}")
            };
            tasks.spawn(async move { m.create(VolumeSpec::new("mkdir", name)).await });
        }
        let mut ok = 0;
        while let Some(r) = tasks.join_next().await {
            match r.unwrap() {
                Ok(_) => ok += 1,
                Err(e) => assert!(matches!(e, ManagerError::NameConflict { .. }), "{e}"),
            }
        }
        assert_eq!(ok, 9);
        m.list().await.unwrap()
    });
    assert_eq!(names.len(), 9);
    assert_eq!(names.iter().filter(|v| v.name == "shared").count(), 1);
    assert_eq!(fs::read_dir(node.volumes()).unwrap().count(), 9);
}
